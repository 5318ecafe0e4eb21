//! The memstore switch gate.
//!
//! Every write holds the gate *shared* from resolving its families, through taking its sequence
//! number from the WAL and inserting into the active memstores, to marking its batch applied.
//! A memstore switch (and a schema change, and installing a flush) holds it *exclusive*. Hence,
//! when a switch runs, every sequence number handed out so far is already in a memstore, and
//! the WAL segment the switch rolls to receives only later ones — the property that lets a
//! flushed generation retire exactly the WAL segments before its boundary.
//!
//! Model check (the property above, with two writers and a switcher):
//! ```text
//! RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=3 cargo test -p cellar --release --lib db::gate
//! ```

use crate::sync_shim::{RwLock, RwLockReadGuard, RwLockWriteGuard};

/// See the module docs.
#[derive(Debug, Default)]
pub(crate) struct SwitchGate {
    lock: RwLock<()>,
}

impl SwitchGate {
    /// Held by a write for its whole application.
    pub(crate) fn shared(&self) -> RwLockReadGuard<'_, ()> {
        match self.lock.read() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        }
    }

    /// Held by a switch, a schema change or a flush install.
    pub(crate) fn exclusive(&self) -> RwLockWriteGuard<'_, ()> {
        match self.lock.write() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        }
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    use super::SwitchGate;
    use crate::sync_shim::{thread, Arc, Mutex};
    use loom::sync::atomic::{AtomicU64, Ordering};

    /// Writers take a seq and insert into the current active "memstore" under the shared gate;
    /// the switcher reads the next seq as its boundary and swaps the memstore under the
    /// exclusive gate. Every seq below the boundary must be in the frozen memstore and every
    /// seq at or above it in the new one — in every interleaving.
    #[test]
    fn switch_splits_sequence_numbers_at_the_boundary() {
        loom::model(|| {
            let gate = Arc::new(SwitchGate::default());
            let next_seq = Arc::new(AtomicU64::new(1));
            let active = Arc::new(Mutex::new(Arc::new(Mutex::new(Vec::<u64>::new()))));
            let writers: Vec<_> = (0..2)
                .map(|_| {
                    let (gate, next_seq, active) = (gate.clone(), next_seq.clone(), active.clone());
                    thread::spawn(move || {
                        let _g = gate.shared();
                        let seq = next_seq.fetch_add(1, Ordering::SeqCst);
                        let mem = active.lock().unwrap().clone();
                        mem.lock().unwrap().push(seq);
                    })
                })
                .collect();
            let (boundary, frozen) = {
                let _g = gate.exclusive();
                let boundary = next_seq.load(Ordering::SeqCst);
                let mut a = active.lock().unwrap();
                let frozen = std::mem::replace(&mut *a, Arc::new(Mutex::new(Vec::new())));
                (boundary, frozen)
            };
            for w in writers {
                w.join().unwrap();
            }
            let frozen = frozen.lock().unwrap().clone();
            let later = active.lock().unwrap().lock().unwrap().clone();
            assert!(
                frozen.iter().all(|&s| s < boundary),
                "{frozen:?} / {boundary}"
            );
            assert!(
                later.iter().all(|&s| s >= boundary),
                "{later:?} / {boundary}"
            );
            assert_eq!(frozen.len() + later.len(), 2);
        });
    }
}
