//! Decoding and iteration of keyed blocks (layout in `builder.rs`, SPEC.md §4.3).

use std::cmp::Ordering;
use std::mem::size_of;
use std::sync::atomic::{AtomicBool, Ordering as AtomicOrdering};
use std::sync::{Arc, OnceLock};

use super::encoding::{
    anchored_restart_leaves_row, coords_row, decode_anchored, decode_diff_coords,
    decode_diff_entry, decode_simple, diff_restart_row, key_suffix, push_suffix, Against,
    DataBlockEncoding, Decoded, Suffix,
};
use crate::bufpool;
use crate::cell::{compare_bytes, KeyRef};
use crate::coding::Cursor;
use crate::error::{malformed, Malformed};
use crate::fence::{locate, word_after, FencePos, Rows};

/// A decoded raw block payload whose restart array has been checked.
#[derive(Debug)]
pub struct Block {
    data: Vec<u8>,
    restarts_offset: usize,
    num_restarts: usize,
    encoding: DataBlockEncoding,
    /// Search fences of the restart points (`None` inside when some restart key has no row),
    /// built by the block's second seek: see [`Block::seek_fences`].
    fences: OnceLock<Option<Fences>>,
    /// Whether a seek has searched the block.
    sought: AtomicBool,
    /// ANCHORED_DIFF: the block's first entry, decoded once, which the others are encoded
    /// against.
    anchor: Option<Anchor>,
}

/// An ANCHORED_DIFF entry a forward step decodes ([`Block::anchored_step`]): its bytes to the
/// end of the entries, whether it is a restart point, what it is encoded against and the
/// suffix of that.
struct AnchoredStep<'b> {
    region: &'b [u8],
    at_restart: bool,
    against: Against<'b>,
    base: Suffix,
}

/// The first entry of an ANCHORED_DIFF block.
#[derive(Debug, Clone)]
struct Anchor {
    /// Its whole key.
    key: Vec<u8>,
    /// Its timestamp, type and sequence number.
    suffix: Suffix,
}

impl Anchor {
    /// The anchor's coordinates (its key without the suffix).
    fn coords(&self) -> &[u8] {
        self.key
            .get(..self.key.len().saturating_sub(crate::cell::KEY_SUFFIX_LEN))
            .unwrap_or_default()
    }
}

/// A block's search fences, built in memory by its second seek (nothing of it is on disk): the
/// longest prefix all restart rows share, and for each restart point the 8 bytes of its row
/// after that prefix as a big-endian word, zero-padded.
///
/// Why: a seek's binary search over restart points read each probed restart entry, at a
/// random place in a 16 KiB block, so a seek in a leaf index block of a few hundred entries
/// was about nine dependent cache misses (block search was half of a cached Get's time,
/// `perf`). The words of a block fit in a few cache lines and stay cached; an entry is read
/// only when its word ties with the target's.
///
/// Why the words decide as the rows do: `crate::fence`.
///
/// Each fence also holds its restart point's offset, so the entry a search ends at is found
/// in the cache line the search last read instead of in the restart array at the end of the
/// block, a further miss per block seek (`restart(lo)` was a quarter of a block seek's time
/// in `perf`).
///
/// Why not at decode: building them decodes every restart entry's row, and a block read once
/// (a Get of data larger than the cache, a scan, a compaction) never repays that. With an
/// 8 MiB cache over 200 MB of data, `Block::with_encoding` was 28% of a Get's time (`perf`),
/// most of it the fences; a first seek halves over the restart entries instead (a few
/// decodes, where building takes one per restart point), and only a block sought again
/// builds them.
#[derive(Debug, Clone)]
struct Fences {
    prefix: Vec<u8>,
    fences: Vec<Fence>,
}

/// Restart points a seek counts through instead of halving ([`scan_fences`]): a
/// data block's (about 30 in a 16 KiB block) whole, an index block's once halving has
/// narrowed them to this many.
const LINEAR_FENCES: usize = 32;

/// Bytes of a restart interval a seek asks for before walking it ([`BlockIter::prefetch_walk`]).
/// In `cellar bench`'s files (16-byte decimal rows, which share more with their neighbour than
/// with the anchor, so restart points stay 16 entries apart; 100-byte values) an interval is
/// about 1.8 KiB: on readrandom 1 KiB ran ~14% faster than 512 B, 2 KiB no faster than 1 KiB,
/// and the whole interval a little slower.
const WALK_PREFETCH: usize = 1024;

#[derive(Debug, Clone, Copy)]
struct Fence {
    word: u64,
    /// The restart point's offset, copied from the checked restart array.
    offset: u32,
}

impl Fences {
    fn locate(&self, row: &[u8]) -> FencePos {
        locate(&self.prefix, row)
    }
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
        let mut block = Block {
            data,
            restarts_offset,
            num_restarts,
            encoding,
            fences: OnceLock::new(),
            sought: AtomicBool::new(false),
            anchor: None,
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
        if encoding.is_anchored() && num_restarts > 0 {
            let mut key = Vec::new();
            let region = block.data.get(..block.restarts_offset).unwrap_or_default();
            let (_, suffix) = decode_anchored(
                region,
                &mut key,
                &mut 0,
                Suffix::default(),
                Against::Nothing,
                true,
            )
            .map_err(|m| Malformed(format!("first entry: {}", m.0)))?;
            KeyRef::parse(&key).map_err(|m| Malformed(format!("first entry: {m}")))?;
            block.anchor = Some(Anchor { key, suffix });
        }
        Ok(block)
    }

    /// What the ANCHORED_DIFF restart entry at `offset` is encoded against, and that
    /// reference's suffix: nothing for the anchor (the first entry), else the anchor.
    #[inline]
    fn restart_against(&self, offset: usize) -> (Against<'_>, Suffix) {
        match &self.anchor {
            Some(a) if offset > 0 => (Against::Anchor(a.coords()), a.suffix),
            _ => (Against::Nothing, Suffix::default()),
        }
    }

    /// What the ANCHORED_DIFF entry at `offset` is encoded against and its suffix, `key`
    /// holding the entry before it: whole when `whole`, else its coordinates with its suffix
    /// in `prev`.
    #[inline]
    fn against<'s>(
        &'s self,
        offset: usize,
        at_restart: bool,
        key: &[u8],
        prev: Suffix,
        whole: bool,
    ) -> (Against<'s>, Suffix) {
        if at_restart {
            self.restart_against(offset)
        } else if whole {
            (Against::Previous, key_suffix(key))
        } else {
            (Against::Previous, prev)
        }
    }

    /// [`Fences`] of the restart points; `None` when there is nothing to search or some
    /// restart key has no row (the search then reads the keys).
    fn build_fences(&self) -> Option<Fences> {
        if self.num_restarts < 2 {
            return None;
        }
        // The rows side by side in one buffer: a block decode allocates the same few times
        // whatever its number of restart points.
        let mut rows = Rows::with_capacity(self.num_restarts);
        let mut coords = Vec::new();
        for i in 0..self.num_restarts {
            self.push_restart_row(i, &mut rows, &mut coords)?;
        }
        let prefix = rows.shared_prefix(self.num_restarts)?;
        // Exactly as many as there are restart points: a `collect` through `Option` loses
        // the count and doubles its way up, and a cached block then held up to twice the
        // fences its weight (`Block::memory`) counts (heaptrack of the comparison's reads:
        // 12.9 MB of fences over 12,863 blocks, about 1 KB each against ~600 B needed).
        let mut fences = Vec::with_capacity(self.num_restarts);
        for i in 0..self.num_restarts {
            fences.push(Fence {
                word: word_after(rows.get(i), prefix.len()),
                offset: u32::try_from(self.restart(i).ok()?).ok()?,
            });
        }
        Some(Fences { prefix, fences })
    }

    /// Append the row of restart point `i`'s key to `rows`: read in place where a restart
    /// entry stands alone (its key or coordinates lie whole in the block), decoded against
    /// the anchor into `coords` for ANCHORED_DIFF; `None` when it has no well-formed row.
    fn push_restart_row(&self, i: usize, rows: &mut Rows, coords: &mut Vec<u8>) -> Option<()> {
        let row = match self.encoding {
            DataBlockEncoding::Diff => self.restart_row(i).ok().flatten()?,
            DataBlockEncoding::AnchoredDiff => {
                let off = self.restart(i).ok()?;
                let region = self.data.get(off..self.restarts_offset)?;
                let (against, base) = self.restart_against(off);
                decode_anchored(region, coords, &mut 0, base, against, false).ok()?;
                coords_row(coords)?
            }
            DataBlockEncoding::Prefix => {
                let off = self.restart(i).ok()?;
                let mut c = Cursor::new(self.data.get(off..self.restarts_offset)?);
                if c.varint32("entry shared length").ok()? != 0 {
                    return None;
                }
                let unshared = c.varint32("entry unshared length").ok()? as usize;
                c.varint32("entry value length").ok()?;
                c.varint32("entry tags length").ok()?;
                crate::cell::row_if_well_formed(c.take(unshared, "entry key").ok()?)?
            }
        };
        rows.push(row);
        Some(())
    }

    /// Bytes the decoded block holds: its payload and its search fences, counted whether
    /// built yet or not (a cache weighs a block once, when it is inserted). Not counted: the
    /// fences' shared prefix (part of one row), which the weight counted when fences were
    /// built at decode, and the anchor's key (one key), which it never counted.
    pub fn memory(&self) -> usize {
        let fences = if self.num_restarts < 2 {
            0
        } else {
            size_of::<Fence>() * self.num_restarts
        };
        self.data.len() + fences
    }

    /// The ANCHORED_DIFF entry at `offset` that a forward step decodes, with `next_restart_at`
    /// the iterator's next restart point and `prev_key` the whole key of the entry before:
    /// `None` when the block is not ANCHORED_DIFF or `offset` lies past the restart point or
    /// the entries (the general path then takes it).
    #[inline(always)]
    fn anchored_step<'b>(
        &'b self,
        offset: usize,
        next_restart_at: usize,
        prev_key: &[u8],
    ) -> Option<AnchoredStep<'b>> {
        let anchor = self.anchor.as_ref()?;
        if offset >= self.restarts_offset || offset > next_restart_at {
            return None;
        }
        let region = self
            .data
            .get(offset..self.restarts_offset)
            .unwrap_or_default();
        let at_restart = offset == next_restart_at;
        let (against, base) = if at_restart {
            (Against::Anchor(anchor.coords()), anchor.suffix)
        } else {
            (Against::Previous, key_suffix(prev_key))
        };
        Some(AnchoredStep {
            region,
            at_restart,
            against,
            base,
        })
    }

    /// Ask the processor for the block's header (this struct), which a seek reads first. A
    /// hint for batched reads: reads nothing the program sees.
    pub fn prefetch_header(self: &Arc<Self>) {
        prefetch_bytes(Arc::as_ptr(self).cast(), size_of::<Block>());
    }

    /// The addresses a scan entering the block reads first, for [`prefetch_spots`] to ask
    /// for before the block is looked up (see [`crate::blockmap`]): its header (this struct
    /// in its `Arc`), its first entries, its restart array and its anchor's key.
    pub(crate) fn spots(self: &Arc<Self>) -> BlockSpots {
        BlockSpots {
            // `Arc` keeps its two counts before the value; a wrong guess only wastes the hint.
            header: (Arc::as_ptr(self) as usize).wrapping_sub(2 * size_of::<usize>()),
            start: self.data.as_ptr() as usize,
            restarts: (self.data.as_ptr() as usize).wrapping_add(self.restarts_offset),
            anchor: self.anchor.as_ref().map_or(0, |a| a.key.as_ptr() as usize),
        }
    }

    /// Ask the processor for the block's search fences, if built (reads the header).
    pub fn prefetch_fences(&self) {
        if let Some(Some(f)) = self.fences.get() {
            prefetch_bytes(f.fences.as_ptr().cast(), size_of_val(f.fences.as_slice()));
        }
    }

    /// Ask the processor for the first `bytes` of the restart interval a seek to `target`
    /// walks, found through the fences when they are built (reads the header and fences).
    pub fn prefetch_interval(&self, target: &KeyRef<'_>, bytes: usize) {
        let Some(Some(f)) = self.fences.get() else {
            return;
        };
        let i = match f.locate(target.row) {
            FencePos::Before => 0,
            FencePos::After => f.fences.len().saturating_sub(1),
            // The last restart point whose word is below the target's: the seek's answer
            // unless words tie (then it lies at or after this one).
            // The words are in order (the restart rows are): a binary search, ~35 instructions
            // fewer than counting from the first on the comparison's blocks (callgrind).
            FencePos::Word(t) => f
                .fences
                .get(1..)
                .map_or(0, |rest| rest.partition_point(|e| e.word < t)),
        };
        if let Some(e) = f.fences.get(i) {
            self.prefetch_data(e.offset as usize, self.data.len(), bytes);
        }
    }

    /// Ask the processor for at most `bytes` of the payload from `at`, not past `end`.
    fn prefetch_data(&self, at: usize, end: usize, bytes: usize) {
        let end = end.min(self.data.len());
        if at < end {
            prefetch_bytes(self.data.as_ptr().wrapping_add(at), bytes.min(end - at));
        }
    }

    /// The fences a seek uses: none on the block's first seek, built on its second (see
    /// [`Fences`] on why). Racing seeks may both search without them, or both try to build;
    /// `OnceLock` builds once.
    fn seek_fences(&self) -> Option<&Fences> {
        if let Some(f) = self.fences.get() {
            return f.as_ref();
        }
        // Read before writing: a hot block's seeks from several threads only read the flag.
        if !self.sought.load(AtomicOrdering::Relaxed) {
            self.sought.store(true, AtomicOrdering::Relaxed);
            return None;
        }
        self.fences.get_or_init(|| self.build_fences()).as_ref()
    }

    /// Restart point `i` read from the restart array, even when fences are built: a scan
    /// entering a block has its array in cache (the prefetch of [`Block::spots`]), the
    /// fences are another allocation elsewhere.
    #[inline]
    fn restart_in_array(&self, i: usize) -> Result<usize, Malformed> {
        let at = self.restarts_offset + 4 * i;
        match self
            .data
            .get(at..at + 4)
            .and_then(|b| <[u8; 4]>::try_from(b).ok())
        {
            Some(b) => Ok(u32::from_le_bytes(b) as usize),
            None => restart_truncated(i),
        }
    }

    fn restart(&self, i: usize) -> Result<usize, Malformed> {
        // Only fences already built: `build_fences` reads the offsets through here.
        if let Some(f) = self
            .fences
            .get()
            .and_then(Option::as_ref)
            .and_then(|f| f.fences.get(i))
        {
            return Ok(f.offset as usize);
        }
        self.restart_in_array(i)
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
        if self.encoding.is_anchored() {
            let (against, base) = self.restart_against(off);
            decode_anchored(region, scratch, &mut 0, base, against, true)
                .map_err(|m| Malformed(format!("entry at {off}: {}", m.0)))?;
            return Ok(scratch);
        }
        if self.encoding == DataBlockEncoding::Diff {
            if region.first() != Some(&0) {
                return malformed(format!("restart entry at {off} shares bytes"));
            }
            scratch.clear();
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

    /// Decode the entry at `offset` given the previous key (and for ANCHORED_DIFF how much of
    /// it is known to be the anchor's, `matched`, and whether the entry is a restart point);
    /// returns the entry and the offset of the next one.
    fn decode_at(
        &self,
        offset: usize,
        key: &mut Vec<u8>,
        matched: &mut usize,
        at_restart: bool,
    ) -> Result<(Entry, usize), Malformed> {
        let decoded = self.decode_unchecked(offset, key, matched, at_restart)?;
        check_entry_key(key, offset)?;
        Ok(decoded)
    }

    /// [`Block::decode_at`] without the check that the rebuilt key parses: for the entries a
    /// seek steps over (their bytes are covered by the block's checksum, and the entry a seek
    /// stops at is checked).
    fn decode_unchecked(
        &self,
        offset: usize,
        key: &mut Vec<u8>,
        matched: &mut usize,
        at_restart: bool,
    ) -> Result<(Entry, usize), Malformed> {
        let region = self
            .data
            .get(offset..self.restarts_offset)
            .unwrap_or_default();
        let (entry, next) = match self.encoding {
            DataBlockEncoding::Prefix => self.decode_prefix(offset, region, key)?,
            DataBlockEncoding::Diff => {
                let d = decode_diff_entry(region, key)
                    .map_err(|m| Malformed(format!("entry at {offset}: {}", m.0)))?;
                self.diff_position(offset, d)
            }
            DataBlockEncoding::AnchoredDiff => {
                let (against, base) =
                    self.against(offset, at_restart, key, Suffix::default(), true);
                let (d, _) = decode_anchored(region, key, matched, base, against, true)
                    .map_err(|m| Malformed(format!("entry at {offset}: {}", m.0)))?;
                self.diff_position(offset, d)
            }
        };
        Ok((entry, next))
    }

    /// Where a DIFF entry decoded at `offset` lies in the block, and the next entry's offset.
    #[inline]
    fn diff_position(&self, offset: usize, d: Decoded) -> (Entry, usize) {
        let at = |(a, b): (usize, usize)| (offset + a, offset + b);
        let entry = Entry {
            offset,
            value: at(d.value),
            tags: at(d.tags),
        };
        (entry, offset + d.next)
    }

    /// The DIFF entry at `offset` as coordinates and suffix fields ([`decode_diff_coords`]);
    /// returns the entry and the offset of the next one.
    fn decode_coords_at(
        &self,
        offset: usize,
        coords: &mut Vec<u8>,
        suffix: &mut Suffix,
        matched: &mut usize,
        at_restart: bool,
    ) -> Result<(Entry, usize), Malformed> {
        let region = self
            .data
            .get(offset..self.restarts_offset)
            .unwrap_or_default();
        let d = if self.encoding.is_anchored() {
            let (against, base) = self.against(offset, at_restart, coords, *suffix, false);
            decode_anchored(region, coords, matched, base, against, false).map(|(d, s)| {
                *suffix = s;
                d
            })
        } else {
            decode_diff_coords(region, coords, suffix)
        }
        .map_err(|m| Malformed(format!("entry at {offset}: {}", m.0)))?;
        let at = |(a, b): (usize, usize)| (offset + a, offset + b);
        let entry = Entry {
            offset,
            value: at(d.value),
            tags: at(d.tags),
        };
        Ok((entry, offset + d.next))
    }

    /// The row of the entry at restart point `i`, read in place where the encoding allows
    /// (DIFF restart entries store their coordinates whole; ANCHORED_DIFF ones do not);
    /// `None` when the key must be rebuilt to be compared ([`Block::restart_key`]).
    fn restart_row(&self, i: usize) -> Result<Option<&[u8]>, Malformed> {
        if self.encoding != DataBlockEncoding::Diff {
            return Ok(None);
        }
        let off = self.restart(i)?;
        let region = self.data.get(off..self.restarts_offset).unwrap_or_default();
        diff_restart_row(region).map_err(|m| Malformed(format!("entry at {off}: {}", m.0)))
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
    /// ANCHORED_DIFF: how many leading bytes of `key` are known to be the anchor's.
    matched: usize,
    /// The restart point at or before the current entry; change it only through
    /// [`BlockIter::set_restart_index`], which keeps the two offsets below.
    restart_index: usize,
    /// Offset of restart point `restart_index`.
    restart_at: usize,
    /// Offset of restart point `restart_index + 1` (`usize::MAX` after the last). A scan
    /// compares each entry's offset with these instead of reading the restart array twice an
    /// entry (with the lighter key check of `decode_at`: 4% fewer instructions for a cached
    /// scan, callgrind).
    next_restart_at: usize,
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

impl Drop for BlockIter {
    fn drop(&mut self) {
        bufpool::give(std::mem::take(&mut self.key));
        bufpool::give(std::mem::take(&mut self.scratch));
    }
}

/// Check that the rebuilt key of the entry at `offset` parses: the same checks as
/// `KeyRef::parse` without building the parts (the reader parses the key again anyway); the
/// full parse only to word the error.
#[inline]
fn check_entry_key(key: &[u8], offset: usize) -> Result<(), Malformed> {
    if crate::cell::row_if_well_formed(key).is_none() {
        KeyRef::parse(key).map_err(|m| Malformed(format!("entry at {offset}: {m}")))?;
    }
    Ok(())
}

/// A cursor's current cell: its encoded key, value and tags, borrowed from the cursor.
///
/// Why one call: a scan reads all three of every cell through several layers of cursors (the
/// merge, a level's run of files, a file's index levels), and an accessor per field walked
/// the layers three times over (perf: 9% of a cached scan's samples in the accessors; one
/// call saved 2.6% of its instructions, callgrind).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CellEntry<'a> {
    /// Encoded key (SPEC.md §3.1).
    pub key: &'a [u8],
    /// Value.
    pub value: &'a [u8],
    /// Tags (SPEC.md §3.4); empty for none.
    pub tags: &'a [u8],
    /// True when the cursor knows that the next cell is of another row, so that this one is
    /// its row's last ([`BlockIter::next_leaves_row`]); false when it does not know (at a
    /// block's end, at a restart point of a block not ANCHORED_DIFF, from a source that cannot
    /// tell) or the next cell is of the same row. A scan hands such a row to its caller at
    /// once, borrowing the cell from the block instead of copying it into the row it gathers.
    pub last_in_row: bool,
}

impl BlockIter {
    /// An unpositioned iterator.
    pub fn new(block: Arc<Block>) -> Self {
        // The block's fields span three cache lines, which the first step or seek would
        // otherwise miss on one after another (the payload's address, then the fences', then
        // the anchor's). Asked for together now: cached Gets over the comparison's 1.73M rows
        // ran +5% and +8% (medians of 4 and 5 alternated runs, 7 of 9 rounds faster; RESULTS.md,
        // session 41).
        prefetch_bytes(Arc::as_ptr(&block).cast(), std::mem::size_of::<Block>());
        BlockIter {
            block,
            // From the thread's pool (`crate::bufpool`), with room for a typical cell key: a
            // Get makes a few iterators, and growing their keys from empty was 6% of its
            // instructions (callgrind).
            key: bufpool::take(),
            entry: Entry::default(),
            next_offset: 0,
            matched: 0,
            restart_index: 0,
            restart_at: 0,
            next_restart_at: 0,
            valid: false,
            back: Vec::new(),
            back_keys: Vec::new(),
            scratch: bufpool::take(),
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

    /// Current key, value and tags in one call; `None` when not valid. Its `last_in_row` is
    /// false: a reader stepping cell by cell asks [`BlockIter::next_leaves_row`] when it wants
    /// to know (a Get does, once a row), and [`BlockIter::run`] tells every cell.
    #[inline]
    pub fn current(&self) -> Option<CellEntry<'_>> {
        if !self.valid {
            return None;
        }
        let at = |(a, b): (usize, usize)| self.block.data.get(a..b).unwrap_or_default();
        Some(CellEntry {
            key: &self.key,
            value: at(self.entry.value),
            tags: at(self.entry.tags),
            last_in_row: false,
        })
    }

    /// Hand `f` the current entry and each one after it in this block, stepping on after
    /// every entry it returns true for. Returns when `f` returns false (positioned on that
    /// entry) or the block ends (not valid). A scan's loop: one call a block instead of a
    /// `next` and a `current` a cell through every layer of cursors above this one.
    #[inline]
    pub fn run(&mut self, f: &mut dyn FnMut(CellEntry<'_>) -> bool) -> Result<(), Malformed> {
        while self.valid {
            let at = |(a, b): (usize, usize)| self.block.data.get(a..b).unwrap_or_default();
            let entry = CellEntry {
                key: &self.key,
                value: at(self.entry.value),
                tags: at(self.entry.tags),
                last_in_row: self.next_leaves_current_row(),
            };
            if !f(entry) {
                return Ok(());
            }
            match self.step_common() {
                Some(r) => r?,
                None => self.step_general()?,
            }
        }
        Ok(())
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
        let anchored = self.block.anchor.is_some();
        // An ANCHORED_DIFF restart entry is decoded against the anchor, not the entry before.
        let at_restart = anchored && {
            self.advance_restart_index(offset)?;
            self.restart_at == offset
        };
        match self
            .block
            .decode_at(offset, &mut self.key, &mut self.matched, at_restart)
        {
            Ok((entry, next)) => {
                self.entry = entry;
                self.next_offset = next;
                if !anchored {
                    self.advance_restart_index(offset)?;
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
        self.matched = 0;
        self.set_restart_index(i)?;
        self.parse_at(self.restart_at)
    }

    /// Make `i` the current restart point, with its offset and the next one's.
    fn set_restart_index(&mut self, i: usize) -> Result<(), Malformed> {
        self.restart_at = self.block.restart(i)?;
        self.next_restart_at = if i + 1 < self.block.num_restarts {
            self.block.restart(i + 1)?
        } else {
            usize::MAX
        };
        self.restart_index = i;
        Ok(())
    }

    /// Position on the first entry.
    pub fn seek_to_first(&mut self) -> Result<(), Malformed> {
        if self.block.num_restarts == 0 {
            self.valid = false;
            return Ok(());
        }
        // `seek_to_restart(0)` with the next point read from the array (as a scan's steps
        // read it, `enter_next_restart`); the first point is 0 (checked at decode).
        self.key.clear();
        self.matched = 0;
        self.restart_index = 0;
        self.restart_at = 0;
        self.next_restart_at = if self.block.num_restarts > 1 {
            self.block.restart_in_array(1)?
        } else {
            usize::MAX
        };
        self.parse_at(0).map(|_| ())
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
        self.pop_back()
    }

    /// True when the next entry is known to hold another row than the current one, whose row
    /// is `row_len` bytes long; false when it is not known (or is the same row).
    ///
    /// Read without decoding the next entry. Every key, and every DIFF and ANCHORED_DIFF
    /// coordinates, start with the row's length and the row, and an entry that is not a
    /// restart point shares exactly the longest prefix it has in common with the entry before
    /// it (SPEC.md §4.3): so it shares fewer than `2 + row_len` bytes if and only if its row
    /// differs, and its `shared` length alone tells. An ANCHORED_DIFF restart entry is told
    /// from the anchor's bytes it shares and its delta
    /// (`anchored_restart_leaves_row`); another encoding's restart entry and the end of the
    /// block answer false.
    ///
    /// Why: a Get reads the cell after its row's last to see that the row ended, and decoding
    /// it was ~300 of a cached Get's ~6,200 instructions (callgrind); a scan hands a row of one
    /// cell over at once when it knows ([`CellEntry::last_in_row`]).
    #[inline]
    pub fn next_leaves_row(&self, row_len: usize) -> bool {
        self.valid && self.next_leaves(row_len)
    }

    /// [`BlockIter::next_leaves_row`] for the current entry's row, its length read from the
    /// key (SPEC.md §3.1), for [`BlockIter::run`]'s every entry.
    #[inline(always)]
    fn next_leaves_current_row(&self) -> bool {
        self.key
            .first_chunk::<2>()
            .is_some_and(|len| self.next_leaves(usize::from(u16::from_le_bytes(*len))))
    }

    /// [`BlockIter::next_leaves_row`] on a valid iterator. Forced inline: called, it cost a
    /// cached scan 28 instructions a cell (callgrind).
    #[inline(always)]
    fn next_leaves(&self, row_len: usize) -> bool {
        let off = self.next_offset;
        if off >= self.block.restarts_offset {
            return false;
        }
        let region = || {
            self.block
                .data
                .get(off..self.block.restarts_offset)
                .unwrap_or_default()
        };
        if off == self.next_restart_at {
            return match (self.block.anchor.as_ref(), self.key.get(..2 + row_len)) {
                (Some(anchor), Some(row)) => {
                    anchored_restart_leaves_row(region(), anchor.coords(), row, self.matched)
                }
                _ => false,
            };
        }
        match self.block.data.get(off) {
            Some(&shared) if shared < 0x80 => usize::from(shared) < 2 + row_len,
            _ => Cursor::new(region())
                .varint32("entry shared length")
                .is_ok_and(|shared| (shared as usize) < 2 + row_len),
        }
    }

    /// Advance to the next entry.
    pub fn next(&mut self) -> Result<(), Malformed> {
        if !self.valid {
            return Ok(());
        }
        match self.step_common() {
            Some(r) => r,
            None => self.step_general(),
        }
    }

    /// A scan's common step, inlined into [`BlockIter::next`] and [`BlockIter::run`]: an
    /// ANCHORED_DIFF entry of the common shape ([`decode_simple`]), decoded here directly
    /// rather than through `parse_at`'s general case (the encoding's dispatch, the choice of
    /// what it is encoded against, the restart array read through `Result`s). `None`, with
    /// nothing changed, when the next entry is not of that shape: [`BlockIter::step_general`]
    /// takes it. The iterator must be valid.
    ///
    /// Why: the general path cost a cached scan 5.5% more instructions (callgrind) inside
    /// restart intervals. The comparison's files put a restart point every 4 entries, so the
    /// restart entries (encoded against the anchor) take this path too: a quarter of a scan's
    /// entries, which cost twice the others through `parse_at` (2.4% of a cached scan's
    /// instructions saved). Inlined into `run` rather than called through `next`, the step
    /// saves the call and its `Result` in memory: RESULTS.md, session 37.
    #[inline(always)]
    fn step_common(&mut self) -> Option<Result<(), Malformed>> {
        let offset = self.next_offset;
        let step = self
            .block
            .anchored_step(offset, self.next_restart_at, &self.key)?;
        let anchor_coords = match step.against {
            Against::Anchor(a) => Some(a),
            _ => None,
        };
        let at_restart = step.at_restart;
        let d = decode_simple(
            step.region,
            &mut self.key,
            &mut self.matched,
            step.base,
            anchor_coords,
        )?;
        // It finishes on its own rather than through the general path's `Result`: joining
        // them cost a cached scan 2% more instructions (callgrind).
        if let Err(e) = check_entry_key(&self.key, offset) {
            self.valid = false;
            return Some(Err(e));
        }
        let (entry, next) = self.block.diff_position(offset, d);
        self.entry = entry;
        self.next_offset = next;
        Some(if at_restart {
            self.enter_next_restart()
        } else {
            Ok(())
        })
    }

    /// [`BlockIter::next`] for an entry [`BlockIter::step_common`] does not take: any other
    /// ANCHORED_DIFF entry (including every malformed one) through the general decoder, and
    /// the other encodings through `parse_at`.
    #[inline(never)]
    fn step_general(&mut self) -> Result<(), Malformed> {
        let offset = self.next_offset;
        if let Some(step) = self
            .block
            .anchored_step(offset, self.next_restart_at, &self.key)
        {
            let at_restart = step.at_restart;
            let decoded = decode_anchored(
                step.region,
                &mut self.key,
                &mut self.matched,
                step.base,
                step.against,
                true,
            )
            .map_err(|m| Malformed(format!("entry at {offset}: {}", m.0)))
            .and_then(|(d, _)| check_entry_key(&self.key, offset).map(|()| d));
            return match decoded {
                Ok(d) => {
                    let (entry, next) = self.block.diff_position(offset, d);
                    self.entry = entry;
                    self.next_offset = next;
                    if at_restart {
                        self.enter_next_restart()
                    } else {
                        Ok(())
                    }
                }
                Err(e) => {
                    self.valid = false;
                    Err(e)
                }
            };
        }
        self.parse_at(offset)?;
        Ok(())
    }

    /// The entry just decoded sits at restart point `restart_index + 1`: make it the current
    /// one, reading the point after it from the restart array (a scan's walk asked for its
    /// lines on entering the block; fences, where built, lie elsewhere).
    #[inline]
    fn enter_next_restart(&mut self) -> Result<(), Malformed> {
        let i = self.restart_index + 1;
        self.restart_at = self.next_restart_at;
        self.restart_index = i;
        self.next_restart_at = if i + 1 < self.block.num_restarts {
            match self.block.restart_in_array(i + 1) {
                Ok(at) => at,
                Err(e) => {
                    self.valid = false;
                    return Err(e);
                }
            }
        } else {
            usize::MAX
        };
        Ok(())
    }

    /// Step back to the previous entry.
    pub fn prev(&mut self) -> Result<(), Malformed> {
        if !self.valid {
            return Ok(());
        }
        let original = self.entry.offset;
        if self.back.last().is_some_and(|b| b.next_offset == original) {
            return self.pop_back();
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
        self.pop_back()
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
    fn pop_back(&mut self) -> Result<(), Malformed> {
        match self.back.pop() {
            Some(b) => {
                self.key.clear();
                self.key
                    .extend_from_slice(self.back_keys.get(b.key_start..).unwrap_or_default());
                self.matched = 0;
                self.back_keys.truncate(b.key_start);
                self.entry = b.entry;
                self.next_offset = b.next_offset;
                if let Err(e) = self.set_restart_index(b.restart_index) {
                    self.valid = false;
                    return Err(e);
                }
                self.valid = true;
            }
            None => self.valid = false,
        }
        Ok(())
    }

    /// Position on the first entry whose key is `>= target`, invalid if there is none.
    ///
    /// A search over the restart points (halving, then counting fences) finds the interval,
    /// comparing a DIFF restart entry's row where it lies in the block (the whole key is
    /// rebuilt only when the row ties); a walk through the interval then decodes the entries it passes without checking
    /// that their keys parse, and checks the entry it stops at. Both were most of a Get: the
    /// walk's per-entry check and the search's key rebuilds.
    pub fn seek(&mut self, target: &KeyRef<'_>) -> Result<(), Malformed> {
        if self.block.num_restarts == 0 {
            self.valid = false;
            return Ok(());
        }
        // The walk decodes its first entry against the anchor, whose key is an allocation of
        // its own: asked for now, it arrives while the fences are searched. So do the
        // fences' prefix and, up to a kilobyte of them (a data block's few dozen; an index
        // block's hundreds are halved, not read whole), the fences. Cached Gets over the
        // comparison's 1.73M rows: the anchor's prefetch ran faster in 13 of 18 alternated
        // runs, the fences' added to it in 10 of 14 (medians +5% and +10%).
        if let Some(a) = &self.block.anchor {
            prefetch_bytes(a.key.as_ptr(), a.key.len());
        }
        if let Some(Some(f)) = self.block.fences.get() {
            prefetch_bytes(f.prefix.as_ptr(), f.prefix.len());
            if size_of_val(f.fences.as_slice()) <= 1024 {
                prefetch_bytes(f.fences.as_ptr().cast(), size_of_val(f.fences.as_slice()));
            }
        }
        // The last restart point whose key is < target.
        let (mut lo, mut hi) = (0usize, self.block.num_restarts - 1);
        let fences = self.block.seek_fences();
        let fence = fences.map(|f| f.locate(target.row));
        match fence {
            Some(FencePos::Before) => hi = 0,
            Some(FencePos::After) => lo = hi,
            _ => {}
        }
        let words = match (&fence, fences) {
            (Some(FencePos::Word(t)), Some(f)) => Some((f.fences.as_slice(), *t)),
            _ => None,
        };
        while lo < hi {
            if let Some((fences, t)) = words {
                if hi - lo <= LINEAR_FENCES {
                    lo = scan_fences(&self.block, &mut self.scratch, fences, t, (lo, hi), target)?;
                    break;
                }
            }
            let mid = (lo + hi).div_ceil(2);
            let word = words.and_then(|(f, t)| f.get(mid).map(|e| (e.word, t)));
            let below = match word {
                Some((w, t)) if w != t => w < t,
                _ => restart_below(&self.block, &mut self.scratch, mid, target)?,
            };
            if below {
                lo = mid;
            } else {
                hi = mid - 1;
            }
        }
        self.valid = false;
        self.key.clear();
        let mut off = self.block.restart(lo)?;
        self.prefetch_walk(lo, off);
        if self.block.encoding.is_diff() {
            return self.walk_diff(lo, off, target);
        }
        while off < self.block.restarts_offset {
            let (entry, next) =
                self.block
                    .decode_unchecked(off, &mut self.key, &mut self.matched, false)?;
            // A key that does not parse ranks after the target (`cmp_to`): the walk stops on
            // it and `land` reports it.
            if cmp_to(&self.key, target) != Ordering::Less {
                return self.land(lo, entry, next);
            }
            off = next;
        }
        Ok(())
    }

    /// The walk of a DIFF block's seek from restart point `ri` (at `off`): `key` holds only
    /// the coordinates of the entries passed, their timestamps and sequence numbers stay
    /// numbers, and rows are compared on the coordinates; the whole key is written for a row
    /// that ties with the target's and for the entry the walk stops at. Rebuilding and parsing
    /// every key passed was most of a Get's instructions.
    fn walk_diff(
        &mut self,
        ri: usize,
        mut off: usize,
        target: &KeyRef<'_>,
    ) -> Result<(), Malformed> {
        let mut suffix = Suffix::default();
        self.matched = 0;
        // The next restart point the walk reaches (an ANCHORED_DIFF restart entry is decoded
        // against the anchor): the walk starts on one.
        let anchored = self.block.anchor.is_some();
        let mut next_restart = (ri, if anchored { off } else { usize::MAX });
        while off < self.block.restarts_offset {
            let at_restart = off == next_restart.1;
            if at_restart {
                let i = next_restart.0 + 1;
                let at = if i < self.block.num_restarts {
                    self.block.restart(i)?
                } else {
                    usize::MAX
                };
                next_restart = (i, at);
            }
            let (entry, next) = self.block.decode_coords_at(
                off,
                &mut self.key,
                &mut suffix,
                &mut self.matched,
                at_restart,
            )?;
            let order = match coords_row(&self.key) {
                Some(row) if row != target.row => compare_bytes(row, target.row),
                _ => {
                    self.scratch.clear();
                    self.scratch.extend_from_slice(&self.key);
                    push_suffix(&mut self.scratch, suffix.ts, suffix.ty, suffix.seq);
                    cmp_to(&self.scratch, target)
                }
            };
            if order != Ordering::Less {
                push_suffix(&mut self.key, suffix.ts, suffix.ty, suffix.seq);
                return self.land(ri, entry, next);
            }
            off = next;
        }
        // Past the last entry: not positioned, and no partial key left behind.
        self.key.clear();
        Ok(())
    }

    /// Ask the processor for the restart interval the walk from restart point `lo` (at `off`)
    /// reads, up to [`WALK_PREFETCH`] bytes, before the walk needs its first entry.
    ///
    /// Why: the walk decodes entry after entry and each one's position depends on the last, so
    /// a cold interval came in as one miss after another; requested together, its cache lines
    /// arrive in about the time of one. The walk's first load was 78% of `decode_anchored`'s
    /// samples, itself a quarter of a cached Get (`perf`); with the prefetch `cellar bench
    /// readrandom` on 2M cached keys ran 18–37% faster (3 alternated pairs, session 28), and
    /// the comparison's readrandom went from 1.16–1.19x the best LSM to 1.28–1.32x.
    ///
    /// A hint: a restart point it cannot read is left to the walk to report.
    fn prefetch_walk(&self, lo: usize, off: usize) {
        let end = if lo + 1 < self.block.num_restarts {
            self.block.restart(lo + 1).ok()
        } else {
            Some(self.block.restarts_offset)
        };
        if let Some(end) = end {
            self.block.prefetch_data(off, end, WALK_PREFETCH);
        }
    }

    /// Make `entry` (whose whole key is in `key`, found walking from restart point `ri`) the
    /// current entry, after checking that its key parses.
    fn land(&mut self, ri: usize, entry: Entry, next: usize) -> Result<(), Malformed> {
        let off = entry.offset;
        KeyRef::parse(&self.key).map_err(|m| Malformed(format!("entry at {off}: {m}")))?;
        self.entry = entry;
        self.next_offset = next;
        self.set_restart_index(ri)?;
        self.advance_restart_index(off)?;
        self.valid = true;
        Ok(())
    }

    /// Move `restart_index` forward to the last restart point at or before `offset`.
    fn advance_restart_index(&mut self, offset: usize) -> Result<(), Malformed> {
        while self.next_restart_at <= offset {
            self.set_restart_index(self.restart_index + 1)?;
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

/// The end of [`BlockIter::seek`]'s search over restart points `lo..=hi` (`lo` known to
/// sort below the target, or 0): the last one whose key sorts below `target` (whose
/// row's word is `t`), else `lo`.
///
/// Counting the fences below the word instead of halving the range: the loads do not
/// depend on each other, so the cache lines of a block's fences arrive together instead
/// of one miss after another, and no comparison's branch can be mispredicted. The
/// halving's dependent misses were half of a cached Get's block search time (`perf`).
/// Words are in order, so the fences below come first, then those tied with `t`, then those
/// above. The tied ones (a wide row's restart points) are searched by halving with their
/// keys, as before: the words cannot order them.
fn scan_fences(
    block: &Block,
    scratch: &mut Vec<u8>,
    fences: &[Fence],
    t: u64,
    (lo, hi): (usize, usize),
    target: &KeyRef<'_>,
) -> Result<usize, Malformed> {
    let range = fences.get(lo + 1..=hi).unwrap_or_default();
    let (below, tied) = range.iter().fold((0, 0), |(b, e), f| {
        (b + usize::from(f.word < t), e + usize::from(f.word == t))
    });
    // The last restart point known below (or `lo`), and the last tied one.
    let (mut lo, mut hi) = (lo + below, lo + below + tied);
    while lo < hi {
        let mid = (lo + hi).div_ceil(2);
        if restart_below(block, scratch, mid, target)? {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    Ok(lo)
}

/// Whether restart point `i`'s key sorts before `target`, from the row in place when it
/// decides (DIFF), else from the whole key.
fn restart_below(
    block: &Block,
    scratch: &mut Vec<u8>,
    i: usize,
    target: &KeyRef<'_>,
) -> Result<bool, Malformed> {
    Ok(match block.restart_row(i)? {
        Some(row) if row != target.row => compare_bytes(row, target.row).is_lt(),
        _ => {
            let k = block.restart_key(i, scratch)?;
            cmp_to(k, target) == Ordering::Less
        }
    })
}

#[cold]
#[inline(never)]
fn restart_truncated(i: usize) -> Result<usize, Malformed> {
    malformed(format!("restart point {i} truncated"))
}

/// Where a block's first reads land ([`Block::spots`]): addresses only, never dereferenced,
/// so they may outlive the block (then the prefetch asks for lines nobody needs).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct BlockSpots {
    pub(crate) header: usize,
    pub(crate) start: usize,
    pub(crate) restarts: usize,
    pub(crate) anchor: usize,
}

/// Ask the processor for the lines at `spots` (those of zero addresses left out): the
/// header, a scan's first ~256 bytes of entries, two lines of restart points (a 16 KiB
/// block has 10–30) and the anchor's key.
pub(crate) fn prefetch_spots(spots: &BlockSpots) {
    let at = std::ptr::without_provenance::<u8>;
    if spots.header != 0 {
        prefetch_bytes(
            at(spots.header),
            2 * size_of::<usize>() + size_of::<Block>(),
        );
    }
    if spots.start != 0 {
        prefetch_bytes(at(spots.start), 256);
        prefetch_bytes(at(spots.restarts), 128);
    }
    if spots.anchor != 0 {
        prefetch_bytes(at(spots.anchor), 64);
    }
}

/// Ask the processor to bring the cache lines of `len` bytes at `p` into its caches.
///
/// The format crate's one `unsafe` block: the prefetch intrinsic is an `unsafe fn`.
#[inline]
#[allow(unsafe_code)]
fn prefetch_bytes(p: *const u8, len: usize) {
    #[cfg(all(target_arch = "x86_64", not(miri)))]
    {
        // From the line holding `p` to the one holding its last byte.
        let first = p.wrapping_sub(p as usize % 64);
        let lines = (p as usize % 64 + len).div_ceil(64);
        for i in 0..lines {
            // SAFETY: a prefetch is a hint: it reads nothing the program sees and cannot
            // fault, whatever the address.
            unsafe {
                std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
                    first.wrapping_add(i * 64).cast(),
                );
            }
        }
    }
    #[cfg(not(all(target_arch = "x86_64", not(miri))))]
    let _ = (p, len);
}

/// Compare a key already validated by `decode_at` with a target.
#[inline]
fn cmp_to(key: &[u8], target: &KeyRef<'_>) -> Ordering {
    // A seek's comparisons are nearly all decided by the row: compare it in place and parse
    // the whole key only on a tie (as `compare_keys` does; a key that does not parse takes
    // the full path and sorts last, as before).
    if let Some(row) = crate::cell::row_if_well_formed(key) {
        let o = compare_bytes(row, target.row);
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

    /// The counting search lands on the last restart point below the target, also inside a
    /// run of restart points tied on the row (a wide row), where the words cannot decide: a
    /// search stopping earlier would still seek right, walking further, so only this shows it.
    #[test]
    fn counted_fences_end_on_the_last_restart_below_the_target() {
        let mut ks: Vec<Vec<u8>> = (0..10)
            .map(|i| CellKey::new(format!("a{i}"), "cf", "q", 1, CellType::Put, 1).encode())
            .collect();
        ks.extend(
            (0..20).map(|q| {
                CellKey::new("wide", "cf", format!("q{q:02}"), 1, CellType::Put, 1).encode()
            }),
        );
        let block = build(&ks, 1);
        let fences = block
            .fences
            .get_or_init(|| block.build_fences())
            .as_ref()
            .expect("fenced");
        let mut scratch = Vec::new();
        for (at, k) in ks.iter().enumerate() {
            let target = KeyRef::parse(k).unwrap();
            let FencePos::Word(t) = fences.locate(target.row) else {
                panic!("{at}: the target's row has the prefix");
            };
            let end = fences.fences.len() - 1;
            let got = scan_fences(&block, &mut scratch, &fences.fences, t, (0, end), &target);
            assert_eq!(got.unwrap(), at.saturating_sub(1), "target {at}");
        }
    }

    /// Fences are built by a block's second seek, not by its decode or its first seek, nor
    /// by walks; its weight does not change when they are.
    #[test]
    fn fences_wait_for_the_second_seek() {
        let ks: Vec<Vec<u8>> = (0..200)
            .map(|i| CellKey::new(format!("r{i:04}"), "cf", "q", 1, CellType::Put, 1).encode())
            .collect();
        let block = build(&ks, 16);
        let weight = block.memory();
        let mut it = BlockIter::new(block.clone());
        it.seek_to_first().unwrap();
        while it.valid() {
            it.next().unwrap();
        }
        it.seek_to_last().unwrap();
        assert!(block.fences.get().is_none(), "walks build no fences");
        let target = KeyRef::parse(&ks[150]).unwrap();
        it.seek(&target).unwrap();
        assert_eq!(it.key(), ks[150].as_slice());
        assert!(block.fences.get().is_none(), "the first seek builds none");
        it.seek(&target).unwrap();
        assert_eq!(it.key(), ks[150].as_slice());
        assert!(
            block.fences.get().is_some_and(Option::is_some),
            "the second does"
        );
        assert_eq!(block.memory(), weight);
        // What the weight counts is what the fences hold: no room grown past their number
        // (200 entries at interval 16 make 13 restart points, which doubling would have
        // given room for 16).
        let built = block.fences.get().and_then(Option::as_ref).unwrap();
        assert_eq!(built.fences.len(), block.num_restarts);
        assert_eq!(built.fences.capacity(), block.num_restarts);
    }

    use proptest::prelude::*;

    /// Sorted, distinct cell keys: rows with long shared prefixes, several qualifiers and
    /// versions per row (restart points then often tie on the row).
    fn sorted_keys() -> impl Strategy<Value = Vec<Vec<u8>>> {
        prop::collection::vec((0u32..40, 0u8..3, 0u64..4, 0u64..3, 0usize..2), 1..120).prop_map(
            |cells| {
                let mut ks: Vec<Vec<u8>> = cells
                    .into_iter()
                    .map(|(row, q, ts, seq, ty)| {
                        let t = [CellType::Put, CellType::DeleteColumn][ty];
                        CellKey::new(
                            format!("0000000{row:09}"),
                            "f",
                            vec![b'q'; q as usize],
                            ts,
                            t,
                            seq,
                        )
                        .encode()
                    })
                    .collect();
                ks.sort_by(|a, b| crate::cell::compare_keys(a, b));
                ks.dedup();
                ks
            },
        )
    }

    /// Sorted, distinct cell keys over rows of several lengths that are prefixes of one
    /// another ("a", "ab", "abc", ...), several families, qualifiers and versions per row.
    fn keys_of_varied_rows() -> impl Strategy<Value = Vec<Vec<u8>>> {
        prop::collection::vec((0usize..12, 0u8..2, 0u8..3, 0u64..3), 1..100).prop_map(|cells| {
            let rows = [
                "a", "ab", "abc", "abcd", "abd", "b", "ba", "bab", "c", "cc", "ccc", "d",
            ];
            let mut ks: Vec<Vec<u8>> = cells
                .into_iter()
                .map(|(row, fam, q, ts)| {
                    let fam = ["f", "gg"][usize::from(fam)];
                    CellKey::new(rows[row], fam, vec![b'q'; q as usize], ts, CellType::Put, 1)
                        .encode()
                })
                .collect();
            ks.sort_by(|a, b| crate::cell::compare_keys(a, b));
            ks.dedup();
            ks
        })
    }

    proptest! {
        /// `next_leaves_row` is sound (true only when the next entry's row differs) and fires
        /// where it can: on every next entry of another row in the block that is not a
        /// restart point, and at restart points too in ANCHORED_DIFF blocks.
        #[test]
        fn next_leaves_row_answers_from_the_shared_length(
            ks in keys_of_varied_rows(),
            interval in prop::sample::select(vec![1usize, 2, 4, 16]),
            enc in prop::sample::select(vec![
                DataBlockEncoding::Prefix,
                DataBlockEncoding::Diff,
                DataBlockEncoding::AnchoredDiff,
            ]),
        ) {
            let mut b = BlockBuilder::with_encoding(interval, enc);
            for (i, k) in ks.iter().enumerate() {
                b.add(k, format!("v{i}").as_bytes(), b"");
            }
            let block = Arc::new(Block::with_encoding(b.finish(), enc).unwrap());
            let restarts: Vec<usize> =
                (0..block.num_restarts).map(|i| block.restart(i).unwrap()).collect();
            // One step from where the cursor is: the claim and what `next` then finds.
            let step = |it: &mut BlockIter, i: usize| -> Result<(), TestCaseError> {
                let row = KeyRef::parse(it.key()).unwrap().row.to_vec();
                let next_offset = it.next_offset;
                let leaves = it.next_leaves_row(row.len());
                it.next().unwrap();
                let next_row = it.valid().then(|| KeyRef::parse(it.key()).unwrap().row.to_vec());
                if leaves {
                    prop_assert!(next_row.is_some(), "key {}: claimed a next row at the end", i);
                    prop_assert_ne!(next_row.as_ref(), Some(&row), "key {}: same row", i);
                } else if let Some(n) = &next_row {
                    // ANCHORED_DIFF tells at restart points too (from the anchor).
                    let untold = restarts.contains(&next_offset)
                        && enc != DataBlockEncoding::AnchoredDiff;
                    prop_assert!(
                        n == &row || untold,
                        "key {}: another row, not told", i
                    );
                }
                Ok(())
            };
            // Walking from the first entry, and from where a seek to each key lands (a Get's
            // way in).
            let mut it = BlockIter::new(block.clone());
            it.seek_to_first().unwrap();
            let mut i = 0;
            while it.valid() {
                step(&mut it, i)?;
                i += 1;
            }
            prop_assert_eq!(i, ks.len());
            let mut it = BlockIter::new(block.clone());
            for (i, k) in ks.iter().enumerate() {
                it.seek(&KeyRef::parse(k).unwrap()).unwrap();
                prop_assert_eq!(it.key(), k.as_slice());
                step(&mut it, i)?;
            }
            // `run` tells each entry's `last_in_row` as `next_leaves_row` answers there (the
            // keys here are short enough for `shared` to be a one-byte varint).
            let mut told = Vec::new();
            let mut it = BlockIter::new(block.clone());
            it.seek_to_first().unwrap();
            it.run(&mut |e| {
                told.push(e.last_in_row);
                true
            })
            .unwrap();
            let mut expected = Vec::new();
            let mut it = BlockIter::new(block);
            it.seek_to_first().unwrap();
            while it.valid() {
                prop_assert!(!it.current().unwrap().last_in_row);
                expected.push(it.next_leaves_row(KeyRef::parse(it.key()).unwrap().row.len()));
                it.next().unwrap();
            }
            prop_assert_eq!(told, expected);
        }

        #[test]
        fn seeks_land_where_a_linear_search_does(
            ks in sorted_keys(),
            interval in prop::sample::select(vec![1usize, 2, 3, 4, 16]),
            enc in prop::sample::select(vec![
                DataBlockEncoding::Prefix,
                DataBlockEncoding::Diff,
                DataBlockEncoding::AnchoredDiff,
            ]),
            targets in prop::collection::vec((0u32..42, 0u8..4, 0u64..5, 0u64..4, 0u8..4, 0usize..17), 1..20),
        ) {
            let mut b = BlockBuilder::with_encoding(interval, enc);
            for (i, k) in ks.iter().enumerate() {
                b.add(k, format!("v{i}").as_bytes(), if i % 5 == 0 { b"t" } else { b"" });
            }
            let payload = b.finish();
            let block = Arc::new(Block::with_encoding(payload.clone(), enc).unwrap());
            let mut it = BlockIter::new(block);
            // Whole walks both ways: stepping across restart points (which an ANCHORED_DIFF
            // block decodes against its first entry) sees every key in order.
            it.seek_to_first().unwrap();
            let mut fwd = Vec::new();
            while it.valid() {
                fwd.push(it.key().to_vec());
                it.next().unwrap();
            }
            prop_assert_eq!(&fwd, &ks);
            it.seek_to_last().unwrap();
            let mut back = Vec::new();
            while it.valid() {
                back.push(it.key().to_vec());
                it.prev().unwrap();
            }
            back.reverse();
            prop_assert_eq!(&back, &ks);
            for (row, q, ts, seq, shape, cut) in targets {
                // Rows as written, cut short (before or inside the block's shared prefix),
                // extended by a byte, or past every row.
                let mut r = format!("0000000{row:09}").into_bytes();
                match shape {
                    1 => r.truncate(cut),
                    2 => r.push(b'0'),
                    3 => r[cut.min(15)] = b'9',
                    _ => {}
                }
                let target = CellKey::new(r, "f", vec![b'q'; q as usize], ts, CellType::Put, seq);
                let t = target.as_ref();
                let at = ks.iter().position(|k| KeyRef::parse(k).unwrap() >= t);
                // A block's first seek searches without fences, the later ones with them.
                let fresh = Arc::new(Block::with_encoding(payload.clone(), enc).unwrap());
                let mut first = BlockIter::new(fresh);
                first.seek(&t).unwrap();
                prop_assert!(first.block().fences.get().is_none());
                prop_assert_eq!(first.valid().then(|| first.key().to_vec()), at.map(|i| ks[i].clone()));
                it.seek(&t).unwrap();
                prop_assert_eq!(it.valid().then(|| it.key().to_vec()), at.map(|i| ks[i].clone()));
                if let Some(i) = at {
                    let want = format!("v{i}");
                    prop_assert_eq!(it.value(), want.as_bytes());
                    // The iterator keeps moving correctly from where the seek left it.
                    it.next().unwrap();
                    prop_assert_eq!(it.valid().then(|| it.key().to_vec()), ks.get(i + 1).cloned());
                    it.seek(&t).unwrap();
                    it.prev().unwrap();
                    let before = i.checked_sub(1).map(|j| ks[j].clone());
                    prop_assert_eq!(it.valid().then(|| it.key().to_vec()), before);
                }
                it.seek_for_prev(&t).unwrap();
                let last = ks.iter().rev().find(|k| KeyRef::parse(k).unwrap() <= t).cloned();
                prop_assert_eq!(it.valid().then(|| it.key().to_vec()), last);
            }
        }
    }

    /// SPEC.md §4.5's worked example, byte for byte: the restart entry (the third) is encoded
    /// against the first (sharing `02 00 72`, timestamp and seq differences from 7 and 1)
    /// where DIFF would store it whole; the others against the entry before them.
    #[test]
    fn anchored_diff_worked_example_bytes() {
        let mut b = BlockBuilder::with_encoding(2, DataBlockEncoding::AnchoredDiff);
        let cells = [
            ("r1", 7, 1, b"x"),
            ("r2", 9, 3, b"y"),
            ("r3", 8, 2, b"z"),
            ("r4", 6, 5, b"w"),
        ];
        let keys: Vec<Vec<u8>> = cells
            .iter()
            .map(|(r, ts, seq, _)| CellKey::new(*r, "cf", "a", *ts, CellType::Put, *seq).encode())
            .collect();
        for (k, (_, _, _, v)) in keys.iter().zip(&cells) {
            b.add(k, *v, b"");
        }
        let payload = b.finish();
        let want: Vec<u8> = [
            // entry 0 at 0, the anchor: shares nothing, base 0
            "00 08 01 04 02 00 72 31 02 63 66 61 0e 02 78",
            // entry 1 (at 15) against entry 0; entry 2 (a restart point, at 27) against the
            // anchor, entry 0; entry 3 (at 39) against entry 2
            "03 05 01 04 32 02 63 66 61 04 04 79",
            "03 05 01 04 33 02 63 66 61 02 02 7a",
            "03 05 01 04 34 02 63 66 61 03 06 77",
            // restart array: 0 and 27; two restart points
            "00 00 00 00 1b 00 00 00 02 00 00 00",
        ]
        .join(" ")
        .split_whitespace()
        .map(|h| u8::from_str_radix(h, 16).unwrap())
        .collect();
        assert_eq!(payload, want);
        let block =
            Arc::new(Block::with_encoding(payload, DataBlockEncoding::AnchoredDiff).unwrap());
        let mut it = BlockIter::new(block);
        for (i, k) in keys.iter().enumerate() {
            it.seek(&KeyRef::parse(k).unwrap()).unwrap();
            assert_eq!(
                (it.key(), it.value()),
                (k.as_slice(), cells[i].3.as_slice())
            );
        }
        it.seek_to_first().unwrap();
        let mut got = Vec::new();
        while it.valid() {
            got.push(it.key().to_vec());
            it.next().unwrap();
        }
        assert_eq!(got, keys);
    }

    /// A key that does not parse inside a well-formed block (a writer's bug: the block's
    /// checksum holds) is an error at the entry, whichever way the cursor steps onto it.
    #[test]
    fn a_malformed_key_is_an_error_at_its_entry() {
        let good = CellKey::new("r1", "cf", "a", 7, CellType::Put, 1).encode();
        // Coordinates claiming a row of 0xffff bytes, with a suffix.
        let mut bad = vec![0xff, 0xff, b'r', 2, b'c', b'f'];
        bad.extend_from_slice(&[0; crate::cell::KEY_SUFFIX_LEN]);
        bad[6 + 8] = CellType::Put as u8;
        for encoding in [
            DataBlockEncoding::Prefix,
            DataBlockEncoding::Diff,
            DataBlockEncoding::AnchoredDiff,
        ] {
            // The bad key as the second entry inside a restart interval, and as a restart entry.
            for interval in [16, 1] {
                let mut b = BlockBuilder::with_encoding(interval, encoding);
                b.add(&good, b"v", b"");
                b.add(&bad, b"w", b"");
                let block = Arc::new(Block::with_encoding(b.finish(), encoding).unwrap());
                let mut it = BlockIter::new(block.clone());
                it.seek_to_first().unwrap();
                assert!(it.next().is_err(), "{encoding:?} {interval}: next");
                assert!(!it.valid());
                let mut it = BlockIter::new(block);
                it.seek_to_first().unwrap();
                let mut seen = 0;
                let r = it.run(&mut |e| {
                    assert_eq!(e.key, good.as_slice());
                    seen += 1;
                    true
                });
                assert!(r.is_err(), "{encoding:?} {interval}: run");
                assert_eq!(seen, 1);
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
