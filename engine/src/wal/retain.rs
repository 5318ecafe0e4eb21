//! Which flushed WAL segments stay on disk: the change feed's pins and the retention budget.
//!
//! A flush (and an open) tells the WAL that segments below some number are persisted elsewhere
//! ([`super::Wal::delete_segments_before`]). Without readers of the log that is where they were
//! removed. The change feed (`crate::db::changes`) reads the log itself, so two things now hold
//! segments back:
//! * **Pins.** A live feed pins the segment it reads: no segment at or above the lowest pin is
//!   removed until the pin moves on or is dropped. A pin is taken under the same lock a removal
//!   holds for its whole listing and unlinking, so a feed never lists a segment that a removal
//!   in progress is about to unlink.
//! * **The budget** ([`super::WalOptions::retain_bytes`]). Of the segments a flush released,
//!   the newest are kept while their sizes sum to at most the budget; the older ones go,
//!   oldest first. What stays is therefore always one run of consecutive segment numbers
//!   ending where the live log begins, which the feed's link check relies on.
//!
//! A segment released while pinned is removed when the last pin above it goes (the drop of the
//! pin runs the removal again) or at the next flush. A feed slot's pin (`crate::db::slots`) is
//! the exception: it drops without removing anything when the database closes, since the slot
//! itself lives on in its file and pins the segment again at the next open. Kept segments lie
//! below the manifest's log number, where replay does not read (SPEC.md §16.6, §16.8): they
//! cost disk space only.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

use super::reader::list_segments;
use super::StatsInner;
use crate::error::{Error, Result};
use crate::fs::SharedFs;

#[derive(Debug, Default)]
struct State {
    /// Segment number → how many pins hold it.
    pins: BTreeMap<u64, usize>,
    /// The largest boundary a caller released: segments below it are flushed.
    released_below: u64,
}

/// The WAL's retention bookkeeping, shared by the WAL and every pin.
#[derive(Debug)]
pub(crate) struct Retention {
    fs: SharedFs,
    dir: PathBuf,
    stats: Arc<StatsInner>,
    keep_bytes: u64,
    state: Mutex<State>,
    kept_segments: AtomicU64,
    kept_bytes: AtomicU64,
}

impl Retention {
    pub(crate) fn new(
        fs: SharedFs,
        dir: &Path,
        stats: Arc<StatsInner>,
        keep_bytes: u64,
    ) -> Arc<Self> {
        Arc::new(Retention {
            fs,
            dir: dir.to_path_buf(),
            stats,
            keep_bytes,
            state: Mutex::new(State::default()),
            kept_segments: AtomicU64::new(0),
            kept_bytes: AtomicU64::new(0),
        })
    }

    /// Segments below `n` are persisted elsewhere: remove what neither a pin nor the budget
    /// keeps. Returns how many segments were removed.
    pub(crate) fn release_below(&self, n: u64) -> Result<usize> {
        let mut st = self.state.lock();
        st.released_below = st.released_below.max(n);
        self.prune(&st)
    }

    /// Pin `segment` (and everything after it) against removal.
    pub(crate) fn pin(self: &Arc<Self>, segment: u64) -> WalPin {
        *self.state.lock().pins.entry(segment).or_insert(0) += 1;
        WalPin {
            retention: self.clone(),
            segment,
            prune_on_drop: true,
        }
    }

    fn unpin(&self, st: &mut State, segment: u64) {
        if let Some(c) = st.pins.get_mut(&segment) {
            *c -= 1;
            if *c == 0 {
                st.pins.remove(&segment);
            }
        }
    }

    fn prune(&self, st: &State) -> Result<usize> {
        let released_below = st
            .released_below
            .min(self.stats.current_segment.load(Ordering::Relaxed));
        let limit = match st.pins.first_key_value() {
            Some((&lowest, _)) => released_below.min(lowest),
            None => released_below,
        };
        let released: Vec<_> = list_segments(&*self.fs, &self.dir)?
            .into_iter()
            .take_while(|(num, _)| *num < released_below)
            .collect();
        // Sizes only decide what to keep and feed the counters: one that cannot be read counts
        // as 0 (kept) rather than failing the flush that released it.
        let size = |path: &Path| match self.fs.open(path).and_then(|f| f.len()) {
            Ok(len) => len,
            Err(e) => {
                tracing::warn!(path = %path.display(), error = %e, "reading a WAL segment's size");
                0
            }
        };
        // Of the unpinned ones, keep the newest within the budget; `cut` is how many of the
        // oldest go. Without a budget no size is needed to decide.
        let unpinned = released.iter().take_while(|(n, _)| *n < limit).count();
        let mut cut = unpinned;
        // Sizes read for the budget, by index, so the counters below do not read them again.
        let mut sizes: Vec<Option<u64>> = vec![None; released.len()];
        if self.keep_bytes > 0 {
            let mut kept = 0u64;
            cut = 0;
            for (i, (_, path)) in released[..unpinned].iter().enumerate().rev() {
                let len = size(path);
                sizes[i] = Some(len);
                kept = kept.saturating_add(len);
                if kept > self.keep_bytes {
                    cut = i + 1;
                    break;
                }
            }
        }
        for (_, path) in &released[..cut] {
            self.fs
                .remove(path)
                .map_err(|e| Error::io(path, "removing a WAL segment", e))?;
        }
        if cut > 0 {
            self.fs
                .sync_dir(&self.dir)
                .map_err(|e| Error::io(&self.dir, "syncing the WAL directory", e))?;
        }
        let kept = &released[cut..];
        let mut bytes = 0u64;
        for (i, (_, path)) in kept.iter().enumerate() {
            bytes = bytes.saturating_add(sizes[cut + i].unwrap_or_else(|| size(path)));
        }
        self.kept_segments
            .store(kept.len() as u64, Ordering::Relaxed);
        self.kept_bytes.store(bytes, Ordering::Relaxed);
        Ok(cut)
    }

    /// `(segments, bytes)` released but still on disk (held by pins or the budget), as of
    /// the last removal.
    pub(crate) fn kept(&self) -> (u64, u64) {
        (
            self.kept_segments.load(Ordering::Relaxed),
            self.kept_bytes.load(Ordering::Relaxed),
        )
    }

    /// Live pins (change feeds).
    pub(crate) fn pins(&self) -> u64 {
        self.state.lock().pins.values().sum::<usize>() as u64
    }
}

/// Holds one WAL segment, and every later one, on disk while it lives (see the module docs).
#[derive(Debug)]
pub struct WalPin {
    retention: Arc<Retention>,
    segment: u64,
    /// Whether dropping the pin removes what it alone held.
    prune_on_drop: bool,
}

impl WalPin {
    /// The segment held.
    pub fn segment(&self) -> u64 {
        self.segment
    }

    /// Hold `segment` instead (a reader moving on). Moving back is allowed but cannot bring
    /// back a segment already removed.
    pub fn move_to(&mut self, segment: u64) {
        if segment == self.segment {
            return;
        }
        let mut st = self.retention.state.lock();
        *st.pins.entry(segment).or_insert(0) += 1;
        self.retention.unpin(&mut st, self.segment);
        self.segment = segment;
        if let Err(e) = self.retention.prune(&st) {
            tracing::warn!(error = %e, "removing WAL segments a change feed released failed");
        }
    }

    /// Dropping the pin lets go without removing anything: the pin of a durable holder (a
    /// feed slot) drops when the database closes, and what it held must still be there at the
    /// next open. [`WalPin::release`] is the deliberate let-go.
    pub(crate) fn quiet_on_drop(mut self) -> Self {
        self.prune_on_drop = false;
        self
    }

    /// Let go now, removing what nothing else holds (what dropping an ordinary pin does).
    pub(crate) fn release(mut self) {
        self.prune_on_drop = true;
    }
}

impl Drop for WalPin {
    fn drop(&mut self) {
        let mut st = self.retention.state.lock();
        self.retention.unpin(&mut st, self.segment);
        if !self.prune_on_drop {
            return;
        }
        if let Err(e) = self.retention.prune(&st) {
            tracing::warn!(error = %e, "removing WAL segments a change feed released failed");
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::super::{Durability, Wal, WalOptions};
    use super::*;
    use crate::fs::RealFs;

    /// A WAL with segments 1..=6 (rolled by hand, one record each), each 4 KiB long.
    fn wal(dir: &Path, retain_bytes: u64) -> Wal {
        let opts = WalOptions {
            segment_size: 4096,
            retain_bytes,
            ..WalOptions::default()
        };
        let w = Wal::open(Arc::new(RealFs), dir, opts, 1).unwrap();
        for _ in 0..5 {
            w.append(b"x", Durability::SyncWal).unwrap();
            w.roll().unwrap();
        }
        w
    }

    fn numbers(dir: &Path) -> Vec<u64> {
        list_segments(&RealFs, dir)
            .unwrap()
            .into_iter()
            .map(|(n, _)| n)
            .collect()
    }

    #[test]
    fn without_a_budget_released_segments_go_but_never_the_current_one() {
        let d = tempfile::tempdir().unwrap();
        let w = wal(d.path(), 0);
        assert_eq!(numbers(d.path()), [1, 2, 3, 4, 5, 6]);
        assert_eq!(w.delete_segments_before(3).unwrap(), 2);
        assert_eq!(numbers(d.path()), [3, 4, 5, 6]);
        assert_eq!(w.delete_segments_before(100).unwrap(), 3);
        assert_eq!(numbers(d.path()), [6]);
    }

    #[test]
    fn the_budget_keeps_the_newest_released_segments_as_one_run() {
        let d = tempfile::tempdir().unwrap();
        let w = wal(d.path(), 2 * 4096);
        assert_eq!(w.delete_segments_before(5).unwrap(), 2);
        assert_eq!(numbers(d.path()), [3, 4, 5, 6]);
        // Just under two segments' worth keeps one.
        let d = tempfile::tempdir().unwrap();
        let w = wal(d.path(), 2 * 4096 - 1);
        w.delete_segments_before(5).unwrap();
        assert_eq!(numbers(d.path()), [4, 5, 6]);
    }

    #[test]
    fn a_pin_holds_its_segment_and_later_ones_until_it_moves_or_drops() {
        let d = tempfile::tempdir().unwrap();
        let w = wal(d.path(), 0);
        let mut pin = w.pin(2);
        let other = w.pin(4);
        assert_eq!(w.delete_segments_before(6).unwrap(), 1);
        assert_eq!(numbers(d.path()), [2, 3, 4, 5, 6]);
        // Moving on releases what the move passed, down to the lowest pin left.
        assert_eq!(w.stats().kept_segments, 4);
        assert_eq!(w.stats().kept_bytes, 4 * 4096);
        assert_eq!(w.stats().feeds, 2);
        pin.move_to(5);
        assert_eq!(numbers(d.path()), [4, 5, 6]);
        assert_eq!(w.stats().kept_segments, 2);
        drop(other);
        assert_eq!(numbers(d.path()), [5, 6]);
        assert_eq!(pin.segment(), 5);
        drop(pin);
        assert_eq!(numbers(d.path()), [6]);
    }

    /// Nothing released yet (a fresh open): a dropped pin removes nothing.
    #[test]
    fn pins_never_remove_what_was_not_released() {
        let d = tempfile::tempdir().unwrap();
        let w = wal(d.path(), 0);
        drop(w.pin(1));
        assert_eq!(numbers(d.path()), [1, 2, 3, 4, 5, 6]);
    }
}
