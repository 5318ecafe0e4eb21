//! The multi-level block index (SPEC.md §5).
//!
//! Index blocks are keyed blocks (same encoding as data blocks, restart interval 1). Each entry:
//! ```text
//! key   = separator: a cell key >= every key under the child and < every key after it
//! value = child.offset varint64 | child.stored_len varint64 | min_ts u64 LE | max_ts u64 LE
//!         | first_key_len varint32 | first_key
//! ```
//! Leaf entries point at data blocks; intermediate and root entries at index blocks of the level
//! below. Only the root is read at open; a 100 GB file's root is one block.

use crate::block::{BlockBuilder, BlockHandle, BlockType};
use crate::coding::{put_varint32, Cursor};
use crate::error::{malformed, Malformed};

/// One decoded index entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexEntry {
    /// Upper bound of the keys under the child.
    pub separator: Vec<u8>,
    /// Where the child block is.
    pub handle: BlockHandle,
    /// Smallest timestamp of any cell under the child.
    pub min_ts: u64,
    /// Largest timestamp of any cell under the child.
    pub max_ts: u64,
    /// The first key under the child.
    pub first_key: Vec<u8>,
}

/// The value part of an index entry (everything but the separator).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IndexValue<'a> {
    /// Child location.
    pub handle: BlockHandle,
    /// Smallest timestamp under the child.
    pub min_ts: u64,
    /// Largest timestamp under the child.
    pub max_ts: u64,
    /// First key under the child.
    pub first_key: &'a [u8],
}

impl<'a> IndexValue<'a> {
    /// Decode an index entry's value.
    pub fn decode(value: &'a [u8]) -> Result<Self, Malformed> {
        let mut c = Cursor::new(value);
        let handle = BlockHandle::decode_varint(&mut c)?;
        let min_ts = c.u64("index entry min timestamp")?;
        let max_ts = c.u64("index entry max timestamp")?;
        let first_key = c.len_prefixed("index entry first key")?;
        if !c.is_empty() {
            return malformed(format!(
                "index entry value has {} trailing bytes",
                c.remaining()
            ));
        }
        if min_ts > max_ts {
            return malformed(format!(
                "index entry time range {min_ts}..={max_ts} is inverted"
            ));
        }
        Ok(IndexValue {
            handle,
            min_ts,
            max_ts,
            first_key,
        })
    }

    /// Encode into `out` (cleared first).
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.clear();
        self.handle.encode_varint(out);
        out.extend_from_slice(&self.min_ts.to_le_bytes());
        out.extend_from_slice(&self.max_ts.to_le_bytes());
        put_varint32(out, self.first_key.len() as u32);
        out.extend_from_slice(self.first_key);
    }
}

/// Restart interval of index blocks: every key whole, so binary search needs no linear step.
pub const INDEX_RESTART_INTERVAL: usize = 1;

/// One level of the index being built.
#[derive(Debug)]
struct Level {
    builder: BlockBuilder,
    first_key: Vec<u8>,
    min_ts: u64,
    max_ts: u64,
}

impl Level {
    fn new() -> Self {
        Level {
            builder: BlockBuilder::new(INDEX_RESTART_INTERVAL),
            first_key: Vec::new(),
            min_ts: u64::MAX,
            max_ts: 0,
        }
    }
}

/// A finished index block the writer must store, and the level it belongs to (0 = leaf).
#[derive(Debug)]
pub struct PendingIndexBlock {
    /// Raw payload.
    pub payload: Vec<u8>,
    /// Block type to store it as.
    pub block_type: BlockType,
    /// Level (0 = leaf).
    pub level: usize,
    /// Last separator in the block: the key of its entry in the parent.
    pub last_key: Vec<u8>,
    /// First key under the block.
    pub first_key: Vec<u8>,
    /// Time range under the block.
    pub min_ts: u64,
    /// Time range under the block.
    pub max_ts: u64,
}

/// Streams index entries into levels, cutting an index block whenever a level outgrows
/// `block_size`, so memory stays bounded whatever the file size.
#[derive(Debug)]
pub struct IndexBuilder {
    levels: Vec<Level>,
    block_size: usize,
    scratch: Vec<u8>,
}

impl IndexBuilder {
    /// A builder cutting index blocks at `block_size` bytes.
    pub fn new(block_size: usize) -> Self {
        IndexBuilder {
            levels: vec![Level::new()],
            block_size: block_size.max(256),
            scratch: Vec::new(),
        }
    }

    /// Add an entry at `level`; returns a full block to store if the level overflowed. The
    /// caller stores it and reports its handle with [`IndexBuilder::stored`].
    pub fn add(
        &mut self,
        level: usize,
        separator: &[u8],
        value: &IndexValue<'_>,
    ) -> Option<PendingIndexBlock> {
        while self.levels.len() <= level {
            self.levels.push(Level::new());
        }
        value.encode(&mut self.scratch);
        let lv = self.levels.get_mut(level)?;
        if lv.builder.is_empty() {
            lv.first_key.clear();
            lv.first_key.extend_from_slice(value.first_key);
        }
        lv.min_ts = lv.min_ts.min(value.min_ts);
        lv.max_ts = lv.max_ts.max(value.max_ts);
        lv.builder.add(separator, &self.scratch, &[]);
        if lv.builder.estimated_size() >= self.block_size && lv.builder.len() >= 2 {
            return Some(self.cut(level, false));
        }
        None
    }

    #[allow(
        clippy::indexing_slicing,
        reason = "cut is only called with levels that add() or finish_step() created"
    )]
    fn cut(&mut self, level: usize, root: bool) -> PendingIndexBlock {
        let lv = &mut self.levels[level];
        let last_key = lv.builder.last_key().to_vec();
        let payload = lv.builder.finish();
        let block = PendingIndexBlock {
            payload,
            block_type: if root {
                BlockType::RootIndex
            } else if level == 0 {
                BlockType::LeafIndex
            } else {
                BlockType::IntermediateIndex
            },
            level,
            last_key,
            first_key: std::mem::take(&mut lv.first_key),
            min_ts: lv.min_ts,
            max_ts: lv.max_ts,
        };
        lv.min_ts = u64::MAX;
        lv.max_ts = 0;
        block
    }

    /// Record where a block returned by [`add`](Self::add) or [`finish_step`](Self::finish_step)
    /// was stored: adds its entry to the level above. May return another full block.
    pub fn stored(
        &mut self,
        block: &PendingIndexBlock,
        handle: BlockHandle,
    ) -> Option<PendingIndexBlock> {
        let value = IndexValue {
            handle,
            min_ts: block.min_ts,
            max_ts: block.max_ts,
            first_key: &block.first_key,
        };
        self.add(block.level + 1, &block.last_key, &value)
    }

    /// At the end of the file: returns the next block to store, bottom level first; the last
    /// one returned is the root (its type is [`BlockType::RootIndex`]). Call until it returns a
    /// root, reporting each non-root block with [`stored`](Self::stored).
    pub fn finish_step(&mut self) -> PendingIndexBlock {
        let top = self.levels.len() - 1;
        for level in 0..top {
            let lv_empty = self.levels.get(level).is_none_or(|l| l.builder.is_empty());
            if !lv_empty {
                return self.cut(level, false);
            }
        }
        self.cut(top, true)
    }

    /// Number of levels, root included (valid once the root was returned).
    pub fn levels(&self) -> usize {
        self.levels.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn index_value_round_trips_and_rejects_garbage() {
        let v = IndexValue {
            handle: BlockHandle {
                offset: 1 << 40,
                stored_len: 65536,
            },
            min_ts: 3,
            max_ts: 9,
            first_key: b"k",
        };
        let mut buf = Vec::new();
        v.encode(&mut buf);
        assert_eq!(IndexValue::decode(&buf).ok(), Some(v));
        buf.push(0);
        assert!(IndexValue::decode(&buf).is_err());
        assert!(IndexValue::decode(&buf[..5]).is_err());
    }
}
