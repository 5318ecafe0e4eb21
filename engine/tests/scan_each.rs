//! `Table::scan_each` hands a callback exactly the rows (or `batch` chunks) the scan iterator
//! returns, at one snapshot, and stops when the callback breaks. Forward scans without a filter
//! take the streaming path; reversed and filtered scans view the iterator's rows. The
//! differential test compares the two paths on random histories; this file covers what it
//! does not draw: batches, early breaks, filters, reversed scans and wide rows crossing the
//! iterator's refills.

use std::ops::ControlFlow;

use cellar::{Db, FamilyDescriptor, Filter, Options, Put, Row, Scan, Table, TableDescriptor};

fn table(dir: &std::path::Path) -> (Db, Table) {
    let db = Db::open(dir, Options::default()).unwrap();
    db.create_table(
        TableDescriptor::new("t")
            .family(FamilyDescriptor::new("a").max_versions(3))
            .family(FamilyDescriptor::new("b")),
    )
    .unwrap();
    let t = db.table("t").unwrap();
    (db, t)
}

fn iterated(t: &Table, s: Scan) -> Vec<Row> {
    t.scan(s).unwrap().map(|r| r.unwrap()).collect()
}

fn streamed(t: &Table, s: Scan) -> Vec<Row> {
    let mut out = Vec::new();
    t.scan_each(s, |r| {
        assert!(!r.is_empty());
        assert_eq!(r.cells().len(), r.len());
        out.push(r.to_row());
        ControlFlow::Continue(())
    })
    .unwrap();
    out
}

/// 3000 rows (more than one refill of the iterator), a few with many versions and columns,
/// half of them flushed so the merge has a file and a memstore.
fn load(db: &Db, t: &Table) {
    for i in 0..3000u32 {
        let row = format!("r{i:05}");
        let mut p = Put::new(row.as_str()).add("b", "q", format!("b{i}"));
        for v in 0..(i % 7) {
            p = p.add_at("a", format!("c{v}"), 100 + u64::from(v), format!("{i}.{v}"));
        }
        t.put(p).unwrap();
        if i % 5 == 0 {
            t.put(Put::new(row.as_str()).add_at("a", "c0", 50, "old"))
                .unwrap();
        }
        if i == 1500 {
            db.flush().unwrap();
        }
    }
}

#[test]
fn streamed_rows_equal_the_iterators_for_every_shape_of_scan() {
    let dir = tempfile::tempdir().unwrap();
    let (db, t) = table(dir.path());
    load(&db, &t);
    let scans = [
        Scan::new(),
        Scan::new().start_row("r00100").stop_row("r02500"),
        Scan::new().start_row("r00100").limit(37),
        Scan::new().limit(1),
        Scan::new().prefix("r012"),
        Scan::new().family("a").max_versions(2),
        Scan::new().column("b", "q"),
        Scan::new().time_range(0, 101),
        Scan::new().batch(2),
        Scan::new().batch(2).limit(5),
        Scan::new().raw(),
        // The iterator's own rows, viewed.
        Scan::new().reversed().limit(50),
        Scan::new().filter(Filter::RowPrefix(b"r020".to_vec())),
    ];
    for s in scans {
        let want = iterated(&t, s.clone());
        assert!(!want.is_empty(), "{s:?} reads nothing");
        assert_eq!(streamed(&t, s.clone()), want, "{s:?}");
    }
}

#[test]
fn a_break_stops_the_scan_and_views_borrow_the_cells() {
    let dir = tempfile::tempdir().unwrap();
    let (db, t) = table(dir.path());
    load(&db, &t);
    let mut seen = Vec::new();
    t.scan_each(Scan::new().start_row("r00010"), |r| {
        assert_eq!(r.value("b", "q"), r.to_row().value("b", "q"));
        let c = r.cell(r.len() - 1).unwrap();
        assert_eq!((c.row, c.family, c.qualifier), (r.key(), "b", &b"q"[..]));
        seen.push(String::from_utf8(r.key().to_vec()).unwrap());
        if seen.len() == 3 {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        }
    })
    .unwrap();
    assert_eq!(seen, ["r00010", "r00011", "r00012"]);
    let mut n = 0;
    t.scan_each(Scan::new().limit(0), |_| {
        n += 1;
        ControlFlow::Continue(())
    })
    .unwrap();
    assert_eq!(n, 0);
}

#[test]
fn a_missing_table_or_family_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let (db, t) = table(dir.path());
    let never = |_: &cellar::RowView<'_>| -> ControlFlow<()> { panic!("no row expected") };
    assert!(t.scan_each(Scan::new().family("nope"), never).is_err());
    let gone = db.table("t").unwrap();
    db.drop_table("t").unwrap();
    assert!(gone.scan_each(Scan::new(), never).is_err());
}
