//! Running each section of the report within its share of the budget.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use cellar::testkit::corruption::{ClassTally, Outcome, Pristine};
use cellar::testkit::faults::{watchdog, Matrix, Workload};
use cellar::testkit::power::{power_loss_cycles, POLICIES};

use super::report::{
    BlockType, Corruption, Crash, FaultCell, Faults, KillPoints, Machine, PointCount, Power,
    SectionRun,
};
use crate::crash::HarnessArgs;
use crate::{Result, ToolError};

/// Longest a single in-process unit (a seed, a fault run, a bit flip) may take before it counts
/// as hung: far above what any takes, even in a debug build.
const UNIT_LIMIT: Duration = Duration::from_secs(120);

/// Power losses per seed (each on the state the previous one recovered).
const CYCLES_PER_SEED: usize = 3;

/// Machine facts, best effort.
pub(super) fn machine() -> Machine {
    let tmp = std::env::temp_dir();
    let fs_type = mount_type(&tmp).map_or(String::new(), |t| format!(" ({t})"));
    Machine {
        cores: std::thread::available_parallelism().map_or(0, |n| n.get()),
        kernel: std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .map_or_else(|_| "unknown".into(), |s| s.trim().to_string()),
        os: format!("{} {}", std::env::consts::OS, std::env::consts::ARCH),
        tmp_dir: format!("{}{fs_type}", tmp.display()),
    }
}

/// The file system type of the mount holding `dir` (Linux, `/proc/mounts`).
fn mount_type(dir: &Path) -> Option<String> {
    let dir = std::fs::canonicalize(dir).ok()?;
    let mounts = std::fs::read_to_string("/proc/mounts").ok()?;
    mounts
        .lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let (_, point, kind) = (f.next()?, f.next()?, f.next()?);
            dir.starts_with(point)
                .then(|| (point.len(), kind.to_string()))
        })
        .max_by_key(|(len, _)| *len)
        .map(|(_, kind)| kind)
}

/// The WAL backend a database on real files gets here.
pub(super) fn wal_backend() -> String {
    let probe = || -> std::result::Result<String, String> {
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let db =
            cellar::Db::open(dir.path(), cellar::Options::default()).map_err(|e| e.to_string())?;
        Ok(db.stats().wal.backend.to_string())
    };
    probe().unwrap_or_else(|e| format!("unknown ({e})"))
}

/// SIGKILL cycles: the crash harness with `exe` as the child, until `slice` is spent.
pub(super) fn crash(exe: &Path, seed: u64, slice: Duration) -> Result<Crash> {
    let built = cellar::kill::ENABLED;
    let secs = slice.as_secs_f64();
    let args = HarnessArgs {
        dir: None,
        // Bounded by `max_secs`: enough that the time runs out first.
        random_kills: 100_000,
        point_rounds: if built { 10_000 } else { 0 },
        seed,
        min_ms: 50,
        // Short budgets get short cycles, so they get several.
        max_ms: ((secs * 250.0) as u64).clamp(100, 1500),
        child_secs: ((secs / 3.0).ceil() as u64).clamp(1, 4),
        max_secs: Some(secs),
    };
    let r = crate::crash::run(&args, exe).map_err(|e| ToolError::io(exe, e))?;
    let mut histogram = BTreeMap::new();
    for p in cellar::kill::POINTS {
        histogram.insert(
            p.to_string(),
            PointCount {
                kills: r.point_kills.get(*p).copied().unwrap_or(0),
                armed_not_reached: r.point_misses.get(*p).copied().unwrap_or(0),
            },
        );
    }
    let kill_points = if built {
        KillPoints {
            built,
            note: None,
            declared: cellar::kill::POINTS.len(),
            hit: histogram.values().filter(|c| c.kills > 0).count(),
            min_hits: histogram.values().map(|c| c.kills).min().unwrap_or(0),
            histogram,
        }
    } else {
        KillPoints {
            built,
            note: Some("not built with kill-points (cargo feature kill-points)".into()),
            declared: cellar::kill::POINTS.len(),
            ..KillPoints::default()
        }
    };
    let mut run = SectionRun {
        budget_secs: secs,
        elapsed_secs: r.elapsed.as_secs_f64(),
        ..SectionRun::default()
    };
    for v in &r.violations {
        run.violation(v.clone());
    }
    Ok(Crash {
        run,
        process_cycles: r.cycles,
        random_kills: r.random_kills,
        point_cycles: r.point_kills.values().sum::<u64>() + r.point_misses.values().sum::<u64>(),
        wal_backend: r.backend.clone(),
        acked_checked: r.acked_checked,
        maybe_applied: r.maybe_applied,
        maybe_lost: r.maybe_lost,
        files_verified: r.files_verified,
        snapshots_checked: r.snapshots_checked,
        feed_batches_checked: r.feed_batches_checked,
        slot_batches_checked: r.slot_batches_checked,
        range_deletes_acked: r.range_deletes_acked,
        kill_points,
    })
}

/// Power-loss seeds, the policies in turn, until `slice` is spent (one seed per policy at
/// least).
pub(super) fn power(seed: u64, slice: Duration) -> Power {
    let start = Instant::now();
    let first_seed = seed << 20;
    let mut out = Power {
        run: SectionRun {
            budget_secs: slice.as_secs_f64(),
            ..SectionRun::default()
        },
        first_seed,
        cycles_per_seed: CYCLES_PER_SEED as u64,
        directory_rollback: "in every policy: directory entries (creations, renames, removals) \
                             never synced are all rolled back by drop, a random subset by the \
                             others"
            .into(),
        ..Power::default()
    };
    let mut i = 0u64;
    while i < POLICIES.len() as u64 || start.elapsed() < slice {
        let (name, policy) = POLICIES[(i % POLICIES.len() as u64) as usize];
        let s = first_seed + i;
        let r = watchdog(UNIT_LIMIT, move || {
            power_loss_cycles(s, policy, CYCLES_PER_SEED)
        });
        let f = out.policies.entry(name.to_string()).or_default();
        f.seeds += 1;
        f.cycles += CYCLES_PER_SEED as u64;
        match r {
            Ok(t) => {
                f.checks += t.checks;
                f.writes += t.writes;
                f.required += t.required;
                f.recovered += t.recovered;
                f.lossy_checks += t.lossy_checks;
            }
            Err(e) => {
                f.violations += 1;
                out.run.violation(format!("policy {name} seed {s}: {e}"));
            }
        }
        i += 1;
    }
    out.seeds = i;
    out.power_cycles = i * CYCLES_PER_SEED as u64;
    out.run.elapsed_secs = start.elapsed().as_secs_f64();
    out
}

/// The fault matrix of two workloads, in plan order, until `slice` is spent.
pub(super) fn faults(seed: u64, slice: Duration) -> Faults {
    let start = Instant::now();
    let workloads = vec![
        Workload::logged(seed, 10, 60),
        Workload::all_levels_flush_heavy(seed.wrapping_add(1), 10, 50),
    ];
    let mut out = Faults {
        run: SectionRun {
            budget_secs: slice.as_secs_f64(),
            ..SectionRun::default()
        },
        workloads: workloads
            .iter()
            .map(|w| {
                format!(
                    "{} (seed {}, {} steps then {} with the fault)",
                    w.name, w.seed, w.warmup, w.steps
                )
            })
            .collect(),
        ..Faults::default()
    };
    let m = match watchdog(UNIT_LIMIT, move || Matrix::new(workloads)) {
        Ok(m) => m,
        Err(e) => {
            out.run.violation(format!("counting runs: {e}"));
            out.run.elapsed_secs = start.elapsed().as_secs_f64();
            return out;
        }
    };
    out.cells = m.cells.len();
    out.points = m
        .cells
        .keys()
        .map(|c| c.point)
        .collect::<std::collections::BTreeSet<_>>()
        .len();
    out.planned_runs = m.plan.len();
    for c in m.cells.keys() {
        out.by_cell.insert(c.name(), FaultCell::default());
    }
    for p in &m.plan {
        if out.runs > 0 && start.elapsed() >= slice {
            break;
        }
        let r = m.run(p, UNIT_LIMIT);
        out.runs += 1;
        if p.cell.persistent {
            out.persistent_runs += 1;
        } else {
            out.transient_runs += 1;
        }
        let cell = out.by_cell.entry(p.cell.name()).or_default();
        cell.runs += 1;
        match r {
            Ok(run) => {
                let injected = run.injected();
                let surfaced = run.first_error.is_some();
                cell.injected += u64::from(injected);
                cell.surfaced += u64::from(surfaced);
                out.injected_runs += u64::from(injected);
                out.surfaced_runs += u64::from(surfaced);
            }
            Err(e) => {
                cell.violations += 1;
                let w = &m.workloads[p.workload];
                out.run.violation(format!(
                    "{} on operation {} of {:?} (seed {}): {e}",
                    p.cell.name(),
                    p.nth,
                    w.name,
                    w.seed
                ));
            }
        }
    }
    out.covered = out.by_cell.values().filter(|c| c.injected > 0).count();
    out.run.elapsed_secs = start.elapsed().as_secs_f64();
    out
}

/// Bit flips over the canonical database, spread over every block type, until `slice` is
/// spent.
pub(super) fn corruption(seed: u64, slice: Duration) -> Corruption {
    let start = Instant::now();
    let mut out = Corruption {
        run: SectionRun {
            budget_secs: slice.as_secs_f64(),
            ..SectionRun::default()
        },
        ..Corruption::default()
    };
    let pristine = match watchdog(UNIT_LIMIT, Pristine::build) {
        Ok(p) => Arc::new(p),
        Err(e) => {
            out.run.violation(format!("building the database: {e}"));
            out.run.elapsed_secs = start.elapsed().as_secs_f64();
            return out;
        }
    };
    out.files = pristine.files.len();
    for (class, bytes) in pristine.bytes_by_class() {
        out.bytes += bytes;
        out.by_block_type.insert(
            class.to_string(),
            BlockType {
                bytes,
                ..BlockType::default()
            },
        );
    }
    let mut tallies: BTreeMap<&'static str, ClassTally> = BTreeMap::new();
    for case in pristine.cases(None, seed ^ 0x5eed) {
        if out.mutations > 0 && start.elapsed() >= slice {
            break;
        }
        out.mutations += 1;
        let what = case.to_string();
        let p = pristine.clone();
        let c = case.clone();
        let outcome = watchdog(UNIT_LIMIT, move || Ok(p.trial(&c)))
            .unwrap_or_else(|e| Outcome::Panic(format!("the trial {e}")));
        match &outcome {
            Outcome::Wrong(d) => out.run.violation(format!("{what}: wrong: {d}")),
            Outcome::Panic(m) => out.run.violation(format!("{what}: panic: {m}")),
            _ => {}
        }
        tallies.entry(case.class).or_default().add(&outcome);
    }
    for (class, t) in tallies {
        let b = out.by_block_type.entry(class.to_string()).or_default();
        b.cases = t.cases;
        b.detected_on_open = t.detected_on_open;
        b.detected_on_read = t.detected_on_read;
        b.other_error = t.other_error;
        b.unchanged = t.unchanged;
        b.wrong_results = t.wrong;
        b.panics = t.panics;
        out.detected += t.detected();
        out.unchanged += t.unchanged;
        out.wrong_results += t.wrong;
        out.panics += t.panics;
    }
    out.run.elapsed_secs = start.elapsed().as_secs_f64();
    out
}
