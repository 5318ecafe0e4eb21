//! Increment and append: absent columns, several columns at once, negative amounts, overflow
//! and malformed counters (refused, nothing written), timestamps past the previous version.

mod common;

use cellar::{Append, Db, Durability, Error, Get, Increment, Put, Table, WriteOptions};
use common::{open_default, table_desc};

fn setup() -> (tempfile::TempDir, Db, Table) {
    let dir = tempfile::tempdir().unwrap();
    let db = open_default(dir.path());
    db.create_table(table_desc("t", &["cf", "other"], 5))
        .unwrap();
    let t = db.table("t").unwrap();
    (dir, db, t)
}

fn counter(t: &Table, row: &str, f: &str, q: &str) -> Option<i64> {
    let r = t.get(&Get::new(row).column(f, q)).unwrap()?;
    let v = r.value(f, q)?;
    Some(i64::from_be_bytes(v.try_into().unwrap()))
}

fn be(v: i64) -> Vec<u8> {
    v.to_be_bytes().to_vec()
}

#[test]
fn increment_of_an_absent_column_starts_at_zero() {
    let (_d, _db, t) = setup();
    let r = t.increment(Increment::new("r").add("cf", "n", 5)).unwrap();
    assert_eq!(r.key, b"r");
    assert_eq!(r.value("cf", "n"), Some(&be(5)[..]));
    assert_eq!(counter(&t, "r", "cf", "n"), Some(5));
    let r = t.increment(Increment::new("r").add("cf", "n", 1)).unwrap();
    assert_eq!(r.value("cf", "n"), Some(&be(6)[..]));
    assert_eq!(counter(&t, "r", "cf", "n"), Some(6));
}

#[test]
fn several_columns_at_once_and_negative_amounts() {
    let (_d, _db, t) = setup();
    t.put(Put::new("r").add("cf", "b", be(10))).unwrap();
    let r = t
        .increment(
            Increment::new("r")
                .add("other", "z", 7)
                .add("cf", "b", -13)
                .add("cf", "a", 2)
                .add("cf", "a", 3),
        )
        .unwrap();
    // One cell per column, in cell order; a repeated column gets the sum.
    let cols: Vec<(&str, &[u8])> = r
        .cells()
        .iter()
        .map(|c| (c.family.as_str(), c.qualifier.as_slice()))
        .collect();
    assert_eq!(
        cols,
        vec![("cf", &b"a"[..]), ("cf", &b"b"[..]), ("other", &b"z"[..])]
    );
    assert_eq!(r.value("cf", "a"), Some(&be(5)[..]));
    assert_eq!(r.value("cf", "b"), Some(&be(-3)[..]));
    assert_eq!(r.value("other", "z"), Some(&be(7)[..]));
    assert_eq!(counter(&t, "r", "cf", "a"), Some(5));
    assert_eq!(counter(&t, "r", "cf", "b"), Some(-3));
    assert_eq!(counter(&t, "r", "other", "z"), Some(7));
}

#[test]
fn overflow_is_refused_and_writes_nothing() {
    let (_d, db, t) = setup();
    t.put(
        Put::new("r")
            .add("cf", "max", be(i64::MAX))
            .add("cf", "min", be(i64::MIN)),
    )
    .unwrap();
    let writes = db.stats().writes;
    for inc in [
        Increment::new("r").add("cf", "ok", 1).add("cf", "max", 1),
        Increment::new("r").add("cf", "min", -1).add("cf", "ok", 1),
        Increment::new("r")
            .add("cf", "ok", i64::MAX)
            .add("cf", "ok", 1),
    ] {
        assert!(matches!(t.increment(inc), Err(Error::InvalidArgument(_))));
    }
    assert_eq!(db.stats().writes, writes);
    assert_eq!(counter(&t, "r", "cf", "max"), Some(i64::MAX));
    assert_eq!(counter(&t, "r", "cf", "min"), Some(i64::MIN));
    assert_eq!(
        counter(&t, "r", "cf", "ok"),
        None,
        "the whole increment failed"
    );
    // Right at the edge is fine.
    let r = t
        .increment(Increment::new("r").add("cf", "max", -1))
        .unwrap();
    assert_eq!(r.value("cf", "max"), Some(&be(i64::MAX - 1)[..]));
}

#[test]
fn a_value_that_is_not_eight_bytes_is_refused() {
    let (_d, _db, t) = setup();
    t.put(Put::new("r").add("cf", "s", "abc").add("cf", "e", ""))
        .unwrap();
    for q in ["s", "e"] {
        let err = t
            .increment(Increment::new("r").add("cf", "fine", 1).add("cf", q, 1))
            .unwrap_err();
        assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
    }
    assert_eq!(counter(&t, "r", "cf", "fine"), None);
    // Errors of the request itself.
    assert!(matches!(
        t.increment(Increment::new("r")),
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        t.increment(Increment::new("r").add("nope", "q", 1)),
        Err(Error::FamilyNotFound { .. })
    ));
}

#[test]
fn zero_amount_reads_without_writing() {
    let (_d, db, t) = setup();
    let writes = db.stats().writes;
    let r = t.increment(Increment::new("r").add("cf", "n", 0)).unwrap();
    assert_eq!(r.value("cf", "n"), Some(&be(0)[..]));
    assert_eq!(db.stats().writes, writes);
    assert_eq!(counter(&t, "r", "cf", "n"), None);
}

#[test]
fn new_versions_go_past_a_future_timestamp() {
    let (_d, _db, t) = setup();
    let future = cellar::types::now_ms() + 10_000_000;
    t.put(
        Put::new("r")
            .add_at("cf", "n", future, be(1))
            .add_at("cf", "s", future, "x"),
    )
    .unwrap();
    let r = t.increment(Increment::new("r").add("cf", "n", 1)).unwrap();
    assert_eq!(r.cells()[0].timestamp, future + 1);
    assert_eq!(counter(&t, "r", "cf", "n"), Some(2));
    let r = t.append(Append::new("r").add("cf", "s", "y")).unwrap();
    assert_eq!(r.cells()[0].timestamp, future + 1);
    let g = t
        .get(&Get::new("r").column("cf", "s").all_versions())
        .unwrap()
        .unwrap();
    let vs: Vec<&[u8]> = g
        .versions("cf", "s")
        .iter()
        .map(|c| c.value.as_slice())
        .collect();
    assert_eq!(
        vs,
        vec![&b"xy"[..], &b"x"[..]],
        "the old version is kept, not replaced"
    );
}

#[test]
fn append_concatenates_and_returns_the_new_values() {
    let (_d, _db, t) = setup();
    let r = t
        .append(
            Append::new("r")
                .add("cf", "log", "a")
                .add("other", "x", "1"),
        )
        .unwrap();
    assert_eq!(r.value("cf", "log"), Some(&b"a"[..]));
    assert_eq!(r.value("other", "x"), Some(&b"1"[..]));
    let r = t
        .append_with(
            Append::new("r").add("cf", "log", "b").add("cf", "log", "c"),
            WriteOptions::durability(Durability::FsyncWal),
        )
        .unwrap();
    assert_eq!(r.value("cf", "log"), Some(&b"abc"[..]));
    let g = t.get(&Get::new("r")).unwrap().unwrap();
    assert_eq!(g.value("cf", "log"), Some(&b"abc"[..]));
    assert_eq!(g.value("other", "x"), Some(&b"1"[..]));
    assert!(matches!(
        t.append(Append::new("r")),
        Err(Error::InvalidArgument(_))
    ));
}

#[test]
fn increment_with_explicit_durability() {
    let (_d, _db, t) = setup();
    for d in [
        Durability::SkipWal,
        Durability::AsyncWal,
        Durability::SyncWal,
        Durability::FsyncWal,
    ] {
        t.increment_with(
            Increment::new("r").add("cf", "n", 1),
            WriteOptions::durability(d),
        )
        .unwrap();
    }
    assert_eq!(counter(&t, "r", "cf", "n"), Some(4));
}
