//! The engine's clock: where "now" comes from for every rule that depends on time — the
//! timestamp of a write at LATEST, TTL expiry in reads, flushes and compactions, the age of
//! markers against `purge_delay`, and the TTL, tombstone and periodic compaction picks.
//!
//! HBase reads the time through `EnvironmentEdgeManager` so tests can replace it; this is the
//! same seam ([`crate::Options::clock`]). The default is the system clock. A
//! [`ManualClock`] moves only when told to, which makes TTL boundaries crossable on purpose:
//! a test can write a cell, read it, move the clock past its TTL and read again, with flushes
//! and compactions in between, and know exactly which side of the boundary each step ran on.
//!
//! The rules assume the clock does not go backwards: a purge judges a cell expired for good
//! (SPEC.md §20.2), and a write at LATEST must not land below the one before it, where the
//! newer value would hide behind the older. [`ManualClock`] only moves forward, and
//! [`SystemClock`] never reads earlier than it already did: when the wall clock is stepped
//! back (NTP, a VM restored), it holds at its highest reading until the wall clock passes
//! it, so writes at LATEST meanwhile share that timestamp and the later write wins by its
//! sequence number. Across a restart the wall clock is taken as it is.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::types::Timestamp;

/// A source of the current time in milliseconds since the Unix epoch.
pub trait Clock: Send + Sync + fmt::Debug {
    /// The current time (ms).
    fn now_ms(&self) -> Timestamp;
}

/// The system's wall clock, held from going backwards (see the module documentation).
#[derive(Debug, Default)]
pub struct SystemClock {
    highest: Monotonic,
}

impl Clock for SystemClock {
    fn now_ms(&self) -> Timestamp {
        self.highest.read(crate::types::now_ms())
    }
}

/// The highest reading so far: a reading below it is raised to it.
#[derive(Debug, Default)]
struct Monotonic(AtomicU64);

impl Monotonic {
    fn read(&self, wall: Timestamp) -> Timestamp {
        // Every Get reads the clock: within a millisecond the reading is not new, and a load
        // leaves the shared line in every core's cache where a `fetch_max` (a locked write)
        // took it exclusive for each read.
        let seen = self.0.load(Ordering::Relaxed);
        if wall <= seen {
            return seen;
        }
        self.0.fetch_max(wall, Ordering::Relaxed).max(wall)
    }
}

/// A clock that stands still until moved forward (tests, simulations).
#[derive(Debug, Default)]
pub struct ManualClock {
    now: AtomicU64,
}

impl ManualClock {
    /// A clock reading `start_ms`.
    pub fn new(start_ms: Timestamp) -> Self {
        ManualClock {
            now: AtomicU64::new(start_ms),
        }
    }

    /// Move the clock forward by `ms`; returns the new time. Saturates at `u64::MAX - 1`
    /// (`u64::MAX` is LATEST_TIMESTAMP, never a time).
    pub fn advance(&self, ms: u64) -> Timestamp {
        let cap = Timestamp::MAX - 1;
        let prev = self
            .now
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |t| {
                Some(t.saturating_add(ms).min(cap))
            })
            .unwrap_or_else(|t| t);
        prev.saturating_add(ms).min(cap)
    }

    /// Set the clock to `ms` if that is not earlier than its current time (the clock never
    /// goes back); returns the time it reads afterwards.
    pub fn set(&self, ms: Timestamp) -> Timestamp {
        let ms = ms.min(Timestamp::MAX - 1);
        self.now.fetch_max(ms, Ordering::SeqCst).max(ms)
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> Timestamp {
        self.now.load(Ordering::SeqCst)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_manual_clock_moves_only_forward() {
        let c = ManualClock::new(10);
        assert_eq!(c.now_ms(), 10);
        assert_eq!(c.advance(5), 15);
        assert_eq!(c.set(12), 15, "set never moves it back");
        assert_eq!(c.now_ms(), 15);
        assert_eq!(c.set(40), 40);
        assert_eq!(c.advance(u64::MAX), u64::MAX - 1, "never reads as LATEST");
    }

    #[test]
    fn a_wall_clock_stepped_back_holds_at_its_highest_reading() {
        let m = Monotonic::default();
        assert_eq!(m.read(1_000), 1_000);
        assert_eq!(m.read(1_005), 1_005);
        assert_eq!(m.read(400), 1_005, "stepped back: held");
        assert_eq!(m.read(1_004), 1_005);
        assert_eq!(m.read(1_010), 1_010, "passed again: follows");
    }

    #[test]
    fn the_system_clock_reads_the_wall_clock() {
        let before = crate::types::now_ms();
        let t = SystemClock::default().now_ms();
        assert!(t >= before && t <= crate::types::now_ms());
        // 2020-01-01 in ms: a clock reading 0 (an error mapped to zero) would fail here.
        assert!(t > 1_577_836_800_000);
    }
}
