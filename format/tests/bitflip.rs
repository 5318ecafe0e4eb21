//! Every single-bit flip of a small file is either reported as corruption or harmless.
//!
//! The file (~160 cells, LZ4 with one block left raw, a ROW bloom in two chunks, a two-level
//! index, ~7.5 KB) is damaged one bit at a time. For each damaged copy:
//!
//! * (a) open, a full forward scan, a full backward scan, `get_column` of every stored column
//!   and `may_contain_row` of every row must each either fail with a `Corruption` or
//!   `Unsupported` error, or return exactly what the original file returns;
//! * (b) `verify` must report at least one problem: every byte of a file is covered by a block
//!   checksum, the trailer checksum or the magic.
//!
//! Which bits: in a release build (or with `BITFLIP_ALL=1`) every bit of the file — about 61,000
//! flips, ~20 s in release. A debug build flips one bit of every byte (the bit index rotating
//! with the byte offset, so every bit position of every field is hit across the file), because
//! the hundreds of lookups per flip cost ~6 ms each unoptimised; that still proves every byte is
//! covered. Run the exhaustive version with
//! `cargo test --release -p cellar-format --test bitflip -- --nocapture`.
//!
//! Detections are counted per region and printed (`-- --nocapture`). The reader is given a small block cache so that the hundreds of point
//! lookups per flipped bit cost one decode per block, not one per lookup; every block is still
//! read and checksummed from the damaged bytes at least once per flip (and errors are never
//! cached). Every other damaged copy's cache lets the reader pin its bloom chunks and root
//! children (reader.rs, "Pinned meta blocks"), so both paths meet every flip's neighbours.

mod common;

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use cellar_format::reader::{BlockCache, CachedBlock, ReaderOptions};
use cellar_format::{
    verify, BlockType, BloomType, CellKey, CompressionType, Error, HFileReader, Region,
};
use common::{
    is_damage, options, sample_cells, scan_backward, scan_forward, write_file, Layout, Rows,
};

type Got = Vec<(CellKey, Vec<u8>)>;

/// A per-reader map cache: blocks decoded once per damaged copy; grants every pin when
/// `pins` is set.
#[derive(Debug, Default)]
struct MapCache(Mutex<HashMap<(u64, u64), CachedBlock>>, bool);

impl BlockCache for MapCache {
    fn get(&self, cache_id: u64, offset: u64, _ty: BlockType) -> Option<CachedBlock> {
        self.0.lock().unwrap().get(&(cache_id, offset)).cloned()
    }
    fn insert(&self, cache_id: u64, offset: u64, _ty: BlockType, block: CachedBlock) {
        self.0.lock().unwrap().insert((cache_id, offset), block);
    }
    fn pin(&self, _ty: BlockType, _block: &CachedBlock) -> Option<u64> {
        self.1.then_some(1)
    }
}

/// Readers opened so far: every other one pins.
static OPENED: AtomicU64 = AtomicU64::new(0);

/// What the undamaged file answers.
struct Expected {
    forward: Rows,
    backward: Rows,
    columns: Vec<(Vec<u8>, Vec<u8>)>,
    gets: Vec<Got>,
    rows: Vec<Vec<u8>>,
}

#[derive(Default, Clone, Copy)]
struct Tally {
    bits: u64,
    reader: u64,
    verify: u64,
    both_missed: u64,
}

fn open(bytes: &[u8]) -> Result<HFileReader<&[u8]>, Error> {
    let opts = ReaderOptions {
        verify_checksums: true,
        cache: Some((
            Arc::new(MapCache(
                Mutex::default(),
                OPENED.fetch_add(1, Ordering::Relaxed) % 2 == 1,
            )),
            1,
        )),
    };
    HFileReader::open_with(bytes, "flipped", opts)
}

/// One answer of the damaged file: an error of a damage category, or the original's answer.
fn judge<T: PartialEq + std::fmt::Debug>(
    what: &str,
    got: Result<T, Error>,
    want: &T,
    detected: &mut bool,
) -> Result<(), String> {
    match got {
        Ok(v) if v == *want => Ok(()),
        Ok(v) => Err(format!("{what}: silently wrong answer {v:?}")),
        Err(e) if is_damage(&e) => {
            *detected = true;
            Ok(())
        }
        Err(e) => Err(format!("{what}: error of the wrong category: {e}")),
    }
}

/// Run every reader operation on a damaged copy; `Ok(detected)` or the first violation.
fn exercise(bytes: &[u8], exp: &Expected) -> Result<bool, String> {
    let r = match open(bytes) {
        Ok(r) => r,
        Err(e) if is_damage(&e) => return Ok(true),
        Err(e) => return Err(format!("open: error of the wrong category: {e}")),
    };
    let mut detected = false;
    judge(
        "forward scan",
        scan_forward(&r),
        &exp.forward,
        &mut detected,
    )?;
    judge(
        "backward scan",
        scan_backward(&r),
        &exp.backward,
        &mut detected,
    )?;
    for ((row, q), want) in exp.columns.iter().zip(&exp.gets) {
        judge("get_column", r.get_column(row, q), want, &mut detected)?;
    }
    for row in &exp.rows {
        judge(
            "may_contain_row",
            r.may_contain_row(row),
            &true,
            &mut detected,
        )?;
    }
    Ok(detected)
}

#[test]
fn every_bit_flip_is_detected_or_harmless() {
    let cells = sample_cells(45, 10);
    let bytes = write_file(
        &cells,
        options(512, 400, 8, CompressionType::Lz4, BloomType::Row, 32),
    );
    let layout = Layout::of(&bytes);
    assert!(layout.trailer.index_levels >= 2, "want a multi-level index");
    assert!(layout.bloom.as_ref().is_some_and(|m| m.chunks.len() >= 2));
    for c in [CompressionType::Lz4, CompressionType::None] {
        layout.data_with(c);
    }
    assert!(
        (4096..=8192).contains(&bytes.len()),
        "file is {} bytes",
        bytes.len()
    );

    let r = open(&bytes).unwrap();
    let mut columns: Vec<(Vec<u8>, Vec<u8>)> = cells
        .iter()
        .map(|(k, _, _)| (k.row.clone(), k.qualifier.clone()))
        .collect();
    columns.dedup();
    let mut rows: Vec<Vec<u8>> = cells.iter().map(|(k, _, _)| k.row.clone()).collect();
    rows.dedup();
    let exp = Expected {
        forward: scan_forward(&r).unwrap(),
        backward: scan_backward(&r).unwrap(),
        gets: columns
            .iter()
            .map(|(row, q)| r.get_column(row, q).unwrap())
            .collect(),
        columns,
        rows,
    };
    assert_eq!(exp.forward.len(), cells.len());
    assert!(verify(&bytes, "orig").unwrap().is_clean());
    drop(r);

    let started = Instant::now();
    let all_bits = !cfg!(debug_assertions) || std::env::var_os("BITFLIP_ALL").is_some();
    let flips: Vec<u64> = if all_bits {
        (0..bytes.len() as u64 * 8).collect()
    } else {
        (0..bytes.len() as u64)
            .map(|i| i * 8 + (i * 3 + i / 8) % 8)
            .collect()
    };
    let threads = 2usize;
    let results: Vec<(BTreeMap<String, Tally>, Vec<String>)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let (bytes, exp, layout, flips) = (&bytes, &exp, &layout, &flips);
                s.spawn(move || {
                    let mut tally: BTreeMap<String, Tally> = BTreeMap::new();
                    let mut failures = Vec::new();
                    let mut copy = bytes.clone();
                    for &bit in flips.iter().skip(t).step_by(threads) {
                        let (off, b) = (bit / 8, (bit % 8) as u32);
                        copy[off as usize] ^= 1 << b;
                        let reader = exercise(&copy, exp);
                        let verified = match verify(copy.as_slice(), "flipped") {
                            Ok(rep) => !rep.is_clean(),
                            Err(e) => is_damage(&e),
                        };
                        copy[off as usize] ^= 1 << b;
                        let region = region_name(layout, off);
                        let e = tally.entry(region.clone()).or_default();
                        e.bits += 1;
                        match reader {
                            Ok(true) => e.reader += 1,
                            Ok(false) => {}
                            Err(ref msg) => {
                                failures.push(format!("byte {off} bit {b} ({region}): {msg}"))
                            }
                        }
                        if verified {
                            e.verify += 1;
                        } else {
                            failures.push(format!(
                                "byte {off} bit {b} ({region}): verify reports nothing"
                            ));
                        }
                        if !verified && !matches!(reader, Ok(true)) {
                            e.both_missed += 1;
                        }
                    }
                    (tally, failures)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let elapsed = started.elapsed();

    let mut tally: BTreeMap<String, Tally> = BTreeMap::new();
    let mut failures = Vec::new();
    for (t, f) in results {
        for (k, v) in t {
            let e = tally.entry(k).or_default();
            e.bits += v.bits;
            e.reader += v.reader;
            e.verify += v.verify;
            e.both_missed += v.both_missed;
        }
        failures.extend(f);
    }
    let mut total = Tally::default();
    eprintln!(
        "{} bit flips ({}) of a {}-byte file ({} cells, {} index levels), {:.1?}:",
        flips.len(),
        if all_bits {
            "every bit"
        } else {
            "one bit per byte"
        },
        bytes.len(),
        cells.len(),
        layout.trailer.index_levels,
        elapsed
    );
    eprintln!(
        "{:<26} {:>6} {:>8} {:>8} {:>8}",
        "region", "bits", "reader", "verify", "missed"
    );
    for (k, v) in &tally {
        eprintln!(
            "{k:<26} {:>6} {:>8} {:>8} {:>8}",
            v.bits, v.reader, v.verify, v.both_missed
        );
        total.bits += v.bits;
        total.reader += v.reader;
        total.verify += v.verify;
        total.both_missed += v.both_missed;
    }
    eprintln!(
        "{:<26} {:>6} {:>8} {:>8} {:>8}",
        "total", total.bits, total.reader, total.verify, total.both_missed
    );
    assert_eq!(total.bits, flips.len() as u64);
    assert!(
        failures.is_empty(),
        "{} failures, first ones:\n{}",
        failures.len(),
        failures
            .iter()
            .take(20)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
}

/// Region name of a byte, data blocks split by how they are stored.
fn region_name(layout: &Layout, off: u64) -> String {
    let region = layout.region_at(off);
    if region == Region::Data {
        let b = layout
            .blocks
            .iter()
            .find(|b| (b.handle.offset..b.handle.end()).contains(&off))
            .unwrap();
        return format!("data block ({})", b.env.compression.name());
    }
    region.to_string()
}
