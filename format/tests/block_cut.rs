//! Where the writer cuts data blocks (`WriterOptions::block_size_deviation`): with a deviation,
//! blocks of small entries end at or below the target size, the size class an allocator
//! serves them from; without one, blocks run over the target by part of an entry (LevelDB's
//! rule). Either way every cell reads back.

mod common;

use cellar_format::{BlockType, BloomType, CompressionType, HFileReader, HFileWriter};
use common::{options, sample_cells, scan_forward, write_file, Layout};

const TARGET: usize = 4096;

/// The file of `cells` with `deviation`, and its data blocks' payload sizes.
fn written(cells: &[common::Cell], deviation: u8) -> (Vec<u8>, Vec<usize>) {
    let mut o = options(
        TARGET,
        64 << 10,
        16,
        CompressionType::Lz4,
        BloomType::Row,
        64,
    );
    o.block_size_deviation = deviation;
    let bytes = write_file(cells, o);
    let sizes = Layout::of(&bytes)
        .of_type(BlockType::Data)
        .iter()
        .map(|b| b.raw.len())
        .collect();
    (bytes, sizes)
}

fn reads_back(bytes: &[u8], cells: &[common::Cell]) {
    let r = HFileReader::open(bytes, "cut").unwrap();
    let got = scan_forward(&r).unwrap();
    assert_eq!(got.len(), cells.len());
    for ((k, v, t), (ck, cv, ct)) in got.iter().zip(cells) {
        assert_eq!(k, &ck.as_ref().encode());
        assert_eq!((v, t), (cv, ct));
    }
}

#[test]
fn a_deviation_keeps_blocks_of_small_entries_within_the_target() {
    // Entries of at most ~150 bytes, far below a tenth of the target.
    let cells = sample_cells(400, 40);
    let (tight, sizes) = written(&cells, 10);
    assert!(sizes.len() > 20, "{} blocks", sizes.len());
    assert!(
        sizes.iter().all(|&s| s <= TARGET),
        "a block over {TARGET}: {sizes:?}"
    );
    // The last block aside, every block is at least 90% full.
    let last = sizes.len() - 1;
    assert!(
        sizes[..last].iter().all(|&s| s * 10 >= TARGET * 9),
        "a block cut early: {sizes:?}"
    );
    reads_back(&tight, &cells);

    let (loose, sizes) = written(&cells, 0);
    assert!(
        sizes.iter().filter(|&&s| s > TARGET).count() > sizes.len() / 2,
        "LevelDB's rule runs over the target: {sizes:?}"
    );
    reads_back(&loose, &cells);
}

#[test]
fn an_entry_bigger_than_the_slack_still_gets_a_block() {
    // Values of a third of the target: a block under 90% full takes one more and runs over,
    // as with no deviation; one alone is never cut before.
    let cells = sample_cells(60, 450);
    let (bytes, sizes) = written(&cells, 10);
    assert!(sizes.iter().all(|&s| s > 0));
    assert!(
        sizes.iter().any(|&s| s > TARGET),
        "a block under 90% full took the entry that ran it over: {sizes:?}"
    );
    reads_back(&bytes, &cells);
}

#[test]
fn a_deviation_over_100_is_refused() {
    let mut o = options(
        TARGET,
        64 << 10,
        16,
        CompressionType::None,
        BloomType::None,
        64,
    );
    o.block_size_deviation = 101;
    let e = HFileWriter::new(Vec::new(), "bad", o).unwrap_err();
    assert!(e.to_string().contains("deviation"), "{e}");
}
