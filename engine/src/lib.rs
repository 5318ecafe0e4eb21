//! `cellar`: an embeddable log-structured storage engine with the data model of HBase and
//! Bigtable — namespaces, tables, column families, qualifiers, timestamped versions and delete
//! markers — over Cellar's own HFile-like files (`SPEC.md`).
//!
//! ```
//! use cellar::{Db, Delete, FamilyDescriptor, Get, Options, Put, Scan, TableDescriptor};
//!
//! let dir = tempfile::tempdir()?;
//! let db = Db::open(dir.path(), Options::default())?;
//! db.create_table(
//!     TableDescriptor::new("webtable")
//!         .family(FamilyDescriptor::new("contents").max_versions(3))
//!         .family(FamilyDescriptor::new("anchor")),
//! )?;
//! let t = db.table("webtable")?;
//! t.put(Put::new("com.cnn.www").add_at("contents", "html", 3, "<html>v3"))?;
//! t.put(Put::new("com.cnn.www").add_at("contents", "html", 5, "<html>v5"))?;
//! t.put(Put::new("com.cnn.www").add("anchor", "cnnsi.com", "CNN"))?;
//!
//! // The newest version by default; more when asked.
//! let row = t.get(&Get::new("com.cnn.www").column("contents", "html"))?.unwrap();
//! assert_eq!(row.value("contents", "html"), Some(&b"<html>v5"[..]));
//! let row = t.get(&Get::new("com.cnn.www").family("contents").max_versions(3))?.unwrap();
//! assert_eq!(row.versions("contents", "html").len(), 2);
//!
//! // Deletes are markers; flush moves memstores into files and reads do not change.
//! t.delete(Delete::new("com.cnn.www").column_at("contents", "html", 5))?;
//! db.flush()?;
//! let row = t.get(&Get::new("com.cnn.www").column("contents", "html"))?.unwrap();
//! assert_eq!(row.value("contents", "html"), Some(&b"<html>v3"[..]));
//! assert_eq!(t.scan(Scan::new())?.count(), 1);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Durability contract
//!
//! Each write chooses one of HBase's four levels ([`Durability`]); the database default is
//! `SyncWal` and [`Options::min_durability`] can raise every write to a floor.
//!
//! - **Acknowledged-durable**: a write that returned `Ok` under `FsyncWal` (or was followed by
//!   a successful WAL sync). Its WAL record and every earlier one went through an fdatasync
//!   that started after their writes completed. It survives power loss.
//! - **Acknowledged-buffered**: `Ok` under `SyncWal`: the record is in the operating system. It
//!   survives a crash of the process, not of the machine. `AsyncWal` returns before the record
//!   is written (it is, shortly); `SkipWal` writes none and is lost by any crash.
//! - **Maybe**: a write in flight at the crash, or one that returned an error. After recovery it
//!   is present whole or absent whole.
//!
//! After any recovery: (1) no acknowledged-durable write is lost; (2) the state is the result of
//! the first R batches in sequence order, for some R at least the last acknowledged-durable
//! one — no hole; (3) a batch (a row's mutations, or a cross-row [`WriteBatch`]) is visible
//! whole or not at all, at every read point; (4) nothing appears that was not written; (5) a
//! delete inside the recovered prefix stays deleted; (6) the manifest names only files that
//! exist and verify; (7) corruption is reported as an error, never returned as data; (8) after a
//! failed write or sync of the WAL, a flush or the manifest, the database is *poisoned*: it
//! refuses writes with [`Error::Poisoned`] until reopened, and never retries an fsync and trusts
//! it.
//!
//! A full disk is reported by kind: the call that hit it gets [`Error::NoSpace`], and a
//! poisoned database remembers the cause ([`Db::poison`], [`PoisonCause::NoSpace`];
//! [`Error::is_no_space`] covers both). WAL and manifest writes poison on it; a flush or
//! compaction output that finds the disk full is removed and retried later instead, since no
//! acknowledged write depends on it.
//!
//! # Modules
//! - [`fs`]: the only door to files (real, and room for simulated and fault-injecting ones).
//! - [`wal`]: the write-ahead log (io_uring with group commit, or pwrite; SPEC.md §16).
//! - [`manifest`]: version edits, CURRENT, the live file set (SPEC.md §17).
//! - [`memstore`], [`batch`], [`visibility`]: the write path's parts.
//! - [`compaction`]: the picker and the purge rules of compaction (SPEC.md §20).
//! - [`clock`]: where "now" comes from (TTL, LATEST timestamps, marker ages); replaceable.
//! - [`cache`]: the block cache and the open-file cache of the read path.
//! - [`read`]: merging and version resolution (SPEC.md §13).
//! - [`keys`]: row-key design helpers from the HBase schema-design seeds.
//! - [`inspect`]: read-only views of a database directory (manifest, WAL) for operator tools.
//! - `testkit` (feature `testkit`): the reliability suite's model and sweeps, for tests and
//!   `cellar reliability-report`; not part of the API.

pub mod batch;
pub mod cache;
pub mod clock;
pub mod compaction;
mod db;
pub mod error;
pub mod fs;
pub mod inspect;
pub mod keys;
pub mod kill;
pub mod manifest;
pub mod memstore;
mod metrics;
mod prefault;
pub mod read;
pub mod schema;
mod sync_shim;
pub mod tags;
#[cfg(feature = "testkit")]
pub mod testkit;
pub mod types;
pub mod visibility;
pub mod wal;

pub use cache::{CacheStats, KindStats, OpenFileStats};
pub use cellar_format as format;
pub use clock::{Clock, ManualClock, SystemClock};
pub use db::{
    read_feed_slots, Append, BackupFile, BackupInfo, Backups, ChangeBatch, ChangeCell, ChangeFeed,
    ChangeFeedOptions, CheckAndMutate, CheckpointInfo, CompactionStats, Db, Delete, DeleteRows,
    ExplainSource, ExplainedCell, Explanation, ExportInfo, ExportedFile, FeedSlotInfo, Increment,
    IngestInfo, IngestOptions, IngestedFile, LevelStats, MemoryBudget, Mutation, Options,
    PurgeInfo, Put, RangeEstimate, RecoveryReport, RowMutations, ScanIter, SchemaChange,
    SkippedCells, Snapshot, SourceDecision, SourceKind, Stats, Table, TableSnapshotInfo,
    TableSnapshotOptions, WriteBatch, WriteOptions, FEED_SLOTS, SCHEMA_FAMILY, SNAPSHOTS_DIR,
};
pub use error::{Error, Poison, PoisonCause, Result};
pub(crate) use kill::kill_point;
pub use prefault::PrefaultStats;
pub use read::filter::{CompareOp, Filter, Matcher, Pattern};
pub use read::query::{Cell, Get, Row, Scan, TimeRange};
pub use read::resolve::Verdict;
pub use read::view::{CellRef, RowView};
pub use schema::{
    BloomType, CompressionType, FamilyDescriptor, KeepDeletedCells, TableDescriptor, TableName,
};
pub use wal::{Durability, RecoveryMode};
