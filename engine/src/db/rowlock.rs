//! Row locks: a striped table of mutexes that serializes writes to the same row.
//!
//! Every write (`DbInner::write`) locks the stripes of all its rows before it resolves
//! anything, and holds them until its batch is visible to readers. So whoever holds a row's
//! stripe sees every earlier write to that row in a plain Get, and no later write to it can
//! take a sequence number until the lock is released. That makes a read-modify-write under the
//! lock (check-and-mutate, increment, append, and the delete of a column's newest version)
//! atomic on the row.
//!
//! # Why a striped table
//! A lock per row would need a map of live rows (allocation and a global mutex on every
//! write). A fixed table of [`STRIPES`] mutexes indexed by a hash of the row costs one hash
//! and no allocation; two rows sharing a stripe only serialize each other, which is harmless.
//!
//! # Lock order, and why it cannot deadlock
//! 1. Row stripes, each write taking all of its stripes in ascending stripe order (sorted and
//!    deduplicated first, so a batch with two rows on one stripe does not lock it twice). Two
//!    writers therefore never hold stripes the other is waiting for in the opposite order.
//! 2. Then the switch gate (`gate::SwitchGate`), shared, and the engine's inner mutexes.
//!
//! The memstore switch, schema changes and flush installs take the gate *exclusively* but
//! never take a row lock. So a writer holding stripes and waiting for the gate waits for the
//! switch, which waits only for writers already inside the gate; those hold all their stripes
//! already and need nothing more to finish. No cycle is possible. (A writer may itself perform
//! a switch while holding its stripes — `request_switch` — which is the same case: the switch
//! part takes no stripe.)
//!
//! Holding the stripes through `wait_visible` cannot deadlock either: a write waits there only
//! for batches with smaller sequence numbers, and every such batch took its sequence number
//! after it had locked all its stripes, so it completes without waiting for any stripe.

use parking_lot::{Mutex, MutexGuard};
use xxhash_rust::xxh3::xxh3_64;

/// Number of stripes: enough that unrelated rows rarely share one under heavy concurrency,
/// small enough (a few KiB) to allocate once per database.
pub(crate) const STRIPES: usize = 1024;

/// The striped lock table.
pub(crate) struct RowLocks {
    stripes: Box<[Mutex<()>]>,
}

impl std::fmt::Debug for RowLocks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Printing every stripe would drown the `DbInner` debug output.
        f.debug_struct("RowLocks")
            .field("stripes", &self.stripes.len())
            .finish()
    }
}

impl Default for RowLocks {
    fn default() -> Self {
        RowLocks::new()
    }
}

/// The stripes a write holds; released (in any order, which is safe) when dropped.
#[derive(Debug)]
#[must_use = "the rows are unlocked as soon as the guard is dropped"]
pub(crate) struct RowGuard<'a> {
    _held: Held<'a>,
}

/// The stripes a guard holds: one without an allocation (a write of one row, the common
/// case: the two vectors were two of a put's fifteen allocations), or several.
#[derive(Debug)]
enum Held<'a> {
    One(#[allow(dead_code, reason = "held for its lock")] MutexGuard<'a, ()>),
    Many(#[allow(dead_code, reason = "held for their locks")] Vec<MutexGuard<'a, ()>>),
}

impl RowLocks {
    /// A table of [`STRIPES`] unlocked stripes.
    pub(crate) fn new() -> Self {
        RowLocks {
            stripes: (0..STRIPES).map(|_| Mutex::new(())).collect(),
        }
    }

    /// The stripe of `row`.
    fn stripe(&self, row: &[u8]) -> usize {
        // The modulo keeps the index below the table length, whatever the hash.
        (xxh3_64(row) % self.stripes.len() as u64) as usize
    }

    /// Lock the stripes of every row in `rows`, in ascending stripe order (see the module
    /// docs), blocking until all are held.
    pub(crate) fn lock<'r>(&self, rows: impl IntoIterator<Item = &'r [u8]>) -> RowGuard<'_> {
        let mut rows = rows.into_iter().map(|r| self.stripe(r));
        let first = rows.next();
        // Stripes other than the first row's, collected only when there are some.
        let mut more: Option<Vec<usize>> = None;
        for s in rows {
            if Some(s) != first {
                more.get_or_insert_with(|| first.into_iter().collect())
                    .push(s);
            }
        }
        let held = match (first, more) {
            (Some(s), None) => match self.stripes.get(s) {
                Some(m) => Held::One(m.lock()),
                None => Held::Many(Vec::new()),
            },
            (_, Some(mut idx)) => {
                // Ascending order, each once: two writers never wait on each other in a cycle.
                idx.sort_unstable();
                idx.dedup();
                Held::Many(
                    idx.into_iter()
                        .filter_map(|i| self.stripes.get(i).map(Mutex::lock))
                        .collect(),
                )
            }
            (None, None) => Held::Many(Vec::new()),
        };
        RowGuard { _held: held }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stripes_are_stable_and_in_range() {
        let l = RowLocks::new();
        for r in [&b"a"[..], b"row-1", b"", &[0xff; 64]] {
            let s = l.stripe(r);
            assert!(s < STRIPES);
            assert_eq!(s, l.stripe(r));
        }
    }

    #[test]
    fn a_batch_with_repeated_rows_locks_each_stripe_once() {
        let l = RowLocks::new();
        // Locking the same stripe twice would self-deadlock; this returning proves dedup.
        let g = l.lock([&b"r"[..], b"r", b"s", b"r"]);
        drop(g);
        let _again = l.lock([&b"r"[..]]);
    }

    #[test]
    fn every_stripe_of_a_batch_is_held() {
        let l = RowLocks::new();
        let rows: Vec<Vec<u8>> = (0..50).map(|i| format!("row{i}").into_bytes()).collect();
        let g = l.lock(rows.iter().map(|r| r.as_slice()));
        for r in &rows {
            assert!(
                l.stripes[l.stripe(r)].try_lock().is_none(),
                "{r:?} not locked"
            );
        }
        drop(g);
        for r in &rows {
            assert!(l.stripes[l.stripe(r)].try_lock().is_some());
        }
    }

    #[test]
    fn a_held_stripe_excludes_others() {
        let l = RowLocks::new();
        let g = l.lock([&b"r"[..]]);
        let i = l.stripe(b"r");
        assert!(l.stripes[i].try_lock().is_none());
        drop(g);
        assert!(l.stripes[i].try_lock().is_some());
    }
}
