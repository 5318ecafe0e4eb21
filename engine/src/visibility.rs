//! The read point: which sequence numbers readers may see (MVCC, SPEC.md §13).
//!
//! Writers finish in any order (a SkipWal batch can complete while an earlier FsyncWal batch
//! still waits for its fdatasync), but readers must see batches in seq order and whole: the
//! read point advances to `S` only when every batch `<= S` has been applied to the memstores.
//! A writer returns to its caller only once the read point covers its batch, so a read that
//! starts after a write returned sees it.
//!
//! # Concurrency
//! `complete` and `wait_visible` are called by any number of writer threads; `read_point` by
//! readers, without taking the lock. `poison` wakes every waiter: a batch whose seq was assigned
//! but never applied (its WAL write failed) would otherwise hold the read point back forever.
//!
//! Model check:
//! ```text
//! RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=3 cargo test -p cellar --release --lib visibility
//! ```

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::error::{Error, Poison, Result};
use crate::sync_shim::{Condvar, Mutex};
use crate::types::SeqNo;

#[derive(Debug)]
struct Inner {
    /// Highest S such that every batch <= S is applied.
    visible: SeqNo,
    /// Applied batches above `visible + 1` (waiting for an earlier one).
    done: BTreeSet<SeqNo>,
    poisoned: Option<Poison>,
    /// Threads blocked in `wait_visible`: `complete` skips the wake-up (a futex call per
    /// write otherwise) when there are none.
    waiters: usize,
}

/// Publishes the read point in sequence order.
#[derive(Debug)]
pub struct Visibility {
    inner: Mutex<Inner>,
    cv: Condvar,
    read_point: AtomicU64,
}

impl Visibility {
    /// Start with every batch `<= visible` applied (after recovery: the last recovered seq).
    pub fn new(visible: SeqNo) -> Self {
        Visibility {
            inner: Mutex::new(Inner {
                visible,
                done: BTreeSet::new(),
                poisoned: None,
                waiters: 0,
            }),
            cv: Condvar::new(),
            read_point: AtomicU64::new(visible),
        }
    }

    /// The read point: a read that takes it sees exactly the batches `<= ` it.
    pub fn read_point(&self) -> SeqNo {
        self.read_point.load(Ordering::Acquire)
    }

    /// Batch `seq` is fully applied.
    pub fn complete(&self, seq: SeqNo) {
        let mut g = lock(&self.inner);
        if seq <= g.visible {
            return;
        }
        let moved = if seq == g.visible + 1 && g.done.is_empty() {
            // In order with nothing pending: the common case of a lone writer.
            g.visible = seq;
            true
        } else {
            g.done.insert(seq);
            let mut moved = false;
            loop {
                let next = g.visible + 1;
                if !g.done.remove(&next) {
                    break;
                }
                g.visible = next;
                moved = true;
            }
            moved
        };
        if moved {
            self.read_point.store(g.visible, Ordering::Release);
            let wake = g.waiters > 0;
            drop(g);
            if wake {
                self.cv.notify_all();
            }
        }
    }

    /// Block until the read point covers `seq`, or the engine is poisoned.
    pub fn wait_visible(&self, seq: SeqNo) -> Result<()> {
        // Without the lock when already visible, the usual case once a group leader has
        // published its group (`wal::commit::Apply`).
        if self.read_point() >= seq {
            return Ok(());
        }
        let mut g = lock(&self.inner);
        loop {
            if g.visible >= seq {
                return Ok(());
            }
            if let Some(why) = &g.poisoned {
                return Err(Error::Poisoned(why.clone()));
            }
            g.waiters += 1;
            g = match self.cv.wait(g) {
                Ok(g) => g,
                Err(p) => p.into_inner(),
            };
            g.waiters -= 1;
        }
    }

    /// Block until the read point passes `seq` (a batch above it is visible), for at most
    /// `timeout`; returns whether it did. `Poisoned` as [`Visibility::wait_visible`].
    pub fn wait_above(&self, seq: SeqNo, timeout: std::time::Duration) -> Result<bool> {
        if self.read_point() > seq {
            return Ok(true);
        }
        let deadline = std::time::Instant::now() + timeout;
        let mut g = lock(&self.inner);
        loop {
            if g.visible > seq {
                return Ok(true);
            }
            if let Some(why) = &g.poisoned {
                return Err(Error::Poisoned(why.clone()));
            }
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                return Ok(false);
            }
            g.waiters += 1;
            g = match self.cv.wait_timeout(g, left) {
                Ok((g, _)) => g,
                Err(p) => p.into_inner().0,
            };
            g.waiters -= 1;
        }
    }

    /// Wake every waiter with `Poisoned` (a batch will never complete).
    pub fn poison(&self, why: &Poison) {
        let mut g = lock(&self.inner);
        if g.poisoned.is_none() {
            g.poisoned = Some(why.clone());
        }
        drop(g);
        self.cv.notify_all();
    }
}

fn lock<T>(m: &Mutex<T>) -> crate::sync_shim::MutexGuard<'_, T> {
    match m.lock() {
        Ok(g) => g,
        Err(p) => p.into_inner(),
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn read_point_advances_only_over_contiguous_batches() {
        let v = Visibility::new(10);
        v.complete(12);
        assert_eq!(v.read_point(), 10);
        v.complete(11);
        assert_eq!(v.read_point(), 12);
        v.complete(5);
        assert_eq!(v.read_point(), 12);
        assert!(v.wait_visible(12).is_ok());
    }

    #[test]
    fn waiters_wake_in_order_and_on_poison() {
        let v = Arc::new(Visibility::new(0));
        let w = {
            let v = v.clone();
            std::thread::spawn(move || v.wait_visible(2))
        };
        v.complete(2);
        v.complete(1);
        assert!(w.join().unwrap().is_ok());
        let w = {
            let v = v.clone();
            std::thread::spawn(move || v.wait_visible(4))
        };
        v.poison(&Poison::new(crate::PoisonCause::Io, "wal write failed"));
        assert!(matches!(w.join().unwrap(), Err(Error::Poisoned(_))));
    }

    /// `wait_above` (the change feed's wait): at once when already past, `false` when the
    /// time is up, woken by a later batch, and by a poison.
    #[test]
    fn wait_above_times_out_or_wakes() {
        use std::time::Duration;
        let v = Arc::new(Visibility::new(5));
        assert!(v.wait_above(4, Duration::ZERO).unwrap());
        assert!(!v.wait_above(5, Duration::from_millis(10)).unwrap());
        let w = {
            let v = v.clone();
            std::thread::spawn(move || v.wait_above(5, Duration::from_secs(60)))
        };
        v.complete(6);
        assert!(w.join().unwrap().unwrap());
        let w = {
            let v = v.clone();
            std::thread::spawn(move || v.wait_above(6, Duration::from_secs(60)))
        };
        v.poison(&Poison::new(crate::PoisonCause::Io, "wal write failed"));
        assert!(matches!(w.join().unwrap(), Err(Error::Poisoned(_))));
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;
    use crate::sync_shim::{thread, Arc};

    /// Two writers complete out of order while a third waits: the read point never skips a
    /// batch, never goes back, and the waiter always wakes.
    #[test]
    fn out_of_order_completion_is_published_in_order() {
        loom::model(|| {
            let v = Arc::new(Visibility::new(0));
            let a = {
                let v = v.clone();
                thread::spawn(move || v.complete(2))
            };
            let b = {
                let v = v.clone();
                thread::spawn(move || {
                    let seen = v.read_point();
                    assert!(seen == 0 || seen == 2 || seen == 1);
                    v.complete(1);
                })
            };
            let waiter = {
                let v = v.clone();
                thread::spawn(move || {
                    v.wait_visible(2).unwrap();
                    assert_eq!(v.read_point(), 2);
                })
            };
            a.join().unwrap();
            b.join().unwrap();
            waiter.join().unwrap();
            assert_eq!(v.read_point(), 2);
        });
    }

    /// The change feed's waiter sleeps until a batch above the read point it saw is
    /// published: the wake-up is never lost between its check and its sleep.
    #[test]
    fn wait_above_wakes_for_a_later_batch() {
        loom::model(|| {
            let v = Arc::new(Visibility::new(0));
            let waiter = {
                let v = v.clone();
                thread::spawn(move || v.wait_above(0, std::time::Duration::from_secs(3600)))
            };
            v.complete(1);
            assert!(waiter.join().unwrap().unwrap());
        });
    }

    /// A waiter whose batch never completes wakes when the engine is poisoned.
    #[test]
    fn poison_wakes_a_stuck_waiter() {
        loom::model(|| {
            let v = Arc::new(Visibility::new(0));
            let waiter = {
                let v = v.clone();
                thread::spawn(move || v.wait_visible(1))
            };
            v.poison(&Poison::new(crate::PoisonCause::Io, "x"));
            assert!(waiter.join().unwrap().is_err());
        });
    }
}
