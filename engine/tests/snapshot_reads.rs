//! Explicit snapshots: reads at a snapshot see exactly what was acknowledged before it, across
//! later writes, deletes and flushes; dropping it releases it.

use cellar::{Db, Delete, FamilyDescriptor, Get, Options, Put, Scan, TableDescriptor};

fn open(dir: &std::path::Path) -> Db {
    let db = Db::open(dir, Options::default()).unwrap();
    if !db.table_exists("t").unwrap() {
        db.create_table(TableDescriptor::new("t").family(FamilyDescriptor::new("cf")))
            .unwrap();
    }
    db
}

#[test]
fn snapshot_reads_ignore_later_writes_deletes_and_flushes() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    let t = db.table("t").unwrap();
    t.put(Put::new("r1").add_at("cf", "q", 1, "old")).unwrap();
    t.put(Put::new("r2").add_at("cf", "q", 1, "r2")).unwrap();
    let snap = db.snapshot();
    assert_eq!(db.stats().live_snapshots, 1);
    assert_eq!(db.stats().oldest_snapshot, Some(snap.seq()));

    t.put(Put::new("r1").add_at("cf", "q", 2, "new")).unwrap();
    t.delete(Delete::new("r2")).unwrap();
    t.put(Put::new("r3").add_at("cf", "q", 1, "r3")).unwrap();
    db.flush().unwrap();

    let now = t.get(&Get::new("r1")).unwrap().unwrap();
    assert_eq!(now.value("cf", "q"), Some(&b"new"[..]));
    let then = t.get(&Get::new("r1").at(&snap)).unwrap().unwrap();
    assert_eq!(then.value("cf", "q"), Some(&b"old"[..]));
    assert!(t.get(&Get::new("r2")).unwrap().is_none());
    assert!(t.get(&Get::new("r2").at(&snap)).unwrap().is_some());

    let rows: Vec<Vec<u8>> = t
        .scan(Scan::new().at(&snap))
        .unwrap()
        .map(|r| r.unwrap().key)
        .collect();
    assert_eq!(rows, vec![b"r1".to_vec(), b"r2".to_vec()]);
    let rows_now: Vec<Vec<u8>> = t
        .scan(Scan::new())
        .unwrap()
        .map(|r| r.unwrap().key)
        .collect();
    assert_eq!(rows_now, vec![b"r1".to_vec(), b"r3".to_vec()]);

    drop(snap);
    assert_eq!(db.stats().live_snapshots, 0);
    assert_eq!(db.stats().oldest_snapshot, None);
}

#[test]
fn a_scan_keeps_its_snapshot_while_writes_continue() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    let t = db.table("t").unwrap();
    for i in 0..600u32 {
        t.put(Put::new(format!("row{i:04}")).add_at("cf", "q", 1, "v"))
            .unwrap();
    }
    // More rows than one scan batch, so the scan re-seeks while writes land behind and ahead.
    let mut scan = t.scan(Scan::new()).unwrap();
    let first = scan.next().unwrap().unwrap();
    assert_eq!(first.key, b"row0000");
    for i in 0..600u32 {
        t.put(Put::new(format!("row{i:04}x")).add_at("cf", "q", 1, "later"))
            .unwrap();
    }
    db.flush().unwrap();
    let rest: Vec<_> = scan.map(|r| r.unwrap().key).collect();
    assert_eq!(
        rest.len(),
        599,
        "the scan saw rows written after it started"
    );
    assert!(rest.iter().all(|k| !k.ends_with(b"x")));
}

#[test]
fn many_newer_versions_after_a_snapshot_do_not_hide_the_next_column() {
    // Regression: the resolver only started a column on a visible cell, so the invisible
    // versions of column `b` (written after the snapshot) were counted as overrun of the
    // finished column `a`, and past eight of them the read sought past `b` entirely.
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    db.create_table(TableDescriptor::new("t").family(FamilyDescriptor::new("cf").max_versions(1)))
        .unwrap();
    let t = db.table("t").unwrap();
    t.put(
        Put::new("r")
            .add_at("cf", "a", 1, "a1")
            .add_at("cf", "b", 1, "b1"),
    )
    .unwrap();
    let snap = db.snapshot();
    for ts in 2..30 {
        t.put(
            Put::new("r")
                .add_at("cf", "a", ts, "a")
                .add_at("cf", "b", ts, "b"),
        )
        .unwrap();
    }
    for flush in [false, true] {
        if flush {
            db.flush().unwrap();
        }
        let row = t.get(&Get::new("r").at(&snap)).unwrap().unwrap();
        assert_eq!(row.value("cf", "a"), Some(&b"a1"[..]), "flushed: {flush}");
        assert_eq!(row.value("cf", "b"), Some(&b"b1"[..]), "flushed: {flush}");
        let rows: Vec<_> = t
            .scan(Scan::new().at(&snap))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].cells().len(), 2, "flushed: {flush}");
    }
}
