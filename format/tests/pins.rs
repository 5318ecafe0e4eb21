//! A reader holds the bloom chunks and the root's child index blocks itself once its cache
//! lets it pin them (reader.rs, "Pinned meta blocks"): later lookups of those blocks skip the
//! cache, answers stay the same, and the bytes the cache charged go back when the reader drops.

mod common;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use cellar_format::reader::{BlockCache, CachedBlock, ReaderOptions};
use cellar_format::{BlockType, HFileReader};
use common::{sample_file, Layout};

/// A map cache that counts lookups by type and pins what it is offered while `pins` is set.
#[derive(Debug, Default)]
struct Counting {
    blocks: Mutex<HashMap<u64, CachedBlock>>,
    gets: Mutex<HashMap<BlockType, u64>>,
    pins: AtomicBool,
    /// Bytes pinned and not given back.
    charged: AtomicU64,
    pinned_blocks: AtomicU64,
}

impl Counting {
    fn gets(&self, ty: BlockType) -> u64 {
        self.gets.lock().unwrap().get(&ty).copied().unwrap_or(0)
    }
}

impl BlockCache for Counting {
    fn get(&self, _id: u64, offset: u64, ty: BlockType) -> Option<CachedBlock> {
        *self.gets.lock().unwrap().entry(ty).or_default() += 1;
        self.blocks.lock().unwrap().get(&offset).cloned()
    }
    fn insert(&self, _id: u64, offset: u64, _ty: BlockType, block: CachedBlock) {
        self.blocks.lock().unwrap().insert(offset, block);
    }
    fn pin(&self, ty: BlockType, block: &CachedBlock) -> Option<u64> {
        assert!(
            matches!(ty, BlockType::BloomChunk | BlockType::LeafIndex),
            "only bloom chunks and the root's children are offered, not {ty:?}"
        );
        if !self.pins.load(Ordering::Relaxed) {
            return None;
        }
        let bytes = match block {
            CachedBlock::Keyed(b) => b.size() as u64,
            CachedBlock::Bloom(b) => b.len() as u64,
        } + 1;
        self.charged.fetch_add(bytes, Ordering::Relaxed);
        self.pinned_blocks.fetch_add(1, Ordering::Relaxed);
        Some(bytes)
    }
    fn unpin(&self, bytes: u64) {
        self.charged.fetch_sub(bytes, Ordering::Relaxed);
    }
}

fn open<'a>(bytes: &'a [u8], cache: &Arc<Counting>) -> HFileReader<&'a [u8]> {
    let opts = ReaderOptions {
        verify_checksums: true,
        cache: Some((cache.clone() as Arc<dyn BlockCache>, 1)),
    };
    HFileReader::open_with(bytes, "pins", opts).unwrap()
}

type Answers = Vec<Vec<(cellar_format::CellKey, Vec<u8>)>>;

/// `get_column` of every stored column and of a missing row per stored row.
fn lookups(r: &HFileReader<&[u8]>, cells: &[common::Cell]) -> Answers {
    let mut out = Vec::new();
    for (k, _, _) in cells {
        out.push(r.get_column(&k.row, &k.qualifier).unwrap());
        let mut missing = k.row.clone();
        missing.push(b'~');
        out.push(r.get_column(&missing, &k.qualifier).unwrap());
    }
    out
}

#[test]
fn pinned_meta_blocks_skip_the_cache_and_are_given_back() {
    let (cells, bytes) = sample_file();
    let layout = Layout::of(&bytes);
    let leaves = layout.of_type(BlockType::LeafIndex).len() as u64;
    let chunks = layout.of_type(BlockType::BloomChunk).len() as u64;
    assert!(
        leaves >= 2 && chunks >= 2,
        "two index levels, several chunks"
    );
    let plain = HFileReader::open(&bytes[..], "plain").unwrap();
    let want = lookups(&plain, &cells);

    let cache = Arc::new(Counting::default());
    cache.pins.store(true, Ordering::Relaxed);
    let r = open(&bytes, &cache);
    assert_eq!(lookups(&r, &cells), want);
    // Each pinnable block was looked up in the cache once, when first read, then pinned.
    assert_eq!(cache.gets(BlockType::LeafIndex), leaves);
    assert_eq!(cache.gets(BlockType::BloomChunk), chunks);
    assert_eq!(cache.pinned_blocks.load(Ordering::Relaxed), leaves + chunks);
    let data_gets = cache.gets(BlockType::Data);
    assert_eq!(lookups(&r, &cells), want);
    assert_eq!(
        cache.gets(BlockType::LeafIndex),
        leaves,
        "served by the pins"
    );
    assert_eq!(
        cache.gets(BlockType::BloomChunk),
        chunks,
        "served by the pins"
    );
    assert!(
        cache.gets(BlockType::Data) > data_gets,
        "data blocks stay in the cache"
    );
    let charged = cache.charged.load(Ordering::Relaxed);
    assert!(charged > 0);
    assert_eq!(r.pinned_bytes(), charged);
    drop(r);
    assert_eq!(
        cache.charged.load(Ordering::Relaxed),
        0,
        "given back on drop"
    );
}

#[test]
fn a_cache_that_declines_pins_serves_every_lookup() {
    let (cells, bytes) = sample_file();
    let plain = HFileReader::open(&bytes[..], "plain").unwrap();
    let want = lookups(&plain, &cells);
    let cache = Arc::new(Counting::default());
    let r = open(&bytes, &cache);
    assert_eq!(lookups(&r, &cells), want);
    let (ix, bloom) = (
        cache.gets(BlockType::LeafIndex),
        cache.gets(BlockType::BloomChunk),
    );
    assert_eq!(lookups(&r, &cells), want);
    // The same lookups again: a cache that declines pins also declines the block map
    // (`pin_bytes`' default), which is asked before the reader walks its index for one.
    assert_eq!(cache.gets(BlockType::LeafIndex), 2 * ix);
    assert_eq!(cache.gets(BlockType::BloomChunk), 2 * bloom);
    assert_eq!(r.block_map_bytes(), 0);
    assert_eq!(r.pinned_bytes(), 0);
    assert_eq!(cache.charged.load(Ordering::Relaxed), 0);
}
