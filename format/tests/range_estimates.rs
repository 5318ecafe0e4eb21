//! Size estimates and split points from the index alone (`HFileReader::data_block_for`,
//! `HFileReader::mid_key`): under one, two and three index levels, the block a key maps to is
//! the block a seek reads, offsets grow with keys, and the midkey lies near the middle of the
//! file by bytes.

use cellar_format::{
    BloomType, CellKey, CellType, CompressionType, HFileReader, HFileWriter, KeyRef, WriterOptions,
};

/// `rows` rows of one cell each, values of 100 bytes, in blocks of `block` bytes and index
/// blocks of `index` bytes.
fn file(rows: usize, block: usize, index: usize) -> (Vec<Vec<u8>>, Vec<u8>) {
    let mut o = WriterOptions::new("cf");
    o.block_size = block;
    o.index_block_size = index;
    o.compression = CompressionType::None;
    o.bloom.bloom_type = BloomType::None;
    o.created_at_ms = 0;
    let mut w = HFileWriter::new(Vec::new(), "range", o).unwrap();
    let mut keys = Vec::new();
    for i in 0..rows {
        let row = format!("row{i:06}");
        let k = CellKey::new(row.as_bytes(), "cf", "q", 5, CellType::Put, i as u64 + 1);
        w.append(&k.as_ref(), &[b'v'; 100]).unwrap();
        keys.push(k.encode());
    }
    (keys, w.finish().unwrap().0)
}

#[test]
fn a_key_maps_to_the_block_a_seek_reads_and_offsets_grow() {
    for (rows, index) in [(300, 64 << 10), (2000, 256), (6000, 128)] {
        let (keys, bytes) = file(rows, 1024, index);
        let r = HFileReader::open(bytes.as_slice(), "range").unwrap();
        let levels = r.trailer().index_levels;
        let mut last = 0;
        for (i, k) in keys.iter().enumerate().step_by(7) {
            let key = KeyRef::parse(k).unwrap();
            let h = r.data_block_for(&key).unwrap().expect("a block");
            let mut it = r.iter();
            it.seek(&key).unwrap();
            assert_eq!(
                it.data_block(),
                Some(h),
                "row {i} of {rows}, {levels} levels"
            );
            assert!(h.offset >= last, "offsets go back at row {i}");
            last = h.offset;
        }
        // Before every key: the first block; after every key: none.
        let first = CellKey::first_on_row(b"a").encode();
        let h = r.data_block_for(&KeyRef::parse(&first).unwrap()).unwrap();
        assert_eq!(h.map(|h| h.offset), Some(0));
        let past = CellKey::first_on_row(b"zzz").encode();
        assert_eq!(
            r.data_block_for(&KeyRef::parse(&past).unwrap()).unwrap(),
            None
        );
        if rows == 6000 {
            assert!(levels >= 3, "{levels} index levels");
        }
    }
}

#[test]
fn the_midkey_is_near_the_middle() {
    for (rows, index) in [(1, 64 << 10), (300, 64 << 10), (2000, 256), (6000, 128)] {
        let (keys, bytes) = file(rows, 1024, index);
        let r = HFileReader::open(bytes.as_slice(), "range").unwrap();
        let mid = r.mid_key().unwrap().expect("a midkey");
        let at = keys
            .iter()
            .position(|k| *k == mid)
            .expect("a key of the file");
        let share = at as f64 / rows as f64;
        assert!(
            rows == 1 || (0.45..=0.55).contains(&share),
            "{rows} rows, {} levels: midkey at row {at}",
            r.trailer().index_levels
        );
    }
    let empty = HFileWriter::new(Vec::new(), "e", WriterOptions::new("cf"))
        .unwrap()
        .finish()
        .unwrap()
        .0;
    let r = HFileReader::open(empty.as_slice(), "e").unwrap();
    assert_eq!(r.mid_key().unwrap(), None);
    let k = CellKey::first_on_row(b"x").encode();
    assert_eq!(r.data_block_for(&KeyRef::parse(&k).unwrap()).unwrap(), None);
}
