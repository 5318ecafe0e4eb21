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
//! Built only when the index holds together: every index entry decodes, every separator
//! parses, children lie before their parents and at increasing offsets on each level (SPEC.md
//! §5), and the words never decrease. Otherwise there is no map and seeks descend the index,
//! which reports whatever is wrong where it reads it.

use std::cmp::Ordering;
use std::sync::Arc;

use crate::block::{Block, BlockHandle, BlockIter, BlockType};
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
}

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

    /// Bytes the map of a file of `data_blocks` blocks holds, its prefix allowed 64 bytes.
    pub(crate) fn estimate(data_blocks: u64) -> u64 {
        let per_block = (size_of::<u128>() + size_of::<BlockHandle>()) as u64;
        data_blocks.saturating_mul(per_block).saturating_add(64)
    }

    /// Bytes the map holds.
    pub(crate) fn memory(&self) -> usize {
        self.prefix.len()
            + self.words.len() * size_of::<u128>()
            + self.handles.len() * size_of::<BlockHandle>()
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
        Some(BlockMap {
            prefix,
            words,
            handles,
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
