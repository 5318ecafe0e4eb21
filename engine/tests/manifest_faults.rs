//! Manifest failure policy: a failed write, sync or rename poisons the manifest, nothing is
//! retried, and no file may be deleted afterwards (RocksDB #4990: the failed edit may well be on
//! disk). Runs on real files behind the engine's fault injector (`FaultFs`).

use std::path::Path;
use std::sync::Arc;

use cellar::format::cell::CellKey;
use cellar::fs::{Fault, FaultFs, FileSystem, OpKind, RealFs, Rule, SharedFs};
use cellar::manifest::{Manifest, ManifestOptions, ManifestState, TableEntry, VersionEdit};
use cellar::schema::{FamilyDescriptor, TableDescriptor};
use cellar::types::FileMeta;
use cellar::Error;

/// The real file system behind the engine's fault injector.
type Faults = Arc<FaultFs<RealFs>>;

fn fail_persistently(faults: &Faults, kind: OpKind) {
    faults.add_rule(Rule::on(kind, Fault::Eio).persistent());
}

fn setup(dir: &Path, opts: ManifestOptions) -> (Faults, Manifest, ManifestState) {
    let faults: Faults = Arc::new(FaultFs::new(RealFs));
    let fs: SharedFs = faults.clone();
    let (mut m, mut s) = Manifest::create_with(fs, dir, opts).unwrap();
    m.log_and_apply(
        &mut s,
        VersionEdit {
            put_tables: vec![TableEntry {
                id: 1,
                descriptor: TableDescriptor::new("t").family(FamilyDescriptor::new("f")),
                family_ids: vec![1],
            }],
            ..Default::default()
        },
    )
    .unwrap();
    (faults, m, s)
}

fn add_file(s: &mut ManifestState) -> VersionEdit {
    let n = s.allocate_file_number();
    VersionEdit {
        added_files: vec![FileMeta {
            number: n,
            family: 1,
            level: 0,
            size: 1,
            smallest: CellKey::first_on_row(b"a").encode(),
            largest: CellKey::first_on_row(b"b").encode(),
            min_seq: 1,
            max_seq: 1,
            min_ts: 0,
            max_ts: 0,
            entries: 1,
            deletes: 0,
            created_ms: 0,
            crc: None,
            range_clean: 0,
        }],
        last_seq: Some(n),
        ..Default::default()
    }
}

fn real() -> SharedFs {
    Arc::new(RealFs)
}

#[test]
fn failed_sync_poisons_and_is_never_retried() {
    let dir = tempfile::tempdir().unwrap();
    let (faults, mut m, mut s) = setup(dir.path(), ManifestOptions::default());
    let before = s.clone();
    fail_persistently(&faults, OpKind::SyncData);
    let e = add_file(&mut s);
    let added = e.added_files[0].number;
    let before_alloc = s.clone();
    assert!(matches!(
        m.log_and_apply(&mut s, e.clone()),
        Err(Error::Poisoned(_))
    ));
    assert!(m.is_poisoned());
    assert_eq!(s, before_alloc, "state untouched by the failed edit");
    assert_ne!(s, before);
    let syncs = faults.count(OpKind::SyncData);
    // Even once the device "recovers", the manifest stays poisoned and issues no sync.
    faults.clear_rules();
    let e2 = add_file(&mut s);
    assert!(matches!(
        m.log_and_apply(&mut s, e2),
        Err(Error::Poisoned(_))
    ));
    assert!(matches!(
        m.log_and_apply(&mut s, VersionEdit::default()),
        Err(Error::Poisoned(_))
    ));
    assert_eq!(faults.count(OpKind::SyncData), syncs, "no retried sync");
    // The caller may not delete anything: the edit may be durable.
    assert!(matches!(m.obsolete_files(&s), Err(Error::Poisoned(_))));
    drop(m);
    // Here the bytes did reach the file: after reopen the edit is there and references the
    // file, which is why deleting it after the error would have lost data.
    let (_m, s2) = Manifest::open(real(), dir.path()).unwrap();
    assert!(s2.live_files().contains(&added));
}

#[test]
fn failed_write_poisons_and_reopen_sees_a_prefix() {
    let dir = tempfile::tempdir().unwrap();
    let (faults, mut m, mut s) = setup(dir.path(), ManifestOptions::default());
    let ok = add_file(&mut s);
    m.log_and_apply(&mut s, ok).unwrap();
    let durable = s.live_files();
    fail_persistently(&faults, OpKind::Write);
    let e = add_file(&mut s);
    assert!(matches!(
        m.log_and_apply(&mut s, e),
        Err(Error::Poisoned(_))
    ));
    drop(m);
    let (_m, s2) = Manifest::open(real(), dir.path()).unwrap();
    assert_eq!(s2.live_files(), durable);
}

#[test]
fn failed_rename_during_roll_over_poisons_and_reopen_is_consistent() {
    let dir = tempfile::tempdir().unwrap();
    let (faults, mut m, mut s) = setup(dir.path(), ManifestOptions { max_size: 512 });
    let first = m.number();
    // Rename is used only to install CURRENT, so every edit succeeds until the first roll-over.
    fail_persistently(&faults, OpKind::Rename);
    let mut durable = s.live_files();
    for i in 0.. {
        assert!(i < 200, "never rolled over");
        let e = add_file(&mut s);
        match m.log_and_apply(&mut s, e) {
            Ok(()) => {
                assert_eq!(m.number(), first);
                durable = s.live_files();
            }
            Err(Error::Poisoned(_)) => break,
            Err(e) => panic!("{e}"),
        }
    }
    drop(m);
    let (m2, s2) = Manifest::open(real(), dir.path()).unwrap();
    assert_eq!(
        s2.live_files(),
        durable,
        "CURRENT still names the old manifest"
    );
    // The half-installed manifest is obsolete, never replayed.
    assert!(m2
        .obsolete_files(&s2)
        .unwrap()
        .iter()
        .any(|n| n.starts_with("MANIFEST-")));
}

#[test]
fn invalid_edit_is_refused_without_poisoning_or_writing() {
    let dir = tempfile::tempdir().unwrap();
    let (_faults, mut m, mut s) = setup(dir.path(), ManifestOptions::default());
    let size = m.size();
    let before = s.clone();
    let bad = VersionEdit {
        deleted_files: vec![(1, 0, 12345)],
        ..Default::default()
    };
    assert!(matches!(
        m.log_and_apply(&mut s, bad),
        Err(Error::InvalidArgument(_))
    ));
    assert!(!m.is_poisoned());
    assert_eq!(m.size(), size, "nothing written");
    assert_eq!(s, before);
    let e = add_file(&mut s);
    m.log_and_apply(&mut s, e).unwrap();
}

#[test]
fn create_with_a_failing_sync_fails_and_installs_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let faults: Faults = Arc::new(FaultFs::new(RealFs));
    fail_persistently(&faults, OpKind::SyncData);
    let fs: SharedFs = faults;
    assert!(Manifest::create(fs, dir.path()).is_err());
    assert!(!RealFs.exists(&dir.path().join("CURRENT")).unwrap());
    // A later create succeeds and skips the leftover manifest's number.
    let (m, _s) = Manifest::create(real(), dir.path()).unwrap();
    assert_eq!(m.number(), 2);
}
