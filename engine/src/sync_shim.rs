//! The synchronisation primitives of the group-commit hand-off: `std::sync` in normal builds,
//! `loom::sync` under `--cfg loom` so the model checker can explore every interleaving of
//! [`super::commit`]. Only the hand-off goes through this shim; the rest of the WAL uses std.

#[cfg(loom)]
pub(crate) use loom::sync::{Arc, Condvar, Mutex, MutexGuard};
#[cfg(not(loom))]
pub(crate) use std::sync::{Arc, Condvar, Mutex, MutexGuard};

// Only the loom model spawns threads through the shim; the writer thread is a plain std thread.
#[cfg(all(loom, test))]
pub(crate) use loom::thread;
