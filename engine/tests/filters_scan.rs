//! Scan and Get filters, batching and limits on a real database, with data spread across
//! flushed files and the memstore so every filter sees merged, resolved rows.

mod common;

use cellar::read::filter::{CompareOp, Filter};
use cellar::{Db, Get, Put, Row, Scan};
use common::{open_default, table_desc};

/// Rows `r00`..`r19`. Family `a`: `q1` = `v<i>` (ts 1) and, for even rows, `q2` = `x` (ts 2)
/// and `p1` = `p` (ts 3). Family `b`: `s` = `on` for rows divisible by 3, `off` otherwise,
/// except rows divisible by 5 (no `s`). Rows below 10 are flushed; the rest stay in the
/// memstore, and row 4's `q1` is overwritten there (ts 5, `new4`).
fn setup(dir: &std::path::Path) -> Db {
    let db = open_default(dir);
    db.create_table(table_desc("t", &["a", "b"], 3)).unwrap();
    let t = db.table("t").unwrap();
    for i in 0..20u32 {
        let mut p = Put::new(format!("r{i:02}")).add_at("a", "q1", 1, format!("v{i}"));
        if i % 2 == 0 {
            p = p.add_at("a", "q2", 2, "x").add_at("a", "p1", 3, "p");
        }
        if i % 5 != 0 {
            p = p.add_at("b", "s", 1, if i % 3 == 0 { "on" } else { "off" });
        }
        t.put(p).unwrap();
        if i == 9 {
            db.flush().unwrap();
        }
    }
    t.put(Put::new("r04").add_at("a", "q1", 5, "new4")).unwrap();
    db
}

fn rows(db: &Db, s: Scan) -> Vec<Row> {
    db.table("t")
        .unwrap()
        .scan(s)
        .unwrap()
        .map(|r| r.unwrap())
        .collect()
}

fn keys(db: &Db, s: Scan) -> Vec<String> {
    rows(db, s)
        .into_iter()
        .map(|r| String::from_utf8(r.key).unwrap())
        .collect()
}

/// `family:qualifier` of every cell of a row.
fn cols(r: &Row) -> Vec<String> {
    r.cells
        .iter()
        .map(|c| format!("{}:{}", c.family, String::from_utf8_lossy(&c.qualifier)))
        .collect()
}

fn names(v: &[u32]) -> Vec<String> {
    v.iter().map(|i| format!("r{i:02}")).collect()
}

#[test]
fn row_prefix_and_row_ranges() {
    let dir = tempfile::tempdir().unwrap();
    let db = setup(dir.path());
    let f = Filter::RowPrefix(b"r1".to_vec());
    assert_eq!(
        keys(&db, Scan::new().filter(f)),
        names(&(10..20).collect::<Vec<_>>())
    );
    // Unordered, overlapping, touching and empty ranges merge; an empty stop is open.
    let f = Filter::RowRanges(vec![
        (b"r15".to_vec(), b"r17".to_vec()),
        (b"r02".to_vec(), b"r04".to_vec()),
        (b"r03".to_vec(), b"r05".to_vec()),
        (b"r05".to_vec(), b"r06".to_vec()),
        (b"r09".to_vec(), b"r09".to_vec()),
        (b"r19".to_vec(), Vec::new()),
    ]);
    assert_eq!(
        keys(&db, Scan::new().filter(f.clone())),
        names(&[2, 3, 4, 5, 15, 16, 19])
    );
    // The scan's own bounds still apply.
    assert_eq!(
        keys(&db, Scan::new().range("r04", "r16").filter(f)),
        names(&[4, 5, 15])
    );
}

#[test]
fn cell_filters_column_prefix_qualifier_value_timestamps() {
    let dir = tempfile::tempdir().unwrap();
    let db = setup(dir.path());
    let rs = rows(&db, Scan::new().filter(Filter::ColumnPrefix(b"q".to_vec())));
    assert_eq!(rs.len(), 20);
    assert_eq!(cols(&rs[0]), vec!["a:q1", "a:q2"]);
    assert_eq!(cols(&rs[1]), vec!["a:q1"]);

    let f = Filter::Qualifier(CompareOp::Greater, b"q1".to_vec());
    let rs = rows(&db, Scan::new().filter(f));
    // Rows 5 and 15 have neither a:q2 nor b:s.
    assert_eq!(rs.len(), 18);
    assert_eq!(cols(&rs[0]), vec!["a:q2"]);
    assert_eq!(cols(&rs[1]), vec!["b:s"]);

    // Value sees resolved cells: row 4's newest q1 is `new4` (memstore over file).
    let f = Filter::Value(CompareOp::Equal, b"v4".to_vec());
    assert!(rows(&db, Scan::new().filter(f)).is_empty());
    let f = Filter::Value(CompareOp::Equal, b"new4".to_vec());
    let rs = rows(&db, Scan::new().filter(f));
    assert_eq!(rs.len(), 1);
    assert_eq!(rs[0].value("a", "q1"), Some(&b"new4"[..]));
    let f = Filter::Value(CompareOp::Less, b"v2".to_vec());
    assert_eq!(
        keys(&db, Scan::new().family("a").filter(f)),
        names(&[0, 1, 2, 4, 6, 8, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19]),
        "p (even rows), v1 and v11..v19 sort below v2"
    );

    let f = Filter::Timestamps(vec![3, 2]);
    let rs = rows(&db, Scan::new().filter(f));
    assert_eq!(rs.len(), 10);
    assert!(rs.iter().all(|r| cols(r) == vec!["a:p1", "a:q2"]));
    // After resolution: with all versions, row 4's old q1 at ts 1 is visible too.
    let f = Filter::Timestamps(vec![1]);
    let rs = rows(&db, Scan::new().range("r04", "r05").filter(f.clone()));
    assert_eq!(cols(&rs[0]), vec!["b:s"]);
    let rs = rows(
        &db,
        Scan::new().range("r04", "r05").all_versions().filter(f),
    );
    assert_eq!(cols(&rs[0]), vec!["a:q1", "b:s"]);
}

#[test]
fn single_column_value_filter() {
    let dir = tempfile::tempdir().unwrap();
    let db = setup(dir.path());
    let scv = |op, v: &str, missing| Filter::SingleColumnValue {
        family: "b".into(),
        qualifier: b"s".to_vec(),
        op,
        value: v.as_bytes().to_vec(),
        filter_if_missing: missing,
    };
    // Rows 3, 6, 9, 12, 18 are `on`; 0, 5, 10, 15 lack the column.
    assert_eq!(
        keys(&db, Scan::new().filter(scv(CompareOp::Equal, "on", true))),
        names(&[3, 6, 9, 12, 18])
    );
    assert_eq!(
        keys(&db, Scan::new().filter(scv(CompareOp::Equal, "on", false))),
        names(&[0, 3, 5, 6, 9, 10, 12, 15, 18])
    );
    // The whole row comes back, not just the tested column.
    let rs = rows(&db, Scan::new().filter(scv(CompareOp::Equal, "on", true)));
    assert_eq!(cols(&rs[0]), vec!["a:q1", "b:s"]);
    // A newer value in the memstore decides.
    let t = db.table("t").unwrap();
    t.put(Put::new("r03").add_at("b", "s", 9, "off")).unwrap();
    assert_eq!(
        keys(&db, Scan::new().filter(scv(CompareOp::Equal, "on", true))),
        names(&[6, 9, 12, 18])
    );
    assert_eq!(
        keys(
            &db,
            Scan::new()
                .range("r00", "r10")
                .filter(scv(CompareOp::NotEqual, "on", true))
        ),
        names(&[1, 2, 3, 4, 7, 8])
    );
}

#[test]
fn page_first_key_only_key_only() {
    let dir = tempfile::tempdir().unwrap();
    let db = setup(dir.path());
    assert_eq!(
        keys(&db, Scan::new().start_row("r08").filter(Filter::Page(3))),
        names(&[8, 9, 10])
    );
    assert!(keys(&db, Scan::new().filter(Filter::Page(0))).is_empty());
    // Page counts rows the whole filter accepts.
    let f = Filter::and([
        Filter::Value(CompareOp::Equal, b"on".to_vec()),
        Filter::Page(2),
    ]);
    assert_eq!(keys(&db, Scan::new().filter(f)), names(&[3, 6]));

    let rs = rows(&db, Scan::new().filter(Filter::FirstKeyOnly));
    assert_eq!(rs.len(), 20);
    assert!(rs.iter().all(|r| r.cells.len() == 1));
    assert_eq!(cols(&rs[0]), vec!["a:p1"]);

    let rs = rows(&db, Scan::new().filter(Filter::KeyOnly));
    assert_eq!(rs.len(), 20);
    assert_eq!(cols(&rs[0]), vec!["a:p1", "a:q1", "a:q2"]);
    assert!(rs.iter().flat_map(|r| &r.cells).all(|c| c.value.is_empty()));
}

#[test]
fn and_or_nesting() {
    let dir = tempfile::tempdir().unwrap();
    let db = setup(dir.path());
    // (prefix r0 AND q2 present) OR (prefix r1 AND b:s = on): cells of each branch only.
    let f = Filter::or([
        Filter::and([
            Filter::RowPrefix(b"r0".to_vec()),
            Filter::Qualifier(CompareOp::Equal, b"q2".to_vec()),
        ]),
        Filter::and([
            Filter::RowPrefix(b"r1".to_vec()),
            Filter::Value(CompareOp::Equal, b"on".to_vec()),
        ]),
    ]);
    let rs = rows(&db, Scan::new().filter(f));
    let got: Vec<String> = rs
        .iter()
        .map(|r| format!("{}={}", String::from_utf8_lossy(&r.key), cols(r).join(",")))
        .collect();
    assert_eq!(
        got,
        vec!["r00=a:q2", "r02=a:q2", "r04=a:q2", "r06=a:q2", "r08=a:q2", "r12=b:s", "r18=b:s"]
    );
    // KeyOnly inside an And applies to that branch's cells only.
    let f = Filter::or([
        Filter::and([Filter::ColumnPrefix(b"p".to_vec()), Filter::KeyOnly]),
        Filter::Qualifier(CompareOp::Equal, b"q1".to_vec()),
    ]);
    let rs = rows(&db, Scan::new().range("r00", "r01").filter(f));
    assert_eq!(cols(&rs[0]), vec!["a:p1", "a:q1"]);
    assert_eq!(rs[0].cells[0].value, b"");
    assert_eq!(rs[0].cells[1].value, b"v0");
    // An And of disjoint row parts matches nothing and ends at once.
    let f = Filter::and([
        Filter::RowPrefix(b"r0".to_vec()),
        Filter::RowPrefix(b"r1".to_vec()),
    ]);
    assert!(keys(&db, Scan::new().filter(f)).is_empty());
    // An empty And lets everything through; an empty Or nothing.
    assert_eq!(keys(&db, Scan::new().filter(Filter::And(vec![]))).len(), 20);
    assert!(keys(&db, Scan::new().filter(Filter::Or(vec![]))).is_empty());
}

#[test]
fn batch_splits_rows_and_limit_counts_rows() {
    let dir = tempfile::tempdir().unwrap();
    let db = setup(dir.path());
    // Row 0 has a:p1, a:q1, a:q2 (3 cells); row 1 has a:q1, b:s (2 cells).
    let rs = rows(&db, Scan::new().range("r00", "r02").batch(2));
    let shape: Vec<(String, usize)> = rs
        .iter()
        .map(|r| (String::from_utf8_lossy(&r.key).into_owned(), r.cells.len()))
        .collect();
    assert_eq!(
        shape,
        vec![("r00".into(), 2), ("r00".into(), 1), ("r01".into(), 2)]
    );
    let rs = rows(&db, Scan::new().range("r00", "r02").batch(1));
    assert_eq!(rs.len(), 5);
    // The chunks together are the row.
    let whole = rows(&db, Scan::new().range("r00", "r01"));
    let joined: Vec<_> = rows(&db, Scan::new().range("r00", "r01").batch(1))
        .into_iter()
        .flat_map(|r| r.cells)
        .collect();
    assert_eq!(whole[0].cells, joined);
    // limit counts rows: two rows come back as five chunks at batch 1 (3 + 2 cells).
    let rs = rows(&db, Scan::new().batch(1).limit(2));
    assert_eq!(rs.len(), 5);
    assert_eq!(rs.last().map(|r| r.key.clone()), Some(b"r01".to_vec()));
}

#[test]
fn filter_with_limit_and_batch() {
    let dir = tempfile::tempdir().unwrap();
    let db = setup(dir.path());
    let f = Filter::SingleColumnValue {
        family: "b".into(),
        qualifier: b"s".to_vec(),
        op: CompareOp::Equal,
        value: b"off".to_vec(),
        filter_if_missing: true,
    };
    assert_eq!(
        keys(&db, Scan::new().filter(f.clone()).limit(3)),
        names(&[1, 2, 4])
    );
    let rs = rows(&db, Scan::new().filter(f).limit(2).batch(2));
    let shape: Vec<(String, usize)> = rs
        .iter()
        .map(|r| (String::from_utf8_lossy(&r.key).into_owned(), r.cells.len()))
        .collect();
    // r01: a:q1, b:s; r02: a:p1, a:q1, a:q2, b:s.
    assert_eq!(
        shape,
        vec![("r01".into(), 2), ("r02".into(), 2), ("r02".into(), 2)]
    );
}

#[test]
fn get_with_filter() {
    let dir = tempfile::tempdir().unwrap();
    let db = setup(dir.path());
    let t = db.table("t").unwrap();
    let g = |f: Filter| t.get(&Get::new("r04").filter(f)).unwrap();
    assert!(g(Filter::RowPrefix(b"r1".to_vec())).is_none());
    let r = g(Filter::RowPrefix(b"r0".to_vec())).unwrap();
    assert_eq!(r.cells.len(), 4);
    let r = g(Filter::ColumnPrefix(b"q".to_vec())).unwrap();
    assert_eq!(cols(&r), vec!["a:q1", "a:q2"]);
    assert_eq!(r.value("a", "q1"), Some(&b"new4"[..]));
    assert!(g(Filter::Value(CompareOp::Equal, b"nothing".to_vec())).is_none());
    let r = g(Filter::and([Filter::FirstKeyOnly, Filter::KeyOnly])).unwrap();
    assert_eq!(cols(&r), vec!["a:p1"]);
    assert!(r.cells[0].value.is_empty());
    let scv = |v: &str| Filter::SingleColumnValue {
        family: "b".into(),
        qualifier: b"s".to_vec(),
        op: CompareOp::Equal,
        value: v.as_bytes().to_vec(),
        filter_if_missing: true,
    };
    assert!(g(scv("on")).is_none());
    assert_eq!(g(scv("off")).map(|r| r.cells.len()), Some(4));
    assert!(g(Filter::Page(0)).is_none());
}

#[test]
fn row_ranges_over_10k_rows_seek_past_what_they_skip() {
    let dir = tempfile::tempdir().unwrap();
    let db = open_default(dir.path());
    db.create_table(table_desc("t", &["a"], 1)).unwrap();
    let t = db.table("t").unwrap();
    // Half the rows in a file, half in the memstore, interleaved.
    for pass in 0..2u32 {
        for i in (0..10_000u32).filter(|i| i % 2 == pass) {
            t.put(
                Put::new(format!("k{i:05}"))
                    .add_at("a", "x", 1, "v")
                    .add_at("a", "y", 1, "w"),
            )
            .unwrap();
        }
        if pass == 0 {
            db.flush().unwrap();
        }
    }
    let f = Filter::RowRanges(vec![
        (b"k09990".to_vec(), Vec::new()),
        (b"k00100".to_vec(), b"k00110".to_vec()),
        (b"k05000".to_vec(), b"k05005".to_vec()),
    ]);
    let mut it = t.scan(Scan::new().filter(f)).unwrap();
    let got: Vec<String> = it
        .by_ref()
        .map(|r| String::from_utf8(r.unwrap().key).unwrap())
        .collect();
    let want: Vec<String> = (100..110)
        .chain(5000..5005)
        .chain(9990..10_000)
        .map(|i| format!("k{i:05}"))
        .collect();
    assert_eq!(got, want);
    // 25 rows of 2 cells are resolved, plus at most the first cell of each row that made the
    // scan seek (one per gap); a full scan would read 20,000.
    let read = it.cells_read();
    assert_eq!(read, 25 * 2, "cells read: {read}");
    let mut all = t.scan(Scan::new()).unwrap();
    assert_eq!(all.by_ref().count(), 10_000);
    assert_eq!(all.cells_read(), 20_000);
}

#[test]
fn filters_see_deletes_and_raw_markers() {
    let dir = tempfile::tempdir().unwrap();
    let db = setup(dir.path());
    let t = db.table("t").unwrap();
    // r01's b:s (`off`, flushed) is deleted in the memstore: filters see it gone.
    t.delete(cellar::Delete::new("r01").column_at("b", "s", 1))
        .unwrap();
    let f = Filter::and([
        Filter::RowPrefix(b"r01".to_vec()),
        Filter::Value(CompareOp::Equal, b"off".to_vec()),
    ]);
    assert!(keys(&db, Scan::new().filter(f.clone())).is_empty());
    // A raw scan returns the marker and the masked put; the Value filter keeps the put only.
    let rs = rows(&db, Scan::new().raw().filter(f));
    assert_eq!(rs.len(), 1);
    assert_eq!(cols(&rs[0]), vec!["b:s"]);
    assert_eq!(rs[0].cells[0].cell_type, cellar::format::CellType::Put);
    let f = Filter::and([
        Filter::RowPrefix(b"r01".to_vec()),
        Filter::Qualifier(CompareOp::Equal, b"s".to_vec()),
    ]);
    let rs = rows(&db, Scan::new().raw().filter(f));
    assert_eq!(rs[0].cells.len(), 2, "marker and put");
    // SingleColumnValue only sees columns the read selects: unselected means missing.
    let scv = Filter::SingleColumnValue {
        family: "b".into(),
        qualifier: b"s".to_vec(),
        op: CompareOp::Equal,
        value: b"on".to_vec(),
        filter_if_missing: true,
    };
    assert!(keys(&db, Scan::new().family("a").filter(scv)).is_empty());
}
