//! Incremental backups (`Db::backup`, `Backups`, SPEC.md §17.11): each restores to exactly what
//! was acknowledged before it; later backups copy only new HFiles; damage to any stored byte is
//! found by verify and refused by restore; purge keeps what the remaining backups need; a
//! backup cut short is invisible and cleaned up.

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;

use cellar::fs::{Fault, FaultFs, FileSystem, OpKind, Rule, SimFs};
use cellar::{
    Backups, Db, Delete, Error, FamilyDescriptor, Options, Put, Row, Scan, TableDescriptor,
};

/// Options of a database on `fs` (a simulated file system).
fn on(fs: &FaultFs<SimFs>) -> Options {
    Options {
        fs: Arc::new(fs.clone()),
        ..Options::default()
    }
}

fn schema(db: &Db) {
    db.create_table(
        TableDescriptor::new("t")
            .family(FamilyDescriptor::new("a").max_versions(2))
            .family(FamilyDescriptor::new("b")),
    )
    .unwrap();
}

fn rows(db: &Db) -> Vec<Row> {
    db.table("t")
        .unwrap()
        .scan(Scan::new().raw())
        .unwrap()
        .collect::<Result<Vec<_>, _>>()
        .unwrap()
}

fn write(db: &Db, from: u32, to: u32, v: &str) {
    let t = db.table("t").unwrap();
    for i in from..to {
        t.put(
            Put::new(format!("r{i:05}"))
                .add("a", "q", format!("{v}-{i}"))
                .add("b", "q", v),
        )
        .unwrap();
        if i % 400 == 399 {
            db.flush().unwrap();
        }
    }
}

#[test]
fn backups_restore_what_was_acknowledged_and_copy_only_new_files() {
    let d = tempfile::tempdir().unwrap();
    let db = Db::open(d.path().join("db"), Options::default()).unwrap();
    schema(&db);
    let root = d.path().join("backups");
    write(&db, 0, 2000, "one");
    db.major_compact("t", None).unwrap();
    write(&db, 2000, 2100, "unflushed");
    let first_rows = rows(&db);
    let first = db.backup(&root).unwrap();
    assert_eq!(first.id, 1);
    assert_eq!(
        first.new_shared_bytes,
        first
            .files
            .iter()
            .filter(|f| f.shared.is_some())
            .map(|f| f.len)
            .sum::<u64>()
    );

    write(&db, 2100, 2500, "two");
    db.table("t")
        .unwrap()
        .delete(Delete::new("r00005"))
        .unwrap();
    let second_rows = rows(&db);
    let second = db.backup(&root).unwrap();
    assert_eq!(second.id, 2);
    let shared: u64 = second
        .files
        .iter()
        .filter(|f| f.shared.is_some())
        .map(|f| f.len)
        .sum();
    assert!(
        second.new_shared_bytes < shared / 2,
        "the second backup copied {} of {} shared bytes",
        second.new_shared_bytes,
        shared
    );
    write(&db, 0, 10, "after");

    let b = Backups::open(&root);
    assert_eq!(b.ids().unwrap(), vec![1, 2]);
    assert_eq!(b.latest().unwrap(), 2);
    for (id, want) in [(1, &first_rows), (2, &second_rows)] {
        let info = b.verify(id).unwrap();
        assert_eq!(info.id, id);
        let target = d.path().join(format!("restored-{id}"));
        b.restore(id, &target).unwrap();
        let r = Db::open(&target, Options::default()).unwrap();
        assert_eq!(&rows(&r), want, "backup {id}");
        // A restored database is a database: it takes writes.
        write(&r, 0, 1, "mine");
    }
    assert_eq!(rows(&db).len(), second_rows.len());
    drop(db);

    // Purge to the newest: backup 1's directory and the HFiles only it listed go, backup 2
    // still restores.
    let p = b.purge(1).unwrap();
    assert_eq!(p.removed_backups, vec![1]);
    assert_eq!(b.ids().unwrap(), vec![2]);
    b.verify(2).unwrap();
    let again = d.path().join("again");
    b.restore(2, &again).unwrap();
    assert_eq!(
        rows(&Db::open(&again, Options::default()).unwrap()),
        second_rows
    );
    let e = b.restore(1, d.path().join("gone")).unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
}

#[test]
fn damage_to_a_backup_is_found_by_verify_and_refused_by_restore() {
    let d = tempfile::tempdir().unwrap();
    let db = Db::open(d.path().join("db"), Options::default()).unwrap();
    schema(&db);
    write(&db, 0, 1000, "v");
    let root = d.path().join("backups");
    let info = db.backup(&root).unwrap();
    drop(db);
    let b = Backups::open(&root);
    // Every stored file, one at a time: a flipped byte is found.
    for f in &info.files {
        let p = match &f.shared {
            Some(name) => root.join("shared").join(name),
            None => root.join("backup-000001").join(&f.path),
        };
        let good = std::fs::read(&p).unwrap();
        let mut bad = good.clone();
        let at = bad.len() / 2;
        bad[at] ^= 0x40;
        std::fs::write(&p, &bad).unwrap();
        let e = b.verify(1).unwrap_err();
        assert!(matches!(e, Error::Corruption { .. }), "{}: {e}", f.path);
        let target = d.path().join("restore");
        let e = b.restore(1, &target).unwrap_err();
        assert!(matches!(e, Error::Corruption { .. }), "{}: {e}", f.path);
        // What the restore left is refused at open, not taken for an empty database.
        match Db::open(&target, Options::default()) {
            Ok(_) => panic!("{}: a failed restore opened", f.path),
            Err(e) => assert!(e.to_string().contains("CHECKPOINT-INCOMPLETE"), "{e}"),
        }
        std::fs::remove_dir_all(&target).unwrap();
        std::fs::write(&p, &good).unwrap();
    }
    b.verify(1).unwrap();
    // The list itself: cut short, or one byte changed.
    let list = root.join("backup-000001").join("FILES");
    let good = std::fs::read(&list).unwrap();
    for bad in [good[..good.len() - 10].to_vec(), {
        let mut b = good.clone();
        b[20] ^= 1;
        b
    }] {
        std::fs::write(&list, &bad).unwrap();
        let e = b.verify(1).unwrap_err();
        assert!(matches!(e, Error::Corruption { .. }), "{e}");
    }
    std::fs::write(&list, &good).unwrap();
    b.verify(1).unwrap();
    // A valid list in the wrong backup's directory.
    let db2 = Db::open(d.path().join("db"), Options::default()).unwrap();
    db2.backup(&root).unwrap();
    drop(db2);
    std::fs::copy(&list, root.join("backup-000002").join("FILES")).unwrap();
    let e = b.verify(2).unwrap_err();
    assert!(matches!(e, Error::Corruption { .. }), "{e}");
}

#[test]
fn a_backup_cut_short_is_invisible_and_cleaned_up() {
    let ffs = FaultFs::new(SimFs::new());
    let opts = || on(&ffs);
    let db = Db::open(Path::new("/db"), opts()).unwrap();
    schema(&db);
    write(&db, 0, 1000, "v");
    let want = rows(&db);
    let b = Backups::with_fs("/bk", Arc::new(ffs.clone()));
    let mut failed = 0;
    for kind in [
        OpKind::Create,
        OpKind::Write,
        OpKind::SyncData,
        OpKind::Rename,
    ] {
        for nth in [1u64, 3] {
            ffs.add_rule(Rule::on(kind, Fault::Eio).path("/bk").nth(nth));
            let r = db.backup("/bk");
            ffs.clear_rules();
            if r.is_err() {
                failed += 1;
            }
            // Whatever happened, what is listed verifies and restores.
            for id in b.ids().unwrap() {
                b.verify(id)
                    .unwrap_or_else(|e| panic!("{kind:?} #{nth}: backup {id}: {e}"));
            }
        }
    }
    assert!(failed >= 6, "only {failed} faults surfaced");
    let last = db.backup("/bk").unwrap();
    let p = b.purge(1).unwrap();
    assert_eq!(b.ids().unwrap(), vec![last.id]);
    let names = ffs.list(Path::new("/bk")).unwrap();
    assert_eq!(
        names,
        vec![
            "LOCK".to_string(),
            format!("backup-{:06}", last.id),
            "shared".to_string()
        ],
        "after {p:?}"
    );
    b.restore(last.id, "/restored").unwrap();
    drop(db);
    let r = Db::open(Path::new("/restored"), opts()).unwrap();
    assert_eq!(rows(&r), want);
}

/// A power loss at every file operation of a backup, then of a restore (the operation fails, then
/// only what was durable survives), and after each: every
/// backup listed afterwards verifies and restores to the rows acknowledged before it; a restore
/// directory is absent, refused for its marker, empty, or (once the call returned) complete.
#[test]
fn a_power_loss_during_a_backup_or_a_restore_loses_nothing_listed() {
    use cellar::fs::CrashPolicy;
    let setup = || {
        let sim = SimFs::new();
        let ffs = FaultFs::new(sim.clone());
        let opts = on(&ffs);
        let db = Db::open(Path::new("/db"), opts).unwrap();
        schema(&db);
        write(&db, 0, 900, "v");
        let want = rows(&db);
        (sim, ffs, db, want)
    };
    let check_root = |fs: &FaultFs<SimFs>, want: &[Row], what: &str| {
        let b = Backups::with_fs("/bk", Arc::new(fs.clone()));
        for id in b.ids().unwrap() {
            b.verify(id)
                .unwrap_or_else(|e| panic!("{what}: backup {id}: {e}"));
            let target = format!("/check-{id}");
            b.restore(id, &target).unwrap();
            let opts = on(fs);
            let r = Db::open(Path::new(&target), opts).unwrap();
            assert_eq!(rows(&r), want, "{what}: backup {id}");
        }
    };
    let policies = [CrashPolicy::DropAll, CrashPolicy::KeepRandomPrefix];

    // Backups.
    let (_, ffs, db, _) = setup();
    db.backup("/bk").unwrap();
    let total = ffs.count_matching(&Rule::any_op(Fault::Eio).path("/bk"));
    drop(db);
    assert!(total > 10, "{total}");
    for n in (1..=total).chain([u64::MAX]) {
        for (i, policy) in policies.iter().enumerate() {
            let (sim, ffs, db, want) = setup();
            if n != u64::MAX {
                ffs.add_rule(Rule::any_op(Fault::Eio).path("/bk").nth(n));
            }
            let done = db.backup("/bk").is_ok();
            // A fault can miss: the removal of a stale `.part` ignores its failure.
            assert!(done || n != u64::MAX);
            let after = FaultFs::new(sim.crash(*policy, n ^ i as u64));
            drop(db);
            let what = format!("backup op {n}, {policy:?}");
            check_root(&after, &want, &what);
            let listed = Backups::with_fs("/bk", Arc::new(after.clone()))
                .ids()
                .unwrap();
            if done {
                assert_eq!(listed, vec![1], "{what}: a finished backup is gone");
            }
        }
    }

    // Restores.
    let (sim, ffs, db, want) = setup();
    db.backup("/bk").unwrap();
    drop(db);
    let b = Backups::with_fs("/bk", Arc::new(ffs.clone()));
    ffs.reset_counts();
    b.restore(1, "/rs-count").unwrap();
    let total = ffs.count_matching(&Rule::any_op(Fault::Eio).path("/rs-count"));
    assert!(total > 10, "{total}");
    for n in (1..=total).chain([u64::MAX]) {
        for (i, policy) in policies.iter().enumerate() {
            let base = FaultFs::new(sim.crash(CrashPolicy::DropAll, 0));
            if n != u64::MAX {
                base.add_rule(Rule::any_op(Fault::Eio).path("/rs").nth(n));
            }
            let done = Backups::with_fs("/bk", Arc::new(base.clone()))
                .restore(1, "/rs")
                .is_ok();
            assert!(done || n != u64::MAX);
            let after = FaultFs::new(base.inner().crash(*policy, n ^ i as u64));
            let what = format!("restore op {n}, {policy:?}, done {done}");
            if !after.exists(Path::new("/rs")).unwrap() {
                assert!(!done, "{what}: a finished restore is gone");
                continue;
            }
            let opts = on(&after);
            match Db::open(Path::new("/rs"), opts) {
                Ok(r) => {
                    let empty = r.list_tables().is_empty();
                    assert!(
                        (empty && !done) || rows(&r) == want,
                        "{what}: the restore opened with other contents"
                    );
                }
                Err(e) => {
                    assert!(!done, "{what}: a finished restore is refused: {e}");
                    assert!(
                        e.to_string().contains("CHECKPOINT-INCOMPLETE"),
                        "{what}: {e}"
                    );
                }
            }
        }
    }
}

/// With each file's checksum in the manifest, a backup reads only the HFiles the store lacks,
/// and checks them as it copies: a damaged live file fails the backup instead of entering it.
#[test]
fn an_incremental_backup_reads_only_new_files_and_checks_them() {
    let ffs = FaultFs::new(SimFs::new());
    let opts = on(&ffs);
    let db = Db::open(Path::new("/db"), opts).unwrap();
    schema(&db);
    write(&db, 0, 1600, "v");
    let first = db.backup("/bk").unwrap();
    write(&db, 1600, 2000, "w");
    let opens = Rule::on(OpKind::Open, Fault::Eio).path("/db/data/");
    let before = ffs.count_matching(&opens);
    let second = db.backup("/bk").unwrap();
    let opened = ffs.count_matching(&opens) - before;
    let old: BTreeSet<_> = first
        .files
        .iter()
        .filter_map(|f| f.shared.clone())
        .collect();
    let new = second
        .files
        .iter()
        .filter(|f| f.shared.as_ref().is_some_and(|s| !old.contains(s)))
        .count() as u64;
    assert!(
        new >= 1 && new < second.files.len() as u64,
        "{new} new files"
    );
    assert_eq!(opened, new, "files opened by the second backup");

    // A new file damaged on disk: the backup fails naming it, and lists nothing new.
    write(&db, 2000, 2400, "x");
    db.flush().unwrap();
    let newest = ffs
        .list(Path::new("/db/data/1"))
        .unwrap()
        .into_iter()
        .max()
        .unwrap();
    let path = Path::new("/db/data/1").join(&newest);
    let mut bytes = ffs.inner().contents(&path).unwrap();
    bytes[3] ^= 0x10;
    ffs.inner().set_contents(&path, &bytes).unwrap();
    let e = db.backup("/bk").unwrap_err();
    assert!(
        matches!(&e, Error::Corruption { file, .. } if file == &path),
        "{e}"
    );
    let b = Backups::with_fs("/bk", Arc::new(ffs.clone()));
    assert_eq!(b.ids().unwrap(), vec![1, 2]);
    b.verify(2).unwrap();
}

/// Two makers, or a maker and a purge, never work under one root at once: the second is told
/// `Locked` (a purge could otherwise delete files a backup being made has copied but not listed).
#[test]
fn a_second_writer_of_a_backup_root_is_refused() {
    let d = tempfile::tempdir().unwrap();
    let db = Db::open(d.path().join("db"), Options::default()).unwrap();
    schema(&db);
    write(&db, 0, 100, "v");
    let root = d.path().join("bk");
    db.backup(&root).unwrap();
    // Another process holding the root's lock (`flock` on the same file).
    let holder = std::fs::File::open(root.join("LOCK")).unwrap();
    rustix::fs::flock(
        &holder,
        rustix::fs::FlockOperation::NonBlockingLockExclusive,
    )
    .unwrap();
    let b = Backups::open(&root);
    for e in [
        db.backup(&root).unwrap_err(),
        b.purge(0).unwrap_err(),
        b.verify(1).unwrap_err(),
        b.restore(1, d.path().join("r")).unwrap_err(),
    ] {
        assert!(matches!(e, Error::Locked(_)), "{e}");
    }
    drop(holder);
    db.backup(&root).unwrap();
    assert_eq!(b.purge(1).unwrap().removed_backups, vec![1]);
}
