//! WAL append throughput: `FsyncWal` and `SyncWal` appends of 100-byte payloads from 1, 4 and 16
//! writer threads, on both devices (io_uring and pwrite+fdatasync), against the raw rate of the
//! disk: one thread doing `write_all_at` + `sync_data` of 100 bytes in a loop.
//!
//! Run: `cargo bench -p cellar-benches --bench wal` (about two minutes). Each sample times a
//! fixed number of appends spread over a pool of writer threads that is spawned once per
//! benchmark and released by a barrier, so thread start-up is not measured. The raw disk rate is
//! measured before and after the WAL benchmarks (the machine may be shared); their mean is the
//! base of the ratios in the table printed to stderr at the end. Because that rate drifts a lot
//! on a shared disk, a 0.5 s raw probe also runs just before and just after each WAL benchmark
//! (outside the timed samples) and the table gives the ratio to those local rates too, and the
//! WAL's own counters (groups, syncs, largest group) of the 16-writer runs.
//!
//! Files live in a temporary directory under `CARGO_TARGET_TMPDIR` (inside the target
//! directory), so on the file system of the repository, never on a tmpfs `/tmp`.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use cellar::fs::{File, FileSystem, RealFs};
use cellar::wal::{BackendKind, Wal, WalOptions, WalStats};
use cellar::Durability;
use criterion::{BenchmarkId, Criterion, SamplingMode, Throughput};

/// Payload size of every append and raw write.
const PAYLOAD: usize = 100;
/// Writer thread counts measured.
const WRITERS: [usize; 3] = [1, 4, 16];
/// Samples per benchmark.
const SAMPLES: usize = 10;
/// Measurement time per benchmark.
const MEASURE: Duration = Duration::from_secs(4);
/// Warm-up time per benchmark.
const WARM_UP: Duration = Duration::from_secs(1);
/// Size of the preallocated file of the raw disk benchmark (the WAL's default segment size).
const RAW_FILE: u64 = 64 << 20;
/// Length of the raw probe run just before and just after each WAL benchmark.
const PROBE: Duration = Duration::from_millis(500);

/// (appends, elapsed) of every call of a benchmark's routine; the last [`SAMPLES`] are the
/// measured samples (criterion calls the routine for the warm-up first).
#[derive(Debug, Default)]
struct Runs(Vec<(u64, Duration)>);

impl Runs {
    fn push(&mut self, n: u64, d: Duration) {
        self.0.push((n, d));
    }

    /// Operations per second over the measured samples.
    fn rate(&self) -> Option<f64> {
        let tail = &self.0[self.0.len().saturating_sub(SAMPLES)..];
        let n: u64 = tail.iter().map(|r| r.0).sum();
        let t: f64 = tail.iter().map(|r| r.1.as_secs_f64()).sum();
        (n > 0 && t > 0.0).then(|| n as f64 / t)
    }
}

/// What the table at the end is made of.
#[derive(Debug, Default)]
struct Report {
    /// Raw disk rates by label.
    raw: BTreeMap<&'static str, Runs>,
    /// WAL rates by (durability, backend, writers).
    wal: BTreeMap<(&'static str, &'static str, usize), Runs>,
    /// Raw fdatasync rate probed just before and just after each WAL benchmark, by the same
    /// key as `wal`: the disk's rate drifts when the machine is shared.
    local: BTreeMap<(&'static str, &'static str, usize), (f64, f64)>,
    /// WAL counters at the end of each 16-writer run, by (durability, backend).
    stats: BTreeMap<(&'static str, &'static str), WalStats>,
    /// Backends that could not be opened, with the error.
    skipped: Vec<String>,
}

/// A short raw `write_all_at` + `sync_data` loop, run next to each WAL benchmark.
struct Probe {
    file: Arc<dyn File>,
    offset: u64,
}

impl Probe {
    fn new(dir: &Path) -> Probe {
        let path = dir.join("probe");
        let file = RealFs.create(&path).expect("creating the probe file");
        file.allocate(RAW_FILE).expect("preallocating");
        file.sync_data().expect("syncing");
        RealFs.sync_dir(dir).expect("syncing the directory");
        Probe { file, offset: 0 }
    }

    /// fdatasyncs per second over [`PROBE`].
    fn rate(&mut self) -> f64 {
        let buf = [0xa5u8; PAYLOAD];
        let t0 = Instant::now();
        let mut n = 0u64;
        while t0.elapsed() < PROBE {
            if self.offset + PAYLOAD as u64 > RAW_FILE {
                self.offset = 0;
            }
            self.file
                .write_all_at(&buf, self.offset)
                .expect("probe write");
            self.file.sync_data().expect("probe fdatasync");
            self.offset += PAYLOAD as u64;
            n += 1;
        }
        n as f64 / t0.elapsed().as_secs_f64()
    }
}

/// A pool of appending threads released together for each sample.
struct Pool {
    threads: Vec<JoinHandle<()>>,
    /// Appends each thread does in the next round.
    counts: Arc<Vec<AtomicU64>>,
    start: Arc<Barrier>,
    end: Arc<Barrier>,
    stop: Arc<AtomicBool>,
}

impl Pool {
    fn new(wal: &Arc<Wal>, writers: usize, d: Durability) -> Pool {
        let counts: Arc<Vec<AtomicU64>> =
            Arc::new((0..writers).map(|_| AtomicU64::new(0)).collect());
        let start = Arc::new(Barrier::new(writers + 1));
        let end = Arc::new(Barrier::new(writers + 1));
        let stop = Arc::new(AtomicBool::new(false));
        let threads = (0..writers)
            .map(|i| {
                let (wal, counts, start, end, stop) = (
                    wal.clone(),
                    counts.clone(),
                    start.clone(),
                    end.clone(),
                    stop.clone(),
                );
                std::thread::Builder::new()
                    .name(format!("wal-bench-{i}"))
                    .spawn(move || {
                        let payload = vec![i as u8; PAYLOAD];
                        loop {
                            start.wait();
                            if stop.load(Ordering::Acquire) {
                                return;
                            }
                            for _ in 0..counts[i].load(Ordering::Acquire) {
                                wal.append(&payload, d).expect("WAL append");
                            }
                            end.wait();
                        }
                    })
                    .expect("spawning a writer thread")
            })
            .collect();
        Pool {
            threads,
            counts,
            start,
            end,
            stop,
        }
    }

    /// Do `total` appends spread evenly over the threads; the time from their release to the
    /// last one finishing.
    fn round(&self, total: u64) -> Duration {
        let n = self.counts.len() as u64;
        for (i, c) in self.counts.iter().enumerate() {
            c.store(
                total / n + u64::from((i as u64) < total % n),
                Ordering::Release,
            );
        }
        self.start.wait();
        let t0 = Instant::now();
        self.end.wait();
        t0.elapsed()
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        self.start.wait();
        for t in self.threads.drain(..) {
            t.join().expect("writer thread panicked");
        }
    }
}

/// One thread: `write_all_at` + `sync_data` of 100 bytes in a loop. `append` writes at
/// increasing offsets of a preallocated, synced file (what the WAL does with its segments);
/// otherwise the same 100 bytes at offset 0 are overwritten each time.
fn raw_disk(c: &mut Criterion, dir: &Path, label: &'static str, append: bool, report: &mut Report) {
    let fs = RealFs;
    let mut file_no = 0u32;
    let mut new_file = |fs: &RealFs| -> Arc<dyn File> {
        file_no += 1;
        let path = dir.join(format!("raw-{label}-{file_no}"));
        let f = fs.create(&path).expect("creating the raw file");
        if append {
            f.allocate(RAW_FILE).expect("preallocating");
        } else {
            f.write_all_at(&[0; PAYLOAD], 0).expect("writing");
        }
        f.sync_data().expect("syncing");
        fs.sync_dir(dir).expect("syncing the directory");
        f
    };
    let mut file = new_file(&fs);
    let mut offset = 0u64;
    let buf = [0x5au8; PAYLOAD];
    let runs = report.raw.entry(label).or_default();

    let mut g = c.benchmark_group("disk");
    g.sample_size(SAMPLES)
        .measurement_time(MEASURE)
        .warm_up_time(WARM_UP)
        .sampling_mode(SamplingMode::Flat)
        .throughput(Throughput::Elements(1));
    g.bench_function(label, |b| {
        b.iter_custom(|iters| {
            let t0 = Instant::now();
            for _ in 0..iters {
                if append && offset + PAYLOAD as u64 > RAW_FILE {
                    file = new_file(&fs);
                    offset = 0;
                }
                file.write_all_at(&buf, offset).expect("raw write");
                file.sync_data().expect("raw fdatasync");
                if append {
                    offset += PAYLOAD as u64;
                }
            }
            let d = t0.elapsed();
            runs.push(iters, d);
            d
        })
    });
    g.finish();
}

fn backend_name(k: BackendKind) -> &'static str {
    match k {
        BackendKind::IoUring => "io_uring",
        BackendKind::Sync => "pwrite",
        BackendKind::Auto => "auto",
    }
}

fn wal_appends(
    c: &mut Criterion,
    dir: &Path,
    d: Durability,
    probe: &mut Probe,
    report: &mut Report,
) {
    let dname = match d {
        Durability::FsyncWal => "fsync",
        Durability::SyncWal => "sync",
        Durability::AsyncWal => "async",
        Durability::SkipWal => "skip",
    };
    let mut g = c.benchmark_group(format!("wal_append_{dname}"));
    g.sample_size(SAMPLES)
        .measurement_time(MEASURE)
        .warm_up_time(WARM_UP)
        .sampling_mode(SamplingMode::Flat)
        .throughput(Throughput::Elements(1));
    for backend in [BackendKind::IoUring, BackendKind::Sync] {
        let bname = backend_name(backend);
        for writers in WRITERS {
            let id = BenchmarkId::new(bname, writers);
            // Only open a WAL for benchmarks the command line selects.
            let mut opened: Option<(Arc<Wal>, Pool)> = None;
            let mut failed = false;
            let mut probe_before = None;
            let runs = report.wal.entry((dname, bname, writers)).or_default();
            let wal_dir = dir.join(format!("wal-{dname}-{bname}-{writers}"));
            g.bench_function(id, |b| {
                if opened.is_none() && !failed {
                    let opts = WalOptions {
                        backend,
                        ..WalOptions::default()
                    };
                    match Wal::open(Arc::new(RealFs), &wal_dir, opts, 1) {
                        Ok(wal) => {
                            probe_before = Some(probe.rate());
                            assert_eq!(wal.stats().backend, backend, "device that runs");
                            let wal = Arc::new(wal);
                            let pool = Pool::new(&wal, writers, d);
                            opened = Some((wal, pool));
                        }
                        Err(e) => {
                            failed = true;
                            report.skipped.push(format!("{bname}: {e}"));
                        }
                    }
                }
                match &opened {
                    Some((_, pool)) => b.iter_custom(|iters| {
                        let t = pool.round(iters);
                        runs.push(iters, t);
                        t
                    }),
                    // Keep criterion satisfied; the table marks the backend as skipped.
                    None => b.iter_custom(|_| Duration::from_nanos(1)),
                }
            });
            if let Some((wal, pool)) = opened.take() {
                drop(pool);
                if let Some(before) = probe_before {
                    report
                        .local
                        .insert((dname, bname, writers), (before, probe.rate()));
                }
                if writers == 16 {
                    report.stats.insert((dname, bname), wal.stats());
                }
                let wal = Arc::into_inner(wal).expect("the pool released the WAL");
                wal.close().expect("closing the WAL");
            }
            // Free the segments (hundreds of MB for SyncWal) before the next benchmark.
            let _ = std::fs::remove_dir_all(&wal_dir);
        }
    }
    g.finish();
}

fn print_table(report: &Report) {
    let raw = |label| report.raw.get(label).and_then(Runs::rate);
    let before = raw("fdatasync_100B_append_before");
    let after = raw("fdatasync_100B_append_after");
    let base = match (before, after) {
        (Some(a), Some(b)) => Some((a + b) / 2.0),
        (a, b) => a.or(b),
    };
    let fmt = |r: Option<f64>| r.map_or_else(|| "-".to_string(), |r| format!("{r:.0}"));
    eprintln!();
    eprintln!("== WAL append throughput, {PAYLOAD}-byte payloads ==");
    eprintln!(
        "raw disk, 1 thread write+fdatasync/s: append (prealloc) before {} after {} -> base {}; overwrite in place {}",
        fmt(before),
        fmt(after),
        fmt(base),
        fmt(raw("fdatasync_100B_overwrite")),
    );
    eprintln!(
        "(x base: appends/s over that base; local: raw fdatasync/s probed for {PROBE:?} just \
         before/after the benchmark, x local: appends/s over their mean)"
    );
    eprintln!(
        "{:<10} {:<9} {:>7} {:>11} {:>8} {:>13} {:>8}",
        "durability", "backend", "writers", "appends/s", "x base", "local", "x local"
    );
    for (key, runs) in &report.wal {
        let (dname, bname, writers) = key;
        let Some(rate) = runs.rate() else { continue };
        let ratio = base.map_or_else(|| "-".to_string(), |b| format!("{:.2}", rate / b));
        let (local, local_ratio) = match report.local.get(key) {
            Some(&(b, a)) => (
                format!("{b:.0}/{a:.0}"),
                format!("{:.2}", rate / ((a + b) / 2.0)),
            ),
            None => ("-".into(), "-".into()),
        };
        eprintln!(
            "{dname:<10} {bname:<9} {writers:>7} {rate:>11.0} {ratio:>8} {local:>13} {local_ratio:>8}"
        );
    }
    for ((dname, bname), s) in &report.stats {
        eprintln!(
            "stats {dname} {bname} 16 writers (incl. warm-up): records {} groups {} syncs {} \
             max_group {} mean group {:.1} segments {}",
            s.records,
            s.groups,
            s.syncs,
            s.max_group,
            s.records as f64 / s.groups.max(1) as f64,
            s.current_segment,
        );
    }
    for s in &report.skipped {
        eprintln!("skipped {s}");
    }
}

fn main() {
    let tmp = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("temporary directory");
    let dir = tmp.path();
    let mut report = Report::default();
    let mut c = Criterion::default().configure_from_args();

    raw_disk(
        &mut c,
        dir,
        "fdatasync_100B_append_before",
        true,
        &mut report,
    );
    raw_disk(&mut c, dir, "fdatasync_100B_overwrite", false, &mut report);
    let mut probe = Probe::new(dir);
    wal_appends(&mut c, dir, Durability::FsyncWal, &mut probe, &mut report);
    wal_appends(&mut c, dir, Durability::SyncWal, &mut probe, &mut report);
    raw_disk(
        &mut c,
        dir,
        "fdatasync_100B_append_after",
        true,
        &mut report,
    );

    c.final_summary();
    print_table(&report);
}
