//! Micro-benchmarks of the file format: block codec, seek within a block, bloom probes, whole-
//! file write throughput against an LZ4 floor, and point lookups through the reader.
//!
//! Run: `cargo bench -p cellar-benches --bench format`. Each group keeps its measurement short
//! (3 s, 20 samples) so the whole suite runs in a few minutes on a laptop; pass criterion's
//! `--measurement-time` for steadier numbers. One-off figures (bloom false-positive rate, file
//! size against the LZ4 floor) go to stderr once, when the group first runs.

use std::hint::black_box;
use std::io::{Read, Write};
use std::sync::Arc;
use std::time::Duration;

use cellar_benches::{
    cells, concat, lz4_floor, raw_bytes, row_key, write_file, MemCache, QUALIFIER,
};
use cellar_format::block::{Block, BlockBuilder, BlockIter};
use cellar_format::bloom::{build_chunk, chunk_may_contain, hash_key, probes_for};
use cellar_format::{
    BlockCache, CellKey, CompressionType, HFileReader, KeyRef, ReadAt, ReaderOptions,
};
use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// Target raw size of the benchmark block: the writer's default block size.
const BLOCK_BYTES: usize = 64 * 1024;
/// Restart interval of data blocks, the writer's default.
const RESTART_INTERVAL: usize = 16;
/// Keys in the bloom filter measured.
const BLOOM_KEYS: u64 = 1_000_000;
/// Bits per key × 1000 of that filter.
const BLOOM_BITS_MILLI: u32 = 10_000;
/// Cells in the files written and read (about 14 MB raw).
const FILE_CELLS: u64 = 100_000;

/// Cells that fill one 64 KiB block, in order.
fn block_cells() -> Vec<(Vec<u8>, Vec<u8>)> {
    let all = cells(2_000, 1);
    let mut b = BlockBuilder::new(RESTART_INTERVAL);
    let mut out = Vec::new();
    for (k, v) in all {
        b.add(&k, &v, &[]);
        out.push((k, v));
        if b.estimated_size() >= BLOCK_BYTES {
            break;
        }
    }
    out
}

fn encode_block(cells: &[(Vec<u8>, Vec<u8>)]) -> Vec<u8> {
    let mut b = BlockBuilder::new(RESTART_INTERVAL);
    for (k, v) in cells {
        b.add(k, v, &[]);
    }
    b.finish()
}

fn block(c: &mut Criterion) {
    let cells = block_cells();
    let payload = encode_block(&cells);
    let mut g = c.benchmark_group("block");
    g.throughput(Throughput::Bytes(payload.len() as u64));
    g.bench_function("encode_64KiB", |b| {
        b.iter(|| black_box(encode_block(black_box(&cells))))
    });
    // The copy in the setup stands for the block arriving from disk or cache; only Block::new
    // (restart array checks) and the full forward iteration are timed.
    g.bench_function("decode_iterate_64KiB", |b| {
        b.iter_batched(
            || payload.clone(),
            |p| {
                let block = Arc::new(Block::new(p).expect("block"));
                let mut it = BlockIter::new(block);
                it.seek_to_first().expect("first");
                let mut n = 0usize;
                while it.valid() {
                    n += it.key().len() + it.value().len();
                    it.next().expect("next");
                }
                black_box(n)
            },
            BatchSize::SmallInput,
        )
    });
    g.finish();

    let block = Arc::new(Block::new(payload).expect("block"));
    let mut rng = StdRng::seed_from_u64(2);
    let targets: Vec<CellKey> = (0..4096)
        .map(|_| {
            let (k, _) = &cells[rng.random_range(0..cells.len())];
            KeyRef::parse(k).expect("key").to_owned_key()
        })
        .collect();
    let mut g = c.benchmark_group("block");
    g.throughput(Throughput::Elements(1));
    g.bench_function("seek_in_64KiB", |b| {
        let mut it = BlockIter::new(block.clone());
        let mut i = 0usize;
        b.iter(|| {
            let t = &targets[i % targets.len()];
            i += 1;
            it.seek(&t.as_ref()).expect("seek");
            black_box(it.valid())
        })
    });
    g.finish();
}

fn bloom(c: &mut Criterion) {
    let present: Vec<Vec<u8>> = (0..BLOOM_KEYS).map(row_key).collect();
    // Absent keys share the shape of the present ones, so hashing costs the same.
    let absent: Vec<Vec<u8>> = (BLOOM_KEYS..2 * BLOOM_KEYS).map(row_key).collect();
    let probes = probes_for(BLOOM_BITS_MILLI);
    let hashes: Vec<u64> = present.iter().map(|k| hash_key(k)).collect();
    let bits = build_chunk(&hashes, BLOOM_BITS_MILLI, probes);
    let false_positives = absent
        .iter()
        .filter(|k| chunk_may_contain(&bits, probes, hash_key(k)))
        .count();
    let missed = present
        .iter()
        .filter(|k| !chunk_may_contain(&bits, probes, hash_key(k)))
        .count();
    eprintln!(
        "bloom: {BLOOM_KEYS} keys at {} bits/key, {probes} probes, {} KiB: \
         false-positive rate {:.3}% ({false_positives} of {} absent keys), {missed} false negatives",
        BLOOM_BITS_MILLI / 1000,
        bits.len() / 1024,
        100.0 * false_positives as f64 / absent.len() as f64,
        absent.len(),
    );

    // Probe a few thousand keys held contiguously, so fetching the key stays in cache and the
    // time measured is the hash plus the filter's one cache line.
    let mut rng = StdRng::seed_from_u64(3);
    let mut sample = |keys: &[Vec<u8>]| -> Vec<[u8; 16]> {
        (0..4096)
            .map(|_| {
                let mut a = [0u8; 16];
                a.copy_from_slice(&keys[rng.random_range(0..keys.len())]);
                a
            })
            .collect()
    };
    let hits = sample(&present);
    let misses = sample(&absent);
    let mut g = c.benchmark_group("bloom");
    g.throughput(Throughput::Elements(1));
    for (name, keys) in [("probe_hit", &hits), ("probe_miss", &misses)] {
        g.bench_function(name, |b| {
            let mut i = 0usize;
            b.iter(|| {
                let k = &keys[i % keys.len()];
                i += 1;
                black_box(chunk_may_contain(&bits, probes, hash_key(black_box(k))))
            })
        });
    }
    g.finish();
}

fn write(c: &mut Criterion) {
    let cells = cells(FILE_CELLS, 4);
    let raw = raw_bytes(&cells);
    let stream = concat(&cells);
    let none = write_file(&cells, CompressionType::None).len();
    let lz4 = write_file(&cells, CompressionType::Lz4).len();
    let floor = lz4_floor(&stream);
    eprintln!(
        "write: {FILE_CELLS} cells, {raw} raw key+value bytes; file NONE {none} B ({:.3}x raw), \
         LZ4 {lz4} B ({:.3}x raw); lz4 floor {floor} B ({:.3}x raw); LZ4 file / floor = {:.3}",
        none as f64 / raw as f64,
        lz4 as f64 / raw as f64,
        floor as f64 / raw as f64,
        lz4 as f64 / floor as f64,
    );

    let mut g = c.benchmark_group("write");
    g.throughput(Throughput::Bytes(raw));
    g.sample_size(10);
    for (name, comp) in [
        ("file_none", CompressionType::None),
        ("file_lz4", CompressionType::Lz4),
    ] {
        g.bench_function(name, |b| {
            b.iter(|| black_box(write_file(&cells, comp).len()))
        });
    }
    g.bench_function("lz4_floor", |b| b.iter(|| black_box(lz4_floor(&stream))));
    g.finish();
}

/// Random existing rows, fixed across sources so they measure the same lookups.
fn lookup_rows() -> Vec<Vec<u8>> {
    let mut rng = StdRng::seed_from_u64(5);
    (0..1 << 14)
        .map(|_| row_key(rng.random_range(0..FILE_CELLS)))
        .collect()
}

fn bench_gets<R: ReadAt>(
    g: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    name: &str,
    r: &HFileReader<R>,
    rows: &[Vec<u8>],
) {
    // Warm-up outside the timing: every block the lookups touch is read once.
    for row in rows {
        assert_eq!(r.get_column(row, QUALIFIER).expect("get").len(), 1);
    }
    g.bench_function(name, |b| {
        let mut i = 0usize;
        b.iter(|| {
            let row = &rows[i % rows.len()];
            i += 1;
            black_box(r.get_column(row, QUALIFIER).expect("get"))
        })
    });
}

/// `get_column` of one random existing row in a 100k-cell file (LZ4, ROW bloom, 64 KiB blocks).
/// Without a block cache every lookup reads, checksums and decodes the bloom chunk and the data
/// block again, so the uncached figures are dominated by block size; the cached one is the
/// index walk, bloom probe and in-block seek alone.
fn point_get(c: &mut Criterion) {
    let cells = cells(FILE_CELLS, 6);
    let bytes = write_file(&cells, CompressionType::Lz4);
    let rows = lookup_rows();

    let dir = std::env::temp_dir().join(format!("cellar-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = dir.join("point_get.hfile");
    {
        let mut f = std::fs::File::create(&path).expect("create");
        f.write_all(&bytes).expect("write");
        f.sync_all().expect("sync");
    }
    // Read the file once so the page cache holds it: this measures the warm path, not the disk.
    let mut sink = Vec::new();
    std::fs::File::open(&path)
        .expect("open")
        .read_to_end(&mut sink)
        .expect("warm-up read");

    let mut g = c.benchmark_group("point_get");
    g.throughput(Throughput::Elements(1));
    let in_memory = HFileReader::open(bytes.clone(), "bench").expect("open");
    bench_gets(&mut g, "vec_source", &in_memory, &rows);
    // The same lookups on an uncompressed file: the difference is LZ4 decompression per block.
    let plain =
        HFileReader::open(write_file(&cells, CompressionType::None), "bench").expect("open");
    bench_gets(&mut g, "vec_source_uncompressed", &plain, &rows);

    let file = std::fs::File::open(&path).expect("open");
    let on_disk = HFileReader::open(file, "bench").expect("open");
    bench_gets(&mut g, "file_page_cache", &on_disk, &rows);

    let cache: Arc<dyn BlockCache> = Arc::new(MemCache::default());
    let opts = ReaderOptions {
        cache: Some((cache, 1)),
        ..ReaderOptions::default()
    };
    let file = std::fs::File::open(&path).expect("open");
    let cached = HFileReader::open_with(file, "bench", opts).expect("open");
    bench_gets(&mut g, "file_block_cache", &cached, &rows);
    g.finish();

    let _ = std::fs::remove_dir_all(&dir);
}

fn config() -> Criterion {
    Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .sample_size(20)
}

criterion_group! {
    name = benches;
    config = config();
    targets = block, bloom, write, point_get
}
criterion_main!(benches);
