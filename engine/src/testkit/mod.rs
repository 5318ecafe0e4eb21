//! Test support, not part of the engine's API: the reliability suite's workloads, reference
//! model and sweeps, shared by this crate's integration tests (`tests/sim_*.rs`,
//! `tests/disk_full.rs`, `tests/corruption_sweep.rs`, `tests/known_bugs.rs`) and by `cellar
//! reliability-report` (RELIABILITY.md §3), so the figures a report prints come from exactly
//! the code the tests run.
//!
//! Compiled only with the `testkit` feature (the tests turn it on through a dev-dependency of
//! the crate on itself). Everything runs in process on the simulated file system
//! ([`crate::fs::SimFs`], wrapped in [`crate::fs::FaultFs`] for faults), so a run is
//! deterministic for its seed except for the engine's background threads' timing.
//! Functions report a violated invariant as `Err(String)` describing it, never by panicking.
//!
//! - [`model`]: the random workload and its model, and the check that a recovered database is
//!   a prefix of the writes with nothing acknowledged lost.
//! - [`power`]: power-loss cycles under every [`crate::fs::CrashPolicy`].
//! - [`faults`]: one faulty run with its checks, and the fault matrix.
//! - [`corruption`]: bit flips by file and block type in a small database.

pub mod corruption;
pub mod faults;
pub mod model;
pub mod power;
