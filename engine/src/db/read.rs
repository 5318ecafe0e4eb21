//! Reads: Get and Scan over the memstores and files of a super-version, merged in key order
//! and resolved by `read::resolve` at one read point.
//!
//! Files are skipped before they are read when their key range misses the rows asked for,
//! their time range misses the query's, or (for a Get) their bloom filter excludes the row or
//! column; each skip is counted in stats.
//!
//! Filters (`read::filter`) act inside the loop: the row-key stage runs when a row starts,
//! before any of its cells is resolved, and a failing row makes the merge seek to the filter's
//! hint (an index descent per file) instead of stepping through the rows in between; the cell
//! and row stages run on the row's resolved cells before it is buffered. `Scan::batch` then
//! cuts the row into chunks; `Scan::limit` counts rows, so the chunks of one row count once.

use std::borrow::Cow;
use std::collections::VecDeque;
use std::marker::PhantomData;
use std::ops::ControlFlow;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use cellar_format::cell::{bytes_eq, compare_bytes};
use cellar_format::{CellType, HFileReader, KeyRef};
use smallvec::SmallVec;

use super::level_iter::{LevelIter, ScanFiles};
use super::sv::{FamilyRead, SuperVersion, TableInfo};
use super::{Counters, DbInner};
use crate::error::{Error, Result};
use crate::fs::FormatSource;
use crate::read::filter::{FilterEval, RowCheck};
use crate::read::merge::{HFileCellIter, MergeIter};
use crate::read::query::{Cell, Get, Row, Scan, TimeRange};
use crate::read::resolve::{ReadParams, RowResolver, Verdict};
use crate::read::view::{CellRef, CellSink, GetCells, RawCells, RowView};
use crate::schema::{FamilyDescriptor, TableName};
use crate::types::{CellIter, FileMeta, SeqNo, Timestamp};

/// The files a Get may find its row in, newest first: nearly always one or two, kept inline
/// (a heap list was an allocation and a free per Get).
type Readers = SmallVec<[Arc<HFileReader<FormatSource>>; 2]>;

/// Most rows a scan reads per refill: each refill re-seeks every source once, which was 7% of
/// a full-table scan's time at 256 rows.
const SCAN_BATCH_ROWS: usize = 1024;
/// A refill also stops at the first row boundary past this many bytes of cells, so that large
/// values do not make a batch of [`SCAN_BATCH_ROWS`] rows hold gigabytes.
const SCAN_BATCH_BYTES: usize = 1 << 20;
/// Rows of a scan's first refill when it has no limit; each later refill reads 4× more, up to
/// [`SCAN_BATCH_ROWS`]. A short scan (a seek and a few nexts, the common case) then reads what
/// it uses instead of a full batch: this was 95% of a one-row seek's time. A scan with a limit
/// reads that many rows first (rows a filter drops make later refills).
const SCAN_FIRST_BATCH_ROWS: usize = 16;

/// Which rows a read covers, for skipping files by key range: `[start, stop)` in row order
/// whatever the direction of travel (a reversed scan's span runs from its stop row up to where
/// it resumes).
pub(super) struct RowSpan<'a> {
    /// Inclusive low end; empty is unbounded.
    pub(super) start: &'a [u8],
    /// Exclusive high end; `None` is unbounded.
    pub(super) stop: Option<&'a [u8]>,
    pub(super) inclusive_stop: bool,
}

impl RowSpan<'_> {
    pub(super) fn overlaps(&self, f: &FileMeta) -> bool {
        !self.ends_before(f) && !self.starts_after(f)
    }

    /// Every row of `f` is before the span (a file whose key has no row is kept). Only the
    /// row is read from the key: this runs for every file a Get passes.
    pub(super) fn ends_before(&self, f: &FileMeta) -> bool {
        key_row(&f.largest).is_some_and(|hi| compare_bytes(hi, self.start).is_lt())
    }

    /// Every row of `f` is past the span's stop.
    pub(super) fn starts_after(&self, f: &FileMeta) -> bool {
        let Some(stop) = self.stop else {
            return false;
        };
        key_row(&f.smallest).is_some_and(|lo| match compare_bytes(lo, stop) {
            std::cmp::Ordering::Greater => true,
            std::cmp::Ordering::Equal => !self.inclusive_stop,
            std::cmp::Ordering::Less => false,
        })
    }
}

/// The smallest row after `row`.
fn successor(row: &[u8]) -> Vec<u8> {
    let mut next = Vec::with_capacity(row.len() + 1);
    next.extend_from_slice(row);
    next.push(0);
    next
}

/// Whether a file can change the answer of a read limited to `range`. A file whose cells are
/// all older than the range cannot: markers mask only at or below their timestamp, and older
/// versions do not count against newer ones. A file whose cells are all newer can, through its
/// markers (a DeleteFamily above the range masks puts inside it, MISSION.md rule 8) and, where
/// `newer_count` ([`newer_versions_count`]), through its versions; so it is skipped only when
/// it holds no marker and the family's newer versions do not count.
pub(super) fn time_overlaps(f: &FileMeta, range: &TimeRange, newer_count: bool) -> bool {
    if range.is_all() || f.max_ts < range.min {
        return range.is_all();
    }
    f.min_ts < range.max || f.deletes > 0 || newer_count
}

/// Whether versions newer than a read's time range change its answer in a family, whatever
/// the range (SPEC.md §13): under NEW_VERSION_BEHAVIOR they count toward VERSIONS, and with a
/// TTL and MIN_VERSIONS they decide which versions are among the MIN_VERSIONS newest that stay
/// visible past the TTL. Classic VERSIONS counts only the cells inside the range.
pub(super) fn newer_versions_count(d: &FamilyDescriptor) -> bool {
    d.new_version_behavior || (d.ttl.is_some() && d.min_versions > 0)
}

impl DbInner {
    /// Whether `f` can change a read limited to `range` ([`time_overlaps`]); a file that
    /// cannot counts as a time skip.
    pub(super) fn time_candidate(
        &self,
        f: &FileMeta,
        range: &TimeRange,
        newer_count: bool,
    ) -> bool {
        let keep = time_overlaps(f, range, newer_count);
        if !keep {
            self.counters.time_skips.fetch_add(1, Ordering::Relaxed);
        }
        keep
    }

    /// Open readers of the files of `families` that may hold the row of a Get (`span` of one
    /// row) in `range`, asking each file's bloom filter, and note the first chosen file and
    /// how many were chosen in `searched` (what seek compaction charges). (Scans take
    /// [`DbInner::scan_files`].)
    fn candidate_files<'s>(
        &self,
        sv: &'s SuperVersion,
        families: &[FamilyRead],
        span: &RowSpan<'_>,
        range: &TimeRange,
        searched: &mut Searched<'s>,
    ) -> Result<Readers> {
        let mut out = Readers::new();
        for (family, only_column) in families {
            let Some(levels) = sv.version.levels(*family) else {
                continue;
            };
            let newer_count = sv.families.get(family).is_some_and(newer_versions_count);
            for (level, files) in levels.iter().enumerate() {
                if files.is_empty() {
                    continue;
                }
                // Level 0's files overlap one another: each is checked. A deeper level's run
                // overlaps the span by construction.
                let (files, check) = if level == 0 {
                    (files.as_slice(), true)
                } else {
                    (self.overlapping_run(files, span), false)
                };
                for f in files {
                    if check && !span.overlaps(f) {
                        self.counters.range_skips.fetch_add(1, Ordering::Relaxed);
                        continue;
                    }
                    if !self.time_candidate(f, range, newer_count) {
                        continue;
                    }
                    let r = self.reader(*family, f.number)?;
                    let maybe = match only_column {
                        Some(q) => r.may_contain_column(span.start, q)?,
                        None => r.may_contain_row(span.start)?,
                    };
                    if !maybe {
                        self.counters.bloom_skips.fetch_add(1, Ordering::Relaxed);
                        continue;
                    }
                    out.push(r);
                    searched.first.get_or_insert(f);
                    searched.count += 1;
                }
            }
        }
        Ok(out)
    }

    /// The read point and super-version a read sees. The read point comes first, then the
    /// super-version (see the module docs of `db`): every batch at or below the point is then
    /// in it. A read point beyond what is visible would expose half-applied batches: an
    /// explicit one is clamped.
    ///
    /// A flush or compaction installed between the two may have judged its purges at a newer
    /// read point than this reader's (only registered snapshots hold the purge horizon down)
    /// and dropped a version this reader needs — the newer version that replaced it is above
    /// the reader's point. Then the read takes a newer point: the read has not returned
    /// anything yet, so any point up to the present is a correct answer. (Found by
    /// `db_concurrency`: a row missing a column while a flush of its family ran.) A read at
    /// an explicit snapshot's point keeps it; the snapshot's registration kept the purges
    /// below it.
    pub(super) fn read_view(&self, explicit: Option<SeqNo>) -> (SeqNo, Arc<SuperVersion>) {
        loop {
            let visible = self.visibility.read_point();
            let read_point = explicit.map_or(visible, |p| p.min(visible));
            let sv = self.sv();
            if explicit.is_some() || sv.purge_horizon <= read_point {
                return (read_point, sv);
            }
            self.counters
                .read_view_retries
                .fetch_add(1, Ordering::Relaxed);
        }
    }

    pub(super) fn get(&self, table: &TableName, get: &Get) -> Result<Option<Row>> {
        get.validate()?;
        let (read_point, sv) = self.read_view(get.read_point);
        let t = table_info(&sv, table)?;
        let row = self.get_row(&sv, t, read_point, get, None)?;
        self.count_gets(1, u64::from(row.is_some()));
        Ok(row)
    }

    /// Count `n` Gets served, `found` of them with a row ([`super::Stats::gets`]).
    pub(super) fn count_gets(&self, n: u64, found: u64) {
        self.counters.gets.fetch_add(n, Ordering::Relaxed);
        if found > 0 {
            self.counters.gets_found.fetch_add(found, Ordering::Relaxed);
        }
    }

    /// Every Get of `gets` at one read view (see [`Table::get_many`](super::Table::get_many)),
    /// the rows in the order of `gets`: [`DbInner::get_many_view`]'s rows, owned.
    pub(super) fn get_many(&self, table: &TableName, gets: &[Get]) -> Result<Vec<Option<Row>>> {
        let mut out: Vec<Option<Row>> = (0..gets.len()).map(|_| None).collect();
        self.get_many_view(table, gets, |i, row| out[i] = row.map(|r| r.to_row()))?;
        Ok(out)
    }

    /// [`DbInner::get_many`] handing each row to `f` as a view, with the Get's index in
    /// `gets`, in row order.
    ///
    /// A cached Get waits on one cache miss after another (the cache's bucket and entry, the
    /// block's header, its fences, the entry found), and a batch can overlap those of several
    /// rows. First every unfiltered Get's files are found (bloom probes included), then the
    /// rows go through a pipeline: a row whose only source is one file is staged `3 ×
    /// AHEAD` rows before it is read — its cursor descends the index and loads the data block
    /// ([`HFileIter::stage`]) and the processor is asked for the block's header; `AHEAD` rows
    /// later for its fences, `AHEAD` more for the restart interval the search will walk; then
    /// the Get completes the staged seek and resolves the row as a single Get does. The
    /// steps are the Gets' own, some done earlier: every row's files are found before the
    /// first row is read, and a staged row's data block is looked up (or read) rows ahead; a
    /// stage that fails is left to the Get's own seek, which reads again and reports the
    /// error. Results and cache counters are those of single Gets at the batch's read point
    /// and its one clock reading.
    pub(super) fn get_many_view(
        &self,
        table: &TableName,
        gets: &[Get],
        mut f: impl FnMut(usize, Option<RowView<'_>>),
    ) -> Result<()> {
        let Some((visible, sv)) = self.batch_view(gets)? else {
            return Ok(());
        };
        let t = table_info(&sv, table)?;
        // One clock reading for the batch, as a scan takes one (a reading was ~115
        // instructions a Get, callgrind).
        let now = self.opts.clock.now_ms();
        let order = row_order(gets);
        let mut found = 0u64;
        let mut plans = Vec::with_capacity(order.len());
        for &i in &order {
            let g = &gets[i];
            if g.filter.is_some() {
                plans.push(None);
                continue;
            }
            let fams = selected_families(t, &g.selection)?;
            let readers = self.get_files(&sv, &fams, g)?;
            let stage = readers.len() == 1 && memstores_empty(&sv, &fams);
            plans.push(Some(Planned {
                fams,
                readers,
                stage,
            }));
        }
        let n = order.len();
        // The cursors staged and not yet read: row `p`'s in slot `p % RING`, built there and
        // used there (a cursor is ~300 bytes: moving it into a vector, out, and into the Get's
        // resolution was ~170 instructions a Get), and a ring whatever the batch's size.
        let mut staged: [Option<HFileCellIter<'_, FormatSource>>; RING] =
            std::array::from_fn(|_| None);
        let mut raw: RawCells<'_> = RawCells::default();
        for step in 0..n + 3 * AHEAD {
            if let Some(Some(plan)) = plans.get(step) {
                if plan.stage {
                    let slot = &mut staged[step % RING];
                    let it = slot.insert(HFileCellIter::new(plan.readers[0].iter()));
                    // A failed stage leaves the row to a plain seek, which reports the error.
                    match it
                        .inner_mut()
                        .stage(&KeyRef::first_on_row(&gets[order[step]].row))
                    {
                        Ok(()) => {
                            if let Some(b) = it.inner_mut().staged_block() {
                                b.prefetch_header();
                            }
                        }
                        Err(_) => *slot = None,
                    }
                }
            }
            let at = |k: usize| step.checked_sub(k * AHEAD).filter(|&p| p < n);
            if let Some(b) =
                at(1).and_then(|p| staged[p % RING].as_mut()?.inner_mut().staged_block())
            {
                b.prefetch_fences();
            }
            if let Some(p) = at(2) {
                if let Some(b) = staged[p % RING]
                    .as_mut()
                    .and_then(|it| it.inner_mut().staged_block())
                {
                    b.prefetch_interval(&KeyRef::first_on_row(&gets[order[p]].row), 256);
                }
            }
            let Some(p) = at(3) else {
                continue;
            };
            let i = order[p];
            let g = &gets[i];
            let read_point = batch_point(g, visible);
            let Some(plan) = &plans[p] else {
                let row = self.get_row(&sv, t, read_point, g, Some(now))?;
                f(i, row.as_ref().map(RowView::of));
                continue;
            };
            raw.clear();
            let slot = &mut staged[p % RING];
            self.resolve_get(
                &sv,
                t,
                &plan.fams,
                g,
                read_point,
                &plan.readers,
                slot.as_mut(),
                Some(now),
                &mut raw,
            )?;
            // Dropped in place: its block is released as a single Get's would be.
            *slot = None;
            let n = raw.len();
            found += u64::from(n > 0);
            f(i, (n > 0).then(|| RowView::raw(&g.row, &raw, 0, n)));
        }
        self.count_gets(gets.len() as u64, found);
        Ok(())
    }

    /// The read view of a batch of Gets, after checking every Get's arguments (so a bad one
    /// fails the batch before any row is read); `None` for an empty batch. Explicit read
    /// points are applied per Get by [`batch_point`].
    fn batch_view(&self, gets: &[Get]) -> Result<Option<(SeqNo, Arc<SuperVersion>)>> {
        if gets.is_empty() {
            return Ok(None);
        }
        for g in gets {
            g.validate()?;
        }
        Ok(Some(self.read_view(None)))
    }

    /// One row of a Get at `read_point` over `sv`, filtered; `now` as
    /// [`DbInner::resolve_get`] takes it.
    pub(super) fn get_row(
        &self,
        sv: &SuperVersion,
        t: &TableInfo,
        read_point: SeqNo,
        get: &Get,
        now: Option<Timestamp>,
    ) -> Result<Option<Row>> {
        let fams = selected_families(t, &get.selection)?;
        let mut eval = get.filter.as_ref().map(FilterEval::new).transpose()?;
        // The row-key stage first: a row it rejects costs no file access.
        if let Some(e) = eval.as_mut() {
            if e.check_row(&get.row) != RowCheck::Include {
                return Ok(None);
            }
        }
        let mut cells = Vec::new();
        let readers = self.get_files(sv, &fams, get)?;
        self.resolve_get(
            sv, t, &fams, get, read_point, &readers, None, now, &mut cells,
        )?;
        if let Some(e) = eval.as_mut() {
            cells = e.finish_row(cells);
        }
        Ok((!cells.is_empty()).then(|| Row::new(get.row.clone(), cells)))
    }

    /// [`DbInner::get`] handing the row to `f` as a view of cells packed in one buffer (or
    /// `None`), instead of an owned row of owned cells: two allocations instead of one per
    /// cell field. A filtered Get builds the owned row (the filter's last stage works on
    /// owned cells) and views it.
    pub(super) fn get_view<R>(
        &self,
        table: &TableName,
        get: &Get,
        f: impl FnOnce(Option<RowView<'_>>) -> R,
    ) -> Result<R> {
        if get.filter.is_some() {
            let row = self.get(table, get)?;
            return Ok(f(row.as_ref().map(RowView::of)));
        }
        get.validate()?;
        let (read_point, sv) = self.read_view(get.read_point);
        let t = table_info(&sv, table)?;
        let fams = selected_families(t, &get.selection)?;
        let mut raw = GetCells::default();
        let readers = self.get_files(&sv, &fams, get)?;
        self.resolve_get(
            &sv, t, &fams, get, read_point, &readers, None, None, &mut raw,
        )?;
        let n = raw.len();
        self.count_gets(1, u64::from(n > 0));
        Ok(f((n > 0).then(|| RowView::raw(&get.row, &raw, 0, n))))
    }

    /// The files that may hold `get`'s row (key range, time range, bloom filter), newest
    /// first; charges seek compaction as a Get does.
    fn get_files(&self, sv: &SuperVersion, fams: &[FamilyRead], get: &Get) -> Result<Readers> {
        let span = RowSpan {
            start: &get.row,
            stop: Some(&get.row),
            inclusive_stop: true,
        };
        let mut searched = Searched::default();
        let readers = self.candidate_files(sv, fams, &span, &get.time_range, &mut searched)?;
        self.charge_seek(&searched);
        Ok(readers)
    }

    /// The visible cells of `get`'s row at `read_point` in `readers` ([`DbInner::get_files`])
    /// and the memstores, resolved into `sink` (no filter). `staged`: a cursor over
    /// `readers[0]` that [`HFileIter::stage`] descended for this row, used when that file is
    /// the only source. `now`: the batch's clock reading (TTLs), or `None` to read the clock.
    #[allow(clippy::too_many_arguments)]
    fn resolve_get<'q, 'f>(
        &self,
        sv: &'q SuperVersion,
        t: &'q TableInfo,
        fams: &[FamilyRead],
        get: &'q Get,
        read_point: SeqNo,
        readers: &'f [Arc<HFileReader<FormatSource>>],
        staged: Option<&mut HFileCellIter<'f, FormatSource>>,
        now: Option<Timestamp>,
        sink: &mut impl CellSink<'q>,
    ) -> Result<()> {
        // No file may hold the row and every memstore is empty (a missing row in settled
        // data): nothing to resolve, and not even the first key to encode.
        if readers.is_empty() && memstores_empty(sv, fams) {
            return Ok(());
        }
        // Encoded on the stack: a missing row's Get allocates nothing for it.
        KeyRef::first_on_row(&get.row).with_encoded(|first| {
            // A memstore cell visible at `read_point` was inserted before the point was published,
            // so one not there now is not visible to this read.
            let in_memstores = readers.len() <= 1 && memstores_hold_row(sv, fams, first, &get.row);
            // The clock is read up front only for a TTL family; otherwise only a cell's own
            // TTL needs it, and `resolve_row` reads it at the first cell with tags (a reading
            // was ~170 of a cached Get's ~5,900 instructions, callgrind).
            let now = now.or_else(|| t.any_ttl.then(|| self.opts.clock.now_ms()));
            let clock = now.is_none().then_some(&*self.opts.clock);
            let resolvers = || {
                Resolvers::for_get(t, move |name| {
                    ReadParams::for_get(get, name, read_point, now.unwrap_or_default())
                })
            };
            match readers {
                // Every file's bloom filter (or key range) ruled the row out and no memstore has
                // a cell of it: nothing to resolve. This is a Get of a missing row, which so
                // costs no merge, cursor, resolver or clock read: `readmissing` went from 1.87M
                // to 2.04M Gets/s (compare, 2M keys, two alternated runs each).
                [] if !in_memstores => Ok(()),
                // One file holds the row and no memstore does (a read of settled data): its
                // cursor alone, without a merge's source vector, boxes and heap.
                [only] if !in_memstores => {
                    let mut own;
                    let it = match staged {
                        Some(s) => {
                            s.inner_mut().seek_staged(&KeyRef::first_on_row(&get.row))?;
                            s
                        }
                        None => {
                            own = HFileCellIter::new(only.iter());
                            own.seek(first)?;
                            &mut own
                        }
                    };
                    let mut r = resolvers();
                    let done = resolve_row(it, &get.row, &mut r, sink, clock);
                    r.count_into(&self.counters);
                    done
                }
                _ => {
                    let mut merge = merge_over(sv, fams, readers);
                    merge.seek(first)?;
                    let mut r = resolvers();
                    let done = resolve_row(&mut merge, &get.row, &mut r, sink, clock);
                    r.count_into(&self.counters);
                    done
                }
            }
        })
    }
}

/// What a batch knows of one unfiltered Get before it reads the row: its families and the
/// files that may hold the row, found once as [`DbInner::get_files`] finds them.
struct Planned<'t> {
    fams: Cow<'t, [FamilyRead]>,
    readers: Readers,
    /// One file and empty memstores: the settled-data case a batch stages ahead.
    stage: bool,
}

/// How far ahead of the row it reads a batch works on later rows, per stage (see
/// [`DbInner::get_many_view`]). Not tuned: 4 was measured, and only against no staging.
const AHEAD: usize = 4;

/// The staged cursors a batch holds at once: a row is staged `3 × AHEAD` steps before it is
/// read.
const RING: usize = 3 * AHEAD + 1;

/// The indexes of `gets` in row order (equal rows in the order given): neighbouring rows share
/// index paths, blocks and cache lines, so a batch read in this order touches each once while
/// it is hot.
fn row_order(gets: &[Get]) -> Vec<usize> {
    // Tried and not kept (callgrind, batches of 32): an unstable sort on the rows' first 16
    // bytes as one number, or inline word-wise comparisons, cost as much as this (~310
    // instructions a Get: an insertion sort's moves and comparisons, whatever they compare).
    let mut order: Vec<usize> = (0..gets.len()).collect();
    order.sort_by(|&a, &b| gets[a].row.cmp(&gets[b].row));
    order
}

/// The read point of one Get of a batch whose view is at `visible`: its explicit point, capped
/// as [`DbInner::read_view`] caps one (a registered snapshot kept the purges below it, so the
/// batch's super-version serves it), or the batch's.
fn batch_point(get: &Get, visible: SeqNo) -> SeqNo {
    get.read_point.map_or(visible, |p| p.min(visible))
}

/// The files a Get searched, as seek compaction needs them: the first (the newest) and how
/// many. Borrowed from the super-version: collecting every one (a vector and a reference
/// count each) was two allocations of a Get that seek compaction never reads.
#[derive(Debug, Default)]
pub(super) struct Searched<'s> {
    pub(super) first: Option<&'s FileMeta>,
    pub(super) count: usize,
}

/// The row of an encoded key, without parsing the rest: gathering a row backward compares
/// every cell's row. A malformed key yields `None` (or a row that the full parse in
/// resolution then refuses), which ends the row; the next row's parse reports it.
fn key_row(key: &[u8]) -> Option<&[u8]> {
    let len = u16::from_le_bytes([*key.first()?, *key.get(1)?]) as usize;
    key.get(2..2 + len)
}

#[inline]
pub(super) fn parse(key: &[u8]) -> Result<KeyRef<'_>> {
    KeyRef::parse(key)
        .map_err(|m| Error::InvalidArgument(format!("undecodable key in a read: {m}")))
}

pub(super) fn table_info<'s>(
    sv: &'s SuperVersion,
    table: &TableName,
) -> Result<&'s Arc<TableInfo>> {
    sv.tables
        .get(table)
        .ok_or_else(|| Error::TableNotFound(table.to_string()))
}

/// The families a selection reads, with the single column asked for when there is exactly
/// one (for a ROWCOL bloom probe); a read of whole rows borrows the table's list (an
/// allocation per Get otherwise, a tenth of a missing row's Get in callgrind).
pub(super) fn selected_families<'t>(
    t: &'t TableInfo,
    sel: &crate::read::query::Selection,
) -> Result<Cow<'t, [FamilyRead]>> {
    if sel.is_all() {
        return Ok(Cow::Borrowed(&t.all_families));
    }
    let mut out = Vec::new();
    for f in &t.families {
        if sel.reads_family(&f.descriptor.name) {
            let only = sel
                .columns(&f.descriptor.name)
                .filter(|c| c.len() == 1)
                .and_then(|c| c.iter().next().cloned());
            out.push((f.id, only));
        }
    }
    for name in sel.families.keys() {
        if t.family(name).is_none() {
            return Err(Error::FamilyNotFound {
                table: t.descriptor.name.to_string(),
                family: name.to_owned(),
            });
        }
    }
    Ok(Cow::Owned(out))
}

/// The memstores (active and frozen) of the families read.
fn family_memstores<'s, 'f>(
    sv: &'s SuperVersion,
    fams: &'f [FamilyRead],
) -> impl Iterator<Item = &'s crate::memstore::MemStore> + 'f
where
    's: 'f,
{
    fams.iter()
        .filter_map(|(id, _)| sv.mems.get(id))
        .flat_map(|m| std::iter::once(&*m.active).chain(m.frozen.iter().map(|f| &**f)))
}

/// Whether every memstore of the families read is empty (see [`memstores_hold_row`] on why
/// an empty one holds nothing a read may see).
fn memstores_empty(sv: &SuperVersion, fams: &[FamilyRead]) -> bool {
    family_memstores(sv, fams).all(|m| m.is_empty())
}

/// Whether a memstore of the families read holds any cell of `row` (visible or not yet);
/// `first` is `row`'s first key.
fn memstores_hold_row(sv: &SuperVersion, fams: &[FamilyRead], first: &[u8], row: &[u8]) -> bool {
    // A memstore with no cell needs no search: its length was counted before any write it
    // holds could become visible, so an empty one holds nothing this read may see (a read of
    // settled data, the common case, searched the empty skip list's head tower per Get).
    family_memstores(sv, fams)
        .any(|m| !m.is_empty() && m.key_at_or_after(first).and_then(key_row) == Some(row))
}

/// A merge over the memstores (newest first) and files of the families read.
fn merge_over<'a>(
    sv: &'a SuperVersion,
    fams: &[FamilyRead],
    readers: &'a [Arc<HFileReader<FormatSource>>],
) -> MergeIter<'a> {
    let mut sources = memstore_sources(sv, fams);
    for r in readers {
        sources.push(Box::new(HFileCellIter::new(r.iter())));
    }
    MergeIter::new(sources)
}

/// A scan's merge: the memstores, each level-0 file, and one cursor per deeper level.
fn scan_merge<'a>(
    db: &'a DbInner,
    sv: &'a SuperVersion,
    fams: &[FamilyRead],
    files: &'a ScanFiles<'a>,
) -> MergeIter<'a> {
    let mut sources = memstore_sources(sv, fams);
    for r in &files.l0 {
        sources.push(Box::new(HFileCellIter::new(r.iter())));
    }
    for l in &files.levels {
        sources.push(Box::new(LevelIter::new(db, l)));
    }
    MergeIter::new(sources)
}

/// The memstores of the families read, newest first.
fn memstore_sources<'a>(sv: &'a SuperVersion, fams: &[FamilyRead]) -> Vec<Box<dyn CellIter + 'a>> {
    family_memstores(sv, fams)
        .map(|m| Box::new(m.iter()) as Box<dyn CellIter + 'a>)
        .collect()
}

/// The families a forward pass of `scan` from row `start` reads, and the files it may find
/// rows in.
fn forward_sources<'a>(
    db: &DbInner,
    sv: &'a SuperVersion,
    table: &TableInfo,
    scan: &Scan,
    start: &[u8],
) -> Result<(Vec<FamilyRead>, ScanFiles<'a>)> {
    let fams = selected_families(table, &scan.selection)?.into_owned();
    let span = RowSpan {
        start,
        stop: (!scan.stop_row.is_empty()).then_some(scan.stop_row.as_slice()),
        inclusive_stop: scan.inclusive_stop,
    };
    let files = db.scan_files(sv, &fams, &span, &scan.time_range)?;
    Ok((fams, files))
}

/// A family's name and its resolver.
type FamilyResolver<'q> = (&'q str, RowResolver<'q>);

/// Causes of [`super::SkippedCells`]: every verdict but `Include`.
pub(super) const SKIP_CAUSES: usize = 8;

/// Where a verdict is counted in [`super::SkippedCells`] (the order of its fields); `None`
/// for a returned cell.
#[inline(always)]
pub(super) fn skip_index(v: Verdict) -> Option<usize> {
    Some(match v {
        Verdict::Include => return None,
        Verdict::Invisible => 0,
        Verdict::NotSelected => 1,
        Verdict::Marker => 2,
        Verdict::Masked => 3,
        Verdict::Duplicate => 4,
        Verdict::Expired => 5,
        Verdict::OutOfRange => 6,
        Verdict::TooManyVersions => 7,
    })
}

/// One resolver per family of a table, reset at each new row: a scan's in a vector, built
/// once; a Get's in [`ByFamily`], built for the one row.
struct Resolvers<'q, S = Vec<FamilyResolver<'q>>> {
    /// A table has a handful of families: a linear search beats hashing the name per cell.
    by_family: S,
    /// Cells stepped over since the current column was done.
    overrun: usize,
    /// Cells examined and not returned, by [`skip_index`]; added to the database's counters
    /// by [`Resolvers::count_into`] once per read (or scan batch), not an atomic add a cell.
    skipped: [u64; SKIP_CAUSES],
    _family: PhantomData<&'q ()>,
}

/// A Get's resolvers: a table of one family (the common case, and every table of the
/// comparison) keeps its one resolver inline. Allocating the vector was ~190 of a cached
/// Get's ~6,450 instructions (callgrind); `SmallVec` cost as much in its generic moves. Scans
/// keep the vector: this enum's match cost them ~14 instructions a row.
// The large variant is the point: the resolver inline, not behind an allocation.
#[allow(clippy::large_enum_variant)]
enum ByFamily<'q> {
    One([FamilyResolver<'q>; 1]),
    Many(Vec<FamilyResolver<'q>>),
}

impl<'q> AsMut<[FamilyResolver<'q>]> for ByFamily<'q> {
    fn as_mut(&mut self) -> &mut [FamilyResolver<'q>] {
        match self {
            ByFamily::One(one) => one,
            ByFamily::Many(v) => v,
        }
    }
}

/// Cells to step over in a finished column before seeking past it instead: a seek re-positions
/// every source (RocksDB's `max_sequential_skip_in_iterations` makes the same trade).
const MAX_SEQUENTIAL_SKIP: usize = 8;

/// The resolver of family `f` with `params` for its name.
fn family_resolver<'q>(
    f: &'q super::sv::FamilyInfo,
    params: &impl Fn(&str) -> ReadParams<'q>,
) -> FamilyResolver<'q> {
    let name = f.descriptor.name.as_str();
    (
        name,
        RowResolver::new(&f.descriptor, params(name)).with_range_deletes(&f.range_deletes),
    )
}

impl<'q> Resolvers<'q, ByFamily<'q>> {
    /// The resolvers of one Get's row.
    fn for_get(t: &'q TableInfo, params: impl Fn(&str) -> ReadParams<'q>) -> Self {
        let by_family = match t.families.as_slice() {
            [only] => ByFamily::One([family_resolver(only, &params)]),
            all => ByFamily::Many(all.iter().map(|f| family_resolver(f, &params)).collect()),
        };
        Resolvers {
            by_family,
            overrun: 0,
            skipped: [0; SKIP_CAUSES],
            _family: PhantomData,
        }
    }
}

impl<'q> Resolvers<'q> {
    /// The resolvers of a scan at read point `rp`.
    fn for_scan(t: &'q TableInfo, scan: &'q Scan, rp: SeqNo, now: Timestamp) -> Self {
        let params = |name: &str| ReadParams::for_scan(scan, name, rp, now);
        Resolvers {
            by_family: t
                .families
                .iter()
                .map(|f| family_resolver(f, &params))
                .collect(),
            overrun: 0,
            skipped: [0; SKIP_CAUSES],
            _family: PhantomData,
        }
    }
}

impl<'q, S: AsMut<[FamilyResolver<'q>]>> Resolvers<'q, S> {
    /// Judge TTLs at `now_ms` from here on ([`RowResolver::set_now`]).
    fn set_now(&mut self, now_ms: Timestamp) {
        for (_, r) in self.by_family.as_mut() {
            r.set_now(now_ms);
        }
    }

    /// Add the cells skipped so far to `counters` ([`super::SkippedCells`]) and start
    /// again from zero.
    fn count_into(&mut self, counters: &Counters) {
        for (n, c) in self.skipped.iter_mut().zip(&counters.skipped) {
            if *n > 0 {
                c.fetch_add(std::mem::take(n), Ordering::Relaxed);
            }
        }
    }

    fn reset(&mut self) {
        self.overrun = 0;
        for (_, r) in self.by_family.as_mut() {
            r.reset();
        }
    }

    /// Resolve the cell of a row of one cell: the family's declared name and the cell's type
    /// when it is returned, `None` when not. Nothing to seek past: the row ends with it.
    /// Inlined into the scan's loop, without [`Resolvers::push`]'s sink and skip bookkeeping:
    /// through `push`, a cached scan ran 5% more instructions (callgrind, ~34 a row).
    #[inline(always)]
    fn resolve_only_cell(&mut self, key: &KeyRef<'_>, tags: &[u8]) -> Option<(&'q str, CellType)> {
        let (family, r) = self
            .by_family
            .as_mut()
            .iter_mut()
            .find(|(name, _)| bytes_eq(name.as_bytes(), key.family))?;
        match skip_index(r.first_cell_verdict(key, tags)) {
            // (An included cell has a cell type: the verdict leaves out other codes.)
            None => key.cell_type().map(|t| (*family, t)),
            Some(i) => {
                self.skipped[i] += 1;
                None
            }
        }
    }

    /// Resolve one cell; returns where to seek next when the rest of its column cannot change
    /// the result (the column returned all the versions it may), `None` to step to the next
    /// cell. Never for the empty qualifier: family markers share that column, interleaved by
    /// timestamp with its versions, and a later one can still mask other columns.
    fn push(
        &mut self,
        key: &KeyRef<'_>,
        value: &[u8],
        tags: &[u8],
        out: &mut impl CellSink<'q>,
    ) -> Result<Option<Vec<u8>>> {
        let Some((family, r)) = self
            .by_family
            .as_mut()
            .iter_mut()
            .find(|(name, _)| bytes_eq(name.as_bytes(), key.family))
        else {
            return Ok(None);
        };
        match skip_index(r.push_with_tags(key, tags)) {
            None => {
                let v = if key.cell_type() == Some(CellType::Put) {
                    value
                } else {
                    &[]
                };
                out.push_cell(key, family, v)?;
            }
            Some(i) => self.skipped[i] += 1,
        }
        if !r.column_done() || key.qualifier.is_empty() {
            self.overrun = 0;
            return Ok(None);
        }
        self.overrun += 1;
        if self.overrun > MAX_SEQUENTIAL_SKIP {
            self.overrun = 0;
            // The smallest key after every version of this column.
            let past = KeyRef {
                timestamp: 0,
                type_code: cellar_format::cell::TYPE_MINIMUM,
                seq: 0,
                ..*key
            };
            return Ok(Some(past.encode()));
        }
        Ok(None)
    }
}

/// A scan's resolvers that add the cells they skipped to the database's counters however the
/// pass over the merge ends (a full batch, the stop row, an error).
struct Counted<'a, 'q> {
    r: Resolvers<'q>,
    counters: &'a Counters,
}

impl<'q> std::ops::Deref for Counted<'_, 'q> {
    type Target = Resolvers<'q>;
    fn deref(&self) -> &Resolvers<'q> {
        &self.r
    }
}

impl<'q> std::ops::DerefMut for Counted<'_, 'q> {
    fn deref_mut(&mut self) -> &mut Resolvers<'q> {
        &mut self.r
    }
}

impl Drop for Counted<'_, '_> {
    fn drop(&mut self) {
        self.r.count_into(self.counters);
    }
}

/// Resolve the cells of `row` from `it`, positioned on the row's first cell, into `sink`. Past
/// a resolved cell the cursor seeks when the resolver allows skipping the rest of a column (a
/// hot counter's thousand old versions), and steps to the next cell otherwise. `clock`: the
/// clock to read at the first cell with tags (its own TTL), when the resolvers were built
/// without a reading.
fn resolve_row<'q>(
    it: &mut impl CellIter,
    row: &[u8],
    resolvers: &mut Resolvers<'q, impl AsMut<[FamilyResolver<'q>]>>,
    sink: &mut impl CellSink<'q>,
    mut clock: Option<&dyn crate::Clock>,
) -> Result<()> {
    while let Some(cur) = it.current() {
        let key = parse(cur.key)?;
        if !bytes_eq(key.row, row) {
            break;
        }
        if !cur.tags.is_empty() {
            if let Some(c) = clock.take() {
                resolvers.set_now(c.now_ms());
            }
        }
        match resolvers.push(&key, cur.value, cur.tags, sink)? {
            Some(target) => it.seek(&target)?,
            // The row's last cell: a file's cursor can tell without decoding the next.
            None if !it.next_in_row(row.len())? => break,
            None => {}
        }
    }
    Ok(())
}

/// Why a streamed scan's pass over the merge stopped before its sources ended.
enum Halt {
    /// At a row past the scan's stop row.
    PastStop,
    /// The callback broke off, or the limit was reached.
    Done,
    /// The current column is done, or a filter skips ahead: seek to this key.
    Seek(Vec<u8>),
    /// A refill's batch is full: the next one starts at this row.
    Resume(Vec<u8>),
}

/// Run `merge` forward, handing each cell to `step` until it names a halt or fails (the
/// halt or the error is returned), or until the sources end (`None`).
fn run_until_halt(
    merge: &mut impl CellIter,
    mut step: impl FnMut(cellar_format::CellEntry<'_>) -> Result<Option<Halt>>,
) -> Result<Option<Halt>> {
    let mut halt = None;
    merge.run_forward(&mut |cur| match step(cur) {
        Ok(None) => true,
        Ok(Some(h)) => {
            halt = Some(Ok(h));
            false
        }
        Err(e) => {
            halt = Some(Err(e));
            false
        }
    })?;
    halt.transpose()
}

/// Where a scan's next refill starts.
#[derive(Debug, Clone)]
enum Resume {
    /// Forward, at this row (inclusive).
    From(Vec<u8>),
    /// Reversed, at the last row before this one; `None` is the table's last row.
    Below(Option<Vec<u8>>),
}

/// The raw cells of one row, gathered by a reversed scan in descending key order and handed
/// to resolution in ascending order. Keys and values live in two reused buffers, so a row costs
/// no allocation per cell.
#[derive(Debug, Default)]
struct RowCells {
    keys: Vec<u8>,
    values: Vec<u8>,
    tags: Vec<u8>,
    /// End of each cell's key, value and tags in the buffers, in the order gathered.
    ends: Vec<(usize, usize, usize)>,
}

impl RowCells {
    fn clear(&mut self) {
        self.keys.clear();
        self.values.clear();
        self.tags.clear();
        self.ends.clear();
    }

    fn push(&mut self, key: &[u8], value: &[u8], tags: &[u8]) {
        self.keys.extend_from_slice(key);
        self.values.extend_from_slice(value);
        self.tags.extend_from_slice(tags);
        self.ends
            .push((self.keys.len(), self.values.len(), self.tags.len()));
    }

    /// The cells (key, value, tags) in ascending key order (the reverse of how they were
    /// gathered).
    fn ascending(&self) -> impl Iterator<Item = (&[u8], &[u8], &[u8])> {
        (0..self.ends.len()).rev().map(move |i| {
            let (k0, v0, t0) = i
                .checked_sub(1)
                .and_then(|j| self.ends.get(j))
                .copied()
                .unwrap_or((0, 0, 0));
            let (k1, v1, t1) = self.ends.get(i).copied().unwrap_or((k0, v0, t0));
            (
                self.keys.get(k0..k1).unwrap_or_default(),
                self.values.get(v0..v1).unwrap_or_default(),
                self.tags.get(t0..t1).unwrap_or_default(),
            )
        })
    }
}

/// Rows of a scan, read in batches at one read point over one super-version: the scan sees one
/// snapshot from its first row to its last, whatever writes, flushes or schema changes happen
/// meanwhile.
///
/// A reversed scan walks the merge backward one row at a time: it gathers the row's raw
/// cells (which arrive in descending key order), then feeds them to the same resolution,
/// filter and batching as a forward scan in ascending order, so a row reads the same in both
/// directions.
#[derive(Debug)]
pub struct ScanIter {
    db: Arc<DbInner>,
    sv: Arc<SuperVersion>,
    table: Arc<TableInfo>,
    scan: Scan,
    read_point: SeqNo,
    now: Timestamp,
    /// Where to resume; `None` once the end is reached.
    resume: Option<Resume>,
    /// Rows (or chunks of rows, under `batch`) read ahead, each marked true when it is the
    /// first chunk of its row, so that `limit` counts rows.
    buffer: VecDeque<(Row, bool)>,
    /// Rows returned (a chunked row counts once).
    returned: usize,
    failed: bool,
    /// The scan's filter state, kept across refills (Page counts rows over the whole scan).
    eval: Option<FilterEval>,
    /// Cells taken from the merge and fed to version resolution, over the whole scan.
    cells_read: u64,
    /// Rows the next refill reads (before the limit caps it).
    batch_rows: usize,
}

impl ScanIter {
    pub(super) fn new(db: Arc<DbInner>, table: &TableName, scan: Scan) -> Result<ScanIter> {
        scan.validate()?;
        let (read_point, sv) = db.read_view(scan.read_point);
        let now = db.opts.clock.now_ms();
        let t = table_info(&sv, table)?.clone();
        selected_families(&t, &scan.selection)?;
        db.counters.scans.fetch_add(1, Ordering::Relaxed);
        let eval = scan
            .filter
            .as_ref()
            .map(|f| {
                if scan.reversed {
                    FilterEval::reversed(f)
                } else {
                    FilterEval::new(f)
                }
            })
            .transpose()?;
        let start = &scan.start_row;
        let resume = match (scan.reversed, scan.exclusive_start) {
            (false, false) => Resume::From(start.clone()),
            (false, true) => Resume::From(successor(start)),
            (true, _) if start.is_empty() => Resume::Below(None),
            (true, false) => Resume::Below(Some(successor(start))),
            (true, true) => Resume::Below(Some(start.clone())),
        };
        Ok(ScanIter {
            eval,
            cells_read: 0,
            resume: Some(resume),
            db,
            sv,
            table: t,
            read_point,
            now,
            buffer: VecDeque::new(),
            returned: 0,
            failed: false,
            batch_rows: scan
                .limit
                .map_or(SCAN_FIRST_BATCH_ROWS, |l| l.clamp(1, SCAN_BATCH_ROWS)),
            scan,
        })
    }

    /// The read point the scan sees.
    pub fn read_point(&self) -> SeqNo {
        self.read_point
    }

    /// Cells the scan has read from its sources and resolved so far: rows a filter skipped by
    /// seeking are not read, which this shows (tests use it to prove the skipping).
    pub fn cells_read(&self) -> u64 {
        self.cells_read
    }

    fn refill(&mut self) -> Result<()> {
        let mut cap = self.batch_rows;
        self.batch_rows = (cap * 4).min(SCAN_BATCH_ROWS);
        if let Some(l) = self.scan.limit {
            // Rows a filter drops do not count, so this is a bound, not a promise.
            cap = cap.min(l.saturating_sub(self.returned).max(1));
        }
        match self.resume.take() {
            None => Ok(()),
            Some(Resume::From(start)) => self.refill_forward(start, cap),
            Some(Resume::Below(below)) => self.refill_reversed(below, cap),
        }
    }

    fn refill_forward(&mut self, start: Vec<u8>, cap: usize) -> Result<()> {
        let (fams, files) = forward_sources(&self.db, &self.sv, &self.table, &self.scan, &start)?;
        let mut merge = scan_merge(&self.db, &self.sv, &fams, &files);
        merge.seek(&KeyRef::first_on_row(&start).encode())?;
        let mut resolvers = Counted {
            r: Resolvers::for_scan(&self.table, &self.scan, self.read_point, self.now),
            counters: &self.db.counters,
        };
        let mut row: Option<Vec<u8>> = None;
        let mut cells = Vec::new();
        let mut batch = BatchSize::default();
        let scan = &self.scan;
        let buffer = &mut self.buffer;
        let mut eval = self.eval.as_mut();
        let cells_read = &mut self.cells_read;
        // The cells are handed over by `run_forward`, as in `for_each_row` (which see): a
        // run stops only to seek (past a finished column, or to a filter's hint), when the
        // batch is full, at the stop row, or on an error.
        loop {
            let halt = run_until_halt(&mut merge, |cur| {
                let key = parse(cur.key)?;
                if scan.past_stop(key.row) {
                    return Ok(Some(Halt::PastStop));
                }
                if row.as_deref() != Some(key.row) {
                    if let Some(done) = row.take() {
                        batch.add(emit(
                            buffer,
                            eval.as_deref_mut(),
                            scan.batch,
                            done,
                            std::mem::take(&mut cells),
                        ));
                    }
                    if batch.full(cap) {
                        return Ok(Some(Halt::Resume(key.row.to_vec())));
                    }
                    if let Some(e) = eval.as_deref_mut() {
                        match e.check_row(key.row) {
                            RowCheck::Include => {}
                            // With `resume` already taken, `Done` ends the scan.
                            RowCheck::SeekTo(hint) if scan.past_stop(&hint) => {
                                return Ok(Some(Halt::Done))
                            }
                            RowCheck::SeekTo(hint) => {
                                return Ok(Some(Halt::Seek(KeyRef::first_on_row(&hint).encode())))
                            }
                            RowCheck::Done => return Ok(Some(Halt::Done)),
                        }
                    }
                    row = Some(key.row.to_vec());
                    resolvers.reset();
                }
                *cells_read += 1;
                Ok(resolvers
                    .push(&key, cur.value, cur.tags, &mut cells)?
                    .map(Halt::Seek))
            })?;
            match halt {
                None | Some(Halt::PastStop) => break,
                Some(Halt::Done) => return Ok(()),
                Some(Halt::Resume(at)) => {
                    self.resume = Some(Resume::From(at));
                    return Ok(());
                }
                Some(Halt::Seek(target)) => merge.seek(&target)?,
            }
        }
        if let Some(done) = row {
            emit(buffer, eval, scan.batch, done, cells);
        }
        Ok(())
    }

    /// Read up to `cap` rows backward from the last row before `below` (`None`:
    /// the table's last row).
    fn refill_reversed(&mut self, below: Option<Vec<u8>>, cap: usize) -> Result<()> {
        let fams = selected_families(&self.table, &self.scan.selection)?;
        let span = RowSpan {
            start: &self.scan.stop_row,
            stop: below.as_deref(),
            inclusive_stop: false,
        };
        let files = self
            .db
            .scan_files(&self.sv, &fams, &span, &self.scan.time_range)?;
        let mut merge = scan_merge(&self.db, &self.sv, &fams, &files);
        match &below {
            Some(b) => merge.seek_for_prev(&KeyRef::first_on_row(b).encode())?,
            None => merge.seek_to_last()?,
        }
        let mut resolvers = Counted {
            r: Resolvers::for_scan(&self.table, &self.scan, self.read_point, self.now),
            counters: &self.db.counters,
        };
        // One row's raw cells at a time, in a buffer reused from row to row.
        let mut raw = RowCells::default();
        let mut batch = BatchSize::default();
        while merge.valid() {
            let row = parse(merge.key())?.row.to_vec();
            if self.scan.past_stop(&row) {
                break;
            }
            if batch.full(cap) {
                self.resume = Some(Resume::Below(Some(successor(&row))));
                return Ok(());
            }
            if let Some(e) = self.eval.as_mut() {
                match e.check_row(&row) {
                    RowCheck::Include => {}
                    RowCheck::SeekTo(hint) => {
                        // Every row left is below the hint. `resume` is already taken:
                        // returning ends the scan.
                        if self.scan.past_stop(&hint) {
                            return Ok(());
                        }
                        merge.seek_for_prev(&KeyRef::first_on_row(&hint).encode())?;
                        continue;
                    }
                    RowCheck::Done => return Ok(()),
                }
            }
            // Column skips save nothing here: the row's cells are all gathered anyway, since
            // the first one reached is its last.
            raw.clear();
            while merge.valid() && key_row(merge.key()) == Some(row.as_slice()) {
                raw.push(merge.key(), merge.value(), merge.tags());
                merge.prev()?;
            }
            resolvers.reset();
            let mut cells = Vec::new();
            for (k, v, tags) in raw.ascending() {
                self.cells_read += 1;
                resolvers.push(&parse(k)?, v, tags, &mut cells)?;
            }
            batch.add(emit(
                &mut self.buffer,
                self.eval.as_mut(),
                self.scan.batch,
                row,
                cells,
            ));
        }
        Ok(())
    }
}

impl ScanIter {
    /// Hand every row to `f` until it breaks or the scan ends (see
    /// [`Table::scan_each`](crate::Table::scan_each)). A forward scan without a filter streams
    /// from one merge positioned once, building no owned cells; the others view the rows of the
    /// iterator, so both give exactly the rows of the iterator.
    pub(super) fn for_each_row(
        mut self,
        mut f: impl FnMut(&RowView<'_>) -> ControlFlow<()>,
    ) -> Result<()> {
        let start = match self.resume.take() {
            Some(Resume::From(start)) if self.eval.is_none() => start,
            resume => {
                self.resume = resume;
                for row in self {
                    if f(&RowView::of(&row?)).is_break() {
                        break;
                    }
                }
                return Ok(());
            }
        };
        let limit = self.scan.limit.unwrap_or(usize::MAX);
        if limit == 0 {
            return Ok(());
        }
        let (fams, files) = forward_sources(&self.db, &self.sv, &self.table, &self.scan, &start)?;
        let mut merge = scan_merge(&self.db, &self.sv, &fams, &files);
        merge.seek(&KeyRef::first_on_row(&start).encode())?;
        let scan = &self.scan;
        let mut resolvers = Counted {
            r: Resolvers::for_scan(&self.table, scan, self.read_point, self.now),
            counters: &self.db.counters,
        };
        let mut out = Deliver {
            f: &mut f,
            returned: 0,
            limit,
            batch: scan.batch,
        };
        let r = Self::stream(&mut merge, &mut out, &mut resolvers, scan);
        self.db
            .counters
            .scan_rows
            .fetch_add(out.returned as u64, Ordering::Relaxed);
        r
    }

    /// [`ScanIter::for_each_row`]'s pass over `merge`, rows handed to `out`.
    fn stream<'q, F: FnMut(&RowView<'_>) -> ControlFlow<()>>(
        merge: &mut MergeIter<'_>,
        out: &mut Deliver<'_, F>,
        resolvers: &mut Resolvers<'q>,
        scan: &Scan,
    ) -> Result<()> {
        let mut row = Vec::new();
        let mut cells: RawCells<'q> = RawCells::default();
        // Why the cells are handed over by `run_forward` rather than read with `current` and
        // `next`: each of those walks every layer of cursors (merge, level, file, block) once
        // a cell, where `run_forward` loops inside a data block (callgrind: 4.6% fewer
        // instructions for a cached scan; with the restart entries' direct decode, 12.1M ->
        // 14.3M rows a second). The loop stops only to seek past a finished column, at the
        // scan's end or on an error.
        loop {
            let halt = run_until_halt(merge, |cur| {
                let key = parse(cur.key)?;
                if scan.past_stop(key.row) {
                    return Ok(Some(Halt::PastStop));
                }
                if row.is_empty() || !bytes_eq(&row, key.row) {
                    // A gathered row to finish (none after a row of one cell, which leaves
                    // `row` and `cells` empty).
                    if !row.is_empty() {
                        if !out.rows(&row, &cells) {
                            return Ok(Some(Halt::Done));
                        }
                        row.clear();
                        cells.clear();
                    }
                    if cur.last_in_row {
                        // The row's only cell: resolved and handed over here, borrowed from
                        // the block, with no copy of the row key or the value (and the next
                        // cell, with no row gathered, starts a row without comparing keys).
                        if let Some((family, cell_type)) =
                            resolvers.resolve_only_cell(&key, cur.tags)
                        {
                            let cell = CellRef {
                                row: key.row,
                                family,
                                qualifier: key.qualifier,
                                timestamp: key.timestamp,
                                cell_type,
                                value: if cell_type == CellType::Put {
                                    cur.value
                                } else {
                                    &[]
                                },
                            };
                            if !out.one(cell) {
                                return Ok(Some(Halt::Done));
                            }
                        }
                        return Ok(None);
                    }
                    // (Only a gathered row needs the resolvers' state: the one-cell path above
                    // neither reads nor changes it.)
                    resolvers.reset();
                    row.extend_from_slice(key.row);
                }
                Ok(resolvers
                    .push(&key, cur.value, cur.tags, &mut cells)?
                    .map(Halt::Seek))
            })?;
            match halt {
                // The sources are exhausted, or stopped at the stop row.
                None | Some(Halt::PastStop) => break,
                // (`Resume` comes only from a refill's batch, which this pass has none of.)
                Some(Halt::Done | Halt::Resume(_)) => return Ok(()),
                Some(Halt::Seek(target)) => merge.seek(&target)?,
            }
        }
        out.rows(&row, &cells);
        Ok(())
    }
}

/// Hands a streamed scan's rows to its callback and counts them against the limit.
struct Deliver<'c, F> {
    f: &'c mut F,
    returned: usize,
    limit: usize,
    batch: Option<usize>,
}

impl<F: FnMut(&RowView<'_>) -> ControlFlow<()>> Deliver<'_, F> {
    /// Deliver the finished row's cells (if any) in chunks of `batch`; false to stop.
    fn rows(&mut self, row: &[u8], cells: &RawCells) -> bool {
        if cells.len() == 0 {
            return true;
        }
        let chunk = match self.batch {
            Some(n) if n > 0 => n,
            _ => cells.len(),
        };
        let mut from = 0;
        while from < cells.len() {
            let to = (from + chunk).min(cells.len());
            if (self.f)(&RowView::raw(row, cells, from, to)).is_break() {
                return false;
            }
            from = to;
        }
        self.returned += 1;
        self.returned < self.limit
    }

    /// Deliver a row of the one cell `cell` (one chunk whatever `batch`); false to stop.
    #[inline]
    fn one(&mut self, cell: CellRef<'_>) -> bool {
        if (self.f)(&RowView::one(cell)).is_break() {
            return false;
        }
        self.returned += 1;
        self.returned < self.limit
    }
}

impl Drop for ScanIter {
    /// The rows it returned count once the scan ends, not one atomic add a row.
    fn drop(&mut self) {
        if self.returned > 0 {
            self.db
                .counters
                .scan_rows
                .fetch_add(self.returned as u64, Ordering::Relaxed);
        }
    }
}

impl Iterator for ScanIter {
    type Item = Result<Row>;

    fn next(&mut self) -> Option<Result<Row>> {
        if self.failed {
            return None;
        }
        let at_limit = self.scan.limit.is_some_and(|l| self.returned >= l);
        // At the limit, only the remaining chunks of the last row returned may follow.
        if at_limit && self.buffer.front().is_none_or(|(_, first)| *first) {
            return None;
        }
        while self.buffer.is_empty() && self.resume.is_some() {
            if let Err(e) = self.refill() {
                self.failed = true;
                return Some(Err(e));
            }
        }
        let (row, first) = self.buffer.pop_front()?;
        if first {
            self.returned += 1;
        }
        Some(Ok(row))
    }
}

/// What a refill has buffered so far.
#[derive(Debug, Default)]
struct BatchSize {
    rows: usize,
    bytes: usize,
}

impl BatchSize {
    /// Count a row [`emit`] buffered `bytes` of (0: the row produced no output).
    fn add(&mut self, bytes: usize) {
        self.rows += usize::from(bytes > 0);
        self.bytes += bytes;
    }

    /// Whether the refill stops before its next row.
    fn full(&self, cap_rows: usize) -> bool {
        self.rows >= cap_rows || self.bytes >= SCAN_BATCH_BYTES
    }
}

/// Run the filter's cell and row stages on a finished row and buffer what is left, cut into
/// chunks of at most `batch` cells. Returns the bytes of the row key and cells buffered, 0 when
/// the row produced no output.
fn emit(
    buffer: &mut VecDeque<(Row, bool)>,
    eval: Option<&mut FilterEval>,
    batch: Option<usize>,
    key: Vec<u8>,
    cells: Vec<Cell>,
) -> usize {
    let cells = match eval {
        Some(e) => e.finish_row(cells),
        None => cells,
    };
    if cells.is_empty() {
        return 0;
    }
    let bytes = key.len()
        + cells
            .iter()
            .map(|c| c.row.len() + c.family.len() + c.qualifier.len() + c.value.len())
            .sum::<usize>();
    match batch {
        Some(n) if n > 0 && cells.len() > n => {
            let mut first = true;
            let mut rest = cells.into_iter().peekable();
            while rest.peek().is_some() {
                let chunk: Vec<Cell> = rest.by_ref().take(n).collect();
                buffer.push_back((Row::new(key.clone(), chunk), first));
                first = false;
            }
        }
        _ => buffer.push_back((Row::new(key, cells), true)),
    }
    bytes
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// The batch's order is the rows' bytewise order, equal rows in the order given, for
        /// rows that share a prefix (all of them), tie in the 8 bytes after it, are prefixes
        /// of each other or end in zeros (which the word's padding cannot tell apart).
        #[test]
        fn row_order_is_a_stable_sort_by_row(
            prefix in prop::collection::vec(prop::sample::select(vec![0u8, 1, 0xff]), 0..10),
            tails in prop::collection::vec(
                prop::collection::vec(prop::sample::select(vec![0u8, 1, 0x7f, 0xff]), 0..12),
                0..40,
            )
        ) {
            let rows: Vec<Vec<u8>> = tails.iter().map(|t| [&prefix[..], t].concat()).collect();
            let gets: Vec<Get> = rows.iter().map(|r| Get::new(r.as_slice())).collect();
            let mut expected: Vec<usize> = (0..rows.len()).collect();
            expected.sort_by(|&a, &b| rows[a].cmp(&rows[b]));
            prop_assert_eq!(row_order(&gets), expected);
        }
    }
}
