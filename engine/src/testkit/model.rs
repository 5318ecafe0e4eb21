//! The reference model of the power-loss and fault tests (RELIABILITY.md §2.3): a random workload of
//! row mutations over two families, the log of what each write returned, and the check that a
//! recovered database equals the first R writes for an R at least the last one that had to
//! survive.
//!
//! The workload is shaped so the model stays trivial. Every write gets a fresh timestamp `T`
//! (increasing, never reused), puts carry exactly `T`, and deletes only name timestamps below
//! `T`: a delete marker can then only hide cells written before it, as in the simple "apply in
//! order" semantics the model uses, whatever HBase's marker rules are for later puts. A put on
//! row `r` at `T` writes `a:w{T}`, `b:w{T}`, `a:last` and `b:last` (one row mutation across both
//! families), so a torn batch shows as a family missing. `SkipWal` writes go to rows of their
//! own (`s…`), never deleted, because they may be lost while later logged writes survive.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Arc;

use crate::fs::{FileSystem, SharedFs};
use crate::manifest::ManifestOptions;
use crate::wal::WalOptions;
use crate::{
    Db, Delete, Durability, FamilyDescriptor, Options, Put, RowMutations, Scan, TableDescriptor,
    WriteOptions,
};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// Database directory inside the simulated file system.
pub const DIR: &str = "/db";
/// The table of the workload.
pub const TABLE: &str = "t";
/// Its two families.
pub const FAMILIES: [&str; 2] = ["a", "b"];
/// Rows that take puts and deletes.
const MAIN_ROWS: usize = 6;

/// Small buffers and segments so that flushes, WAL rolls and manifest roll-overs all happen
/// within a few hundred writes. The manifest limit is well below what the fault matrix's
/// workload writes: at 2 KiB, the edits' whole-file checksums put its roll-over on the edge,
/// reached in some runs and not others, and the matrix test then found a third of its
/// roll-over cells unhit.
pub fn options(fs: SharedFs) -> Options {
    Options {
        fs,
        wal: WalOptions {
            segment_size: 16 << 10,
            ..WalOptions::default()
        },
        manifest: ManifestOptions { max_size: 1024 },
        ..Options::default()
    }
    .write_buffer_size(16 << 10)
}

/// Open the database on `fs`.
pub fn open(fs: impl FileSystem) -> crate::Result<Db> {
    Db::open(DIR, options(Arc::new(fs)))
}

/// Create the workload's table.
pub fn create_table(db: &Db) -> crate::Result<()> {
    let desc = FAMILIES.iter().fold(TableDescriptor::new(TABLE), |t, f| {
        t.family(FamilyDescriptor::new(*f).max_versions(1_000_000))
    });
    db.create_table(desc)
}

/// `(row, family, qualifier, timestamp)`.
pub type CellKey = (String, String, String, u64);
/// Visible cells (all versions) and their values.
pub type State = BTreeMap<CellKey, String>;

/// One delete marker of a write; every timestamp is below the write's own.
#[derive(Debug, Clone)]
pub enum Del {
    /// Exactly one version of a column.
    Version { fam: String, q: String, ts: u64 },
    /// Every version of a column at or below `ts`.
    Columns { fam: String, q: String, ts: u64 },
    /// Every cell of a family at or below `ts`.
    Family { fam: String, ts: u64 },
    /// Every cell of a family at exactly `ts`.
    FamilyVersion { fam: String, ts: u64 },
    /// Every cell of the row at or below `ts`.
    Row { ts: u64 },
}

/// One atomic write on one row.
#[derive(Debug, Clone)]
pub struct Op {
    /// The row.
    pub row: String,
    /// The write's timestamp (its puts carry it).
    pub ts: u64,
    /// Whether it puts the row's four cells.
    pub put: bool,
    /// Delete markers written before the put, in the same row mutation.
    pub dels: Vec<Del>,
}

/// The value of every cell a put at `ts` writes on `row`: determined by both, so a phantom or
/// a value from another write is caught.
pub fn value(row: &str, ts: u64) -> String {
    format!("v{ts}-{row}-{}", "x".repeat((ts % 53) as usize))
}

impl Op {
    fn put_cells(&self) -> Vec<CellKey> {
        if !self.put {
            return Vec::new();
        }
        let mut out = Vec::new();
        for f in FAMILIES {
            out.push((self.row.clone(), f.into(), format!("w{}", self.ts), self.ts));
            out.push((self.row.clone(), f.into(), "last".into(), self.ts));
        }
        out
    }

    /// Apply to the model, in the order the engine's semantics reduce to for this workload.
    pub fn apply(&self, s: &mut State) {
        for d in &self.dels {
            s.retain(|(r, f, q, t), _| {
                if *r != self.row {
                    return true;
                }
                let hit = match d {
                    Del::Version { fam, q: dq, ts } => f == fam && q == dq && t == ts,
                    Del::Columns { fam, q: dq, ts } => f == fam && q == dq && t <= ts,
                    Del::Family { fam, ts } => f == fam && t <= ts,
                    Del::FamilyVersion { fam, ts } => f == fam && t == ts,
                    Del::Row { ts } => t <= ts,
                };
                !hit
            });
        }
        for k in self.put_cells() {
            s.insert(k, value(&self.row, self.ts));
        }
    }

    fn to_put(&self) -> Put {
        self.put_cells()
            .into_iter()
            .fold(Put::new(self.row.as_str()), |p, (_, f, q, t)| {
                p.add_at(&f, q, t, value(&self.row, t))
            })
    }

    fn to_delete(&self) -> Delete {
        self.dels
            .iter()
            .fold(Delete::new(self.row.as_str()), |d, m| match m {
                Del::Version { fam, q, ts } => d.column_at(fam, q.as_str(), *ts),
                Del::Columns { fam, q, ts } => d.columns_at(fam, q.as_str(), *ts),
                Del::Family { fam, ts } => d.family_at(fam, *ts),
                Del::FamilyVersion { fam, ts } => d.family_version(fam, *ts),
                Del::Row { ts } => d.row_at(*ts),
            })
    }

    /// Send the write; returns its seq.
    pub fn send(&self, db: &Db, d: Durability) -> crate::Result<u64> {
        let t = db.table(TABLE)?;
        let w = WriteOptions::durability(d);
        match (self.put, self.dels.is_empty()) {
            (true, true) => t.put_with(self.to_put(), w),
            (false, _) => t.delete_with(self.to_delete(), w),
            (true, false) => t.mutate_row(
                RowMutations::new(self.row.as_str())
                    .delete(self.to_delete())
                    .put(self.to_put()),
                w,
            ),
        }
    }
}

/// A write attempted in the current cycle.
#[derive(Debug, Clone)]
pub struct WriteRec {
    /// The write.
    pub op: Op,
    /// Its durability.
    pub durability: Durability,
    /// The seq if the call returned `Ok`; `None` if it failed (a Maybe write).
    pub seq: Option<u64>,
}

/// One step of the workload.
#[derive(Debug, Clone)]
pub enum Step {
    /// A write at a durability.
    Write(Op, Durability),
    /// `Db::flush`.
    Flush,
}

/// What the durability mix draws from.
#[derive(Debug, Clone, Copy)]
pub enum Mix {
    /// All four levels (SkipWal writes go to their own rows).
    All,
    /// Only `SyncWal` and `FsyncWal`.
    Logged,
}

/// The workload and its model.
#[derive(Debug)]
pub struct Model {
    /// The workload's generator (seeded).
    pub rng: StdRng,
    next_ts: u64,
    /// Timestamps of the puts ever made on each main row (for choosing delete targets).
    puts: BTreeMap<String, Vec<u64>>,
    /// State every later recovery must start from (what the last check found).
    pub base: State,
    /// Writes of this cycle, in call order (= seq order: one thread writes).
    pub log: Vec<WriteRec>,
    /// Writes before this index were acknowledged before a successful `flush`.
    pub flushed: usize,
    /// The durability mix.
    pub mix: Mix,
    /// Chance of a flush step, in percent.
    pub flush_percent: u32,
    /// Over all checks: writes attempted, writes that had to survive, writes recovered, and
    /// checks where a write that was allowed to be lost was lost (evidence the crash bites).
    pub tally: Tally,
}

/// Counters over the checks of a [`Model`].
#[derive(Debug, Default, Clone, Copy)]
pub struct Tally {
    /// Recoveries checked.
    pub checks: u64,
    /// Writes attempted before them.
    pub writes: u64,
    /// Writes that had to survive (acknowledged durable, or flushed).
    pub required: u64,
    /// Writes found recovered.
    pub recovered: u64,
    /// Checks where a write that was allowed to be lost was lost.
    pub lossy_checks: u64,
}

impl std::ops::AddAssign for Tally {
    fn add_assign(&mut self, o: Tally) {
        self.checks += o.checks;
        self.writes += o.writes;
        self.required += o.required;
        self.recovered += o.recovered;
        self.lossy_checks += o.lossy_checks;
    }
}

impl Model {
    /// A workload drawn from `seed`.
    pub fn new(seed: u64, mix: Mix) -> Model {
        Model {
            rng: StdRng::seed_from_u64(seed),
            next_ts: 1,
            puts: BTreeMap::new(),
            base: State::new(),
            log: Vec::new(),
            flushed: 0,
            mix,
            flush_percent: 4,
            tally: Tally::default(),
        }
    }

    fn ts(&mut self) -> u64 {
        let t = self.next_ts;
        self.next_ts += 1;
        t
    }

    fn earlier(&mut self, row: &str) -> Option<u64> {
        let v = self.puts.get(row)?;
        let i = self.rng.random_range(0..v.len());
        Some(v[i])
    }

    /// Draw the next step.
    pub fn next_step(&mut self) -> Step {
        if self.rng.random_range(0..100) < self.flush_percent {
            return Step::Flush;
        }
        let d = match self.mix {
            Mix::All => match self.rng.random_range(0..100) {
                0..25 => Durability::FsyncWal,
                25..55 => Durability::SyncWal,
                55..80 => Durability::AsyncWal,
                _ => Durability::SkipWal,
            },
            Mix::Logged => {
                if self.rng.random_bool(0.5) {
                    Durability::FsyncWal
                } else {
                    Durability::SyncWal
                }
            }
        };
        let ts = self.ts();
        if d == Durability::SkipWal {
            return Step::Write(
                Op {
                    row: format!("s{ts:06}"),
                    ts,
                    put: true,
                    dels: Vec::new(),
                },
                d,
            );
        }
        let row = format!("r{}", self.rng.random_range(0..MAIN_ROWS));
        let kind = self.rng.random_range(0..100);
        let put = kind < 85;
        let mut dels = Vec::new();
        if kind >= 60 {
            for _ in 0..self.rng.random_range(1..=2) {
                let Some(t) = self.earlier(&row) else {
                    break;
                };
                let fam = FAMILIES[self.rng.random_range(0..2)].to_string();
                let q = if self.rng.random_bool(0.5) {
                    "last".to_string()
                } else {
                    format!("w{t}")
                };
                dels.push(match self.rng.random_range(0..5) {
                    0 => Del::Version { fam, q, ts: t },
                    1 => Del::Columns { fam, q, ts: t },
                    2 => Del::Family { fam, ts: t },
                    3 => Del::FamilyVersion { fam, ts: t },
                    _ => Del::Row { ts: t },
                });
            }
        }
        if !put && dels.is_empty() {
            // Nothing to delete yet on this row: make it a put.
            return self.finish(
                Op {
                    row,
                    ts,
                    put: true,
                    dels,
                },
                d,
            );
        }
        self.finish(Op { row, ts, put, dels }, d)
    }

    fn finish(&mut self, op: Op, d: Durability) -> Step {
        if op.put {
            self.puts.entry(op.row.clone()).or_default().push(op.ts);
        }
        Step::Write(op, d)
    }

    /// Run a step against `db`, recording the outcome. Returns the error of a failed call.
    pub fn run(&mut self, db: &Db, step: Step) -> crate::Result<()> {
        match step {
            Step::Write(op, d) => {
                let r = op.send(db, d);
                self.log.push(WriteRec {
                    op,
                    durability: d,
                    seq: r.as_ref().ok().copied(),
                });
                r.map(|_| ())
            }
            Step::Flush => {
                let before = self.log.len();
                db.flush()?;
                self.flushed = before;
                Ok(())
            }
        }
    }

    /// Index (in the log) after which nothing must survive: every write at or below the last
    /// one that had to survive must. `power_loss`: only `FsyncWal` acknowledgements count;
    /// otherwise `SyncWal` ones too (the OS kept them).
    pub fn required(&self, power_loss: bool) -> usize {
        let mut need = self.flushed;
        for (i, w) in self.log.iter().enumerate() {
            let durable = match w.durability {
                Durability::FsyncWal => true,
                Durability::SyncWal => !power_loss,
                _ => false,
            };
            if durable && w.seq.is_some() {
                need = need.max(i + 1);
            }
        }
        need
    }

    /// Compare the recovered database with the model; on success the recovered state becomes
    /// the base of the next cycle. `Err` describes the violated invariant.
    pub fn check(&mut self, db: &Db, power_loss: bool) -> Result<(), String> {
        let need = self.required(power_loss);
        self.check_need(db, need, true)
    }

    /// Index just past the last acknowledged write: what a live database must show.
    pub fn acked(&self) -> usize {
        self.log
            .iter()
            .rposition(|w| w.seq.is_some())
            .map_or(self.flushed, |i| (i + 1).max(self.flushed))
    }

    /// As [`Model::check`] with an explicit requirement: every write before log index `need`
    /// must be visible. With `commit`, the visible state becomes the next cycle's base.
    pub fn check_need(&mut self, db: &Db, need: usize, commit: bool) -> Result<(), String> {
        let actual = read_state(db)?;
        let (main, skip): (State, State) = actual
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .partition(|(k, _)| k.0.starts_with('r'));
        let base_main: State = self
            .base
            .iter()
            .filter(|(k, _)| k.0.starts_with('r'))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let base_skip: State = self
            .base
            .iter()
            .filter(|(k, _)| !k.0.starts_with('r'))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        // Prefix search over the logged writes: positions `k` such that base + the first k
        // logged writes equals what is visible.
        let logged: Vec<(usize, &WriteRec)> = self
            .log
            .iter()
            .enumerate()
            .filter(|(_, w)| w.durability != Durability::SkipWal)
            .collect();
        let mut s = base_main.clone();
        let mut matched: Vec<usize> = Vec::new(); // log index just past the prefix
        let mut closest = (usize::MAX, 0usize);
        let mut ends = vec![0usize];
        ends.extend(logged.iter().map(|(i, _)| i + 1));
        for (n, end) in ends.iter().enumerate() {
            if n > 0 {
                logged[n - 1].1.op.apply(&mut s);
            }
            if s == main {
                matched.push(*end);
            } else {
                let d = diff_count(&s, &main);
                if d <= closest.0 {
                    closest = (d, *end);
                }
            }
        }
        // A prefix may be extended over trailing SkipWal writes; compare in log indices.
        let best = matched.iter().copied().max();
        let Some(best) = best else {
            let mut s = base_main.clone();
            for (i, w) in &logged {
                if *i < closest.1 {
                    w.op.apply(&mut s);
                }
            }
            return Err(format!(
                "no prefix of the write log matches the recovered state (prefix/atomicity/\
                 phantom violation); closest prefix ends at log index {} with {} differing \
                 cells:\n{}\nlog:\n{}",
                closest.1,
                closest.0,
                describe_diff(&s, &main),
                self.describe_log()
            ));
        };
        // The last logged write before the next logged one: a prefix ending at log index `best`
        // also covers SkipWal writes up to the next logged write.
        let covers = logged
            .iter()
            .map(|(i, _)| *i)
            .find(|i| *i >= best)
            .unwrap_or(self.log.len());
        if covers < need {
            return Err(format!(
                "lost a write that had to survive: the recovered state is the prefix ending \
                 at log index {best} (at most {}), but the write at index {} was acknowledged \
                 durable\nlog:\n{}",
                covers,
                need - 1,
                self.describe_log()
            ));
        }

        // SkipWal rows: whole or absent; present only inside the prefix; required if flushed.
        let mut expected_skip = base_skip.clone();
        for (i, w) in self.log.iter().enumerate() {
            if w.durability != Durability::SkipWal {
                continue;
            }
            let cells = w.op.put_cells();
            let present: Vec<bool> = cells.iter().map(|k| skip.contains_key(k)).collect();
            let all = present.iter().all(|&p| p);
            if present.iter().any(|&p| p) && !all {
                return Err(format!(
                    "SkipWal write {:?} is half visible: {present:?}",
                    w.op
                ));
            }
            if !all && i < self.flushed {
                return Err(format!(
                    "SkipWal write at log index {i} was acknowledged before a successful \
                     flush but is lost"
                ));
            }
            if all {
                if i >= covers {
                    return Err(format!(
                        "SkipWal write at log index {i} is visible but the logged writes \
                         after log index {best} are not: a hole"
                    ));
                }
                w.op.apply(&mut expected_skip);
            }
        }
        if expected_skip != skip {
            return Err(format!(
                "phantom or damaged cells in SkipWal rows:\n{}",
                describe_diff(&expected_skip, &skip)
            ));
        }
        if !commit {
            return Ok(());
        }
        let recovered = covers.max(need);
        self.tally.checks += 1;
        self.tally.writes += self.log.len() as u64;
        self.tally.required += need as u64;
        self.tally.recovered += recovered as u64;
        self.tally.lossy_checks += u64::from(recovered < self.log.len());
        self.base = actual;
        self.log.clear();
        self.flushed = 0;
        Ok(())
    }

    fn describe_log(&self) -> String {
        let mut s = String::new();
        for (i, w) in self.log.iter().enumerate() {
            let _ = writeln!(
                s,
                "  [{i}] seq={:?} {:?} row={} ts={} put={} dels={:?}",
                w.seq, w.durability, w.op.row, w.op.ts, w.op.put, w.op.dels
            );
        }
        if self.flushed > 0 {
            let _ = writeln!(s, "  flushed through index {}", self.flushed);
        }
        s
    }
}

fn diff_count(a: &State, b: &State) -> usize {
    a.iter().filter(|(k, v)| b.get(*k) != Some(*v)).count()
        + b.keys().filter(|k| !a.contains_key(*k)).count()
}

fn describe_diff(expected: &State, actual: &State) -> String {
    let mut s = String::new();
    for (k, v) in expected {
        match actual.get(k) {
            None => {
                let _ = writeln!(s, "  missing {k:?}");
            }
            Some(a) if a != v => {
                let _ = writeln!(s, "  wrong value at {k:?}: {a:?}");
            }
            _ => {}
        }
    }
    for k in actual.keys() {
        if !expected.contains_key(k) {
            let _ = writeln!(s, "  unexpected {k:?}");
        }
    }
    s
}

/// Every visible cell of the table, all versions.
pub fn read_state(db: &Db) -> Result<State, String> {
    let t = db.table(TABLE).map_err(|e| format!("table lost: {e}"))?;
    let mut out = State::new();
    let it = t
        .scan(Scan::new().all_versions())
        .map_err(|e| format!("scan failed: {e}"))?;
    for row in it {
        let row = row.map_err(|e| format!("scan failed: {e}"))?;
        for c in row.cells() {
            out.insert(
                (
                    String::from_utf8_lossy(&c.row).into_owned(),
                    c.family.clone(),
                    String::from_utf8_lossy(&c.qualifier).into_owned(),
                    c.timestamp,
                ),
                String::from_utf8_lossy(&c.value).into_owned(),
            );
        }
    }
    Ok(out)
}
