//! Fault injection against the [`model`](super::model) workload on `FaultFs<SimFs>`
//! (RELIABILITY.md §2.1 c and §2.8): one faulty run with its checks, and the fault matrix —
//! every (fault point × fault × mode) cell a workload reaches, each failing the n-th matching
//! operation. Used by `tests/sim_faults.rs` and `cellar reliability-report`.
//!
//! A run: `warmup` steps without faults, then the rule, then up to `steps` more steps. The
//! checks afterwards ([`verify_after_fault`]): once a write call failed, every later write
//! fails and the database is poisoned (rule 8); live reads show every acknowledged write as a
//! prefix of the write log with whole rows; reopened on the healed file system, both as it is
//! (a process crash) and after a power loss that drops everything unsynced, the database
//! holds every write that had to survive, again as a prefix with whole rows, and takes writes.
//!
//! A fault *point* is an operation kind on a kind of file (`wal.write`, `manifest.sync`,
//! `current.rename`, `hfile.create`, `dir.sync`, ...), as the file layer sees them. The faults
//! that apply to each kind ([`faults_for`]) are tried once (transient) and from the n-th
//! operation on (persistent: a dead device, a disk that stays full).

use std::collections::BTreeMap;
use std::sync::mpsc;
use std::time::Duration;

use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::SeedableRng;

use super::model::{create_table, open, Mix, Model, Step};
use crate::fs::fault::OpRecord;
use crate::fs::{CrashPolicy, Fault, FaultFs, OpKind, Rule, SimFs};
use crate::{Db, Error};

/// Run `f` on its own thread for at most `limit`: a hang or a panic becomes an `Err` instead of
/// a stuck or aborted caller. (A hung thread is left behind, blocked.)
pub fn watchdog<T: Send + 'static>(
    limit: Duration,
    f: impl FnOnce() -> Result<T, String> + Send + 'static,
) -> Result<T, String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    match rx.recv_timeout(limit) {
        Ok(r) => r,
        Err(mpsc::RecvTimeoutError::Timeout) => Err(format!("hung for {limit:?}")),
        Err(mpsc::RecvTimeoutError::Disconnected) => Err("panicked".into()),
    }
}

/// A model workload for fault runs.
#[derive(Debug, Clone)]
pub struct Workload {
    /// Name in reports.
    pub name: &'static str,
    /// The model's seed.
    pub seed: u64,
    /// Durability mix.
    pub mix: Mix,
    /// Chance of a flush step, in percent.
    pub flush_percent: u32,
    /// Steps before the fault is armed.
    pub warmup: usize,
    /// Steps after.
    pub steps: usize,
}

impl Workload {
    /// `SyncWal`/`FsyncWal` writes and deletes with 8% flushes.
    pub fn logged(seed: u64, warmup: usize, steps: usize) -> Workload {
        Workload {
            name: "logged writes, flushes",
            seed,
            mix: Mix::Logged,
            flush_percent: 8,
            warmup,
            steps,
        }
    }

    /// All four durability levels (unlogged writes included) with 20% flushes: more flushes,
    /// WAL rolls, manifest edits and compactions per write.
    pub fn all_levels_flush_heavy(seed: u64, warmup: usize, steps: usize) -> Workload {
        Workload {
            name: "all durability levels, flush-heavy",
            seed,
            mix: Mix::All,
            flush_percent: 20,
            warmup,
            steps,
        }
    }
}

/// What a faulty run saw.
#[derive(Debug, Clone)]
pub struct FaultRun {
    /// The first failed call and its error.
    pub first_error: Option<(Step, String)>,
    /// File operations after the warm-up.
    pub ops: u64,
    /// Those operations, in order (with the fault injected, if any).
    pub log: Vec<OpRecord>,
}

impl FaultRun {
    /// Whether the rule fired at least once.
    pub fn injected(&self) -> bool {
        self.log.iter().any(|r| r.fault.is_some())
    }
}

/// Whether `rule` can fail the opens that reads need.
fn fails_reads(rule: &Rule) -> bool {
    match rule.kind {
        Some(k) => k == OpKind::Open,
        None => !rule.except.contains(&OpKind::Open),
    }
}

/// Run `w` with `rule` armed after the warm-up (none: a counting run), going on for at most
/// `after_error` steps once a call failed (`usize::MAX`: all of them), then
/// [`verify_after_fault`]. `Err` describes a violated invariant.
pub fn run_with_fault(
    w: &Workload,
    rule: Option<Rule>,
    after_error: usize,
) -> Result<FaultRun, String> {
    let sim = SimFs::new();
    let ffs = FaultFs::new(sim.clone());
    let db = open(ffs.clone()).map_err(|e| format!("open: {e}"))?;
    create_table(&db).map_err(|e| format!("create table: {e}"))?;
    let mut model = Model::new(w.seed, w.mix);
    model.flush_percent = w.flush_percent;
    for _ in 0..w.warmup {
        let step = model.next_step();
        model
            .run(&db, step.clone())
            .map_err(|e| format!("warm-up {step:?} failed: {e}"))?;
    }
    ffs.reset_counts();
    // A one-shot fault not reached by the workload would otherwise hit the reads of the
    // checks: a failed read is allowed, but it is not what is checked here. A persistent fault
    // stays (reads must work on a full disk or with a dead sync) unless it fails opens.
    let keep_for_checks = rule
        .as_ref()
        .is_some_and(|r| r.persistent && !fails_reads(r));
    if let Some(r) = rule {
        ffs.add_rule(r);
    }
    let mut first_error = None;
    let mut write_failed = false;
    let mut left_after_error = after_error;
    for _ in 0..w.steps {
        if first_error.is_some() {
            if left_after_error == 0 {
                break;
            }
            left_after_error -= 1;
        }
        let step = model.next_step();
        match model.run(&db, step.clone()) {
            Ok(()) => {
                if write_failed {
                    return Err(format!(
                        "{step:?} succeeded after an earlier write failed (rule 8)"
                    ));
                }
            }
            Err(e) => {
                // A full disk met by a flush (or by a write stalled behind one) is retried by
                // the engine, which stays writable (RELIABILITY.md §2.8): no poison then. Every
                // other failure poisons.
                let retried = matches!(e, Error::NoSpace { .. }) && db.poison().is_none();
                write_failed |= !retried;
                if first_error.is_none() {
                    first_error = Some((step, e.to_string()));
                }
            }
        }
    }
    let ops = ffs.total();
    let log = ffs.log();
    if !keep_for_checks {
        ffs.clear_rules();
    }
    verify_after_fault(&sim, db, &mut model, write_failed, w.seed)?;
    Ok(FaultRun {
        first_error,
        ops,
        log,
    })
}

/// After a faulty run: poisoned if a write failed, reads see every acknowledged write, and
/// both healed file systems reopen to a state that keeps every write that had to survive.
pub fn verify_after_fault(
    sim: &SimFs,
    db: Db,
    model: &mut Model,
    write_failed: bool,
    seed: u64,
) -> Result<(), String> {
    if write_failed {
        let probe = model.next_step();
        if let Step::Write(op, d) = probe {
            match op.send(&db, d) {
                Err(Error::Poisoned(_)) => {}
                other => {
                    return Err(format!(
                        "a write after a failed write returned {other:?}, not Poisoned \
                         (rule 8)"
                    ))
                }
            }
        }
        if db.poisoned().is_none() {
            return Err("Db::poisoned() is None after a failed write".into());
        }
    }
    let acked = model.acked();
    model
        .check_need(&db, acked, false)
        .map_err(|e| format!("live reads after the fault: {e}"))?;
    let crashed = sim.crash(CrashPolicy::DropAll, seed);
    drop(db);
    for (fs, power_loss) in [(sim.clone(), false), (crashed, true)] {
        let db = open(fs.clone())
            .map_err(|e| format!("reopen (power_loss={power_loss}) failed: {e}"))?;
        let need = model.required(power_loss);
        model
            .check_need(&db, need, false)
            .map_err(|e| format!("after reopen (power_loss={power_loss}): {e}"))?;
        // The reopened database must take writes again.
        if let Step::Write(op, d) = model.next_step() {
            op.send(&db, d)
                .map_err(|e| format!("write after reopen (power_loss={power_loss}): {e}"))?;
        }
    }
    Ok(())
}

/// The kind of file an operation touched, as far as faults are concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum FileClass {
    /// A WAL segment.
    Wal,
    /// A manifest.
    Manifest,
    /// `CURRENT` or `CURRENT.tmp`.
    Current,
    /// An HFile.
    HFile,
    /// A directory (its entries made durable).
    Dir,
}

impl FileClass {
    /// The class of an operation of `kind` on `path`; `None` for a file of no known class.
    pub fn of(kind: OpKind, path: &std::path::Path) -> Option<FileClass> {
        if kind == OpKind::SyncDir {
            return Some(FileClass::Dir);
        }
        let p = path.to_str()?;
        FileClass::ALL[..4]
            .iter()
            .copied()
            .find(|c| c.marker().is_some_and(|m| p.contains(m)))
    }

    const ALL: [FileClass; 5] = [
        FileClass::Wal,
        FileClass::Manifest,
        FileClass::Current,
        FileClass::HFile,
        FileClass::Dir,
    ];

    /// What the paths of the class contain (a rule's path filter); `None` for directories,
    /// which only `SyncDir` touches.
    fn marker(self) -> Option<&'static str> {
        match self {
            FileClass::Wal => Some("/wal/"),
            FileClass::Manifest => Some("MANIFEST-"),
            FileClass::Current => Some("CURRENT"),
            FileClass::HFile => Some(".hfile"),
            FileClass::Dir => None,
        }
    }

    /// Short name.
    pub fn name(self) -> &'static str {
        match self {
            FileClass::Wal => "wal",
            FileClass::Manifest => "manifest",
            FileClass::Current => "current",
            FileClass::HFile => "hfile",
            FileClass::Dir => "dir",
        }
    }
}

/// A fault point: an operation kind on a class of file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Point {
    /// The file class.
    pub class: FileClass,
    /// The operation.
    pub kind: OpKind,
}

impl Point {
    /// `class.operation`, e.g. `wal.sync`.
    pub fn name(&self) -> String {
        let op = match self.kind {
            OpKind::Write => "write",
            OpKind::SyncData => "sync",
            OpKind::SyncDir => "sync",
            OpKind::Create => "create",
            OpKind::Rename => "rename",
            OpKind::Remove => "remove",
            OpKind::Open => "open",
            OpKind::Allocate => "allocate",
            OpKind::Truncate => "truncate",
        };
        format!("{}.{op}", self.class.name())
    }
}

/// The faults that apply to an operation kind: EIO everywhere; ENOSPC where space is taken
/// (writes, allocation, creation, and fdatasync: ext4's delayed allocation reports it there);
/// for fdatasync also the two Linux outcomes of a failed sync (data dropped from the durable
/// image, or persisted after all).
pub fn faults_for(kind: OpKind) -> &'static [Fault] {
    match kind {
        OpKind::Write | OpKind::Allocate | OpKind::Create => &[Fault::Eio, Fault::NoSpace],
        OpKind::SyncData => &[
            Fault::Eio,
            Fault::NoSpace,
            Fault::SyncErrorAndDrop,
            Fault::SyncErrorButPersisted,
        ],
        OpKind::SyncDir | OpKind::Rename | OpKind::Remove | OpKind::Open | OpKind::Truncate => {
            &[Fault::Eio]
        }
    }
}

/// A fault's name in reports.
pub fn fault_name(f: Fault) -> &'static str {
    match f {
        Fault::Eio => "EIO",
        Fault::NoSpace => "ENOSPC",
        Fault::SyncErrorAndDrop => "fsync EIO, data dropped",
        Fault::SyncErrorButPersisted => "fsync EIO, data persisted",
        Fault::ShortWrite => "short write",
        Fault::Interrupted => "EINTR",
    }
}

/// One cell of the matrix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Cell {
    /// Where.
    pub point: Point,
    /// What.
    pub fault: Fault,
    /// Once, or from the n-th matching operation on.
    pub persistent: bool,
}

impl Cell {
    /// The rule that fails the `nth` operation of this cell's point (and, if persistent, every
    /// later one).
    pub fn rule(&self, nth: u64) -> Rule {
        let mut r = Rule::on(self.point.kind, self.fault).nth(nth);
        if let Some(m) = self.point.class.marker() {
            r = r.path(m);
        }
        if self.persistent {
            r = r.persistent();
        }
        r
    }

    /// `point fault mode`, e.g. `wal.sync fsync EIO, data dropped (persistent)`.
    pub fn name(&self) -> String {
        format!(
            "{} {} ({})",
            self.point.name(),
            fault_name(self.fault),
            if self.persistent {
                "persistent"
            } else {
                "transient"
            }
        )
    }
}

/// How often each fault point occurs in a run's operations.
pub fn points_of(log: &[OpRecord]) -> BTreeMap<Point, u64> {
    let mut out = BTreeMap::new();
    for r in log {
        if let Some(class) = FileClass::of(r.kind, &r.path) {
            *out.entry(Point {
                class,
                kind: r.kind,
            })
            .or_insert(0) += 1;
        }
    }
    out
}

/// Fault-free runs per workload whose fault points are counted.
const COUNTING_RUNS: usize = 3;

/// Steps a matrix run takes after the first failed call.
const AFTER_ERROR: usize = 3;

/// One planned run of the matrix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PlannedRun {
    /// Index of the workload.
    pub workload: usize,
    /// The cell.
    pub cell: Cell,
    /// Which matching operation fails first (1-based).
    pub nth: u64,
}

/// The matrix of a set of workloads: their cells and every run that would cover them.
#[derive(Debug, Clone)]
pub struct Matrix {
    /// The workloads.
    pub workloads: Vec<Workload>,
    /// Every cell, with the number of operations at its point per workload.
    pub cells: BTreeMap<Cell, Vec<u64>>,
    /// Every run, ordered so that any prefix spreads over the cells: the first matching
    /// operation of every cell of every workload (in a random order seeded by the first
    /// workload's seed), then the last, then the middle one, then the rest in order.
    pub plan: Vec<PlannedRun>,
}

impl Matrix {
    /// Count each workload's operations (fault-free runs, themselves checked) and plan.
    pub fn new(workloads: Vec<Workload>) -> Result<Matrix, String> {
        let mut counts: Vec<BTreeMap<Point, u64>> = Vec::new();
        for w in &workloads {
            // Background flushes and compactions make some points (a compaction's opens and
            // removes, a manifest roll-over) depend on timing: take the union of a few runs.
            let mut c: BTreeMap<Point, u64> = BTreeMap::new();
            for _ in 0..COUNTING_RUNS {
                let run = run_with_fault(w, None, usize::MAX)
                    .map_err(|e| format!("counting run of {:?}: {e}", w.name))?;
                if let Some((step, e)) = run.first_error {
                    return Err(format!(
                        "counting run of {:?}: {step:?} failed without a fault: {e}",
                        w.name
                    ));
                }
                for (p, n) in points_of(&run.log) {
                    let e = c.entry(p).or_insert(0);
                    *e = (*e).max(n);
                }
            }
            counts.push(c);
        }
        let mut cells: BTreeMap<Cell, Vec<u64>> = BTreeMap::new();
        for (wi, c) in counts.iter().enumerate() {
            for (point, n) in c {
                for &fault in faults_for(point.kind) {
                    for persistent in [false, true] {
                        let cell = Cell {
                            point: *point,
                            fault,
                            persistent,
                        };
                        let v = cells
                            .entry(cell)
                            .or_insert_with(|| vec![0; workloads.len()]);
                        v[wi] = *n;
                    }
                }
            }
        }
        let mut plan = Vec::new();
        let mut orders: Vec<(Cell, usize, Vec<u64>)> = Vec::new();
        for (cell, per_w) in &cells {
            for (wi, &n) in per_w.iter().enumerate() {
                if n == 0 {
                    continue;
                }
                let mut order = vec![1, n, n.div_ceil(2)];
                order.extend(2..n);
                let mut seen = std::collections::BTreeSet::new();
                order.retain(|k| seen.insert(*k));
                orders.push((*cell, wi, order));
            }
        }
        let longest = orders.iter().map(|o| o.2.len()).max().unwrap_or(0);
        // Each round in a seeded random order: a short prefix then covers cells of every
        // point, not the first points in sort order.
        let mut rng = StdRng::seed_from_u64(workloads.first().map_or(0, |w| w.seed));
        for i in 0..longest {
            let mut round: Vec<PlannedRun> = orders
                .iter()
                .filter_map(|(cell, wi, order)| {
                    order.get(i).map(|&nth| PlannedRun {
                        workload: *wi,
                        cell: *cell,
                        nth,
                    })
                })
                .collect();
            round.shuffle(&mut rng);
            plan.extend(round);
        }
        Ok(Matrix {
            workloads,
            cells,
            plan,
        })
    }

    /// Run one planned run under a watchdog. `Ok(run)` when every check held; `Err` describes
    /// the violation (a hang or a panic included). The workload goes on for a few steps after
    /// the first failed call: enough to see later writes refused, without waiting out every
    /// write stalled behind a flush that keeps finding the disk full (each waits for the
    /// flush's next retry).
    pub fn run(&self, p: &PlannedRun, limit: Duration) -> Result<FaultRun, String> {
        let w = self.workloads[p.workload].clone();
        let rule = p.cell.rule(p.nth);
        watchdog(limit, move || run_with_fault(&w, Some(rule), AFTER_ERROR))
    }
}
