//! `cellar reliability-report`: a bounded slice of the reliability suite, run in this process
//! (and in child processes for the SIGKILL cycles), printed in the shape of RELIABILITY.md §3
//! with every figure's denominator.
//!
//! Sections, run one after the other within one time budget:
//!
//! - **crash**: SIGKILL cycles of the real engine in child processes (`crate::crash`, the
//!   `crash-harness` code; this binary is the child, through its hidden `child` subcommand),
//!   at named kill points when built with the `kill-points` feature and at random times;
//! - **power**: power-loss cycles on the simulated file system under every crash policy,
//!   checked against the reference model (`cellar::testkit::power`);
//! - **faults**: the fault matrix, the n-th operation of every fault point failed with every
//!   applicable fault, once and persistently, over two workloads (`cellar::testkit::faults`);
//! - **corruption**: one bit flipped per case in every file and block type of a small database
//!   (`cellar::testkit::corruption`), spread so that any prefix of the cases covers every class.
//!
//! Each section gets a share of what is left of the budget (so time a section does not use
//! goes to the next; at least a fifth of its share of the whole), always runs at least one unit
//! of work, and stops starting new units when its time is spent. The exit code is 0 when no invariant was violated, 1 otherwise (2 for a
//! usage or I/O error, as every tool).

mod report;
mod sections;

use std::io::Write;
use std::path::PathBuf;
use std::time::{Duration, Instant};

pub use report::Report;

use crate::{Result, ToolError, EXIT_CORRUPT, EXIT_OK};

/// `--format` of the report.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Default)]
pub enum ReportFormat {
    /// Tables for people.
    #[default]
    Text,
    /// One JSON document.
    Json,
}

/// Arguments of `cellar reliability-report`.
#[derive(Debug, Clone, clap::Args)]
pub struct ReliabilityArgs {
    /// Total time budget in seconds, split across the sections (a section always completes at
    /// least one unit of work, so a tiny budget is exceeded a little).
    #[arg(long, default_value_t = 60.0)]
    pub budget_secs: f64,
    /// Seed of every random choice (workloads, crash images, kill delays, bits flipped); the
    /// same seed and budget replay the same units, up to thread timing.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Output shape.
    #[arg(long, value_enum, default_value_t = ReportFormat::Text)]
    pub format: ReportFormat,
    /// Write the report to this file instead of stdout.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Print what each section is doing to stderr.
    #[arg(long)]
    pub verbose: bool,
}

/// Shares of the budget, in section order.
const SHARES: [(&str, f64); 4] = [
    ("crash", 0.35),
    ("power", 0.25),
    ("faults", 0.20),
    ("corruption", 0.20),
];

/// Splits a budget across sections as they run: each gets its share of what is left, and at
/// least a fifth of its share of the whole, so a section after one that overran a tiny budget
/// still gets time of its own.
#[derive(Debug)]
struct Budget {
    total: Duration,
    end: Instant,
    shares_left: f64,
}

impl Budget {
    fn new(total: Duration) -> Budget {
        Budget {
            total,
            end: Instant::now() + total,
            shares_left: SHARES.iter().map(|s| s.1).sum(),
        }
    }

    /// How long the next section, whose share is `share`, may take.
    fn next(&mut self, share: f64) -> Duration {
        let left = self.end.saturating_duration_since(Instant::now());
        let d = left.mul_f64((share / self.shares_left).clamp(0.0, 1.0));
        self.shares_left = (self.shares_left - share).max(f64::EPSILON);
        d.max(self.total.mul_f64(share / 5.0))
    }
}

/// Run the report; returns the exit code.
pub fn run<W: Write>(args: &ReliabilityArgs, mut out: W) -> Result<i32> {
    if !(args.budget_secs > 0.0 && args.budget_secs.is_finite()) {
        return Err(ToolError::Usage(
            "--budget-secs must be a positive number of seconds".into(),
        ));
    }
    let exe = std::env::current_exe()
        .map_err(|e| ToolError::io(std::path::Path::new("<current executable>"), e))?;
    let started = Instant::now();
    let mut budget = Budget::new(Duration::from_secs_f64(args.budget_secs));
    let log = |msg: &str| {
        if args.verbose {
            eprintln!("reliability-report: {msg}");
        }
    };
    let mut report = Report::new(args, sections::machine(), sections::wal_backend());
    for (name, share) in SHARES {
        let slice = budget.next(share);
        log(&format!("{name}: {:.1} s", slice.as_secs_f64()));
        match name {
            "crash" => report.crash = sections::crash(&exe, args.seed, slice)?,
            "power" => report.power = sections::power(args.seed, slice),
            "faults" => report.faults = sections::faults(args.seed, slice),
            _ => report.corruption = sections::corruption(args.seed, slice),
        }
    }
    report.finish(started.elapsed());
    let text = match args.format {
        ReportFormat::Text => report.text(),
        ReportFormat::Json => {
            let mut j = serde_json::to_string_pretty(&report)
                .map_err(|e| ToolError::Usage(format!("serializing the report: {e}")))?;
            j.push('\n');
            j
        }
    };
    match &args.out {
        Some(path) => std::fs::write(path, text).map_err(|e| ToolError::io(path, e))?,
        None => out.write_all(text.as_bytes()).map_err(ToolError::Output)?,
    }
    Ok(if report.violations == 0 {
        EXIT_OK
    } else {
        EXIT_CORRUPT
    })
}
