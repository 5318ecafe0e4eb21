//! Range estimates and split points (`Table::estimate_range`, `Table::split_point`): from the
//! files' indexes, sizes that add up over adjacent ranges and grow with the rows they cover,
//! and a split row near the middle of the largest family's largest file; memstore cells
//! estimated apart, from their skip lists.

use cellar::{Db, Error, FamilyDescriptor, Options, Put, TableDescriptor};

const ROWS: u32 = 20_000;

fn key(i: u32) -> Vec<u8> {
    format!("r{i:06}").into_bytes()
}

/// Table `t`: family `big` with 200-byte values in every row, `small` with 10-byte values
/// in every tenth; flushed in four files, then compacted into one.
fn setup(dir: &std::path::Path) -> Db {
    let mut o = Options::default();
    o.compaction.threads = 0;
    let db = Db::open(dir, o).unwrap();
    db.create_table(
        TableDescriptor::new("t")
            .family(FamilyDescriptor::new("big").block_size(4096))
            .family(FamilyDescriptor::new("small")),
    )
    .unwrap();
    let t = db.table("t").unwrap();
    for i in 0..ROWS {
        let mut p = Put::new(key(i)).add("big", "q", vec![b'x'; 200]);
        if i % 10 == 0 {
            p = p.add("small", "q", vec![b's'; 10]);
        }
        t.put(p).unwrap();
        if i % (ROWS / 4) == ROWS / 4 - 1 {
            db.flush().unwrap();
        }
    }
    db
}

#[test]
fn estimates_add_up_and_follow_the_rows() {
    let d = tempfile::tempdir().unwrap();
    let db = setup(d.path());
    for compacted in [false, true] {
        if compacted {
            db.major_compact("t", None).unwrap();
        }
        let t = db.table("t").unwrap();
        let all = t.estimate_range(b"", b"").unwrap();
        assert_eq!(
            all.cells,
            u64::from(ROWS + ROWS / 10),
            "compacted {compacted}"
        );
        assert_eq!(all.files, if compacted { 2 } else { 8 });
        let sizes: u64 = db.stats().compaction.levels.iter().map(|l| l.bytes).sum();
        assert_eq!(all.bytes, sizes, "every file inside: its whole size");
        // Adjacent ranges add up to the whole, within a block per cut per file.
        let cut = key(ROWS / 3);
        let (a, b) = (
            t.estimate_range(b"", &cut).unwrap(),
            t.estimate_range(&cut, b"").unwrap(),
        );
        let slack = all.bytes / 50;
        assert!(
            (a.bytes + b.bytes).abs_diff(all.bytes) <= slack,
            "{a:?} + {b:?} against {all:?}"
        );
        // A quarter of the rows is about a quarter of the bytes and cells.
        let q = t
            .estimate_range(&key(ROWS / 2), &key(ROWS * 3 / 4))
            .unwrap();
        for (part, whole) in [(q.bytes, all.bytes), (q.cells, all.cells)] {
            let share = part as f64 / whole as f64;
            assert!((0.2..=0.3).contains(&share), "{q:?} of {all:?}");
        }
        // Nothing outside the table's rows; a start after the stop is empty.
        assert_eq!(t.estimate_range(b"s", b"").unwrap().files, 0);
        assert_eq!(t.estimate_range(b"", b"a").unwrap().files, 0);
        assert_eq!(t.estimate_range(&key(900), &key(100)).unwrap().bytes, 0);

        let split = t.split_point().unwrap().expect("a split row");
        let at: u32 = std::str::from_utf8(&split[1..]).unwrap().parse().unwrap();
        // Near the middle of the largest file of `big`: one of the four flushed quarters
        // before the compaction, every row after it.
        let span = if compacted { ROWS } else { ROWS / 4 };
        let within = at % span;
        assert!(
            (span * 45 / 100..span * 55 / 100).contains(&within),
            "split at {at}, compacted {compacted}"
        );
    }
}

/// Cells not yet flushed are estimated apart from the files, in every memstore of the range's
/// families (active and frozen), adding up over adjacent ranges; a flush moves them to the
/// files' figures.
#[test]
fn memstore_cells_are_estimated_apart() {
    let d = tempfile::tempdir().unwrap();
    let db = setup(d.path());
    let t = db.table("t").unwrap();
    let flushed = t.estimate_range(b"", b"").unwrap();
    assert_eq!((flushed.memstore_cells, flushed.memstore_bytes), (0, 0));
    // Rows past the flushed ones: 40,000 cells in `big`, 4,000 in `small`.
    let more = 40_000;
    // Explicit timestamps: the skip list's towers come from the keys' hashes, so the same
    // keys give the same estimate in every run.
    for i in ROWS..ROWS + more {
        let mut p = Put::new(key(i)).add_at("big", "q", 7, vec![b'y'; 100]);
        if i % 10 == 0 {
            p = p.add_at("small", "q", 7, vec![b's'; 10]);
        }
        t.put(p).unwrap();
    }
    let all = t.estimate_range(b"", b"").unwrap();
    assert_eq!(
        (all.bytes, all.cells, all.files),
        (flushed.bytes, flushed.cells, flushed.files)
    );
    assert_eq!(all.memstore_cells, u64::from(more + more / 10));
    assert!(all.memstore_bytes > u64::from(more) * 100, "{all:?}");
    // The first half of the new rows: about half the cells, within 5% (over three standard
    // deviations: `big`'s estimate counts 2,500 nodes of one level).
    let cut = key(ROWS + more / 2);
    let (a, b) = (
        t.estimate_range(&key(ROWS), &cut).unwrap(),
        t.estimate_range(&cut, b"").unwrap(),
    );
    let half = u64::from(more + more / 10) / 2;
    assert!(a.memstore_cells.abs_diff(half) <= half / 20, "{a:?}");
    assert_eq!(a.memstore_cells + b.memstore_cells, all.memstore_cells);
    assert_eq!(a.files, 0, "no file holds those rows");
    // Rows only the files hold: no memstore cell.
    assert_eq!(t.estimate_range(b"", &key(ROWS)).unwrap().memstore_cells, 0);
    // A flush moves them to the files.
    db.flush().unwrap();
    let after = t.estimate_range(b"", b"").unwrap();
    assert_eq!((after.memstore_cells, after.memstore_bytes), (0, 0));
    assert_eq!(after.cells, all.cells + all.memstore_cells);
}

#[test]
fn no_split_point_without_files_or_rows_to_split() {
    let d = tempfile::tempdir().unwrap();
    let db = Db::open(d.path(), Options::default()).unwrap();
    db.create_table(
        TableDescriptor::new("t").family(FamilyDescriptor::new("cf").max_versions(1000)),
    )
    .unwrap();
    let t = db.table("t").unwrap();
    assert_eq!(t.split_point().unwrap(), None);
    assert_eq!(t.estimate_range(b"", b"").unwrap().files, 0);
    // One row of many versions in many blocks: no row splits it.
    for ts in 0..2000u64 {
        t.put(Put::new("only").add_at("cf", "q", ts + 1, vec![b'v'; 100]))
            .unwrap();
    }
    db.flush().unwrap();
    assert!(t.estimate_range(b"", b"").unwrap().bytes > 100_000);
    assert_eq!(t.split_point().unwrap(), None);
    db.drop_table("t").unwrap();
    assert!(matches!(
        t.estimate_range(b"", b"").unwrap_err(),
        Error::TableNotFound(_)
    ));
    assert!(matches!(
        t.split_point().unwrap_err(),
        Error::TableNotFound(_)
    ));
}
