//! Whole-file model tests: files written from random cells are read back against a `BTreeMap`
//! model (every key sought, between-key seeks, forward and reverse), across block and index
//! sizes that force multi-level indexes, and are verified clean.

use std::collections::BTreeMap;

use cellar_format::bloom::BloomConfig;
use cellar_format::{
    verify, BloomType, CellKey, CellType, CompressionType, HFileReader, HFileWriter, WriterOptions,
};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

type Model = BTreeMap<CellKey, Vec<u8>>;

fn random_cells(rng: &mut StdRng, n: usize, max_value: usize) -> Model {
    let mut m = Model::new();
    let types = CellType::ALL;
    while m.len() < n {
        let row = format!("row{:06}", rng.random_range(0..(n as u32 / 3 + 1)));
        let ty = types[rng.random_range(0..types.len())];
        let q = if ty.is_family_marker() {
            String::new()
        } else {
            format!("q{}", rng.random_range(0..5))
        };
        let ts = rng.random_range(1..20u64);
        let seq = rng.random_range(1..1000u64);
        let len = rng.random_range(0..=max_value);
        let v: Vec<u8> = (0..len).map(|_| rng.random()).collect();
        m.insert(CellKey::new(row, "cf", q, ts, ty, seq), v);
    }
    m
}

fn write(model: &Model, opts: WriterOptions) -> Vec<u8> {
    let mut w = HFileWriter::new(Vec::new(), "model", opts).unwrap();
    for (k, v) in model {
        w.append(&k.as_ref(), v).unwrap();
    }
    w.finish().unwrap().0
}

fn check(model: &Model, bytes: Vec<u8>) {
    let report = verify(&bytes, "model").unwrap();
    assert!(report.is_clean(), "{:?}", report.problems);
    assert_eq!(report.stats.cells, model.len() as u64);
    let r = HFileReader::open(bytes, "model").unwrap();
    assert_eq!(r.info().entries, model.len() as u64);
    let keys: Vec<&CellKey> = model.keys().collect();

    let mut it = r.iter();
    it.seek_to_first().unwrap();
    for (k, v) in model {
        assert_eq!(it.key_ref().map(|x| x.to_owned_key()).as_ref(), Some(k));
        assert_eq!(it.value(), v.as_slice());
        it.next().unwrap();
    }
    assert!(!it.valid());

    it.seek_to_last().unwrap();
    for (k, _) in model.iter().rev() {
        assert_eq!(it.key_ref().map(|x| x.to_owned_key()).as_ref(), Some(k));
        it.prev().unwrap();
    }
    assert!(!it.valid());

    // Every key sought in small files, an even sample of a few hundred in large ones.
    let step = (keys.len() / 300).max(1);
    for (i, k) in keys.iter().enumerate().step_by(step) {
        it.seek(&k.as_ref()).unwrap();
        assert_eq!(it.key_ref().map(|x| x.to_owned_key()).as_ref(), Some(*k));
        it.seek_for_prev(&k.as_ref()).unwrap();
        assert_eq!(it.key_ref().map(|x| x.to_owned_key()).as_ref(), Some(*k));
        // Between keys: the first key of the row, and a key just after this one.
        let probe = CellKey::first_on_row(&k.row);
        it.seek(&probe.as_ref()).unwrap();
        let want = model.range(probe.clone()..).next().map(|(k, _)| k);
        assert_eq!(it.key_ref().map(|x| x.to_owned_key()).as_ref(), want);
        let mut after = (*k).clone();
        after.seq = after.seq.saturating_sub(1);
        after.type_code = 0;
        it.seek_for_prev(&after.as_ref()).unwrap();
        let want = model.range(..=after.clone()).next_back().map(|(k, _)| k);
        assert_eq!(
            it.key_ref().map(|x| x.to_owned_key()).as_ref(),
            want,
            "seek_for_prev #{i}"
        );
        // Forward and backward steps from a sought position stay in order.
        it.seek(&k.as_ref()).unwrap();
        it.prev().unwrap();
        let want = i.checked_sub(1).map(|j| keys[j]);
        assert_eq!(it.key_ref().map(|x| x.to_owned_key()).as_ref(), want);
    }
    // Every stored row passes the bloom check.
    for k in model.keys() {
        assert!(r.may_contain_row(&k.row).unwrap());
        assert!(r.may_contain_column(&k.row, &k.qualifier).unwrap());
    }
    // Point lookup agrees with the model.
    for k in keys.iter().step_by(7) {
        let got = r.get_column(&k.row, &k.qualifier).unwrap();
        let want: Vec<_> = model
            .iter()
            .filter(|(m, _)| m.row == k.row && m.qualifier == k.qualifier)
            .map(|(m, v)| (m.clone(), v.clone()))
            .collect();
        assert_eq!(got, want);
    }
}

fn opts(block: usize, index: usize, comp: CompressionType, bloom: BloomType) -> WriterOptions {
    let mut o = WriterOptions::new("cf");
    o.block_size = block;
    o.index_block_size = index;
    o.compression = comp;
    o.bloom = BloomConfig {
        bloom_type: bloom,
        bits_per_key_milli: 10_000,
        keys_per_chunk: 50,
    };
    o.created_at_ms = 0;
    o
}

#[test]
fn empty_file_reads_as_empty_and_verifies() {
    let m = Model::new();
    check(
        &m,
        write(&m, opts(4096, 4096, CompressionType::None, BloomType::Row)),
    );
    check(
        &m,
        write(&m, opts(4096, 4096, CompressionType::Lz4, BloomType::None)),
    );
}

#[test]
fn sizes_blocks_and_index_levels_agree_with_the_model() {
    let mut rng = StdRng::seed_from_u64(7);
    for (n, block, index) in [
        (1, 64, 256),
        (50, 256, 256),
        (800, 200, 256),
        (3000, 4096, 512),
        (3000, 65536, 65536),
    ] {
        let m = random_cells(&mut rng, n, 40);
        for comp in [CompressionType::None, CompressionType::Lz4] {
            for bloom in [
                BloomType::Row,
                BloomType::RowCol,
                BloomType::RowPrefix(4),
                BloomType::None,
            ] {
                let bytes = write(&m, opts(block, index, comp, bloom));
                let r = HFileReader::open(bytes.clone(), "m").unwrap();
                if n == 800 {
                    assert!(
                        r.trailer().index_levels >= 3,
                        "levels {}",
                        r.trailer().index_levels
                    );
                }
                check(&m, bytes);
            }
        }
    }
}

#[test]
fn cells_larger_than_a_block_get_blocks_of_their_own() {
    let mut rng = StdRng::seed_from_u64(11);
    let m = random_cells(&mut rng, 60, 20_000);
    check(
        &m,
        write(&m, opts(1024, 1024, CompressionType::Lz4, BloomType::Row)),
    );
}

#[test]
fn out_of_order_and_foreign_family_cells_are_refused() {
    let mut w = HFileWriter::new(Vec::new(), "x", WriterOptions::new("cf")).unwrap();
    w.append(
        &CellKey::new("b", "cf", "q", 5, CellType::Put, 1).as_ref(),
        b"",
    )
    .unwrap();
    let e = w
        .append(
            &CellKey::new("a", "cf", "q", 5, CellType::Put, 1).as_ref(),
            b"",
        )
        .unwrap_err();
    assert!(e.to_string().contains("out of order"), "{e}");
    let e = w
        .append(
            &CellKey::new("b", "cf", "q", 5, CellType::Put, 1).as_ref(),
            b"",
        )
        .unwrap_err();
    assert!(e.to_string().contains("out of order"), "{e}");
    let e = w
        .append(
            &CellKey::new("c", "other", "q", 5, CellType::Put, 1).as_ref(),
            b"",
        )
        .unwrap_err();
    assert!(e.to_string().contains("family"), "{e}");
    let e = w
        .append(
            &CellKey::new("", "cf", "q", 5, CellType::Put, 1).as_ref(),
            b"",
        )
        .unwrap_err();
    assert!(e.to_string().contains("empty"), "{e}");
    let e = w
        .append(
            &CellKey::new("d", "cf", "q", 5, CellType::DeleteFamily, 1).as_ref(),
            b"",
        )
        .unwrap_err();
    assert!(e.to_string().contains("empty qualifier"), "{e}");
    let big = vec![b'r'; 70_000];
    let e = w
        .append(
            &CellKey::new(big, "cf", "q", 5, CellType::Put, 1).as_ref(),
            b"",
        )
        .unwrap_err();
    assert!(e.to_string().contains("exceeds"), "{e}");
}
