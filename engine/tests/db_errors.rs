//! Every bad input to the `Db` API gets its typed error, and nothing is written: no write is
//! counted, no sequence number is consumed, no row appears (also after a reopen).

mod common;

use cellar::{
    Db, Delete, Error, FamilyDescriptor, Get, Options, Put, RowMutations, Scan, TableDescriptor,
    WriteBatch, WriteOptions,
};
use common::{open_default, table_desc};

/// A database with table `t` (families a, b), namespace `ns` holding `ns:x`, and one row `r`.
fn setup(dir: &std::path::Path) -> Db {
    let db = open_default(dir);
    db.create_table(table_desc("t", &["a", "b"], 3)).unwrap();
    db.create_namespace("ns").unwrap();
    db.create_table(table_desc("ns:x", &["f"], 3)).unwrap();
    db.table("t")
        .unwrap()
        .put(Put::new("r").add_at("a", "q", 1, "v"))
        .unwrap();
    db
}

/// What the database holds, as observed through the API, to compare before and after.
#[derive(Debug, PartialEq)]
struct Observed {
    writes: u64,
    read_point: u64,
    rows_t: Vec<Vec<u8>>,
    rows_x: usize,
    tables: Vec<String>,
    namespaces: Vec<String>,
}

fn observe(db: &Db) -> Observed {
    let s = db.stats();
    Observed {
        writes: s.writes,
        read_point: s.read_point,
        rows_t: db
            .table("t")
            .unwrap()
            .scan(Scan::new())
            .unwrap()
            .map(|r| r.unwrap().key)
            .collect(),
        rows_x: db.table("ns:x").unwrap().scan(Scan::new()).unwrap().count(),
        tables: db.list_tables().iter().map(|t| t.to_string()).collect(),
        namespaces: db.list_namespaces(),
    }
}

#[test]
fn data_errors_are_typed_and_write_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let db = setup(dir.path());
    let t = db.table("t").unwrap();
    let before = observe(&db);
    let w = WriteOptions::default();

    // Unknown table.
    let e = db.table("nope").unwrap_err();
    assert!(
        matches!(e, Error::TableNotFound(ref n) if n == "nope"),
        "{e:?}"
    );
    let e = db.table("ns:nope").unwrap_err();
    assert!(matches!(e, Error::TableNotFound(_)), "{e:?}");
    let e = db
        .write(
            WriteBatch::new().put("nope", Put::new("r").add("a", "q", "v")),
            w,
        )
        .unwrap_err();
    assert!(matches!(e, Error::TableNotFound(_)), "{e:?}");

    // Unknown family, in a put, a delete, a get and a scan.
    let e = t.put(Put::new("r2").add("zz", "q", "v")).unwrap_err();
    assert!(
        matches!(e, Error::FamilyNotFound { ref table, ref family } if table == "t" && family == "zz"),
        "{e:?}"
    );
    let e = t
        .put(Put::new("r2").add("a", "q", "v").add("zz", "q", "v"))
        .unwrap_err();
    assert!(matches!(e, Error::FamilyNotFound { .. }), "{e:?}");
    let e = t.put_cell(b"r2", "zz", b"q", b"v").unwrap_err();
    assert!(
        matches!(e, Error::FamilyNotFound { ref table, ref family } if table == "t" && family == "zz"),
        "{e:?}"
    );
    for d in [
        Delete::new("r").family("zz"),
        Delete::new("r").columns("zz", "q"),
        Delete::new("r").column("zz", "q"),
        Delete::new("r").column_at("zz", "q", 1),
        Delete::new("r").family_version("zz", 1),
    ] {
        let e = t.delete(d.clone()).unwrap_err();
        assert!(matches!(e, Error::FamilyNotFound { .. }), "{d:?}: {e:?}");
    }
    let e = t.get(&Get::new("r").family("zz")).unwrap_err();
    assert!(matches!(e, Error::FamilyNotFound { .. }), "{e:?}");
    let e = t.get(&Get::new("r").column("zz", "q")).unwrap_err();
    assert!(matches!(e, Error::FamilyNotFound { .. }), "{e:?}");
    let e = t.scan(Scan::new().family("zz")).unwrap_err();
    assert!(matches!(e, Error::FamilyNotFound { .. }), "{e:?}");

    // Row keys: empty, and one byte over 65,535 (in a put, a delete and a get).
    let big = vec![b'k'; 65_536];
    let e = t.put(Put::new("").add("a", "q", "v")).unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e:?}");
    let e = t.put(Put::new(big.clone()).add("a", "q", "v")).unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e:?}");
    for row in [&b""[..], &big] {
        let e = t.put_cell(row, "a", b"q", b"v").unwrap_err();
        assert!(matches!(e, Error::InvalidArgument(_)), "{e:?}");
    }
    let e = t.delete(Delete::new("")).unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e:?}");
    let e = t.delete(Delete::new(big.clone())).unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e:?}");
    let e = t
        .delete(Delete::new(big.clone()).columns("a", "q"))
        .unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e:?}");
    let e = t.get(&Get::new("")).unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e:?}");
    // Oversized qualifier.
    let e = t
        .put(Put::new("r2").add("a", vec![b'q'; 65_536], "v"))
        .unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e:?}");

    // A put with no cells; a batch with nothing in it.
    let e = t.put(Put::new("r2")).unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e:?}");
    let e = db.write(WriteBatch::new(), w).unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e:?}");
    let e = t.mutate_row(RowMutations::new("r2"), w).unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e:?}");

    // A row mutation holding another row (even if its first mutation is fine).
    let e = t
        .mutate_row(
            RowMutations::new("r2")
                .put(Put::new("r2").add("a", "q", "v"))
                .put(Put::new("r3").add("a", "q", "v")),
            w,
        )
        .unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e:?}");
    let e = t
        .mutate_row(RowMutations::new("r2").delete(Delete::new("r")), w)
        .unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e:?}");

    // A family-version delete needs a timestamp.
    let e = t
        .delete(Delete::new("r").family_version("a", u64::MAX))
        .unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e:?}");

    // Inverted time range, scan stop before start.
    let e = t.get(&Get::new("r").time_range(5, 4)).unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e:?}");
    let e = t.scan(Scan::new().range("b", "a")).unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e:?}");
    let e = t.scan(Scan::new().time_range(9, 1)).unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e:?}");

    // A batch whose bad item comes last applies none of the good ones before it.
    let e = db
        .write(
            WriteBatch::new()
                .put("t", Put::new("r2").add("a", "q", "v"))
                .put("ns:x", Put::new("r2").add("f", "q", "v"))
                .put("t", Put::new("r3").add("zz", "q", "v")),
            w,
        )
        .unwrap_err();
    assert!(matches!(e, Error::FamilyNotFound { .. }), "{e:?}");
    let e = db
        .write(
            WriteBatch::new()
                .put("t", Put::new("r2").add("a", "q", "v"))
                .put("bad name", Put::new("r2").add("f", "q", "v")),
            w,
        )
        .unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e:?}");

    assert_eq!(observe(&db), before);
    drop(t);
    drop(db);
    let db = open_default(dir.path());
    let mut after = observe(&db);
    after.writes = before.writes;
    after.read_point = before.read_point;
    assert_eq!(after, before);
}

#[test]
fn largest_row_key_is_accepted() {
    let dir = tempfile::tempdir().unwrap();
    let db = setup(dir.path());
    let t = db.table("t").unwrap();
    let max = vec![b'k'; 65_535];
    t.put(Put::new(max.clone()).add("a", "q", "v")).unwrap();
    db.flush().unwrap();
    let r = t.get(&Get::new(max.clone())).unwrap().unwrap();
    assert_eq!(r.key, max);
    assert_eq!(r.value("a", "q"), Some(&b"v"[..]));
}

/// A Get of a row key longer than any stored one can only miss; it must not panic.
#[test]
fn get_of_an_oversized_row_key_fails_or_misses() {
    let dir = tempfile::tempdir().unwrap();
    let db = setup(dir.path());
    db.flush().unwrap();
    let t = db.table("t").unwrap();
    match t.get(&Get::new(vec![b'k'; 70_000])) {
        Ok(None) => {}
        Err(Error::InvalidArgument(_)) => {}
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn admin_errors_are_typed_and_change_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let db = setup(dir.path());
    let before = observe(&db);

    // Bad table, namespace and family names.
    for bad in ["bad name", "-t", ".t", "a:b:c", "ns:", ":t", "t/x", ""] {
        let e = db.create_table(table_desc(bad, &["f"], 3)).unwrap_err();
        assert!(matches!(e, Error::InvalidArgument(_)), "{bad:?}: {e:?}");
        let e = db.table(bad).unwrap_err();
        assert!(matches!(e, Error::InvalidArgument(_)), "{bad:?}: {e:?}");
    }
    let long = "x".repeat(256);
    let e = db.create_table(table_desc(&long, &["f"], 3)).unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e:?}");
    for bad in ["", "-n", ".n", "a b", "a:b", "a/b", long.as_str()] {
        let e = db.create_namespace(bad).unwrap_err();
        assert!(matches!(e, Error::InvalidArgument(_)), "{bad:?}: {e:?}");
    }
    for bad in ["", "c:f", "-f", "a b", "a/b", long.as_str()] {
        let e = db.create_table(table_desc("new", &[bad], 3)).unwrap_err();
        assert!(matches!(e, Error::InvalidArgument(_)), "{bad:?}: {e:?}");
    }
    // No family; duplicate family; VERSIONS 0; MIN_VERSIONS over VERSIONS; bad block size.
    let e = db.create_table(TableDescriptor::new("new")).unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e:?}");
    let e = db
        .create_table(table_desc("new", &["f", "g", "f"], 3))
        .unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e:?}");
    for f in [
        FamilyDescriptor::new("f").max_versions(0),
        FamilyDescriptor::new("f").max_versions(2).min_versions(3),
        FamilyDescriptor::new("f").block_size(100),
    ] {
        let e = db
            .create_table(TableDescriptor::new("new").family(f.clone()))
            .unwrap_err();
        assert!(matches!(e, Error::InvalidArgument(_)), "{f:?}: {e:?}");
    }
    // Duplicate family in an alter, too.
    let e = db.alter_table(table_desc("t", &["a", "a"], 3)).unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e:?}");

    // Table exists (in default and in a namespace); the same name elsewhere is another table.
    let e = db.create_table(table_desc("t", &["z"], 3)).unwrap_err();
    assert!(matches!(e, Error::TableExists(ref n) if n == "t"), "{e:?}");
    let e = db
        .create_table(table_desc("default:t", &["z"], 3))
        .unwrap_err();
    assert!(matches!(e, Error::TableExists(_)), "{e:?}");
    let e = db.create_table(table_desc("ns:x", &["f"], 3)).unwrap_err();
    assert!(
        matches!(e, Error::TableExists(ref n) if n == "ns:x"),
        "{e:?}"
    );

    // Namespace missing; namespace exists; default cannot go; non-empty namespace.
    let e = db
        .create_table(table_desc("nons:t", &["f"], 3))
        .unwrap_err();
    assert!(
        matches!(e, Error::NamespaceNotFound(ref n) if n == "nons"),
        "{e:?}"
    );
    let e = db.drop_namespace("nons").unwrap_err();
    assert!(matches!(e, Error::NamespaceNotFound(_)), "{e:?}");
    let e = db.create_namespace("ns").unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e:?}");
    let e = db.drop_namespace("default").unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e:?}");
    let e = db.drop_namespace("ns").unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e:?}");

    // Missing tables in alter, drop, describe; existence check of a bad name.
    let e = db.alter_table(table_desc("nope", &["f"], 3)).unwrap_err();
    assert!(matches!(e, Error::TableNotFound(_)), "{e:?}");
    let e = db.drop_table("nope").unwrap_err();
    assert!(matches!(e, Error::TableNotFound(_)), "{e:?}");
    let e = db.drop_table("ns:nope").unwrap_err();
    assert!(matches!(e, Error::TableNotFound(_)), "{e:?}");
    let e = db.describe("nope").unwrap_err();
    assert!(matches!(e, Error::TableNotFound(_)), "{e:?}");
    let e = db.table_exists("bad name").unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e:?}");
    assert!(!db.table_exists("nope").unwrap());

    assert_eq!(observe(&db), before);
    assert_eq!(db.describe("t").unwrap(), table_desc("t", &["a", "b"], 3));
    drop(db);
    let db = open_default(dir.path());
    let mut after = observe(&db);
    after.writes = before.writes;
    after.read_point = before.read_point;
    assert_eq!(after, before);
    assert_eq!(db.describe("t").unwrap(), table_desc("t", &["a", "b"], 3));
}

#[test]
fn open_options_refuse_existing_or_missing_databases() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing");
    let e = Db::open(
        &missing,
        Options {
            create_if_missing: false,
            ..Options::default()
        },
    )
    .unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e:?}");
    drop(open_default(&missing));
    let e = Db::open(
        &missing,
        Options {
            error_if_exists: true,
            ..Options::default()
        },
    )
    .unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e:?}");
    // Bad WAL settings are refused too.
    let mut o = Options::default();
    o.wal.segment_size = 100;
    let other = dir.path().join("other");
    let e = Db::open(&other, o).unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e:?}");
}

#[test]
fn a_second_open_of_the_same_directory_is_locked_until_the_first_closes() {
    let dir = tempfile::tempdir().unwrap();
    let db = open_default(dir.path());
    db.create_table(table_desc("t", &["a"], 3)).unwrap();
    let t = db.table("t").unwrap();
    t.put(Put::new("r").add("a", "q", "v")).unwrap();

    let e = Db::open(dir.path(), Options::default()).unwrap_err();
    assert!(
        matches!(e, Error::Locked(ref p) if p == dir.path()),
        "{e:?}"
    );
    // A clone keeps the database open: still locked after dropping the original handle.
    let clone = db.clone();
    drop(db);
    let e = Db::open(dir.path(), Options::default()).unwrap_err();
    assert!(matches!(e, Error::Locked(_)), "{e:?}");
    // The failed opens disturbed nothing.
    assert_eq!(
        t.get(&Get::new("r")).unwrap().unwrap().value("a", "q"),
        Some(&b"v"[..])
    );
    t.put(Put::new("r2").add("a", "q", "v2")).unwrap();
    drop(t);
    drop(clone);

    let db = Db::open(dir.path(), Options::default()).unwrap();
    let t = db.table("t").unwrap();
    assert_eq!(t.scan(Scan::new()).unwrap().count(), 2);
    drop(t);
    // close() releases the lock as dropping does.
    db.close().unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    assert_eq!(db.table("t").unwrap().scan(Scan::new()).unwrap().count(), 2);
}
