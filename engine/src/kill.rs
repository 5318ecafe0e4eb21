//! Named kill points for the crash harness (RELIABILITY.md §2.2; `tools/src/bin/crash-harness.rs`).
//!
//! `kill_point!("flush.after_sync")` marks a place between two durable-state transitions. It
//! compiles to nothing unless the crate's `kill-points` feature is on. With the feature, every
//! hit is counted, and when the environment variable [`ENV`] (`CELLAR_KILL_POINT=name[:n]`)
//! names the point, its n-th hit (default 1) kills the process with SIGKILL: no destructor, no
//! buffered write, no signal handler runs, exactly as if the machine's scheduler had killed it
//! there (not `abort()`, which raises SIGABRT, can run handlers and dump core). Just before,
//! the point writes `CELLAR_KILLED_AT <name> <n>` to stderr so the harness can tell a kill at the
//! point from its own random kill.
//!
//! [`POINTS`] lists every declared point; the harness uses it to run each one and to report the
//! ones never hit.

/// The environment variable that arms a kill point: `name` or `name:n` (kill at the n-th hit).
pub const ENV: &str = "CELLAR_KILL_POINT";

/// The line prefix a kill point writes to stderr before it kills the process.
pub const KILLED_AT: &str = "CELLAR_KILLED_AT";

/// Every kill point, in the order of the life of a write.
pub const POINTS: &[&str] = &[
    // WAL group commit: the group's bytes are in the file, not yet fdatasynced.
    "wal.after_write",
    // WAL group commit: the fdatasync covering the group completed, waiters not yet woken.
    "wal.after_sync",
    // Memstore switch: the WAL rolled to a new segment, memstores not yet frozen.
    "switch.after_wal_roll",
    // Flush: HFiles and their directories synced, manifest edit not yet logged.
    "flush.after_sync",
    // Flush: manifest edit durable, WAL segments not yet deleted.
    "flush.after_manifest",
    // Compaction: outputs and their directories synced, manifest edit not yet logged.
    "compaction.after_sync",
    // Compaction: manifest edit durable, inputs not yet deleted.
    "compaction.after_manifest",
    // Manifest roll-over: new MANIFEST written and synced, CURRENT not yet swapped.
    "manifest.roll.before_current",
    // CURRENT swap: CURRENT.tmp written and synced, not yet renamed.
    "current.before_rename",
    // CURRENT swap: renamed, directory not yet synced.
    "current.after_rename",
    // Table snapshot: files linked and synced, descriptor written as SNAPSHOT.part, not renamed.
    "table_snapshot.before_rename",
    // Feed slots: the new list written and synced as FEED_SLOTS.part, not renamed.
    "feed_slots.before_rename",
    // Row-range delete: its record logged (fsynced), its manifest edit not yet logged.
    "range_delete.after_log",
    // Schema change (create/alter/drop, clone/restore): its manifest edit durable, its
    // change-feed record not yet logged.
    "schema.after_edit",
];

/// Mark a kill point (see the module doc). Nothing without the `kill-points` feature.
macro_rules! kill_point {
    ($name:literal) => {{
        #[cfg(feature = "kill-points")]
        {
            $crate::kill::hit($name);
        }
    }};
}
pub(crate) use kill_point;

#[cfg(feature = "kill-points")]
mod armed {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::OnceLock;

    use super::{ENV, KILLED_AT, POINTS};

    static HITS: [AtomicU64; POINTS.len()] = [const { AtomicU64::new(0) }; POINTS.len()];

    /// The armed point (index in POINTS) and the hit that kills.
    fn armed() -> Option<(usize, u64)> {
        static ARMED: OnceLock<Option<(usize, u64)>> = OnceLock::new();
        *ARMED.get_or_init(|| {
            let v = std::env::var(ENV).ok()?;
            let (name, n) = match v.rsplit_once(':') {
                Some((name, n)) => (name, n.parse().ok()?),
                None => (v.as_str(), 1),
            };
            let i = POINTS.iter().position(|p| *p == name)?;
            Some((i, n))
        })
    }

    pub fn hit(name: &'static str) {
        let Some(i) = POINTS.iter().position(|p| *p == name) else {
            // An undeclared point is a bug caught by the unit test below, never a crash.
            return;
        };
        let n = HITS[i].fetch_add(1, Ordering::Relaxed) + 1;
        if armed() == Some((i, n)) {
            use std::io::Write as _;
            let _ = writeln!(std::io::stderr(), "{KILLED_AT} {name} {n}");
            let _ = rustix::process::kill_process(
                rustix::process::getpid(),
                rustix::process::Signal::KILL,
            );
            // SIGKILL cannot be caught; this is only reached if kill itself failed.
            std::process::abort();
        }
    }

    pub fn hits() -> Vec<(&'static str, u64)> {
        POINTS
            .iter()
            .zip(HITS.iter())
            .map(|(p, h)| (*p, h.load(Ordering::Relaxed)))
            .collect()
    }
}

#[cfg(feature = "kill-points")]
pub use armed::hit;

/// How often each point was hit in this process (all zero without the `kill-points` feature).
pub fn hits() -> Vec<(&'static str, u64)> {
    #[cfg(feature = "kill-points")]
    {
        armed::hits()
    }
    #[cfg(not(feature = "kill-points"))]
    {
        POINTS.iter().map(|p| (*p, 0)).collect()
    }
}

/// Whether this build has kill points compiled in.
pub const ENABLED: bool = cfg!(feature = "kill-points");

#[cfg(test)]
mod tests {
    /// Every `kill_point!` in the sources names a declared point, and every declared point is
    /// placed somewhere (an undeclared name would silently never fire).
    #[test]
    fn every_point_is_declared_and_placed() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut used = std::collections::BTreeSet::new();
        let mut stack = vec![root];
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).unwrap() {
                let p = e.unwrap().path();
                if p.is_dir() {
                    stack.push(p);
                } else if p.extension().is_some_and(|x| x == "rs") && !p.ends_with("kill.rs") {
                    let text = std::fs::read_to_string(&p).unwrap();
                    for part in text.split("kill_point!(\"").skip(1) {
                        if let Some(name) = part.split('"').next() {
                            used.insert(name.to_owned());
                        }
                    }
                }
            }
        }
        let declared: std::collections::BTreeSet<String> =
            super::POINTS.iter().map(|s| s.to_string()).collect();
        assert_eq!(used, declared);
    }
}
