//! Synchronisation primitives of the model-checked kernels: `std::sync` in normal builds,
//! `loom::sync` under `--cfg loom`, so the model checker explores every interleaving of the WAL
//! group-commit hand-off (`wal::commit`), the read-point publisher (`visibility`) and the
//! memstore switch gate (`db::gate`). The rest of the engine uses std and parking_lot.

#[cfg(loom)]
pub(crate) use loom::sync::{
    Arc, Condvar, Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard,
};
#[cfg(not(loom))]
pub(crate) use std::sync::{
    Arc, Condvar, Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard,
};

// Only the loom models spawn threads through the shim; the engine's threads are std threads.
#[cfg(all(loom, test))]
pub(crate) use loom::thread;
