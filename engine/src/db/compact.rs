//! Running compactions (SPEC.md §20): background threads ask the pure picker
//! (`compaction::picker`) for a task, merge its inputs in key order, judge every cell with the
//! purge rules (`compaction::purge`, built on the read path's resolver), write the survivors to
//! new HFiles cut at row boundaries, and install them with one manifest edit. Inputs are
//! deleted only once no super-version lists them any more: a scan holding an old super-version
//! keeps reading them (it may open them lazily, by path).
//!
//! Tasks whose files are disjoint run at once: a task marks its input files *busy* and the
//! picker never hands out a task touching a busy file (or overlapping one at the output level).
//! A failed compaction removes its partial outputs and is retried later; only a failed manifest
//! write poisons the database (the manifest may no longer match the files).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use cellar_format::{HFileWriter, KeyRef};
use parking_lot::Mutex;

use super::flush::{file_meta, NewHFile};
use super::graveyard::Graveyard;
use super::sv::SuperVersion;
use super::DbInner;
use crate::compaction::cut::OutputCutter;
use crate::compaction::picker::{self, StallCause, WritePressure};
use crate::compaction::purge::{
    range_delete_purgeable, Decision, DropCounts, DropReason, PurgeParams, Purger,
};
use crate::compaction::{CompactionTask, FamilyPolicy};
use crate::error::{Error, Result};
use crate::fs::{AppendWriter, File};
use crate::manifest::{self, VersionEdit, NUM_LEVELS};
use crate::read::merge::{HFileCellIter, MergeIter};
use crate::read::range_index::RangeDeletes;
use crate::schema::FamilyDescriptor;
use crate::types::{CellIter, FamilyId, FileMeta, FileNumber, SeqNo};

/// How long an idle compaction thread sleeps before looking again for time-driven work (TTL,
/// periodic major compaction) that no flush announces.
const IDLE_RECHECK: Duration = Duration::from_secs(10);

/// After a failed compaction, the thread waits this long before picking again, so a full disk
/// does not turn into a busy loop of doomed rewrites.
const ERROR_BACKOFF: Duration = Duration::from_secs(1);

/// Bytes between two rate-limiter charges while writing outputs.
const RATE_CHUNK: u64 = 256 << 10;

/// The compaction scheduler's shared state, under `DbInner::compaction`.
#[derive(Debug, Default)]
pub(super) struct CompactState {
    /// Files read by running tasks.
    busy: BTreeSet<FileNumber>,
    /// Families a manual major compaction waits for: background threads leave them alone so
    /// the manual one is not starved.
    manual: BTreeSet<FamilyId>,
    /// Families an ingestion is loading files into (`db/ingest.rs`): no task may start on
    /// them, as the ingestion places its files by the levels it sees.
    ingesting: BTreeSet<FamilyId>,
    /// Replaced files still listed by some live super-version, deleted once none does.
    graveyard: Graveyard<Arc<FileMeta>>,
    /// Running tasks.
    running: usize,
    /// Estimates of what row-range deletes cover of the files they cut.
    cover: CoverCache,
}

/// File number → (fingerprint of the deletes that cut it, bytes they cover): see
/// [`DbInner::partly_covered`].
type CoverCache = std::collections::HashMap<FileNumber, (u64, u64)>;

/// Counters of one level, as compaction sees it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LevelStats {
    /// Compactions whose output went to this level.
    pub compactions: u64,
    /// Bytes read from this level by compactions.
    pub bytes_read: u64,
    /// Bytes compactions wrote into this level (flushes count for L0).
    pub bytes_written: u64,
    /// Bytes read, by the compactions writing into this level, from the level above.
    pub bytes_read_from_above: u64,
    /// Files compactions wrote into this level.
    pub files_written: u64,
    /// Time spent in compactions writing into this level, microseconds.
    pub micros: u64,
    /// Files in the level now (all families).
    pub files: u64,
    /// Bytes in the level now (all families).
    pub bytes: u64,
}

impl LevelStats {
    /// RocksDB's per-level write amplification: bytes written into the level per byte read
    /// from the level above by those compactions (0 when nothing came from above).
    pub fn write_amplification(&self) -> f64 {
        if self.bytes_read_from_above == 0 {
            0.0
        } else {
            self.bytes_written as f64 / self.bytes_read_from_above as f64
        }
    }
}

/// What compaction has done, overall.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct CompactionStats {
    /// Per level, `NUM_LEVELS` entries.
    pub levels: Vec<LevelStats>,
    /// Compactions run (trivial moves included), by reason name.
    pub by_reason: BTreeMap<&'static str, u64>,
    /// Trivial moves (a file moved down without a rewrite).
    pub trivial_moves: u64,
    /// Compactions that failed (and were retried later).
    pub failures: u64,
    /// Files removed unread because a row-range delete masked every cell in them (the
    /// `range-delete` trigger, SPEC.md §20.1), and their bytes.
    pub files_dropped: u64,
    /// See `files_dropped`.
    pub bytes_dropped: u64,
    /// Row-range deletes that left the manifest with a compaction's edit, once nothing they
    /// mask was left (SPEC.md §20.2 rule 4); `Stats::range_deletes` counts the live ones.
    pub range_deletes_gone: u64,
    /// Cells read by compactions.
    pub cells_read: u64,
    /// Cells written by compactions.
    pub cells_written: u64,
    /// Cells dropped by flushes and compactions, by reason: duplicate, too many versions,
    /// expired, masked, marker.
    pub dropped: BTreeMap<&'static str, u64>,
    /// Bytes compaction still owes (the picker's estimate), all families.
    pub pending_bytes: u64,
    /// Compactions running now.
    pub running: u64,
    /// Replaced files not yet deleted because a reader may still use them.
    pub awaiting_deletion: u64,
    /// Writes slowed by L0 file count / by pending compaction bytes.
    pub slowdowns_l0: u64,
    /// See `slowdowns_l0`.
    pub slowdowns_pending: u64,
    /// Writes stopped by L0 file count / by pending compaction bytes.
    pub stops_l0: u64,
    /// See `stops_l0`.
    pub stops_pending: u64,
    /// Time writers spent stopped or slowed by compaction debt, microseconds.
    pub stall_micros: u64,
}

/// LevelDB's seek compaction: a Get that has to search two or more files (in HBase's model,
/// every file whose bloom filter passes the row) charges the newest of them; a file that runs
/// out of budget is compacted down when nothing else is due, so the cells it shares with older
/// files meet in one. After a write-heavy phase, L0 is left with up to `level0_file_num_
/// compaction_trigger - 1` files that every Get of a row in them pays for again; a read-heavy
/// phase then folds them into the base level instead of paying forever. The budget is LevelDB's:
/// one seek costs about what compacting 16 KiB does, so `size / 16 KiB`, at least 100.
#[derive(Debug, Default)]
pub(super) struct SeekBudgets {
    shards: [Mutex<HashMap<FileNumber, i64>>; 16],
}

impl SeekBudgets {
    fn budget(size: u64) -> i64 {
        i64::try_from(size / (16 << 10))
            .unwrap_or(i64::MAX)
            .max(100)
    }

    fn shard(&self, file: FileNumber) -> &Mutex<HashMap<FileNumber, i64>> {
        &self.shards[(file % 16) as usize]
    }

    /// Charge one search to `file`; true when this one exhausted its budget.
    pub(super) fn charge(&self, file: &FileMeta) -> bool {
        let mut m = self.shard(file.number).lock();
        let left = m
            .entry(file.number)
            .or_insert_with(|| Self::budget(file.size));
        *left -= 1;
        *left == 0
    }

    /// Forget deleted files.
    pub(super) fn forget(&self, files: &[FileNumber]) {
        for &n in files {
            self.shard(n).lock().remove(&n);
        }
    }
}

/// Bytes-per-second budget shared by the compaction threads.
#[derive(Debug)]
pub(super) struct RateLimiter {
    rate: Option<u64>,
    /// Time at which the budget spent so far is paid off.
    free_at: Mutex<Instant>,
}

impl RateLimiter {
    pub(super) fn new(rate: Option<u64>) -> Self {
        RateLimiter {
            rate: rate.filter(|&r| r > 0),
            free_at: Mutex::new(Instant::now()),
        }
    }

    /// Spend `bytes`, sleeping when the budget is ahead of the clock.
    fn request(&self, bytes: u64) {
        let Some(rate) = self.rate else { return };
        let cost = Duration::from_secs_f64(bytes as f64 / rate as f64);
        let wait = {
            let mut f = self.free_at.lock();
            let now = Instant::now();
            // Unused budget does not pile up beyond one second's worth of burst.
            let start = (*f).max(now.checked_sub(Duration::from_secs(1)).unwrap_or(now));
            *f = start + cost;
            f.saturating_duration_since(now)
        };
        if !wait.is_zero() {
            std::thread::sleep(wait);
        }
    }
}

/// One output being written.
struct Output {
    number: FileNumber,
    path: std::path::PathBuf,
    file: Arc<dyn File>,
    writer: HFileWriter<AppendWriter>,
    min_seq: u64,
    last_row: Vec<u8>,
    /// Bytes already charged to the rate limiter.
    charged: u64,
}

impl DbInner {
    /// What the picker knows of each family, minus those a manual compaction waits for or
    /// an ingestion holds. `horizon` is [`DbInner::smallest_snapshot`]: the row-range deletes
    /// at or below it are the ones compactions apply in full (classic families with
    /// KEEP_DELETED_CELLS FALSE only: the others keep what a delete masks).
    fn policies(
        &self,
        sv: &SuperVersion,
        skip: &BTreeSet<FamilyId>,
        held: &BTreeSet<FamilyId>,
        horizon: SeqNo,
        cover: &mut CoverCache,
    ) -> Vec<FamilyPolicy> {
        use crate::schema::KeepDeletedCells;
        // One pass over the tables (`SuperVersion::range_deletes` searches them per family).
        let with_deletes: BTreeMap<FamilyId, &RangeDeletes> = sv
            .tables
            .values()
            .flat_map(|t| &t.families)
            .filter(|f| !f.range_deletes.is_empty())
            .map(|f| (f.id, &*f.range_deletes))
            .collect();
        let mut seen = BTreeSet::new();
        let mut v: Vec<FamilyPolicy> = sv
            .families
            .iter()
            .filter(|(id, _)| !skip.contains(id) && !held.contains(id))
            .map(|(&family, d)| {
                let range_deletes: Arc<[crate::types::RangeDelete]> =
                    match with_deletes.get(&family) {
                        Some(list) if applies_range_deletes(d) => list
                            .list()
                            .iter()
                            .filter(|r| r.seq <= horizon)
                            .cloned()
                            .collect(),
                        _ => Arc::from(Vec::new()),
                    };
                let partly_covered =
                    self.partly_covered(sv, family, &range_deletes, horizon, cover, &mut seen);
                FamilyPolicy {
                    family,
                    ttl: d.ttl,
                    min_versions: d.min_versions,
                    keep_deleted_cells: d.keep_deleted_cells != KeepDeletedCells::False,
                    range_deletes,
                    purge_horizon: horizon,
                    partly_covered,
                }
            })
            .collect();
        // Forget the files no longer cut (compacted away, or their deletes gone).
        cover.retain(|n, _| seen.contains(n));
        v.sort_by_key(|p| p.family);
        v
    }

    /// [`FamilyPolicy::partly_covered`] of one family: its L1..L6 files at or below the
    /// horizon that the `ripe` deletes above their `range_clean`, and at or after their
    /// oldest cell, overlap without one of them holding the file whole; with the bytes of
    /// data the union of those deletes covers, from the index as [`Table::estimate_range`]
    /// finds it (a block's size per end). Estimates are kept in `cover` while the deletes
    /// that cut a file stay the same; a file whose index cannot be read is left out (the
    /// reads that need it report the error).
    ///
    /// [`Table::estimate_range`]: crate::Table::estimate_range
    fn partly_covered(
        &self,
        sv: &SuperVersion,
        family: FamilyId,
        ripe: &[crate::types::RangeDelete],
        horizon: SeqNo,
        cover: &mut CoverCache,
        seen: &mut BTreeSet<FileNumber>,
    ) -> Arc<[(FileNumber, u64)]> {
        let Some(levels) = sv.version.levels(family) else {
            return Arc::from(Vec::new());
        };
        if ripe.is_empty() {
            return Arc::from(Vec::new());
        }
        let mut out = Vec::new();
        for f in levels.iter().skip(1).flatten() {
            if f.max_seq > horizon {
                continue;
            }
            let rows = crate::compaction::picker::Rows::of(f);
            let mut cut: Vec<&crate::types::RangeDelete> =
                ripe.iter().filter(|d| may_hold(f, d)).collect();
            if cut.is_empty() || cut.iter().any(|d| d.covers(rows.lo) && d.covers(rows.hi)) {
                continue;
            }
            cut.sort_by(|a, b| a.start.cmp(&b.start));
            let fingerprint = cut.iter().fold(cut.len() as u64, |h, d| {
                h.wrapping_mul(0x9E37_79B9_7F4A_7C15).wrapping_add(d.seq)
            });
            seen.insert(f.number);
            let bytes = match cover.get(&f.number) {
                Some(&(fp, bytes)) if fp == fingerprint => bytes,
                _ => match self.covered_bytes(f, &cut) {
                    Ok(bytes) => {
                        cover.insert(f.number, (fingerprint, bytes));
                        bytes
                    }
                    Err(e) => {
                        tracing::warn!(file = f.number, error = %e, "estimating what row-range deletes cover");
                        continue;
                    }
                },
            };
            out.push((f.number, bytes));
        }
        out.sort_unstable_by_key(|&(n, _)| n);
        Arc::from(out)
    }

    /// The bytes of `f` in the union of the ranges of `cut` (sorted by start), its data
    /// region's share applied to the whole file.
    fn covered_bytes(&self, f: &FileMeta, cut: &[&crate::types::RangeDelete]) -> Result<u64> {
        use cellar_format::cell::CellKey;
        use cellar_format::KeyRef;
        let r = self.reader(f.family, f.number)?;
        let end = r.data_blocks_end()?;
        let offset = |at: &[u8]| -> Result<u64> {
            let key = CellKey::first_on_row(at).encode();
            let key = KeyRef::parse(&key).map_err(|m| {
                Error::InvalidArgument(format!("a range delete's bound does not make a key: {m}"))
            })?;
            Ok(r.data_block_for(&key)?.map_or(end, |h| h.offset))
        };
        // Merge the ranges, then add up each piece's blocks.
        let mut part = 0u64;
        let mut piece: Option<(&[u8], &[u8])> = None;
        let mut add = |(a, b): (&[u8], &[u8])| -> Result<()> {
            let from = offset(a)?;
            let to = if b.is_empty() { end } else { offset(b)? };
            part += to.saturating_sub(from);
            Ok(())
        };
        for d in cut {
            piece = match piece {
                // Overlapping or touching: one piece (an empty stop runs to the end).
                Some((a, b)) if b.is_empty() || d.start.as_slice() <= b => {
                    let stop = if b.is_empty() || d.stop.is_empty() {
                        &[][..]
                    } else {
                        b.max(d.stop.as_slice())
                    };
                    Some((a, stop))
                }
                Some(done) => {
                    add(done)?;
                    Some((d.start.as_slice(), d.stop.as_slice()))
                }
                None => Some((d.start.as_slice(), d.stop.as_slice())),
            };
        }
        if let Some(done) = piece {
            add(done)?;
        }
        let share = u128::from(f.size) * u128::from(part.min(end)) / u128::from(end.max(1));
        Ok(share as u64)
    }

    /// A compaction thread: pick, run, repeat, until shutdown or poisoning.
    pub(super) fn compaction_loop(&self) {
        loop {
            let task = {
                let mut st = self.compaction.lock();
                // Once each time the thread wakes with nothing to compact.
                let mut retire = true;
                loop {
                    if self.shutdown.load(Ordering::SeqCst) || self.poisoned.lock().is_some() {
                        return;
                    }
                    let sv = self.sv();
                    let horizon = self.smallest_snapshot();
                    let pols = {
                        let s = &mut *st;
                        self.policies(&sv, &s.manual, &s.ingesting, horizon, &mut s.cover)
                    };
                    let mut t = picker::pick(
                        &sv.version,
                        &pols,
                        &self.opts.compaction,
                        self.opts.clock.now_ms(),
                        &st.busy,
                    );
                    if t.is_none() {
                        t = self.pick_seek(&sv, &st);
                    }
                    drop(sv);
                    if let Some(t) = t {
                        st.busy.extend(t.input_files().map(|f| f.number));
                        st.running += 1;
                        break t;
                    }
                    if retire {
                        retire = false;
                        // Unlocked: the edit takes the switch gate and the manifest lock,
                        // which a flush takes before this one. Picked again after: a kick
                        // meanwhile found no thread waiting.
                        let r = parking_lot::MutexGuard::unlocked(&mut st, || {
                            self.retire_idle_range_deletes()
                        });
                        if let Err(e) = r {
                            tracing::warn!(error = %e, "could not remove spent row-range deletes");
                        }
                        continue;
                    }
                    self.collect_garbage(&mut st);
                    self.compaction_cv.wait_for(&mut st, IDLE_RECHECK);
                    retire = true;
                }
            };
            let r = self.run_task(&task);
            let failed = r.is_err();
            if let Err(e) = r {
                self.note_failure(&task, &e);
            }
            self.finish_task(task);
            let mut st = self.compaction.lock();
            if failed {
                self.compaction_cv.wait_for(&mut st, ERROR_BACKOFF);
            }
        }
    }

    /// The compaction of the file whose seek budget ran out (see [`SeekBudgets`]), when
    /// nothing else is due; the hint is dropped once it is taken or its file is gone.
    fn pick_seek(&self, sv: &SuperVersion, st: &CompactState) -> Option<CompactionTask> {
        let mut hint = self.seek_hint.lock();
        let (family, file) = (*hint)?;
        if st.ingesting.contains(&family) || st.manual.contains(&family) {
            // Kept for when the family is free again.
            return None;
        }
        if !sv.families.contains_key(&family) {
            *hint = None;
            return None;
        }
        let t = picker::pick_seek(&sv.version, family, file, &self.opts.compaction, &st.busy);
        let gone = !sv.version.all_files().any(|f| f.number == file);
        if t.is_some() || gone {
            *hint = None;
        }
        t
    }

    /// A Get searched `files` (two or more): charge the newest, and ask for its compaction
    /// when its budget runs out.
    pub(super) fn charge_seek(&self, files: &super::read::Searched<'_>) {
        let Some(first) = files.first else { return };
        if files.count < 2 || !self.seek_budgets.charge(first) {
            return;
        }
        let mut hint = self.seek_hint.lock();
        if hint.is_none() {
            *hint = Some((first.family, first.number));
            drop(hint);
            self.kick_compaction();
        }
    }

    fn note_failure(&self, task: &CompactionTask, e: &Error) {
        self.cstats.lock().failures += 1;
        tracing::error!(
            family = task.family,
            reason = task.reason.name(),
            error = %e,
            "compaction failed; inputs kept, will retry"
        );
        // Only a failed manifest write poisons: a failed output (a full disk included) was
        // removed and the task is retried after a back-off.
        let manifest_poison = self.manifest.lock().0.poison_reason().cloned();
        if let Some(p) = manifest_poison {
            self.poison(p);
        }
    }

    /// Takes the task by value: its references to the input files must be gone before
    /// `running` drops, or a `wait_for_compactions` returning at that moment collects nothing
    /// and the replaced files stay on disk until the next pass (up to `IDLE_RECHECK`), which
    /// measurements of the size on disk caught.
    fn finish_task(&self, task: CompactionTask) {
        let inputs: Vec<FileNumber> = task.input_files().map(|f| f.number).collect();
        drop(task);
        let mut st = self.compaction.lock();
        for n in &inputs {
            st.busy.remove(n);
        }
        st.running = st.running.saturating_sub(1);
        self.collect_garbage(&mut st);
        self.compaction_cv.notify_all();
    }

    /// Wake the compaction threads (a flush added files, a table changed).
    pub(super) fn kick_compaction(&self) {
        let _g = self.compaction.lock();
        self.compaction_cv.notify_all();
    }

    /// Hand the files of dropped tables and families (already out of the current version) to
    /// the graveyard, and delete those no reader holds: a scan open on a table being dropped
    /// reads on from its super-version, as it does across a compaction. Their cached blocks
    /// go now.
    pub(super) fn retire_files(&self, files: Vec<Arc<FileMeta>>) {
        self.bury_files(files);
        self.collect_garbage(&mut self.compaction.lock());
    }

    /// Hand files that have left the current version to the graveyard, and evict them from
    /// the block and open-file caches now (see the compaction install for why now).
    fn bury_files(&self, files: Vec<Arc<FileMeta>>) {
        let numbers: Vec<FileNumber> = files.iter().map(|f| f.number).collect();
        {
            let mut st = self.compaction.lock();
            for f in files {
                st.graveyard.bury(f);
            }
        }
        self.evict_files(&numbers);
    }

    /// Delete replaced files that no super-version lists any more. A `FileMeta` is shared by
    /// every version listing it, so when the graveyard's `Arc` is the last one, no reader can
    /// reach the file.
    fn collect_garbage(&self, st: &mut CompactState) {
        let dead = st.graveyard.collect();
        if dead.is_empty() {
            return;
        }
        let numbers: Vec<FileNumber> = dead.iter().map(|f| f.number).collect();
        self.evict_files(&numbers);
        let mut dirs = BTreeSet::new();
        for f in &dead {
            let p = manifest::hfile_path(&self.dir, f.family, f.number);
            match self.fs.remove(&p) {
                Ok(()) => tracing::debug!(file = %p.display(), "deleted a compacted file"),
                Err(e) => {
                    tracing::warn!(file = %p.display(), error = %e, "could not delete a compacted file")
                }
            }
            dirs.insert(manifest::family_dir(&self.dir, f.family));
        }
        for d in dirs {
            let _ = self.fs.sync_dir(&d);
        }
    }

    /// Compact every file of `family` (or of every family of the table) into the last level,
    /// purging what HBase's major compaction purges. Waits for running compactions of those
    /// families; returns once the result is installed.
    pub(super) fn major_compact(&self, families: &[FamilyId]) -> Result<()> {
        for &family in families {
            self.check_poisoned()?;
            let task = {
                let mut st = self.compaction.lock();
                st.manual.insert(family);
                let t = loop {
                    if let Some(why) = self.poisoned.lock().clone() {
                        st.manual.remove(&family);
                        return Err(Error::Poisoned(why));
                    }
                    let sv = self.sv();
                    let levels = sv.version.levels(family);
                    let any_busy = levels
                        .is_some_and(|ls| ls.iter().flatten().any(|f| st.busy.contains(&f.number)));
                    if !any_busy && !st.ingesting.contains(&family) {
                        break picker::pick_major(
                            &sv.version,
                            family,
                            &self.opts.compaction,
                            &st.busy,
                        );
                    }
                    drop(sv);
                    self.compaction_cv
                        .wait_for(&mut st, Duration::from_millis(100));
                };
                match t {
                    Some(t) => {
                        st.busy.extend(t.input_files().map(|f| f.number));
                        st.running += 1;
                        t
                    }
                    None => {
                        st.manual.remove(&family);
                        drop(st);
                        // No file to rewrite: a row-range delete whose cells all went at flushes
                        // (or were never written) can still leave.
                        self.retire_range_deletes(family)?;
                        continue;
                    }
                }
            };
            let r = self.run_task(&task);
            if let Err(e) = &r {
                self.note_failure(&task, e);
            }
            self.finish_task(task);
            {
                let mut st = self.compaction.lock();
                st.manual.remove(&family);
                self.collect_garbage(&mut st);
            }
            r?;
        }
        Ok(())
    }

    /// The purge parameters a bottommost compaction would judge row-range deletes by now:
    /// those under which `range_delete_purgeable` calls a delete ripe (SPEC.md §20.2 rule 4).
    fn ripe_params(&self) -> PurgeParams {
        PurgeParams::new(self.smallest_snapshot(), 0, self.opts.clock.now_ms())
            .bottommost(true)
            .purge_delay(self.opts.compaction.purge_delay)
    }

    /// Remove the ripe row-range deletes of `family` that no file may hold a cell of (SPEC.md
    /// §20.2 rule 4, the second way) in an edit of their own, without a compaction: a delete
    /// whose cells all went at flushes or with files the trigger dropped or rewrote, or that
    /// met no cell at all, otherwise stays until the family's next compaction, and one that
    /// never comes (a quiet family) keeps it for good, taking a place in every read's index.
    /// Returns how many left. Looked for first under the manifest lock alone, so a delete some
    /// file still holds costs the writers nothing; the exclusive switch gate (no memstore
    /// changes) is taken only when one may leave, and the check repeated under it.
    pub(super) fn retire_range_deletes(&self, family: FamilyId) -> Result<u64> {
        let sv = self.sv();
        let Some(desc) = sv.families.get(&family).cloned() else {
            return Ok(0);
        };
        if sv.range_deletes(family).is_empty() {
            return Ok(0);
        }
        drop(sv);
        let params = self.ripe_params();
        let ripe = |d: &crate::types::RangeDelete| range_delete_purgeable(&desc, &params, d);
        // No inputs: every file of the family stays, so only the "no file may hold it" way
        // applies (and, for a family with no file, it is what a major compaction would do).
        let none = CompactionTask {
            family,
            inputs: Vec::new(),
            output_level: (NUM_LEVELS - 1) as u32,
            trivial_move: false,
            drop_inputs: false,
            bottommost: true,
            target_file_size: 0,
            reason: crate::compaction::CompactionReason::Manual,
        };
        {
            let m = self.manifest.lock();
            if spent_range_deletes(&m.1, &self.sv(), &none, &[], &[], &ripe).is_empty() {
                return Ok(0);
            }
        }
        let _exclusive = self.switch.exclusive();
        let mut m = self.manifest.lock();
        let (man, state) = &mut *m;
        let gone = spent_range_deletes(state, &self.sv(), &none, &[], &[], &ripe);
        if gone.is_empty() {
            return Ok(0);
        }
        let edit = VersionEdit {
            range_deletes_gone: gone,
            ..VersionEdit::default()
        };
        let n = edit.range_deletes_gone.len() as u64;
        if let Err(e) = man.log_and_apply(state, edit) {
            if let Some(p) = man.poison_reason() {
                self.poison(p.clone());
            }
            return Err(e);
        }
        let current = self.sv();
        *self.sv.write() = Arc::new(SuperVersion::build(state, Some(&current)));
        drop(m);
        self.cstats.lock().range_deletes_gone += n;
        tracing::debug!(
            family,
            deletes = n,
            "row-range deletes left without a compaction"
        );
        Ok(n)
    }

    /// [`DbInner::retire_range_deletes`] for every family that has a ripe row-range delete and
    /// that no ingestion or manual major compaction holds: what the compaction threads do
    /// when they find nothing to compact, and `wait_for_compactions` before it returns.
    pub(super) fn retire_idle_range_deletes(&self) -> Result<u64> {
        let (held, sv) = {
            let st = self.compaction.lock();
            let held: BTreeSet<FamilyId> = st.ingesting.union(&st.manual).copied().collect();
            (held, self.sv())
        };
        let params = self.ripe_params();
        let families: Vec<FamilyId> = sv
            .tables
            .values()
            .flat_map(|t| &t.families)
            .filter(|f| !held.contains(&f.id))
            .filter(|f| {
                f.range_deletes
                    .list()
                    .iter()
                    .any(|d| range_delete_purgeable(&f.descriptor, &params, d))
            })
            .map(|f| f.id)
            .collect();
        drop(sv);
        let mut n = 0;
        for family in families {
            n += self.retire_range_deletes(family)?;
        }
        Ok(n)
    }

    /// Keep compaction away from `family` for an ingestion: marks it held, then waits until
    /// none of its files is in a running task. One ingestion at a time holds a family; a
    /// second waits for the first. Released (and the compaction threads woken) by
    /// [`DbInner::release_ingest_hold`].
    pub(super) fn hold_for_ingest(&self, family: FamilyId) -> Result<()> {
        let mut st = self.compaction.lock();
        while st.ingesting.contains(&family) {
            if let Some(why) = self.poisoned.lock().clone() {
                return Err(Error::Poisoned(why));
            }
            self.compaction_cv
                .wait_for(&mut st, Duration::from_millis(100));
        }
        st.ingesting.insert(family);
        loop {
            if let Some(why) = self.poisoned.lock().clone() {
                st.ingesting.remove(&family);
                self.compaction_cv.notify_all();
                return Err(Error::Poisoned(why));
            }
            let sv = self.sv();
            let busy = sv
                .version
                .levels(family)
                .is_some_and(|ls| ls.iter().flatten().any(|f| st.busy.contains(&f.number)));
            drop(sv);
            if !busy {
                return Ok(());
            }
            self.compaction_cv
                .wait_for(&mut st, Duration::from_millis(100));
        }
    }

    /// End [`DbInner::hold_for_ingest`].
    pub(super) fn release_ingest_hold(&self, family: FamilyId) {
        let mut st = self.compaction.lock();
        st.ingesting.remove(&family);
        self.compaction_cv.notify_all();
    }

    /// Run one task to the end: outputs written and synced, the edit logged, the super-version
    /// swapped, the inputs handed to the graveyard.
    fn run_task(&self, task: &CompactionTask) -> Result<()> {
        let started = Instant::now();
        let span = tracing::info_span!(
            "compaction",
            family = task.family,
            reason = task.reason.name(),
            output_level = task.output_level,
            inputs = task.input_files().count(),
            input_bytes = task.input_bytes(),
            trivial = task.trivial_move,
        );
        let _enter = span.enter();
        // Every row-range delete at or below this read point is in the super-version taken
        // next (a delete's super-version is installed before its seq becomes visible).
        let deletes_known = self.visibility.read_point();
        let sv = self.sv();
        let Some(desc) = sv.families.get(&task.family).cloned() else {
            // Dropped since it was picked: its files go with the table.
            return Ok(());
        };
        // The deletes this compaction applies; only these can leave with it.
        let range_deletes = sv.range_deletes(task.family);
        drop(sv);
        let mut dropped_unread = false;
        let (mut outputs, cells_read, dropped, purge_horizon, spent) = if task.trivial_move {
            let moved = task
                .input_files()
                .map(|f| FileMeta {
                    level: task.output_level,
                    ..FileMeta::clone(f)
                })
                .collect();
            (moved, 0, [0u64; 5], 0, Vec::new())
        } else if let Some(unread) = self.drop_unread(task, &desc, &range_deletes) {
            dropped_unread = true;
            unread
        } else {
            self.write_outputs(task, &desc, &range_deletes)?
        };
        if !task.trivial_move && applies_range_deletes(&desc) {
            // The merge dropped every cell at or below the purge horizon that a delete at or
            // below both the horizon and the deletes it was given masks (rules 3 and 7).
            let clean = purge_horizon.min(deletes_known);
            for o in &mut outputs {
                if o.max_seq <= clean {
                    o.range_clean = clean;
                }
            }
        }
        let out_bytes: u64 = if task.trivial_move {
            0
        } else {
            outputs.iter().map(|f| f.size).sum()
        };
        let cells_written: u64 = outputs.iter().map(|f| f.entries).sum();
        let mut edit = VersionEdit {
            deleted_files: task
                .input_files()
                .map(|f| (f.family, f.level, f.number))
                .collect(),
            added_files: outputs.clone(),
            ..VersionEdit::default()
        };
        // Ripe as a major compaction would judge it now (the file checks stand in for reading
        // every file); taken before the gate, as the merge took its own.
        let ripe_params = self.ripe_params();
        let ripe = |d: &crate::types::RangeDelete| range_delete_purgeable(&desc, &ripe_params, d);
        let range_deletes_gone;
        {
            let _exclusive = self.switch.exclusive();
            let mut m = self.manifest.lock();
            let (man, state) = &mut *m;
            edit.range_deletes_gone =
                spent_range_deletes(state, &self.sv(), task, &outputs, &spent, &ripe);
            range_deletes_gone = edit.range_deletes_gone.len() as u64;
            if state.family(task.family).is_none() {
                drop(m);
                drop(_exclusive);
                if !task.trivial_move {
                    self.remove_outputs(&outputs);
                }
                return Ok(());
            }
            if let Err(e) = man.log_and_apply(state, edit) {
                // A failed write or sync may still have made the edit durable (RocksDB #4990):
                // the outputs stay unless the manifest is known not to reference them.
                let maybe_logged = man.is_poisoned();
                drop(m);
                drop(_exclusive);
                if !maybe_logged && !task.trivial_move {
                    self.remove_outputs(&outputs);
                }
                return Err(e);
            }
            let current = self.sv();
            let mut next = SuperVersion::build(state, Some(&current));
            next.purge_horizon = next.purge_horizon.max(purge_horizon);
            *self.sv.write() = Arc::new(next);
            if task.trivial_move {
                // Readers of older versions reach the moved file through its old entry.
                // Registered before the manifest lock goes: a drop of the table (which takes
                // it) could otherwise retire the file's new entry first. A compaction cannot:
                // the file's number stays busy until this task finishes. (Lock order:
                // manifest, then compaction; nothing holding the compaction lock takes the
                // manifest or the switch gate.)
                let mut st = self.compaction.lock();
                for f in task.input_files() {
                    st.graveyard.moved(f.clone());
                }
            }
        }
        crate::kill_point!("compaction.after_manifest");
        self.update_pressure();
        if !task.trivial_move {
            // The inputs' blocks go from the block cache now, not when the files are deleted:
            // no new read uses them, and until the graveyard's next pass (up to
            // IDLE_RECHECK later) they would hold cache room beside the outputs' blocks, so a
            // compaction during reads filled the cache past the live data (peak RSS in
            // `compare`, benches/RESULTS.md). A read still on the old version reads them from
            // the file again. Their readers leave the open-file cache too: a scan holding one
            // keeps it, and the last holder's drop closes the file and gives back the meta
            // blocks the reader pinned (charged to the block cache) at once, not at that pass.
            // (Their seek budgets go too: no Get on the current version charges them.)
            self.bury_files(task.input_files().cloned().collect());
        }
        let micros = started.elapsed().as_micros() as u64;
        {
            let mut cs = self.cstats.lock();
            if cs.levels.len() < NUM_LEVELS {
                cs.levels.resize(NUM_LEVELS, LevelStats::default());
            }
            *cs.by_reason.entry(task.reason.name()).or_default() += 1;
            if task.trivial_move {
                cs.trivial_moves += 1;
            }
            if dropped_unread {
                cs.files_dropped += task.input_files().count() as u64;
                cs.bytes_dropped += task.input_bytes();
            }
            cs.range_deletes_gone += range_deletes_gone;
            cs.cells_read += cells_read;
            cs.cells_written += if task.trivial_move { 0 } else { cells_written };
            for (name, n) in DROP_NAMES.iter().zip(dropped) {
                *cs.dropped.entry(name).or_default() += n;
            }
            let out = task.output_level as usize;
            for (level, files) in &task.inputs {
                let bytes: u64 = files.iter().map(|f| f.size).sum();
                let read = if task.trivial_move || dropped_unread {
                    0
                } else {
                    bytes
                };
                if let Some(l) = cs.levels.get_mut(*level as usize) {
                    l.bytes_read += read;
                }
                if (*level as usize) < out {
                    if let Some(l) = cs.levels.get_mut(out) {
                        l.bytes_read_from_above += read;
                    }
                }
            }
            if let Some(l) = cs.levels.get_mut(out) {
                l.compactions += 1;
                l.bytes_written += out_bytes;
                l.files_written += if task.trivial_move {
                    0
                } else {
                    outputs.len() as u64
                };
                l.micros += micros;
            }
        }
        tracing::info!(
            outputs = outputs.len(),
            output_bytes = out_bytes,
            cells_read,
            cells_written,
            ms = micros / 1000,
            "compacted"
        );
        Ok(())
    }

    /// A `drop_inputs` task (picker trigger 3): no outputs, nothing read, every input cell
    /// counted dropped (puts masked, markers as markers; SPEC.md §20.2 rules 3 and 7), and
    /// the deletes the edit may remove, as [`DbInner::write_outputs`] returns them. `None`
    /// when the task is not one, or when its inputs are no longer all at or below the oldest
    /// read point (then the ordinary merge judges them). The picker chose the inputs for a
    /// delete that covers all their rows and timestamps; the delete is still there, since
    /// only a compaction of every file of the family removes one, and these are busy.
    fn drop_unread(
        &self,
        task: &CompactionTask,
        desc: &FamilyDescriptor,
        range_deletes: &RangeDeletes,
    ) -> Option<Written> {
        if !task.drop_inputs {
            return None;
        }
        let smallest_snapshot = self.smallest_snapshot();
        let largest_seq = task.input_files().map(|f| f.max_seq).max().unwrap_or(0);
        if largest_seq > smallest_snapshot {
            return None;
        }
        let (_, spent) =
            self.purge_params(task, desc, range_deletes, smallest_snapshot, largest_seq);
        let mut dropped = [0u64; 5];
        for f in task.input_files() {
            let markers = f.deletes.min(f.entries);
            dropped[drop_index(DropReason::Masked)] += f.entries - markers;
            dropped[drop_index(DropReason::Marker)] += markers;
        }
        tracing::info!(
            files = task.input_files().count(),
            bytes = task.input_bytes(),
            "dropped files a row-range delete masks whole"
        );
        Some((Vec::new(), 0, dropped, smallest_snapshot, spent))
    }

    /// The purge rules' parameters for `task`, and the row-range deletes they let go:
    /// removable if the install finds the inputs were every file of the family.
    fn purge_params(
        &self,
        task: &CompactionTask,
        desc: &FamilyDescriptor,
        range_deletes: &RangeDeletes,
        smallest_snapshot: SeqNo,
        largest_seq: SeqNo,
    ) -> (PurgeParams, Vec<SeqNo>) {
        let params = PurgeParams::new(smallest_snapshot, largest_seq, self.opts.clock.now_ms())
            .bottommost(task.bottommost)
            .purge_delay(self.opts.compaction.purge_delay);
        let spent = range_deletes
            .list()
            .iter()
            .filter(|d| range_delete_purgeable(desc, &params, d))
            .map(|d| d.seq)
            .collect();
        (params, spent)
    }

    fn remove_outputs(&self, outputs: &[FileMeta]) {
        for f in outputs {
            let p = manifest::hfile_path(&self.dir, f.family, f.number);
            let _ = self.fs.remove(&p);
        }
    }

    /// Merge the inputs through the purge rules into new files of the output level.
    /// Returns the outputs, the cells read, and the cells dropped per reason.
    fn write_outputs(
        &self,
        task: &CompactionTask,
        desc: &FamilyDescriptor,
        range_deletes: &RangeDeletes,
    ) -> Result<Written> {
        let readers = task
            .input_files()
            .map(|f| self.uncached_reader(f.family, f.number))
            .collect::<Result<Vec<_>>>()?;
        let sources: Vec<Box<dyn CellIter + '_>> = readers
            .iter()
            .map(|r| Box::new(HFileCellIter::new(r.iter())) as Box<dyn CellIter + '_>)
            .collect();
        let mut merge = MergeIter::new(sources);
        merge.seek_to_first()?;
        let smallest_snapshot = self.smallest_snapshot();
        let largest_seq = task.input_files().map(|f| f.max_seq).max().unwrap_or(0);
        let (params, spent) =
            self.purge_params(task, desc, range_deletes, smallest_snapshot, largest_seq);
        let mut purger = Purger::new(desc, params).with_range_deletes(range_deletes);
        // The files of the level below the outputs, to align the outputs' boundaries with
        // (compaction::cut). A bottommost output has nothing below it in its range.
        let below = task.output_level as usize + 1;
        let grandparents =
            if self.opts.compaction.align_output_files && !task.bottommost && below < NUM_LEVELS {
                self.sv().version.files(task.family, below).to_vec()
            } else {
                Vec::new()
            };
        let mut cutter = OutputCutter::new(
            &grandparents,
            task.target_file_size,
            self.opts.compaction.max_compaction_bytes,
        );
        drop(grandparents);
        let mut outputs: Vec<FileMeta> = Vec::new();
        let mut cur: Option<Output> = None;
        let mut dropped = [0u64; 5];
        let mut cells_read = 0u64;
        let result = (|| -> Result<()> {
            while merge.valid() {
                let key = KeyRef::parse(merge.key()).map_err(|m| Error::Corruption {
                    file: self.dir.clone(),
                    offset: 0,
                    what: format!("undecodable key in a compaction input: {m}"),
                })?;
                cells_read += 1;
                match purger.push_with_tags(&key, merge.tags()) {
                    Decision::Drop(why) => {
                        if let Some(n) = dropped.get_mut(drop_index(why)) {
                            *n += 1;
                        }
                    }
                    Decision::Keep => {
                        // Cut only between rows: a row's cells of one family never straddle
                        // two files of a level.
                        let new_row = cur
                            .as_ref()
                            .is_none_or(|o| o.last_row.as_slice() != key.row);
                        let cut = new_row
                            && cutter.cut_before(
                                key.row,
                                cur.as_ref().map_or(0, |o| o.writer.bytes_written()),
                            );
                        if cut {
                            if let Some(o) = cur.take() {
                                outputs.push(self.finish_output(o, task, desc)?);
                            }
                        }
                        if cur.is_none() {
                            cur = Some(self.start_output(task, desc)?);
                        }
                        if let Some(o) = cur.as_mut() {
                            o.writer
                                .append_with_tags(&key, merge.value(), merge.tags())?;
                            o.min_seq = o.min_seq.min(key.seq);
                            if o.last_row.as_slice() != key.row {
                                o.last_row.clear();
                                o.last_row.extend_from_slice(key.row);
                            }
                            let written = o.writer.bytes_written();
                            if written >= o.charged + RATE_CHUNK {
                                self.rate_limiter.request(written - o.charged);
                                o.charged = written;
                            }
                        }
                    }
                }
                merge.next()?;
            }
            if let Some(o) = cur.take() {
                outputs.push(self.finish_output(o, task, desc)?);
            }
            Ok(())
        })();
        if let Err(e) = result {
            if let Some(o) = cur.take() {
                let _ = self.fs.remove(&o.path);
            }
            self.remove_outputs(&outputs);
            return Err(e);
        }
        let mut dirs: BTreeSet<_> = outputs
            .iter()
            .map(|m| manifest::family_dir(&self.dir, m.family))
            .collect();
        dirs.insert(self.dir.join(manifest::DATA_DIR));
        for d in &dirs {
            if let Err(e) = self.fs.sync_dir(d) {
                self.remove_outputs(&outputs);
                return Err(Error::io(
                    d,
                    "syncing a family directory after compaction",
                    e,
                ));
            }
        }
        crate::kill_point!("compaction.after_sync");
        Ok((outputs, cells_read, dropped, smallest_snapshot, spent))
    }

    /// The oldest read point any reader may still use: the oldest live snapshot, or the
    /// current read point. Purging judges cells at it.
    pub(super) fn smallest_snapshot(&self) -> u64 {
        let visible = self.visibility.read_point();
        let oldest = self.snapshots.lock().keys().next().copied();
        oldest.map_or(visible, |s| s.min(visible))
    }

    /// Add a flush's or compaction's dropped cells to the stats.
    pub(super) fn count_dropped(&self, d: &DropCounts) {
        let mut cs = self.cstats.lock();
        for (name, n) in DROP_NAMES.iter().zip([
            d.duplicate,
            d.too_many_versions,
            d.expired,
            d.masked,
            d.marker,
        ]) {
            if n > 0 {
                *cs.dropped.entry(name).or_default() += n;
            }
        }
    }

    fn start_output(&self, task: &CompactionTask, desc: &FamilyDescriptor) -> Result<Output> {
        let number = self.manifest.lock().1.allocate_file_number();
        let NewHFile { path, file, writer } =
            self.create_hfile(task.family, number, desc, task.bottommost)?;
        Ok(Output {
            number,
            path,
            file,
            writer,
            min_seq: u64::MAX,
            last_row: Vec::new(),
            charged: 0,
        })
    }

    fn finish_output(
        &self,
        o: Output,
        task: &CompactionTask,
        _desc: &FamilyDescriptor,
    ) -> Result<FileMeta> {
        let (sink, summary) = o.writer.finish()?;
        self.rate_limiter
            .request(summary.file_size.saturating_sub(o.charged));
        o.file
            .sync_data()
            .map_err(|e| Error::io(&o.path, "syncing a compaction output", e))?;
        Ok(file_meta(
            o.number,
            task.family,
            task.output_level,
            o.min_seq,
            &summary,
            sink.crc(),
        ))
    }

    /// Recompute the write pressure compaction debt puts on writers, after the files changed.
    pub(super) fn update_pressure(&self) {
        let sv = self.sv();
        let p = picker::write_pressure(&sv.version, &self.opts.compaction);
        let code = match p {
            WritePressure::None => 0,
            WritePressure::Slowdown(StallCause::Level0Files) => 1,
            WritePressure::Slowdown(StallCause::PendingCompactionBytes) => 2,
            WritePressure::Stop(StallCause::Level0Files) => 3,
            WritePressure::Stop(StallCause::PendingCompactionBytes) => 4,
        };
        self.pressure.store(code, Ordering::Release);
        if code == 0 {
            let _g = self.frozen.lock();
            self.flush_cv.notify_all();
        }
    }

    /// Compaction's part of a stall: slow a writer down or hold it while compaction debt is
    /// above the soft or hard limit. Returns true when the writer waited and must re-check.
    pub(super) fn compaction_stall(&self, stalled_since: &mut Option<Instant>) -> bool {
        let code = self.pressure.load(Ordering::Acquire);
        match code {
            3 | 4 => {
                if stalled_since.is_none() {
                    *stalled_since = Some(Instant::now());
                    let mut cs = self.cstats.lock();
                    if code == 3 {
                        cs.stops_l0 += 1;
                    } else {
                        cs.stops_pending += 1;
                    }
                    tracing::warn!(
                        cause = if code == 3 {
                            "L0 files"
                        } else {
                            "pending compaction bytes"
                        },
                        "write stopped by compaction debt"
                    );
                    drop(cs);
                    self.kick_compaction();
                }
                let mut g = self.frozen.lock();
                self.flush_cv.wait_for(&mut g, Duration::from_millis(50));
                true
            }
            1 | 2 => {
                {
                    let mut cs = self.cstats.lock();
                    if code == 1 {
                        cs.slowdowns_l0 += 1;
                    } else {
                        cs.slowdowns_pending += 1;
                    }
                    cs.stall_micros += 1000;
                }
                std::thread::sleep(Duration::from_millis(1));
                false
            }
            _ => false,
        }
    }

    /// See `Db::wait_for_compactions`.
    pub(super) fn wait_for_compactions(&self) -> Result<()> {
        loop {
            self.check_poisoned()?;
            let mut st = self.compaction.lock();
            let sv = self.sv();
            let horizon = self.smallest_snapshot();
            let pols = {
                let s = &mut *st;
                self.policies(&sv, &BTreeSet::new(), &s.ingesting, horizon, &mut s.cover)
            };
            let due = picker::pick(
                &sv.version,
                &pols,
                &self.opts.compaction,
                self.opts.clock.now_ms(),
                &st.busy,
            );
            drop(sv);
            match due {
                None if st.running == 0 => {
                    self.collect_garbage(&mut st);
                    drop(st);
                    self.retire_idle_range_deletes()?;
                    return Ok(());
                }
                Some(t) if self.opts.compaction.threads == 0 => {
                    st.busy.extend(t.input_files().map(|f| f.number));
                    st.running += 1;
                    drop(st);
                    let r = self.run_task(&t);
                    if let Err(e) = &r {
                        self.note_failure(&t, e);
                    }
                    self.finish_task(t);
                    r?;
                }
                _ => {
                    self.compaction_cv.notify_all();
                    self.compaction_cv
                        .wait_for(&mut st, Duration::from_millis(100));
                }
            }
        }
    }

    /// Compaction counters plus the current shape of the levels.
    pub(super) fn compaction_stats(&self) -> CompactionStats {
        let mut cs = self.cstats.lock().clone();
        if cs.levels.len() < NUM_LEVELS {
            cs.levels.resize(NUM_LEVELS, LevelStats::default());
        }
        let sv = self.sv();
        for f in sv.version.all_files() {
            if let Some(l) = cs.levels.get_mut(f.level as usize) {
                l.files += 1;
                l.bytes += f.size;
            }
        }
        cs.pending_bytes = sv
            .version
            .families()
            .map(|f| picker::pending_compaction_bytes(&sv.version, f, &self.opts.compaction))
            .sum();
        {
            let st = self.compaction.lock();
            cs.running = st.running as u64;
            cs.awaiting_deletion = st.graveyard.len() as u64;
        }
        cs
    }
}

/// Names of the drop reasons, in the order of `drop_index`.
const DROP_NAMES: [&str; 5] = [
    "duplicate",
    "too-many-versions",
    "expired",
    "masked",
    "marker",
];

/// Whether compactions of the family drop what a row-range delete masks (purge rules 3 and
/// 7): classic families with KEEP_DELETED_CELLS FALSE; the others keep it.
pub(super) fn applies_range_deletes(d: &FamilyDescriptor) -> bool {
    d.keep_deleted_cells == crate::schema::KeepDeletedCells::False && !d.new_version_behavior
}

/// What `write_outputs` made: the outputs, the cells read, the cells dropped per reason, the
/// oldest read point it purged at, and the row-range deletes its purge rules let go.
type Written = (Vec<FileMeta>, u64, [u64; 5], u64, Vec<SeqNo>);

/// Whether file `f` may hold a cell row-range delete `d` masks: `d` meets its rows, reaches
/// its oldest timestamp, and no flush or compaction that applied `d` wrote it (`range_clean`).
fn may_hold(f: &FileMeta, d: &crate::types::RangeDelete) -> bool {
    let rows = crate::compaction::picker::Rows::of(f);
    f.range_clean < d.seq
        && f.min_ts <= d.ts
        && d.start.as_slice() <= rows.hi
        && (d.stop.is_empty() || d.stop.as_slice() > rows.lo)
}

/// The row-range deletes that may leave the manifest with `task`'s edit (SPEC.md §20.2), of
/// two kinds, each only when no memstore of the family holds a write below the delete:
/// - those among `spent` (the ones the compaction's purge rules let go) when its inputs are
///   every file the family has now, so the inputs held everything they mask;
/// - any `ripe` one (past its purge delay or TTL, at or below every snapshot) that no file left
///   after the edit (the files outside the inputs, and `outputs`) may still hold a cell of:
///   every such file whose rows it meets and whose oldest timestamp it reaches was written
///   by a flush or compaction that applied it (`range_clean` at or above its seq). Without
///   this, a delete stayed until a compaction of the whole family, which on a family of
///   several levels only a major compaction is: deletes piled up (and each change of them
///   rebuilds the read index).
///
/// Called under the exclusive switch gate and the manifest lock, with the edit: neither the
/// files nor the memstores change meanwhile.
fn spent_range_deletes(
    state: &crate::manifest::ManifestState,
    sv: &SuperVersion,
    task: &CompactionTask,
    outputs: &[FileMeta],
    spent: &[SeqNo],
    ripe: &dyn Fn(&crate::types::RangeDelete) -> bool,
) -> Vec<(FamilyId, SeqNo)> {
    let present = state.range_deletes(task.family);
    if present.is_empty() {
        return Vec::new();
    }
    let inputs: BTreeSet<FileNumber> = task.input_files().map(|f| f.number).collect();
    let live: Vec<&Arc<FileMeta>> = state
        .current()
        .levels(task.family)
        .into_iter()
        .flatten()
        .flatten()
        .collect();
    let whole = live.len() == inputs.len() && live.iter().all(|f| inputs.contains(&f.number));
    let in_memory = sv.mems.get(&task.family).and_then(|m| {
        std::iter::once(&m.active)
            .chain(&m.frozen)
            .filter(|m| !m.is_empty())
            .map(|m| m.min_seq())
            .min()
    });
    let spent: BTreeSet<SeqNo> = spent.iter().copied().collect();
    // Only files not cleaned of the newest ripe delete can hold a cell of one.
    let newest_ripe = present
        .iter()
        .filter(|d| ripe(d))
        .map(|d| d.seq)
        .max()
        .unwrap_or(0);
    let dirty: Vec<&FileMeta> = live
        .iter()
        .map(|f| &***f)
        .filter(|f| !inputs.contains(&f.number))
        .chain(outputs)
        .filter(|f| f.range_clean < newest_ripe)
        .collect();
    present
        .iter()
        .filter(|d| in_memory.is_none_or(|min| min > d.seq))
        .filter(|d| {
            let held_all = whole && spent.contains(&d.seq);
            held_all || (ripe(d) && !dirty.iter().any(|f| may_hold(f, d)))
        })
        .map(|d| (task.family, d.seq))
        .collect()
}

fn drop_index(r: DropReason) -> usize {
    match r {
        DropReason::Duplicate => 0,
        DropReason::TooManyVersions => 1,
        DropReason::Expired => 2,
        DropReason::Masked => 3,
        DropReason::Marker => 4,
    }
}

/// The text of `Db::stats_report`.
pub(super) fn report(s: &super::Stats) -> String {
    use std::fmt::Write as _;
    let mut o = String::new();
    let c = &s.compaction;
    let _ = writeln!(
        o,
        "Level  Files      Size(MB)  Compactions  Read(MB)  Write(MB)  W-Amp  Time(s)"
    );
    for (i, l) in c.levels.iter().enumerate() {
        let _ = writeln!(
            o,
            "L{:<5} {:>5} {:>13.1} {:>12} {:>9.1} {:>10.1} {:>6.2} {:>8.2}",
            i,
            l.files,
            mb(l.bytes),
            l.compactions,
            mb(l.bytes_read),
            mb(l.bytes_written),
            l.write_amplification(),
            l.micros as f64 / 1e6,
        );
    }
    let _ = writeln!(
        o,
        "User writes: {} ({:.1} MB); flushed {:.1} MB in {} files; write amplification {:.2}; \
         space amplification {:.2}",
        s.writes,
        mb(s.user_bytes_written),
        mb(s.flushed_bytes),
        s.flushed_files,
        s.write_amplification(),
        s.space_amplification(),
    );
    let reasons: Vec<String> = c
        .by_reason
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    let dropped: Vec<String> = c.dropped.iter().map(|(k, v)| format!("{k}={v}")).collect();
    let _ = writeln!(
        o,
        "Compactions: running {}, by reason [{}], trivial moves {}, failures {}, pending {:.1} MB, \
         files awaiting deletion {}; cells read {}, written {}, dropped [{}]; row-range deletes \
         live {} (gone {}), files they dropped unread {} ({:.1} MB)",
        c.running,
        reasons.join(" "),
        c.trivial_moves,
        c.failures,
        mb(c.pending_bytes),
        c.awaiting_deletion,
        c.cells_read,
        c.cells_written,
        dropped.join(" "),
        s.range_deletes,
        c.range_deletes_gone,
        c.files_dropped,
        mb(c.bytes_dropped),
    );
    let _ = writeln!(
        o,
        "Stalls: memstore stops {} (slowdowns {}), L0 stops {} (slowdowns {}), pending-bytes \
         stops {} (slowdowns {}), stalled {:.3} s",
        s.stalls,
        s.slowdowns,
        c.stops_l0,
        c.slowdowns_l0,
        c.stops_pending,
        c.slowdowns_pending,
        (s.stall_micros + c.stall_micros) as f64 / 1e6,
    );
    let _ = writeln!(
        o,
        "Reads: gets {} ({} found a row), scans {} ({} rows); files skipped by bloom {}, by key \
         range {}, by time range {}",
        s.gets, s.gets_found, s.scans, s.scan_rows, s.bloom_skips, s.range_skips, s.time_skips
    );
    let skipped: Vec<String> = s
        .skipped_cells
        .by_cause()
        .iter()
        .map(|(cause, n)| format!("{cause} {n}"))
        .collect();
    let _ = writeln!(
        o,
        "Cells read and not returned: {} ({})",
        s.skipped_cells.total(),
        skipped.join(", ")
    );
    if s.ingests > 0 {
        let _ = writeln!(
            o,
            "Ingested: {} loads, {} files, {} cells, {:.1} MB; writes held {:.3} s",
            s.ingests,
            s.ingested_files,
            s.ingested_cells,
            mb(s.ingested_bytes),
            s.ingest_held_micros as f64 / 1e6,
        );
    }
    let w = &s.wal;
    let _ = writeln!(
        o,
        "WAL: device {}, segment {}, records {} in {} groups ({} copied through a map, largest \
         {}), {:.1} MB, fdatasyncs {} ({} of them direct writes); flushed segments kept {} \
         ({:.1} MB), change feeds {}",
        w.backend,
        w.current_segment,
        w.records,
        w.groups,
        w.mapped_groups,
        w.max_group,
        mb(w.bytes),
        w.syncs,
        w.direct_groups,
        w.kept_segments,
        mb(w.kept_bytes),
        w.feeds,
    );
    for f in &s.feed_slots {
        let _ = writeln!(
            o,
            "Feed slot {}: acked seq {}, holds segment {} on ({:.1} MB){}",
            f.name,
            f.acked,
            f.segment,
            mb(f.held_bytes),
            if f.lost { ", LOST" } else { "" }
        );
    }
    let p = &s.prefault;
    let _ = writeln!(
        o,
        "Prefault (process): {}, {} requests, {:.1} MB faulted in ahead of writers, {} dropped, \
         {} refused",
        if p.active { "on" } else { "off" },
        p.requests,
        mb(p.populated_bytes),
        p.dropped,
        p.failures,
    );
    let _ = writeln!(
        o,
        "Memstores: active {:.1} MB, frozen {:.1} MB; snapshots live {} (oldest {:?}); read point {}",
        mb(s.memstore_active_bytes),
        mb(s.memstore_frozen_bytes),
        s.live_snapshots,
        s.oldest_snapshot,
        s.read_point,
    );
    o
}

fn mb(b: u64) -> f64 {
    b as f64 / (1024.0 * 1024.0)
}

#[cfg(test)]
mod tests {
    use cellar_format::cell::CellKey;
    use cellar_format::{CellType, KeyRef};

    use super::*;
    use crate::compaction::CompactionReason;
    use crate::manifest::{ManifestState, TableEntry};
    use crate::schema::{FamilyDescriptor, TableDescriptor};

    fn file(number: u64, lo: &str, hi: &str) -> FileMeta {
        FileMeta {
            number,
            family: 1,
            level: 6,
            size: 1,
            smallest: CellKey::first_on_row(lo.as_bytes()).encode(),
            largest: CellKey::first_on_row(hi.as_bytes()).encode(),
            min_seq: 1,
            max_seq: 10,
            min_ts: 0,
            max_ts: 0,
            entries: 1,
            deletes: 0,
            created_ms: 0,
            crc: None,
            range_clean: 0,
        }
    }

    fn state() -> ManifestState {
        let mut s = ManifestState::new_database();
        s.apply(&VersionEdit {
            put_tables: vec![TableEntry {
                id: 1,
                descriptor: TableDescriptor::new("t").family(FamilyDescriptor::new("f")),
                family_ids: vec![1],
            }],
            added_files: vec![file(10, "a", "c"), file(11, "d", "f")],
            last_seq: Some(20),
            range_deletes: vec![(
                1,
                crate::types::RangeDelete {
                    start: b"a".to_vec(),
                    stop: Vec::new(),
                    ts: 5,
                    seq: 15,
                },
            )],
            ..VersionEdit::default()
        })
        .unwrap();
        s
    }

    fn task(files: &[FileMeta]) -> CompactionTask {
        CompactionTask {
            family: 1,
            inputs: vec![(6, files.iter().cloned().map(Arc::new).collect())],
            output_level: 6,
            trivial_move: false,
            drop_inputs: false,
            bottommost: true,
            target_file_size: 1 << 20,
            reason: CompactionReason::Manual,
        }
    }

    #[test]
    fn a_range_delete_leaves_only_with_every_file_and_nothing_below_it_in_memory() {
        let s = state();
        let sv = SuperVersion::build(&s, None);
        let all = [file(10, "a", "c"), file(11, "d", "f")];
        let never = |_: &crate::types::RangeDelete| false;
        assert_eq!(
            spent_range_deletes(&s, &sv, &task(&all), &[], &[15], &never),
            [(1, 15)]
        );
        assert!(spent_range_deletes(&s, &sv, &task(&all), &[], &[], &never).is_empty());
        assert!(
            spent_range_deletes(&s, &sv, &task(&all), &[], &[14], &never).is_empty(),
            "not a live delete"
        );
        assert!(
            spent_range_deletes(&s, &sv, &task(&all[..1]), &[], &[15], &never).is_empty(),
            "a file outside the inputs may hold what it masks"
        );
        let mem = &sv.mems[&1].active;
        let put = |seq| {
            let k = CellKey::new("b", "f", "q", 1, CellType::Put, seq).encode();
            mem.insert(&KeyRef::parse(&k).unwrap(), b"v", &[]).unwrap();
        };
        put(16);
        assert_eq!(
            spent_range_deletes(&s, &sv, &task(&all), &[], &[15], &never),
            [(1, 15)],
            "written after it"
        );
        put(12);
        assert!(
            spent_range_deletes(&s, &sv, &task(&all), &[], &[15], &never).is_empty(),
            "a memstore holds a write below it"
        );
    }

    /// A ripe delete leaves with any compaction once no file left may hold a cell of it: the
    /// files it meets were cleaned of it, or are outside its rows or its timestamps.
    #[test]
    fn a_ripe_range_delete_leaves_once_no_file_left_may_hold_a_cell_of_it() {
        let s = state();
        let sv = SuperVersion::build(&s, None);
        let ripe = |_: &crate::types::RangeDelete| true;
        let never = |_: &crate::types::RangeDelete| false;
        let f10 = file(10, "a", "c");
        let go = |task: &CompactionTask, outputs: &[FileMeta]| {
            spent_range_deletes(&s, &sv, task, outputs, &[], &ripe)
        };
        // The delete (rows "a".., ts 5, seq 15) meets file 11, which it was not applied to.
        assert!(go(&task(std::slice::from_ref(&f10)), &[]).is_empty());
        // Compacted with file 10 alone, but file 11 was cleaned of it.
        let mut s2 = s.clone();
        s2.apply(&VersionEdit {
            deleted_files: vec![(1, 6, 11)],
            added_files: vec![FileMeta {
                number: 12,
                range_clean: 15,
                ..file(12, "d", "f")
            }],
            ..VersionEdit::default()
        })
        .unwrap();
        let t10 = task(std::slice::from_ref(&f10));
        assert_eq!(
            spent_range_deletes(&s2, &sv, &t10, &[], &[], &ripe),
            [(1, 15)]
        );
        assert!(
            spent_range_deletes(&s2, &sv, &t10, &[], &[], &never).is_empty(),
            "not ripe"
        );
        // An output not cleaned of it holds it back; one cleaned does not.
        let dirty_out = FileMeta {
            number: 13,
            range_clean: 14,
            ..file(13, "a", "c")
        };
        assert!(
            spent_range_deletes(&s2, &sv, &t10, std::slice::from_ref(&dirty_out), &[], &ripe)
                .is_empty()
        );
        let clean_out = FileMeta {
            range_clean: 15,
            ..dirty_out.clone()
        };
        assert_eq!(
            spent_range_deletes(&s2, &sv, &t10, &[clean_out], &[], &ripe),
            [(1, 15)]
        );
        // Files outside its rows or newer than its timestamp hold nothing it masks.
        let mut s3 = s.clone();
        s3.apply(&VersionEdit {
            deleted_files: vec![(1, 6, 11)],
            added_files: vec![FileMeta {
                min_ts: 6,
                max_ts: 9,
                ..file(14, "d", "f")
            }],
            ..VersionEdit::default()
        })
        .unwrap();
        assert_eq!(
            spent_range_deletes(&s3, &sv, &t10, &[], &[], &ripe),
            [(1, 15)]
        );
        // A write below it in a memstore holds it back.
        let mem = &sv.mems[&1].active;
        let k = CellKey::new("b", "f", "q", 1, CellType::Put, 12).encode();
        mem.insert(&KeyRef::parse(&k).unwrap(), b"v", &[]).unwrap();
        assert!(spent_range_deletes(&s3, &sv, &t10, &[], &[], &ripe).is_empty());
    }
}
