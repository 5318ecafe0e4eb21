//! Group commit: appending threads take turns as the leader that writes everyone's records.
//!
//! Contract:
//! * `append` assigns the sequence number and enqueues the record under one lock, so queue
//!   order equals seq order and the file order equals seq order.
//! * At most one thread is the *leader* (`State::leader`). A thread that must wait for a
//!   watermark (a `SyncWal`/`FsyncWal` append, `sync`, `roll`) and finds work queued and no
//!   leader becomes the leader: it takes the *whole* queue at once, writes it through the
//!   [`BatchWriter`] outside the state lock, publishes, and steps down. Everyone else waits.
//!   So a lone writer pays one device call per record and no thread hand-off (the design of
//!   LevelDB's and RocksDB's write groups); many writers share each device call.
//! * A batch's `upto` is the highest seq assigned when it was taken, including `SkipWal` seqs
//!   that have no record, so watermarks cover them too.
//! * After the batch's bytes reached the OS the leader publishes `written = upto`; after an
//!   fdatasync ordered after those writes it publishes `synced = upto`. Watermarks only move
//!   forward. A waiter returns `Ok` iff its watermark covers its seq, checked before the poison
//!   flag, so a record whose group completed before a later failure is still acknowledged.
//! * An `AsyncWal` append leads one batch itself when no leader is active and otherwise
//!   returns at once; records left queued when a leader steps down are written by the
//!   background thread ([`Shared::run_background`]). It also performs the final sync at close
//!   and then [`BatchWriter::finish`].
//! * After a failure ([`Shared::poison`]), no append other than `SkipWal` and no `sync`/`roll`
//!   succeeds, nothing more is written, and every waiter not yet covered wakes with
//!   `Error::Poisoned`, except the waiters of the group whose write hit a full disk: they get
//!   `Error::NoSpace` (later calls get `Poisoned` with cause `NoSpace`).
//! * Wake-ups: a leader stepping down notifies the waiters (one of them may lead next) and, if
//!   work is left, the background thread. Notifications are skipped when nobody waits (counted
//!   under the lock), which is what keeps a lone writer free of futex calls.
//! * A leader that panics inside the writer poisons the WAL and steps down (a guard), so no
//!   waiter hangs on a dead leader.
//! * [`Shared::append_applied`] (the engine's `SyncWal`/`FsyncWal` writes) queues an [`Apply`]
//!   and a [`Slot`] beside the record. The leader that takes the record decides its outcome
//!   under the lock as above, steps down (handing the lead to the oldest such writer still
//!   queued, through its slot), then runs the group's applies in seq order and delivers each
//!   writer its result once all of them ran. A synced group's leader runs the applies and
//!   delivers first, then leads one more batch if work is queued by then, or steps down
//!   ([`Shared::lead_synced_group`] says why). Groups are applied in write order (the leader
//!   takes `apply_turn` before it steps down), except a lone writer's own record, which it
//!   applies after stepping down without the turn; the read point (`visibility.rs`) orders
//!   what readers see either way. So a follower sleeps once per write and is
//!   woken by exactly one thread; an unwritten group's applies never run. The engine's apply is its memstore
//!   insert and read-point publication, as RocksDB's write-group leader inserts for its group.
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
use crate::sync_shim::{Arc, Condvar, Mutex, MutexGuard};

/// Work the leader runs for a record once the record's group is written (and synced, when the
/// group asks): the engine's memstore insert and visibility publication. The leader applying
/// its group saves each follower a second sleep: it wakes once, with its write applied,
/// instead of waking to insert and then waiting again for the read point.
pub(crate) type Apply = Box<dyn FnOnce(u64) -> Result<()> + Send>;

/// Why an append with an [`Apply`] failed: the WAL (which poisons itself) or the apply.
#[derive(Debug)]
pub(crate) enum AppendError {
    /// The record was not logged, or its group's write failed.
    Wal(Error),
    /// The record is logged; its apply returned this.
    Apply(Error),
}

/// A writer waiting in [`Shared::append_applied`], queued beside its record.
struct Waiter {
    seq: u64,
    d: Durability,
    apply: Apply,
    slot: Arc<Slot>,
}

/// Where one waiting writer sleeps, woken by exactly the thread that has news for it: its
/// group's leader with the outcome, or a leader stepping down that hands it the lead. A
/// shared condition variable woke every waiter for each of these (3.4 context switches per
/// put with 16 fsyncing writers, measured), each then contending for the state lock.
#[derive(Default)]
struct Slot {
    wake: Mutex<SlotState>,
    cv: Condvar,
}

#[derive(Default)]
struct SlotState {
    wake: Option<Wake>,
    /// The writer sleeps on `cv`: a delivery must notify. A writer that led its own record
    /// finds its result without sleeping, and notifying anyway costs a futex call (with the
    /// allocations later avoided by the lone-writer path, 7–12% of single-threaded
    /// fillrandom, measured).
    sleeping: bool,
}

enum Wake {
    /// No leader is active and work is queued: lead it, or sleep again if another thread
    /// took it first.
    Lead,
    /// The record's group was written and applied, or failed: the writer's result.
    Done(std::result::Result<u64, AppendError>),
}

impl Slot {
    fn deliver(&self, w: Wake) {
        let mut g = lock(&self.wake);
        // A result is final; a lead hint never replaces one.
        if matches!(w, Wake::Done(_)) || g.wake.is_none() {
            g.wake = Some(w);
        }
        let sleeping = g.sleeping;
        drop(g);
        if sleeping {
            self.cv.notify_one();
        }
    }

    fn wait(&self) -> Wake {
        let mut g = lock(&self.wake);
        loop {
            if let Some(w) = g.wake.take() {
                return w;
            }
            g.sleeping = true;
            g = wait(&self.cv, g);
            g.sleeping = false;
        }
    }
}

/// Waiting writers in seq order.
#[derive(Default)]
struct Waiters(Vec<Waiter>);

impl std::fmt::Debug for Waiters {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} waiters", self.0.len())
    }
}

/// A record's payload, shared: the engine's write path inserts the batch into the memstore
/// from the same bytes the leader logs, without a copy for each.
pub(crate) type Payload = std::sync::Arc<Vec<u8>>;

/// One queued unit of work for the leader.
#[derive(Debug)]
pub(crate) enum Item {
    /// A record to frame and write.
    Record {
        /// Its sequence number.
        seq: u64,
        /// Its payload.
        payload: Payload,
    },
    /// Start a new segment here; the result is published under this ticket.
    Roll {
        /// The ticket the caller waits on.
        ticket: u64,
    },
}

/// What the leader takes from the queue in one go.
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

/// What a written batch makes known.
#[derive(Debug, Default)]
pub(crate) struct Published {
    /// Every seq up to this is in the OS.
    pub written: u64,
    /// Every seq up to this is durable, if a sync (of the batch or of a roll) says so.
    pub synced: Option<u64>,
    /// Segment numbers of the roll tickets the batch completed.
    pub rolls: Vec<(u64, u64)>,
    /// Where the written data ends after the batch: (segment, offset). Every byte of the
    /// segment before the offset is a whole record in the OS (a change feed reading the live
    /// segment tells damage from bytes still to come by it).
    pub end: Option<(u64, u64)>,
}

/// The device side: frames and writes batches. Called by one leader at a time.
pub(crate) trait BatchWriter: Send {
    /// Write `batch` (and sync it if it asks); what it makes known, or the failure.
    fn write_batch(&mut self, batch: Batch) -> Result<Published>;
    /// Called once at close, after the final sync succeeded.
    fn finish(&mut self);
}

#[derive(Debug)]
struct State {
    next_seq: u64,
    queue: Vec<Item>,
    /// Whether some queued record asked for `FsyncWal`.
    queue_needs_sync: bool,
    written: u64,
    synced: u64,
    /// [`Published::end`] of the last batch written, (0, 0) before the first.
    written_end: (u64, u64),
    /// Highest seq a `sync()` or close asked to make durable.
    sync_target: u64,
    poison: Option<Poison>,
    /// Set with a `NoSpace` poison: the highest seq of the group that failed, and the file and
    /// operation, so that group's waiters get the typed error.
    no_space: Option<(u64, PathBuf, String)>,
    closing: bool,
    next_ticket: u64,
    rolled: HashMap<u64, u64>,
    /// A thread is writing a batch.
    leader: bool,
    /// Threads blocked on `done`.
    waiting: usize,
    /// The background thread is blocked on `work`.
    idle: bool,
    /// Writers of queued records waiting in [`Shared::append_applied`].
    appliers: Waiters,
}

impl State {
    fn sync_pending(&self) -> bool {
        self.sync_target > self.synced && self.poison.is_none()
    }

    fn has_work(&self) -> bool {
        !self.queue.is_empty() || self.sync_pending()
    }

    fn take_batch(&mut self) -> Batch {
        let sync_pending = self.sync_pending();
        Batch {
            items: std::mem::take(&mut self.queue),
            sync: std::mem::take(&mut self.queue_needs_sync) || sync_pending,
            upto: self.next_seq - 1,
        }
    }

    fn publish(&mut self, p: Published) {
        self.written = self.written.max(p.written);
        if let Some(synced) = p.synced {
            self.synced = self.synced.max(synced);
            // Nothing can be durable that was not written first.
            self.written = self.written.max(self.synced);
        }
        self.rolled.extend(p.rolls);
        if let Some(end) = p.end {
            self.written_end = self.written_end.max(end);
        }
    }

    fn fail(&mut self, upto: u64, e: &Error) {
        if self.poison.is_some() {
            return;
        }
        let p = Poison::from_error("", e);
        if p.cause == PoisonCause::NoSpace {
            let (path, doing) = match e {
                Error::NoSpace { path, doing } => (path.clone(), doing.clone()),
                _ => (PathBuf::new(), "writing the WAL".to_owned()),
            };
            self.no_space = Some((upto, path, doing));
        }
        self.poison = Some(p);
    }
}

/// The shared state of one WAL: the queue, the watermarks, the poison flag and the device.
#[derive(Debug)]
pub(crate) struct Shared<W> {
    state: Mutex<State>,
    /// Only the leader locks it, so it is never contended; a lock rather than a cell keeps
    /// the exclusivity checked.
    writer: Mutex<W>,
    /// The background thread waits here for `AsyncWal` work and for close.
    work: Condvar,
    /// `append`, `sync` and `roll` callers wait here for watermarks or for leadership
    /// (`append_applied` callers wait in their own [`Slot`]).
    done: Condvar,
    /// Held by a leader from the end of its write to the end of its group's applies. Lock
    /// order: `apply_turn`, then `state`.
    apply_turn: Mutex<()>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding the lock cannot leave the state half-updated in a way that matters
    // more than the panic itself (every update is a few assignments), so keep going.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn wait<'a, T>(c: &Condvar, g: MutexGuard<'a, T>) -> MutexGuard<'a, T> {
    c.wait(g).unwrap_or_else(|e| e.into_inner())
}

/// Steps a panicking leader down with the WAL poisoned, so nobody waits on it forever: the
/// writers of its group get the poison in their slots.
struct LeaderGuard<'a, W: BatchWriter> {
    shared: &'a Shared<W>,
    armed: bool,
    waiters: Vec<Waiter>,
}

impl<W: BatchWriter> Drop for LeaderGuard<'_, W> {
    fn drop(&mut self) {
        if self.armed {
            let mut s = lock(&self.shared.state);
            let why = s
                .poison
                .get_or_insert_with(|| {
                    Poison::new(
                        PoisonCause::Other,
                        "a thread panicked while writing the WAL",
                    )
                })
                .clone();
            let next = self.shared.step_down(&mut s);
            drop(s);
            for w in self.waiters.drain(..) {
                let e = Error::Poisoned(why.clone());
                w.slot.deliver(Wake::Done(Err(AppendError::Wal(e))));
            }
            if let Some(n) = next {
                n.deliver(Wake::Lead);
            }
            self.shared.done.notify_all();
            self.shared.work.notify_all();
        }
    }
}

/// Whether `seq`, appended with `d`, is as written as `d` asks.
fn covered(s: &State, seq: u64, d: Durability) -> bool {
    match d {
        Durability::FsyncWal => s.synced >= seq,
        Durability::SkipWal | Durability::AsyncWal | Durability::SyncWal => s.written >= seq,
    }
}

impl<W: BatchWriter> Shared<W> {
    /// Fresh state; the first record gets `next_seq`. Seq 0 is never assigned, so watermarks
    /// start at `next_seq - 1` ("everything before is already covered").
    pub(crate) fn new(next_seq: u64, writer: W) -> Self {
        let next_seq = next_seq.max(1);
        Shared {
            state: Mutex::new(State {
                next_seq,
                queue: Vec::new(),
                queue_needs_sync: false,
                written: next_seq - 1,
                synced: next_seq - 1,
                written_end: (0, 0),
                sync_target: 0,
                poison: None,
                no_space: None,
                closing: false,
                next_ticket: 0,
                rolled: HashMap::new(),
                leader: false,
                waiting: 0,
                idle: false,
                appliers: Waiters::default(),
            }),
            writer: Mutex::new(writer),
            work: Condvar::new(),
            done: Condvar::new(),
            apply_turn: Mutex::new(()),
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

    /// Wake the background thread if it sleeps and there is work no waiter will lead for.
    fn kick_background(&self, s: &State) {
        if s.idle && !s.leader && (s.has_work() || s.closing) {
            self.work.notify_one();
        }
    }

    /// Be the leader for one batch: take the queue, write it outside the state lock, publish
    /// (or poison), step down and wake whoever needs it. Precondition: no leader, work queued.
    ///
    /// The `append_applied` writers of an unsynced batch are applied after the leader stepped
    /// down, so the next group is written while this one goes into the memstore. Those of a
    /// synced batch are applied and woken first, and the leader steps down after them, or
    /// leads once more if work is queued by then ([`Shared::lead_synced_group`]). Either way
    /// each writer is woken once, with its result, after the whole group is applied.
    fn lead<'a>(&'a self, s: MutexGuard<'a, State>) -> MutexGuard<'a, State> {
        self.lead_batch(s, true)
    }

    /// [`Shared::lead`]; `again`: whether a synced group's leader may lead one more batch.
    fn lead_batch<'a>(
        &'a self,
        mut s: MutexGuard<'a, State>,
        again: bool,
    ) -> MutexGuard<'a, State> {
        s.leader = true;
        let batch = s.take_batch();
        let upto = batch.upto;
        let synced_group = batch.sync;
        let waiters = std::mem::take(&mut s.appliers.0);
        // After a failure nothing more is written: the batch is dropped and its waiters see
        // the poison.
        let skip = s.poison.is_some();
        drop(s);
        let mut guard = LeaderGuard {
            shared: self,
            armed: true,
            waiters,
        };
        let result = if skip {
            None
        } else {
            Some(lock(&self.writer).write_batch(batch))
        };
        // Groups are applied in the order they were written: taken before this leader steps
        // down, so the next leader's group waits for this one's. A later group applied first
        // would wait for the read point anyway, each of its writers asleep in the engine.
        let turn = (!guard.waiters.is_empty()).then(|| lock(&self.apply_turn));
        let mut s = lock(&self.state);
        match result {
            Some(Ok(p)) => s.publish(p),
            Some(Err(e)) => {
                tracing::error!(error = %e, "WAL write failed; the WAL is poisoned");
                s.fail(upto, &e);
            }
            None => {}
        }
        guard.armed = false;
        // Each outcome as `wait_until` would decide it, under the lock.
        let outcomes: Vec<_> = std::mem::take(&mut guard.waiters)
            .into_iter()
            .map(|w| {
                let r = if covered(&s, w.seq, w.d) {
                    Ok(w.seq)
                } else {
                    Err(Self::unwritten(&s, w.seq))
                };
                (w, r)
            })
            .collect();
        // See `lead_synced_group` on why a synced group's leader stays until it is applied.
        let stay = synced_group && !outcomes.is_empty();
        let next = if stay {
            // Waiters for a watermark (`sync`, plain appends) need not wait for the applies.
            if s.waiting > 0 {
                self.done.notify_all();
            }
            None
        } else {
            self.step_down(&mut s)
        };
        if outcomes.is_empty() && next.is_none() {
            return s;
        }
        drop(s);
        if let Some(n) = next {
            n.deliver(Wake::Lead);
        }
        let mut done = Vec::with_capacity(outcomes.len());
        for (w, r) in outcomes {
            let r = match r {
                // A group that was not written is not applied: its seqs never become
                // visible.
                Err(e) => Err(AppendError::Wal(e)),
                Ok(seq) => {
                    let apply = w.apply;
                    // A panic becomes that writer's error (the engine poisons itself on
                    // it), so the rest of the group is still applied.
                    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| apply(seq))) {
                        Ok(Ok(())) => Ok(seq),
                        Ok(Err(e)) => Err(AppendError::Apply(e)),
                        Err(_) => Err(AppendError::Apply(Error::Poisoned(Poison::new(
                            PoisonCause::Other,
                            "a thread panicked while applying a write",
                        )))),
                    }
                }
            };
            done.push((w.slot, r));
        }
        drop(turn);
        // Woken only once the whole group is applied: a writer woken earlier preempted the
        // leader on 2 cores and then slept again, the read point held back by the rest of
        // the group (seen as context switches in `wait_visible`).
        for (slot, r) in done {
            slot.deliver(Wake::Done(r));
        }
        let s = lock(&self.state);
        if stay {
            return self.lead_synced_group(s, again);
        }
        s
    }

    /// The end of a synced group's lead, its writers applied and woken: lead the next batch
    /// if `again` and work is queued, else step down and wake the next leader.
    ///
    /// Why a synced group differs: its writers are each asleep for an fdatasync (~150–200 µs
    /// on the comparison's disk), far longer than the applies. Stepping down before applying
    /// (the unsynced groups' order) handed the next batch to a writer queued during this
    /// group's sync, while this group's writers, still unapplied, could not join it: 16
    /// fsyncing writers settled into two cohorts of ~8 taking turns, and each turn waited
    /// for a thread hand-off besides. Applied and woken first, the writers can queue again
    /// before the next batch is taken, and leading that batch here saves the hand-off: 7.9
    /// → 9.8 records a sync, 26.7k → 32.3k puts/s (16 writers, benches/RESULTS.md session
    /// 39). Unsynced groups keep the other order: theirs halved 16 `SyncWal` writers' rate.
    /// Once only: this thread's own caller waits for it.
    fn lead_synced_group<'a>(
        &'a self,
        mut s: MutexGuard<'a, State>,
        again: bool,
    ) -> MutexGuard<'a, State> {
        if again && s.has_work() && s.poison.is_none() {
            return self.lead_batch(s, false);
        }
        let next = self.step_down(&mut s);
        if let Some(n) = next {
            drop(s);
            n.deliver(Wake::Lead);
            return lock(&self.state);
        }
        s
    }

    /// The error of a writer whose group a leader took and did not write.
    fn unwritten(s: &State, seq: u64) -> Error {
        Self::poisoned_for(s, seq).err().unwrap_or_else(|| {
            // A group is written, or fails and poisons: not reached.
            Error::Poisoned(Poison::new(
                PoisonCause::Other,
                "a WAL group was neither written nor failed",
            ))
        })
    }

    /// Clear the leader flag and wake who may lead next: `wait_until` callers, the
    /// background thread, and the oldest `append_applied` writer (returned: its slot is
    /// woken after the state lock is released).
    fn step_down(&self, s: &mut State) -> Option<Arc<Slot>> {
        s.leader = false;
        if s.waiting > 0 {
            self.done.notify_all();
        }
        self.kick_background(s);
        if s.has_work() {
            s.appliers.0.first().map(|w| w.slot.clone())
        } else {
            None
        }
    }

    /// Assign a seq, enqueue the record and wait as `d` requires.
    pub(crate) fn append(&self, payload: Payload, d: Durability) -> Result<u64> {
        if d == Durability::SkipWal {
            let mut s = lock(&self.state);
            if s.closing {
                return Err(Error::Closed);
            }
            s.next_seq += 1;
            return Ok(s.next_seq - 1);
        }
        let mut s = lock(&self.state);
        let seq = Self::enqueue(&mut s, d, payload)?;
        match d {
            // SkipWal returned above.
            Durability::SkipWal | Durability::AsyncWal => {
                // With no leader, write now rather than wake the background thread: a thread
                // hand-off per record cost more than the write (AsyncWal was slower than
                // SyncWal). Behind an active leader, return at once: it, the next leader or
                // the background thread (kicked when a leader steps down with work left)
                // writes the record. A failed write poisons the WAL; the caller learns of it
                // at its next call, as AsyncWal promises nothing more.
                if !s.leader {
                    drop(self.lead(s));
                }
                Ok(seq)
            }
            Durability::SyncWal | Durability::FsyncWal => {
                self.wait_until(s, seq, |s| covered(s, seq, d)).map(|_| seq)
            }
        }
    }

    /// Take `n` consecutive seqs that no record will carry (a bulk load's, SPEC.md §17.12);
    /// returns the first. The gap they leave in the log is legal: replay only needs seqs to
    /// increase.
    pub(crate) fn reserve(&self, n: u64) -> Result<u64> {
        let mut s = lock(&self.state);
        Self::poisoned(&s)?;
        if s.closing {
            return Err(Error::Closed);
        }
        let first = s.next_seq;
        s.next_seq = first
            .checked_add(n)
            .ok_or_else(|| Error::InvalidArgument("sequence numbers exhausted".into()))?;
        Ok(first)
    }

    /// Check that the WAL takes a logged record, assign its seq and queue it.
    fn enqueue(s: &mut State, d: Durability, payload: Payload) -> Result<u64> {
        Self::poisoned(s)?;
        if s.closing {
            return Err(Error::Closed);
        }
        let seq = s.next_seq;
        s.next_seq += 1;
        if d == Durability::FsyncWal {
            s.queue_needs_sync = true;
        }
        s.queue.push(Item::Record { seq, payload });
        Ok(seq)
    }

    /// As [`Shared::append`] for a `SyncWal` or `FsyncWal` record, and returns once the
    /// leader that wrote the record also ran `apply` on it (or never will).
    pub(crate) fn append_applied<F>(
        &self,
        payload: Payload,
        d: Durability,
        apply: F,
    ) -> std::result::Result<u64, AppendError>
    where
        F: FnOnce(u64) -> Result<()> + Send + 'static,
    {
        if !matches!(d, Durability::SyncWal | Durability::FsyncWal) {
            return Err(AppendError::Wal(Error::InvalidArgument(
                "a leader-applied append must wait for its write".into(),
            )));
        }
        let mut s = lock(&self.state);
        let seq = Self::enqueue(&mut s, d, payload).map_err(AppendError::Wal)?;
        if !s.leader && s.queue.len() == 1 {
            // Alone: this thread writes its record and applies it itself, without a slot,
            // as a lone writer did before leaders applied (no allocation, no hand-off).
            let s = self.lead(s);
            if covered(&s, seq, d) {
                drop(s);
                apply(seq).map_err(AppendError::Apply)?;
                return Ok(seq);
            }
            return Err(AppendError::Wal(Self::unwritten(&s, seq)));
        }
        let slot = Arc::new(Slot::default());
        s.appliers.0.push(Waiter {
            seq,
            d,
            apply: Box::new(apply),
            slot: slot.clone(),
        });
        loop {
            // Whoever takes the record (this thread, or a leader already writing) delivers
            // its result to the slot; a leader stepping down with work left wakes the oldest
            // waiter to lead.
            if !s.leader && s.has_work() {
                s = self.lead(s);
            }
            drop(s);
            match slot.wait() {
                Wake::Done(r) => return r,
                Wake::Lead => s = lock(&self.state),
            }
        }
    }

    /// Wait until `covered`, leading batches while nobody else does; `seq` is what the caller
    /// waits for (0: nothing of its own), which decides whether a full disk is reported as
    /// `NoSpace` or `Poisoned`.
    fn wait_until<'a>(
        &'a self,
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
            if !s.leader && s.has_work() {
                s = self.lead(s);
                continue;
            }
            s.waiting += 1;
            s = wait(&self.done, s);
            s.waiting -= 1;
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
        s.sync_target = s.sync_target.max(target);
        self.wait_until(s, target, |s| s.synced >= target).map(drop)
    }

    /// Ask for a new segment after everything queued so far; returns the new segment's number.
    pub(crate) fn roll(&self) -> Result<u64> {
        let mut s = lock(&self.state);
        Self::poisoned(&s)?;
        if s.closing {
            return Err(Error::Closed);
        }
        let ticket = s.next_ticket;
        s.next_ticket += 1;
        s.queue.push(Item::Roll { ticket });
        let mut s = self.wait_until(s, 0, |s| s.rolled.contains_key(&ticket))?;
        Ok(s.rolled.remove(&ticket).unwrap_or_default())
    }

    /// The background thread's loop: lead for work no waiter leads for (`AsyncWal` records),
    /// until close; then make everything durable and [`BatchWriter::finish`] (unless poisoned).
    pub(crate) fn run_background(&self) {
        let mut s = lock(&self.state);
        loop {
            if !s.leader && s.has_work() {
                s = self.lead(s);
                continue;
            }
            if s.closing && !s.leader {
                break;
            }
            s.idle = true;
            s = wait(&self.work, s);
            s.idle = false;
        }
        // Closing: no new seqs, the queue is empty and the close's sync target is covered
        // (or the WAL is poisoned, which stops everything).
        let finish = s.poison.is_none();
        drop(s);
        if finish {
            lock(&self.writer).finish();
        }
    }

    /// Why the WAL is poisoned, if it is.
    pub(crate) fn poison_reason(&self) -> Option<Poison> {
        lock(&self.state).poison.clone()
    }

    /// Stop accepting work; the background thread writes and syncs what is left, then exits.
    pub(crate) fn close(&self) {
        let mut s = lock(&self.state);
        s.closing = true;
        s.sync_target = s.sync_target.max(s.next_seq - 1);
        drop(s);
        self.work.notify_all();
    }

    /// Records queued and not yet taken by a leader.
    #[cfg(all(test, not(loom)))]
    pub(crate) fn queued(&self) -> usize {
        lock(&self.state).queue.len()
    }

    /// Whether a leader is writing a batch.
    #[cfg(all(test, not(loom)))]
    pub(crate) fn leading(&self) -> bool {
        lock(&self.state).leader
    }

    /// [`Published::end`] of the last batch written: (segment, offset), (0, 0) before any.
    pub(crate) fn written_end(&self) -> (u64, u64) {
        lock(&self.state).written_end
    }

    /// `(written, synced)` watermarks.
    pub(crate) fn watermarks(&self) -> (u64, u64) {
        let s = lock(&self.state);
        (s.written, s.synced)
    }
}

/// A device stand-in for the models: publishes what it is given, fails (or panics) on a chosen
/// batch, and checks that batches arrive with increasing bounds, one at a time.
#[cfg(test)]
#[derive(Debug, Default)]
pub(crate) struct FakeWriter {
    pub batches: usize,
    pub fail_at: Option<usize>,
    pub panic_at: Option<usize>,
    pub last_upto: u64,
    pub finished: bool,
}

#[cfg(test)]
impl BatchWriter for FakeWriter {
    fn write_batch(&mut self, b: Batch) -> Result<Published> {
        let n = self.batches;
        self.batches += 1;
        assert!(
            b.upto >= self.last_upto,
            "batch bounds must not go backwards"
        );
        self.last_upto = b.upto;
        for item in &b.items {
            if let Item::Record { seq, .. } = item {
                assert!(*seq <= b.upto, "batch bound must cover its records");
            }
        }
        if Some(n) == self.panic_at {
            panic!("injected panic in the WAL writer");
        }
        if Some(n) == self.fail_at {
            return Err(Error::io(
                "wal",
                "writing",
                std::io::Error::other("injected"),
            ));
        }
        let rolls = b
            .items
            .iter()
            .filter_map(|i| match i {
                Item::Roll { ticket } => Some((*ticket, 100 + ticket)),
                Item::Record { .. } => None,
            })
            .collect();
        Ok(Published {
            written: b.upto,
            synced: b.sync.then_some(b.upto),
            rolls,
            end: None,
        })
    }

    fn finish(&mut self) {
        self.finished = true;
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    /// A shared payload of `b`.
    fn p(b: &[u8]) -> Payload {
        std::sync::Arc::new(b.to_vec())
    }
    use std::sync::Arc;

    fn background(shared: &Arc<Shared<FakeWriter>>) -> std::thread::JoinHandle<()> {
        let s = shared.clone();
        std::thread::spawn(move || s.run_background())
    }

    #[test]
    fn levels_wait_for_their_watermark() {
        let shared = Arc::new(Shared::new(1, FakeWriter::default()));
        let bg = background(&shared);
        assert_eq!(shared.append(p(b"a"), Durability::SkipWal).unwrap(), 1);
        assert_eq!(shared.append(p(b"b"), Durability::AsyncWal).unwrap(), 2);
        assert_eq!(shared.append(p(b"c"), Durability::SyncWal).unwrap(), 3);
        assert!(shared.watermarks().0 >= 3);
        assert_eq!(shared.append(p(b"d"), Durability::FsyncWal).unwrap(), 4);
        assert!(shared.watermarks().1 >= 4);
        shared.append(p(b"e"), Durability::AsyncWal).unwrap();
        shared.sync().unwrap();
        assert_eq!(shared.watermarks(), (5, 5));
        assert_eq!(shared.roll().unwrap(), 100);
        shared.close();
        bg.join().unwrap();
        assert!(
            lock(&shared.writer).finished,
            "close must finish the writer"
        );
        assert!(matches!(
            shared.append(p(b"x"), Durability::SyncWal),
            Err(Error::Closed)
        ));
    }

    /// A lone synchronous writer writes its own record: no other thread exists here to do it.
    #[test]
    fn a_lone_writer_leads_itself() {
        let shared = Shared::new(1, FakeWriter::default());
        for i in 1..=10 {
            assert_eq!(shared.append(p(b"r"), Durability::SyncWal).unwrap(), i);
        }
        shared.append(p(b"r"), Durability::FsyncWal).unwrap();
        shared.sync().unwrap();
        assert_eq!(shared.watermarks(), (11, 11));
        assert_eq!(lock(&shared.writer).batches, 11);
    }

    /// `AsyncWal` records are written without a close or a sync: by the appender itself
    /// when no leader is active, else by a later leader or the background thread. A second
    /// thread keeps leading SyncWal batches so that many async records land behind a leader.
    #[test]
    fn async_records_are_written_without_a_sync() {
        let shared = Arc::new(Shared::new(1, FakeWriter::default()));
        let bg = background(&shared);
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (s2, stop2) = (shared.clone(), stop.clone());
        let syncer = std::thread::spawn(move || {
            while !stop2.load(std::sync::atomic::Ordering::Relaxed) {
                s2.append(p(b"s"), Durability::SyncWal).unwrap();
            }
        });
        let mut last = 0;
        for _ in 0..2000 {
            last = shared.append(p(b"a"), Durability::AsyncWal).unwrap();
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        syncer.join().unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while shared.watermarks().0 < last {
            assert!(
                std::time::Instant::now() < deadline,
                "async record {last} never written"
            );
            std::thread::yield_now();
        }
        shared.close();
        bg.join().unwrap();
    }

    #[test]
    fn poison_fails_waiters_and_later_appends_but_not_skip_wal() {
        let shared = Arc::new(Shared::new(
            10,
            FakeWriter {
                fail_at: Some(0),
                ..FakeWriter::default()
            },
        ));
        let bg = background(&shared);
        let e = shared.append(p(b"a"), Durability::FsyncWal).unwrap_err();
        assert!(matches!(e, Error::Poisoned(_)), "{e}");
        assert!(shared.append(p(b"b"), Durability::AsyncWal).is_err());
        assert!(shared.sync().is_err());
        assert!(shared.roll().is_err());
        assert_eq!(shared.append(p(b"c"), Durability::SkipWal).unwrap(), 11);
        assert!(shared.poison_reason().is_some());
        shared.close();
        bg.join().unwrap();
        assert_eq!(
            lock(&shared.writer).batches,
            1,
            "nothing written after a failure"
        );
        assert!(
            !lock(&shared.writer).finished,
            "a poisoned WAL is not sealed"
        );
    }

    /// Many writers through `append_applied`: each apply runs once, after its record is
    /// durable, and each writer gets its own seq back.
    #[test]
    fn each_applied_writer_is_applied_once_after_its_sync() {
        let shared = Arc::new(Shared::new(1, FakeWriter::default()));
        let bg = background(&shared);
        let seen = Arc::new(std::sync::Mutex::new(std::collections::HashSet::new()));
        let threads: Vec<_> = (0..8)
            .map(|_| {
                let (shared, seen) = (shared.clone(), seen.clone());
                std::thread::spawn(move || {
                    for _ in 0..300 {
                        let (s2, seen2) = (shared.clone(), seen.clone());
                        let seq = shared
                            .append_applied(p(b"r"), Durability::FsyncWal, move |seq| {
                                assert!(s2.watermarks().1 >= seq, "applied before synced");
                                assert!(seen2.lock().unwrap().insert(seq), "applied twice");
                                Ok(())
                            })
                            .unwrap();
                        assert!(seen.lock().unwrap().contains(&seq), "returned unapplied");
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(seen.lock().unwrap().len(), 2400);
        shared.close();
        bg.join().unwrap();
    }

    /// A device that holds its first batch until told, so that others queue behind it.
    struct Held {
        fake: FakeWriter,
        release: std::sync::mpsc::Receiver<()>,
    }

    impl BatchWriter for Held {
        fn write_batch(&mut self, b: Batch) -> Result<Published> {
            if self.fake.batches == 0 {
                self.release.recv().unwrap();
            }
            self.fake.write_batch(b)
        }
        fn finish(&mut self) {}
    }

    /// Queue writers behind a leader held in its write, then release it: `(first, rest)`.
    fn behind_a_held_leader<F>(
        fail_at: Option<usize>,
        applies: Vec<F>,
    ) -> Vec<std::result::Result<u64, AppendError>>
    where
        F: FnOnce(u64) -> Result<()> + Send + 'static,
    {
        let (tx, rx) = std::sync::mpsc::channel();
        let shared = Arc::new(Shared::new(
            1,
            Held {
                fake: FakeWriter {
                    fail_at,
                    ..FakeWriter::default()
                },
                release: rx,
            },
        ));
        let mut threads = Vec::new();
        for (i, f) in applies.into_iter().enumerate() {
            let s2 = shared.clone();
            threads.push(std::thread::spawn(move || {
                s2.append_applied(p(b"r"), Durability::SyncWal, f)
            }));
            // The first leads and is held; the others queue behind it, one by one. The first
            // must be seen leading (not merely an empty queue, which is also the state before
            // it enqueued): otherwise the second could take seq 1 and the lead.
            while !(shared.leading() && shared.queued() == i) {
                std::thread::yield_now();
            }
        }
        tx.send(()).unwrap();
        threads.into_iter().map(|t| t.join().unwrap()).collect()
    }

    /// Followers' applies run on the leader's thread: an error or a panic in one reaches its
    /// own writer only, and the rest of the group is applied.
    #[test]
    fn a_failing_or_panicking_apply_fails_only_its_writer() {
        let ran = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let mk = |what: u8| {
            let ran = ran.clone();
            move |_seq: u64| -> Result<()> {
                ran.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                match what {
                    1 => Err(Error::InvalidArgument("apply said no".into())),
                    2 => panic!("injected panic in an apply"),
                    _ => Ok(()),
                }
            }
        };
        let r = behind_a_held_leader(None, vec![mk(0), mk(1), mk(2), mk(0)]);
        assert_eq!(ran.load(std::sync::atomic::Ordering::SeqCst), 4);
        assert!(matches!(r[0], Ok(1)), "{:?}", r[0]);
        assert!(
            matches!(&r[1], Err(AppendError::Apply(Error::InvalidArgument(m))) if m == "apply said no"),
            "{:?}",
            r[1]
        );
        assert!(
            matches!(&r[2], Err(AppendError::Apply(Error::Poisoned(_)))),
            "{:?}",
            r[2]
        );
        assert!(matches!(r[3], Ok(4)), "{:?}", r[3]);
    }

    /// A device that holds its first two batches until told, says when it holds one, and
    /// records which thread wrote each batch.
    struct Recorded {
        fake: FakeWriter,
        entered: std::sync::mpsc::Sender<usize>,
        release: std::sync::mpsc::Receiver<()>,
        by: Arc<std::sync::Mutex<Vec<std::thread::ThreadId>>>,
    }

    impl BatchWriter for Recorded {
        fn write_batch(&mut self, b: Batch) -> Result<Published> {
            let n = self.fake.batches;
            self.by.lock().unwrap().push(std::thread::current().id());
            if n < 2 {
                self.entered.send(n).unwrap();
                self.release.recv().unwrap();
            }
            self.fake.write_batch(b)
        }
        fn finish(&mut self) {}
    }

    /// The leader of a synced group applies and wakes its writers, then writes the batch
    /// queued meanwhile itself; an unsynced group's leader hands that batch to the writer
    /// queued first (`Shared::lead_synced_group`).
    #[test]
    fn a_synced_groups_leader_writes_the_next_batch_itself() {
        for (d, same) in [(Durability::FsyncWal, true), (Durability::SyncWal, false)] {
            let (entered_tx, entered) = std::sync::mpsc::channel();
            let (tx, release) = std::sync::mpsc::channel();
            let by = Arc::new(std::sync::Mutex::new(Vec::new()));
            let shared = Arc::new(Shared::new(
                1,
                Recorded {
                    fake: FakeWriter::default(),
                    entered: entered_tx,
                    release,
                    by: by.clone(),
                },
            ));
            let spawn = || {
                let s2 = shared.clone();
                std::thread::spawn(move || s2.append_applied(p(b"r"), d, |_| Ok(())))
            };
            let wait_queued = |n: usize| {
                while shared.queued() != n {
                    std::thread::yield_now();
                }
            };
            // Batch 0: a lone writer's, held while two more queue (batch 1).
            let mut threads = vec![spawn()];
            assert_eq!(entered.recv().unwrap(), 0);
            threads.push(spawn());
            wait_queued(1);
            threads.push(spawn());
            wait_queued(2);
            tx.send(()).unwrap();
            // Batch 1, held by the writer queued first while a fourth queues (batch 2).
            assert_eq!(entered.recv().unwrap(), 1);
            threads.push(spawn());
            wait_queued(1);
            tx.send(()).unwrap();
            for t in threads {
                assert!(t.join().unwrap().is_ok());
            }
            let by = by.lock().unwrap();
            assert_eq!(by.len(), 3, "{d:?}: batches {by:?}");
            assert_ne!(by[0], by[1], "{d:?}: the lone writer handed the lead on");
            assert_eq!(by[1] == by[2], same, "{d:?}: batches {by:?}");
        }
    }

    /// A group whose write failed is not applied, and every writer in it and behind it gets
    /// the WAL's error.
    #[test]
    fn an_unwritten_group_is_not_applied() {
        let ran = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let mk = || {
            let ran = ran.clone();
            move |_seq: u64| -> Result<()> {
                ran.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                Ok(())
            }
        };
        let r = behind_a_held_leader(Some(0), vec![mk(), mk(), mk()]);
        assert_eq!(ran.load(std::sync::atomic::Ordering::SeqCst), 0);
        for x in &r {
            assert!(
                matches!(x, Err(AppendError::Wal(Error::Poisoned(_)))),
                "{x:?}"
            );
        }
    }

    /// A leader that panics in the device poisons the WAL instead of leaving the others
    /// waiting for a leader that will never step down.
    #[test]
    fn a_panicking_leader_poisons_and_steps_down() {
        let shared = Arc::new(Shared::new(
            1,
            FakeWriter {
                panic_at: Some(0),
                ..FakeWriter::default()
            },
        ));
        let s2 = shared.clone();
        let t = std::thread::spawn(move || s2.append(p(b"a"), Durability::SyncWal));
        assert!(t.join().is_err(), "the leader's panic propagates to it");
        let e = shared.append(p(b"b"), Durability::SyncWal).unwrap_err();
        assert!(matches!(e, Error::Poisoned(_)), "{e}");
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;

    /// A shared payload of `b`.
    fn p(b: &[u8]) -> Payload {
        std::sync::Arc::new(b.to_vec())
    }
    use crate::sync_shim::{thread, Arc};

    fn background(shared: &Arc<Shared<FakeWriter>>) -> thread::JoinHandle<()> {
        let s = shared.clone();
        thread::spawn(move || s.run_background())
    }

    fn writer(shared: Arc<Shared<FakeWriter>>, d: Durability) -> thread::JoinHandle<Option<u64>> {
        thread::spawn(move || match shared.append(p(b"r"), d) {
            Ok(seq) => {
                let (written, synced) = shared.watermarks();
                match d {
                    Durability::SyncWal => assert!(written >= seq, "acked before written"),
                    Durability::FsyncWal => assert!(synced >= seq, "acked before synced"),
                    _ => {}
                }
                Some(seq)
            }
            Err(Error::Poisoned(_)) | Err(Error::Io { .. }) => None,
            Err(e) => panic!("unexpected error {e}"),
        })
    }

    /// Two writers (SyncWal, FsyncWal) racing for leadership beside the background thread; a
    /// lost wake-up shows up as a loom deadlock, an early acknowledgement as a failed
    /// assertion, two leaders at once as a batch-order assertion in the fake writer.
    #[test]
    fn two_writers_and_background() {
        loom::model(|| {
            let shared = Arc::new(Shared::new(1, FakeWriter::default()));
            let bg = background(&shared);
            let a = writer(shared.clone(), Durability::SyncWal);
            let b = writer(shared.clone(), Durability::FsyncWal);
            let sa = a.join().unwrap().unwrap();
            let sb = b.join().unwrap().unwrap();
            assert_ne!(sa, sb);
            shared.close();
            bg.join().unwrap();
            let (w, s) = shared.watermarks();
            assert!(w >= 2 && s >= 2, "close must sync everything");
        });
    }

    /// `n` `append_applied` writers in `FsyncWal` beside the background thread: each is applied
    /// exactly once, after its record is durable, and returns only then; a lost hand-off of
    /// the lead shows up as a loom deadlock.
    fn applied_writers(n: usize) {
        let shared = Arc::new(Shared::new(1, FakeWriter::default()));
        let bg = background(&shared);
        let applied = Arc::new(loom::sync::atomic::AtomicUsize::new(0));
        let threads: Vec<_> = (0..n)
            .map(|i| {
                let bit = 1 << i;
                let (shared, applied) = (shared.clone(), applied.clone());
                thread::spawn(move || {
                    let (s2, a2) = (shared.clone(), applied.clone());
                    shared
                        .append_applied(p(b"r"), Durability::FsyncWal, move |seq| {
                            assert!(s2.watermarks().1 >= seq, "applied before synced");
                            let was = a2.fetch_or(bit, loom::sync::atomic::Ordering::SeqCst);
                            assert_eq!(was & bit, 0, "applied twice");
                            Ok(())
                        })
                        .unwrap();
                    let now = applied.load(loom::sync::atomic::Ordering::SeqCst);
                    assert_ne!(now & bit, 0, "returned before its apply");
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(
            applied.load(loom::sync::atomic::Ordering::SeqCst),
            (1 << n) - 1
        );
        shared.close();
        bg.join().unwrap();
    }

    /// Two applied writers ([`applied_writers`]).
    #[test]
    fn two_applied_writers() {
        loom::model(|| applied_writers(2));
    }

    /// Three applied writers: a synced group's leader applies and wakes its writers before it
    /// steps down, and may lead the batch queued meanwhile itself (`lead_synced_group`, which
    /// this model reaches). Bounded to two preemptions: three writers beside the background
    /// thread are many interleavings.
    #[test]
    fn three_applied_writers() {
        let mut model = loom::model::Builder::new();
        model.preemption_bound = Some(2);
        model.check(|| applied_writers(3));
    }

    /// An async writer and a `sync()` caller racing; sync must cover the record if it was
    /// assigned before the sync started, and the async record must be written without any
    /// waiter (by the background thread) before close returns.
    #[test]
    fn async_append_then_sync() {
        loom::model(|| {
            let shared = Arc::new(Shared::new(1, FakeWriter::default()));
            let bg = background(&shared);
            let a = writer(shared.clone(), Durability::AsyncWal);
            let s2 = shared.clone();
            let b = thread::spawn(move || {
                s2.sync().unwrap();
            });
            let seq = a.join().unwrap().unwrap();
            b.join().unwrap();
            shared.close();
            bg.join().unwrap();
            assert!(shared.watermarks().1 >= seq);
            assert!(lock(&shared.writer).finished);
        });
    }

    /// The first batch fails: every writer returns either a covered Ok or an error, none hangs.
    #[test]
    fn poison_wakes_everyone() {
        loom::model(|| {
            let shared = Arc::new(Shared::new(
                1,
                FakeWriter {
                    fail_at: Some(0),
                    ..FakeWriter::default()
                },
            ));
            let bg = background(&shared);
            let a = writer(shared.clone(), Durability::FsyncWal);
            let b = writer(shared.clone(), Durability::SyncWal);
            let ra = a.join().unwrap();
            let rb = b.join().unwrap();
            let batches = lock(&shared.writer).batches;
            // With one batch (the failing one) nobody can have been acknowledged; with a
            // second, it would have been written after the failure.
            assert_eq!(batches, 1, "written after the failure");
            assert!(
                ra.is_none() && rb.is_none(),
                "acknowledged without a publication"
            );
            shared.close();
            bg.join().unwrap();
            assert!(shared.poison_reason().is_some());
        });
    }
}
