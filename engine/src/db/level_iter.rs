//! A scan's files: level 0's each as a source of the merge, and each deeper level as one
//! [`LevelIter`] that walks the level's files in key order, opening a file only when the scan
//! reaches it (RocksDB's `LevelIterator`).
//!
//! Why: a level below 0 is a sorted run of disjoint files (manifest invariant 4, checked on every
//! edit), so it needs one place in the merge's heap, not one per file. With a source per file, a
//! scan from row `r` opened and sought every file from `r` to the end of the key space: a
//! seek-and-100-rows cost grew with the size of the database, and every step of the merge
//! compared keys against every other file of the level.

use std::cell::OnceCell;
use std::cmp::Ordering;
use std::sync::atomic::Ordering as AtomicOrdering;
use std::sync::Arc;

use cellar_format::{compare_keys, HFileReader, KeyRef};

use super::sv::{FamilyRead, SuperVersion};
use super::DbInner;
use crate::error::Result;
use crate::fs::FormatSource;
use crate::read::merge::HFileCellIter;
use crate::read::query::TimeRange;
use crate::types::{CellIter, FileMeta};

type Reader = Arc<HFileReader<FormatSource>>;

/// The files of one level ≥ 1 of one family that may hold rows of a scan's span, in key order,
/// and their readers once opened.
#[derive(Debug)]
pub(super) struct LevelFiles<'a> {
    family: u32,
    files: &'a [Arc<FileMeta>],
    readers: Vec<OnceCell<Reader>>,
    range: TimeRange,
    /// Versions newer than `range` count in this family (`read::newer_versions_count`).
    newer_count: bool,
}

/// The files a scan reads.
#[derive(Debug, Default)]
pub(super) struct ScanFiles<'a> {
    /// Level-0 files, which overlap: one source each.
    pub(super) l0: Vec<Reader>,
    /// One sorted run per deeper level.
    pub(super) levels: Vec<LevelFiles<'a>>,
}

impl DbInner {
    /// The files of `families` in `sv` that may hold rows in `[start, stop)` (`stop`
    /// inclusive with `inclusive_stop`; `None` is unbounded) at times in `range`.
    pub(super) fn scan_files<'a>(
        &self,
        sv: &'a SuperVersion,
        families: &[FamilyRead],
        span: &super::read::RowSpan<'_>,
        range: &TimeRange,
    ) -> Result<ScanFiles<'a>> {
        let mut out = ScanFiles::default();
        for (family, _) in families {
            let Some(levels) = sv.version.levels(*family) else {
                continue;
            };
            let newer_count = sv
                .families
                .get(family)
                .is_some_and(super::read::newer_versions_count);
            for (level, files) in levels.iter().enumerate() {
                if level == 0 {
                    for f in files {
                        if !span.overlaps(f) {
                            self.counters
                                .range_skips
                                .fetch_add(1, AtomicOrdering::Relaxed);
                        } else if self.time_candidate(f, range, newer_count) {
                            out.l0.push(self.reader(*family, f.number)?);
                        }
                    }
                    continue;
                }
                let files = self.overlapping_run(files, span);
                if !files.is_empty() {
                    out.levels.push(LevelFiles {
                        family: *family,
                        files,
                        readers: (0..files.len()).map(|_| OnceCell::new()).collect(),
                        range: *range,
                        newer_count,
                    });
                }
            }
        }
        Ok(out)
    }

    /// The files of a level ≥ 1 (sorted and disjoint) that overlap `span`: a contiguous run,
    /// found by binary search. The others count as range skips.
    pub(super) fn overlapping_run<'f>(
        &self,
        files: &'f [Arc<FileMeta>],
        span: &super::read::RowSpan<'_>,
    ) -> &'f [Arc<FileMeta>] {
        let lo = files.partition_point(|f| span.ends_before(f));
        let rest = files.get(lo..).unwrap_or_default();
        let run = rest
            .get(..rest.partition_point(|f| !span.starts_after(f)))
            .unwrap_or_default();
        let skipped = files.len() - run.len();
        if skipped > 0 {
            self.counters
                .range_skips
                .fetch_add(skipped as u64, AtomicOrdering::Relaxed);
        }
        run
    }
}

/// A [`CellIter`] over one sorted run of files.
pub(super) struct LevelIter<'a> {
    db: &'a DbInner,
    level: &'a LevelFiles<'a>,
    /// The file `cur` walks.
    at: usize,
    cur: Option<HFileCellIter<'a, FormatSource>>,
}

impl std::fmt::Debug for LevelIter<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LevelIter")
            .field("files", &self.level.files.len())
            .field("at", &self.at)
            .field("valid", &self.valid())
            .finish()
    }
}

impl<'a> LevelIter<'a> {
    pub(super) fn new(db: &'a DbInner, level: &'a LevelFiles<'a>) -> Self {
        LevelIter {
            db,
            level,
            at: 0,
            cur: None,
        }
    }

    /// A cursor on file `i`, `None` when its time range rules it out (it is then skipped as
    /// if empty).
    fn open(&self, i: usize) -> Result<Option<HFileCellIter<'a, FormatSource>>> {
        let l = self.level;
        let (Some(f), Some(slot)) = (l.files.get(i), l.readers.get(i)) else {
            return Ok(None);
        };
        if !self.db.time_candidate(f, &l.range, l.newer_count) {
            return Ok(None);
        }
        if slot.get().is_none() {
            // One scan, one thread: nothing else fills the slot.
            let _ = slot.set(self.db.reader(l.family, f.number)?);
        }
        Ok(slot.get().map(|r| HFileCellIter::new(r.iter())))
    }

    /// Position on file `at` with `place` (a seek inside it), moving on to the following
    /// files (`forward`) or the preceding ones, each from its first or last cell, until a cell
    /// is found or the level ends. `None` (or an index past the last file) is off the level.
    fn settle(
        &mut self,
        mut at: Option<usize>,
        forward: bool,
        place: impl FnOnce(&mut HFileCellIter<'a, FormatSource>) -> Result<()>,
    ) -> Result<()> {
        let mut place = Some(place);
        while let Some(i) = at.filter(|&i| i < self.level.files.len()) {
            self.at = i;
            self.cur = self.open(i)?;
            // Only the first file reached is placed by the seek; later ones start at an end.
            let p = place.take();
            if let Some(c) = self.cur.as_mut() {
                match p {
                    Some(p) => p(c)?,
                    None if forward => c.seek_to_first()?,
                    None => c.seek_to_last()?,
                }
                if c.valid() {
                    return Ok(());
                }
            }
            at = if forward {
                i.checked_add(1)
            } else {
                i.checked_sub(1)
            };
        }
        self.cur = None;
        Ok(())
    }

    /// `next` (`forward`) or `prev`: a step inside the current file, else on to the
    /// neighbouring files.
    fn step(&mut self, forward: bool) -> Result<()> {
        let Some(c) = self.cur.as_mut() else {
            return Ok(());
        };
        if forward {
            c.next()?;
        } else {
            c.prev()?;
        }
        if c.valid() {
            return Ok(());
        }
        if forward {
            self.settle(self.at.checked_add(1), true, |c| c.seek_to_first())
        } else {
            self.settle(self.at.checked_sub(1), false, |c| c.seek_to_last())
        }
    }
}

/// A seek target must be a cell key, as for a file's cursor, even when the seek reaches no file.
fn target_key(target: &[u8]) -> Result<KeyRef<'_>> {
    KeyRef::parse(target).map_err(|m| {
        crate::error::Error::InvalidArgument(format!("seek target is not a cell key: {m}"))
    })
}

impl CellIter for LevelIter<'_> {
    fn seek(&mut self, target: &[u8]) -> Result<()> {
        target_key(target)?;
        // The first file whose last key is at or after the target.
        let i = self
            .level
            .files
            .partition_point(|f| compare_keys(&f.largest, target) == Ordering::Less);
        self.settle(Some(i), true, |c| c.seek(target))
    }

    fn seek_for_prev(&mut self, target: &[u8]) -> Result<()> {
        target_key(target)?;
        // The last file whose first key is at or before the target.
        let n = self
            .level
            .files
            .partition_point(|f| compare_keys(&f.smallest, target) != Ordering::Greater);
        self.settle(n.checked_sub(1), false, |c| c.seek_for_prev(target))
    }

    fn seek_to_first(&mut self) -> Result<()> {
        self.settle(Some(0), true, |c| c.seek_to_first())
    }

    fn seek_to_last(&mut self) -> Result<()> {
        let last = self.level.files.len().checked_sub(1);
        self.settle(last, false, |c| c.seek_to_last())
    }

    fn next(&mut self) -> Result<()> {
        self.step(true)
    }

    fn prev(&mut self) -> Result<()> {
        self.step(false)
    }

    fn valid(&self) -> bool {
        self.cur.as_ref().is_some_and(|c| c.valid())
    }

    fn key(&self) -> &[u8] {
        self.cur.as_ref().map_or(&[][..], |c| c.key())
    }

    fn value(&self) -> &[u8] {
        self.cur.as_ref().map_or(&[][..], |c| c.value())
    }

    fn tags(&self) -> &[u8] {
        self.cur.as_ref().map_or(&[][..], |c| c.tags())
    }

    fn current(&self) -> Option<cellar_format::CellEntry<'_>> {
        self.cur.as_ref().and_then(|c| c.current())
    }

    fn run_forward(
        &mut self,
        f: &mut dyn FnMut(cellar_format::CellEntry<'_>) -> bool,
    ) -> Result<()> {
        loop {
            let Some(c) = self.cur.as_mut().filter(|c| c.valid()) else {
                return Ok(());
            };
            c.run_forward(f)?;
            if c.valid() {
                return Ok(());
            }
            // The file is done: on to the next one that has a cell, as `next` does.
            self.settle(self.at.checked_add(1), true, |c| c.seek_to_first())?;
        }
    }
}
