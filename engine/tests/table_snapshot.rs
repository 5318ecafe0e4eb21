//! Table snapshots (`Db::snapshot_table`, `clone_table_snapshot`, `restore_table_snapshot`,
//! SPEC.md §17.13): a snapshot holds the table as it was, batches whole across families, every
//! write acknowledged before it; it outlives compactions and the table itself; clone and
//! restore are all or nothing across crashes, and restored tables never get back the writes
//! made after the snapshot, not even from the WAL.

mod common;

use std::path::Path;
use std::sync::Arc;

use cellar::fs::{CrashPolicy, Fault, FaultFs, FileSystem, Rule, SimFs};
use cellar::{
    Db, Delete, Error, FamilyDescriptor, Options, Put, Row, Scan, TableDescriptor,
    TableSnapshotOptions, SNAPSHOTS_DIR,
};

fn schema() -> TableDescriptor {
    TableDescriptor::new("t")
        .family(FamilyDescriptor::new("a").max_versions(3))
        .family(FamilyDescriptor::new("b"))
}

/// Every cell of `table`, delete markers and old versions included.
fn raw(db: &Db, table: &str) -> Vec<Row> {
    db.table(table)
        .unwrap()
        .scan(Scan::new().raw())
        .unwrap()
        .collect::<Result<Vec<_>, _>>()
        .unwrap()
}

/// Every version `table` returns to a read (what a major compaction keeps).
fn visible(db: &Db, table: &str) -> Vec<Row> {
    db.table(table)
        .unwrap()
        .scan(Scan::new().all_versions())
        .unwrap()
        .collect::<Result<Vec<_>, _>>()
        .unwrap()
}

/// Rows `lo..hi`, written with value `tag`, flushing every `flush_every` rows.
fn write(db: &Db, lo: u32, hi: u32, tag: &str, flush_every: u32) {
    let t = db.table("t").unwrap();
    for i in lo..hi {
        t.put(
            Put::new(format!("r{i:04}"))
                .add("a", "q", format!("{tag}-a{i}"))
                .add("b", "q", format!("{tag}-b{i}")),
        )
        .unwrap();
        if i % 7 == 0 {
            t.delete(Delete::new(format!("r{:04}", i / 2)).column("a", "q"))
                .unwrap();
        }
        if flush_every > 0 && i % flush_every == flush_every - 1 {
            db.flush().unwrap();
        }
    }
}

/// Compactions only when asked: a background one may purge the markers a raw scan compares.
fn quiet() -> Options {
    let mut o = Options::default();
    o.compaction.threads = 0;
    o
}

/// HFiles under `/db/data` on `fs`.
fn hfiles_on(fs: &dyn FileSystem) -> u64 {
    let data = Path::new("/db/data");
    fs.list(data)
        .unwrap()
        .into_iter()
        .map(|d| fs.list(&data.join(d)).unwrap().len() as u64)
        .sum()
}

fn sim_opts(fs: &FaultFs<SimFs>) -> Options {
    let mut o = Options {
        fs: Arc::new(fs.clone()),
        ..Options::default()
    };
    o.compaction.threads = 0;
    o
}

#[test]
fn clone_and_restore_give_back_the_table_as_it_was() {
    let d = tempfile::tempdir().unwrap();
    let db = Db::open(d.path(), quiet()).unwrap();
    db.create_table(schema()).unwrap();
    write(&db, 0, 300, "one", 100);
    // Some of it only in the memstores: the snapshot's flush takes it.
    write(&db, 300, 350, "one", 0);
    let then = raw(&db, "t");
    let then_visible = visible(&db, "t");
    let info = db.snapshot_table("t", "s1").unwrap();
    assert_eq!(info.name, "s1");
    assert_eq!(info.table, schema());
    assert!(info.files >= 4 && info.bytes > 0, "{info:?}");

    // Later writes, a compaction that replaces every file, an alter that drops a family.
    write(&db, 200, 400, "two", 60);
    db.major_compact("t", None).unwrap();
    db.alter_table(TableDescriptor::new("t").family(FamilyDescriptor::new("a")))
        .unwrap();
    write_a_only(&db);
    assert_ne!(raw(&db, "t"), then);

    db.clone_table_snapshot("s1", "copy").unwrap();
    assert_eq!(db.describe("copy").unwrap().families, schema().families);
    assert_eq!(raw(&db, "copy"), then);
    // Memstore cells written after the snapshot are gone too: restore, then reopen (the WAL
    // still holds them, for families the table no longer has).
    db.table("t")
        .unwrap()
        .put(Put::new("r0001").add("a", "q", "after"))
        .unwrap();
    db.restore_table_snapshot("s1").unwrap();
    assert_eq!(db.describe("t").unwrap(), schema());
    assert_eq!(raw(&db, "t"), then);
    drop(db);
    let db = Db::open(d.path(), quiet()).unwrap();
    assert_eq!(raw(&db, "t"), then);
    assert_eq!(raw(&db, "copy"), then);
    // Both take writes and compact as tables of their own; the snapshot stays as it was.
    write(&db, 0, 50, "three", 25);
    db.major_compact("t", None).unwrap();
    db.major_compact("copy", None).unwrap();
    assert_eq!(visible(&db, "copy"), then_visible);
    assert_ne!(visible(&db, "t"), then_visible);
    db.drop_table("copy").unwrap();
    db.clone_table_snapshot("s1", "copy").unwrap();
    assert_eq!(raw(&db, "copy"), then);
    assert_eq!(db.list_table_snapshots().unwrap(), vec![info]);
    db.delete_table_snapshot("s1").unwrap();
    assert!(db.list_table_snapshots().unwrap().is_empty());
    assert!(!d.path().join(SNAPSHOTS_DIR).join("s1").exists());
    // The clones keep their data: their files are their own links.
    assert_eq!(raw(&db, "copy"), then);
    db.major_compact("copy", None).unwrap();
    drop(db);
    let db = Db::open(d.path(), quiet()).unwrap();
    assert_eq!(visible(&db, "copy"), then_visible);
}

#[test]
fn row_range_deletes_go_with_the_snapshot() {
    let d = tempfile::tempdir().unwrap();
    let db = Db::open(d.path(), quiet()).unwrap();
    db.create_table(schema()).unwrap();
    write(&db, 0, 200, "one", 60);
    let t = db.table("t").unwrap();
    t.delete_rows(b"r0050", b"r0150").unwrap();
    t.delete_rows_with(cellar::DeleteRows::new("r0180", "").family("b"))
        .unwrap();
    let then = visible(&db, "t");
    db.snapshot_table("t", "s").unwrap();
    // Spent by a major compaction in the table; the snapshot's files still hold the cells.
    db.major_compact("t", None).unwrap();
    assert!(db.range_deletes("t").unwrap().is_empty());
    db.clone_table_snapshot("s", "copy").unwrap();
    assert_eq!(visible(&db, "copy"), then);
    assert_eq!(db.range_deletes("copy").unwrap().len(), 3);
    db.drop_table("t").unwrap();
    db.create_table(schema()).unwrap();
    db.restore_table_snapshot("s").unwrap();
    assert_eq!(visible(&db, "t"), then);
    drop((t, db));
    let db = Db::open(d.path(), quiet()).unwrap();
    assert_eq!(visible(&db, "t"), then);
    assert_eq!(visible(&db, "copy"), then);
}

fn write_a_only(db: &Db) {
    let t = db.table("t").unwrap();
    for i in 0..20 {
        t.put(Put::new(format!("x{i}")).add("a", "q", "v")).unwrap();
    }
}

#[test]
fn a_snapshot_outlives_its_table_and_costs_no_copy() {
    let d = tempfile::tempdir().unwrap();
    let db = Db::open(d.path(), quiet()).unwrap();
    db.create_namespace("ns").unwrap();
    db.create_table(TableDescriptor::new("ns:t").family(FamilyDescriptor::new("cf")))
        .unwrap();
    let t = db.table("ns:t").unwrap();
    for i in 0..500 {
        t.put(Put::new(format!("r{i:04}")).add("cf", "q", format!("v{i}")))
            .unwrap();
    }
    db.flush().unwrap();
    let then = raw(&db, "ns:t");
    let info = db.snapshot_table("ns:t", "keep").unwrap();
    // Hard links: the snapshot's files are the table's.
    let snap_data = d.path().join(SNAPSHOTS_DIR).join("keep").join("data");
    let mut linked = 0;
    for fam in std::fs::read_dir(&snap_data).unwrap() {
        for f in std::fs::read_dir(fam.unwrap().path()).unwrap() {
            use std::os::unix::fs::MetadataExt;
            assert_eq!(f.unwrap().metadata().unwrap().nlink(), 2);
            linked += 1;
        }
    }
    assert_eq!(linked, info.files);
    db.drop_table("ns:t").unwrap();
    db.clone_table_snapshot("keep", "ns:t").unwrap();
    assert_eq!(raw(&db, "ns:t"), then);
    // Into the default namespace under another name, and a restore of a dropped table
    // creates it again.
    db.clone_table_snapshot("keep", "elsewhere").unwrap();
    assert_eq!(raw(&db, "elsewhere"), then);
    db.drop_table("ns:t").unwrap();
    db.restore_table_snapshot("keep").unwrap();
    assert_eq!(raw(&db, "ns:t"), then);
}

/// One snapshot's description reads its descriptor alone: a damaged other one does not
/// matter to it (it does to the listing), nor to a clone or restore of this one.
#[test]
fn one_snapshots_info_ignores_a_damaged_other_one() {
    let d = tempfile::tempdir().unwrap();
    let db = Db::open(d.path(), quiet()).unwrap();
    db.create_table(schema()).unwrap();
    write(&db, 0, 50, "one", 0);
    let good = db.snapshot_table("t", "good").unwrap();
    db.snapshot_table("t", "bad").unwrap();
    let bad = d.path().join(SNAPSHOTS_DIR).join("bad").join("SNAPSHOT");
    let mut bytes = std::fs::read(&bad).unwrap();
    bytes[20] ^= 0x10;
    std::fs::write(&bad, bytes).unwrap();
    assert!(matches!(
        db.list_table_snapshots(),
        Err(cellar::Error::Corruption { .. })
    ));
    assert!(matches!(
        db.table_snapshot_info("bad"),
        Err(cellar::Error::Corruption { .. })
    ));
    let info = db.table_snapshot_info("good").unwrap();
    assert_eq!(info, good);
    assert!(matches!(
        db.table_snapshot_info("none"),
        Err(cellar::Error::SnapshotNotFound(_))
    ));
    assert!(matches!(
        db.table_snapshot_info("../x"),
        Err(cellar::Error::InvalidArgument(_))
    ));
    db.restore_table_snapshot("good").unwrap();
}

#[test]
fn skip_flush_takes_only_the_files() {
    let d = tempfile::tempdir().unwrap();
    let db = Db::open(d.path(), quiet()).unwrap();
    db.create_table(schema()).unwrap();
    write(&db, 0, 100, "one", 0);
    db.flush().unwrap();
    let flushed = raw(&db, "t");
    write(&db, 100, 150, "one", 0);
    let info = db
        .snapshot_table_with(
            "t",
            "quick",
            TableSnapshotOptions::default().skip_flush(true),
        )
        .unwrap();
    db.clone_table_snapshot("quick", "c").unwrap();
    assert_eq!(raw(&db, "c"), flushed);
    assert!(db.stats().memstore_active_bytes > 0, "skip_flush flushed");
    assert!(info.files >= 2);
}

#[test]
fn bad_requests_are_refused_with_nothing_changed() {
    let d = tempfile::tempdir().unwrap();
    let db = Db::open(d.path(), quiet()).unwrap();
    db.create_table(schema()).unwrap();
    write(&db, 0, 100, "one", 50);
    db.create_table(TableDescriptor::new("other").family(FamilyDescriptor::new("cf")))
        .unwrap();
    let files = db.stats().live_files;
    for bad in ["", ".x", "-x", "a/b", "a b", &"n".repeat(300)] {
        let e = db.snapshot_table("t", bad).unwrap_err();
        assert!(matches!(e, Error::InvalidArgument(_)), "{bad:?}: {e}");
    }
    assert!(matches!(
        db.snapshot_table("missing", "s").unwrap_err(),
        Error::TableNotFound(_)
    ));
    db.snapshot_table("t", "s").unwrap();
    assert!(matches!(
        db.snapshot_table("t", "s").unwrap_err(),
        Error::SnapshotExists(_)
    ));
    for e in [
        db.clone_table_snapshot("nope", "c").unwrap_err(),
        db.restore_table_snapshot("nope").unwrap_err(),
        db.delete_table_snapshot("nope").unwrap_err(),
    ] {
        assert!(matches!(e, Error::SnapshotNotFound(_)), "{e}");
    }
    assert!(matches!(
        db.clone_table_snapshot("s", "other").unwrap_err(),
        Error::TableExists(_)
    ));
    assert!(matches!(
        db.clone_table_snapshot("s", "t").unwrap_err(),
        Error::TableExists(_)
    ));
    assert!(matches!(
        db.clone_table_snapshot("s", "nons:c").unwrap_err(),
        Error::NamespaceNotFound(_)
    ));
    assert_eq!(db.list_tables().len(), 2);
    assert_eq!(db.stats().live_files, files);
    assert_eq!(db.list_table_snapshots().unwrap().len(), 1);

    // A snapshot whose file went missing: refused before anything is linked.
    let snap = d.path().join(SNAPSHOTS_DIR).join("s");
    let victim = std::fs::read_dir(snap.join("data"))
        .unwrap()
        .flat_map(|f| std::fs::read_dir(f.unwrap().path()).unwrap())
        .next()
        .unwrap()
        .unwrap()
        .path();
    let saved = std::fs::read(&victim).unwrap();
    std::fs::remove_file(&victim).unwrap();
    assert!(matches!(
        db.clone_table_snapshot("s", "c").unwrap_err(),
        Error::Io { .. }
    ));
    std::fs::write(&victim, &saved[..saved.len() - 1]).unwrap();
    assert!(matches!(
        db.clone_table_snapshot("s", "c").unwrap_err(),
        Error::Corruption { .. }
    ));
    std::fs::write(&victim, &saved).unwrap();
    assert!(!db.table_exists("c").unwrap());

    // Every byte of the descriptor is under its checksum.
    let desc = snap.join("SNAPSHOT");
    let good = std::fs::read(&desc).unwrap();
    for i in 0..good.len() {
        let mut b = good.clone();
        b[i] ^= 0x10;
        std::fs::write(&desc, &b).unwrap();
        let e = db.clone_table_snapshot("s", "c").unwrap_err();
        assert!(matches!(e, Error::Corruption { .. }), "byte {i}: {e}");
        assert!(matches!(
            db.list_table_snapshots().unwrap_err(),
            Error::Corruption { .. }
        ));
    }
    for len in [0, 10, good.len() - 1] {
        std::fs::write(&desc, &good[..len]).unwrap();
        assert!(matches!(
            db.clone_table_snapshot("s", "c").unwrap_err(),
            Error::Corruption { .. }
        ));
    }
    let mut longer = good.clone();
    longer.push(0);
    std::fs::write(&desc, &longer).unwrap();
    assert!(matches!(
        db.clone_table_snapshot("s", "c").unwrap_err(),
        Error::Corruption { .. }
    ));
    std::fs::write(&desc, &good).unwrap();
    assert_eq!(db.stats().live_files, files);
    assert_eq!(db.list_tables().len(), 2);
    db.clone_table_snapshot("s", "c").unwrap();
    assert_eq!(raw(&db, "c"), raw(&db, "t"));
}

#[test]
fn a_snapshot_under_concurrent_writers_keeps_batches_whole_and_acknowledged_writes() {
    const WRITERS: usize = 3;
    let d = tempfile::tempdir().unwrap();
    let opts = Options::default().write_buffer_size(64 << 10);
    let db = Db::open(d.path(), opts).unwrap();
    db.create_table(schema()).unwrap();
    let writers = common::BatchWriters::start(&db, "t", WRITERS);
    let mut floor = 500;
    for k in 0..6 {
        writers.wait_for(floor);
        let before = writers.acked();
        let skip = k % 2 == 1;
        let name = format!("s{k}");
        db.snapshot_table_with("t", &name, TableSnapshotOptions::default().skip_flush(skip))
            .unwrap();
        floor = before.iter().map(|b| b + 300).max().unwrap();
        let clone = format!("c{k}");
        db.clone_table_snapshot(&name, &clone).unwrap();
        check_whole(&db, &clone, (!skip).then_some(&before[..]));
    }
    writers.stop();
}

/// Rows of table `name` from the concurrent test: every batch in both families or neither,
/// a prefix of each writer's batches holding all acknowledged `before` the snapshot.
fn check_whole(db: &Db, name: &str, before: Option<&[u64]>) {
    let mut seen = vec![Vec::new(); 3];
    for r in raw(db, name) {
        let key = String::from_utf8(r.key.clone()).unwrap();
        let (w, i) = key[1..].split_once('-').unwrap();
        let (w, i): (usize, u64) = (w.parse().unwrap(), i.parse().unwrap());
        let v = format!("{i:0>200}");
        assert_eq!(
            r.value("a", "q"),
            Some(v.as_bytes()),
            "{name} {key}: family a"
        );
        assert_eq!(r.value("b", "q"), Some(v.as_bytes()), "{name} {key}: torn");
        seen[w].push(i);
    }
    for (w, s) in seen.iter().enumerate() {
        let n = s.len() as u64;
        assert!(
            s.iter().copied().eq(1..=n),
            "{name}: writer {w} not a prefix"
        );
        if let Some(b) = before {
            assert!(
                n >= b[w],
                "{name}: writer {w}: {n} rows, {} acknowledged",
                b[w]
            );
        }
    }
}

/// The operations of one table snapshot call, on a simulated file system: counted, or with
/// an EIO at the nth, then a power loss.
fn power_loss_sweep(what: &str, step: impl Fn(&Db) -> cellar::Result<()>) {
    let run = |nth: Option<u64>, policy: CrashPolicy, seed: u64| {
        let sim = SimFs::new();
        let ffs = FaultFs::new(sim.clone());
        let db = Db::open(Path::new("/db"), sim_opts(&ffs)).unwrap();
        db.create_table(schema()).unwrap();
        write(&db, 0, 120, "one", 50);
        db.snapshot_table("t", "base").unwrap();
        let at_base = raw(&db, "t");
        write(&db, 60, 160, "two", 40);
        // Durable before the step: SyncWal writes are not fsynced, and the check compares
        // the table after a power loss with this.
        db.flush().unwrap();
        let before = raw(&db, "t");
        let rule = Rule::any_op(Fault::Eio).path("/db/");
        let base = ffs.count_matching(&rule);
        if let Some(n) = nth {
            ffs.add_rule(Rule::any_op(Fault::Eio).path("/db/").nth(n));
        }
        let done = step(&db).is_ok();
        let ops = ffs.count_matching(&rule) - base;
        ffs.clear_rules();
        let after = FaultFs::new(sim.crash(policy, seed));
        drop(db);
        let why = format!("{what}: fault at op {nth:?}, {policy:?} seed {seed}, done {done}");
        let db = Db::open(Path::new("/db"), sim_opts(&after)).unwrap();
        // The table: as before the step, or as the step leaves it; nothing in between.
        let t = raw(&db, "t");
        let restored = t == at_base;
        assert!(t == before || restored, "{why}: table t is neither");
        assert!(
            !done || what != "restore" || restored,
            "{why}: restore lost"
        );
        if db.table_exists("c").unwrap() {
            assert_eq!(raw(&db, "c"), at_base, "{why}: clone partial");
        } else {
            assert!(!done || what != "clone", "{why}: clone lost");
        }
        // Snapshots: complete and cloneable, or absent; never a partial one listed.
        let listed = db.list_table_snapshots().unwrap();
        let names: Vec<&str> = listed.iter().map(|s| s.name.as_str()).collect();
        assert!(names.contains(&"base"), "{why}: base snapshot lost");
        if names.contains(&"s") {
            db.clone_table_snapshot("s", "check").unwrap();
            assert_eq!(raw(&db, "check"), before, "{why}: snapshot s partial");
        } else {
            assert!(!done || what != "snapshot", "{why}: snapshot lost");
        }
        // No file of a failed step stays behind in data/ once the database is reopened,
        // and a snapshot cut short goes at the next snapshot operation.
        let on_disk = hfiles_on(&after);
        assert_eq!(on_disk, db.stats().live_files, "{why}: orphan files");
        db.snapshot_table("t", "later").unwrap();
        let root = Path::new("/db").join(SNAPSHOTS_DIR);
        let mut dirs = after.list(&root).unwrap();
        dirs.sort();
        let mut expect: Vec<String> = db
            .list_table_snapshots()
            .unwrap()
            .into_iter()
            .map(|s| s.name)
            .collect();
        expect.sort();
        assert_eq!(dirs, expect, "{why}: incomplete snapshot left");
        (done, ops)
    };
    let (done, total) = run(None, CrashPolicy::DropAll, 0);
    assert!(done && total > 5, "{what}: {total} operations");
    // A fault may go unreported only where the step is done: removing a restore's replaced
    // files after its edit, or a directory `remove` that fails anyway (the tree removal
    // tells files from directories by trying).
    let mut surfaced = 0;
    for n in 1..=total {
        for (policy, seed) in [
            (CrashPolicy::DropAll, n),
            (CrashPolicy::KeepRandomPrefix, n),
        ] {
            surfaced += u64::from(!run(Some(n), policy, seed).0);
        }
    }
    assert!(
        surfaced >= total,
        "{what}: {surfaced} faults of {total} ops surfaced"
    );
}

#[test]
fn a_power_loss_during_a_snapshot_leaves_it_whole_or_absent() {
    power_loss_sweep("snapshot", |db| db.snapshot_table("t", "s").map(|_| ()));
}

#[test]
fn a_power_loss_during_a_clone_or_restore_leaves_all_of_it_or_none() {
    power_loss_sweep("clone", |db| db.clone_table_snapshot("base", "c"));
    power_loss_sweep("restore", |db| db.restore_table_snapshot("base"));
}

#[test]
fn a_power_loss_during_a_delete_leaves_the_snapshot_or_nothing() {
    let run = |nth: Option<u64>, seed: u64| {
        let sim = SimFs::new();
        let ffs = FaultFs::new(sim.clone());
        let db = Db::open(Path::new("/db"), sim_opts(&ffs)).unwrap();
        db.create_table(schema()).unwrap();
        write(&db, 0, 120, "one", 50);
        db.snapshot_table("t", "s").unwrap();
        let then = raw(&db, "t");
        let rule = Rule::any_op(Fault::Eio).path("/db/snapshots");
        let base = ffs.count_matching(&rule);
        if let Some(n) = nth {
            ffs.add_rule(Rule::any_op(Fault::Eio).path("/db/snapshots").nth(n));
        }
        let done = db.delete_table_snapshot("s").is_ok();
        let ops = ffs.count_matching(&rule) - base;
        ffs.clear_rules();
        let after = FaultFs::new(sim.crash(CrashPolicy::KeepRandomPrefix, seed));
        drop(db);
        let db = Db::open(Path::new("/db"), sim_opts(&after)).unwrap();
        let listed = db.list_table_snapshots().unwrap();
        if done {
            assert!(
                listed.is_empty(),
                "fault {nth:?}: a deleted snapshot is back"
            );
        } else if !listed.is_empty() {
            db.clone_table_snapshot("s", "c").unwrap();
            assert_eq!(raw(&db, "c"), then, "fault {nth:?}: damaged");
        }
        (done, ops)
    };
    let (done, total) = run(None, 0);
    assert!(done && total > 3, "{total} operations");
    // The first removal is the descriptor's: a fault there must surface. Later ones may
    // not (see `power_loss_sweep`), and the snapshot is gone either way.
    assert!(!run(Some(1), 1).0);
    for n in 2..=total {
        run(Some(n), n);
    }
}

/// A full disk at any write of a snapshot (its copies, where links are missing) or a clone:
/// `NoSpace`, nothing left behind, the database still writable, and the same call works once
/// space is back.
#[test]
fn a_full_disk_fails_the_call_with_no_space_and_leaves_nothing() {
    let ffs = FaultFs::new(SimFs::new());
    let db = Db::open(Path::new("/db"), sim_opts(&ffs)).unwrap();
    db.create_table(schema()).unwrap();
    write(&db, 0, 120, "one", 50);
    db.flush().unwrap();
    let files = db.stats().live_files;
    let full = || {
        ffs.add_rule(Rule::on(cellar::fs::OpKind::Write, Fault::NoSpace).path("/db/"));
    };
    full();
    let e = db.snapshot_table("t", "s").unwrap_err();
    assert!(e.is_no_space(), "{e}");
    ffs.clear_rules();
    assert!(db.list_table_snapshots().unwrap().is_empty());
    assert_eq!(
        ffs.list(&Path::new("/db").join(SNAPSHOTS_DIR)).unwrap(),
        Vec::<String>::new()
    );
    db.table("t")
        .unwrap()
        .put(Put::new("later").add("a", "q", "v"))
        .unwrap();
    db.snapshot_table("t", "s").unwrap();
    let at_snapshot = raw(&db, "t");
    full();
    let e = db.clone_table_snapshot("s", "c").unwrap_err();
    assert!(e.is_no_space(), "{e}");
    ffs.clear_rules();
    assert!(!db.table_exists("c").unwrap());
    let on_disk = hfiles_on(&ffs);
    assert_eq!(on_disk, db.stats().live_files, "orphan files of the clone");
    db.clone_table_snapshot("s", "c").unwrap();
    assert_eq!(db.stats().live_files, on_disk + files + 1);
    assert_eq!(raw(&db, "c"), at_snapshot);
}
