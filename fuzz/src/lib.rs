//! Helpers shared by the fuzz targets in `fuzz_targets/`.
//!
//! Each helper drives a decoder the way a reader would and checks only what the format promises
//! for *any* input; the targets add the stronger checks that hold for files the writer made.
#![forbid(unsafe_code)]

use std::sync::Arc;

use cellar_format::block::{Block, BlockIter};
use cellar_format::cell::{CellKey, KeyRef};

/// Upper bound on entries visited per scan. Scans of a block always terminate (offsets move
/// strictly), but a budget keeps one slow input from eating the run's time.
pub const SCAN_BUDGET: usize = 100_000;

/// What a forward and a backward pass over a block saw.
#[derive(Debug, Default)]
pub struct BlockScan {
    /// Keys in forward order, up to the first error.
    pub forward: Vec<Vec<u8>>,
    /// Values in forward order, up to the first error.
    pub values: Vec<Vec<u8>>,
    /// True when the forward pass reached the end without an error.
    pub forward_clean: bool,
    /// Keys in backward order, up to the first error.
    pub backward: Vec<Vec<u8>>,
    /// True when the backward pass reached the start without an error.
    pub backward_clean: bool,
}

/// Iterate a block forward then backward, touching every accessor.
pub fn scan_block(block: &Arc<Block>) -> BlockScan {
    let mut out = BlockScan::default();
    let mut it = BlockIter::new(block.clone());
    out.forward_clean = it.seek_to_first().is_ok();
    while out.forward_clean && it.valid() && out.forward.len() < SCAN_BUDGET {
        // The block decoder promises that every key it yields parses.
        assert!(
            KeyRef::parse(it.key()).is_ok(),
            "block yielded an unparsable key"
        );
        out.forward.push(it.key().to_vec());
        out.values.push(it.value().to_vec());
        let _ = it.tags();
        let _ = it.entry_offset();
        out.forward_clean = it.next().is_ok();
    }
    // `run`, a scan's loop, yields what `next` does and fails where it does.
    let mut run = BlockIter::new(block.clone());
    if run.seek_to_first().is_ok() {
        let mut i = 0;
        let r = run.run(&mut |e| {
            assert_eq!(
                Some(e.key),
                out.forward.get(i).map(Vec::as_slice),
                "run and next yield different keys"
            );
            assert_eq!(
                Some(e.value),
                out.values.get(i).map(Vec::as_slice),
                "run and next yield different values"
            );
            i += 1;
            i < SCAN_BUDGET
        });
        if i < SCAN_BUDGET {
            assert_eq!(
                i,
                out.forward.len(),
                "run and next end at different entries"
            );
            assert_eq!(
                r.is_ok(),
                out.forward_clean,
                "run and next fail differently"
            );
        }
    }
    out.backward_clean = it.seek_to_last().is_ok();
    while out.backward_clean && it.valid() && out.backward.len() < SCAN_BUDGET {
        assert!(
            KeyRef::parse(it.key()).is_ok(),
            "block yielded an unparsable key"
        );
        out.backward.push(it.key().to_vec());
        let _ = it.value();
        out.backward_clean = it.prev().is_ok();
    }
    out
}

/// Seek targets worth trying against a block or file: each key seen, the first key of each
/// key's row, and rows made from slices of the raw input.
pub fn seek_targets(keys: &[Vec<u8>], raw: &[u8]) -> Vec<CellKey> {
    let mut out = Vec::new();
    for k in keys.iter().take(64) {
        if let Ok(k) = KeyRef::parse(k) {
            out.push(k.to_owned_key());
            out.push(CellKey::first_on_row(k.row));
            let mut later = k.to_owned_key();
            later.seq = later.seq.wrapping_sub(1);
            out.push(later);
        }
    }
    for chunk in raw.chunks(13).take(8) {
        out.push(CellKey::first_on_row(chunk));
    }
    out.push(CellKey::first_on_row(b""));
    out.push(CellKey::first_on_row(&[0xff; 8]));
    out
}

/// Seek a block iterator to each target and check what holds for any block: a valid position
/// after `seek` is at or after the target, because the final linear step only stops there.
pub fn seek_block(block: &Arc<Block>, targets: &[CellKey]) {
    let mut it = BlockIter::new(block.clone());
    for t in targets {
        let t = t.as_ref();
        if it.seek(&t).is_ok() && it.valid() {
            let k = KeyRef::parse(it.key()).expect("block yielded an unparsable key");
            assert!(k >= t, "seek stopped before its target");
            let _ = it.next();
        }
        let _ = it.seek_for_prev(&t);
        if it.valid() {
            let _ = it.prev();
        }
    }
}

/// True when `keys` are strictly increasing in cell order.
pub fn strictly_increasing(keys: &[Vec<u8>]) -> bool {
    keys.windows(2)
        .all(|w| cellar_format::compare_keys(&w[0], &w[1]) == std::cmp::Ordering::Less)
}

/// A fresh directory for a target's real files: on tmpfs when there is one, where fsyncs and
/// preallocations cost no disk time and a run gets through more inputs.
pub fn scratch_dir() -> tempfile::TempDir {
    let shm = std::path::Path::new("/dev/shm");
    if shm.is_dir() {
        tempfile::tempdir_in(shm)
    } else {
        tempfile::tempdir()
    }
    .expect("a temporary directory")
}

/// Byte changes read from a damage target's input: (offset u16 LE, xor byte) triples, the
/// zero xors dropped, at most 64.
pub fn byte_edits(input: &[u8]) -> Vec<(usize, u8)> {
    input
        .chunks_exact(3)
        .map(|c| (usize::from(u16::from_le_bytes([c[0], c[1]])), c[2]))
        .filter(|(_, x)| *x != 0)
        .take(64)
        .collect()
}

/// Apply [`byte_edits`] to `bytes`, each offset taken modulo the length.
pub fn apply_edits(bytes: &mut [u8], edits: &[(usize, u8)]) {
    for (off, x) in edits {
        if !bytes.is_empty() {
            let at = off % bytes.len();
            bytes[at] ^= x;
        }
    }
}
