//! `MergeIter` against a `BTreeMap` model: overlapping sources, duplicate keys across sources,
//! seeks to stored and search keys, and an HFile source; forward, backward (`seek_for_prev`,
//! `seek_to_last`, `prev`) and walks that turn around. Memstore and HFile sources are checked
//! backward against the same model.

use std::collections::BTreeMap;

use cellar::format::{CellKey, CellType, HFileReader, HFileWriter, KeyRef, WriterOptions};
use cellar::memstore::MemStore;
use cellar::read::{HFileCellIter, MergeIter, VecCellIter};
use cellar::types::CellIter;
use cellar::Error;
use proptest::prelude::*;

/// A key from a small space, so sources overlap and collide often.
fn key_strategy() -> impl Strategy<Value = CellKey> {
    (
        0u8..4,
        0u8..3,
        0u64..4,
        prop::sample::select(vec![
            CellType::Put,
            CellType::Delete,
            CellType::DeleteColumn,
        ]),
        0u64..4,
    )
        .prop_map(|(r, q, ts, ty, seq)| {
            CellKey::new(vec![b'r', r], "cf", vec![b'q', q], ts, ty, seq)
        })
}

/// A seek target: a stored-looking key or a row/column search key.
fn target_strategy() -> impl Strategy<Value = CellKey> {
    prop_oneof![
        key_strategy(),
        (0u8..5).prop_map(|r| CellKey::first_on_row(&[b'r', r])),
        (0u8..5, 0u8..4).prop_map(|(r, q)| CellKey::first_on_column(&[b'r', r], b"cf", &[b'q', q])),
    ]
}

/// Sources newest first: each a set of keys (a source never holds a key twice).
fn sources_strategy() -> impl Strategy<Value = Vec<Vec<CellKey>>> {
    prop::collection::vec(prop::collection::btree_set(key_strategy(), 0..20), 0..5)
        .prop_map(|v| v.into_iter().map(|s| s.into_iter().collect()).collect())
}

fn value(source: usize, k: &CellKey) -> Vec<u8> {
    format!("s{source}:{k:?}").into_bytes()
}

/// What the merge must yield: every key once, with the value of the first source holding it.
fn model(sources: &[Vec<CellKey>]) -> BTreeMap<CellKey, Vec<u8>> {
    let mut m = BTreeMap::new();
    for (i, keys) in sources.iter().enumerate() {
        for k in keys {
            m.entry(k.clone()).or_insert_with(|| value(i, k));
        }
    }
    m
}

fn merge(sources: &[Vec<CellKey>]) -> MergeIter<'static> {
    let iters: Vec<Box<dyn CellIter>> = sources
        .iter()
        .enumerate()
        .map(|(i, keys)| {
            let entries = keys.iter().map(|k| (k.encode(), value(i, k))).collect();
            Box::new(VecCellIter::new(entries)) as Box<dyn CellIter>
        })
        .collect();
    MergeIter::new(iters)
}

/// `(encoded key, value)` pairs in merge order.
type Entries = Vec<(Vec<u8>, Vec<u8>)>;

fn take(m: &mut MergeIter<'_>, n: usize) -> Result<Entries, Error> {
    let mut out = Vec::new();
    while m.valid() && out.len() < n {
        out.push((m.key().to_vec(), m.value().to_vec()));
        m.next()?;
    }
    Ok(out)
}

fn expect_from(model: &BTreeMap<CellKey, Vec<u8>>, from: Option<&CellKey>, n: usize) -> Entries {
    let range: Box<dyn Iterator<Item = (&CellKey, &Vec<u8>)>> = match from {
        Some(t) => Box::new(model.range(t.clone()..)),
        None => Box::new(model.iter()),
    };
    range
        .take(n)
        .map(|(k, v)| (k.encode(), v.clone()))
        .collect()
}

/// Up to `n` entries walking backward.
fn take_back(m: &mut dyn CellIter, n: usize) -> Result<Entries, Error> {
    let mut out = Vec::new();
    while m.valid() && out.len() < n {
        out.push((m.key().to_vec(), m.value().to_vec()));
        m.prev()?;
    }
    Ok(out)
}

fn expect_back_from(
    model: &BTreeMap<CellKey, Vec<u8>>,
    from: Option<&CellKey>,
    n: usize,
) -> Entries {
    let range: Box<dyn Iterator<Item = (&CellKey, &Vec<u8>)>> = match from {
        Some(t) => Box::new(model.range(..=t.clone()).rev()),
        None => Box::new(model.iter().rev()),
    };
    range
        .take(n)
        .map(|(k, v)| (k.encode(), v.clone()))
        .collect()
}

fn fail(e: Error) -> TestCaseError {
    TestCaseError::fail(e.to_string())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn full_backward_scan_matches_model(sources in sources_strategy()) {
        let want = expect_back_from(&model(&sources), None, usize::MAX);
        let mut m = merge(&sources);
        m.seek_to_last().map_err(fail)?;
        let got = take_back(&mut m, usize::MAX).map_err(fail)?;
        prop_assert_eq!(got, want);
    }

    #[test]
    fn backward_seeks_match_model(
        sources in sources_strategy(),
        probes in prop::collection::vec((target_strategy(), 0usize..8), 1..8),
    ) {
        let model = model(&sources);
        let mut m = merge(&sources);
        for (target, steps) in probes {
            m.seek_for_prev(&target.encode()).map_err(fail)?;
            let got = take_back(&mut m, steps).map_err(fail)?;
            prop_assert_eq!(got, expect_back_from(&model, Some(&target), steps));
        }
    }

    /// Random next/prev walks from a seek, turning around at will: each step lands on the
    /// model's neighbour of the previous key.
    #[test]
    fn turning_walks_match_model(
        sources in sources_strategy(),
        target in target_strategy(),
        backward_seek in any::<bool>(),
        steps in prop::collection::vec(any::<bool>(), 0..30),
    ) {
        let model = model(&sources);
        let keys: Vec<&CellKey> = model.keys().collect();
        let mut m = merge(&sources);
        let mut pos = if backward_seek {
            m.seek_for_prev(&target.encode()).map_err(fail)?;
            keys.iter().rposition(|k| **k <= target)
        } else {
            m.seek(&target.encode()).map_err(fail)?;
            keys.iter().position(|k| **k >= target)
        };
        for forward in steps {
            let Some(p) = pos else { break };
            prop_assert!(m.valid());
            prop_assert_eq!(m.key().to_vec(), keys[p].encode());
            prop_assert_eq!(m.value(), model[keys[p]].as_slice());
            if forward {
                m.next().map_err(fail)?;
                pos = (p + 1 < keys.len()).then_some(p + 1);
            } else {
                m.prev().map_err(fail)?;
                pos = p.checked_sub(1);
            }
        }
        if pos.is_none() {
            prop_assert!(!m.valid());
        }
    }

    /// A memstore walked backward (its per-row stack) and with seek_for_prev agrees with the
    /// sorted keys, across random mixed walks.
    #[test]
    fn memstore_backward_matches_model(
        keys in prop::collection::btree_set(key_strategy(), 0..60),
        targets in prop::collection::vec((target_strategy(), prop::collection::vec(any::<bool>(), 0..20)), 1..6),
    ) {
        let mem = MemStore::new(1);
        for k in &keys {
            mem.insert(&k.as_ref(), &value(0, k), b"").unwrap();
        }
        let model: BTreeMap<CellKey, Vec<u8>> =
            keys.iter().map(|k| (k.clone(), value(0, k))).collect();
        let sorted: Vec<&CellKey> = model.keys().collect();
        let mut it = mem.iter();
        it.seek_to_last().map_err(fail)?;
        prop_assert_eq!(take_back(&mut it, usize::MAX).map_err(fail)?, expect_back_from(&model, None, usize::MAX));
        for (target, walk) in targets {
            it.seek_for_prev(&target.encode()).map_err(fail)?;
            let mut pos = sorted.iter().rposition(|k| **k <= target);
            for forward in walk {
                let Some(p) = pos else { break };
                prop_assert_eq!(it.key().to_vec(), sorted[p].encode());
                if forward {
                    it.next().map_err(fail)?;
                    pos = (p + 1 < sorted.len()).then_some(p + 1);
                } else {
                    it.prev().map_err(fail)?;
                    pos = p.checked_sub(1);
                }
            }
            prop_assert_eq!(it.valid(), pos.is_some());
        }
    }

    #[test]
    fn full_scan_matches_model(sources in sources_strategy()) {
        let want = expect_from(&model(&sources), None, usize::MAX);
        let mut m = merge(&sources);
        m.seek_to_first().map_err(|e| TestCaseError::fail(e.to_string()))?;
        let got = take(&mut m, usize::MAX).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(got, want);
    }

    /// `run_forward` (a streamed scan's loop) hands over the cells `current` and `next` walk,
    /// from a seek or after a backward walk: runs cut short by the callback pick up on the
    /// refused cell, runs and single `next`s mix, and the merge's runs of one source stop at
    /// the others' keys (the heap is ordered again there, copies passed over once).
    #[test]
    fn runs_match_model(
        sources in sources_strategy(),
        probes in prop::collection::vec(
            (target_strategy(), any::<bool>(), prop::collection::vec(0usize..6, 1..8)),
            1..6,
        ),
    ) {
        let model = model(&sources);
        let mut m = merge(&sources);
        for (target, backward_first, takes) in probes {
            let mut want = expect_from(&model, Some(&target), usize::MAX);
            m.seek(&target.encode()).map_err(fail)?;
            let before = model.range(..target.clone()).next_back();
            if let (true, true, Some((k, v))) = (backward_first, m.valid(), before) {
                // Walk back one cell and forward again: the run starts on a turned merge.
                m.prev().map_err(fail)?;
                want.insert(0, (k.encode(), v.clone()));
            }
            let mut got = Vec::new();
            for take in takes {
                // A run of `take` cells, then (when the last take is odd) one `next`.
                let mut n = 0;
                m.run_forward(&mut |e| {
                    if n == take {
                        return false;
                    }
                    got.push((e.key.to_vec(), e.value.to_vec()));
                    n += 1;
                    true
                }).map_err(fail)?;
                if take % 2 == 1 && m.valid() {
                    got.push((m.key().to_vec(), m.value().to_vec()));
                    m.next().map_err(fail)?;
                }
            }
            m.run_forward(&mut |e| {
                got.push((e.key.to_vec(), e.value.to_vec()));
                true
            }).map_err(fail)?;
            prop_assert!(!m.valid());
            prop_assert_eq!(got, want);
        }
    }

    #[test]
    fn seeks_match_model(
        sources in sources_strategy(),
        probes in prop::collection::vec((target_strategy(), 0usize..8), 1..8),
    ) {
        let model = model(&sources);
        let mut m = merge(&sources);
        for (target, steps) in probes {
            m.seek(&target.encode()).map_err(|e| TestCaseError::fail(e.to_string()))?;
            let got = take(&mut m, steps).map_err(|e| TestCaseError::fail(e.to_string()))?;
            prop_assert_eq!(got, expect_from(&model, Some(&target), steps));
        }
    }
}

#[test]
fn hfile_source_merges_with_a_newer_memory_source() -> Result<(), Error> {
    let file_keys: Vec<CellKey> = (0..200u64)
        .map(|i| CellKey::new(format!("row{i:04}"), "cf", "q", 10, CellType::Put, i + 1))
        .collect();
    let mut opts = WriterOptions::new("cf");
    opts.block_size = 256; // several blocks and index levels' worth of seeking
    let mut w = HFileWriter::new(Vec::new(), "t.hfile", opts)?;
    for k in &file_keys {
        w.append(&k.as_ref(), b"file")?;
    }
    let (bytes, _) = w.finish()?;
    let reader = HFileReader::open(bytes, "t.hfile")?;

    // The memory source overwrites row0100 (same key: must come out once, from memory) and
    // adds a newer version of row0150.
    let dup = file_keys[100].clone();
    let newer = CellKey::new("row0150", "cf", "q", 11, CellType::Put, 500);
    let mem = VecCellIter::new(vec![
        (dup.encode(), b"mem".to_vec()),
        (newer.encode(), b"mem".to_vec()),
    ]);
    let sources: Vec<Box<dyn CellIter + '_>> =
        vec![Box::new(mem), Box::new(HFileCellIter::new(reader.iter()))];
    let mut m = MergeIter::new(sources);
    m.seek_to_first()?;
    let all = take(&mut m, usize::MAX)?;
    assert_eq!(all.len(), 201);
    let at = |k: &CellKey| {
        all.iter()
            .find(|(e, _)| *e == k.encode())
            .map(|(_, v)| v.clone())
    };
    assert_eq!(at(&dup), Some(b"mem".to_vec()));
    assert_eq!(at(&newer), Some(b"mem".to_vec()));
    assert_eq!(at(&file_keys[0]), Some(b"file".to_vec()));

    m.seek(&CellKey::first_on_row(b"row0150").encode())?;
    assert_eq!(m.key(), newer.encode().as_slice());
    assert_eq!(m.current_source(), Some(0));
    m.next()?;
    assert_eq!(m.key(), file_keys[150].encode().as_slice());
    assert_eq!(m.current_source(), Some(1));

    let bad = m.seek(b"not a key");
    assert!(matches!(bad, Err(Error::InvalidArgument(_))), "{bad:?}");
    Ok(())
}

#[test]
fn hfile_and_memstore_sources_merge_backward() -> Result<(), Error> {
    // Rows of 1 to 4 cells, split between a file (even cells) and a memstore (odd cells and
    // a copy of every tenth key, which must come out once).
    let mut all = BTreeMap::new();
    for r in 0..150u64 {
        for q in 0..(r % 4 + 1) {
            let k = CellKey::new(
                format!("row{r:04}"),
                "cf",
                format!("q{q}"),
                5,
                CellType::Put,
                r + 1,
            );
            all.insert(k, q);
        }
    }
    let mut opts = WriterOptions::new("cf");
    opts.block_size = 200;
    opts.restart_interval = 3;
    let mut w = HFileWriter::new(Vec::new(), "t.hfile", opts)?;
    let mem = MemStore::new(1);
    let mut model = BTreeMap::new();
    for (i, (k, _)) in all.iter().enumerate() {
        if i % 2 == 0 {
            w.append(&k.as_ref(), b"file")?;
            model.insert(k.clone(), b"file".to_vec());
        }
        if i % 2 == 1 || i % 10 == 0 {
            mem.insert(&k.as_ref(), b"mem", b"").unwrap();
            model.insert(k.clone(), b"mem".to_vec());
        }
    }
    let (bytes, _) = w.finish()?;
    let reader = HFileReader::open(bytes, "t.hfile")?;
    let sources: Vec<Box<dyn CellIter + '_>> = vec![
        Box::new(mem.iter()),
        Box::new(HFileCellIter::new(reader.iter())),
    ];
    let mut m = MergeIter::new(sources);
    m.seek_to_last()?;
    assert_eq!(
        take_back(&mut m, usize::MAX)?,
        expect_back_from(&model, None, usize::MAX)
    );
    for r in [0u64, 1, 77, 149, 150] {
        // The last cell of a row: seek_for_prev to the first key of the next row.
        let t = CellKey::first_on_row(format!("row{:04}", r + 1).as_bytes());
        m.seek_for_prev(&t.encode())?;
        assert_eq!(take_back(&mut m, 9)?, expect_back_from(&model, Some(&t), 9));
    }
    // The file source alone, against its own cells.
    let mut f = HFileCellIter::new(reader.iter());
    f.seek_to_last()?;
    let back = take_back(&mut f, usize::MAX)?;
    assert_eq!(back.len(), all.len().div_ceil(2));
    assert!(back
        .windows(2)
        .all(|w| { KeyRef::parse(&w[0].0).unwrap() > KeyRef::parse(&w[1].0).unwrap() }));
    Ok(())
}
