//! Check-and-mutate: every comparison operator, absent and present columns, several
//! conditions, and that a failed check writes nothing.

mod common;

use cellar::{
    CheckAndMutate, CompareOp, Db, Delete, Error, Get, Put, RowMutations, Table, WriteOptions,
};
use common::{open_default, table_desc};

fn setup() -> (tempfile::TempDir, Db, Table) {
    let dir = tempfile::tempdir().unwrap();
    let db = open_default(dir.path());
    db.create_table(table_desc("t", &["cf", "other"], 5))
        .unwrap();
    let t = db.table("t").unwrap();
    (dir, db, t)
}

fn value(t: &Table, row: &str, f: &str, q: &str) -> Option<Vec<u8>> {
    t.get(&Get::new(row).column(f, q))
        .unwrap()
        .and_then(|r| r.value(f, q).map(<[u8]>::to_vec))
}

fn put(row: &str, f: &str, q: &str, v: &str) -> RowMutations {
    RowMutations::new(row).put(Put::new(row).add(f, q, v))
}

#[test]
fn each_compare_op_reads_current_op_given_bytewise() {
    let (_d, _db, t) = setup();
    t.put(Put::new("r").add("cf", "q", "m")).unwrap();
    let ops = [
        (CompareOp::Less, [false, false, true]),
        (CompareOp::LessOrEqual, [false, true, true]),
        (CompareOp::Equal, [false, true, false]),
        (CompareOp::NotEqual, [true, false, true]),
        (CompareOp::GreaterOrEqual, [true, true, false]),
        (CompareOp::Greater, [true, false, false]),
    ];
    // The stored value is "m"; given values below, equal to and above it. "mm" and "l\xff"
    // check the comparison is bytewise (prefix smaller, no signed bytes).
    for (op, want) in ops {
        for (given, want) in [("l\u{7f}", want[0]), ("m", want[1]), ("mm", want[2])] {
            let q = format!("{op:?}-{given}");
            let applied = t
                .check_and_mutate(
                    CheckAndMutate::row("r")
                        .if_matches("cf", "q", op, given)
                        .then(put("r", "other", &q, "hit")),
                )
                .unwrap();
            assert_eq!(applied, want, "m {op:?} {given}");
            assert_eq!(
                value(&t, "r", "other", &q).is_some(),
                want,
                "m {op:?} {given}: written iff the check held"
            );
        }
    }
    let high = [0xffu8];
    assert!(t
        .check_and_mutate(
            CheckAndMutate::row("r")
                .if_matches("cf", "q", CompareOp::Less, &high[..])
                .then(put("r", "other", "unsigned", "hit")),
        )
        .unwrap());
}

#[test]
fn absent_and_present_columns() {
    let (_d, _db, t) = setup();
    // Absent: if_absent holds, every comparison fails (NotEqual too).
    assert!(t
        .check_and_mutate(
            CheckAndMutate::row("r")
                .if_absent("cf", "q")
                .then(put("r", "cf", "q", "first")),
        )
        .unwrap());
    assert_eq!(value(&t, "r", "cf", "q").as_deref(), Some(&b"first"[..]));
    // Present now: if_absent fails and writes nothing.
    assert!(!t
        .check_and_mutate(
            CheckAndMutate::row("r")
                .if_absent("cf", "q")
                .then(put("r", "cf", "q", "second")),
        )
        .unwrap());
    assert_eq!(value(&t, "r", "cf", "q").as_deref(), Some(&b"first"[..]));
    for op in [
        CompareOp::Equal,
        CompareOp::NotEqual,
        CompareOp::Less,
        CompareOp::Greater,
    ] {
        assert!(!t
            .check_and_mutate(
                CheckAndMutate::row("r")
                    .if_matches("cf", "missing", op, "x")
                    .then(put("r", "cf", "q", "bad")),
            )
            .unwrap());
    }
    assert_eq!(value(&t, "r", "cf", "q").as_deref(), Some(&b"first"[..]));
    // A deleted column is absent again.
    t.delete(Delete::new("r").columns("cf", "q")).unwrap();
    // The DeleteColumn at "now" masks every put up to its millisecond (HBase semantics): a
    // put in the same millisecond would be hidden, so let the clock move on.
    std::thread::sleep(std::time::Duration::from_millis(2));
    assert!(t
        .check_and_mutate(
            CheckAndMutate::row("r")
                .if_absent("cf", "q")
                .then(put("r", "cf", "q", "again")),
        )
        .unwrap());
    assert_eq!(value(&t, "r", "cf", "q").as_deref(), Some(&b"again"[..]));
}

#[test]
fn a_failed_check_writes_nothing() {
    let (_d, db, t) = setup();
    t.put(Put::new("r").add("cf", "a", "1").add("cf", "b", "keep"))
        .unwrap();
    let writes = db.stats().writes;
    let rm = RowMutations::new("r")
        .put(Put::new("r").add("cf", "a", "2").add("other", "new", "x"))
        .delete(Delete::new("r").columns("cf", "b"));
    assert!(!t
        .check_and_mutate(
            CheckAndMutate::row("r")
                .if_equals("cf", "a", "0")
                .then(rm.clone())
        )
        .unwrap());
    assert_eq!(db.stats().writes, writes, "no write call was made");
    assert_eq!(value(&t, "r", "cf", "a").as_deref(), Some(&b"1"[..]));
    assert_eq!(value(&t, "r", "cf", "b").as_deref(), Some(&b"keep"[..]));
    assert_eq!(value(&t, "r", "other", "new"), None);
    // The same mutations (a put and a delete) apply together when it holds.
    assert!(t
        .check_and_mutate_with(
            CheckAndMutate::row("r").if_equals("cf", "a", "1").then(rm),
            WriteOptions::durability(cellar::Durability::FsyncWal),
        )
        .unwrap());
    assert_eq!(value(&t, "r", "cf", "a").as_deref(), Some(&b"2"[..]));
    assert_eq!(value(&t, "r", "cf", "b"), None);
    assert_eq!(value(&t, "r", "other", "new").as_deref(), Some(&b"x"[..]));
}

#[test]
fn several_conditions_must_all_hold() {
    let (_d, _db, t) = setup();
    t.put(Put::new("r").add("cf", "a", "1").add("cf", "b", "2"))
        .unwrap();
    let cam = |b: &str| {
        CheckAndMutate::row("r")
            .if_equals("cf", "a", "1")
            .if_equals("cf", "b", b)
            .if_absent("other", "c")
            .then(put("r", "other", "c", "done"))
    };
    assert!(!t.check_and_mutate(cam("9")).unwrap());
    assert_eq!(value(&t, "r", "other", "c"), None);
    assert!(t.check_and_mutate(cam("2")).unwrap());
    assert!(!t.check_and_mutate(cam("2")).unwrap(), "c is present now");
}

#[test]
fn bad_requests_are_refused() {
    let (_d, _db, t) = setup();
    let invalid = |r: cellar::Result<bool>| matches!(r, Err(Error::InvalidArgument(_)));
    assert!(invalid(t.check_and_mutate(
        CheckAndMutate::row("r").if_absent("cf", "q")
    )));
    assert!(invalid(t.check_and_mutate(
        CheckAndMutate::row("r").then(put("r", "cf", "q", "v"))
    )));
    assert!(invalid(
        t.check_and_mutate(
            CheckAndMutate::row("r")
                .if_absent("cf", "q")
                .then(RowMutations::new("r"))
        )
    ));
    assert!(invalid(
        t.check_and_mutate(CheckAndMutate::row("r").if_absent("cf", "q").then(put(
            "other-row",
            "cf",
            "q",
            "v"
        )))
    ));
    assert!(invalid(
        t.check_and_mutate(
            CheckAndMutate::row("r")
                .if_absent("cf", "q")
                .then(RowMutations::new("r").put(Put::new("x").add("cf", "q", "v")))
        )
    ));
    assert!(matches!(
        t.check_and_mutate(
            CheckAndMutate::row("r")
                .if_absent("nope", "q")
                .then(put("r", "cf", "q", "v"))
        ),
        Err(Error::FamilyNotFound { .. })
    ));
    assert_eq!(value(&t, "r", "cf", "q"), None);
}
