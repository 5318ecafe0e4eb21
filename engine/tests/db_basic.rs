//! Behaviour of the `Db` API on real files: puts, gets and scans across memstores, flushed files
//! and reopens; every delete kind; VERSIONS and time ranges; row and batch atomicity; admin
//! calls; and the stats counters.

mod common;

use std::path::Path;

use cellar::{
    Db, Delete, Error, FamilyDescriptor, Get, Put, RowMutations, Scan, TableDescriptor, WriteBatch,
    WriteOptions,
};
use common::{hfiles, open_default, table_desc};

/// Timestamps (newest first) of the versions of a column returned by `g`.
fn ts_of(db: &Db, table: &str, g: &Get, family: &str, q: &str) -> Vec<u64> {
    match db.table(table).unwrap().get(g).unwrap() {
        None => Vec::new(),
        Some(r) => r.versions(family, q).iter().map(|c| c.timestamp).collect(),
    }
}

/// Newest value of a column, as a String.
fn val(db: &Db, table: &str, row: &str, family: &str, q: &str) -> Option<String> {
    let r = db
        .table(table)
        .unwrap()
        .get(&Get::new(row).column(family, q))
        .unwrap()?;
    r.value(family, q)
        .map(|v| String::from_utf8(v.to_vec()).unwrap())
}

/// Row keys returned by a scan, as Strings.
fn scan_keys(db: &Db, table: &str, s: Scan) -> Vec<String> {
    db.table(table)
        .unwrap()
        .scan(s)
        .unwrap()
        .map(|r| String::from_utf8(r.unwrap().key).unwrap())
        .collect()
}

fn reopen(db: Db, dir: &Path) -> Db {
    drop(db);
    open_default(dir)
}

#[test]
fn put_get_scan_across_flushes_reopens_families_tables_and_namespaces() {
    let dir = tempfile::tempdir().unwrap();
    let db = open_default(dir.path());
    db.create_namespace("ns1").unwrap();
    db.create_table(table_desc("t", &["a", "b"], 5)).unwrap();
    db.create_table(table_desc("ns1:t", &["a"], 5)).unwrap();
    let t = db.table("t").unwrap();
    let t2 = db.table("ns1:t").unwrap();

    // Versions 1 and 2 go to a file, 3 stays in the memstore, 4 after a reopen.
    t.put(
        Put::new("r1")
            .add_at("a", "q", 1, "v1")
            .add_at("b", "x", 1, "b1"),
    )
    .unwrap();
    t.put(Put::new("r1").add_at("a", "q", 2, "v2")).unwrap();
    t2.put(Put::new("r1").add_at("a", "q", 1, "other-ns"))
        .unwrap();
    db.flush().unwrap();
    t.put(Put::new("r1").add_at("a", "q", 3, "v3")).unwrap();
    let all = Get::new("r1").family("a").all_versions();
    assert_eq!(ts_of(&db, "t", &all, "a", "q"), vec![3, 2, 1]);
    assert_eq!(val(&db, "t", "r1", "a", "q").as_deref(), Some("v3"));
    assert_eq!(val(&db, "t", "r1", "b", "x").as_deref(), Some("b1"));
    // Same row key in another namespace's table of the same name is another row.
    assert_eq!(
        val(&db, "ns1:t", "r1", "a", "q").as_deref(),
        Some("other-ns")
    );

    drop((t, t2));
    let db = reopen(db, dir.path());
    assert_eq!(ts_of(&db, "t", &all, "a", "q"), vec![3, 2, 1]);
    db.table("t")
        .unwrap()
        .put(Put::new("r1").add_at("a", "q", 4, "v4"))
        .unwrap();
    // Overwrite at an existing timestamp: the later write wins, only one is returned.
    db.table("t")
        .unwrap()
        .put(Put::new("r1").add_at("a", "q", 2, "v2-bis"))
        .unwrap();
    let r = db.table("t").unwrap().get(&all).unwrap().unwrap();
    let got: Vec<(u64, &[u8])> = r
        .versions("a", "q")
        .iter()
        .map(|c| (c.timestamp, c.value.as_slice()))
        .collect();
    assert_eq!(
        got,
        vec![
            (4, &b"v4"[..]),
            (3, &b"v3"[..]),
            (2, &b"v2-bis"[..]),
            (1, &b"v1"[..])
        ]
    );
    db.flush().unwrap();
    let db = reopen(db, dir.path());
    let r = db.table("t").unwrap().get(&all).unwrap().unwrap();
    assert_eq!(r.versions("a", "q").len(), 4);
    assert_eq!(r.value("a", "q"), Some(&b"v4"[..]));
    assert_eq!(r.versions("a", "q")[2].value, b"v2-bis");
    // A whole-row get returns both families, in family order.
    let r = db
        .table("t")
        .unwrap()
        .get(&Get::new("r1"))
        .unwrap()
        .unwrap();
    let fams: Vec<&str> = r.cells().iter().map(|c| c.family.as_str()).collect();
    assert_eq!(fams, vec!["a", "b"]);
    assert_eq!(
        val(&db, "ns1:t", "r1", "a", "q").as_deref(),
        Some("other-ns")
    );
    // Put without a timestamp takes the current time.
    let before = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    db.table("t")
        .unwrap()
        .put(Put::new("r2").add("a", "q", "now"))
        .unwrap();
    let ts = ts_of(&db, "t", &Get::new("r2"), "a", "q");
    assert_eq!(ts.len(), 1);
    assert!(ts[0] >= before && ts[0] < before + 60_000, "ts {ts:?}");
    assert_eq!(
        scan_keys(&db, "t", Scan::new()),
        vec!["r1".to_string(), "r2".to_string()]
    );
    assert_eq!(scan_keys(&db, "ns1:t", Scan::new()), vec!["r1".to_string()]);
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Phase {
    /// Puts and delete both in the memstore.
    AllInMemstore,
    /// Puts flushed, delete in the memstore.
    PutsFlushed,
    /// Puts flushed, delete flushed to another file, then reopened.
    BothFlushedReopened,
    /// Nothing flushed; the WAL replays puts and delete.
    ReplayedFromWal,
}

const PHASES: [Phase; 4] = [
    Phase::AllInMemstore,
    Phase::PutsFlushed,
    Phase::BothFlushedReopened,
    Phase::ReplayedFromWal,
];

/// Write puts of row `r` (columns a:q and a:p at ts 1,2,3; b:x at ts 1,2,3), apply `del` in
/// `phase`, return the db ready to be read.
fn with_delete(dir: &Path, phase: Phase, del: Delete) -> Db {
    let db = open_default(dir);
    db.create_table(table_desc("t", &["a", "b"], 5)).unwrap();
    let t = db.table("t").unwrap();
    for ts in 1..=3u64 {
        t.put(
            Put::new("r")
                .add_at("a", "q", ts, format!("q{ts}"))
                .add_at("a", "p", ts, format!("p{ts}"))
                .add_at("b", "x", ts, format!("x{ts}")),
        )
        .unwrap();
    }
    if phase != Phase::AllInMemstore && phase != Phase::ReplayedFromWal {
        db.flush().unwrap();
    }
    t.delete(del).unwrap();
    drop(t);
    match phase {
        Phase::BothFlushedReopened => {
            db.flush().unwrap();
            reopen(db, dir)
        }
        Phase::ReplayedFromWal => reopen(db, dir),
        _ => db,
    }
}

fn versions(db: &Db, fam: &str, q: &str) -> Vec<u64> {
    ts_of(db, "t", &Get::new("r").all_versions(), fam, q)
}

#[test]
fn every_delete_kind_masks_exactly_its_cells_in_memstore_files_and_after_reopen() {
    for phase in PHASES {
        // One version of a column.
        let d = tempfile::tempdir().unwrap();
        let db = with_delete(d.path(), phase, Delete::new("r").column_at("a", "q", 2));
        assert_eq!(versions(&db, "a", "q"), vec![3, 1], "{phase:?}");
        assert_eq!(versions(&db, "a", "p"), vec![3, 2, 1], "{phase:?}");
        drop(db);

        // Every version of a column at or below ts.
        let d = tempfile::tempdir().unwrap();
        let db = with_delete(d.path(), phase, Delete::new("r").columns_at("a", "q", 2));
        assert_eq!(versions(&db, "a", "q"), vec![3], "{phase:?}");
        assert_eq!(versions(&db, "a", "p"), vec![3, 2, 1], "{phase:?}");
        drop(db);

        // Every version of a column (now).
        let d = tempfile::tempdir().unwrap();
        let db = with_delete(d.path(), phase, Delete::new("r").columns("a", "q"));
        assert_eq!(versions(&db, "a", "q"), Vec::<u64>::new(), "{phase:?}");
        assert_eq!(versions(&db, "a", "p"), vec![3, 2, 1], "{phase:?}");
        drop(db);

        // A family at or below ts.
        let d = tempfile::tempdir().unwrap();
        let db = with_delete(d.path(), phase, Delete::new("r").family_at("a", 2));
        assert_eq!(versions(&db, "a", "q"), vec![3], "{phase:?}");
        assert_eq!(versions(&db, "a", "p"), vec![3], "{phase:?}");
        assert_eq!(versions(&db, "b", "x"), vec![3, 2, 1], "{phase:?}");
        drop(db);

        // A whole family (now).
        let d = tempfile::tempdir().unwrap();
        let db = with_delete(d.path(), phase, Delete::new("r").family("a"));
        assert_eq!(versions(&db, "a", "q"), Vec::<u64>::new(), "{phase:?}");
        assert_eq!(versions(&db, "b", "x"), vec![3, 2, 1], "{phase:?}");
        drop(db);

        // A family at exactly one ts.
        let d = tempfile::tempdir().unwrap();
        let db = with_delete(d.path(), phase, Delete::new("r").family_version("a", 2));
        assert_eq!(versions(&db, "a", "q"), vec![3, 1], "{phase:?}");
        assert_eq!(versions(&db, "a", "p"), vec![3, 1], "{phase:?}");
        assert_eq!(versions(&db, "b", "x"), vec![3, 2, 1], "{phase:?}");
        drop(db);

        // The whole row at or below ts.
        let d = tempfile::tempdir().unwrap();
        let db = with_delete(d.path(), phase, Delete::new("r").row_at(2));
        assert_eq!(versions(&db, "a", "q"), vec![3], "{phase:?}");
        assert_eq!(versions(&db, "b", "x"), vec![3], "{phase:?}");
        drop(db);

        // The whole row.
        let d = tempfile::tempdir().unwrap();
        let db = with_delete(d.path(), phase, Delete::new("r"));
        let t = db.table("t").unwrap();
        assert_eq!(t.get(&Get::new("r").all_versions()).unwrap(), None);
        assert_eq!(t.scan(Scan::new()).unwrap().count(), 0, "{phase:?}");
        // A marker masks later puts with older timestamps (classic behaviour).
        t.put(Put::new("r").add_at("a", "q", 2, "late")).unwrap();
        assert_eq!(t.get(&Get::new("r")).unwrap(), None, "{phase:?}");
        drop(t);
        drop(db);

        // The newest version without a timestamp: resolved to ts 3 when applied.
        let d = tempfile::tempdir().unwrap();
        let db = with_delete(d.path(), phase, Delete::new("r").column("a", "q"));
        assert_eq!(versions(&db, "a", "q"), vec![2, 1], "{phase:?}");
        assert_eq!(versions(&db, "a", "p"), vec![3, 2, 1], "{phase:?}");
        let t = db.table("t").unwrap();
        // A second one removes the next newest.
        t.delete(Delete::new("r").column("a", "q")).unwrap();
        assert_eq!(versions(&db, "a", "q"), vec![1], "{phase:?}");
        drop(t);
        let db = reopen(db, d.path());
        assert_eq!(versions(&db, "a", "q"), vec![1], "{phase:?}");
    }
}

#[test]
fn versions_limit_applies_across_memstore_and_files() {
    let dir = tempfile::tempdir().unwrap();
    let db = open_default(dir.path());
    db.create_table(table_desc("t", &["a"], 2)).unwrap();
    let t = db.table("t").unwrap();
    for ts in 1..=5u64 {
        t.put(Put::new("r").add_at("a", "q", ts, format!("v{ts}")))
            .unwrap();
        if ts % 2 == 0 {
            db.flush().unwrap();
        }
    }
    let all = Get::new("r").all_versions();
    assert_eq!(ts_of(&db, "t", &all, "a", "q"), vec![5, 4]);
    assert_eq!(
        ts_of(&db, "t", &Get::new("r").max_versions(10), "a", "q"),
        vec![5, 4]
    );
    assert_eq!(ts_of(&db, "t", &Get::new("r"), "a", "q"), vec![5]);
    // The version limit applies after the time-range filter.
    assert_eq!(
        ts_of(&db, "t", &all.clone().time_range(0, 4), "a", "q"),
        vec![3, 2]
    );
    drop(t);
    let db = reopen(db, dir.path());
    assert_eq!(ts_of(&db, "t", &all, "a", "q"), vec![5, 4]);
    let rows: Vec<_> = db
        .table("t")
        .unwrap()
        .scan(Scan::new().all_versions())
        .unwrap()
        .map(|r| r.unwrap())
        .collect();
    assert_eq!(rows.len(), 1);
    let ts: Vec<u64> = rows[0].cells().iter().map(|c| c.timestamp).collect();
    assert_eq!(ts, vec![5, 4]);
}

#[test]
fn time_ranges_select_versions_in_gets_and_scans() {
    let dir = tempfile::tempdir().unwrap();
    let db = open_default(dir.path());
    db.create_table(table_desc("t", &["a"], 10)).unwrap();
    let t = db.table("t").unwrap();
    t.put(Put::new("r").add_at("a", "q", 10, "v10")).unwrap();
    t.put(Put::new("r").add_at("a", "q", 20, "v20")).unwrap();
    db.flush().unwrap();
    t.put(Put::new("r").add_at("a", "q", 30, "v30")).unwrap();
    t.put(Put::new("s").add_at("a", "q", 100, "s100")).unwrap();
    let g = Get::new("r").all_versions();
    assert_eq!(
        ts_of(&db, "t", &g.clone().time_range(15, 30), "a", "q"),
        vec![20]
    );
    assert_eq!(
        ts_of(&db, "t", &g.clone().time_range(10, 31), "a", "q"),
        vec![30, 20, 10]
    );
    assert_eq!(
        ts_of(&db, "t", &g.clone().timestamp(30), "a", "q"),
        vec![30]
    );
    assert_eq!(
        ts_of(&db, "t", &g.clone().time_range(0, 10), "a", "q"),
        Vec::<u64>::new()
    );
    assert_eq!(
        ts_of(&db, "t", &g.clone().time_range(20, 20), "a", "q"),
        Vec::<u64>::new()
    );
    // Newest version inside the range when one version is asked for.
    assert_eq!(
        ts_of(&db, "t", &Get::new("r").time_range(0, 25), "a", "q"),
        vec![20]
    );
    // A file wholly outside the query's range is skipped (and counted).
    let before = db.stats().time_skips;
    assert_eq!(
        ts_of(&db, "t", &g.clone().timestamp(30), "a", "q"),
        vec![30]
    );
    assert!(db.stats().time_skips > before, "file not skipped by time");
    // Scans: row s has no cell in [0, 50), row r none in [50, 200).
    assert_eq!(
        scan_keys(&db, "t", Scan::new().time_range(0, 50)),
        vec!["r".to_string()]
    );
    assert_eq!(
        scan_keys(&db, "t", Scan::new().time_range(50, 200)),
        vec!["s".to_string()]
    );
}

/// 300 rows `r000`..`r299`: rows i % 3 == 0 in a first file, == 1 in a second, == 2 in the
/// memstore; every 10th row then overwritten in the memstore.
fn spread_rows(db: &Db) {
    db.create_table(table_desc("t", &["a", "b"], 3)).unwrap();
    let t = db.table("t").unwrap();
    for part in 0..3 {
        for i in (0..300).filter(|i| i % 3 == part) {
            t.put(
                Put::new(format!("r{i:03}"))
                    .add_at("a", "q", 1, format!("a{i}"))
                    .add_at("b", "q", 1, format!("b{i}")),
            )
            .unwrap();
        }
        if part < 2 {
            db.flush().unwrap();
        }
    }
    for i in (0..300).step_by(10) {
        t.put(Put::new(format!("r{i:03}")).add_at("a", "q", 2, format!("new{i}")))
            .unwrap();
    }
}

fn expected_a(i: usize) -> String {
    if i % 10 == 0 {
        format!("new{i}")
    } else {
        format!("a{i}")
    }
}

#[test]
fn scans_with_bounds_prefix_and_limit_over_memstore_and_files() {
    let dir = tempfile::tempdir().unwrap();
    let db = open_default(dir.path());
    spread_rows(&db);
    assert_eq!(hfiles(dir.path()).len(), 4, "2 flushes x 2 families");
    let check = |db: &Db| {
        let t = db.table("t").unwrap();
        let rows: Vec<_> = t.scan(Scan::new()).unwrap().map(|r| r.unwrap()).collect();
        assert_eq!(rows.len(), 300, "more than one scan batch");
        for (i, r) in rows.iter().enumerate() {
            assert_eq!(r.key, format!("r{i:03}").into_bytes());
            assert_eq!(r.value("a", "q"), Some(expected_a(i).as_bytes()));
            assert_eq!(r.value("b", "q"), Some(format!("b{i}").as_bytes()));
            assert_eq!(r.cells().len(), 2);
        }
        let keys = |s| scan_keys(db, "t", s);
        let names =
            |r: std::ops::Range<usize>| -> Vec<String> { r.map(|i| format!("r{i:03}")).collect() };
        assert_eq!(keys(Scan::new().range("r100", "r110")), names(100..110));
        assert_eq!(
            keys(Scan::new().range("r100", "r110").inclusive_stop(true)),
            names(100..111)
        );
        assert_eq!(keys(Scan::new().start_row("r295")), names(295..300));
        assert_eq!(keys(Scan::new().stop_row("r003")), names(0..3));
        assert_eq!(keys(Scan::new().prefix("r01")), names(10..20));
        assert_eq!(keys(Scan::new().prefix("r2")), names(200..300));
        assert_eq!(keys(Scan::new().prefix("x")), Vec::<String>::new());
        assert_eq!(keys(Scan::new().limit(7)), names(0..7));
        assert_eq!(
            keys(Scan::new().start_row("r250").limit(3)),
            names(250..253)
        );
        assert_eq!(keys(Scan::new().start_row("r0995")), names(100..300));
        // A family/column selection returns only those cells.
        let rows: Vec<_> = t
            .scan(Scan::new().prefix("r00").column("b", "q"))
            .unwrap()
            .map(|r| r.unwrap())
            .collect();
        assert_eq!(rows.len(), 10);
        assert!(rows
            .iter()
            .all(|r| r.cells().len() == 1 && r.cells()[0].family == "b"));
        // Two versions where the memstore overwrote a flushed row.
        let rows: Vec<_> = t
            .scan(Scan::new().range("r010", "r012").family("a").all_versions())
            .unwrap()
            .map(|r| r.unwrap())
            .collect();
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0].versions("a", "q").len(), 2);
        assert_eq!(rows[1].versions("a", "q").len(), 1);
    };
    check(&db);
    let db = reopen(db, dir.path());
    check(&db);
    db.flush().unwrap();
    check(&db);
}

#[test]
fn scan_iterator_keeps_its_snapshot_while_writes_and_flushes_happen() {
    let dir = tempfile::tempdir().unwrap();
    let db = open_default(dir.path());
    spread_rows(&db);
    let t = db.table("t").unwrap();
    let mut it = t.scan(Scan::new()).unwrap();
    let first = it.next().unwrap().unwrap();
    assert_eq!(first.key, b"r000");
    // New rows, an overwrite and a delete after the scan started, then a flush.
    t.put(Put::new("r150x").add("a", "q", "new")).unwrap();
    t.put(Put::new("r200").add_at("a", "q", 9, "changed"))
        .unwrap();
    t.delete(Delete::new("r201")).unwrap();
    db.flush().unwrap();
    let rest: Vec<_> = it.map(|r| r.unwrap()).collect();
    assert_eq!(rest.len(), 299);
    assert!(rest.iter().all(|r| r.key != b"r150x"));
    let r200 = rest.iter().find(|r| r.key == b"r200").unwrap();
    assert_eq!(r200.value("a", "q"), Some(&b"new200"[..]));
    assert!(rest.iter().any(|r| r.key == b"r201"));
    // A new scan sees the writes.
    assert_eq!(t.scan(Scan::new()).unwrap().count(), 300);
}

#[test]
fn mutate_row_and_write_batch_apply_all_or_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let db = open_default(dir.path());
    db.create_table(table_desc("t", &["a", "b"], 3)).unwrap();
    db.create_table(table_desc("u", &["f"], 3)).unwrap();
    let t = db.table("t").unwrap();
    t.put(Put::new("r").add_at("a", "old", 1, "x")).unwrap();

    // A row mutation: a put on two families and a delete, one sequence number.
    let seq = t
        .mutate_row(
            RowMutations::new("r")
                .put(
                    Put::new("r")
                        .add_at("a", "q", 5, "1")
                        .add_at("b", "q", 5, "1"),
                )
                .delete(Delete::new("r").columns("a", "old")),
            WriteOptions::default(),
        )
        .unwrap();
    let row = t.get(&Get::new("r")).unwrap().unwrap();
    assert_eq!(row.cells().len(), 2);
    assert_eq!(row.value("a", "q"), Some(&b"1"[..]));
    assert_eq!(row.value("b", "q"), Some(&b"1"[..]));
    assert_eq!(db.stats().read_point, seq);

    // One bad mutation (unknown family, last) and nothing of the row mutation is applied.
    let writes = db.stats().writes;
    let e = t
        .mutate_row(
            RowMutations::new("r")
                .put(Put::new("r").add_at("a", "q", 6, "2"))
                .put(Put::new("r").add_at("nope", "q", 6, "2")),
            WriteOptions::default(),
        )
        .unwrap_err();
    assert!(matches!(e, Error::FamilyNotFound { .. }), "{e:?}");
    assert_eq!(
        t.get(&Get::new("r")).unwrap().unwrap().value("a", "q"),
        Some(&b"1"[..])
    );
    assert_eq!(db.stats().writes, writes);

    // A cross-row, cross-table batch: one sequence number, all visible.
    let seq = db
        .write(
            WriteBatch::new()
                .put("t", Put::new("x1").add_at("a", "q", 1, "b"))
                .put("t", Put::new("x2").add_at("b", "q", 1, "b"))
                .put("u", Put::new("y").add_at("f", "q", 1, "b"))
                .delete("t", Delete::new("r")),
            WriteOptions::default(),
        )
        .unwrap();
    assert_eq!(db.stats().read_point, seq);
    assert_eq!(
        scan_keys(&db, "t", Scan::new()),
        vec!["x1".to_string(), "x2".to_string()]
    );
    assert_eq!(scan_keys(&db, "u", Scan::new()), vec!["y".to_string()]);

    // A batch whose last item names a missing table: none of it applied, even after reopen.
    let e = db
        .write(
            WriteBatch::new()
                .put("t", Put::new("z1").add("a", "q", "c"))
                .put("u", Put::new("z2").add("f", "q", "c"))
                .put("missing", Put::new("z3").add("f", "q", "c")),
            WriteOptions::default(),
        )
        .unwrap_err();
    assert!(matches!(e, Error::TableNotFound(_)), "{e:?}");
    // Same with an invalid row key in the middle.
    let e = db
        .write(
            WriteBatch::new()
                .put("t", Put::new("z1").add("a", "q", "c"))
                .put("t", Put::new("").add("a", "q", "c"))
                .put("u", Put::new("z2").add("f", "q", "c")),
            WriteOptions::default(),
        )
        .unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e:?}");
    drop(t);
    let db = reopen(db, dir.path());
    assert_eq!(
        scan_keys(&db, "t", Scan::new()),
        vec!["x1".to_string(), "x2".to_string()]
    );
    assert_eq!(scan_keys(&db, "u", Scan::new()), vec!["y".to_string()]);
}

#[test]
fn alter_table_adds_a_family_and_changes_settings() {
    let dir = tempfile::tempdir().unwrap();
    let db = open_default(dir.path());
    db.create_table(table_desc("t", &["a", "b"], 3)).unwrap();
    let t = db.table("t").unwrap();
    for ts in 1..=3u64 {
        t.put(Put::new("r").add_at("a", "q", ts, format!("a{ts}")).add_at(
            "b",
            "q",
            ts,
            format!("b{ts}"),
        ))
        .unwrap();
    }
    db.flush().unwrap();
    assert_eq!(hfiles(dir.path()).len(), 2);

    // Add c, change a's VERSIONS to 1.
    let new = TableDescriptor::new("t")
        .family(FamilyDescriptor::new("a").max_versions(1))
        .family(FamilyDescriptor::new("b").max_versions(3))
        .family(FamilyDescriptor::new("c").max_versions(2));
    db.alter_table(new.clone()).unwrap();
    assert_eq!(db.describe("t").unwrap(), new);
    let all = Get::new("r").all_versions();
    assert_eq!(ts_of(&db, "t", &all, "a", "q"), vec![3]);
    assert_eq!(ts_of(&db, "t", &all, "b", "q"), vec![3, 2, 1]);
    // The old handle writes to the new family.
    t.put(
        Put::new("r")
            .add_at("c", "q", 7, "c7")
            .add_at("c", "q", 8, "c8"),
    )
    .unwrap();
    t.put(Put::new("r").add_at("c", "q", 9, "c9")).unwrap();
    assert_eq!(ts_of(&db, "t", &all, "c", "q"), vec![9, 8]);
    db.flush().unwrap();
    drop(t);
    let db = reopen(db, dir.path());
    assert_eq!(db.describe("t").unwrap(), new);
    assert_eq!(ts_of(&db, "t", &all, "a", "q"), vec![3]);
    assert_eq!(ts_of(&db, "t", &all, "c", "q"), vec![9, 8]);
    let row = db.table("t").unwrap().get(&Get::new("r")).unwrap().unwrap();
    let fams: Vec<&str> = row.cells().iter().map(|c| c.family.as_str()).collect();
    assert_eq!(fams, vec!["a", "b", "c"]);
}

#[test]
fn alter_table_removing_an_unflushed_family_forgets_it_even_after_replay() {
    let dir = tempfile::tempdir().unwrap();
    let db = open_default(dir.path());
    db.create_table(table_desc("t", &["a", "b"], 3)).unwrap();
    let t = db.table("t").unwrap();
    t.put(
        Put::new("r")
            .add_at("a", "q", 1, "a1")
            .add_at("b", "q", 1, "b1"),
    )
    .unwrap();
    let only_a = table_desc("t", &["a"], 3);
    db.alter_table(only_a.clone()).unwrap();
    let e = t.get(&Get::new("r").family("b")).unwrap_err();
    assert!(matches!(e, Error::FamilyNotFound { .. }), "{e:?}");
    let e = t.put(Put::new("r").add("b", "q", "x")).unwrap_err();
    assert!(matches!(e, Error::FamilyNotFound { .. }), "{e:?}");
    // Re-added, b starts empty: its old cells (still in the WAL) never come back.
    db.alter_table(table_desc("t", &["a", "b"], 3)).unwrap();
    assert_eq!(t.get(&Get::new("r").family("b")).unwrap(), None);
    drop(t);
    let db = reopen(db, dir.path());
    let t = db.table("t").unwrap();
    assert_eq!(t.get(&Get::new("r").family("b")).unwrap(), None);
    assert_eq!(
        t.get(&Get::new("r")).unwrap().unwrap().value("a", "q"),
        Some(&b"a1"[..])
    );
}

/// Bug: `Db::alter_table` (engine/src/db/mod.rs) lists the removed family's files in the
/// edit's `deleted_files`, but step 2 of applying the edit (put_tables, SPEC.md §17.5) already
/// dropped that family with its files, so step 3 refuses the edit: "deleted file N: no family F
/// level 0". Removing a family that has flushed files always fails.
#[test]
fn alter_table_removing_a_flushed_family_deletes_its_files() {
    let dir = tempfile::tempdir().unwrap();
    let db = open_default(dir.path());
    db.create_table(table_desc("t", &["a", "b"], 3)).unwrap();
    let t = db.table("t").unwrap();
    t.put(
        Put::new("r")
            .add_at("a", "q", 1, "a1")
            .add_at("b", "q", 1, "b1"),
    )
    .unwrap();
    db.flush().unwrap();
    assert_eq!(hfiles(dir.path()).len(), 2);
    db.alter_table(table_desc("t", &["a"], 3)).unwrap();
    assert_eq!(hfiles(dir.path()).len(), 1, "b's file deleted");
    assert_eq!(db.stats().live_files, 1);
    let e = t.get(&Get::new("r").family("b")).unwrap_err();
    assert!(matches!(e, Error::FamilyNotFound { .. }), "{e:?}");
    db.alter_table(table_desc("t", &["a", "b"], 3)).unwrap();
    assert_eq!(t.get(&Get::new("r").family("b")).unwrap(), None);
    drop(t);
    let db = reopen(db, dir.path());
    assert_eq!(
        db.table("t")
            .unwrap()
            .get(&Get::new("r").family("b"))
            .unwrap(),
        None
    );
    assert_eq!(hfiles(dir.path()).len(), 1);
}

#[test]
fn drop_table_deletes_its_files_and_a_recreated_table_starts_empty() {
    let dir = tempfile::tempdir().unwrap();
    let db = open_default(dir.path());
    db.create_table(table_desc("keep", &["f"], 3)).unwrap();
    db.create_table(table_desc("gone", &["f", "g"], 3)).unwrap();
    let keep = db.table("keep").unwrap();
    let gone = db.table("gone").unwrap();
    keep.put(Put::new("k").add("f", "q", "kept")).unwrap();
    gone.put(Put::new("g").add("f", "q", "1").add("g", "q", "1"))
        .unwrap();
    db.flush().unwrap();
    assert_eq!(hfiles(dir.path()).len(), 3);
    assert_eq!(db.stats().live_files, 3);
    // Unflushed data of the dropped table too.
    gone.put(Put::new("h").add("f", "q", "2")).unwrap();
    db.drop_table("gone").unwrap();
    assert_eq!(hfiles(dir.path()).len(), 1);
    assert_eq!(db.stats().live_files, 1);
    let e = db.table("gone").unwrap_err();
    assert!(matches!(e, Error::TableNotFound(_)), "{e:?}");
    // The old handle fails too.
    let e = gone.get(&Get::new("g")).unwrap_err();
    assert!(matches!(e, Error::TableNotFound(_)), "{e:?}");
    let e = gone.put(Put::new("g").add("f", "q", "3")).unwrap_err();
    assert!(matches!(e, Error::TableNotFound(_)), "{e:?}");

    db.create_table(table_desc("gone", &["f", "g"], 3)).unwrap();
    let again = db.table("gone").unwrap();
    assert_eq!(again.scan(Scan::new()).unwrap().count(), 0);
    drop((keep, gone, again));
    let db = reopen(db, dir.path());
    assert_eq!(
        db.table("gone").unwrap().scan(Scan::new()).unwrap().count(),
        0
    );
    assert_eq!(val(&db, "keep", "k", "f", "q").as_deref(), Some("kept"));
    db.flush().unwrap();
    assert_eq!(hfiles(dir.path()).len(), 1);
}

/// Dropping a table, or a family by altering it, takes its files out of the version at once,
/// but a scan already open reads on from the version it started with (as across a
/// compaction), and the files go once it ends. Before, they were deleted at once and the
/// scan's next refill failed with "no such file".
#[test]
fn an_open_scan_reads_on_across_a_drop_and_the_files_go_after_it() {
    let dir = tempfile::tempdir().unwrap();
    let db = open_default(dir.path());
    db.create_table(table_desc("gone", &["f", "g"], 3)).unwrap();
    let t = db.table("gone").unwrap();
    for i in 0..3000 {
        t.put(
            Put::new(format!("r{i:05}"))
                .add("f", "q", "1")
                .add("g", "q", "2"),
        )
        .unwrap();
    }
    db.flush().unwrap();
    assert_eq!(hfiles(dir.path()).len(), 2);
    let mut by_alter = t.scan(Scan::new().family("g")).unwrap();
    let mut by_drop = t.scan(Scan::new()).unwrap();
    assert!(by_alter.next().unwrap().is_ok());
    assert!(by_drop.next().unwrap().is_ok());
    db.alter_table(table_desc("gone", &["f"], 3)).unwrap();
    assert_eq!(db.stats().live_files, 1);
    let rest: Vec<_> = by_alter.by_ref().collect::<Result<_, _>>().unwrap();
    assert_eq!(rest.len(), 2999);
    db.drop_table("gone").unwrap();
    assert_eq!(db.stats().live_files, 0);
    assert_eq!(hfiles(dir.path()).len(), 2, "deleted under open scans");
    let rest: Vec<_> = by_drop.by_ref().collect::<Result<_, _>>().unwrap();
    assert_eq!(rest.len(), 2999);
    assert!(rest.iter().all(|r| r.cells().len() == 2));
    drop((by_alter, by_drop));
    // The next garbage pass (compaction's, here the one waiting runs) deletes them.
    db.wait_for_compactions().unwrap();
    assert_eq!(hfiles(dir.path()).len(), 0);
}

#[test]
fn describe_list_tables_and_namespaces() {
    let dir = tempfile::tempdir().unwrap();
    let db = open_default(dir.path());
    assert_eq!(db.list_namespaces(), vec!["default".to_string()]);
    assert!(db.list_tables().is_empty());
    db.create_namespace("ns2").unwrap();
    db.create_namespace("ns1").unwrap();
    let d1 = TableDescriptor::new("ns1:users").family(
        FamilyDescriptor::new("info")
            .max_versions(7)
            .block_size(4096)
            .bloom(cellar::BloomType::RowCol),
    );
    db.create_table(d1.clone()).unwrap();
    db.create_table(table_desc("zeta", &["f"], 3)).unwrap();
    db.create_table(table_desc("alpha", &["f"], 3)).unwrap();
    assert_eq!(
        db.list_namespaces(),
        vec!["default".to_string(), "ns1".to_string(), "ns2".to_string()]
    );
    let names: Vec<String> = db.list_tables().iter().map(|t| t.to_string()).collect();
    assert_eq!(names, vec!["alpha", "zeta", "ns1:users"]);
    assert_eq!(db.describe("ns1:users").unwrap(), d1);
    assert!(db.table_exists("ns1:users").unwrap());
    assert!(!db.table_exists("ns2:users").unwrap());
    assert!(db.table_exists("default:alpha").unwrap());
    assert_eq!(
        db.table("default:alpha").unwrap().name().to_string(),
        "alpha"
    );

    let db = reopen(db, dir.path());
    assert_eq!(db.describe("ns1:users").unwrap(), d1);
    let names: Vec<String> = db.list_tables().iter().map(|t| t.to_string()).collect();
    assert_eq!(names, vec!["alpha", "zeta", "ns1:users"]);
    db.drop_namespace("ns2").unwrap();
    db.drop_table("ns1:users").unwrap();
    db.drop_namespace("ns1").unwrap();
    let db = reopen(db, dir.path());
    assert_eq!(db.list_namespaces(), vec!["default".to_string()]);
    let names: Vec<String> = db.list_tables().iter().map(|t| t.to_string()).collect();
    assert_eq!(names, vec!["alpha", "zeta"]);
}

#[test]
fn stats_count_writes_flushes_files_and_skips() {
    let dir = tempfile::tempdir().unwrap();
    let db = open_default(dir.path());
    db.create_table(table_desc("t", &["a", "b"], 3)).unwrap();
    let t = db.table("t").unwrap();
    let s0 = db.stats();
    assert_eq!(
        (s0.writes, s0.flushes, s0.flushed_files, s0.live_files),
        (0, 0, 0, 0)
    );
    for i in 0..20 {
        t.put(Put::new(format!("m{i:02}")).add("a", "q", "v"))
            .unwrap();
    }
    let s = db.stats();
    assert_eq!(s.writes, 20);
    assert_eq!(s.user_bytes_written, 20 * (3 + 1 + 1));
    assert!(s.memstore_active_bytes > 0);
    db.flush().unwrap();
    let s = db.stats();
    assert_eq!((s.flushes, s.flushed_files, s.live_files), (1, 1, 1));
    assert!(s.flushed_bytes > 0);
    assert_eq!(s.memstore_active_bytes + s.memstore_frozen_bytes, 0);
    // Flushing nothing flushes nothing.
    db.flush().unwrap();
    assert_eq!(db.stats().flushes, 1);
    for i in 0..20 {
        t.put(
            Put::new(format!("m{i:02}x"))
                .add("a", "q", "v")
                .add("b", "q", "v"),
        )
        .unwrap();
    }
    db.flush().unwrap();
    let s = db.stats();
    assert_eq!((s.flushes, s.flushed_files, s.live_files), (2, 3, 3));

    // Absent row inside every file's key range: family a's two files and b's one are asked
    // and their ROW blooms exclude it (false positives are rare at this size).
    let before = db.stats();
    assert_eq!(t.get(&Get::new("m05y")).unwrap(), None);
    let after = db.stats();
    assert_eq!(after.bloom_skips - before.bloom_skips, 3);
    // Absent row past every file's key range: skipped by range, not bloom.
    let before = db.stats();
    assert_eq!(t.get(&Get::new("zzz")).unwrap(), None);
    let after = db.stats();
    assert_eq!(after.range_skips - before.range_skips, 3);
    assert_eq!(after.bloom_skips, before.bloom_skips);
    // A present row is found and no file that holds it is skipped by its bloom.
    let before = db.stats();
    assert!(t.get(&Get::new("m05x")).unwrap().is_some());
    assert!(t.get(&Get::new("m05")).unwrap().is_some());
    let after = db.stats();
    // m05x is absent from a's first file and m05 from the second file of a and from b.
    assert_eq!(after.bloom_skips - before.bloom_skips, 3);
    drop(t);
    let db = reopen(db, dir.path());
    let s = db.stats();
    assert_eq!((s.writes, s.flushes, s.live_files), (0, 0, 3));
}

/// `Table::put_cell` writes exactly what a one-cell `Put` at the current time writes: the same
/// cells (timestamp from the database's clock), versions, memstore and flushed-file reads, and
/// the same state after a reopen.
#[test]
fn put_cell_writes_what_a_one_cell_put_writes() {
    use std::sync::Arc;

    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(cellar::ManualClock::new(1_000));
    let o = cellar::Options {
        clock: clock.clone(),
        ..Default::default()
    };
    let db = Db::open(dir.path(), o.clone()).unwrap();
    db.create_table(table_desc("p", &["a", "b"], 3)).unwrap();
    db.create_table(table_desc("c", &["a", "b"], 3)).unwrap();
    let (p, c) = (db.table("p").unwrap(), db.table("c").unwrap());
    let writes = [
        ("r1", "a", "q", "v1"),
        ("r1", "a", "q", "v2"),
        ("r1", "b", "", "empty qualifier"),
        ("r2", "a", "q", ""),
        ("r1", "a", "q", "v3"),
        ("r1", "a", "q", "v4"),
    ];
    for (i, (row, fam, q, v)) in writes.iter().enumerate() {
        if i == 3 {
            db.flush().unwrap();
        }
        let sp = p.put(Put::new(*row).add(fam, *q, *v)).unwrap();
        let sc = c
            .put_cell(row.as_bytes(), fam, q.as_bytes(), v.as_bytes())
            .unwrap();
        assert_eq!(sc, sp + 1, "one sequence number each");
        clock.advance(1);
    }
    type Cells = Vec<(String, Vec<u8>, u64, Vec<u8>)>;
    let all = |db: &Db, t: &str| -> Vec<(Vec<u8>, Cells)> {
        db.table(t)
            .unwrap()
            .scan(Scan::new().max_versions(10))
            .unwrap()
            .map(|r| {
                let r = r.unwrap();
                let cells = r
                    .cells()
                    .iter()
                    .map(|c| {
                        (
                            c.family.clone(),
                            c.qualifier.clone(),
                            c.timestamp,
                            c.value.clone(),
                        )
                    })
                    .collect();
                (r.key, cells)
            })
            .collect()
    };
    let expect = all(&db, "p");
    assert_eq!(expect.len(), 2);
    // Three versions kept of r1/a:q, the newest first, at the clock's times.
    let r1a: Vec<u64> = expect[0]
        .1
        .iter()
        .filter(|c| c.0 == "a")
        .map(|c| c.2)
        .collect();
    assert_eq!(r1a, vec![1_005, 1_004, 1_001]);
    assert_eq!(all(&db, "c"), expect);
    db.flush().unwrap();
    assert_eq!(all(&db, "c"), expect);
    drop((p, c));
    drop(db);
    let db = Db::open(dir.path(), o).unwrap();
    assert_eq!(all(&db, "c"), expect);
    assert_eq!(all(&db, "p"), expect);
}
