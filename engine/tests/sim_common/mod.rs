//! The reference model of the `sim_*`, `disk_full` and `known_bugs` tests is
//! `cellar::testkit::model` (shared with `cellar reliability-report`); this module re-exports
//! it and adds the seed count a run takes from the environment.

#![allow(dead_code, reason = "each test binary uses a different subset")]

pub use cellar::testkit::model::*;

/// Seeds to run: `SIM_SEEDS` if set, else `default`.
pub fn seeds(default: u64) -> u64 {
    std::env::var("SIM_SEEDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}
