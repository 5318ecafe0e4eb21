//! Edge cases of the read semantics beyond the core HBase cases of `conformance_hbase.rs`:
//! deletes without timestamps, MIN_VERSIONS with deletes and time ranges, NEW_VERSION_BEHAVIOR
//! with time ranges, equal coordinates inside one batch, results across flush and reopen, scan
//! batching, snapshots and a few filters. Same conventions: explicit families, explicit
//! timestamps, every field of every cell asserted.

mod conformance_common;

use std::time::Duration;

use cellar::types::now_ms;
use cellar::{
    CheckAndMutate, Db, Delete, FamilyDescriptor, Filter, Get, KeepDeletedCells, Put, RowMutations,
    Scan, WriteBatch, WriteOptions,
};
use conformance_common::{env, get, opts, put, scan, scan_keys, scan_rows, v};

fn fam(name: &str, versions: u32) -> FamilyDescriptor {
    FamilyDescriptor::new(name).max_versions(versions)
}

#[test]
fn delete_without_timestamp_and_no_version_takes_the_current_time() {
    let e = env(vec![fam("cf", 10)]);
    let before = now_ms();
    e.t.delete(Delete::new("r").column("cf", "q")).unwrap();
    let after = now_ms();
    let raw = scan_rows(&e.t, Scan::new().raw());
    assert_eq!(raw.len(), 1);
    assert_eq!(raw[0].cells.len(), 1);
    let ts = raw[0].cells[0].timestamp;
    assert!(before <= ts && ts <= after, "{before} <= {ts} <= {after}");
    // It masks exactly that timestamp: an older put shows.
    put(&e.t, "r", "cf", "q", ts - 1, "older");
    assert_eq!(
        get(&e.t, &Get::new("r")),
        vec![format!("r/cf:q@{}=older", ts - 1)]
    );
}

#[test]
fn repeated_delete_without_timestamp_walks_down_the_versions() {
    let e = env(vec![fam("cf", 10)]);
    for ts in [1, 2, 3] {
        put(&e.t, "r", "cf", "q", ts, &format!("v{ts}"));
    }
    e.t.delete(Delete::new("r").column("cf", "q")).unwrap();
    e.db.flush().unwrap();
    e.t.delete(Delete::new("r").column("cf", "q")).unwrap();
    assert_eq!(
        get(&e.t, &Get::new("r").all_versions()),
        v(&["r/cf:q@1=v1"])
    );
    e.t.delete(Delete::new("r").column("cf", "q")).unwrap();
    assert_eq!(get(&e.t, &Get::new("r").all_versions()), v(&[]));
}

#[test]
fn nvb_delete_without_timestamp_deletes_the_newest() {
    let e = env(vec![fam("cf", 10).new_version_behavior(true)]);
    put(&e.t, "r", "cf", "q", 1, "v1");
    put(&e.t, "r", "cf", "q", 2, "v2");
    e.t.delete(Delete::new("r").column("cf", "q")).unwrap();
    assert_eq!(
        get(&e.t, &Get::new("r").all_versions()),
        v(&["r/cf:q@1=v1"])
    );
}

#[test]
fn nvb_versions_apply_regardless_of_time_range() {
    // SPEC §13: NEW_VERSION_BEHAVIOR applies the family's VERSIONS before the time range
    // (what compaction keeps); classic applies it after (the conformance_hbase case).
    let e = env(vec![fam("cf", 1).new_version_behavior(true)]);
    put(&e.t, "r", "cf", "q", 1, "v1");
    put(&e.t, "r", "cf", "q", 2, "v2");
    assert_eq!(get(&e.t, &Get::new("r").time_range(0, 2)), v(&[]));
    assert_eq!(
        get(&e.t, &Get::new("r").time_range(0, 3)),
        v(&["r/cf:q@2=v2"])
    );
    e.db.flush().unwrap();
    assert_eq!(get(&e.t, &Get::new("r").time_range(0, 2)), v(&[]));
}

#[test]
fn nvb_delete_family_version_masks_only_earlier_writes() {
    let e = env(vec![
        fam("cf", 10).new_version_behavior(true),
        fam("classic", 10),
    ]);
    put(&e.t, "r", "cf", "a", 4, "a-before");
    put(&e.t, "r", "classic", "a", 4, "a-before");
    e.t.delete(
        Delete::new("r")
            .family_version("cf", 4)
            .family_version("classic", 4),
    )
    .unwrap();
    e.db.flush().unwrap();
    put(&e.t, "r", "cf", "b", 4, "b-after");
    put(&e.t, "r", "classic", "b", 4, "b-after");
    assert_eq!(
        get(&e.t, &Get::new("r").all_versions()),
        v(&["r/cf:b@4=b-after"])
    );
}

#[test]
fn classic_min_versions_counts_unmasked_versions() {
    let e = env(vec![fam("cf", 10)
        .ttl(Duration::from_secs(60))
        .min_versions(1)]);
    let now = now_ms();
    let (old1, old2) = (now - 3_000_000, now - 2_000_000);
    put(&e.t, "r", "cf", "q", old1, "old1");
    put(&e.t, "r", "cf", "q", old2, "old2");
    assert_eq!(
        get(&e.t, &Get::new("r").all_versions()),
        vec![format!("r/cf:q@{old2}=old2")]
    );
    e.t.delete(Delete::new("r").column_at("cf", "q", old2))
        .unwrap();
    assert_eq!(
        get(&e.t, &Get::new("r").all_versions()),
        vec![format!("r/cf:q@{old1}=old1")]
    );
}

#[test]
fn nvb_min_versions_counts_deleted_versions() {
    let e = env(vec![fam("cf", 10)
        .ttl(Duration::from_secs(60))
        .min_versions(1)
        .new_version_behavior(true)]);
    let now = now_ms();
    let (old1, old2) = (now - 3_000_000, now - 2_000_000);
    put(&e.t, "r", "cf", "q", old1, "old1");
    put(&e.t, "r", "cf", "q", old2, "old2");
    e.t.delete(Delete::new("r").column_at("cf", "q", old2))
        .unwrap();
    assert_eq!(get(&e.t, &Get::new("r").all_versions()), v(&[]));
}

#[test]
fn min_versions_is_counted_regardless_of_time_range() {
    // MIN_VERSIONS 1 keeps the newest version (old2); old1 is expired and beyond it, so a
    // range that excludes old2 finds nothing.
    let e = env(vec![fam("cf", 10)
        .ttl(Duration::from_secs(60))
        .min_versions(1)]);
    let now = now_ms();
    let (old1, old2) = (now - 3_000_000, now - 2_000_000);
    put(&e.t, "r", "cf", "q", old1, "old1");
    put(&e.t, "r", "cf", "q", old2, "old2");
    e.db.flush().unwrap();
    assert_eq!(
        get(&e.t, &Get::new("r").all_versions().time_range(0, old2)),
        v(&[])
    );
    assert_eq!(
        get(
            &e.t,
            &Get::new("r").all_versions().time_range(old2, old2 + 1)
        ),
        vec![format!("r/cf:q@{old2}=old2")]
    );
}

#[test]
fn ttl_expired_cells_are_hidden_from_scans_and_rmw() {
    let e = env(vec![fam("cf", 10).ttl(Duration::from_secs(60))]);
    let old = now_ms() - 3_600_000;
    put(&e.t, "r", "cf", "lock", old, "held");
    // The expired value is absent to check-and-mutate.
    let ok =
        e.t.check_and_mutate(
            CheckAndMutate::row("r")
                .if_absent("cf", "lock")
                .then(RowMutations::new("r").put(Put::new("r").add("cf", "lock", "mine"))),
        )
        .unwrap();
    assert!(ok);
    let row = e.t.get(&Get::new("r")).unwrap().unwrap();
    assert_eq!(row.cells.len(), 1);
    assert_eq!(row.value("cf", "lock"), Some(&b"mine"[..]));
    // A raw scan ignores TTL.
    assert_eq!(scan_rows(&e.t, Scan::new().raw())[0].cells.len(), 2);
}

#[test]
fn keep_deleted_cells_raw_scan_and_later_put() {
    let e = env(vec![
        fam("cf", 10).keep_deleted_cells(KeepDeletedCells::True)
    ]);
    put(&e.t, "r", "cf", "q", 1, "v1");
    e.t.delete(Delete::new("r").columns_at("cf", "q", 2))
        .unwrap();
    put(&e.t, "r", "cf", "q", 3, "v3");
    e.db.flush().unwrap();
    assert_eq!(
        scan(&e.t, Scan::new().raw()),
        v(&["r/cf:q@3=v3", "r/cf:q@2:DeleteColumn", "r/cf:q@1=v1"])
    );
    assert_eq!(
        get(&e.t, &Get::new("r").all_versions()),
        v(&["r/cf:q@3=v3"])
    );
    assert_eq!(
        get(&e.t, &Get::new("r").all_versions().time_range(0, 2)),
        v(&["r/cf:q@1=v1"])
    );
}

#[test]
fn raw_scan_ignores_the_version_limit() {
    let e = env(vec![fam("cf", 1)]);
    for ts in [1, 2, 3] {
        put(&e.t, "r", "cf", "q", ts, &format!("v{ts}"));
    }
    assert_eq!(
        scan(&e.t, Scan::new().raw()),
        v(&["r/cf:q@3=v3", "r/cf:q@2=v2", "r/cf:q@1=v1"])
    );
    assert_eq!(scan(&e.t, Scan::new().all_versions()), v(&["r/cf:q@3=v3"]));
}

#[test]
fn equal_coordinates_inside_one_put_return_one_cell() {
    let e = env(vec![fam("cf", 10)]);
    e.t.put(
        Put::new("r")
            .add_at("cf", "q", 5, "first")
            .add_at("cf", "q", 5, "second"),
    )
    .unwrap();
    let mem = get(&e.t, &Get::new("r").all_versions());
    assert_eq!(mem, v(&["r/cf:q@5=second"]));
    assert_eq!(scan(&e.t, Scan::new().raw()), mem);
    e.db.flush().unwrap();
    assert_eq!(get(&e.t, &Get::new("r").all_versions()), mem);
    assert_eq!(scan(&e.t, Scan::new().raw()), mem);
}

#[test]
fn equal_coordinates_inside_one_write_batch_later_wins_and_survives_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let expected = v(&["r/cf:q@5=second", "s/cf:q@5=y"]);
    {
        let db = Db::open(dir.path(), opts()).unwrap();
        db.create_table(cellar::TableDescriptor::new("t").family(fam("cf", 10)))
            .unwrap();
        let wb = WriteBatch::new()
            .put("t", Put::new("r").add_at("cf", "q", 5, "first"))
            .put("t", Put::new("s").add_at("cf", "q", 5, "x"))
            .put("t", Put::new("r").add_at("cf", "q", 5, "second"))
            .put("t", Put::new("s").add_at("cf", "q", 5, "y"));
        db.write(wb, WriteOptions::default()).unwrap();
        let t = db.table("t").unwrap();
        assert_eq!(scan(&t, Scan::new().all_versions()), expected);
        assert_eq!(scan(&t, Scan::new().raw()), expected);
        // Dropped without a flush: the next open replays the WAL.
    }
    {
        let db = Db::open(dir.path(), opts()).unwrap();
        let t = db.table("t").unwrap();
        assert_eq!(scan(&t, Scan::new().all_versions()), expected);
        assert_eq!(scan(&t, Scan::new().raw()), expected);
        db.flush().unwrap();
        assert_eq!(scan(&t, Scan::new().raw()), expected);
    }
}

#[test]
fn put_and_delete_in_one_row_mutation() {
    // RowMutations share one sequence number: in classic mode the marker masks the put at its
    // timestamp whatever the order inside the batch.
    let e = env(vec![fam("cf", 10)]);
    put(&e.t, "r", "cf", "q", 1, "v1");
    e.t.mutate_row(
        RowMutations::new("r")
            .put(Put::new("r").add_at("cf", "q", 2, "v2"))
            .delete(Delete::new("r").column_at("cf", "q", 2)),
        WriteOptions::default(),
    )
    .unwrap();
    assert_eq!(
        get(&e.t, &Get::new("r").all_versions()),
        v(&["r/cf:q@1=v1"])
    );
    e.t.mutate_row(
        RowMutations::new("r")
            .delete(Delete::new("r").column_at("cf", "q", 3))
            .put(Put::new("r").add_at("cf", "q", 3, "v3")),
        WriteOptions::default(),
    )
    .unwrap();
    assert_eq!(
        get(&e.t, &Get::new("r").all_versions()),
        v(&["r/cf:q@1=v1"])
    );
}

#[test]
fn results_survive_reopen_classic_masking_included() {
    let dir = tempfile::tempdir().unwrap();
    let expected = v(&["r/cf:q@11=v11", "r/g:x@1=x1"]);
    let raw_expected = v(&[
        "r/cf:q@11=v11",
        "r/cf:q@10:DeleteColumn",
        "r/cf:q@5=late",
        "r/cf:q@3=v3",
        "r/g:x@1=x1",
    ]);
    {
        let db = Db::open(dir.path(), opts()).unwrap();
        db.create_table(
            cellar::TableDescriptor::new("t")
                .family(fam("cf", 10))
                .family(fam("g", 10)),
        )
        .unwrap();
        let t = db.table("t").unwrap();
        put(&t, "r", "cf", "q", 3, "v3");
        put(&t, "r", "g", "x", 1, "x1");
        db.flush().unwrap();
        t.delete(Delete::new("r").columns_at("cf", "q", 10))
            .unwrap();
        put(&t, "r", "cf", "q", 5, "late");
        put(&t, "r", "cf", "q", 11, "v11");
        assert_eq!(scan(&t, Scan::new().all_versions()), expected);
        assert_eq!(scan(&t, Scan::new().raw()), raw_expected);
    }
    // A flush drops `late`, masked in classic mode by the DeleteColumn it was written after
    // (flush drops masked puts, as HBase's does, and keeps the marker).
    let flushed: Vec<String> = raw_expected
        .iter()
        .filter(|c| *c != "r/cf:q@5=late")
        .cloned()
        .collect();
    let db = Db::open(dir.path(), opts()).unwrap();
    let t = db.table("t").unwrap();
    assert_eq!(scan(&t, Scan::new().all_versions()), expected);
    // The open schedules a flush of what it replayed, so a raw read may come before or
    // after it; a user read must not tell the difference.
    let raw = scan(&t, Scan::new().raw());
    assert!(raw == raw_expected || raw == flushed, "{raw:?}");
    db.flush().unwrap();
    assert_eq!(scan(&t, Scan::new().all_versions()), expected);
    assert_eq!(scan(&t, Scan::new().raw()), flushed);
}

#[test]
fn versions_spread_over_many_files() {
    let e = env(vec![fam("cf", 3)]);
    for ts in 1..=8 {
        put(&e.t, "r", "cf", "q", ts, &format!("v{ts}"));
        e.db.flush().unwrap();
    }
    e.t.delete(Delete::new("r").column_at("cf", "q", 7))
        .unwrap();
    e.db.flush().unwrap();
    e.t.delete(Delete::new("r").column_at("cf", "q", 5))
        .unwrap();
    assert_eq!(
        get(&e.t, &Get::new("r").all_versions()),
        v(&["r/cf:q@8=v8", "r/cf:q@6=v6", "r/cf:q@4=v4"])
    );
    assert_eq!(
        get(&e.t, &Get::new("r").max_versions(2).time_range(2, 7)),
        v(&["r/cf:q@6=v6", "r/cf:q@4=v4"])
    );
}

#[test]
fn scan_batch_splits_rows_and_limit_counts_rows() {
    let e = env(vec![fam("cf", 3)]);
    for q in ["a", "b", "c", "d", "e"] {
        put(&e.t, "r1", "cf", q, 1, q);
    }
    put(&e.t, "r2", "cf", "a", 1, "a");
    let rows = scan_rows(&e.t, Scan::new().batch(2));
    let shape: Vec<(String, usize)> = rows
        .iter()
        .map(|r| (conformance_common::text(&r.key), r.cells.len()))
        .collect();
    assert_eq!(
        shape,
        vec![
            ("r1".to_owned(), 2),
            ("r1".to_owned(), 2),
            ("r1".to_owned(), 1),
            ("r2".to_owned(), 1)
        ]
    );
    let rows = scan_rows(&e.t, Scan::new().batch(2).limit(1));
    assert_eq!(rows.len(), 3);
    assert_eq!(
        rows.iter().flat_map(|r| r.cells.iter()).count(),
        5,
        "every chunk of the first row"
    );
}

#[test]
fn scan_sees_one_snapshot_from_first_row_to_last() {
    let e = env(vec![fam("cf", 3)]);
    for i in 0..2000u32 {
        put(&e.t, &format!("r{i:05}"), "cf", "q", 1, "old");
    }
    let mut it = e.t.scan(Scan::new()).unwrap();
    let first = it.next().unwrap().unwrap();
    assert_eq!(first.key, b"r00000".to_vec());
    for i in 0..2000u32 {
        put(&e.t, &format!("r{i:05}"), "cf", "q", 2, "new");
        if i % 2 == 0 {
            e.t.delete(Delete::new(format!("r{i:05}x"))).unwrap();
        }
    }
    put(&e.t, "r99999", "cf", "q", 1, "added");
    e.db.flush().unwrap();
    let rest: Vec<_> = it.map(|r| r.unwrap()).collect();
    assert_eq!(rest.len(), 1999);
    assert!(rest
        .iter()
        .all(|r| r.cells.len() == 1 && r.cells[0].value == b"old" && r.cells[0].timestamp == 1));
    assert_eq!(
        scan_keys(&e.t, Scan::new().start_row("r99")),
        v(&["r99999"])
    );
}

#[test]
fn divergence_timestamps_filter_sees_resolved_versions() {
    // SPEC §13 "Filters": with one version per column a Timestamps([5]) filter matches only
    // when 5 is the newest visible version (HBase would return version 5).
    let e = env(vec![fam("cf", 3)]);
    put(&e.t, "r", "cf", "q", 5, "v5");
    put(&e.t, "r", "cf", "q", 6, "v6");
    put(&e.t, "r", "cf", "p", 5, "p5");
    let f = Filter::Timestamps(vec![5]);
    assert_eq!(
        get(&e.t, &Get::new("r").filter(f.clone())),
        v(&["r/cf:p@5=p5"])
    );
    assert_eq!(
        get(&e.t, &Get::new("r").all_versions().filter(f)),
        v(&["r/cf:p@5=p5", "r/cf:q@5=v5"])
    );
}

#[test]
fn key_only_and_page_filters() {
    let e = env(vec![fam("cf", 3)]);
    for r in ["a", "b", "c", "d"] {
        put(&e.t, r, "cf", "q", 1, "value");
    }
    e.t.delete(Delete::new("b").row_at(1)).unwrap();
    assert_eq!(
        scan(
            &e.t,
            Scan::new().filter(Filter::and([Filter::Page(2), Filter::KeyOnly]))
        ),
        v(&["a/cf:q@1=", "c/cf:q@1="])
    );
}

#[test]
fn scan_with_empty_prefix_and_bad_ranges() {
    let e = env(vec![fam("cf", 3)]);
    for r in ["a", "b"] {
        put(&e.t, r, "cf", "q", 1, r);
    }
    assert_eq!(scan_keys(&e.t, Scan::new().prefix("")), v(&["a", "b"]));
    assert!(e.t.scan(Scan::new().range("b", "a")).is_err());
    assert!(e.t.scan(Scan::new().family("missing")).is_err());
    assert!(e.t.get(&Get::new("")).is_err());
}

#[test]
fn check_and_mutate_refuses_a_mutation_of_another_row() {
    let e = env(vec![fam("cf", 3)]);
    put(&e.t, "r", "cf", "q", 1, "x");
    let res = e.t.check_and_mutate(
        CheckAndMutate::row("r")
            .if_equals("cf", "q", "x")
            .then(RowMutations::new("r").put(Put::new("other").add_at("cf", "q", 2, "y"))),
    );
    assert!(res.is_err());
    assert_eq!(get(&e.t, &Get::new("other")), v(&[]));
    assert_eq!(get(&e.t, &Get::new("r")), v(&["r/cf:q@1=x"]));
}

#[test]
fn empty_qualifier_puts_interleave_with_family_markers() {
    // Family markers carry an empty qualifier; a put with an empty qualifier and a newer
    // timestamp sorts before them and must still resolve correctly.
    let e = env(vec![fam("cf", 10)]);
    put(&e.t, "r", "cf", "", 5, "e5");
    put(&e.t, "r", "cf", "", 3, "e3");
    put(&e.t, "r", "cf", "a", 3, "a3");
    put(&e.t, "r", "cf", "a", 6, "a6");
    e.db.flush().unwrap();
    e.t.delete(Delete::new("r").family_at("cf", 4)).unwrap();
    assert_eq!(
        get(&e.t, &Get::new("r").all_versions()),
        v(&["r/cf:@5=e5", "r/cf:a@6=a6"])
    );
    assert_eq!(
        scan(&e.t, Scan::new().raw()),
        v(&[
            "r/cf:@5=e5",
            "r/cf:@4:DeleteFamily",
            "r/cf:@3=e3",
            "r/cf:a@6=a6",
            "r/cf:a@3=a3"
        ])
    );
    // A DeleteFamilyVersion at 5 masks the empty-qualifier put at 5 and a@5.
    put(&e.t, "r", "cf", "a", 5, "a5");
    e.t.delete(Delete::new("r").family_version("cf", 5))
        .unwrap();
    assert_eq!(
        get(&e.t, &Get::new("r").all_versions()),
        v(&["r/cf:a@6=a6"])
    );
}

#[test]
fn empty_qualifier_column_markers_are_not_family_markers() {
    let e = env(vec![fam("cf", 10)]);
    put(&e.t, "r", "cf", "", 2, "e2");
    put(&e.t, "r", "cf", "", 1, "e1");
    put(&e.t, "r", "cf", "a", 2, "a2");
    put(&e.t, "r", "cf", "b", 1, "b1");
    e.t.delete(Delete::new("r").column_at("cf", "", 2)).unwrap();
    assert_eq!(
        get(&e.t, &Get::new("r").all_versions()),
        v(&["r/cf:@1=e1", "r/cf:a@2=a2", "r/cf:b@1=b1"])
    );
    e.t.delete(Delete::new("r").columns_at("cf", "", 5))
        .unwrap();
    e.db.flush().unwrap();
    assert_eq!(
        get(&e.t, &Get::new("r").all_versions()),
        v(&["r/cf:a@2=a2", "r/cf:b@1=b1"])
    );
    assert_eq!(get(&e.t, &Get::new("r").column("cf", "")), v(&[]));
}

#[test]
fn keep_deleted_cells_ttl_expiry_still_applies() {
    let e = env(vec![fam("cf", 10)
        .ttl(Duration::from_secs(60))
        .keep_deleted_cells(KeepDeletedCells::Ttl)]);
    let now = now_ms();
    put(&e.t, "r", "cf", "q", now - 3_600_000, "expired");
    put(&e.t, "r", "cf", "q", now - 2_000, "fresh");
    e.t.delete(Delete::new("r").columns_at("cf", "q", now - 1_000))
        .unwrap();
    assert_eq!(get(&e.t, &Get::new("r").all_versions()), v(&[]));
    assert_eq!(
        get(
            &e.t,
            &Get::new("r").all_versions().time_range(0, now - 1_000)
        ),
        vec![format!("r/cf:q@{}=fresh", now - 2_000)]
    );
}

#[test]
fn value_filter_does_not_see_deleted_versions() {
    let e = env(vec![fam("cf", 10)]);
    put(&e.t, "r", "cf", "q", 1, "match");
    put(&e.t, "r", "cf", "q", 2, "match");
    put(&e.t, "r", "cf", "q", 3, "other");
    e.t.delete(Delete::new("r").column_at("cf", "q", 2))
        .unwrap();
    let f = Filter::Value(cellar::CompareOp::Equal, b"match".to_vec());
    assert_eq!(
        get(&e.t, &Get::new("r").all_versions().filter(f.clone())),
        v(&["r/cf:q@1=match"])
    );
    e.t.delete(Delete::new("r").column_at("cf", "q", 3))
        .unwrap();
    // Classic: version 1 becomes the newest visible one.
    assert_eq!(get(&e.t, &Get::new("r").filter(f)), v(&["r/cf:q@1=match"]));
}

#[test]
fn single_column_value_filter_on_an_unselected_column_is_missing() {
    let e = env(vec![fam("cf", 3), fam("g", 3)]);
    put(&e.t, "r", "cf", "status", 1, "active");
    put(&e.t, "r", "g", "x", 1, "x");
    let scv = |missing| Filter::SingleColumnValue {
        family: "cf".into(),
        qualifier: b"status".to_vec(),
        op: cellar::CompareOp::Equal,
        value: b"active".to_vec(),
        filter_if_missing: missing,
    };
    assert_eq!(
        scan(&e.t, Scan::new().family("g").filter(scv(true))),
        v(&[])
    );
    assert_eq!(
        scan(&e.t, Scan::new().family("g").filter(scv(false))),
        v(&["r/g:x@1=x"])
    );
    assert_eq!(
        scan(&e.t, Scan::new().filter(scv(true))),
        v(&["r/cf:status@1=active", "r/g:x@1=x"])
    );
}

#[test]
fn raw_scan_respects_family_selection() {
    let e = env(vec![fam("cf", 3), fam("g", 3)]);
    put(&e.t, "r", "g", "x", 1, "x");
    e.t.delete(Delete::new("r").family_at("cf", 9)).unwrap();
    assert_eq!(scan(&e.t, Scan::new().raw().family("g")), v(&["r/g:x@1=x"]));
    assert_eq!(
        scan(&e.t, Scan::new().raw()),
        v(&["r/cf:@9:DeleteFamily", "r/g:x@1=x"])
    );
    // A row holding only markers is not returned by a resolved scan.
    assert_eq!(scan(&e.t, Scan::new().family("cf")), v(&[]));
}

#[test]
fn scan_stop_row_is_exact_bytes() {
    let e = env(vec![fam("cf", 3)]);
    for r in [&b"c"[..], b"c\x00", b"b\xff", b"d"] {
        e.t.put(Put::new(r.to_vec()).add_at("cf", "q", 1, "v"))
            .unwrap();
    }
    assert_eq!(scan_keys(&e.t, Scan::new().stop_row("c")), v(&["b\\xff"]));
    assert_eq!(
        scan_keys(&e.t, Scan::new().stop_row("c").inclusive_stop(true)),
        v(&["b\\xff", "c"])
    );
    assert_eq!(
        scan_keys(&e.t, Scan::new().start_row(b"c\x00".to_vec())),
        v(&["c\\x00", "d"])
    );
    assert_eq!(scan_keys(&e.t, Scan::new().start_row("e")), v(&[]));
}

#[test]
fn increment_and_append_after_deletes() {
    let e = env(vec![fam("cf", 3)]);
    e.t.put(Put::new("r").add_at("cf", "n", 5, 100i64.to_be_bytes().to_vec()))
        .unwrap();
    e.t.delete(Delete::new("r").columns_at("cf", "n", 5))
        .unwrap();
    let row =
        e.t.increment(cellar::Increment::new("r").add("cf", "n", 1))
            .unwrap();
    assert_eq!(row.value("cf", "n"), Some(&1i64.to_be_bytes()[..]));
    put(&e.t, "r", "cf", "s", 5, "old");
    e.t.delete(Delete::new("r").row_at(5)).unwrap();
    let row =
        e.t.append(cellar::Append::new("r").add("cf", "s", "new"))
            .unwrap();
    assert_eq!(row.value("cf", "s"), Some(&b"new"[..]));
    let got = e.t.get(&Get::new("r")).unwrap().unwrap();
    assert_eq!(got.value("cf", "n"), Some(&1i64.to_be_bytes()[..]));
    assert_eq!(got.value("cf", "s"), Some(&b"new"[..]));
    assert_eq!(got.cells.len(), 2);
}

#[test]
fn nvb_marker_and_put_in_one_batch_share_a_sequence_number() {
    // SPEC §13: under NEW_VERSION_BEHAVIOR a marker masks only puts with a *smaller*
    // sequence number; a put and a marker in one RowMutations share one, so the put stays
    // visible whatever their order in the batch. Classic mode masks it.
    let e = env(vec![
        fam("cf", 10).new_version_behavior(true),
        fam("classic", 10),
    ]);
    put(&e.t, "r", "cf", "q", 1, "v1");
    e.t.mutate_row(
        RowMutations::new("r")
            .delete(
                Delete::new("r")
                    .columns_at("cf", "q", 2)
                    .columns_at("classic", "q", 2),
            )
            .put(
                Put::new("r")
                    .add_at("cf", "q", 2, "v2")
                    .add_at("classic", "q", 2, "v2"),
            ),
        WriteOptions::default(),
    )
    .unwrap();
    let want = v(&["r/cf:q@2=v2"]);
    assert_eq!(get(&e.t, &Get::new("r").all_versions()), want);
    e.db.flush().unwrap();
    assert_eq!(get(&e.t, &Get::new("r").all_versions()), want);
}

#[test]
fn snapshot_reads_keep_deleted_and_overwritten_cells() {
    let e = env(vec![fam("cf", 10)]);
    put(&e.t, "r", "cf", "q", 1, "v1");
    put(&e.t, "r", "cf", "q", 5, "first");
    let snap = e.db.snapshot();
    put(&e.t, "r", "cf", "q", 5, "second");
    e.t.delete(Delete::new("r").column_at("cf", "q", 1))
        .unwrap();
    e.db.flush().unwrap();
    assert_eq!(
        get(&e.t, &Get::new("r").all_versions().at(&snap)),
        v(&["r/cf:q@5=first", "r/cf:q@1=v1"])
    );
    assert_eq!(
        scan(&e.t, Scan::new().raw().at(&snap)),
        v(&["r/cf:q@5=first", "r/cf:q@1=v1"])
    );
    assert_eq!(
        get(&e.t, &Get::new("r").all_versions()),
        v(&["r/cf:q@5=second"])
    );
}
