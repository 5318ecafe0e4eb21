//! What a compaction keeps: HBase's purge rules over the read path's version resolution
//! (SPEC.md §20.2).
//!
//! A compaction feeds every cell of its inputs (one family, any number of rows) to a
//! [`Purger`] in key order (SPEC.md §3.2) and writes the cells it answers [`Decision::Keep`]
//! for. The purger does not restate the read rules: it runs a [`RowResolver`] — the machine
//! every Get and Scan uses — at the oldest read point any reader may still use, and turns the
//! resolver's [`Verdict`] into a decision. Its own rules only say which hidden cells may leave
//! the store *now* without changing what any reader sees, now or later.
//!
//! # Terms
//! - `S` = [`PurgeParams::smallest_snapshot`]: the oldest sequence number a reader may still
//!   read at (the oldest live snapshot, or the current read point when there is none). Every
//!   reader, present or future, reads at some `P >= S`.
//! - *Judged* cells: input cells with `seq <= S`. The resolver sees them as a Get at read point
//!   `S` would: every column, VERSIONS versions, all time, not raw. Cells with `seq > S` are
//!   fed too (so the resolver walks the row in order) but it reports them `Invisible`: some
//!   reader sees them and some does not, so they are always kept.
//! - *Purging deletes* ("major compaction"): [`PurgeParams::bottommost`] and every input cell
//!   has `seq <= S` ([`PurgeParams::largest_seq`]). Then no cell of these rows lives below
//!   the output, and every reader sees the whole input, so hiding a cell by deleting it and
//!   hiding it by a marker are the same thing to every reader.
//!
//! # Rules (cells with `seq <= S`; everything else is kept)
//! 1. `Include` → keep.
//! 2. `Duplicate`, `TooManyVersions`, `Expired` → drop, at every compaction. A duplicate is
//!    behind a newer write at its timestamp that every reader at `P >= S` sees. A version's
//!    rank only grows as `P` grows in NEW_VERSION_BEHAVIOR (more puts are visible; masking does
//!    not change ranks there), and the TTL cutoff only moves forward, so "beyond VERSIONS" and
//!    "expired" at `S` stay true at every later `P` and clock. The top VERSIONS (resp.
//!    MIN_VERSIONS) versions above a dropped one are kept (an expired version drags every
//!    older one with it), so the ranks of cells the purger did not judge — newer than `S`, or
//!    in a lower level — stay on the same side of both limits. In classic mode a newer marker
//!    can unmask an older version by hiding the ones above it; dropping that version anyway is
//!    HBase's documented classic behaviour (MISSION.md rule 5, SPEC.md §20.2 example 2).
//! 3. A masked put:
//!    - KEEP_DELETED_CELLS FALSE, classic mode → drop, at every compaction. Masked versions do
//!      not count toward VERSIONS in classic mode, so no rank moves; the marker hiding it is
//!      still there for every reader (markers only leave under rule 4, which takes the put
//!      along, or rule 5, when the put is expired anyway).
//!    - KEEP_DELETED_CELLS FALSE, NEW_VERSION_BEHAVIOR → keep it, even when purging deletes,
//!      unless it is beyond VERSIONS or expired by its rank (as rule 2): masked versions count
//!      toward VERSIONS there, so dropping one within VERSIONS would lift an older version
//!      (in a lower level, written after `S`, or written after the purge) into view.
//!    - KEEP_DELETED_CELLS TRUE or TTL → keep (a time-ranged read ending at or before the
//!      marker still sees it), unless it is beyond VERSIONS or expired when *every* put counts
//!      (HBase: "never more than VERSIONS deleted cells", deleted cells still obey TTL and
//!      MIN_VERSIONS). That count is the resolver's rank in NEW_VERSION_BEHAVIOR; in classic
//!      mode it counts the masked versions the resolver skips.
//! 4. A marker of a classic family is dropped when purging deletes, KEEP_DELETED_CELLS is
//!    FALSE, and its timestamp is at or before `now - purge_delay` (HBase's `hbase.hstore.time.to.purge.deletes`; a
//!    marker with a future timestamp therefore stays until it is in the past, even with no
//!    delay). Everything it masked is judged masked at `S` and goes with it (rule 3), so no
//!    cell reappears. Otherwise markers are kept: a lower level may hold what they mask, and
//!    in classic mode they also mask puts written after them.
//! 5. A marker older than the TTL is dropped at every compaction when MIN_VERSIONS is 0: it can
//!    only mask cells at or below its own timestamp, which are expired for every reader, with or
//!    without it, and with KEEP_DELETED_CELLS too. With MIN_VERSIONS > 0 an expired version may
//!    still be readable, so the marker follows rule 4 (KEEP_DELETED_CELLS FALSE) or stays.
//! 6. A put whose per-cell TTL has run out is dropped (it is no version). One whose per-cell
//!    TTL still runs is kept and judged as if absent: it outranks and shadows other cells only
//!    until it expires, so nothing it hides now may be gone then (classic KEEP_DELETED_CELLS
//!    FALSE still drops it when masked, as rule 3).
//! 7. A marker of a classic family with KEEP_DELETED_CELLS FALSE in a row a row-range delete
//!    covers (SPEC.md §13 rule 8), at or below that delete's timestamp, is dropped at every
//!    compaction: it masks only cells at or below its own timestamp, and the delete (which
//!    every reader at `P >= S` sees) masks all of them in classic mode, whatever their seq.
//!    The delete leaves the manifest only under rules 4 or 5 at a compaction of every file
//!    of the family ([`range_delete_purgeable`]), where the same rule would drop the marker
//!    too (its timestamp is at or below the delete's), so no cell reappears for it. This lets
//!    the picker drop a file the delete covers whole without reading it (§20.1).
//!
//! # Choices that differ from a plain reading of HBase
//! - Deletes are purged only when no snapshot is older than an input cell. HBase drops markers
//!   at or below its smallest read point even then, so a put written after the snapshot and
//!   masked (classic mode) by the dropped marker reappears for newer readers; here the marker
//!   stays until a major compaction runs with no such snapshot, and then takes the put along.
//!   In NEW_VERSION_BEHAVIOR the same condition keeps the ranks of the newer cells intact.
//! - KEEP_DELETED_CELLS TTL behaves as TRUE in compaction. Reads see past markers under both
//!   (SPEC.md §13 rule 6), so a deleted version that MIN_VERSIONS keeps readable past the TTL
//!   must keep its marker; with MIN_VERSIONS 0 both settings drop markers and deleted cells
//!   once they are past the TTL (rules 3 and 5), which is what TTL promises.
//!
//! # NEW_VERSION_BEHAVIOR keeps its deleted versions
//! The read path counts a deleted version toward VERSIONS for *every* older version, whenever
//! that version was written. Purging a deleted version would lift a put written *later* (or
//! sitting in a newer level, not among the inputs) with an older timestamp into view, so
//! NEW_VERSION_BEHAVIOR never drops a masked put within VERSIONS, nor a marker (which is what
//! hides it); both still go once beyond VERSIONS or expired. Results then never depend on
//! compaction timing; the cost is the space of up to VERSIONS deleted versions per column
//! (SPEC.md §20.2, example 5).

use std::time::Duration;

use cellar_format::{CellType, KeyRef};

use crate::read::range_index::RangeDeletes;
use crate::read::resolve::{ReadParams, RowResolver, Verdict};
use crate::schema::{FamilyDescriptor, KeepDeletedCells};
use crate::types::{RangeDelete, SeqNo, Timestamp};

/// What a compaction knows when it starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PurgeParams {
    /// The oldest read point any reader may still use: the oldest live snapshot, or the
    /// current read point when there is none.
    pub smallest_snapshot: SeqNo,
    /// The largest sequence number of any input cell (the inputs' `FileMeta::max_seq`).
    /// Deletes are purged only when it is at or below `smallest_snapshot`.
    pub largest_seq: SeqNo,
    /// The clock for TTL and `purge_delay`, in ms since the epoch.
    pub now_ms: Timestamp,
    /// No file of the family below the output (nor beside it, outside the inputs) overlaps the
    /// inputs' key range (`CompactionTask::bottommost`).
    pub bottommost: bool,
    /// Markers younger than this survive even a bottommost compaction
    /// (`CompactionOptions::purge_delay`).
    pub purge_delay: Duration,
}

impl PurgeParams {
    /// A compaction that is not bottommost, with no purge delay.
    pub fn new(smallest_snapshot: SeqNo, largest_seq: SeqNo, now_ms: Timestamp) -> Self {
        PurgeParams {
            smallest_snapshot,
            largest_seq,
            now_ms,
            bottommost: false,
            purge_delay: Duration::ZERO,
        }
    }

    /// Bottommost or not.
    pub fn bottommost(mut self, on: bool) -> Self {
        self.bottommost = on;
        self
    }

    /// The purge delay for markers.
    pub fn purge_delay(mut self, d: Duration) -> Self {
        self.purge_delay = d;
        self
    }

    /// True when this compaction purges deletes (see the module docs).
    pub fn purges_deletes(&self) -> bool {
        self.bottommost && self.largest_seq <= self.smallest_snapshot
    }
}

/// Why a cell was dropped (for stats).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DropReason {
    /// Behind a newer write at the same timestamp.
    Duplicate,
    /// Beyond the family's VERSIONS.
    TooManyVersions,
    /// Past the TTL (a put beyond MIN_VERSIONS, or a marker).
    Expired,
    /// A put hidden by a delete marker.
    Masked,
    /// A delete marker purged by a bottommost compaction.
    Marker,
}

/// The fate of one input cell.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Decision {
    /// Write it to the output.
    Keep,
    /// Leave it out.
    Drop(DropReason),
}

impl Decision {
    /// True for [`Decision::Keep`].
    pub fn is_keep(self) -> bool {
        self == Decision::Keep
    }
}

/// Cells dropped so far, by reason.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DropCounts {
    /// [`DropReason::Duplicate`].
    pub duplicate: u64,
    /// [`DropReason::TooManyVersions`].
    pub too_many_versions: u64,
    /// [`DropReason::Expired`].
    pub expired: u64,
    /// [`DropReason::Masked`].
    pub masked: u64,
    /// [`DropReason::Marker`].
    pub marker: u64,
}

impl DropCounts {
    /// Every dropped cell.
    pub fn total(&self) -> u64 {
        self.duplicate + self.too_many_versions + self.expired + self.masked + self.marker
    }

    fn add(&mut self, reason: DropReason) {
        let n = match reason {
            DropReason::Duplicate => &mut self.duplicate,
            DropReason::TooManyVersions => &mut self.too_many_versions,
            DropReason::Expired => &mut self.expired,
            DropReason::Masked => &mut self.masked,
            DropReason::Marker => &mut self.marker,
        };
        *n += 1;
    }
}

/// Decides, cell by cell, what a compaction of one family keeps.
#[derive(Debug, Clone)]
pub struct Purger<'a> {
    family: &'a FamilyDescriptor,
    params: PurgeParams,
    /// The read path's resolver at `smallest_snapshot`.
    resolver: RowResolver<'a>,
    /// False until the first cell.
    started: bool,
    /// Row, family and qualifier of the previous cell, to spot row and column changes.
    row: Vec<u8>,
    family_name: Vec<u8>,
    qualifier: Vec<u8>,
    /// Puts of the current column judged so far, deleted or not, duplicates excluded: the
    /// count KEEP_DELETED_CELLS trims deleted versions by (rule 3).
    column_puts: u32,
    dropped: DropCounts,
}

impl<'a> Purger<'a> {
    /// A purger for one compaction of `family`.
    pub fn new(family: &'a FamilyDescriptor, params: PurgeParams) -> Self {
        // A Get at the oldest read point: every column, VERSIONS versions, all time.
        let read = ReadParams::new(params.smallest_snapshot, params.now_ms)
            .max_versions(family.max_versions);
        Purger {
            family,
            params,
            resolver: RowResolver::new(family, read),
            started: false,
            row: Vec::new(),
            family_name: Vec::new(),
            qualifier: Vec::new(),
            column_puts: 0,
            dropped: DropCounts::default(),
        }
    }

    /// Judge cells under the family's row-range deletes too (SPEC.md §13 rule 8): to a row
    /// they cover, each is a DeleteFamily marker that is not among the cells, so rules 3 and 6
    /// drop what it masks and no rule drops it (the manifest holds it; §20.2 says when it
    /// goes).
    pub fn with_range_deletes(mut self, deletes: &'a RangeDeletes) -> Self {
        self.resolver = self.resolver.with_range_deletes(deletes);
        self
    }

    /// Decide the next cell (key order; a new row or family starts over by itself).
    pub fn push(&mut self, key: &KeyRef<'_>) -> Decision {
        self.push_with_tags(key, &[])
    }

    /// [`Purger::push`] for a cell with tags: a cell past its per-cell TTL (SPEC.md §13 rule 7) is
    /// dropped at every compaction; it counts as no version, so no rank moves. One whose cell
    /// TTL still runs is judged by rule 6 (`Purger::live_cell_ttl`).
    pub fn push_with_tags(&mut self, key: &KeyRef<'_>, tags: &[u8]) -> Decision {
        self.track_position(key);
        if key.cell_type() == Some(CellType::Put) {
            if let Some(ttl) = crate::tags::cell_ttl(tags) {
                if key.timestamp.saturating_add(ttl) >= self.params.now_ms {
                    return self.live_cell_ttl(key);
                }
            }
        }
        let verdict = self.resolver.push_with_tags(key, tags);
        let cell_ttl_expired = verdict == Verdict::Expired
            && crate::tags::cell_ttl(tags)
                .is_some_and(|ttl| key.timestamp.saturating_add(ttl) < self.params.now_ms);
        let decision = if cell_ttl_expired {
            Decision::Drop(DropReason::Expired)
        } else {
            self.decide(key, verdict)
        };
        if let Decision::Drop(reason) = decision {
            self.dropped.add(reason);
        }
        decision
    }

    /// Rule 6: a put whose per-cell TTL has not run out is kept and judged as if it were not
    /// there. It outranks and shadows other cells only until it expires (SPEC.md §13 rule 7),
    /// so nothing may be dropped on its account: the older write at its timestamp, the
    /// versions it pushes beyond VERSIONS and the expired version it pushes out of
    /// MIN_VERSIONS must still be there when it stops counting. Classic mode drops it when a
    /// marker masks it, as any masked put (rule 3), so a marker rule 4 drops takes it along.
    fn live_cell_ttl(&mut self, key: &KeyRef<'_>) -> Decision {
        let verdict = self.resolver.push_uncounted(key);
        let decision = if verdict == Verdict::Invisible {
            Decision::Keep
        } else if self.family.min_versions == 0 && self.resolver.is_expired(key.timestamp) {
            // Past the family TTL with no MIN_VERSIONS: invisible to every reader whatever
            // its rank, as the resolver would judge it.
            Decision::Drop(DropReason::Expired)
        } else if verdict == Verdict::Masked
            && self.family.keep_deleted_cells == KeepDeletedCells::False
            && !self.family.new_version_behavior
        {
            Decision::Drop(DropReason::Masked)
        } else {
            Decision::Keep
        };
        if let Decision::Drop(reason) = decision {
            self.dropped.add(reason);
        }
        decision
    }

    /// Cells dropped so far, by reason.
    pub fn dropped(&self) -> &DropCounts {
        &self.dropped
    }

    fn track_position(&mut self, key: &KeyRef<'_>) {
        let same_row = self.started
            && self.row.as_slice() == key.row
            && self.family_name.as_slice() == key.family;
        if !same_row {
            self.resolver.reset();
            self.row.clear();
            self.row.extend_from_slice(key.row);
            self.family_name.clear();
            self.family_name.extend_from_slice(key.family);
        }
        if !same_row || self.qualifier.as_slice() != key.qualifier {
            self.qualifier.clear();
            self.qualifier.extend_from_slice(key.qualifier);
            self.column_puts = 0;
        }
        self.started = true;
    }

    fn decide(&mut self, key: &KeyRef<'_>, verdict: Verdict) -> Decision {
        match verdict {
            Verdict::Include => {
                self.column_puts = self.column_puts.saturating_add(1);
                Decision::Keep
            }
            Verdict::Duplicate => Decision::Drop(DropReason::Duplicate),
            Verdict::TooManyVersions => {
                self.column_puts = self.column_puts.saturating_add(1);
                Decision::Drop(DropReason::TooManyVersions)
            }
            Verdict::Expired => {
                self.column_puts = self.column_puts.saturating_add(1);
                Decision::Drop(DropReason::Expired)
            }
            Verdict::Masked => {
                let above = self.column_puts;
                self.column_puts = self.column_puts.saturating_add(1);
                self.masked(key.timestamp, above)
            }
            Verdict::Marker => self.marker(key.timestamp),
            // Written after the oldest read point (or not a stored type): some reader may see
            // it. NotSelected and OutOfRange cannot happen for an all-columns, all-time read;
            // keeping is the safe answer if they ever do.
            Verdict::Invisible | Verdict::NotSelected | Verdict::OutOfRange => Decision::Keep,
        }
    }

    /// Rule 3: a put masked at the oldest read point, with `above` puts of its column judged
    /// before it.
    fn masked(&self, ts: Timestamp, above: u32) -> Decision {
        let keep_deleted = self.family.keep_deleted_cells != KeepDeletedCells::False;
        // NEW_VERSION_BEHAVIOR keeps its deleted versions within VERSIONS, even at the bottom:
        // they count toward VERSIONS for every older version, including ones written later,
        // so removing one would lift a later write into view (SPEC.md §20.2, example 5).
        if !keep_deleted && !self.family.new_version_behavior {
            return Decision::Drop(DropReason::Masked);
        }
        // Kept deleted versions (and NVB's, which count toward VERSIONS) still obey VERSIONS,
        // TTL and MIN_VERSIONS, counting every put.
        if above >= self.family.max_versions {
            return Decision::Drop(DropReason::TooManyVersions);
        }
        if above >= self.family.min_versions && self.resolver.is_expired(ts) {
            return Decision::Drop(DropReason::Expired);
        }
        Decision::Keep
    }

    /// Rules 4 and 5: a marker visible at the oldest read point.
    fn marker(&self, ts: Timestamp) -> Decision {
        if self.family.min_versions == 0 && self.resolver.is_expired(ts) {
            return Decision::Drop(DropReason::Expired);
        }
        // NEW_VERSION_BEHAVIOR keeps its markers: the deleted versions they hide stay (see
        // `masked`), and a marker is what hides them.
        if self.family.keep_deleted_cells == KeepDeletedCells::False
            && !self.family.new_version_behavior
            && self.params.purges_deletes()
            && self.old_enough(ts)
        {
            return Decision::Drop(DropReason::Marker);
        }
        // Rule 7: a row-range delete at or above its timestamp hides all it could mask.
        if self.family.keep_deleted_cells == KeepDeletedCells::False
            && !self.family.new_version_behavior
            && self.resolver.range_delete_covers(ts)
        {
            return Decision::Drop(DropReason::Marker);
        }
        Decision::Keep
    }

    /// The marker's timestamp is at or before `now - purge_delay`.
    fn old_enough(&self, ts: Timestamp) -> bool {
        old_enough(&self.params, ts)
    }
}

/// A marker at `ts` is at or before `now - purge_delay`.
fn old_enough(params: &PurgeParams, ts: Timestamp) -> bool {
    let delay = u64::try_from(params.purge_delay.as_millis()).unwrap_or(u64::MAX);
    params
        .now_ms
        .checked_sub(delay)
        .is_some_and(|cutoff| ts <= cutoff)
}

/// Rules 4 and 5 for a row-range delete: whether a compaction with `params` whose inputs are
/// *every* file of the family, holding every write below the delete's seq, may remove the
/// delete from the manifest. The compaction dropped every put it masks (rule 3), as it would
/// under a stored DeleteFamily marker that rule 4 drops; KEEP_DELETED_CELLS and
/// NEW_VERSION_BEHAVIOR keep masked puts, so there the delete stays — unless it is past the
/// TTL with MIN_VERSIONS 0 (rule 5): everything it masks is then expired for every reader,
/// with or without it (SPEC.md §20.2).
pub fn range_delete_purgeable(
    family: &FamilyDescriptor,
    params: &PurgeParams,
    d: &RangeDelete,
) -> bool {
    let ttl_cutoff = family.ttl.map(|t| {
        let ms = u64::try_from(t.as_millis()).unwrap_or(u64::MAX);
        params.now_ms.saturating_sub(ms)
    });
    let expired = family.min_versions == 0 && ttl_cutoff.is_some_and(|cut| d.ts < cut);
    let marker_rule = family.keep_deleted_cells == KeepDeletedCells::False
        && !family.new_version_behavior
        && old_enough(params, d.ts);
    (marker_rule || expired) && params.purges_deletes() && d.seq <= params.smallest_snapshot
}

#[cfg(test)]
mod tests {
    use cellar_format::{CellKey, CellType};

    use super::*;

    use CellType::{Delete, DeleteColumn, DeleteFamily, DeleteFamilyVersion, Put};

    const NOW: u64 = 1_000_000;

    fn c(row: &str, q: &str, ts: u64, ty: CellType, seq: u64) -> CellKey {
        CellKey::new(row, "cf", q, ts, ty, seq)
    }

    /// Purge `cells` (any order; sorted here as a merge would) and return the kept ones as
    /// `row/q@ts:Type#seq`.
    fn kept(f: &FamilyDescriptor, p: PurgeParams, mut cells: Vec<CellKey>) -> Vec<String> {
        cells.sort();
        let mut purger = Purger::new(f, p);
        cells
            .iter()
            .filter(|k| purger.push(&k.as_ref()).is_keep())
            .map(|k| {
                let k = k.as_ref();
                let ty = k.cell_type().map_or("?", |t| t.name());
                format!(
                    "{}/{}@{}:{}#{}",
                    String::from_utf8_lossy(k.row),
                    String::from_utf8_lossy(k.qualifier),
                    k.timestamp,
                    ty,
                    k.seq
                )
            })
            .collect()
    }

    /// A compaction with no snapshot (everything at or below the read point 100).
    fn minor() -> PurgeParams {
        PurgeParams::new(100, 100, NOW)
    }

    fn major() -> PurgeParams {
        minor().bottommost(true)
    }

    fn classic() -> FamilyDescriptor {
        FamilyDescriptor::new("cf").max_versions(2)
    }

    fn nvb() -> FamilyDescriptor {
        classic().new_version_behavior(true)
    }

    #[test]
    fn duplicates_and_versions_beyond_versions_go_at_every_compaction() {
        let cells = vec![
            c("r", "a", 3, Put, 4),
            c("r", "a", 3, Put, 1),
            c("r", "a", 2, Put, 2),
            c("r", "a", 1, Put, 3),
        ];
        for f in [classic(), nvb()] {
            let mut p = Purger::new(&f, minor());
            let mut sorted = cells.clone();
            sorted.sort();
            let got: Vec<Decision> = sorted.iter().map(|k| p.push(&k.as_ref())).collect();
            assert_eq!(
                got,
                [
                    Decision::Keep,
                    Decision::Drop(DropReason::Duplicate),
                    Decision::Keep,
                    Decision::Drop(DropReason::TooManyVersions),
                ]
            );
            assert_eq!(p.dropped().duplicate, 1);
            assert_eq!(p.dropped().too_many_versions, 1);
            assert_eq!(p.dropped().total(), 2);
        }
    }

    #[test]
    fn classic_masked_puts_go_at_every_compaction_markers_only_at_the_bottom() {
        let cells = vec![
            c("r", "a", 5, Delete, 3),
            c("r", "a", 5, Put, 1),
            c("r", "a", 4, Put, 2),
        ];
        assert_eq!(
            kept(&classic(), minor(), cells.clone()),
            ["r/a@5:Delete#3", "r/a@4:Put#2"]
        );
        assert_eq!(kept(&classic(), major(), cells), ["r/a@4:Put#2"]);
    }

    #[test]
    fn nvb_masked_puts_within_versions_stay_even_at_the_bottom() {
        // The masked version counts toward VERSIONS for every older version, including ones
        // written later: dropping it (and its marker) would lift such a version into view.
        let cells = vec![
            c("r", "a", 5, DeleteColumn, 3),
            c("r", "a", 5, Put, 1),
            c("r", "a", 4, Put, 2),
        ];
        assert_eq!(
            kept(&nvb(), minor(), cells.clone()),
            ["r/a@5:DeleteColumn#3", "r/a@5:Put#1", "r/a@4:Put#2"]
        );
        assert_eq!(
            kept(&nvb(), major(), cells),
            ["r/a@5:DeleteColumn#3", "r/a@5:Put#1", "r/a@4:Put#2"]
        );
    }

    #[test]
    fn nvb_masked_puts_beyond_versions_go_at_every_compaction() {
        let cells = vec![
            c("r", "a", 9, Delete, 9),
            c("r", "a", 9, Put, 1),
            c("r", "a", 8, Put, 2),
            c("r", "a", 7, Put, 3),
            c("r", "a", 7, Delete, 8),
        ];
        let f = nvb();
        let mut p = Purger::new(&f, minor());
        let mut sorted = cells;
        sorted.sort();
        let got: Vec<Decision> = sorted.iter().map(|k| p.push(&k.as_ref())).collect();
        assert_eq!(
            got,
            [
                Decision::Keep,                              // Delete@9
                Decision::Keep,                              // Put@9, masked, rank 0
                Decision::Keep,                              // Put@8, rank 1
                Decision::Keep,                              // Delete@7
                Decision::Drop(DropReason::TooManyVersions), // Put@7, masked, rank 2
            ]
        );
    }

    #[test]
    fn a_marker_above_the_snapshot_and_the_puts_below_it_stay() {
        // Snapshot at 5: it sees the put; the delete (seq 10) came later.
        let cells = vec![c("r", "a", 5, Delete, 10), c("r", "a", 5, Put, 3)];
        for f in [classic(), nvb()] {
            let p = PurgeParams::new(5, 10, NOW).bottommost(true);
            assert_eq!(
                kept(&f, p, cells.clone()),
                ["r/a@5:Delete#10", "r/a@5:Put#3"]
            );
        }
    }

    #[test]
    fn a_snapshot_older_than_an_input_cell_defers_purging_deletes() {
        // The marker (seq 2) is below the snapshot but the put with seq 7 is not: classic
        // mode masks it whatever its seq, so dropping the marker would unmask it.
        let cells = vec![
            c("r", "a", 5, DeleteColumn, 2),
            c("r", "a", 4, Put, 1),
            c("r", "a", 3, Put, 7),
        ];
        let p = PurgeParams::new(5, 7, NOW).bottommost(true);
        assert!(!p.purges_deletes());
        assert_eq!(
            kept(&classic(), p, cells.clone()),
            ["r/a@5:DeleteColumn#2", "r/a@3:Put#7"]
        );
        // Once the snapshot is gone, the marker and everything it masks go.
        assert_eq!(
            kept(
                &classic(),
                PurgeParams::new(7, 7, NOW).bottommost(true),
                cells
            ),
            Vec::<String>::new()
        );
    }

    #[test]
    fn family_markers_mask_every_column() {
        let cells = vec![
            c("r", "", 10, DeleteFamily, 5),
            c("r", "", 3, Put, 1),
            c("r", "a", 3, Put, 2),
            c("r", "b", 4, Put, 3),
            c("r", "c", 12, Put, 4),
        ];
        assert_eq!(
            kept(&classic(), minor(), cells.clone()),
            ["r/@10:DeleteFamily#5", "r/c@12:Put#4"]
        );
        assert_eq!(
            kept(&nvb(), minor(), cells.clone()),
            [
                "r/@10:DeleteFamily#5",
                "r/@3:Put#1",
                "r/a@3:Put#2",
                "r/b@4:Put#3",
                "r/c@12:Put#4"
            ]
        );
        assert_eq!(kept(&classic(), major(), cells.clone()), ["r/c@12:Put#4"]);
        // NEW_VERSION_BEHAVIOR keeps its markers and deleted versions within VERSIONS.
        assert_eq!(
            kept(&nvb(), major(), cells.clone()),
            kept(&nvb(), minor(), cells)
        );
    }

    #[test]
    fn delete_family_version_masks_one_timestamp_of_every_column() {
        let cells = vec![
            c("r", "", 5, DeleteFamilyVersion, 9),
            c("r", "a", 5, Put, 1),
            c("r", "a", 4, Put, 2),
            c("r", "b", 5, Put, 3),
            c("r", "b", 6, Put, 4),
        ];
        assert_eq!(
            kept(&classic(), major(), cells.clone()),
            ["r/a@4:Put#2", "r/b@6:Put#4"]
        );
        assert_eq!(
            kept(&nvb(), major(), cells),
            [
                "r/@5:DeleteFamilyVersion#9",
                "r/a@5:Put#1",
                "r/a@4:Put#2",
                "r/b@6:Put#4",
                "r/b@5:Put#3"
            ]
        );
    }

    #[test]
    fn nvb_a_put_after_a_marker_at_the_same_timestamp_is_not_masked() {
        let cells = vec![
            c("r", "a", 5, DeleteColumn, 2),
            c("r", "a", 5, Put, 3),
            c("r", "a", 4, Put, 1),
        ];
        // The put written after the marker is visible; the older one is a deleted version
        // within VERSIONS, kept with its marker.
        assert_eq!(
            kept(&nvb(), major(), cells.clone()),
            ["r/a@5:DeleteColumn#2", "r/a@5:Put#3", "r/a@4:Put#1"]
        );
        // Classic mode: the marker masks both, whenever they were written.
        assert_eq!(kept(&classic(), major(), cells), Vec::<String>::new());
    }

    #[test]
    fn classic_put_after_delete_with_an_older_timestamp_goes_with_the_marker() {
        // Written after the delete, but below its timestamp: hidden in classic mode. A major
        // compaction drops both, so the put never reappears.
        let cells = vec![c("r", "a", 10, DeleteColumn, 1), c("r", "a", 5, Put, 2)];
        assert_eq!(
            kept(&classic(), minor(), cells.clone()),
            ["r/a@10:DeleteColumn#1"]
        );
        assert_eq!(
            kept(&classic(), major(), cells.clone()),
            Vec::<String>::new()
        );
        // NEW_VERSION_BEHAVIOR: the put was written after the marker and is visible; the
        // marker stays (NEW_VERSION_BEHAVIOR never purges markers, §20.2).
        assert_eq!(
            kept(&nvb(), major(), cells),
            ["r/a@10:DeleteColumn#1", "r/a@5:Put#2"]
        );
    }

    #[test]
    fn min_versions_keep_expired_versions() {
        let f = FamilyDescriptor::new("cf")
            .max_versions(3)
            .min_versions(1)
            .ttl(Duration::from_millis(100));
        let old = NOW - 1000;
        let cells = vec![c("r", "a", old, Put, 1), c("r", "a", old - 1, Put, 2)];
        assert_eq!(kept(&f, minor(), cells), [format!("r/a@{old}:Put#1")]);
        let cells = vec![c("r", "a", NOW - 10, Put, 3), c("r", "a", old, Put, 1)];
        assert_eq!(
            kept(&f, minor(), cells),
            [format!("r/a@{}:Put#3", NOW - 10)]
        );
    }

    #[test]
    fn expired_markers_go_at_every_compaction_without_min_versions() {
        let ttl = Duration::from_millis(100);
        let old = NOW - 1000;
        let fresh = NOW - 10;
        let cells = vec![
            c("r", "a", fresh, DeleteColumn, 3),
            c("r", "b", old, DeleteColumn, 4),
            c("r", "b", old, Put, 1),
        ];
        let f = classic().ttl(ttl);
        let mut p = Purger::new(&f, minor());
        let mut sorted = cells.clone();
        sorted.sort();
        let got: Vec<Decision> = sorted.iter().map(|k| p.push(&k.as_ref())).collect();
        assert_eq!(
            got,
            [
                Decision::Keep,
                Decision::Drop(DropReason::Expired),
                Decision::Drop(DropReason::Masked),
            ]
        );
        // With MIN_VERSIONS the expired put could still be readable, so its marker stays.
        let f = classic().ttl(ttl).min_versions(1);
        assert_eq!(
            kept(&f, minor(), cells.clone()),
            [
                format!("r/a@{fresh}:DeleteColumn#3"),
                format!("r/b@{old}:DeleteColumn#4")
            ]
        );
        assert_eq!(kept(&f, major(), cells), Vec::<String>::new());
    }

    #[test]
    fn keep_deleted_cells_true_keeps_markers_and_deleted_versions_at_the_bottom() {
        let cells = vec![
            c("r", "a", 9, DeleteColumn, 9),
            c("r", "a", 8, Put, 1),
            c("r", "a", 7, Put, 2),
            c("r", "a", 6, Put, 3),
        ];
        for f in [classic(), nvb()] {
            let f = f.keep_deleted_cells(KeepDeletedCells::True);
            // VERSIONS 2 trims deleted versions too.
            assert_eq!(
                kept(&f, major(), cells.clone()),
                ["r/a@9:DeleteColumn#9", "r/a@8:Put#1", "r/a@7:Put#2"]
            );
        }
    }

    #[test]
    fn keep_deleted_cells_ttl_keeps_them_until_the_ttl() {
        let old = NOW - 1000;
        let fresh = NOW - 10;
        let cells = vec![
            c("r", "a", fresh, Delete, 9),
            c("r", "a", fresh, Put, 1),
            c("r", "b", old, DeleteColumn, 8),
            c("r", "b", old, Put, 2),
        ];
        let f = classic()
            .keep_deleted_cells(KeepDeletedCells::Ttl)
            .ttl(Duration::from_millis(100));
        assert_eq!(
            kept(&f, major(), cells),
            [
                format!("r/a@{fresh}:Delete#9"),
                format!("r/a@{fresh}:Put#1")
            ]
        );
    }

    #[test]
    fn keep_deleted_cells_ttl_with_min_versions_keeps_deleted_versions_past_the_ttl() {
        // MIN_VERSIONS keeps the newest version readable past the TTL, and KEEP_DELETED_CELLS
        // lets a read ending before the marker see it: the marker and the put both stay.
        use crate::read::query::TimeRange;
        use crate::read::resolve::resolve_cells;
        let cells = vec![c("r", "a", 2, DeleteColumn, 2), c("r", "a", 1, Put, 1)];
        for nvb in [false, true] {
            let f = classic()
                .new_version_behavior(nvb)
                .keep_deleted_cells(KeepDeletedCells::Ttl)
                .min_versions(1)
                .ttl(Duration::from_millis(100));
            let read = ReadParams::new(100, NOW).time_range(TimeRange::new(0, 2));
            let mut sorted = cells.clone();
            sorted.sort();
            let all = resolve_cells(&f, read, sorted.iter().map(|k| (k.as_ref(), &b""[..])));
            assert_eq!(all.map(|r| r.len()).ok(), Some(1));
            assert_eq!(
                kept(&f, major(), cells.clone()),
                ["r/a@2:DeleteColumn#2", "r/a@1:Put#1"]
            );
        }
    }

    #[test]
    fn young_markers_survive_the_purge_delay() {
        let cells = vec![
            c("r", "a", NOW - 10, DeleteColumn, 3),
            c("r", "a", NOW - 20, Put, 1),
            c("r", "b", NOW - 100, DeleteColumn, 4),
        ];
        let p = major().purge_delay(Duration::from_millis(50));
        assert_eq!(
            kept(&classic(), p, cells.clone()),
            [format!("r/a@{}:DeleteColumn#3", NOW - 10)]
        );
    }

    #[test]
    fn markers_from_the_future_stay_until_they_are_past() {
        let cells = vec![c("r", "a", NOW + 5, Delete, 1)];
        assert_eq!(
            kept(&classic(), major(), cells),
            [format!("r/a@{}:Delete#1", NOW + 5)]
        );
    }

    #[test]
    fn a_new_row_starts_over() {
        let cells = vec![
            c("r1", "", 10, DeleteFamily, 5),
            c("r1", "a", 3, Put, 1),
            c("r2", "a", 3, Put, 2),
            c("r2", "a", 2, Put, 3),
            c("r2", "a", 1, Put, 4),
        ];
        assert_eq!(
            kept(&classic(), major(), cells),
            ["r2/a@3:Put#2", "r2/a@2:Put#3"]
        );
    }

    /// `kept` with the family's row-range deletes applied.
    fn kept_under(
        f: &FamilyDescriptor,
        p: PurgeParams,
        deletes: &RangeDeletes,
        mut cells: Vec<CellKey>,
    ) -> Vec<String> {
        cells.sort();
        let mut purger = Purger::new(f, p).with_range_deletes(deletes);
        cells
            .iter()
            .filter(|k| purger.push(&k.as_ref()).is_keep())
            .map(|k| {
                let k = k.as_ref();
                format!(
                    "{}/{}@{}#{}",
                    String::from_utf8_lossy(k.row),
                    String::from_utf8_lossy(k.qualifier),
                    k.timestamp,
                    k.seq
                )
            })
            .collect()
    }

    #[test]
    fn markers_under_a_range_delete_at_or_above_them_go_at_every_compaction() {
        // Rows [b, d) deleted at ts 50, seq 20.
        let deletes = RangeDeletes::new(vec![RangeDelete {
            start: b"b".to_vec(),
            stop: b"d".to_vec(),
            ts: 50,
            seq: 20,
        }]);
        let cells = vec![
            c("a", "q", 40, DeleteColumn, 5), // not covered
            c("b", "q", 40, DeleteColumn, 5), // covered, below the delete's ts
            c("b", "q", 30, Put, 4),
            c("c", "", 60, DeleteFamily, 6), // covered, above the delete's ts
            c("c", "q", 50, Delete, 30),     // covered, written after the horizon
            c("c", "r", 50, DeleteFamilyVersion, 25), // covered, exactly at the delete's ts
            c("d", "q", 40, Delete, 7),      // past the stop row
        ];
        // Minor compaction, no snapshot: the horizon is 100 except where said.
        let p = PurgeParams::new(28, 28, NOW);
        assert_eq!(
            kept_under(&classic(), p, &deletes, cells.clone()),
            ["a/q@40#5", "c/@60#6", "c/q@50#30", "d/q@40#7"]
        );
        // A snapshot below the delete: it sees the markers, and the delete masks nothing yet.
        let before = PurgeParams::new(10, 28, NOW);
        assert_eq!(
            kept_under(&classic(), before, &deletes, cells.clone()).len(),
            cells.len() - 1 // b/q@30 is masked by b's DeleteColumn at every point
        );
        // Families that keep deleted cells, or count them, keep their markers.
        for f in [nvb(), classic().keep_deleted_cells(KeepDeletedCells::True)] {
            let got = kept_under(&f, p, &deletes, cells.clone());
            assert!(got.contains(&"b/q@40#5".to_string()), "{got:?}");
            assert!(got.contains(&"c/r@50#25".to_string()), "{got:?}");
        }
    }
}
