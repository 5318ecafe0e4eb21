//! The benchmark runner: the database, the threads, the per-operation loops.

use std::io::Write;
use std::ops::ControlFlow;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use cellar::{
    Db, Delete, FamilyDescriptor, Get, Options, RowView, Scan, Stats, Table, TableDescriptor,
    WriteOptions,
};
use hdrhistogram::Histogram;
use indicatif::ProgressBar;

use super::gen::{fnv64, Chooser, Distribution, Keys, Rng, Values};
use super::report::{self, BenchResult};
use super::{BenchArgs, BenchDurability, BenchFormat};
use crate::{Result, ToolError, EXIT_OK};

const TABLE: &str = "bench";
const FAMILY: &str = "f";

/// What a benchmark does per operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    FillSeq,
    FillRandom,
    Overwrite,
    FillSync,
    DeleteRandom,
    /// `--deletes` row-range deletes of `--range-width` keys at random places.
    DeleteRange,
    /// One major compaction of the table, timed (db_bench's `compact`).
    Compact,
    ReadRandom,
    ReadMissing,
    /// readrandom's keys, read `--batch-size` at a time with `Table::get_many_view`.
    MultiReadRandom,
    SeekRandom,
    ReadSeq,
    ReadReverse,
    ReadWhileWriting,
    /// YCSB workload `a`..=`f`.
    Ycsb(char),
}

impl Kind {
    fn parse(name: &str) -> Option<Kind> {
        Some(match name {
            "fillseq" => Kind::FillSeq,
            "fillrandom" => Kind::FillRandom,
            "overwrite" => Kind::Overwrite,
            "fillsync" => Kind::FillSync,
            "deleterandom" => Kind::DeleteRandom,
            "deleterange" => Kind::DeleteRange,
            "compact" => Kind::Compact,
            "readrandom" => Kind::ReadRandom,
            "readmissing" => Kind::ReadMissing,
            "multireadrandom" => Kind::MultiReadRandom,
            "seekrandom" => Kind::SeekRandom,
            "readseq" => Kind::ReadSeq,
            "readreverse" => Kind::ReadReverse,
            "readwhilewriting" => Kind::ReadWhileWriting,
            _ => {
                let w = name.strip_prefix("ycsb-")?;
                let c = w.chars().next().filter(|c| ('a'..='f').contains(c))?;
                (w.len() == 1).then_some(Kind::Ycsb(c))?
            }
        })
    }

    /// Starts from an empty table (db_bench's fill benchmarks).
    fn fresh(self) -> bool {
        matches!(self, Kind::FillSeq | Kind::FillRandom | Kind::FillSync)
    }

    fn writes(self) -> bool {
        !matches!(
            self,
            Kind::ReadRandom
                | Kind::ReadMissing
                | Kind::MultiReadRandom
                | Kind::SeekRandom
                | Kind::ReadSeq
                | Kind::ReadReverse
                | Kind::Ycsb('c')
        )
    }

    fn reads(self) -> bool {
        !matches!(
            self,
            Kind::FillSeq
                | Kind::FillRandom
                | Kind::Overwrite
                | Kind::FillSync
                | Kind::DeleteRandom
                | Kind::DeleteRange
                | Kind::Compact
        )
    }
}

/// State shared by the threads of one benchmark.
struct Shared<'a> {
    args: &'a BenchArgs,
    db: &'a Db,
    table: Table,
    keys: Keys,
    values: Values,
    wopts: WriteOptions,
    stop: AtomicBool,
    deadline: Option<Instant>,
    pb: ProgressBar,
    /// YCSB inserts so far (new keys are numbered from `--num` on).
    inserted: &'a AtomicU64,
    chooser: Option<Chooser>,
    /// Mixed into every thread's seed so that benchmarks draw different key sequences (a read
    /// benchmark replaying the fill's sequence would see only the keys written).
    salt: u64,
}

/// What one thread measured.
struct ThreadOut {
    hist: Histogram<u64>,
    ops: u64,
    bytes: u64,
    found: u64,
}

fn histogram() -> Result<Histogram<u64>> {
    // 1 ns .. 1 hour at 3 significant digits.
    Histogram::new_with_bounds(1, 3_600_000_000_000, 3)
        .map_err(|e| ToolError::Usage(format!("histogram: {e}")))
}

/// Operations per thread: an equal share of `total`, the first `total % threads` threads
/// taking one more; unbounded with `--duration`.
fn share(total: u64, threads: usize, tid: usize, duration: bool) -> (u64, u64) {
    if duration {
        let per = total / threads as u64;
        return (per * tid as u64, u64::MAX);
    }
    let t = threads as u64;
    let (per, rem) = (total / t, total % t);
    let tid = tid as u64;
    let start = tid * per + tid.min(rem);
    (start, per + u64::from(tid < rem))
}

impl Shared<'_> {
    fn expired(&self) -> bool {
        self.stop.load(Ordering::Relaxed) || self.deadline.is_some_and(|d| Instant::now() >= d)
    }

    fn put(&self, key: &[u8], rng: &mut Rng) -> Result<u64> {
        let value = self.values.get(rng);
        // One cell from borrowed bytes, as db_bench puts a key and a value.
        self.table
            .put_cell_with(key, FAMILY, b"", value, self.wopts)?;
        Ok((key.len() + value.len()) as u64)
    }

    /// A point read, viewed as `seek` views its rows; `(found, bytes)`.
    fn get(&self, key: &[u8]) -> Result<(bool, u64)> {
        Ok(self.table.get_view(&Get::new(key), |row| match row {
            Some(row) => {
                let v = row.value(FAMILY, "").map_or(0, |v| v.len());
                (true, (key.len() + v) as u64)
            }
            None => (false, 0),
        })?)
    }

    /// Seek to `key` and read up to `rows` rows; `(rows read, bytes)`.
    fn seek(&self, key: &[u8], rows: usize) -> Result<(u64, u64)> {
        let mut n = 0u64;
        let mut bytes = 0u64;
        self.table
            .scan_each(Scan::new().start_row(key).limit(rows), |row| {
                n += 1;
                bytes += row_bytes(row);
                ControlFlow::Continue(())
            })?;
        Ok((n, bytes))
    }
}

fn row_bytes(row: &RowView<'_>) -> u64 {
    row.cells()
        .map(|c| (c.row.len() + c.value.len()) as u64)
        .sum()
}

/// One thread of a benchmark doing operation-at-a-time work.
fn worker(kind: Kind, tid: usize, total: u64, s: &Shared<'_>) -> Result<ThreadOut> {
    let a = s.args;
    let mut out = ThreadOut {
        hist: histogram()?,
        ops: 0,
        bytes: 0,
        found: 0,
    };
    let mut rng = Rng::new(a.seed ^ s.salt ^ (tid as u64 + 1).wrapping_mul(0xA076_1D64_78BD_642F));
    // One major compaction, whatever `--duration` says.
    let timed = a.duration.is_some() && kind != Kind::Compact;
    let (start, n) = share(total, a.threads, tid, timed);
    let mut key = Vec::with_capacity(a.key_size + 1);
    let mut stop = Vec::new();
    let mut pending = 0u64;
    if matches!(kind, Kind::ReadSeq | Kind::ReadReverse) {
        return scan_worker(kind, n, s, out);
    }
    if kind == Kind::MultiReadRandom {
        return multiread_worker(n, s, &mut rng, out);
    }
    let mut i = 0u64;
    while i < n {
        if i % 64 == 0 && s.expired() {
            break;
        }
        let t0 = Instant::now();
        match kind {
            Kind::FillSeq => {
                s.keys.fill(start + i, &mut key);
                out.bytes += s.put(&key, &mut rng)?;
            }
            Kind::FillRandom | Kind::Overwrite | Kind::FillSync => {
                s.keys.fill(rng.below(a.num), &mut key);
                out.bytes += s.put(&key, &mut rng)?;
            }
            Kind::DeleteRandom => {
                s.keys.fill(rng.below(a.num), &mut key);
                s.table.delete_with(Delete::new(&key[..]), s.wopts)?;
                out.bytes += key.len() as u64;
            }
            Kind::DeleteRange => {
                let first = rng.below(a.num);
                s.keys.fill(first, &mut key);
                // Up to the end of the keys when the range runs past them (an empty stop row).
                let end = first.saturating_add(a.range_width);
                if end < a.num {
                    s.keys.fill(end, &mut stop);
                } else {
                    stop.clear();
                }
                s.table.delete_rows(&key, &stop)?;
                out.bytes += (key.len() + stop.len()) as u64;
            }
            Kind::Compact => s.db.major_compact(TABLE, None)?,
            Kind::ReadRandom | Kind::ReadWhileWriting => {
                s.keys.fill(rng.below(a.num), &mut key);
                let (f, b) = s.get(&key)?;
                out.found += u64::from(f);
                out.bytes += b;
            }
            Kind::ReadMissing => {
                s.keys.fill_missing(rng.below(a.num), &mut key);
                let (f, b) = s.get(&key)?;
                out.found += u64::from(f);
                out.bytes += b;
            }
            Kind::SeekRandom => {
                s.keys.fill(rng.below(a.num), &mut key);
                let (rows, b) = s.seek(&key, a.seek_nexts.saturating_add(1))?;
                out.found += u64::from(rows > 0);
                out.bytes += b;
            }
            Kind::Ycsb(w) => ycsb_op(w, s, &mut rng, &mut key, &mut out)?,
            Kind::ReadSeq | Kind::ReadReverse | Kind::MultiReadRandom => {}
        }
        out.hist
            .saturating_record(t0.elapsed().as_nanos().min(u128::from(u64::MAX)) as u64);
        i += 1;
        pending += 1;
        if pending == 256 {
            s.pb.inc(pending);
            pending = 0;
        }
    }
    s.pb.inc(pending);
    out.ops = i;
    Ok(out)
}

/// readseq / readreverse: one scan over the table, a row per operation.
fn scan_worker(kind: Kind, n: u64, s: &Shared<'_>, mut out: ThreadOut) -> Result<ThreadOut> {
    let scan = if kind == Kind::ReadReverse {
        Scan::new().reversed()
    } else {
        Scan::new()
    };
    let mut pending = 0u64;
    // A row's latency is the time from the previous row's hand-over to its own.
    let mut t0 = Instant::now();
    s.table.scan_each(scan, |row| {
        if out.ops >= n || (out.ops % 1024 == 0 && s.expired()) {
            return ControlFlow::Break(());
        }
        out.hist
            .saturating_record(t0.elapsed().as_nanos().min(u128::from(u64::MAX)) as u64);
        out.bytes += row_bytes(row);
        out.ops += 1;
        pending += 1;
        if pending == 1024 {
            s.pb.inc(pending);
            pending = 0;
        }
        t0 = Instant::now();
        ControlFlow::Continue(())
    })?;
    s.pb.inc(pending);
    Ok(out)
}

/// multireadrandom: readrandom's keys in batches of `--batch-size`, one `get_many_view` call
/// per batch (db_bench's `multireadrandom`). A key is an operation; a latency sample is one
/// batch call, as db_bench records it.
fn multiread_worker(
    n: u64,
    s: &Shared<'_>,
    rng: &mut Rng,
    mut out: ThreadOut,
) -> Result<ThreadOut> {
    let a = s.args;
    let batch = a.batch_size as u64;
    let mut gets: Vec<Get> = Vec::with_capacity(batch as usize);
    let mut key = Vec::with_capacity(a.key_size + 1);
    let mut done = 0u64;
    while done < n && !s.expired() {
        let t0 = Instant::now();
        let k = batch.min(n - done);
        gets.clear();
        for _ in 0..k {
            s.keys.fill(rng.below(a.num), &mut key);
            gets.push(Get::new(key.as_slice()));
        }
        s.table.get_many_view(&gets, |i, row| {
            if let Some(row) = row {
                let v = row.value(FAMILY, "").map_or(0, |v| v.len());
                out.found += 1;
                out.bytes += (gets[i].row.len() + v) as u64;
            }
        })?;
        out.hist
            .saturating_record(t0.elapsed().as_nanos().min(u128::from(u64::MAX)) as u64);
        done += k;
        s.pb.inc(k);
    }
    out.ops = done;
    Ok(out)
}

/// One YCSB operation. Proportions as in YCSB's core workloads:
/// A 50/50 read/update, B 95/5 read/update, C read only, D 95/5 read/insert (latest),
/// E 95/5 scan (1..=100 rows)/insert, F 50/50 read/read-modify-write.
fn ycsb_op(
    w: char,
    s: &Shared<'_>,
    rng: &mut Rng,
    key: &mut Vec<u8>,
    out: &mut ThreadOut,
) -> Result<()> {
    let a = s.args;
    let count = a.num + s.inserted.load(Ordering::Relaxed);
    let pick = |rng: &mut Rng| match &s.chooser {
        Some(c) => c.pick(rng, count),
        None => rng.below(count),
    };
    let p = rng.below(100);
    match (w, p) {
        ('a', 0..50) | ('b', 0..95) | ('c', _) | ('d', 0..95) | ('f', 0..50) => {
            s.keys.fill(pick(rng), key);
            let (f, b) = s.get(key)?;
            out.found += u64::from(f);
            out.bytes += b;
        }
        ('a', _) | ('b', _) => {
            s.keys.fill(pick(rng), key);
            out.bytes += s.put(key, rng)?;
        }
        ('d', _) | ('e', 95..) => {
            let k = a.num + s.inserted.fetch_add(1, Ordering::Relaxed);
            s.keys.fill(k, key);
            out.bytes += s.put(key, rng)?;
        }
        ('e', _) => {
            s.keys.fill(pick(rng), key);
            let len = 1 + rng.below(100) as usize;
            let (rows, b) = s.seek(key, len)?;
            out.found += u64::from(rows > 0);
            out.bytes += b;
        }
        _ => {
            // F's read-modify-write: read the row, write it back changed.
            s.keys.fill(pick(rng), key);
            let (f, b) = s.get(key)?;
            out.found += u64::from(f);
            out.bytes += b + s.put(key, rng)?;
        }
    }
    Ok(())
}

/// Disk bytes written by flushes and compactions.
fn disk_written(st: &Stats) -> u64 {
    st.flushed_bytes
        + st.compaction
            .levels
            .iter()
            .map(|l| l.bytes_written)
            .sum::<u64>()
}

fn live_bytes(st: &Stats) -> u64 {
    st.compaction.levels.iter().map(|l| l.bytes).sum()
}

struct Runner<'a> {
    args: &'a BenchArgs,
    db: Db,
    /// Whether the table holds every key `0..num` (YCSB needs a full load).
    loaded: bool,
    inserted: AtomicU64,
}

impl Runner<'_> {
    fn table_desc() -> TableDescriptor {
        TableDescriptor::new(TABLE).family(FamilyDescriptor::new(FAMILY).max_versions(1))
    }

    fn ensure_table(&self) -> Result<Table> {
        if !self.db.table_exists(TABLE)? {
            self.db.create_table(Self::table_desc())?;
        }
        Ok(self.db.table(TABLE)?)
    }

    /// An empty `bench` table: dropped (with its files) and created again.
    fn fresh_table(&mut self) -> Result<Table> {
        if self.db.table_exists(TABLE)? {
            self.db.drop_table(TABLE)?;
        }
        self.db.create_table(Self::table_desc())?;
        self.loaded = false;
        self.inserted.store(0, Ordering::Relaxed);
        Ok(self.db.table(TABLE)?)
    }

    fn run_one(&mut self, name: &str) -> Result<BenchResult> {
        let a = self.args;
        let kind = Kind::parse(name)
            .ok_or_else(|| ToolError::Usage(format!("unknown benchmark {name:?}")))?;
        let table = if kind.fresh() && !a.use_existing_db {
            self.fresh_table()?
        } else {
            self.ensure_table()?
        };
        if matches!(kind, Kind::Ycsb(_)) && !self.loaded && !a.use_existing_db {
            // YCSB runs against a loaded table: load `--num` records first, untimed.
            eprintln!("loading {} records for {name}", a.num);
            let load = BenchArgs {
                duration: None,
                ..a.clone()
            };
            let table = self.fresh_table()?;
            self.execute(&load, Kind::FillSeq, table, "load")?;
            self.settle()?;
            self.loaded = true;
        }
        let before = self.db.stats();
        let (seconds, outs) = self.execute(a, kind, table, name)?;
        let after_run = self.db.stats();
        let settle_seconds = if kind.writes() { self.settle()? } else { 0.0 };
        if kind == Kind::FillSeq && a.duration.is_none() {
            self.loaded = true;
        }
        let after = self.db.stats();
        let mut hist = histogram()?;
        let (mut ops, mut bytes, mut found) = (0u64, 0u64, 0u64);
        for o in &outs {
            hist.add(&o.hist)
                .map_err(|e| ToolError::Usage(format!("histogram: {e}")))?;
            ops += o.ops;
            bytes += o.bytes;
            found += o.found;
        }
        let user = after
            .user_bytes_written
            .saturating_sub(before.user_bytes_written);
        let disk = disk_written(&after).saturating_sub(disk_written(&before));
        let hits = after
            .block_cache
            .hits
            .saturating_sub(before.block_cache.hits);
        let misses = after
            .block_cache
            .misses
            .saturating_sub(before.block_cache.misses);
        let us = |q: f64| hist.value_at_quantile(q) as f64 / 1000.0;
        let secs = seconds.max(1e-9);
        Ok(BenchResult {
            benchmark: name.to_owned(),
            ops,
            threads: a.threads,
            seconds,
            ops_per_sec: ops as f64 / secs,
            mb_per_sec: bytes as f64 / secs / (1 << 20) as f64,
            // Recorded time over operations: a sample per operation, or per batch call of
            // multireadrandom (whose percentiles are then per call).
            micros_per_op: if ops == 0 {
                0.0
            } else {
                hist.mean() * hist.len() as f64 / ops as f64 / 1000.0
            },
            p50_us: us(0.5),
            p99_us: us(0.99),
            p999_us: us(0.999),
            max_us: hist.max() as f64 / 1000.0,
            found: kind
                .reads()
                .then_some(found)
                .filter(|_| !matches!(kind, Kind::ReadSeq | Kind::ReadReverse)),
            write_amplification: if user == 0 {
                0.0
            } else {
                disk as f64 / user as f64
            },
            space_amplification: after.space_amplification(),
            stall_micros: after_run.stall_micros.saturating_sub(before.stall_micros),
            wal_records_per_sync: {
                let syncs = after_run.wal.syncs.saturating_sub(before.wal.syncs);
                let records = after_run.wal.records.saturating_sub(before.wal.records);
                (syncs > 0).then(|| records as f64 / syncs as f64)
            },
            block_cache_hit_ratio: if hits + misses == 0 {
                0.0
            } else {
                hits as f64 / (hits + misses) as f64
            },
            peak_rss_bytes: report::peak_rss(),
            db_bytes: live_bytes(&after),
            settle_seconds,
            files_dropped: after
                .compaction
                .files_dropped
                .saturating_sub(before.compaction.files_dropped),
            bytes_dropped: after
                .compaction
                .bytes_dropped
                .saturating_sub(before.compaction.bytes_dropped),
            key_size: a.key_size,
            value_size: a.value_size,
            // A row-range delete is always fsynced in the WAL, ahead of its manifest edit.
            durability: if matches!(kind, Kind::FillSync | Kind::DeleteRange) {
                "fsync"
            } else {
                a.durability.name()
            },
        })
    }

    /// Flush and run the due compactions; returns the seconds it took.
    fn settle(&self) -> Result<f64> {
        let t = Instant::now();
        self.db.flush()?;
        self.db.wait_for_compactions()?;
        Ok(t.elapsed().as_secs_f64())
    }

    /// Run the threads of one benchmark; returns the timed seconds and each thread's figures.
    fn execute(
        &self,
        a: &BenchArgs,
        kind: Kind,
        table: Table,
        name: &str,
    ) -> Result<(f64, Vec<ThreadOut>)> {
        let durability = if kind == Kind::FillSync {
            BenchDurability::Fsync
        } else {
            a.durability
        };
        let total = match kind {
            // fsync per put: a hundredth of the keys (db_bench takes a thousandth).
            Kind::FillSync => (a.num / 100).max(1),
            Kind::DeleteRange => a.deletes(),
            Kind::Compact => 1,
            k if k.writes() && !matches!(k, Kind::ReadWhileWriting | Kind::Ycsb(_)) => a.num,
            _ => a.reads.unwrap_or(a.num),
        };
        let chooser = match kind {
            Kind::Ycsb(w) => {
                let default = if w == 'd' {
                    Distribution::Latest
                } else {
                    Distribution::Zipfian
                };
                Some(Chooser::new(a.distribution.unwrap_or(default), a.num))
            }
            _ => None,
        };
        let bar_len = if a.duration.is_some() { 0 } else { total };
        let shared = Shared {
            args: a,
            db: &self.db,
            table,
            keys: Keys::new(a.key_size),
            values: Values::new(a.value_size, a.seed),
            wopts: WriteOptions::durability(durability.engine()),
            stop: AtomicBool::new(false),
            deadline: None,
            pb: crate::progress::bar(bar_len, name, false),
            inserted: &self.inserted,
            chooser,
            salt: name.bytes().fold(0u64, |h, b| fnv64(h ^ u64::from(b))),
        };
        let start = Instant::now();
        let shared = Shared {
            deadline: a.duration.map(|d| start + Duration::from_secs_f64(d)),
            ..shared
        };
        let s = &shared;
        let outs: Vec<Result<ThreadOut>> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..a.threads)
                .map(|tid| scope.spawn(move || worker(kind, tid, total, s)))
                .collect();
            // readwhilewriting: one more thread writes random keys until the readers finish.
            let writer = (kind == Kind::ReadWhileWriting).then(|| {
                scope.spawn(move || -> Result<()> {
                    let mut rng = Rng::new(a.seed ^ s.salt ^ 0xD1CE);
                    let mut key = Vec::new();
                    while !s.expired() {
                        s.keys.fill(rng.below(a.num), &mut key);
                        s.put(&key, &mut rng)?;
                    }
                    Ok(())
                })
            });
            let outs: Vec<Result<ThreadOut>> = handles
                .into_iter()
                .map(|h| {
                    h.join().unwrap_or_else(|_| {
                        Err(ToolError::Usage("a benchmark thread panicked".into()))
                    })
                })
                .collect();
            s.stop.store(true, Ordering::Relaxed);
            if let Some(w) = writer {
                match w.join() {
                    Ok(Ok(())) => {}
                    Ok(Err(e)) => return vec![Err(e)],
                    Err(_) => {
                        return vec![Err(ToolError::Usage("the writer thread panicked".into()))]
                    }
                }
            }
            outs
        });
        let seconds = start.elapsed().as_secs_f64();
        shared.pb.finish_and_clear();
        let outs = outs.into_iter().collect::<Result<Vec<_>>>()?;
        Ok((seconds, outs))
    }
}

fn open(dir: &Path, a: &BenchArgs) -> Result<Db> {
    let mut opts = Options::default();
    if let Some(b) = a.memory_budget {
        opts = opts.memory_budget(usize::try_from(b).unwrap_or(usize::MAX));
    }
    if let Some(t) = a.target_file_size {
        opts.compaction.target_file_size = t;
        opts.compaction.max_compaction_bytes = t.saturating_mul(25);
    }
    Ok(Db::open(dir, opts)?)
}

pub(super) fn run<W: Write>(a: &BenchArgs, mut out: W) -> Result<i32> {
    let tmp;
    let dir = match &a.db {
        Some(d) => d.clone(),
        None => {
            tmp = tempfile::Builder::new()
                .prefix("cellar-bench-")
                .tempdir()
                .map_err(|e| ToolError::io(&std::env::temp_dir(), e))?;
            tmp.path().to_path_buf()
        }
    };
    let db = open(&dir, a)?;
    let w = |out: &mut W, s: &str| out.write_all(s.as_bytes()).map_err(ToolError::Output);
    if a.format == BenchFormat::Text {
        w(
            &mut out,
            &format!(
                "Cellar bench: keys {} B, values {} B, {} entries, {} thread(s), durability {}, {}\n\
                 Database: {}\n\
                 ------------------------------------------------\n",
                a.key_size,
                a.value_size,
                a.num,
                a.threads,
                a.durability.name(),
                match a.duration {
                    Some(d) => format!("{d} s per benchmark"),
                    None => "fixed operation counts".to_owned(),
                },
                dir.display()
            ),
        )?;
    }
    let mut runner = Runner {
        args: a,
        db,
        loaded: a.use_existing_db,
        inserted: AtomicU64::new(0),
    };
    let mut results = Vec::new();
    for name in &a.benchmarks {
        let r = runner.run_one(name)?;
        match a.format {
            BenchFormat::Json => w(&mut out, &format!("{}\n", crate::db::json_line(&r)?))?,
            BenchFormat::Text => w(&mut out, &report::line(&r))?,
        }
        out.flush().map_err(ToolError::Output)?;
        results.push(r);
    }
    if a.format == BenchFormat::Text {
        w(&mut out, "\n")?;
        w(&mut out, &report::summary(&results))?;
    }
    // Closing flushes, so a --db directory keeps everything the benchmarks wrote.
    runner.db.close()?;
    out.flush().map_err(ToolError::Output)?;
    Ok(EXIT_OK)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_cover_the_total_exactly() {
        for (total, threads) in [(10u64, 3usize), (2, 4), (1000, 1), (7, 7)] {
            let mut next = 0;
            for t in 0..threads {
                let (start, n) = share(total, threads, t, false);
                assert_eq!(start, next);
                next += n;
            }
            assert_eq!(next, total);
        }
        assert_eq!(share(10, 2, 1, true).1, u64::MAX);
    }

    #[test]
    fn names_parse() {
        assert_eq!(Kind::parse("ycsb-e"), Some(Kind::Ycsb('e')));
        assert_eq!(Kind::parse("ycsb-g"), None);
        assert_eq!(Kind::parse("ycsb-ab"), None);
        for n in super::super::DB_BENCH.iter().chain(super::super::YCSB) {
            assert!(Kind::parse(n).is_some(), "{n}");
        }
    }
}
