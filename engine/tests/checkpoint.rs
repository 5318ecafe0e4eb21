//! Online checkpoints (`Db::checkpoint`, SPEC.md §17.10): the directory opens as a database of
//! its own holding every acknowledged write, batches whole, while the source keeps going; a
//! checkpoint cut short is refused at open; files are linked on a real file system and copied
//! where links are missing.

mod common;

use std::path::Path;
use std::sync::Arc;

use cellar::fs::{CrashPolicy, Fault, FaultFs, FileSystem, OpKind, Rule, SimFs};
use cellar::{
    CheckpointInfo, Db, Delete, Durability, Error, FamilyDescriptor, Get, Options, Put, Row, Scan,
    TableDescriptor, WriteOptions,
};

fn schema(db: &Db) {
    db.create_table(
        TableDescriptor::new("t")
            .family(FamilyDescriptor::new("a").max_versions(3))
            .family(FamilyDescriptor::new("b")),
    )
    .unwrap();
    db.create_table(TableDescriptor::new("u").family(FamilyDescriptor::new("cf")))
        .unwrap();
}

/// Every cell of every table, delete markers and old versions included.
fn everything(db: &Db, snap: Option<&cellar::Snapshot>) -> Vec<(String, Vec<Row>)> {
    ["t", "u"]
        .iter()
        .map(|name| {
            let mut scan = Scan::new().raw();
            if let Some(s) = snap {
                scan = scan.at(s);
            }
            let rows = db
                .table(name)
                .unwrap()
                .scan(scan)
                .unwrap()
                .collect::<Result<Vec<_>, _>>()
                .unwrap();
            (name.to_string(), rows)
        })
        .collect()
}

#[test]
fn a_checkpoint_opens_alone_with_every_acknowledged_write() {
    let d = tempfile::tempdir().unwrap();
    let src = d.path().join("src");
    let db = Db::open(&src, Options::default()).unwrap();
    schema(&db);
    let t = db.table("t").unwrap();
    let u = db.table("u").unwrap();
    // Files in two levels, then memstore writes of every durability, and deletes.
    for i in 0..300u32 {
        t.put(
            Put::new(format!("r{i:04}"))
                .add_at("a", "q", 1, format!("v1-{i}"))
                .add_at("b", "q", 1, "b"),
        )
        .unwrap();
    }
    db.flush().unwrap();
    db.major_compact("t", None).unwrap();
    for i in 0..300u32 {
        t.put(Put::new(format!("r{i:04}")).add_at("a", "q", 2, format!("v2-{i}")))
            .unwrap();
    }
    db.flush().unwrap();
    t.delete(Delete::new("r0007")).unwrap();
    t.put_with(
        Put::new("skip").add("a", "q", "not in any WAL"),
        WriteOptions::durability(Durability::SkipWal),
    )
    .unwrap();
    u.put_with(
        Put::new("async").add("cf", "q", "queued"),
        WriteOptions::durability(Durability::AsyncWal),
    )
    .unwrap();
    u.put(Put::new("sync").add("cf", "q", "logged")).unwrap();

    let snap = db.snapshot();
    let expected = everything(&db, Some(&snap));
    let cp = d.path().join("cp");
    let info = db.checkpoint(&cp).unwrap();
    assert!(info.linked_files >= 2, "{info:?}");
    assert_eq!(info.copied_files, 0, "a real file system links");
    assert!(info.file_bytes > 0 && info.wal_segments >= 1, "{info:?}");

    // The source goes on, and nothing it does reaches the checkpoint.
    t.put(Put::new("later").add("a", "q", "after")).unwrap();
    t.delete(Delete::new("r0001")).unwrap();
    db.flush().unwrap();
    db.major_compact("t", None).unwrap();
    drop(snap);
    drop((t, u));
    db.close().unwrap();

    let c = Db::open(&cp, Options::default()).unwrap();
    assert_eq!(everything(&c, None), expected);
    let ct = c.table("t").unwrap();
    assert!(ct.get(&Get::new("later")).unwrap().is_none());
    assert!(ct.get(&Get::new("r0001")).unwrap().is_some());
    assert!(ct.get(&Get::new("r0007")).unwrap().is_none());
    // The checkpoint is a database: it takes writes and survives its own reopen.
    ct.put(Put::new("own").add("b", "q", "mine")).unwrap();
    drop(ct);
    c.close().unwrap();
    let c = Db::open(&cp, Options::default()).unwrap();
    assert!(c
        .table("t")
        .unwrap()
        .get(&Get::new("own"))
        .unwrap()
        .is_some());
    drop(c);

    // The source, reopened, has its own later writes and not the checkpoint's.
    let db = Db::open(&src, Options::default()).unwrap();
    let t = db.table("t").unwrap();
    assert!(t.get(&Get::new("later")).unwrap().is_some());
    assert!(t.get(&Get::new("own")).unwrap().is_none());
    assert!(t.get(&Get::new("r0001")).unwrap().is_none());
}

#[test]
fn a_checkpoint_into_an_existing_path_is_refused() {
    let d = tempfile::tempdir().unwrap();
    let db = Db::open(d.path().join("src"), Options::default()).unwrap();
    schema(&db);
    let taken = d.path().join("taken");
    std::fs::create_dir(&taken).unwrap();
    std::fs::write(taken.join("keep"), b"x").unwrap();
    let e = db.checkpoint(&taken).unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
    assert_eq!(std::fs::read(taken.join("keep")).unwrap(), b"x");
    assert_eq!(std::fs::read_dir(&taken).unwrap().count(), 1);
    // The source database is none the worse.
    db.table("u")
        .unwrap()
        .put(Put::new("r").add("cf", "q", "v"))
        .unwrap();
}

/// Writers of cross-family batches (each row in both families of `t`), counting what was
/// acknowledged; small memstores so flushes and compactions run under the checkpoint.
#[test]
fn a_checkpoint_under_concurrent_writers_keeps_batches_whole_and_acknowledged_writes() {
    const WRITERS: usize = 3;
    let d = tempfile::tempdir().unwrap();
    let opts = Options::default().write_buffer_size(64 << 10);
    let db = Db::open(d.path().join("src"), opts).unwrap();
    schema(&db);
    let writers = common::BatchWriters::start(&db, "t", WRITERS);
    // Up to 8 checkpoints while the writers run: each must hold whole batches and every
    // acknowledged write. At least one must also have replayed writes from its copied WAL
    // (ones that landed after its flush); a single checkpoint cannot promise that, since a
    // busy machine may not schedule any writer between the flush and the copy.
    let mut taken = Vec::new();
    let mut floor = 1500;
    for k in 0..8 {
        writers.wait_for(floor);
        let before = writers.acked();
        let cp = d.path().join(format!("cp{k}"));
        let info = db.checkpoint(&cp).unwrap();
        floor = before.iter().map(|b| b + 300).max().unwrap();
        let replayed = verify_checkpoint(&cp, &before, &info);
        taken.push(replayed);
        if replayed > 0 && k >= 1 {
            break;
        }
    }
    writers.wait_for(floor);
    writers.stop();
    db.close().unwrap();
    assert!(
        taken.iter().any(|&r| r > 0),
        "no checkpoint replayed anything from its copied WAL: {taken:?}"
    );
}

/// Open checkpoint `cp` of the concurrent-writers test and check its rows: whole batches, a
/// prefix of each writer's writes holding all acknowledged `before` it. Returns the batches
/// replayed from its WAL.
fn verify_checkpoint(cp: &Path, before: &[u64], info: &CheckpointInfo) -> u64 {
    let c = Db::open(cp, Options::default()).unwrap();
    let replayed = c.stats().recovery.replayed_batches;
    let rows = c
        .table("t")
        .unwrap()
        .scan(Scan::new())
        .unwrap()
        .collect::<Result<Vec<_>, _>>()
        .unwrap();
    let mut seen = vec![Vec::new(); before.len()];
    for r in &rows {
        let key = String::from_utf8(r.key.clone()).unwrap();
        let (w, i) = key[1..].split_once('-').unwrap();
        let (w, i): (usize, u64) = (w.parse().unwrap(), i.parse().unwrap());
        let v = format!("{i:0>200}");
        assert_eq!(r.value("a", "q"), Some(v.as_bytes()), "{key}: family a");
        assert_eq!(
            r.value("b", "q"),
            Some(v.as_bytes()),
            "{key}: family b (batch torn)"
        );
        seen[w].push(i);
    }
    for (w, s) in seen.iter().enumerate() {
        // Each writer's batches are a prefix of what it wrote, holding all it had been told
        // was written before the call.
        let n = s.len() as u64;
        assert!(s.iter().copied().eq(1..=n), "writer {w}: not a prefix");
        assert!(
            n >= before[w],
            "writer {w}: {n} rows, {} acknowledged before",
            before[w]
        );
    }
    eprintln!(
        "checkpoint {info:?}; replayed {replayed}; rows per writer {:?}, acknowledged before \
         {before:?}",
        seen.iter().map(Vec::len).collect::<Vec<_>>()
    );
    c.close().unwrap();
    replayed
}

fn sim_opts(fs: &FaultFs<SimFs>) -> Options {
    Options {
        fs: Arc::new(fs.clone()),
        ..Options::default()
    }
}

fn fill(db: &Db) {
    schema(db);
    let t = db.table("t").unwrap();
    for i in 0..200u32 {
        t.put(Put::new(format!("r{i:04}")).add("a", "q", "v"))
            .unwrap();
        if i % 70 == 69 {
            db.flush().unwrap();
        }
    }
}

#[test]
fn without_links_the_files_are_copied() {
    let ffs = FaultFs::new(SimFs::new());
    let db = Db::open(Path::new("/db"), sim_opts(&ffs)).unwrap();
    fill(&db);
    let expected = everything(&db, None);
    let info = db.checkpoint(Path::new("/cp")).unwrap();
    assert_eq!(info.linked_files, 0);
    assert!(info.copied_files >= 2, "{info:?}");
    drop(db);
    let c = Db::open(Path::new("/cp"), sim_opts(&ffs)).unwrap();
    assert_eq!(everything(&c, None), expected);
}

/// A failure at any file operation of the checkpoint: an error, the source unharmed, and the
/// partial directory refused at open (not opened as an empty database over its files).
#[test]
fn a_checkpoint_cut_short_is_refused_at_open_and_the_source_is_unharmed() {
    let mut failed = 0;
    for kind in [
        OpKind::Create,
        OpKind::Write,
        OpKind::SyncData,
        OpKind::SyncDir,
    ] {
        for nth in [1u64, 2, 4] {
            let ffs = FaultFs::new(SimFs::new());
            let db = Db::open(Path::new("/db"), sim_opts(&ffs)).unwrap();
            fill(&db);
            let expected = everything(&db, None);
            ffs.add_rule(Rule::on(kind, Fault::Eio).path("/cp").nth(nth));
            let r = db.checkpoint(Path::new("/cp"));
            ffs.clear_rules();
            let what = format!("{kind:?} #{nth}");
            match r {
                Err(e) => {
                    failed += 1;
                    assert!(!matches!(e, Error::Poisoned(_)), "{what}: {e}");
                    // Either nothing is left (the marker itself failed) or the marker is.
                    if ffs.exists(Path::new("/cp")).unwrap() {
                        match Db::open(Path::new("/cp"), sim_opts(&ffs)) {
                            Ok(_) => panic!("{what}: a cut-short checkpoint opened"),
                            Err(e) => assert!(
                                e.to_string().contains("CHECKPOINT-INCOMPLETE"),
                                "{what}: {e}"
                            ),
                        }
                    }
                }
                // The checkpoint has fewer such operations than `nth`.
                Ok(_) => {
                    let c = Db::open(Path::new("/cp"), sim_opts(&ffs)).unwrap();
                    assert_eq!(everything(&c, None), expected, "{what}");
                }
            }
            // The source still takes writes and holds what it held.
            db.table("u")
                .unwrap()
                .put(Put::new("after").add("cf", "q", "v"))
                .unwrap_or_else(|e| panic!("{what}: {e}"));
            assert_eq!(everything(&db, None)[0], expected[0], "{what}");
        }
    }
    // Every kind has at least one such operation in a checkpoint.
    assert!(failed >= 4, "only {failed} injected faults surfaced");
}

/// A power loss at any point of a checkpoint (its n-th file operation fails, then only what was
/// durable survives), and after a complete one: the source holds what it held; the checkpoint
/// is absent, refused for its marker, an empty directory (opened as a new database), or, once
/// the call returned, complete.
#[test]
fn a_power_loss_during_or_after_a_checkpoint_leaves_it_whole_or_refused() {
    let run = |nth: Option<u64>, policy: CrashPolicy, seed: u64| {
        let sim = SimFs::new();
        let ffs = FaultFs::new(sim.clone());
        let db = Db::open(Path::new("/db"), sim_opts(&ffs)).unwrap();
        fill(&db);
        db.flush().unwrap();
        let expected = everything(&db, None);
        if let Some(n) = nth {
            ffs.add_rule(Rule::any_op(Fault::Eio).path("/cp").nth(n));
        }
        let done = db.checkpoint(Path::new("/cp")).is_ok();
        let ops = ffs.count_matching(&Rule::any_op(Fault::Eio).path("/cp"));
        let after = FaultFs::new(sim.crash(policy, seed));
        drop(db);
        let what = format!("fault at /cp op {nth:?}, {policy:?} seed {seed}, done {done}");
        let src = Db::open(Path::new("/db"), sim_opts(&after)).unwrap();
        assert_eq!(everything(&src, None), expected, "{what}: source");
        drop(src);
        if after.exists(Path::new("/cp")).unwrap() {
            match Db::open(Path::new("/cp"), sim_opts(&after)) {
                Ok(c) => {
                    let empty = c.list_tables().is_empty();
                    assert!(
                        (empty && !done) || everything(&c, None) == expected,
                        "{what}: the checkpoint opened with other contents"
                    );
                }
                Err(e) => {
                    assert!(!done, "{what}: a finished checkpoint is refused: {e}");
                    assert!(
                        e.to_string().contains("CHECKPOINT-INCOMPLETE"),
                        "{what}: {e}"
                    );
                }
            }
        } else {
            assert!(!done, "{what}: a finished checkpoint is gone");
        }
        (done, ops)
    };
    let (done, total) = run(None, CrashPolicy::DropAll, 0);
    assert!(done && total > 10, "{total} operations");
    for n in 1..=total {
        for (policy, seed) in [
            (CrashPolicy::DropAll, n),
            (CrashPolicy::KeepRandomPrefix, n),
        ] {
            let (done, _) = run(Some(n), policy, seed);
            assert!(!done, "the fault at op {n} of {total} did not surface");
        }
    }
}
