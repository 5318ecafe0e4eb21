//! `cellar bench`: db_bench-style workloads and YCSB A–F against an embedded database.
//!
//! ```text
//! cellar bench --benchmarks fillseq,readrandom,seekrandom --num 1000000 --threads 4
//! cellar bench --benchmarks ycsb-a,ycsb-c --distribution zipfian --format json
//! ```
//!
//! Data model: one table `bench`, one family `f` with VERSIONS 1 (RocksDB keeps one value per
//! key; comparisons need the same), one cell per row with an empty qualifier, row = key.
//!
//! Each benchmark runs `--threads` threads (plus one writer for `readwhilewriting`) for `--num`
//! operations (`--reads` for reads) split between them, or for `--duration` seconds. Every
//! operation's latency goes into an HDR histogram. `fill*` start from an empty table (the
//! `bench` table is dropped and created again, never a directory removed) unless
//! `--use-existing-db`. After a benchmark that writes, the memstores are flushed and the due
//! compactions run, untimed, so the write amplification reported is that of the load (as
//! `benches/src/bin/writeamp.rs` measures it) and reads that follow see a settled tree.
//!
//! `deleterange` writes `--deletes` row-range deletes of `--range-width` keys each; its settling
//! is the range-delete trigger dropping the files they hold whole (`files_dropped`,
//! `db_bytes`). `compact` times one major compaction of the table: after `deleterange`, what
//! reclaiming the rest of the space costs.
//!
//! Output: a db_bench line per benchmark and a summary table, or with `--format json` one JSON
//! object per line per benchmark (fields in [`BenchResult`]; a contract).

pub mod gen;
mod report;
mod run;

use std::path::PathBuf;

pub use report::{peak_rss, BenchResult};

use crate::{Result, ToolError};

/// Every db_bench-style benchmark, in the order of the default list.
pub const DB_BENCH: &[&str] = &[
    "fillseq",
    "fillrandom",
    "overwrite",
    "readrandom",
    "readmissing",
    "multireadrandom",
    "seekrandom",
    "readseq",
    "readreverse",
    "deleterandom",
    "deleterange",
    "compact",
    "readwhilewriting",
    "fillsync",
];

/// The YCSB workloads.
pub const YCSB: &[&str] = &["ycsb-a", "ycsb-b", "ycsb-c", "ycsb-d", "ycsb-e", "ycsb-f"];

/// `--durability` of the writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Default)]
pub enum BenchDurability {
    /// SkipWal: no WAL record.
    Skip,
    /// AsyncWal: queued, written shortly.
    Async,
    /// SyncWal: written into the OS before the put returns (RocksDB's default WriteOptions).
    #[default]
    Sync,
    /// FsyncWal: fdatasynced before the put returns.
    Fsync,
}

impl BenchDurability {
    fn engine(self) -> cellar::Durability {
        match self {
            BenchDurability::Skip => cellar::Durability::SkipWal,
            BenchDurability::Async => cellar::Durability::AsyncWal,
            BenchDurability::Sync => cellar::Durability::SyncWal,
            BenchDurability::Fsync => cellar::Durability::FsyncWal,
        }
    }

    fn name(self) -> &'static str {
        match self {
            BenchDurability::Skip => "skip",
            BenchDurability::Async => "async",
            BenchDurability::Sync => "sync",
            BenchDurability::Fsync => "fsync",
        }
    }
}

/// `--format` of the bench.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Default)]
pub enum BenchFormat {
    /// db_bench lines and a summary table.
    #[default]
    Text,
    /// One JSON object per line per benchmark.
    Json,
}

/// Arguments of `cellar bench`.
#[derive(Debug, Clone, clap::Args)]
pub struct BenchArgs {
    /// Comma-separated benchmarks: fillseq, fillrandom, overwrite, readrandom, readmissing,
    /// multireadrandom, seekrandom, readseq, readreverse, deleterandom, deleterange, compact,
    /// readwhilewriting, fillsync, ycsb-a … ycsb-f.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "fillseq,fillrandom,overwrite,readrandom,readmissing,seekrandom,readseq,readreverse"
    )]
    pub benchmarks: Vec<String>,
    /// Keys in the database; operations of write benchmarks.
    #[arg(long, default_value_t = 1_000_000)]
    pub num: u64,
    /// Operations of read benchmarks (default: `--num`).
    #[arg(long)]
    pub reads: Option<u64>,
    /// Key size in bytes.
    #[arg(long, default_value_t = 16)]
    pub key_size: usize,
    /// Value size in bytes.
    #[arg(long, default_value_t = 100)]
    pub value_size: usize,
    /// Threads running each benchmark (each takes an equal share of the operations).
    #[arg(long, default_value_t = 1)]
    pub threads: usize,
    /// Durability of the writes (fillsync, and deleterange's row-range deletes, always fsync).
    #[arg(long, value_enum, default_value_t = BenchDurability::Sync)]
    pub durability: BenchDurability,
    /// Run each benchmark for this many seconds instead of a fixed number of operations.
    #[arg(long)]
    pub duration: Option<f64>,
    /// Keys per `get_many` call of `multireadrandom` (db_bench's `--batch_size`).
    #[arg(long, default_value_t = 32)]
    pub batch_size: usize,
    /// Rows read after each seek of `seekrandom` (db_bench's `--seek_nexts`).
    #[arg(long, default_value_t = 100)]
    pub seek_nexts: usize,
    /// Keys each row-range delete of `deleterange` covers (db_bench's
    /// `--range_tombstone_width`).
    #[arg(long, default_value_t = 100)]
    pub range_width: u64,
    /// Row-range deletes `deleterange` writes (default: enough to cover a tenth of `--num`
    /// keys, were they disjoint).
    #[arg(long)]
    pub deletes: Option<u64>,
    /// Database directory (default: a temporary one, removed at the end).
    #[arg(long)]
    pub db: Option<PathBuf>,
    /// Keep the data `fill*` find instead of starting from an empty table.
    #[arg(long)]
    pub use_existing_db: bool,
    /// Key distribution of the YCSB workloads (default: each workload's own — zipfian, or
    /// latest for D).
    #[arg(long, value_enum)]
    pub distribution: Option<gen::Distribution>,
    /// Memory budget of the database (block cache + memstores), e.g. `512M` (default: the
    /// engine's).
    #[arg(long, value_parser = parse_size_arg)]
    pub memory_budget: Option<u64>,
    /// Size of the files compactions write, e.g. `64M` (db_bench's `--target_file_size_base`;
    /// default: the engine's).
    #[arg(long, value_parser = parse_size_arg)]
    pub target_file_size: Option<u64>,
    /// Seed of the key and value generators.
    #[arg(long, default_value_t = 301)]
    pub seed: u64,
    /// Output shape.
    #[arg(long, value_enum, default_value_t = BenchFormat::Text)]
    pub format: BenchFormat,
}

impl BenchArgs {
    /// Operations of `deleterange`.
    fn deletes(&self) -> u64 {
        self.deletes
            .unwrap_or((self.num / self.range_width / 10).max(1))
    }
}

fn parse_size_arg(s: &str) -> std::result::Result<u64, String> {
    crate::text::parse_size(s)
}

impl BenchArgs {
    fn validate(&self) -> Result<()> {
        let bad = |m: String| Err(ToolError::Usage(m));
        for b in &self.benchmarks {
            if !DB_BENCH.contains(&b.as_str()) && !YCSB.contains(&b.as_str()) {
                return bad(format!(
                    "unknown benchmark {b:?}; known: {}, {}",
                    DB_BENCH.join(", "),
                    YCSB.join(", ")
                ));
            }
        }
        if self.threads == 0 || self.threads > 1024 {
            return bad("--threads must be between 1 and 1024".into());
        }
        if self.num == 0 {
            return bad("--num must be at least 1".into());
        }
        if self.target_file_size.is_some_and(|t| t < 1024) {
            return bad("--target-file-size must be at least 1K".into());
        }
        if self.range_width == 0 {
            return bad("--range-width must be at least 1".into());
        }
        if self.deletes == Some(0) {
            return bad("--deletes must be at least 1".into());
        }
        if self.batch_size == 0 || self.batch_size > 1 << 20 {
            return bad("--batch-size must be between 1 and 1048576".into());
        }
        if self.key_size == 0 || self.key_size > 4096 {
            return bad("--key-size must be between 1 and 4096".into());
        }
        if gen::Keys::digits(self.num - 1) > self.key_size {
            return bad(format!(
                "--key-size {} cannot hold {} distinct keys (keys are zero-padded decimals)",
                self.key_size, self.num
            ));
        }
        if self.value_size > 64 << 20 {
            return bad("--value-size must be at most 64 MiB".into());
        }
        if let Some(d) = self.duration {
            if !(d > 0.0 && d.is_finite()) {
                return bad("--duration must be a positive number of seconds".into());
            }
        }
        Ok(())
    }
}

/// Run `cellar bench`; returns the exit code.
pub fn run<W: std::io::Write>(args: &BenchArgs, out: W) -> Result<i32> {
    args.validate()?;
    run::run(args, out)
}
