//! Power-loss cycles on [`SimFs`] checked against the [`model`](super::model) (RELIABILITY.md
//! §2.3): the body of `tests/sim_crash_model.rs` and of the "simulated power losses" section
//! of `cellar reliability-report`.
//!
//! One seed: open a database with small buffers (flushes, WAL rolls and manifest roll-overs
//! happen), create the model's two-family table, then per cycle run a random number of steps
//! (writes at all four durability levels, deletes of every kind, occasional flushes), cut the
//! power while the engine's threads may still be running, reopen on what survived and check
//! the recovered state with [`Model::check`]: every write that had to survive is there, the
//! state is a prefix of the writes, rows are whole, nothing else is visible; the next cycle
//! starts from it, so a recovered state must also survive the next power loss.

use rand::Rng as _;

use super::model::{create_table, open, Mix, Model, Tally};
use crate::fs::{CrashPolicy, SimFs};

/// Every crash policy of [`SimFs`], with a short name. Each also rolls back directory entries
/// never synced: `DropAll` all of them, the others a random subset.
pub const POLICIES: [(&str, CrashPolicy); 4] = [
    ("drop", CrashPolicy::DropAll),
    ("prefix", CrashPolicy::KeepRandomPrefix),
    ("tear", CrashPolicy::Tear { sector: 512 }),
    ("garble", CrashPolicy::Garble { sector: 512 }),
];

/// Run `cycles` power losses of one seed under `policy`. `Err` names the cycle and the
/// violated invariant; the workload and the crash images replay from the seed (the flush
/// thread's timing does not, so a rare failure may need a few runs).
pub fn power_loss_cycles(seed: u64, policy: CrashPolicy, cycles: usize) -> Result<Tally, String> {
    let mut fs = SimFs::new();
    let mut db = open(fs.clone()).map_err(|e| format!("first open: {e}"))?;
    create_table(&db).map_err(|e| format!("create table: {e}"))?;
    let mut model = Model::new(seed, Mix::All);
    for cycle in 0..cycles {
        let steps = model.rng.random_range(5..150);
        for _ in 0..steps {
            let step = model.next_step();
            model
                .run(&db, step.clone())
                .map_err(|e| format!("cycle {cycle}: {step:?} failed without a fault: {e}"))?;
        }
        // The power goes while the engine's threads may still be flushing or writing; they
        // carry on against the old file system, which is then dropped.
        let crashed = fs.crash(policy, seed.wrapping_mul(1_000_003) ^ cycle as u64);
        drop(db);
        fs = crashed;
        db = open(fs.clone()).map_err(|e| format!("cycle {cycle}: reopen failed: {e}"))?;
        model.check(&db, true).map_err(|e| {
            format!(
                "cycle {cycle}: {e}\nrecovery: {:?}\nfiles after the crash: {:?}",
                db.stats().recovery,
                fs.files()
            )
        })?;
    }
    Ok(model.tally)
}
