//! Shared fixtures for Cellar's criterion benchmarks (`benches/`): the cell shapes measured,
//! a file builder, an in-memory block cache, and the "just LZ4 the bytes" floor that the
//! writer's throughput and size are compared with.
//!
//! Cells are shaped like a typical wide-row table: 16-byte row keys (`user000000001234`), one
//! family `cf`, qualifier `q`, 100-byte values.
#![forbid(unsafe_code)]

pub mod compare;

use std::collections::HashMap;
use std::sync::Mutex;

use cellar_format::bloom::{BloomConfig, BloomType};
use cellar_format::cell::{CellKey, CellType};
use cellar_format::{
    BlockCache, BlockType, CachedBlock, CompressionType, HFileWriter, WriterOptions,
};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// Family of every benchmark cell.
pub const FAMILY: &[u8] = b"cf";
/// Qualifier of every benchmark cell.
pub const QUALIFIER: &[u8] = b"q";
/// Value size of every benchmark cell.
pub const VALUE_LEN: usize = 100;
/// Chunk size of the LZ4 floor: the writer's default data block size.
pub const FLOOR_CHUNK: usize = 64 * 1024;

/// The 16-byte row key of row `i`.
pub fn row_key(i: u64) -> Vec<u8> {
    format!("user{i:012}").into_bytes()
}

/// A 100-byte value that compresses roughly like text (about 2:1 with LZ4): words drawn from a
/// small vocabulary. Random bytes would make LZ4 pointless; a constant would flatter it.
pub fn value(rng: &mut StdRng) -> Vec<u8> {
    const WORDS: [&str; 16] = [
        "alpha ",
        "bravo ",
        "charlie ",
        "delta ",
        "echo ",
        "foxtrot ",
        "golf ",
        "hotel ",
        "india ",
        "juliet ",
        "kilo ",
        "lima ",
        "mike ",
        "november ",
        "oscar ",
        "papa ",
    ];
    let mut v = Vec::with_capacity(VALUE_LEN + 16);
    while v.len() < VALUE_LEN {
        let w = WORDS[rng.random_range(0..WORDS.len())];
        v.extend_from_slice(w.as_bytes());
        // A number now and then, as real payloads carry ids and counters.
        if rng.random_bool(0.3) {
            v.extend_from_slice(rng.random_range(0u32..100_000).to_string().as_bytes());
        }
    }
    v.truncate(VALUE_LEN);
    v
}

/// `n` cells, one per row, rows `0..n` in order, with encoded keys and values.
pub fn cells(n: u64, seed: u64) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut rng = StdRng::seed_from_u64(seed);
    (0..n)
        .map(|i| {
            let k = CellKey::new(
                row_key(i),
                FAMILY,
                QUALIFIER,
                1_700_000_000_000,
                CellType::Put,
                i + 1,
            );
            (k.encode(), value(&mut rng))
        })
        .collect()
}

/// Sum of encoded key and value bytes: what a write "moves", the Throughput of write benches.
pub fn raw_bytes(cells: &[(Vec<u8>, Vec<u8>)]) -> u64 {
    cells.iter().map(|(k, v)| (k.len() + v.len()) as u64).sum()
}

/// Writer options used by every benchmark file: defaults (64 KiB blocks, ROW bloom at 10
/// bits/key) with the given compression.
pub fn writer_options(compression: CompressionType) -> WriterOptions {
    let mut o = WriterOptions::new(FAMILY);
    o.compression = compression;
    o.bloom = BloomConfig {
        bloom_type: BloomType::Row,
        ..BloomConfig::default()
    };
    o.created_at_ms = 0;
    o
}

/// Write `cells` (encoded keys, sorted) into an in-memory file.
///
/// # Panics
/// When the writer rejects the cells, which means the fixture is wrong.
pub fn write_file(cells: &[(Vec<u8>, Vec<u8>)], compression: CompressionType) -> Vec<u8> {
    let mut w = HFileWriter::new(
        Vec::with_capacity(cells.len() * 160),
        "bench",
        writer_options(compression),
    )
    .expect("writer options");
    for (k, v) in cells {
        let key = cellar_format::KeyRef::parse(k).expect("fixture key");
        w.append(&key, v).expect("append");
    }
    w.finish().expect("finish").0
}

/// Every key and value back to back: the input of the LZ4 floor.
pub fn concat(cells: &[(Vec<u8>, Vec<u8>)]) -> Vec<u8> {
    let mut out = Vec::with_capacity(raw_bytes(cells) as usize);
    for (k, v) in cells {
        out.extend_from_slice(k);
        out.extend_from_slice(v);
    }
    out
}

/// The floor for compressed writing: LZ4 over the raw stream ([`concat()`]) in 64 KiB chunks,
/// with no block structure, index, bloom or checksums. Returns the compressed size.
pub fn lz4_floor(stream: &[u8]) -> usize {
    stream
        .chunks(FLOOR_CHUNK)
        .map(|c| lz4_flex::block::compress(c).len())
        .sum()
}

/// The simplest block cache that works: every block ever read, keyed by (file id, offset),
/// behind one mutex. Enough to measure the cached read path without eviction costs.
#[derive(Debug, Default)]
pub struct MemCache {
    blocks: Mutex<HashMap<(u64, u64), CachedBlock>>,
}

impl BlockCache for MemCache {
    fn get(&self, cache_id: u64, offset: u64, _ty: BlockType) -> Option<CachedBlock> {
        let map = self.blocks.lock().unwrap_or_else(|e| e.into_inner());
        map.get(&(cache_id, offset)).cloned()
    }

    fn insert(&self, cache_id: u64, offset: u64, _ty: BlockType, block: CachedBlock) {
        let mut map = self.blocks.lock().unwrap_or_else(|e| e.into_inner());
        map.insert((cache_id, offset), block);
    }
}
