//! A million-cell file written to disk and read back through `ReadAt for std::fs::File`.

use std::io::{BufWriter, Write};
use std::time::Instant;

use cellar_format::bloom::BloomConfig;
use cellar_format::{
    verify, BloomType, CellKey, CellType, CompressionType, HFileReader, HFileWriter, WriterOptions,
};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const CELLS: u64 = 1_000_000;
const COLUMNS_PER_ROW: u64 = 4;

/// Cell `i`: row `i / 4`, qualifier `i % 4`; timestamp, sequence number and value derived
/// from `i`, so any cell can be regenerated for checking.
fn cell(i: u64) -> (CellKey, Vec<u8>) {
    let row = format!("user{:010}", i / COLUMNS_PER_ROW);
    let q = format!("f{}", i % COLUMNS_PER_ROW);
    let key = CellKey::new(row, "cf", q, 1_700_000_000_000 + i, CellType::Put, i + 1);
    let h = i.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    let len = 10 + (h % 40) as usize;
    let value: Vec<u8> = format!("value-{i}-{h:016x}")
        .into_bytes()
        .into_iter()
        .cycle()
        .take(len)
        .collect();
    (key, value)
}

/// Run with `cargo test --release -p cellar-format --test large -- --ignored --nocapture`
/// (takes a few seconds in release; far longer unoptimised, hence `#[ignore]`).
#[test]
#[ignore = "large: run in release with --ignored"]
fn million_cells_through_a_real_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("large.hfile");

    let t = Instant::now();
    let mut opts = WriterOptions::new("cf");
    opts.compression = CompressionType::Lz4;
    opts.bloom = BloomConfig {
        bloom_type: BloomType::Row,
        ..BloomConfig::default()
    };
    // Small index blocks so that a million cells make a multi-level index.
    opts.index_block_size = 4096;
    let file = std::fs::File::create(&path).unwrap();
    let mut w = HFileWriter::new(BufWriter::new(file), "large", opts).unwrap();
    for i in 0..CELLS {
        let (k, v) = cell(i);
        w.append(&k.as_ref(), &v).unwrap();
    }
    let (out, summary) = w.finish().unwrap();
    out.into_inner().unwrap().sync_all().unwrap();
    let write_time = t.elapsed();
    let size = std::fs::metadata(&path).unwrap().len();
    assert_eq!(size, summary.file_size);
    assert_eq!(summary.info.entries, CELLS);

    let t = Instant::now();
    let r = HFileReader::open(std::fs::File::open(&path).unwrap(), "large").unwrap();
    assert!(r.trailer().index_levels >= 2);
    let mut it = r.iter();
    it.seek_to_first().unwrap();
    let mut n = 0u64;
    while let Some(k) = it.key_ref() {
        if n % 9973 == 0 {
            let (want, v) = cell(n);
            assert_eq!(k.to_owned_key(), want);
            assert_eq!(it.value(), v.as_slice());
        }
        n += 1;
        it.next().unwrap();
    }
    assert_eq!(n, CELLS);
    let scan_time = t.elapsed();

    let t = Instant::now();
    let mut rng = StdRng::seed_from_u64(42);
    for _ in 0..10_000 {
        let i = rng.random_range(0..CELLS);
        let (k, v) = cell(i);
        let got = r.get_column(&k.row, &k.qualifier).unwrap();
        assert_eq!(got, vec![(k, v)], "cell {i}");
        // A row past the end, and one between stored rows, are not there.
        let absent = format!("user{:010}x", i / COLUMNS_PER_ROW);
        assert!(r.get_column(absent.as_bytes(), b"f0").unwrap().is_empty());
    }
    let lookup_time = t.elapsed();

    let t = Instant::now();
    let report = verify(&std::fs::File::open(&path).unwrap(), "large").unwrap();
    assert!(report.is_clean(), "{:#?}", report.problems);
    assert_eq!(report.stats.cells, CELLS);
    let verify_time = t.elapsed();

    let mut stdout = std::io::stdout().lock();
    writeln!(
        stdout,
        "large: {CELLS} cells, {size} bytes, {} data blocks, {} index levels; write {write_time:.2?}, \
         scan {scan_time:.2?}, 10k lookups {lookup_time:.2?}, verify {verify_time:.2?}",
        summary.info.data_blocks,
        r.trailer().index_levels,
    )
    .unwrap();
}
