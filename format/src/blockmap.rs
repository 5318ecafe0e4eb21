//! The block map: a reader's table of its data blocks in key order, each with the 16-byte word
//! of its separator's row (the search fences of [`crate::fence`], over the whole file, with
//! words twice as long: a file's rows share less than a block's), so a
//! seek finds its data block with one search over an array instead of a descent through the
//! index blocks. Nothing of it is on disk: it is built from the index, once per reader.
//!
//! Why: a cached point read spent about 3,900 of its 11,900 instructions descending the index
//! (the root's and a leaf's block cursors, their restart searches, decoding the index values)
//! and touched each index block's header, fences and entries on the way (callgrind, 200k
//! keys; the index-only half of a seek took about 40% of its time on 2M cached keys).
//!
//! Exactness: a word decides only where it differs from the target's (see [`crate::fence`]):
//! separators whose word is below the target's have rows below the target's row, so every
//! key under those blocks' separators sorts before the target; the first separator whose word
//! is above it has a greater row. That block is the one the index descent finds (the first
//! whose separator is `>=` the target). When the first word not below the target's equals it
//! (the target's row and a separator's share the prefix and the next 16 bytes: a wide row
//! over several blocks, rows longer than the word) the map does not decide and the seek
//! descends the index as before.
//!
//! The map also remembers where each block it loaded lies in memory ([`BlockSpots`]: its
//! header, first entries, restart array and anchor), so that a scan entering block `i` asks
//! the processor for block `i + 1`'s lines before it gets there, and a seek asks for its own
//! block's lines before it looks the block up in the cache. Why: a cache filled by
//! random reads holds a file's blocks, their headers and their anchors' keys scattered in
//! memory in the order they were read; a scan then waited on a miss at each of those on
//! entering each block (`perf`, cpu-clock: the first entry's first byte, the restart point
//! after it, the cache's entry). Addresses only: a spot may outlive its block (evicted,
//! read again elsewhere), and then the hint is wasted, nothing more; a block read from the
//! file again notes its new spots.
//!
//! Built only when the index holds together: every index entry decodes, every separator
//! parses, children lie before their parents and at increasing offsets on each level (SPEC.md
//! §5), and the words never decrease. Otherwise there is no map and seeks descend the index,
//! which reports whatever is wrong where it reads it.

use std::cmp::Ordering;
use std::sync::atomic::{AtomicUsize, Ordering as AtomicOrdering};
use std::sync::Arc;

use crate::block::{prefetch_spots, Block, BlockHandle, BlockIter, BlockSpots, BlockType};
use crate::cell::{compare_bytes, KeyRef};
use crate::fence::Rows;
use crate::index::IndexValue;
use crate::reader::{HFileReader, ReadAt};

/// A file's data blocks in key order (see the module docs).
#[derive(Debug)]
pub(crate) struct BlockMap {
    /// The longest prefix the separators' rows share, the last block's left out.
    prefix: Vec<u8>,
    /// Each block's separator row's 16 bytes after the prefix, big-endian, zero-padded; the
    /// last block has none.
    words: Vec<u128>,
    handles: Vec<BlockHandle>,
    /// Each block's spots, noted when it was last read from the file through the map (zero
    /// before).
    spots: Vec<NotedSpots>,
}

/// A block's [`BlockSpots`], shared by the reader's threads. Relaxed and stored one by one:
/// a reader may see a mix of two readings of the block, and then a hint is wasted.
#[derive(Debug, Default)]
struct NotedSpots([AtomicUsize; 4]);

/// Where a seek target stands in a [`BlockMap`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum MapPos {
    /// The first data block whose separator is `>=` the target.
    Block(usize),
    /// The file has no data block.
    PastEnd,
    /// The words cannot tell: descend the index.
    Undecided,
}

impl BlockMap {
    /// The data block a seek to a key of `row` searches.
    ///
    /// The last block is the answer for any target above every other separator, without
    /// looking at its own: the writer gives the file's last block a separator of its own
    /// making (the shortest row above its last row, `1` after `0000000000669354`), which
    /// shares nothing with the others and so would leave them no prefix. A target above that
    /// separator too finds no key `>=` it in the last block, and the cursor ends past the
    /// file as the index descent would leave it.
    #[inline]
    pub(crate) fn locate(&self, row: &[u8]) -> MapPos {
        let Some(last) = self.handles.len().checked_sub(1) else {
            return MapPos::PastEnd;
        };
        if last == 0 {
            return MapPos::Block(0);
        }
        let n = self.prefix.len();
        match compare_bytes(row.get(..n).unwrap_or(row), &self.prefix) {
            // Shorter than the prefix and a prefix of it, or below it at some byte.
            Ordering::Less => MapPos::Block(0),
            Ordering::Greater => MapPos::Block(last),
            Ordering::Equal => {
                let t = word_after(row, n);
                let i = self.words.partition_point(|&w| w < t);
                match self.words.get(i) {
                    None => MapPos::Block(last),
                    Some(&w) if w > t => MapPos::Block(i),
                    Some(_) => MapPos::Undecided,
                }
            }
        }
    }

    /// Data block `i`'s handle (`None` past the last).
    #[inline]
    pub(crate) fn handle(&self, i: usize) -> Option<BlockHandle> {
        self.handles.get(i).copied()
    }

    /// The number of data blocks.
    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.handles.len()
    }

    /// Note where block `i`, just read from the file, lies in memory.
    pub(crate) fn note(&self, i: usize, block: &Arc<Block>) {
        let Some(noted) = self.spots.get(i) else {
            return;
        };
        let s = block.spots();
        for (slot, v) in noted
            .0
            .iter()
            .zip([s.header, s.start, s.restarts, s.anchor])
        {
            slot.store(v, AtomicOrdering::Relaxed);
        }
    }

    /// Ask the processor for block `i`'s noted spots (nothing for a block never noted).
    #[inline]
    pub(crate) fn prefetch(&self, i: usize) {
        let Some(noted) = self.spots.get(i) else {
            return;
        };
        let [header, start, restarts, anchor] =
            noted.0.each_ref().map(|a| a.load(AtomicOrdering::Relaxed));
        prefetch_spots(&BlockSpots {
            header,
            start,
            restarts,
            anchor,
        });
    }

    /// Block `i`'s noted spots (tests).
    #[cfg(test)]
    pub(crate) fn noted(&self, i: usize) -> Option<BlockSpots> {
        let [header, start, restarts, anchor] = self
            .spots
            .get(i)?
            .0
            .each_ref()
            .map(|a| a.load(AtomicOrdering::Relaxed));
        Some(BlockSpots {
            header,
            start,
            restarts,
            anchor,
        })
    }

    /// Bytes the map of a file of `data_blocks` blocks holds, its prefix allowed 64 bytes.
    pub(crate) fn estimate(data_blocks: u64) -> u64 {
        let per_block =
            (size_of::<u128>() + size_of::<BlockHandle>() + size_of::<NotedSpots>()) as u64;
        data_blocks.saturating_mul(per_block).saturating_add(64)
    }

    /// Bytes the map holds.
    pub(crate) fn memory(&self) -> usize {
        self.prefix.len()
            + self.words.len() * size_of::<u128>()
            + self.handles.len() * size_of::<BlockHandle>()
            + self.spots.len() * size_of::<NotedSpots>()
    }

    /// Walk `reader`'s index and build its map; `None` when the index does not hold together
    /// (module docs) or a block of it cannot be read.
    pub(crate) fn build<R: ReadAt>(reader: &HFileReader<R>) -> Option<BlockMap> {
        let mut walk = Walk {
            reader,
            rows: Rows::default(),
            handles: Vec::new(),
            last_offset: Vec::new(),
        };
        let root = reader.trailer().root_index;
        walk.block(reader.root().clone(), root, 0)?;
        let Walk { rows, handles, .. } = walk;
        // Every block's separator but the last's (see `locate`).
        let fenced = handles.len().saturating_sub(1);
        let prefix = rows.shared_prefix(fenced)?;
        let words: Vec<u128> = (0..fenced)
            .map(|i| word_after(rows.get(i), prefix.len()))
            .collect();
        if words.windows(2).any(|w| w.first() > w.get(1)) {
            return None;
        }
        let spots = handles.iter().map(|_| NotedSpots::default()).collect();
        Some(BlockMap {
            prefix,
            words,
            handles,
            spots,
        })
    }
}

/// The index walk of [`BlockMap::build`].
struct Walk<'r, R: ReadAt> {
    reader: &'r HFileReader<R>,
    /// The data blocks' separator rows.
    rows: Rows,
    handles: Vec<BlockHandle>,
    /// The offset of the last child met on each level below the root (SPEC.md §5's rule).
    last_offset: Vec<Option<u64>>,
}

impl<R: ReadAt> Walk<'_, R> {
    /// Every entry of the index block `block` (at `at`, `depth` levels below the root), in
    /// order, descending into index children.
    fn block(&mut self, block: Arc<Block>, at: BlockHandle, depth: usize) -> Option<()> {
        // The trailer allows at most 16 levels; a deeper walk is a damaged index.
        if depth >= 16 {
            return None;
        }
        let child_ty = self.reader.child_type(depth);
        let mut it = BlockIter::new(block);
        it.seek_to_first().ok()?;
        while it.valid() {
            let v = IndexValue::decode(it.value()).ok()?;
            let child = v.handle;
            if child.offset >= at.offset {
                return None;
            }
            if self.last_offset.len() <= depth {
                self.last_offset.resize(depth + 1, None);
            }
            let last = self.last_offset.get_mut(depth)?;
            if last.is_some_and(|p| child.offset <= p) {
                return None;
            }
            *last = Some(child.offset);
            if child_ty == BlockType::Data {
                let sep = KeyRef::parse(it.key()).ok()?;
                self.rows.push(sep.row);
                self.handles.push(child);
            } else {
                let b = self.reader.read_keyed(child, child_ty).ok()?;
                self.block(b, child, depth + 1)?;
            }
            it.next().ok()?;
        }
        Some(())
    }
}

/// The 16 bytes of `bytes` from `at` as a big-endian word, zero-padded: a shorter string's
/// padding sorts it first, as bytewise order does.
#[inline]
fn word_after(bytes: &[u8], at: usize) -> u128 {
    let mut w = [0u8; 16];
    let src = bytes.get(at..).unwrap_or_default();
    let n = src.len().min(16);
    if let (Some(d), Some(s)) = (w.get_mut(..n), src.get(..n)) {
        d.copy_from_slice(s);
    }
    u128::from_be_bytes(w)
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::sync::{Arc, Mutex};

    use crate::block::{BlockType, DataBlockEncoding};
    use crate::reader::{BlockCache, CachedBlock, HFileReader, ReaderOptions};
    use crate::{CellKey, CellType, HFileWriter, KeyRef, WriterOptions};

    /// A cache that keeps everything and grants the map; blocks can be dropped by hand.
    #[derive(Debug, Default)]
    struct Cache(Mutex<HashMap<u64, CachedBlock>>);

    impl BlockCache for Cache {
        fn get(&self, _id: u64, offset: u64, _ty: BlockType) -> Option<CachedBlock> {
            self.0.lock().unwrap().get(&offset).cloned()
        }
        fn insert(&self, _id: u64, offset: u64, _ty: BlockType, block: CachedBlock) {
            self.0.lock().unwrap().insert(offset, block);
        }
        fn pin_bytes(&self, bytes: u64) -> Option<u64> {
            Some(bytes)
        }
    }

    fn file() -> Vec<u8> {
        let mut o = WriterOptions::new("cf");
        o.block_size = 256;
        o.data_block_encoding = DataBlockEncoding::AnchoredDiff;
        let mut w = HFileWriter::new(Vec::new(), "spots", o).unwrap();
        for r in 0..400u32 {
            let k = CellKey::new(format!("row{r:05}"), "cf", "q", 7, CellType::Put, 1);
            w.append(&k.as_ref(), &[b'v'; 20]).unwrap();
        }
        w.finish().unwrap().0
    }

    /// Each block's noted spots are those of the block the cache now holds for it, or
    /// nothing when no read through the map brought it from the file.
    fn assert_noted(r: &HFileReader<&[u8]>, cache: &Cache, ctx: &str) {
        let map = r.built_block_map().expect("the map is built");
        for i in 0..map.len() {
            let h = map.handle(i).unwrap();
            let cached = cache.get(1, h.offset, BlockType::Data);
            let want = match cached {
                Some(CachedBlock::Keyed(b)) => b.spots(),
                _ => Default::default(),
            };
            assert_eq!(map.noted(i), Some(want), "{ctx}: block {i}");
        }
    }

    #[test]
    fn blocks_read_through_the_map_note_where_they_lie() {
        let bytes = file();
        let cache = Arc::new(Cache::default());
        let opts = ReaderOptions {
            verify_checksums: true,
            cache: Some((cache.clone(), 1)),
        };
        let r = HFileReader::open_with(&bytes[..], "spots", opts).unwrap();
        // The map is built on a reader's second seek.
        for _ in 0..2 {
            r.iter().seek(&KeyRef::first_on_row(b"row00000")).unwrap();
        }
        let map = r.built_block_map().expect("the map is built");
        assert!(map.len() > 20, "{} blocks", map.len());
        // The two seeks' block came from the file before the map (once) and from the cache.
        assert_eq!(map.noted(0), Some(Default::default()));
        cache.0.lock().unwrap().clear();
        let mut it = r.iter();
        it.seek_to_first().unwrap();
        let mut n = 0;
        while it.valid() {
            n += 1;
            it.next().unwrap();
        }
        assert_eq!(n, 400);
        assert_noted(&r, &cache, "after a walk from the file");
        let first = map.noted(1).unwrap();
        assert!(first.header != 0 && first.start != 0 && first.anchor != 0);
        // The restart array lies inside the block (of ~256 bytes), after its first entries.
        assert!(first.restarts > first.start && first.restarts - first.start < 1024);
        // Blocks dropped from the cache and read again by seeks lie elsewhere now (`held`
        // keeps the old ones alive) and are noted again; a cached block read again notes
        // nothing new.
        let held: Vec<_> = (0..map.len())
            .map(|i| {
                r.read_keyed(map.handle(i).unwrap(), BlockType::Data)
                    .unwrap()
            })
            .collect();
        cache.0.lock().unwrap().retain(|&off, _| off % 2 == 0);
        for r0 in (0..400).step_by(7) {
            r.iter()
                .seek(&KeyRef::first_on_row(format!("row{r0:05}").as_bytes()))
                .unwrap();
        }
        assert_noted(&r, &cache, "after seeks");
        let moved = (0..map.len())
            .filter(|&i| map.noted(i) != Some(held[i].spots()))
            .count();
        assert!(moved > 0, "some blocks were read again");
    }
}
