//! Arbitrary cells and writer settings → `HFileWriter` → `HFileReader`: the forward scan must
//! return exactly the cells written, the backward scan the same in reverse, `verify` must find
//! nothing wrong, and every stored row and column must pass the bloom filter and be found by
//! `get_column` and by a seek.
#![no_main]

use std::cmp::Ordering;

use arbitrary::Arbitrary;
use cellar_format::bloom::{BloomConfig, BloomType};
use cellar_format::cell::{CellKey, CellType};
use cellar_format::{verify, CompressionType, HFileReader, HFileWriter, WriterOptions};
use libfuzzer_sys::fuzz_target;

const FAMILY: &[u8] = b"cf";

#[derive(Debug, Arbitrary)]
struct FuzzCell {
    row: Vec<u8>,
    qualifier: Vec<u8>,
    timestamp: u64,
    ty: u8,
    seq: u64,
    value: Vec<u8>,
}

#[derive(Debug, Arbitrary)]
struct Input {
    cells: Vec<FuzzCell>,
    block_size: u16,
    index_block_size: u16,
    restart_interval: u8,
    lz4: bool,
    bloom: u8,
    prefix_len: u8,
    bits_per_key_milli: u16,
    keys_per_chunk: u8,
}

impl FuzzCell {
    /// A key the writer accepts: non-empty row of at most 64 bytes, a real cell type, and an
    /// empty qualifier on family markers.
    fn key(&self) -> CellKey {
        let mut row = self.row.clone();
        row.truncate(64);
        if row.is_empty() {
            row.push(0);
        }
        let ty = CellType::ALL[usize::from(self.ty) % CellType::ALL.len()];
        let mut qualifier = self.qualifier.clone();
        if ty.is_family_marker() {
            qualifier.clear();
        }
        CellKey::new(row, FAMILY, qualifier, self.timestamp, ty, self.seq)
    }
}

fuzz_target!(|input: Input| {
    let mut cells: Vec<(CellKey, Vec<u8>)> = input
        .cells
        .iter()
        .take(2000)
        .map(|c| (c.key(), c.value.clone()))
        .collect();
    // Stable sort then dedup keeps the first value given for a key.
    cells.sort_by(|a, b| a.0.cmp(&b.0));
    cells.dedup_by(|b, a| a.0.cmp(&b.0) == Ordering::Equal);

    let bloom_type = match input.bloom % 4 {
        0 => BloomType::None,
        1 => BloomType::Row,
        2 => BloomType::RowCol,
        _ => BloomType::RowPrefix(u32::from(input.prefix_len.max(1))),
    };
    let mut opts = WriterOptions::new(FAMILY);
    opts.block_size = usize::from(input.block_size % 8192).max(1);
    opts.index_block_size = usize::from(input.index_block_size % 4096);
    opts.restart_interval = usize::from(input.restart_interval % 33);
    opts.compression = if input.lz4 {
        CompressionType::Lz4
    } else {
        CompressionType::None
    };
    opts.bloom = BloomConfig {
        bloom_type,
        bits_per_key_milli: u32::from(input.bits_per_key_milli % 20_000).max(1),
        keys_per_chunk: u32::from(input.keys_per_chunk).max(1),
    };
    opts.created_at_ms = 0;

    let mut w = HFileWriter::new(Vec::new(), "fuzz", opts.clone())
        .unwrap_or_else(|e| panic!("writer rejects {opts:?}: {e}"));
    for (k, v) in &cells {
        w.append(&k.as_ref(), v)
            .unwrap_or_else(|e| panic!("append of a sorted, valid cell fails: {e}"));
    }
    let (file, summary) = w.finish().unwrap_or_else(|e| panic!("finish fails: {e}"));
    assert_eq!(summary.file_size, file.len() as u64);
    assert_eq!(summary.info.entries, cells.len() as u64);

    let report = verify(&file[..], "fuzz").unwrap_or_else(|e| panic!("verify fails: {e}"));
    assert!(
        report.is_clean(),
        "writer output fails verify: {:?}",
        report.problems
    );
    assert_eq!(report.stats.cells, cells.len() as u64);

    let r = HFileReader::open(&file[..], "fuzz").unwrap_or_else(|e| panic!("open fails: {e}"));
    let mut it = r.iter();
    it.seek_to_first().expect("seek_to_first");
    for (k, v) in &cells {
        let got = it
            .key_ref()
            .expect("forward scan ends early")
            .to_owned_key();
        assert_eq!(&got, k, "forward scan key");
        assert_eq!(it.value(), v.as_slice(), "forward scan value");
        it.next().expect("next");
    }
    assert!(!it.valid(), "forward scan yields extra cells");

    it.seek_to_last().expect("seek_to_last");
    for (k, _) in cells.iter().rev() {
        let got = it
            .key_ref()
            .expect("backward scan ends early")
            .to_owned_key();
        assert_eq!(&got, k, "backward scan key");
        it.prev().expect("prev");
    }
    assert!(!it.valid(), "backward scan yields extra cells");

    for (i, (k, _)) in cells.iter().enumerate() {
        assert!(
            r.may_contain_row(&k.row).expect("may_contain_row"),
            "bloom denies a row"
        );
        assert!(
            r.may_contain_column(&k.row, &k.qualifier)
                .expect("may_contain_column"),
            "bloom denies a column"
        );
        it.seek(&k.as_ref()).expect("seek");
        assert_eq!(
            it.key_ref().map(|x| x.to_owned_key()).as_ref(),
            Some(k),
            "seek to a key"
        );
        it.seek_for_prev(&k.as_ref()).expect("seek_for_prev");
        assert_eq!(
            it.key_ref().map(|x| x.to_owned_key()).as_ref(),
            Some(k),
            "seek_for_prev"
        );
        // Seeking to the start of the row lands on the row's first cell.
        it.seek(&CellKey::first_on_row(&k.row).as_ref())
            .expect("seek row");
        let first = cells.iter().find(|(c, _)| c.row == k.row).map(|(c, _)| c);
        assert_eq!(
            it.key_ref().map(|x| x.to_owned_key()).as_ref(),
            first,
            "seek to row"
        );

        if i < 256 {
            let want: Vec<&(CellKey, Vec<u8>)> = cells
                .iter()
                .filter(|(c, _)| c.row == k.row && c.qualifier == k.qualifier)
                .collect();
            let got = r.get_column(&k.row, &k.qualifier).expect("get_column");
            assert_eq!(got.len(), want.len(), "get_column cell count");
            for ((gk, gv), (wk, wv)) in got.iter().zip(want) {
                assert_eq!((gk, gv), (wk, wv), "get_column cell");
            }
        }
    }
});
