//! Tunables of a database, with their defaults.

use std::sync::Arc;

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
}

impl Default for Options {
    fn default() -> Self {
        let wbs = 64 << 20;
        Options {
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
        }
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
