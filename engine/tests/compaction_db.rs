//! Compaction inside a running database: files move down the levels, reads do not change,
//! HBase's major-compaction purges happen, snapshots and open scans are respected, writers
//! feel back-pressure from L0, and a SIGKILL in the middle of compaction loses nothing and
//! leaves no orphaned file after the next open.

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use cellar::compaction::CompactionOptions;
use cellar::{
    Db, Delete, FamilyDescriptor, Get, KeepDeletedCells, Options, Put, Row, Scan, TableDescriptor,
};

fn small_opts(threads: usize) -> Options {
    let mut o = Options::default().write_buffer_size(64 << 10);
    o.compaction = CompactionOptions {
        level0_file_num_compaction_trigger: 2,
        level0_slowdown_writes_trigger: 6,
        level0_stop_writes_trigger: 10,
        max_bytes_for_level_base: 64 << 10,
        target_file_size: 64 << 10,
        max_compaction_bytes: 4 << 20,
        threads,
        ..CompactionOptions::default()
    };
    o
}

fn open_table(dir: &Path, opts: Options, fam: FamilyDescriptor) -> Db {
    let db = Db::open(dir, opts).unwrap();
    if !db.table_exists("t").unwrap() {
        db.create_table(TableDescriptor::new("t").family(fam))
            .unwrap();
    }
    db
}

fn key(i: u64) -> String {
    format!("row{:08}", (i * 7919) % 100_000)
}

fn value(i: u64, gen: u64) -> String {
    format!("v{i}-{gen}-{}", "x".repeat((i % 50) as usize))
}

fn cells(rows: &[Row]) -> Vec<String> {
    rows.iter()
        .flat_map(|r| {
            r.cells().iter().map(|c| {
                format!(
                    "{}/{}:{}@{}={}",
                    String::from_utf8_lossy(&c.row),
                    c.family,
                    String::from_utf8_lossy(&c.qualifier),
                    c.timestamp,
                    String::from_utf8_lossy(&c.value)
                )
            })
        })
        .collect()
}

fn hfiles_on_disk(dir: &Path) -> usize {
    let mut n = 0;
    let data = dir.join("data");
    let Ok(fams) = std::fs::read_dir(&data) else {
        return 0;
    };
    for f in fams.flatten() {
        if let Ok(files) = std::fs::read_dir(f.path()) {
            n += files
                .flatten()
                .filter(|e| e.file_name().to_string_lossy().ends_with(".hfile"))
                .count();
        }
    }
    n
}

#[test]
fn flushes_trigger_compactions_and_reads_do_not_change() {
    let dir = tempfile::tempdir().unwrap();
    let db = open_table(
        dir.path(),
        small_opts(1),
        FamilyDescriptor::new("f").max_versions(2),
    );
    let t = db.table("t").unwrap();
    for gen in 0..3u64 {
        for i in 0..3000u64 {
            t.put(Put::new(key(i)).add_at("f", "q", gen + 1, value(i, gen)))
                .unwrap();
        }
        db.flush().unwrap();
    }
    let before = cells(
        &t.scan(Scan::new().all_versions())
            .unwrap()
            .collect::<Result<Vec<_>, _>>()
            .unwrap(),
    );
    db.wait_for_compactions().unwrap();
    let s = db.stats();
    let compactions: u64 = s.compaction.by_reason.values().sum();
    assert!(compactions > 0, "no compaction ran: {}", db.stats_report());
    assert!(
        s.compaction.levels[0].files < 2,
        "L0 still over its trigger: {}",
        db.stats_report()
    );
    // VERSIONS 2: the oldest generation is trimmed physically, which reads never saw anyway.
    assert!(
        s.compaction
            .dropped
            .get("too-many-versions")
            .copied()
            .unwrap_or(0)
            > 0
    );
    let after = cells(
        &t.scan(Scan::new().all_versions())
            .unwrap()
            .collect::<Result<Vec<_>, _>>()
            .unwrap(),
    );
    assert_eq!(before.len(), after.len());
    assert_eq!(before, after);
    // Deeper levels are sorted runs of disjoint files.
    assert!(s.write_amplification() > 1.0);
    let report = db.stats_report();
    assert!(report.contains("L1") && report.contains("write amplification"));
    // Reopen reads the same.
    drop(t);
    drop(db);
    let db = open_table(dir.path(), small_opts(1), FamilyDescriptor::new("f"));
    let t = db.table("t").unwrap();
    let reopened = cells(
        &t.scan(Scan::new().all_versions())
            .unwrap()
            .collect::<Result<Vec<_>, _>>()
            .unwrap(),
    );
    assert_eq!(before, reopened);
    db.wait_for_compactions().unwrap();
    assert_eq!(hfiles_on_disk(dir.path()) as u64, db.stats().live_files);
}

#[test]
fn major_compaction_purges_markers_and_what_they_mask() {
    let dir = tempfile::tempdir().unwrap();
    let db = open_table(
        dir.path(),
        small_opts(0),
        FamilyDescriptor::new("f").max_versions(3),
    );
    let t = db.table("t").unwrap();
    for ts in 1..=3 {
        t.put(Put::new("r").add_at("f", "q", ts, format!("v{ts}")))
            .unwrap();
    }
    t.put(Put::new("gone").add_at("f", "q", 1, "x")).unwrap();
    db.flush().unwrap();
    t.delete(Delete::new("gone")).unwrap();
    t.delete(Delete::new("r").column_at("f", "q", 2)).unwrap();
    db.flush().unwrap();
    // No background compaction here (threads 0): it would purge before the raw scan looks.
    let raw_before = cells(
        &t.scan(Scan::new().raw())
            .unwrap()
            .collect::<Result<Vec<_>, _>>()
            .unwrap(),
    );
    assert!(raw_before.len() >= 6, "{raw_before:?}");
    db.major_compact("t", None).unwrap();
    let raw_after = cells(
        &t.scan(Scan::new().raw())
            .unwrap()
            .collect::<Result<Vec<_>, _>>()
            .unwrap(),
    );
    assert_eq!(raw_after, vec!["r/f:q@3=v3", "r/f:q@1=v1"]);
    let s = db.stats();
    assert_eq!(s.compaction.levels[6].files, 1, "{}", db.stats_report());
    assert_eq!(s.live_files, 1);
    db.wait_for_compactions().unwrap();
    assert_eq!(hfiles_on_disk(dir.path()), 1);
}

#[test]
fn keep_deleted_cells_survive_major_compaction() {
    let dir = tempfile::tempdir().unwrap();
    let db = open_table(
        dir.path(),
        small_opts(1),
        FamilyDescriptor::new("f")
            .max_versions(3)
            .keep_deleted_cells(KeepDeletedCells::True),
    );
    let t = db.table("t").unwrap();
    t.put(Put::new("r").add_at("f", "q", 1, "v1")).unwrap();
    t.delete(Delete::new("r").columns_at("f", "q", 5)).unwrap();
    db.major_compact("t", Some("f")).unwrap();
    // The deleted cell is still readable by a read whose range ends before the marker.
    let row = t.get(&Get::new("r").time_range(0, 5)).unwrap().unwrap();
    assert_eq!(row.value("f", "q"), Some(&b"v1"[..]));
    assert!(t.get(&Get::new("r")).unwrap().is_none());
    assert!(db.major_compact("t", Some("nope")).is_err());
    assert!(db.major_compact("nope", None).is_err());
}

#[test]
fn snapshots_keep_what_they_see_through_major_compaction() {
    let dir = tempfile::tempdir().unwrap();
    let db = open_table(
        dir.path(),
        small_opts(1),
        FamilyDescriptor::new("f").max_versions(1),
    );
    let t = db.table("t").unwrap();
    t.put(Put::new("r").add_at("f", "q", 1, "old")).unwrap();
    t.put(Put::new("s").add_at("f", "q", 1, "s-old")).unwrap();
    let snap = db.snapshot();
    t.put(Put::new("r").add_at("f", "q", 2, "new")).unwrap();
    t.delete(Delete::new("s")).unwrap();
    db.major_compact("t", None).unwrap();
    let at = |row: &str| {
        t.get(&Get::new(row).at(&snap))
            .unwrap()
            .and_then(|r| r.value("f", "q").map(|v| v.to_vec()))
    };
    assert_eq!(at("r").as_deref(), Some(&b"old"[..]));
    assert_eq!(at("s").as_deref(), Some(&b"s-old"[..]));
    assert_eq!(
        t.get(&Get::new("r")).unwrap().unwrap().value("f", "q"),
        Some(&b"new"[..])
    );
    assert!(t.get(&Get::new("s")).unwrap().is_none());
    drop(snap);
    db.major_compact("t", None).unwrap();
    let raw = cells(
        &t.scan(Scan::new().raw())
            .unwrap()
            .collect::<Result<Vec<_>, _>>()
            .unwrap(),
    );
    assert_eq!(raw, vec!["r/f:q@2=new"]);
}

/// The rest of a scan of all 2000 rows whose `first` row came before generation 1 was
/// written: every row is read, and all of generation 0.
fn assert_rest_from_before(first: Row, scan: &mut cellar::ScanIter) {
    let rest: Vec<Row> = scan.by_ref().collect::<Result<_, _>>().unwrap();
    assert_eq!(rest.len() + 1, 2000);
    for r in std::iter::once(&first).chain(rest.iter()) {
        let v = String::from_utf8_lossy(r.value("f", "q").unwrap()).to_string();
        assert!(
            v.contains("-0-"),
            "the scan saw a write after it started: {v}"
        );
    }
}

#[test]
fn an_open_scan_keeps_reading_replaced_files() {
    let dir = tempfile::tempdir().unwrap();
    let db = open_table(dir.path(), small_opts(1), FamilyDescriptor::new("f"));
    let t = db.table("t").unwrap();
    for i in 0..2000u64 {
        t.put(Put::new(key(i)).add("f", "q", value(i, 0))).unwrap();
        if i % 500 == 499 {
            db.flush().unwrap();
        }
    }
    db.wait_for_compactions().unwrap();
    let mut scan = t.scan(Scan::new()).unwrap();
    let first = scan.next().unwrap().unwrap();
    // Rewrite everything under the scan's feet.
    for i in 0..2000u64 {
        t.put(Put::new(key(i)).add("f", "q", value(i, 1))).unwrap();
    }
    db.major_compact("t", None).unwrap();
    assert_rest_from_before(first, &mut scan);
    drop(scan);
    db.wait_for_compactions().unwrap();
    assert_eq!(hfiles_on_disk(dir.path()) as u64, db.stats().live_files);
}

/// A trivial move gives the moved file a new entry in the new version while older versions
/// keep the old one; a compaction that later replaces the moved file must not delete it while
/// a reader of an older version can still open it. (Found by the differential test: a scan
/// failed with "no such file" on a file moved and then compacted under its feet.)
#[test]
fn an_open_scan_keeps_reading_a_file_moved_then_compacted() {
    let dir = tempfile::tempdir().unwrap();
    // One flush, one file.
    let mut o = small_opts(0).write_buffer_size(16 << 20);
    o.compaction.level0_file_num_compaction_trigger = 1;
    let db = open_table(dir.path(), o, FamilyDescriptor::new("f"));
    let t = db.table("t").unwrap();
    for i in 0..2000u64 {
        t.put(Put::new(key(i)).add("f", "q", value(i, 0))).unwrap();
    }
    db.flush().unwrap();
    // The scan's version lists the flushed file in L0; rows are read in refills, each
    // opening the files of that version again.
    let mut scan = t.scan(Scan::new()).unwrap();
    let first = scan.next().unwrap().unwrap();
    // Alone in L0 with nothing below: moved down, not rewritten.
    db.wait_for_compactions().unwrap();
    assert_eq!(db.stats().compaction.trivial_moves, 1);
    for i in 0..2000u64 {
        t.put(Put::new(key(i)).add("f", "q", value(i, 1))).unwrap();
    }
    // Rewrites the moved file into a new one: the moved file leaves the version.
    db.major_compact("t", None).unwrap();
    assert_rest_from_before(first, &mut scan);
    drop(scan);
    // Once the scan is gone the replaced file goes too.
    db.wait_for_compactions().unwrap();
    db.major_compact("t", None).unwrap();
    assert_eq!(hfiles_on_disk(dir.path()) as u64, db.stats().live_files);
}

#[test]
fn l0_back_pressure_is_counted_and_writes_complete() {
    let dir = tempfile::tempdir().unwrap();
    let mut o = small_opts(1);
    o.compaction.level0_slowdown_writes_trigger = 3;
    o.compaction.level0_stop_writes_trigger = 4;
    // Slow compaction down so flushes outrun it and L0 fills up to the triggers.
    o.compaction.rate_limit_bytes_per_sec = Some(128 << 10);
    let db = open_table(dir.path(), o, FamilyDescriptor::new("f"));
    let t = db.table("t").unwrap();
    for i in 0..6000u64 {
        t.put(Put::new(key(i)).add("f", "q", value(i, 0))).unwrap();
        if i % 400 == 399 {
            db.flush().unwrap();
        }
    }
    db.wait_for_compactions().unwrap();
    let s = db.stats();
    assert!(
        s.compaction.slowdowns_l0 + s.compaction.stops_l0 > 0,
        "no back-pressure: {}",
        db.stats_report()
    );
    let n = t.scan(Scan::new()).unwrap().count();
    assert_eq!(n, 6000);
}

#[test]
fn concurrent_reads_writes_flushes_and_compactions_keep_rows_whole() {
    let dir = tempfile::tempdir().unwrap();
    let mut o = small_opts(2);
    o.compaction.level0_file_num_compaction_trigger = 2;
    let db = open_table(dir.path(), o, FamilyDescriptor::new("f").max_versions(1));
    let stop = Arc::new(AtomicBool::new(false));
    let gen = Arc::new(AtomicU64::new(0));
    let mut hs = Vec::new();
    // Writers: each put writes 4 columns with the same generation: a row is whole when all
    // four agree.
    for w in 0..3u64 {
        let (db, stop, gen) = (db.clone(), stop.clone(), gen.clone());
        hs.push(std::thread::spawn(move || {
            let t = db.table("t").unwrap();
            let mut i = w;
            while !stop.load(Ordering::Relaxed) {
                let g = gen.fetch_add(1, Ordering::Relaxed);
                let mut p = Put::new(key(i % 300));
                for c in 0..4 {
                    p = p.add("f", format!("c{c}"), format!("{g:012}"));
                }
                t.put(p).unwrap();
                i += 3;
            }
        }));
    }
    // Flusher.
    {
        let (db, stop) = (db.clone(), stop.clone());
        hs.push(std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                db.flush().unwrap();
                std::thread::sleep(Duration::from_millis(20));
            }
        }));
    }
    // Readers: scans and snapshot reads see whole rows, and a snapshot's answer never
    // changes.
    for _ in 0..3 {
        let (db, stop) = (db.clone(), stop.clone());
        hs.push(std::thread::spawn(move || {
            let t = db.table("t").unwrap();
            while !stop.load(Ordering::Relaxed) {
                let snap = db.snapshot();
                let read = || -> Vec<Row> {
                    t.scan(Scan::new().at(&snap))
                        .unwrap()
                        .collect::<Result<_, _>>()
                        .unwrap()
                };
                let a = read();
                for r in &a {
                    let vals: BTreeSet<&[u8]> = r.cells().iter().map(|c| &c.value[..]).collect();
                    assert_eq!(r.cells().len(), 4, "torn row");
                    assert_eq!(vals.len(), 1, "row mixes generations");
                }
                std::thread::sleep(Duration::from_millis(5));
                let (x, y) = (cells(&a), cells(&read()));
                if x != y {
                    let d: Vec<_> = x.iter().zip(&y).filter(|(p, q)| p != q).take(3).collect();
                    panic!(
                        "a snapshot's answer changed: {} vs {} cells; {d:?}",
                        x.len(),
                        y.len()
                    );
                }
            }
        }));
    }
    // Major compactions now and then, from the test thread.
    let deadline = Instant::now() + Duration::from_secs(4);
    while Instant::now() < deadline {
        db.major_compact("t", None).unwrap();
        std::thread::sleep(Duration::from_millis(200));
    }
    stop.store(true, Ordering::Relaxed);
    for h in hs {
        h.join().unwrap();
    }
    db.wait_for_compactions().unwrap();
    assert!(db.stats().compaction.by_reason.values().sum::<u64>() > 0);
}

/// Slow scans held open across flushes, trivial moves and compactions, which replace the
/// files their super-versions list (moved files included): every scan reads on to its end
/// without an error and sees a consistent prefix of an in-order writer's rows. Sequential
/// keys make flushes that overlap nothing, so L0 files are moved down; a second writer's
/// random overwrites and the test thread's major compactions then rewrite them.
#[test]
fn slow_scans_read_on_across_moves_and_compactions() {
    let dir = tempfile::tempdir().unwrap();
    let mut o = small_opts(1).write_buffer_size(32 << 10);
    o.compaction.level0_file_num_compaction_trigger = 1;
    o.compaction.target_file_size = 32 << 10;
    let db = open_table(dir.path(), o, FamilyDescriptor::new("f").max_versions(1));
    let stop = Arc::new(AtomicBool::new(false));
    // Rows `seq-0..acked` of the in-order writer are acknowledged.
    let acked = Arc::new(AtomicU64::new(0));
    let mut hs = Vec::new();
    {
        let (db, stop, acked) = (db.clone(), stop.clone(), acked.clone());
        hs.push(std::thread::spawn(move || {
            let t = db.table("t").unwrap();
            let mut i = 0u64;
            while !stop.load(Ordering::Relaxed) {
                t.put(Put::new(format!("seq-{i:08}")).add("f", "q", value(i, 0)))
                    .unwrap();
                i += 1;
                acked.store(i, Ordering::Release);
            }
        }));
    }
    {
        let (db, stop) = (db.clone(), stop.clone());
        hs.push(std::thread::spawn(move || {
            let t = db.table("t").unwrap();
            let mut i = 0u64;
            while !stop.load(Ordering::Relaxed) {
                t.put(Put::new(key(i % 500)).add("f", "q", value(i, 1)))
                    .unwrap();
                i += 1;
                if i % 64 == 0 {
                    std::thread::sleep(Duration::from_millis(1));
                }
            }
        }));
    }
    let scans = Arc::new(AtomicU64::new(0));
    // One reader scans forward, one in reverse (from the last row down, through the
    // backward paths of the file iterators).
    for reversed in [false, true] {
        let (db, stop, acked, scans) = (db.clone(), stop.clone(), acked.clone(), scans.clone());
        hs.push(std::thread::spawn(move || {
            let t = db.table("t").unwrap();
            while !stop.load(Ordering::Relaxed) {
                let floor = acked.load(Ordering::Acquire);
                let scan = if reversed {
                    Scan::new().start_row("seq.").stop_row("seq-").reversed()
                } else {
                    Scan::new().start_row("seq-").stop_row("seq.")
                };
                let mut keys = Vec::new();
                for r in t.scan(scan).unwrap() {
                    let n = keys.len();
                    let r = r.unwrap_or_else(|e| panic!("scan failed at row {n}: {e}"));
                    keys.push(r.key);
                    if n % 100 == 99 {
                        std::thread::sleep(Duration::from_millis(1));
                    }
                }
                if reversed {
                    keys.reverse();
                }
                for (i, k) in keys.iter().enumerate() {
                    assert_eq!(*k, format!("seq-{i:08}").into_bytes(), "a gap");
                }
                let n = keys.len() as u64;
                assert!(n >= floor, "{n} rows, {floor} acknowledged before the scan");
                scans.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }
    let deadline = Instant::now() + Duration::from_secs(4);
    while Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(300));
        db.major_compact("t", None).unwrap();
    }
    stop.store(true, Ordering::Relaxed);
    for h in hs {
        h.join().unwrap();
    }
    db.wait_for_compactions().unwrap();
    let c = db.stats().compaction;
    assert!(c.trivial_moves > 0, "no trivial move: {c:?}");
    assert!(scans.load(Ordering::Relaxed) > 0);
}

// ---------------------------------------------------------------------------------------
// SIGKILL in the middle of compaction
// ---------------------------------------------------------------------------------------

const ENV_DIR: &str = "CELLAR_COMPACT_CRASH_DIR";
const ENV_CYCLE: &str = "CELLAR_COMPACT_CRASH_CYCLE";

/// Child mode only: write rows (acknowledging each) with tiny buffers and eager compaction,
/// so the SIGKILL lands while compactions run.
#[test]
fn compaction_crash_child() {
    let Ok(dir) = std::env::var(ENV_DIR) else {
        return;
    };
    let cycle: u64 = std::env::var(ENV_CYCLE)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let mut o = small_opts(1);
    o.write_buffer_size = 16 << 10;
    o.compaction.target_file_size = 16 << 10;
    let db = open_table(Path::new(&dir), o, FamilyDescriptor::new("f"));
    let t = db.table("t").unwrap();
    let mut out = std::io::stdout();
    for i in 0.. {
        let k = format!("c{cycle:03}-{i:07}");
        t.put(
            Put::new(k.clone())
                .add("f", "a", format!("{k}/a"))
                .add("f", "b", format!("{k}/b")),
        )
        .unwrap();
        use std::io::Write;
        let _ = writeln!(out, "ACK {k}");
        let _ = out.flush();
    }
}

#[test]
fn sigkill_during_compaction_loses_nothing_and_leaves_no_orphans() {
    let dir = tempfile::tempdir().unwrap();
    let exe = std::env::current_exe().unwrap();
    let mut acked: Vec<String> = Vec::new();
    for cycle in 0..4u64 {
        let mut child = Command::new(&exe)
            .args([
                "--exact",
                "compaction_crash_child",
                "--nocapture",
                "--test-threads",
                "1",
            ])
            .env(ENV_DIR, dir.path())
            .env(ENV_CYCLE, cycle.to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let target = 1500 + cycle * 700;
        let mut n = 0;
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if let Some(k) = line.strip_prefix("ACK ") {
                acked.push(k.to_owned());
                n += 1;
                if n >= target {
                    break;
                }
            }
        }
        child.kill().unwrap();
        let _ = child.wait();
        // Reopen without background compaction: what is on disk is what recovery left.
        let db = open_table(dir.path(), small_opts(0), FamilyDescriptor::new("f"));
        let t = db.table("t").unwrap();
        // Recovery flushes what it replayed from the WAL; a file being written by that flush
        // is not yet in the manifest, so wait for it before comparing.
        db.flush().unwrap();
        assert_eq!(
            hfiles_on_disk(dir.path()) as u64,
            db.stats().live_files,
            "orphaned files after recovery (cycle {cycle})"
        );
        for k in &acked {
            let r = t.get(&Get::new(k.as_str())).unwrap();
            let r = r.unwrap_or_else(|| panic!("acknowledged row {k} lost (cycle {cycle})"));
            assert_eq!(r.value("f", "a"), Some(format!("{k}/a").as_bytes()));
            assert_eq!(r.value("f", "b"), Some(format!("{k}/b").as_bytes()));
        }
        let all: Vec<Row> = t
            .scan(Scan::new())
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        for r in &all {
            assert_eq!(r.cells().len(), 2, "torn row after recovery");
        }
        let compactions: u64 = db.stats().compaction.by_reason.values().sum();
        let _ = compactions;
        drop(t);
        drop(db);
    }
}

/// LevelDB's seek compaction: after writes leave L0 files below the compaction trigger, Gets
/// that each have to search an L0 file and a file below it spend the L0 file's budget, and the
/// file is then compacted down although nothing else is due. Reads return the same before,
/// during and after.
#[test]
fn gets_that_search_two_files_compact_l0_away() {
    let dir = tempfile::tempdir().unwrap();
    let mut o = small_opts(1);
    // One flush per generation of writes, and flushes alone never reach the L0 trigger.
    o.write_buffer_size = 4 << 20;
    o.compaction.max_bytes_for_level_base = 64 << 20;
    o.compaction.level0_file_num_compaction_trigger = 8;
    o.compaction.level0_slowdown_writes_trigger = 20;
    o.compaction.level0_stop_writes_trigger = 30;
    let db = open_table(dir.path(), o, FamilyDescriptor::new("f").max_versions(1));
    let t = db.table("t").unwrap();
    let rows = 2_000u64;
    for gen in 0..2 {
        for i in 0..rows {
            t.put(Put::new(key(i)).add("f", "q", value(i, gen)))
                .unwrap();
        }
        db.flush().unwrap();
    }
    db.wait_for_compactions().unwrap();
    let l0 = |db: &Db| db.stats().compaction.levels[0].files;
    assert_eq!(l0(&db), 2, "two flushes, no compaction yet");
    let seek = |db: &Db| {
        db.stats()
            .compaction
            .by_reason
            .get("seek")
            .copied()
            .unwrap_or(0)
    };
    assert_eq!(seek(&db), 0);
    // Every row is in both L0 files: each Get searches two and charges the newer. Its budget
    // is at least 100 Gets.
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut i = 0u64;
    while seek(&db) == 0 {
        assert!(
            Instant::now() < deadline,
            "no seek compaction after {i} Gets"
        );
        let r = t.get(&Get::new(key(i % rows))).unwrap().unwrap();
        assert_eq!(r.value("f", "q").unwrap(), value(i % rows, 1).as_bytes());
        i += 1;
    }
    db.wait_for_compactions().unwrap();
    assert_eq!(l0(&db), 0, "L0 was not compacted away");
    for i in 0..rows {
        let r = t.get(&Get::new(key(i))).unwrap().unwrap();
        assert_eq!(r.value("f", "q").unwrap(), value(i, 1).as_bytes());
    }
}
