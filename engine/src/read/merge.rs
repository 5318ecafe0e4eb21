//! `MergeIter`: one cursor in key order over several sources (memstores and files).
//!
//! A binary min-heap of source indices, ordered by each source's current key and, at equal
//! keys, by source index. Sources are given newest first, so at equal keys the newest source's
//! copy surfaces; the heap keeps the invariant that no other source is positioned on the same
//! key as the top, so a cell present in two sources (a memstore being flushed and the file it
//! became, say) is yielded once.
//!
//! Backward (after `seek_for_prev`, `seek_to_last` or a `prev` that turns around) the heap
//! orders by key descending instead, still newest source first at equal keys, so a reversed
//! scan sees exactly the cells a forward one does, in the opposite order. Turning around
//! re-positions every source relative to the current key (RocksDB's `MergingIterator` does the
//! same); a reversed scan never turns, it only seeks backward.
//!
//! The heap holds indices rather than keys so that no key is copied: comparisons borrow the
//! sources' current keys. A tournament tree would halve comparisons per step for large fan-in,
//! but a read merges a handful of sources and `next` usually leaves the top in place after two
//! comparisons, so the simpler structure stays until a benchmark says otherwise.

use std::cmp::Ordering;

use cellar_format::cell::compare_keys;
use cellar_format::{bytes_eq, CellEntry, HFileIter, KeyProbe, KeyRef, ReadAt};

use crate::error::{Error, Result};
use crate::types::{run_by_steps, CellIter};

/// A k-way merge of [`CellIter`]s, itself a [`CellIter`].
pub struct MergeIter<'a> {
    sources: Vec<Box<dyn CellIter + 'a>>,
    /// Indices of the valid sources, a min-heap by (key, index), or by (key descending,
    /// index) when moving backward.
    heap: Vec<usize>,
    /// Direction of travel: which order the heap keeps.
    forward: bool,
}

impl std::fmt::Debug for MergeIter<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MergeIter")
            .field("sources", &self.sources.len())
            .field("heap", &self.heap)
            .finish()
    }
}

impl<'a> MergeIter<'a> {
    /// Merge `sources`, newest first: at equal keys the earlier source wins. Not positioned
    /// until a seek.
    pub fn new(sources: Vec<Box<dyn CellIter + 'a>>) -> Self {
        let heap = Vec::with_capacity(sources.len());
        MergeIter {
            sources,
            heap,
            forward: true,
        }
    }

    /// Number of sources merged.
    pub fn num_sources(&self) -> usize {
        self.sources.len()
    }

    /// Index (in the order given to [`MergeIter::new`]) of the source the current cell comes
    /// from.
    pub fn current_source(&self) -> Option<usize> {
        self.heap.first().copied()
    }

    /// Order of two heap entries: by current key in the direction of travel, then newest
    /// source first.
    fn cmp(&self, a: usize, b: usize) -> Ordering {
        match (self.sources.get(a), self.sources.get(b)) {
            (Some(x), Some(y)) => {
                // `compare_keys` decides on the rows alone when they differ (most comparisons
                // in a merge), with a word-wise compare rather than a `memcmp` call.
                let by_key = compare_keys(x.key(), y.key());
                let by_key = if self.forward {
                    by_key
                } else {
                    by_key.reverse()
                };
                by_key.then(a.cmp(&b))
            }
            _ => a.cmp(&b),
        }
    }

    fn less_at(&self, i: usize, j: usize) -> bool {
        match (self.heap.get(i), self.heap.get(j)) {
            (Some(&a), Some(&b)) => self.cmp(a, b) == Ordering::Less,
            _ => false,
        }
    }

    fn sift_down(&mut self, mut i: usize) {
        loop {
            let (l, r) = (2 * i + 1, 2 * i + 2);
            let mut smallest = i;
            if l < self.heap.len() && self.less_at(l, smallest) {
                smallest = l;
            }
            if r < self.heap.len() && self.less_at(r, smallest) {
                smallest = r;
            }
            if smallest == i {
                return;
            }
            self.heap.swap(i, smallest);
            i = smallest;
        }
    }

    fn sift_up(&mut self, mut i: usize) {
        while i > 0 {
            let parent = (i - 1) / 2;
            if !self.less_at(i, parent) {
                return;
            }
            self.heap.swap(i, parent);
            i = parent;
        }
    }

    /// Remove the entry at heap position `i`.
    fn remove_at(&mut self, i: usize) {
        let last = self.heap.len().saturating_sub(1);
        self.heap.swap(i, last);
        self.heap.pop();
        if i < self.heap.len() {
            self.sift_down(i);
            self.sift_up(i);
        }
    }

    /// The source at heap position `i` has moved: restore the heap.
    fn reposition(&mut self, i: usize) {
        let valid = self
            .heap
            .get(i)
            .and_then(|&s| self.sources.get(s))
            .is_some_and(|s| s.valid());
        if valid {
            self.sift_down(i);
        } else {
            self.remove_at(i);
        }
    }

    fn key_at(&self, i: usize) -> &[u8] {
        self.heap
            .get(i)
            .and_then(|&s| self.sources.get(s))
            .map_or(&[][..], |s| s.key())
    }

    /// Move every other source positioned on the top's key on, in the direction of travel.
    ///
    /// Entries with a key equal to the top's form a subtree containing the root (a parent is
    /// never after its child), so while one exists a child of the root has it.
    fn skip_duplicates_of_top(&mut self) -> Result<()> {
        loop {
            let dup = [1, 2]
                .into_iter()
                .find(|&c| c < self.heap.len() && bytes_eq(self.key_at(c), self.key_at(0)));
            let Some(c) = dup else { return Ok(()) };
            let Some(&s) = self.heap.get(c) else {
                return Ok(());
            };
            self.advance_source(s)?;
            self.reposition(c);
        }
    }

    fn advance_source(&mut self, s: usize) -> Result<()> {
        let forward = self.forward;
        let r = match self.sources.get_mut(s) {
            Some(src) if forward => src.next(),
            Some(src) => src.prev(),
            None => Ok(()),
        };
        if r.is_err() {
            // A source in an unknown position would make the merge lie; the caller re-seeks.
            self.heap.clear();
        }
        r
    }

    /// Rebuild the heap from every valid source, after all were positioned.
    fn rebuild(&mut self) -> Result<()> {
        self.heap.clear();
        self.heap.extend(
            (0..self.sources.len()).filter(|&i| self.sources.get(i).is_some_and(|s| s.valid())),
        );
        for i in (0..self.heap.len() / 2).rev() {
            self.sift_down(i);
        }
        self.skip_duplicates_of_top()
    }

    fn position_all(
        &mut self,
        forward: bool,
        mut f: impl FnMut(&mut dyn CellIter) -> Result<()>,
    ) -> Result<()> {
        self.heap.clear();
        self.forward = forward;
        for s in &mut self.sources {
            f(s.as_mut())?;
        }
        self.rebuild()
    }

    /// Move the top source on in the direction of travel.
    fn step(&mut self) -> Result<()> {
        let Some(&top) = self.heap.first() else {
            return Ok(());
        };
        self.advance_source(top)?;
        // One source left (a compacted family with an empty memstore, or the last source of
        // any scan): nothing to order and nothing to skip.
        if self.heap.len() == 1 {
            if !self.sources.get(top).is_some_and(|s| s.valid()) {
                self.heap.clear();
            }
            return Ok(());
        }
        self.reposition(0);
        self.skip_duplicates_of_top()
    }

    /// Turn around at the current key: every source is placed on its first key past the
    /// current one in the new direction (the top included, so the current key is left).
    fn turn(&mut self, forward: bool) -> Result<()> {
        let current = self.key().to_vec();
        self.position_all(forward, |s| {
            if forward {
                s.seek(&current)?;
                if s.valid() && compare_keys(s.key(), &current) == Ordering::Equal {
                    s.next()?;
                }
            } else {
                s.seek_for_prev(&current)?;
                if s.valid() && compare_keys(s.key(), &current) == Ordering::Equal {
                    s.prev()?;
                }
            }
            Ok(())
        })
    }
}

impl CellIter for MergeIter<'_> {
    fn seek(&mut self, target: &[u8]) -> Result<()> {
        self.position_all(true, |s| s.seek(target))
    }

    fn seek_for_prev(&mut self, target: &[u8]) -> Result<()> {
        self.position_all(false, |s| s.seek_for_prev(target))
    }

    fn seek_to_first(&mut self) -> Result<()> {
        self.position_all(true, |s| s.seek_to_first())
    }

    fn seek_to_last(&mut self) -> Result<()> {
        self.position_all(false, |s| s.seek_to_last())
    }

    fn next(&mut self) -> Result<()> {
        if !self.forward && self.valid() {
            return self.turn(true);
        }
        self.step()
    }

    fn prev(&mut self) -> Result<()> {
        if self.forward && self.valid() {
            return self.turn(false);
        }
        self.step()
    }

    fn valid(&self) -> bool {
        !self.heap.is_empty()
    }

    fn key(&self) -> &[u8] {
        self.key_at(0)
    }

    fn value(&self) -> &[u8] {
        self.heap
            .first()
            .and_then(|&s| self.sources.get(s))
            .map_or(&[][..], |s| s.value())
    }

    fn tags(&self) -> &[u8] {
        self.heap
            .first()
            .and_then(|&s| self.sources.get(s))
            .map_or(&[][..], |s| s.tags())
    }

    fn current(&self) -> Option<CellEntry<'_>> {
        self.heap
            .first()
            .and_then(|&s| self.sources.get(s))
            .and_then(|s| s.current())
    }

    fn run_forward(&mut self, f: &mut dyn FnMut(CellEntry<'_>) -> bool) -> Result<()> {
        if !self.forward {
            // Moving backward: the first `next` turns the merge around.
            return run_by_steps(self, f);
        }
        loop {
            let Some(&top) = self.heap.first() else {
                return Ok(());
            };
            // The top source's cells below the smallest key of the others (the heap's
            // runner-up) are the merge's next cells, in order, with no copy elsewhere to skip:
            // the top hands them over itself, and the heap is ordered again only when it
            // reaches that key or ends. With one source left (a compacted family with an empty
            // memstore), that is all of its cells.
            // The runner-up's heap position, and its source.
            let (second, runner_up) = match (self.heap.get(1), self.heap.get(2)) {
                (Some(&a), Some(&b)) if self.cmp(b, a) == Ordering::Less => (2, Some(b)),
                (Some(&a), _) => (1, Some(a)),
                _ => (0, None),
            };
            let mut stopped = false;
            // Set when the run ended on a key past the bound (not on it, nor at the source's
            // end): the top is then after the runner-up.
            let mut passed_bound = false;
            let run = match source_and_bound(&mut self.sources, top, runner_up) {
                // `f` itself, not wrapped: a source left valid is one `f` stopped.
                Some((src, None)) => {
                    let r = src.run_forward(f);
                    stopped = src.valid();
                    r
                }
                Some((src, Some(bound))) => {
                    // Its row located once for the run, not at every cell.
                    let bound = KeyProbe::new(bound.key());
                    src.run_forward(&mut |mut e| {
                        match bound.order_of(e.key) {
                            Ordering::Less => {}
                            Ordering::Equal => return false,
                            Ordering::Greater => {
                                passed_bound = true;
                                return false;
                            }
                        }
                        // The source's next cell may be of another row while the runner-up's
                        // is of this one: a newer version in the memstore of a row on file.
                        if e.last_in_row && bound.may_share_row(e.key) {
                            e.last_in_row = false;
                        }
                        stopped = !f(e);
                        !stopped
                    })
                }
                None => Ok(()),
            };
            if run.is_err() {
                // As `advance_source`: a source in an unknown position would make the merge lie.
                self.heap.clear();
                return run;
            }
            if stopped {
                // On the cell `f` refused, still below every other source: the heap holds.
                return Ok(());
            }
            if passed_bound {
                // The top is now past the runner-up, the smallest of the others: the runner-up
                // is the new top, and the old top (strictly past its key, so no copy of it)
                // goes down its subtree. A scan over sources that interleave (a memstore over a file,
                // overlapping files) does this at every change of source, and ordering the heap
                // from the root compared the runner-up with the others again, re-parsing keys.
                self.heap.swap(0, second);
                if self.heap.len() == 2 {
                    // Two sources: no other can hold a copy of the new top's key.
                    continue;
                }
                self.sift_down(second);
                self.skip_duplicates_of_top()?;
                continue;
            }
            // As `step` after moving the top: order the heap again and pass over the copies of
            // the new top's key.
            self.reposition(0);
            self.skip_duplicates_of_top()?;
        }
    }
}

/// A source to move, and one to read beside it.
type SourcePair<'s, 'a> = (
    &'s mut Box<dyn CellIter + 'a>,
    Option<&'s Box<dyn CellIter + 'a>>,
);

/// Source `top`, and source `other` (when given) to read beside it.
fn source_and_bound<'s, 'a>(
    sources: &'s mut [Box<dyn CellIter + 'a>],
    top: usize,
    other: Option<usize>,
) -> Option<SourcePair<'s, 'a>> {
    let Some(o) = other else {
        return sources.get_mut(top).map(|s| (s, None));
    };
    if top < o {
        let (low, high) = sources.split_at_mut(o);
        Some((low.get_mut(top)?, Some(high.first()?)))
    } else if o < top {
        let (low, high) = sources.split_at_mut(top);
        Some((high.first_mut()?, Some(low.get(o)?)))
    } else {
        None
    }
}

/// [`CellIter`] over one HFile.
#[derive(Debug)]
pub struct HFileCellIter<'r, R: ReadAt> {
    inner: HFileIter<'r, R>,
}

impl<'r, R: ReadAt> HFileCellIter<'r, R> {
    /// Wrap a file cursor (from `HFileReader::iter`).
    pub fn new(inner: HFileIter<'r, R>) -> Self {
        HFileCellIter { inner }
    }

    /// The wrapped cursor, for what the trait does not expose (tags).
    pub fn inner_mut(&mut self) -> &mut HFileIter<'r, R> {
        &mut self.inner
    }
}

impl<R: ReadAt> CellIter for HFileCellIter<'_, R> {
    fn seek(&mut self, target: &[u8]) -> Result<()> {
        let k = KeyRef::parse(target)
            .map_err(|m| Error::InvalidArgument(format!("seek target is not a cell key: {m}")))?;
        Ok(self.inner.seek(&k)?)
    }

    fn seek_for_prev(&mut self, target: &[u8]) -> Result<()> {
        let k = KeyRef::parse(target)
            .map_err(|m| Error::InvalidArgument(format!("seek target is not a cell key: {m}")))?;
        Ok(self.inner.seek_for_prev(&k)?)
    }

    fn seek_to_first(&mut self) -> Result<()> {
        Ok(self.inner.seek_to_first()?)
    }

    fn seek_to_last(&mut self) -> Result<()> {
        Ok(self.inner.seek_to_last()?)
    }

    fn next(&mut self) -> Result<()> {
        Ok(self.inner.next()?)
    }

    fn next_in_row(&mut self, row_len: usize) -> Result<bool> {
        if self.inner.next_leaves_row(row_len) {
            return Ok(false);
        }
        self.inner.next()?;
        Ok(true)
    }

    fn prev(&mut self) -> Result<()> {
        Ok(self.inner.prev()?)
    }

    fn valid(&self) -> bool {
        self.inner.valid()
    }

    fn key(&self) -> &[u8] {
        self.inner.key()
    }

    fn value(&self) -> &[u8] {
        self.inner.value()
    }

    fn tags(&self) -> &[u8] {
        self.inner.tags()
    }

    fn current(&self) -> Option<CellEntry<'_>> {
        self.inner.current()
    }

    fn run_forward(&mut self, f: &mut dyn FnMut(CellEntry<'_>) -> bool) -> Result<()> {
        Ok(self.inner.run_forward(f)?)
    }
}

/// [`CellIter`] over an in-memory list of `(encoded key, value)`, for tests and small sources.
#[derive(Debug, Clone, Default)]
pub struct VecCellIter {
    entries: Vec<(Vec<u8>, Vec<u8>)>,
    /// Current position; `entries.len()` when not valid.
    pos: usize,
}

impl VecCellIter {
    /// A cursor over `entries`, which are sorted here in cell order (a stable sort, so of two
    /// equal keys the first given is yielded first). Not positioned until a seek.
    pub fn new(mut entries: Vec<(Vec<u8>, Vec<u8>)>) -> Self {
        entries.sort_by(|a, b| compare_keys(&a.0, &b.0));
        let pos = entries.len();
        VecCellIter { entries, pos }
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when there is no entry.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

impl CellIter for VecCellIter {
    fn seek(&mut self, target: &[u8]) -> Result<()> {
        self.pos = self
            .entries
            .partition_point(|(k, _)| compare_keys(k, target) == Ordering::Less);
        Ok(())
    }

    fn seek_for_prev(&mut self, target: &[u8]) -> Result<()> {
        let after = self
            .entries
            .partition_point(|(k, _)| compare_keys(k, target) != Ordering::Greater);
        // One before the first key past the target; none (invalid) when that is the first.
        self.pos = after.checked_sub(1).unwrap_or(self.entries.len());
        Ok(())
    }

    fn seek_to_first(&mut self) -> Result<()> {
        self.pos = 0;
        Ok(())
    }

    fn seek_to_last(&mut self) -> Result<()> {
        self.pos = self
            .entries
            .len()
            .checked_sub(1)
            .unwrap_or(self.entries.len());
        Ok(())
    }

    fn next(&mut self) -> Result<()> {
        if self.pos < self.entries.len() {
            self.pos += 1;
        }
        Ok(())
    }

    fn prev(&mut self) -> Result<()> {
        self.pos = match self.pos {
            0 => self.entries.len(),
            p if p < self.entries.len() => p - 1,
            p => p,
        };
        Ok(())
    }

    fn valid(&self) -> bool {
        self.pos < self.entries.len()
    }

    fn key(&self) -> &[u8] {
        self.entries.get(self.pos).map_or(&[][..], |(k, _)| k)
    }

    fn value(&self) -> &[u8] {
        self.entries.get(self.pos).map_or(&[][..], |(_, v)| v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cellar_format::{CellKey, CellType};

    fn k(row: &str, ts: u64, seq: u64) -> Vec<u8> {
        CellKey::new(row, "cf", "q", ts, CellType::Put, seq).encode()
    }

    fn drain(m: &mut MergeIter<'_>) -> Vec<(Vec<u8>, Vec<u8>)> {
        let mut out = Vec::new();
        while m.valid() {
            out.push((m.key().to_vec(), m.value().to_vec()));
            m.next().unwrap();
        }
        out
    }

    #[test]
    fn equal_keys_are_yielded_once_from_the_newest_source() {
        let newer = VecCellIter::new(vec![(k("a", 1, 5), b"new".to_vec())]);
        let older = VecCellIter::new(vec![
            (k("a", 1, 5), b"old".to_vec()),
            (k("b", 1, 1), b"b".to_vec()),
        ]);
        let mut m = MergeIter::new(vec![Box::new(newer), Box::new(older)]);
        m.seek_to_first().unwrap();
        assert_eq!(m.current_source(), Some(0));
        let got = drain(&mut m);
        assert_eq!(
            got,
            vec![
                (k("a", 1, 5), b"new".to_vec()),
                (k("b", 1, 1), b"b".to_vec())
            ]
        );
    }

    /// A run stops at the runner-up's key through a `KeyProbe` of it: the probe's row
    /// shortcut must order every key as `compare_keys` does, malformed ones included.
    #[test]
    fn the_run_bound_agrees_with_the_full_order() {
        let mut keys = vec![
            k("a", 1, 1),
            k("a", 2, 1),
            k("ab", 1, 1),
            k("b", 1, 1),
            CellKey::first_on_row(b"a").encode(),
            CellKey::new("a", "cf", "", 5, CellType::DeleteFamily, 3).encode(),
            vec![1, 0, b'a'],            // too short to be a key
            vec![1, 0, b'z', 200, 0, 0], // family length past the end
        ];
        let mut trunc = k("a", 1, 1);
        trunc.truncate(trunc.len() - 1);
        keys.push(trunc);
        for a in &keys {
            for b in &keys {
                let probe = KeyProbe::new(b);
                assert_eq!(probe.order_of(a), compare_keys(a, b), "{a:?} vs {b:?}");
            }
        }
    }

    #[test]
    fn vec_source_backward_matches_a_sorted_model() {
        let mut model: Vec<Vec<u8>> = (0..30u64)
            .map(|i| k(&format!("r{}", i / 3), i % 3, i))
            .collect();
        model.sort_by(|a, b| compare_keys(a, b));
        let mut it = VecCellIter::new(model.iter().map(|x| (x.clone(), Vec::new())).collect());
        it.seek_to_last().unwrap();
        let mut back = Vec::new();
        while it.valid() {
            back.push(it.key().to_vec());
            it.prev().unwrap();
        }
        back.reverse();
        assert_eq!(back, model);
        // seek_for_prev lands on the last key <= the target, stored or a search key.
        for row in ["r", "r0", "r3", "r5", "r9", "s"] {
            let t = CellKey::first_on_row(row.as_bytes()).encode();
            it.seek_for_prev(&t).unwrap();
            let want = model.iter().rev().find(|x| compare_keys(x, &t).is_le());
            assert_eq!(it.valid().then(|| it.key().to_vec()).as_ref(), want);
        }
        for (i, x) in model.iter().enumerate() {
            it.seek_for_prev(x).unwrap();
            assert_eq!(it.key(), x.as_slice());
            it.prev().unwrap();
            assert_eq!(
                it.valid().then(|| it.key().to_vec()),
                i.checked_sub(1).map(|j| model[j].clone())
            );
        }
        let mut empty = VecCellIter::new(Vec::new());
        empty.seek_to_last().unwrap();
        assert!(!empty.valid());
        empty.seek_for_prev(&model[0]).unwrap();
        assert!(!empty.valid());
    }

    #[test]
    fn backward_merge_yields_equal_keys_once_from_the_newest_source() {
        let newer = VecCellIter::new(vec![
            (k("a", 1, 5), b"new".to_vec()),
            (k("c", 1, 7), b"c".to_vec()),
        ]);
        let older = VecCellIter::new(vec![
            (k("a", 1, 5), b"old".to_vec()),
            (k("b", 1, 1), b"b".to_vec()),
            (k("c", 1, 7), b"old-c".to_vec()),
        ]);
        let mut m = MergeIter::new(vec![Box::new(newer), Box::new(older)]);
        m.seek_to_last().unwrap();
        let mut got = Vec::new();
        while m.valid() {
            got.push((m.key().to_vec(), m.value().to_vec(), m.current_source()));
            m.prev().unwrap();
        }
        assert_eq!(
            got,
            vec![
                (k("c", 1, 7), b"c".to_vec(), Some(0)),
                (k("b", 1, 1), b"b".to_vec(), Some(1)),
                (k("a", 1, 5), b"new".to_vec(), Some(0)),
            ]
        );
        // Turning around in the middle.
        m.seek_for_prev(&k("b", 1, 1)).unwrap();
        m.next().unwrap();
        assert_eq!(m.value(), b"c");
        m.prev().unwrap();
        assert_eq!(m.value(), b"b");
        m.prev().unwrap();
        assert_eq!(m.value(), b"new");
        m.prev().unwrap();
        assert!(!m.valid());
    }

    #[test]
    fn empty_merge_is_never_valid() {
        let mut m = MergeIter::new(Vec::new());
        m.seek_to_first().unwrap();
        assert!(!m.valid());
        assert!(m.key().is_empty());
        m.next().unwrap();
        assert!(!m.valid());
        m.seek_to_last().unwrap();
        m.prev().unwrap();
        assert!(!m.valid());
    }
}
