//! Compaction's purge rules against the read path (SPEC.md §20.2).
//!
//! Random cells of a few rows and columns (every type, colliding timestamps, unique sequence
//! numbers) under random family settings and a random oldest snapshot `S`. Each property
//! resolves what a compaction kept with the read path's `resolve_cells` and compares it with
//! resolving everything:
//!
//! - A (NEW_VERSION_BEHAVIOR): exact at `P = S` and at `P = max seq`, for reads with any version
//!   limit and time range, bottommost or not; when not bottommost, also with an uncompacted
//!   lower level (older seqs) and an uncompacted upper level (newer seqs) around the inputs.
//! - A (classic): exact at `P = S` for reads over all time. At a larger `P` classic mode allows
//!   one difference, HBase's: a marker written after `S` can hide newer versions and so lift an
//!   older one into view that the compaction already trimmed (SPEC.md §20.2 example 2); columns
//!   such a marker touches are left out of the comparison there.
//! - B: a bottommost compaction with no snapshot, KEEP_DELETED_CELLS FALSE, no purge delay and
//!   every timestamp in the past keeps exactly the puts a read at the read point returns with
//!   the family's VERSIONS: no marker, no masked, duplicate, expired or surplus version.

use std::time::Duration;

use proptest::prelude::*;

use cellar::compaction::purge::{PurgeParams, Purger};
use cellar::format::{CellKey, CellType};
use cellar::read::{resolve_cells, ReadParams, TimeRange};
use cellar::schema::{FamilyDescriptor, KeepDeletedCells};
use cellar::Cell;

const NOW: u64 = 10_000;
/// Timestamps: three long past the TTL below, three inside it; few, so they collide.
const TIMESTAMPS: [u64; 6] = [1, 2, 3, NOW - 30, NOW - 20, NOW - 10];
const TTL: Duration = Duration::from_millis(100);
const ROWS: [&str; 2] = ["r1", "r2"];
const QUALIFIERS: [&str; 3] = ["", "a", "b"];

/// One generated cell before sequence numbers are assigned.
#[derive(Debug, Clone)]
struct Spec {
    row: usize,
    qualifier: usize,
    ts: usize,
    ty: CellType,
}

fn cell_type() -> impl Strategy<Value = CellType> {
    prop_oneof![
        6 => Just(CellType::Put),
        1 => Just(CellType::Delete),
        1 => Just(CellType::DeleteColumn),
        1 => Just(CellType::DeleteFamily),
        1 => Just(CellType::DeleteFamilyVersion),
    ]
}

fn spec() -> impl Strategy<Value = Spec> {
    (
        0..ROWS.len(),
        0..QUALIFIERS.len(),
        0..TIMESTAMPS.len(),
        cell_type(),
    )
        .prop_map(|(row, qualifier, ts, ty)| Spec {
            row,
            qualifier,
            ts,
            ty,
        })
}

fn family() -> impl Strategy<Value = FamilyDescriptor> {
    (
        any::<bool>(),
        1u32..=3,
        0u32..=1,
        any::<bool>(),
        prop_oneof![
            Just(KeepDeletedCells::False),
            Just(KeepDeletedCells::True),
            Just(KeepDeletedCells::Ttl)
        ],
    )
        .prop_map(|(nvb, versions, min, ttl, kdc)| {
            let f = FamilyDescriptor::new("cf")
                .new_version_behavior(nvb)
                .max_versions(versions)
                .min_versions(min)
                .keep_deleted_cells(kdc);
            if ttl {
                f.ttl(TTL)
            } else {
                f
            }
        })
}

/// Stored cells in key order, with unique sequence numbers taken from `seqs` (a permutation
/// of `1..=n`). The value names the sequence number, so equal-timestamp puts stay apart.
fn cells(specs: &[Spec], seqs: &[u64]) -> Vec<(CellKey, Vec<u8>)> {
    let mut out: Vec<(CellKey, Vec<u8>)> = specs
        .iter()
        .zip(seqs)
        .map(|(s, &seq)| {
            let q = if s.ty.is_family_marker() {
                ""
            } else {
                QUALIFIERS[s.qualifier]
            };
            let key = CellKey::new(ROWS[s.row], "cf", q, TIMESTAMPS[s.ts], s.ty, seq);
            let value = if s.ty == CellType::Put {
                format!("#{seq}").into_bytes()
            } else {
                Vec::new()
            };
            (key, value)
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

fn max_seq(cells: &[(CellKey, Vec<u8>)]) -> u64 {
    cells.iter().map(|(k, _)| k.seq).max().unwrap_or(0)
}

/// The cells a compaction with `params` keeps.
fn purge(
    f: &FamilyDescriptor,
    params: PurgeParams,
    cells: &[(CellKey, Vec<u8>)],
) -> Vec<(CellKey, Vec<u8>)> {
    let mut purger = Purger::new(f, params);
    cells
        .iter()
        .filter(|(k, _)| purger.push(&k.as_ref()).is_keep())
        .cloned()
        .collect()
}

fn resolve(f: &FamilyDescriptor, p: ReadParams<'_>, cells: &[(CellKey, Vec<u8>)]) -> Vec<Cell> {
    let mut sorted = cells.to_vec();
    sorted.sort_by(|a, b| a.0.cmp(&b.0));
    resolve_cells(f, p, sorted.iter().map(|(k, v)| (k.as_ref(), v.as_slice())))
        .unwrap_or_else(|e| panic!("resolve: {e}"))
}

/// The reads compared: every version limit up to one past VERSIONS over all time, plus (when
/// `ranged`) a few time ranges.
fn reads(f: &FamilyDescriptor, ranged: bool) -> Vec<(u32, TimeRange)> {
    let mut out: Vec<(u32, TimeRange)> = (1..=f.max_versions + 1)
        .map(|n| (n, TimeRange::ALL))
        .collect();
    if ranged {
        for (lo, hi) in [
            (0, 2),
            (1, 3),
            (2, 4),
            (0, NOW - 15),
            (3, NOW),
            (NOW - 20, NOW + 1),
        ] {
            for n in [1, f.max_versions + 1] {
                out.push((n, TimeRange::new(lo, hi)));
            }
        }
    }
    out
}

fn assert_same_reads(
    f: &FamilyDescriptor,
    point: u64,
    ranged: bool,
    kept: &[(CellKey, Vec<u8>)],
    all: &[(CellKey, Vec<u8>)],
    what: &str,
) {
    for (n, range) in reads(f, ranged) {
        let p = ReadParams::new(point, NOW)
            .max_versions(n)
            .time_range(range);
        assert_eq!(
            resolve(f, p, kept),
            resolve(f, p, all),
            "{what}: read at {point}, {n} versions, {range:?}; family {f:?}"
        );
    }
}

/// True when a marker written after `snapshot` and visible at `point` applies to `cell`'s
/// column: classic mode may then show an older version the compaction trimmed.
fn touched_after(all: &[(CellKey, Vec<u8>)], snapshot: u64, point: u64, cell: &Cell) -> bool {
    all.iter().any(|(k, _)| {
        let k = k.as_ref();
        let Some(ty) = k.cell_type() else {
            return false;
        };
        ty.is_delete()
            && k.seq > snapshot
            && k.seq <= point
            && k.row == cell.row.as_slice()
            && (ty.is_family_marker() || k.qualifier == cell.qualifier.as_slice())
    })
}

fn check_a(
    f: &FamilyDescriptor,
    all: &[(CellKey, Vec<u8>)],
    snapshot: u64,
    split: (u64, u64),
    purge_delay: Duration,
) {
    let top = max_seq(all);
    let nvb = f.new_version_behavior;
    for bottommost in [false, true] {
        // The whole input compacted: exact at S; at the newest point, exact for NVB.
        let params = PurgeParams::new(snapshot, top, NOW)
            .bottommost(bottommost)
            .purge_delay(purge_delay);
        let kept = purge(f, params, all);
        assert_same_reads(f, snapshot, nvb, &kept, all, "at S");
        if nvb {
            assert_same_reads(f, top, true, &kept, all, "at max");
        } else {
            for (n, range) in reads(f, false) {
                let p = ReadParams::new(top, NOW).max_versions(n).time_range(range);
                let trim = |cells: Vec<Cell>| -> Vec<Cell> {
                    cells
                        .into_iter()
                        .filter(|c| !touched_after(all, snapshot, top, c))
                        .collect()
                };
                assert_eq!(
                    trim(resolve(f, p, &kept)),
                    trim(resolve(f, p, all)),
                    "classic at max, {n} versions; family {f:?}"
                );
            }
        }
    }
    if nvb {
        // Three levels: lower (seq <= lo, not compacted), the inputs, upper (seq > hi, not
        // compacted). Not bottommost, since a lower level exists.
        let (lo, hi) = split;
        let level = |c: &&(CellKey, Vec<u8>)| c.0.seq > lo && c.0.seq <= hi;
        let inputs: Vec<_> = all.iter().filter(level).cloned().collect();
        let params = PurgeParams::new(snapshot, max_seq(&inputs), NOW).purge_delay(purge_delay);
        let mut world = purge(f, params, &inputs);
        world.extend(all.iter().filter(|c| !level(c)).cloned());
        assert_same_reads(f, snapshot, true, &world, all, "levels at S");
        assert_same_reads(f, top, true, &world, all, "levels at max");
        // Bottommost: nothing below; the upper level stays out of it when deletes are purged
        // (the known limit of SPEC.md §20.2 example 5).
        let inputs: Vec<_> = all.iter().filter(|c| c.0.seq <= hi).cloned().collect();
        let params = PurgeParams::new(snapshot, max_seq(&inputs), NOW)
            .bottommost(true)
            .purge_delay(purge_delay);
        if f.new_version_behavior || !params.purges_deletes() || hi >= top {
            let mut world = purge(f, params, &inputs);
            world.extend(all.iter().filter(|c| c.0.seq > hi).cloned());
            assert_same_reads(f, snapshot, true, &world, all, "bottom levels at S");
            assert_same_reads(f, top, true, &world, all, "bottom levels at max");
        }
    }
}

/// Cells and their sequence numbers. Half the cases use only the old timestamps, so columns
/// whose versions are all past the TTL (MIN_VERSIONS at work) are common.
fn inputs() -> impl Strategy<Value = (Vec<Spec>, Vec<u64>)> {
    (prop::collection::vec(spec(), 0..24), any::<bool>()).prop_flat_map(|(mut specs, old)| {
        if old {
            for s in &mut specs {
                s.ts %= 3;
            }
        }
        let n = specs.len() as u64;
        let seqs = Just((1..=n).collect::<Vec<u64>>()).prop_shuffle();
        (Just(specs), seqs)
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn kept_cells_read_the_same(
        (specs, seqs) in inputs(),
        f in family(),
        // Half the cases with no snapshot (S = the newest seq), where deletes are purged.
        snapshot_frac in prop_oneof![Just(1.0f64), 0.0f64..=1.0],
        split in (0.0f64..=1.0, 0.0f64..=1.0),
        delay in prop_oneof![Just(0u64), Just(15), Just(1000)],
    ) {
        let all = cells(&specs, &seqs);
        let top = max_seq(&all);
        let at = |x: f64| (x * top as f64).round() as u64;
        let snapshot = at(snapshot_frac);
        let (a, b) = (at(split.0), at(split.1));
        check_a(&f, &all, snapshot, (a.min(b), a.max(b)), Duration::from_millis(delay));
    }

    #[test]
    fn a_major_compaction_without_snapshots_keeps_only_what_reads_return(
        (specs, seqs) in inputs(),
        f in family(),
    ) {
        // Classic families: NEW_VERSION_BEHAVIOR keeps markers and deleted versions within
        // VERSIONS on purpose (SPEC.md §20.2, example 5).
        let f = f
            .keep_deleted_cells(KeepDeletedCells::False)
            .new_version_behavior(false);
        let all = cells(&specs, &seqs);
        let top = max_seq(&all);
        let kept = purge(&f, PurgeParams::new(top, top, NOW).bottommost(true), &all);
        prop_assert!(kept.iter().all(|(k, _)| k.cell_type() == Some(CellType::Put)));
        let read = ReadParams::new(top, NOW).max_versions(f.max_versions);
        let as_cells: Vec<Cell> = kept
            .iter()
            .map(|(k, v)| Cell::from_key(&k.as_ref(), v).unwrap_or_else(|e| panic!("{e}")))
            .collect();
        prop_assert_eq!(as_cells, resolve(&f, read, &all));
    }
}

// ---- The timing-dependent examples of SPEC.md §20.2, as the engine behaves today ----

fn put(q: &str, ts: u64, seq: u64) -> (CellKey, Vec<u8>) {
    (
        CellKey::new("r", "cf", q, ts, CellType::Put, seq),
        format!("#{seq}").into_bytes(),
    )
}

fn marker(q: &str, ts: u64, ty: CellType, seq: u64) -> (CellKey, Vec<u8>) {
    (CellKey::new("r", "cf", q, ts, ty, seq), Vec::new())
}

/// Values (`#seq`) a read at the newest point returns.
fn values(f: &FamilyDescriptor, range: TimeRange, cells: &[(CellKey, Vec<u8>)]) -> Vec<String> {
    let read = ReadParams::new(u64::MAX, NOW).time_range(range);
    resolve(f, read, cells)
        .iter()
        .map(|c| String::from_utf8_lossy(&c.value).into_owned())
        .collect()
}

fn compact(
    f: &FamilyDescriptor,
    bottommost: bool,
    cells: &[(CellKey, Vec<u8>)],
) -> Vec<(CellKey, Vec<u8>)> {
    let mut sorted = cells.to_vec();
    sorted.sort_by(|a, b| a.0.cmp(&b.0));
    let top = max_seq(&sorted);
    purge(
        f,
        PurgeParams::new(top, top, NOW).bottommost(bottommost),
        &sorted,
    )
}

#[test]
fn example_1_classic_put_after_delete_depends_on_the_purge() {
    let f = FamilyDescriptor::new("cf");
    let before = vec![marker("a", 10, CellType::DeleteColumn, 1), put("a", 5, 2)];
    assert!(values(&f, TimeRange::ALL, &before).is_empty());
    let mut compacted = compact(&f, true, &before);
    assert!(compacted.is_empty());
    // The same put written again after the purge shows; written before it, it did not.
    compacted.push(put("a", 5, 3));
    assert_eq!(values(&f, TimeRange::ALL, &compacted), ["#3"]);
    let mut uncompacted = before;
    uncompacted.push(put("a", 5, 3));
    assert!(values(&f, TimeRange::ALL, &uncompacted).is_empty());
}

#[test]
fn example_2_classic_delete_uncovers_an_older_version_unless_compacted() {
    let f = FamilyDescriptor::new("cf").max_versions(1);
    let puts = vec![put("a", 1, 1), put("a", 2, 2)];
    let delete = marker("a", 2, CellType::Delete, 3);
    let mut uncompacted = puts.clone();
    uncompacted.push(delete.clone());
    assert_eq!(values(&f, TimeRange::ALL, &uncompacted), ["#1"]);
    let mut compacted = compact(&f, false, &puts);
    compacted.push(delete);
    assert!(values(&f, TimeRange::ALL, &compacted).is_empty());
}

#[test]
fn example_4_classic_keep_deleted_cells_trims_deleted_versions() {
    let f = FamilyDescriptor::new("cf")
        .max_versions(1)
        .keep_deleted_cells(KeepDeletedCells::True);
    let cells = vec![
        put("a", 2, 1),
        marker("a", 2, CellType::DeleteColumn, 2),
        put("a", 1, 3),
    ];
    let range = TimeRange::new(0, 2);
    assert_eq!(values(&f, range, &cells), ["#3"]);
    assert!(values(&f, range, &compact(&f, true, &cells)).is_empty());
}

#[test]
fn example_5_nvb_keeps_deleted_versions_so_a_later_write_reads_the_same() {
    // The read path counts the deleted a@5 against a@3 whenever a@3 was written; purging a@5
    // would change the answer for a put written after the purge, so NEW_VERSION_BEHAVIOR
    // keeps both the deleted version and its marker.
    let f = FamilyDescriptor::new("cf")
        .max_versions(1)
        .new_version_behavior(true);
    let before = vec![put("a", 5, 1), marker("a", 5, CellType::DeleteColumn, 2)];
    let later = put("a", 3, 3);
    let mut uncompacted = before.clone();
    uncompacted.push(later.clone());
    assert!(values(&f, TimeRange::ALL, &uncompacted).is_empty());
    let mut compacted = compact(&f, true, &before);
    assert_eq!(compacted.len(), 2);
    compacted.push(later);
    assert!(values(&f, TimeRange::ALL, &compacted).is_empty());
}
