//! `HFileIter`: a cursor over every cell of a file, through all index levels.
//!
//! The iterator keeps one [`BlockIter`] per index level (root first) and one over the current
//! data block. Moving past the end of a block steps the deepest index level that can still
//! move and descends again, so forward and backward scans cost one block read per block.
//!
//! A seek through the reader's block map (`blockmap.rs`) keeps no index levels: it holds
//! the data block's number in the map, and moving past the block's ends loads the
//! neighbouring block of the map instead.

use crate::block::{BlockHandle, BlockIter, BlockType, CellEntry};
use crate::blockmap::MapPos;
use crate::cell::KeyRef;
use crate::error::{Malformed, Result};
use crate::reader::{parsed, HFileReader, ReadAt};

#[derive(Debug, Clone, Copy)]
enum Descend<'t> {
    First,
    Last,
    Seek(&'t KeyRef<'t>),
}

impl Descend<'_> {
    /// The block's first cell walking forward, its last walking backward.
    fn entering(forward: bool) -> Self {
        if forward {
            Descend::First
        } else {
            Descend::Last
        }
    }
}

/// A level of the cursor: an iterator over one block, and where that block is.
#[derive(Debug)]
struct Level {
    iter: BlockIter,
    handle: BlockHandle,
    ty: BlockType,
}

/// Cursor over a file's cells, in cell order. Verbs as everywhere in Cellar.
#[derive(Debug)]
pub struct HFileIter<'r, R: ReadAt> {
    reader: &'r HFileReader<R>,
    index: Vec<Level>,
    data: Option<Level>,
    /// Offset of the last block loaded at each depth (1 = the root's children) since the
    /// cursor was last positioned, and the direction of travel. Blocks of one level lie in key
    /// order at increasing offsets (SPEC.md §5), so a damaged index that leads back to a block
    /// already passed is caught here instead of turning a scan into an exponential walk.
    trail: Vec<Option<u64>>,
    forward: bool,
    /// The current data block's number in the reader's block map when a seek found it there
    /// instead of through the index levels (`index` is then empty): moving past its ends
    /// goes to the neighbouring block of the map.
    mapped: Option<usize>,
    /// The cursor came to its map block walking from an end of the file or from the block
    /// before, not by a seek: a scan, likely to walk on into the next block, which
    /// `load_mapped` then asks for ahead. Not after a seek: a Get's or a short scan's
    /// neighbour would be a cold line of hints and lines it never reads (probe, seeks of 100
    /// rows over a cache filled by random Gets: 163.1k/s before the hints, 159.0k with a
    /// prefetch on every step, 164.5k this way).
    walking: bool,
}

impl<'r, R: ReadAt> HFileIter<'r, R> {
    pub(crate) fn new(reader: &'r HFileReader<R>) -> Self {
        HFileIter {
            reader,
            index: Vec::new(),
            data: None,
            trail: Vec::new(),
            forward: true,
            mapped: None,
            walking: false,
        }
    }

    /// True when positioned on a cell.
    pub fn valid(&self) -> bool {
        self.data.as_ref().is_some_and(|d| d.iter.valid())
    }

    /// Current encoded key (empty when not valid).
    pub fn key(&self) -> &[u8] {
        match &self.data {
            Some(d) if d.iter.valid() => d.iter.key(),
            _ => &[],
        }
    }

    /// Current key, value and tags in one call; `None` when not valid.
    #[inline]
    pub fn current(&self) -> Option<CellEntry<'_>> {
        self.data.as_ref().and_then(|d| d.iter.current())
    }

    /// Current key, parsed; `None` when not valid.
    pub fn key_ref(&self) -> Option<KeyRef<'_>> {
        if !self.valid() {
            return None;
        }
        parsed(self.key())
    }

    /// Current value.
    pub fn value(&self) -> &[u8] {
        match &self.data {
            Some(d) if d.iter.valid() => d.iter.value(),
            _ => &[],
        }
    }

    /// Current tags.
    pub fn tags(&self) -> &[u8] {
        match &self.data {
            Some(d) if d.iter.valid() => d.iter.tags(),
            _ => &[],
        }
    }

    /// Where the current data block is.
    pub fn data_block(&self) -> Option<BlockHandle> {
        self.data.as_ref().map(|d| d.handle)
    }

    fn fail(&mut self, l: &Level, m: Malformed) -> crate::Error {
        self.fail_at(l.handle, l.ty, m)
    }

    fn fail_at(&mut self, handle: BlockHandle, ty: BlockType, m: Malformed) -> crate::Error {
        self.data = None;
        self.index.clear();
        self.mapped = None;
        self.reader.corrupt(handle, ty.region(), m)
    }

    fn reset_to_root(&mut self) {
        self.data = None;
        self.index.clear();
        self.mapped = None;
        self.trail.clear();
        self.index.push(Level {
            iter: BlockIter::new(self.reader.root().clone()),
            handle: self.reader.trailer().root_index,
            ty: BlockType::RootIndex,
        });
    }

    /// Position `it` as `how` says.
    fn position(it: &mut BlockIter, how: Descend<'_>) -> std::result::Result<(), Malformed> {
        match how {
            Descend::First => it.seek_to_first(),
            Descend::Last => it.seek_to_last(),
            Descend::Seek(t) => it.seek(t),
        }
    }

    /// From the deepest index level, load children down to a data block, positioning each as
    /// `how` says. Stops (data block unset) when a level is not valid.
    fn descend(&mut self, how: Descend<'_>) -> Result<()> {
        self.descend_to(how, true)
    }

    /// [`HFileIter::descend`], leaving the data block unsearched unless `search_data`.
    fn descend_to(&mut self, how: Descend<'_>, search_data: bool) -> Result<()> {
        loop {
            let Some(depth) = self.index.len().checked_sub(1) else {
                return Ok(());
            };
            let Some(parent) = self.index.last() else {
                return Ok(());
            };
            if !parent.iter.valid() {
                return Ok(());
            }
            let (ph, pty) = (parent.handle, parent.ty);
            let child = self
                .reader
                .decode_index_value(parent.iter.value(), ph, pty)?
                .handle;
            let child_ty = self.reader.child_type(depth);
            let block = self.reader.read_keyed(child, child_ty)?;
            self.check_order(depth + 1, child, ph, pty)?;
            let mut level = Level {
                iter: BlockIter::new(block),
                handle: child,
                ty: child_ty,
            };
            let searched = if search_data || child_ty != BlockType::Data {
                Self::position(&mut level.iter, how)
            } else {
                Ok(())
            };
            if let Err(m) = searched {
                return Err(self.fail(&level, m));
            }
            if child_ty == BlockType::Data {
                self.data = Some(level);
                return Ok(());
            }
            self.index.push(level);
        }
    }

    /// Enforce SPEC.md §5's layout rule on the child about to be loaded at `depth`: it lies
    /// before its parent, and after (forward) or before (backward) the last block loaded at
    /// that depth.
    fn check_order(
        &mut self,
        depth: usize,
        child: BlockHandle,
        parent: BlockHandle,
        pty: BlockType,
    ) -> Result<()> {
        if self.trail.len() <= depth {
            self.trail.resize(depth + 1, None);
        }
        let prev = self.trail.get(depth).copied().flatten();
        let out_of_order = match prev {
            Some(p) if self.forward => child.offset <= p,
            Some(p) => child.offset >= p,
            None => false,
        };
        if child.offset >= parent.offset || out_of_order {
            let m = Malformed(format!(
                "index entry points at the block at {}, which is not before its parent or not past the block at {} on its level",
                child.offset,
                prev.map_or_else(|| "-".to_owned(), |p| p.to_string())
            ));
            self.data = None;
            self.index.clear();
            return Err(self.reader.corrupt(parent, pty.region(), m));
        }
        if let Some(slot) = self.trail.get_mut(depth) {
            *slot = Some(child.offset);
        }
        Ok(())
    }

    /// Change the direction of travel: the trail then only holds the blocks currently open on
    /// the path, which are the starting points in the new direction.
    fn turn(&mut self, forward: bool) {
        if self.forward != forward {
            self.forward = forward;
            let open: Vec<u64> = self
                .index
                .iter()
                .skip(1)
                .map(|l| l.handle.offset)
                .chain(self.data.as_ref().map(|d| d.handle.offset))
                .collect();
            self.trail = std::iter::once(None)
                .chain(open.into_iter().map(Some))
                .collect();
        }
    }

    /// Step the deepest index level that can move in the direction given; false at the end.
    fn step_index(&mut self, forward: bool) -> Result<bool> {
        self.data = None;
        while let Some(mut level) = self.index.pop() {
            let r = if forward {
                level.iter.next()
            } else {
                level.iter.prev()
            };
            if let Err(m) = r {
                return Err(self.fail(&level, m));
            }
            if level.iter.valid() {
                self.index.push(level);
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Position on `target` through the reader's block map (module [`crate::blockmap`]),
    /// leaving the data block unsearched unless `search`: true when the map decided (the
    /// cursor is then on the block, or not valid past the file's last separator), false when
    /// there is no map or it cannot tell, and the index must be descended.
    #[inline]
    fn seek_mapped(&mut self, target: &KeyRef<'_>, search: bool) -> Result<bool> {
        let Some(map) = self.reader.block_map() else {
            return Ok(false);
        };
        let pos = map.locate(target.row);
        if pos == MapPos::Undecided {
            return Ok(false);
        }
        self.data = None;
        self.index.clear();
        self.trail.clear();
        self.mapped = None;
        self.forward = true;
        self.walking = false;
        if let MapPos::Block(i) = pos {
            // The block, asked for where the map saw it last before the cache is searched for
            // it: its header, first entries, restart array and anchor then arrive while the
            // cache's bucket and entry are read, instead of after. Cached Gets over the
            // comparison's 1.73M rows: faster in 11 of 12 alternated rounds (three sets,
            // medians +21%, +6%, +8%; batched Gets +13%; RESULTS.md, session 41); seeks of
            // 100 rows unchanged.
            map.prefetch(i);
            self.load_mapped(i, search.then_some(Descend::Seek(target)))?;
        }
        Ok(true)
    }

    /// Load block `i` of the block map as the data block, positioned as `how` says (or not
    /// searched); not valid when there is no block `i`.
    fn load_mapped(&mut self, i: usize, how: Option<Descend<'_>>) -> Result<()> {
        let Some(handle) = self.reader.block_map().and_then(|m| m.handle(i)) else {
            self.data = None;
            self.mapped = None;
            return Ok(());
        };
        let (block, read) = self.reader.read_keyed_noting(handle, BlockType::Data)?;
        if let Some(map) = self.reader.built_block_map() {
            if read {
                map.note(i, &block);
            }
            // A scan entering a block will enter its neighbour next (module blockmap).
            match how {
                Some(Descend::First) if self.walking => map.prefetch(i.wrapping_add(1)),
                Some(Descend::Last) if self.walking => map.prefetch(i.wrapping_sub(1)),
                _ => {}
            }
        }
        let mut level = Level {
            iter: BlockIter::new(block),
            handle,
            ty: BlockType::Data,
        };
        if let Some(how) = how {
            if let Err(m) = Self::position(&mut level.iter, how) {
                return Err(self.fail(&level, m));
            }
        }
        self.data = Some(level);
        self.mapped = Some(i);
        Ok(())
    }

    /// From block `i` of the block map, move to the first (forward) or last cell of the
    /// nearest block in that direction that has one.
    fn step_mapped(&mut self, mut i: usize, forward: bool) -> Result<()> {
        loop {
            let next = if forward {
                i.checked_add(1)
            } else {
                i.checked_sub(1)
            };
            let Some(n) = next else {
                self.data = None;
                self.mapped = None;
                return Ok(());
            };
            self.load_mapped(n, Some(Descend::entering(forward)))?;
            self.walking = true;
            if self.valid() || self.mapped.is_none() {
                return Ok(());
            }
            i = n;
        }
    }

    /// Move to the first cell of the next data block that has one.
    fn next_block(&mut self) -> Result<()> {
        if let Some(i) = self.mapped {
            return self.step_mapped(i, true);
        }
        self.turn(true);
        while self.step_index(true)? {
            self.descend(Descend::First)?;
            if self.valid() {
                return Ok(());
            }
        }
        Ok(())
    }

    /// Move to the last cell of the previous data block that has one.
    fn prev_block(&mut self) -> Result<()> {
        if let Some(i) = self.mapped {
            return self.step_mapped(i, false);
        }
        self.turn(false);
        while self.step_index(false)? {
            self.descend(Descend::Last)?;
            if self.valid() {
                return Ok(());
            }
        }
        Ok(())
    }

    /// Position on the first cell.
    pub fn seek_to_first(&mut self) -> Result<()> {
        if let Some(map) = self.reader.built_block_map() {
            return self.seek_to_end_mapped(map.len(), true);
        }
        self.reset_to_root();
        self.forward = true;
        self.position_root(Descend::First)?;
        self.descend(Descend::First)?;
        if !self.valid() {
            self.next_block()?;
        }
        Ok(())
    }

    /// Position on the last cell.
    pub fn seek_to_last(&mut self) -> Result<()> {
        if let Some(map) = self.reader.built_block_map() {
            return self.seek_to_end_mapped(map.len(), false);
        }
        self.reset_to_root();
        self.forward = false;
        self.position_root(Descend::Last)?;
        self.descend(Descend::Last)?;
        if !self.valid() {
            self.prev_block()?;
        }
        Ok(())
    }

    /// `seek_to_first` (`forward`) or `seek_to_last` through a block map of `blocks` blocks,
    /// from its first or last: the map's steps to the next block ask for that block's lines
    /// ahead (module [`crate::blockmap`]), the index levels' do not.
    fn seek_to_end_mapped(&mut self, blocks: usize, forward: bool) -> Result<()> {
        self.data = None;
        self.index.clear();
        self.trail.clear();
        self.mapped = None;
        self.forward = forward;
        self.walking = true;
        let Some(last) = blocks.checked_sub(1) else {
            return Ok(());
        };
        let i = if forward { 0 } else { last };
        self.load_mapped(i, Some(Descend::entering(forward)))?;
        if !self.valid() && self.mapped.is_some() {
            self.step_mapped(i, forward)?;
        }
        Ok(())
    }

    fn position_root(&mut self, how: Descend<'_>) -> Result<()> {
        let Some(mut root) = self.index.pop() else {
            return Ok(());
        };
        if let Err(m) = Self::position(&mut root.iter, how) {
            return Err(self.fail(&root, m));
        }
        self.index.push(root);
        Ok(())
    }

    /// The first half of [`HFileIter::seek`]: descend the index to the data block a seek to
    /// `target` searches and load it (through the cache, or from the file), without searching
    /// it. [`HFileIter::seek_staged`] with the same target completes the seek. Between the
    /// two the cursor is not valid; a batched read asks the processor for the block's bytes
    /// ([`HFileIter::staged_block`]) while it works on other rows.
    pub fn stage(&mut self, target: &KeyRef<'_>) -> Result<()> {
        if self.seek_mapped(target, false)? {
            return Ok(());
        }
        self.reset_to_root();
        self.forward = true;
        self.position_root(Descend::Seek(target))?;
        self.descend_to(Descend::Seek(target), false)
    }

    /// The data block [`HFileIter::stage`] loaded (`None` if the target is past the file's
    /// last block).
    pub fn staged_block(&self) -> Option<&std::sync::Arc<crate::block::Block>> {
        self.data.as_ref().map(|d| d.iter.block())
    }

    /// The second half of a staged seek: position on the first cell whose key is `>= target`
    /// (the target given to [`HFileIter::stage`]), as [`HFileIter::seek`] does.
    pub fn seek_staged(&mut self, target: &KeyRef<'_>) -> Result<()> {
        // Positioned in place: taking the level out and back was two copies of its cursor.
        if let Some(d) = self.data.as_mut() {
            if let Err(m) = Self::position(&mut d.iter, Descend::Seek(target)) {
                let (handle, ty) = (d.handle, d.ty);
                return Err(self.fail_at(handle, ty, m));
            }
        }
        if !self.valid() {
            self.next_block()?;
        }
        Ok(())
    }

    /// Position on the first cell whose key is `>= target`.
    pub fn seek(&mut self, target: &KeyRef<'_>) -> Result<()> {
        if !self.seek_mapped(target, true)? {
            self.reset_to_root();
            self.forward = true;
            self.position_root(Descend::Seek(target))?;
            self.descend(Descend::Seek(target))?;
        }
        if !self.valid() {
            self.next_block()?;
        }
        Ok(())
    }

    /// Position on the last cell whose key is `<= target`.
    pub fn seek_for_prev(&mut self, target: &KeyRef<'_>) -> Result<()> {
        self.seek(target)?;
        if !self.valid() {
            return self.seek_to_last();
        }
        if self.key_ref().is_some_and(|k| k > *target) {
            self.prev()?;
        }
        Ok(())
    }

    /// Hand `f` the current cell and each one after it, stepping forward after every cell it
    /// returns true for, across blocks. Returns when `f` returns false (positioned on that
    /// cell) or the file ends (not valid); nothing when not valid to begin with. The same
    /// cells and positions as `current` and `next` in a loop, for a scan's inner loop.
    pub fn run_forward(&mut self, f: &mut dyn FnMut(CellEntry<'_>) -> bool) -> Result<()> {
        if !self.valid() {
            return Ok(());
        }
        loop {
            let Some(d) = self.data.as_mut() else {
                return Ok(());
            };
            if let Err(m) = d.iter.run(f) {
                let (handle, ty) = (d.handle, d.ty);
                return Err(self.fail_at(handle, ty, m));
            }
            if d.iter.valid() {
                return Ok(());
            }
            self.next_block()?;
            if !self.valid() {
                return Ok(());
            }
        }
    }

    /// Advance to the next cell.
    pub fn next(&mut self) -> Result<()> {
        self.step(true)
    }

    /// True when the next cell is known to be of another row than the current one, whose row
    /// is `row_len` bytes long ([`BlockIter::next_leaves_row`]: within the current data block,
    /// without decoding the cell); false when not known.
    ///
    /// [`BlockIter::next_leaves_row`]: crate::block::BlockIter::next_leaves_row
    #[inline]
    pub fn next_leaves_row(&self, row_len: usize) -> bool {
        self.data
            .as_ref()
            .is_some_and(|d| d.iter.next_leaves_row(row_len))
    }

    /// Step back to the previous cell.
    pub fn prev(&mut self) -> Result<()> {
        self.step(false)
    }

    /// One cell forward or back, crossing into the neighbouring block at a block's end.
    #[inline]
    fn step(&mut self, forward: bool) -> Result<()> {
        // In place: taking the cursor out of `data` and putting it back copied it twice per
        // cell (two `memmove` calls; 4.5% of a seekrandom profile).
        let Some(d) = self.data.as_mut() else {
            return Ok(());
        };
        let stepped = if forward {
            d.iter.next()
        } else {
            d.iter.prev()
        };
        match stepped {
            Ok(()) if d.iter.valid() => Ok(()),
            Ok(()) if forward => self.next_block(),
            Ok(()) => self.prev_block(),
            Err(m) => {
                let (handle, ty) = (d.handle, d.ty);
                Err(self.fail_at(handle, ty, m))
            }
        }
    }
}
