//! The write-ahead log.
//!
//! **Files.** Segments `{n:020}.wal2` in the WAL directory, `n` increasing from 1 (segments
//! `{n:020}.wal`, in the legacy record layout, are still read). A segment is
//! created with `FileSystem::create` (never reused: O_EXCL), its first 1 MiB preallocated and
//! fdatasynced, then the directory is synced, all before any record in it can be acknowledged;
//! later writes preallocate 1 MiB steps up to [`WalOptions::segment_size`]. [`Wal::open`] always starts a new segment numbered above
//! every existing one; it first cuts a torn tail off the newest existing segment (exactly the
//! bytes `TolerateTornTail` replay ignores), so that a torn write can only ever sit at the end of
//! the newest segment, the one place replay accepts it.
//!
//! **Records** ([`record`]): an 8–31-byte header `checksum u32 | kind u8 | check u8 | length
//! varint | seq varint | [synced_upto varint]` then the payload; masked CRC32C, seeded with the
//! segment number, over the header after the checksum and the payload. `synced_upto` is the
//! segment offset an fdatasync had covered when the record's group was written (left out while
//! 0); a clean close ends the segment with a SEAL (no payload) attesting its final sync. Eight
//! zero bytes end a segment's data (the preallocated tail).
//!
//! **Sequence numbers** are assigned by the WAL in `append`, under the queue lock, so file order
//! equals seq order and seqs strictly increase through the log.
//!
//! **Durability** ([`Durability`]): `SkipWal` writes nothing; `AsyncWal` returns once queued;
//! `SyncWal` returns once the group's write completed into the OS (survives a process crash);
//! `FsyncWal` returns once an fdatasync that started after the group's write completed has
//! succeeded (survives power loss). Prefix rule: an acknowledgement of seq S at a level implies
//! the same for every seq below S.
//!
//! **Group commit** (`commit`). Appenders queue records; a waiting appender with no leader
//! ahead of it becomes the leader and writes the whole queue through the `writer` in one
//! device call, the others wait for the `written`/`synced` watermarks. A background thread
//! leads for `AsyncWal` records and does the final sync at close. The device is io_uring or
//! pwrite+fdatasync ([`BackendKind`]).
//!
//! **Poisoning.** The first failed write or sync poisons the WAL: the failing group's waiters and
//! every later non-`SkipWal` append, `sync` and `roll` get [`Error::Poisoned`]. Nothing is
//! retried; a failed fsync in particular is never retried and trusted. A full disk is the one
//! failure reported by kind: the waiters of the group whose write (or segment creation) hit
//! ENOSPC get [`Error::NoSpace`], later calls `Poisoned` with [`crate::PoisonCause::NoSpace`].
//! The failed group is "maybe" (its bytes may be partly in the file; replay takes a record
//! whole or not at all). A short write or EINTR is not a failure: the device continues it.
//!
//! **Replay** ([`replay`]) reads segments in order under a [`RecoveryMode`].
//!
//! Model checking of the hand-off: see `commit` for the loom command.

mod commit;
pub(crate) use commit::AppendError;
mod device;
mod reader;
pub mod record;
mod retain;
mod sync;
#[cfg(target_os = "linux")]
mod uring;
mod writer;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

pub use device::{BackendKind, WalDevice};
pub use reader::{
    list_segments, parse_segment_file_name, parse_segment_name, replay, segment_file_name,
    segment_file_name_v1, segment_format, RecoveryMode, ReplaySummary, SkippedRange, TornTail,
};
pub use record::WalFormat;
pub use retain::WalPin;
pub use sync::SyncDevice;
#[cfg(target_os = "linux")]
pub use uring::UringDevice;

use crate::error::{Error, Result};
use crate::fs::{File, SharedFs};
use crate::sync_shim;

/// How durable an append must be before it returns (HBase's four levels).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Durability {
    /// Assign a seq and write nothing. Lost by any crash.
    SkipWal,
    /// Queue the record and return at once; the writer thread writes it shortly. Lost if the
    /// process dies before that.
    AsyncWal,
    /// Return once the record's group was written into the OS: survives a process crash, not a
    /// power loss.
    #[default]
    SyncWal,
    /// Return once an fdatasync ordered after the record's write succeeded: survives power loss.
    FsyncWal,
}

/// Options of [`Wal::open`].
#[derive(Debug, Clone)]
pub struct WalOptions {
    /// Preallocated size of a segment; a segment is rolled when the next record would pass it.
    /// At least [`MIN_SEGMENT_SIZE`].
    pub segment_size: u64,
    /// Which device writes the log.
    pub backend: BackendKind,
    /// Copy unsynced groups (`SyncWal`, `AsyncWal`) into the segment through a shared memory
    /// map of its preallocated space instead of a device write, where the file system allows
    /// it safely ([`crate::fs::File::map_for_write`]): the bytes reach the OS as with a
    /// `pwrite`, without a system call. Synced groups always go through the device. The
    /// environment variable [`MAPPED_ENV`] (`0` or `1`) overrides this.
    pub mapped_writes: bool,
    /// Bytes of flushed segments kept on disk for change feeds (`Db::changes_since`): of the
    /// segments a flush no longer needs, the newest are kept while their sizes (preallocated
    /// space included) sum to at most this; older ones are removed. 0 (the default) removes
    /// them at once. A live feed holds the segments it has yet to read regardless.
    pub retain_bytes: u64,
    /// Most bytes of flushed segments one feed slot (`Db::create_feed_slot`) may hold: a slot
    /// whose consumer falls further behind is marked lost and lets its segments go (as
    /// PostgreSQL's `max_slot_wal_keep_size`), so a stalled consumer cannot fill the disk.
    /// 0 (the default): no limit.
    pub slot_max_bytes: u64,
}

/// Smallest accepted [`WalOptions::segment_size`].
pub const MIN_SEGMENT_SIZE: u64 = 4096;

/// Environment variable that overrides [`BackendKind::Auto`]: `io_uring` or `sync`.
pub const BACKEND_ENV: &str = "CELLAR_WAL_BACKEND";

/// Environment variable that overrides [`WalOptions::mapped_writes`]: `0` or `1`.
pub const MAPPED_ENV: &str = "CELLAR_WAL_MAPPED";

impl Default for WalOptions {
    fn default() -> Self {
        WalOptions {
            segment_size: 64 << 20,
            backend: BackendKind::Auto,
            mapped_writes: true,
            retain_bytes: 0,
            slot_max_bytes: 0,
        }
    }
}

/// Counters of a [`Wal`], read without blocking writers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WalStats {
    /// The device that runs: [`BackendKind::IoUring`] or [`BackendKind::Sync`].
    pub backend: BackendKind,
    /// Records written.
    pub records: u64,
    /// Framed bytes written.
    pub bytes: u64,
    /// Groups (device writes or mapped copies carrying records).
    pub groups: u64,
    /// Of those, groups copied through a memory map ([`WalOptions::mapped_writes`]).
    pub mapped_groups: u64,
    /// fdatasyncs of groups, rolls and closes, counting the direct writes below (each makes
    /// its bytes durable in place of one); not those that make a segment's new space durable
    /// (its creation, and the zeros written over it ahead of synced groups, SPEC.md §16.1).
    pub syncs: u64,
    /// Synced groups written `O_DIRECT|O_DSYNC` instead of written and fdatasynced (io_uring
    /// device; SPEC.md §16.5).
    pub direct_groups: u64,
    /// Number of the segment being appended to.
    pub current_segment: u64,
    /// Most records written in one group.
    pub max_group: u64,
    /// Flushed segments still on disk, held by change feeds or [`WalOptions::retain_bytes`]
    /// (as of the last flush or feed move).
    pub kept_segments: u64,
    /// Their bytes (file lengths, preallocated space included).
    pub kept_bytes: u64,
    /// Live change feeds (each pins the segment it reads).
    pub feeds: u64,
}

#[derive(Debug, Default)]
pub(crate) struct StatsInner {
    records: AtomicU64,
    bytes: AtomicU64,
    groups: AtomicU64,
    mapped_groups: AtomicU64,
    syncs: AtomicU64,
    direct_groups: AtomicU64,
    current_segment: AtomicU64,
    max_group: AtomicU64,
}

impl StatsInner {
    /// Add `n` to a counter of the writer's. Only the [`writer::Writer`] changes them, and one
    /// thread at a time holds it (behind the commit's mutex, whose hand-over orders the
    /// accesses), so a load and a store lose nothing. A locked read-modify-write would wait
    /// for the store buffer to drain, full of the group's copy into the segment's map: the
    /// `lock` increment after it took 4.4% of a single-threaded fillrandom's samples.
    fn add(counter: &AtomicU64, n: u64) {
        counter.store(counter.load(Ordering::Relaxed) + n, Ordering::Relaxed);
    }

    /// Raise a counter of the writer's to at least `n` (single writer, as [`StatsInner::add`]).
    fn raise(counter: &AtomicU64, n: u64) {
        if counter.load(Ordering::Relaxed) < n {
            counter.store(n, Ordering::Relaxed);
        }
    }
}

/// The write-ahead log: `Send + Sync`, shared by all writers of a database.
#[derive(Debug)]
pub struct Wal {
    shared: sync_shim::Arc<commit::Shared<writer::Writer>>,
    stats: Arc<StatsInner>,
    backend: BackendKind,
    dir: PathBuf,
    retention: Arc<retain::Retention>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// Refuse a payload over the record limit before it is queued (or copied).
fn check_len(len: usize) -> Result<()> {
    if len > record::MAX_PAYLOAD as usize {
        return Err(Error::InvalidArgument(format!(
            "WAL record of {len} bytes exceeds the maximum {}",
            record::MAX_PAYLOAD
        )));
    }
    Ok(())
}

fn env_backend() -> Option<BackendKind> {
    let v = std::env::var(BACKEND_ENV).ok()?;
    match v.trim().to_ascii_lowercase().as_str() {
        "io_uring" | "iouring" | "uring" => Some(BackendKind::IoUring),
        "sync" => Some(BackendKind::Sync),
        "" | "auto" => None,
        other => {
            tracing::warn!(value = other, "ignoring unknown {BACKEND_ENV}");
            None
        }
    }
}

fn env_mapped() -> Option<bool> {
    let v = std::env::var(MAPPED_ENV).ok()?;
    match v.trim() {
        "0" | "false" | "off" => Some(false),
        "1" | "true" | "on" => Some(true),
        "" => None,
        other => {
            tracing::warn!(value = other, "ignoring unknown {MAPPED_ENV}");
            None
        }
    }
}

fn select_device(
    requested: BackendKind,
    file: &Arc<dyn File>,
    dir: &Path,
) -> Result<Box<dyn WalDevice>> {
    let requested = match requested {
        BackendKind::Auto => env_backend().unwrap_or(BackendKind::Auto),
        k => k,
    };
    if requested == BackendKind::Sync {
        return Ok(Box::new(SyncDevice));
    }
    if file.raw_fd().is_none() {
        tracing::info!(
            "WAL files have no descriptor (simulated file system); using the sync device"
        );
        return Ok(Box::new(SyncDevice));
    }
    #[cfg(target_os = "linux")]
    match UringDevice::new() {
        Ok(d) => Ok(Box::new(d)),
        Err(e) if requested == BackendKind::Auto => {
            tracing::info!(error = %e, "io_uring unavailable; the WAL falls back to pwrite+fdatasync");
            Ok(Box::new(SyncDevice))
        }
        Err(e) => Err(Error::io(dir, "setting up io_uring for the WAL", e)),
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = dir;
        if requested == BackendKind::IoUring {
            return Err(Error::InvalidArgument(
                "the io_uring WAL backend exists only on Linux".into(),
            ));
        }
        Ok(Box::new(SyncDevice))
    }
}

impl Wal {
    /// Open the WAL in `dir` (created if missing) and start a new segment. `next_seq` is the
    /// seq the first append gets; it must exceed every seq already in the log (the caller
    /// learns the last one from [`replay`]).
    pub fn open(fs: SharedFs, dir: &Path, opts: WalOptions, next_seq: u64) -> Result<Wal> {
        if opts.segment_size < MIN_SEGMENT_SIZE {
            return Err(Error::InvalidArgument(format!(
                "WAL segment size {} is below the minimum {MIN_SEGMENT_SIZE}",
                opts.segment_size
            )));
        }
        let existed = fs
            .exists(dir)
            .map_err(|e| Error::io(dir, "checking the WAL directory", e))?;
        fs.create_dir_all(dir)
            .map_err(|e| Error::io(dir, "creating the WAL directory", e))?;
        if !existed {
            if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
                fs.sync_dir(parent)
                    .map_err(|e| Error::io(parent, "syncing the WAL directory's parent", e))?;
            }
        }
        let segs = list_segments(&*fs, dir)?;
        let mut number = 1;
        // The newest segment's number and data end, for the new segment's LINK; none when
        // that segment is damaged (left for replay to report).
        let mut link = None;
        if let Some((last_n, last_path)) = segs.last() {
            number = last_n + 1;
            match reader::inspect_last_segment(&*fs, last_path, *last_n) {
                Ok(last) => {
                    if let Some(off) = last.torn_at {
                        tracing::info!(
                            segment = last_n,
                            offset = off,
                            "cutting the torn tail off the newest WAL segment"
                        );
                        let f = fs
                            .open(last_path)
                            .map_err(|e| Error::io(last_path, "opening WAL segment", e))?;
                        f.truncate(off)
                            .and_then(|()| f.sync_data())
                            .map_err(|e| Error::io(last_path, "cutting a torn WAL tail", e))?;
                    }
                    link = Some((*last_n, last.end));
                    let mut last_seq = last.last_seq;
                    // A clean close leaves a newest segment holding only its LINK: the last
                    // seq is in the segment it names (damage there is replay's to report).
                    if let (0, Some((prev, _))) = (last_seq, last.link) {
                        if let Some((_, prev_path)) = segs.iter().find(|(n, _)| *n == prev) {
                            if let Ok(p) = reader::inspect_last_segment(&*fs, prev_path, prev) {
                                last_seq = p.last_seq;
                            }
                        }
                    }
                    if last_seq >= next_seq.max(1) {
                        return Err(Error::InvalidArgument(format!(
                            "next_seq {next_seq} does not exceed seq {last_seq} already in the WAL"
                        )));
                    }
                }
                // Real damage is left alone for the caller's replay to report or skip.
                Err(Error::Corruption { offset, what, .. }) => {
                    tracing::warn!(
                        segment = last_n,
                        offset,
                        what,
                        "newest WAL segment is damaged; leaving it as is"
                    );
                }
                Err(e) => return Err(e),
            }
        }
        let mut seg = writer::create_segment(&*fs, dir, number, opts.segment_size)?;
        if let Some((previous, end)) = link {
            seg.link_to(previous, end);
        }
        let device = select_device(opts.backend, &seg.file, dir)?;
        let backend = device.kind();
        let mapped_writes = env_mapped().unwrap_or(opts.mapped_writes);
        tracing::info!(
            backend = %backend,
            mapped_writes,
            dir = %dir.display(),
            segment = number,
            "WAL opened"
        );
        let stats = Arc::new(StatsInner::default());
        stats.current_segment.store(number, Ordering::Relaxed);
        let w = writer::Writer {
            fs: fs.clone(),
            dir: dir.to_path_buf(),
            segment_size: opts.segment_size,
            device,
            seg,
            stats: stats.clone(),
            buf: Vec::new(),
            last_written_seq: 0,
            buf_last_seq: 0,
            mapped_writes,
        };
        let shared = sync_shim::Arc::new(commit::Shared::new(next_seq, w));
        let bg = shared.clone();
        let thread = std::thread::Builder::new()
            .name("cellar-wal".into())
            .spawn(move || bg.run_background())
            .map_err(|e| Error::io(dir, "starting the WAL writer thread", e))?;
        let retention = retain::Retention::new(fs, dir, stats.clone(), opts.retain_bytes);
        Ok(Wal {
            shared,
            stats,
            backend,
            dir: dir.to_path_buf(),
            retention,
            thread: Some(thread),
        })
    }

    /// Append one record; returns its seq once `d` is satisfied.
    pub fn append(&self, payload: &[u8], d: Durability) -> Result<u64> {
        check_len(payload.len())?;
        self.shared.append(Arc::new(payload.to_vec()), d)
    }

    /// [`Wal::append`] of a payload the caller keeps a share of (no copy).
    pub(crate) fn append_shared(&self, payload: commit::Payload, d: Durability) -> Result<u64> {
        check_len(payload.len())?;
        self.shared.append(payload, d)
    }

    /// Append one `SyncWal` or `FsyncWal` record whose group's leader runs `apply(seq)` once
    /// the group is written (SPEC §16.3 is unchanged: the bytes are those of [`Wal::append`]);
    /// returns the seq once `d` is satisfied and `apply` ran.
    pub(crate) fn append_applied<F>(
        &self,
        payload: commit::Payload,
        d: Durability,
        apply: F,
    ) -> std::result::Result<u64, AppendError>
    where
        F: FnOnce(u64) -> Result<()> + Send + 'static,
    {
        check_len(payload.len()).map_err(AppendError::Wal)?;
        self.shared.append_applied(payload, d, apply)
    }

    /// Reserve `n` consecutive seqs for data that reaches the database without a WAL record
    /// (ingested files); returns the first. See `commit::Shared::reserve`.
    pub(crate) fn reserve_seqs(&self, n: u64) -> Result<u64> {
        self.shared.reserve(n)
    }

    /// Make every record appended so far durable (as `FsyncWal` would have).
    pub fn sync(&self) -> Result<()> {
        self.shared.sync()
    }

    /// Start a new segment now and return its number: every record appended before the call is
    /// in an older segment (and durable: the old segment is synced when it is finished).
    pub fn roll(&self) -> Result<u64> {
        self.shared.roll()
    }

    /// Segments numbered below `n` are persisted elsewhere (the engine's flush bookkeeping):
    /// remove those that neither [`WalOptions::retain_bytes`] nor a [`WalPin`] keeps (never the
    /// current one) and sync the directory. Returns how many were removed.
    pub fn delete_segments_before(&self, n: u64) -> Result<usize> {
        self.retention.release_below(n)
    }

    /// Hold `segment` and every later one on disk while the pin lives (a reader of the log).
    pub fn pin(&self, segment: u64) -> WalPin {
        self.retention.pin(segment)
    }

    /// Number of the segment being appended to (one atomic load, unlike [`Wal::stats`]).
    pub fn current_segment(&self) -> u64 {
        self.stats.current_segment.load(Ordering::Relaxed)
    }

    /// The `(written, synced)` watermarks: every record with a seq at or below the first is
    /// whole in its segment file (in the OS), at or below the second also fdatasynced.
    pub fn watermarks(&self) -> (u64, u64) {
        self.shared.watermarks()
    }

    /// Where the written data ends, as `(segment, offset)`: every byte of that segment before
    /// the offset belongs to a whole record in the OS ((0, 0) before the first write of this
    /// process). A reader of the live segment that finds no record below it after taking it
    /// reads damage, not bytes still to come.
    pub fn written_end(&self) -> (u64, u64) {
        self.shared.written_end()
    }

    /// Current counters.
    pub fn stats(&self) -> WalStats {
        let s = &self.stats;
        WalStats {
            backend: self.backend,
            records: s.records.load(Ordering::Relaxed),
            bytes: s.bytes.load(Ordering::Relaxed),
            groups: s.groups.load(Ordering::Relaxed),
            mapped_groups: s.mapped_groups.load(Ordering::Relaxed),
            syncs: s.syncs.load(Ordering::Relaxed),
            direct_groups: s.direct_groups.load(Ordering::Relaxed),
            current_segment: s.current_segment.load(Ordering::Relaxed),
            max_group: s.max_group.load(Ordering::Relaxed),
            kept_segments: self.retention.kept().0,
            kept_bytes: self.retention.kept().1,
            feeds: self.retention.pins(),
        }
    }

    /// Why the WAL is poisoned, if it is.
    pub fn poisoned(&self) -> Option<String> {
        self.shared.poison_reason().map(|p| p.message)
    }

    /// Why the WAL is poisoned, with the cause kind, if it is.
    pub fn poison(&self) -> Option<crate::Poison> {
        self.shared.poison_reason()
    }

    /// The WAL directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Write and sync everything queued, stop the writer thread. Fails if the WAL is poisoned
    /// (then not everything queued is durable).
    pub fn close(mut self) -> Result<()> {
        self.shutdown()
    }

    fn shutdown(&mut self) -> Result<()> {
        let Some(t) = self.thread.take() else {
            return Ok(());
        };
        self.shared.close();
        let panicked = t.join().is_err();
        if let Some(why) = self.shared.poison_reason() {
            return Err(Error::Poisoned(why));
        }
        if panicked {
            return Err(Error::Poisoned(crate::Poison::new(
                crate::PoisonCause::Other,
                "the WAL writer thread panicked",
            )));
        }
        Ok(())
    }
}

impl Drop for Wal {
    fn drop(&mut self) {
        if let Err(e) = self.shutdown() {
            tracing::warn!(error = %e, "WAL closed with an error");
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::fs::RealFs;

    fn open(dir: &Path, opts: WalOptions, next: u64) -> Wal {
        Wal::open(Arc::new(RealFs), dir, opts, next).unwrap()
    }

    fn collect(dir: &Path) -> Vec<(u64, Vec<u8>)> {
        let mut v = Vec::new();
        replay(&RealFs, dir, 0, RecoveryMode::Strict, |s, p, _| {
            v.push((s, p.to_vec()));
            Ok(())
        })
        .unwrap();
        v
    }

    #[test]
    fn wal_is_send_and_sync() {
        fn check<T: Send + Sync>() {}
        check::<Wal>();
    }

    /// Each open starts a segment, and each clean close of a segment holding records one more
    /// with a LINK alone (SPEC §16.5), so the sealed segment is never the newest.
    #[test]
    fn open_starts_a_new_segment_each_time() {
        let d = tempfile::tempdir().unwrap();
        let w = open(d.path(), WalOptions::default(), 1);
        assert_eq!(w.stats().current_segment, 1);
        w.append(b"a", Durability::SyncWal).unwrap();
        w.close().unwrap();
        let w = open(d.path(), WalOptions::default(), 2);
        assert_eq!(w.stats().current_segment, 3);
        w.append(b"b", Durability::FsyncWal).unwrap();
        drop(w);
        // Nothing written: no closing segment.
        open(d.path(), WalOptions::default(), 3).close().unwrap();
        let segs = list_segments(&RealFs, d.path()).unwrap();
        assert_eq!(
            segs.iter().map(|s| s.0).collect::<Vec<_>>(),
            vec![1, 2, 3, 4, 5]
        );
        assert_eq!(
            collect(d.path()),
            vec![(1, b"a".to_vec()), (2, b"b".to_vec())]
        );
        let s = replay(&RealFs, d.path(), 0, RecoveryMode::Strict, |_, _, _| Ok(())).unwrap();
        assert!(s.torn_tail.is_none() && s.skipped.is_empty(), "{s:?}");
        // The closing segments hold their LINK alone.
        for n in [2, 4] {
            let len = std::fs::metadata(d.path().join(segment_file_name(n)))
                .unwrap()
                .len();
            assert_eq!(len, record::link_framed_len() as u64, "segment {n}");
        }
    }

    /// The seq check of `open` looks past a LINK-only newest segment into the one it names.
    #[test]
    fn open_refuses_a_used_next_seq_behind_a_closing_link() {
        let d = tempfile::tempdir().unwrap();
        let w = open(d.path(), WalOptions::default(), 1);
        for p in [b"a", b"b", b"c"] {
            w.append(p, Durability::SyncWal).unwrap();
        }
        w.close().unwrap();
        assert_eq!(list_segments(&RealFs, d.path()).unwrap().len(), 2);
        let e = Wal::open(Arc::new(RealFs), d.path(), WalOptions::default(), 3).unwrap_err();
        assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
        open(d.path(), WalOptions::default(), 4).close().unwrap();
    }

    #[test]
    fn open_refuses_a_next_seq_already_used() {
        let d = tempfile::tempdir().unwrap();
        let w = open(d.path(), WalOptions::default(), 10);
        w.append(b"a", Durability::SyncWal).unwrap();
        w.close().unwrap();
        let e = Wal::open(Arc::new(RealFs), d.path(), WalOptions::default(), 10).unwrap_err();
        assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
    }

    #[test]
    fn open_cuts_a_torn_tail_so_it_never_sits_mid_log() {
        let d = tempfile::tempdir().unwrap();
        let w = open(d.path(), WalOptions::default(), 1);
        w.append(b"good", Durability::FsyncWal).unwrap();
        w.close().unwrap();
        // A crash instead of the close's LINK-only segment 2, with a torn second record.
        std::fs::remove_file(d.path().join(segment_file_name(2))).unwrap();
        let p = d.path().join(segment_file_name(1));
        let f = crate::fs::FileSystem::open(&RealFs, &p).unwrap();
        // After "good" and the seal of the clean close.
        let first = record::wal_framed_len(1, 0, 4) as u64;
        let mut seal = Vec::new();
        record::encode_seal(1, first, &mut seal);
        let at = first + seal.len() as u64;
        let mut rec = Vec::new();
        record::encode_wal(1, 2, at, b"torn record", &mut rec);
        f.write_all_at(&rec[..rec.len() - 4], at).unwrap();
        let s = replay(
            &RealFs,
            d.path(),
            0,
            RecoveryMode::TolerateTornTail,
            |_, _, _| Ok(()),
        )
        .unwrap();
        assert_eq!(s.torn_tail.as_ref().map(|t| t.offset), Some(at));
        let w = open(d.path(), WalOptions::default(), 2);
        w.append(b"next", Durability::FsyncWal).unwrap();
        w.close().unwrap();
        // Strict now passes: the tear is gone, not buried under segment 2.
        assert_eq!(
            collect(d.path()),
            vec![(1, b"good".to_vec()), (2, b"next".to_vec())]
        );
    }

    /// Segments 1..=3 written through two rolls; segment 1 holds `r1`, `r2`, `r3` (35 bytes
    /// each, no LINK), segment 2 `s1` after its LINK, segment 3 `t1` after its LINK.
    fn three_segments(dir: &Path) {
        let w = open(dir, WalOptions::default(), 1);
        for p in [b"r1", b"r2", b"r3"] {
            w.append(p, Durability::SyncWal).unwrap();
        }
        assert_eq!(w.roll().unwrap(), 2);
        w.append(b"s1", Durability::SyncWal).unwrap();
        assert_eq!(w.roll().unwrap(), 3);
        w.append(b"t1", Durability::SyncWal).unwrap();
        w.close().unwrap();
    }

    fn replay_in(dir: &Path, mode: RecoveryMode) -> Result<ReplaySummary> {
        replay(&RealFs, dir, 0, mode, |_, _, _| Ok(()))
    }

    /// An older segment that lost records from its end, cut exactly at a record boundary,
    /// reads as a clean segment: only the next segment's LINK shows the loss. Every mode but
    /// `SkipCorrupted` fails with `Corruption` naming the segment; that one reports the range.
    #[test]
    fn an_older_segment_cut_at_a_record_boundary_is_corruption() {
        let d = tempfile::tempdir().unwrap();
        three_segments(d.path());
        assert_eq!(collect(d.path()).len(), 5);
        // Three records of 2-byte payloads at seqs 1..=3, no synced_upto (SyncWal).
        let rec = record::wal_framed_len(1, 0, 2) as u64;
        let (cut, end) = (2 * rec, 3 * rec);
        let p = d.path().join(segment_file_name(1));
        crate::fs::FileSystem::open(&RealFs, &p)
            .unwrap()
            .truncate(cut)
            .unwrap();
        for mode in [RecoveryMode::TolerateTornTail, RecoveryMode::Strict] {
            match replay_in(d.path(), mode) {
                Err(Error::Corruption { file, offset, what }) => {
                    assert_eq!((file, offset), (p.clone(), cut), "{what}");
                    let expected = format!(
                        "ends at offset {cut}, but segment 2 records that it ended at {end}"
                    );
                    assert!(what.contains(&expected), "{what}");
                }
                other => panic!("{mode:?}: {other:?}"),
            }
        }
        let s = replay_in(d.path(), RecoveryMode::SkipCorrupted).unwrap();
        assert_eq!(s.records, 4);
        assert_eq!(
            s.skipped
                .iter()
                .map(|r| (r.segment, r.start, r.end))
                .collect::<Vec<_>>(),
            vec![(1, cut, end)]
        );
    }

    /// A segment gone from the middle of the log is found the same way.
    #[test]
    fn a_missing_middle_segment_is_corruption() {
        let d = tempfile::tempdir().unwrap();
        three_segments(d.path());
        std::fs::remove_file(d.path().join(segment_file_name(2))).unwrap();
        match replay_in(d.path(), RecoveryMode::TolerateTornTail) {
            Err(Error::Corruption { file, what, .. }) => {
                assert_eq!(file, d.path().join(segment_file_name(2)), "{what}");
                assert!(
                    what.contains("the segment before it is 1: segment 2 is missing"),
                    "{what}"
                );
            }
            other => panic!("{other:?}"),
        }
        // Replay from segment 3 on (segments before it were flushed and deleted) has no
        // segment before 3 to check against.
        let s = replay(&RealFs, d.path(), 3, RecoveryMode::Strict, |_, _, _| Ok(())).unwrap();
        assert_eq!(s.records, 1);
    }

    /// Segments grow by preallocation steps instead of taking their whole size at creation,
    /// and records that cross a step boundary (and the segment's end) replay whole.
    #[test]
    fn segments_are_preallocated_step_by_step() {
        let d = tempfile::tempdir().unwrap();
        let opts = WalOptions {
            segment_size: 3 * writer::PREALLOC_STEP + 4096,
            ..Default::default()
        };
        let w = open(d.path(), opts, 1);
        let len = |n: u64| {
            std::fs::metadata(d.path().join(segment_file_name(n)))
                .unwrap()
                .len()
        };
        w.append(b"small", Durability::SyncWal).unwrap();
        assert_eq!(len(1), writer::PREALLOC_STEP);
        // 100 KiB records: the 11th crosses the first step, later ones the segment's end.
        let big = vec![7u8; 100 << 10];
        for _ in 0..40 {
            w.append(&big, Durability::SyncWal).unwrap();
        }
        w.close().unwrap();
        let sizes: Vec<u64> = list_segments(&RealFs, d.path())
            .unwrap()
            .iter()
            .map(|(n, _)| len(*n))
            .collect();
        assert!(sizes.len() >= 2, "{sizes:?}");
        for s in &sizes {
            // A segment ends within its size, plus the seal a clean close may append.
            let seal = record::WAL_MAX_HEADER_LEN as u64;
            assert!(*s <= 3 * writer::PREALLOC_STEP + 4096 + seal, "{sizes:?}");
        }
        let got = collect(d.path());
        assert_eq!(got.len(), 41);
        assert!(got[1..].iter().all(|(_, p)| p == &big));
    }

    #[test]
    fn tiny_segment_size_is_rejected() {
        let d = tempfile::tempdir().unwrap();
        let opts = WalOptions {
            segment_size: 100,
            ..Default::default()
        };
        assert!(matches!(
            Wal::open(Arc::new(RealFs), d.path(), opts, 1),
            Err(Error::InvalidArgument(_))
        ));
    }

    /// The writer's counters are single-writer loads and stores (`StatsInner::add`): many
    /// threads appending at once, mapped and synced, lose no count, because one leader at a
    /// time holds the writer.
    #[test]
    fn counters_add_up_under_concurrent_appends() {
        let d = tempfile::tempdir().unwrap();
        let w = Arc::new(open(d.path(), WalOptions::default(), 1));
        let per = 300u64;
        let threads: Vec<_> = (0..4u64)
            .map(|t| {
                let w = w.clone();
                std::thread::spawn(move || {
                    for i in 0..per {
                        let d = if i % 50 == 0 {
                            Durability::FsyncWal
                        } else {
                            Durability::SyncWal
                        };
                        w.append(format!("{t}:{i}").as_bytes(), d).unwrap();
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let s = w.stats();
        assert_eq!(s.records, 4 * per);
        assert!(s.groups >= 1 && s.groups <= s.records, "{s:?}");
        assert!(s.mapped_groups <= s.groups, "{s:?}");
        assert!(s.direct_groups <= s.syncs, "{s:?}");
        assert!(s.syncs >= 1 && s.max_group >= 1, "{s:?}");
        // Every record is at least as long as the shortest framing of its payload.
        let shortest = record::wal_framed_len(1, 0, 3) as u64;
        assert!(s.bytes >= 4 * per * shortest, "{s:?}");
        assert_eq!(collect(d.path()).len() as u64, 4 * per);
    }
}
