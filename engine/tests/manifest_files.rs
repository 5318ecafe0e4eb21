//! Manifest on real files: create, reopen, roll-over, torn and corrupt manifests, CURRENT
//! problems, and the obsolete-file listing.

use std::path::Path;
use std::sync::Arc;

use cellar::format::cell::CellKey;
use cellar::fs::{FileSystem, RealFs, SharedFs};
use cellar::manifest::{
    hfile_path, manifest_file_name, parse_manifest_file_name, Manifest, ManifestOptions,
    ManifestState, TableEntry, VersionEdit, CURRENT, CURRENT_TMP,
};
use cellar::schema::{FamilyDescriptor, TableDescriptor};
use cellar::types::FileMeta;
use cellar::Error;

fn fs() -> SharedFs {
    Arc::new(RealFs)
}

fn table(id: u32, name: &str, fams: &[(&str, u32)]) -> TableEntry {
    let mut d = TableDescriptor::new(name);
    for (f, _) in fams {
        d = d.family(FamilyDescriptor::new(*f).max_versions(5));
    }
    TableEntry {
        id,
        descriptor: d,
        family_ids: fams.iter().map(|(_, id)| *id).collect(),
    }
}

fn file(number: u64, family: u32, level: u32) -> FileMeta {
    FileMeta {
        number,
        family,
        level,
        size: 4096,
        smallest: CellKey::first_on_row(format!("k{number:08}a").as_bytes()).encode(),
        largest: CellKey::first_on_row(format!("k{number:08}z").as_bytes()).encode(),
        min_seq: 1,
        max_seq: number,
        min_ts: 10,
        max_ts: 20,
        entries: 7,
        deletes: 1,
        created_ms: 5,
        crc: None,
        range_clean: 0,
    }
}

fn manifests(dir: &Path) -> Vec<u64> {
    RealFs
        .list(dir)
        .unwrap()
        .iter()
        .filter_map(|n| parse_manifest_file_name(n))
        .collect()
}

/// The state minus `next_file_number`, which every open moves on (it takes a new manifest
/// number).
fn comparable(s: &ManifestState) -> VersionEdit {
    VersionEdit {
        next_file_number: None,
        ..s.snapshot_edit()
    }
}

/// A database with a namespace, two tables, files at several levels and counters set.
fn populated(dir: &Path) -> (Manifest, ManifestState) {
    let (mut m, mut s) = Manifest::create(fs(), dir).unwrap();
    m.log_and_apply(
        &mut s,
        VersionEdit {
            create_namespaces: vec!["ns".into()],
            put_tables: vec![
                table(1, "users", &[("cf", 1), ("meta", 2)]),
                table(2, "ns:events", &[("e", 3)]),
            ],
            ..Default::default()
        },
    )
    .unwrap();
    let (a, b, c) = (
        s.allocate_file_number(),
        s.allocate_file_number(),
        s.allocate_file_number(),
    );
    m.log_and_apply(
        &mut s,
        VersionEdit {
            added_files: vec![file(a, 1, 0), file(b, 1, 2), file(c, 3, 0)],
            flushed_seq: vec![(1, 40), (3, 41)],
            last_seq: Some(41),
            log_number: Some(3),
            ..Default::default()
        },
    )
    .unwrap();
    m.log_and_apply(
        &mut s,
        VersionEdit {
            deleted_files: vec![(1, 0, a)],
            added_files: vec![FileMeta {
                level: 1,
                ..file(a, 1, 0)
            }],
            ..Default::default()
        },
    )
    .unwrap();
    (m, s)
}

#[test]
fn create_writes_manifest_one_and_current() {
    let dir = tempfile::tempdir().unwrap();
    let (m, s) = Manifest::create(fs(), dir.path()).unwrap();
    assert_eq!(m.number(), 1);
    assert_eq!(manifests(dir.path()), vec![1]);
    assert!(s.namespaces().contains("default"));
    assert_eq!(s.next_file_number(), 2);
    assert!(matches!(
        Manifest::create(fs(), dir.path()),
        Err(Error::InvalidArgument(_))
    ));
}

#[test]
fn reopen_preserves_tables_families_files_and_seqs() {
    let dir = tempfile::tempdir().unwrap();
    let (m, s) = populated(dir.path());
    let before = m.number();
    drop(m);
    let (m2, s2) = Manifest::open(fs(), dir.path()).unwrap();
    assert_eq!(comparable(&s2), comparable(&s));
    assert!(m2.number() > before && s2.next_file_number() > m2.number());
    assert_eq!(
        manifests(dir.path()),
        vec![m2.number()],
        "old manifest deleted"
    );
    assert_eq!(s2.family(3).unwrap().1.max_versions, 5);
    assert_eq!(s2.flushed_seq(1), 40);
    assert_eq!((s2.last_seq(), s2.log_number()), (41, 3));
    assert_eq!(s2.current().files(1, 1).len(), 1);
    assert_eq!(s2.live_files(), s.live_files());
    // And again: reopening is idempotent.
    drop(m2);
    let (_m3, s3) = Manifest::open(fs(), dir.path()).unwrap();
    assert_eq!(comparable(&s3), comparable(&s));
}

#[test]
fn replay_of_many_edits() {
    let dir = tempfile::tempdir().unwrap();
    let (mut m, mut s) = Manifest::create(fs(), dir.path()).unwrap();
    m.log_and_apply(
        &mut s,
        VersionEdit {
            put_tables: vec![table(1, "t", &[("f", 1)])],
            ..Default::default()
        },
    )
    .unwrap();
    for i in 1..=300u64 {
        let n = s.allocate_file_number();
        m.log_and_apply(
            &mut s,
            VersionEdit {
                added_files: vec![file(n, 1, 0)],
                last_seq: Some(i),
                flushed_seq: vec![(1, i)],
                ..Default::default()
            },
        )
        .unwrap();
    }
    drop(m);
    let (m, s2) = Manifest::open(fs(), dir.path()).unwrap();
    assert_eq!(m.recovered().unwrap().records, 302);
    assert_eq!(comparable(&s2), comparable(&s));
    assert_eq!(s2.current().files(1, 0).len(), 300);
}

fn truncate(path: &Path, by: u64) {
    let f = RealFs.open(path).unwrap();
    let len = f.len().unwrap();
    f.truncate(len - by).unwrap();
}

#[test]
fn torn_last_record_is_ignored_and_never_appended_to() {
    let dir = tempfile::tempdir().unwrap();
    let (mut m, mut s) = populated(dir.path());
    let kept = comparable(&s);
    m.log_and_apply(
        &mut s,
        VersionEdit {
            last_seq: Some(99),
            ..Default::default()
        },
    )
    .unwrap();
    let path = dir.path().join(manifest_file_name(m.number()));
    drop(m);
    truncate(&path, 3);
    let (m, s2) = Manifest::open(fs(), dir.path()).unwrap();
    assert_eq!(comparable(&s2), kept, "the torn edit is dropped");
    assert!(m.recovered().unwrap().torn_tail.is_some());
    drop(m);
    let (m, s3) = Manifest::open(fs(), dir.path()).unwrap();
    assert!(
        m.recovered().unwrap().torn_tail.is_none(),
        "reopen started a fresh manifest"
    );
    assert_eq!(comparable(&s3), kept);
}

#[test]
fn corrupt_middle_record_is_corruption() {
    let dir = tempfile::tempdir().unwrap();
    let (m, _) = populated(dir.path());
    let path = dir.path().join(manifest_file_name(m.number()));
    drop(m);
    // Flip a byte of the second record's payload (the first record is the snapshot).
    let f = RealFs.open(&path).unwrap();
    let mut hdr = [0u8; 8];
    f.read_exact_at(&mut hdr, 0).unwrap();
    let first = 25 + u64::from(u32::from_le_bytes(hdr[4..8].try_into().unwrap()));
    let mut b = [0u8; 1];
    f.read_exact_at(&mut b, first + 27).unwrap();
    f.write_all_at(&[b[0] ^ 0x40], first + 27).unwrap();
    match Manifest::open(fs(), dir.path()) {
        Err(Error::Corruption { file, offset, .. }) => {
            assert_eq!(file, path);
            assert_eq!(offset, first);
        }
        other => panic!("expected corruption, got {other:?}"),
    }
}

#[test]
fn current_naming_a_missing_manifest_fails() {
    let dir = tempfile::tempdir().unwrap();
    let (m, _) = populated(dir.path());
    RealFs
        .remove(&dir.path().join(manifest_file_name(m.number())))
        .unwrap();
    drop(m);
    // CURRENT is installed only after its manifest is durable, so this is damage, not a
    // transient I/O problem.
    assert!(matches!(
        Manifest::open(fs(), dir.path()),
        Err(Error::Corruption { .. })
    ));
}

#[test]
fn garbage_current_is_corruption() {
    let dir = tempfile::tempdir().unwrap();
    drop(populated(dir.path()));
    let cur = dir.path().join(CURRENT);
    RealFs.remove(&cur).unwrap();
    RealFs
        .create(&cur)
        .unwrap()
        .write_all_at(b"MANIFEST-000002", 0)
        .unwrap();
    assert!(matches!(
        Manifest::open(fs(), dir.path()),
        Err(Error::Corruption { .. })
    ));
}

#[test]
fn leftovers_of_a_crashed_install_are_ignored_and_reported() {
    let dir = tempfile::tempdir().unwrap();
    let (m, s) = populated(dir.path());
    drop(m);
    // A crash mid-install leaves CURRENT.tmp; a crash mid-open leaves a manifest CURRENT never
    // named, possibly with a number the replayed state would hand out next.
    let tmp = dir.path().join(CURRENT_TMP);
    RealFs
        .create(&tmp)
        .unwrap()
        .write_all_at(b"MANIFEST-0", 0)
        .unwrap();
    let stray = s.next_file_number() + 3;
    RealFs
        .create(&dir.path().join(manifest_file_name(stray)))
        .unwrap()
        .write_all_at(b"half a snapshot", 0)
        .unwrap();
    let (m, s2) = Manifest::open(fs(), dir.path()).unwrap();
    assert!(m.number() > stray, "numbers found on disk are skipped");
    assert_eq!(comparable(&s2), comparable(&s));
    assert!(
        !RealFs.exists(&tmp).unwrap(),
        "install replaced the stale tmp"
    );
    assert_eq!(
        m.obsolete_files(&s2).unwrap(),
        vec![manifest_file_name(stray)]
    );
}

#[test]
fn orphan_hfile_numbers_are_never_handed_out_again() {
    let dir = tempfile::tempdir().unwrap();
    let (m, s) = populated(dir.path());
    drop(m);
    // A flush wrote file 500 but crashed before its edit was logged.
    let orphan = hfile_path(dir.path(), 1, 500);
    RealFs.create_dir_all(orphan.parent().unwrap()).unwrap();
    RealFs.create(&orphan).unwrap();
    assert!(s.next_file_number() < 500);
    let (m, mut s2) = Manifest::open(fs(), dir.path()).unwrap();
    assert!(m.number() > 500);
    assert!(s2.allocate_file_number() > 500);
    assert_eq!(m.obsolete_files(&s2).unwrap(), vec!["data/1/000500.hfile"]);
}

#[test]
fn obsolete_files_lists_dead_hfiles_and_stale_manifests_only() {
    let dir = tempfile::tempdir().unwrap();
    let (mut m, mut s) = populated(dir.path());
    let live: Vec<_> = s
        .current()
        .all_files()
        .map(|f| (f.family, f.number))
        .collect();
    for (fam, n) in &live {
        let p = hfile_path(dir.path(), *fam, *n);
        RealFs.create_dir_all(p.parent().unwrap()).unwrap();
        RealFs.create(&p).unwrap();
    }
    // Drop table 2 (family 3): its file becomes obsolete.
    m.log_and_apply(
        &mut s,
        VersionEdit {
            drop_tables: vec![2],
            ..Default::default()
        },
    )
    .unwrap();
    RealFs.create(&dir.path().join("MANIFEST-000077")).unwrap();
    RealFs.create(&dir.path().join("LOCK")).unwrap();
    RealFs
        .create_dir_all(&dir.path().join("data").join("not-a-family"))
        .unwrap();
    let mut got = m.obsolete_files(&s).unwrap();
    got.sort();
    let dropped = live.iter().find(|(f, _)| *f == 3).unwrap().1;
    let want = vec![
        "MANIFEST-000077".to_string(),
        format!("data/3/{dropped:06}.hfile"),
    ];
    assert_eq!(got, want);
}

#[test]
fn roll_over_starts_a_new_manifest_and_keeps_state() {
    let dir = tempfile::tempdir().unwrap();
    let opts = ManifestOptions { max_size: 2048 };
    let (mut m, mut s) = Manifest::create_with(fs(), dir.path(), opts.clone()).unwrap();
    m.log_and_apply(
        &mut s,
        VersionEdit {
            put_tables: vec![table(1, "t", &[("f", 1)])],
            ..Default::default()
        },
    )
    .unwrap();
    let mut numbers = vec![m.number()];
    for i in 1..=200u64 {
        let n = s.allocate_file_number();
        let mut e = VersionEdit {
            added_files: vec![file(n, 1, 0)],
            last_seq: Some(i),
            ..Default::default()
        };
        // Keep the live set small so snapshots stay small.
        if let Some(old) = s.current().files(1, 0).get(3) {
            e.deleted_files.push((1, 0, old.number));
        }
        m.log_and_apply(&mut s, e).unwrap();
        if numbers.last() != Some(&m.number()) {
            numbers.push(m.number());
            assert_eq!(manifests(dir.path()), vec![m.number()], "old one deleted");
        }
        assert!(m.size() < 2 * 2048 + 1024, "manifest stays bounded");
    }
    assert!(numbers.len() > 3, "rolled over: {numbers:?}");
    drop(m);
    let (_m, s2) = Manifest::open_with(fs(), dir.path(), opts).unwrap();
    assert_eq!(comparable(&s2), comparable(&s));
    assert_eq!(s2.last_seq(), 200);
}
