//! Explicit snapshots: a pinned sequence number that any Get or Scan can read at, released on
//! drop. The oldest live one is what compaction must keep visible (exported in stats).

use std::collections::BTreeMap;
use std::sync::Arc;

use super::DbInner;
use crate::read::query::{Get, Scan};
use crate::types::SeqNo;

/// A consistent view of the database as of one sequence number.
#[derive(Debug)]
pub struct Snapshot {
    inner: Arc<DbInner>,
    seq: SeqNo,
}

impl Snapshot {
    pub(super) fn new(inner: Arc<DbInner>) -> Snapshot {
        // Registered under the registry lock with the read point read inside it, so the oldest
        // live snapshot reported never moves backwards past one being created.
        let mut reg = inner.snapshots.lock();
        let seq = inner.visibility.read_point();
        *reg.entry(seq).or_insert(0) += 1;
        drop(reg);
        Snapshot { inner, seq }
    }

    /// The sequence number the snapshot sees.
    pub fn seq(&self) -> SeqNo {
        self.seq
    }
}

impl Drop for Snapshot {
    fn drop(&mut self) {
        let mut reg = self.inner.snapshots.lock();
        if let Some(n) = reg.get_mut(&self.seq) {
            *n -= 1;
            if *n == 0 {
                reg.remove(&self.seq);
            }
        }
    }
}

/// Live snapshots: sequence number → how many.
pub(super) type Registry = BTreeMap<SeqNo, usize>;

impl Get {
    /// Read at `snapshot` instead of the latest data.
    pub fn at(mut self, snapshot: &Snapshot) -> Self {
        self.read_point = Some(snapshot.seq);
        self
    }
}

impl Scan {
    /// Read at `snapshot` instead of the latest data.
    pub fn at(mut self, snapshot: &Snapshot) -> Self {
        self.read_point = Some(snapshot.seq);
        self
    }
}
