//! Tunables of a database, with their defaults.

use std::sync::Arc;

use crate::clock::{Clock, SystemClock};
use crate::compaction::CompactionOptions;
use crate::fs::{RealFs, SharedFs};
use crate::manifest::ManifestOptions;
use crate::wal::{Durability, RecoveryMode, WalOptions};

/// How a database is opened and run.
#[derive(Debug, Clone)]
pub struct Options {
    /// The file system (the real one by default; tests plug in simulated ones).
    pub fs: SharedFs,
    /// Create the database if the directory holds none (default true).
    pub create_if_missing: bool,
    /// Fail if a database already exists (default false).
    pub error_if_exists: bool,
    /// Durability of writes that do not choose one: HBase's default, SYNC_WAL. A database-wide
    /// floor can be raised with [`Options::min_durability`].
    pub default_durability: Durability,
    /// Every write is at least this durable, whatever it asks (default `SkipWal`: no floor).
    pub min_durability: Durability,
    /// Memstores are switched and flushed once the active ones hold this many bytes
    /// (default 64 MiB).
    pub write_buffer_size: usize,
    /// Writers are slowed (a 1 ms pause per write) above this many memstore bytes, active and
    /// frozen (default 3 × `write_buffer_size`).
    pub slowdown_write_buffer_size: usize,
    /// Writers stop until flushes catch up above this many memstore bytes (default
    /// 4 × `write_buffer_size`), or with this many memstore generations waiting for flush.
    pub stop_write_buffer_size: usize,
    /// Generations of frozen memstores allowed before writers stop (default 2).
    pub max_frozen_generations: usize,
    /// WAL settings (segment size, io_uring or pwrite backend).
    pub wal: WalOptions,
    /// What WAL replay does with a torn tail or damage (default: tolerate a torn tail only).
    pub wal_recovery: RecoveryMode,
    /// Manifest settings.
    pub manifest: ManifestOptions,
    /// Compaction and the write back-pressure that follows from it.
    pub compaction: CompactionOptions,
    /// Bytes of decoded blocks the block cache holds; 0 turns the cache off. Default 256 MiB:
    /// half of the default [`Options::memory_budget`] of 512 MiB, whose other half is the
    /// memstores' stop limit (4 × the 64 MiB write buffer).
    pub block_cache_bytes: usize,
    /// Most of `block_cache_bytes` index and bloom blocks may hold, in a pool data blocks
    /// cannot evict (default 0.25; 0 shares one pool). The pool holds only what it uses (from
    /// a floor of 1 MiB per shard, at most a quarter of the share above 4 MiB); data blocks
    /// get the rest. Within the same share, open files' readers hold their bloom chunks and
    /// the children of their root index themselves, outside the pools but charged to the
    /// cache (no pins when the ratio is 0). See [`crate::cache`].
    pub block_cache_meta_ratio: f64,
    /// Most HFiles kept open at once (default 1000, LevelDB's default; with the WAL, the
    /// manifest and readers still in use after eviction the process needs a few more
    /// descriptors than this, so lower it under a 1024 descriptor limit). A Get or scan keeps
    /// using a file evicted meanwhile; the next read reopens it.
    pub max_open_files: usize,
    /// Where "now" comes from: the timestamp of writes at LATEST, TTL expiry (reads, flushes,
    /// compactions), the age of markers against `purge_delay` and the time-based compaction
    /// picks. The system clock by default; a [`crate::ManualClock`] lets a test cross TTL
    /// boundaries on purpose (HBase's `EnvironmentEdgeManager`).
    pub clock: Arc<dyn Clock>,
}

/// Default [`Options::memory_budget`]: 512 MiB.
const DEFAULT_MEMORY_BUDGET: usize = 512 << 20;

impl Default for Options {
    fn default() -> Self {
        let wbs = 64 << 20;
        let opts = Options {
            fs: Arc::new(RealFs),
            create_if_missing: true,
            error_if_exists: false,
            default_durability: Durability::SyncWal,
            min_durability: Durability::SkipWal,
            write_buffer_size: wbs,
            slowdown_write_buffer_size: 3 * wbs,
            stop_write_buffer_size: 4 * wbs,
            max_frozen_generations: 2,
            wal: WalOptions::default(),
            wal_recovery: RecoveryMode::default(),
            manifest: ManifestOptions::default(),
            compaction: CompactionOptions::default(),
            block_cache_bytes: 256 << 20,
            block_cache_meta_ratio: 0.25,
            max_open_files: 1000,
            clock: Arc::new(SystemClock::default()),
        };
        debug_assert_eq!(opts.memory_budget_bytes(), DEFAULT_MEMORY_BUDGET as u64);
        opts
    }
}

impl Options {
    /// Set the write buffer size and scale the slowdown and stop limits with it.
    pub fn write_buffer_size(mut self, bytes: usize) -> Self {
        self.write_buffer_size = bytes;
        self.slowdown_write_buffer_size = 3 * bytes;
        self.stop_write_buffer_size = 4 * bytes;
        self
    }

    /// Split one memory budget between the block cache and the memstores, the two consumers
    /// that grow with use:
    /// - half to the block cache (`block_cache_bytes`);
    /// - half to the memstores: it is their stop limit (`stop_write_buffer_size`, where writers
    ///   stop until flushes catch up), so `write_buffer_size` is an eighth of the budget and
    ///   the slowdown limit three eighths.
    ///
    /// The even split is HBase's (40% of the heap to the block cache, 40% to memstores); the
    /// default options are `memory_budget(512 MiB)`. Not counted: open file handles and the
    /// root index and bloom meta each open reader keeps (bounded by `max_open_files`), and the
    /// blocks a running scan holds.
    pub fn memory_budget(mut self, bytes: usize) -> Self {
        let cache = bytes / 2;
        let wbs = (bytes - cache) / 4;
        self.block_cache_bytes = cache;
        self.write_buffer_size(wbs)
    }

    /// The memory budget these options amount to: the block cache plus the memstores' stop
    /// limit.
    pub fn memory_budget_bytes(&self) -> u64 {
        (self.block_cache_bytes as u64).saturating_add(self.stop_write_buffer_size as u64)
    }
}

/// Per-write options.
#[derive(Debug, Clone, Copy, Default)]
pub struct WriteOptions {
    /// Durability of this write; `None` takes the database default.
    pub durability: Option<Durability>,
}

impl WriteOptions {
    /// With an explicit durability.
    pub fn durability(d: Durability) -> Self {
        WriteOptions {
            durability: Some(d),
        }
    }
}
