//! The engine against the reference model with power losses (`cellar::testkit::power`): the
//! input picks a seed of the workload generator (writes at every durability level, deletes of
//! every kind, flushes), a crash policy of `SimFs` and a number of power losses; every
//! recovery must hold the model's invariants (acknowledged writes kept, a prefix of the
//! writes, whole rows, nothing invented). The operations come from the seed, not from the
//! bytes, so this explores seeds rather than operation lists; the CI slice of
//! `tests/sim_crash_model.rs` and `cellar reliability-report` run the same check in order.
#![no_main]

use cellar::testkit::power::{power_loss_cycles, POLICIES};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut seed = [0u8; 8];
    let n = data.len().min(8);
    seed[..n].copy_from_slice(&data[..n]);
    let seed = u64::from_le_bytes(seed);
    let policy = POLICIES[usize::from(data.get(8).copied().unwrap_or(0)) % POLICIES.len()].1;
    let cycles = 1 + usize::from(data.get(9).copied().unwrap_or(0) % 3);
    if let Err(violation) = power_loss_cycles(seed, policy, cycles) {
        panic!("seed {seed}, {policy:?}, {cycles} power losses: {violation}");
    }
});
