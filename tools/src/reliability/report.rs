//! The report's figures (the JSON document) and their text rendering.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Serialize;

use super::ReliabilityArgs;

/// Fault models no section exercises: the report always lists them.
const NOT_EXERCISED: &[&str] = &[
    "a lying fsync (a device acknowledging a flush it did not do): undetectable by design",
    "firmware bugs: misdirected or lost writes, and reads returning another or an older block \
     (only bit flips at rest are swept)",
    "memory bit flips (block cache, memstores): checksums are verified on reads from files only",
    "power loss of real processes: the SIGKILL cycles keep the page cache; power loss is \
     simulated in process on SimFs (no journal materializes post-crash states of real files)",
    "io_uring completion reordering: the simulated runs use the pwrite WAL device",
    "read errors (EIO on read), short writes and EINTR: in targeted tests, not in the matrix",
    "concurrent writers under simulated faults and power losses (one writer thread there)",
    "truncation sweeps of WAL segments: an older segment cut at a record boundary is detected \
     through the next segment's LINK (wal::tests), but no section here cuts files",
];

/// The statement every report ends with.
const EVIDENCE: &str = "Zero violations is evidence, not proof: these runs sample finitely \
     many seeds, operations, crash points and bits, under the fault models above and no others.";

/// Machine facts.
#[derive(Debug, Clone, Serialize)]
pub struct Machine {
    /// Logical CPUs available to this process.
    pub cores: usize,
    /// Kernel release (`/proc/sys/kernel/osrelease`), or "unknown".
    pub kernel: String,
    /// OS and architecture.
    pub os: String,
    /// The temporary directory the SIGKILL cycles use, and its file system type if known.
    pub tmp_dir: String,
}

/// What every section reports besides its own figures (flattened into the section's JSON).
#[derive(Debug, Clone, Default, Serialize)]
pub struct SectionRun {
    /// Seconds the section was given.
    pub budget_secs: f64,
    /// Seconds it took (the unit running when its time ran out finishes).
    pub elapsed_secs: f64,
    /// Invariant violations (crash: per cycle; power: per seed; faults: per run, hangs and
    /// panics included; corruption: wrong results and panics, or a database not built).
    pub violations: u64,
    /// What the first of them were (replay information first).
    pub violation_details: Vec<String>,
}

impl SectionRun {
    /// Count a violation and keep its description (the first few only).
    pub(super) fn violation(&mut self, what: String) {
        self.violations += 1;
        if self.violation_details.len() < MAX_DETAILS {
            self.violation_details.push(what);
        }
    }
}

/// Violation descriptions kept per section; the count is always complete.
const MAX_DETAILS: usize = 20;

/// Kill-point coverage of the SIGKILL cycles.
#[derive(Debug, Clone, Default, Serialize)]
pub struct KillPoints {
    /// Whether this binary has kill points compiled in (feature `kill-points`).
    pub built: bool,
    /// "not built with kill-points" when it has not.
    pub note: Option<String>,
    /// Points declared in the engine.
    pub declared: usize,
    /// Declared points a child was killed at, at least once.
    pub hit: usize,
    /// Fewest kills at a declared point.
    pub min_hits: u64,
    /// Per point: kills at it, and cycles armed at it whose child never reached it.
    pub histogram: BTreeMap<String, PointCount>,
}

/// One kill point's counts.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct PointCount {
    /// Children killed at the point.
    pub kills: u64,
    /// Children armed at the point that stopped without reaching it.
    pub armed_not_reached: u64,
}

/// SIGKILL cycles of real processes.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Crash {
    /// Time and violations.
    #[serde(flatten)]
    pub run: SectionRun,
    /// Kill-and-recover cycles (process mode: SIGKILL keeps the page cache).
    pub process_cycles: u64,
    /// Cycles killed at a random time.
    pub random_kills: u64,
    /// Cycles armed at a named kill point (killed there or not).
    pub point_cycles: u64,
    /// The WAL backend the children ran.
    pub wal_backend: String,
    /// Acknowledged puts and deletes checked after recoveries (summed over cycles).
    pub acked_checked: u64,
    /// Writes in flight at a kill found applied after recovery.
    pub maybe_applied: u64,
    /// Writes in flight at a kill found absent after recovery.
    pub maybe_lost: u64,
    /// HFiles verified after recoveries.
    pub files_verified: u64,
    /// Table snapshots cloned and checked after recoveries (summed over cycles).
    pub snapshots_checked: u64,
    /// Change feed batches read back from the WAL and checked after recoveries (summed).
    pub feed_batches_checked: u64,
    /// Batches read back through the feed slot (its held WAL) after recoveries (summed).
    pub slot_batches_checked: u64,
    /// Row-range deletes the children saw return, each held to every row of its range.
    pub range_deletes_acked: u64,
    /// Kill points.
    pub kill_points: KillPoints,
}

/// One crash policy's power-loss figures.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct Policy {
    /// Seeds run.
    pub seeds: u64,
    /// Power losses (cycles) run: each seed runs several on one database.
    pub cycles: u64,
    /// Recoveries checked against the model.
    pub checks: u64,
    /// Writes attempted before those recoveries.
    pub writes: u64,
    /// Writes that had to survive.
    pub required: u64,
    /// Writes found recovered.
    pub recovered: u64,
    /// Recoveries that lost a write allowed to be lost (the crash did bite).
    pub lossy_checks: u64,
    /// Seeds that violated an invariant.
    pub violations: u64,
}

/// Simulated power losses.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Power {
    /// Time and violations.
    #[serde(flatten)]
    pub run: SectionRun,
    /// Seeds run, numbered from `first_seed`.
    pub seeds: u64,
    /// First seed.
    pub first_seed: u64,
    /// Power losses per seed.
    pub cycles_per_seed: u64,
    /// Power losses in all.
    pub power_cycles: u64,
    /// Per crash policy.
    pub policies: BTreeMap<String, Policy>,
    /// How directory entries never synced are treated.
    pub directory_rollback: String,
}

/// One cell of the fault matrix.
#[derive(Debug, Clone, Default, Serialize)]
pub struct FaultCell {
    /// Runs of the cell.
    pub runs: u64,
    /// Runs where the fault was injected.
    pub injected: u64,
    /// Runs where an API call returned an error.
    pub surfaced: u64,
    /// Runs that violated an invariant.
    pub violations: u64,
}

/// The fault matrix.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Faults {
    /// Time and violations.
    #[serde(flatten)]
    pub run: SectionRun,
    /// The workloads swept.
    pub workloads: Vec<String>,
    /// Fault points (operation kind × file kind) the workloads reach.
    pub points: usize,
    /// Cells: points × applicable faults × {transient, persistent}.
    pub cells: usize,
    /// Cells with at least one run that injected its fault.
    pub covered: usize,
    /// Runs of the full sweep (every matching operation of every cell and workload).
    pub planned_runs: usize,
    /// Runs done.
    pub runs: u64,
    /// Of which with a transient (once) fault.
    pub transient_runs: u64,
    /// Of which with a persistent fault.
    pub persistent_runs: u64,
    /// Runs where the fault was injected.
    pub injected_runs: u64,
    /// Runs where an API call returned an error.
    pub surfaced_runs: u64,
    /// Per cell (`point fault (mode)`).
    pub by_cell: BTreeMap<String, FaultCell>,
}

/// One block type's corruption figures.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct BlockType {
    /// Bytes of this type in the database.
    pub bytes: u64,
    /// Bits flipped (one per case).
    pub cases: u64,
    /// Open failed with a corruption error.
    pub detected_on_open: u64,
    /// A read failed with a corruption error.
    pub detected_on_read: u64,
    /// Refused with another error.
    pub other_error: u64,
    /// Answers identical to the pristine ones.
    pub unchanged: u64,
    /// Different answers.
    pub wrong_results: u64,
    /// Panics.
    pub panics: u64,
}

/// Bit flips by file and block type.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Corruption {
    /// Time and violations.
    #[serde(flatten)]
    pub run: SectionRun,
    /// Files in the canonical database.
    pub files: usize,
    /// Their bytes: one case per byte is the full sweep.
    pub bytes: u64,
    /// Bits flipped.
    pub mutations: u64,
    /// Detected on open or on read, as corruption or another error.
    pub detected: u64,
    /// Answers identical to the pristine ones.
    pub unchanged: u64,
    /// Different answers (violations).
    pub wrong_results: u64,
    /// Panics (violations).
    pub panics: u64,
    /// Per block type.
    pub by_block_type: BTreeMap<String, BlockType>,
}

/// The whole report (the JSON document).
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// `git rev-parse HEAD` of the working directory, or "unknown".
    pub commit: String,
    /// Whether tracked files differ from the commit (`None`: unknown).
    pub commit_dirty: Option<bool>,
    /// Machine facts.
    pub machine: Machine,
    /// The WAL backend a database on real files gets here (`io_uring` or `pwrite`); the
    /// simulated sections always run the pwrite device.
    pub wal_backend: String,
    /// Whether this binary is a release build.
    pub release_build: bool,
    /// The seed.
    pub seed: u64,
    /// The time budget, in seconds.
    pub budget_secs: f64,
    /// Wall time, in seconds.
    pub elapsed_secs: f64,
    /// SIGKILL cycles.
    pub crash: Crash,
    /// Simulated power losses.
    pub power: Power,
    /// Fault matrix.
    pub faults: Faults,
    /// Bit flips.
    pub corruption: Corruption,
    /// Violations of every section.
    pub violations: u64,
    /// Fault models not exercised.
    pub not_exercised: Vec<String>,
    /// Zero violations is evidence, not proof.
    pub note: String,
}

impl Report {
    /// An empty report of a run with `args`.
    pub(super) fn new(args: &ReliabilityArgs, machine: Machine, wal_backend: String) -> Report {
        let (commit, commit_dirty) = commit();
        Report {
            commit,
            commit_dirty,
            machine,
            wal_backend,
            release_build: !cfg!(debug_assertions),
            seed: args.seed,
            budget_secs: args.budget_secs,
            elapsed_secs: 0.0,
            crash: Crash::default(),
            power: Power::default(),
            faults: Faults::default(),
            corruption: Corruption::default(),
            violations: 0,
            not_exercised: NOT_EXERCISED.iter().map(|s| s.to_string()).collect(),
            note: EVIDENCE.to_string(),
        }
    }

    /// Total the violations and record the wall time.
    pub(super) fn finish(&mut self, elapsed: Duration) {
        self.elapsed_secs = elapsed.as_secs_f64();
        self.violations = self.crash.run.violations
            + self.power.run.violations
            + self.faults.run.violations
            + self.corruption.run.violations;
    }

    /// The text rendering.
    pub fn text(&self) -> String {
        let mut o = String::new();
        let dirty = match self.commit_dirty {
            Some(true) => " (with uncommitted changes)",
            _ => "",
        };
        let m = &self.machine;
        o.push_str("Cellar reliability report\n");
        line(&mut o, "commit", format!("{}{dirty}", self.commit));
        line(
            &mut o,
            "machine",
            format!(
                "{} cores, kernel {}, {}; temp dir {}",
                m.cores, m.kernel, m.os, m.tmp_dir
            ),
        );
        line(
            &mut o,
            "WAL backend",
            format!(
                "{} on real files; pwrite in the simulated sections",
                self.wal_backend
            ),
        );
        let build = if self.release_build {
            "release"
        } else {
            "debug"
        };
        line(
            &mut o,
            "run",
            format!(
                "seed {}, budget {:.0} s, took {:.1} s, {build} build",
                self.seed, self.budget_secs, self.elapsed_secs
            ),
        );
        self.crash_text(&mut o);
        self.power_text(&mut o);
        self.faults_text(&mut o);
        self.corruption_text(&mut o);
        o.push_str("\nNot exercised:\n");
        for n in &self.not_exercised {
            o.push_str(&format!("  - {n}\n"));
        }
        o.push_str(&format!(
            "\n{}\nVIOLATIONS: {}\n",
            self.note, self.violations
        ));
        o
    }

    fn crash_text(&self, o: &mut String) {
        let c = &self.crash;
        let k = &c.kill_points;
        let mut lines = vec![
            (
                "cycles",
                format!(
                    "{} ({} armed at named points, {} random kills), WAL backend {}",
                    c.process_cycles, c.point_cycles, c.random_kills, c.wal_backend
                ),
            ),
            (
                "checked",
                format!(
                    "{} acknowledged writes, {} in flight at a kill ({} applied, {} lost), \
                     {} HFiles verified, {} table snapshots cloned, {} change feed batches, \
                     {} feed slot batches, {} row-range deletes",
                    c.acked_checked,
                    c.maybe_applied + c.maybe_lost,
                    c.maybe_applied,
                    c.maybe_lost,
                    c.files_verified,
                    c.snapshots_checked,
                    c.feed_batches_checked,
                    c.slot_batches_checked,
                    c.range_deletes_acked
                ),
            ),
        ];
        let mut points = None;
        if k.built {
            lines.push((
                "kill points",
                format!(
                    "{} declared, {} hit, fewest kills at a point {}",
                    k.declared, k.hit, k.min_hits
                ),
            ));
            points = Some(table("point kills armed_not_reached", &k.histogram));
        } else {
            let note = k.note.as_deref().unwrap_or("not built with kill-points");
            lines.push(("kill points", note.to_string()));
        }
        let title = "SIGKILL crash cycles (child processes on real files)";
        section(o, title, &c.run, lines, points);
    }

    fn power_text(&self, o: &mut String) {
        let p = &self.power;
        let lines = vec![
            (
                "cycles",
                format!(
                    "{} seeds from {} x {} power losses = {}",
                    p.seeds, p.first_seed, p.cycles_per_seed, p.power_cycles
                ),
            ),
            ("dir rollback", p.directory_rollback.clone()),
        ];
        let table = table(
            "policy seeds cycles checks writes required recovered lossy_checks violations",
            &p.policies,
        );
        let title = "Simulated power losses (SimFs, checked against the model)";
        section(o, title, &p.run, lines, Some(table));
    }

    fn faults_text(&self, o: &mut String) {
        let f = &self.faults;
        let mut lines = vec![
            ("workloads", f.workloads.join("; ")),
            (
                "cells",
                format!(
                    "{} covered of {} ({} fault points x applicable faults x \
                     transient/persistent)",
                    f.covered, f.cells, f.points
                ),
            ),
            (
                "runs",
                format!(
                    "{} of {} planned ({} transient, {} persistent); fault injected in {}, \
                     surfaced as an API error in {}",
                    f.runs,
                    f.planned_runs,
                    f.transient_runs,
                    f.persistent_runs,
                    f.injected_runs,
                    f.surfaced_runs
                ),
            ),
        ];
        let missed: Vec<&str> = f
            .by_cell
            .iter()
            .filter(|(_, c)| c.injected == 0)
            .map(|(n, _)| n.as_str())
            .collect();
        if !missed.is_empty() {
            let shown = missed.len().min(8);
            let more = if missed.len() > shown {
                format!(", and {} more (all in the JSON)", missed.len() - shown)
            } else {
                String::new()
            };
            lines.push((
                "not covered",
                format!("{}{more}", missed[..shown].join(", ")),
            ));
        }
        let title = "Fault matrix (FaultFs on SimFs, n-th operation failed)";
        section(o, title, &f.run, lines, None);
    }

    fn corruption_text(&self, o: &mut String) {
        let c = &self.corruption;
        let pct = |n: u64, d: u64| 100.0 * n as f64 / d.max(1) as f64;
        let lines = vec![(
            "bits flipped",
            format!(
                "{} in {} files of {} bytes ({:.2}% of the bytes): {} detected ({:.1}%), {} \
                 unchanged, {} wrong results, {} panics",
                c.mutations,
                c.files,
                c.bytes,
                pct(c.mutations, c.bytes),
                c.detected,
                pct(c.detected, c.mutations),
                c.unchanged,
                c.wrong_results,
                c.panics
            ),
        )];
        let table = table(
            "block_type bytes cases detected_on_open detected_on_read other_error unchanged \
             wrong_results panics",
            &c.by_block_type,
        );
        let title = "Corruption (one bit flipped per case)";
        section(o, title, &c.run, lines, Some(table));
    }
}

/// A table: headers, then rows of a name and numbers.
type Table<'a> = (Vec<&'a str>, Vec<(String, Vec<u64>)>);

/// A table of `map`'s entries: `headers` space-separated, the first naming the keys, the
/// others fields of the entries as they serialize (so text and JSON share the names).
fn table<'a, T: Serialize>(headers: &'a str, map: &BTreeMap<String, T>) -> Table<'a> {
    let cols: Vec<&str> = headers.split_whitespace().collect();
    let rows = map
        .iter()
        .map(|(k, v)| {
            let j = serde_json::to_value(v).unwrap_or_default();
            let nums = cols.iter().skip(1).map(|c| j[*c].as_u64().unwrap_or(0));
            (k.clone(), nums.collect())
        })
        .collect();
    (cols, rows)
}

/// Render a section: its title with the time it used of the time it was given, labelled
/// lines, an optional table, its violations.
fn section(
    o: &mut String,
    title: &str,
    run: &SectionRun,
    lines: Vec<(&str, String)>,
    table: Option<Table>,
) {
    o.push_str(&format!(
        "\n{title:<60} {:>6.1} s of {:.1} s\n",
        run.elapsed_secs, run.budget_secs
    ));
    for (label, value) in lines {
        line(o, label, value);
    }
    if let Some((headers, rows)) = table {
        render_table(o, &headers, rows);
    }
    line(o, "violations", run.violations.to_string());
    for d in &run.violation_details {
        let first = d.lines().next().unwrap_or_default();
        o.push_str(&format!("    {first}\n"));
    }
}

/// A labelled line of a section.
fn line(o: &mut String, label: &str, value: String) {
    o.push_str(&format!("  {label:<13} {value}\n"));
}

/// A name column, then right-aligned numbers, each column as wide as its header.
fn render_table(o: &mut String, headers: &[&str], rows: Vec<(String, Vec<u64>)>) {
    let first = rows
        .iter()
        .map(|r| r.0.len())
        .chain(headers.first().map(|h| h.len()))
        .max()
        .unwrap_or(0);
    let widths: Vec<usize> = headers.iter().skip(1).map(|h| h.len().max(6)).collect();
    let mut head = format!("    {:<first$}", headers.first().copied().unwrap_or(""));
    for (h, w) in headers.iter().skip(1).zip(&widths) {
        head.push_str(&format!(" {h:>w$}"));
    }
    o.push_str(&head);
    o.push('\n');
    for (name, values) in rows {
        let mut l = format!("    {name:<first$}");
        for (v, w) in values.iter().zip(&widths) {
            l.push_str(&format!(" {v:>w$}"));
        }
        o.push_str(&l);
        o.push('\n');
    }
}

/// The commit of the working directory, and whether tracked files differ from it.
fn commit() -> (String, Option<bool>) {
    let git = |args: &[&str]| {
        std::process::Command::new("git")
            .args(args)
            .stderr(std::process::Stdio::null())
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    match git(&["rev-parse", "HEAD"]) {
        Some(c) if !c.is_empty() => {
            let dirty =
                git(&["status", "--porcelain", "--untracked-files=no"]).map(|s| !s.is_empty());
            (c, dirty)
        }
        _ => ("unknown".into(), None),
    }
}
