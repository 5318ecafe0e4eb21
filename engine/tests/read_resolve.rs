//! Version resolution, one test per rule of MISSION.md "The read semantics in detail".
//!
//! Each test writes cells with explicit timestamp, sequence number and type, in any order (the
//! helper sorts them into key order as a merge would), and asserts the exact result.

use std::collections::BTreeSet;
use std::time::Duration;

use cellar::format::{CellKey, CellType, KeyRef};
use cellar::read::{resolve_cells, ReadParams, RowResolver, TimeRange, Verdict};
use cellar::schema::{FamilyDescriptor, KeepDeletedCells};

use CellType::{Delete, DeleteColumn, DeleteFamily, DeleteFamilyVersion, Put};

const NOW: u64 = 1_000_000;

/// One stored cell of row "r", family "cf".
fn c(q: &str, ts: u64, ty: CellType, seq: u64) -> (CellKey, Vec<u8>) {
    let v = if ty == Put {
        format!("{q}@{ts}#{seq}").into_bytes()
    } else {
        Vec::new()
    };
    (CellKey::new("r", "cf", q, ts, ty, seq), v)
}

fn fam() -> FamilyDescriptor {
    FamilyDescriptor::new("cf").max_versions(10)
}

fn params() -> ReadParams<'static> {
    ReadParams::new(u64::MAX, NOW)
}

/// The result as `(qualifier, ts, type, seq-tag-of-value)` strings: `"q@ts"` for a put (with
/// `#seq` to tell equal-timestamp writes apart), `"q@ts:Type"` for a raw marker.
fn run(f: &FamilyDescriptor, p: ReadParams<'_>, mut cells: Vec<(CellKey, Vec<u8>)>) -> Vec<String> {
    cells.sort_by(|a, b| a.0.cmp(&b.0));
    let got = resolve_cells(f, p, cells.iter().map(|(k, v)| (k.as_ref(), v.as_slice())))
        .unwrap_or_else(|e| panic!("resolve failed: {e}"));
    got.iter()
        .map(|c| {
            let q = String::from_utf8_lossy(&c.qualifier);
            if c.cell_type == Put {
                String::from_utf8_lossy(&c.value).into_owned()
            } else {
                format!("{q}@{}:{}", c.timestamp, c.cell_type.name())
            }
        })
        .collect()
}

fn verdicts(
    f: &FamilyDescriptor,
    p: ReadParams<'_>,
    mut cells: Vec<(CellKey, Vec<u8>)>,
) -> Vec<Verdict> {
    cells.sort_by(|a, b| a.0.cmp(&b.0));
    let mut r = RowResolver::new(f, p);
    cells.iter().map(|(k, _)| r.push(&k.as_ref())).collect()
}

// ---- Rule 1: newest version by default; N versions; time range [min, max) ----

#[test]
fn get_returns_the_newest_version_by_default() {
    let cells = vec![c("a", 1, Put, 1), c("a", 3, Put, 2), c("a", 2, Put, 3)];
    assert_eq!(run(&fam(), params(), cells), ["a@3#2"]);
}

#[test]
fn max_versions_returns_the_n_newest() {
    let cells = vec![
        c("a", 1, Put, 1),
        c("a", 3, Put, 2),
        c("a", 2, Put, 3),
        c("b", 5, Put, 4),
    ];
    assert_eq!(
        run(&fam(), params().max_versions(2), cells),
        ["a@3#2", "a@2#3", "b@5#4"]
    );
}

#[test]
fn family_versions_caps_the_query() {
    let f = FamilyDescriptor::new("cf").max_versions(2);
    let cells = vec![c("a", 1, Put, 1), c("a", 2, Put, 2), c("a", 3, Put, 3)];
    assert_eq!(run(&f, params().max_versions(5), cells), ["a@3#3", "a@2#2"]);
}

#[test]
fn time_range_is_half_open() {
    let cells = (1..=5).map(|t| c("a", t, Put, t)).collect();
    let p = params().max_versions(10).time_range(TimeRange::new(2, 4));
    assert_eq!(run(&fam(), p, cells), ["a@3#3", "a@2#2"]);
}

#[test]
fn version_limit_applies_after_the_time_range() {
    let cells = (1..=5).map(|t| c("a", t, Put, t)).collect();
    let p = params().time_range(TimeRange::new(0, 3));
    assert_eq!(run(&fam(), p, cells), ["a@2#2"]);
}

#[test]
fn exact_timestamp_reads_that_version_only() {
    let cells = (1..=5).map(|t| c("a", t, Put, t)).collect();
    let p = params().max_versions(3).time_range(TimeRange::at(4));
    assert_eq!(run(&fam(), p, cells), ["a@4#4"]);
}

// ---- Rule 2: equal row/column/timestamp, the later write wins ----

#[test]
fn equal_timestamp_puts_the_later_write_wins() {
    let cells = vec![c("a", 7, Put, 1), c("a", 7, Put, 9), c("a", 7, Put, 4)];
    assert_eq!(run(&fam(), params(), cells), ["a@7#9"]);
}

#[test]
fn equal_timestamp_older_writes_never_show_even_with_more_versions() {
    let cells = vec![c("a", 7, Put, 1), c("a", 7, Put, 9), c("a", 6, Put, 2)];
    let f = fam();
    assert_eq!(
        run(&f, params().max_versions(3), cells.clone()),
        ["a@7#9", "a@6#2"]
    );
    assert_eq!(
        verdicts(&f, params().max_versions(3), cells),
        [Verdict::Include, Verdict::Duplicate, Verdict::Include]
    );
}

// ---- Rule 4: what each marker masks ----

#[test]
fn delete_masks_exactly_its_version() {
    let cells = vec![
        c("a", 3, Put, 1),
        c("a", 2, Put, 2),
        c("a", 1, Put, 3),
        c("a", 2, Delete, 4),
    ];
    assert_eq!(
        run(&fam(), params().max_versions(5), cells),
        ["a@3#1", "a@1#3"]
    );
}

#[test]
fn delete_masks_every_write_at_its_timestamp() {
    let cells = vec![
        c("a", 2, Put, 1),
        c("a", 2, Put, 3),
        c("a", 2, Delete, 2),
        c("a", 1, Put, 4),
    ];
    assert_eq!(run(&fam(), params().max_versions(5), cells), ["a@1#4"]);
}

#[test]
fn delete_column_masks_its_column_at_or_below() {
    let cells = vec![
        c("a", 5, Put, 1),
        c("a", 4, Put, 2),
        c("a", 3, Put, 3),
        c("a", 4, DeleteColumn, 4),
        c("b", 2, Put, 5),
    ];
    assert_eq!(
        run(&fam(), params().max_versions(5), cells),
        ["a@5#1", "b@2#5"]
    );
}

#[test]
fn delete_family_masks_every_column_at_or_below() {
    let cells = vec![
        c("a", 5, Put, 1),
        c("a", 3, Put, 2),
        c("b", 3, Put, 3),
        c("c", 9, Put, 4),
        c("", 3, DeleteFamily, 5),
    ];
    assert_eq!(
        run(&fam(), params().max_versions(5), cells),
        ["a@5#1", "c@9#4"]
    );
}

#[test]
fn delete_family_version_masks_every_column_at_exactly_its_timestamp() {
    let cells = vec![
        c("a", 4, Put, 1),
        c("a", 3, Put, 2),
        c("a", 2, Put, 3),
        c("b", 3, Put, 4),
        c("", 3, DeleteFamilyVersion, 5),
    ];
    assert_eq!(
        run(&fam(), params().max_versions(5), cells),
        ["a@4#1", "a@2#3"]
    );
}

#[test]
fn family_markers_and_the_empty_qualifier_column_interleave_correctly() {
    // Column "" sorts with the family markers by timestamp: the put at 10 comes before the
    // DeleteFamily at 5 and must survive it; the put at 3 comes after and is masked.
    let cells = vec![
        c("", 10, Put, 1),
        c("", 3, Put, 2),
        c("", 5, DeleteFamily, 3),
        c("x", 4, Put, 4),
        c("x", 6, Put, 5),
    ];
    assert_eq!(
        run(&fam(), params().max_versions(5), cells),
        ["@10#1", "x@6#5"]
    );
}

#[test]
fn the_newest_delete_family_wins_over_older_ones() {
    let cells = vec![
        c("", 2, DeleteFamily, 1),
        c("", 8, DeleteFamily, 2),
        c("a", 7, Put, 3),
        c("a", 9, Put, 4),
    ];
    assert_eq!(run(&fam(), params().max_versions(5), cells), ["a@9#4"]);
}

// ---- Rule 5: classic mode ----

#[test]
fn classic_marker_masks_a_later_put_with_an_older_timestamp() {
    // Delete written at seq 5 with ts 10; a put written afterwards (seq 6) at ts 8 stays hidden.
    let cells = vec![c("a", 10, DeleteColumn, 5), c("a", 8, Put, 6)];
    assert_eq!(run(&fam(), params(), cells), Vec::<String>::new());
    let cells = vec![c("", 10, DeleteFamily, 5), c("a", 8, Put, 6)];
    assert_eq!(run(&fam(), params(), cells), Vec::<String>::new());
    let cells = vec![c("a", 8, Delete, 5), c("a", 8, Put, 6)];
    assert_eq!(run(&fam(), params(), cells), Vec::<String>::new());
}

#[test]
fn classic_deleted_versions_do_not_count_toward_versions() {
    let f = FamilyDescriptor::new("cf").max_versions(2);
    let cells = vec![
        c("a", 1, Put, 1),
        c("a", 2, Put, 2),
        c("a", 3, Put, 3),
        c("a", 3, Delete, 4),
    ];
    // The version at 1 shows again: only 3 was deleted, and it does not count.
    assert_eq!(run(&f, params().max_versions(2), cells), ["a@2#2", "a@1#1"]);
}

// ---- Rule 6: NEW_VERSION_BEHAVIOR ----

fn nvb() -> FamilyDescriptor {
    FamilyDescriptor::new("cf")
        .max_versions(10)
        .new_version_behavior(true)
}

#[test]
fn nvb_marker_masks_only_puts_written_before_it() {
    let cells = vec![
        c("a", 10, DeleteColumn, 5),
        c("a", 8, Put, 6),
        c("a", 7, Put, 4),
    ];
    assert_eq!(run(&nvb(), params().max_versions(5), cells), ["a@8#6"]);
}

#[test]
fn nvb_every_marker_kind_spares_later_writes() {
    let cells = vec![
        c("", 9, DeleteFamily, 5),
        c("", 6, DeleteFamilyVersion, 5),
        c("a", 7, Delete, 5),
        c("a", 7, Put, 6),
        c("a", 6, Put, 7),
        c("b", 5, Put, 8),
        c("b", 4, Put, 1),
    ];
    assert_eq!(
        run(&nvb(), params().max_versions(5), cells),
        ["a@7#6", "a@6#7", "b@5#8"]
    );
}

#[test]
fn nvb_delete_family_uses_the_right_marker_for_each_timestamp() {
    // DF(ts 9, seq 2) and DF(ts 5, seq 8). A put at ts 7 (seq 4) is covered only by the
    // first, written before it, so it survives; a put at ts 3 (seq 4) is also covered by the
    // second, written after it, and is masked; b@8 (seq 1) predates the first.
    let cells = vec![
        c("", 9, DeleteFamily, 2),
        c("", 5, DeleteFamily, 8),
        c("a", 7, Put, 4),
        c("a", 3, Put, 4),
        c("b", 8, Put, 1),
    ];
    assert_eq!(run(&nvb(), params().max_versions(5), cells), ["a@7#4"]);
}

#[test]
fn nvb_deleted_versions_count_toward_versions() {
    let f = FamilyDescriptor::new("cf")
        .max_versions(2)
        .new_version_behavior(true);
    let cells = vec![
        c("a", 1, Put, 1),
        c("a", 2, Put, 2),
        c("a", 3, Put, 3),
        c("a", 3, Delete, 4),
    ];
    // 3 is deleted but still one of the two versions kept: 1 does not come back.
    assert_eq!(run(&f, params().max_versions(2), cells), ["a@2#2"]);
}

#[test]
fn nvb_family_versions_ignore_the_query_time_range() {
    // Choice (resolve.rs): NVB applies VERSIONS to everything the read point sees, as
    // compaction would, so a ranged read never finds a version compaction trims.
    let f = FamilyDescriptor::new("cf")
        .max_versions(1)
        .new_version_behavior(true);
    let cells = vec![c("a", 10, Put, 1), c("a", 5, Put, 2)];
    let p = params().time_range(TimeRange::new(0, 8));
    assert_eq!(run(&f, p, cells.clone()), Vec::<String>::new());
    // Classic follows HBase: the version limit counts after the range.
    let f = FamilyDescriptor::new("cf").max_versions(1);
    assert_eq!(run(&f, p, cells), ["a@5#2"]);
}

// ---- MVCC read point ----

#[test]
fn read_point_hides_later_puts() {
    let cells = vec![c("a", 1, Put, 1), c("a", 2, Put, 7)];
    assert_eq!(run(&fam(), ReadParams::new(5, NOW), cells), ["a@1#1"]);
}

#[test]
fn read_point_hides_later_markers() {
    let cells = vec![
        c("a", 1, Put, 1),
        c("a", 1, Delete, 7),
        c("", 1, DeleteFamily, 8),
    ];
    assert_eq!(
        run(&fam(), ReadParams::new(5, NOW), cells.clone()),
        ["a@1#1"]
    );
    assert_eq!(
        run(&fam(), ReadParams::new(8, NOW), cells),
        Vec::<String>::new()
    );
}

#[test]
fn read_point_hides_the_later_of_two_equal_timestamp_puts() {
    let cells = vec![c("a", 4, Put, 2), c("a", 4, Put, 9)];
    assert_eq!(run(&fam(), ReadParams::new(5, NOW), cells), ["a@4#2"]);
}

// ---- Rule 7: TTL and MIN_VERSIONS ----

#[test]
fn ttl_hides_cells_older_than_now_minus_ttl() {
    let f = fam().ttl(Duration::from_millis(100));
    let cells = vec![
        c("a", NOW - 50, Put, 1),
        c("a", NOW - 100, Put, 2),
        c("a", NOW - 101, Put, 3),
    ];
    // NOW - 100 is exactly at the cutoff: not older, still visible.
    assert_eq!(
        run(&f, params().max_versions(5), cells),
        [format!("a@{}#1", NOW - 50), format!("a@{}#2", NOW - 100)]
    );
}

#[test]
fn min_versions_keep_the_newest_versions_past_the_ttl() {
    let f = fam().ttl(Duration::from_millis(100)).min_versions(2);
    let cells = vec![c("a", 10, Put, 1), c("a", 20, Put, 2), c("a", 30, Put, 3)];
    assert_eq!(
        run(&f, params().max_versions(5), cells),
        ["a@30#3", "a@20#2"]
    );
}

#[test]
fn min_versions_count_only_unmasked_versions_in_classic_mode() {
    let f = fam().ttl(Duration::from_millis(100)).min_versions(1);
    let cells = vec![
        c("a", 20, Put, 1),
        c("a", 30, Put, 2),
        c("a", 30, Delete, 3),
    ];
    assert_eq!(run(&f, params().max_versions(5), cells), ["a@20#1"]);
}

#[test]
fn ttl_expired_verdict() {
    let f = fam().ttl(Duration::from_millis(100));
    let v = verdicts(&f, params(), vec![c("a", NOW, Put, 1), c("a", 1, Put, 2)]);
    assert_eq!(v, [Verdict::Include, Verdict::Expired]);
}

// ---- Rule 8: KEEP_DELETED_CELLS ----

#[test]
fn keep_deleted_cells_lets_a_read_ending_before_the_marker_see_deleted_cells() {
    let cells = vec![
        c("a", 5, Put, 1),
        c("a", 3, Put, 2),
        c("a", 6, DeleteColumn, 3),
    ];
    let range = TimeRange::new(0, 6); // ends at the marker's timestamp
    for k in [KeepDeletedCells::True, KeepDeletedCells::Ttl] {
        let f = fam().keep_deleted_cells(k);
        assert_eq!(
            run(
                &f,
                params().max_versions(5).time_range(range),
                cells.clone()
            ),
            ["a@5#1", "a@3#2"]
        );
        // A read whose range covers the marker is still masked.
        assert_eq!(
            run(&f, params().max_versions(5), cells.clone()),
            Vec::<String>::new()
        );
    }
}

#[test]
fn without_keep_deleted_cells_a_marker_masks_even_a_read_ending_before_it() {
    let cells = vec![c("a", 5, Put, 1), c("a", 6, DeleteColumn, 3)];
    let p = params().time_range(TimeRange::new(0, 6));
    assert_eq!(run(&fam(), p, cells), Vec::<String>::new());
}

// ---- Rule 9: raw reads ----

#[test]
fn raw_returns_every_version_and_marker_in_order() {
    let cells = vec![
        c("", 5, DeleteFamily, 9),
        c("a", 6, Put, 1),
        c("a", 4, Put, 2),
        c("a", 4, Put, 3),
        c("a", 4, Delete, 4),
    ];
    assert_eq!(
        run(&fam(), params().raw(true), cells),
        ["@5:DeleteFamily", "a@6#1", "a@4:Delete", "a@4#3", "a@4#2"]
    );
}

#[test]
fn raw_honours_the_read_point_and_the_time_range() {
    let cells = vec![
        c("a", 6, Put, 1),
        c("a", 4, Put, 2),
        c("a", 4, Delete, 8),
        c("a", 2, Put, 3),
    ];
    let p = ReadParams::new(5, NOW)
        .raw(true)
        .time_range(TimeRange::new(3, 10));
    assert_eq!(run(&fam(), p, cells), ["a@6#1", "a@4#2"]);
}

// ---- Column selection ----

#[test]
fn column_selection_reads_only_chosen_columns_but_family_markers_still_mask() {
    let cols: BTreeSet<Vec<u8>> = [b"b".to_vec()].into_iter().collect();
    let cells = vec![
        c("", 2, DeleteFamily, 9),
        c("a", 5, Put, 1),
        c("b", 5, Put, 2),
        c("b", 2, Put, 3),
        c("c", 5, Put, 4),
    ];
    let p = params().max_versions(5).columns(Some(&cols));
    assert_eq!(run(&fam(), p, cells), ["b@5#2"]);
}

#[test]
fn markers_of_unselected_columns_are_ignored() {
    let cols: BTreeSet<Vec<u8>> = [b"b".to_vec()].into_iter().collect();
    let cells = vec![
        c("a", 9, DeleteColumn, 5),
        c("a", 5, Put, 1),
        c("b", 5, Put, 2),
    ];
    let p = params().columns(Some(&cols));
    let v = verdicts(&fam(), p, cells);
    assert_eq!(
        v,
        [Verdict::NotSelected, Verdict::NotSelected, Verdict::Include]
    );
}

// ---- Streaming use ----

#[test]
fn resolve_cells_restarts_at_each_row() {
    let mut cells = [
        (CellKey::new("r1", "cf", "", 9, DeleteFamily, 5), Vec::new()),
        (CellKey::new("r1", "cf", "a", 3, Put, 1), b"r1a".to_vec()),
        (CellKey::new("r2", "cf", "a", 3, Put, 2), b"r2a".to_vec()),
    ];
    cells.sort_by(|a, b| a.0.cmp(&b.0));
    let got = resolve_cells(
        &fam(),
        params(),
        cells.iter().map(|(k, v)| (k.as_ref(), v.as_slice())),
    )
    .unwrap_or_default();
    let rows: Vec<&[u8]> = got.iter().map(|c| c.row.as_slice()).collect();
    assert_eq!(rows, [b"r2".as_slice()]);
}

#[test]
fn column_done_signals_a_seek_to_the_next_column() {
    let cells = [c("a", 3, Put, 1), c("a", 2, Put, 2)];
    let f = fam();
    let mut r = RowResolver::new(&f, params());
    assert_eq!(r.push(&cells[0].0.as_ref()), Verdict::Include);
    assert!(r.column_done());
    assert_eq!(r.push(&cells[1].0.as_ref()), Verdict::TooManyVersions);
    assert_eq!(
        r.push(&KeyRef {
            type_code: 255,
            ..cells[1].0.as_ref()
        }),
        Verdict::Invisible
    );
}

// ---- A row's first cell, judged without the resolver's state ----

mod first_cell {
    use super::*;
    use proptest::prelude::*;

    /// Type codes: the five stored types, and codes no cell type has.
    const CODES: [u8; 8] = [4, 8, 10, 12, 14, 0, 13, 255];

    fn family(
        versions: u32,
        min: u32,
        ttl_ms: Option<u64>,
        nvb: bool,
        kdc: u8,
    ) -> FamilyDescriptor {
        let mut f = FamilyDescriptor::new("cf")
            .max_versions(versions)
            .min_versions(min)
            .new_version_behavior(nvb)
            .keep_deleted_cells(match kdc {
                0 => KeepDeletedCells::False,
                1 => KeepDeletedCells::True,
                _ => KeepDeletedCells::Ttl,
            });
        if let Some(ms) = ttl_ms {
            f = f.ttl(Duration::from_millis(ms));
        }
        f
    }

    /// Mostly puts: most of what a put's verdict depends on comes after its type.
    fn code() -> impl Strategy<Value = u8> {
        prop_oneof![3 => Just(CellType::Put as u8), 2 => proptest::sample::select(CODES.to_vec())]
    }

    fn tags(kind: u8, ttl: u64) -> Vec<u8> {
        match kind {
            0 => Vec::new(),
            1 => cellar::tags::encode_cell_ttl(ttl),
            // A tag of another type, then a cell TTL.
            2 => {
                let mut t = vec![9, 1, 0];
                t.extend(cellar::tags::encode_cell_ttl(ttl));
                t
            }
            // Damaged: a cell TTL tag cut short.
            _ => vec![cellar::tags::TAG_CELL_TTL, 8, 1, 2],
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(4000))]

        /// `first_cell_verdict` is what `push_with_tags` says of a row's first cell, on a
        /// fresh resolver and on one reset after resolving another row.
        #[test]
        fn agrees_with_push_after_reset(
            (versions, min, ttl_ms, nvb, kdc) in (0u32..3, 0u32..3, proptest::option::of(0u64..60), any::<bool>(), 0u8..3),
            (read_point, now, max_versions, raw) in (0u64..12, 0u64..90, 0u32..3, any::<bool>()),
            columns in proptest::option::of(proptest::collection::btree_set(prop_oneof![Just(b"".to_vec()), Just(b"a".to_vec()), Just(b"b".to_vec())], 0..3)),
            (lo, len) in (0u64..100, 0u64..120),
            (q, ts, code, seq) in (prop_oneof![Just(""), Just("a"), Just("c")], 0u64..60, code(), 0u64..12),
            (tag_kind, tag_ttl) in (0u8..4, 0u64..40),
            earlier in proptest::collection::vec((prop_oneof![Just(""), Just("a"), Just("c")], 0u64..60, code(), 0u64..12), 0..6),
            ranges in proptest::collection::vec((0usize..4, 0usize..4, 0u64..60, 1u64..12), 0..3),
        ) {
            let f = family(versions, min, ttl_ms, nvb, kdc);
            // Row-range deletes (SPEC.md §13 rule 8) around the two rows "p" and "r".
            let bounds = ["", "q", "r", "s"];
            let deletes: Vec<cellar::types::RangeDelete> = ranges
                .iter()
                .filter(|(a, b, _, _)| *b == 0 || a < b)
                .map(|&(a, b, ts, seq)| cellar::types::RangeDelete {
                    start: bounds[a].as_bytes().to_vec(),
                    stop: bounds[b].as_bytes().to_vec(),
                    ts,
                    seq,
                })
                .collect();
            let deletes = cellar::read::range_index::RangeDeletes::new(deletes);
            let p = ReadParams::new(read_point, now)
                .columns(columns.as_ref())
                .max_versions(max_versions)
                .time_range(TimeRange::new(lo, lo.saturating_add(len)))
                .raw(raw);
            let tags = tags(tag_kind, tag_ttl);
            let key = CellKey::new("r", "cf", q, ts, Put, seq);
            let key = KeyRef { type_code: code, ..key.as_ref() };
            let mut fresh = RowResolver::new(&f, p).with_range_deletes(&deletes);
            let want = fresh.push_with_tags(&key, &tags);
            prop_assert_eq!(fresh.first_cell_verdict(&key, &tags), want);
            // Another row's cells first (in key order, as a reader feeds them), then a reset.
            let mut used = RowResolver::new(&f, p).with_range_deletes(&deletes);
            let mut others: Vec<CellKey> = earlier
                .iter()
                .map(|&(q, ts, code, seq)| {
                    let k = CellKey::new("p", "cf", q, ts, Put, seq);
                    KeyRef { type_code: code, ..k.as_ref() }.to_owned_key()
                })
                .collect();
            others.sort();
            for k in &others {
                used.push_with_tags(&k.as_ref(), &[]);
            }
            used.reset();
            prop_assert_eq!(used.first_cell_verdict(&key, &tags), want);
            prop_assert_eq!(used.push_with_tags(&key, &tags), want);
        }
    }
}
