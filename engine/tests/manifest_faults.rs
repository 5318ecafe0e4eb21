//! Manifest failure policy: a failed write, sync or rename poisons the manifest, nothing is
//! retried, and no file may be deleted afterwards (RocksDB #4990: the failed edit may well be on
//! disk). Runs on real files behind a fault-injecting wrapper.

use std::io;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use cellar::format::cell::CellKey;
use cellar::fs::{File, FileSystem, LockGuard, RealFs, SharedFs};
use cellar::manifest::{Manifest, ManifestOptions, ManifestState, TableEntry, VersionEdit};
use cellar::schema::{FamilyDescriptor, TableDescriptor};
use cellar::types::FileMeta;
use cellar::Error;

#[derive(Debug, Default)]
struct Faults {
    fail_sync: AtomicBool,
    fail_write: AtomicBool,
    fail_rename: AtomicBool,
    syncs: AtomicU64,
}

#[derive(Debug)]
struct FailFs {
    faults: Arc<Faults>,
}

#[derive(Debug)]
struct FailFile {
    inner: Arc<dyn File>,
    faults: Arc<Faults>,
}

fn injected() -> io::Error {
    io::Error::other("injected fault")
}

impl File for FailFile {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        self.inner.read_at(buf, offset)
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<usize> {
        if self.faults.fail_write.load(Ordering::SeqCst) {
            return Err(injected());
        }
        self.inner.write_at(buf, offset)
    }
    fn sync_data(&self) -> io::Result<()> {
        self.faults.syncs.fetch_add(1, Ordering::SeqCst);
        if self.faults.fail_sync.load(Ordering::SeqCst) {
            // The bytes stay in the page cache: "error but persisted", the #4990 case.
            return Err(injected());
        }
        self.inner.sync_data()
    }
    fn len(&self) -> io::Result<u64> {
        self.inner.len()
    }
    fn allocate(&self, len: u64) -> io::Result<()> {
        self.inner.allocate(len)
    }
    fn truncate(&self, len: u64) -> io::Result<()> {
        self.inner.truncate(len)
    }
    fn raw_fd(&self) -> Option<i32> {
        None
    }
}

impl FailFs {
    fn wrap(&self, f: Arc<dyn File>) -> Arc<dyn File> {
        Arc::new(FailFile {
            inner: f,
            faults: self.faults.clone(),
        })
    }
}

impl FileSystem for FailFs {
    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        RealFs.create_dir_all(dir)
    }
    fn create(&self, path: &Path) -> io::Result<Arc<dyn File>> {
        RealFs.create(path).map(|f| self.wrap(f))
    }
    fn open(&self, path: &Path) -> io::Result<Arc<dyn File>> {
        RealFs.open(path).map(|f| self.wrap(f))
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        if self.faults.fail_rename.load(Ordering::SeqCst) {
            return Err(injected());
        }
        RealFs.rename(from, to)
    }
    fn remove(&self, path: &Path) -> io::Result<()> {
        RealFs.remove(path)
    }
    fn list(&self, dir: &Path) -> io::Result<Vec<String>> {
        RealFs.list(dir)
    }
    fn exists(&self, path: &Path) -> io::Result<bool> {
        RealFs.exists(path)
    }
    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        RealFs.sync_dir(dir)
    }
    fn lock(&self, path: &Path) -> io::Result<Box<dyn LockGuard>> {
        RealFs.lock(path)
    }
}

fn setup(dir: &Path, opts: ManifestOptions) -> (Arc<Faults>, Manifest, ManifestState) {
    let faults = Arc::new(Faults::default());
    let fs: SharedFs = Arc::new(FailFs {
        faults: faults.clone(),
    });
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
    faults.fail_sync.store(true, Ordering::SeqCst);
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
    let syncs = faults.syncs.load(Ordering::SeqCst);
    // Even once the device "recovers", the manifest stays poisoned and issues no sync.
    faults.fail_sync.store(false, Ordering::SeqCst);
    let e2 = add_file(&mut s);
    assert!(matches!(
        m.log_and_apply(&mut s, e2),
        Err(Error::Poisoned(_))
    ));
    assert!(matches!(
        m.log_and_apply(&mut s, VersionEdit::default()),
        Err(Error::Poisoned(_))
    ));
    assert_eq!(
        faults.syncs.load(Ordering::SeqCst),
        syncs,
        "no retried sync"
    );
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
    faults.fail_write.store(true, Ordering::SeqCst);
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
    faults.fail_rename.store(true, Ordering::SeqCst);
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
    let faults = Arc::new(Faults::default());
    faults.fail_sync.store(true, Ordering::SeqCst);
    let fs: SharedFs = Arc::new(FailFs { faults });
    assert!(Manifest::create(fs, dir.path()).is_err());
    assert!(!RealFs.exists(&dir.path().join("CURRENT")).unwrap());
    // A later create succeeds and skips the leftover manifest's number.
    let (m, _s) = Manifest::create(real(), dir.path()).unwrap();
    assert_eq!(m.number(), 2);
}
