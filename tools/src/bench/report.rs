//! Results of `cellar bench`: the JSON line of a benchmark and the text forms.

use serde::Serialize;

use crate::text::{human_size, Align, Table};

/// One benchmark's outcome; `--format json` prints one per line. Latencies in microseconds.
#[derive(Debug, Clone, Serialize)]
pub struct BenchResult {
    /// Benchmark name (`fillseq`, `ycsb-a`, …).
    pub benchmark: String,
    /// Operations done (a row read counts as one in readseq/readreverse).
    pub ops: u64,
    /// Threads (readwhilewriting's writer not included).
    pub threads: usize,
    /// Wall time of the timed part.
    pub seconds: f64,
    /// `ops / seconds`.
    pub ops_per_sec: f64,
    /// Key and value bytes written or read per second, in MiB/s.
    pub mb_per_sec: f64,
    /// Mean latency: recorded time over `ops` (for multireadrandom, whose samples are batch
    /// calls, the time per key).
    pub micros_per_op: f64,
    /// Median latency (of one operation; of one batch call for multireadrandom).
    pub p50_us: f64,
    /// 99th percentile.
    pub p99_us: f64,
    /// 99.9th percentile.
    pub p999_us: f64,
    /// Slowest operation.
    pub max_us: f64,
    /// Reads that found their key (null for benchmarks that do not read).
    pub found: Option<u64>,
    /// Bytes written to disk by flushes and compactions per user byte written, during this
    /// benchmark and the settling after it (0 for read-only benchmarks).
    pub write_amplification: f64,
    /// Live file bytes per byte in the last non-empty level, after the benchmark.
    pub space_amplification: f64,
    /// Time writers were stopped by flush or compaction debt, during the benchmark.
    pub stall_micros: u64,
    /// WAL records per fdatasync during the benchmark: how many writes group commit merged
    /// into each sync (null when nothing was synced).
    pub wal_records_per_sync: Option<f64>,
    /// Block cache hits over lookups during the benchmark (0 without lookups).
    pub block_cache_hit_ratio: f64,
    /// Peak resident set of the process so far (VmHWM), bytes.
    pub peak_rss_bytes: u64,
    /// Bytes of live HFiles after the benchmark.
    pub db_bytes: u64,
    /// Seconds spent flushing and compacting after a writing benchmark (untimed).
    pub settle_seconds: f64,
    /// Files compactions removed unread during the benchmark and its settling because a
    /// row-range delete masked every cell in them (`deleterange`), and their bytes.
    pub files_dropped: u64,
    /// See `files_dropped`.
    pub bytes_dropped: u64,
    /// `--key-size`.
    pub key_size: usize,
    /// `--value-size`.
    pub value_size: usize,
    /// Durability of the writes.
    pub durability: &'static str,
}

/// db_bench's line: `fillseq      :       2.345 micros/op 426439 ops/sec;   47.1 MB/s`.
pub fn line(r: &BenchResult) -> String {
    let found = match r.found {
        Some(f) => format!(" ({f} of {} found)", r.ops),
        None if r.files_dropped > 0 => format!(
            " ({} files, {} dropped unread)",
            r.files_dropped,
            human_size(r.bytes_dropped)
        ),
        None => String::new(),
    };
    format!(
        "{:<16}: {:>11.3} micros/op {:>9.0} ops/sec; {:>7.1} MB/s{found}\n",
        r.benchmark, r.micros_per_op, r.ops_per_sec, r.mb_per_sec
    )
}

fn us(v: f64) -> String {
    if v >= 10_000.0 {
        format!("{:.1} ms", v / 1000.0)
    } else if v < 1.0 {
        // Cached sequential reads take tens of nanoseconds: keep them distinguishable from 0.
        format!("{v:.3}")
    } else {
        format!("{v:.1}")
    }
}

/// The summary table of every benchmark run.
pub fn summary(results: &[BenchResult]) -> String {
    let mut t = Table::new(
        &[
            "BENCHMARK",
            "OPS/S",
            "MB/S",
            "P50 US",
            "P99 US",
            "P99.9 US",
            "WRITE AMP",
            "SPACE AMP",
            "STALL MS",
            "CACHE HIT",
            "DB SIZE",
            "PEAK RSS",
            "REC/SYNC",
        ],
        &[
            Align::Left,
            Align::Right,
            Align::Right,
            Align::Right,
            Align::Right,
            Align::Right,
            Align::Right,
            Align::Right,
            Align::Right,
            Align::Right,
            Align::Right,
            Align::Right,
            Align::Right,
        ],
    );
    for r in results {
        t.row(vec![
            r.benchmark.clone(),
            format!("{:.0}", r.ops_per_sec),
            format!("{:.1}", r.mb_per_sec),
            us(r.p50_us),
            us(r.p99_us),
            us(r.p999_us),
            format!("{:.2}", r.write_amplification),
            format!("{:.2}", r.space_amplification),
            format!("{:.1}", r.stall_micros as f64 / 1000.0),
            format!("{:.1}%", r.block_cache_hit_ratio * 100.0),
            human_size(r.db_bytes),
            human_size(r.peak_rss_bytes),
            r.wal_records_per_sync
                .map_or_else(|| "-".to_owned(), |v| format!("{v:.1}")),
        ]);
    }
    let mut s = String::new();
    t.render(0, &mut s);
    s
}

/// Peak resident set (VmHWM) in bytes, 0 where /proc is missing.
pub fn peak_rss() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        })
        .map_or(0, |kb| kb * 1024)
}
