//! The writer stops trying to compress data blocks that do not compress
//! (`compression::CompressionGate`, SPEC.md §4.2): after a run of incompressible blocks the
//! next ones are stored raw untried, until a retry compresses again. What a file holds is
//! still a valid file with every cell, and the blocks stored raw untried are bounded.

mod common;

use cellar_format::compression::compress;
use cellar_format::{BlockType, BloomType, CellKey, CellType, CompressionType, HFileReader};
use common::{options, scan_forward, write_file, Layout, XorShift};

#[test]
fn compressible_blocks_after_incompressible_ones_compress_again_within_the_skip() {
    let mut rng = XorShift(0x600d_5eed);
    // ~5 cells of 200-byte values per 1 KiB block: about 40 blocks of random values, then
    // about 100 of text.
    let cells: Vec<_> = (0..700)
        .map(|i| {
            let value = if i < 200 {
                rng.bytes(200)
            } else {
                format!("value {i} of a row whose text repeats. ")
                    .repeat(8)
                    .into_bytes()[..200]
                    .to_vec()
            };
            let key = CellKey::new(format!("row{i:05}"), "cf", "q", 7, CellType::Put, i + 1);
            (key, value, Vec::new())
        })
        .collect();
    let o = options(1024, 4096, 16, CompressionType::Lz4, BloomType::Row, 64);
    let bytes = write_file(&cells, o);
    let layout = Layout::of(&bytes);
    let data = layout.of_type(BlockType::Data);
    // Whether each block would compress, as the writer judges it (LZ4 saving 1/8).
    let mut scratch = Vec::new();
    let would: Vec<bool> = data
        .iter()
        .map(|b| compress(CompressionType::Lz4, &b.raw, &mut scratch) == CompressionType::Lz4)
        .collect();
    let stored: Vec<bool> = data
        .iter()
        .map(|b| b.env.compression == CompressionType::Lz4)
        .collect();
    let first = would
        .iter()
        .position(|&w| w)
        .expect("some block compresses");
    assert!(first >= 30, "{first} incompressible blocks first");
    assert!(would[..first].iter().all(|&w| !w));
    assert!(
        would[first..].iter().all(|&w| w),
        "the text blocks compress"
    );
    // None of the incompressible blocks is stored compressed, as before.
    assert!(stored[..first].iter().all(|&s| !s));
    // The first text blocks fall in a skip and are stored raw: at least one (the writer did
    // skip), at most the longest skip; from the first compressed one on, every one is.
    let raw_run = stored[first..]
        .iter()
        .position(|&s| s)
        .expect("text compresses again");
    assert!(
        (1..=64).contains(&raw_run),
        "{raw_run} compressible blocks stored raw"
    );
    assert!(stored[first + raw_run..].iter().all(|&s| s));
    // Every cell reads back.
    let r = HFileReader::open(bytes.as_slice(), "gate").unwrap();
    let got = scan_forward(&r).unwrap();
    assert_eq!(got.len(), cells.len());
    for ((k, v, _), (ck, cv, _)) in got.iter().zip(&cells) {
        assert_eq!(k, &ck.as_ref().encode());
        assert_eq!(v, cv);
    }
}
