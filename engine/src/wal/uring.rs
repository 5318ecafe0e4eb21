//! The io_uring WAL device (Linux).
//!
//! One small ring owned by the WAL writer thread. Per call: a `Write` of the group, flagged
//! `IO_LINK`, followed by an `Fsync(DATASYNC)` when durability is asked; `submit_and_wait`, then
//! reap *every* CQE of the submission before looking at results or returning, so the kernel never
//! holds a pointer into the caller's buffer after `write` returns.
//!
//! Ordering: completions are unordered, and an unlinked fsync may run before an earlier write
//! (RELIABILITY.md §2.1 d). The link makes the fsync start only after the write completed in
//! full; a short write breaks the link and the fsync completes with `ECANCELED`. The state
//! machine [`Chain`] then writes the remainder and issues a new fsync. It never counts an fsync
//! as covering the group unless the write of the same linked submission completed in full, and
//! it never retries an fsync that failed.
//!
//! Direct synced writes: when every byte of the segment before a synced group is already
//! durable through this device (the previous group was synced, nothing was written since), the
//! group goes out as one `Write` on a second descriptor of the file opened `O_DIRECT|O_DSYNC`,
//! instead of a buffered write and a linked fsync. The kernel runs an io_uring fsync on an io-wq
//! worker thread (two more thread wake-ups per group); a direct write is issued from the
//! submitting thread, and its completion makes the bytes durable (one fsyncing writer: 9.0-9.3k
//! -> 10.4-10.6k puts/s; benches/RESULTS.md, session 40).
//!
//! Why pwrite: the direct write is a blocking `pwrite`, not an io_uring `Write`. On a disk
//! without FUA (this machine's), an `O_DSYNC` direct write ends with a cache flush: through
//! io_uring the completion hands it to a kernel worker, then back to the ring; through `pwrite`
//! the writer's thread does it itself. One fsyncing writer ran 11-31% faster in five alternated
//! runs, 16 writers as fast or faster (benches/RESULTS.md, session 54). Direct I/O wants
//! whole aligned blocks: the write covers the [`DIRECT_ALIGN`] blocks from the one holding the
//! group's first byte to the one holding its last, so it rewrites the durable bytes at the head
//! of that first block with the same content (kept in memory, [`Direct`]) and fills the rest
//! of the last block with zeros, which is what preallocated space reads as anyway and what the
//! next group overwrites. The file's bytes are the same as after a buffered write; SPEC.md
//! §16.5. Otherwise (the first synced group of a file, a group larger than [`MAX_DIRECT`], a
//! file system refusing `O_DIRECT` with `EINVAL`, a short direct write) a synced group takes
//! the buffered path, whose fdatasync makes the file durable again and the next group direct,
//! unless the file took an unsynced group (below).
//!
//! A segment that takes unsynced groups gets no more direct writes. Mapped
//! ([`WalDevice::mapping`]), from the map's first group: the prefault thread dirties the
//! window's pages while the writer goes on, and a page dirtied while a direct write to it is
//! in flight survives the kernel's invalidation after the write with its old bytes (zeros) —
//! writeback would later put them over the durable records. Written with `pwrite`, from the
//! first unsynced group after a direct write: the kernel drops the cached pages a direct write
//! covers, so the next buffered write into the last one reads it back from the disk first (a
//! device round trip in the put that follows each synced group). (A segment's LINK written
//! alone at an explicit roll is a `pwrite` before any direct write, and the writer never maps
//! it, so a roll at each memstore flush does not end direct writes.) Direct writes are
//! for segments written by synced groups alone (the workload whose every put waits for the
//! disk); the kernel keeps the buffered and direct descriptors coherent otherwise (it writes
//! back and drops the cached range around a direct write).
//!
//! Unsafe code: only the `push` calls; their safety argument is at each site.
#![allow(unsafe_code)]

use std::io;
use std::os::fd::OwnedFd;
use std::sync::{Arc, Weak};

use io_uring::{opcode, squeue, types, IoUring};

use super::device::{BackendKind, WalDevice};
use super::sync::SyncDevice;
use crate::fs::File;

const WRITE_TAG: u64 = 1;
const FSYNC_TAG: u64 = 2;
/// Block size of direct writes: offsets, lengths and the buffer's address are multiples of it.
/// 4 KiB satisfies every device with logical blocks up to that size, and is a page, so a direct
/// write never leaves part of a page cached.
pub(crate) const DIRECT_ALIGN: usize = 4096;
/// Larger synced groups take the buffered path, which keeps the aligned buffer small; for
/// them the copy into it (tens of µs a MiB) would cost about what the saved wake-ups gain
/// (a judgement, not measured).
pub(crate) const MAX_DIRECT: usize = 1 << 20;
const EINVAL: i32 = 22;
const EOPNOTSUPP: i32 = 95;
/// The SQE length field is 32 bits; larger groups go out in several writes (all but the last
/// unlinked, the last linked to the fsync).
const MAX_CHUNK: usize = 1 << 30;
/// `EINTR`/`EAGAIN` on a write CQE means nothing was written; retry a bounded number of times.
const MAX_WRITE_RETRIES: u32 = 64;
const ECANCELED: i32 = 125;
const EINTR: i32 = 4;
const EAGAIN: i32 = 11;

/// The work of one submission.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Round {
    /// `(start, len)` within the buffer.
    pub write: Option<(usize, usize)>,
    /// Whether an fdatasync follows (linked to the write if there is one).
    pub fsync: bool,
}

/// Progress of one `write` call, independent of the ring so it can be tested with scripted
/// completion results.
#[derive(Debug)]
pub(crate) struct Chain {
    len: usize,
    done: usize,
    sync: bool,
    synced: bool,
    retries: u32,
}

impl Chain {
    pub(crate) fn new(len: usize, sync: bool) -> Self {
        Chain {
            len,
            done: 0,
            sync,
            synced: false,
            retries: 0,
        }
    }

    /// The next submission, or `None` when everything is written (and synced if asked).
    pub(crate) fn next_round(&self, max_chunk: usize) -> Option<Round> {
        if self.done < self.len {
            let n = (self.len - self.done).min(max_chunk.max(1));
            let last = self.done + n == self.len;
            Some(Round {
                write: Some((self.done, n)),
                // An fsync linked to a non-final chunk would not cover the rest; only the last
                // chunk carries it.
                fsync: self.sync && last,
            })
        } else if self.sync && !self.synced {
            Some(Round {
                write: None,
                fsync: true,
            })
        } else {
            None
        }
    }

    /// Account for the completion results of `round` (`res` of the write and fsync CQEs).
    pub(crate) fn complete(
        &mut self,
        round: &Round,
        write_res: Option<i32>,
        fsync_res: Option<i32>,
    ) -> io::Result<()> {
        let mut write_full = true;
        if let Some((_, n)) = round.write {
            let r = write_res.ok_or_else(|| io::Error::other("missing write completion"))?;
            if r == -EINTR || r == -EAGAIN {
                self.retries += 1;
                if self.retries > MAX_WRITE_RETRIES {
                    return Err(io::Error::from_raw_os_error(-r));
                }
                write_full = false;
            } else if r < 0 {
                return Err(io::Error::from_raw_os_error(-r));
            } else if r == 0 {
                return Err(io::ErrorKind::WriteZero.into());
            } else {
                let r = r as usize;
                if r > n {
                    return Err(io::Error::other(format!(
                        "io_uring write reported {r} bytes for a {n}-byte request"
                    )));
                }
                self.done += r;
                write_full = r == n;
            }
        }
        if round.fsync {
            let r = fsync_res.ok_or_else(|| io::Error::other("missing fsync completion"))?;
            if r == 0 {
                // Only an fsync that ran after the whole remainder was written covers the
                // group; after a short write it covers only part of it (the kernel should have
                // cancelled it, but nothing is trusted that is not needed).
                if write_full && self.done == self.len {
                    self.synced = true;
                }
            } else if r == -ECANCELED && !write_full {
                // The short write broke the link; a fresh fsync follows the remainder.
            } else if r < 0 {
                return Err(io::Error::from_raw_os_error(-r));
            }
        }
        Ok(())
    }
}

/// What the device knows about the file it last synced, for direct writes (module docs).
#[derive(Default)]
struct Direct {
    /// The file (compared by address; weak, so a removed segment is not kept alive by it).
    file: Option<Weak<dyn File>>,
    /// Its `O_DIRECT|O_DSYNC` descriptor, opened at the first direct write.
    fd: Option<OwnedFd>,
    /// The descriptor could not be opened, or the file took unsynced groups (module docs):
    /// this file takes the buffered path.
    refused: bool,
    /// Every byte of the file before this offset is durable, and the bytes from the block
    /// boundary at or below it up to it are the first `tail` bytes of the aligned buffer.
    end: Option<u64>,
    tail: usize,
    /// Backing memory of the aligned buffer (an aligned window of it is used).
    mem: Vec<u8>,
    /// Direct writes failed with `EINVAL`/`EOPNOTSUPP`: this file system (or device) does not
    /// take them; the device stops trying.
    off: bool,
    /// Groups written direct (for tests and the counters).
    writes: u64,
    /// The file has had a direct write.
    wrote: bool,
}

impl Direct {
    /// Point the state at `file`, forgetting what was known about another one.
    fn track(&mut self, file: &Arc<dyn File>) {
        let same = self
            .file
            .as_ref()
            .is_some_and(|w| std::ptr::addr_eq(w.as_ptr(), Arc::as_ptr(file)));
        if !same {
            self.file = Some(Arc::downgrade(file));
            self.fd = None;
            self.refused = false;
            self.wrote = false;
            self.end = None;
            self.tail = 0;
        }
    }

    /// The first `len` bytes of the aligned buffer as [`Direct::buffer`] left them; `None` if
    /// it is shorter.
    fn window(&self, len: usize) -> Option<&[u8]> {
        let at = aligned_start(&self.mem);
        self.mem.get(at..at + len)
    }

    /// The aligned buffer, at least `len` bytes (a multiple of [`DIRECT_ALIGN`]); the first
    /// `tail` bytes survive growth.
    fn buffer(&mut self, len: usize) -> &mut [u8] {
        let at = aligned_start(&self.mem);
        if self.mem.len() < at + len {
            let mut mem = vec![0u8; len + DIRECT_ALIGN];
            let to = aligned_start(&mem);
            mem[to..to + self.tail].copy_from_slice(&self.mem[at..at + self.tail]);
            self.mem = mem;
        }
        let at = aligned_start(&self.mem);
        &mut self.mem[at..at + len]
    }

    /// After a buffered write of `[offset, end)` and an fdatasync: the file is durable up to
    /// `end`; read back the bytes of its last partial block (from the page cache) unless the
    /// write itself holds them.
    /// The caller has pointed the state at `file` (`track`).
    fn synced_buffered(&mut self, file: &Arc<dyn File>, buf: &[u8], end: u64) {
        self.end = None;
        if self.off || self.refused {
            return;
        }
        let tail = (end % DIRECT_ALIGN as u64) as usize;
        let b = self.buffer(DIRECT_ALIGN);
        let got = if tail <= buf.len() {
            b[..tail].copy_from_slice(&buf[buf.len() - tail..]);
            true
        } else {
            file.read_exact_at(&mut b[..tail], end - tail as u64)
                .is_ok()
        };
        if got {
            self.end = Some(end);
            self.tail = tail;
        }
    }
}

/// Offset of the first [`DIRECT_ALIGN`]-aligned byte of `mem`.
fn aligned_start(mem: &[u8]) -> usize {
    mem.as_ptr().align_offset(DIRECT_ALIGN).min(mem.len())
}

/// What one direct write's completion means.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum DirectResult {
    /// All of it is written and durable.
    Done,
    /// Nothing was written (`EINTR`/`EAGAIN`): submit it again.
    Retry,
    /// Not usable here (`EINVAL`/`EOPNOTSUPP`: alignment or `O_DIRECT` refused); nothing was
    /// written. Stop trying direct writes and take the buffered path.
    Refused,
    /// A short write: part of it may be on disk. The buffered path writes the group again
    /// (the same bytes) and fdatasyncs.
    Short,
}

impl DirectResult {
    pub(crate) fn of(res: i32, len: usize) -> io::Result<Self> {
        match res {
            r if r == -EINTR || r == -EAGAIN => Ok(DirectResult::Retry),
            r if r == -EINVAL || r == -EOPNOTSUPP => Ok(DirectResult::Refused),
            r if r < 0 => Err(io::Error::from_raw_os_error(-r)),
            r if r as usize == len => Ok(DirectResult::Done),
            r if (r as usize) < len => Ok(DirectResult::Short),
            r => Err(io::Error::other(format!(
                "direct write reported {r} bytes for a {len}-byte request"
            ))),
        }
    }
}

/// io_uring device. See the module doc.
pub struct UringDevice {
    ring: IoUring,
    /// Set when the ring is in an unknown state; every later call fails (the WAL is poisoned by
    /// then anyway).
    broken: bool,
    max_chunk: usize,
    direct: Direct,
}

impl std::fmt::Debug for UringDevice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UringDevice")
            .field("broken", &self.broken)
            .field("max_chunk", &self.max_chunk)
            .field("direct_writes", &self.direct.writes)
            .field("direct_off", &self.direct.off)
            .finish_non_exhaustive()
    }
}

impl UringDevice {
    /// Set up a ring. Fails with the kernel's error when io_uring is unavailable (EPERM under a
    /// seccomp profile or `kernel.io_uring_disabled`, ENOSYS on old kernels).
    pub fn new() -> io::Result<Self> {
        Ok(UringDevice {
            ring: IoUring::new(8)?,
            broken: false,
            max_chunk: MAX_CHUNK,
            direct: Direct::default(),
        })
    }

    /// Split writes into chunks of at most `n` bytes: exercises the multi-round path against
    /// the real kernel in tests.
    #[cfg(test)]
    pub(crate) fn with_max_chunk(mut self, n: usize) -> Self {
        self.max_chunk = n;
        self
    }

    /// Submit one round and reap all of its completions. Returns the write's and the fsync's
    /// `res`.
    fn run_round(
        &mut self,
        fd: i32,
        offset: u64,
        buf: &[u8],
        round: &Round,
    ) -> io::Result<(Option<i32>, Option<i32>)> {
        let count = usize::from(round.write.is_some()) + usize::from(round.fsync);
        {
            let mut sq = self.ring.submission();
            if sq.capacity() - sq.len() < count {
                // Every call drains what it submits, so this means the ring state is not what
                // this code believes; stop using it.
                self.broken = true;
                return Err(io::Error::other(
                    "io_uring submission queue unexpectedly full",
                ));
            }
            if let Some((start, n)) = round.write {
                let chunk = &buf[start..start + n];
                let mut e = opcode::Write::new(types::Fd(fd), chunk.as_ptr(), n as u32)
                    .offset(offset + start as u64)
                    .build()
                    .user_data(WRITE_TAG);
                if round.fsync {
                    e = e.flags(squeue::Flags::IO_LINK);
                }
                // SAFETY: the SQE points into `buf`, which the caller borrows for the whole
                // `write` call, and this function does not return `Ok` or `Err` after the
                // submission until the CQE for this SQE has been reaped (see the loop below,
                // which only gives up when the SQE was provably never consumed). `fd` belongs
                // to a `File` the caller also borrows for the call.
                unsafe { sq.push(&e) }.map_err(|_| io::Error::other("io_uring queue full"))?;
            }
            if round.fsync {
                let e = opcode::Fsync::new(types::Fd(fd))
                    .flags(types::FsyncFlags::DATASYNC)
                    .build()
                    .user_data(FSYNC_TAG);
                // SAFETY: an fsync SQE holds no pointer; `fd` stays open for the call as above.
                unsafe { sq.push(&e) }.map_err(|_| io::Error::other("io_uring queue full"))?;
            }
        }
        let res = reap(&mut self.ring, &mut self.broken, count)?;
        Ok((res[0], res[1]))
    }

    /// Write `buf` at `offset` of the file as blocks through its direct descriptor, if the
    /// state allows it (module docs). `Ok(true)`: written and durable; `Ok(false)`: take the
    /// buffered path.
    fn write_direct(&mut self, fd: i32, offset: u64, buf: &[u8]) -> io::Result<bool> {
        let d = &mut self.direct;
        if d.off || d.refused || d.end != Some(offset) || buf.is_empty() || buf.len() > MAX_DIRECT {
            return Ok(false);
        }
        if d.fd.is_none() {
            // A second open file description of the same file: O_DIRECT is a property of the
            // description, and the buffered one stays as it is for everything else.
            match rustix::fs::open(
                format!("/proc/self/fd/{fd}"),
                rustix::fs::OFlags::WRONLY
                    | rustix::fs::OFlags::DIRECT
                    | rustix::fs::OFlags::DSYNC
                    | rustix::fs::OFlags::CLOEXEC,
                rustix::fs::Mode::empty(),
            ) {
                Ok(f) => d.fd = Some(f),
                Err(e) => {
                    tracing::debug!(error = %e, "no O_DIRECT descriptor for the WAL segment");
                    d.refused = true;
                    return Ok(false);
                }
            }
        }
        let start = offset - d.tail as u64;
        let used = d.tail + buf.len();
        let len = used.next_multiple_of(DIRECT_ALIGN);
        let tail = d.tail;
        let b = d.buffer(len);
        b[tail..used].copy_from_slice(buf);
        b[used..].fill(0);
        let mut retries = 0;
        loop {
            // A blocking `pwrite`, not an io_uring write: see the module docs ("why pwrite").
            let res = {
                let d = &self.direct;
                match (d.fd.as_ref(), d.window(len)) {
                    (Some(fd), Some(bytes)) => match rustix::io::pwrite(fd, bytes, start) {
                        Ok(n) => i32::try_from(n).unwrap_or(i32::MAX),
                        Err(e) => -e.raw_os_error(),
                    },
                    _ => return Ok(false),
                }
            };
            let d = &mut self.direct;
            match DirectResult::of(res, len)? {
                DirectResult::Done => {
                    let end = offset + buf.len() as u64;
                    let keep = (end % DIRECT_ALIGN as u64) as usize;
                    let b = d.buffer(len);
                    b.copy_within(used - keep..used, 0);
                    d.tail = keep;
                    d.end = Some(end);
                    d.writes += 1;
                    d.wrote = true;
                    return Ok(true);
                }
                DirectResult::Retry if retries < MAX_WRITE_RETRIES => retries += 1,
                DirectResult::Retry => return Err(io::Error::from_raw_os_error(-res)),
                DirectResult::Refused => {
                    tracing::info!(
                        errno = -res,
                        "direct WAL writes refused here; synced groups use write + fdatasync"
                    );
                    d.off = true;
                    return Ok(false);
                }
                DirectResult::Short => {
                    d.end = None;
                    return Ok(false);
                }
            }
        }
    }
}

/// Submit what is queued and reap exactly `count` completions, results indexed by tag - 1.
/// Never returns while a submitted SQE may still be in flight (the buffers it points to must
/// outlive it); on an unknown ring state it marks the ring `broken`.
fn reap(ring: &mut IoUring, broken: &mut bool, count: usize) -> io::Result<[Option<i32>; 2]> {
    let mut res = [None; 2];
    let mut reaped = 0;
    while reaped < count {
        if let Err(e) = ring.submit_and_wait(count - reaped) {
            let transient = e.kind() == io::ErrorKind::Interrupted
                || matches!(e.raw_os_error(), Some(code) if code == EAGAIN || code == 16);
            if !transient {
                // io_uring_enter fails without consuming SQEs when submission fails; if they
                // are still in the SQ nothing is in flight and returning is safe (the ring is
                // marked broken so they are never submitted). If they were consumed the kernel
                // may still use the buffers: keep waiting, memory safety first.
                if !ring.submission().is_empty() {
                    *broken = true;
                    return Err(e);
                }
                tracing::warn!(error = %e, "io_uring wait failed with operations in flight; retrying");
                std::thread::yield_now();
            }
        }
        for cqe in ring.completion() {
            if let Some(slot) = (cqe.user_data() as usize)
                .checked_sub(1)
                .and_then(|i| res.get_mut(i))
            {
                *slot = Some(cqe.result());
            }
            reaped += 1;
        }
    }
    Ok(res)
}

impl WalDevice for UringDevice {
    fn write(
        &mut self,
        file: &Arc<dyn File>,
        offset: u64,
        buf: &[u8],
        sync: bool,
    ) -> io::Result<()> {
        if self.broken {
            return Err(io::Error::other(
                "io_uring device unusable after an earlier failure",
            ));
        }
        let Some(fd) = file.raw_fd() else {
            // A simulated file has no descriptor; the portable path gives the same promise.
            return SyncDevice.write(file, offset, buf, sync);
        };
        if !sync {
            // The ring earns its place on the durable path: one submission carries the write
            // and an fdatasync linked after it. A group that needs no sync is a buffered write,
            // which io_uring hands to a kernel worker thread; `benches/benches/wal.rs` measured
            // it 3x slower than a plain pwrite for one SyncWal writer on this machine (50k vs
            // 146k appends/s), so such groups take the pwrite path.
            // After a direct write, a file that takes unsynced groups is not written direct
            // any more (module docs).
            self.direct.track(file);
            if self.direct.wrote {
                self.direct.refused = true;
            }
            return SyncDevice.write(file, offset, buf, false);
        }
        self.direct.track(file);
        let direct = self.write_direct(fd, offset, buf);
        if !matches!(direct, Ok(false)) {
            if direct.is_err() {
                self.direct.end = None;
            }
            return direct.map(|_| ());
        }
        let mut chain = Chain::new(buf.len(), sync);
        while let Some(round) = chain.next_round(self.max_chunk) {
            let (w, f) = self.run_round(fd, offset, buf, &round)?;
            chain.complete(&round, w, f)?;
        }
        self.direct
            .synced_buffered(file, buf, offset + buf.len() as u64);
        Ok(())
    }

    fn kind(&self) -> BackendKind {
        BackendKind::IoUring
    }

    fn mapping(&mut self, file: &Arc<dyn File>) {
        self.direct.track(file);
        self.direct.refused = true;
    }

    fn direct_writes(&self) -> u64 {
        self.direct.writes
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::{FileSystem, RealFs};

    fn run(chain: &mut Chain, script: &[(Option<i32>, Option<i32>)]) -> Vec<Round> {
        let mut rounds = Vec::new();
        for &(w, f) in script {
            let r = chain.next_round(MAX_CHUNK).expect("a round");
            chain.complete(&r, w, f).unwrap();
            rounds.push(r);
        }
        rounds
    }

    #[test]
    fn short_write_breaks_link_then_remainder_and_new_fsync() {
        let mut c = Chain::new(100, true);
        let rounds = run(&mut c, &[(Some(40), Some(-ECANCELED)), (Some(60), Some(0))]);
        assert_eq!(
            rounds,
            vec![
                Round {
                    write: Some((0, 100)),
                    fsync: true
                },
                Round {
                    write: Some((40, 60)),
                    fsync: true
                }
            ]
        );
        assert_eq!(c.next_round(MAX_CHUNK), None);
    }

    #[test]
    fn fsync_success_after_short_write_is_not_trusted() {
        let mut c = Chain::new(10, true);
        run(&mut c, &[(Some(4), Some(0))]);
        // The remainder still needs writing and a fresh fsync after it.
        assert_eq!(
            c.next_round(MAX_CHUNK),
            Some(Round {
                write: Some((4, 6)),
                fsync: true
            })
        );
        run(&mut c, &[(Some(6), Some(0))]);
        assert_eq!(c.next_round(MAX_CHUNK), None);
    }

    #[test]
    fn errors_are_reported_not_retried() {
        let mut c = Chain::new(10, true);
        let r = c.next_round(MAX_CHUNK).unwrap();
        let e = c.complete(&r, Some(-5), Some(-ECANCELED)).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(5));

        let mut c = Chain::new(10, true);
        let r = c.next_round(MAX_CHUNK).unwrap();
        let e = c.complete(&r, Some(10), Some(-5)).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(5), "a failed fsync is an error");

        let mut c = Chain::new(10, true);
        let r = c.next_round(MAX_CHUNK).unwrap();
        assert!(c.complete(&r, Some(10), Some(-ECANCELED)).is_err());

        let mut c = Chain::new(10, false);
        let r = c.next_round(MAX_CHUNK).unwrap();
        assert_eq!(
            c.complete(&r, Some(0), None).unwrap_err().kind(),
            io::ErrorKind::WriteZero
        );
        let mut c = Chain::new(10, false);
        let r = c.next_round(MAX_CHUNK).unwrap();
        assert!(c.complete(&r, Some(11), None).is_err());
        let mut c = Chain::new(10, false);
        let r = c.next_round(MAX_CHUNK).unwrap();
        assert!(c.complete(&r, None, None).is_err());
    }

    #[test]
    fn eintr_on_write_is_retried_boundedly() {
        let mut c = Chain::new(10, false);
        for _ in 0..MAX_WRITE_RETRIES {
            let r = c.next_round(MAX_CHUNK).unwrap();
            c.complete(&r, Some(-EINTR), None).unwrap();
        }
        let r = c.next_round(MAX_CHUNK).unwrap();
        assert!(c.complete(&r, Some(-EINTR), None).is_err());
    }

    #[test]
    fn chunks_carry_the_fsync_only_on_the_last() {
        let c = Chain::new(10, true);
        assert_eq!(
            c.next_round(4),
            Some(Round {
                write: Some((0, 4)),
                fsync: false
            })
        );
        let c = Chain::new(0, true);
        assert_eq!(
            c.next_round(4),
            Some(Round {
                write: None,
                fsync: true
            })
        );
        assert_eq!(Chain::new(0, false).next_round(4), None);
    }

    #[test]
    fn real_ring_writes_in_chunks_and_syncs() {
        let Ok(dev) = UringDevice::new() else {
            eprintln!("io_uring unavailable here; skipping");
            return;
        };
        let mut dev = dev.with_max_chunk(7);
        let dir = tempfile::tempdir().unwrap();
        let f = RealFs.create(&dir.path().join("x")).unwrap();
        let data: Vec<u8> = (0..100u8).collect();
        dev.write(&f, 5, &data, true).unwrap();
        dev.write(&f, 105, &[], true).unwrap();
        dev.write(&f, 105, b"tail", false).unwrap();
        let mut back = vec![0u8; 109];
        f.read_exact_at(&mut back, 0).unwrap();
        assert_eq!(&back[..5], &[0u8; 5]);
        assert_eq!(&back[5..105], &data[..]);
        assert_eq!(&back[105..], b"tail");
        assert_eq!(dev.kind(), BackendKind::IoUring);
    }

    #[test]
    fn direct_results_map_to_actions() {
        assert_eq!(DirectResult::of(4096, 4096).unwrap(), DirectResult::Done);
        assert_eq!(DirectResult::of(512, 4096).unwrap(), DirectResult::Short);
        assert_eq!(DirectResult::of(0, 4096).unwrap(), DirectResult::Short);
        assert_eq!(DirectResult::of(-EINTR, 4096).unwrap(), DirectResult::Retry);
        assert_eq!(
            DirectResult::of(-EAGAIN, 4096).unwrap(),
            DirectResult::Retry
        );
        assert_eq!(
            DirectResult::of(-EINVAL, 4096).unwrap(),
            DirectResult::Refused
        );
        assert_eq!(
            DirectResult::of(-EOPNOTSUPP, 4096).unwrap(),
            DirectResult::Refused
        );
        // A failed direct write is a failed sync: an error, never retried or worked around.
        assert_eq!(
            DirectResult::of(-5, 4096).unwrap_err().raw_os_error(),
            Some(5)
        );
        assert_eq!(
            DirectResult::of(-28, 4096).unwrap_err().raw_os_error(),
            Some(28)
        );
        assert!(DirectResult::of(8192, 4096).is_err());
    }

    /// Whether this device writes direct where the file is (`false` on a file system that
    /// refuses `O_DIRECT`: then only the bytes are checked).
    fn direct_here(dev: &UringDevice) -> bool {
        !dev.direct.off && !dev.direct.refused
    }

    fn pattern(seed: u8, n: usize) -> Vec<u8> {
        (0..n)
            .map(|i| seed.wrapping_add((i % 251) as u8) | 1)
            .collect()
    }

    #[test]
    fn synced_groups_after_a_synced_group_go_direct_and_keep_every_byte() {
        let Ok(mut dev) = UringDevice::new() else {
            eprintln!("io_uring unavailable here; skipping");
            return;
        };
        for prealloc in [false, true] {
            let dir = tempfile::tempdir().unwrap();
            let f = RealFs.create(&dir.path().join("seg")).unwrap();
            if prealloc {
                f.allocate(1 << 20).unwrap();
            }
            let mut want = Vec::new();
            let put = |dev: &mut UringDevice, want: &mut Vec<u8>, data: Vec<u8>, sync: bool| {
                dev.write(&f, want.len() as u64, &data, sync).unwrap();
                want.extend_from_slice(&data);
            };
            let before = dev.direct.writes;
            // Nothing known about the file yet: buffered, then fdatasync.
            put(&mut dev, &mut want, pattern(1, 100), true);
            assert_eq!(dev.direct.writes, before);
            // Durable up to its offset: direct, across a block boundary, then within a block.
            put(&mut dev, &mut want, pattern(2, 5000), true);
            put(&mut dev, &mut want, pattern(3, 50), true);
            let direct = direct_here(&dev);
            if !direct {
                eprintln!("O_DIRECT refused here; only the bytes are checked");
            }
            if direct {
                assert_eq!(dev.direct.writes, before + 2);
            }
            // A group larger than MAX_DIRECT is buffered; the next small one direct.
            put(&mut dev, &mut want, pattern(7, MAX_DIRECT + 1), true);
            put(&mut dev, &mut want, pattern(8, 7), true);
            // A group ending exactly on a block boundary leaves no head bytes for the next.
            let to_boundary = DIRECT_ALIGN - want.len() % DIRECT_ALIGN;
            put(&mut dev, &mut want, pattern(9, to_boundary), true);
            put(&mut dev, &mut want, pattern(10, 1), true);
            if direct {
                assert_eq!(dev.direct.writes, before + 5);
            }
            // An unsynced write: from then on the file's synced groups are buffered (their
            // fdatasync covers it).
            put(&mut dev, &mut want, pattern(4, 30), false);
            put(&mut dev, &mut want, pattern(5, 10), true);
            put(&mut dev, &mut want, pattern(6, 3000), true);
            assert_eq!(dev.direct.writes, before + if direct { 5 } else { 0 });
            let mut back = vec![0u8; want.len()];
            f.read_exact_at(&mut back, 0).unwrap();
            assert!(
                back == want,
                "the file's bytes differ from what was written"
            );
            // Past the end, up to the block's end: zeros (a direct write's padding, or
            // preallocated space), which is what the log reader takes for the end.
            let len = f.len().unwrap() as usize;
            assert!(len >= want.len());
            let mut rest =
                vec![1u8; len.min(want.len().next_multiple_of(DIRECT_ALIGN)) - want.len()];
            f.read_exact_at(&mut rest, want.len() as u64).unwrap();
            assert!(rest.iter().all(|&b| b == 0));
        }
    }

    /// A device, a directory, and a file `f` in it holding one synced 100-byte group, or
    /// `None` without io_uring.
    fn device_with_a_synced_file() -> Option<(UringDevice, tempfile::TempDir, Arc<dyn File>)> {
        let mut dev = UringDevice::new().ok()?;
        let dir = tempfile::tempdir().unwrap();
        let f = RealFs.create(&dir.path().join("f")).unwrap();
        dev.write(&f, 0, &pattern(1, 100), true).unwrap();
        Some((dev, dir, f))
    }

    #[test]
    fn a_mapped_file_is_never_written_direct() {
        let Some((mut dev, dir, f)) = device_with_a_synced_file() else {
            return;
        };
        dev.mapping(&f);
        let before = dev.direct.writes;
        for i in 1..5u64 {
            dev.write(&f, i * 100, &pattern(2, 100), true).unwrap();
        }
        assert_eq!(dev.direct.writes, before);
        // The next file is not mapped (yet).
        let g = RealFs.create(&dir.path().join("g")).unwrap();
        dev.write(&g, 0, &pattern(1, 100), true).unwrap();
        dev.write(&g, 100, &pattern(1, 100), true).unwrap();
        if direct_here(&dev) {
            assert_eq!(dev.direct.writes, before + 1);
        }
    }

    #[test]
    fn a_new_file_never_gets_the_previous_files_bytes() {
        let Some((mut dev, dir, f)) = device_with_a_synced_file() else {
            return;
        };
        dev.write(&f, 100, &pattern(2, 100), true).unwrap();
        let before = dev.direct.writes;
        // Same offset as f's durable end, another file: buffered (nothing known about g).
        let g = RealFs.create(&dir.path().join("g")).unwrap();
        dev.write(&g, 200, &pattern(3, 100), true).unwrap();
        assert_eq!(dev.direct.writes, before);
        dev.write(&g, 300, &pattern(4, 100), true).unwrap();
        if direct_here(&dev) {
            assert_eq!(dev.direct.writes, before + 1);
        }
        let mut back = vec![9u8; 400];
        g.read_exact_at(&mut back, 0).unwrap();
        assert_eq!(&back[..200], &[0u8; 200][..], "f's bytes leaked into g");
        assert_eq!(&back[200..300], &pattern(3, 100)[..]);
        assert_eq!(&back[300..], &pattern(4, 100)[..]);
        // Dropping f and making a file in its place does not confuse the device either.
        drop(f);
        let h = RealFs.create(&dir.path().join("h")).unwrap();
        dev.write(&h, 400, b"h", true).unwrap();
        let mut back = vec![9u8; 401];
        h.read_exact_at(&mut back, 0).unwrap();
        assert!(back[..400].iter().all(|&b| b == 0));
        assert_eq!(back[400], b'h');
    }

    #[test]
    fn bad_descriptor_is_an_error_not_a_success() {
        let Ok(mut dev) = UringDevice::new() else {
            return;
        };
        #[derive(Debug)]
        struct BadFd;
        impl File for BadFd {
            fn read_at(&self, _: &mut [u8], _: u64) -> io::Result<usize> {
                Ok(0)
            }
            fn write_at(&self, b: &[u8], _: u64) -> io::Result<usize> {
                Ok(b.len())
            }
            fn sync_data(&self) -> io::Result<()> {
                Ok(())
            }
            fn len(&self) -> io::Result<u64> {
                Ok(0)
            }
            fn allocate(&self, _: u64) -> io::Result<()> {
                Ok(())
            }
            fn truncate(&self, _: u64) -> io::Result<()> {
                Ok(())
            }
            fn raw_fd(&self) -> Option<i32> {
                Some(-1)
            }
        }
        let f: Arc<dyn File> = Arc::new(BadFd);
        assert!(dev.write(&f, 0, b"abc", true).is_err());
        assert!(dev.write(&f, 0, &[], true).is_err());
        // The ring still works after a failed operation.
        let dir = tempfile::tempdir().unwrap();
        let g = RealFs.create(&dir.path().join("y")).unwrap();
        dev.write(&g, 0, b"ok", true).unwrap();
    }
}
