//! The WAL's device: how the writer thread gets a group's bytes into a segment file and, when
//! asked, makes them durable.
//!
//! Contract of [`WalDevice::write`]: when it returns `Ok`, all of `buf` is written at `offset`
//! (short writes were continued), and if `sync` is true the file is durable up to the end of
//! `buf`: an fdatasync of `file` has completed that *started after* every byte of `buf` (and
//! every earlier write of the same thread) had completed, or — the io_uring device's direct
//! path, SPEC.md §16.5 — every byte before `buf` was already durable and `buf` was written by
//! an `O_DSYNC` direct write, whose completion makes it durable. On `Err` nothing is promised
//! and the WAL poisons itself; the device never retries a failed fsync or a failed direct
//! write. An empty `buf` with `sync` is a plain fdatasync.

use std::io;
use std::sync::Arc;

use crate::fs::File;

/// Which device implementation writes the WAL.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BackendKind {
    /// io_uring when the kernel allows it, else [`BackendKind::Sync`]. The environment variable
    /// `CELLAR_WAL_BACKEND=io_uring|sync` overrides this choice (for tests and CI).
    ///
    /// Measured against `Sync` (five alternated `compare-child --phase sync` runs of one
    /// binary, benches/RESULTS.md): one fsyncing writer 8.4k puts/s here against 9.7k, 16
    /// writers 37.9k against 37.4k. The kernel runs an io_uring fsync of a regular file on an
    /// io-wq worker thread, so each synced group pays two more wake-ups. Since 2026-12-01 a
    /// synced group that follows a synced group is written `O_DIRECT|O_DSYNC` instead, with
    /// no fsync and no worker (uring.rs; SPEC.md §16.5). MISSION.md asks for io_uring on
    /// Linux, so it stays the default; `Sync` is one setting away.
    #[default]
    Auto,
    /// io_uring (Linux): one `Write` linked to an `Fsync(DATASYNC)` per group. Opening fails if
    /// the ring cannot be set up.
    IoUring,
    /// `pwrite` + `fdatasync` from the writer thread.
    Sync,
}

impl std::fmt::Display for BackendKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            BackendKind::Auto => "auto",
            BackendKind::IoUring => "io_uring",
            BackendKind::Sync => "sync",
        })
    }
}

/// A synchronous (from the writer thread's view) write-and-maybe-fdatasync primitive.
pub trait WalDevice: Send + std::fmt::Debug {
    /// Write all of `buf` at `offset` of `file`; if `sync`, then fdatasync `file`, ordered after
    /// the write. See the module doc for the exact promise.
    fn write(
        &mut self,
        file: &Arc<dyn File>,
        offset: u64,
        buf: &[u8],
        sync: bool,
    ) -> io::Result<()>;
    /// The implementation that runs ([`BackendKind::IoUring`] or [`BackendKind::Sync`]).
    fn kind(&self) -> BackendKind;
    /// The writer is about to map `file` for unsynced groups (`WriteMap`): from now on the
    /// file's page cache can be dirtied behind the device's back (by the prefault thread, at
    /// any time), so the device must not write it with direct I/O, whose page cache
    /// invalidation a concurrently dirtied page defeats (uring.rs).
    fn mapping(&mut self, file: &Arc<dyn File>) {
        let _ = file;
    }
    /// Synced writes done with direct I/O instead of an fdatasync, so far.
    fn direct_writes(&self) -> u64 {
        0
    }
}
