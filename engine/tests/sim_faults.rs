//! Disk-full and fsync-failure policy (RELIABILITY.md §2.8 and rule 8 of §2.0), on
//! `FaultFs<SimFs>`.
//!
//! Each targeted scenario runs the model workload (`sim_common`, `SyncWal`/`FsyncWal` writes and
//! flushes), then installs one fault and keeps going until an API call fails. It checks:
//!
//! - the call returns an error: no panic, no hang (every scenario runs under a watchdog);
//! - the database is then poisoned: every later write gets `Error::Poisoned` (except after a
//!   flush that failed with `NoSpace`: the engine retries that flush and stays writable);
//! - reads still work and show every acknowledged write, nothing half-applied;
//! - reopened on the healed file system (the inner `SimFs` as it is: a process crash; and the
//!   inner `SimFs` after a `DropAll` power loss), the database holds every write that had to
//!   survive (`SyncWal` and `FsyncWal` acknowledgements, resp. `FsyncWal` ones and flushed
//!   writes) as a prefix of the write log with whole rows.
//!
//! The workload, the faulty run and its checks are `cellar::testkit::faults` (shared with
//! `cellar reliability-report`).
//!
//! The sweep runs a fixed workload once to count file operations, then for each fault kind
//! fails the n-th operation (a bounded sample of n; `SIM_SWEEP_ALL=1` takes every n) and checks
//! the same properties, with "poisoned" required only once a *write* call failed. Fault kinds:
//! EIO, ENOSPC, sync-fails-and-drops, sync-fails-but-persisted (each once), and ENOSPC from the
//! n-th operation on (a disk that stays full).

mod sim_common;

use std::time::{Duration, Instant};

use cellar::fs::{Fault, OpKind, Rule};
use cellar::testkit::faults::{run_with_fault, watchdog, Matrix, Workload};

/// How long one scenario may take before it is declared hung.
const WATCHDOG: Duration = Duration::from_secs(60);

/// Run `f` under the watchdog; a violation, a hang or a panic fails the test.
fn guarded<T: Send + 'static>(
    what: String,
    f: impl FnOnce() -> Result<T, String> + Send + 'static,
) -> T {
    watchdog(WATCHDOG, f).unwrap_or_else(|e| panic!("{what}: {e}"))
}

/// A targeted scenario: the fault must surface as an error within the run.
fn targeted(name: &str, rule: Rule) {
    for seed in 0..4u64 {
        let r = rule.clone();
        let what = format!("{name} (seed {seed})");
        let out = guarded(what.clone(), move || {
            run_with_fault(&Workload::logged(seed, 20, 400), Some(r), 0)
        });
        let Some((step, e)) = out.first_error else {
            panic!("{what}: the fault was never reached");
        };
        eprintln!("{what}: {step:?} -> {e}");
    }
}

#[test]
fn enospc_on_wal_write() {
    targeted(
        "ENOSPC on WAL write",
        Rule::on(OpKind::Write, Fault::NoSpace).path("/wal/"),
    );
}

#[test]
fn eio_on_wal_sync() {
    targeted(
        "EIO on WAL sync_data",
        Rule::on(OpKind::SyncData, Fault::SyncErrorAndDrop).path("/wal/"),
    );
}

#[test]
fn wal_sync_fails_but_persisted() {
    targeted(
        "WAL sync_data fails but persisted",
        Rule::on(OpKind::SyncData, Fault::SyncErrorButPersisted).path("/wal/"),
    );
}

#[test]
fn enospc_on_hfile_write_during_flush() {
    // A one-shot ENOSPC in a background flush is retried unseen (disk_full.rs tests that); a
    // disk that stays full surfaces as `NoSpace` from `flush` or a stalled write.
    targeted(
        "ENOSPC on HFile write",
        Rule::on(OpKind::Write, Fault::NoSpace)
            .path(".hfile")
            .persistent(),
    );
}

#[test]
fn eio_on_hfile_sync() {
    targeted(
        "EIO on HFile sync",
        Rule::on(OpKind::SyncData, Fault::Eio).path(".hfile"),
    );
}

#[test]
fn eio_on_manifest_write() {
    targeted(
        "EIO on manifest write",
        Rule::on(OpKind::Write, Fault::Eio).path("MANIFEST"),
    );
}

#[test]
fn eio_on_manifest_sync() {
    targeted(
        "EIO on manifest sync",
        Rule::on(OpKind::SyncData, Fault::Eio).path("MANIFEST"),
    );
    targeted(
        "manifest sync fails but persisted",
        Rule::on(OpKind::SyncData, Fault::SyncErrorButPersisted).path("MANIFEST"),
    );
}

#[test]
fn failing_current_rename() {
    targeted(
        "CURRENT rename fails",
        Rule::on(OpKind::Rename, Fault::Eio).path("CURRENT"),
    );
}

/// Regression (found by the fault matrix): a flush whose WAL roll failed (EIO creating the new
/// segment) poisoned the WAL but not the database, which went on accepting `SkipWal` writes
/// into memstores that no flush could write out any more.
#[test]
fn failed_wal_roll_in_a_flush_poisons_the_database() {
    guarded("wal roll".into(), || {
        let sim = cellar::fs::SimFs::new();
        let ffs = cellar::fs::FaultFs::new(sim);
        let db = sim_common::open(ffs.clone()).map_err(|e| e.to_string())?;
        sim_common::create_table(&db).map_err(|e| e.to_string())?;
        ffs.add_rule(Rule::on(OpKind::Create, Fault::Eio).path("/wal/"));
        let put = |d| {
            db.table(sim_common::TABLE)?.put_with(
                cellar::Put::new("r").add("a", "q", "v"),
                cellar::WriteOptions::durability(d),
            )
        };
        put(cellar::Durability::SyncWal).map_err(|e| e.to_string())?;
        if db.flush().is_ok() {
            return Err("the flush succeeded without a new WAL segment".into());
        }
        match put(cellar::Durability::SkipWal) {
            Err(cellar::Error::Poisoned(_)) => Ok(()),
            other => Err(format!("a SkipWal write after the failed roll: {other:?}")),
        }
    });
}

/// Count the operations of a fixed workload, then fail each n-th one (a sample) with each
/// fault kind.
#[test]
fn sweep_fail_nth_operation() {
    const SEED: u64 = 7;
    const WARMUP: usize = 10;
    const STEPS: usize = 60;
    let total = guarded("counting run".into(), || {
        run_with_fault(&Workload::logged(SEED, WARMUP, STEPS), None, usize::MAX)
    })
    .ops;
    let all = std::env::var_os("SIM_SWEEP_ALL").is_some();
    let ns: Vec<u64> = (1..=total + 5)
        .filter(|n| all || *n <= 40 || n % 7 == 0)
        .collect();
    let start = Instant::now();
    let mut surfaced = 0;
    let mut runs = 0;
    // The persistent case is a disk that stays full: every operation from the n-th on fails.
    for (fault, persistent) in [
        (Fault::Eio, false),
        (Fault::NoSpace, false),
        (Fault::SyncErrorAndDrop, false),
        (Fault::SyncErrorButPersisted, false),
        (Fault::NoSpace, true),
    ] {
        for &n in &ns {
            let what = format!("sweep: {fault:?} (persistent={persistent}) on op {n} of {total}");
            let mut rule = Rule::any_op(fault).nth(n);
            if persistent {
                // A full disk still opens existing files, so reads keep working.
                rule = rule.persistent().except(OpKind::Open);
            }
            let out = guarded(what, move || {
                run_with_fault(
                    &Workload::logged(SEED, WARMUP, STEPS),
                    Some(rule),
                    usize::MAX,
                )
            });
            runs += 1;
            surfaced += usize::from(out.first_error.is_some());
        }
    }
    eprintln!(
        "sweep: {total} operations, {runs} runs ({surfaced} with an API error) in {:.1?}",
        start.elapsed()
    );
    assert!(surfaced > 0, "no injected fault ever surfaced");
}

/// The fault matrix of `cellar reliability-report` (`testkit::faults::Matrix`): every cell
/// (fault point × fault × transient/persistent) the workload reaches, its first matching
/// operation failed once. No run may violate an invariant, and the cells must really be hit.
#[test]
fn matrix_first_operation_of_every_cell() {
    let m = Matrix::new(vec![Workload::all_levels_flush_heavy(11, 10, 50)])
        .unwrap_or_else(|e| panic!("{e}"));
    let first: Vec<_> = m.plan.iter().filter(|p| p.nth == 1).copied().collect();
    assert_eq!(first.len(), m.cells.len(), "one first run per cell");
    let start = Instant::now();
    let mut covered = 0;
    for p in &first {
        let run = m
            .run(p, WATCHDOG)
            .unwrap_or_else(|e| panic!("{}: {e}", p.cell.name()));
        covered += usize::from(run.injected());
    }
    eprintln!(
        "matrix: {} cells, {covered} covered by their first run, in {:.1?}",
        m.cells.len(),
        start.elapsed()
    );
    // Operation counts vary a little with the flush thread's timing; most cells must be hit.
    assert!(
        covered * 10 >= m.cells.len() * 9,
        "only {covered} of {} cells were hit",
        m.cells.len()
    );
}
