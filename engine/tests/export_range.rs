//! Range export (`Table::export_range`, SPEC.md §17.14): a range's files, loaded into another
//! database, read as the source did at the export (every version, marker, masked cell and
//! per-cell TTL, from files and memstores alike); with the change feed after the export's seq
//! the copy catches up with later writes; bad requests change nothing.

mod common;

use std::time::Duration;

use cellar::{
    Db, Delete, Error, FamilyDescriptor, Get, KeepDeletedCells, Options, Put, Row, Scan,
    TableDescriptor, WriteOptions,
};
use common::open;
use rand::{rngs::StdRng, Rng, SeedableRng};

fn schema() -> TableDescriptor {
    TableDescriptor::new("t")
        .family(FamilyDescriptor::new("a").max_versions(3))
        .family(
            FamilyDescriptor::new("b")
                .max_versions(5)
                .keep_deleted_cells(KeepDeletedCells::True)
                .block_size(1024),
        )
}

fn quiet() -> Options {
    let mut o = Options::default();
    o.compaction.threads = 0;
    o
}

fn row(i: u32) -> String {
    format!("r{i:04}")
}

/// Random writes of every kind over rows 0..400, flushed now and then (so the range's cells
/// sit in several files and the memstore), with explicit timestamps that tie.
fn churn(db: &Db, seed: u64, n: usize) {
    let t = db.table("t").unwrap();
    let mut rng = StdRng::seed_from_u64(seed);
    for i in 0..n {
        let r = row(rng.random_range(0..400));
        let f = ["a", "b"][rng.random_range(0..2)];
        let q = format!("q{}", rng.random_range(0..3));
        let ts = rng.random_range(1..50u64);
        match rng.random_range(0..12) {
            0 => t.delete(Delete::new(r).column_at(f, q, ts)).map(drop),
            1 => t.delete(Delete::new(r).columns_at(f, q, ts)).map(drop),
            2 => t.delete(Delete::new(r).family_at(f, ts)).map(drop),
            3 => t.delete(Delete::new(r).family_version(f, ts)).map(drop),
            4 => t
                .put(
                    Put::new(r)
                        .add_at(f, q, ts, format!("ttl-{i}"))
                        .ttl(Duration::from_secs(3600)),
                )
                .map(drop),
            _ => t
                .put(Put::new(r).add_at(f, q, ts, format!("v{i}")))
                .map(drop),
        }
        .unwrap();
        if i % 700 == 699 {
            db.flush().unwrap();
        }
    }
}

/// What reads of rows `[lo, hi)` answer: every version, the newest only, a time range, and
/// raw (markers and masked cells, as KEEP_DELETED_CELLS keeps them), each by scan and by Get.
fn reads(db: &Db, lo: &str, hi: &str) -> Vec<Vec<Row>> {
    let t = db.table("t").unwrap();
    let scan = |s: Scan| -> Vec<Row> {
        t.scan(s.range(lo, hi))
            .unwrap()
            .map(|r| r.unwrap())
            .collect()
    };
    let mut out = vec![
        scan(Scan::new().all_versions()),
        scan(Scan::new()),
        scan(Scan::new().all_versions().time_range(10, 30)),
    ];
    let gets: Vec<Row> = scan(Scan::new())
        .iter()
        .filter_map(|r| {
            t.get(&Get::new(r.key.clone()).all_versions().time_range(5, 40))
                .unwrap()
        })
        .collect();
    out.push(gets);
    out
}

fn load(target: &Db, info: &cellar::ExportInfo) {
    let t = target.table("t").unwrap();
    for f in &info.files {
        t.ingest(&f.family, &[&f.path]).unwrap();
    }
}

#[test]
fn an_exported_range_reads_in_another_database_as_in_the_source() {
    let d = tempfile::tempdir().unwrap();
    let src = open(&d.path().join("src"), quiet());
    src.create_table(schema()).unwrap();
    churn(&src, 7, 4_000);
    // Ties: the later of two puts at one timestamp is the one reads see.
    let t = src.table("t").unwrap();
    t.put(Put::new(row(100)).add_at("a", "tie", 9, "first"))
        .unwrap();
    t.put(Put::new(row(100)).add_at("a", "tie", 9, "second"))
        .unwrap();
    let (lo, hi) = (row(100), row(300));
    let want = reads(&src, &lo, &hi);
    assert!(want[0].len() > 100, "the range holds rows");
    let info = t
        .export_range(lo.as_bytes(), hi.as_bytes(), d.path().join("x"))
        .unwrap();
    assert_eq!(info.files.len(), 2);
    assert!(info.files.iter().all(|f| f.cells > 0 && f.bytes > 0));
    // Writes after the export are not in it.
    t.put(Put::new(row(150)).add_at("a", "late", 1, "late"))
        .unwrap();

    let dst = open(&d.path().join("dst"), quiet());
    // The export carries the table's descriptor for a target that lacks the table.
    assert_eq!(info.table, src.describe("t").unwrap());
    dst.create_table(info.table.clone()).unwrap();
    load(&dst, &info);
    assert_eq!(reads(&dst, &lo, &hi), want);
    assert!(
        reads(&dst, "", &lo).iter().all(Vec::is_empty),
        "rows before the range"
    );
    assert!(
        reads(&dst, &hi, "~").iter().all(Vec::is_empty),
        "rows after it"
    );
    let tie = dst
        .table("t")
        .unwrap()
        .get(&Get::new(row(100)).column("a", "tie"))
        .unwrap()
        .unwrap();
    assert_eq!(tie.value("a", "tie"), Some(&b"second"[..]));
    // The whole table, stop unbounded, into a third database: the same again.
    let all = t.export_range(b"", b"", d.path().join("all")).unwrap();
    let third = open(&d.path().join("third"), quiet());
    third.create_table(schema()).unwrap();
    load(&third, &all);
    assert_eq!(reads(&third, "", "~"), reads(&src, "", "~"));
    // Per-cell TTLs travel with the cells' tags: a cell past its own TTL stays invisible in
    // the copy (the family has none), one within it stays visible.
    t.put(
        Put::new(row(120))
            .add("a", "short", "gone")
            .ttl(Duration::from_millis(1)),
    )
    .unwrap();
    t.put(
        Put::new(row(120))
            .add("a", "long", "kept")
            .ttl(Duration::from_secs(3600)),
    )
    .unwrap();
    std::thread::sleep(Duration::from_millis(5));
    let ttl = t
        .export_range(
            row(120).as_bytes(),
            row(121).as_bytes(),
            d.path().join("ttl"),
        )
        .unwrap();
    let fourth = open(&d.path().join("fourth"), quiet());
    fourth.create_table(schema()).unwrap();
    load(&fourth, &ttl);
    let got = fourth
        .table("t")
        .unwrap()
        .get(&Get::new(row(120)))
        .unwrap()
        .unwrap();
    assert_eq!(got.value("a", "long"), Some(&b"kept"[..]));
    assert_eq!(got.value("a", "short"), None, "an expired cell came back");
}

#[test]
fn row_range_deletes_travel_as_the_family_markers_they_stand_for() {
    let d = tempfile::tempdir().unwrap();
    let src = open(&d.path().join("src"), quiet());
    src.create_table(schema()).unwrap();
    churn(&src, 9, 3_000);
    let t = src.table("t").unwrap();
    t.delete_rows_with(cellar::DeleteRows::new(row(150), row(200)).timestamp(30))
        .unwrap();
    src.flush().unwrap();
    t.delete_rows_with(
        cellar::DeleteRows::new(row(250), "")
            .family("b")
            .timestamp(20),
    )
    .unwrap();
    // Later writes below the deletes' timestamps stay masked (classic families).
    churn(&src, 10, 1_500);
    let (lo, hi) = (row(100), row(300));
    let want = reads(&src, &lo, &hi);
    let info = t
        .export_range(lo.as_bytes(), hi.as_bytes(), d.path().join("x"))
        .unwrap();
    let dst = open(&d.path().join("dst"), quiet());
    dst.create_table(info.table.clone()).unwrap();
    load(&dst, &info);
    assert_eq!(reads(&dst, &lo, &hi), want);
    assert!(dst.range_deletes("t").unwrap().is_empty());
    let all = t.export_range(b"", b"", d.path().join("all")).unwrap();
    let third = open(&d.path().join("third"), quiet());
    third.create_table(schema()).unwrap();
    load(&third, &all);
    assert_eq!(reads(&third, "", "~"), reads(&src, "", "~"));
}

/// The region move: export at seq S while writers run, load, then apply the change feed after
/// S for the range's rows: the copy reads as the source does.
#[test]
fn export_then_the_change_feed_after_its_seq_catches_the_copy_up() {
    let d = tempfile::tempdir().unwrap();
    let mut o = quiet();
    o.wal.retain_bytes = 64 << 20;
    let src = open(&d.path().join("src"), o);
    src.create_table(schema()).unwrap();
    churn(&src, 11, 2_000);
    let writer = {
        let src = src.clone();
        std::thread::spawn(move || churn(&src, 12, 2_000))
    };
    std::thread::sleep(Duration::from_millis(5));
    let (lo, hi) = (row(50), row(250));
    let info = src
        .table("t")
        .unwrap()
        .export_range(lo.as_bytes(), hi.as_bytes(), d.path().join("x"))
        .unwrap();
    // Writes after the export whatever the writer's pace: about half land in the range.
    churn(&src, 13, 500);
    writer.join().unwrap();
    let dst = open(&d.path().join("dst"), quiet());
    dst.create_table(schema()).unwrap();
    load(&dst, &info);
    let opts = cellar::ChangeFeedOptions::default()
        .table("t")
        .rows(lo.as_str(), hi.as_str());
    let mut feed = src.changes_since_with(info.seq, opts).unwrap();
    let mut applied = 0;
    while let Some(b) = feed.next_batch().unwrap() {
        assert!(b
            .cells
            .iter()
            .all(|c| c.row.as_slice() >= lo.as_bytes() && c.row.as_slice() < hi.as_bytes()));
        dst.write(b.to_write_batch(), WriteOptions::default())
            .unwrap();
        applied += 1;
    }
    assert!(
        applied > 100,
        "the feed carried writes made during the export"
    );
    assert_eq!(reads(&dst, &lo, &hi), reads(&src, &lo, &hi));
}

#[test]
fn bad_requests_are_refused_and_leave_nothing() {
    let d = tempfile::tempdir().unwrap();
    let db = open(&d.path().join("db"), quiet());
    db.create_table(schema()).unwrap();
    churn(&db, 3, 300);
    let t = db.table("t").unwrap();
    let x = d.path().join("x");
    assert!(matches!(
        t.export_range(b"r2", b"r1", &x),
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        t.export_range(b"r1", b"r1", &x),
        Err(Error::InvalidArgument(_))
    ));
    assert!(!x.exists());
    std::fs::create_dir(&x).unwrap();
    assert!(matches!(
        t.export_range(b"", b"", &x),
        Err(Error::InvalidArgument(_))
    ));
    // An empty range writes an empty directory.
    let e = t.export_range(b"zz", b"", d.path().join("empty")).unwrap();
    assert!(e.files.is_empty());
    db.drop_table("t").unwrap();
    assert!(matches!(
        t.export_range(b"", b"", d.path().join("gone")),
        Err(Error::TableNotFound(_))
    ));
    assert!(!d.path().join("gone").exists());
}

/// Every failure of the export's own file operations (EIO, a full disk, on creating, writing,
/// syncing or renaming its files, syncing its directory) fails the call with nothing left under
/// the output directory, the database untouched and writable; the same export then succeeds.
#[test]
fn a_failed_export_leaves_nothing_and_the_next_one_works() {
    use cellar::fs::{Fault, FaultFs, FileSystem, OpKind, Rule, SimFs};
    use std::path::Path;
    use std::sync::Arc;
    let ffs = FaultFs::new(SimFs::new());
    let mut o = quiet();
    o.fs = Arc::new(ffs.clone());
    let db = Db::open(Path::new("/db"), o).unwrap();
    db.create_table(schema()).unwrap();
    churn(&db, 5, 1_500);
    let t = db.table("t").unwrap();
    let want = reads(&db, "", "~");
    let out = Path::new("/out");
    let mut failed = 0;
    for op in [
        OpKind::Create,
        OpKind::Write,
        OpKind::SyncData,
        OpKind::Rename,
        OpKind::SyncDir,
    ] {
        for fault in [Fault::Eio, Fault::NoSpace] {
            ffs.add_rule(Rule::on(op, fault).path("/out"));
            let r = t.export_range(b"", b"", out);
            ffs.clear_rules();
            let e = r.expect_err("the export saw its fault");
            // Typed by cause: a full disk reads as NoSpace whichever layer hit it.
            let want = match fault {
                Fault::NoSpace => cellar::PoisonCause::NoSpace,
                _ => cellar::PoisonCause::Io,
            };
            assert_eq!(e.poison_cause(), want, "{op:?} {fault:?}: {e}");
            assert!(!ffs.exists(out).unwrap(), "{op:?} {fault:?}: left behind");
            failed += 1;
        }
    }
    assert_eq!(failed, 10);
    t.put(Put::new("zz").add_at("a", "q", 1, "v")).unwrap();
    let info = t.export_range(b"", b"s", out).unwrap();
    assert_eq!(info.files.len(), 2);
    assert_eq!(reads(&db, "", "s"), want);
}

/// Engine against engine over random schemas (VERSIONS, MIN_VERSIONS, a TTL judged on a shared
/// manual clock, KEEP_DELETED_CELLS), random writes, flushes and major compactions, and a random
/// range: the copy reads as the source, then and after the clock moves on. NEW_VERSION_BEHAVIOR
/// is left out: its one documented difference is the arrival order of a put and a marker of
/// the same timestamp.
#[test]
fn random_schemas_and_ranges_read_alike_in_the_copy() {
    use cellar::ManualClock;
    use std::sync::Arc;
    let mut nonempty = 0;
    for seed in 0..12u64 {
        let mut rng = StdRng::seed_from_u64(seed);
        let clock = Arc::new(ManualClock::new(1_000));
        let opts = || {
            let mut o = quiet();
            o.clock = clock.clone();
            o
        };
        let fam = |rng: &mut StdRng, name: &str| {
            let mut f = FamilyDescriptor::new(name)
                .max_versions(rng.random_range(1..=5))
                .min_versions(rng.random_range(0..=1))
                .keep_deleted_cells(
                    [
                        KeepDeletedCells::False,
                        KeepDeletedCells::True,
                        KeepDeletedCells::Ttl,
                    ][rng.random_range(0..3)],
                );
            if rng.random_bool(0.5) {
                f = f.ttl(Duration::from_millis(rng.random_range(960..1_000)));
            }
            f
        };
        let desc = TableDescriptor::new("t")
            .family(fam(&mut rng, "a"))
            .family(fam(&mut rng, "b"));
        let d = tempfile::tempdir().unwrap();
        let src = open(&d.path().join("src"), opts());
        src.create_table(desc.clone()).unwrap();
        churn(&src, seed, 1_500);
        if rng.random_bool(0.5) {
            src.major_compact("t", None).unwrap();
            churn(&src, seed + 100, 300);
        }
        let lo = row(rng.random_range(0..200));
        let hi = if rng.random_bool(0.3) {
            String::new()
        } else {
            row(rng.random_range(200..400))
        };
        let hi_read = if hi.is_empty() {
            "~".to_owned()
        } else {
            hi.clone()
        };
        let info = src
            .table("t")
            .unwrap()
            .export_range(lo.as_bytes(), hi.as_bytes(), d.path().join("x"))
            .unwrap();
        let dst = open(&d.path().join("dst"), opts());
        dst.create_table(desc).unwrap();
        load(&dst, &info);
        let want = reads(&src, &lo, &hi_read);
        nonempty += usize::from(!want[0].is_empty());
        assert_eq!(reads(&dst, &lo, &hi_read), want, "seed {seed}");
        clock.advance(25);
        assert_eq!(
            reads(&dst, &lo, &hi_read),
            reads(&src, &lo, &hi_read),
            "seed {seed}, later"
        );
    }
    assert!(nonempty >= 8, "only {nonempty} seeds had rows to compare");
}
