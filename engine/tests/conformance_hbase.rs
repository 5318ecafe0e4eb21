//! HBase behaviour, case by case (MISSION.md "The read semantics in detail", SPEC.md §13).
//!
//! Each case declares its families explicitly, writes cells with explicit timestamps, flushes
//! where HBase's outcome could depend on it, and asserts every field of every returned cell
//! (`row/family:qualifier@ts=value`, or `...@ts:Type` for a raw marker).
//! Cases that need major compaction (not implemented yet) are ignored with their expected
//! result written out.

mod conformance_common;

use std::time::Duration;

use cellar::types::now_ms;
use cellar::{
    Append, CheckAndMutate, CompareOp, Delete, FamilyDescriptor, Filter, Get, Increment,
    KeepDeletedCells, Put, RowMutations, Scan,
};
use conformance_common::{env, get, put, scan, scan_keys, v};

fn fam(name: &str, versions: u32) -> FamilyDescriptor {
    FamilyDescriptor::new(name).max_versions(versions)
}

fn nvb(name: &str, versions: u32) -> FamilyDescriptor {
    fam(name, versions).new_version_behavior(true)
}

// ---------------------------------------------------------------------------------------
// Versions and time ranges
// ---------------------------------------------------------------------------------------

#[test]
fn get_returns_newest_version_by_default() {
    let e = env(vec![fam("cf", 3)]);
    put(&e.t, "r", "cf", "q", 1, "v1");
    put(&e.t, "r", "cf", "q", 3, "v3");
    e.db.flush().unwrap();
    put(&e.t, "r", "cf", "q", 2, "v2");
    assert_eq!(get(&e.t, &Get::new("r")), v(&["r/cf:q@3=v3"]));
    assert_eq!(
        get(&e.t, &Get::new("r").column("cf", "q")),
        v(&["r/cf:q@3=v3"])
    );
}

#[test]
fn get_max_versions_returns_the_n_newest() {
    let e = env(vec![fam("cf", 5)]);
    for ts in 1..=4 {
        put(&e.t, "r", "cf", "q", ts, &format!("v{ts}"));
        if ts == 2 {
            e.db.flush().unwrap();
        }
    }
    assert_eq!(
        get(&e.t, &Get::new("r").max_versions(2)),
        v(&["r/cf:q@4=v4", "r/cf:q@3=v3"])
    );
    assert_eq!(
        get(&e.t, &Get::new("r").all_versions()),
        v(&["r/cf:q@4=v4", "r/cf:q@3=v3", "r/cf:q@2=v2", "r/cf:q@1=v1"])
    );
}

#[test]
fn family_versions_caps_the_query_versions() {
    let e = env(vec![fam("cf", 2)]);
    for ts in 1..=4 {
        put(&e.t, "r", "cf", "q", ts, &format!("v{ts}"));
    }
    let want = v(&["r/cf:q@4=v4", "r/cf:q@3=v3"]);
    assert_eq!(get(&e.t, &Get::new("r").all_versions()), want);
    assert_eq!(get(&e.t, &Get::new("r").max_versions(10)), want);
    e.db.flush().unwrap();
    assert_eq!(get(&e.t, &Get::new("r").all_versions()), want);
}

#[test]
fn time_range_is_half_open() {
    let e = env(vec![fam("cf", 10)]);
    for ts in 1..=5 {
        put(&e.t, "r", "cf", "q", ts, &format!("v{ts}"));
    }
    e.db.flush().unwrap();
    assert_eq!(
        get(&e.t, &Get::new("r").all_versions().time_range(2, 4)),
        v(&["r/cf:q@3=v3", "r/cf:q@2=v2"])
    );
    assert_eq!(
        get(&e.t, &Get::new("r").all_versions().time_range(5, 6)),
        v(&["r/cf:q@5=v5"])
    );
}

#[test]
fn version_limit_applies_after_time_range() {
    let e = env(vec![fam("cf", 10)]);
    for ts in 1..=5 {
        put(&e.t, "r", "cf", "q", ts, &format!("v{ts}"));
    }
    assert_eq!(
        get(&e.t, &Get::new("r").time_range(0, 3)),
        v(&["r/cf:q@2=v2"])
    );
    assert_eq!(
        get(&e.t, &Get::new("r").time_range(0, 4).max_versions(2)),
        v(&["r/cf:q@3=v3", "r/cf:q@2=v2"])
    );
}

#[test]
fn exact_timestamp_get() {
    let e = env(vec![fam("cf", 10)]);
    for ts in [1, 2, 3] {
        put(&e.t, "r", "cf", "q", ts, &format!("v{ts}"));
    }
    put(&e.t, "r", "cf", "p", 2, "p2");
    e.db.flush().unwrap();
    assert_eq!(
        get(&e.t, &Get::new("r").timestamp(2)),
        v(&["r/cf:p@2=p2", "r/cf:q@2=v2"])
    );
    assert_eq!(get(&e.t, &Get::new("r").timestamp(7)), v(&[]));
}

#[test]
fn empty_time_range_matches_nothing_and_inverted_is_refused() {
    let e = env(vec![fam("cf", 10)]);
    put(&e.t, "r", "cf", "q", 3, "v3");
    assert_eq!(get(&e.t, &Get::new("r").time_range(3, 3)), v(&[]));
    assert!(e.t.get(&Get::new("r").time_range(4, 3)).is_err());
    assert!(e.t.scan(Scan::new().time_range(4, 3)).is_err());
}

#[test]
fn time_range_with_versions_one_sees_an_older_version_before_compaction() {
    // SPEC §13 example: VERSIONS 1, puts at 1 and 2, Get [0, 2) returns t=1.
    let e = env(vec![fam("cf", 1)]);
    put(&e.t, "r", "cf", "q", 1, "v1");
    put(&e.t, "r", "cf", "q", 2, "v2");
    assert_eq!(get(&e.t, &Get::new("r")), v(&["r/cf:q@2=v2"]));
    assert_eq!(
        get(&e.t, &Get::new("r").time_range(0, 2)),
        v(&["r/cf:q@1=v1"])
    );
}

#[test]
fn time_range_with_versions_one_after_major_compaction() {
    // Expected: after a major compaction VERSIONS 1 keeps only t=2, so [0, 2) finds nothing
    // and the plain Get still returns t=2.
    let e = env(vec![fam("cf", 1)]);
    put(&e.t, "r", "cf", "q", 1, "v1");
    put(&e.t, "r", "cf", "q", 2, "v2");
    e.db.flush().unwrap();
    e.db.major_compact("t", None).unwrap();
    assert_eq!(get(&e.t, &Get::new("r").time_range(0, 2)), v(&[]));
    assert_eq!(get(&e.t, &Get::new("r")), v(&["r/cf:q@2=v2"]));
}

#[test]
fn equal_coordinates_later_write_wins() {
    let e = env(vec![fam("cf", 10)]);
    put(&e.t, "r", "cf", "q", 5, "first");
    put(&e.t, "r", "cf", "q", 5, "second");
    assert_eq!(
        get(&e.t, &Get::new("r").all_versions()),
        v(&["r/cf:q@5=second"])
    );
    assert_eq!(
        scan(&e.t, Scan::new().all_versions()),
        v(&["r/cf:q@5=second"])
    );
}

#[test]
fn equal_coordinates_later_write_wins_across_flushes() {
    let e = env(vec![fam("cf", 10)]);
    put(&e.t, "a", "cf", "q", 5, "first");
    e.db.flush().unwrap();
    put(&e.t, "a", "cf", "q", 5, "second");
    put(&e.t, "b", "cf", "q", 5, "first");
    put(&e.t, "b", "cf", "q", 5, "second");
    e.db.flush().unwrap();
    put(&e.t, "c", "cf", "q", 5, "first");
    e.db.flush().unwrap();
    put(&e.t, "c", "cf", "q", 5, "second");
    e.db.flush().unwrap();
    assert_eq!(
        scan(&e.t, Scan::new().all_versions()),
        v(&["a/cf:q@5=second", "b/cf:q@5=second", "c/cf:q@5=second"])
    );
    assert_eq!(
        get(&e.t, &Get::new("c").all_versions()),
        v(&["c/cf:q@5=second"])
    );
}

// ---------------------------------------------------------------------------------------
// Delete kinds
// ---------------------------------------------------------------------------------------

#[test]
fn delete_version_masks_exactly_its_timestamp() {
    let e = env(vec![fam("cf", 10)]);
    for ts in [1, 2, 3] {
        put(&e.t, "r", "cf", "q", ts, &format!("v{ts}"));
    }
    e.db.flush().unwrap();
    e.t.delete(Delete::new("r").column_at("cf", "q", 2))
        .unwrap();
    assert_eq!(
        get(&e.t, &Get::new("r").all_versions()),
        v(&["r/cf:q@3=v3", "r/cf:q@1=v1"])
    );
    // A Delete at a timestamp with no put masks nothing.
    e.t.delete(Delete::new("r").column_at("cf", "q", 9))
        .unwrap();
    assert_eq!(get(&e.t, &Get::new("r")), v(&["r/cf:q@3=v3"]));
}

#[test]
fn delete_version_without_timestamp_deletes_the_newest() {
    let e = env(vec![fam("cf", 10)]);
    for ts in [1, 2, 3] {
        put(&e.t, "r", "cf", "q", ts, &format!("v{ts}"));
    }
    e.t.delete(Delete::new("r").column("cf", "q")).unwrap();
    assert_eq!(
        get(&e.t, &Get::new("r").all_versions()),
        v(&["r/cf:q@2=v2", "r/cf:q@1=v1"])
    );
    e.db.flush().unwrap();
    e.t.delete(Delete::new("r").column("cf", "q")).unwrap();
    assert_eq!(
        get(&e.t, &Get::new("r").all_versions()),
        v(&["r/cf:q@1=v1"])
    );
    // The markers carry the resolved timestamps. The flush dropped v3, masked by the first
    // marker (classic mode: flush, like HBase's, drops masked puts and keeps markers).
    assert_eq!(
        scan(&e.t, Scan::new().raw()),
        v(&[
            "r/cf:q@3:Delete",
            "r/cf:q@2:Delete",
            "r/cf:q@2=v2",
            "r/cf:q@1=v1"
        ])
    );
}

#[test]
fn delete_column_masks_versions_at_or_below_its_timestamp() {
    let e = env(vec![fam("cf", 10)]);
    for ts in 1..=4 {
        put(&e.t, "r", "cf", "q", ts, &format!("v{ts}"));
    }
    put(&e.t, "r", "cf", "other", 1, "o1");
    e.t.delete(Delete::new("r").columns_at("cf", "q", 3))
        .unwrap();
    let want = v(&["r/cf:other@1=o1", "r/cf:q@4=v4"]);
    assert_eq!(get(&e.t, &Get::new("r").all_versions()), want);
    e.db.flush().unwrap();
    assert_eq!(get(&e.t, &Get::new("r").all_versions()), want);
}

#[test]
fn delete_family_masks_every_column_at_or_below_its_timestamp() {
    let e = env(vec![fam("cf", 10), fam("g", 10)]);
    put(&e.t, "r", "cf", "a", 1, "a1");
    put(&e.t, "r", "cf", "a", 3, "a3");
    put(&e.t, "r", "cf", "b", 2, "b2");
    put(&e.t, "r", "g", "x", 1, "x1");
    e.db.flush().unwrap();
    e.t.delete(Delete::new("r").family_at("cf", 2)).unwrap();
    assert_eq!(
        get(&e.t, &Get::new("r").all_versions()),
        v(&["r/cf:a@3=a3", "r/g:x@1=x1"])
    );
}

#[test]
fn delete_family_version_masks_every_column_at_exactly_its_timestamp() {
    let e = env(vec![fam("cf", 10)]);
    put(&e.t, "r", "cf", "a", 1, "a1");
    put(&e.t, "r", "cf", "a", 2, "a2");
    put(&e.t, "r", "cf", "b", 2, "b2");
    put(&e.t, "r", "cf", "b", 3, "b3");
    e.t.delete(Delete::new("r").family_version("cf", 2))
        .unwrap();
    e.db.flush().unwrap();
    assert_eq!(
        get(&e.t, &Get::new("r").all_versions()),
        v(&["r/cf:a@1=a1", "r/cf:b@3=b3"])
    );
}

#[test]
fn whole_row_delete_masks_every_family() {
    let e = env(vec![fam("cf", 10), fam("g", 10)]);
    let now = now_ms();
    put(&e.t, "r", "cf", "a", now - 1000, "a");
    put(&e.t, "r", "g", "x", now - 2000, "x");
    put(&e.t, "s", "cf", "a", now - 1000, "other row");
    e.t.delete(Delete::new("r")).unwrap();
    assert_eq!(get(&e.t, &Get::new("r").all_versions()), v(&[]));
    // One DeleteFamily per family, at the time the delete was applied.
    let raw = scan(&e.t, Scan::new().raw().range("r", "s"));
    assert_eq!(raw.len(), 4, "{raw:?}");
    assert!(raw[0].starts_with("r/cf:@") && raw[0].ends_with(":DeleteFamily"));
    assert!(raw[2].starts_with("r/g:@") && raw[2].ends_with(":DeleteFamily"));
    // A put with a later timestamp shows.
    put(&e.t, "r", "g", "x", now + 100_000, "later");
    assert_eq!(
        get(&e.t, &Get::new("r")),
        v(&[&format!("r/g:x@{}=later", now + 100_000)])
    );
    assert_eq!(
        get(&e.t, &Get::new("s")),
        v(&[&format!("s/cf:a@{}=other row", now - 1000)])
    );
}

#[test]
fn row_delete_at_timestamp_masks_cells_at_or_below_it() {
    let e = env(vec![fam("cf", 10), fam("g", 10)]);
    put(&e.t, "r", "cf", "a", 1, "a1");
    put(&e.t, "r", "cf", "a", 3, "a3");
    put(&e.t, "r", "g", "x", 2, "x2");
    put(&e.t, "r", "g", "y", 4, "y4");
    e.db.flush().unwrap();
    e.t.delete(Delete::new("r").row_at(2)).unwrap();
    assert_eq!(
        get(&e.t, &Get::new("r").all_versions()),
        v(&["r/cf:a@3=a3", "r/g:y@4=y4"])
    );
    assert_eq!(
        scan(&e.t, Scan::new().raw()),
        v(&[
            "r/cf:@2:DeleteFamily",
            "r/cf:a@3=a3",
            "r/cf:a@1=a1",
            "r/g:@2:DeleteFamily",
            "r/g:x@2=x2",
            "r/g:y@4=y4"
        ])
    );
}

#[test]
fn classic_put_written_after_delete_with_older_timestamp_stays_masked() {
    let e = env(vec![fam("cf", 10)]);
    e.t.delete(Delete::new("r").columns_at("cf", "q", 10))
        .unwrap();
    put(&e.t, "r", "cf", "q", 5, "late");
    put(&e.t, "r", "cf", "q", 10, "late10");
    put(&e.t, "r", "cf", "q", 11, "v11");
    assert_eq!(
        get(&e.t, &Get::new("r").all_versions()),
        v(&["r/cf:q@11=v11"])
    );
    // A one-version Delete masks a put at its timestamp written later, too.
    e.t.delete(Delete::new("r").column_at("cf", "p", 7))
        .unwrap();
    put(&e.t, "r", "cf", "p", 7, "p7");
    assert_eq!(get(&e.t, &Get::new("r").column("cf", "p")), v(&[]));
}

#[test]
fn classic_put_after_flushed_delete_stays_masked() {
    let e = env(vec![fam("cf", 10), fam("g", 10)]);
    e.t.delete(Delete::new("r").family_at("cf", 10)).unwrap();
    e.t.delete(Delete::new("r").family_version("g", 4)).unwrap();
    e.db.flush().unwrap();
    put(&e.t, "r", "cf", "q", 5, "late");
    put(&e.t, "r", "g", "x", 4, "x4");
    put(&e.t, "r", "g", "x", 3, "x3");
    assert_eq!(get(&e.t, &Get::new("r").all_versions()), v(&["r/g:x@3=x3"]));
    e.db.flush().unwrap();
    assert_eq!(get(&e.t, &Get::new("r").all_versions()), v(&["r/g:x@3=x3"]));
}

#[test]
fn classic_put_after_delete_shows_after_major_compaction() {
    // Expected (HBase reference guide, "Delete masks Puts"): once a major compaction has
    // purged the DeleteColumn at 10, a put at 5 written after the compaction is visible.
    let e = env(vec![fam("cf", 10)]);
    e.t.delete(Delete::new("r").columns_at("cf", "q", 10))
        .unwrap();
    e.db.flush().unwrap();
    e.db.major_compact("t", None).unwrap();
    put(&e.t, "r", "cf", "q", 5, "late");
    assert_eq!(get(&e.t, &Get::new("r")), v(&["r/cf:q@5=late"]));
}

#[test]
fn classic_deleted_versions_do_not_count_toward_versions() {
    // Seed 001: versions t1, t2, t3; a read of two versions returns t3, t2; after t2 is
    // deleted it returns t3, t1.
    let e = env(vec![fam("cf", 3)]);
    for ts in [1, 2, 3] {
        put(&e.t, "r", "cf", "q", ts, &format!("v{ts}"));
    }
    e.db.flush().unwrap();
    assert_eq!(
        get(&e.t, &Get::new("r").max_versions(2)),
        v(&["r/cf:q@3=v3", "r/cf:q@2=v2"])
    );
    e.t.delete(Delete::new("r").column_at("cf", "q", 2))
        .unwrap();
    assert_eq!(
        get(&e.t, &Get::new("r").max_versions(2)),
        v(&["r/cf:q@3=v3", "r/cf:q@1=v1"])
    );
}

#[test]
fn classic_older_version_shows_again_after_newest_deleted() {
    // VERSIONS 2, no flush: version 1 is beyond VERSIONS but still stored, so deleting
    // version 3 lets it show again (HBase: "until compaction has trimmed it").
    let e = env(vec![fam("cf", 2)]);
    for ts in [1, 2, 3] {
        put(&e.t, "r", "cf", "q", ts, &format!("v{ts}"));
    }
    assert_eq!(
        get(&e.t, &Get::new("r").all_versions()),
        v(&["r/cf:q@3=v3", "r/cf:q@2=v2"])
    );
    e.t.delete(Delete::new("r").column_at("cf", "q", 3))
        .unwrap();
    assert_eq!(
        get(&e.t, &Get::new("r").all_versions()),
        v(&["r/cf:q@2=v2", "r/cf:q@1=v1"])
    );
}

#[test]
fn classic_flush_before_delete_may_trim_the_old_version() {
    // HBase's flush drops versions beyond VERSIONS, so there the result after the delete is
    // only v2; MISSION rule 5 lets flush keep them ("may physically drop"). Either outcome
    // is allowed; nothing else is.
    let e = env(vec![fam("cf", 2)]);
    for ts in [1, 2, 3] {
        put(&e.t, "r", "cf", "q", ts, &format!("v{ts}"));
    }
    e.db.flush().unwrap();
    e.t.delete(Delete::new("r").column_at("cf", "q", 3))
        .unwrap();
    let got = get(&e.t, &Get::new("r").all_versions());
    let hbase = v(&["r/cf:q@2=v2"]);
    let kept = v(&["r/cf:q@2=v2", "r/cf:q@1=v1"]);
    assert!(got == hbase || got == kept, "{got:?}");
}

#[test]
fn classic_deleted_version_counts_after_major_compaction() {
    // Expected: VERSIONS 2, puts 1, 2, 3, major compaction keeps 3 and 2; a Delete of 3 then
    // leaves only 2 (version 1 is gone for good).
    let e = env(vec![fam("cf", 2)]);
    for ts in [1, 2, 3] {
        put(&e.t, "r", "cf", "q", ts, &format!("v{ts}"));
    }
    e.db.flush().unwrap();
    e.db.major_compact("t", None).unwrap();
    e.t.delete(Delete::new("r").column_at("cf", "q", 3))
        .unwrap();
    assert_eq!(
        get(&e.t, &Get::new("r").all_versions()),
        v(&["r/cf:q@2=v2"])
    );
}

// ---------------------------------------------------------------------------------------
// NEW_VERSION_BEHAVIOR
// ---------------------------------------------------------------------------------------

#[test]
fn nvb_marker_masks_only_earlier_writes() {
    let e = env(vec![nvb("cf", 10)]);
    put(&e.t, "r", "cf", "q", 3, "before");
    e.t.delete(Delete::new("r").columns_at("cf", "q", 10))
        .unwrap();
    put(&e.t, "r", "cf", "q", 5, "after");
    assert_eq!(
        get(&e.t, &Get::new("r").all_versions()),
        v(&["r/cf:q@5=after"])
    );
}

/// One write to a table.
type TableOp = dyn Fn(&cellar::Table);

#[test]
fn nvb_results_do_not_depend_on_flushes() {
    let run = |flush_points: &[usize]| {
        let e = env(vec![nvb("cf", 10)]);
        let ops: Vec<Box<TableOp>> = vec![
            Box::new(|t| put(t, "r", "cf", "q", 3, "before")),
            Box::new(|t| {
                t.delete(Delete::new("r").family_at("cf", 10)).unwrap();
            }),
            Box::new(|t| put(t, "r", "cf", "q", 5, "after")),
            Box::new(|t| {
                t.delete(Delete::new("r").column_at("cf", "p", 6)).unwrap();
            }),
            Box::new(|t| put(t, "r", "cf", "p", 6, "p6")),
        ];
        for (i, op) in ops.iter().enumerate() {
            op(&e.t);
            if flush_points.contains(&i) {
                e.db.flush().unwrap();
            }
        }
        get(&e.t, &Get::new("r").all_versions())
    };
    let want = v(&["r/cf:p@6=p6", "r/cf:q@5=after"]);
    for points in [&[][..], &[0], &[1], &[0, 1, 2, 3, 4], &[2, 4]] {
        assert_eq!(run(points), want, "flushes after ops {points:?}");
    }
}

#[test]
fn nvb_deleted_versions_count_toward_versions() {
    let e = env(vec![nvb("cf", 2)]);
    for ts in [1, 2, 3] {
        put(&e.t, "r", "cf", "q", ts, &format!("v{ts}"));
    }
    e.t.delete(Delete::new("r").column_at("cf", "q", 3))
        .unwrap();
    assert_eq!(
        get(&e.t, &Get::new("r").all_versions()),
        v(&["r/cf:q@2=v2"])
    );
    e.db.flush().unwrap();
    assert_eq!(
        get(&e.t, &Get::new("r").all_versions()),
        v(&["r/cf:q@2=v2"])
    );
}

#[test]
fn nvb_put_at_deleted_timestamp_written_later_shows() {
    let e = env(vec![nvb("cf", 10)]);
    put(&e.t, "r", "cf", "q", 5, "old");
    e.t.delete(Delete::new("r").column_at("cf", "q", 5))
        .unwrap();
    assert_eq!(get(&e.t, &Get::new("r")), v(&[]));
    e.db.flush().unwrap();
    put(&e.t, "r", "cf", "q", 5, "new");
    assert_eq!(
        get(&e.t, &Get::new("r").all_versions()),
        v(&["r/cf:q@5=new"])
    );
}

// ---------------------------------------------------------------------------------------
// TTL and MIN_VERSIONS
// ---------------------------------------------------------------------------------------

#[test]
fn ttl_hides_cells_older_than_now_minus_ttl() {
    let e = env(vec![fam("cf", 10).ttl(Duration::from_secs(60))]);
    let now = now_ms();
    put(&e.t, "r", "cf", "q", now - 3_600_000, "old");
    put(&e.t, "r", "cf", "q", now - 1_000, "fresh");
    put(&e.t, "r", "cf", "p", now - 7_200_000, "expired");
    put(&e.t, "s", "cf", "q", now - 3_600_000, "expired row");
    e.db.flush().unwrap();
    let fresh = format!("r/cf:q@{}=fresh", now - 1_000);
    assert_eq!(
        get(&e.t, &Get::new("r").all_versions()),
        vec![fresh.clone()]
    );
    assert_eq!(get(&e.t, &Get::new("s")), v(&[]));
    assert_eq!(scan(&e.t, Scan::new().all_versions()), vec![fresh]);
}

#[test]
fn min_versions_keeps_newest_versions_past_ttl() {
    let e = env(vec![
        fam("cf", 10).ttl(Duration::from_secs(60)).min_versions(1),
        fam("g", 10).ttl(Duration::from_secs(60)).min_versions(2),
    ]);
    let now = now_ms();
    let (t1, t2, t3) = (now - 3_000_000, now - 2_000_000, now - 1_000_000);
    for (ts, val) in [(t1, "a"), (t2, "b"), (t3, "c")] {
        put(&e.t, "r", "cf", "q", ts, val);
        put(&e.t, "r", "g", "q", ts, val);
    }
    assert_eq!(
        get(&e.t, &Get::new("r").all_versions()),
        vec![
            format!("r/cf:q@{t3}=c"),
            format!("r/g:q@{t3}=c"),
            format!("r/g:q@{t2}=b"),
        ]
    );
}

#[test]
fn min_versions_count_fresh_versions_too() {
    // MIN_VERSIONS 2: a fresh version and the newest expired one are the two newest.
    let e = env(vec![fam("cf", 10)
        .ttl(Duration::from_secs(60))
        .min_versions(2)]);
    let now = now_ms();
    let (old1, old2, fresh) = (now - 3_000_000, now - 2_000_000, now - 1_000);
    put(&e.t, "r", "cf", "q", old1, "old1");
    put(&e.t, "r", "cf", "q", old2, "old2");
    e.db.flush().unwrap();
    put(&e.t, "r", "cf", "q", fresh, "fresh");
    assert_eq!(
        get(&e.t, &Get::new("r").all_versions()),
        vec![
            format!("r/cf:q@{fresh}=fresh"),
            format!("r/cf:q@{old2}=old2")
        ]
    );
}

// ---------------------------------------------------------------------------------------
// KEEP_DELETED_CELLS
// ---------------------------------------------------------------------------------------

fn kdc_case(k: KeepDeletedCells) -> conformance_common::Env {
    let e = env(vec![fam("cf", 10).keep_deleted_cells(k)]);
    put(&e.t, "r", "cf", "q", 1, "v1");
    put(&e.t, "r", "cf", "q", 2, "v2");
    put(&e.t, "r", "cf", "q", 5, "v5");
    e.db.flush().unwrap();
    e.t.delete(Delete::new("r").columns_at("cf", "q", 3))
        .unwrap();
    e
}

#[test]
fn keep_deleted_cells_true_time_range_before_marker_sees_deleted_cells() {
    let e = kdc_case(KeepDeletedCells::True);
    assert_eq!(
        get(&e.t, &Get::new("r").all_versions()),
        v(&["r/cf:q@5=v5"])
    );
    assert_eq!(
        get(&e.t, &Get::new("r").all_versions().time_range(0, 3)),
        v(&["r/cf:q@2=v2", "r/cf:q@1=v1"])
    );
    assert_eq!(
        get(&e.t, &Get::new("r").time_range(0, 3)),
        v(&["r/cf:q@2=v2"])
    );
    // A range that includes the marker is masked by it.
    assert_eq!(
        get(&e.t, &Get::new("r").all_versions().time_range(0, 4)),
        v(&[])
    );
}

#[test]
fn keep_deleted_cells_ttl_time_range_before_marker_sees_deleted_cells() {
    let e = kdc_case(KeepDeletedCells::Ttl);
    assert_eq!(
        scan(&e.t, Scan::new().all_versions().time_range(0, 3)),
        v(&["r/cf:q@2=v2", "r/cf:q@1=v1"])
    );
    assert_eq!(scan(&e.t, Scan::new().all_versions()), v(&["r/cf:q@5=v5"]));
}

#[test]
fn keep_deleted_cells_false_masks_even_a_range_ending_before_the_marker() {
    let e = kdc_case(KeepDeletedCells::False);
    assert_eq!(
        get(&e.t, &Get::new("r").all_versions().time_range(0, 3)),
        v(&[])
    );
    assert_eq!(
        get(&e.t, &Get::new("r").all_versions()),
        v(&["r/cf:q@5=v5"])
    );
}

#[test]
fn keep_deleted_cells_true_with_delete_family_marker() {
    let e = env(vec![
        fam("cf", 10).keep_deleted_cells(KeepDeletedCells::True)
    ]);
    put(&e.t, "r", "cf", "a", 1, "a1");
    put(&e.t, "r", "cf", "b", 2, "b2");
    e.t.delete(Delete::new("r").family_at("cf", 4)).unwrap();
    e.db.flush().unwrap();
    assert_eq!(get(&e.t, &Get::new("r")), v(&[]));
    assert_eq!(
        get(&e.t, &Get::new("r").time_range(0, 4)),
        v(&["r/cf:a@1=a1", "r/cf:b@2=b2"])
    );
    assert_eq!(
        get(&e.t, &Get::new("r").time_range(0, 2)),
        v(&["r/cf:a@1=a1"])
    );
}

// ---------------------------------------------------------------------------------------
// Raw scans
// ---------------------------------------------------------------------------------------

#[test]
fn raw_scan_returns_every_marker_with_its_type_in_sort_order() {
    let e = env(vec![fam("cf", 1)]);
    put(&e.t, "r", "cf", "q", 1, "q1");
    put(&e.t, "r", "cf", "q", 2, "q2");
    put(&e.t, "r", "cf", "p", 4, "p4");
    e.db.flush().unwrap();
    e.t.delete(Delete::new("r").column_at("cf", "q", 2))
        .unwrap();
    e.t.delete(Delete::new("r").columns_at("cf", "p", 5))
        .unwrap();
    e.t.delete(Delete::new("r").family_at("cf", 7)).unwrap();
    e.t.delete(Delete::new("r").family_version("cf", 3))
        .unwrap();
    // q@1 is not there: beyond VERSIONS 1, the first flush dropped it (as HBase's does).
    let want = v(&[
        "r/cf:@7:DeleteFamily",
        "r/cf:@3:DeleteFamilyVersion",
        "r/cf:p@5:DeleteColumn",
        "r/cf:p@4=p4",
        "r/cf:q@2:Delete",
        "r/cf:q@2=q2",
    ]);
    assert_eq!(scan(&e.t, Scan::new().raw()), want);
    // The second flush writes the markers, which never go at a flush; the puts they mask
    // are in the older file, untouched.
    e.db.flush().unwrap();
    assert_eq!(scan(&e.t, Scan::new().raw()), want);
    // The resolved read sees nothing.
    assert_eq!(scan(&e.t, Scan::new().all_versions()), v(&[]));
}

#[test]
fn raw_scan_applies_time_range_and_column_selection() {
    let e = env(vec![fam("cf", 10), fam("g", 10)]);
    put(&e.t, "r", "cf", "q", 1, "q1");
    put(&e.t, "r", "cf", "q", 5, "q5");
    put(&e.t, "r", "cf", "p", 5, "p5");
    put(&e.t, "r", "g", "x", 5, "x5");
    e.t.delete(Delete::new("r").family_at("cf", 4)).unwrap();
    e.t.delete(Delete::new("r").columns_at("cf", "q", 6))
        .unwrap();
    assert_eq!(
        scan(&e.t, Scan::new().raw().time_range(3, 6)),
        v(&[
            "r/cf:@4:DeleteFamily",
            "r/cf:p@5=p5",
            "r/cf:q@5=q5",
            "r/g:x@5=x5"
        ])
    );
    // Family markers always come back with a column selection.
    assert_eq!(
        scan(&e.t, Scan::new().raw().column("cf", "q")),
        v(&[
            "r/cf:@4:DeleteFamily",
            "r/cf:q@6:DeleteColumn",
            "r/cf:q@5=q5",
            "r/cf:q@1=q1"
        ])
    );
}

#[test]
fn raw_scan_returns_equal_timestamp_puts() {
    let e = env(vec![fam("cf", 1)]);
    put(&e.t, "r", "cf", "q", 5, "first");
    e.db.flush().unwrap();
    put(&e.t, "r", "cf", "q", 5, "second");
    assert_eq!(
        scan(&e.t, Scan::new().raw()),
        v(&["r/cf:q@5=second", "r/cf:q@5=first"])
    );
    assert_eq!(scan(&e.t, Scan::new()), v(&["r/cf:q@5=second"]));
}

// ---------------------------------------------------------------------------------------
// Scans
// ---------------------------------------------------------------------------------------

fn rows_abcd() -> conformance_common::Env {
    let e = env(vec![fam("cf", 3)]);
    for (i, r) in ["a", "b", "c", "d", "e"].iter().enumerate() {
        put(&e.t, r, "cf", "q", 1, &format!("v{i}"));
        if i == 2 {
            e.db.flush().unwrap();
        }
    }
    e
}

#[test]
fn scan_start_is_inclusive_stop_is_exclusive() {
    let e = rows_abcd();
    assert_eq!(
        scan(&e.t, Scan::new().range("b", "d")),
        v(&["b/cf:q@1=v1", "c/cf:q@1=v2"])
    );
    assert_eq!(
        scan_keys(&e.t, Scan::new().start_row("bb")),
        v(&["c", "d", "e"])
    );
    assert_eq!(scan_keys(&e.t, Scan::new().stop_row("c")), v(&["a", "b"]));
    assert_eq!(scan_keys(&e.t, Scan::new().range("c", "c")), v(&[]));
}

#[test]
fn scan_inclusive_stop_returns_the_stop_row() {
    let e = rows_abcd();
    assert_eq!(
        scan_keys(&e.t, Scan::new().range("b", "d").inclusive_stop(true)),
        v(&["b", "c", "d"])
    );
    assert_eq!(
        scan_keys(&e.t, Scan::new().range("c", "c").inclusive_stop(true)),
        v(&["c"])
    );
}

#[test]
fn scan_prefix_returns_exactly_the_rows_with_the_prefix() {
    let e = env(vec![fam("cf", 3)]);
    for r in ["a", "ab", "abc", "abd", "ac", "b"] {
        put(&e.t, r, "cf", "q", 1, r);
    }
    e.t.put(Put::new(b"a\xff".to_vec()).add_at("cf", "q", 1, "ff"))
        .unwrap();
    e.t.put(Put::new(b"a\xff\x01".to_vec()).add_at("cf", "q", 1, "ff1"))
        .unwrap();
    assert_eq!(
        scan_keys(&e.t, Scan::new().prefix("ab")),
        v(&["ab", "abc", "abd"])
    );
    assert_eq!(
        scan_keys(&e.t, Scan::new().prefix(b"a\xff".to_vec())),
        v(&["a\\xff", "a\\xff\\x01"])
    );
}

#[test]
fn scan_limit_counts_returned_rows() {
    let e = rows_abcd();
    assert_eq!(scan_keys(&e.t, Scan::new().limit(2)), v(&["a", "b"]));
    // A deleted row is not returned and does not count.
    e.t.delete(Delete::new("b").row_at(1)).unwrap();
    assert_eq!(scan_keys(&e.t, Scan::new().limit(2)), v(&["a", "c"]));
    assert_eq!(
        scan_keys(&e.t, Scan::new().start_row("b").limit(3)),
        v(&["c", "d", "e"])
    );
}

#[test]
fn scan_family_and_column_selection() {
    let e = env(vec![fam("f", 3), fam("g", 3)]);
    put(&e.t, "r1", "f", "a", 1, "fa");
    put(&e.t, "r1", "g", "x", 1, "gx");
    put(&e.t, "r1", "g", "y", 1, "gy");
    put(&e.t, "r2", "f", "a", 1, "only f");
    e.db.flush().unwrap();
    assert_eq!(
        scan(&e.t, Scan::new().family("g")),
        v(&["r1/g:x@1=gx", "r1/g:y@1=gy"])
    );
    assert_eq!(
        scan(&e.t, Scan::new().column("g", "y").column("f", "a")),
        v(&["r1/f:a@1=fa", "r1/g:y@1=gy", "r2/f:a@1=only f"])
    );
    assert_eq!(
        get(&e.t, &Get::new("r1").column("g", "x")),
        v(&["r1/g:x@1=gx"])
    );
    assert_eq!(get(&e.t, &Get::new("r2").family("g")), v(&[]));
    assert!(e.t.get(&Get::new("r1").family("nope")).is_err());
}

#[test]
fn divergence_family_plus_column_reads_the_whole_family() {
    // SPEC §13 "Column selection": family + column reads the whole family in either order
    // (HBase narrows to the column when addColumn follows addFamily).
    let e = env(vec![fam("f", 3)]);
    put(&e.t, "r", "f", "a", 1, "a");
    put(&e.t, "r", "f", "b", 1, "b");
    let whole = v(&["r/f:a@1=a", "r/f:b@1=b"]);
    assert_eq!(
        get(&e.t, &Get::new("r").family("f").column("f", "a")),
        whole
    );
    assert_eq!(
        get(&e.t, &Get::new("r").column("f", "a").family("f")),
        whole
    );
}

#[test]
fn scan_versions_and_time_range() {
    let e = env(vec![fam("cf", 5)]);
    for ts in 1..=4 {
        put(&e.t, "a", "cf", "q", ts, &format!("a{ts}"));
        put(&e.t, "b", "cf", "q", ts * 10, &format!("b{ts}"));
    }
    assert_eq!(
        scan(&e.t, Scan::new().max_versions(2).time_range(2, 30)),
        v(&["a/cf:q@4=a4", "a/cf:q@3=a3", "b/cf:q@20=b2", "b/cf:q@10=b1"])
    );
    assert_eq!(scan(&e.t, Scan::new().timestamp(3)), v(&["a/cf:q@3=a3"]));
}

// ---------------------------------------------------------------------------------------
// Filters on values
// ---------------------------------------------------------------------------------------

#[test]
fn value_filter_returns_matching_cells_only() {
    let e = env(vec![fam("cf", 3)]);
    put(&e.t, "r1", "cf", "a", 1, "red");
    put(&e.t, "r1", "cf", "b", 1, "blue");
    put(&e.t, "r2", "cf", "a", 1, "green");
    put(&e.t, "r3", "cf", "a", 1, "red");
    e.db.flush().unwrap();
    assert_eq!(
        scan(
            &e.t,
            Scan::new().filter(Filter::Value(CompareOp::Equal, b"red".to_vec()))
        ),
        v(&["r1/cf:a@1=red", "r3/cf:a@1=red"])
    );
    assert_eq!(
        scan(
            &e.t,
            Scan::new().filter(Filter::Value(CompareOp::Less, b"green".to_vec()))
        ),
        v(&["r1/cf:b@1=blue"])
    );
}

#[test]
fn divergence_value_filter_sees_resolved_versions() {
    // SPEC §13 "Filters" stage 2: cell filters see resolved cells, so with one version per
    // column an old matching version is not returned (HBase filters before counting versions
    // and would return r/cf:q@1=x).
    let e = env(vec![fam("cf", 3)]);
    put(&e.t, "r", "cf", "q", 1, "x");
    put(&e.t, "r", "cf", "q", 2, "y");
    let f = Filter::Value(CompareOp::Equal, b"x".to_vec());
    assert_eq!(get(&e.t, &Get::new("r").filter(f.clone())), v(&[]));
    assert_eq!(
        get(&e.t, &Get::new("r").all_versions().filter(f)),
        v(&["r/cf:q@1=x"])
    );
}

#[test]
fn single_column_value_filter_selects_rows() {
    let e = env(vec![fam("cf", 3)]);
    put(&e.t, "r1", "cf", "status", 1, "active");
    put(&e.t, "r1", "cf", "name", 1, "ann");
    put(&e.t, "r2", "cf", "status", 1, "closed");
    put(&e.t, "r2", "cf", "name", 1, "bob");
    put(&e.t, "r3", "cf", "name", 1, "cy");
    // The newest version decides: r2 was active before.
    put(&e.t, "r2", "cf", "status", 0, "active");
    let scv = |missing| Filter::SingleColumnValue {
        family: "cf".into(),
        qualifier: b"status".to_vec(),
        op: CompareOp::Equal,
        value: b"active".to_vec(),
        filter_if_missing: missing,
    };
    assert_eq!(
        scan(&e.t, Scan::new().filter(scv(true))),
        v(&["r1/cf:name@1=ann", "r1/cf:status@1=active"])
    );
    assert_eq!(
        scan(&e.t, Scan::new().filter(scv(false))),
        v(&[
            "r1/cf:name@1=ann",
            "r1/cf:status@1=active",
            "r3/cf:name@1=cy"
        ])
    );
}

// ---------------------------------------------------------------------------------------
// Check-and-mutate, increment, append
// ---------------------------------------------------------------------------------------

#[test]
fn check_and_mutate_applies_only_when_the_condition_holds() {
    let e = env(vec![fam("cf", 3)]);
    put(&e.t, "r", "cf", "state", 1, "open");
    let then = |val: &str| {
        RowMutations::new("r").put(Put::new("r").add_at("cf", "state", 2, val.to_owned()))
    };
    let ok =
        e.t.check_and_mutate(
            CheckAndMutate::row("r")
                .if_equals("cf", "state", "closed")
                .then(then("x")),
        )
        .unwrap();
    assert!(!ok);
    assert_eq!(get(&e.t, &Get::new("r")), v(&["r/cf:state@1=open"]));
    let ok =
        e.t.check_and_mutate(
            CheckAndMutate::row("r")
                .if_equals("cf", "state", "open")
                .then(then("closed")),
        )
        .unwrap();
    assert!(ok);
    assert_eq!(get(&e.t, &Get::new("r")), v(&["r/cf:state@2=closed"]));
    // current > given, in the natural order.
    let ok =
        e.t.check_and_mutate(
            CheckAndMutate::row("r")
                .if_matches("cf", "state", CompareOp::Greater, "a")
                .then(RowMutations::new("r").delete(Delete::new("r").columns_at("cf", "state", 2))),
        )
        .unwrap();
    assert!(ok);
    assert_eq!(get(&e.t, &Get::new("r")), v(&[]));
}

#[test]
fn check_and_mutate_absent_and_deleted_columns() {
    let e = env(vec![fam("cf", 3)]);
    let cam = |cond: CheckAndMutate, val: &str| {
        e.t.check_and_mutate(cond.then(RowMutations::new("r").put(Put::new("r").add_at(
            "cf",
            "lock",
            10,
            val.to_owned(),
        ))))
        .unwrap()
    };
    // An absent column fails every comparison, NotEqual included.
    assert!(!cam(
        CheckAndMutate::row("r").if_matches("cf", "lock", CompareOp::NotEqual, "x"),
        "a"
    ));
    assert!(cam(
        CheckAndMutate::row("r").if_absent("cf", "lock"),
        "mine"
    ));
    assert!(!cam(
        CheckAndMutate::row("r").if_absent("cf", "lock"),
        "theirs"
    ));
    assert_eq!(get(&e.t, &Get::new("r")), v(&["r/cf:lock@10=mine"]));
    // A deleted column is absent.
    put(&e.t, "s", "cf", "lock", 1, "held");
    e.db.flush().unwrap();
    e.t.delete(Delete::new("s").columns_at("cf", "lock", 1))
        .unwrap();
    let ok =
        e.t.check_and_mutate(
            CheckAndMutate::row("s")
                .if_absent("cf", "lock")
                .then(RowMutations::new("s").put(Put::new("s").add_at("cf", "lock", 2, "new"))),
        )
        .unwrap();
    assert!(ok);
    assert_eq!(get(&e.t, &Get::new("s")), v(&["s/cf:lock@2=new"]));
}

#[test]
fn increment_treats_the_cell_as_big_endian_i64() {
    let e = env(vec![fam("cf", 3)]);
    let row =
        e.t.increment(Increment::new("r").add("cf", "n", 5))
            .unwrap();
    assert_eq!(row.value("cf", "n"), Some(&5i64.to_be_bytes()[..]));
    let row =
        e.t.increment(Increment::new("r").add("cf", "n", -7))
            .unwrap();
    assert_eq!(row.value("cf", "n"), Some(&(-2i64).to_be_bytes()[..]));
    e.db.flush().unwrap();
    let row =
        e.t.increment(Increment::new("r").add("cf", "n", 10).add("cf", "m", 1))
            .unwrap();
    assert_eq!(row.value("cf", "n"), Some(&8i64.to_be_bytes()[..]));
    assert_eq!(row.value("cf", "m"), Some(&1i64.to_be_bytes()[..]));
    let got = e.t.get(&Get::new("r").column("cf", "n")).unwrap().unwrap();
    assert_eq!(got.value("cf", "n"), Some(&8i64.to_be_bytes()[..]));
    // Three increments made three versions, each newer than the last.
    let versions =
        e.t.get(&Get::new("r").column("cf", "n").all_versions())
            .unwrap()
            .unwrap();
    let ts: Vec<u64> = versions.cells.iter().map(|c| c.timestamp).collect();
    assert_eq!(ts.len(), 3);
    assert!(ts[0] > ts[1] && ts[1] > ts[2], "{ts:?}");
    // A value that is not 8 bytes is refused and nothing is written.
    put(&e.t, "r", "cf", "s", 1, "abc");
    assert!(e
        .t
        .increment(Increment::new("r").add("cf", "s", 1))
        .is_err());
    assert_eq!(
        get(&e.t, &Get::new("r").column("cf", "s")),
        v(&["r/cf:s@1=abc"])
    );
    // Overflow is refused.
    put(&e.t, "o", "cf", "n", 1, "");
    e.t.put(Put::new("o").add_at("cf", "n", 2, i64::MAX.to_be_bytes().to_vec()))
        .unwrap();
    assert!(e
        .t
        .increment(Increment::new("o").add("cf", "n", 1))
        .is_err());
}

#[test]
fn increment_after_an_explicit_future_timestamp_is_newest() {
    let e = env(vec![fam("cf", 3)]);
    let future = now_ms() + 3_600_000;
    e.t.put(Put::new("r").add_at("cf", "n", future, 41i64.to_be_bytes().to_vec()))
        .unwrap();
    let row =
        e.t.increment(Increment::new("r").add("cf", "n", 1))
            .unwrap();
    assert_eq!(row.value("cf", "n"), Some(&42i64.to_be_bytes()[..]));
    let got = e.t.get(&Get::new("r")).unwrap().unwrap();
    assert_eq!(got.cells.len(), 1);
    assert_eq!(got.cells[0].timestamp, future + 1);
    assert_eq!(got.cells[0].value, 42i64.to_be_bytes().to_vec());
}

#[test]
fn append_concatenates_and_returns_the_new_value() {
    let e = env(vec![fam("cf", 3)]);
    let row = e.t.append(Append::new("r").add("cf", "log", "a")).unwrap();
    assert_eq!(row.value("cf", "log"), Some(&b"a"[..]));
    e.db.flush().unwrap();
    let row =
        e.t.append(Append::new("r").add("cf", "log", "b").add("cf", "log", "c"))
            .unwrap();
    assert_eq!(row.value("cf", "log"), Some(&b"abc"[..]));
    let got = e.t.get(&Get::new("r")).unwrap().unwrap();
    assert_eq!(got.value("cf", "log"), Some(&b"abc"[..]));
    // Append after a delete starts from empty.
    e.t.delete(Delete::new("r").columns("cf", "log")).unwrap();
    std::thread::sleep(Duration::from_millis(3));
    let row = e.t.append(Append::new("r").add("cf", "log", "z")).unwrap();
    assert_eq!(row.value("cf", "log"), Some(&b"z"[..]));
}
