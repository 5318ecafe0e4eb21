//! Decoding and iteration of keyed blocks (layout in `builder.rs`, SPEC.md §4.3).

use std::cmp::Ordering;
use std::sync::Arc;

use super::encoding::{decode_diff_entry, DataBlockEncoding};
use crate::cell::KeyRef;
use crate::coding::Cursor;
use crate::error::{malformed, Malformed};

/// A decoded raw block payload whose restart array has been checked.
#[derive(Debug, Clone)]
pub struct Block {
    data: Vec<u8>,
    restarts_offset: usize,
    num_restarts: usize,
    encoding: DataBlockEncoding,
}

impl Block {
    /// Check the restart array of a raw payload of [`DataBlockEncoding::Prefix`] entries (every
    /// index block, and the data blocks of files that use it) and wrap it.
    pub fn new(data: Vec<u8>) -> Result<Self, Malformed> {
        Self::with_encoding(data, DataBlockEncoding::Prefix)
    }

    /// The encoding of the block's entries.
    pub fn encoding(&self) -> DataBlockEncoding {
        self.encoding
    }

    /// Check the restart array of a raw payload whose entries use `encoding` and wrap it.
    pub fn with_encoding(data: Vec<u8>, encoding: DataBlockEncoding) -> Result<Self, Malformed> {
        let Some(count_at) = data.len().checked_sub(4) else {
            return malformed(format!(
                "block payload of {} bytes has no restart count",
                data.len()
            ));
        };
        let num_restarts =
            Cursor::new(data.get(count_at..).unwrap_or_default()).u32("restart count")? as usize;
        if num_restarts > count_at / 4 {
            return malformed(format!(
                "restart count {num_restarts} does not fit in a {}-byte payload",
                data.len()
            ));
        }
        let restarts_offset = count_at - 4 * num_restarts;
        let block = Block {
            data,
            restarts_offset,
            num_restarts,
            encoding,
        };
        if num_restarts == 0 && restarts_offset != 0 {
            return malformed("block has entries but no restart points");
        }
        let mut prev = None;
        for i in 0..num_restarts {
            let r = block.restart(i)?;
            if i == 0 && r != 0 {
                return malformed(format!("first restart point is {r}, not 0"));
            }
            if r >= restarts_offset || prev.is_some_and(|p| r <= p) {
                return malformed(format!("restart point {i} at {r} is out of order or range"));
            }
            prev = Some(r);
        }
        Ok(block)
    }

    fn restart(&self, i: usize) -> Result<usize, Malformed> {
        let at = self.restarts_offset + 4 * i;
        let bytes = self
            .data
            .get(at..at + 4)
            .ok_or_else(|| Malformed(format!("restart point {i} truncated")))?;
        Ok(Cursor::new(bytes).u32("restart point")? as usize)
    }

    /// The whole key of the entry at restart point `i` (a restart entry shares nothing):
    /// borrowed from the block when stored whole, else rebuilt in `scratch`, so binary search
    /// probes do not allocate.
    fn restart_key<'s>(
        &'s self,
        i: usize,
        scratch: &'s mut Vec<u8>,
    ) -> Result<&'s [u8], Malformed> {
        let off = self.restart(i)?;
        let region = self.data.get(off..self.restarts_offset).unwrap_or_default();
        if self.encoding == DataBlockEncoding::Diff {
            if region.first() != Some(&0) {
                return malformed(format!("restart entry at {off} shares bytes"));
            }
            decode_diff_entry(region, scratch)
                .map_err(|m| Malformed(format!("entry at {off}: {}", m.0)))?;
            return Ok(scratch);
        }
        let mut c = Cursor::new(region);
        let shared = c.varint32("entry shared length")?;
        if shared != 0 {
            return malformed(format!("restart entry at {off} shares {shared} bytes"));
        }
        let unshared = c.varint32("entry unshared length")? as usize;
        c.varint32("entry value length")?;
        c.varint32("entry tags length")?;
        c.take(unshared, "entry key")
    }

    /// Number of restart points.
    pub fn num_restarts(&self) -> usize {
        self.num_restarts
    }

    /// Size of the raw payload.
    pub fn size(&self) -> usize {
        self.data.len()
    }

    /// True when the block holds no entry.
    pub fn is_empty(&self) -> bool {
        self.restarts_offset == 0
    }

    /// Decode the entry at `offset` given the previous key; returns the entry and the offset
    /// of the next one.
    fn decode_at(&self, offset: usize, key: &mut Vec<u8>) -> Result<(Entry, usize), Malformed> {
        let region = self
            .data
            .get(offset..self.restarts_offset)
            .unwrap_or_default();
        let (entry, next) = match self.encoding {
            DataBlockEncoding::Prefix => self.decode_prefix(offset, region, key)?,
            DataBlockEncoding::Diff => {
                let d = decode_diff_entry(region, key)
                    .map_err(|m| Malformed(format!("entry at {offset}: {}", m.0)))?;
                let at = |(a, b): (usize, usize)| (offset + a, offset + b);
                let entry = Entry {
                    offset,
                    value: at(d.value),
                    tags: at(d.tags),
                };
                (entry, offset + d.next)
            }
        };
        KeyRef::parse(key).map_err(|m| Malformed(format!("entry at {offset}: {m}")))?;
        Ok((entry, next))
    }

    fn decode_prefix(
        &self,
        offset: usize,
        region: &[u8],
        key: &mut Vec<u8>,
    ) -> Result<(Entry, usize), Malformed> {
        let mut c = Cursor::new(region);
        let shared = c.varint32("entry shared length")? as usize;
        let unshared = c.varint32("entry unshared length")? as usize;
        let value_len = c.varint32("entry value length")? as usize;
        let tags_len = c.varint32("entry tags length")? as usize;
        if shared > key.len() {
            return malformed(format!(
                "entry at {offset} shares {shared} bytes of a {}-byte previous key",
                key.len()
            ));
        }
        let delta = c.take(unshared, "entry key")?;
        let value_start = offset + c.position();
        c.take(value_len, "entry value")?;
        c.take(tags_len, "entry tags")?;
        key.truncate(shared);
        key.extend_from_slice(delta);
        let entry = Entry {
            offset,
            value: (value_start, value_start + value_len),
            tags: (value_start + value_len, value_start + value_len + tags_len),
        };
        Ok((entry, offset + c.position()))
    }
}

/// Position of one decoded entry inside its block.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Entry {
    offset: usize,
    value: (usize, usize),
    tags: (usize, usize),
}

/// An entry decoded ahead for backward steps: its position, where the entry after it starts,
/// and where its whole key lies in [`BlockIter::back_keys`].
#[derive(Debug, Clone, Copy)]
struct BackEntry {
    entry: Entry,
    next_offset: usize,
    restart_index: usize,
    key_start: usize,
}

/// A cursor over a [`Block`]; verbs as everywhere in Cellar: `seek`, `seek_for_prev`, `next`,
/// `prev`, `valid`, `key`, `value`.
///
/// Keys are prefix-compressed from the restart point before them, so an entry can only be
/// decoded walking forward. Stepping back therefore decodes the whole restart interval before
/// the current entry once, keeps its entries on a small stack, and pops one per `prev`: a
/// backward walk costs about what a forward one does instead of a restart interval per step.
///
/// A decoding error leaves the iterator invalid and is returned by the call that hit it.
#[derive(Debug, Clone)]
pub struct BlockIter {
    block: Arc<Block>,
    key: Vec<u8>,
    entry: Entry,
    next_offset: usize,
    restart_index: usize,
    valid: bool,
    /// Entries before the current one, in block order (the last is the nearest). Only used
    /// while its top is the current entry's predecessor, which `prev` checks by offset: the
    /// block never changes, so the stack cannot go stale in any other way and no other
    /// method needs to clear it.
    back: Vec<BackEntry>,
    /// The whole keys of `back`, concatenated.
    back_keys: Vec<u8>,
    /// Where a binary search rebuilds the restart keys of a DIFF block.
    scratch: Vec<u8>,
}

impl BlockIter {
    /// An unpositioned iterator.
    pub fn new(block: Arc<Block>) -> Self {
        BlockIter {
            block,
            key: Vec::new(),
            entry: Entry::default(),
            next_offset: 0,
            restart_index: 0,
            valid: false,
            back: Vec::new(),
            back_keys: Vec::new(),
            scratch: Vec::new(),
        }
    }

    /// The block iterated.
    pub fn block(&self) -> &Arc<Block> {
        &self.block
    }

    /// True when positioned on an entry.
    pub fn valid(&self) -> bool {
        self.valid
    }

    /// Current key (empty when not valid).
    pub fn key(&self) -> &[u8] {
        &self.key
    }

    /// Current value (empty when not valid).
    pub fn value(&self) -> &[u8] {
        self.slice(self.entry.value)
    }

    /// Current tags (empty when not valid).
    pub fn tags(&self) -> &[u8] {
        self.slice(self.entry.tags)
    }

    /// Offset of the current entry within the raw payload.
    pub fn entry_offset(&self) -> usize {
        self.entry.offset
    }

    fn slice(&self, (a, b): (usize, usize)) -> &[u8] {
        if !self.valid {
            return &[];
        }
        self.block.data.get(a..b).unwrap_or_default()
    }

    fn parse_at(&mut self, offset: usize) -> Result<bool, Malformed> {
        if offset >= self.block.restarts_offset {
            self.valid = false;
            return Ok(false);
        }
        match self.block.decode_at(offset, &mut self.key) {
            Ok((entry, next)) => {
                self.entry = entry;
                self.next_offset = next;
                while self.restart_index + 1 < self.block.num_restarts
                    && self.block.restart(self.restart_index + 1)? <= offset
                {
                    self.restart_index += 1;
                }
                self.valid = true;
                Ok(true)
            }
            Err(e) => {
                self.valid = false;
                Err(e)
            }
        }
    }

    fn seek_to_restart(&mut self, i: usize) -> Result<bool, Malformed> {
        self.key.clear();
        self.restart_index = i;
        let off = self.block.restart(i)?;
        self.parse_at(off)
    }

    /// Position on the first entry.
    pub fn seek_to_first(&mut self) -> Result<(), Malformed> {
        if self.block.num_restarts == 0 {
            self.valid = false;
            return Ok(());
        }
        self.seek_to_restart(0).map(|_| ())
    }

    /// Position on the last entry.
    pub fn seek_to_last(&mut self) -> Result<(), Malformed> {
        if self.block.num_restarts == 0 {
            self.valid = false;
            return Ok(());
        }
        // Positioning on the last entry decodes its restart interval anyway: keep it, as the
        // next move from the last entry of a block is almost always a `prev`.
        let ri = self.block.num_restarts - 1;
        self.fill_back(ri, self.block.restarts_offset)?;
        self.pop_back();
        Ok(())
    }

    /// Advance to the next entry.
    pub fn next(&mut self) -> Result<(), Malformed> {
        if self.valid {
            self.parse_at(self.next_offset)?;
        }
        Ok(())
    }

    /// Step back to the previous entry.
    pub fn prev(&mut self) -> Result<(), Malformed> {
        if !self.valid {
            return Ok(());
        }
        let original = self.entry.offset;
        if self.back.last().is_some_and(|b| b.next_offset == original) {
            self.pop_back();
            return Ok(());
        }
        let mut ri = self.restart_index;
        while self.block.restart(ri)? >= original {
            if ri == 0 {
                self.valid = false;
                return Ok(());
            }
            ri -= 1;
        }
        self.fill_back(ri, original)?;
        self.pop_back();
        Ok(())
    }

    /// Decode the entries from restart point `ri` up to (not including) the one at `end` onto
    /// the backward stack, leaving the iterator on the last of them.
    fn fill_back(&mut self, ri: usize, end: usize) -> Result<(), Malformed> {
        self.back.clear();
        self.back_keys.clear();
        self.seek_to_restart(ri)?;
        while self.valid {
            self.back.push(BackEntry {
                entry: self.entry,
                next_offset: self.next_offset,
                restart_index: self.restart_index,
                key_start: self.back_keys.len(),
            });
            self.back_keys.extend_from_slice(&self.key);
            if self.next_offset >= end {
                break;
            }
            self.parse_at(self.next_offset)?;
        }
        Ok(())
    }

    /// Make the top of the backward stack the current entry (invalid when it is empty).
    fn pop_back(&mut self) {
        match self.back.pop() {
            Some(b) => {
                self.key.clear();
                self.key
                    .extend_from_slice(self.back_keys.get(b.key_start..).unwrap_or_default());
                self.back_keys.truncate(b.key_start);
                self.entry = b.entry;
                self.next_offset = b.next_offset;
                self.restart_index = b.restart_index;
                self.valid = true;
            }
            None => self.valid = false,
        }
    }

    /// Position on the first entry whose key is `>= target`, invalid if there is none.
    pub fn seek(&mut self, target: &KeyRef<'_>) -> Result<(), Malformed> {
        if self.block.num_restarts == 0 {
            self.valid = false;
            return Ok(());
        }
        // Binary search for the last restart point whose key is < target.
        let (mut lo, mut hi) = (0usize, self.block.num_restarts - 1);
        while lo < hi {
            let mid = (lo + hi).div_ceil(2);
            let k = self.block.restart_key(mid, &mut self.scratch)?;
            if cmp_to(k, target) == Ordering::Less {
                lo = mid;
            } else {
                hi = mid - 1;
            }
        }
        self.seek_to_restart(lo)?;
        while self.valid && cmp_to(&self.key, target) == Ordering::Less {
            self.next()?;
        }
        Ok(())
    }

    /// Position on the last entry whose key is `<= target`, invalid if there is none.
    pub fn seek_for_prev(&mut self, target: &KeyRef<'_>) -> Result<(), Malformed> {
        self.seek(target)?;
        if !self.valid {
            return self.seek_to_last();
        }
        if cmp_to(&self.key, target) == Ordering::Greater {
            self.prev()?;
        }
        Ok(())
    }
}

/// Compare a key already validated by `decode_at` with a target.
#[inline]
fn cmp_to(key: &[u8], target: &KeyRef<'_>) -> Ordering {
    // A seek's comparisons are nearly all decided by the row: compare it in place and parse
    // the whole key only on a tie (as `compare_keys` does; a key that does not parse takes
    // the full path and sorts last, as before).
    if let Some(row) = crate::cell::row_if_well_formed(key) {
        let o = row.cmp(target.row);
        if o != Ordering::Equal {
            return o;
        }
    }
    match KeyRef::parse(key) {
        Ok(k) => k.cmp(target),
        Err(_) => Ordering::Greater,
    }
}

#[cfg(test)]
mod tests {
    use super::super::BlockBuilder;
    use super::*;
    use crate::cell::{CellKey, CellType};

    fn keys(n: usize) -> Vec<Vec<u8>> {
        (0..n)
            .map(|i| {
                CellKey::new(format!("row{:05}", i * 2), "cf", "q", 7, CellType::Put, 1).encode()
            })
            .collect()
    }

    fn build(keys: &[Vec<u8>], interval: usize) -> Arc<Block> {
        let mut b = BlockBuilder::new(interval);
        for (i, k) in keys.iter().enumerate() {
            b.add(
                k,
                format!("v{i}").as_bytes(),
                if i % 3 == 0 { b"t" } else { b"" },
            );
        }
        Arc::new(Block::new(b.finish()).unwrap())
    }

    #[test]
    fn forward_backward_and_seek_agree_with_the_input() {
        for interval in [1, 2, 16] {
            for n in [0, 1, 2, 17, 100] {
                let ks = keys(n);
                let block = build(&ks, interval);
                let mut it = BlockIter::new(block);
                it.seek_to_first().unwrap();
                let mut fwd = Vec::new();
                while it.valid() {
                    fwd.push(it.key().to_vec());
                    it.next().unwrap();
                }
                assert_eq!(fwd, ks);
                it.seek_to_last().unwrap();
                let mut back = Vec::new();
                while it.valid() {
                    back.push(it.key().to_vec());
                    it.prev().unwrap();
                }
                back.reverse();
                assert_eq!(back, ks);
                for i in 0..n * 2 + 1 {
                    let target = CellKey::first_on_row(format!("row{i:05}").as_bytes());
                    it.seek(&target.as_ref()).unwrap();
                    let want = ks
                        .iter()
                        .find(|k| KeyRef::parse(k).unwrap() >= target.as_ref());
                    assert_eq!(it.valid().then(|| it.key().to_vec()).as_ref(), want);
                    it.seek_for_prev(&target.as_ref()).unwrap();
                    let want = ks
                        .iter()
                        .rev()
                        .find(|k| KeyRef::parse(k).unwrap() <= target.as_ref());
                    assert_eq!(it.valid().then(|| it.key().to_vec()).as_ref(), want);
                }
            }
        }
    }

    #[test]
    fn bad_restart_arrays_are_rejected() {
        assert!(Block::new(vec![1, 2]).is_err());
        assert!(Block::new(vec![0xff, 0xff, 0xff, 0x7f]).is_err());
        // one restart pointing past the entries
        let mut p = vec![0u8; 8];
        p.extend_from_slice(&9u32.to_le_bytes());
        p.extend_from_slice(&1u32.to_le_bytes());
        assert!(Block::new(p).is_err());
    }
}
