//! The acceptance load of leveled compaction: N random single-cell puts (db_bench's
//! `fillrandom` shape), then flush and drain compactions, then one JSON line of write and space
//! amplification, peak memory and throughput.
//!
//! `benches/peers/rocksdb_writeamp.cc` runs the same load on RocksDB and prints the same
//! fields; `benches/peers/writeamp.sh` runs both and compares. The two programs must generate
//! byte-identical keys and values in the same order, so the generator below is specified
//! exactly and mirrored there:
//!
//! - splitmix64 as a counter: output `n` (0-based) is `mix(seed + (n + 1) * GAMMA)`.
//! - cell `i` consumes outputs `i * (1 + W)` .. `(i + 1) * (1 + W)`, `W = ceil(value_size / 8)`:
//!   the first is the key (`%016x` of `output % key_space`), the next `W` are the value's bytes
//!   (each output little-endian, the last one truncated).
//!
//! Being a counter, cell `i` needs no state from cell `i - 1`, so writer threads take cells
//! `t, t + T, t + 2T, ...` and together write exactly the single-threaded cells (in an
//! interleaved order).
//!
//! Definitions shared with the RocksDB side:
//! - user bytes = cells × (16 + value_size): key and value, nothing of either engine's framing.
//! - write amp = (bytes of files written by flushes + by compactions) / user bytes; the WAL is
//!   not counted (it is reported separately as `wal_bytes`).
//! - space amp = bytes of all live table files / bytes of the last non-empty level.

use std::io::Write as _;
use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Context, Result};
use cellar::{Db, Durability, FamilyDescriptor, Options, Put, TableDescriptor};
use clap::Parser;
use indicatif::{ProgressBar, ProgressStyle};

/// Random-write load for write amplification (Cellar side).
#[derive(Debug, Parser)]
struct Args {
    /// Cells written (one put each).
    #[arg(long, default_value_t = 10_000_000)]
    cells: u64,
    /// Value size in bytes.
    #[arg(long, default_value_t = 100)]
    value_size: usize,
    /// Keys are drawn uniformly from this many; defaults to `--cells`, so about 37% of writes
    /// overwrite an earlier key, as in db_bench's fillrandom.
    #[arg(long)]
    key_space: Option<u64>,
    /// Generator seed (the RocksDB side must get the same one).
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Database directory; must not hold a database already.
    #[arg(long, required_unless_present_any = ["print_cells", "count_unique"])]
    dir: Option<PathBuf>,
    /// Write buffer (memstore) size in bytes.
    #[arg(long, default_value_t = 64 << 20)]
    write_buffer: usize,
    /// Writer threads.
    #[arg(long, default_value_t = 1)]
    threads: u64,
    /// VERSIONS of the family. 1 by default because RocksDB keeps one value per key; HBase's
    /// default of 3 would keep overwritten values that the RocksDB side drops.
    #[arg(long, default_value_t = 1)]
    max_versions: u32,
    /// WAL durability: `sync` (SyncWal, the RocksDB-equivalent default) or `async` (AsyncWal:
    /// for telling WAL hand-off cost apart from the rest; not what the RocksDB side does).
    #[arg(long, default_value = "sync", value_parser = ["sync", "async"])]
    durability: String,
    /// Print the first N cells (key, value in hex) and exit: the script compares this with the
    /// RocksDB side's to check that both generate the same load.
    #[arg(long)]
    print_cells: Option<u64>,
    /// Print how many distinct keys the load writes and exit. The script divides each engine's
    /// live table bytes by that many cells' key + value bytes: space amplification over the
    /// live data, which counts obsolete versions that total / last level does not. Computed
    /// here, not during the load, so its bitmap does not count in the load's peak RSS.
    #[arg(long, conflicts_with = "print_cells")]
    count_unique: bool,
}

const GAMMA: u64 = 0x9E37_79B9_7F4A_7C15;

/// splitmix64's output `n` for `seed`.
fn splitmix(seed: u64, n: u64) -> u64 {
    let mut z = seed.wrapping_add(n.wrapping_add(1).wrapping_mul(GAMMA));
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Key and value of cell `i` (see the module comment); `value` is overwritten.
fn cell(seed: u64, key_space: u64, value_size: usize, i: u64, value: &mut [u8]) -> [u8; 16] {
    let words = value_size.div_ceil(8) as u64;
    let base = i * (1 + words);
    let k = splitmix(seed, base) % key_space;
    let mut key = [0u8; 16];
    key.copy_from_slice(format!("{k:016x}").as_bytes());
    for (j, chunk) in value.chunks_mut(8).enumerate() {
        let w = splitmix(seed, base + 1 + j as u64).to_le_bytes();
        chunk.copy_from_slice(&w[..chunk.len()]);
    }
    key
}

/// Peak resident set (VmHWM) in bytes, 0 if unknown.
fn peak_rss() -> u64 {
    cellar_tools::bench::peak_rss()
}

fn main() -> Result<()> {
    let a = Args::parse();
    cellar_tools::init_logging();
    anyhow::ensure!(a.threads >= 1, "--threads must be at least 1");
    let key_space = a.key_space.unwrap_or(a.cells).max(1);
    if let Some(n) = a.print_cells {
        let mut value = vec![0u8; a.value_size];
        let mut out = std::io::stdout().lock();
        for i in 0..n.min(a.cells) {
            let key = cell(a.seed, key_space, a.value_size, i, &mut value);
            let hex: String = value.iter().map(|b| format!("{b:02x}")).collect();
            writeln!(out, "{} {hex}", String::from_utf8_lossy(&key))?;
        }
        return Ok(());
    }
    if a.count_unique {
        let mut seen = vec![0u64; key_space.div_ceil(64) as usize];
        let mut value = vec![0u8; a.value_size];
        let mut unique = 0u64;
        for i in 0..a.cells {
            let key = cell(a.seed, key_space, a.value_size, i, &mut value);
            let k = u64::from_str_radix(std::str::from_utf8(&key)?, 16)?;
            let (w, bit) = ((k / 64) as usize, 1u64 << (k % 64));
            if seen[w] & bit == 0 {
                seen[w] |= bit;
                unique += 1;
            }
        }
        println!("{unique}");
        return Ok(());
    }
    let dir = a.dir.clone().context("--dir is required")?;

    // SyncWal: each write reaches the OS (write(2)) before it returns, with no fsync. That is
    // what RocksDB's default WriteOptions (sync = false, WAL on) do; the peer uses those.
    let durability = if a.durability == "async" {
        Durability::AsyncWal
    } else {
        Durability::SyncWal
    };
    let opts = Options {
        default_durability: durability,
        ..Options::default()
    }
    .write_buffer_size(a.write_buffer);
    // Compaction options stay at their defaults, which are the RocksDB side's settings:
    // dynamic level bytes, 256 MiB level base, 64 MiB target files, L0 triggers 4/20/36.
    let db = Db::open(&dir, opts).with_context(|| format!("open {}", dir.display()))?;
    // Family defaults otherwise (no compression, ROW bloom at 10 bits per key, 64 KiB blocks);
    // the RocksDB side is configured to match.
    db.create_table(
        TableDescriptor::new("load")
            .family(FamilyDescriptor::new("f").max_versions(a.max_versions)),
    )?;
    let table = db.table("load")?;

    let pb = ProgressBar::new(a.cells);
    pb.set_style(
        ProgressStyle::with_template(
            "{elapsed_precise} [{wide_bar}] {human_pos}/{human_len} cells, {per_sec}, eta {eta}",
        )
        .expect("static template"),
    );
    // Not a terminal (the script logs stderr to a file): plain lines instead of a bar.
    let plain = pb.is_hidden();

    let start = Instant::now();
    let done = std::sync::atomic::AtomicU64::new(0);
    std::thread::scope(|s| -> Result<()> {
        let mut handles = Vec::new();
        for t in 0..a.threads {
            let (table, pb, done, a) = (&table, &pb, &done, &a);
            handles.push(s.spawn(move || -> Result<()> {
                let mut value = vec![0u8; a.value_size];
                let mut i = t;
                while i < a.cells {
                    let key = cell(a.seed, key_space, a.value_size, i, &mut value);
                    table.put(Put::new(key.to_vec()).add("f", "q", value.clone()))?;
                    pb.inc(1);
                    let n = done.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
                    if plain && n % 1_000_000 == 0 {
                        let secs = start.elapsed().as_secs_f64();
                        eprintln!(
                            "cellar: {n} cells, {secs:.1} s, {:.0} cells/s, peak RSS {} MiB",
                            n as f64 / secs,
                            peak_rss() >> 20
                        );
                    }
                    i += a.threads;
                }
                Ok(())
            }));
        }
        for h in handles {
            h.join().expect("writer thread panicked")?;
        }
        Ok(())
    })?;
    pb.finish_and_clear();
    let load_secs = start.elapsed().as_secs_f64();
    eprintln!("cellar: load done in {load_secs:.1} s; flushing and draining compactions");
    db.flush()?;
    db.wait_for_compactions()?;
    let elapsed = start.elapsed().as_secs_f64();

    let st = db.stats();
    let compaction_bytes: u64 = st.compaction.levels.iter().map(|l| l.bytes_written).sum();
    let live: u64 = st.compaction.levels.iter().map(|l| l.bytes).sum();
    let user_bytes = a.cells * (16 + a.value_size as u64);
    let disk = st.flushed_bytes + compaction_bytes;
    eprintln!("{}", db.stats_report());
    let line = serde_json::json!({
        "engine": "cellar",
        "cells": a.cells,
        "key_space": key_space,
        "value_size": a.value_size,
        "threads": a.threads,
        "durability": a.durability,
        "seed": a.seed,
        "user_bytes": user_bytes,
        "flush_bytes_written": st.flushed_bytes,
        "compaction_bytes_written": compaction_bytes,
        "disk_bytes_written": disk,
        "write_amp": disk as f64 / user_bytes.max(1) as f64,
        // The engine's own figure counts the 1-byte qualifier in user bytes: slightly lower.
        "engine_write_amp": st.write_amplification(),
        "space_amp": st.space_amplification(),
        "live_table_bytes": live,
        "wal_bytes": st.wal.bytes,
        "peak_rss_bytes": peak_rss(),
        "load_secs": load_secs,
        "elapsed_secs": elapsed,
        // Over the whole run, flush and compaction drain included, so compaction debt left
        // behind is not free.
        "cells_per_sec": a.cells as f64 / elapsed,
        "load_cells_per_sec": a.cells as f64 / load_secs,
    });
    let mut out = std::io::stdout().lock();
    writeln!(out, "{line}")?;
    drop(out);
    db.close()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Pins the generator to splitmix64's published first output; the script compares whole
    /// cells with the RocksDB side (`--print-cells`).
    #[test]
    fn generator_is_pinned() {
        assert_eq!(splitmix(0, 0), 0xE220_A839_7B1D_CDAF);
        let mut v = [0u8; 10];
        let k = cell(42, 1000, 10, 0, &mut v);
        assert_eq!(&k[..12], b"000000000000");
        assert!(k.iter().all(u8::is_ascii_hexdigit));
    }
}
