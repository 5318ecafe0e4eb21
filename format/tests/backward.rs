//! Backward iteration: `BlockIter` and `HFileIter` walked with `prev` (and mixed `next`/`prev`
//! walks) visit exactly the forward order reversed, on random blocks and files with various
//! restart intervals, block sizes and index depths. `prev` keeps a stack of the decoded
//! restart interval, so the mixed walks check that the stack never serves a stale entry.

use std::sync::Arc;

use cellar_format::block::{Block, BlockBuilder, BlockIter, DataBlockEncoding};
use cellar_format::{CellKey, CellType, HFileReader, HFileWriter, KeyRef, WriterOptions};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// Sorted, distinct random keys with shared prefixes (so keys are delta-encoded) and values.
fn random_cells(rng: &mut StdRng, n: usize) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut keys: Vec<CellKey> = (0..n)
        .map(|_| {
            let row = format!("r{:04}", rng.random_range(0..(n as u32 / 2 + 1)));
            let q = format!("q{}", rng.random_range(0..4));
            let ts = rng.random_range(1..9u64);
            CellKey::new(row, "cf", q, ts, CellType::Put, rng.random_range(1..50u64))
        })
        .collect();
    keys.sort();
    keys.dedup();
    keys.into_iter()
        .enumerate()
        .map(|(i, k)| (k.encode(), format!("v{i}").into_bytes()))
        .collect()
}

fn build_block(cells: &[(Vec<u8>, Vec<u8>)], interval: usize) -> Arc<Block> {
    let mut b = BlockBuilder::new(interval);
    for (k, v) in cells {
        b.add(k, v, b"");
    }
    Arc::new(Block::new(b.finish()).unwrap())
}

#[test]
fn block_backward_equals_forward_reversed() {
    let mut rng = StdRng::seed_from_u64(1);
    for interval in [1, 2, 3, 7, 16, 64] {
        for n in [0, 1, 2, 15, 16, 17, 200] {
            let cells = random_cells(&mut rng, n);
            let mut it = BlockIter::new(build_block(&cells, interval));
            it.seek_to_last().unwrap();
            let mut back = Vec::new();
            while it.valid() {
                back.push((it.key().to_vec(), it.value().to_vec()));
                it.prev().unwrap();
            }
            back.reverse();
            assert_eq!(back, cells, "interval {interval}, {n} cells");
        }
    }
}

#[test]
fn block_mixed_walks_follow_the_model() {
    let mut rng = StdRng::seed_from_u64(2);
    for interval in [1, 3, 16] {
        let cells = random_cells(&mut rng, 150);
        let mut it = BlockIter::new(build_block(&cells, interval));
        for _ in 0..20 {
            let mut pos: Option<usize> = if rng.random_bool(0.5) {
                it.seek_to_last().unwrap();
                cells.len().checked_sub(1)
            } else {
                let i = rng.random_range(0..cells.len());
                let k = KeyRef::parse(&cells[i].0).unwrap();
                it.seek_for_prev(&k).unwrap();
                Some(i)
            };
            for _ in 0..60 {
                let Some(p) = pos else { break };
                assert_eq!(it.key(), cells[p].0.as_slice());
                assert_eq!(it.value(), cells[p].1.as_slice());
                if rng.random_bool(0.7) {
                    it.prev().unwrap();
                    pos = p.checked_sub(1);
                } else {
                    it.next().unwrap();
                    pos = (p + 1 < cells.len()).then_some(p + 1);
                }
                assert_eq!(it.valid(), pos.is_some());
            }
        }
    }
}

fn write_file(cells: &[(Vec<u8>, Vec<u8>)], block: usize, interval: usize) -> Vec<u8> {
    write_file_as(
        cells,
        block,
        interval,
        WriterOptions::new("cf").data_block_encoding,
    )
}

fn write_file_as(
    cells: &[(Vec<u8>, Vec<u8>)],
    block: usize,
    interval: usize,
    encoding: DataBlockEncoding,
) -> Vec<u8> {
    let mut o = WriterOptions::new("cf");
    o.block_size = block;
    o.index_block_size = 256;
    o.restart_interval = interval;
    o.data_block_encoding = encoding;
    let mut w = HFileWriter::new(Vec::new(), "b", o).unwrap();
    for (k, v) in cells {
        w.append(&KeyRef::parse(k).unwrap(), v).unwrap();
    }
    w.finish().unwrap().0
}

#[test]
fn file_backward_equals_forward_reversed() {
    let mut rng = StdRng::seed_from_u64(3);
    for (n, block, interval) in [(0, 256, 4), (1, 64, 1), (500, 200, 3), (2000, 1024, 16)] {
        let cells = random_cells(&mut rng, n);
        let r = HFileReader::open(write_file(&cells, block, interval), "b").unwrap();
        let mut it = r.iter();
        it.seek_to_first().unwrap();
        let mut fwd = Vec::new();
        while it.valid() {
            fwd.push((it.key().to_vec(), it.value().to_vec()));
            it.next().unwrap();
        }
        assert_eq!(fwd, cells);
        it.seek_to_last().unwrap();
        let mut back = Vec::new();
        while it.valid() {
            back.push((it.key().to_vec(), it.value().to_vec()));
            it.prev().unwrap();
        }
        back.reverse();
        assert_eq!(
            back, cells,
            "{n} cells, blocks of {block}, interval {interval}"
        );
        // From the middle: seek_for_prev then walk back to the start, turning now and then.
        for _ in 0..10 {
            let Some(i) = (!cells.is_empty()).then(|| rng.random_range(0..cells.len())) else {
                break;
            };
            it.seek_for_prev(&KeyRef::parse(&cells[i].0).unwrap())
                .unwrap();
            let mut pos = Some(i);
            while let Some(p) = pos {
                assert_eq!(it.key(), cells[p].0.as_slice());
                if rng.random_bool(0.1) {
                    it.next().unwrap();
                    pos = (p + 1 < cells.len()).then_some(p + 1);
                } else {
                    it.prev().unwrap();
                    pos = p.checked_sub(1);
                }
                assert_eq!(it.valid(), pos.is_some());
            }
        }
    }
}

/// `HFileIter::stage` then `seek_staged` (the batched Get's split seek) lands where `seek`
/// does, for every key of a file, for rows between and around them, in files of one and of
/// several index levels; between the two halves the cursor is not valid, and the prefetch
/// hints on the staged block (fences built or not) change nothing.
#[test]
fn a_staged_seek_lands_where_a_seek_does() {
    let mut rng = StdRng::seed_from_u64(4);
    for (n, block, interval) in [(1, 64, 1), (500, 200, 3), (2000, 1024, 16)] {
        let cells = random_cells(&mut rng, n);
        let r = HFileReader::open(write_file(&cells, block, interval), "s").unwrap();
        let mut rows: Vec<Vec<u8>> = cells
            .iter()
            .map(|(k, _)| KeyRef::parse(k).unwrap().row.to_vec())
            .collect();
        rows.extend([
            b"a".to_vec(),
            b"r".to_vec(),
            b"r0000x".to_vec(),
            b"zz".to_vec(),
        ]);
        let take = |it: &mut cellar_format::HFileIter<'_, Vec<u8>>| {
            let mut got = Vec::new();
            while it.valid() && got.len() < 3 {
                got.push(it.key().to_vec());
                it.next().unwrap();
            }
            got
        };
        // Twice: the second pass searches blocks whose fences the first built.
        for _ in 0..2 {
            for (i, row) in rows.iter().enumerate() {
                let keys = [
                    KeyRef::first_on_row(row),
                    KeyRef::parse(&cells[i.min(cells.len() - 1)].0).unwrap(),
                ];
                for target in &keys {
                    let mut plain = r.iter();
                    plain.seek(target).unwrap();
                    let mut staged = r.iter();
                    staged.stage(target).unwrap();
                    assert!(!staged.valid());
                    if let Some(b) = staged.staged_block() {
                        b.prefetch_header();
                        b.prefetch_fences();
                        b.prefetch_interval(target, 256);
                    }
                    staged.seek_staged(target).unwrap();
                    assert_eq!(take(&mut staged), take(&mut plain), "{target:?}");
                }
            }
        }
    }
}

/// `HFileIter::run_forward` (a scan's loop inside each data block) hands over exactly the
/// cells of `current` and `next` in a loop, in all three data block encodings and across
/// blocks, and stops where its callback says: the cursor is then on the refused cell, and a
/// later run picks up there. Also from the middle (after a seek) and after a backward walk.
#[test]
fn run_forward_hands_over_what_next_walks() {
    let mut rng = StdRng::seed_from_u64(5);
    for encoding in [
        DataBlockEncoding::Prefix,
        DataBlockEncoding::Diff,
        DataBlockEncoding::AnchoredDiff,
    ] {
        for (n, block, interval) in [(0, 256, 4), (1, 64, 1), (500, 200, 3), (2000, 1024, 16)] {
            let cells = random_cells(&mut rng, n);
            let bytes = write_file_as(&cells, block, interval, encoding);
            let r = HFileReader::open(bytes, "r").unwrap();
            let mut it = r.iter();
            let what = format!("{encoding:?}, {n} cells, blocks of {block}, interval {interval}");
            for round in 0..6 {
                // Start: the first cell, a random one by seek, or one reached walking back.
                let mut pos = match round {
                    0 => {
                        it.seek_to_first().unwrap();
                        0
                    }
                    _ if cells.is_empty() => break,
                    1..=3 => {
                        let i = rng.random_range(0..cells.len());
                        it.seek(&KeyRef::parse(&cells[i].0).unwrap()).unwrap();
                        i
                    }
                    _ => {
                        it.seek_to_last().unwrap();
                        let back = rng.random_range(0..cells.len().min(300));
                        for _ in 0..back {
                            it.prev().unwrap();
                        }
                        cells.len() - 1 - back
                    }
                };
                // Runs that each take a random number of cells, then refuse one.
                while pos < cells.len() {
                    let take = rng.random_range(0..400usize);
                    let mut got = Vec::new();
                    it.run_forward(&mut |e| {
                        if got.len() == take {
                            return false;
                        }
                        got.push((e.key.to_vec(), e.value.to_vec()));
                        true
                    })
                    .unwrap();
                    let end = (pos + take).min(cells.len());
                    assert_eq!(got.as_slice(), &cells[pos..end], "{what}, from {pos}");
                    pos = end;
                    assert_eq!(it.valid(), pos < cells.len(), "{what}, at {pos}");
                    if pos < cells.len() {
                        assert_eq!(it.key(), cells[pos].0.as_slice(), "{what}, at {pos}");
                    }
                }
                // Exhausted: a run hands over nothing.
                it.run_forward(&mut |_| panic!("a cell past the end ({what})"))
                    .unwrap();
            }
        }
    }
}
