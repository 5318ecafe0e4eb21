//! Background prefaulting of the memory maps the write path is about to store into.
//!
//! A put stores into two fresh maps: the memstore arena (anonymous, huge pages) and the WAL
//! segment's window (a shared map of preallocated file space). The first store into each page
//! of either traps into the kernel, which zeroes the page (a 2 MiB huge page, or a file page
//! read from an unwritten extent) and, for the file, starts a journal handle in
//! `page_mkwrite`. On the single writer of a fillrandom that was a fifth of its time (perf,
//! 2026-11-28: `filemap_fault` 7.6%, `do_huge_pmd_anonymous_page` 5.1% and `page_mkwrite`
//! 2.0% of the process's samples, the writer being 74% of them). Here one background thread
//! takes those faults instead: the writer asks for the range it will reach next
//! ([`prefault`]) and the thread populates it with `MADV_POPULATE_WRITE`, on another core.
//!
//! Only a hint: a request is dropped when the queue is full, when the thread could not be
//! started, or when the kernel lacks the advice (before Linux 5.14; the first `EINVAL` turns
//! requests off); the writer then takes the faults itself, as without this module. A request
//! holds its map alive ([`Arc`]), so a window or arena unmapped meanwhile is not unmapped
//! under the thread, and the thread never touches an address that was reused by another map.
//!
//! Populating a shared file map writable marks its pages dirty before the writer's bytes
//! arrive, so an fdatasync in between writes those pages' zeros too, once; the WAL asks for
//! its window only when it opens one for unsynced groups (`wal::writer`), whose pages the
//! following groups fill within milliseconds at the rates where the faults matter.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, SyncSender};
use std::sync::{Arc, OnceLock};

/// Requests waiting at most (each is one map's range: about a MiB of WAL or a huge page of
/// arena); more are dropped, never waited for.
const QUEUE: usize = 32;

enum Job {
    /// Fault in `[offset, offset + len)` of `map`, writable.
    Populate {
        map: Arc<memmap2::MmapRaw>,
        offset: usize,
        len: usize,
    },
    /// Answered once every earlier job is done (tests wait for the thread so).
    #[cfg(test)]
    Barrier(std::sync::mpsc::Sender<()>),
}

/// The queue to the thread, made with it on the first request; `None` if it could not start.
static QUEUE_TX: OnceLock<Option<SyncSender<Job>>> = OnceLock::new();
/// Cleared when the kernel refuses the advice: later requests are not even queued.
static ENABLED: AtomicBool = AtomicBool::new(true);
/// Counters of [`PrefaultStats`].
static REQUESTS: AtomicU64 = AtomicU64::new(0);
static DROPPED: AtomicU64 = AtomicU64::new(0);
static POPULATED: AtomicU64 = AtomicU64::new(0);
static FAILURES: AtomicU64 = AtomicU64::new(0);

/// What the prefault thread did (`Stats::prefault`). One thread serves every database of
/// the process, so these count for the process.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct PrefaultStats {
    /// Ranges the write path asked to have faulted in.
    pub requests: u64,
    /// Requests dropped because the thread was behind: the writer faulted those pages in.
    pub dropped: u64,
    /// Bytes the thread faulted in.
    pub populated_bytes: u64,
    /// Ranges the kernel refused to populate.
    pub failures: u64,
    /// False when no request is made any more: the kernel lacks `MADV_POPULATE_WRITE`
    /// (before Linux 5.14), the thread could not be started, or not Linux.
    pub active: bool,
}

/// The process's prefault counters.
pub fn stats() -> PrefaultStats {
    PrefaultStats {
        requests: REQUESTS.load(Ordering::Relaxed),
        dropped: DROPPED.load(Ordering::Relaxed),
        populated_bytes: POPULATED.load(Ordering::Relaxed),
        failures: FAILURES.load(Ordering::Relaxed),
        active: cfg!(target_os = "linux")
            && ENABLED.load(Ordering::Relaxed)
            && QUEUE_TX.get().is_none_or(|tx| tx.is_some()),
    }
}

fn sender() -> Option<&'static SyncSender<Job>> {
    QUEUE_TX
        .get_or_init(|| {
            let (tx, rx) = sync_channel::<Job>(QUEUE);
            let spawned = std::thread::Builder::new()
                .name("cellar-prefault".into())
                .spawn(move || {
                    while let Ok(job) = rx.recv() {
                        match job {
                            Job::Populate { map, offset, len } => populate(&map, offset, len),
                            #[cfg(test)]
                            Job::Barrier(done) => {
                                let _ = done.send(());
                            }
                        }
                    }
                });
            spawned.ok().map(|_| tx)
        })
        .as_ref()
}

fn populate(map: &memmap2::MmapRaw, offset: usize, len: usize) {
    #[cfg(target_os = "linux")]
    match map.advise_range(memmap2::Advice::PopulateWrite, offset, len) {
        Ok(()) => {
            POPULATED.fetch_add(len as u64, Ordering::Relaxed);
        }
        Err(e) => {
            FAILURES.fetch_add(1, Ordering::Relaxed);
            // EINVAL: a kernel without MADV_POPULATE_WRITE. Anything else (ENOMEM, EFAULT
            // where a store would have raised SIGBUS) concerns this range only; the writer's
            // own stores meet the condition as they would have.
            if e.raw_os_error() == Some(rustix::io::Errno::INVAL.raw_os_error()) {
                ENABLED.store(false, Ordering::Relaxed);
            }
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (map, offset, len);
}

/// Ask the background thread to fault in `[offset, offset + len)` of `map` (clamped to the
/// map); returns at once, whatever becomes of the request.
pub(crate) fn prefault(map: &Arc<memmap2::MmapRaw>, offset: usize, len: usize) {
    if !cfg!(target_os = "linux") || !ENABLED.load(Ordering::Relaxed) {
        return;
    }
    // Checked here: memmap2 checks the offset and the length against the map's length, but
    // not their sum.
    let end = offset.saturating_add(len).min(map.len());
    if offset >= end {
        return;
    }
    let Some(tx) = sender() else {
        return;
    };
    REQUESTS.fetch_add(1, Ordering::Relaxed);
    // A full queue means the thread is behind: the writer faults this range in itself.
    let job = Job::Populate {
        map: Arc::clone(map),
        offset,
        len: end - offset,
    };
    if tx.try_send(job).is_err() {
        DROPPED.fetch_add(1, Ordering::Relaxed);
    }
}

/// Wait until the thread has done every request made so far; `false` when prefaulting is off
/// (no thread, or a kernel without the advice) or a request was ever dropped (other tests of
/// the process filled the queue), so a test knows not to expect its effect.
#[cfg(test)]
pub(crate) fn wait_idle() -> bool {
    let Some(tx) = sender() else {
        return false;
    };
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    if tx.send(Job::Barrier(done_tx)).is_err() || done_rx.recv().is_err() {
        return false;
    }
    ENABLED.load(Ordering::Relaxed) && DROPPED.load(Ordering::Relaxed) == 0
}

/// Page faults the calling thread has taken so far, minor and major (a fault that reads a
/// file page in, even from an unwritten extent, is major): `/proc/thread-self/stat`.
#[cfg(test)]
pub(crate) fn thread_faults() -> u64 {
    use std::io::Read as _;
    // Read into the stack: a heap that grows for the count would itself fault.
    let mut buf = [0u8; 1024];
    let mut f = std::fs::File::open("/proc/thread-self/stat").unwrap();
    let n = f.read(&mut buf).unwrap();
    let stat = std::str::from_utf8(&buf[..n]).unwrap();
    // After the parenthesised command name: state, ppid, pgrp, session, tty_nr, tpgid,
    // flags, minflt, cminflt, majflt.
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let mut fields = rest.split(' ');
    let minflt: u64 = fields.nth(7).unwrap().parse().unwrap();
    let majflt: u64 = fields.nth(1).unwrap().parse().unwrap();
    minflt + majflt
}

#[cfg(test)]
mod tests {
    use crate::{Db, FamilyDescriptor, Options, Put, TableDescriptor};

    /// A writer's SyncWal puts store into WAL windows and memstore huge pages that the
    /// prefault thread has faulted in: without it, each of the 4 MiB of WAL pages and each
    /// huge page below is one fault of the writer (over 1,000 here).
    #[test]
    fn puts_store_into_prefaulted_pages() {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(dir.path(), Options::default().write_buffer_size(64 << 20)).unwrap();
        db.create_table(TableDescriptor::new("t").family(FamilyDescriptor::new("f")))
            .unwrap();
        let t = db.table("t").unwrap();
        let value = vec![7u8; 1000];
        let put = |i: u32| {
            t.put(Put::new(format!("row{i:08}")).add("f", "q", value.clone()))
                .unwrap();
        };
        // Past the memstore's small slots (not prefaulted: under a huge page each).
        for i in 0..8_000 {
            put(i);
        }
        let mut faults = 0;
        let mut on = true;
        for i in 8_000..12_000 {
            // The thread is given the time a busy writer's next MiB would give it.
            on &= super::wait_idle();
            let before = super::thread_faults();
            put(i);
            faults += super::thread_faults() - before;
        }
        if on {
            assert!(faults < 100, "{faults} faults in the writer");
            let p = db.stats().prefault;
            assert!(p.active);
            // Each WAL window and huge page asked for, most of 4 MiB of each faulted in.
            assert!(p.requests >= 4 && p.populated_bytes >= 6 << 20, "{p:?}");
        }
        assert!(db.stats().wal.mapped_groups >= 12_000);
    }
}
