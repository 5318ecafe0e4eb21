//! `compare`: the same db_bench-style workloads through every engine, interleaved, each run in
//! a child process of its own (so peak RSS, write bytes and caches are per engine), with the
//! median of the rounds and Cellar's ratio to each peer.
//!
//! One round of an engine (phase `main`) on a fresh directory: `fillrandom` (`num` puts of
//! keys drawn uniformly, with repeats, as db_bench does), `overwrite` (as many again), then
//! untimed settling (flush, compactions quiet), `readrandom`, `readmissing` (db_bench's "key
//! plus a dot"), `multireadrandom` (readrandom's keys `--batch-size` at a time, through each
//! engine's batched read: Cellar's `get_many`, RocksDB's batched `MultiGet`, one redb read
//! transaction per batch, fjall one key at a time), `seekrandom` (seek then `seek_nexts`
//! entries), `readseq` (every entry), `readrandom_cached` (readrandom again, after readseq
//! read every block). The B-tree (redb) instead loads the same set of keys untimed and runs
//! the reads. Phase `sync`: `fillsync` (one writer, an fsync per put) and the same with 16
//! writers (group commit), with the records each of Cellar's fdatasyncs carried in that run
//! (`Engine::log_counters`). Phase `bulk` (not run by default): `bulkload`, `num` distinct keys
//! in order through each engine's bulk path (`Engine::bulk_load`: an external file written and
//! ingested, moved rather than copied for both Cellar and RocksDB, or a sorted ingestion),
//! timed from the first key to the ingestion's return, then
//! settled, with its write amplification and size on disk, and `bulk_readrandom` over the
//! loaded keys. Phase `changes` (not run by default; Cellar and RocksDB): `num` puts as
//! fillrandom's with the whole log kept, settled, then `changes`: every write read back from
//! the log's start as a change feed (Cellar's `Db::changes_since`, RocksDB's
//! `GetUpdatesSince`), each key and value touched, in batches per second.
//!
//! Write amplification is the child's `write_bytes` from /proc/self/io (bytes the process sent
//! to storage, every file included) over the user bytes written; disk size is the directory's
//! allocated bytes after settling.

pub mod engines;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use cellar_tools::bench::gen::{Keys, Rng, Values};
use serde_json::json;

use engines::{Config, Engine};

/// Arguments of `compare` (and of the child runs it starts).
#[derive(Debug, Clone, clap::Args)]
pub struct CompareArgs {
    /// Keys written by fillrandom (and again by overwrite).
    #[arg(long, default_value_t = 2_000_000)]
    pub num: u64,
    /// Point reads of readrandom and readmissing (default: num).
    #[arg(long)]
    pub reads: Option<u64>,
    /// Seeks of seekrandom (default: num / 20).
    #[arg(long)]
    pub seeks: Option<u64>,
    /// Entries read after each seek.
    #[arg(long, default_value_t = 100)]
    pub seek_nexts: usize,
    /// Key size in bytes (decimal, zero-padded).
    #[arg(long, default_value_t = 16)]
    pub key_size: usize,
    /// Value size in bytes (random, incompressible).
    #[arg(long, default_value_t = 100)]
    pub value_size: usize,
    /// Fsynced puts of the single writer in the sync phase; the 16 writers do 4× as many.
    #[arg(long, default_value_t = 2000)]
    pub sync_ops: u64,
    /// Writers of the group-commit run.
    #[arg(long, default_value_t = 16)]
    pub sync_threads: usize,
    /// Interleaved rounds (engines A, B, C, A, B, C, ...); figures are medians.
    #[arg(long, default_value_t = 5)]
    pub rounds: usize,
    /// Engines, comma separated (default: every one built in).
    #[arg(long, value_delimiter = ',')]
    pub engines: Vec<String>,
    /// Phases to run: main, sync, bulk, changes.
    #[arg(long, value_delimiter = ',', default_value = "main,sync")]
    pub phases: Vec<String>,
    /// Keys per batched read of multireadrandom.
    #[arg(long, default_value_t = 32)]
    pub batch_size: usize,
    /// Block cache bytes of every engine.
    #[arg(long, default_value_t = 256 << 20)]
    pub cache_bytes: usize,
    /// Write buffer bytes of every engine.
    #[arg(long, default_value_t = 64 << 20)]
    pub write_buffer_bytes: usize,
    /// Cellar's data block size.
    #[arg(long, default_value_t = 16 << 10)]
    pub cellar_block_size: u32,
    /// Where the databases go (a fresh subdirectory per run, removed after it).
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Seed of the key and value generators (the same for every engine).
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// Print the medians as JSON instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Also print a Markdown table (for benches/RESULTS.md).
    #[arg(long)]
    pub markdown: bool,
    /// Keep each run's database directory (its path goes to stderr), to inspect the shape it
    /// was left in (`cellar levels DIR`).
    #[arg(long)]
    pub keep: bool,
}

impl CompareArgs {
    fn config(&self) -> Config {
        Config {
            cache_bytes: self.cache_bytes,
            write_buffer_bytes: self.write_buffer_bytes,
            cellar_block_size: self.cellar_block_size,
            keep_log: false,
        }
    }

    fn reads(&self) -> u64 {
        self.reads.unwrap_or(self.num)
    }

    fn seeks(&self) -> u64 {
        self.seeks.unwrap_or(self.num / 20).max(1)
    }
}

/// Figures of one child run: name → value.
type Figures = BTreeMap<String, f64>;

/// `/proc/self/io`'s `write_bytes` (0 where missing).
fn write_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/io")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("write_bytes:"))
                .and_then(|v| v.trim().parse().ok())
        })
        .unwrap_or(0)
}

/// Allocated bytes of every file under `dir`.
fn disk_bytes(dir: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    let mut total = 0;
    let Ok(rd) = std::fs::read_dir(dir) else {
        return 0;
    };
    for e in rd.flatten() {
        let Ok(m) = e.metadata() else { continue };
        if m.is_dir() {
            total += disk_bytes(&e.path());
        } else {
            total += m.blocks() * 512;
        }
    }
    total
}

/// Time `ops` calls of `f`; operations per second.
fn timed(ops: u64, mut f: impl FnMut(u64) -> Result<()>) -> Result<f64> {
    let start = Instant::now();
    for i in 0..ops {
        f(i)?;
    }
    Ok(ops as f64 / start.elapsed().as_secs_f64().max(1e-9))
}

/// The keys fillrandom and overwrite write, in order (the B-tree loads their set).
fn write_sequence(a: &CompareArgs) -> impl Iterator<Item = u64> {
    let mut rng = Rng::new(a.seed);
    let num = a.num;
    (0..2 * num).map(move |_| rng.below(num))
}

/// Phase `main` of one engine, in this (child) process.
fn run_main(a: &CompareArgs, engine: &dyn Engine, dir: &Path) -> Result<Figures> {
    let keys = Keys::new(a.key_size);
    let values = Values::new(a.value_size, a.seed);
    let mut vrng = Rng::new(a.seed ^ 0xfeed);
    let mut f = Figures::new();
    let mut present = vec![false; a.num as usize];
    let entry = (a.key_size + a.value_size) as u64;
    let wb0 = write_bytes();
    let mut k = Vec::new();
    if engine.timed_writes() {
        let mut seq = write_sequence(a);
        for name in ["fillrandom", "overwrite"] {
            let ops = timed(a.num, |_| {
                let n = seq.next().unwrap_or(0);
                present[n as usize] = true;
                keys.fill(n, &mut k);
                engine.put(&k, values.get(&mut vrng), false)
            })?;
            f.insert(name.into(), ops);
        }
        f.insert("user_bytes".into(), (2 * a.num * entry) as f64);
    } else {
        for n in write_sequence(a) {
            present[n as usize] = true;
        }
        let mut items = present
            .iter()
            .enumerate()
            .filter(|(_, p)| **p)
            .map(|(n, _)| {
                let mut k = Vec::new();
                keys.fill(n as u64, &mut k);
                (k, values.get(&mut vrng).to_vec())
            });
        engine.load(&mut items)?;
    }
    engine.settle()?;
    let live = present.iter().filter(|p| **p).count() as u64;
    f.insert("live_bytes".into(), (live * entry) as f64);
    let wb = write_bytes().saturating_sub(wb0);
    if engine.timed_writes() {
        f.insert("write_bytes".into(), wb as f64);
        f.insert("write_amp".into(), wb as f64 / (2 * a.num * entry) as f64);
    }
    f.insert("disk_bytes".into(), disk_bytes(dir) as f64);

    let mut rng = Rng::new(a.seed ^ 0x7ead);
    let ops = read_random(a, engine, &keys, &present, &mut rng)?;
    f.insert("readrandom".into(), ops);
    let ops = timed(a.reads(), |_| {
        keys.fill_missing(rng.below(a.num), &mut k);
        if engine.get(&k)? {
            bail!("readmissing found a key never written");
        }
        Ok(())
    })?;
    f.insert("readmissing".into(), ops);
    // readrandom's workload read `batch_size` keys per call (db_bench's multireadrandom).
    let batch = a.batch_size.max(1);
    let mut batch_keys: Vec<Vec<u8>> = Vec::with_capacity(batch);
    let mut batch_ns: Vec<u64> = Vec::with_capacity(batch);
    let mut batch_found = vec![false; batch];
    let calls = a.reads().div_ceil(batch as u64);
    let start = Instant::now();
    let mut done = 0u64;
    for _ in 0..calls {
        let n = (batch as u64).min(a.reads() - done) as usize;
        batch_keys.resize_with(n, Vec::new);
        batch_ns.clear();
        for key in &mut batch_keys {
            let i = rng.below(a.num);
            keys.fill(i, key);
            batch_ns.push(i);
        }
        let found = &mut batch_found[..n];
        engine.multi_get(&batch_keys, found)?;
        for (&i, &hit) in batch_ns.iter().zip(found.iter()) {
            if hit != present[i as usize] {
                bail!(
                    "multireadrandom: key {i} found={hit}, expected {}",
                    present[i as usize]
                );
            }
        }
        done += n as u64;
    }
    f.insert(
        "multireadrandom".into(),
        done as f64 / start.elapsed().as_secs_f64().max(1e-9),
    );
    let ops = timed(a.seeks(), |_| {
        keys.fill(rng.below(a.num), &mut k);
        engine.seek(&k, a.seek_nexts).map(drop)
    })?;
    f.insert("seekrandom".into(), ops);
    let start = Instant::now();
    let n = engine.scan_all()?;
    if n != live {
        bail!("readseq read {n} entries, {live} were written");
    }
    f.insert(
        "readseq".into(),
        n as f64 / start.elapsed().as_secs_f64().max(1e-9),
    );
    // readrandom again, every block now read at least once (readseq touched them all): the
    // issue's "point reads once the data is cached". The first pass above also pays each
    // block's first read from the OS's page cache (and Cellar's decompression), and for
    // Cellar any compaction its reads set off (LevelDB's seek compaction).
    let ops = read_random(a, engine, &keys, &present, &mut rng)?;
    f.insert("readrandom_cached".into(), ops);
    Ok(f)
}

/// `reads()` Gets of keys drawn uniformly from `num`, each checked against `present`;
/// operations per second.
fn read_random(
    a: &CompareArgs,
    engine: &dyn Engine,
    keys: &Keys,
    present: &[bool],
    rng: &mut Rng,
) -> Result<f64> {
    let mut k = Vec::new();
    timed(a.reads(), |_| {
        let n = rng.below(a.num);
        keys.fill(n, &mut k);
        let hit = engine.get(&k)?;
        if hit != present[n as usize] {
            bail!(
                "readrandom: key {n} found={hit}, expected {}",
                present[n as usize]
            );
        }
        Ok(())
    })
}

/// Phase `sync` of one engine: one fsyncing writer, then `sync_threads` of them.
fn run_sync(a: &CompareArgs, engine: &dyn Engine) -> Result<Figures> {
    let keys = Keys::new(a.key_size);
    let values = Values::new(a.value_size, a.seed);
    let mut f = Figures::new();
    let mut rng = Rng::new(a.seed);
    let mut k = Vec::new();
    let ops = timed(a.sync_ops, |_| {
        keys.fill(rng.below(a.num), &mut k);
        engine.put(&k, values.get(&mut rng), true)
    })?;
    f.insert("fillsync".into(), ops);
    let per = (4 * a.sync_ops / a.sync_threads as u64).max(1);
    let log0 = engine.log_counters();
    let start = Instant::now();
    std::thread::scope(|s| -> Result<()> {
        let hs: Vec<_> = (0..a.sync_threads)
            .map(|t| {
                let (keys, values) = (&keys, &values);
                s.spawn(move || -> Result<()> {
                    let mut rng = Rng::new(a.seed ^ ((t as u64 + 1) * 0x9e37));
                    let mut k = Vec::new();
                    for _ in 0..per {
                        keys.fill(rng.below(a.num), &mut k);
                        engine.put(&k, values.get(&mut rng), true)?;
                    }
                    Ok(())
                })
            })
            .collect();
        for h in hs {
            h.join()
                .map_err(|_| anyhow::anyhow!("a writer panicked"))??;
        }
        Ok(())
    })?;
    let total = per * a.sync_threads as u64;
    let group = total as f64 / start.elapsed().as_secs_f64().max(1e-9);
    f.insert("fillsync_group".into(), group);
    f.insert("group_commit_gain".into(), group / ops);
    if let (Some((r0, s0)), Some((r1, s1))) = (log0, engine.log_counters()) {
        if s1 > s0 {
            f.insert(
                "group_records_per_sync".into(),
                (r1 - r0) as f64 / (s1 - s0) as f64,
            );
        }
    }
    Ok(f)
}

/// Phase `bulk` of one engine: see the module docs. No figures for an engine without a bulk
/// path.
fn run_bulk(a: &CompareArgs, engine: &dyn Engine, dir: &Path, base: &Path) -> Result<Figures> {
    let keys = Keys::new(a.key_size);
    let values = Values::new(a.value_size, a.seed);
    let mut vrng = Rng::new(a.seed ^ 0xb01c);
    let mut f = Figures::new();
    let scratch = base.join("scratch");
    std::fs::create_dir_all(&scratch)?;
    let entry = (a.key_size + a.value_size) as u64;
    let wb0 = write_bytes();
    let start = Instant::now();
    let mut items = (0..a.num).map(|n| {
        let mut k = Vec::new();
        keys.fill(n, &mut k);
        (k, values.get(&mut vrng).to_vec())
    });
    if !engine.bulk_load(&mut items, &scratch)? {
        return Ok(f);
    }
    f.insert(
        "bulkload".into(),
        a.num as f64 / start.elapsed().as_secs_f64().max(1e-9),
    );
    engine.settle()?;
    let wb = write_bytes().saturating_sub(wb0);
    f.insert("bulk_write_amp".into(), wb as f64 / (a.num * entry) as f64);
    // The external file is the loader's, not the database's.
    std::fs::remove_dir_all(&scratch)?;
    f.insert("bulk_disk_bytes".into(), disk_bytes(dir) as f64);
    let present = vec![true; a.num as usize];
    let mut rng = Rng::new(a.seed ^ 0x7ead);
    let ops = read_random(a, engine, &keys, &present, &mut rng)?;
    f.insert("bulk_readrandom".into(), ops);
    Ok(f)
}

/// Phase `changes` of one engine: see the module docs. No figures for an engine without a
/// change feed.
fn run_changes(a: &CompareArgs, engine: &dyn Engine) -> Result<Figures> {
    let keys = Keys::new(a.key_size);
    let values = Values::new(a.value_size, a.seed);
    let mut rng = Rng::new(a.seed ^ 0xcdc);
    let mut f = Figures::new();
    let mut k = Vec::new();
    for _ in 0..a.num {
        keys.fill(rng.below(a.num), &mut k);
        engine.put(&k, values.get(&mut rng), false)?;
    }
    engine.settle()?;
    let start = Instant::now();
    let Some((batches, bytes)) = engine.read_changes()? else {
        return Ok(f);
    };
    let secs = start.elapsed().as_secs_f64().max(1e-9);
    // The `rocksdb` crate this build pins (0.20.1) steps past the first batch before it
    // reads one (rust-rocksdb PR #771, fixed in later releases): one batch fewer is its whole
    // log.
    let entry = (a.key_size + a.value_size) as u64;
    if !(batches == a.num || batches + 1 == a.num) || bytes != batches * entry {
        bail!(
            "the change feed read {batches} batches of {bytes} bytes, not {} of {}",
            a.num,
            a.num * entry
        );
    }
    f.insert("changes".into(), batches as f64 / secs);
    Ok(f)
}

/// Peak resident set (VmHWM) of this process, bytes.
fn peak_rss() -> u64 {
    cellar_tools::bench::peak_rss()
}

/// The child: run `phase` of `engine` on a fresh directory under `base`, print one JSON line.
pub fn child(a: &CompareArgs, engine: &str, phase: &str) -> Result<()> {
    let base = a.dir.clone().unwrap_or_else(std::env::temp_dir);
    std::fs::create_dir_all(&base).with_context(|| format!("creating {}", base.display()))?;
    let tmp = tempfile::Builder::new()
        .prefix(&format!("compare-{engine}-"))
        .tempdir_in(&base)?;
    let dir = tmp.path().join("db");
    let cfg = Config {
        keep_log: phase == "changes",
        ..a.config()
    };
    let e = engines::open(engine, &dir, &cfg)?;
    let mut f = match phase {
        "main" => run_main(a, &*e, &dir)?,
        "sync" => run_sync(a, &*e)?,
        "bulk" => run_bulk(a, &*e, &dir, tmp.path())?,
        "changes" => run_changes(a, &*e)?,
        other => bail!("unknown phase {other:?}"),
    };
    drop(e);
    if a.keep {
        eprintln!("{engine} {phase}: kept {}", tmp.keep().display());
    }
    f.insert("peak_rss".into(), peak_rss() as f64);
    println!("{}", serde_json::to_string(&f)?);
    Ok(())
}

fn spawn_child(a: &CompareArgs, engine: &str, phase: &str) -> Result<Figures> {
    let exe = std::env::current_exe()?;
    let mut cmd = Command::new(exe);
    cmd.arg("compare-child")
        .arg("--engine")
        .arg(engine)
        .arg("--phase")
        .arg(phase);
    cmd.args([
        format!("--num={}", a.num),
        format!("--reads={}", a.reads()),
        format!("--seeks={}", a.seeks()),
        format!("--seek-nexts={}", a.seek_nexts),
        format!("--batch-size={}", a.batch_size),
        format!("--key-size={}", a.key_size),
        format!("--value-size={}", a.value_size),
        format!("--sync-ops={}", a.sync_ops),
        format!("--sync-threads={}", a.sync_threads),
        format!("--cache-bytes={}", a.cache_bytes),
        format!("--write-buffer-bytes={}", a.write_buffer_bytes),
        format!("--cellar-block-size={}", a.cellar_block_size),
        format!("--seed={}", a.seed),
    ]);
    if let Some(d) = &a.dir {
        cmd.arg("--dir").arg(d);
    }
    if a.keep {
        cmd.arg("--keep");
    }
    let out = cmd.output().context("starting a child run")?;
    if !out.status.success() {
        bail!(
            "{engine} {phase} run failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    if a.keep {
        eprint!("{}", String::from_utf8_lossy(&out.stderr));
    }
    let line = String::from_utf8_lossy(&out.stdout);
    let line = line.lines().last().unwrap_or_default();
    serde_json::from_str(line)
        .with_context(|| format!("parsing the {engine} child's output {line:?}"))
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// A reported figure: its key, label, unit scale and whether more is better.
struct Row {
    key: &'static str,
    label: &'static str,
    higher_is_better: bool,
    show: fn(f64) -> String,
}

fn ops(v: f64) -> String {
    if v >= 1e6 {
        format!("{:.2}M", v / 1e6)
    } else if v >= 1e3 {
        format!("{:.1}k", v / 1e3)
    } else {
        format!("{v:.0}")
    }
}

fn mib(v: f64) -> String {
    format!("{:.0} MiB", v / (1u64 << 20) as f64)
}

fn plain(v: f64) -> String {
    format!("{v:.2}")
}

const ROWS: [Row; 20] = [
    Row {
        key: "fillrandom",
        label: "fillrandom ops/s",
        higher_is_better: true,
        show: ops,
    },
    Row {
        key: "overwrite",
        label: "overwrite ops/s",
        higher_is_better: true,
        show: ops,
    },
    Row {
        key: "readrandom",
        label: "readrandom ops/s",
        higher_is_better: true,
        show: ops,
    },
    Row {
        key: "readmissing",
        label: "readmissing ops/s",
        higher_is_better: true,
        show: ops,
    },
    Row {
        key: "multireadrandom",
        label: "multireadrandom ops/s",
        higher_is_better: true,
        show: ops,
    },
    Row {
        key: "seekrandom",
        label: "seekrandom seeks/s",
        higher_is_better: true,
        show: ops,
    },
    Row {
        key: "readseq",
        label: "readseq entries/s",
        higher_is_better: true,
        show: ops,
    },
    Row {
        key: "readrandom_cached",
        label: "readrandom ops/s (cached)",
        higher_is_better: true,
        show: ops,
    },
    Row {
        key: "fillsync",
        label: "fillsync ops/s (1 writer)",
        higher_is_better: true,
        show: ops,
    },
    Row {
        key: "fillsync_group",
        label: "fillsync ops/s (N writers)",
        higher_is_better: true,
        show: ops,
    },
    Row {
        key: "group_commit_gain",
        label: "group commit gain (N/1)",
        higher_is_better: true,
        show: plain,
    },
    // The steadiest figure of group commit where the disk's fsync rate wanders: how many
    // writers' records one fdatasync carried (Cellar only: the peers do not count them).
    Row {
        key: "group_records_per_sync",
        label: "records per fsync (N writers)",
        higher_is_better: true,
        show: plain,
    },
    Row {
        key: "write_amp",
        label: "write amplification",
        higher_is_better: false,
        show: plain,
    },
    Row {
        key: "disk_bytes",
        label: "size on disk",
        higher_is_better: false,
        show: mib,
    },
    Row {
        key: "peak_rss",
        label: "peak RSS (main phase)",
        higher_is_better: false,
        show: mib,
    },
    Row {
        key: "bulkload",
        label: "bulkload keys/s (sorted, bulk path)",
        higher_is_better: true,
        show: ops,
    },
    Row {
        key: "bulk_write_amp",
        label: "bulkload write amplification",
        higher_is_better: false,
        show: plain,
    },
    Row {
        key: "bulk_disk_bytes",
        label: "bulkload size on disk",
        higher_is_better: false,
        show: mib,
    },
    Row {
        key: "bulk_readrandom",
        label: "readrandom ops/s after bulkload",
        higher_is_better: true,
        show: ops,
    },
    Row {
        key: "changes",
        label: "change feed batches/s (whole log)",
        higher_is_better: true,
        show: ops,
    },
];

/// Run the comparison and print it.
pub fn run(a: &CompareArgs) -> Result<i32> {
    let engines: Vec<String> = if a.engines.is_empty() {
        engines::available().iter().map(|s| s.to_string()).collect()
    } else {
        a.engines.clone()
    };
    for e in &engines {
        if !engines::available().contains(&e.as_str()) {
            bail!(
                "engine {e:?} is not built in (available: {}; peers need --features peers)",
                engines::available().join(", ")
            );
        }
    }
    // samples[engine][figure] = one value per round.
    let mut samples: BTreeMap<String, BTreeMap<String, Vec<f64>>> = BTreeMap::new();
    for phase in &a.phases {
        for round in 0..a.rounds {
            for e in &engines {
                // The B-tree has no write workloads to run in the sync phase, and no bulk path;
                // only Cellar and RocksDB read their log back as a change feed.
                if (phase == "sync" || phase == "bulk") && e == "redb"
                    || phase == "changes" && !matches!(e.as_str(), "cellar" | "rocksdb")
                {
                    continue;
                }
                eprintln!("round {}/{}: {e} {phase}", round + 1, a.rounds);
                let f = spawn_child(a, e, phase)?;
                // Each round's figures, so the spread behind a median can be seen.
                let line: Vec<String> = f
                    .iter()
                    .map(|(k, v)| match v.abs() >= 100.0 {
                        true => format!("{k}={v:.0}"),
                        false => format!("{k}={v:.3}"),
                    })
                    .collect();
                eprintln!("  {}", line.join(" "));
                let s = samples.entry(e.clone()).or_default();
                for (k, v) in f {
                    // The sync phase's RSS is not the one reported.
                    if phase != "main" && k == "peak_rss" {
                        continue;
                    }
                    s.entry(k).or_default().push(v);
                }
            }
        }
    }
    let medians: BTreeMap<String, BTreeMap<String, f64>> = samples
        .iter_mut()
        .map(|(e, m)| {
            (
                e.clone(),
                m.iter_mut().map(|(k, v)| (k.clone(), median(v))).collect(),
            )
        })
        .collect();
    if a.json {
        println!(
            "{}",
            json!({"args": format!("{a:?}"), "medians": medians, "samples": samples})
        );
        return Ok(0);
    }
    print_table(a, &engines, &medians);
    Ok(0)
}

fn fig(m: &BTreeMap<String, BTreeMap<String, f64>>, e: &str, k: &str) -> Option<f64> {
    m.get(e)?.get(k).copied().filter(|v| v.is_finite())
}

fn print_table(a: &CompareArgs, engines: &[String], m: &BTreeMap<String, BTreeMap<String, f64>>) {
    let lsm_peers: Vec<&String> = engines
        .iter()
        .filter(|e| *e != "cellar" && *e != "redb")
        .collect();
    let mut header: Vec<String> = vec!["figure".into()];
    header.extend(engines.iter().cloned());
    if !lsm_peers.is_empty() {
        header.push("cellar / best LSM".into());
    }
    if engines.iter().any(|e| e == "redb") {
        header.push("cellar / redb".into());
    }
    let mut rows: Vec<Vec<String>> = Vec::new();
    for r in &ROWS {
        let mut row = vec![r.label.to_string()];
        let mut any = false;
        for e in engines {
            let v = fig(m, e, r.key);
            any |= v.is_some();
            row.push(v.map_or("-".into(), r.show));
        }
        if !any {
            continue;
        }
        let cellar = fig(m, "cellar", r.key);
        if !lsm_peers.is_empty() {
            let best = lsm_peers
                .iter()
                .filter_map(|e| fig(m, e, r.key))
                .reduce(|x, y| if (x > y) == r.higher_is_better { x } else { y });
            row.push(match (cellar, best) {
                (Some(c), Some(b)) if b > 0.0 => format!("{:.2}x", c / b),
                _ => "-".into(),
            });
        }
        if engines.iter().any(|e| e == "redb") {
            row.push(match (cellar, fig(m, "redb", r.key)) {
                (Some(c), Some(b)) if b > 0.0 => format!("{:.2}x", c / b),
                _ => "-".into(),
            });
        }
        rows.push(row);
    }
    println!(
        "compare: {} keys of {} B, values {} B, {} reads, {} seeks x {} nexts, {} round(s), median; \
         cache {}, write buffer {}; sync phase {} x 1 writer, {} x {} writers",
        a.num,
        a.key_size,
        a.value_size,
        a.reads(),
        a.seeks(),
        a.seek_nexts,
        a.rounds,
        mib(a.cache_bytes as f64),
        mib(a.write_buffer_bytes as f64),
        a.sync_ops,
        4 * a.sync_ops / a.sync_threads as u64 * a.sync_threads as u64,
        a.sync_threads,
    );
    let widths: Vec<usize> = (0..header.len())
        .map(|i| {
            rows.iter()
                .map(|r| r[i].len())
                .chain([header[i].len()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let line = |cells: &[String]| {
        cells
            .iter()
            .zip(&widths)
            .enumerate()
            .map(|(i, (c, w))| {
                if i == 0 {
                    format!("{c:<w$}")
                } else {
                    format!("{c:>w$}")
                }
            })
            .collect::<Vec<_>>()
            .join("  ")
    };
    println!("{}", line(&header));
    for r in &rows {
        println!("{}", line(r));
    }
    println!(
        "Ratios: higher is better for throughput; for write amplification, size and RSS lower \
         is better (a ratio below 1 means Cellar is smaller)."
    );
    if a.markdown {
        println!();
        println!("| {} |", header.join(" | "));
        println!("|{}|", vec!["---"; header.len()].join("|"));
        for r in &rows {
            println!("| {} |", r.join(" | "));
        }
    }
}
