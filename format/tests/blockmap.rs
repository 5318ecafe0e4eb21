//! The block map (`blockmap.rs`): a reader whose cache grants it finds a seek's data block
//! in its map instead of descending the index, and every cursor movement answers exactly as
//! through the index. Files of random rows — lengths 0 to 20 bytes, any byte value, wide rows
//! over several blocks, rows sharing long prefixes — in tiny blocks under one, two and three
//! index levels, in every data block encoding, are read by two readers over the same bytes:
//! one whose cache grants the map, one whose cache declines it.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use cellar_format::block::DataBlockEncoding;
use cellar_format::bloom::BloomConfig;
use cellar_format::reader::{BlockCache, CachedBlock, ReaderOptions};
use cellar_format::{
    BlockType, BloomType, CellKey, CellType, CompressionType, HFileIter, HFileReader, HFileWriter,
    KeyRef, WriterOptions,
};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// A map cache that grants the block map (or not) and keeps count of what it charged.
#[derive(Debug)]
struct Cache {
    blocks: Mutex<HashMap<u64, CachedBlock>>,
    maps: bool,
    charged: AtomicU64,
}

impl Cache {
    fn new(maps: bool) -> Arc<Cache> {
        Arc::new(Cache {
            blocks: Mutex::default(),
            maps,
            charged: AtomicU64::new(0),
        })
    }
}

impl BlockCache for Cache {
    fn get(&self, _id: u64, offset: u64, _ty: BlockType) -> Option<CachedBlock> {
        self.blocks.lock().unwrap().get(&offset).cloned()
    }
    fn insert(&self, _id: u64, offset: u64, _ty: BlockType, block: CachedBlock) {
        self.blocks.lock().unwrap().insert(offset, block);
    }
    fn pin_bytes(&self, bytes: u64) -> Option<u64> {
        self.maps.then(|| {
            self.charged.fetch_add(bytes, Ordering::Relaxed);
            bytes
        })
    }
    fn unpin(&self, bytes: u64) {
        self.charged.fetch_sub(bytes, Ordering::Relaxed);
    }
}

fn open<'a>(bytes: &'a [u8], cache: &Arc<Cache>) -> HFileReader<&'a [u8]> {
    let opts = ReaderOptions {
        verify_checksums: true,
        cache: Some((cache.clone() as Arc<dyn BlockCache>, 1)),
    };
    HFileReader::open_with(bytes, "map", opts).unwrap()
}

/// A random row: drawn from a few shapes so that rows share prefixes longer than a word,
/// differ only past 8 bytes, and include the bytes 0x00 and 0xff.
fn row(rng: &mut StdRng) -> Vec<u8> {
    let mut r = any_row(rng);
    if r.is_empty() {
        r.push(0);
    }
    r
}

fn any_row(rng: &mut StdRng) -> Vec<u8> {
    match rng.random_range(0..4) {
        0 => (0..rng.random_range(0..=6)).map(|_| rng.random()).collect(),
        1 => format!("{:016}", rng.random_range(0..5_000u32)).into_bytes(),
        2 => {
            let mut r = b"user:0000000000".to_vec();
            r.extend((0..rng.random_range(0..=5)).map(|_| rng.random_range(0..3u8) * 0x7f));
            r
        }
        _ => {
            let mut r = vec![0xffu8; rng.random_range(0..=3)];
            r.extend((0..rng.random_range(0..=4)).map(|_| rng.random::<u8>()));
            r
        }
    }
}

fn cells(rng: &mut StdRng, n: usize) -> BTreeMap<CellKey, Vec<u8>> {
    let mut m = BTreeMap::new();
    while m.len() < n {
        let r = row(rng);
        // One row in ten is wide: many columns, over several tiny blocks.
        let width = if rng.random_range(0..10) == 0 { 40 } else { 2 };
        for q in 0..rng.random_range(1..=width) {
            let k = CellKey::new(
                r.clone(),
                "cf",
                format!("q{q}"),
                rng.random_range(1..50u64),
                CellType::Put,
                rng.random_range(1..1000u64),
            );
            let v: Vec<u8> = (0..rng.random_range(0..24)).map(|_| rng.random()).collect();
            m.insert(k, v);
        }
    }
    m
}

fn write(
    m: &BTreeMap<CellKey, Vec<u8>>,
    block: usize,
    index: usize,
    enc: DataBlockEncoding,
) -> Vec<u8> {
    let mut o = WriterOptions::new("cf");
    o.block_size = block;
    o.index_block_size = index;
    o.data_block_encoding = enc;
    o.compression = CompressionType::Lz4;
    o.bloom = BloomConfig {
        bloom_type: BloomType::Row,
        bits_per_key_milli: 10_000,
        keys_per_chunk: 64,
    };
    o.created_at_ms = 0;
    let mut w = HFileWriter::new(Vec::new(), "map", o).unwrap();
    for (k, v) in m {
        w.append(&k.as_ref(), v).unwrap();
    }
    w.finish().unwrap().0
}

fn at<R: cellar_format::ReadAt>(it: &HFileIter<'_, R>) -> Option<(Vec<u8>, Vec<u8>)> {
    it.valid().then(|| (it.key().to_vec(), it.value().to_vec()))
}

/// Both cursors after `f`, then after each of three steps in `forward`'s direction.
fn same_walk<'r, R: cellar_format::ReadAt>(
    a: &mut HFileIter<'r, R>,
    b: &mut HFileIter<'r, R>,
    f: impl Fn(&mut HFileIter<'r, R>),
    forward: bool,
    ctx: &str,
) {
    f(a);
    f(b);
    for step in 0..4 {
        assert_eq!(at(a), at(b), "{ctx}, step {step}");
        for it in [&mut *a, &mut *b] {
            if forward {
                it.next().unwrap();
            } else {
                it.prev().unwrap();
            }
        }
    }
}

fn check(bytes: &[u8], m: &BTreeMap<CellKey, Vec<u8>>, rng: &mut StdRng, ctx: &str) {
    let (with, without) = (Cache::new(true), Cache::new(false));
    let mapped = open(bytes, &with);
    let plain = open(bytes, &without);
    let keys: Vec<&CellKey> = m.keys().collect();
    // Random targets: stored keys, first keys of stored and of random rows, keys between.
    let mut targets: Vec<CellKey> = Vec::new();
    for _ in 0..400 {
        let k = keys[rng.random_range(0..keys.len())];
        targets.push(k.clone());
        targets.push(CellKey::first_on_row(&k.row));
        targets.push(CellKey::first_on_row(&row(rng)));
        let mut after = k.clone();
        after.seq += 1;
        targets.push(after);
    }
    targets.push(CellKey::first_on_row(b""));
    targets.push(CellKey::first_on_row(&[0xffu8; 24]));
    for (n, t) in targets.iter().enumerate() {
        let t = t.as_ref();
        let (mut a, mut b) = (mapped.iter(), plain.iter());
        let ctx = format!("{ctx}, target #{n} {t:?}");
        same_walk(
            &mut a,
            &mut b,
            |it| it.seek(&t).unwrap(),
            true,
            &format!("{ctx} seek"),
        );
        same_walk(
            &mut a,
            &mut b,
            |it| it.seek(&t).unwrap(),
            false,
            &format!("{ctx} seek, back"),
        );
        same_walk(
            &mut a,
            &mut b,
            |it| it.seek_for_prev(&t).unwrap(),
            false,
            &format!("{ctx} seek_for_prev"),
        );
        same_walk(
            &mut a,
            &mut b,
            |it| {
                it.stage(&t).unwrap();
                it.seek_staged(&t).unwrap();
            },
            true,
            &format!("{ctx} staged"),
        );
        // What the model says a seek finds.
        let want = m.range(t.to_owned_key()..).next().map(|(k, _)| k.encode());
        a.seek(&t).unwrap();
        assert_eq!(a.valid().then(|| a.key().to_vec()), want, "{ctx}: model");
    }
    assert!(mapped.block_map_bytes() > 0, "{ctx}: the map was built");
    assert_eq!(plain.block_map_bytes(), 0, "{ctx}: declined");
    // Whole walks from either end: through the map once it is built (each step into a
    // block asks for its neighbour's lines ahead), through the index without one.
    let want: Vec<(Vec<u8>, Vec<u8>)> = m.iter().map(|(k, v)| (k.encode(), v.clone())).collect();
    for r in [&mapped, &plain] {
        let mut it = r.iter();
        let mut got = Vec::new();
        it.seek_to_first().unwrap();
        while let Some(c) = at(&it) {
            got.push(c);
            it.next().unwrap();
        }
        assert_eq!(got, want, "{ctx}: forward walk");
        got.clear();
        it.seek_to_last().unwrap();
        while let Some(c) = at(&it) {
            got.push(c);
            it.prev().unwrap();
        }
        got.reverse();
        assert_eq!(got, want, "{ctx}: backward walk");
        // Turning part way and at the last cell (a cursor past either end stays there).
        if want.len() > 1 {
            it.seek_to_first().unwrap();
            let k = rng.random_range(0..want.len() - 1);
            for _ in 0..k {
                it.next().unwrap();
            }
            it.next().unwrap();
            it.prev().unwrap();
            assert_eq!(at(&it).as_ref(), want.get(k), "{ctx}: turned back");
            it.seek_to_last().unwrap();
            it.prev().unwrap();
            it.next().unwrap();
            assert_eq!(at(&it).as_ref(), want.last(), "{ctx}: turned at the end");
        }
    }
    assert!(with.charged.load(Ordering::Relaxed) >= mapped.block_map_bytes() as u64);
    drop(mapped);
    assert_eq!(
        with.charged.load(Ordering::Relaxed),
        0,
        "{ctx}: given back on drop"
    );
}

#[test]
fn seeks_through_the_block_map_land_where_the_index_descent_lands() {
    let mut rng = StdRng::seed_from_u64(0x0b10_c3a9);
    for enc in [
        DataBlockEncoding::Prefix,
        DataBlockEncoding::Diff,
        DataBlockEncoding::AnchoredDiff,
    ] {
        // One index level, two, three or more.
        for (block, index) in [(256, 1 << 20), (128, 512), (64, 160)] {
            let m = cells(&mut rng, 1500);
            let bytes = write(&m, block, index, enc);
            check(
                &bytes,
                &m,
                &mut rng,
                &format!("{enc:?}, blocks {block}, index {index}"),
            );
        }
    }
}

#[test]
fn a_file_of_one_row_and_one_block_maps_too() {
    let mut rng = StdRng::seed_from_u64(7);
    let mut m = BTreeMap::new();
    m.insert(
        CellKey::new("only", "cf", "q", 1, CellType::Put, 1),
        b"v".to_vec(),
    );
    let bytes = write(&m, 4096, 4096, DataBlockEncoding::AnchoredDiff);
    check(&bytes, &m, &mut rng, "one cell");
}

#[test]
fn keyref_targets_of_any_row_agree() {
    // Rows that are prefixes of one another and end in zero bytes: the words' zero padding.
    let mut m = BTreeMap::new();
    for (i, r) in [
        &b"a"[..],
        b"a\0",
        b"a\0\0",
        b"ab",
        b"abcdefghij",
        b"abcdefghij\0",
        b"abcdefghik",
    ]
    .into_iter()
    .enumerate()
    {
        for q in 0..30 {
            m.insert(
                CellKey::new(r, "cf", format!("q{q:02}"), 5, CellType::Put, i as u64 + 1),
                vec![b'x'; 10],
            );
        }
    }
    // One cell of a row past the shared prefix: alone in the last block, whose separator
    // the map leaves out, so a target past the prefix must still find it.
    m.insert(
        CellKey::new("b", "cf", "q", 5, CellType::Put, 9),
        b"last".to_vec(),
    );
    let bytes = write(&m, 64, 4096, DataBlockEncoding::AnchoredDiff);
    let with = Cache::new(true);
    let without = Cache::new(false);
    let (mapped, plain) = (open(&bytes, &with), open(&bytes, &without));
    for r in [
        &b""[..],
        b"a",
        b"a\0",
        b"a\0\0\0",
        b"aa",
        b"ab",
        b"abcdefghij",
        b"abcdefghij\0\0",
        b"abcdefghik",
        b"a\xff",
        b"b",
        b"c",
    ] {
        for _ in 0..3 {
            let (mut a, mut b) = (mapped.iter(), plain.iter());
            let t = KeyRef::first_on_row(r);
            a.seek(&t).unwrap();
            b.seek(&t).unwrap();
            assert_eq!(at(&a), at(&b), "{r:?}");
        }
    }
    assert!(mapped.block_map_bytes() > 0);
}
