//! Property tests of the block-level codecs: keyed blocks against a `BTreeSet` model, index
//! entry values, the file-info block, and the bloom filter's no-false-negative promise.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use cellar_format::block::{Block, BlockBuilder, BlockHandle, BlockIter, DataBlockEncoding};
use cellar_format::bloom::{
    build_chunk, chunk_may_contain, hash_key, probes_for, BloomBuilder, BloomConfig,
};
use cellar_format::file_info::TYPE_COUNT_NAMES;
use cellar_format::index::IndexValue;
use cellar_format::{BloomType, CellKey, CellType, CompressionType, FileInfo, HFileReader, KeyRef};
use proptest::prelude::*;

fn cell_type() -> impl Strategy<Value = CellType> {
    prop::sample::select(CellType::ALL.to_vec())
}

/// A timestamp or sequence number: mostly small (so keys collide and differences are tiny),
/// sometimes anywhere in `u64` (so DIFF's wrapping differences reach both extremes).
fn stamp() -> impl Strategy<Value = u64> {
    prop_oneof![4 => 0u64..4, 1 => any::<u64>(), 1 => Just(u64::MAX)]
}

/// Keys over a small alphabet, so that rows and qualifiers share prefixes and collide.
fn cell_key() -> impl Strategy<Value = CellKey> {
    (
        prop::collection::vec(prop::sample::select(b"ab\x00\xff".to_vec()), 1..6),
        prop::collection::vec(prop::sample::select(b"xy".to_vec()), 0..4),
        stamp(),
        cell_type(),
        stamp(),
    )
        .prop_map(|(row, q, ts, ty, seq)| CellKey::new(row, "cf", q, ts, ty, seq))
}

/// A search target: a stored-looking key, or the first key of a row or column.
fn target() -> impl Strategy<Value = CellKey> {
    prop_oneof![
        cell_key(),
        cell_key().prop_map(|k| CellKey::first_on_row(&k.row)),
        cell_key().prop_map(|k| CellKey::first_on_column(&k.row, &k.family, &k.qualifier)),
    ]
}

fn encoding() -> impl Strategy<Value = DataBlockEncoding> {
    prop::sample::select(vec![DataBlockEncoding::Prefix, DataBlockEncoding::Diff])
}

fn build(keys: &BTreeSet<CellKey>, interval: usize, encoding: DataBlockEncoding) -> Arc<Block> {
    let mut b = BlockBuilder::with_encoding(interval, encoding);
    for (i, k) in keys.iter().enumerate() {
        let tags: &[u8] = if i % 3 == 0 { b"tg" } else { b"" };
        b.add(&k.encode(), format!("v{i}").as_bytes(), tags);
    }
    assert_eq!(b.len(), keys.len());
    Arc::new(Block::with_encoding(b.finish(), encoding).unwrap())
}

fn current(it: &BlockIter) -> Option<CellKey> {
    it.valid()
        .then(|| KeyRef::parse(it.key()).unwrap().to_owned_key())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn keyed_block_matches_a_btreeset(
        keys in prop::collection::btree_set(cell_key(), 0..120),
        interval in 1usize..20,
        targets in prop::collection::vec(target(), 1..40),
        encoding in encoding(),
    ) {
        let block = build(&keys, interval, encoding);
        let want: Vec<&CellKey> = keys.iter().collect();
        let mut it = BlockIter::new(block);

        it.seek_to_first().unwrap();
        let mut fwd = Vec::new();
        while it.valid() {
            let i = fwd.len();
            prop_assert_eq!(it.value().to_vec(), format!("v{i}").into_bytes());
            prop_assert_eq!(it.tags(), if i % 3 == 0 { &b"tg"[..] } else { &b""[..] });
            fwd.push(current(&it).unwrap());
            it.next().unwrap();
        }
        prop_assert_eq!(fwd.iter().collect::<Vec<_>>(), want.clone());

        it.seek_to_last().unwrap();
        let mut back = Vec::new();
        while it.valid() {
            back.push(current(&it).unwrap());
            it.prev().unwrap();
        }
        back.reverse();
        prop_assert_eq!(back.iter().collect::<Vec<_>>(), want);

        for t in targets.iter().chain(keys.iter()) {
            it.seek(&t.as_ref()).unwrap();
            prop_assert_eq!(current(&it), keys.range(t.clone()..).next().cloned(), "seek");
            // A step back from a sought position lands on the predecessor.
            if it.valid() {
                it.prev().unwrap();
                prop_assert_eq!(current(&it), keys.range(..t.clone()).next_back().cloned());
            }
            it.seek_for_prev(&t.as_ref()).unwrap();
            prop_assert_eq!(
                current(&it),
                keys.range(..=t.clone()).next_back().cloned(),
                "seek_for_prev"
            );
            if it.valid() {
                it.next().unwrap();
                prop_assert_eq!(
                    current(&it),
                    keys.range((std::ops::Bound::Excluded(t.clone()), std::ops::Bound::Unbounded)).next().cloned()
                );
            }
        }
    }

    #[test]
    fn index_value_round_trips(
        offset in any::<u64>(),
        stored_len in any::<u64>(),
        a in any::<u64>(),
        b in any::<u64>(),
        first_key in prop::collection::vec(any::<u8>(), 0..300),
    ) {
        let v = IndexValue {
            handle: BlockHandle { offset, stored_len },
            min_ts: a.min(b),
            max_ts: a.max(b),
            first_key: &first_key,
        };
        let mut buf = vec![0xaa; 3]; // encode clears its output
        v.encode(&mut buf);
        prop_assert_eq!(IndexValue::decode(&buf), Ok(v));
        // Every strict prefix is truncated, one more byte is trailing garbage.
        for n in 0..buf.len() {
            prop_assert!(IndexValue::decode(&buf[..n]).is_err());
        }
        buf.push(0);
        prop_assert!(IndexValue::decode(&buf).is_err());
    }

    #[test]
    fn file_info_round_trips(
        nums in prop::collection::vec(any::<u64>(), 17),
        small in prop::collection::vec(any::<u32>(), 4),
        counts in prop::collection::vec(any::<u64>(), 5),
        first_key in prop::option::of(prop::collection::vec(any::<u8>(), 0..64)),
        last_key in prop::option::of(prop::collection::vec(any::<u8>(), 0..64)),
        compression in prop::option::of(prop::sample::select(vec![CompressionType::None, CompressionType::Lz4])),
        bloom in prop_oneof![
            Just(BloomType::None),
            Just(BloomType::Row),
            Just(BloomType::RowCol),
            (1u32..1000).prop_map(BloomType::RowPrefix),
        ],
        encoding in "[A-Z_]{0,12}",
        family in prop::collection::vec(any::<u8>(), 0..20),
        major in any::<bool>(),
        extra in prop::collection::btree_map("x-[a-z0-9_.]{0,16}", prop::collection::vec(any::<u8>(), 0..40), 0..8),
    ) {
        let mut type_counts = [0u64; 5];
        type_counts.copy_from_slice(&counts);
        let fi = FileInfo {
            entries: nums[0],
            type_counts,
            first_key,
            last_key,
            min_timestamp: nums[1],
            max_timestamp: nums[2],
            max_seq: nums[3],
            raw_key_bytes: nums[4],
            raw_value_bytes: nums[5],
            data_raw_bytes: nums[6],
            data_stored_bytes: nums[7],
            data_blocks: nums[8],
            index_blocks: nums[9],
            bloom_chunks: nums[10],
            compression,
            block_size: small[0],
            restart_interval: small[1],
            bloom_type: bloom,
            bloom_bits_per_key_milli: small[2],
            data_block_encoding: encoding,
            family,
            created_at_ms: nums[11],
            major_compaction: major,
            format_version: small[3],
            extra: extra.clone(),
        };
        let buf = fi.encode();
        let back = FileInfo::decode(&buf).unwrap();
        prop_assert_eq!(&back, &fi);
        // The raw entries are sorted, unique, and hold every extra entry as given.
        let entries: BTreeMap<String, Vec<u8>> = FileInfo::decode_entries(&buf).unwrap();
        for (k, v) in &extra {
            prop_assert_eq!(entries.get(k), Some(v));
        }
        for name in TYPE_COUNT_NAMES {
            prop_assert!(entries.contains_key(name));
        }
        // Truncation anywhere is an error, never a panic.
        for n in (0..buf.len()).step_by(7) {
            prop_assert!(FileInfo::decode(&buf[..n]).is_err());
        }
    }

    #[test]
    fn bloom_chunk_has_no_false_negatives(
        keys in prop::collection::btree_set(prop::collection::vec(any::<u8>(), 0..24), 1..400),
        bits_per_key_milli in 1000u32..25_000,
    ) {
        let probes = probes_for(bits_per_key_milli);
        let hashes: Vec<u64> = keys.iter().map(|k| hash_key(k)).collect();
        let bits = build_chunk(&hashes, bits_per_key_milli, probes);
        prop_assert!(!bits.is_empty() && bits.len() % 64 == 0);
        for h in hashes {
            prop_assert!(chunk_may_contain(&bits, probes, h));
        }
    }

    #[test]
    fn bloom_builder_chunks_cover_every_key(
        rows in prop::collection::btree_set(prop::collection::vec(1u8..8, 1..6), 1..200),
        keys_per_chunk in 1u32..50,
        bits_per_key_milli in 2000u32..15_000,
    ) {
        let config = BloomConfig {
            bloom_type: BloomType::Row,
            bits_per_key_milli,
            keys_per_chunk,
        };
        let mut b = BloomBuilder::new(config).unwrap();
        let mut chunks = Vec::new();
        for r in &rows {
            // Two cells per row: the builder must count the row once.
            chunks.extend(b.add(r, b"q1"));
            chunks.extend(b.add(r, b"q2"));
        }
        chunks.extend(b.finish());
        let total: u32 = chunks.iter().map(|c| c.num_keys).sum();
        prop_assert_eq!(total as usize, rows.len());
        for r in &rows {
            let c = chunks
                .iter()
                .find(|c| c.first_key.as_slice() <= r.as_slice() && r.as_slice() <= c.last_key.as_slice());
            prop_assert!(c.is_some(), "no chunk covers {:?}", r);
            prop_assert!(chunk_may_contain(&c.unwrap().bits, b.num_probes(), hash_key(r)));
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// Through a whole file: every stored row passes `may_contain_row`, whatever the bloom's
    /// chunking.
    #[test]
    fn file_bloom_has_no_false_negatives(
        rows in prop::collection::btree_set("[a-d]{1,6}", 1..150),
        keys_per_chunk in 1u32..40,
        bloom in prop_oneof![Just(BloomType::Row), Just(BloomType::RowCol), (1u32..4).prop_map(BloomType::RowPrefix)],
    ) {
        let cells: Vec<common::Cell> = rows
            .iter()
            .flat_map(|r| {
                ["a", "b"].map(|q| (CellKey::new(r.as_bytes(), "cf", q, 1, CellType::Put, 1), b"v".to_vec(), Vec::new()))
            })
            .collect();
        let bytes = common::write_file(
            &cells,
            common::options(128, 256, 4, CompressionType::None, bloom, keys_per_chunk),
        );
        let r = HFileReader::open(bytes.as_slice(), "bloom").unwrap();
        for (k, _, _) in &cells {
            prop_assert!(r.may_contain_row(&k.row).unwrap());
            prop_assert!(r.may_contain_column(&k.row, &k.qualifier).unwrap());
        }
        prop_assert!(cellar_format::verify(bytes.as_slice(), "bloom").unwrap().is_clean());
    }
}
