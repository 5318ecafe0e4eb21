//! `Table::explain` against `Table::get`: over random histories of puts and every kind of
//! delete, spread across memstores and flushed files, in families with each versioning mode,
//! the cells explain marks returned are exactly the row the Get returns, every masked put names
//! a marker that can mask it, and the sources are reported with the reasons a Get skips them.

use std::sync::Arc;
use std::time::Duration;

use cellar::format::CellType;
use cellar::{
    Db, Delete, FamilyDescriptor, Filter, Get, KeepDeletedCells, ManualClock, Options, Put,
    SourceDecision, SourceKind, TableDescriptor, Verdict,
};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const FAMILIES: [&str; 4] = ["classic", "nvb", "ttl", "kept"];

fn table() -> TableDescriptor {
    TableDescriptor::new("t")
        .family(FamilyDescriptor::new("classic").max_versions(2))
        .family(
            FamilyDescriptor::new("nvb")
                .max_versions(2)
                .new_version_behavior(true),
        )
        .family(
            FamilyDescriptor::new("ttl")
                .max_versions(3)
                .min_versions(1)
                .ttl(Duration::from_millis(50)),
        )
        .family(
            FamilyDescriptor::new("kept")
                .max_versions(3)
                .keep_deleted_cells(KeepDeletedCells::True),
        )
}

#[test]
fn returned_cells_are_the_get_and_masks_name_their_marker() {
    let clock = Arc::new(ManualClock::new(1_000));
    let dir = tempfile::tempdir().unwrap();
    // Compactions run only when the test asks (`wait_for_compactions` runs them inline): a
    // background one between `explain` and `get` may purge markers and so change the answer
    // (SPEC.md §20.2, "Results that depend on compaction timing", example 1).
    let mut opts = Options {
        clock: clock.clone(),
        ..Options::default()
    };
    opts.compaction.threads = 0;
    let db = Db::open(dir.path(), opts).unwrap();
    db.create_table(table()).unwrap();
    let t = db.table("t").unwrap();
    let mut rng = StdRng::seed_from_u64(7);
    let (mut masked, mut returned, mut checked, mut filtered) = (0, 0, 0, 0);
    for round in 0..6 {
        for _ in 0..150 {
            let row = format!("r{}", rng.random_range(0..6));
            let fam = FAMILIES[rng.random_range(0..4usize)];
            let q = format!("q{}", rng.random_range(0..3));
            let ts: u64 = 990 + rng.random_range(0..40u64) + round * 10;
            match rng.random_range(0..10) {
                0 => t.delete(Delete::new(row.as_str()).column_at(fam, q, ts)),
                1 => t.delete(Delete::new(row.as_str()).columns_at(fam, q, ts)),
                2 => t.delete(Delete::new(row.as_str()).family_at(fam, ts)),
                3 => t.delete(Delete::new(row.as_str()).family_version(fam, ts)),
                _ => t.put(Put::new(row.as_str()).add_at(fam, q, ts, format!("v{ts}"))),
            }
            .unwrap();
        }
        if round % 2 == 0 {
            db.flush().unwrap();
        }
        if round == 3 {
            // The compactions due by now run here: later Gets read their outputs.
            db.wait_for_compactions().unwrap();
        }
        clock.advance(15);
        for r in 0..7 {
            let row = format!("r{r}");
            let gets = [
                Get::new(row.as_str()),
                Get::new(row.as_str()).all_versions(),
                Get::new(row.as_str()).max_versions(2).family("nvb"),
                Get::new(row.as_str())
                    .column("classic", "q1")
                    .all_versions(),
                Get::new(row.as_str()).time_range(0, 1_010).all_versions(),
                Get::new(row.as_str()).timestamp(1_000),
                Get::new(row.as_str())
                    .all_versions()
                    .filter(Filter::ColumnPrefix(b"q1".to_vec())),
                Get::new(row.as_str())
                    .all_versions()
                    .filter(Filter::KeyOnly),
            ];
            for get in gets {
                let e = t.explain(&get).unwrap();
                let got = t.get(&get).unwrap();
                assert_eq!(e.row, got, "{get:?}");
                // The returned cells, less those the filter removed; KeyOnly empties values.
                let key_only = matches!(get.filter, Some(Filter::KeyOnly));
                let included: Vec<_> = e
                    .cells
                    .iter()
                    .filter(|c| c.verdict == Verdict::Include && !c.filtered)
                    .map(|c| {
                        let mut cell = c.cell.clone();
                        if key_only {
                            cell.value.clear();
                        }
                        cell
                    })
                    .collect();
                let want = got.map(|r| r.cells().to_vec()).unwrap_or_default();
                assert_eq!(included, want, "{get:?}");
                filtered += e.cells.iter().filter(|c| c.filtered).count();
                if get.filter.is_none() || key_only {
                    assert!(e.cells.iter().all(|c| !c.filtered), "{get:?}");
                }
                returned += included.len();
                checked += 1;
                for (i, c) in e.cells.iter().enumerate() {
                    assert!(c.source < e.sources.len());
                    if c.verdict != Verdict::Masked {
                        assert_eq!(c.masked_by, None);
                        continue;
                    }
                    masked += 1;
                    let m = c.masked_by.expect("a masked put names its marker");
                    assert!(m < i, "the marker comes before the put in key order");
                    let marker = &e.cells[m];
                    assert_eq!(marker.cell.family, c.cell.family);
                    let ts_ok = match marker.cell.cell_type {
                        CellType::Delete | CellType::DeleteFamilyVersion => {
                            marker.cell.timestamp == c.cell.timestamp
                        }
                        CellType::DeleteColumn | CellType::DeleteFamily => {
                            marker.cell.timestamp >= c.cell.timestamp
                        }
                        CellType::Put => false,
                    };
                    assert!(ts_ok, "{marker:?} cannot mask {c:?}");
                }
            }
        }
    }
    // The histories exercised what the test checks.
    assert!(masked > 50, "{masked} masked puts");
    assert!(returned > 100, "{returned} returned cells");
    assert!(filtered > 20, "{filtered} cells removed by a filter");
    assert_eq!(checked, 6 * 7 * 8);
}

#[test]
fn sources_show_why_a_file_is_skipped() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    db.create_table(TableDescriptor::new("t").family(FamilyDescriptor::new("cf")))
        .unwrap();
    let t = db.table("t").unwrap();
    // File A holds rows a..c at timestamps 10..20, file B rows m..p at 100; the memstore r.
    for (row, ts) in [("a", 10), ("c", 20)] {
        t.put(Put::new(row).add_at("cf", "q", ts, "v")).unwrap();
    }
    db.flush().unwrap();
    for row in ["m", "p"] {
        t.put(Put::new(row).add_at("cf", "q", 100, "v")).unwrap();
    }
    db.flush().unwrap();
    t.put(Put::new("r").add_at("cf", "q", 5, "v")).unwrap();
    let decisions = |get: Get| {
        let e = t.explain(&get).unwrap();
        assert_eq!(e.row, t.get(&get).unwrap());
        let mut files: Vec<_> = e
            .sources
            .iter()
            .filter_map(|s| match &s.kind {
                SourceKind::File { rows, .. } => Some((rows.0.clone(), s.decision)),
                _ => None,
            })
            .collect();
        files.sort_by(|a, b| a.0.cmp(&b.0));
        let mem = e
            .sources
            .iter()
            .find(|s| s.kind == SourceKind::ActiveMemstore)
            .map(|s| s.decision);
        (files, mem, e)
    };
    let (files, mem, e) = decisions(Get::new("c"));
    assert_eq!(
        files,
        vec![
            (b"a".to_vec(), SourceDecision::Read { cells: 1 }),
            (b"m".to_vec(), SourceDecision::KeyRange),
        ]
    );
    assert_eq!(mem, Some(SourceDecision::Read { cells: 0 }));
    assert_eq!(e.cells.len(), 1);
    assert_eq!(e.cells[0].verdict, Verdict::Include);
    // Inside A's key range but not in it: its bloom filter says so.
    let (files, _, e) = decisions(Get::new("b"));
    assert_eq!(files[0], (b"a".to_vec(), SourceDecision::Bloom));
    assert!(e.row.is_none() && e.cells.is_empty());
    // A time range after A's cells skips it by its time range.
    let (files, _, _) = decisions(Get::new("c").time_range(50, 200));
    assert_eq!(files[0], (b"a".to_vec(), SourceDecision::TimeRange));
    // The memstore's cell, seen from the active memstore.
    let (_, mem, e) = decisions(Get::new("r"));
    assert_eq!(mem, Some(SourceDecision::Read { cells: 1 }));
    assert_eq!(
        e.sources[e.cells[0].source].kind,
        SourceKind::ActiveMemstore
    );
}
