//! The SIGKILL crash harness (RELIABILITY.md §2.2, process mode), behind the `crash-harness`
//! binary and `cellar reliability-report`.
//!
//! A parent (never killed) runs the real engine in a child process — the same binary in child
//! mode — on one database directory, kills it, reopens the directory in-process and checks the
//! invariants against an ack log kept outside the database; then the next cycle runs on the
//! same directory, so files, WAL segments and manifests accumulate.
//!
//! **Child.** Writers (3 threads) put new rows across two families with a random mix of
//! `FsyncWal` and `SyncWal`, and delete rows they put earlier; a reader thread scans and checks
//! every row it sees is whole; a maintenance thread flushes, major-compacts, takes table
//! snapshots, consumes a feed slot and creates or alters a probe table. A small write
//! buffer, WAL segment and manifest make flushes, compactions, WAL rolls and manifest roll-overs
//! happen every second. The ack log is the child's stdout, one line per event, written with one
//! `write(2)` each: `I <key> P|D` before a call, `A <key> P|D` after it returned `Ok`, `F <key>
//! P|D <error>` after an error. A SIGKILL keeps what reached the pipe, and an `A` line is
//! written only after the call returned, so every `A` is a genuine acknowledgement. (SIGKILL
//! keeps the page cache, so `SyncWal` acknowledgements must survive too; power loss is the
//! in-process `SimFs` model's job: `engine/tests/sim_crash_model.rs`. No sidecar journal
//! materializes power-loss states here.)
//!
//! **Kills.** Random: SIGKILL after a uniform delay once the child is ready. Named: the child
//! runs with `CELLAR_KILL_POINT=<point>:<n>` and kills itself at the point's n-th hit (needs the
//! `kill-points` feature; see `cellar::kill`); it reports the point on stderr first.
//!
//! **Checks after each kill** (opened in-process, compaction threads off so the file set holds
//! still): open succeeds; every acknowledged put is present with exactly its values and every
//! acknowledged delete absent (invariants 1 and 5); every row present was attempted (no phantom,
//! 4) and is whole (no torn batch, 3); a row whose put or delete was in flight is either way,
//! and whatever it is now is fixed for later cycles (a lost write never comes back, a recovered
//! one never goes); every HFile on disk is live (no orphan after open) and verifies clean, and
//! there is one manifest (6). The change feed (`Db::changes_since`) over the WAL kept
//! (`FEED_RETAIN_BYTES`, across every crash so far) holds each acknowledged write after its
//! start at the write's seq, only whole row puts and deletes of attempted keys, and ends, for
//! each key, in the state the recovered rows show; its last schema record of the probe table
//! (which the maintenance thread creates and alters: `XB`/`XA` lines) says what the table is,
//! and after a kill at `schema.after_edit` (the edit durable, its record not logged) its last
//! schema record is that change, appended by recovery.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use crate::bench::gen::Rng;
use cellar::compaction::CompactionOptions;
use cellar::manifest::ManifestOptions;
use cellar::wal::WalOptions;
use cellar::{
    Db, Delete, Durability, FamilyDescriptor, Options, Put, Scan, TableDescriptor, WriteOptions,
};

const TABLE: &str = "h";

/// The table the children's maintenance thread creates and alters, so schema changes (and
/// their records in the change feed) happen among the writes.
const PROBE: &str = "probe";
/// WAL kept for the change feed check: 16 of the 64 KiB segments.
const FEED_RETAIN_BYTES: u64 = 1 << 20;
const WRITERS: u64 = 3;
/// Cells per row: `a:q0`, `b:q0`, `a:q1`, `b:q1`.
const CELLS: usize = 4;

/// What the harness runs.
#[derive(Debug, Clone, clap::Args)]
pub struct HarnessArgs {
    /// Database directory (kept); default: a fresh temporary directory (removed at the end).
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Cycles with a SIGKILL at a random time.
    #[arg(long, default_value_t = 20)]
    pub random_kills: u64,
    /// Rounds over every named kill point (each round arms every point once); needs a build
    /// with the `kill-points` feature.
    #[arg(long, default_value_t = 0)]
    pub point_rounds: u64,
    /// Seed of every random choice (delays, n-th hits, the children's workloads).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Shortest delay before a random kill, in milliseconds after the child is ready.
    #[arg(long, default_value_t = 50)]
    pub min_ms: u64,
    /// Longest delay before a random kill, in milliseconds.
    #[arg(long, default_value_t = 1500)]
    pub max_ms: u64,
    /// How long a child runs before it stops by itself (a named point not reached by then).
    #[arg(long, default_value_t = 4)]
    pub child_secs: u64,
    /// Start no new cycle after this many seconds (the running one finishes); default: run
    /// every planned cycle.
    #[arg(long)]
    pub max_secs: Option<f64>,
}

/// The arguments of the child process (the hidden `child` subcommand of `crash-harness` and
/// of `cellar`, which the harness runs as `EXE child --dir D --seed S --cycle C --secs T`).
#[derive(Debug, Clone, clap::Args)]
pub struct ChildArgs {
    /// Database directory.
    #[arg(long)]
    pub dir: PathBuf,
    /// The harness's seed.
    #[arg(long)]
    pub seed: u64,
    /// The cycle number (keys written are unique per cycle).
    #[arg(long)]
    pub cycle: u64,
    /// Seconds to run before stopping.
    #[arg(long)]
    pub secs: u64,
}

impl ChildArgs {
    /// Run the child workload; returns the process exit code.
    pub fn run(&self) -> i32 {
        child_main(&self.dir, self.seed, self.cycle, self.secs)
    }
}

/// What the harness found.
#[derive(Debug, Default, Clone)]
pub struct HarnessReport {
    /// Kill-and-recover cycles run.
    pub cycles: u64,
    /// Cycles killed at a random time.
    pub random_kills: u64,
    /// Cycles whose child died at its armed point, per point.
    pub point_kills: BTreeMap<String, u64>,
    /// Cycles whose armed point was not reached before the child stopped, per point.
    pub point_misses: BTreeMap<String, u64>,
    /// Hits per point counted by children that ran to their end.
    pub point_hits: BTreeMap<String, u64>,
    /// Acknowledged puts and deletes checked after recoveries (summed over cycles).
    pub acked_checked: u64,
    /// Writes in flight at a kill, found applied resp. not after recovery.
    pub maybe_applied: u64,
    /// See `maybe_applied`.
    pub maybe_lost: u64,
    /// HFiles verified after recoveries (summed).
    pub files_verified: u64,
    /// Table snapshots cloned and checked after recoveries (summed).
    pub snapshots_checked: u64,
    /// Table snapshots the children deleted.
    pub snapshots_deleted: u64,
    /// Change feed batches checked after recoveries (summed; the WAL kept is read each time).
    pub feed_batches_checked: u64,
    /// Batches read back through the feed slot after recoveries (summed).
    pub slot_batches_checked: u64,
    /// Row-range deletes the children saw return (each then held to every row in its range).
    pub range_deletes_acked: u64,
    /// Alters of the probe table the children saw return.
    pub alters_acked: u64,
    /// Invariant violations, described.
    pub violations: Vec<String>,
    /// The WAL backend the children ran.
    pub backend: String,
    /// Wall time.
    pub elapsed: Duration,
}

impl HarnessReport {
    /// Declared points never killed at.
    pub fn points_never_hit(&self) -> Vec<&'static str> {
        cellar::kill::POINTS
            .iter()
            .copied()
            .filter(|p| self.point_kills.get(*p).copied().unwrap_or(0) == 0)
            .collect()
    }

    /// Print the report as text.
    pub fn print(&self, out: &mut dyn Write) -> std::io::Result<()> {
        writeln!(
            out,
            "crash harness: {} cycles ({} random SIGKILLs, {} at named points) in {:.1?}, WAL backend {}",
            self.cycles,
            self.random_kills,
            self.point_kills.values().sum::<u64>(),
            self.elapsed,
            self.backend
        )?;
        writeln!(
            out,
            "  checked: {} acknowledged writes, {} in-flight writes ({} applied, {} lost), {} HFiles verified, {} table snapshots cloned ({} deleted), {} change feed batches, {} feed slot batches, {} row-range deletes, {} alters",
            self.acked_checked,
            self.maybe_applied + self.maybe_lost,
            self.maybe_applied,
            self.maybe_lost,
            self.files_verified,
            self.snapshots_checked,
            self.snapshots_deleted,
            self.feed_batches_checked,
            self.slot_batches_checked,
            self.range_deletes_acked,
            self.alters_acked
        )?;
        if !self.point_kills.is_empty() || !self.point_misses.is_empty() {
            writeln!(
                out,
                "  kill points (killed / armed but not reached / hits in full runs):"
            )?;
            for p in cellar::kill::POINTS {
                writeln!(
                    out,
                    "    {p:<28} {:>4} {:>4} {:>8}",
                    self.point_kills.get(*p).copied().unwrap_or(0),
                    self.point_misses.get(*p).copied().unwrap_or(0),
                    self.point_hits.get(*p).copied().unwrap_or(0)
                )?;
            }
        }
        writeln!(out, "  violations: {}", self.violations.len())?;
        for v in &self.violations {
            writeln!(out, "    {v}")?;
        }
        Ok(())
    }
}

/// The harness's generator: `cellar bench`'s splitmix64, seeded apart from it, so every
/// choice replays from the seed.
fn rng(seed: u64) -> Rng {
    Rng::new(seed ^ 0x9e37_79b9_7f4a_7c15)
}

/// Uniform in `lo..=hi`.
fn range(rng: &mut Rng, lo: u64, hi: u64) -> u64 {
    lo + rng.next_u64() % (hi - lo + 1)
}

/// The engine options of child and verifier: small everything, so every durable-state
/// transition happens within a second.
fn options(compaction_threads: usize) -> Options {
    Options {
        wal: WalOptions {
            segment_size: 64 << 10,
            // Flushed segments stay for the change feed check after each recovery.
            retain_bytes: FEED_RETAIN_BYTES,
            ..WalOptions::default()
        },
        manifest: ManifestOptions { max_size: 2048 },
        compaction: CompactionOptions {
            level0_file_num_compaction_trigger: 2,
            threads: compaction_threads,
            ..CompactionOptions::default()
        },
        ..Options::default()
    }
    .write_buffer_size(32 << 10)
}

/// The value of cell `j` of row `key`: determined by both.
fn cell_value(key: &str, j: usize) -> String {
    format!("{key}/{j}/{}", "v".repeat((j * 7 + key.len()) % 23))
}

fn column(j: usize) -> (&'static str, String) {
    (if j % 2 == 0 { "a" } else { "b" }, format!("q{}", j / 2))
}

fn row_put(key: &str) -> Put {
    (0..CELLS).fold(Put::new(key), |p, j| {
        let (f, q) = column(j);
        p.add(f, q, cell_value(key, j))
    })
}

/// Whether a row read back is exactly the row `row_put(key)` wrote.
fn row_is_whole(key: &str, row: &cellar::Row) -> Result<(), String> {
    let cells = row.cells();
    if cells.len() != CELLS {
        return Err(format!("row {key} has {} cells, not {CELLS}", cells.len()));
    }
    for c in cells {
        let q = String::from_utf8_lossy(&c.qualifier);
        let j = match (c.family.as_str(), q.as_ref()) {
            ("a", "q0") => 0,
            ("b", "q0") => 1,
            ("a", "q1") => 2,
            ("b", "q1") => 3,
            _ => return Err(format!("row {key} has an unexpected cell {}:{q}", c.family)),
        };
        if c.value != cell_value(key, j).as_bytes() {
            return Err(format!("row {key} cell {}:{q} has a wrong value", c.family));
        }
    }
    Ok(())
}

fn say(line: &str) {
    // One write per line: a SIGKILL never leaves half a line in the pipe... unless the
    // line is larger than the pipe's atomic size, which these are not.
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

/// Child mode: run the workload on `dir` until `secs` pass (or a kill).
pub fn child_main(dir: &Path, seed: u64, cycle: u64, secs: u64) -> i32 {
    let db = match Db::open(dir, options(1)) {
        Ok(db) => db,
        Err(e) => {
            say(&format!("V open failed: {e}"));
            return 3;
        }
    };
    if !db.table_exists(TABLE).unwrap_or(false) {
        let desc = TableDescriptor::new(TABLE)
            .family(FamilyDescriptor::new("a").max_versions(1))
            .family(FamilyDescriptor::new("b").max_versions(1));
        if let Err(e) = db.create_table(desc) {
            say(&format!("V create table failed: {e}"));
            return 3;
        }
    }
    say(&format!("B {}", db.stats().wal.backend));
    say("READY");
    let stop = Arc::new(AtomicBool::new(false));
    let mut handles = Vec::new();
    for w in 0..WRITERS {
        let db = db.clone();
        let stop = stop.clone();
        handles.push(std::thread::spawn(move || {
            let mut rng = rng(seed.wrapping_mul(31).wrapping_add(cycle * 1000 + w));
            let Ok(t) = db.table(TABLE) else { return };
            let mut mine: Vec<String> = Vec::new();
            let mut i = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let d = if rng.next_u64() % 2 == 0 {
                    Durability::FsyncWal
                } else {
                    Durability::SyncWal
                };
                let opts = WriteOptions::durability(d);
                let roll = rng.next_u64() % 100;
                if i >= 2 && roll < 2 {
                    // A row-range delete of up to 20 of this writer's latest rows (some
                    // deleted already): `RB` before, `RA` with its seq once it returned.
                    let a = i - 1 - rng.next_u64() % i.min(20);
                    let (s, e) = (writer_key(cycle, w, a), writer_key(cycle, w, i));
                    say(&format!("RB {s} {e}"));
                    match t.delete_rows(s.as_bytes(), e.as_bytes()) {
                        Ok(seq) => say(&format!("RA {s} {e} {seq}")),
                        Err(err) => say(&format!("F {s} R {err}")),
                    }
                    mine.retain(|k| !(s.as_str() <= k.as_str() && k.as_str() < e.as_str()));
                } else if !mine.is_empty() && roll < 17 {
                    let k = mine.swap_remove((rng.next_u64() % mine.len() as u64) as usize);
                    say(&format!("I {k} D"));
                    match t.delete_with(Delete::new(k.as_str()), opts) {
                        Ok(seq) => say(&format!("A {k} D {seq}")),
                        Err(e) => say(&format!("F {k} D {e}")),
                    }
                } else {
                    let k = writer_key(cycle, w, i);
                    i += 1;
                    say(&format!("I {k} P"));
                    match t.put_with(row_put(&k), opts) {
                        Ok(seq) => {
                            say(&format!("A {k} P {seq}"));
                            mine.push(k);
                        }
                        Err(e) => say(&format!("F {k} P {e}")),
                    }
                }
            }
        }));
    }
    {
        let db = db.clone();
        let stop = stop.clone();
        handles.push(std::thread::spawn(move || {
            let Ok(t) = db.table(TABLE) else { return };
            while !stop.load(Ordering::Relaxed) {
                match t.scan(Scan::new()) {
                    Ok(it) => {
                        for r in it {
                            match r {
                                Ok(row) => {
                                    let key = String::from_utf8_lossy(&row.key).into_owned();
                                    if let Err(e) = row_is_whole(&key, &row) {
                                        say(&format!("V live read: {e}"));
                                    }
                                }
                                Err(e) => say(&format!("V live scan: {e}")),
                            }
                        }
                    }
                    Err(e) => say(&format!("V live scan: {e}")),
                }
                std::thread::sleep(Duration::from_millis(30));
            }
        }));
    }
    {
        let db = db.clone();
        let stop = stop.clone();
        handles.push(std::thread::spawn(move || {
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(120));
                n += 1;
                // The feed slot's consumer, lagging: reads some batches and acknowledges them
                // (`KB` before the ack, `KA` once it returned).
                if n % 2 == 1 {
                    if let Err(e) = consume_slot(&db) {
                        say(&format!("V feed slot: {e}"));
                    }
                }
                let r = match n % 6 {
                    0 => db.major_compact(TABLE, None),
                    3 => alter_probe(&db, cycle, n),
                    // A table snapshot: `SB` before the call, `SA` once it returned (the
                    // harness then holds it to every row acknowledged before `SB`).
                    2 | 4 => table_snapshot(&db, cycle, n),
                    _ => db.flush(),
                };
                if let Err(e) = r {
                    say(&format!("V maintenance: {e}"));
                }
            }
        }));
    }
    std::thread::sleep(Duration::from_secs(secs));
    stop.store(true, Ordering::Relaxed);
    for h in handles {
        let _ = h.join();
    }
    for (p, n) in cellar::kill::hits() {
        say(&format!("H {p} {n}"));
    }
    say("DONE");
    0
}

/// The row key of writer `w`'s `i`-th put in `cycle`: a writer's keys of a cycle are one
/// contiguous, growing run, so a range of them holds no other writer's rows.
fn writer_key(cycle: u64, w: u64, i: u64) -> String {
    format!("c{cycle:05}-w{w}-{i:06}")
}

/// The table the harness clones each table snapshot into to check it (dropped after).
const SNAPSHOT_CHECK: &str = "snapshot_check";

/// The feed slot the children consume and the harness checks; the harness creates it.
const SLOT: &str = "crash-consumer";

/// Batches the child's slot consumer reads per turn: fewer than the writers write, so the
/// slot lags and holds segments the flushes released.
const SLOT_BATCHES_PER_TURN: usize = 200;

/// One turn of the child's slot consumer.
fn consume_slot(db: &Db) -> cellar::Result<()> {
    let mut feed = match db.feed_slot_changes(SLOT, Default::default()) {
        Ok(f) => f,
        Err(cellar::Error::FeedSlotNotFound(_)) => return Ok(()),
        Err(e) => return Err(e),
    };
    let start = feed.position();
    for _ in 0..SLOT_BATCHES_PER_TURN {
        if feed.next_batch()?.is_none() {
            break;
        }
    }
    let pos = feed.position();
    if pos > start {
        say(&format!("KB {pos}"));
        db.ack_feed_slot(SLOT, pos)?;
        say(&format!("KA {pos}"));
    }
    Ok(())
}

/// Create the probe table, or alter it to a `max_versions` no alter of this run had just
/// before (`XB`, then `XA` once the call returned).
fn alter_probe(db: &Db, cycle: u64, n: u64) -> cellar::Result<()> {
    let v = 1 + ((cycle * 7 + n) % 1000) as u32;
    say(&format!("XB {v}"));
    let desc = TableDescriptor::new(PROBE).family(FamilyDescriptor::new("p").max_versions(v));
    if db.table_exists(PROBE)? {
        db.alter_table(desc)?;
    } else {
        db.create_table(desc)?;
    }
    say(&format!("XA {v}"));
    Ok(())
}

/// Table snapshots the child keeps at most; older ones are deleted (`DB`, then `DA`).
const KEEP_SNAPSHOTS: usize = 3;

/// Take a table snapshot of the workload's table, then delete the oldest beyond
/// [`KEEP_SNAPSHOTS`], saying each step.
fn table_snapshot(db: &Db, cycle: u64, n: u64) -> cellar::Result<()> {
    let name = format!("s{cycle:05}-{n:05}");
    say(&format!("SB {name}"));
    db.snapshot_table(TABLE, &name)?;
    say(&format!("SA {name}"));
    let all = db.list_table_snapshots()?;
    for old in all.iter().take(all.len().saturating_sub(KEEP_SNAPSHOTS)) {
        say(&format!("DB {}", old.name));
        db.delete_table_snapshot(&old.name)?;
        say(&format!("DA {}", old.name));
    }
    Ok(())
}

/// A table snapshot the harness knows of.
#[derive(Debug, Clone)]
struct SnapExpect {
    /// Rows it must hold: acknowledged before it began, no delete begun before it returned.
    required: Vec<String>,
    /// `SA` seen: it must survive every crash until its delete begins.
    acked: bool,
}

/// The expected state of a row across cycles.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expect {
    Present,
    Absent,
    /// A put in flight or failed: either way, whole.
    MaybePut,
    /// A delete in flight or failed on a present row.
    MaybeDelete,
}

/// How a cycle kills its child.
#[derive(Debug, Clone)]
enum Kill {
    Random(Duration),
    Point(&'static str, u64),
}

struct Harness {
    args: HarnessArgs,
    exe: PathBuf,
    dir: PathBuf,
    rng: Rng,
    expect: HashMap<String, Expect>,
    /// Table snapshots begun and not deleted, by name.
    snaps: BTreeMap<String, SnapExpect>,
    /// Table snapshots whose delete began: present or not, whole if present.
    snaps_deleting: BTreeSet<String>,
    /// Acknowledged writes by seq: key, and whether a put (not a delete). Those the WAL
    /// retention has dropped are forgotten after each check.
    acked_seqs: BTreeMap<u64, (String, bool)>,
    /// The feed slot: whether the harness created it (durably), the last ack a child saw
    /// return (`KA`) or the harness made, and the highest a child began (`KB`).
    slot_created: bool,
    slot_acked: u64,
    slot_ack_begun: u64,
    /// The cycle's child died at `schema.after_edit`: the feed must end in that change.
    killed_after_schema_edit: bool,
    report: HarnessReport,
}

/// Run the harness with `exe` as the child binary (it must accept
/// `child --dir D --seed S --cycle C --secs T`, see [`ChildArgs`]). Named-point and random
/// kills alternate, so a run cut short by `max_secs` has both.
pub fn run(args: &HarnessArgs, exe: &Path) -> std::io::Result<HarnessReport> {
    let started = Instant::now();
    let tmp;
    let dir = match &args.dir {
        Some(d) => d.clone(),
        None => {
            tmp = tempfile::tempdir()?;
            tmp.path().join("db")
        }
    };
    let mut h = Harness {
        args: args.clone(),
        exe: exe.to_path_buf(),
        dir,
        rng: rng(args.seed),
        expect: HashMap::new(),
        snaps: BTreeMap::new(),
        snaps_deleting: BTreeSet::new(),
        acked_seqs: BTreeMap::new(),
        slot_created: false,
        slot_acked: 0,
        slot_ack_begun: 0,
        killed_after_schema_edit: false,
        report: HarnessReport::default(),
    };
    let mut points = Vec::new();
    if args.point_rounds > 0 && cellar::kill::ENABLED {
        for _ in 0..args.point_rounds {
            for p in cellar::kill::POINTS {
                // Hot points are hit many times a second: a later hit lands in a fuller state.
                let max_n = if p.starts_with("wal.") { 40 } else { 3 };
                points.push(Kill::Point(p, range(&mut h.rng, 1, max_n)));
            }
        }
    } else if args.point_rounds > 0 {
        h.report.violations.push(
            "named kill points asked for, but this build lacks the kill-points feature".into(),
        );
    }
    let mut randoms = Vec::new();
    for _ in 0..args.random_kills {
        let ms = range(&mut h.rng, args.min_ms, args.max_ms.max(args.min_ms));
        randoms.push(Kill::Random(Duration::from_millis(ms)));
    }
    let mut plan = Vec::new();
    let (mut points, mut randoms) = (points.into_iter(), randoms.into_iter());
    loop {
        let (p, r) = (points.next(), randoms.next());
        if p.is_none() && r.is_none() {
            break;
        }
        plan.extend(p);
        plan.extend(r);
    }
    for (cycle, kill) in plan.into_iter().enumerate() {
        if args
            .max_secs
            .is_some_and(|m| started.elapsed().as_secs_f64() >= m)
        {
            break;
        }
        h.cycle(cycle as u64, kill)?;
        if h.report.violations.len() > 50 {
            break;
        }
    }
    h.report.elapsed = started.elapsed();
    Ok(h.report)
}

impl Harness {
    fn cycle(&mut self, cycle: u64, kill: Kill) -> std::io::Result<()> {
        self.report.cycles += 1;
        let mut cmd = Command::new(&self.exe);
        cmd.arg("child")
            .arg("--dir")
            .arg(&self.dir)
            .arg("--seed")
            .arg(self.args.seed.to_string())
            .arg("--cycle")
            .arg(cycle.to_string())
            .arg("--secs")
            .arg(self.args.child_secs.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .env_remove(cellar::kill::ENV);
        if let Kill::Point(p, n) = &kill {
            cmd.env(cellar::kill::ENV, format!("{p}:{n}"));
        }
        let mut child = cmd.spawn()?;
        let (tx, rx) = mpsc::channel::<(bool, String)>();
        let mut readers = Vec::new();
        if let Some(out) = child.stdout.take() {
            let tx = tx.clone();
            readers.push(std::thread::spawn(move || {
                for l in BufReader::new(out).lines().map_while(Result::ok) {
                    let _ = tx.send((false, l));
                }
            }));
        }
        if let Some(err) = child.stderr.take() {
            let tx = tx.clone();
            readers.push(std::thread::spawn(move || {
                for l in BufReader::new(err).lines().map_while(Result::ok) {
                    let _ = tx.send((true, l));
                }
            }));
        }
        drop(tx);
        let mut lines: Vec<(bool, String)> = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(self.args.child_secs + 30);
        let mut kill_at: Option<Instant> = None;
        loop {
            match rx.recv_timeout(Duration::from_millis(5)) {
                Ok(l) => {
                    if !l.0 && l.1 == "READY" {
                        if let Kill::Random(d) = &kill {
                            kill_at = Some(Instant::now() + *d);
                        }
                    }
                    lines.push(l);
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => break,
                Err(mpsc::RecvTimeoutError::Timeout) => {}
            }
            let now = Instant::now();
            if kill_at.is_some_and(|t| now >= t) || now >= deadline {
                let _ = child.kill(); // SIGKILL
                kill_at = None;
            }
        }
        let status = child.wait()?;
        for r in readers {
            let _ = r.join();
        }
        let killed_at_point = lines
            .iter()
            .any(|(err, l)| *err && l.starts_with(cellar::kill::KILLED_AT));
        self.killed_after_schema_edit =
            killed_at_point && matches!(&kill, Kill::Point(p, _) if *p == "schema.after_edit");
        match &kill {
            Kill::Random(_) => self.report.random_kills += 1,
            Kill::Point(p, _) if killed_at_point => {
                *self.report.point_kills.entry(p.to_string()).or_default() += 1;
            }
            Kill::Point(p, _) => {
                *self.report.point_misses.entry(p.to_string()).or_default() += 1;
            }
        }
        let what = format!("cycle {cycle} ({kill:?}, exit {status})");
        for (err, l) in &lines {
            if *err {
                continue;
            }
            let mut parts = l.splitn(4, ' ');
            match (parts.next(), parts.next(), parts.next()) {
                (Some("I"), Some(k), Some("P")) => {
                    self.expect.insert(k.to_owned(), Expect::MaybePut);
                }
                (Some("A"), Some(k), Some("P")) => {
                    self.expect.insert(k.to_owned(), Expect::Present);
                    if let Some(seq) = parts.next().and_then(|s| s.parse().ok()) {
                        self.acked_seqs.insert(seq, (k.to_owned(), true));
                    }
                }
                (Some("I"), Some(k), Some("D")) => {
                    self.expect.insert(k.to_owned(), Expect::MaybeDelete);
                    // A snapshot not yet returned may or may not see this delete.
                    for snap in self.snaps.values_mut().filter(|s| !s.acked) {
                        snap.required.retain(|r| r != k);
                    }
                }
                (Some("RB"), Some(start), Some(stop)) => {
                    let stop = stop.split(' ').next().unwrap_or(stop);
                    let in_range = |k: &str| start <= k && k < stop;
                    for (k, e) in self.expect.iter_mut() {
                        if in_range(k) {
                            *e = Expect::MaybeDelete;
                        }
                    }
                    for snap in self.snaps.values_mut().filter(|s| !s.acked) {
                        snap.required.retain(|r| !in_range(r));
                    }
                }
                (Some("RA"), Some(start), Some(stop)) => {
                    for (k, e) in self.expect.iter_mut() {
                        if start <= k.as_str() && k.as_str() < stop {
                            *e = Expect::Absent;
                        }
                    }
                    if let Some(seq) = parts.next().and_then(|s| s.parse().ok()) {
                        self.acked_seqs.insert(seq, (start.to_owned(), false));
                        self.report.range_deletes_acked += 1;
                    }
                }
                (Some("SB"), Some(name), _) => {
                    let required = self
                        .expect
                        .iter()
                        .filter(|(_, e)| **e == Expect::Present)
                        .map(|(k, _)| k.clone())
                        .collect();
                    self.snaps.insert(
                        name.to_owned(),
                        SnapExpect {
                            required,
                            acked: false,
                        },
                    );
                }
                (Some("SA"), Some(name), _) => {
                    if let Some(s) = self.snaps.get_mut(name) {
                        s.acked = true;
                    }
                }
                (Some("DB"), Some(name), _) => {
                    self.snaps.remove(name);
                    self.snaps_deleting.insert(name.to_owned());
                }
                (Some("DA"), Some(name), _) => {
                    self.snaps_deleting.remove(name);
                    self.report.snapshots_deleted += 1;
                }
                (Some("A"), Some(k), Some("D")) => {
                    self.expect.insert(k.to_owned(), Expect::Absent);
                    if let Some(seq) = parts.next().and_then(|s| s.parse().ok()) {
                        self.acked_seqs.insert(seq, (k.to_owned(), false));
                    }
                }
                (Some("F"), Some(k), _) => {
                    // Not expected under SIGKILL (no I/O fails); the write stays "maybe".
                    self.report
                        .violations
                        .push(format!("{what}: a write failed without a fault: {k}: {l}"));
                }
                (Some("KB"), Some(seq), _) => {
                    let seq = seq.parse().unwrap_or(0);
                    self.slot_ack_begun = self.slot_ack_begun.max(seq);
                }
                (Some("KA"), Some(seq), _) => {
                    let seq = seq.parse().unwrap_or(0);
                    self.slot_acked = self.slot_acked.max(seq);
                }
                (Some("XA"), Some(_), _) => self.report.alters_acked += 1,
                (Some("V"), _, _) => self.report.violations.push(format!("{what}: {l}")),
                (Some("B"), Some(b), _) => self.report.backend = b.to_owned(),
                (Some("H"), Some(p), Some(n)) => {
                    *self.report.point_hits.entry(p.to_owned()).or_default() +=
                        n.parse::<u64>().unwrap_or(0);
                }
                _ => {}
            }
        }
        if let Err(v) = self.verify() {
            self.report.violations.push(format!("{what}: {v}"));
        }
        Ok(())
    }

    /// Reopen in-process and check every invariant; resolve in-flight writes.
    fn verify(&mut self) -> Result<(), String> {
        if !self.dir.exists() {
            // Killed before the database existed (e.g. at its first CURRENT install).
            return Ok(());
        }
        let db = Db::open(&self.dir, options(0)).map_err(|e| format!("reopen failed: {e}"))?;
        // Replayed data goes to files, so the file checks see the recovered state's files.
        db.flush().map_err(|e| format!("flush after reopen: {e}"))?;
        let mut found: HashMap<String, ()> = HashMap::new();
        if db.table_exists(TABLE).map_err(|e| e.to_string())? {
            let t = db.table(TABLE).map_err(|e| e.to_string())?;
            let it = t.scan(Scan::new()).map_err(|e| format!("scan: {e}"))?;
            for r in it {
                let row = r.map_err(|e| format!("scan after reopen: {e}"))?;
                let key = String::from_utf8_lossy(&row.key).into_owned();
                match self.expect.get(&key) {
                    None => return Err(format!("phantom row {key}: never written")),
                    Some(Expect::Absent) => {
                        return Err(format!("row {key} is back after its delete or loss"))
                    }
                    Some(_) => {}
                }
                row_is_whole(&key, &row).map_err(|e| format!("torn or wrong row: {e}"))?;
                found.insert(key, ());
            }
        }
        let mut violations = Vec::new();
        for (k, e) in self.expect.iter_mut() {
            let present = found.contains_key(k);
            match *e {
                Expect::Present => {
                    self.report.acked_checked += 1;
                    if !present {
                        violations.push(format!("acknowledged row {k} lost"));
                        // Reported once; later cycles check the rest.
                        *e = Expect::Absent;
                    }
                }
                Expect::Absent => self.report.acked_checked += 1,
                Expect::MaybePut | Expect::MaybeDelete => {
                    if present {
                        self.report.maybe_applied += 1;
                    } else {
                        self.report.maybe_lost += 1;
                    }
                    // Fixed from now on: flushed above if present, gone from the WAL if not.
                    *e = if present {
                        Expect::Present
                    } else {
                        Expect::Absent
                    };
                }
            }
        }
        if let Some(v) = violations.first() {
            return Err(format!(
                "{v} ({} acknowledged rows lost in all)",
                violations.len()
            ));
        }
        // Before the feed check, which forgets acknowledged seqs below what the WAL keeps.
        self.verify_slot(&db)?;
        self.verify_feed(&db, &found)?;
        // Structural soundness: every HFile on disk is live and verifies; one manifest.
        let data = self.dir.join(cellar::manifest::DATA_DIR);
        let mut on_disk = 0u64;
        for fam in std::fs::read_dir(&data).into_iter().flatten().flatten() {
            for f in std::fs::read_dir(fam.path())
                .into_iter()
                .flatten()
                .flatten()
            {
                let p = f.path();
                if p.extension().is_some_and(|x| x == "hfile") {
                    on_disk += 1;
                    let file = std::fs::File::open(&p).map_err(|e| e.to_string())?;
                    let rep = cellar_format::verify(&file, &p.display().to_string())
                        .map_err(|e| format!("{}: {e}", p.display()))?;
                    if !rep.is_clean() {
                        return Err(format!(
                            "{} does not verify: {:?}",
                            p.display(),
                            rep.problems
                        ));
                    }
                    self.report.files_verified += 1;
                }
            }
        }
        let live = db.stats().live_files;
        if on_disk != live {
            return Err(format!(
                "{on_disk} HFiles on disk but {live} live: orphans after open"
            ));
        }
        let manifests = std::fs::read_dir(&self.dir)
            .map_err(|e| e.to_string())?
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with("MANIFEST-"))
            .count();
        if manifests != 1 {
            return Err(format!("{manifests} manifests after open"));
        }
        self.verify_snapshots(&db)
    }

    /// The feed slot survived every crash so far: it exists once its creation returned, its
    /// position is an ack a child began and at or above the last one that returned, and its
    /// feed holds every acknowledged write after that position (its segments were kept). Then
    /// the harness, as a consumer caught up, acknowledges it to the end (creating it the
    /// first time).
    fn verify_slot(&mut self, db: &Db) -> Result<(), String> {
        let slots = db.feed_slots().map_err(|e| format!("feed_slots: {e}"))?;
        let Some(slot) = slots.iter().find(|s| s.name == SLOT) else {
            if self.slot_created {
                return Err(format!(
                    "feed slot {SLOT} is gone after its creation returned"
                ));
            }
            let since = db.flushed_seq();
            db.create_feed_slot(SLOT, since)
                .map_err(|e| format!("create_feed_slot: {e}"))?;
            self.slot_created = true;
            (self.slot_acked, self.slot_ack_begun) = (since, since);
            return Ok(());
        };
        if slot.lost {
            return Err(format!("feed slot {SLOT} is lost"));
        }
        let most = self.slot_acked.max(self.slot_ack_begun);
        if slot.acked < self.slot_acked || slot.acked > most {
            return Err(format!(
                "feed slot {SLOT} stands at seq {}, but the acks returned reach {} and those \
                 begun {most}",
                slot.acked, self.slot_acked
            ));
        }
        let mut feed = db
            .feed_slot_changes(SLOT, Default::default())
            .map_err(|e| format!("feed_slot_changes: {e}"))?;
        let mut seen = BTreeSet::new();
        while let Some(b) = feed
            .next_batch()
            .map_err(|e| format!("feed slot after seq {}: {e}", feed.position()))?
        {
            if b.seq <= slot.acked {
                return Err(format!(
                    "feed slot at seq {} handed out seq {}",
                    slot.acked, b.seq
                ));
            }
            seen.insert(b.seq);
            self.report.slot_batches_checked += 1;
        }
        if let Some((seq, (k, _))) = self
            .acked_seqs
            .range(slot.acked + 1..)
            .find(|(seq, _)| !seen.contains(*seq))
        {
            return Err(format!(
                "acknowledged write of {k} at seq {seq} missing from the feed slot (at seq {})",
                slot.acked
            ));
        }
        let end = feed.position();
        drop(feed);
        db.ack_feed_slot(SLOT, end)
            .map_err(|e| format!("ack_feed_slot: {e}"))?;
        (self.slot_acked, self.slot_ack_begun) = (end, end);
        Ok(())
    }

    /// The change feed over the WAL kept (`FEED_RETAIN_BYTES`), across every crash so far:
    /// each batch is one whole row put or one row delete of a key the children attempted;
    /// every acknowledged write after the feed's start is in it, at its seq; and the last
    /// event of each key in it agrees with the recovered rows.
    fn verify_feed(&mut self, db: &Db, found: &HashMap<String, ()>) -> Result<(), String> {
        use cellar::format::CellType;
        let (mut feed, since) = match db.changes_since(0) {
            Ok(f) => (f, 0),
            Err(cellar::Error::ChangesUnavailable { oldest, .. }) => (
                db.changes_since(oldest)
                    .map_err(|e| format!("change feed from {oldest}: {e}"))?,
                oldest,
            ),
            Err(e) => return Err(format!("change feed: {e}")),
        };
        let mut last: HashMap<String, bool> = HashMap::new();
        let mut seen = BTreeSet::new();
        // The last schema batch (row-range deletes aside), and the last record of the probe.
        let mut last_schema: Option<Vec<cellar::SchemaChange>> = None;
        let mut last_probe: Option<u32> = None;
        while let Some(b) = feed
            .next_batch()
            .map_err(|e| format!("change feed after seq {}: {e}", feed.position()))?
        {
            // The schema changes made: the table's creation, and the harness's clones of
            // table snapshots (`SNAPSHOT_CHECK`), each dropped after its check.
            if let [cellar::SchemaChange::RowsDeleted {
                table,
                families,
                start,
                stop,
                ..
            }] = &b.schema[..]
            {
                let (start, stop) = (
                    String::from_utf8_lossy(start).into_owned(),
                    String::from_utf8_lossy(stop).into_owned(),
                );
                let ours = table.to_string() == TABLE
                    && families == &["a", "b"]
                    && b.cells.is_empty()
                    && start < stop
                    && self
                        .acked_seqs
                        .get(&b.seq)
                        .is_none_or(|(k, p)| *k == start && !p);
                if !ours {
                    return Err(format!(
                        "change feed: batch {} is not a row-range delete the workload made: {:?}",
                        b.seq, b.schema
                    ));
                }
                for (k, put) in last.iter_mut() {
                    if start <= *k && *k < stop {
                        *put = false;
                    }
                }
                seen.insert(b.seq);
                self.report.feed_batches_checked += 1;
                continue;
            }
            if !b.schema.is_empty() {
                let created = b.schema.iter().all(|c| match c {
                    cellar::SchemaChange::Table {
                        descriptor,
                        data_replaced: false,
                    } => [TABLE, SNAPSHOT_CHECK, PROBE]
                        .contains(&descriptor.name.to_string().as_str()),
                    cellar::SchemaChange::TableDropped { name } => {
                        name.to_string() == SNAPSHOT_CHECK
                    }
                    _ => false,
                });
                if !created || !b.cells.is_empty() {
                    return Err(format!(
                        "change feed: batch {} holds schema changes the workload never made: {:?}",
                        b.seq, b.schema
                    ));
                }
                for c in &b.schema {
                    if let cellar::SchemaChange::Table { descriptor, .. } = c {
                        if descriptor.name.to_string() == PROBE {
                            last_probe = descriptor.families.first().map(|f| f.max_versions);
                        }
                    }
                }
                last_schema = Some(b.schema);
                self.report.feed_batches_checked += 1;
                continue;
            }
            let Some(first) = b.cells.first() else {
                return Err(format!("change feed: batch {} is empty", b.seq));
            };
            let key = String::from_utf8_lossy(&first.row).into_owned();
            if !self.expect.contains_key(&key) {
                return Err(format!("change feed: phantom row {key} at seq {}", b.seq));
            }
            let put = first.cell_type == CellType::Put;
            let whole = if put {
                b.cells.len() == CELLS
                    && (0..CELLS).all(|j| {
                        let (f, q) = column(j);
                        b.cells.iter().any(|c| {
                            c.row == first.row
                                && c.family.as_deref() == Some(f)
                                && c.qualifier == q.as_bytes()
                                && c.value == cell_value(&key, j).as_bytes()
                        })
                    })
            } else {
                b.cells
                    .iter()
                    .all(|c| c.row == first.row && c.cell_type == CellType::DeleteFamily)
            };
            if !whole {
                return Err(format!(
                    "change feed: batch {} is not one whole row put or delete of {key}",
                    b.seq
                ));
            }
            if let Some((k, p)) = self.acked_seqs.get(&b.seq) {
                if *k != key || *p != put {
                    return Err(format!(
                        "change feed: seq {} is a {} of {key}, acknowledged as a {} of {k}",
                        b.seq,
                        if put { "put" } else { "delete" },
                        if *p { "put" } else { "delete" }
                    ));
                }
            }
            last.insert(key, put);
            seen.insert(b.seq);
            self.report.feed_batches_checked += 1;
        }
        if let Some((seq, (k, _))) = self
            .acked_seqs
            .range(since + 1..)
            .find(|(seq, _)| !seen.contains(*seq))
        {
            return Err(format!(
                "acknowledged write of {k} at seq {seq} missing from the change feed (after \
                 seq {since})"
            ));
        }
        for (k, put) in &last {
            if *put != found.contains_key(k) {
                return Err(format!(
                    "change feed ends with a {} of {k}, but the recovered row is {}",
                    if *put { "put" } else { "delete" },
                    if *put { "absent" } else { "present" }
                ));
            }
        }
        self.acked_seqs = self.acked_seqs.split_off(&(since + 1));
        self.verify_schema_records(db, last_schema, last_probe)
    }

    /// The feed's schema records say what the tables are: the probe's last record (when the
    /// WAL kept still holds one) is its descriptor now; and after a kill between a schema
    /// edit and its record, the feed ends in that change (recovery appended it).
    fn verify_schema_records(
        &mut self,
        db: &Db,
        last_schema: Option<Vec<cellar::SchemaChange>>,
        last_probe: Option<u32>,
    ) -> Result<(), String> {
        let versions = |name: &str| -> Result<Option<u32>, String> {
            match db.describe(name) {
                Ok(d) => Ok(d.families.first().map(|f| f.max_versions)),
                Err(cellar::Error::TableNotFound(_)) => Ok(None),
                Err(e) => Err(format!("describe {name}: {e}")),
            }
        };
        if let Some(v) = last_probe {
            let now = versions(PROBE)?;
            if now != Some(v) {
                return Err(format!(
                    "the change feed's last record of table {PROBE} gives max_versions {v}, \
                     but the table has {now:?}"
                ));
            }
        }
        if !self.killed_after_schema_edit {
            return Ok(());
        }
        let described: Vec<(String, Option<u32>)> = last_schema
            .iter()
            .flatten()
            .filter_map(|c| match c {
                cellar::SchemaChange::Table { descriptor, .. } => Some((
                    descriptor.name.to_string(),
                    descriptor.families.first().map(|f| f.max_versions),
                )),
                _ => None,
            })
            .collect();
        let ours = described
            .iter()
            .any(|(name, _)| name == PROBE || name == TABLE);
        if !ours {
            return Err(format!(
                "killed between a schema edit and its record, but the change feed's last \
                 schema record is {last_schema:?}"
            ));
        }
        for (name, v) in described {
            if versions(&name)? != v {
                return Err(format!(
                    "killed between a schema edit and its record; the feed's last schema \
                     record gives {name} max_versions {v:?}, the table has {:?}",
                    versions(&name)?
                ));
            }
        }
        Ok(())
    }

    /// Every table snapshot acknowledged and not being deleted is there, and a clone of it
    /// holds every row it must, whole, and no row never written; one begun and not
    /// acknowledged is there whole or not at all; one deleted is gone.
    fn verify_snapshots(&mut self, db: &Db) -> Result<(), String> {
        let listed: BTreeSet<String> = db
            .list_table_snapshots()
            .map_err(|e| format!("list_table_snapshots: {e}"))?
            .into_iter()
            .map(|s| s.name)
            .collect();
        for name in &listed {
            if !self.snaps.contains_key(name) && !self.snaps_deleting.contains(name) {
                return Err(format!("table snapshot {name} is back after its delete"));
            }
        }
        let mut gone = Vec::new();
        for (name, snap) in &self.snaps {
            if !listed.contains(name) {
                if snap.acked {
                    return Err(format!("acknowledged table snapshot {name} lost"));
                }
                gone.push(name.clone());
                continue;
            }
            db.clone_table_snapshot(name, SNAPSHOT_CHECK)
                .map_err(|e| format!("clone of table snapshot {name}: {e}"))?;
            let mut found = BTreeSet::new();
            let t = db.table(SNAPSHOT_CHECK).map_err(|e| e.to_string())?;
            for r in t.scan(Scan::new()).map_err(|e| format!("scan: {e}"))? {
                let row = r.map_err(|e| format!("scan of snapshot {name}: {e}"))?;
                let key = String::from_utf8_lossy(&row.key).into_owned();
                if !self.expect.contains_key(&key) {
                    return Err(format!("table snapshot {name}: phantom row {key}"));
                }
                row_is_whole(&key, &row)
                    .map_err(|e| format!("table snapshot {name}: torn row: {e}"))?;
                found.insert(key);
            }
            if let Some(k) = snap.required.iter().find(|k| !found.contains(*k)) {
                return Err(format!(
                    "table snapshot {name} lacks row {k}, acknowledged before it"
                ));
            }
            drop(t);
            db.drop_table(SNAPSHOT_CHECK).map_err(|e| e.to_string())?;
            self.report.snapshots_checked += 1;
        }
        // Begun, never acknowledged, and not there: it never will be.
        for name in gone {
            self.snaps.remove(&name);
        }
        self.snaps_deleting.retain(|n| listed.contains(n));
        Ok(())
    }
}
