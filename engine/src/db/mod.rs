//! The database: open and recovery, the write path, flush, admin and reads.
//!
//! # Concurrency
//! - `row_locks` ([`rowlock::RowLocks`]): every write locks the stripes of its rows before
//!   anything else and holds them until its batch is visible, which makes read-modify-write
//!   on a row (check-and-mutate, increment, append, delete of the newest version) atomic.
//!   They come before `switch` in lock order; the switch never takes them.
//! - `switch` ([`gate::SwitchGate`], loom-modelled): every write holds it shared from resolving its families through
//!   WAL append and memstore insert to marking its batch applied; switching memstores and
//!   changing the schema hold it exclusively. So when a switch runs, every sequence number
//!   assigned so far is in a memstore, and the WAL segment it rolls to holds only later ones:
//!   a flushed generation covers exactly the segments before its boundary.
//! - `sv`: the current [`SuperVersion`], swapped whole. Readers take the read point *first*,
//!   then the super-version: every batch at or below the read point is then in a memstore or
//!   file of that super-version (flush installs the file and drops the memstore in one swap).
//! - `manifest`: the manifest writer and state, behind one mutex; every metadata change is
//!   logged durably before it is applied.
//! - One background thread flushes frozen memstore generations, oldest first.
//! - `compaction` ([`compact::CompactState`]): which files running compactions read, which
//!   replaced files wait for deletion; `compaction.threads` background threads run tasks
//!   (`compact`). Lock order: `compaction` before `switch` before `manifest`; the flush thread
//!   never waits for compaction, so writers stopped by compaction debt always get unstuck.

mod backup;
mod changes;
mod checkpoint;
mod compact;
mod explain;
mod export;
mod flush;
mod framed;
mod gate;
mod graveyard;
mod ingest;
mod level_iter;
mod mutation;
mod options;
mod range;
mod range_delete;
mod read;
mod rmw;
mod rowlock;
mod schema_feed;
mod slots;
mod snapshot;
mod sv;
mod table_snapshot;
mod write;

use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::Arc;

use parking_lot::{Condvar, Mutex, RwLock};

pub use backup::{BackupFile, BackupInfo, Backups, PurgeInfo};
pub use changes::{ChangeBatch, ChangeCell, ChangeFeed, ChangeFeedOptions};
pub(crate) use checkpoint::file_crc;
pub use checkpoint::CheckpointInfo;
pub use compact::{CompactionStats, LevelStats};
pub use explain::{ExplainSource, ExplainedCell, Explanation, SourceDecision, SourceKind};
pub use export::{ExportInfo, ExportedFile};
pub use ingest::{IngestInfo, IngestOptions, IngestedFile};
pub use mutation::{Delete, Mutation, Put, RowMutations, WriteBatch};
pub use options::{Options, WriteOptions};
pub use range::RangeEstimate;
pub use range_delete::DeleteRows;
pub use read::ScanIter;
pub use rmw::{Append, CheckAndMutate, Increment};
pub use schema_feed::{SchemaChange, SCHEMA_FAMILY};
pub use slots::{read_feed_slots, FeedSlotInfo, FEED_SLOTS};
pub use snapshot::Snapshot;
pub use table_snapshot::{
    read_table_snapshots, StoredSnapshot, TableSnapshotInfo, TableSnapshotOptions, SNAPSHOTS_DIR,
};

use crate::cache::{CacheStats, FileCache, OpenFileStats, ShardedBlockCache};
use crate::error::{Error, Poison, Result};
use crate::fs::{FormatSource, LockGuard, SharedFs};
use crate::manifest::{self, Manifest, ManifestState, SchemaRecord, TableEntry, VersionEdit};
use crate::memstore::MemStore;
use crate::read::query::{Get, Row, Scan};
use crate::read::view::RowView;
use crate::schema::{validate_name, TableDescriptor, TableName};
use crate::types::{FileNumber, SeqNo};
use crate::visibility::Visibility;
use crate::wal::{self, Wal};
use cellar_format::{BlockCache, HFileReader, ReaderOptions};
use sv::SuperVersion;

/// Sub-directory of the WAL segments.
pub(crate) const WAL_DIR: &str = "wal";
/// The lock file.
const LOCK_FILE: &str = "LOCK";

/// A generation of memstores frozen by one switch, waiting to be flushed together.
#[derive(Debug)]
struct FrozenGen {
    /// WAL segment the switch rolled to: every batch of this generation is in older segments.
    boundary: u64,
    /// Highest sequence number in the generation.
    last_seq: SeqNo,
    mems: Vec<Arc<MemStore>>,
}

/// Counters a user can read ([`Db::stats`]).
#[derive(Debug, Default)]
struct Counters {
    writes: AtomicU64,
    user_bytes: AtomicU64,
    flushes: AtomicU64,
    flushed_bytes: AtomicU64,
    flushed_files: AtomicU64,
    /// Flushes that failed for lack of space (and were retried).
    flush_failures: AtomicU64,
    stalls: AtomicU64,
    stall_micros: AtomicU64,
    slowdowns: AtomicU64,
    bloom_skips: AtomicU64,
    range_skips: AtomicU64,
    time_skips: AtomicU64,
    read_view_retries: AtomicU64,
    gets: AtomicU64,
    gets_found: AtomicU64,
    scans: AtomicU64,
    scan_rows: AtomicU64,
    /// [`SkippedCells`], indexed by [`read::skip_index`].
    skipped: [AtomicU64; read::SKIP_CAUSES],
    ingests: AtomicU64,
    ingested_files: AtomicU64,
    ingested_cells: AtomicU64,
    ingested_bytes: AtomicU64,
    ingest_held_micros: AtomicU64,
}

/// A snapshot of the database's counters.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Stats {
    /// Write calls applied.
    pub writes: u64,
    /// Bytes of keys and values written by users.
    pub user_bytes_written: u64,
    /// Memstore generations flushed.
    pub flushes: u64,
    /// Bytes of HFiles written by flushes.
    pub flushed_bytes: u64,
    /// HFiles written by flushes.
    pub flushed_files: u64,
    /// Flush attempts that failed for lack of space; each was cleaned up and retried.
    pub flush_failures: u64,
    /// Writes that had to wait for flushes (stop condition).
    pub stalls: u64,
    /// Time writers spent stopped, in microseconds.
    pub stall_micros: u64,
    /// Writes delayed by the slowdown condition.
    pub slowdowns: u64,
    /// Files a Get skipped because their bloom filter excluded the row or column.
    pub bloom_skips: u64,
    /// Files a read skipped because their key range missed it.
    pub range_skips: u64,
    /// Files a read skipped because their time range missed the query's.
    pub time_skips: u64,
    /// Reads that took a newer read point because a flush or compaction installed while
    /// they started had purged at a newer one (`SuperVersion::purge_horizon`).
    pub read_view_retries: u64,
    /// Gets served (each Get of a `get_many` counts; `explain` counts one).
    pub gets: u64,
    /// Gets that found a row.
    pub gets_found: u64,
    /// Scans opened (`scan`, `scan_each`).
    pub scans: u64,
    /// Rows scans returned (a row split by `batch` counts once), added when a scan ends or
    /// is dropped.
    pub scan_rows: u64,
    /// Cells Gets and scans examined and did not return, by cause.
    pub skipped_cells: SkippedCells,
    /// Bulk loads done ([`Table::ingest`]).
    pub ingests: u64,
    /// HFiles bulk loads added.
    pub ingested_files: u64,
    /// Cells bulk loads added (duplicates dropped from their sources not counted).
    pub ingested_cells: u64,
    /// Bytes of the HFiles bulk loads wrote.
    pub ingested_bytes: u64,
    /// Time writes waited for bulk loads, in microseconds (SPEC.md §17.12).
    pub ingest_held_micros: u64,
    /// Bytes in active memstores.
    pub memstore_active_bytes: u64,
    /// Bytes in frozen memstores waiting for flush.
    pub memstore_frozen_bytes: u64,
    /// HFiles live.
    pub live_files: u64,
    /// Row-range deletes live in the manifest, over every family (`Table::delete_rows`): each
    /// is looked up as a read starts a row of its family, until a major compaction removes it.
    pub range_deletes: u64,
    /// The WAL backend that runs (`io_uring` or `pwrite`), and its counters.
    pub wal: wal::WalStats,
    /// The background thread that faults in the WAL's and memstores' next pages (counted
    /// for the whole process).
    pub prefault: crate::PrefaultStats,
    /// Read point: the highest sequence number visible.
    pub read_point: SeqNo,
    /// What WAL replay found when the database was opened.
    pub recovery: RecoveryReport,
    /// Sequence number of the oldest live snapshot, if any: compaction keeps what it sees.
    pub oldest_snapshot: Option<SeqNo>,
    /// Live snapshots.
    pub live_snapshots: u64,
    /// Every feed slot (`Db::feed_slots`), with what it holds.
    pub feed_slots: Vec<FeedSlotInfo>,
    /// The block cache: capacity, usage, hits, misses, evictions, by block kind.
    pub block_cache: CacheStats,
    /// The open-file cache: files open, opens, hits, evictions.
    pub open_files: OpenFileStats,
    /// The memory budget the options amount to.
    pub memory_budget: MemoryBudget,
    /// Compaction: per level, dropped cells, stalls it caused.
    pub compaction: CompactionStats,
}

/// Cells that reads (Gets and scans, not compactions) examined and did not return, by the
/// read path's [`Verdict`](crate::Verdict) on each: the work a read did beyond its result.
/// Counted per read and added to [`Stats::skipped_cells`] when the read (a Get, or a scan's
/// batch of rows) is done. Cells a read never examined are not here: those of files skipped
/// whole ([`Stats::bloom_skips`] and the other file skips) and the older versions of a column
/// a read seeks past once it has what it may return.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct SkippedCells {
    /// Written after the read's point: too new for this read.
    pub invisible: u64,
    /// In a column or family the read did not ask for.
    pub not_selected: u64,
    /// Delete markers (raw reads return them instead).
    pub markers: u64,
    /// Puts hidden by a delete marker.
    pub masked: u64,
    /// Puts at the timestamp of a newer write of their column, which wins.
    pub duplicates: u64,
    /// Puts older than their TTL, past MIN_VERSIONS.
    pub expired: u64,
    /// Cells outside the read's time range.
    pub out_of_range: u64,
    /// Versions beyond the read's version limit or the family's VERSIONS.
    pub versions: u64,
}

impl SkippedCells {
    /// Every cause's count under its name (as the report and Prometheus label it).
    pub fn by_cause(&self) -> [(&'static str, u64); read::SKIP_CAUSES] {
        [
            ("invisible", self.invisible),
            ("not_selected", self.not_selected),
            ("marker", self.markers),
            ("masked", self.masked),
            ("duplicate", self.duplicates),
            ("expired", self.expired),
            ("out_of_range", self.out_of_range),
            ("versions", self.versions),
        ]
    }

    /// All causes together.
    pub fn total(&self) -> u64 {
        self.by_cause().iter().map(|&(_, n)| n).sum()
    }
}

/// The memory the options allow the two consumers that grow with use ([`Options::memory_budget`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct MemoryBudget {
    /// The block cache's capacity.
    pub block_cache_bytes: u64,
    /// The memstores' stop limit (active and frozen): writers wait above it.
    pub memstore_bytes: u64,
}

impl MemoryBudget {
    /// The whole budget.
    pub fn total(&self) -> u64 {
        self.block_cache_bytes.saturating_add(self.memstore_bytes)
    }
}

impl Stats {
    /// Bytes written to disk (flushes and compactions) per byte written by users.
    pub fn write_amplification(&self) -> f64 {
        let disk = self.flushed_bytes
            + self
                .compaction
                .levels
                .iter()
                .map(|l| l.bytes_written)
                .sum::<u64>();
        if self.user_bytes_written == 0 {
            0.0
        } else {
            disk as f64 / self.user_bytes_written as f64
        }
    }

    /// Bytes of all live files per byte in the last non-empty level (1.0 when everything is
    /// at the bottom; 0 with no files).
    pub fn space_amplification(&self) -> f64 {
        let total: u64 = self.compaction.levels.iter().map(|l| l.bytes).sum();
        let last = self
            .compaction
            .levels
            .iter()
            .rev()
            .map(|l| l.bytes)
            .find(|&b| b > 0)
            .unwrap_or(0);
        if last == 0 {
            0.0
        } else {
            total as f64 / last as f64
        }
    }
}

#[derive(Debug)]
pub(crate) struct DbInner {
    dir: PathBuf,
    fs: SharedFs,
    opts: Options,
    _lock: Box<dyn LockGuard>,
    wal: Wal,
    /// Row locks, taken by every write before the switch gate (see `rowlock`).
    row_locks: rowlock::RowLocks,
    switch: gate::SwitchGate,
    switch_requested: AtomicBool,
    sv: RwLock<Arc<SuperVersion>>,
    manifest: Mutex<(Manifest, ManifestState)>,
    frozen: Mutex<VecDeque<FrozenGen>>,
    /// `frozen`'s length, changed under its lock: what every write's stall check reads,
    /// without taking the lock.
    frozen_gens: AtomicUsize,
    /// Signalled when a generation is frozen (wakes the flusher) and when one is flushed
    /// (wakes stalled writers and `flush` callers).
    flush_cv: Condvar,
    /// Shared with the WAL's group leaders, which publish the writes they apply.
    visibility: Arc<Visibility>,
    poisoned: Mutex<Option<Poison>>,
    /// Set once `poisoned` holds a cause: the check every write makes three times is a load.
    is_poisoned: AtomicBool,
    /// The file and operation of the last flush that failed for lack of space (the flush is
    /// retried; callers waiting on it get `NoSpace`).
    flush_no_space: Mutex<Option<(PathBuf, String)>>,
    snapshots: Mutex<snapshot::Registry>,
    /// Open readers by file number, at most `max_open_files` (see `crate::cache`).
    readers: FileCache<Arc<HFileReader<FormatSource>>>,
    /// Decoded blocks of every reader, keyed by file number; `None` when turned off.
    block_cache: Option<Arc<ShardedBlockCache>>,
    counters: Counters,
    shutdown: AtomicBool,
    /// Set when a SkipWal write lands in the active memstores: data no WAL holds, which a
    /// clean close must flush.
    unlogged: AtomicBool,
    /// What WAL replay found at open.
    recovery: RecoveryReport,
    compaction: Mutex<compact::CompactState>,
    /// Signalled when compaction work may have appeared or a task ended.
    compaction_cv: Condvar,
    cstats: Mutex<CompactionStats>,
    /// Write pressure from compaction debt (see `compact::update_pressure`).
    pressure: AtomicU8,
    rate_limiter: compact::RateLimiter,
    /// Seek compaction: what each file may still cost Gets, and the file due for it.
    seek_budgets: compact::SeekBudgets,
    seek_hint: Mutex<Option<(crate::types::FamilyId, FileNumber)>>,
    /// Held by every table snapshot operation: one at a time, so a delete never removes
    /// files a clone is linking, and a directory without a descriptor is never one in progress.
    table_snapshots: Mutex<()>,
    /// The feed slots (see `slots`); taken before the WAL's retention lock, never after.
    slots: Mutex<slots::Slots>,
    /// Segment number → its first batch's seq, for the finished segments a feed or slot
    /// search read (see `changes`).
    feed_first_seqs: Mutex<rustc_hash::FxHashMap<u64, Option<SeqNo>>>,
}

/// What the WAL replay at open found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RecoveryReport {
    /// Batches replayed into memstores.
    pub replayed_batches: u64,
    /// Highest sequence number found in the WAL.
    pub last_wal_seq: SeqNo,
    /// Whether the newest segment ended in a torn (unacknowledged) write that was dropped.
    pub torn_tail: bool,
    /// Damaged WAL ranges skipped under `RecoveryMode::SkipCorrupted` (segment, first byte,
    /// length):
    /// records there are lost.
    pub skipped_ranges: Vec<(u64, u64, u64)>,
    /// Whether the last schema change's change-feed record was missing (a crash between its
    /// manifest edit and the record) and was appended at this open (SPEC.md §16.10).
    pub schema_record_relogged: bool,
}

/// An open database. Cheap to clone; all clones share one engine, closed when the last drops.
#[derive(Debug, Clone)]
pub struct Db {
    inner: Arc<DbInner>,
    /// Held for its `Drop`: the last clone stops and joins the flush thread.
    _flusher: Arc<FlusherHandle>,
}

/// Joins the flush and compaction threads when the last `Db` clone drops.
#[derive(Debug)]
struct FlusherHandle {
    inner: Arc<DbInner>,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
    compactors: Mutex<Vec<std::thread::JoinHandle<()>>>,
}

impl Drop for FlusherHandle {
    fn drop(&mut self) {
        // Data no WAL holds (SkipWal writes) is flushed at a clean close, as RocksDB does;
        // everything else is replayed from the WAL at the next open, which keeps close fast.
        if self.inner.unlogged.load(Ordering::Acquire) && self.inner.poisoned.lock().is_none() {
            if let Err(e) = self.inner.switch_memstores(true) {
                tracing::warn!(error = %e, "could not flush unlogged writes at close");
            }
        }
        self.inner.shutdown.store(true, Ordering::SeqCst);
        {
            let _g = self.inner.frozen.lock();
            self.inner.flush_cv.notify_all();
        }
        if let Some(t) = self.thread.lock().take() {
            let _ = t.join();
        }
        // A running compaction finishes its task (its outputs are valid files); an
        // interrupted one would only leave orphans for the next open to delete.
        self.inner.kick_compaction();
        for t in self.compactors.lock().drain(..) {
            let _ = t.join();
        }
        self.inner.seal_manifest();
    }
}

impl Db {
    /// Open (or create) the database in `path`.
    ///
    /// Recovery: reads CURRENT and the manifest, deletes files no version refers to, replays
    /// the WAL from the oldest segment not yet flushed, and schedules a flush of what it
    /// replayed. A second open of the same directory, in this or another process, fails with
    /// [`Error::Locked`].
    pub fn open(path: impl AsRef<Path>, opts: Options) -> Result<Db> {
        let inner = Arc::new(DbInner::open(path.as_ref(), opts)?);
        let t = {
            let worker = inner.clone();
            std::thread::Builder::new()
                .name("cellar-flush".into())
                .spawn(move || worker.flush_loop())
                .map_err(|e| Error::io(&inner.dir, "starting the flush thread", e))?
        };
        let mut compactors = Vec::new();
        for i in 0..inner.opts.compaction.threads {
            let worker = inner.clone();
            let h = std::thread::Builder::new()
                .name(format!("cellar-compact-{i}"))
                .spawn(move || worker.compaction_loop())
                .map_err(|e| Error::io(&inner.dir, "starting a compaction thread", e))?;
            compactors.push(h);
        }
        let flusher = Arc::new(FlusherHandle {
            inner: inner.clone(),
            thread: Mutex::new(Some(t)),
            compactors: Mutex::new(compactors),
        });
        // Compaction debt left by a crash resumes at once.
        inner.update_pressure();
        inner.kick_compaction();
        Ok(Db {
            inner,
            _flusher: flusher,
        })
    }

    /// Flush every memstore and wait until the files are installed; the WAL segments they
    /// covered are deleted.
    pub fn flush(&self) -> Result<()> {
        self.inner.flush_and_wait()
    }

    /// Flush everything, then release this handle (the engine stops when the last clone, table
    /// handle or scan goes). Dropping the last handle instead flushes only what the WAL does
    /// not hold (SkipWal writes); the rest is replayed from the WAL at the next open.
    pub fn close(self) -> Result<()> {
        let r = self.inner.flush_and_wait();
        drop(self);
        r
    }

    /// Make an online checkpoint in `dir`, which must not exist: a directory that opens as a
    /// database of its own and holds every write acknowledged before the call (writes in
    /// flight may be there too, each batch whole or not at all). HFiles are hard-linked (copied
    /// when `dir` is on another device), the WAL segments still needed are copied; memstores
    /// are flushed first. Writes and reads go on meanwhile. A checkpoint cut short by an error
    /// or a crash keeps a `CHECKPOINT-INCOMPLETE` marker, and opening it is refused.
    ///
    /// ```
    /// use cellar::{Db, FamilyDescriptor, Get, Options, Put, TableDescriptor};
    /// # let tmp = tempfile::tempdir().unwrap();
    /// # let (dir, copy) = (tmp.path().join("db"), tmp.path().join("copy"));
    /// let db = Db::open(&dir, Options::default())?;
    /// db.create_table(TableDescriptor::new("t").family(FamilyDescriptor::new("cf")))?;
    /// db.table("t")?.put(Put::new("r").add("cf", "q", "v"))?;
    /// let info = db.checkpoint(&copy)?;
    /// assert_eq!(info.copied_files, 0); // hard links on one file system
    /// let cp = Db::open(&copy, Options::default())?;
    /// let row = cp.table("t")?.get(&Get::new("r"))?.unwrap();
    /// assert_eq!(row.value("cf", "q"), Some(&b"v"[..]));
    /// # Ok::<(), cellar::Error>(())
    /// ```
    pub fn checkpoint(&self, dir: impl AsRef<Path>) -> Result<CheckpointInfo> {
        self.inner.checkpoint(dir.as_ref())
    }

    /// Make an incremental backup under `root` (created if missing): a checkpoint whose HFiles
    /// go to a store shared by every backup there (only those not yet in it are copied), and
    /// whose every file is listed with its length and CRC-32C. [`Backups`] lists, verifies,
    /// restores and purges them. Writes and reads go on meanwhile.
    ///
    /// ```
    /// use cellar::{Backups, Db, FamilyDescriptor, Get, Options, Put, TableDescriptor};
    /// # let tmp = tempfile::tempdir().unwrap();
    /// # let (dir, root) = (tmp.path().join("db"), tmp.path().join("backups"));
    /// # let restored = tmp.path().join("restored");
    /// let db = Db::open(&dir, Options::default())?;
    /// db.create_table(TableDescriptor::new("t").family(FamilyDescriptor::new("cf")))?;
    /// db.table("t")?.put(Put::new("r").add("cf", "q", "v1"))?;
    /// let first = db.backup(&root)?;
    /// db.table("t")?.put(Put::new("r").add("cf", "q", "v2"))?;
    /// db.backup(&root)?; // copies only the HFiles the first one lacks
    ///
    /// let backups = Backups::open(&root);
    /// backups.verify(first.id)?; // every byte against its CRC-32C
    /// backups.restore(first.id, &restored)?;
    /// let old = Db::open(&restored, Options::default())?;
    /// let row = old.table("t")?.get(&Get::new("r"))?.unwrap();
    /// assert_eq!(row.value("cf", "q"), Some(&b"v1"[..]));
    /// # Ok::<(), cellar::Error>(())
    /// ```
    pub fn backup(&self, root: impl AsRef<Path>) -> Result<BackupInfo> {
        self.inner.backup(root.as_ref())
    }

    /// HBase's `snapshot 'table', 'name'`: flush, then keep the table's HFiles as they are now
    /// under `snapshots/{name}/` (hard links: no space until compaction or a drop replaces
    /// the originals). The snapshot holds every write to the table acknowledged before the
    /// call, each batch whole or not at all, and outlives the table. Writes and reads go on.
    /// [`clone_table_snapshot`](Db::clone_table_snapshot) makes a new table of it,
    /// [`restore_table_snapshot`](Db::restore_table_snapshot) puts the table back as it was
    /// (SPEC.md §17.13).
    ///
    /// ```
    /// use cellar::{Db, FamilyDescriptor, Get, Options, Put, TableDescriptor};
    /// # let tmp = tempfile::tempdir().unwrap();
    /// let db = Db::open(tmp.path(), Options::default())?;
    /// db.create_table(TableDescriptor::new("t").family(FamilyDescriptor::new("cf")))?;
    /// let t = db.table("t")?;
    /// t.put(Put::new("r").add("cf", "q", "v1"))?;
    /// db.snapshot_table("t", "before")?;
    /// t.put(Put::new("r").add("cf", "q", "v2"))?;
    ///
    /// db.clone_table_snapshot("before", "t_then")?; // a new table, as t was
    /// let then = db.table("t_then")?.get(&Get::new("r"))?.unwrap();
    /// assert_eq!(then.value("cf", "q"), Some(&b"v1"[..]));
    ///
    /// db.restore_table_snapshot("before")?; // t itself, as it was
    /// let now = t.get(&Get::new("r"))?.unwrap();
    /// assert_eq!(now.value("cf", "q"), Some(&b"v1"[..]));
    /// assert_eq!(db.list_table_snapshots()?[0].name, "before");
    /// # Ok::<(), cellar::Error>(())
    /// ```
    pub fn snapshot_table(&self, table: &str, name: &str) -> Result<TableSnapshotInfo> {
        self.snapshot_table_with(table, name, TableSnapshotOptions::default())
    }

    /// [`snapshot_table`](Db::snapshot_table) with options (HBase's `SKIP_FLUSH`).
    pub fn snapshot_table_with(
        &self,
        table: &str,
        name: &str,
        opts: TableSnapshotOptions,
    ) -> Result<TableSnapshotInfo> {
        self.inner
            .snapshot_table(&TableName::parse(table)?, name, opts)
    }

    /// Every complete table snapshot, by name. A damaged descriptor is `Corruption`.
    pub fn list_table_snapshots(&self) -> Result<Vec<TableSnapshotInfo>> {
        self.inner.list_table_snapshots()
    }

    /// One table snapshot's description, reading its descriptor alone (a damaged *other*
    /// snapshot does not matter here, as it does to [`Db::list_table_snapshots`]).
    /// `SnapshotNotFound` if there is none of that name (or it was cut short).
    pub fn table_snapshot_info(&self, name: &str) -> Result<TableSnapshotInfo> {
        self.inner.table_snapshot_info(name)
    }

    /// Delete a table snapshot (its links; files the database still uses stay).
    pub fn delete_table_snapshot(&self, name: &str) -> Result<()> {
        self.inner.delete_table_snapshot(name)
    }

    /// HBase's `clone_snapshot`: a new table `table` with the snapshot's families and data,
    /// its files linked, in one manifest edit. `TableExists` if `table` does.
    pub fn clone_table_snapshot(&self, name: &str, table: &str) -> Result<()> {
        let table = TableName::parse(table)?;
        self.inner.materialize_snapshot(name, Some(&table))
    }

    /// HBase's `restore_snapshot`: the snapshot's table gets back the families and data it
    /// had, in one manifest edit (created again if it was dropped). Every write to it since
    /// the snapshot is gone, memstore cells included. Unlike HBase, the table need not be
    /// disabled: writes before the edit are replaced, writes after it land in the restored
    /// table. A read that began before it (or a [`Snapshot`]) may see the restored data:
    /// schema changes are not versioned.
    pub fn restore_table_snapshot(&self, name: &str) -> Result<()> {
        self.inner.materialize_snapshot(name, None)
    }

    /// The largest sequence number such that every write at or below it is in HFiles, durable
    /// without the WAL: what a replication log outside the engine (written with
    /// `Durability::SkipWal`) may be truncated to. Grows as flushes install. (ECOSYSTEM.md
    /// §5.3's WAL control; HBase's flushed sequence id.)
    ///
    /// ```
    /// use cellar::{Db, Durability, FamilyDescriptor, Options, Put, TableDescriptor, WriteOptions};
    /// # let tmp = tempfile::tempdir().unwrap();
    /// let db = Db::open(tmp.path(), Options::default())?;
    /// db.create_table(TableDescriptor::new("t").family(FamilyDescriptor::new("cf")))?;
    /// let skip = WriteOptions::durability(Durability::SkipWal);
    /// let seq = db.table("t")?.put_with(Put::new("r").add("cf", "q", "v"), skip)?;
    /// assert!(db.flushed_seq() < seq); // only in a memstore
    /// db.flush()?;
    /// assert!(db.flushed_seq() >= seq);
    /// # Ok::<(), cellar::Error>(())
    /// ```
    pub fn flushed_seq(&self) -> SeqNo {
        // The read point first: every write at or below it is in the memstores or the files
        // of any later super-version (a frozen memstore leaves only with its file's install).
        let read_point = self.inner.visibility.read_point();
        let sv = self.inner.sv();
        let in_memory = sv
            .mems
            .values()
            .flat_map(|m| std::iter::once(&m.active).chain(&m.frozen))
            .filter(|m| !m.is_empty())
            .map(|m| m.min_seq())
            .min();
        in_memory.map_or(read_point, |s| read_point.min(s.saturating_sub(1)))
    }

    /// Pin the current state: reads `at` the snapshot see exactly the writes acknowledged
    /// before it, for as long as it lives.
    pub fn snapshot(&self) -> Snapshot {
        Snapshot::new(self.inner.clone())
    }

    /// Counters and gauges.
    pub fn stats(&self) -> Stats {
        self.inner.stats()
    }

    /// The database directory.
    pub fn path(&self) -> &Path {
        &self.inner.dir
    }

    /// Why the database refuses writes, if it does.
    pub fn poisoned(&self) -> Option<String> {
        self.inner
            .poisoned
            .lock()
            .as_ref()
            .map(|p| p.message.clone())
    }

    /// Why the database refuses writes, with the cause kind ([`crate::PoisonCause::NoSpace`]
    /// means: free space, then reopen), if it does.
    pub fn poison(&self) -> Option<Poison> {
        self.inner.poisoned.lock().clone()
    }

    /// Create a namespace.
    pub fn create_namespace(&self, name: &str) -> Result<()> {
        validate_name("namespace", name)?;
        self.inner.admin_edit(|state| {
            if state.namespaces().contains(name) {
                return Err(Error::InvalidArgument(format!("namespace {name} exists")));
            }
            Ok(VersionEdit {
                create_namespaces: vec![name.to_owned()],
                ..VersionEdit::default()
            })
        })
    }

    /// Drop an empty namespace (`default` cannot be dropped).
    pub fn drop_namespace(&self, name: &str) -> Result<()> {
        self.inner.admin_edit(|state| {
            if name == crate::schema::DEFAULT_NAMESPACE {
                return Err(Error::InvalidArgument(
                    "the default namespace cannot be dropped".into(),
                ));
            }
            if !state.namespaces().contains(name) {
                return Err(Error::NamespaceNotFound(name.to_owned()));
            }
            if state
                .tables()
                .values()
                .any(|t| t.descriptor.name.namespace == name)
            {
                return Err(Error::InvalidArgument(format!(
                    "namespace {name} still has tables"
                )));
            }
            Ok(VersionEdit {
                drop_namespaces: vec![name.to_owned()],
                ..VersionEdit::default()
            })
        })
    }

    /// Namespaces, sorted.
    pub fn list_namespaces(&self) -> Vec<String> {
        self.inner
            .manifest
            .lock()
            .1
            .namespaces()
            .iter()
            .cloned()
            .collect()
    }

    /// Create a table.
    pub fn create_table(&self, desc: TableDescriptor) -> Result<()> {
        desc.validate()?;
        self.inner.admin_edit(|state| {
            if !state.namespaces().contains(&desc.name.namespace) {
                return Err(Error::NamespaceNotFound(desc.name.namespace.clone()));
            }
            if state.table_by_name(&desc.name).is_some() {
                return Err(Error::TableExists(desc.name.to_string()));
            }
            let id = state.next_table_id();
            let first = state.next_family_id();
            let family_ids: Vec<u32> = (0..desc.families.len() as u32).map(|i| first + i).collect();
            Ok(VersionEdit {
                next_table_id: Some(id + 1),
                next_family_id: Some(first + desc.families.len() as u32),
                put_tables: vec![TableEntry {
                    id,
                    descriptor: desc.clone(),
                    family_ids,
                }],
                ..VersionEdit::default()
            })
        })
    }

    /// Change a table's families: add families, change settings, or remove families (whose
    /// files are deleted). Families are matched by name.
    pub fn alter_table(&self, desc: TableDescriptor) -> Result<()> {
        desc.validate()?;
        let removed = self.inner.admin_edit_with_files(|state| {
            let Some(old) = state.table_by_name(&desc.name) else {
                return Err(Error::TableNotFound(desc.name.to_string()));
            };
            let mut next_family = state.next_family_id();
            let family_ids: Vec<u32> = desc
                .families
                .iter()
                .map(|f| {
                    old.descriptor
                        .families
                        .iter()
                        .position(|o| o.name == f.name)
                        .and_then(|i| old.family_ids.get(i).copied())
                        .unwrap_or_else(|| {
                            next_family += 1;
                            next_family - 1
                        })
                })
                .collect();
            let gone: Vec<u32> = old
                .family_ids
                .iter()
                .copied()
                .filter(|id| !family_ids.contains(id))
                .collect();
            let deleted = files_of(state, &gone);
            Ok((
                VersionEdit {
                    next_family_id: Some(next_family),
                    put_tables: vec![TableEntry {
                        id: old.id,
                        descriptor: desc.clone(),
                        family_ids,
                    }],
                    // The removed families' files leave the version with the families (the
                    // table entry is replaced whole); they are deleted from disk afterwards.
                    ..VersionEdit::default()
                },
                deleted,
            ))
        })?;
        self.inner.retire_files(removed);
        Ok(())
    }

    /// Drop a table and delete its files.
    pub fn drop_table(&self, name: &str) -> Result<()> {
        let name = TableName::parse(name)?;
        let removed = self.inner.admin_edit_with_files(|state| {
            let Some(t) = state.table_by_name(&name) else {
                return Err(Error::TableNotFound(name.to_string()));
            };
            let deleted = files_of(state, &t.family_ids);
            Ok((
                VersionEdit {
                    drop_tables: vec![t.id],
                    ..VersionEdit::default()
                },
                deleted,
            ))
        })?;
        self.inner.retire_files(removed);
        Ok(())
    }

    /// A table's descriptor.
    pub fn describe(&self, name: &str) -> Result<TableDescriptor> {
        let name = TableName::parse(name)?;
        let sv = self.inner.sv();
        sv.tables
            .get(&name)
            .map(|t| t.descriptor.clone())
            .ok_or_else(|| Error::TableNotFound(name.to_string()))
    }

    /// Whether a table exists.
    pub fn table_exists(&self, name: &str) -> Result<bool> {
        let name = TableName::parse(name)?;
        Ok(self.inner.sv().tables.contains_key(&name))
    }

    /// Every table, sorted by name.
    pub fn list_tables(&self) -> Vec<TableName> {
        let mut v: Vec<TableName> = self.inner.sv().tables.keys().cloned().collect();
        v.sort();
        v
    }

    /// A handle on a table: cheap, `Clone + Send + Sync`.
    pub fn table(&self, name: &str) -> Result<Table> {
        let name = TableName::parse(name)?;
        if !self.inner.sv().tables.contains_key(&name) {
            return Err(Error::TableNotFound(name.to_string()));
        }
        Ok(Table {
            db: self.clone(),
            name,
        })
    }

    /// HBase's major compaction: flush, then rewrite every file of `family` (or of every
    /// family of the table) into the last level, dropping what the purge rules allow at the
    /// bottom — delete markers (unless KEEP_DELETED_CELLS or the purge delay keeps them), the
    /// cells they mask, versions beyond VERSIONS, expired cells — but nothing a live snapshot
    /// can still see. Returns when the result is installed.
    pub fn major_compact(&self, table: &str, family: Option<&str>) -> Result<()> {
        let name = TableName::parse(table)?;
        self.inner.flush_and_wait()?;
        let sv = self.inner.sv();
        let t = sv
            .tables
            .get(&name)
            .ok_or_else(|| Error::TableNotFound(name.to_string()))?;
        let ids: Vec<u32> = match family {
            None => t.families.iter().map(|f| f.id).collect(),
            Some(f) => vec![
                t.family(f)
                    .ok_or_else(|| Error::FamilyNotFound {
                        table: name.to_string(),
                        family: f.to_owned(),
                    })?
                    .id,
            ],
        };
        drop(sv);
        self.inner.major_compact(&ids)
    }

    /// Wait until no compaction runs and the picker finds nothing due (with
    /// `compaction.threads == 0`, run the due compactions in this thread).
    pub fn wait_for_compactions(&self) -> Result<()> {
        self.inner.wait_for_compactions()
    }

    /// A human-readable report of the stats: levels, compaction, amplification, stalls,
    /// caches, WAL.
    pub fn stats_report(&self) -> String {
        compact::report(&self.stats())
    }

    /// Apply a batch of mutations on any rows and tables atomically; returns its sequence
    /// number.
    pub fn write(&self, batch: WriteBatch, opts: WriteOptions) -> Result<SeqNo> {
        let items = batch.resolve_tables()?;
        let items: Vec<(&TableName, &Mutation)> = items.iter().map(|(t, m)| (t, *m)).collect();
        self.inner.write(&items, opts)
    }
}

/// A table handle.
#[derive(Debug, Clone)]
pub struct Table {
    db: Db,
    name: TableName,
}

impl Table {
    /// The table's name.
    pub fn name(&self) -> &TableName {
        &self.name
    }

    /// Write a put with the database's default durability.
    pub fn put(&self, p: Put) -> Result<SeqNo> {
        self.put_with(p, WriteOptions::default())
    }

    /// Write a put.
    pub fn put_with(&self, p: Put, opts: WriteOptions) -> Result<SeqNo> {
        let m = Mutation::Put(p);
        self.db.inner.write(&[(&self.name, &m)], opts)
    }

    /// Write one cell at the current time with the database's default durability: the same
    /// write as `put(Put::new(row).add(family, qualifier, value))`, from borrowed bytes.
    pub fn put_cell(
        &self,
        row: &[u8],
        family: &str,
        qualifier: &[u8],
        value: &[u8],
    ) -> Result<SeqNo> {
        self.put_cell_with(row, family, qualifier, value, WriteOptions::default())
    }

    /// Write one cell at the current time: the same write, checks and errors as
    /// `put_with(Put::new(row).add(family, qualifier, value), opts)`, without building the
    /// [`Put`] (a row, a family name and a value copied into it, then dropped). For loads of
    /// single-cell rows, as a key-value store is used.
    ///
    /// ```
    /// use cellar::{Db, Durability, FamilyDescriptor, Get, Options, TableDescriptor, WriteOptions};
    /// # let tmp = tempfile::tempdir().unwrap();
    /// let db = Db::open(tmp.path(), Options::default())?;
    /// db.create_table(TableDescriptor::new("kv").family(FamilyDescriptor::new("f")))?;
    /// let kv = db.table("kv")?;
    /// let fsynced = WriteOptions::durability(Durability::FsyncWal);
    /// kv.put_cell_with(b"k1", "f", b"", b"v1", fsynced)?;
    /// let row = kv.get(&Get::new("k1"))?.unwrap();
    /// assert_eq!(row.value("f", ""), Some(&b"v1"[..]));
    /// # Ok::<(), cellar::Error>(())
    /// ```
    pub fn put_cell_with(
        &self,
        row: &[u8],
        family: &str,
        qualifier: &[u8],
        value: &[u8],
        opts: WriteOptions,
    ) -> Result<SeqNo> {
        let cell = write::CellPut {
            row,
            family,
            qualifier,
            value,
        };
        self.db.inner.put_cell(&self.name, cell, opts)
    }

    /// Write a delete with the database's default durability.
    pub fn delete(&self, d: Delete) -> Result<SeqNo> {
        self.delete_with(d, WriteOptions::default())
    }

    /// Write a delete.
    pub fn delete_with(&self, d: Delete, opts: WriteOptions) -> Result<SeqNo> {
        let m = Mutation::Delete(d);
        self.db.inner.write(&[(&self.name, &m)], opts)
    }

    /// Apply mutations of one row atomically.
    pub fn mutate_row(&self, rm: RowMutations, opts: WriteOptions) -> Result<SeqNo> {
        if let Some(m) = rm.mutations.iter().find(|m| m.row() != rm.row.as_slice()) {
            return Err(Error::InvalidArgument(format!(
                "row mutation on {} holds a mutation of row {}",
                cellar_format::display::to_string_binary(&rm.row),
                cellar_format::display::to_string_binary(m.row())
            )));
        }
        let items: Vec<(&TableName, &Mutation)> =
            rm.mutations.iter().map(|m| (&self.name, m)).collect();
        self.db.inner.write(&items, opts)
    }

    /// Apply `cam`'s mutations if its conditions hold on the row's current values, atomically
    /// (under the row lock), with the database's default durability. True when applied; a
    /// failed check writes nothing.
    pub fn check_and_mutate(&self, cam: CheckAndMutate) -> Result<bool> {
        self.check_and_mutate_with(cam, WriteOptions::default())
    }

    /// [`Table::check_and_mutate`] with explicit write options.
    pub fn check_and_mutate_with(&self, cam: CheckAndMutate, opts: WriteOptions) -> Result<bool> {
        self.db.inner.check_and_mutate(&self.name, cam, opts)
    }

    /// Add to 8-byte big-endian counters of a row atomically, with the database's default
    /// durability; returns the new values (see [`Increment`]).
    pub fn increment(&self, inc: Increment) -> Result<Row> {
        self.increment_with(inc, WriteOptions::default())
    }

    /// [`Table::increment`] with explicit write options.
    pub fn increment_with(&self, inc: Increment, opts: WriteOptions) -> Result<Row> {
        self.db.inner.increment(&self.name, inc, opts)
    }

    /// Append to the newest values of columns of a row atomically, with the database's
    /// default durability; returns the new values (see [`Append`]).
    pub fn append(&self, app: Append) -> Result<Row> {
        self.append_with(app, WriteOptions::default())
    }

    /// [`Table::append`] with explicit write options.
    pub fn append_with(&self, app: Append, opts: WriteOptions) -> Result<Row> {
        self.db.inner.append(&self.name, app, opts)
    }

    /// Read one row.
    pub fn get(&self, get: &Get) -> Result<Option<Row>> {
        self.db.inner.get(&self.name, get)
    }

    /// Bulk load: add the cells of HFiles written outside the database (with
    /// [`cellar::format::HFileWriter`](crate::format::HFileWriter) or `cellar hfile build`)
    /// to `family`, as one write: each file gets one new sequence number, in the order given,
    /// and is visible whole at once; cells keep their timestamps, types and tags. Each file
    /// must name `family`; its blocks' checksums, keys and cell count are checked as it is
    /// read, and any error leaves the database unchanged.
    /// The sources are read, never changed: the cells are rewritten into the family's own
    /// files, which go to the deepest level they fit without overlapping newer data, so a
    /// load into new rows costs no compaction. Writes wait while the files are rewritten
    /// ([`IngestInfo::writes_held`]). SPEC.md §17.12 has the rules.
    ///
    /// ```
    /// # fn main() -> cellar::Result<()> {
    /// use cellar::format::{CellType, HFileWriter, KeyRef, WriterOptions};
    /// use cellar::{Db, FamilyDescriptor, Get, Options, TableDescriptor};
    /// let dir = tempfile::tempdir().unwrap();
    /// let path = dir.path().join("load.hfile");
    /// let mut w = HFileWriter::new(
    ///     std::fs::File::create(&path).unwrap(),
    ///     "load.hfile",
    ///     WriterOptions::new("cf"),
    /// )?;
    /// for row in ["r1", "r2"] {
    ///     let key = KeyRef {
    ///         row: row.as_bytes(),
    ///         family: b"cf",
    ///         qualifier: b"q",
    ///         timestamp: 7,
    ///         type_code: CellType::Put as u8,
    ///         seq: 0,
    ///     };
    ///     w.append(&key, b"loaded")?;
    /// }
    /// w.finish()?;
    ///
    /// let db = Db::open(dir.path().join("db"), Options::default())?;
    /// db.create_table(TableDescriptor::new("t").family(FamilyDescriptor::new("cf")))?;
    /// let t = db.table("t")?;
    /// let info = t.ingest("cf", &[&path])?;
    /// assert_eq!((info.files[0].cells, info.files[0].level), (2, 6));
    /// let row = t.get(&Get::new("r2"))?.unwrap();
    /// assert_eq!(row.value("cf", "q"), Some(&b"loaded"[..]));
    /// # Ok(())
    /// # }
    /// ```
    pub fn ingest<P: AsRef<Path>>(&self, family: &str, files: &[P]) -> Result<IngestInfo> {
        self.ingest_with(family, files, IngestOptions::default())
    }

    /// [`Table::ingest`] with options: [`IngestOptions::move_files`] takes the sources over
    /// (hard-linked where they are loaded as they are, their names removed after the load).
    pub fn ingest_with<P: AsRef<Path>>(
        &self,
        family: &str,
        files: &[P],
        opts: IngestOptions,
    ) -> Result<IngestInfo> {
        let files: Vec<PathBuf> = files.iter().map(|p| p.as_ref().to_path_buf()).collect();
        self.db.inner.ingest(&self.name, family, &files, opts)
    }

    /// Take a Get apart: every source it considers (memstores, files by level) and why each
    /// file is read or skipped, every cell of the row found, each with the verdict of the
    /// Get's resolution (returned, masked — naming the marker —, beyond VERSIONS, expired,
    /// outside the time range, not yet visible ...), and the row the Get returns. For an
    /// operator asking why a read returns what it does; it reads every cell of the row, so it
    /// costs more than the Get. See [`Explanation`].
    ///
    /// ```
    /// # fn main() -> cellar::Result<()> {
    /// use cellar::{Db, Delete, FamilyDescriptor, Get, Options, Put, TableDescriptor, Verdict};
    /// let dir = tempfile::tempdir().unwrap();
    /// let db = Db::open(dir.path(), Options::default())?;
    /// db.create_table(TableDescriptor::new("t").family(FamilyDescriptor::new("cf")))?;
    /// let t = db.table("t")?;
    /// t.put(Put::new("r1").add_at("cf", "q", 1, "old"))?;
    /// db.flush()?;
    /// t.delete(Delete::new("r1").columns("cf", "q"))?;
    /// let e = t.explain(&Get::new("r1"))?;
    /// assert!(e.row.is_none());
    /// let put = e.cells.iter().find(|c| c.verdict == Verdict::Masked).unwrap();
    /// let marker = &e.cells[put.masked_by.unwrap()];
    /// assert_eq!(marker.cell.cell_type, cellar::format::CellType::DeleteColumn);
    /// # Ok(())
    /// # }
    /// ```
    pub fn explain(&self, get: &Get) -> Result<Explanation> {
        self.db.inner.explain(&self.name, get)
    }

    /// Read one row, as [`Table::get`] does, and hand it to `f` as a borrowed [`RowView`]
    /// (`None` when the row has no visible cell); returns what `f` returns. The row's
    /// qualifiers and values are copied into one buffer instead of an owned [`Row`] of owned
    /// [`Cell`](crate::Cell)s (an allocation for the row key, the cell vector, and each cell's
    /// row, family, qualifier and value): the counterpart of RocksDB's `get_pinned`. A Get
    /// with a filter builds the owned row and views it.
    ///
    /// ```
    /// # fn main() -> cellar::Result<()> {
    /// use cellar::{Db, FamilyDescriptor, Get, Options, Put, TableDescriptor};
    /// let dir = tempfile::tempdir().unwrap();
    /// let db = Db::open(dir.path(), Options::default())?;
    /// db.create_table(TableDescriptor::new("t").family(FamilyDescriptor::new("cf")))?;
    /// let t = db.table("t")?;
    /// t.put(Put::new("r1").add("cf", "q", "v1"))?;
    /// let len = t.get_view(&Get::new("r1"), |row| row.and_then(|r| r.value("cf", "q")).map(<[u8]>::len))?;
    /// assert_eq!(len, Some(2));
    /// assert!(t.get_view(&Get::new("r2"), |row| row.is_none())?);
    /// # Ok(())
    /// # }
    /// ```
    pub fn get_view<R>(&self, get: &Get, f: impl FnOnce(Option<RowView<'_>>) -> R) -> Result<R> {
        self.db.inner.get_view(&self.name, get, f)
    }

    /// Read many rows at once (HBase's `Table.get(List<Get>)`, RocksDB's `MultiGet`); the
    /// results come in the order of `gets`, `None` where [`Table::get`] would give `None`.
    ///
    /// Every Get of the batch reads at **one read point**, taken when the call starts (a Get
    /// with an explicit [`read_point`](Get::read_point) keeps its own, as in [`Table::get`]):
    /// the rows are a consistent snapshot, as one scan's are, whatever writes, flushes or
    /// compactions run meanwhile; likewise the clock is read once for the batch, so a cell's
    /// TTL expires for all of its Gets or none. The rows are read in row order, and a row in settled data
    /// (one file, no memstore) has its index descent done and its block's bytes asked of the
    /// processor a few rows ahead, so the memory waits of neighbouring rows overlap: on
    /// cached data, batches of 32 read 12% more rows a second than single Gets, each through
    /// the public API (`benches/RESULTS.md`, session 33; 1.5x in that session's comparison,
    /// whose single Gets also pay its harness's per-call work). Blocks missing from the cache are read from the
    /// file one at a time, as a Get reads them. Every Get's arguments are checked before any
    /// row is read; the first error (a bad Get, an unknown family, a read that failed) fails
    /// the whole batch.
    ///
    /// ```
    /// # fn main() -> cellar::Result<()> {
    /// use cellar::{Db, FamilyDescriptor, Get, Options, Put, TableDescriptor};
    /// let dir = tempfile::tempdir().unwrap();
    /// let db = Db::open(dir.path(), Options::default())?;
    /// db.create_table(TableDescriptor::new("t").family(FamilyDescriptor::new("cf")))?;
    /// let t = db.table("t")?;
    /// t.put(Put::new("b").add("cf", "q", "vb"))?;
    /// t.put(Put::new("a").add("cf", "q", "va"))?;
    /// let rows = t.get_many(&[Get::new("b"), Get::new("zz"), Get::new("a")])?;
    /// let values: Vec<_> = rows.iter().map(|r| r.as_ref().and_then(|r| r.value("cf", "q"))).collect();
    /// assert_eq!(values, [Some(&b"vb"[..]), None, Some(&b"va"[..])]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn get_many(&self, gets: &[Get]) -> Result<Vec<Option<Row>>> {
        self.db.inner.get_many(&self.name, gets)
    }

    /// [`Table::get_many`] handing each row to `f` as a borrowed [`RowView`] (as
    /// [`Table::get_view`] does), with the index of its Get in `gets`. `f` is called once per
    /// Get, in **row order** (not the order of `gets`; equal rows in the order given), before
    /// the next row is read.
    ///
    /// ```
    /// # fn main() -> cellar::Result<()> {
    /// use cellar::{Db, FamilyDescriptor, Get, Options, Put, TableDescriptor};
    /// let dir = tempfile::tempdir().unwrap();
    /// let db = Db::open(dir.path(), Options::default())?;
    /// db.create_table(TableDescriptor::new("t").family(FamilyDescriptor::new("cf")))?;
    /// let t = db.table("t")?;
    /// t.put(Put::new("a").add("cf", "q", "va"))?;
    /// let mut seen = Vec::new();
    /// t.get_many_view(&[Get::new("b"), Get::new("a")], |i, row| {
    ///     seen.push((i, row.and_then(|r| r.value("cf", "q")).map(<[u8]>::to_vec)));
    /// })?;
    /// assert_eq!(seen, [(1, Some(b"va".to_vec())), (0, None)]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn get_many_view(
        &self,
        gets: &[Get],
        f: impl FnMut(usize, Option<RowView<'_>>),
    ) -> Result<()> {
        self.db.inner.get_many_view(&self.name, gets, f)
    }

    /// Scan rows; the iterator sees one snapshot from its first row to its last.
    pub fn scan(&self, scan: Scan) -> Result<ScanIter> {
        read::ScanIter::new(self.db.inner.clone(), &self.name, scan)
    }

    /// Scan rows, handing each to `f` as a borrowed [`RowView`] until `f` returns
    /// `ControlFlow::Break` or the scan ends. The rows are exactly those [`Table::scan`]
    /// returns, at one snapshot, but a forward scan without a filter builds no owned cells
    /// and keeps its sources positioned from the first row to the last (reversed and
    /// filtered scans view the iterator's rows). With the system allocator, `cellar bench`'s
    /// readseq and seekrandom read 1.5–1.8× the rows per second they read through the
    /// iterator; with mimalloc, whose allocations cost less, 1.1–1.2× (benches/RESULTS.md).
    /// `f` should not block for long: the scan holds its snapshot's files until it returns.
    ///
    /// ```
    /// # fn main() -> cellar::Result<()> {
    /// use std::ops::ControlFlow;
    /// use cellar::{Db, FamilyDescriptor, Options, Put, Scan, TableDescriptor};
    /// let dir = tempfile::tempdir().unwrap();
    /// let db = Db::open(dir.path(), Options::default())?;
    /// db.create_table(TableDescriptor::new("t").family(FamilyDescriptor::new("cf")))?;
    /// let t = db.table("t")?;
    /// for r in ["a", "b", "c"] {
    ///     t.put(Put::new(r).add("cf", "q", r))?;
    /// }
    /// let mut seen = Vec::new();
    /// t.scan_each(Scan::new().start_row("b"), |row| {
    ///     seen.push((row.key().to_vec(), row.value("cf", "q").map(<[u8]>::to_vec)));
    ///     ControlFlow::Continue(())
    /// })?;
    /// assert_eq!(seen, [(b"b".to_vec(), Some(b"b".to_vec())), (b"c".to_vec(), Some(b"c".to_vec()))]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn scan_each(
        &self,
        scan: Scan,
        f: impl FnMut(&RowView<'_>) -> std::ops::ControlFlow<()>,
    ) -> Result<()> {
        read::ScanIter::new(self.db.inner.clone(), &self.name, scan)?.for_each_row(f)
    }
}

fn files_of(state: &ManifestState, families: &[u32]) -> Vec<Arc<crate::types::FileMeta>> {
    let v = state.current();
    let mut out = Vec::new();
    for &f in families {
        if let Some(levels) = v.levels(f) {
            for files in levels.iter() {
                out.extend(files.iter().cloned());
            }
        }
    }
    out
}

impl DbInner {
    fn open(dir: &Path, opts: Options) -> Result<DbInner> {
        let fs = opts.fs.clone();
        crate::fs::create_dir_durable(&*fs, dir)
            .map_err(|e| Error::io(dir, "creating the database directory", e))?;
        let lock = fs.lock(&dir.join(LOCK_FILE)).map_err(|e| {
            if e.kind() == std::io::ErrorKind::WouldBlock {
                Error::Locked(dir.to_path_buf())
            } else {
                Error::io(dir.join(LOCK_FILE), "locking the database", e)
            }
        })?;
        let marker = dir.join(checkpoint::INCOMPLETE_MARKER);
        if fs
            .exists(&marker)
            .map_err(|e| Error::io(&marker, "checking for an incomplete checkpoint", e))?
        {
            return Err(Error::InvalidArgument(format!(
                "{} holds a checkpoint that was never finished ({} is there): delete the \
                 directory and make the checkpoint again",
                dir.display(),
                checkpoint::INCOMPLETE_MARKER
            )));
        }
        let exists = manifest::database_exists(&*fs, dir)?;
        let (mut man, mut state) = match (exists, opts.create_if_missing, opts.error_if_exists) {
            (true, _, true) => {
                return Err(Error::InvalidArgument(format!(
                    "a database exists in {}",
                    dir.display()
                )))
            }
            (true, _, false) => Manifest::open_with(fs.clone(), dir, opts.manifest.clone())?,
            (false, true, _) => Manifest::create_with(fs.clone(), dir, opts.manifest.clone())?,
            (false, false, _) => {
                return Err(Error::InvalidArgument(format!(
                    "no database in {} and create_if_missing is off",
                    dir.display()
                )))
            }
        };
        for name in man.obsolete_files(&state)? {
            let p = dir.join(&name);
            match fs.remove(&p) {
                Ok(()) => {
                    tracing::info!(file = %p.display(), "removed a file no version refers to")
                }
                Err(e) => {
                    tracing::warn!(file = %p.display(), error = %e, "could not remove an obsolete file")
                }
            }
        }
        // Directories of families dropped before: empty now that their files are gone. Only
        // here, before anything runs, since a flush still running for a family dropped under
        // it creates its directory (SPEC.md §17.9).
        let mut removed_dirs = false;
        for name in man.dropped_family_dirs(&state)? {
            let p = dir.join(&name);
            match fs.remove_dir(&p) {
                Ok(()) => {
                    removed_dirs = true;
                    tracing::info!(dir = %p.display(), "removed the directory of a dropped family")
                }
                Err(e) => {
                    tracing::warn!(dir = %p.display(), error = %e, "could not remove the directory of a dropped family")
                }
            }
        }
        if removed_dirs {
            let data = dir.join(manifest::DATA_DIR);
            if let Err(e) = fs.sync_dir(&data) {
                tracing::warn!(dir = %data.display(), error = %e, "could not sync the data directory");
            }
        }
        let mut sv = SuperVersion::build(&state, None);
        let wal_dir = dir.join(WAL_DIR);
        // Both directories exist, durably, before anything in them is acknowledged (a power loss
        // must not take a directory whose files the manifest or an fsync'd write depends on).
        for d in [&wal_dir, &dir.join(manifest::DATA_DIR)] {
            crate::fs::create_dir_durable(&*fs, d)
                .map_err(|e| Error::io(d, "creating a database directory", e))?;
        }
        let (mut recovery, logged_deletes) =
            replay_wal(&*fs, &wal_dir, &state, &sv, opts.wal_recovery)?;
        // Row-range deletes logged but missing from the manifest (a crash between the record
        // and its edit): added now, before the replayed memstores are flushed under them.
        let mut added_deletes = false;
        for (seq, d) in &logged_deletes {
            let edit = range_delete::range_delete_edit(&state, d, *seq);
            if !edit.range_deletes.is_empty() {
                man.log_and_apply(&mut state, edit)?;
                added_deletes = true;
            }
        }
        if added_deletes {
            sv = SuperVersion::build(&state, Some(&sv));
        }
        // Before the first `.wal2` segment exists, the manifest says the WAL is in layout 2: a
        // build from before that layout fails to open on the unknown field instead of opening
        // without the segments it cannot see (SPEC.md §17.3).
        if state.wal_format() < manifest::WAL_FORMAT {
            let edit = VersionEdit {
                wal_format: Some(manifest::WAL_FORMAT),
                ..VersionEdit::default()
            };
            man.log_and_apply(&mut state, edit)?;
        }
        let replayed = recovery.replayed_batches;
        let mut last_seq = state.last_seq().max(recovery.last_wal_seq);
        let wal = Wal::open(fs.clone(), &wal_dir, opts.wal.clone(), last_seq + 1)?;
        // The last schema edit's record, lost to a crash (or a failed append) after the edit:
        // nothing in the log or the manifest reaches past the seqs used before it, so it was
        // never appended. Appended now, before any write, where it would have been.
        if let Some(r) = state.schema_record().filter(|r| last_seq <= r.after) {
            last_seq = wal.append(&r.payload, crate::Durability::FsyncWal)?;
            recovery.schema_record_relogged = true;
            tracing::warn!(
                seq = last_seq,
                after = r.after,
                "the last schema change's record was missing from the log; appended it again"
            );
        }
        // Before anything releases a segment: the slots' pins hold what their consumers need.
        let slots = slots::Slots::load(&*fs, dir, &wal)?;
        tracing::info!(
            dir = %dir.display(),
            backend = ?wal.stats().backend,
            replayed,
            last_seq,
            "database opened"
        );
        let opts_rate = opts.compaction.rate_limit_bytes_per_sec;
        let readers = FileCache::new(opts.max_open_files);
        let block_cache = (opts.block_cache_bytes > 0).then(|| {
            Arc::new(ShardedBlockCache::new(
                opts.block_cache_bytes as u64,
                opts.block_cache_meta_ratio,
            ))
        });
        let inner = DbInner {
            dir: dir.to_path_buf(),
            fs,
            opts,
            _lock: lock,
            row_locks: rowlock::RowLocks::new(),
            switch: gate::SwitchGate::default(),
            switch_requested: AtomicBool::new(false),
            sv: RwLock::new(Arc::new(sv)),
            manifest: Mutex::new((man, state)),
            frozen: Mutex::new(VecDeque::new()),
            frozen_gens: AtomicUsize::new(0),
            flush_cv: Condvar::new(),
            visibility: Arc::new(Visibility::new(last_seq)),
            poisoned: Mutex::new(None),
            is_poisoned: AtomicBool::new(false),
            flush_no_space: Mutex::new(None),
            snapshots: Mutex::new(snapshot::Registry::new()),
            readers,
            block_cache,
            counters: Counters::default(),
            shutdown: AtomicBool::new(false),
            unlogged: AtomicBool::new(false),
            recovery,
            wal,
            compaction: Mutex::new(compact::CompactState::default()),
            compaction_cv: Condvar::new(),
            cstats: Mutex::new(CompactionStats::default()),
            pressure: AtomicU8::new(0),
            rate_limiter: compact::RateLimiter::new(opts_rate),
            seek_budgets: compact::SeekBudgets::default(),
            seek_hint: Mutex::new(None),
            table_snapshots: Mutex::new(()),
            slots: Mutex::new(slots),
            feed_first_seqs: Mutex::new(Default::default()),
        };
        if replayed > 0 {
            // What the WAL held goes to files at once, so the segments can go.
            inner.switch_memstores(true)?;
        } else {
            // Nothing to keep in the older segments (flushed, or of dropped families): without
            // this, every idle open would leave another preallocated segment behind.
            let current = inner.wal.current_segment();
            // The manifest moves its log number past them before they go, as a flush's edit
            // does: replay takes a segment missing at or after the log number for a lost edit
            // (SPEC.md §16.6). Their records may also carry the highest sequence numbers ever
            // given (writes to a table or family dropped since, never flushed): the edit
            // records how far the numbers went, or the next open would give them out again
            // (§16.3). If the edit fails, the segments stay and the open fails.
            {
                let mut m = inner.manifest.lock();
                let (man, state) = &mut *m;
                if state.last_seq() < last_seq || state.log_number() < current {
                    let edit = VersionEdit {
                        last_seq: Some(last_seq.max(state.last_seq())),
                        log_number: Some(current.max(state.log_number())),
                        ..VersionEdit::default()
                    };
                    man.log_and_apply(state, edit)?;
                }
            }
            inner.wal.delete_segments_before(current)?;
        }
        inner.enforce_slot_limit();
        Ok(inner)
    }

    pub(crate) fn sv(&self) -> Arc<SuperVersion> {
        self.sv.read().clone()
    }

    fn check_poisoned(&self) -> Result<()> {
        if !self.is_poisoned.load(Ordering::Acquire) {
            return Ok(());
        }
        match &*self.poisoned.lock() {
            Some(why) => Err(Error::Poisoned(why.clone())),
            None => Ok(()),
        }
    }

    /// Enter the sticky read-only state (RELIABILITY.md §2.0 rule 8). The first poison wins:
    /// its cause is what every later call reports.
    fn poison(&self, why: Poison) {
        tracing::error!(reason = %why, "database poisoned: no more writes until reopened");
        let mut p = self.poisoned.lock();
        if p.is_none() {
            *p = Some(why.clone());
        }
        self.is_poisoned.store(true, Ordering::Release);
        drop(p);
        self.visibility.poison(&why);
        let _g = self.frozen.lock();
        self.flush_cv.notify_all();
    }

    /// At a clean close, append an empty edit to the manifest: it attests that every record
    /// before it was acknowledged, so damage to the last real edit reads as corruption instead
    /// of as a torn append to drop (which would lose a flush or compaction whose WAL segments
    /// or inputs are already deleted; found by `tests/corruption_sweep.rs`). A crash leaves the
    /// last record unattested, as it must: it may really be torn.
    fn seal_manifest(&self) {
        if self.poisoned.lock().is_some() {
            return;
        }
        let mut m = self.manifest.lock();
        let (man, state) = &mut *m;
        if let Err(e) = man.log_and_apply(state, VersionEdit::default()) {
            tracing::warn!(error = %e, "could not seal the manifest at close");
        }
    }

    /// Log a schema edit and install the new super-version, excluding writers meanwhile.
    fn admin_edit(&self, make: impl FnOnce(&ManifestState) -> Result<VersionEdit>) -> Result<()> {
        self.admin_edit_with_files(|s| make(s).map(|e| (e, ())))
            .map(|_| ())
    }

    fn admin_edit_with_files<T>(
        &self,
        make: impl FnOnce(&ManifestState) -> Result<(VersionEdit, T)>,
    ) -> Result<T> {
        self.check_poisoned()?;
        let _w = self.switch.exclusive();
        let mut m = self.manifest.lock();
        let (man, state) = &mut *m;
        let (mut edit, extra) = make(state)?;
        let changes = schema_feed::changes(state, &edit);
        // The record rides in the edit too: should a crash come between the edit and the
        // record, recovery appends it (SPEC.md §16.10). Every seq used so far is visible (the
        // exclusive gate), so the record's seq will be above `after`.
        let payload = (!changes.is_empty()).then(|| schema_feed::encode(&changes));
        edit.schema_record = payload.as_ref().map(|p| SchemaRecord {
            after: self.visibility.read_point().max(state.last_seq()),
            payload: p.clone(),
        });
        if let Err(e) = man.log_and_apply(state, edit) {
            if let Some(p) = man.poison_reason() {
                self.poison(p.clone());
            }
            return Err(e);
        }
        let mut sv = self.sv.write();
        *sv = Arc::new(SuperVersion::build(state, Some(&sv)));
        drop((sv, m));
        crate::kill_point!("schema.after_edit");
        // Still under the exclusive gate: the record's seq sits between the writes before the
        // change and those after it (see `schema_feed`). A failure there poisons the
        // database but is not this call's: the edit stands (callers undo work on an error),
        // and the next open appends the record from the edit.
        if let Some(p) = &payload {
            self.log_schema_record(p);
        }
        Ok(extra)
    }

    /// Drop deleted files from the open-file cache and their blocks from the block cache.
    /// File numbers are never reused, so a block left behind could never be served for another
    /// file; this gives its memory (and the file's descriptor) back now. Compaction calls it
    /// for its inputs once they leave the version.
    pub(crate) fn evict_files(&self, numbers: &[FileNumber]) {
        for &n in numbers {
            self.readers.evict(n);
        }
        self.seek_budgets.forget(numbers);
        if let Some(c) = &self.block_cache {
            c.evict_files(numbers);
        }
    }

    /// An open reader of an HFile, from the open-file cache (opened on a miss, with no cache
    /// lock held meanwhile), reading its blocks through the block cache.
    fn reader(&self, family: u32, number: FileNumber) -> Result<Arc<HFileReader<FormatSource>>> {
        self.readers.get_or_open(number, || {
            let path = manifest::hfile_path(&self.dir, family, number);
            let file = self
                .fs
                .open(&path)
                .map_err(|e| Error::io(&path, "opening an HFile", e))?;
            let opts = ReaderOptions {
                cache: self
                    .block_cache
                    .as_ref()
                    .map(|c| (c.clone() as Arc<dyn BlockCache>, number)),
                ..ReaderOptions::default()
            };
            let r = HFileReader::open_with(FormatSource(file), path.display().to_string(), opts)?;
            Ok(Arc::new(r))
        })
    }

    /// A reader of an HFile outside both caches, for compaction: a compaction reads each
    /// input block once, and sending those through the block cache would evict what readers
    /// use (RocksDB's `fill_cache = false` for compaction reads).
    fn uncached_reader(
        &self,
        family: u32,
        number: FileNumber,
    ) -> Result<HFileReader<FormatSource>> {
        let path = manifest::hfile_path(&self.dir, family, number);
        let file = self
            .fs
            .open(&path)
            .map_err(|e| Error::io(&path, "opening an HFile", e))?;
        Ok(HFileReader::open_with(
            FormatSource(file),
            path.display().to_string(),
            ReaderOptions::default(),
        )?)
    }

    fn stats(&self) -> Stats {
        let c = &self.counters;
        let sv = self.sv();
        let (active, frozen) = sv.memstore_bytes();
        let (oldest_snapshot, live_snapshots) = {
            let reg = self.snapshots.lock();
            (
                reg.keys().next().copied(),
                reg.values().map(|&n| n as u64).sum(),
            )
        };
        Stats {
            writes: c.writes.load(Ordering::Relaxed),
            user_bytes_written: c.user_bytes.load(Ordering::Relaxed),
            flushes: c.flushes.load(Ordering::Relaxed),
            flushed_bytes: c.flushed_bytes.load(Ordering::Relaxed),
            flushed_files: c.flushed_files.load(Ordering::Relaxed),
            flush_failures: c.flush_failures.load(Ordering::Relaxed),
            stalls: c.stalls.load(Ordering::Relaxed),
            stall_micros: c.stall_micros.load(Ordering::Relaxed),
            slowdowns: c.slowdowns.load(Ordering::Relaxed),
            bloom_skips: c.bloom_skips.load(Ordering::Relaxed),
            range_skips: c.range_skips.load(Ordering::Relaxed),
            time_skips: c.time_skips.load(Ordering::Relaxed),
            read_view_retries: c.read_view_retries.load(Ordering::Relaxed),
            gets: c.gets.load(Ordering::Relaxed),
            gets_found: c.gets_found.load(Ordering::Relaxed),
            scans: c.scans.load(Ordering::Relaxed),
            scan_rows: c.scan_rows.load(Ordering::Relaxed),
            skipped_cells: {
                let n = |i: usize| c.skipped[i].load(Ordering::Relaxed);
                SkippedCells {
                    invisible: n(0),
                    not_selected: n(1),
                    markers: n(2),
                    masked: n(3),
                    duplicates: n(4),
                    expired: n(5),
                    out_of_range: n(6),
                    versions: n(7),
                }
            },
            ingests: c.ingests.load(Ordering::Relaxed),
            ingested_files: c.ingested_files.load(Ordering::Relaxed),
            ingested_cells: c.ingested_cells.load(Ordering::Relaxed),
            ingested_bytes: c.ingested_bytes.load(Ordering::Relaxed),
            ingest_held_micros: c.ingest_held_micros.load(Ordering::Relaxed),
            memstore_active_bytes: active as u64,
            memstore_frozen_bytes: frozen as u64,
            live_files: sv.version.num_files() as u64,
            range_deletes: sv
                .tables
                .values()
                .flat_map(|t| &t.families)
                .map(|f| f.range_deletes.list().len() as u64)
                .sum(),
            wal: self.wal.stats(),
            prefault: crate::prefault::stats(),
            read_point: self.visibility.read_point(),
            recovery: self.recovery.clone(),
            oldest_snapshot,
            live_snapshots,
            // Counters must not fail: a listing error reads as no slots (and is logged).
            feed_slots: self.slot_infos().unwrap_or_else(|e| {
                tracing::warn!(error = %e, "listing the WAL for the feed slots' stats");
                Vec::new()
            }),
            compaction: self.compaction_stats(),
            block_cache: self
                .block_cache
                .as_ref()
                .map_or_else(CacheStats::default, |c| c.stats()),
            open_files: self.readers.stats(),
            memory_budget: MemoryBudget {
                block_cache_bytes: self.opts.block_cache_bytes as u64,
                memstore_bytes: self.opts.stop_write_buffer_size as u64,
            },
        }
    }
}

/// Replay the WAL into the super-version's memstores, reporting what it found.
/// Also returns the row-range deletes the log holds, with their seqs.
type LoggedRangeDeletes = Vec<(SeqNo, range_delete::LoggedRangeDelete)>;

fn replay_wal(
    fs: &dyn crate::fs::FileSystem,
    wal_dir: &Path,
    state: &ManifestState,
    sv: &SuperVersion,
    mode: wal::RecoveryMode,
) -> Result<(RecoveryReport, LoggedRangeDeletes)> {
    let names: HashMap<u32, Vec<u8>> = sv
        .families
        .iter()
        .map(|(id, d)| (*id, d.name.as_bytes().to_vec()))
        .collect();
    let mut applied = 0u64;
    let mut range_deletes = Vec::new();
    let summary = wal::replay(
        fs,
        wal_dir,
        state.log_number(),
        mode,
        |seq, payload, format| {
            let muts = crate::batch::decode(payload, format).map_err(|what| Error::Corruption {
                file: wal_dir.to_path_buf(),
                offset: 0,
                what: format!("batch of seq {seq}: {what}"),
            })?;
            let mut any = false;
            for m in muts {
                // Row-range deletes go to the manifest, once the log is read (`range_delete`).
                let logged = range_delete::LoggedRangeDelete::decode(&m).map_err(|what| {
                    Error::Corruption {
                        file: wal_dir.to_path_buf(),
                        offset: 0,
                        what: format!("batch of seq {seq}: {what}"),
                    }
                })?;
                if let Some(d) = logged {
                    range_deletes.push((seq, d));
                    continue;
                }
                // A family dropped since, or already flushed past this batch, takes nothing.
                let (Some(name), Some(mems)) = (names.get(&m.family), sv.mems.get(&m.family))
                else {
                    continue;
                };
                if seq <= state.flushed_seq(m.family) {
                    continue;
                }
                mems.active.insert(&m.key(name, seq), m.value, m.tags)?;
                any = true;
            }
            applied += u64::from(any);
            Ok(())
        },
    )?;
    if let Some(t) = &summary.torn_tail {
        tracing::warn!(
            ?t,
            "WAL ended in a torn write; the unacknowledged tail was dropped"
        );
    }
    for r in &summary.skipped {
        tracing::error!(
            ?r,
            "WAL salvage skipped a damaged range: the records in it are lost"
        );
    }
    let report = RecoveryReport {
        replayed_batches: applied,
        last_wal_seq: summary.last_seq.unwrap_or(0),
        torn_tail: summary.torn_tail.is_some(),
        skipped_ranges: summary
            .skipped
            .iter()
            .map(|r| (r.segment, r.start, r.end - r.start))
            .collect(),
        schema_record_relogged: false,
    };
    Ok((report, range_deletes))
}
