//! Version resolution: which cells of a row a reader sees (SPEC.md §13, MISSION.md "The read
//! semantics in detail").
//!
//! A [`RowResolver`] is fed the cells of one row and one family in key order (SPEC.md §3.2),
//! one at a time, and returns a [`Verdict`] for each. The order does the heavy lifting: within
//! a column, versions come newest first and, at equal timestamps, markers before puts, so every
//! marker that can mask a put has been seen when the put arrives; family markers carry an
//! empty qualifier and so come before every other column (they interleave by timestamp with
//! the empty-qualifier column, which the same argument covers). The resolver therefore keeps
//! only small state: the family's markers for the row, and the current column's markers and
//! counters.
//!
//! The verdict says *why* a cell is hidden, so compaction can reuse the machine: it keeps
//! markers and drops what is masked, expired or beyond VERSIONS under its own rules.
//!
//! # Choices (where HBase leaves one or differs by mode)
//! - Classic mode applies `min(query versions, family VERSIONS)` to the cells left after the
//!   time-range filter, as HBase does, so a time-ranged read may see an old version that a
//!   later compaction trims.
//! - NEW_VERSION_BEHAVIOR applies the family's VERSIONS to every version the read point sees,
//!   deleted ones included and regardless of the query's time range: that is exactly what
//!   compaction keeps, so results do not depend on when it ran. The query's own version limit
//!   still counts returned cells after the time range.
//! - MIN_VERSIONS counts the newest versions of the column the same way VERSIONS does (not
//!   masked in classic mode, all in NEW_VERSION_BEHAVIOR), regardless of the time range.
//! - Raw reads return every cell and marker the read point sees within the time range and
//!   selected columns (family markers always), in order: no masking, no version limit, no TTL,
//!   equal-timestamp puts all returned.

use std::collections::BTreeSet;
use std::time::Duration;

use cellar_format::cell::compare_bytes;
use cellar_format::{CellType, KeyRef};

use crate::error::Result;
use crate::read::query::{Cell, Get, Scan, TimeRange};
use crate::read::range_index::RangeDeletes;
use crate::schema::{FamilyDescriptor, KeepDeletedCells};
use crate::types::{SeqNo, Timestamp};

/// What one read asks of one family.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct ReadParams<'q> {
    /// Cells (markers too) with a larger sequence number are not yet visible.
    pub read_point: SeqNo,
    /// The clock for TTL.
    pub now_ms: Timestamp,
    /// Qualifiers read; `None` is every column.
    pub columns: Option<&'q BTreeSet<Vec<u8>>>,
    /// Most versions returned per column.
    pub max_versions: u32,
    /// Only cells in this range.
    pub time_range: TimeRange,
    /// Unresolved output (see the module's choices).
    pub raw: bool,
}

impl<'q> ReadParams<'q> {
    /// Every column, the newest version, all time.
    pub fn new(read_point: SeqNo, now_ms: Timestamp) -> Self {
        ReadParams {
            read_point,
            now_ms,
            columns: None,
            max_versions: 1,
            time_range: TimeRange::ALL,
            raw: false,
        }
    }

    /// Only these qualifiers.
    pub fn columns(mut self, columns: Option<&'q BTreeSet<Vec<u8>>>) -> Self {
        self.columns = columns;
        self
    }

    /// Up to `n` versions per column.
    pub fn max_versions(mut self, n: u32) -> Self {
        self.max_versions = n;
        self
    }

    /// Only cells in `range`.
    pub fn time_range(mut self, range: TimeRange) -> Self {
        self.time_range = range;
        self
    }

    /// Raw output.
    pub fn raw(mut self, on: bool) -> Self {
        self.raw = on;
        self
    }

    /// The parameters of `get` for `family` (whether the family is read at all is
    /// `get.selection.reads_family`).
    pub fn for_get(get: &'q Get, family: &str, read_point: SeqNo, now_ms: Timestamp) -> Self {
        ReadParams::new(read_point, now_ms)
            .columns(get.selection.columns(family))
            .max_versions(get.max_versions)
            .time_range(get.time_range)
    }

    /// The parameters of `scan` for `family`.
    pub fn for_scan(scan: &'q Scan, family: &str, read_point: SeqNo, now_ms: Timestamp) -> Self {
        ReadParams::new(read_point, now_ms)
            .columns(scan.selection.columns(family))
            .max_versions(scan.max_versions)
            .time_range(scan.time_range)
            .raw(scan.raw)
    }
}

/// The fate of one cell.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Verdict {
    /// Returned to the reader.
    Include,
    /// Written after the read point (or not a stored cell type): not there for this read.
    Invisible,
    /// Its column is not read.
    NotSelected,
    /// A delete marker: remembered, not returned (raw reads return it as `Include`).
    Marker,
    /// A put hidden by a delete marker.
    Masked,
    /// A put at the same timestamp as a newer write of its column, which wins.
    Duplicate,
    /// Older than the family's TTL and not among the MIN_VERSIONS newest.
    Expired,
    /// Outside the read's time range.
    OutOfRange,
    /// Beyond the version limit.
    TooManyVersions,
}

impl Verdict {
    /// True for [`Verdict::Include`].
    pub fn is_included(self) -> bool {
        self == Verdict::Include
    }
}

/// Markers that mask at or below their timestamp (DeleteFamily), as they arrive: timestamps
/// descending. Only a staircase is kept, each entry with a larger sequence number than the
/// one before, because a marker with an older timestamp *and* an older write masks nothing
/// the earlier one does not.
#[derive(Debug, Clone, Default)]
struct AtOrBelow {
    entries: Vec<(Timestamp, SeqNo)>,
}

impl AtOrBelow {
    fn add(&mut self, ts: Timestamp, seq: SeqNo) {
        if self.entries.last().is_some_and(|&(_, s)| s >= seq) {
            return;
        }
        self.entries.push((ts, seq));
    }

    /// Largest sequence number among markers at or above `ts`.
    fn newest_write_covering(&self, ts: Timestamp) -> Option<SeqNo> {
        let n = self.entries.partition_point(|&(t, _)| t >= ts);
        n.checked_sub(1)
            .and_then(|i| self.entries.get(i))
            .map(|&(_, s)| s)
    }

    fn clear(&mut self) {
        self.entries.clear();
    }
}

/// Markers that mask exactly their timestamp (DeleteFamilyVersion), timestamps descending, one
/// entry per timestamp holding the largest sequence number (the first to arrive).
#[derive(Debug, Clone, Default)]
struct AtExactly {
    entries: Vec<(Timestamp, SeqNo)>,
}

impl AtExactly {
    fn add(&mut self, ts: Timestamp, seq: SeqNo) {
        if self.entries.last().is_some_and(|&(t, _)| t == ts) {
            return;
        }
        self.entries.push((ts, seq));
    }

    fn newest_write_at(&self, ts: Timestamp) -> Option<SeqNo> {
        let i = self.entries.partition_point(|&(t, _)| t > ts);
        self.entries
            .get(i)
            .filter(|&&(t, _)| t == ts)
            .map(|&(_, s)| s)
    }

    fn clear(&mut self) {
        self.entries.clear();
    }
}

/// State of the column being resolved.
#[derive(Debug, Clone, Default)]
struct ColumnState {
    /// False until the first cell of the row.
    started: bool,
    qualifier: Vec<u8>,
    selected: bool,
    /// Largest sequence number of the DeleteColumn markers seen; all of them have a timestamp
    /// at or above every put still to come in the column.
    delete_column: Option<SeqNo>,
    /// The latest Delete (one version) marker: its timestamp and largest sequence number.
    delete_version: Option<(Timestamp, SeqNo)>,
    /// Timestamp of the last put seen, to spot equal-timestamp writes.
    last_put_ts: Option<Timestamp>,
    /// Versions that count toward VERSIONS and MIN_VERSIONS so far.
    versions: u32,
    /// Cells returned so far.
    returned: u32,
}

impl ColumnState {
    // Every row a scan reads starts a column here: called, it was ~22 instructions a row of
    // one cell (callgrind, 2.4% of a cached scan's).
    #[inline(always)]
    fn start(&mut self, qualifier: &[u8], selected: bool) {
        self.started = true;
        self.qualifier.clear();
        // Tested first: a copy of no bytes was still a `memcpy` call, once a row in a table
        // whose columns have the empty qualifier.
        if !qualifier.is_empty() {
            self.qualifier.extend_from_slice(qualifier);
        }
        self.selected = selected;
        self.delete_column = None;
        self.delete_version = None;
        self.last_put_ts = None;
        self.versions = 0;
        self.returned = 0;
    }
}

/// Resolves the cells of one row of one family; [`RowResolver::reset`] reuses it for the next.
#[derive(Debug, Clone)]
pub struct RowResolver<'q> {
    params: ReadParams<'q>,
    /// NEW_VERSION_BEHAVIOR.
    nvb: bool,
    /// VERSIONS.
    family_versions: u32,
    /// MIN_VERSIONS.
    min_versions: u32,
    /// Cells returned per column at most.
    query_limit: u32,
    /// Cells with a timestamp below this are past the TTL.
    ttl_cutoff: Option<Timestamp>,
    /// The family's TTL (to move the cutoff with [`RowResolver::set_now`]).
    ttl: Option<Duration>,
    /// KEEP_DELETED_CELLS on a user read: only markers inside the time range mask.
    markers_in_range_only: bool,
    delete_family: AtOrBelow,
    delete_family_version: AtExactly,
    column: ColumnState,
    /// The family's row-range deletes (SPEC.md §13 rule 8), every seq: filtered by the read
    /// point as a row starts.
    range_deletes: &'q RangeDeletes,
    /// The next cell starts a row whose range deletes are not yet looked up.
    range_pending: bool,
    /// The range deletes covering the rows `[range_lo, range_hi)` (which hold the current
    /// row once it is looked up), as DeleteFamily markers: kept apart from `delete_family`,
    /// whose staircase relies on markers arriving newest timestamp first. A scan's next row
    /// is nearly always in the same bounds and takes them as they are.
    range_family: AtOrBelow,
    range_lo: &'q [u8],
    range_hi: Option<&'q [u8]>,
    /// `range_lo`/`range_hi` hold an answer (false until the first lookup).
    range_known: bool,
}

/// The empty index, for resolvers of families without row-range deletes.
static NO_RANGE_DELETES: std::sync::LazyLock<RangeDeletes> =
    std::sync::LazyLock::new(RangeDeletes::default);

/// Cells with a timestamp below this are past a family's `ttl` at `now_ms`.
fn ttl_cutoff(ttl: Option<Duration>, now_ms: Timestamp) -> Option<Timestamp> {
    ttl.map(|d| {
        let ms = u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
        now_ms.saturating_sub(ms)
    })
}

impl<'q> RowResolver<'q> {
    /// A resolver for `family` and `params`.
    pub fn new(family: &FamilyDescriptor, params: ReadParams<'q>) -> Self {
        let nvb = family.new_version_behavior;
        let ttl_cutoff = ttl_cutoff(family.ttl, params.now_ms);
        RowResolver {
            params,
            nvb,
            family_versions: family.max_versions,
            min_versions: family.min_versions,
            // Classic: HBase caps the query by the family after the time range; NVB enforces
            // the family limit by rank instead (see `put`).
            query_limit: if nvb {
                params.max_versions
            } else {
                params.max_versions.min(family.max_versions)
            },
            ttl_cutoff,
            ttl: family.ttl,
            markers_in_range_only: family.keep_deleted_cells != KeepDeletedCells::False,
            delete_family: AtOrBelow::default(),
            delete_family_version: AtExactly::default(),
            column: ColumnState::default(),
            range_deletes: &NO_RANGE_DELETES,
            range_pending: false,
            range_family: AtOrBelow::default(),
            range_lo: b"",
            range_hi: None,
            range_known: false,
        }
    }

    /// Apply the family's row-range deletes (any seq; those above the read point mask nothing).
    // Inlined: a Get builds one resolver per family, and the call moved the whole resolver.
    #[inline(always)]
    pub fn with_range_deletes(mut self, deletes: &'q RangeDeletes) -> Self {
        self.range_deletes = deletes;
        self.range_pending = !deletes.is_empty();
        self
    }

    /// Make `range_family` the range deletes covering `row`: as they are when `row` is within
    /// the bounds of the last lookup, else looked up. Out of line: most reads meet none.
    #[inline(never)]
    fn enter_row(&mut self, row: &[u8]) {
        self.range_pending = false;
        // Word-wise: as `memcmp` calls, these two comparisons took most of a scan's time
        // with one live delete (perf: 11M rows/s against 47M with none; rows of 16 bytes).
        let within = self.range_known
            && compare_bytes(self.range_lo, row).is_le()
            && self
                .range_hi
                .is_none_or(|hi| compare_bytes(row, hi).is_lt());
        if within {
            return;
        }
        let index: &'q RangeDeletes = self.range_deletes;
        let at = index.locate(row);
        self.range_lo = at.lo;
        self.range_hi = at.hi;
        self.range_known = true;
        let read_point = self.params.read_point;
        let in_range_only = self.markers_in_range_only;
        let range = self.params.time_range;
        let e = &mut self.range_family.entries;
        e.clear();
        for &(ts, seq) in at.covers {
            if seq <= read_point && (!in_range_only || range.contains(ts)) {
                e.push((ts, seq));
            }
        }
        if e.len() > 1 {
            // Newest timestamp first, then newest write: the staircase `AtOrBelow` keeps.
            e.sort_unstable_by(|a, b| b.cmp(a));
            let mut kept = 0;
            let mut best: Option<SeqNo> = None;
            for i in 0..e.len() {
                let (t, s) = e[i];
                if best.is_some_and(|b| b >= s) {
                    continue;
                }
                best = Some(s);
                e[kept] = (t, s);
                kept += 1;
            }
            e.truncate(kept);
        }
    }

    /// Whether a range delete masks the put `key` as the first cell of its row (for
    /// [`RowResolver::first_cell_verdict`]).
    #[inline(never)]
    fn range_masks_first(&mut self, key: &KeyRef<'_>) -> bool {
        self.enter_row(key.row);
        self.range_family
            .newest_write_covering(key.timestamp)
            .is_some_and(|m| self.masks(m, key.seq))
    }

    /// Judge TTLs at `now_ms` from here on: a Get that had no TTL family to read the clock
    /// for reads it when the first cell with its own TTL comes.
    pub fn set_now(&mut self, now_ms: Timestamp) {
        self.params.now_ms = now_ms;
        self.ttl_cutoff = ttl_cutoff(self.ttl, now_ms);
    }

    /// Forget the row: the next cell starts a new row (or family).
    pub fn reset(&mut self) {
        self.delete_family.clear();
        self.delete_family_version.clear();
        self.column.started = false;
        // The bounds and their markers stay: they hold for any row within them.
        self.range_pending = !self.range_deletes.is_empty();
    }

    /// True when the current column has returned all it may: the caller can seek to the next
    /// column. Never true for raw reads.
    pub fn column_done(&self) -> bool {
        !self.params.raw && self.column.started && self.column.returned >= self.query_limit
    }

    /// Decide the fate of the next cell (of this row and family, in key order).
    pub fn push(&mut self, key: &KeyRef<'_>) -> Verdict {
        self.push_with_tags(key, &[])
    }

    /// [`RowResolver::push`] for a cell with tags: a per-cell TTL in them (SPEC.md §13 rule 7)
    /// expires the cell on its own.
    #[inline(always)]
    pub fn push_with_tags(&mut self, key: &KeyRef<'_>, tags: &[u8]) -> Verdict {
        if self.range_pending {
            self.enter_row(key.row);
        }
        self.enter_column(key.qualifier);
        // MVCC: a read sees exactly the writes with seq <= its read point; a marker written
        // later masks nothing yet.
        if key.seq > self.params.read_point {
            return Verdict::Invisible;
        }
        let Some(ty) = key.cell_type() else {
            return Verdict::Invisible;
        };
        if self.params.raw {
            return self.raw(key, ty);
        }
        match ty {
            CellType::Put => {
                // A per-cell TTL expires the cell before anything else looks at it (HBase
                // checks it first too): it neither counts as a version nor shadows an older
                // write at its timestamp, and MIN_VERSIONS does not keep it.
                if self.column.selected
                    && crate::tags::cell_ttl(tags)
                        .is_some_and(|ttl| key.timestamp.saturating_add(ttl) < self.params.now_ms)
                {
                    return Verdict::Expired;
                }
                self.put(key.timestamp, key.seq)
            }
            CellType::DeleteFamily => {
                // Masks every column of the family at or below its timestamp.
                if self.tracks_marker(key.timestamp) {
                    self.delete_family.add(key.timestamp, key.seq);
                }
                Verdict::Marker
            }
            CellType::DeleteFamilyVersion => {
                // Masks every column of the family at exactly its timestamp.
                if self.tracks_marker(key.timestamp) {
                    self.delete_family_version.add(key.timestamp, key.seq);
                }
                Verdict::Marker
            }
            CellType::DeleteColumn => {
                if !self.column.selected {
                    return Verdict::NotSelected;
                }
                // Masks every version of its column at or below its timestamp; the ones
                // above it came earlier, so remembering the newest write suffices.
                if self.tracks_marker(key.timestamp) {
                    let s = self
                        .column
                        .delete_column
                        .map_or(key.seq, |s| s.max(key.seq));
                    self.column.delete_column = Some(s);
                }
                Verdict::Marker
            }
            CellType::Delete => {
                if !self.column.selected {
                    return Verdict::NotSelected;
                }
                // Masks the version of its column at exactly its timestamp; puts at that
                // timestamp follow it directly, so only the latest one matters.
                if self.tracks_marker(key.timestamp) {
                    match self.column.delete_version {
                        // Equal timestamps arrive newest write first: keep that one.
                        Some((t, _)) if t == key.timestamp => {}
                        _ => self.column.delete_version = Some((key.timestamp, key.seq)),
                    }
                }
                Verdict::Marker
            }
        }
    }

    /// The verdict [`RowResolver::push_with_tags`] gives the first cell of a row (after
    /// [`RowResolver::reset`]), decided without touching the row's state: no column is
    /// entered and no marker remembered (only the row-range deletes' lookup, which holds for
    /// any row in its bounds). For a row of one cell, which is all a scan of such rows
    /// resolves, the state would never be read again before the next row's reset.
    ///
    /// Why: a row's first cell meets no marker, no earlier put and no counted version, so
    /// its fate is a few comparisons against the read's parameters; through `reset` and
    /// `push_with_tags`, a cached scan of rows of one cell spent ~65 instructions a row on
    /// the column's bookkeeping (callgrind). `tests/read_resolve.rs` checks the two agree on
    /// every combination of parameters, cell type and tags it generates.
    #[inline(always)]
    pub fn first_cell_verdict(&mut self, key: &KeyRef<'_>, tags: &[u8]) -> Verdict {
        if key.seq > self.params.read_point {
            return Verdict::Invisible;
        }
        let Some(ty) = key.cell_type() else {
            return Verdict::Invisible;
        };
        let selected = self
            .params
            .columns
            .is_none_or(|c| c.contains(key.qualifier));
        if self.params.raw {
            return if !ty.is_family_marker() && !selected {
                Verdict::NotSelected
            } else if !self.params.time_range.contains(key.timestamp) {
                Verdict::OutOfRange
            } else {
                Verdict::Include
            };
        }
        match ty {
            CellType::Put => {
                if !selected {
                    return Verdict::NotSelected;
                }
                if crate::tags::cell_ttl(tags)
                    .is_some_and(|ttl| key.timestamp.saturating_add(ttl) < self.params.now_ms)
                {
                    return Verdict::Expired;
                }
                // The only markers a row's first cell can meet: its range deletes.
                if !self.range_deletes.is_empty() && self.range_masks_first(key) {
                    return Verdict::Masked;
                }
                // `put` with no earlier put, no marker and no version counted: rank 0.
                if self.nvb && self.family_versions == 0 {
                    return Verdict::TooManyVersions;
                }
                if self.is_expired(key.timestamp) && self.min_versions == 0 {
                    return Verdict::Expired;
                }
                if !self.params.time_range.contains(key.timestamp) {
                    return Verdict::OutOfRange;
                }
                if self.query_limit == 0 {
                    return Verdict::TooManyVersions;
                }
                Verdict::Include
            }
            CellType::DeleteFamily | CellType::DeleteFamilyVersion => Verdict::Marker,
            CellType::DeleteColumn | CellType::Delete if !selected => Verdict::NotSelected,
            CellType::DeleteColumn | CellType::Delete => Verdict::Marker,
        }
    }

    /// The column starts with its first cell, visible or not: `column_done` must describe the
    /// column of the cell just pushed, or a reader skipping a finished column would skip the
    /// next column's visible versions after its invisible ones.
    #[inline(always)]
    fn enter_column(&mut self, qualifier: &[u8]) {
        if !self.column.started || self.column.qualifier.as_slice() != qualifier {
            let selected = self.params.columns.is_none_or(|c| c.contains(qualifier));
            self.column.start(qualifier, selected);
        }
    }

    /// Compaction's view of a put that carries a per-cell TTL not yet run out: whether the
    /// oldest read point sees it and whether a marker masks it, without letting it count as a
    /// version or shadow an older write at its timestamp. A read counts it while it lives, but
    /// it will stop counting by itself, and what it outranks now must still be there then
    /// (SPEC.md §20.2). Only for puts; the column is tracked as [`RowResolver::push`] does.
    pub fn push_uncounted(&mut self, key: &KeyRef<'_>) -> Verdict {
        if self.range_pending {
            self.enter_row(key.row);
        }
        self.enter_column(key.qualifier);
        if key.seq > self.params.read_point {
            return Verdict::Invisible;
        }
        if !self.column.selected {
            return Verdict::NotSelected;
        }
        if self.is_masked(key.timestamp, key.seq) {
            return Verdict::Masked;
        }
        Verdict::Include
    }

    /// KEEP_DELETED_CELLS (TRUE or TTL): a user read sees past markers outside its time range,
    /// so a read whose range ends at or before a marker still finds the cells it deleted
    /// (HBase's `seePastDeleteMarkers`). Without it every marker masks, whatever the range.
    fn tracks_marker(&self, ts: Timestamp) -> bool {
        !self.markers_in_range_only || self.params.time_range.contains(ts)
    }

    /// Raw reads: every cell the read point sees, in range and in a selected column; family
    /// markers belong to every column and are always returned.
    fn raw(&self, key: &KeyRef<'_>, ty: CellType) -> Verdict {
        if !ty.is_family_marker() && !self.column.selected {
            return Verdict::NotSelected;
        }
        if !self.params.time_range.contains(key.timestamp) {
            return Verdict::OutOfRange;
        }
        Verdict::Include
    }

    /// A marker written at `marker_seq` masks a put written at `seq`: classic mode, always
    /// (a put written after the delete with an older timestamp stays hidden);
    /// NEW_VERSION_BEHAVIOR, only when the put was written before the marker.
    fn masks(&self, marker_seq: SeqNo, seq: SeqNo) -> bool {
        !self.nvb || marker_seq > seq
    }

    #[inline]
    fn is_masked(&self, ts: Timestamp, seq: SeqNo) -> bool {
        // Nearly every put of a scan meets no marker at all: answered inline, without the
        // searches (callgrind: 28 instructions a put out of line).
        let none = self.delete_family.entries.is_empty()
            && self.range_family.entries.is_empty()
            && self.delete_family_version.entries.is_empty()
            && self.column.delete_column.is_none()
            && self.column.delete_version.is_none();
        !none && self.is_masked_by_markers(ts, seq)
    }

    /// Which marker masks a put at `ts` written at `seq`, as [`RowResolver::push`] judged it:
    /// the marker's type and sequence number (the newest write among the markers of that
    /// type that cover it), or `None` when no marker remembered so far does. Asked right after
    /// `push` returned [`Verdict::Masked`] for the put, it names a marker of this row and
    /// family, and for the column kinds of the put's column (what `Table::explain` reports).
    pub fn mask_cause(&self, ts: Timestamp, seq: SeqNo) -> Option<(CellType, SeqNo)> {
        let masks = |m: &SeqNo| self.masks(*m, seq);
        let version = self
            .column
            .delete_version
            .filter(|&(t, m)| t == ts && masks(&m))
            .map(|(_, m)| (CellType::Delete, m));
        let column = self
            .column
            .delete_column
            .filter(masks)
            .map(|m| (CellType::DeleteColumn, m));
        let family_version = self
            .delete_family_version
            .newest_write_at(ts)
            .filter(masks)
            .map(|m| (CellType::DeleteFamilyVersion, m));
        let family = self
            .delete_family
            .newest_write_covering(ts)
            .filter(masks)
            .map(|m| (CellType::DeleteFamily, m));
        // A range delete is the row's DeleteFamily marker (SPEC.md §13 rule 8).
        let range = self
            .range_family
            .newest_write_covering(ts)
            .filter(masks)
            .map(|m| (CellType::DeleteFamily, m));
        version.or(column).or(family_version).or(family).or(range)
    }

    #[inline(never)]
    fn is_masked_by_markers(&self, ts: Timestamp, seq: SeqNo) -> bool {
        let family = self
            .delete_family
            .newest_write_covering(ts)
            .is_some_and(|m| self.masks(m, seq))
            || self
                .range_family
                .newest_write_covering(ts)
                .is_some_and(|m| self.masks(m, seq));
        let family_version = self
            .delete_family_version
            .newest_write_at(ts)
            .is_some_and(|m| self.masks(m, seq));
        let column = self
            .column
            .delete_column
            .is_some_and(|m| self.masks(m, seq));
        let version = self
            .column
            .delete_version
            .is_some_and(|(t, m)| t == ts && self.masks(m, seq));
        family || family_version || column || version
    }

    /// True when a row-range delete this read sees covers the row of the last cell pushed at
    /// a timestamp at or above `ts` (SPEC.md §13 rule 8): in classic mode, everything a
    /// marker at `ts` there could mask, it masks too. Compaction drops such markers (purge
    /// rule 7).
    pub fn range_delete_covers(&self, ts: Timestamp) -> bool {
        !self.range_deletes.is_empty() && self.range_family.newest_write_covering(ts).is_some()
    }

    /// True when `ts` is older than the family's TTL at this read's clock (whatever
    /// MIN_VERSIONS protects). Compaction uses it to age markers and kept deleted cells by the
    /// same cutoff reads use.
    pub fn is_expired(&self, ts: Timestamp) -> bool {
        self.ttl_cutoff.is_some_and(|cut| ts < cut)
    }

    #[inline(always)]
    fn put(&mut self, ts: Timestamp, seq: SeqNo) -> Verdict {
        if !self.column.selected {
            return Verdict::NotSelected;
        }
        // Two puts with equal row, column and timestamp: the later write (first in order)
        // wins and is the only one ever returned.
        if self.column.last_put_ts == Some(ts) {
            return Verdict::Duplicate;
        }
        self.column.last_put_ts = Some(ts);
        let masked = self.is_masked(ts, seq);
        // Classic: deleted versions do not count toward VERSIONS, so an older version shows
        // again after a newer one is deleted. NVB: they count.
        if masked && !self.nvb {
            return Verdict::Masked;
        }
        let rank = self.column.versions;
        self.column.versions = rank.saturating_add(1);
        if masked {
            return Verdict::Masked;
        }
        // NVB: the family keeps VERSIONS versions, deleted or not, whatever the query asks.
        if self.nvb && rank >= self.family_versions {
            return Verdict::TooManyVersions;
        }
        // TTL: older than now - TTL is gone, except the MIN_VERSIONS newest versions.
        if self.is_expired(ts) && rank >= self.min_versions {
            return Verdict::Expired;
        }
        // The time range filters before the version limit counts.
        if !self.params.time_range.contains(ts) {
            return Verdict::OutOfRange;
        }
        if self.column.returned >= self.query_limit {
            return Verdict::TooManyVersions;
        }
        self.column.returned += 1;
        Verdict::Include
    }
}

/// Resolve a stream of cells of one family in key order (several rows allowed) into the cells
/// a reader sees.
pub fn resolve_cells<'c, I>(
    family: &FamilyDescriptor,
    params: ReadParams<'_>,
    cells: I,
) -> Result<Vec<Cell>>
where
    I: IntoIterator<Item = (KeyRef<'c>, &'c [u8])>,
{
    let mut r = RowResolver::new(family, params);
    let mut row: Option<&[u8]> = None;
    let mut out = Vec::new();
    for (key, value) in cells {
        if row != Some(key.row) {
            r.reset();
            row = Some(key.row);
        }
        if r.push(&key).is_included() {
            let value = if key.cell_type() == Some(CellType::Put) {
                value
            } else {
                &[]
            };
            out.push(Cell::from_key(&key, value)?);
        }
    }
    Ok(out)
}
