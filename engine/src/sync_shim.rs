//! The synchronisation primitives of the group-commit hand-off: `std::sync` in normal builds,
//! `loom::sync` under `--cfg loom` so the model checker can explore every interleaving of
//! the WAL group-commit hand-off (`wal::commit`) and the read-point publisher (`visibility`).
//! Only those two go through this shim; the rest of the engine uses std and parking_lot.

#[cfg(loom)]
pub(crate) use loom::sync::{Arc, Condvar, Mutex, MutexGuard};
#[cfg(not(loom))]
pub(crate) use std::sync::{Arc, Condvar, Mutex, MutexGuard};

// Only the loom model spawns threads through the shim; the writer thread is a plain std thread.
#[cfg(all(loom, test))]
pub(crate) use loom::thread;
