//! Reversed scans (HBase's `Scan.setReversed(true)`) on a real database: random data spread
//! over flushed files and the memstore, with versions and every kind of delete, read with
//! random bounds, limits, batches, raw and time-ranged reads and every filter kind. The
//! reference is the forward scan over the same rows, reversed by row (cells within a row stay
//! in cell order); edge cases and snapshot stability across refills, writes and flushes follow.

mod common;

use cellar::read::filter::{CompareOp, Filter};
use cellar::{Db, Delete, Error, FamilyDescriptor, Put, Row, Scan, TableDescriptor};
use common::open_without_compaction;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const ROWS: u32 = 300;

fn row(i: u32) -> String {
    format!("r{i:03}")
}

fn create(db: &Db) {
    db.create_table(
        TableDescriptor::new("t")
            .family(FamilyDescriptor::new("a").max_versions(3).block_size(1024))
            .family(FamilyDescriptor::new("b").max_versions(1)),
    )
    .unwrap();
}

/// Four rounds of random puts and deletes over rows `r000..r299` (more than one scan refill); the first three are flushed
/// (three files per family), the last stays in the memstore.
fn random_db(dir: &std::path::Path, seed: u64) -> Db {
    let db = open_without_compaction(dir);
    create(&db);
    let t = db.table("t").unwrap();
    let mut rng = StdRng::seed_from_u64(seed);
    for round in 0..4u64 {
        for _ in 0..500 {
            let r = row(rng.random_range(0..ROWS));
            let ts = rng.random_range(1..12u64);
            match rng.random_range(0..10) {
                0 => {
                    t.delete(Delete::new(r.as_str()).column_at(
                        "a",
                        format!("q{}", rng.random_range(0..4)),
                        ts,
                    ))
                    .unwrap();
                }
                1 => {
                    t.delete(Delete::new(r.as_str()).columns("a", "q1"))
                        .unwrap();
                }
                2 if rng.random_bool(0.3) => {
                    t.delete(Delete::new(r.as_str()).family_at("b", ts))
                        .unwrap();
                }
                3 if rng.random_bool(0.1) => {
                    t.delete(Delete::new(r.as_str())).unwrap();
                }
                _ => {
                    let mut p = Put::new(r.as_str());
                    for _ in 0..rng.random_range(1..5) {
                        let fam = if rng.random_bool(0.7) { "a" } else { "b" };
                        let q = format!("q{}", rng.random_range(0..4));
                        let v = format!("v{}", rng.random_range(0..6));
                        p = p.add_at(fam, q, ts + round, v);
                    }
                    t.put(p).unwrap();
                }
            }
        }
        if round < 3 {
            db.flush().unwrap();
        }
    }
    db
}

fn scan(db: &Db, s: Scan) -> Vec<Row> {
    db.table("t")
        .unwrap()
        .scan(s)
        .unwrap()
        .map(|r| r.unwrap())
        .collect()
}

/// The same rows as forward scan `s`, backward: its stop becomes the (exclusive unless the
/// forward stop was inclusive) start, its start the inclusive stop.
fn reverse_of(s: &Scan) -> Scan {
    let mut r = s.clone();
    r.reversed = true;
    r.prefix = None;
    r.start_row = s.stop_row.clone();
    r.exclusive_start = !s.stop_row.is_empty() && !s.inclusive_stop;
    r.stop_row = s.start_row.clone();
    r.inclusive_stop = true;
    r
}

/// Forward chunks grouped by row, the rows reversed, the first `limit` kept.
fn expected(forward: Vec<Row>, limit: Option<usize>) -> Vec<Row> {
    let mut groups: Vec<Vec<Row>> = Vec::new();
    for r in forward {
        match groups.last_mut() {
            Some(g) if g[0].key == r.key => g.push(r),
            _ => groups.push(vec![r]),
        }
    }
    groups.reverse();
    groups
        .into_iter()
        .take(limit.unwrap_or(usize::MAX))
        .flatten()
        .collect()
}

fn random_row_bound(rng: &mut StdRng) -> Vec<u8> {
    match rng.random_range(0..4) {
        0 => Vec::new(),
        // Between rows, or past the last.
        1 => format!("r{:03}x", rng.random_range(0..ROWS + 5)).into_bytes(),
        _ => row(rng.random_range(0..ROWS + 5)).into_bytes(),
    }
}

fn random_leaf(rng: &mut StdRng) -> Filter {
    let op = [
        CompareOp::Less,
        CompareOp::LessOrEqual,
        CompareOp::Equal,
        CompareOp::NotEqual,
        CompareOp::GreaterOrEqual,
        CompareOp::Greater,
    ][rng.random_range(0..6)];
    match rng.random_range(0..10) {
        0 => Filter::RowPrefix(format!("r0{}", rng.random_range(0..12)).into_bytes()),
        1 => Filter::RowRanges(
            (0..rng.random_range(0..4))
                .map(|_| {
                    let a = rng.random_range(0..ROWS + 5);
                    let b = a + rng.random_range(0..20);
                    let stop = if rng.random_bool(0.1) {
                        Vec::new()
                    } else {
                        row(b).into_bytes()
                    };
                    (row(a).into_bytes(), stop)
                })
                .collect(),
        ),
        2 => Filter::ColumnPrefix(b"q1".to_vec()),
        3 => Filter::Qualifier(op, format!("q{}", rng.random_range(0..4)).into_bytes()),
        4 => Filter::Value(op, format!("v{}", rng.random_range(0..6)).into_bytes()),
        5 => Filter::SingleColumnValue {
            family: "a".into(),
            qualifier: b"q0".to_vec(),
            op,
            value: format!("v{}", rng.random_range(0..6)).into_bytes(),
            filter_if_missing: rng.random_bool(0.5),
        },
        6 => Filter::Timestamps(
            (0..rng.random_range(1..4))
                .map(|_| rng.random_range(1..16))
                .collect(),
        ),
        7 => Filter::FirstKeyOnly,
        8 => Filter::KeyOnly,
        _ => Filter::RowPrefix(b"r1".to_vec()),
    }
}

fn random_filter(rng: &mut StdRng, depth: u32) -> Filter {
    if depth == 0 || rng.random_bool(0.5) {
        return random_leaf(rng);
    }
    let children = (0..rng.random_range(1..4))
        .map(|_| random_filter(rng, depth - 1))
        .collect();
    if rng.random_bool(0.5) {
        Filter::And(children)
    } else {
        Filter::Or(children)
    }
}

/// A random forward scan (no limit, no Page) and the limit and page size to add.
fn random_scan(rng: &mut StdRng) -> (Scan, Option<usize>, Option<usize>) {
    let mut s = Scan::new();
    let (a, b) = (random_row_bound(rng), random_row_bound(rng));
    let (start, stop) = if b.is_empty() || (!a.is_empty() && a <= b) {
        (a, b)
    } else {
        (b, a)
    };
    s = s.range(start, stop).inclusive_stop(rng.random_bool(0.3));
    if rng.random_bool(0.1) {
        s = s.prefix(format!("r0{}", rng.random_range(0..12)));
    }
    match rng.random_range(0..4) {
        0 => s = s.family("a"),
        1 => s = s.column("a", "q0").column("b", "q2"),
        _ => {}
    }
    if rng.random_bool(0.3) {
        s = s.max_versions(rng.random_range(1..4));
    }
    if rng.random_bool(0.2) {
        let lo = rng.random_range(0..8);
        s = s.time_range(lo, lo + rng.random_range(1..8));
    }
    if rng.random_bool(0.15) {
        s = s.raw();
    }
    if rng.random_bool(0.2) {
        s = s.batch(rng.random_range(1..4));
    }
    if rng.random_bool(0.6) {
        s = s.filter(random_filter(rng, 2));
    }
    let limit = rng.random_bool(0.2).then(|| rng.random_range(0..10));
    let page = rng.random_bool(0.15).then(|| rng.random_range(0..10));
    (s, limit, page)
}

#[test]
fn reversed_equals_forward_reversed_on_random_data() {
    for seed in 0..3u64 {
        let dir = tempfile::tempdir().unwrap();
        let db = random_db(dir.path(), seed);
        let mut rng = StdRng::seed_from_u64(seed + 100);
        let mut nonempty = 0;
        for case in 0..200 {
            let (fwd, limit, page) = random_scan(&mut rng);
            let forward = scan(&db, fwd.clone());
            let mut rev = reverse_of(&fwd);
            if let Some(n) = limit {
                rev = rev.limit(n);
            }
            let mut keep = limit;
            if let Some(n) = page {
                // Page counts accepted rows in the order they are returned.
                rev.filter = Some(match rev.filter.take() {
                    Some(f) => Filter::and([f, Filter::Page(n)]),
                    None => Filter::Page(n),
                });
                keep = Some(keep.map_or(n, |l| l.min(n)));
            }
            let got = scan(&db, rev.clone());
            nonempty += usize::from(!got.is_empty());
            assert_eq!(
                got,
                expected(forward, keep),
                "seed {seed} case {case}: {rev:?}"
            );
        }
        // The cases are not mostly vacuous.
        assert!(nonempty > 100, "only {nonempty} non-empty results");
    }
}

#[test]
fn whole_table_and_snapshot_of_a_random_db() {
    let dir = tempfile::tempdir().unwrap();
    let db = random_db(dir.path(), 9);
    let snap = db.snapshot();
    let forward = scan(&db, Scan::new().all_versions().at(&snap));
    assert!(forward.len() > 100, "{} rows", forward.len());
    // Later writes and a flush change nothing for the snapshot.
    let t = db.table("t").unwrap();
    t.delete(Delete::new("r050")).unwrap();
    t.put(Put::new("r050x").add_at("a", "q", 1, "v")).unwrap();
    db.flush().unwrap();
    let rev = scan(&db, Scan::new().all_versions().at(&snap).reversed());
    assert_eq!(rev, expected(forward, None));
    let raw_fwd = scan(&db, Scan::new().raw());
    assert_eq!(
        scan(&db, Scan::new().raw().reversed()),
        expected(raw_fwd, None)
    );
}

/// Rows `r0`..`r9` (one cell each) in a fresh database, half flushed.
fn ten_rows(dir: &std::path::Path) -> Db {
    let db = open_without_compaction(dir);
    create(&db);
    let t = db.table("t").unwrap();
    for i in 0..10 {
        t.put(Put::new(format!("r{i}")).add_at("a", "q", 1, format!("v{i}")))
            .unwrap();
        if i == 4 {
            db.flush().unwrap();
        }
    }
    db
}

fn keys(db: &Db, s: Scan) -> Vec<String> {
    scan(db, s)
        .into_iter()
        .map(|r| String::from_utf8(r.key).unwrap())
        .collect()
}

fn names(v: &[u32]) -> Vec<String> {
    v.iter().map(|i| format!("r{i}")).collect()
}

#[test]
fn bounds_and_edge_cases() {
    let dir = tempfile::tempdir().unwrap();
    let empty = open_without_compaction(dir.path());
    create(&empty);
    assert!(keys(&empty, Scan::new().reversed()).is_empty());
    assert!(keys(&empty, Scan::new().start_row("m").reversed()).is_empty());
    drop(empty);

    let dir = tempfile::tempdir().unwrap();
    let db = ten_rows(dir.path());
    let rev = || Scan::new().reversed();
    assert_eq!(keys(&db, rev()), names(&[9, 8, 7, 6, 5, 4, 3, 2, 1, 0]));
    // The start is inclusive, and may lie beyond the last row or between rows.
    assert_eq!(keys(&db, rev().start_row("r7").limit(3)), names(&[7, 6, 5]));
    assert_eq!(keys(&db, rev().start_row("zzz").limit(2)), names(&[9, 8]));
    assert_eq!(keys(&db, rev().start_row("r4x").limit(2)), names(&[4, 3]));
    assert_eq!(keys(&db, rev().start_row("a")), Vec::<String>::new());
    assert_eq!(
        keys(&db, rev().start_row("r7").exclusive_start(true).limit(2)),
        names(&[6, 5])
    );
    // The stop is exclusive unless inclusive_stop.
    assert_eq!(keys(&db, rev().range("r7", "r4")), names(&[7, 6, 5]));
    assert_eq!(
        keys(&db, rev().range("r7", "r4").inclusive_stop(true)),
        names(&[7, 6, 5, 4])
    );
    assert_eq!(keys(&db, rev().range("r3", "r2x")), names(&[3]));
    assert_eq!(keys(&db, rev().stop_row("r7")), names(&[9, 8]));
    // Start equal to stop: the one row when the stop is inclusive, nothing otherwise.
    assert_eq!(
        keys(&db, rev().range("r5", "r5").inclusive_stop(true)),
        names(&[5])
    );
    assert!(keys(&db, rev().range("r5", "r5")).is_empty());
    // A single row.
    assert_eq!(keys(&db, rev().prefix("r3")), names(&[3]));
    // A stop after the start is refused, as a forward start after its stop is.
    let t = db.table("t").unwrap();
    let err = t.scan(rev().range("r2", "r5")).unwrap_err();
    assert!(matches!(err, Error::InvalidArgument(_)), "{err:?}");
    assert!(t.scan(Scan::new().range("r5", "r2")).is_err());
}

#[test]
fn prefix_scans_backward_in_either_builder_order() {
    let dir = tempfile::tempdir().unwrap();
    let db = open_without_compaction(dir.path());
    create(&db);
    let t = db.table("t").unwrap();
    for r in ["a", "ab", "ab\x00", "abc", "abz", "ab\u{7f}", "ac", "b"] {
        t.put(Put::new(r).add_at("a", "q", 1, "v")).unwrap();
    }
    t.put(Put::new(b"a\xff".to_vec()).add_at("a", "q", 1, "v"))
        .unwrap();
    t.put(Put::new(b"a\xff\x01".to_vec()).add_at("a", "q", 1, "v"))
        .unwrap();
    let fwd = keys(&db, Scan::new().prefix("ab"));
    let mut want = fwd.clone();
    want.reverse();
    assert_eq!(want.len(), 5);
    assert_eq!(keys(&db, Scan::new().prefix("ab").reversed()), want);
    assert_eq!(keys(&db, Scan::new().reversed().prefix("ab")), want);
    // A prefix ending in 0xff, and the empty prefix (the whole table).
    let rows = |s: Scan| -> Vec<Vec<u8>> { scan(&db, s).into_iter().map(|r| r.key).collect() };
    assert_eq!(
        rows(Scan::new().prefix(b"a\xff".to_vec()).reversed()),
        vec![b"a\xff\x01".to_vec(), b"a\xff".to_vec()]
    );
    assert_eq!(rows(Scan::new().prefix("").reversed()).len(), 10);
    // A bound set after the prefix replaces it (the other bound stays).
    assert_eq!(
        keys(&db, Scan::new().prefix("ab").reversed().start_row("abc")),
        vec!["abc", "ab\0", "ab"]
    );
    let err = db
        .table("t")
        .unwrap()
        .scan(Scan::new().prefix("ab").start_row("abc").reversed())
        .unwrap_err();
    assert!(matches!(err, Error::InvalidArgument(_)), "{err:?}");
}

#[test]
fn row_key_filters_seek_backward() {
    let dir = tempfile::tempdir().unwrap();
    let db = open_without_compaction(dir.path());
    create(&db);
    let t = db.table("t").unwrap();
    for i in 0..1000u32 {
        t.put(Put::new(format!("row{i:04}")).add_at("a", "q", 1, "v"))
            .unwrap();
        if i % 300 == 299 {
            db.flush().unwrap();
        }
    }
    let ranges = Filter::RowRanges(vec![
        (b"row0010".to_vec(), b"row0013".to_vec()),
        (b"row0500".to_vec(), b"row0502".to_vec()),
        (b"row0990".to_vec(), b"row0991".to_vec()),
    ]);
    let mut it = t.scan(Scan::new().reversed().filter(ranges)).unwrap();
    let got: Vec<String> = it
        .by_ref()
        .map(|r| String::from_utf8(r.unwrap().key).unwrap())
        .collect();
    assert_eq!(
        got,
        vec!["row0990", "row0501", "row0500", "row0012", "row0011", "row0010"]
    );
    // The rows between the ranges were sought past, not read.
    assert!(it.cells_read() < 20, "read {} cells", it.cells_read());

    let mut it = t
        .scan(
            Scan::new()
                .reversed()
                .filter(Filter::RowPrefix(b"row07".to_vec())),
        )
        .unwrap();
    assert_eq!(it.by_ref().count(), 100);
    assert!(it.cells_read() < 110, "read {} cells", it.cells_read());

    // Page counts rows in the order returned; over several refills.
    let got: Vec<String> = t
        .scan(Scan::new().reversed().filter(Filter::Page(300)))
        .unwrap()
        .map(|r| String::from_utf8(r.unwrap().key).unwrap())
        .collect();
    assert_eq!(got.len(), 300);
    assert_eq!(got.first().map(String::as_str), Some("row0999"));
    assert_eq!(got.last().map(String::as_str), Some("row0700"));
}

#[test]
fn batch_chunks_keep_cell_order_within_a_row() {
    let dir = tempfile::tempdir().unwrap();
    let db = ten_rows(dir.path());
    let t = db.table("t").unwrap();
    for q in ["a", "b", "c", "d", "e"] {
        t.put(Put::new("r3").add_at("b", q, 2, q)).unwrap();
    }
    db.flush().unwrap();
    t.put(Put::new("r3").add_at("b", "c", 3, "c3")).unwrap();
    let got = scan(&db, Scan::new().reversed().range("r4", "r2").batch(2));
    let shape: Vec<(String, Vec<String>)> = got
        .iter()
        .map(|r| {
            (
                String::from_utf8(r.key.clone()).unwrap(),
                r.cells
                    .iter()
                    .map(|c| format!("{}:{}", c.family, String::from_utf8_lossy(&c.value)))
                    .collect(),
            )
        })
        .collect();
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    assert_eq!(
        shape,
        vec![
            ("r4".into(), s(&["a:v4"])),
            ("r3".into(), s(&["a:v3", "b:a"])),
            ("r3".into(), s(&["b:b", "b:c3"])),
            ("r3".into(), s(&["b:d", "b:e"])),
        ]
    );
    // limit counts rows: the chunks of the last row returned all come.
    assert_eq!(
        scan(
            &db,
            Scan::new().reversed().start_row("r3").batch(2).limit(1)
        )
        .len(),
        3
    );
}

#[test]
fn a_reversed_scan_keeps_its_snapshot_across_refills_writes_and_flushes() {
    let dir = tempfile::tempdir().unwrap();
    let db = open_without_compaction(dir.path());
    create(&db);
    let t = db.table("t").unwrap();
    for i in 0..700u32 {
        t.put(Put::new(format!("row{i:04}")).add_at("a", "q", 1, "v"))
            .unwrap();
        if i == 350 {
            db.flush().unwrap();
        }
    }
    // More rows than one refill, so the scan re-seeks while writes land behind and ahead.
    let mut it = t.scan(Scan::new().reversed()).unwrap();
    let first = it.next().unwrap().unwrap();
    assert_eq!(first.key, b"row0699");
    for i in 0..700u32 {
        t.put(Put::new(format!("row{i:04}x")).add_at("a", "q", 1, "later"))
            .unwrap();
        if i % 7 == 0 {
            t.delete(Delete::new(format!("row{i:04}"))).unwrap();
        }
        if i == 400 {
            db.flush().unwrap();
        }
    }
    db.flush().unwrap();
    let rest: Vec<Vec<u8>> = it.map(|r| r.unwrap().key).collect();
    assert_eq!(rest.len(), 699, "the scan saw writes made after it started");
    assert!(rest.iter().all(|k| !k.ends_with(b"x")));
    assert!(rest.windows(2).all(|w| w[0] > w[1]));
    assert_eq!(rest.last().map(Vec::as_slice), Some(&b"row0000"[..]));
}
