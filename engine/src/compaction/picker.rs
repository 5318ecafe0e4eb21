//! The compaction picker: a pure function from a [`Version`], the family policies, the time and
//! the files running compactions hold, to the next [`CompactionTask`]. No I/O, no clock, no hash
//! map iteration: the same arguments always give the same task, so `tests/compaction_sim.rs` can
//! replay months of flushes through it in milliseconds (STYLE.md practice 17). SPEC.md §20.1 is
//! the normative summary of the rules below; the models are RocksDB's leveled compaction and
//! HBase's periodic major compaction.
//!
//! # Levels and targets (dynamic level bytes)
//!
//! Each family has L0 (flush outputs, overlapping, newest first) and L1..L6, each one sorted run.
//! Key ranges are compared by **row** (the rows of a file's smallest and largest keys), never by
//! whole cell key: a row's cells must never straddle two files of a level, or a compaction could
//! move the newer half of a row below the older half.
//!
//! [`level_targets`]: the last level's target is the size of the largest level below L0 (in steady
//! state the last level itself), at least `max_bytes_for_level_base`; each level above has the
//! target of the one below divided by the multiplier. A level whose target comes out at or below
//! `base / multiplier` is unused (target 0): the **base level** is the highest level whose target is
//! above that, and L0 compacts straight into it. So a small database is L0 plus the last level,
//! and levels come into use from the bottom up as it grows; the levels above the last hold about
//! 1/(multiplier − 1) of the data (11% at 10), which bounds space amplification. If data sits in a
//! level above that base level (the data shrank, or the options changed) the base level is that
//! level instead, and the levels down to the computed base get a target just above
//! `base / multiplier`, so the data drains down rather than being stranded (RocksDB does the
//! same). From the computed base level down, no target is below `base` (RocksDB's
//! `CalculateBaseBytes` does the same): while the data is under `multiplier × base`, the base
//! level may hold up to `base`, so the last level is rewritten less often, at the price of up to
//! `base` of extra space. On the 10M-cell acceptance load this cut write amplification from 5.25
//! to 4.0. Without `dynamic_level_bytes` the base level is L1 with target `base`, times the
//! multiplier per level.
//!
//! # Scores ([`scores`])
//!
//! RocksDB's, with dynamic level bytes: L0 scores files / `level0_file_num_compaction_trigger`,
//! at least 1.01 once its bytes reach `max_bytes_for_level_base`, and at least its bytes over the
//! base level's (or the base level's target, if larger) once they exceed that target; L1..L5
//! score bytes / target below the target and bytes / (target + incoming) from there, where
//! incoming is all of L0 plus every higher level's excess over its target. A score above 1 is
//! multiplied by `SCORE_SCALE` (10), so a level over its target stays due while it ranks below the
//! levels whose data is about to land on it. Without dynamic level bytes: L0 the larger of the
//! file and byte ratios, L1..L5 bytes / target. The last level has no score: its target is its
//! own size. Files held by running compactions (`busy`) are not counted, so a level being drained
//! does not ask again.
//!
//! # Trigger order ([`pick`])
//!
//! 1. **Size**: every (family, level) with score ≥ 1, highest score first (ties: lower level,
//!    then lower family id); the first that yields a task wins.
//! 2. **TTL**: a file all of whose cells are past the family's TTL (`max_ts < now - ttl`), when
//!    MIN_VERSIONS is 0, is compacted *into itself* (`output_level` = its level, at any level): the
//!    purge rules drop every cell, so the file disappears for the price of reading it, with no
//!    merge against the next level. Oldest `max_ts` first. A file written after all its cells
//!    had expired (`created_ms > max_ts + ttl`) is skipped: the compaction that wrote it could have
//!    dropped them and did not, so rewriting it again would only loop.
//! 3. **Row-range deletes** (`FamilyPolicy::range_deletes`: classic families with
//!    KEEP_DELETED_CELLS FALSE, deletes at or below the purge horizon): a file all of whose rows
//!    lie inside one such delete, whose cells are all at or below the horizon and one at least
//!    at or below the delete's timestamp. If every cell is at or below it, the file is dropped
//!    unread (`drop_inputs`, any level): a compaction would keep none of its cells (puts by
//!    purge rule 3, markers by rule 7). Otherwise, at levels ≥ 1, it is compacted into itself,
//!    which drops every cell at or below the timestamp, so its output cannot fire again (an L0
//!    output would land above newer L0 files, so L0 files wait to move down). Drops first, then
//!    the largest file. RocksDB's `DeleteFilesInRange` does the drop by hand; here the delete
//!    itself brings it. Then a file at levels ≥ 1 that such deletes *cut* (cover part of its
//!    rows), when the bytes they cover (`FamilyPolicy::partly_covered`, estimated by the
//!    database from the file's index, counting only deletes above the file's `range_clean`)
//!    reach `range_delete_rewrite_ratio` of its size: compacted into itself, largest share
//!    first. Its outputs (as a flush's) record the horizon they were cleaned at
//!    (`range_clean`), so the same deletes never pick them again.
//! 4. **Tombstone density**: a file with `deletes / entries ≥ tombstone_density_trigger` and
//!    `entries ≥ tombstone_min_entries` is compacted down one level (L0: an ordinary L0
//!    compaction), or into itself at the last level, where a bottommost compaction purges the
//!    markers. Densest first. At the last level only when the family does not keep deleted cells
//!    and every marker is older than `purge_delay` (`max_ts + purge_delay ≤ now`), so the rewrite
//!    is guaranteed to remove them and the trigger cannot fire on its own output.
//! 5. **Periodic major** (HBase `hbase.hregion.majorcompaction`): when the family's oldest file
//!    was created longer ago than `periodic_major` ± jitter, every file of the family is compacted
//!    into the last level ([`pick_major`] with reason `PeriodicMajor`). The jitter is a fixed
//!    fraction in `[-jitter, +jitter)` derived from the family id (clamped to at most 0.99 so no
//!    period is zero), which spreads the families' majors apart deterministically. A period of
//!    zero disables it, as in HBase. Most overdue family first.
//!
//! # The compactions
//!
//! * **L0 → base**: the oldest L0 files, oldest first, plus every base-level file overlapping their
//!   row range. L0 files are taken oldest-first, and as a *suffix* of L0: a file may leave L0 only
//!   if every older L0 file overlapping it leaves too. Otherwise an older file would stay above
//!   newer data (the level order is the seq order the read path and the purge rules rely on), and
//!   a bottommost merge could drop a marker whose masked put is still in L0. Busy L0 files belong
//!   to a running compaction, so the suffix skips them, and the whole row range must stay clear
//!   of the range of the busy L0 files. Files are added while the L0 input stays within
//!   `max_compaction_bytes` (the first one always). The base-level bytes do not count: they are
//!   rewritten whatever the number of L0 files taken, and counting them once let a base level
//!   grown past the limit (a starved compaction backlog) take one L0 file per rewrite of itself. If the oldest file overlaps no base-level file
//!   and no other L0 file, it is moved there alone (trivial move): sequential keys. A file that
//!   overlaps other L0 files is merged with them even when the base level is clear below it, or
//!   uniform keys would trickle into the base level one file at a time, each then merged into the
//!   whole level below (RocksDB moves L0 files only when the chosen ones are disjoint, too).
//! * **Ln → Ln+1** (n ≥ 1): among the files of Ln not busy, the one whose overlapping bytes at
//!   Ln+1 are the smallest fraction of its own size (RocksDB's kMinOverlappingRatio: least
//!   rewriting per byte moved down), preferring candidates whose total input fits in
//!   `max_compaction_bytes`; ties go to the lowest key. A file that overlaps nothing at Ln+1 is
//!   moved (trivial move), which is what sequential keys get all the way down.
//!
//! In both, the inputs at the output level are *every* file there overlapping the row hull of the
//! inputs, so outputs spanning that hull can never overlap a file left in place; and at a level ≥ 1
//! the input is widened to neighbours sharing a boundary row.
//!
//! # Concurrency (`busy`)
//!
//! `busy` holds the files of running compactions. A task never uses a busy file, and never has a
//! busy file at its output level inside its row hull (it would have to be an input). That is
//! enough for several compactions to run at once with disjoint outputs: the footprint of an
//! Ln → Ln+1 task at Ln+1 is a connected union of its input files, and the only task whose
//! footprint has gaps is L0 → base, which is why a new L0 compaction must also keep clear of the
//! hull of the busy L0 files. Periodic and manual major compactions need the whole family idle.
//!
//! # Bottommost
//!
//! A task is bottommost when no file of the family outside its inputs, at its output level or
//! below, overlaps its row hull: nothing older can be uncovered by dropping a marker there.

use std::cmp::Ordering;
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use cellar_format::KeyRef;

use super::{CompactionOptions, CompactionReason, CompactionTask, FamilyPolicy};
use crate::manifest::version::{Version, NUM_LEVELS};
use crate::types::{FamilyId, FileMeta, FileNumber};

/// The last level, where major compactions write and data settles.
pub const LAST_LEVEL: usize = NUM_LEVELS - 1;

/// A due level's score is scaled by this, leaving room below it to lower a level's priority
/// (by the bytes coming down into it) while keeping it due (RocksDB's `kScoreScale`).
const SCORE_SCALE: f64 = 10.0;

/// Why writers are slowed or stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum StallCause {
    /// L0 holds too many files.
    Level0Files,
    /// Compaction owes too many bytes ([`pending_compaction_bytes`]).
    PendingCompactionBytes,
}

/// Back-pressure compaction asks of writers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WritePressure {
    /// Write freely.
    None,
    /// Write, but slowly.
    Slowdown(StallCause),
    /// Wait for compaction.
    Stop(StallCause),
}

/// The next compaction to run, if any is due. See the module docs for the rules and their order.
/// `families` gives TTL and the like; a family of the version without a policy is
/// [`FamilyPolicy::plain`]. `busy` holds the files of the compactions already running.
pub fn pick(
    version: &Version,
    families: &[FamilyPolicy],
    opts: &CompactionOptions,
    now_ms: u64,
    busy: &BTreeSet<FileNumber>,
) -> Option<CompactionTask> {
    let fams: Vec<Fam<'_>> = version
        .families()
        .filter_map(|id| Fam::new(version, id, opts, busy))
        .collect();

    // 1. Sizes, highest score first.
    let mut due: Vec<(f64, usize, &Fam<'_>)> = Vec::new();
    for fam in &fams {
        for (level, &s) in fam.scores.iter().enumerate() {
            if s >= 1.0 {
                due.push((s, level, fam));
            }
        }
    }
    due.sort_by(|a, b| {
        b.0.total_cmp(&a.0)
            .then(a.1.cmp(&b.1))
            .then(a.2.id.cmp(&b.2.id))
    });
    for (_, level, fam) in &due {
        let task = if *level == 0 {
            fam.l0_task(busy, CompactionReason::Level0FileCount)
        } else {
            fam.down_task(*level, None, busy, CompactionReason::LevelSize)
        };
        if task.is_some() {
            return task;
        }
    }

    // 2. TTL.
    if let Some(t) = pick_ttl(&fams, families, now_ms, busy) {
        return Some(t);
    }
    // 3. Row-range deletes.
    if let Some(t) = pick_range_deletes(&fams, families, busy) {
        return Some(t);
    }
    // 4. Tombstone density.
    if let Some(t) = pick_tombstones(&fams, families, now_ms, busy) {
        return Some(t);
    }
    // 5. Periodic major.
    pick_periodic(version, &fams, opts, now_ms, busy)
}

/// A compaction for a file whose seek budget ran out (LevelDB's seek compaction, see
/// `db/compact.rs`): L0 into the base level if it is in L0, else the file into the level
/// below. `None` if the file is gone, in the last level, or the inputs are busy.
pub fn pick_seek(
    version: &Version,
    family: FamilyId,
    file: FileNumber,
    opts: &CompactionOptions,
    busy: &BTreeSet<FileNumber>,
) -> Option<CompactionTask> {
    let fam = Fam::new(version, family, opts, busy)?;
    let (level, index) = fam
        .levels
        .iter()
        .enumerate()
        .find_map(|(l, files)| files.iter().position(|f| f.number == file).map(|i| (l, i)))?;
    if busy.contains(&file) {
        return None;
    }
    if level == 0 {
        fam.l0_task(busy, CompactionReason::Seek)
    } else {
        fam.down_task(level, Some(index), busy, CompactionReason::Seek)
    }
}

/// A major compaction of `family`: every file into the last level, bottommost, reason
/// [`CompactionReason::Manual`]. `None` if the family has no files or any of them is busy.
pub fn pick_major(
    version: &Version,
    family: FamilyId,
    opts: &CompactionOptions,
    busy: &BTreeSet<FileNumber>,
) -> Option<CompactionTask> {
    let levels = version.levels(family)?;
    let mut inputs = Vec::new();
    for (level, files) in levels.iter().enumerate() {
        if files.iter().any(|f| busy.contains(&f.number)) {
            return None;
        }
        if !files.is_empty() {
            inputs.push((level as u32, files.clone()));
        }
    }
    if inputs.is_empty() {
        return None;
    }
    Some(CompactionTask {
        family,
        inputs,
        output_level: LAST_LEVEL as u32,
        trivial_move: false,
        drop_inputs: false,
        bottommost: true,
        target_file_size: opts.target_file_size,
        reason: CompactionReason::Manual,
    })
}

/// Target size of each level of `family` (dynamic level bytes, see the module docs); 0 for L0
/// (scored by file count) and for unused levels.
pub fn level_targets(
    version: &Version,
    family: FamilyId,
    opts: &CompactionOptions,
) -> [u64; NUM_LEVELS] {
    compute_targets(&level_sizes(version, family), opts).0
}

/// The level L0 compacts into: the highest level with a target.
pub fn base_level(version: &Version, family: FamilyId, opts: &CompactionOptions) -> usize {
    compute_targets(&level_sizes(version, family), opts).1
}

/// Score of each level of `family` (see the module docs); a level with score ≥ 1 wants
/// compacting. Busy files are left out of the counts and sizes. The last level scores 0.
pub fn scores(
    version: &Version,
    family: FamilyId,
    opts: &CompactionOptions,
    busy: &BTreeSet<FileNumber>,
) -> [f64; NUM_LEVELS] {
    Fam::new(version, family, opts, busy).map_or([0.0; NUM_LEVELS], |f| f.scores)
}

/// RocksDB's estimate of the bytes compaction still owes `family`
/// (`rocksdb.estimate-pending-compaction-bytes`): L0 (with the base level) once L0 is due, then
/// for each level from the base level down, its excess over the target carried to the next level
/// and multiplied by the fan-out there (next level size / this level size + 1).
pub fn pending_compaction_bytes(
    version: &Version,
    family: FamilyId,
    opts: &CompactionOptions,
) -> u64 {
    let Some(levels) = version.levels(family) else {
        return 0;
    };
    let sizes = level_sizes(version, family);
    let (targets, base) = compute_targets(&sizes, opts);
    let l0_files = levels.first().map_or(0, Vec::len);
    let mut owed: u64 = 0;
    let mut carried: u64 = 0;
    let l0_due = l0_files >= opts.level0_file_num_compaction_trigger.max(1)
        || sizes[0] >= opts.max_bytes_for_level_base.max(1);
    if l0_due {
        owed = sizes[0];
        carried = sizes[0];
    }
    let mut next_level_bytes: u64 = 0;
    for level in base..LAST_LEVEL {
        let mut size = if next_level_bytes > 0 {
            next_level_bytes
        } else {
            sizes[level]
        };
        next_level_bytes = 0;
        if level == base && l0_due {
            owed = owed.saturating_add(size);
        }
        size = size.saturating_add(carried);
        carried = 0;
        let target = targets[level];
        if size > target {
            carried = size - target;
            next_level_bytes = sizes[level + 1];
            if next_level_bytes > 0 && size > 0 {
                let fanout = next_level_bytes as f64 / size as f64 + 1.0;
                // `as` saturates; the product is finite and non-negative.
                owed = owed.saturating_add((carried as f64 * fanout) as u64);
            }
        }
    }
    owed
}

/// Back-pressure for writers, the worst over all families: `Stop` when L0 holds
/// `level0_stop_writes_trigger` files or the pending bytes reach `hard_pending_compaction_bytes`,
/// `Slowdown` at `level0_slowdown_writes_trigger` files or `soft_pending_compaction_bytes`.
/// A trigger or limit of 0 is disabled. Among equals, L0 before pending bytes, lower family first.
pub fn write_pressure(version: &Version, opts: &CompactionOptions) -> WritePressure {
    let mut worst = WritePressure::None;
    let rank = |p: WritePressure| match p {
        WritePressure::None => 0,
        WritePressure::Slowdown(_) => 1,
        WritePressure::Stop(_) => 2,
    };
    let reached = |v: u64, limit: u64| limit > 0 && v >= limit;
    for family in version.families() {
        let l0 = version.files(family, 0).len() as u64;
        let pending = pending_compaction_bytes(version, family, opts);
        let p = if reached(l0, opts.level0_stop_writes_trigger as u64) {
            WritePressure::Stop(StallCause::Level0Files)
        } else if reached(pending, opts.hard_pending_compaction_bytes) {
            WritePressure::Stop(StallCause::PendingCompactionBytes)
        } else if reached(l0, opts.level0_slowdown_writes_trigger as u64) {
            WritePressure::Slowdown(StallCause::Level0Files)
        } else if reached(pending, opts.soft_pending_compaction_bytes) {
            WritePressure::Slowdown(StallCause::PendingCompactionBytes)
        } else {
            WritePressure::None
        };
        if rank(p) > rank(worst) {
            worst = p;
        }
    }
    worst
}

/// The row of an encoded key; a key that does not parse (a damaged file) counts as its own
/// bytes, which keeps every comparison total without panicking.
pub(crate) fn row(key: &[u8]) -> &[u8] {
    KeyRef::parse(key).map_or(key, |k| k.row)
}

/// An inclusive range of rows.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Rows<'a> {
    pub(crate) lo: &'a [u8],
    pub(crate) hi: &'a [u8],
}

impl<'a> Rows<'a> {
    /// The rows of a file.
    pub(crate) fn of(f: &'a FileMeta) -> Self {
        Rows {
            lo: row(&f.smallest),
            hi: row(&f.largest),
        }
    }

    /// True when the two ranges share a row.
    pub(crate) fn overlaps(&self, o: &Rows<'_>) -> bool {
        self.lo <= o.hi && o.lo <= self.hi
    }

    fn union(self, o: Rows<'a>) -> Rows<'a> {
        Rows {
            lo: self.lo.min(o.lo),
            hi: self.hi.max(o.hi),
        }
    }
}

/// The row hull of some files.
fn hull<'a>(files: impl IntoIterator<Item = &'a Arc<FileMeta>>) -> Option<Rows<'a>> {
    files
        .into_iter()
        .map(|f| Rows::of(f))
        .reduce(|a, b| a.union(b))
}

fn total(files: &[Arc<FileMeta>]) -> u64 {
    files.iter().fold(0u64, |a, f| a.saturating_add(f.size))
}

/// Files of a level ≥ 1 (sorted, disjoint) whose rows overlap `r`.
fn overlapping(files: &[Arc<FileMeta>], r: Rows<'_>) -> Vec<Arc<FileMeta>> {
    let start = files.partition_point(|f| row(&f.largest) < r.lo);
    let end = files.partition_point(|f| row(&f.smallest) <= r.hi);
    files
        .get(start..end.max(start))
        .unwrap_or(&[])
        .iter()
        .filter(|f| Rows::of(f).overlaps(&r))
        .cloned()
        .collect()
}

/// The rows of each file of a level, parsed once for a picker that asks many questions.
fn rows_of(files: &[Arc<FileMeta>]) -> Vec<Rows<'_>> {
    files.iter().map(|f| Rows::of(f)).collect()
}

/// [`overlapping`] over a level whose rows are already parsed.
fn overlapping_rows(files: &[Arc<FileMeta>], rows: &[Rows<'_>], r: Rows<'_>) -> Vec<Arc<FileMeta>> {
    let start = rows.partition_point(|x| x.hi < r.lo);
    let end = rows.partition_point(|x| x.lo <= r.hi).max(start);
    (start..end)
        .filter(|&i| rows.get(i).is_some_and(|x| x.overlaps(&r)))
        .filter_map(|i| files.get(i).cloned())
        .collect()
}

fn level_sizes(version: &Version, family: FamilyId) -> [u64; NUM_LEVELS] {
    let mut sizes = [0u64; NUM_LEVELS];
    for (level, s) in sizes.iter_mut().enumerate() {
        *s = total(version.files(family, level));
    }
    sizes
}

/// Targets and base level from the level sizes (module docs).
fn compute_targets(
    sizes: &[u64; NUM_LEVELS],
    opts: &CompactionOptions,
) -> ([u64; NUM_LEVELS], usize) {
    let mult = opts.level_size_multiplier.max(2);
    let base_bytes = opts.max_bytes_for_level_base.max(1);
    let mut t = [0u64; NUM_LEVELS];
    if !opts.dynamic_level_bytes {
        let mut cur = base_bytes;
        for slot in t.iter_mut().skip(1) {
            *slot = cur;
            cur = cur.saturating_mul(mult);
        }
        return (t, 1);
    }
    let largest = sizes
        .iter()
        .skip(1)
        .copied()
        .max()
        .unwrap_or(0)
        .max(base_bytes);
    let mut cur = largest;
    for slot in t.iter_mut().skip(1).rev() {
        *slot = cur;
        cur /= mult;
    }
    let unused_at = base_bytes / mult;
    let computed = (1..NUM_LEVELS)
        .find(|&l| t[l] > unused_at)
        .unwrap_or(LAST_LEVEL);
    let first_non_empty = (1..NUM_LEVELS)
        .find(|&l| sizes[l] > 0)
        .unwrap_or(LAST_LEVEL);
    let base = computed.min(first_non_empty);
    for (level, slot) in t.iter_mut().enumerate() {
        if level < base {
            *slot = 0;
        } else if level < computed {
            *slot = (*slot).max(unused_at.saturating_add(1));
        } else {
            *slot = (*slot).max(base_bytes);
        }
    }
    (t, base)
}

/// One family as the picker sees it.
struct Fam<'a> {
    id: FamilyId,
    levels: &'a [Vec<Arc<FileMeta>>],
    base: usize,
    scores: [f64; NUM_LEVELS],
    opts: &'a CompactionOptions,
}

impl<'a> Fam<'a> {
    fn new(
        version: &'a Version,
        id: FamilyId,
        opts: &'a CompactionOptions,
        busy: &BTreeSet<FileNumber>,
    ) -> Option<Self> {
        let levels = version.levels(id)?;
        let (targets, base) = compute_targets(&level_sizes(version, id), opts);
        let mut scores = [0.0; NUM_LEVELS];
        let idle = |files: &[Arc<FileMeta>]| -> (usize, u64) {
            files
                .iter()
                .filter(|f| !busy.contains(&f.number))
                .fold((0, 0u64), |(n, b), f| (n + 1, b.saturating_add(f.size)))
        };
        // Bytes on their way down to the level being scored: all of L0, then each level's
        // excess over its target (RocksDB's `total_downcompact_bytes`).
        let mut incoming: f64 = 0.0;
        for (level, s) in scores.iter_mut().enumerate().take(LAST_LEVEL) {
            let files = levels.get(level).map_or(&[][..], |v| v.as_slice());
            let (n, bytes) = idle(files);
            let all = total(files);
            *s = if level == 0 {
                incoming += all as f64;
                let by_count = n as f64 / opts.level0_file_num_compaction_trigger.max(1) as f64;
                if opts.dynamic_level_bytes {
                    let mut s = by_count;
                    if bytes >= opts.max_bytes_for_level_base.max(1) {
                        s = s.max(1.01);
                    }
                    let base_target = targets.get(base).copied().unwrap_or(0).max(1);
                    if bytes > base_target {
                        let (_, base_bytes) = idle(levels.get(base).map_or(&[], |v| v.as_slice()));
                        s = s.max(bytes as f64 / base_bytes.max(base_target) as f64);
                    }
                    if s > 1.0 {
                        s * SCORE_SCALE
                    } else {
                        s
                    }
                } else {
                    let by_bytes = bytes as f64 / opts.max_bytes_for_level_base.max(1) as f64;
                    by_count.max(by_bytes)
                }
            } else if targets[level] > 0 {
                let target = targets[level] as f64;
                let s = if !opts.dynamic_level_bytes || (bytes as f64) < target {
                    bytes as f64 / target
                } else {
                    bytes as f64 / (target + incoming) * SCORE_SCALE
                };
                if all > targets[level] {
                    incoming += (all - targets[level]) as f64;
                }
                s
            } else {
                0.0
            };
        }
        Some(Fam {
            id,
            levels,
            base,
            scores,
            opts,
        })
    }

    fn files(&self, level: usize) -> &'a [Arc<FileMeta>] {
        self.levels.get(level).map_or(&[], |v| v.as_slice())
    }

    fn all_files(&self) -> impl Iterator<Item = &'a Arc<FileMeta>> + 'a {
        self.levels.iter().flatten()
    }

    /// L0 → base (module docs); `None` if nothing can go now.
    fn l0_task(
        &self,
        busy: &BTreeSet<FileNumber>,
        reason: CompactionReason,
    ) -> Option<CompactionTask> {
        let l0 = self.files(0);
        let base = self.base;
        let base_files = self.files(base);
        let base_rows = rows_of(base_files);
        let busy_hull = hull(l0.iter().filter(|f| busy.contains(&f.number)));
        let mut chosen: Vec<Arc<FileMeta>> = Vec::new();
        let mut range: Option<Rows<'a>> = None;
        let mut below: Vec<Arc<FileMeta>> = Vec::new();
        let mut bytes: u64 = 0;
        // Oldest first; busy files are skipped but must stay clear of the range.
        for f in l0.iter().rev() {
            if busy.contains(&f.number) {
                continue;
            }
            let r = range.map_or(Rows::of(f), |r| r.union(Rows::of(f)));
            if busy_hull.is_some_and(|b| b.overlaps(&r)) {
                break;
            }
            let under = overlapping_rows(base_files, &base_rows, r);
            if under.iter().any(|g| busy.contains(&g.number)) {
                break;
            }
            let in_l0 = bytes.saturating_add(f.size);
            if !chosen.is_empty() && in_l0 > self.opts.max_compaction_bytes {
                break;
            }
            let alone = || {
                l0.iter()
                    .all(|g| g.number == f.number || !Rows::of(g).overlaps(&Rows::of(f)))
            };
            if chosen.is_empty() && under.is_empty() && alone() {
                // The oldest file lands in a gap of the base level and merges with nothing in
                // L0 either: move it.
                return Some(self.task(vec![(0, vec![f.clone()])], base, true, reason));
            }
            chosen.push(f.clone());
            bytes = in_l0;
            range = Some(r);
            below = under;
        }
        if chosen.is_empty() {
            return None;
        }
        chosen.reverse(); // the level's order: newest first
        let mut inputs = vec![(0, chosen)];
        if !below.is_empty() {
            inputs.push((base as u32, below));
        }
        Some(self.task(inputs, base, false, reason))
    }

    /// Ln → Ln+1 for `level` ≥ 1: the file at index `only` (tombstone trigger), or the file with
    /// the smallest overlap ratio; `None` if no candidate is free.
    fn down_task(
        &self,
        level: usize,
        only: Option<usize>,
        busy: &BTreeSet<FileNumber>,
        reason: CompactionReason,
    ) -> Option<CompactionTask> {
        if level == 0 || level >= LAST_LEVEL {
            return None;
        }
        let files = self.files(level);
        let next = self.files(level + 1);
        let rows = rows_of(files);
        let next_rows = rows_of(next);
        // (over the byte limit, overlapping bytes, own bytes, inputs, overlapping files)
        type Cand = (bool, u64, u64, Vec<Arc<FileMeta>>, Vec<Arc<FileMeta>>);
        let mut best: Option<Cand> = None;
        let candidates: Vec<usize> = match only {
            Some(i) => vec![i],
            None => (0..files.len()).collect(),
        };
        for i in candidates {
            let Some((ins, r)) = clean_cut(files, &rows, i, busy) else {
                continue;
            };
            let under = overlapping_rows(next, &next_rows, r);
            if under.iter().any(|g| busy.contains(&g.number)) {
                continue;
            }
            let own = total(&ins);
            let over = total(&under);
            let trivial = ins.len() == 1 && under.is_empty();
            let too_big = !trivial && own.saturating_add(over) > self.opts.max_compaction_bytes;
            let better = match &best {
                None => true,
                Some((b_big, b_over, b_own, _, _)) => {
                    // over / own < b_over / b_own, without division.
                    let ratio = (over as u128 * (*b_own).max(1) as u128)
                        .cmp(&(*b_over as u128 * own.max(1) as u128));
                    (too_big, ratio) < (*b_big, Ordering::Equal)
                }
            };
            if better {
                best = Some((too_big, over, own, ins, under));
            }
        }
        let (_, _, _, ins, under) = best?;
        let trivial = ins.len() == 1 && under.is_empty();
        let mut inputs = vec![(level as u32, ins)];
        if !under.is_empty() {
            inputs.push((level as u32 + 1, under));
        }
        Some(self.task(inputs, level + 1, trivial, reason))
    }

    /// A task with its bottommost flag worked out.
    fn task(
        &self,
        inputs: Vec<(u32, Vec<Arc<FileMeta>>)>,
        output_level: usize,
        trivial_move: bool,
        reason: CompactionReason,
    ) -> CompactionTask {
        let bottommost = self.bottommost(&inputs, output_level);
        CompactionTask {
            family: self.id,
            inputs,
            output_level: output_level as u32,
            trivial_move,
            drop_inputs: false,
            bottommost,
            target_file_size: self.opts.target_file_size,
            reason,
        }
    }

    fn bottommost(&self, inputs: &[(u32, Vec<Arc<FileMeta>>)], output_level: usize) -> bool {
        let ins: BTreeSet<FileNumber> = inputs
            .iter()
            .flat_map(|(_, fs)| fs.iter().map(|f| f.number))
            .collect();
        let Some(r) = hull(inputs.iter().flat_map(|(_, fs)| fs.iter())) else {
            return true;
        };
        (output_level..NUM_LEVELS).all(|level| {
            let files = self.files(level);
            let hits = if level == 0 {
                files
                    .iter()
                    .filter(|f| Rows::of(f).overlaps(&r))
                    .cloned()
                    .collect()
            } else {
                overlapping(files, r)
            };
            hits.iter().all(|f| ins.contains(&f.number))
        })
    }
}

/// File `i` of a level ≥ 1 (rows parsed in `rows`) widened to the neighbours that share a
/// boundary row with it, so no row is cut, and its row hull; `None` if any of them is busy.
fn clean_cut<'a>(
    files: &[Arc<FileMeta>],
    rows: &[Rows<'a>],
    i: usize,
    busy: &BTreeSet<FileNumber>,
) -> Option<(Vec<Arc<FileMeta>>, Rows<'a>)> {
    let mut r = *rows.get(i)?;
    let (mut lo, mut hi) = (i, i);
    while let Some(g) = lo.checked_sub(1).and_then(|j| rows.get(j)) {
        if !g.overlaps(&r) {
            break;
        }
        r = r.union(*g);
        lo -= 1;
    }
    while let Some(g) = rows.get(hi + 1) {
        if !g.overlaps(&r) {
            break;
        }
        r = r.union(*g);
        hi += 1;
    }
    let ins = files.get(lo..=hi)?;
    if ins.iter().any(|g| busy.contains(&g.number)) {
        return None;
    }
    Some((ins.to_vec(), r))
}

fn policy(families: &[FamilyPolicy], id: FamilyId) -> FamilyPolicy {
    families
        .iter()
        .find(|p| p.family == id)
        .cloned()
        .unwrap_or_else(|| FamilyPolicy::plain(id))
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

fn pick_ttl(
    fams: &[Fam<'_>],
    families: &[FamilyPolicy],
    now_ms: u64,
    busy: &BTreeSet<FileNumber>,
) -> Option<CompactionTask> {
    // Oldest first: (max_ts, family, level, number), with the family and the file.
    type Ttl<'f, 'a> = (
        (u64, FamilyId, usize, FileNumber),
        &'f Fam<'a>,
        &'a Arc<FileMeta>,
    );
    let mut best: Option<Ttl<'_, '_>> = None;
    for fam in fams {
        let p = policy(families, fam.id);
        let Some(ttl) = p.ttl else { continue };
        if p.min_versions != 0 {
            continue;
        }
        let ttl_ms = millis(ttl);
        let Some(cutoff) = now_ms.checked_sub(ttl_ms) else {
            continue;
        };
        for (level, files) in fam.levels.iter().enumerate() {
            for f in files {
                let expired = f.max_ts < cutoff && f.created_ms <= f.max_ts.saturating_add(ttl_ms);
                if !expired || busy.contains(&f.number) {
                    continue;
                }
                let key = (f.max_ts, fam.id, level, f.number);
                if best.as_ref().is_none_or(|(k, _, _)| key < *k) {
                    best = Some((key, fam, f));
                }
            }
        }
    }
    let ((_, _, level, _), fam, f) = best?;
    Some(fam.task(
        vec![(level as u32, vec![f.clone()])],
        level,
        false,
        CompactionReason::Ttl,
    ))
}

/// Trigger 3 (module docs): the file whose rows lie inside one of the family's
/// [`FamilyPolicy::range_deletes`], with every cell at or below the purge horizon and some
/// cell at or below the delete's timestamp. Dropped unread when every cell is (any level),
/// else rewritten into itself (levels ≥ 1: an L0 output would land above newer L0 files),
/// which drops every cell at or below the timestamp, so the output cannot fire again.
/// Drops first, then the largest file; ties by family, level and number.
fn pick_range_deletes(
    fams: &[Fam<'_>],
    families: &[FamilyPolicy],
    busy: &BTreeSet<FileNumber>,
) -> Option<CompactionTask> {
    // (0 drop, 1 rewrite of a file held whole, 2 of a file cut; bytes to go descending;
    // family, level, number)
    type Key = (u8, std::cmp::Reverse<u64>, FamilyId, usize, FileNumber);
    let mut best: Option<(Key, &Fam<'_>, &Arc<FileMeta>)> = None;
    for fam in fams {
        let p = policy(families, fam.id);
        if p.range_deletes.is_empty() {
            continue;
        }
        let ratio = fam.opts.range_delete_rewrite_ratio;
        for (level, files) in fam.levels.iter().enumerate() {
            for f in files {
                if f.max_seq > p.purge_horizon || busy.contains(&f.number) {
                    continue;
                }
                let rows = Rows::of(f);
                // The newest timestamp among the deletes holding every row of the file.
                let whole = p
                    .range_deletes
                    .iter()
                    .filter(|d| d.covers(rows.lo) && d.covers(rows.hi))
                    .map(|d| d.ts)
                    .max();
                let key = match whole {
                    Some(ts) if f.min_ts <= ts && (f.max_ts <= ts || level > 0) => {
                        let drop = f.max_ts <= ts;
                        (u8::from(!drop), std::cmp::Reverse(f.size))
                    }
                    _ if level > 0 => {
                        // Cut by deletes: rewritten when they cover enough of it.
                        let Ok(i) = p
                            .partly_covered
                            .binary_search_by_key(&f.number, |&(n, _)| n)
                        else {
                            continue;
                        };
                        let covered = p.partly_covered[i].1;
                        // NaN never passes.
                        let enough = covered as f64 >= ratio * f.size as f64;
                        if !enough || covered == 0 {
                            continue;
                        }
                        (2, std::cmp::Reverse(covered))
                    }
                    _ => continue,
                };
                let key = (key.0, key.1, fam.id, level, f.number);
                if best.as_ref().is_none_or(|(k, _, _)| key < *k) {
                    best = Some((key, fam, f));
                }
            }
        }
    }
    let ((class, _, _, level, _), fam, f) = best?;
    let rewrite = class > 0;
    let mut t = fam.task(
        vec![(level as u32, vec![f.clone()])],
        level,
        false,
        CompactionReason::RangeDelete,
    );
    t.drop_inputs = !rewrite;
    Some(t)
}

fn pick_tombstones(
    fams: &[Fam<'_>],
    families: &[FamilyPolicy],
    now_ms: u64,
    busy: &BTreeSet<FileNumber>,
) -> Option<CompactionTask> {
    struct Cand<'f, 'a> {
        fam: &'f Fam<'a>,
        level: usize,
        index: usize,
        file: &'a Arc<FileMeta>,
    }
    let mut cands: Vec<Cand<'_, '_>> = Vec::new();
    for fam in fams {
        let p = policy(families, fam.id);
        let opts = fam.opts;
        let min_entries = opts.tombstone_min_entries.max(1);
        for (level, files) in fam.levels.iter().enumerate() {
            for (index, f) in files.iter().enumerate() {
                let dense = f.deletes > 0
                    && f.entries >= min_entries
                    && f.deletes as f64 >= opts.tombstone_density_trigger * f.entries as f64;
                if !dense || busy.contains(&f.number) {
                    continue;
                }
                if level == LAST_LEVEL
                    && (p.keep_deleted_cells
                        || f.max_ts.saturating_add(millis(opts.purge_delay)) > now_ms)
                {
                    continue;
                }
                cands.push(Cand {
                    fam,
                    level,
                    index,
                    file: f,
                });
            }
        }
    }
    // Densest first: deletes_a / entries_a > deletes_b / entries_b, without division.
    cands.sort_by(|a, b| {
        let da = a.file.deletes as u128 * b.file.entries as u128;
        let db = b.file.deletes as u128 * a.file.entries as u128;
        db.cmp(&da)
            .then(a.level.cmp(&b.level))
            .then(a.fam.id.cmp(&b.fam.id))
            .then(a.file.number.cmp(&b.file.number))
    });
    let reason = CompactionReason::TombstoneDensity;
    cands.into_iter().find_map(|c| match c.level {
        0 => c.fam.l0_task(busy, reason),
        LAST_LEVEL => Some(c.fam.task(
            vec![(c.level as u32, vec![c.file.clone()])],
            c.level,
            false,
            reason,
        )),
        level => c.fam.down_task(level, Some(c.index), busy, reason),
    })
}

/// `period_ms` scaled by the family's fixed jitter factor in `[1 - j, 1 + j)`.
fn jittered_period(period_ms: u64, jitter: f64, family: FamilyId) -> u64 {
    let j = if jitter.is_finite() {
        jitter.clamp(0.0, 0.99)
    } else {
        0.0
    };
    // splitmix64 of the family id: a fixed, well-spread fraction per family.
    let mut z = u64::from(family).wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    let u = (z >> 11) as f64 / (1u64 << 53) as f64;
    let factor = 1.0 + j * (2.0 * u - 1.0);
    ((period_ms as f64 * factor) as u64).max(1)
}

fn pick_periodic(
    version: &Version,
    fams: &[Fam<'_>],
    opts: &CompactionOptions,
    now_ms: u64,
    busy: &BTreeSet<FileNumber>,
) -> Option<CompactionTask> {
    let period_ms = millis(opts.periodic_major?);
    if period_ms == 0 {
        return None;
    }
    let mut best: Option<(u64, FamilyId)> = None;
    for fam in fams {
        let Some(oldest) = fam.all_files().map(|f| f.created_ms).min() else {
            continue;
        };
        let age = now_ms.saturating_sub(oldest);
        let period = jittered_period(period_ms, opts.periodic_major_jitter, fam.id);
        if age <= period || fam.all_files().any(|f| busy.contains(&f.number)) {
            continue;
        }
        let overdue = age - period;
        if best.is_none_or(|(o, _)| overdue > o) {
            best = Some((overdue, fam.id));
        }
    }
    let (_, family) = best?;
    let mut task = pick_major(version, family, opts, busy)?;
    task.reason = CompactionReason::PeriodicMajor;
    Some(task)
}

#[cfg(test)]
mod tests {
    use super::*;
    use cellar_format::cell::{CellKey, CellType};

    const DAY: u64 = 24 * 3600 * 1000;

    fn key(row: &str) -> Vec<u8> {
        CellKey::first_on_row(row.as_bytes()).encode()
    }

    /// A file of family 1; seqs and L0 order follow `number`.
    fn file(number: u64, level: u32, lo: &str, hi: &str, size: u64) -> FileMeta {
        FileMeta {
            number,
            family: 1,
            level,
            size,
            smallest: key(lo),
            largest: key(hi),
            min_seq: number * 10,
            max_seq: number * 10 + 9,
            min_ts: 0,
            max_ts: 10 * DAY,
            entries: 100,
            deletes: 0,
            created_ms: 10 * DAY,
            crc: None,
            range_clean: 0,
        }
    }

    fn opts() -> CompactionOptions {
        CompactionOptions {
            max_bytes_for_level_base: 1000,
            level_size_multiplier: 10,
            target_file_size: 100,
            max_compaction_bytes: 2500,
            periodic_major: None,
            tombstone_min_entries: 10,
            ..CompactionOptions::default()
        }
    }

    fn v(files: Vec<FileMeta>) -> Version {
        Version::from_files(files)
    }

    fn none() -> BTreeSet<FileNumber> {
        BTreeSet::new()
    }

    fn busy(ns: &[u64]) -> BTreeSet<FileNumber> {
        ns.iter().copied().collect()
    }

    fn numbers(t: &CompactionTask) -> Vec<(u32, Vec<u64>)> {
        t.inputs
            .iter()
            .map(|(l, fs)| (*l, fs.iter().map(|f| f.number).collect()))
            .collect()
    }

    fn pick1(v: &Version) -> Option<CompactionTask> {
        pick(v, &[], &opts(), 11 * DAY, &none())
    }

    /// A bottom level of `n` files of `size` bytes over rows "b000".."b{n-1}" (each file one
    /// row-range "bNNN".."bNNNz"), numbered from 1000.
    fn bottom(level: u32, n: u64, size: u64) -> Vec<FileMeta> {
        (0..n)
            .map(|i| {
                let lo = format!("b{i:03}");
                let hi = format!("b{i:03}z");
                file(1000 + i, level, &lo, &hi, size)
            })
            .collect()
    }

    #[test]
    fn targets_of_a_small_database_use_only_the_last_level() {
        let o = opts();
        let empty = v(vec![]);
        assert_eq!(level_targets(&empty, 1, &o), [0, 0, 0, 0, 0, 0, 1000]);
        assert_eq!(base_level(&empty, 1, &o), 6);
        // 800 bytes at L6: its target is the base, L5 would be 100 = base / multiplier: unused.
        let small = v(vec![file(1, 6, "a", "b", 800)]);
        assert_eq!(level_targets(&small, 1, &o), [0, 0, 0, 0, 0, 0, 1000]);
        assert_eq!(base_level(&small, 1, &o), 6);
    }

    #[test]
    fn targets_grow_upward_with_the_data() {
        let o = opts();
        let big = v(vec![file(1, 6, "a", "b", 50_000)]);
        // 50 000 / 10 = 5000, / 10 = 500 (> 100: used), / 10 = 50 (unused); no target from
        // the base level down is below the base size (L4: 1000, not 500).
        assert_eq!(level_targets(&big, 1, &o), [0, 0, 0, 0, 1000, 5000, 50_000]);
        assert_eq!(base_level(&big, 1, &o), 4);
        // Data stranded above the computed base level makes that level the base; the levels
        // down to the computed base get just over base / multiplier.
        let stranded = v(vec![file(1, 6, "a", "b", 50_000), file(2, 2, "a", "b", 7)]);
        assert_eq!(
            level_targets(&stranded, 1, &o),
            [0, 0, 101, 101, 1000, 5000, 50_000]
        );
        assert_eq!(base_level(&stranded, 1, &o), 2);
        // Static targets: L1 = base, times the multiplier per level.
        let st = CompactionOptions {
            dynamic_level_bytes: false,
            ..o
        };
        assert_eq!(
            level_targets(&big, 1, &st),
            [0, 1000, 10_000, 100_000, 1_000_000, 10_000_000, 100_000_000]
        );
        assert_eq!(base_level(&big, 1, &st), 1);
    }

    #[test]
    fn scores_count_l0_files_and_bytes_and_skip_busy_files() {
        let o = opts();
        let l0: Vec<_> = (1..=4).map(|n| file(n, 0, "a", "z", 10)).collect();
        let ver = v(l0);
        assert_eq!(scores(&ver, 1, &o, &none())[0], 1.0);
        assert_eq!(scores(&ver, 1, &o, &busy(&[1, 2]))[0], 0.5);
        // Two files of 1000 bytes: by bytes, twice the base level's target of 1000; scaled
        // by SCORE_SCALE once due.
        let heavy = v(vec![file(1, 0, "a", "z", 1000), file(2, 0, "a", "z", 1000)]);
        assert_eq!(scores(&heavy, 1, &o, &none())[0], 20.0);
        // L5 of 10 000 against a target of 5000, nothing coming down from L0: 2.0, scaled.
        let mut files = bottom(6, 5, 10_000);
        files.push(file(1, 5, "a", "a", 10_000));
        let s = scores(&v(files.clone()), 1, &o, &none());
        assert_eq!(s[5], 20.0);
        // With 5000 bytes on their way down from L0, L5 is still due but ranks lower:
        // 10 000 / (5000 + 5000), scaled.
        files.push(file(2, 0, "a", "z", 5000));
        let s = scores(&v(files), 1, &o, &none());
        assert_eq!(s[5], 10.0);
        assert!(s[0] > s[5], "L0 first: {s:?}");
        assert_eq!(s[6], 0.0, "the last level has no score");
    }

    #[test]
    fn l0_takes_every_file_and_the_overlapping_base_files() {
        let mut files: Vec<_> = (1..=4).map(|n| file(n, 0, "b000", "b001", 10)).collect();
        files.extend(bottom(6, 4, 100));
        let t = pick1(&v(files)).expect("L0 is due");
        assert_eq!(t.reason, CompactionReason::Level0FileCount);
        assert_eq!(t.output_level, 6);
        assert_eq!(
            numbers(&t),
            vec![(0, vec![4, 3, 2, 1]), (6, vec![1000, 1001])]
        );
        assert!(!t.trivial_move);
        assert!(t.bottommost);
        assert_eq!(t.target_file_size, 100);
    }

    #[test]
    fn overlap_is_by_row_not_by_cell_key() {
        // The L0 files end at the first key of row "m"; the base file starts later in row "m".
        let mut files: Vec<_> = (1..=4).map(|n| file(n, 0, "a", "m", 10)).collect();
        let mut b = file(50, 6, "m", "q", 100);
        b.smallest = CellKey::new("m", "f", "q", 5, CellType::Put, 1).encode();
        files.push(b);
        files.push(file(51, 6, "r", "s", 100));
        let t = pick1(&v(files)).unwrap();
        assert_eq!(numbers(&t), vec![(0, vec![4, 3, 2, 1]), (6, vec![50])]);
    }

    #[test]
    fn l0_is_taken_oldest_first_around_busy_files() {
        let o = opts();
        // 1 (oldest) is busy over a..c; 2 is apart; 3 overlaps 1; 4 and 5 are apart.
        let files = vec![
            file(1, 0, "a", "c", 10),
            file(2, 0, "x", "z", 10),
            file(3, 0, "b", "d", 10),
            file(4, 0, "x", "y", 10),
            file(5, 0, "x", "z", 10),
            file(60, 6, "a", "z", 100),
        ];
        let ver = v(files);
        // The base file is busy too (the running L0 compaction holds it): nothing overlaps.
        assert!(pick(&ver, &[], &o, 0, &busy(&[1, 60])).is_none());
        let files = vec![
            file(1, 0, "a", "c", 10),
            file(2, 0, "x", "z", 10),
            file(3, 0, "b", "d", 10),
            file(4, 0, "x", "y", 10),
            file(5, 0, "x", "z", 10),
            file(60, 6, "a", "c", 100),
            file(61, 6, "x", "z", 100),
        ];
        let ver = v(files);
        let t = pick(&ver, &[], &o, 0, &busy(&[1, 60])).expect("2 can go");
        // 2 goes with its base file; 3 overlaps busy 1, so it and everything newer stays.
        assert_eq!(numbers(&t), vec![(0, vec![2]), (6, vec![61])]);
        // If the oldest idle file overlaps the busy ones, L0 waits.
        let t = pick(&ver, &[], &o, 0, &busy(&[1, 2, 60, 61]));
        assert!(t.is_none(), "{t:?}");
    }

    #[test]
    fn l0_moves_a_file_that_lands_in_a_gap_and_respects_the_byte_limit() {
        let mut files: Vec<_> = (1..=4)
            .map(|n| file(n, 0, &format!("c{n}"), &format!("c{n}z"), 10))
            .collect();
        files.push(file(60, 6, "a", "b", 100));
        let t = pick1(&v(files)).unwrap();
        assert!(t.trivial_move);
        assert_eq!(numbers(&t), vec![(0, vec![1])]);
        assert_eq!(t.output_level, 6);

        // 4 L0 files of 1000 over a base of 10: 2500 bytes fit two of them.
        let mut files: Vec<_> = (1..=4).map(|n| file(n, 0, "a", "z", 1000)).collect();
        files.push(file(60, 6, "a", "z", 10));
        let t = pick1(&v(files)).unwrap();
        assert_eq!(numbers(&t), vec![(0, vec![2, 1]), (6, vec![60])]);

        // The limit is on the L0 bytes only: a base level far above it (the backlog of a
        // starved compaction) must not shrink the batch to one L0 file per rewrite of the
        // whole base level.
        let o = CompactionOptions {
            max_compaction_bytes: 250,
            ..opts()
        };
        let mut files: Vec<_> = (1..=4).map(|n| file(n, 0, "a", "z", 50)).collect();
        files.push(file(60, 6, "a", "z", 900));
        let t = pick(&v(files), &[], &o, 11 * DAY, &none()).unwrap();
        assert_eq!(numbers(&t), vec![(0, vec![4, 3, 2, 1]), (6, vec![60])]);
    }

    /// L4 over its target of 1000 (500 from L6's 50 000, raised to the base size), with files
    /// over L5 of varied overlap.
    fn deep(l4: Vec<FileMeta>, l5: Vec<FileMeta>) -> Version {
        let mut files = vec![file(900, 6, "a", "z", 50_000)];
        files.extend(l4);
        files.extend(l5);
        v(files)
    }

    #[test]
    fn ln_picks_the_smallest_overlap_ratio_and_moves_when_nothing_overlaps() {
        let ver = deep(
            vec![file(1, 4, "a", "c", 600), file(2, 4, "m", "o", 600)],
            vec![file(10, 5, "a", "b", 900), file(11, 5, "n", "n", 100)],
        );
        let t = pick1(&ver).unwrap();
        assert_eq!(t.reason, CompactionReason::LevelSize);
        assert_eq!(numbers(&t), vec![(4, vec![2]), (5, vec![11])]);
        assert_eq!(t.output_level, 5);
        assert!(!t.trivial_move);
        assert!(!t.bottommost, "L6 lies below");

        let ver = deep(
            vec![file(1, 4, "a", "c", 600), file(2, 4, "m", "o", 600)],
            vec![file(10, 5, "a", "b", 900), file(11, 5, "p", "q", 100)],
        );
        let t = pick1(&ver).unwrap();
        assert!(t.trivial_move);
        assert_eq!(numbers(&t), vec![(4, vec![2])]);
    }

    #[test]
    fn ln_prefers_candidates_within_max_compaction_bytes() {
        // 1: 2200 / 800 = 2.75, but 3000 bytes in all, over the limit of 2500;
        // 2: 1500 / 400 = 3.75 and 1900 bytes: 2 goes although its ratio is worse.
        let ver = deep(
            vec![file(1, 4, "a", "c", 800), file(2, 4, "m", "o", 400)],
            vec![file(10, 5, "a", "b", 2200), file(11, 5, "n", "n", 1500)],
        );
        let t = pick1(&ver).unwrap();
        assert_eq!(numbers(&t), vec![(4, vec![2]), (5, vec![11])]);
        // Both over the limit: the smaller ratio still goes.
        let ver = deep(
            vec![file(1, 4, "a", "c", 800), file(2, 4, "m", "o", 800)],
            vec![file(10, 5, "a", "b", 2500), file(11, 5, "n", "n", 3000)],
        );
        assert_eq!(
            numbers(&pick1(&ver).unwrap()),
            vec![(4, vec![1]), (5, vec![10])]
        );
    }

    #[test]
    fn ln_widens_to_files_sharing_a_boundary_row() {
        let mut a = file(1, 4, "a", "m", 600);
        a.largest = CellKey::new("m", "f", "a", 5, CellType::Put, 1).encode();
        let mut b = file(2, 4, "m", "p", 600);
        b.smallest = CellKey::new("m", "f", "b", 5, CellType::Put, 1).encode();
        let ver = deep(vec![a, b], vec![file(10, 5, "n", "n", 10)]);
        let t = pick1(&ver).unwrap();
        assert_eq!(numbers(&t), vec![(4, vec![1, 2]), (5, vec![10])]);
        // With 2 busy, 1 cannot go alone.
        assert!(pick(&ver, &[], &opts(), 0, &busy(&[2])).is_none());
    }

    #[test]
    fn busy_files_and_busy_output_ranges_are_avoided() {
        // 1100 bytes each: either alone still exceeds L4's target of 1000.
        let ver = deep(
            vec![file(1, 4, "a", "c", 1100), file(2, 4, "m", "o", 1100)],
            vec![file(10, 5, "a", "b", 100), file(11, 5, "n", "n", 900)],
        );
        assert_eq!(numbers(&pick1(&ver).unwrap())[0], (4, vec![1]));
        // 1 is busy: 2 goes although its ratio is worse.
        let t = pick(&ver, &[], &opts(), 0, &busy(&[1])).unwrap();
        assert_eq!(numbers(&t), vec![(4, vec![2]), (5, vec![11])]);
        // 10 is busy at the output level (a running L5 → L6 holds it): 1 cannot go.
        let t = pick(&ver, &[], &opts(), 0, &busy(&[10])).unwrap();
        assert_eq!(numbers(&t)[0], (4, vec![2]));
        assert!(pick(&ver, &[], &opts(), 0, &busy(&[10, 11])).is_none());
    }

    #[test]
    fn bottommost_looks_at_the_levels_below() {
        let ver = deep(
            vec![file(1, 4, "0", "1", 1100)],
            vec![file(10, 5, "a", "b", 10)],
        );
        // Row range "0".."1" sits left of every L6 file ("a".."z").
        let t = pick1(&ver).unwrap();
        assert!(t.trivial_move && t.bottommost);
    }

    #[test]
    fn ttl_drops_expired_files_in_place() {
        let p = FamilyPolicy {
            ttl: Some(Duration::from_millis(DAY)),
            ..FamilyPolicy::plain(1)
        };
        let mut old = file(5, 6, "a", "b", 100);
        old.max_ts = DAY;
        old.created_ms = DAY + 1;
        let ver = v(vec![old.clone(), file(6, 6, "c", "d", 100)]);
        let o = opts();
        let t = pick(&ver, std::slice::from_ref(&p), &o, 3 * DAY, &none()).expect("expired");
        assert_eq!(t.reason, CompactionReason::Ttl);
        assert_eq!(numbers(&t), vec![(6, vec![5])]);
        assert_eq!(t.output_level, 6);
        assert!(t.bottommost);
        // Not yet expired; MIN_VERSIONS > 0; busy; no TTL: nothing.
        assert!(pick(&ver, std::slice::from_ref(&p), &o, 2 * DAY, &none()).is_none());
        let mv = FamilyPolicy {
            min_versions: 1,
            ..p.clone()
        };
        assert!(pick(&ver, &[mv], &o, 3 * DAY, &none()).is_none());
        assert!(pick(&ver, std::slice::from_ref(&p), &o, 3 * DAY, &busy(&[5])).is_none());
        assert!(pick(&ver, &[], &o, 3 * DAY, &none()).is_none());
        // A file written after all its cells expired was already given the chance: skipped.
        let mut kept = old.clone();
        kept.created_ms = 2 * DAY + 1;
        assert!(pick(
            &v(vec![kept]),
            std::slice::from_ref(&p),
            &o,
            3 * DAY,
            &none()
        )
        .is_none());
        // At L1 (above the other files) it is also compacted into itself.
        let mut upper = old;
        upper.level = 5;
        let ver = v(vec![upper, file(6, 6, "a", "d", 100_000)]);
        let t = pick(&ver, std::slice::from_ref(&p), &o, 3 * DAY, &none()).unwrap();
        assert_eq!((t.output_level, t.bottommost), (5, false));
    }

    /// Family 1 with rows `[lo, hi)` deleted at `ts`, seq 500, and the horizon at `horizon`.
    fn range_deleted(lo: &str, hi: &str, ts: u64, horizon: u64) -> FamilyPolicy {
        FamilyPolicy {
            range_deletes: Arc::from(vec![crate::types::RangeDelete {
                start: lo.as_bytes().to_vec(),
                stop: hi.as_bytes().to_vec(),
                ts,
                seq: 500,
            }]),
            purge_horizon: horizon,
            ..FamilyPolicy::plain(1)
        }
    }

    #[test]
    fn range_deletes_drop_the_files_they_hold_whole_and_rewrite_those_partly_newer() {
        let o = opts();
        let now = 11 * DAY;
        // Rows [c, m) deleted at 10 days: the files "d".."e" (L6) and "f".."g" (L0) lie inside,
        // "a".."d" and "l".."n" straddle its bounds.
        let p = range_deleted("c", "m", 10 * DAY, 1000);
        let ver = v(vec![
            file(1, 6, "a", "b", 100),
            file(2, 6, "d", "e", 100),
            file(3, 6, "l", "n", 100),
            file(4, 0, "f", "g", 50),
        ]);
        let t = pick(&ver, std::slice::from_ref(&p), &o, now, &none()).expect("due");
        assert_eq!(t.reason, CompactionReason::RangeDelete);
        // Drops: the largest first.
        assert_eq!((numbers(&t), t.drop_inputs), (vec![(6, vec![2])], true));
        let t = pick(&ver, std::slice::from_ref(&p), &o, now, &busy(&[2])).expect("due");
        assert_eq!((numbers(&t), t.drop_inputs), (vec![(0, vec![4])], true));
        assert_eq!(t.output_level, 0);
        assert!(pick(&ver, std::slice::from_ref(&p), &o, now, &busy(&[2, 4])).is_none());

        // A cell newer than the delete: rewritten in place (levels >= 1), so the output holds
        // only cells above its timestamp and is no candidate again.
        let mut newer = file(2, 6, "d", "e", 100);
        newer.max_ts = 10 * DAY + 1;
        let ver = v(vec![newer.clone()]);
        let t = pick(&ver, std::slice::from_ref(&p), &o, now, &none()).expect("due");
        assert_eq!(
            (numbers(&t), t.drop_inputs, t.output_level),
            (vec![(6, vec![2])], false, 6)
        );
        let mut output = newer.clone();
        output.min_ts = 10 * DAY + 1;
        assert!(pick(&v(vec![output]), std::slice::from_ref(&p), &o, now, &none()).is_none());
        // ... but not at L0, where the output would land above newer files.
        newer.level = 0;
        assert!(pick(&v(vec![newer]), std::slice::from_ref(&p), &o, now, &none()).is_none());

        // A cell above the horizon (a snapshot below it, or written since), a file older than
        // nothing the delete masks, or no delete: nothing.
        let ver = v(vec![file(2, 6, "d", "e", 100)]);
        let low = range_deleted("c", "m", 10 * DAY, 28);
        assert!(pick(&ver, &[low], &o, now, &none()).is_none());
        let early = range_deleted("c", "m", 0, 1000);
        let mut late = file(2, 6, "d", "e", 100);
        late.min_ts = 1;
        assert!(pick(&v(vec![late]), &[early], &o, now, &none()).is_none());
        assert!(pick(&ver, &[], &o, now, &none()).is_none());
        // An empty stop runs to the end of the table.
        let to_end = range_deleted("c", "", 10 * DAY, 1000);
        let ver = v(vec![file(3, 6, "l", "n", 100)]);
        assert!(pick(&ver, &[to_end], &o, now, &none()).is_some_and(|t| t.drop_inputs));
    }

    #[test]
    fn files_a_range_delete_cuts_are_rewritten_by_the_share_it_covers() {
        let o = opts();
        let now = 11 * DAY;
        // File 3 ("l".."n") is cut by the delete of [c, m); the database estimated what the
        // delete covers of it (`partly_covered`).
        let ver = v(vec![file(2, 6, "d", "e", 100), file(3, 6, "l", "n", 100)]);
        let cut = |covered: u64| FamilyPolicy {
            partly_covered: Arc::from(vec![(3, covered)]),
            ..range_deleted("c", "m", 10 * DAY, 1000)
        };
        // Drops come first, then rewrites of files cut for at least the ratio of their size.
        let t = pick(&ver, &[cut(60)], &o, now, &none()).expect("due");
        assert_eq!((numbers(&t), t.drop_inputs), (vec![(6, vec![2])], true));
        let t = pick(&ver, &[cut(60)], &o, now, &busy(&[2])).expect("due");
        assert_eq!(t.reason, CompactionReason::RangeDelete);
        assert_eq!(
            (numbers(&t), t.drop_inputs, t.output_level),
            (vec![(6, vec![3])], false, 6)
        );
        assert!(pick(&ver, &[cut(49)], &o, now, &busy(&[2])).is_none());
        assert!(pick(&ver, &[cut(60)], &o, now, &busy(&[2, 3])).is_none());
        let never = CompactionOptions {
            range_delete_rewrite_ratio: f64::NAN,
            ..opts()
        };
        assert!(pick(&ver, &[cut(100)], &never, now, &busy(&[2])).is_none());
        // Not at L0 (the output would land above newer files), nor a file above the horizon.
        let mut l0 = file(3, 0, "l", "n", 100);
        assert!(pick(&v(vec![l0.clone()]), &[cut(100)], &o, now, &none()).is_none());
        l0.level = 6;
        l0.max_seq = 1001;
        assert!(pick(&v(vec![l0]), &[cut(100)], &o, now, &none()).is_none());
        // The largest share first.
        let ver = v(vec![file(3, 6, "l", "n", 100), file(4, 6, "o", "p", 100)]);
        let both = FamilyPolicy {
            partly_covered: Arc::from(vec![(3, 60), (4, 90)]),
            ..range_deleted("c", "", 10 * DAY, 1000)
        };
        let t = pick(&ver, &[both], &o, now, &none()).expect("due");
        assert!(t.drop_inputs, "a delete to the end holds both whole: {t:?}");
        let both = FamilyPolicy {
            partly_covered: Arc::from(vec![(3, 60), (4, 90)]),
            ..range_deleted("c", "m", 10 * DAY, 1000)
        };
        let ver = v(vec![file(3, 6, "l", "n", 100), file(4, 6, "a", "d", 100)]);
        let t = pick(&ver, &[both], &o, now, &none()).expect("due");
        assert_eq!(numbers(&t), vec![(6, vec![4])]);
    }

    fn dense(mut f: FileMeta) -> FileMeta {
        f.entries = 100;
        f.deletes = 60;
        f
    }

    #[test]
    fn tombstone_dense_files_go_down_or_into_themselves_at_the_bottom() {
        let o = opts();
        let ver = deep(
            vec![dense(file(1, 4, "a", "c", 100))],
            vec![file(10, 5, "b", "b", 10)],
        );
        let t = pick(&ver, &[], &o, 11 * DAY, &none()).unwrap();
        assert_eq!(t.reason, CompactionReason::TombstoneDensity);
        assert_eq!(numbers(&t), vec![(4, vec![1]), (5, vec![10])]);

        let bottom_dense = v(vec![dense(file(1, 6, "a", "c", 100))]);
        let t = pick(&bottom_dense, &[], &o, 11 * DAY, &none()).unwrap();
        assert_eq!((numbers(&t), t.output_level), (vec![(6, vec![1])], 6));
        assert!(t.bottommost);
        // Markers the purge must keep (KEEP_DELETED_CELLS, or younger than purge_delay): no.
        let keep = FamilyPolicy {
            keep_deleted_cells: true,
            ..FamilyPolicy::plain(1)
        };
        assert!(pick(&bottom_dense, &[keep], &o, 11 * DAY, &none()).is_none());
        let delayed = CompactionOptions {
            purge_delay: Duration::from_millis(2 * DAY),
            ..o.clone()
        };
        assert!(pick(&bottom_dense, &[], &delayed, 11 * DAY, &none()).is_none());
        assert!(pick(&bottom_dense, &[], &delayed, 12 * DAY, &none()).is_some());
        // Too few cells, or not dense enough.
        let mut few = dense(file(1, 6, "a", "c", 100));
        few.entries = 9;
        few.deletes = 9;
        assert!(pick(&v(vec![few]), &[], &o, 11 * DAY, &none()).is_none());
        let mut thin = dense(file(1, 6, "a", "c", 100));
        thin.deletes = 49;
        assert!(pick(&v(vec![thin]), &[], &o, 11 * DAY, &none()).is_none());
        // A dense L0 file is compacted with L0 before the count trigger.
        let t = pick(
            &v(vec![dense(file(1, 0, "a", "c", 100))]),
            &[],
            &o,
            0,
            &none(),
        )
        .unwrap();
        assert_eq!(t.reason, CompactionReason::TombstoneDensity);
        assert!(t.trivial_move, "nothing below it: moved to the base level");
    }

    #[test]
    fn periodic_major_comes_due_with_a_fixed_jitter_per_family() {
        let week = 7 * DAY;
        let o = CompactionOptions {
            periodic_major: Some(Duration::from_millis(week)),
            ..opts()
        };
        let mut a = file(1, 6, "a", "c", 100);
        a.created_ms = 0;
        let ver = v(vec![a, file(2, 0, "a", "b", 10)]);
        let p = jittered_period(week, 0.5, 1);
        assert!((week / 2..=week * 3 / 2).contains(&p));
        assert_eq!(p, jittered_period(week, 0.5, 1), "deterministic");
        assert_ne!(p, jittered_period(week, 0.5, 2), "spread over families");
        assert!(pick(&ver, &[], &o, p, &none()).is_none());
        let t = pick(&ver, &[], &o, p + 1, &none()).unwrap();
        assert_eq!(t.reason, CompactionReason::PeriodicMajor);
        assert_eq!(numbers(&t), vec![(0, vec![2]), (6, vec![1])]);
        assert_eq!(t.output_level, 6);
        assert!(t.bottommost);
        assert!(pick(&ver, &[], &o, p + 1, &busy(&[2])).is_none());
        let zero = CompactionOptions {
            periodic_major: Some(Duration::ZERO),
            ..o.clone()
        };
        assert!(pick(&ver, &[], &zero, u64::MAX, &none()).is_none());
        // Jitter out of range is clamped, NaN is none.
        assert!(jittered_period(week, 5.0, 1) >= week / 100);
        assert_eq!(jittered_period(week, f64::NAN, 1), week);
        assert_eq!(jittered_period(week, 0.0, 3), week);
    }

    #[test]
    fn pick_major_takes_the_whole_family() {
        let o = opts();
        let ver = v(vec![
            file(1, 0, "a", "b", 10),
            file(2, 3, "a", "b", 10),
            file(3, 6, "a", "b", 10),
        ]);
        let t = pick_major(&ver, 1, &o, &none()).unwrap();
        assert_eq!(numbers(&t), vec![(0, vec![1]), (3, vec![2]), (6, vec![3])]);
        assert_eq!(
            (t.output_level, t.bottommost, t.trivial_move, t.reason),
            (6, true, false, CompactionReason::Manual)
        );
        assert!(pick_major(&ver, 1, &o, &busy(&[2])).is_none());
        assert!(pick_major(&ver, 7, &o, &none()).is_none());
        assert!(pick_major(&v(vec![]), 1, &o, &none()).is_none());
    }

    #[test]
    fn nothing_is_picked_when_nothing_is_due() {
        let p = FamilyPolicy {
            ttl: Some(Duration::from_millis(30 * DAY)),
            ..FamilyPolicy::plain(1)
        };
        let o = CompactionOptions {
            periodic_major: Some(Duration::from_millis(7 * DAY)),
            ..opts()
        };
        let mut files: Vec<_> = (1..=3).map(|n| file(n, 0, "a", "z", 10)).collect();
        files.extend(bottom(6, 8, 100));
        let ver = v(files);
        assert!(pick(&ver, std::slice::from_ref(&p), &o, 11 * DAY, &none()).is_none());
        assert!(pick(&v(vec![]), std::slice::from_ref(&p), &o, 11 * DAY, &none()).is_none());
        assert!(scores(&ver, 1, &o, &none()).iter().all(|s| *s < 1.0));
    }

    #[test]
    fn pending_bytes_and_write_pressure() {
        let o = CompactionOptions {
            level0_slowdown_writes_trigger: 6,
            level0_stop_writes_trigger: 8,
            soft_pending_compaction_bytes: 5000,
            hard_pending_compaction_bytes: 20_000,
            ..opts()
        };
        let l0 = |n: u64| -> Vec<FileMeta> { (1..=n).map(|i| file(i, 0, "a", "z", 100)).collect() };
        let quiet = v(l0(3));
        assert_eq!(pending_compaction_bytes(&quiet, 1, &o), 0);
        assert_eq!(write_pressure(&quiet, &o), WritePressure::None);
        // L0 due (4 files, 400 bytes) into base L6 (holding 0): owes the L0 bytes.
        assert_eq!(pending_compaction_bytes(&v(l0(4)), 1, &o), 400);
        assert_eq!(
            write_pressure(&v(l0(6)), &o),
            WritePressure::Slowdown(StallCause::Level0Files)
        );
        assert_eq!(
            write_pressure(&v(l0(8)), &o),
            WritePressure::Stop(StallCause::Level0Files)
        );
        // L5 holds 9000 over a target of 5000 above 50 000 at L6: owes 4000 × (50 000 / 9000 + 1).
        let ver = v(vec![
            file(1, 5, "a", "b", 9000),
            file(2, 6, "a", "z", 50_000),
        ]);
        let owed = pending_compaction_bytes(&ver, 1, &o);
        assert_eq!(owed, (4000.0 * (50_000.0 / 9000.0 + 1.0)) as u64);
        assert_eq!(
            write_pressure(&ver, &o),
            WritePressure::Stop(StallCause::PendingCompactionBytes)
        );
        let lenient = CompactionOptions {
            hard_pending_compaction_bytes: 0,
            ..o.clone()
        };
        assert_eq!(
            write_pressure(&ver, &lenient),
            WritePressure::Slowdown(StallCause::PendingCompactionBytes)
        );
    }

    #[test]
    fn garbage_keys_and_odd_options_do_not_panic() {
        let mut f = file(1, 0, "a", "b", 10);
        f.smallest = vec![0xff; 3];
        f.largest = Vec::new();
        let mut g = file(2, 6, "a", "b", 10);
        g.smallest = vec![
            1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18,
        ];
        let files: Vec<_> = vec![f.clone(), f.clone(), f.clone(), f, g];
        let ver = v(files);
        let o = CompactionOptions {
            level_size_multiplier: 0,
            max_bytes_for_level_base: 0,
            level0_file_num_compaction_trigger: 0,
            tombstone_density_trigger: f64::NAN,
            periodic_major: Some(Duration::MAX),
            ..opts()
        };
        let _ = pick(&ver, &[], &o, u64::MAX, &none());
        let _ = pick(&ver, &[], &o, 0, &none());
        let _ = pending_compaction_bytes(&ver, 1, &o);
        let _ = write_pressure(&ver, &o);
        let _ = level_targets(&ver, 1, &o);
    }
}
