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
//! Unsafe code: only the two `push` calls; their safety argument is at each site.
#![allow(unsafe_code)]

use std::io;
use std::sync::Arc;

use io_uring::{opcode, squeue, types, IoUring};

use super::device::{BackendKind, WalDevice};
use super::sync::SyncDevice;
use crate::fs::File;

const WRITE_TAG: u64 = 1;
const FSYNC_TAG: u64 = 2;
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

/// io_uring device. See the module doc.
pub struct UringDevice {
    ring: IoUring,
    /// Set when the ring is in an unknown state; every later call fails (the WAL is poisoned by
    /// then anyway).
    broken: bool,
    max_chunk: usize,
}

impl std::fmt::Debug for UringDevice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UringDevice")
            .field("broken", &self.broken)
            .field("max_chunk", &self.max_chunk)
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
        let (mut write_res, mut fsync_res) = (None, None);
        let mut reaped = 0;
        while reaped < count {
            if let Err(e) = self.ring.submit_and_wait(count - reaped) {
                let transient = e.kind() == io::ErrorKind::Interrupted
                    || matches!(e.raw_os_error(), Some(code) if code == EAGAIN || code == 16);
                if !transient {
                    // io_uring_enter fails without consuming SQEs when submission fails; if
                    // they are still in the SQ nothing is in flight and returning is safe (the
                    // ring is marked broken so they are never submitted). If they were consumed
                    // the kernel may still use `buf`: keep waiting, memory safety first.
                    if !self.ring.submission().is_empty() {
                        self.broken = true;
                        return Err(e);
                    }
                    tracing::warn!(error = %e, "io_uring wait failed with operations in flight; retrying");
                    std::thread::yield_now();
                }
            }
            for cqe in self.ring.completion() {
                match cqe.user_data() {
                    WRITE_TAG => write_res = Some(cqe.result()),
                    FSYNC_TAG => fsync_res = Some(cqe.result()),
                    _ => {}
                }
                reaped += 1;
            }
        }
        Ok((write_res, fsync_res))
    }
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
            return SyncDevice.write(file, offset, buf, false);
        }
        let mut chain = Chain::new(buf.len(), sync);
        while let Some(round) = chain.next_round(self.max_chunk) {
            let (w, f) = self.run_round(fd, offset, buf, &round)?;
            chain.complete(&round, w, f)?;
        }
        Ok(())
    }

    fn kind(&self) -> BackendKind {
        BackendKind::IoUring
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
