//! The group-commit hand-off between appending threads and the single WAL writer thread.
//!
//! Contract:
//! * `append` assigns the sequence number and enqueues the record under one lock, so queue
//!   order equals seq order and the file order equals seq order.
//! * The writer takes the *whole* queue at once ([`Shared::next_batch`]); the batch's `upto` is
//!   the highest seq assigned at that moment, including `SkipWal` seqs that have no record, so
//!   watermarks cover them too.
//! * After the batch's bytes reached the OS the writer publishes `written = upto`; after an
//!   fdatasync ordered after those writes it publishes `synced = upto`. Watermarks only move
//!   forward ([`Shared::publish`] takes the maximum). A waiter returns `Ok` iff its watermark
//!   covers its seq, checked before the poison flag, so a record whose group completed before a
//!   later failure is still acknowledged correctly.
//! * After [`Shared::poison`], no append other than `SkipWal` and no `sync`/`roll` succeeds, and
//!   every waiter not yet covered wakes with `Error::Poisoned`, except the waiters of the group
//!   whose write hit a full disk: they get `Error::NoSpace` (the error their write met; later
//!   calls get `Poisoned` with cause `NoSpace`).
//! * Wake-ups: appenders notify the writer only when the queue goes from empty to non-empty
//!   (the writer empties it under the same lock, so no wake-up can be lost); the writer
//!   notifies all waiters after every publication.
//!
//! Model check (loom; a pass is evidence, not proof: loom does not explore load buffering):
//!
//! ```text
//! RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=3 cargo test -p cellar --release --lib wal::commit
//! ```

use std::collections::HashMap;

use std::path::PathBuf;

use super::Durability;
use crate::error::{Error, Poison, PoisonCause, Result};
use crate::sync_shim::{Condvar, Mutex, MutexGuard};

/// One queued unit of work for the writer.
#[derive(Debug)]
pub(crate) enum Item {
    /// A record to frame and write.
    Record {
        /// Its sequence number.
        seq: u64,
        /// Its payload.
        payload: Vec<u8>,
    },
    /// Start a new segment here; the result is published under this ticket.
    Roll {
        /// The ticket the caller waits on.
        ticket: u64,
    },
}

/// What the writer takes from the queue in one go.
#[derive(Debug)]
pub(crate) struct Batch {
    /// Records and roll requests, in seq order.
    pub items: Vec<Item>,
    /// Highest seq assigned when the batch was taken; the watermarks to publish.
    pub upto: u64,
    /// Whether the batch must end with an fdatasync (an `FsyncWal` record or a pending
    /// `sync()`/close is covered by it).
    pub sync: bool,
}

#[derive(Debug)]
struct State {
    next_seq: u64,
    queue: Vec<Item>,
    /// Whether some queued record asked for `FsyncWal`.
    queue_needs_sync: bool,
    written: u64,
    synced: u64,
    /// Highest seq a `sync()` or close asked to make durable.
    sync_target: u64,
    poison: Option<Poison>,
    /// Set with a `NoSpace` poison: the highest seq of the group that failed, and the file and
    /// operation, so that group's waiters get the typed error.
    no_space: Option<(u64, PathBuf, String)>,
    closing: bool,
    next_ticket: u64,
    rolled: HashMap<u64, u64>,
}

/// The shared state of one WAL: the queue, the watermarks and the poison flag.
#[derive(Debug)]
pub(crate) struct Shared {
    state: Mutex<State>,
    /// The writer waits here for work.
    work: Condvar,
    /// Appenders, `sync` and `roll` callers wait here for watermarks.
    done: Condvar,
}

fn lock(m: &Mutex<State>) -> MutexGuard<'_, State> {
    // A panic while holding the lock cannot leave the state half-updated in a way that matters
    // more than the panic itself (every update is a few assignments), so keep going.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn wait<'a>(c: &Condvar, g: MutexGuard<'a, State>) -> MutexGuard<'a, State> {
    c.wait(g).unwrap_or_else(|e| e.into_inner())
}

impl Shared {
    /// Fresh state; the first record gets `next_seq`. Seq 0 is never assigned, so watermarks
    /// start at `next_seq - 1` ("everything before is already covered").
    pub(crate) fn new(next_seq: u64) -> Self {
        let next_seq = next_seq.max(1);
        Shared {
            state: Mutex::new(State {
                next_seq,
                queue: Vec::new(),
                queue_needs_sync: false,
                written: next_seq - 1,
                synced: next_seq - 1,
                sync_target: 0,
                poison: None,
                no_space: None,
                closing: false,
                next_ticket: 0,
                rolled: HashMap::new(),
            }),
            work: Condvar::new(),
            done: Condvar::new(),
        }
    }

    fn enqueue(&self, s: &mut State, item: Item) {
        let was_empty = s.queue.is_empty();
        s.queue.push(item);
        if was_empty {
            self.work.notify_one();
        }
    }

    fn poisoned(s: &State) -> Result<()> {
        match &s.poison {
            Some(why) => Err(Error::Poisoned(why.clone())),
            None => Ok(()),
        }
    }

    /// As [`Shared::poisoned`] for a caller waiting on `seq`: `NoSpace` if `seq` was in the
    /// group whose write hit the full disk.
    fn poisoned_for(s: &State, seq: u64) -> Result<()> {
        if let (Some(_), Some((upto, path, doing))) = (&s.poison, &s.no_space) {
            if seq <= *upto {
                return Err(Error::NoSpace {
                    path: path.clone(),
                    doing: doing.clone(),
                });
            }
        }
        Self::poisoned(s)
    }

    /// Assign a seq, enqueue the record and wait as `d` requires.
    pub(crate) fn append(&self, payload: &[u8], d: Durability) -> Result<u64> {
        // Copy outside the lock to keep the critical section short.
        let owned = match d {
            Durability::SkipWal => Vec::new(),
            _ => payload.to_vec(),
        };
        let mut s = lock(&self.state);
        if d != Durability::SkipWal {
            Self::poisoned(&s)?;
        }
        if s.closing {
            return Err(Error::Closed);
        }
        let seq = s.next_seq;
        s.next_seq += 1;
        match d {
            Durability::SkipWal => return Ok(seq),
            Durability::FsyncWal => s.queue_needs_sync = true,
            Durability::AsyncWal | Durability::SyncWal => {}
        }
        self.enqueue(
            &mut s,
            Item::Record {
                seq,
                payload: owned,
            },
        );
        match d {
            Durability::SkipWal | Durability::AsyncWal => Ok(seq),
            Durability::SyncWal => self.wait_until(s, seq, |s| s.written >= seq).map(|_| seq),
            Durability::FsyncWal => self.wait_until(s, seq, |s| s.synced >= seq).map(|_| seq),
        }
    }

    /// Wait until `covered`; `seq` is what the caller waits for (0: nothing of its own), which
    /// decides whether a full disk is reported as `NoSpace` or `Poisoned`.
    fn wait_until<'a>(
        &self,
        mut s: MutexGuard<'a, State>,
        seq: u64,
        covered: impl Fn(&State) -> bool,
    ) -> Result<MutexGuard<'a, State>> {
        loop {
            // Coverage first: a group that completed before a later failure is acknowledged.
            if covered(&s) {
                return Ok(s);
            }
            Self::poisoned_for(&s, seq)?;
            s = wait(&self.done, s);
        }
    }

    /// Make every seq assigned so far durable.
    pub(crate) fn sync(&self) -> Result<()> {
        let mut s = lock(&self.state);
        Self::poisoned(&s)?;
        let target = s.next_seq - 1;
        if s.synced >= target {
            return Ok(());
        }
        if s.sync_target < target {
            s.sync_target = target;
            self.work.notify_one();
        }
        self.wait_until(s, target, |s| s.synced >= target).map(drop)
    }

    /// Ask the writer to start a new segment after everything queued so far; returns the new
    /// segment's number.
    pub(crate) fn roll(&self) -> Result<u64> {
        let mut s = lock(&self.state);
        Self::poisoned(&s)?;
        if s.closing {
            return Err(Error::Closed);
        }
        let ticket = s.next_ticket;
        s.next_ticket += 1;
        self.enqueue(&mut s, Item::Roll { ticket });
        let mut s = self.wait_until(s, 0, |s| s.rolled.contains_key(&ticket))?;
        Ok(s.rolled.remove(&ticket).unwrap_or_default())
    }

    /// Writer side: block until there is work, then take all of it. `None` once closing and
    /// nothing is left, which tells the writer to exit.
    pub(crate) fn next_batch(&self) -> Option<Batch> {
        let mut s = lock(&self.state);
        loop {
            let sync_pending = s.sync_target > s.synced && s.poison.is_none();
            if !s.queue.is_empty() || sync_pending {
                let items = std::mem::take(&mut s.queue);
                let sync = std::mem::take(&mut s.queue_needs_sync) || sync_pending;
                return Some(Batch {
                    items,
                    upto: s.next_seq - 1,
                    sync,
                });
            }
            if s.closing {
                return None;
            }
            s = wait(&self.work, s);
        }
    }

    /// Writer side: publish progress. `written`/`synced` are the new watermarks (never moved
    /// backwards), `rolls` the segment numbers for completed roll tickets.
    pub(crate) fn publish(&self, written: u64, synced: Option<u64>, rolls: Vec<(u64, u64)>) {
        let mut s = lock(&self.state);
        s.written = s.written.max(written);
        if let Some(synced) = synced {
            s.synced = s.synced.max(synced);
            // Nothing can be durable that was not written first.
            s.written = s.written.max(s.synced);
        }
        s.rolled.extend(rolls);
        drop(s);
        self.done.notify_all();
    }

    /// Record the first failure; every waiter not yet covered fails from now on.
    pub(crate) fn poison(&self, why: Poison) {
        let mut s = lock(&self.state);
        if s.poison.is_none() {
            s.poison = Some(why);
        }
        drop(s);
        self.done.notify_all();
    }

    /// Record the first failure `e`, met by the group of seqs up to `upto`: as
    /// [`Shared::poison`], and if the disk was full, that group's waiters get `NoSpace`.
    pub(crate) fn fail(&self, upto: u64, e: &Error) {
        let mut s = lock(&self.state);
        if s.poison.is_none() {
            let p = Poison::from_error("", e);
            if p.cause == PoisonCause::NoSpace {
                let (path, doing) = match e {
                    Error::NoSpace { path, doing } => (path.clone(), doing.clone()),
                    _ => (PathBuf::new(), "writing the WAL".to_owned()),
                };
                s.no_space = Some((upto, path, doing));
            }
            s.poison = Some(p);
        }
        drop(s);
        self.done.notify_all();
    }

    /// Why the WAL is poisoned, if it is.
    pub(crate) fn poison_reason(&self) -> Option<Poison> {
        lock(&self.state).poison.clone()
    }

    /// Stop accepting work; the writer drains the queue, syncs it, then exits.
    pub(crate) fn close(&self) {
        let mut s = lock(&self.state);
        s.closing = true;
        s.sync_target = s.sync_target.max(s.next_seq - 1);
        drop(s);
        self.work.notify_one();
    }

    /// `(written, synced)` watermarks.
    #[cfg(test)]
    pub(crate) fn watermarks(&self) -> (u64, u64) {
        let s = lock(&self.state);
        (s.written, s.synced)
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::Arc;

    /// A committer that publishes every batch as written and, when asked, synced.
    fn committer(shared: Arc<Shared>) -> std::thread::JoinHandle<usize> {
        std::thread::spawn(move || {
            let mut batches = 0;
            while let Some(b) = shared.next_batch() {
                batches += 1;
                let rolls = b
                    .items
                    .iter()
                    .filter_map(|i| match i {
                        Item::Roll { ticket } => Some((*ticket, 100 + ticket)),
                        Item::Record { .. } => None,
                    })
                    .collect();
                shared.publish(b.upto, b.sync.then_some(b.upto), rolls);
            }
            batches
        })
    }

    #[test]
    fn levels_wait_for_their_watermark() {
        let shared = Arc::new(Shared::new(1));
        let c = committer(shared.clone());
        assert_eq!(shared.append(b"a", Durability::SkipWal).unwrap(), 1);
        assert_eq!(shared.append(b"b", Durability::AsyncWal).unwrap(), 2);
        assert_eq!(shared.append(b"c", Durability::SyncWal).unwrap(), 3);
        assert!(shared.watermarks().0 >= 3);
        assert_eq!(shared.append(b"d", Durability::FsyncWal).unwrap(), 4);
        assert!(shared.watermarks().1 >= 4);
        shared.append(b"e", Durability::AsyncWal).unwrap();
        shared.sync().unwrap();
        assert_eq!(shared.watermarks(), (5, 5));
        assert_eq!(shared.roll().unwrap(), 100);
        shared.close();
        assert!(c.join().unwrap() >= 1);
        assert!(matches!(
            shared.append(b"x", Durability::SyncWal),
            Err(Error::Closed)
        ));
    }

    #[test]
    fn poison_fails_waiters_and_later_appends_but_not_skip_wal() {
        let shared = Arc::new(Shared::new(10));
        let s2 = shared.clone();
        let c = std::thread::spawn(move || {
            let b = s2.next_batch().unwrap();
            assert_eq!(b.upto, 10);
            s2.poison(Poison::new(PoisonCause::Io, "disk on fire"));
            while s2.next_batch().is_some() {}
        });
        let e = shared.append(b"a", Durability::FsyncWal).unwrap_err();
        assert!(matches!(e, Error::Poisoned(ref m) if m.message == "disk on fire"));
        assert!(shared.append(b"b", Durability::AsyncWal).is_err());
        assert!(shared.sync().is_err());
        assert!(shared.roll().is_err());
        assert_eq!(shared.append(b"c", Durability::SkipWal).unwrap(), 11);
        assert_eq!(
            shared.poison_reason().map(|p| p.message).as_deref(),
            Some("disk on fire")
        );
        shared.close();
        c.join().unwrap();
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;
    use crate::sync_shim::{thread, Arc};

    /// Runs the committer: publishes each batch (written, and synced when asked), or poisons on
    /// batch number `fail_at`. Checks that published watermarks never go backwards.
    fn spawn_committer(shared: Arc<Shared>, fail_at: Option<usize>) -> thread::JoinHandle<()> {
        thread::spawn(move || {
            let mut n = 0;
            let mut last = shared.watermarks();
            while let Some(b) = shared.next_batch() {
                if Some(n) == fail_at {
                    shared.poison(Poison::new(PoisonCause::Io, "injected"));
                } else if shared.poison_reason().is_none() {
                    for item in &b.items {
                        if let Item::Record { seq, .. } = item {
                            assert!(*seq <= b.upto, "batch bound must cover its records");
                        }
                    }
                    shared.publish(b.upto, b.sync.then_some(b.upto), Vec::new());
                }
                let now = shared.watermarks();
                assert!(
                    now.0 >= last.0 && now.1 >= last.1,
                    "watermark went backwards"
                );
                last = now;
                n += 1;
            }
        })
    }

    fn writer(shared: Arc<Shared>, d: Durability) -> thread::JoinHandle<Option<u64>> {
        thread::spawn(move || match shared.append(b"r", d) {
            Ok(seq) => {
                let (written, synced) = shared.watermarks();
                match d {
                    Durability::SyncWal => assert!(written >= seq, "acked before written"),
                    Durability::FsyncWal => assert!(synced >= seq, "acked before synced"),
                    _ => {}
                }
                Some(seq)
            }
            Err(Error::Poisoned(_)) => None,
            Err(e) => panic!("unexpected error {e}"),
        })
    }

    /// Two writers (SyncWal, FsyncWal) and the committer; a lost wake-up shows up as a loom
    /// deadlock, an early acknowledgement as a failed assertion.
    #[test]
    fn two_writers_and_committer() {
        loom::model(|| {
            let shared = Arc::new(Shared::new(1));
            let c = spawn_committer(shared.clone(), None);
            let a = writer(shared.clone(), Durability::SyncWal);
            let b = writer(shared.clone(), Durability::FsyncWal);
            let sa = a.join().unwrap().unwrap();
            let sb = b.join().unwrap().unwrap();
            assert_ne!(sa, sb);
            shared.close();
            c.join().unwrap();
            let (w, s) = shared.watermarks();
            assert!(w >= 2 && s >= 2, "close must sync everything");
        });
    }

    /// A writer and a `sync()` caller racing; sync must cover the record if it was assigned
    /// before the sync started.
    #[test]
    fn async_append_then_sync() {
        loom::model(|| {
            let shared = Arc::new(Shared::new(1));
            let c = spawn_committer(shared.clone(), None);
            let a = writer(shared.clone(), Durability::AsyncWal);
            let s2 = shared.clone();
            let b = thread::spawn(move || {
                s2.sync().unwrap();
            });
            let seq = a.join().unwrap().unwrap();
            b.join().unwrap();
            shared.sync().unwrap();
            assert!(shared.watermarks().1 >= seq);
            shared.close();
            c.join().unwrap();
        });
    }

    /// The first batch fails: every writer returns either a covered Ok or Poisoned, none hangs.
    #[test]
    fn poison_wakes_everyone() {
        loom::model(|| {
            let shared = Arc::new(Shared::new(1));
            let c = spawn_committer(shared.clone(), Some(0));
            let a = writer(shared.clone(), Durability::FsyncWal);
            let b = writer(shared.clone(), Durability::SyncWal);
            let ra = a.join().unwrap();
            let rb = b.join().unwrap();
            // Nothing was ever published, so nobody may have been acknowledged.
            assert!(
                ra.is_none() && rb.is_none(),
                "acknowledged without a publication"
            );
            shared.close();
            c.join().unwrap();
            assert!(shared.poison_reason().is_some());
        });
    }
}
