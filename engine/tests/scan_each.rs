//! `Table::scan_each` hands a callback exactly the rows (or `batch` chunks) the scan iterator
//! returns, at one snapshot, and stops when the callback breaks. Forward scans without a filter
//! take the streaming path; reversed and filtered scans view the iterator's rows. The
//! differential test compares the two paths on random histories; this file covers what it
//! does not draw: batches, early breaks, filters, reversed scans and wide rows crossing the
//! iterator's refills. The last test holds `Table::get_view` to `Table::get`.

use std::ops::ControlFlow;

use cellar::{
    Db, Delete, FamilyDescriptor, Filter, Get, Options, Put, Row, Scan, Table, TableDescriptor,
};

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
        let owned = r.to_row();
        // The view's lookup (over packed cells, or a row of one borrowed cell) as the row's.
        for c in r.cells() {
            let q = c.qualifier;
            assert_eq!(r.value(c.family, q), owned.value(c.family, q), "{owned:?}");
            let longer = [q, b"x"].concat();
            assert_eq!(r.value(c.family, &longer), None);
            assert_eq!(r.value("zz", q), None);
        }
        out.push(owned);
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

/// Rows of one cell, which a scan over a file hands over borrowed as soon as the file's next
/// entry shows the row ended: next to rows with cells in two families (two files, so the merge
/// must see that the other file's next cell is of the same row), rows of markers alone in
/// raw scans, a memstore holding newer cells of rows on file, and limits.
#[test]
fn rows_of_one_cell_are_handed_over_whole_and_once() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    db.create_table(
        TableDescriptor::new("t")
            .family(FamilyDescriptor::new("a").max_versions(2))
            .family(FamilyDescriptor::new("bbb")),
    )
    .unwrap();
    let t = db.table("t").unwrap();
    for i in 0..2000u32 {
        let row = format!("r{i:05}");
        let p = match i % 5 {
            0 => Put::new(row.as_str()).add_at("a", "q", 10, format!("a{i}")),
            1 => Put::new(row.as_str()).add_at("bbb", "q", 10, format!("b{i}")),
            2 => Put::new(row.as_str())
                .add_at("a", "q", 10, format!("a{i}"))
                .add_at("bbb", "", 10, format!("b{i}")),
            // A marker alone (below).
            3 => Put::new(row.as_str()).add_at("bbb", "q", 10, "gone"),
            _ => Put::new(row.as_str())
                .add_at("a", "q", 10, format!("a{i}"))
                .add_at("a", "q", 9, "older"),
        };
        t.put(p).unwrap();
        if i % 5 == 3 {
            t.delete(Delete::new(row.as_str()).family_at("bbb", 20))
                .unwrap();
        }
    }
    db.flush().unwrap();
    // Newer cells in the memstore for rows on file, some of them rows of one cell there.
    for i in (0..2000u32).step_by(7) {
        let row = format!("r{i:05}");
        t.put(Put::new(row.as_str()).add_at("a", "q", 30, format!("new{i}")))
            .unwrap();
    }
    let scans = [
        Scan::new(),
        Scan::new().raw(),
        Scan::new().max_versions(2),
        Scan::new().family("bbb"),
        Scan::new().start_row("r00100").limit(33),
        Scan::new().raw().limit(17),
        Scan::new().batch(1),
    ];
    for s in scans {
        let want = iterated(&t, s.clone());
        assert!(!want.is_empty(), "{s:?} reads nothing");
        assert_eq!(streamed(&t, s.clone()), want, "{s:?}");
    }
    // A row of a marker alone in a raw scan has no value to look up.
    let mut markers = 0;
    t.scan_each(Scan::new().raw().start_row("r00003").limit(1), |r| {
        assert_eq!(r.key(), b"r00003");
        assert_eq!(r.len(), 1);
        assert_eq!(r.value("bbb", ""), None);
        markers += r
            .cells()
            .filter(|c| c.cell_type != cellar::format::CellType::Put)
            .count();
        ControlFlow::Continue(())
    })
    .unwrap();
    assert_eq!(markers, 1);
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

/// Scans and Gets over a level of many files. A scan reads each level below 0 through one cursor that walks
/// its files in key order, opening each when the scan reaches it. Seeks land inside, between
/// and past files, in both directions, with level-0 files and a memstore over the level, and a
/// time range skips whole files.
#[test]
fn scans_cross_the_files_of_a_level_in_both_directions() {
    let dir = tempfile::tempdir().unwrap();
    let mut o = Options::default().write_buffer_size(16 << 10);
    o.compaction.target_file_size = 4 << 10;
    o.compaction.max_bytes_for_level_base = 16 << 10;
    o.compaction.level0_file_num_compaction_trigger = 2;
    o.compaction.threads = 0;
    let db = Db::open(dir.path(), o).unwrap();
    db.create_table(TableDescriptor::new("t").family(FamilyDescriptor::new("f").block_size(1024)))
        .unwrap();
    let t = db.table("t").unwrap();
    // Each row once, at its own timestamp rising with the key: the compacted files then hold
    // disjoint key and time ranges. Every tenth row is rewritten later (level 0 or memstore).
    let n = 6000u64;
    let mut model = std::collections::BTreeMap::new();
    for i in 0..n {
        let row = format!("r{:05}", i * 2);
        let v = format!("v{i}");
        t.put(Put::new(row.as_str()).add_at("f", "q", 1000 + i, v.as_str()))
            .unwrap();
        model.insert(row, (1000 + i, v));
    }
    // Rows rewritten below keep their first version in the compacted files: a time range
    // around it still reads it.
    let first = model.clone();
    db.flush().unwrap();
    db.wait_for_compactions().unwrap();
    assert!(db.stats().live_files >= 10, "{:?}", db.stats().live_files);
    for i in (0..n).step_by(10) {
        let row = format!("r{:05}", i * 2);
        let v = format!("w{i}");
        t.put(Put::new(row.as_str()).add_at("f", "q", 9000 + i, v.as_str()))
            .unwrap();
        model.insert(row, (9000 + i, v));
        if i == n / 2 {
            db.flush().unwrap();
        }
    }
    let cells = |rows: Vec<Row>| -> Vec<(String, u64, String)> {
        rows.iter()
            .map(|r| {
                let c = &r.cells()[0];
                let key = String::from_utf8(r.key.clone()).unwrap();
                (
                    key,
                    c.timestamp,
                    String::from_utf8(c.value.clone()).unwrap(),
                )
            })
            .collect()
    };
    let want = |it: &mut dyn Iterator<Item = (&String, &(u64, String))>, limit: usize| {
        it.take(limit)
            .map(|(k, (ts, v))| (k.clone(), *ts, v.clone()))
            .collect::<Vec<_>>()
    };
    let all = model.iter().map(|(k, (ts, v))| (k.clone(), *ts, v.clone()));
    assert_eq!(cells(streamed(&t, Scan::new())), all.collect::<Vec<_>>());
    // Starts on a row, between two rows (odd numbers are never written), before and after all.
    for start in (0..2 * n + 2)
        .step_by(37)
        .chain([0, 1, 2 * n - 2, 2 * n - 1, 2 * n])
    {
        let s = format!("r{start:05}");
        let fwd = Scan::new().start_row(s.as_str()).limit(50);
        let exp = want(&mut model.range(s.clone()..), 50);
        assert_eq!(cells(iterated(&t, fwd.clone())), exp, "forward from {s}");
        assert_eq!(cells(streamed(&t, fwd)), exp, "streamed from {s}");
        let back = Scan::new().start_row(s.as_str()).reversed().limit(50);
        let exp = want(&mut model.range(..=s.clone()).rev(), 50);
        assert_eq!(cells(iterated(&t, back)), exp, "reversed from {s}");
    }
    // Gets find their one candidate file per level by binary search; odd rows are missing.
    for i in (0..2 * n + 2).step_by(13) {
        let row = format!("r{i:05}");
        let got = t.get(&Get::new(row.as_str())).unwrap().map(|r| {
            let c = &r.cells()[0];
            (c.timestamp, String::from_utf8(c.value.clone()).unwrap())
        });
        assert_eq!(got, model.get(&row).cloned(), "get {row}");
    }
    // A time range that only a run of the compacted files can hold: the others are skipped.
    let before = db.stats().time_skips;
    let got = cells(streamed(&t, Scan::new().time_range(1500, 1600)));
    let exp: Vec<_> = first
        .iter()
        .filter(|(_, (ts, _))| (1500..1600).contains(ts))
        .map(|(k, (ts, v))| (k.clone(), *ts, v.clone()))
        .collect();
    assert_eq!(got, exp);
    assert!(
        db.stats().time_skips > before + 5,
        "files were not skipped by time"
    );
}

/// `Table::get_view` views exactly the row `Table::get` returns: rows in a memstore, in a
/// file and in both, with versions, a family or a column selected, a time range, a filter
/// (which takes the owned path), a missing row, and the same errors.
#[test]
fn get_view_sees_what_get_returns() {
    let dir = tempfile::tempdir().unwrap();
    let (db, t) = table(dir.path());
    load(&db, &t);
    t.put(Put::new("r01499").add("b", "late", "m")).unwrap();
    let viewed = |g: &Get| t.get_view(g, |r| r.map(|r| r.to_row())).unwrap();
    let mut checked = 0;
    for i in [0u32, 5, 6, 13, 1499, 1500, 1501, 2999, 3000] {
        let row = format!("r{i:05}");
        for g in [
            Get::new(row.as_str()),
            Get::new(row.as_str()).max_versions(3),
            Get::new(row.as_str()).family("a").max_versions(2),
            Get::new(row.as_str()).column("a", "c0").max_versions(3),
            Get::new(row.as_str()).time_range(0, 101).max_versions(3),
            Get::new(row.as_str()).filter(Filter::Value(
                cellar::CompareOp::Equal,
                format!("b{i}").into_bytes(),
            )),
        ] {
            let owned = t.get(&g).unwrap();
            checked += usize::from(owned.is_some());
            assert_eq!(viewed(&g), owned, "{g:?}");
        }
    }
    assert!(checked > 30, "too few rows found: {checked}");
    assert_eq!(viewed(&Get::new("nope")), None);
    assert!(t.get_view(&Get::new("r1").family("nope"), |_| ()).is_err());
    let gone = db.table("t").unwrap();
    db.drop_table("t").unwrap();
    assert!(gone.get_view(&Get::new("r1"), |_| ()).is_err());
}
