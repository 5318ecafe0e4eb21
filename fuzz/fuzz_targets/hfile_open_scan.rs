//! Arbitrary bytes as a whole file: open (checksums off and on), scan forward (with `next`
//! and with `run_forward`, which must agree) and backward, seek, `get_column`,
//! `may_contain_row`, the range estimates (`data_block_for`, `mid_key`), and `verify`.
//! Nothing may panic. Each file is also
//! read through a cache that grants the reader its block map (built on the second seek from
//! the whole index), and on a clean file every seek through the map lands where the index
//! descent lands.
//!
//! With checksums off, garbage reaches every decoder behind the envelope. When `verify` calls
//! the file clean, the reader must agree: it opens, scans without error in strictly increasing
//! key order, reads the same cells backward, and finds every row and column through the bloom
//! filter and `get_column` — a disagreement means the verifier misses something the reader
//! depends on, or the reader fails on a sound file.
#![no_main]

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use cellar_format::cell::{CellKey, KeyRef};
use cellar_format::reader::{BlockCache, CachedBlock};
use cellar_format::{verify, BlockType, HFileReader, ReaderOptions};
use cellar_fuzz::{seek_targets, strictly_increasing};
use libfuzzer_sys::fuzz_target;

/// Inputs above this are ignored: a file is read block by block, so size adds nothing but time.
const MAX_FILE: usize = 1 << 20;
/// Cells visited per scan direction.
const CELL_BUDGET: usize = 20_000;

#[derive(Debug, Default)]
struct Scan {
    keys: Vec<Vec<u8>>,
    values: Vec<Vec<u8>>,
    clean: bool,
    /// False when the budget ran out before the end.
    complete: bool,
}

fn forward(r: &HFileReader<&[u8]>) -> Scan {
    let mut s = Scan::default();
    let mut it = r.iter();
    s.clean = it.seek_to_first().is_ok();
    while s.clean && it.valid() && s.keys.len() < CELL_BUDGET {
        let k = it.key_ref().expect("valid iterator without a parsable key");
        let _ = (k.cell_type(), it.tags(), it.data_block());
        s.keys.push(it.key().to_vec());
        s.values.push(it.value().to_vec());
        s.clean = it.next().is_ok();
    }
    s.complete = s.clean && !it.valid();
    s
}

/// The forward scan through `run_forward` (a scan's loop inside each data block), in runs of
/// a few cells resumed on the refused one: the same cells as `forward`, and as clean.
fn runs(r: &HFileReader<&[u8]>) -> Scan {
    let mut s = Scan::default();
    let mut it = r.iter();
    s.clean = it.seek_to_first().is_ok();
    let mut run = 0usize;
    while s.clean && it.valid() && s.keys.len() < CELL_BUDGET {
        run = run % 7 + 1;
        let mut taken = 0;
        s.clean = it
            .run_forward(&mut |e| {
                if taken == run || s.keys.len() == CELL_BUDGET {
                    return false;
                }
                s.keys.push(e.key.to_vec());
                s.values.push(e.value.to_vec());
                taken += 1;
                true
            })
            .is_ok();
    }
    s.complete = s.clean && !it.valid();
    s
}

fn backward(r: &HFileReader<&[u8]>) -> Scan {
    let mut s = Scan::default();
    let mut it = r.iter();
    s.clean = it.seek_to_last().is_ok();
    while s.clean && it.valid() && s.keys.len() < CELL_BUDGET {
        s.keys.push(it.key().to_vec());
        s.values.push(it.value().to_vec());
        s.clean = it.prev().is_ok();
    }
    s.complete = s.clean && !it.valid();
    s
}

/// A cache that keeps every block and grants the block map.
#[derive(Debug, Default)]
struct MapCache {
    blocks: Mutex<HashMap<u64, CachedBlock>>,
}

impl BlockCache for MapCache {
    fn get(&self, _id: u64, offset: u64, _ty: BlockType) -> Option<CachedBlock> {
        self.blocks.lock().ok()?.get(&offset).cloned()
    }
    fn insert(&self, _id: u64, offset: u64, _ty: BlockType, block: CachedBlock) {
        if let Ok(mut b) = self.blocks.lock() {
            b.insert(offset, block);
        }
    }
    fn pin_bytes(&self, bytes: u64) -> Option<u64> {
        Some(bytes)
    }
}

fn mapped(data: &[u8], verify_checksums: bool) -> Option<HFileReader<&[u8]>> {
    let opts = ReaderOptions {
        verify_checksums,
        cache: Some((Arc::new(MapCache::default()) as Arc<dyn BlockCache>, 1)),
    };
    HFileReader::open_with(data, "fuzz-mapped", opts).ok()
}

/// Drive every read path. `sound` says the verifier passed the file, so seeks must also land
/// at or after their target (on damaged files the step to the next block may not).
fn exercise(r: &HFileReader<&[u8]>, raw: &[u8], sound: bool) -> (Scan, Scan) {
    let _ = (r.name(), r.file_len(), r.trailer(), r.version(), r.info());
    let _ = (r.bloom_meta(), r.root().num_restarts(), r.data_end());
    let fwd = forward(r);
    let ran = runs(r);
    // Both stop at the first error or at the budget, so they read the same cells.
    assert_eq!(
        ran.keys, fwd.keys,
        "run_forward hands over other cells than next"
    );
    assert_eq!(
        ran.values, fwd.values,
        "run_forward hands over other values than next"
    );
    assert_eq!(
        ran.clean, fwd.clean,
        "run_forward fails where next does not, or not"
    );
    let back = backward(r);
    let targets = seek_targets(&fwd.keys, raw);
    let mut it = r.iter();
    for t in targets.iter().take(16) {
        let t = t.as_ref();
        if it.seek(&t).is_ok() {
            if let (true, Some(k)) = (sound, it.key_ref()) {
                assert!(k >= t, "file seek stopped before its target");
            }
            let _ = it.next();
        }
        if it.seek_for_prev(&t).is_ok() && it.valid() {
            let _ = it.prev();
        }
        let _ = r.may_contain_row(t.row);
        let _ = r.may_contain_column(t.row, t.qualifier);
        let _ = r.get_column(t.row, t.qualifier);
        // Range estimates: the block a seek searches, found through the index alone. The
        // seek ends there or, when the target falls between that block's last key and its
        // separator, in a later block.
        if let (true, Ok(h)) = (sound, r.data_block_for(&t)) {
            if it.seek(&t).is_ok() {
                match (h, it.data_block()) {
                    (Some(h), Some(b)) => assert!(h.offset <= b.offset, "seek went back"),
                    (None, Some(_)) => panic!("a seek found a block past the index's last"),
                    _ => {}
                }
            }
        }
    }
    let _ = (r.mid_key(), r.data_blocks_end());
    (fwd, back)
}

fuzz_target!(|data: &[u8]| {
    if data.len() > MAX_FILE {
        return;
    }
    for verify_checksums in [false, true] {
        let opts = ReaderOptions {
            verify_checksums,
            cache: None,
        };
        if let Ok(r) = HFileReader::open_with(data, "fuzz", opts) {
            exercise(&r, data, false);
        }
        if let Some(r) = mapped(data, verify_checksums) {
            exercise(&r, data, false);
        }
    }

    let Ok(report) = verify(data, "fuzz") else {
        return;
    };
    if !report.is_clean() {
        return;
    }
    // The verifier found nothing wrong: the reader must agree on every point.
    let r = HFileReader::open(data, "fuzz")
        .unwrap_or_else(|e| panic!("verify is clean but open fails: {e}"));
    let (fwd, back) = exercise(&r, data, true);
    assert!(fwd.clean, "verify is clean but the forward scan fails");
    assert!(back.clean, "verify is clean but the backward scan fails");
    if !(fwd.complete && back.complete) {
        return;
    }
    assert_eq!(
        fwd.keys.len() as u64,
        report.stats.cells,
        "cell count vs verify"
    );
    assert_eq!(
        fwd.keys.len() as u64,
        r.info().entries,
        "cell count vs file info"
    );
    assert!(
        strictly_increasing(&fwd.keys),
        "clean file scans out of order"
    );
    let mut rev = back.keys.clone();
    rev.reverse();
    assert_eq!(rev, fwd.keys, "backward scan differs from forward scan");
    // Seeks through the block map land where the index descent lands, and step alike.
    let m = mapped(data, true).unwrap_or_else(|| panic!("verify is clean but open fails"));
    let (mut a, mut b) = (m.iter(), r.iter());
    for t in seek_targets(&fwd.keys, data).iter().take(32) {
        let t = t.as_ref();
        for forward in [true, false] {
            for it in [&mut a, &mut b] {
                let sought = if forward {
                    it.seek(&t)
                } else {
                    it.seek_for_prev(&t)
                };
                sought.expect("seek fails on a clean file");
            }
            for _ in 0..3 {
                assert_eq!(
                    a.valid().then(|| a.key()),
                    b.valid().then(|| b.key()),
                    "mapped seek, forward {forward}"
                );
                for it in [&mut a, &mut b] {
                    let stepped = if forward { it.next() } else { it.prev() };
                    stepped.expect("step fails on a clean file");
                }
            }
        }
    }
    for (k, v) in fwd.keys.iter().zip(&fwd.values).take(64) {
        let k = KeyRef::parse(k).expect("scan yielded an unparsable key");
        assert!(
            r.may_contain_row(k.row).unwrap_or(false),
            "bloom denies a stored row"
        );
        assert!(
            r.may_contain_column(k.row, k.qualifier).unwrap_or(false),
            "bloom denies a stored column"
        );
        let cells = r
            .get_column(k.row, k.qualifier)
            .unwrap_or_else(|e| panic!("get_column fails on a clean file: {e}"));
        let want: CellKey = k.to_owned_key();
        assert!(
            cells.iter().any(|(ck, cv)| *ck == want && cv == v),
            "get_column misses a stored cell"
        );
    }
});
