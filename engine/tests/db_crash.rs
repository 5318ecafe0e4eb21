//! The real SIGKILL test of the whole engine. The test binary re-executes itself as a child
//! (`crash_child`, selected by environment variables) that opens the database, creates the
//! table if it is missing, and writes rows from 4 threads at one durability level, printing
//! `ACK <row>` after each `put` returned `Ok`. A small write buffer makes flushes happen during
//! the run. The parent reads the acks, SIGKILLs the child after some number of them (varied
//! per cycle), reopens the directory in-process and checks:
//!
//! 1. every acknowledged row is readable with exactly the values written (no acknowledged
//!    write lost — SIGKILL keeps the page cache, so this holds for `SyncWal` as for `FsyncWal`);
//! 2. every row present, acknowledged or in flight, is whole and holds exactly the values its
//!    key determines (row atomicity, no phantoms, no corruption returned as data).
//!
//! Cycles run on the same directory, so files, WAL segments and manifest accumulate and each
//! recovery starts from the previous one's state.

mod common;

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use cellar::{
    Db, Durability, FamilyDescriptor, Get, Options, Put, Row, Scan, TableDescriptor, WriteOptions,
};

const ENV_DIR: &str = "CELLAR_DB_CRASH_DIR";
const ENV_DURABILITY: &str = "CELLAR_DB_CRASH_DURABILITY";
const ENV_CYCLE: &str = "CELLAR_DB_CRASH_CYCLE";
const ENV_CELLS: &str = "CELLAR_DB_CRASH_CELLS";
const ENV_PUTS: &str = "CELLAR_DB_CRASH_PUTS_PER_THREAD";
const ENV_WBS: &str = "CELLAR_DB_CRASH_WRITE_BUFFER";
const ENV_SECS: &str = "CELLAR_DB_CRASH_SECS";

const TABLE: &str = "crash";
const THREADS: u32 = 4;

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn opts(write_buffer: usize) -> Options {
    Options::default().write_buffer_size(write_buffer)
}

/// Family and qualifier of cell `j` of a row.
fn column(j: usize) -> (&'static str, String) {
    (if j % 2 == 0 { "a" } else { "b" }, format!("q{j:03}"))
}

/// The value of cell `j` of row `key`: determined by both, so any row can be checked.
fn cell_value(key: &str, j: usize) -> String {
    format!("{key}/{j}/{}", "x".repeat(j % 17))
}

fn row_put(key: &str, cells: usize) -> Put {
    (0..cells).fold(Put::new(key), |p, j| {
        let (f, q) = column(j);
        p.add(f, q, cell_value(key, j))
    })
}

/// Child mode only (does nothing in a normal test run).
#[test]
fn crash_child() {
    let Ok(dir) = std::env::var(ENV_DIR) else {
        return;
    };
    let durability = match std::env::var(ENV_DURABILITY).as_deref() {
        Ok("sync") => Durability::SyncWal,
        _ => Durability::FsyncWal,
    };
    let cycle: u32 = env_or(ENV_CYCLE, 0);
    let cells: usize = env_or(ENV_CELLS, 4);
    let puts: u64 = env_or(ENV_PUTS, u64::MAX);
    let wbs: usize = env_or(ENV_WBS, 64 << 10);
    let secs: u64 = env_or(ENV_SECS, 60);
    let db = Db::open(&dir, opts(wbs)).unwrap();
    if !db.table_exists(TABLE).unwrap() {
        db.create_table(
            TableDescriptor::new(TABLE)
                .family(FamilyDescriptor::new("a").max_versions(1))
                .family(FamilyDescriptor::new("b").max_versions(1)),
        )
        .unwrap();
    }
    // Leading newline: libtest has already printed "test crash_child ... " on this line.
    writeln!(
        std::io::stdout().lock(),
        "\nBACKEND {}",
        db.stats().wal.backend
    )
    .unwrap();
    let deadline = Instant::now() + Duration::from_secs(secs);
    let threads: Vec<_> = (0..THREADS)
        .map(|t| {
            let table = db.table(TABLE).unwrap();
            std::thread::spawn(move || {
                let w = WriteOptions::durability(durability);
                let mut i = 0u64;
                // Bounded so an orphaned child cannot run forever.
                while i < puts && Instant::now() < deadline {
                    let key = format!("c{cycle:02}-t{t}-{i:07}");
                    table.put_with(row_put(&key, cells), w).unwrap();
                    // Bypasses libtest's output capture; one write per line.
                    writeln!(std::io::stdout().lock(), "ACK {key}").unwrap();
                    i += 1;
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    writeln!(std::io::stdout().lock(), "DONE").unwrap();
}

/// What one child run produced.
struct ChildRun {
    acked: Vec<String>,
    /// The child printed DONE: it ran out of work before the kill.
    done: bool,
    backend: String,
    elapsed: Duration,
}

/// Run a child on `dir` and SIGKILL it once it has acknowledged `kill_after` rows.
fn run_child(
    dir: &Path,
    durability: &str,
    cycle: u32,
    kill_after: usize,
    extra_env: &[(&str, String)],
    limit: Duration,
) -> ChildRun {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args([
        "--exact",
        "crash_child",
        "--nocapture",
        "--test-threads",
        "1",
    ])
    .env(ENV_DIR, dir)
    .env(ENV_DURABILITY, durability)
    .env(ENV_CYCLE, cycle.to_string())
    .env("RUST_BACKTRACE", "0")
    .stdout(Stdio::piped())
    .stderr(Stdio::null());
    for (k, v) in extra_env {
        cmd.env(k, v);
    }
    let t0 = Instant::now();
    let mut child = cmd.spawn().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut acked = Vec::new();
    let mut backend = String::new();
    let mut done = false;
    let mut parse = |line: &str, acked: &mut Vec<String>| match line
        .split_whitespace()
        .collect::<Vec<_>>()
        .as_slice()
    {
        ["ACK", key] => acked.push(key.to_string()),
        ["BACKEND", b] => backend = b.to_string(),
        ["DONE"] => done = true,
        _ => {}
    };
    for line in lines.by_ref() {
        parse(&line.unwrap(), &mut acked);
        if acked.len() >= kill_after {
            break;
        }
        assert!(t0.elapsed() < limit, "child too slow: {} acks", acked.len());
    }
    let elapsed = t0.elapsed();
    child.kill().unwrap(); // SIGKILL
    let status = child.wait().unwrap();
    // Acks printed before the kill are acknowledgements too.
    for line in lines.map_while(Result::ok) {
        parse(&line, &mut acked);
    }
    assert!(
        acked.len() >= kill_after,
        "child exited early ({status}) after {} acks",
        acked.len()
    );
    ChildRun {
        acked,
        done,
        backend,
        elapsed,
    }
}

/// Check that `r` is the whole row its key determines.
fn check_row(r: &Row, cells: usize) {
    let key = std::str::from_utf8(&r.key).unwrap();
    assert_eq!(r.cells().len(), cells, "row {key} is not whole");
    for j in 0..cells {
        let (f, q) = column(j);
        assert_eq!(
            r.value(f, &q),
            Some(cell_value(key, j).as_bytes()),
            "row {key} cell {j}"
        );
    }
}

/// Reopen `dir`, check every acknowledged row and every row present; returns rows present.
fn verify(dir: &Path, acked: &BTreeSet<String>, cells: usize, wbs: usize) -> (Db, usize) {
    let db = match Db::open(dir, opts(wbs)) {
        Ok(db) => db,
        Err(e) => panic!("recovery failed: {e}"),
    };
    if !db.table_exists(TABLE).unwrap() {
        assert!(acked.is_empty(), "table lost with acknowledged rows");
        return (db, 0);
    }
    let t = db.table(TABLE).unwrap();
    for key in acked {
        match t.get(&Get::new(key.as_str())).unwrap() {
            Some(r) => check_row(&r, cells),
            None => panic!("acknowledged row {key} lost"),
        }
    }
    let mut present = 0usize;
    for r in t.scan(Scan::new()).unwrap() {
        check_row(&r.unwrap(), cells);
        present += 1;
    }
    assert!(present >= acked.len());
    (db, present)
}

fn crash_cycles(durability: &str, kill_points: &[usize]) {
    let dir = tempfile::tempdir().unwrap();
    let cells = 4;
    let wbs = 64 << 10;
    let mut acked: BTreeSet<String> = BTreeSet::new();
    for (cycle, &kill_after) in kill_points.iter().enumerate() {
        let run = run_child(
            dir.path(),
            durability,
            cycle as u32,
            kill_after,
            &[],
            Duration::from_secs(60),
        );
        assert!(!run.done, "child finished before it was killed");
        for k in run.acked {
            assert!(acked.insert(k), "row acknowledged twice");
        }
        let (db, present) = verify(dir.path(), &acked, cells, wbs);
        let s = db.stats();
        eprintln!(
            "{durability} cycle {cycle}: backend {}, {} acked in total, {present} rows present, \
             {} live files, {:?} to the kill",
            run.backend,
            acked.len(),
            s.live_files,
            run.elapsed
        );
        assert!(s.live_files > 0 || cycle == 0, "no file was ever flushed");
        drop(db);
    }
    // A final clean open after all the crashes: the state is stable.
    let (db, _) = verify(dir.path(), &acked, cells, wbs);
    db.flush().unwrap();
}

#[test]
fn sigkill_loses_no_acknowledged_fsync_wal_write() {
    // Tiny counts kill the child while its own recovery flush may still run.
    crash_cycles("fsync", &[300, 1200, 1, 2000, 10, 700, 1500]);
}

#[test]
fn sigkill_loses_no_acknowledged_sync_wal_write() {
    crash_cycles("sync", &[500, 2500, 5, 1500, 200, 900]);
}

/// One million cells from 4 threads with `FsyncWal`, 100 cells per row mutation, SIGKILLed
/// near the end, then every acknowledged cell read back. Prints the figures:
///
/// ```text
/// cargo test --release -p cellar --test db_crash -- --ignored million --nocapture
/// ```
#[test]
#[ignore = "takes minutes; run in release"]
fn million_cells_fsync_crash() {
    let dir = tempfile::tempdir().unwrap();
    let cells = 100usize;
    let rows_total = 1_000_000 / cells;
    let per_thread = rows_total / THREADS as usize;
    let wbs = 8 << 20;
    let kill_after = rows_total - rows_total / 100;
    let run = run_child(
        dir.path(),
        "fsync",
        0,
        kill_after,
        &[
            (ENV_CELLS, cells.to_string()),
            (ENV_PUTS, per_thread.to_string()),
            (ENV_WBS, wbs.to_string()),
            (ENV_SECS, "1200".to_string()),
        ],
        Duration::from_secs(1200),
    );
    let size_at_kill = common::du(dir.path());
    let acked: BTreeSet<String> = run.acked.iter().cloned().collect();
    assert_eq!(acked.len(), run.acked.len());
    let t0 = Instant::now();
    let (db, present) = verify(dir.path(), &acked, cells, wbs);
    let verify_time = t0.elapsed();
    let s = db.stats();
    let backend = s.wal.backend;
    db.flush().unwrap();
    let size_after = common::du(dir.path());
    let live = db.stats().live_files;
    drop(db);
    let secs = run.elapsed.as_secs_f64();
    if run.done {
        eprintln!("million: the child finished all its writes before the kill landed");
    }
    eprintln!(
        "million: child backend {}, reopened backend {backend}; {} rows = {} cells acked in \
         {secs:.1} s ({:.0} cells/s); {present} rows present after recovery; recovery + \
         verification {verify_time:?}; on disk {:.1} MiB at the kill, {:.1} MiB after \
         recovery and flush ({live} HFiles)",
        run.backend,
        acked.len(),
        acked.len() * cells,
        (acked.len() * cells) as f64 / secs,
        size_at_kill as f64 / (1 << 20) as f64,
        size_after as f64 / (1 << 20) as f64,
    );
}
