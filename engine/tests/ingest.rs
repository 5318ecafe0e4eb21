//! Bulk load (`Table::ingest`, SPEC.md §17.12): a load reads as the same writes made through
//! the API at that point, lands at the deepest level it fits, is invisible to older snapshots,
//! survives reopen with its sequence numbers, and any bad input or failed write leaves the
//! database as it was.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use cellar::format::cell::compare_keys;
use cellar::format::{CellType, HFileWriter, KeyRef, WriterOptions};
use cellar::fs::{CrashPolicy, Fault, FaultFs, FileSystem, OpKind, Rule, SimFs};
use cellar::{
    Db, Delete, Error, FamilyDescriptor, Get, Options, Put, Scan, Stats, TableDescriptor,
};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// One write: a put or one of the four markers.
#[derive(Debug, Clone)]
enum Op {
    Put(String, String, u64, String),
    Delete(String, String, u64),
    DeleteColumn(String, String, u64),
    DeleteFamily(String, u64),
    DeleteFamilyVersion(String, u64),
}

impl Op {
    fn random(rng: &mut StdRng, rows: std::ops::Range<u32>, n: usize) -> Op {
        let row = format!("r{:02}", rng.random_range(rows));
        let q = format!("q{}", rng.random_range(0..3));
        let ts = rng.random_range(1..12u64);
        match rng.random_range(0..20) {
            0..=11 => Op::Put(row, q, ts, format!("v{n}")),
            12..=14 => Op::Delete(row, q, ts),
            15..=16 => Op::DeleteColumn(row, q, ts),
            17..=18 => Op::DeleteFamily(row, ts),
            _ => Op::DeleteFamilyVersion(row, ts),
        }
    }

    fn apply(&self, db: &Db) {
        let t = db.table("t").unwrap();
        match self {
            Op::Put(r, q, ts, v) => {
                t.put(Put::new(r.as_str()).add_at("cf", q.as_str(), *ts, v.as_str()))
            }
            Op::Delete(r, q, ts) => {
                t.delete(Delete::new(r.as_str()).column_at("cf", q.as_str(), *ts))
            }
            Op::DeleteColumn(r, q, ts) => {
                t.delete(Delete::new(r.as_str()).columns_at("cf", q.as_str(), *ts))
            }
            Op::DeleteFamily(r, ts) => t.delete(Delete::new(r.as_str()).family_at("cf", *ts)),
            Op::DeleteFamilyVersion(r, ts) => {
                t.delete(Delete::new(r.as_str()).family_version("cf", *ts))
            }
        }
        .unwrap();
    }

    /// Row, qualifier, timestamp, type, value.
    fn cell(&self) -> (&str, &str, u64, CellType, &str) {
        match self {
            Op::Put(r, q, ts, v) => (r, q, *ts, CellType::Put, v),
            Op::Delete(r, q, ts) => (r, q, *ts, CellType::Delete, ""),
            Op::DeleteColumn(r, q, ts) => (r, q, *ts, CellType::DeleteColumn, ""),
            Op::DeleteFamily(r, ts) => (r, "", *ts, CellType::DeleteFamily, ""),
            Op::DeleteFamilyVersion(r, ts) => (r, "", *ts, CellType::DeleteFamilyVersion, ""),
        }
    }
}

/// The bytes of an HFile of family `family` holding `ops`, a later op numbered higher (as
/// `cellar hfile build` numbers lines), so equal cells keep the later one.
fn hfile_bytes(family: &str, ops: &[Op]) -> Vec<u8> {
    hfile_bytes_from(family, ops, 1)
}

/// As [`hfile_bytes`], the first op numbered `first` (0: every cell at seq 0, as a loader
/// that leaves numbering to the database writes them; the cells must then differ).
fn hfile_bytes_from(family: &str, ops: &[Op], first: u64) -> Vec<u8> {
    let mut keyed: Vec<(Vec<u8>, Vec<u8>)> = ops
        .iter()
        .enumerate()
        .map(|(i, op)| {
            let (r, q, ts, ty, v) = op.cell();
            let key = KeyRef {
                row: r.as_bytes(),
                family: family.as_bytes(),
                qualifier: q.as_bytes(),
                timestamp: ts,
                type_code: ty as u8,
                seq: if first == 0 { 0 } else { first + i as u64 },
            };
            (key.encode(), v.as_bytes().to_vec())
        })
        .collect();
    keyed.sort_by(|a, b| compare_keys(&a.0, &b.0));
    let mut w = HFileWriter::new(Vec::new(), "load", WriterOptions::new(family)).unwrap();
    for (k, v) in &keyed {
        w.append(&KeyRef::parse(k).unwrap(), v).unwrap();
    }
    w.finish().unwrap().0
}

fn write_hfile(path: &Path, family: &str, ops: &[Op]) -> PathBuf {
    std::fs::write(path, hfile_bytes(family, ops)).unwrap();
    path.to_path_buf()
}

/// Options of a database on `fs`, a simulated file system; compactions only when asked.
fn sim_options(fs: &FaultFs<SimFs>) -> Options {
    let mut o = Options {
        fs: Arc::new(fs.clone()),
        ..Options::default()
    };
    o.compaction.threads = 0;
    o
}

fn schema() -> TableDescriptor {
    // Enough versions that no flush or compaction purges one: the answers then do not
    // depend on when files were written (SPEC.md §20.2).
    TableDescriptor::new("t").family(FamilyDescriptor::new("cf").max_versions(100))
}

fn open(dir: &Path) -> Db {
    let mut opts = Options::default();
    opts.compaction.threads = 0;
    let db = Db::open(dir, opts).unwrap();
    if !db.table_exists("t").unwrap() {
        db.create_table(schema()).unwrap();
    }
    db
}

/// Every version of every cell, and the newest of each column, as strings.
fn contents(db: &Db) -> (Vec<String>, Vec<String>) {
    let t = db.table("t").unwrap();
    let show = |scan: Scan| -> Vec<String> {
        t.scan(scan)
            .unwrap()
            .map(|r| r.unwrap())
            .flat_map(|row| {
                row.cells()
                    .iter()
                    .map(|c| {
                        format!(
                            "{}/{}/{}@{}={}",
                            String::from_utf8_lossy(&c.row),
                            c.family,
                            String::from_utf8_lossy(&c.qualifier),
                            c.timestamp,
                            String::from_utf8_lossy(&c.value)
                        )
                    })
                    .collect::<Vec<_>>()
            })
            .collect()
    };
    (show(Scan::new().all_versions()), show(Scan::new()))
}

fn files_at(stats: &Stats) -> Vec<u64> {
    stats.compaction.levels.iter().map(|l| l.files).collect()
}

#[test]
fn a_load_reads_as_the_same_writes_through_the_api() {
    for seed in 0..12u64 {
        // Seeds 6..10: the load's rows hold nothing and its sequence numbers (1..=200) are
        // below the read point after 250 writes, so it is loaded as it is (SPEC.md §17.12
        // rule 6). Seeds 10..: as low numbers, but in rows holding data: rewritten.
        let apart = (6..10).contains(&seed);
        let low = seed >= 6;
        let mut rng = StdRng::seed_from_u64(seed);
        let before: Vec<Op> = (0..if low { 250 } else { 120 })
            .map(|i| Op::random(&mut rng, 0..30, i))
            .collect();
        let rows = if apart { 40..70 } else { 10..40 };
        let load: Vec<Op> = (0..200)
            .map(|i| Op::random(&mut rng, rows.clone(), 1000 + i))
            .collect();
        let after: Vec<Op> = (0..60)
            .map(|i| Op::random(&mut rng, 0..70, 2000 + i))
            .collect();
        let tmp = tempfile::tempdir().unwrap();
        let file = write_hfile(&tmp.path().join("load.hfile"), "cf", &load);

        let a = open(&tmp.path().join("a"));
        let (flushed, in_mem) = before.split_at(if low { 220 } else { 80 });
        flushed.iter().for_each(|op| op.apply(&a));
        a.flush().unwrap();
        // Half the seeds leave memstore cells in the load's rows: the load flushes them first.
        if seed % 2 == 0 {
            in_mem.iter().for_each(|op| op.apply(&a));
        }
        let info = a.table("t").unwrap().ingest("cf", &[&file]).unwrap();
        let f = &info.files[0];
        assert_eq!(f.cells, load.len() as u64);
        assert_eq!(f.as_is, apart, "seed {seed}");
        // Loaded as it is, repeated cells stay, told apart by their sequence numbers.
        assert_eq!(
            f.duplicates > 0,
            !apart,
            "seed {seed}: the load repeats cells"
        );
        if seed % 2 == 1 {
            in_mem.iter().for_each(|op| op.apply(&a));
        }
        after.iter().for_each(|op| op.apply(&a));

        let b = open(&tmp.path().join("b"));
        let order: Vec<&Op> = if seed % 2 == 0 {
            before.iter().chain(&load).chain(&after).collect()
        } else {
            flushed
                .iter()
                .chain(&load)
                .chain(in_mem)
                .chain(&after)
                .collect()
        };
        order.iter().for_each(|op| op.apply(&b));

        let want = contents(&b);
        assert!(!want.1.is_empty());
        assert_eq!(contents(&a), want, "seed {seed}");
        a.flush().unwrap();
        a.major_compact("t", None).unwrap();
        assert_eq!(contents(&a), want, "seed {seed}, after a major compaction");
        drop(a);
        let a = open(&tmp.path().join("a"));
        assert_eq!(contents(&a), want, "seed {seed}, reopened");
    }
}

#[test]
fn loads_go_to_the_deepest_level_clear_above_them() {
    let tmp = tempfile::tempdir().unwrap();
    let db = open(&tmp.path().join("db"));
    let t = db.table("t").unwrap();
    let put = |r: &str| Op::Put(r.into(), "q".into(), 5, format!("{r}-loaded"));
    let load = |name: &str, rows: &[&str]| {
        let ops: Vec<Op> = rows.iter().map(|r| put(r)).collect();
        write_hfile(&tmp.path().join(name), "cf", &ops)
    };

    let info = t.ingest("cf", &[load("a", &["a1", "a5"])]).unwrap();
    assert_eq!(info.files[0].level, 6, "an empty family: the last level");
    let info = t.ingest("cf", &[load("b", &["c1", "c5"])]).unwrap();
    assert_eq!(info.files[0].level, 6, "new rows beside the first load");
    let info = t.ingest("cf", &[load("c", &["a3", "b"])]).unwrap();
    assert_eq!(info.files[0].level, 5, "over the first load");
    assert_eq!(files_at(&db.stats()), [0, 0, 0, 0, 0, 1, 2]);

    // Two files of one load whose rows meet: the second is newer and goes above the first.
    let info = t
        .ingest("cf", &[load("d", &["d1", "d3"]), load("e", &["d2"])])
        .unwrap();
    let levels: Vec<u32> = info.files.iter().map(|f| f.level).collect();
    assert_eq!(levels, [6, 5]);
    assert_ne!(info.files[0].seq, info.files[1].seq);
    assert!(info.files[0].seq < info.files[1].seq);

    // Memstore cells in the load's rows are flushed first; the load goes above them.
    t.put(Put::new("e1").add_at("cf", "q", 9, "written"))
        .unwrap();
    let flushes = db.stats().flushes;
    let info = t.ingest("cf", &[load("f", &["e1", "e2"])]).unwrap();
    assert_eq!(db.stats().flushes, flushes + 1);
    assert_eq!(info.files[0].level, 0, "above the flushed L0 file");
    // Memstore cells elsewhere are left alone.
    t.put(Put::new("z9").add_at("cf", "q", 9, "written"))
        .unwrap();
    let info = t.ingest("cf", &[load("g", &["g1"])]).unwrap();
    assert_eq!(db.stats().flushes, flushes + 1);
    assert_eq!(info.files[0].level, 6);

    let s = db.stats();
    assert_eq!(s.ingests, 6);
    assert_eq!(s.ingested_files, 7);
    assert_eq!(s.ingested_cells, 12);
    assert!(s.ingested_bytes > 0);
    let got = t.get(&Get::new("e1").all_versions()).unwrap().unwrap();
    let values: Vec<&[u8]> = got.cells().iter().map(|c| c.value.as_slice()).collect();
    assert_eq!(
        values,
        [b"written".as_slice(), b"e1-loaded"],
        "timestamps order them"
    );
    assert!(
        db.stats_report().contains("Ingested"),
        "{}",
        db.stats_report()
    );
}

#[test]
fn a_load_splits_at_the_target_file_size_between_rows() {
    let tmp = tempfile::tempdir().unwrap();
    let mut opts = Options::default();
    opts.compaction.threads = 0;
    // Outputs are cut between data blocks (64 KiB by default).
    opts.compaction.target_file_size = 64 << 10;
    let db = Db::open(tmp.path().join("db"), opts).unwrap();
    db.create_table(schema()).unwrap();
    let ops: Vec<Op> = (0..8000)
        .map(|i| {
            Op::Put(
                format!("row{:05}", i / 4),
                format!("q{}", i % 4),
                1,
                "x".repeat(40),
            )
        })
        .collect();
    let file = write_hfile(&tmp.path().join("big"), "cf", &ops);
    let info = db.table("t").unwrap().ingest("cf", &[&file]).unwrap();
    let f = &info.files[0];
    assert!(f.files.len() >= 3, "{f:?}");
    assert_eq!(files_at(&db.stats())[6], f.files.len() as u64);
    // The files of one level are disjoint and every row is whole in one of them.
    let t = db.table("t").unwrap();
    let rows = |t: &cellar::Table| -> usize {
        t.scan(Scan::new())
            .unwrap()
            .map(|r| r.unwrap().cells().len())
            .filter(|&n| n == 4)
            .count()
    };
    assert_eq!(rows(&t), 2000);
    db.major_compact("t", None).unwrap();
    assert_eq!(rows(&t), 2000);
}

#[test]
fn older_snapshots_miss_a_load_and_later_writes_win_after_reopen() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    let db = open(&dir);
    let t = db.table("t").unwrap();
    t.put(Put::new("r1").add_at("cf", "q", 5, "written"))
        .unwrap();
    let snap = db.snapshot();
    let file = write_hfile(
        &tmp.path().join("load"),
        "cf",
        &[Op::Put("r1".into(), "q".into(), 5, "loaded".into())],
    );
    let info = t.ingest("cf", &[&file]).unwrap();
    assert!(info.files[0].seq > snap.seq());
    let value = |g: Get| {
        t.get(&g)
            .unwrap()
            .unwrap()
            .value("cf", "q")
            .map(<[u8]>::to_vec)
    };
    assert_eq!(value(Get::new("r1").at(&snap)), Some(b"written".to_vec()));
    // Same coordinates: the newer write wins, and the load is newer.
    assert_eq!(value(Get::new("r1")), Some(b"loaded".to_vec()));
    // Rows holding nothing, cells at seq 0: copied as it is only with no snapshot live, as
    // such cells read as old writes a snapshot would see appear.
    let fresh = |name: &str, row: &str| {
        let p = tmp.path().join(name);
        let op = Op::Put(row.into(), "q".into(), 5, "fresh".into());
        std::fs::write(&p, hfile_bytes_from("cf", &[op], 0)).unwrap();
        p
    };
    let info = t.ingest("cf", &[fresh("x", "x1")]).unwrap();
    assert!(!info.files[0].as_is, "a snapshot is live");
    assert!(t.get(&Get::new("x1").at(&snap)).unwrap().is_none());
    assert_eq!(value(Get::new("x1")), Some(b"fresh".to_vec()));
    drop(snap);
    let info = t.ingest("cf", &[fresh("y", "y1")]).unwrap();
    assert!(info.files[0].as_is);
    assert_eq!((info.files[0].seq, info.files[0].level), (0, 6));
    assert_eq!(value(Get::new("y1")), Some(b"fresh".to_vec()));
    drop(t);
    db.close().unwrap();

    let db = open(&dir);
    let t = db.table("t").unwrap();
    assert_eq!(
        t.get(&Get::new("r1")).unwrap().unwrap().value("cf", "q"),
        Some(&b"loaded"[..])
    );
    // Sequence numbers go on above the load's.
    let seq = t
        .put(Put::new("r1").add_at("cf", "q", 5, "rewritten"))
        .unwrap();
    assert!(seq > info.files[0].seq);
    assert_eq!(
        t.get(&Get::new("r1")).unwrap().unwrap().value("cf", "q"),
        Some(&b"rewritten"[..])
    );
}

#[test]
fn bad_inputs_are_refused_with_nothing_changed() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    let db = open(&dir);
    db.create_table(TableDescriptor::new("u").family(FamilyDescriptor::new("other")))
        .unwrap();
    let t = db.table("t").unwrap();
    t.put(Put::new("r0").add_at("cf", "q", 1, "v")).unwrap();
    let ops: Vec<Op> = (0..300)
        .map(|i| Op::Put(format!("r{i:03}"), "q".into(), 2, "loaded".repeat(10)))
        .collect();
    let good = write_hfile(&tmp.path().join("good"), "cf", &ops);
    let other = write_hfile(&tmp.path().join("other"), "other", &ops);
    let damaged = write_hfile(&tmp.path().join("damaged"), "cf", &ops);
    let mut bytes = std::fs::read(&damaged).unwrap();
    bytes[100] ^= 0x40;
    std::fs::write(&damaged, bytes).unwrap();
    let latest = write_hfile(
        &tmp.path().join("latest"),
        "cf",
        &[Op::Put("r1".into(), "q".into(), u64::MAX, "now?".into())],
    );
    let before = (contents(&db), db.stats().live_files);
    let hfiles = || -> usize {
        std::fs::read_dir(dir.join("data"))
            .unwrap()
            .map(|d| std::fs::read_dir(d.unwrap().path()).unwrap().count())
            .sum()
    };
    let hfiles_before = hfiles();

    let e = t.ingest("cf", &[&good, &damaged]).unwrap_err();
    assert!(matches!(e, Error::Corruption { .. }), "{e}");
    assert!(e.to_string().contains("damaged"), "{e}");
    let e = t.ingest("cf", &[&good, &other]).unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
    let e = t.ingest("cf", &[&good, &latest]).unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
    assert!(e.to_string().contains("LATEST"), "{e}");
    let e = t.ingest("cf", &[tmp.path().join("missing")]).unwrap_err();
    assert!(matches!(e, Error::Io { .. }), "{e}");
    let e = t.ingest("nope", &[&good]).unwrap_err();
    assert!(matches!(e, Error::FamilyNotFound { .. }), "{e}");
    let e = t.ingest::<&Path>("cf", &[]).unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
    let e = db
        .table("u")
        .unwrap()
        .ingest("other", &[&good])
        .unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e}");

    assert_eq!((contents(&db), db.stats().live_files), before);
    assert_eq!(db.stats().ingests, 0);
    assert_eq!(hfiles(), hfiles_before, "no file of a refused load is left");
    // Writes go on: no reserved sequence number was left open.
    t.put(Put::new("r0").add_at("cf", "q", 3, "after")).unwrap();
    t.ingest("cf", &[&good]).unwrap();
    assert_eq!(contents(&db).1.len(), 301, "r0 and the load");
}

#[test]
fn a_failed_write_during_a_load_removes_its_files_and_keeps_the_database_writable() {
    let ffs = FaultFs::new(SimFs::new());
    let opts = || sim_options(&ffs);
    let db = Db::open(Path::new("/db"), opts()).unwrap();
    db.create_table(schema()).unwrap();
    let t = db.table("t").unwrap();
    t.put(Put::new("a").add_at("cf", "q", 1, "v")).unwrap();
    let ops: Vec<Op> = (0..500)
        .map(|i| Op::Put(format!("r{i:03}"), "q".into(), 2, "loaded".repeat(10)))
        .collect();
    let src = Path::new("/load.hfile");
    let f = ffs.create(src).unwrap();
    f.write_all_at(&hfile_bytes("cf", &ops), 0).unwrap();
    f.sync_data().unwrap();
    drop(f);
    let listing = |fs: &FaultFs<SimFs>| -> Vec<String> {
        let mut v = Vec::new();
        for d in fs.list(Path::new("/db/data")).unwrap() {
            let p = Path::new("/db/data").join(&d);
            v.extend(
                fs.list(&p)
                    .unwrap_or_default()
                    .into_iter()
                    .map(|n| format!("{d}/{n}")),
            );
        }
        v
    };
    let before = listing(&ffs);
    let mut failures = 0;
    for (kind, fault) in [
        (OpKind::Create, Fault::NoSpace),
        (OpKind::Write, Fault::NoSpace),
        (OpKind::SyncData, Fault::Eio),
        (OpKind::SyncDir, Fault::Eio),
    ] {
        ffs.add_rule(Rule::on(kind, fault).path("/db/data").nth(1));
        let r = t.ingest("cf", &[src]);
        ffs.clear_rules();
        let e = r.expect_err("the fault hits the load");
        failures += 1;
        assert!(db.poisoned().is_none(), "{kind:?}: {e}");
        assert_eq!(
            listing(&ffs),
            before,
            "{kind:?}: the load's files are removed"
        );
        assert_eq!(contents(&db).1.len(), 1, "{kind:?}");
        // The read point moved past the reserved numbers: a write still returns.
        t.put(Put::new("a").add_at("cf", "q", 1, "v")).unwrap();
    }
    assert_eq!(failures, 4);
    t.ingest("cf", &[src]).unwrap();
    assert_eq!(contents(&db).1.len(), 501);
}

#[test]
fn a_flush_frozen_before_a_load_installs_after_it() {
    // A generation frozen before the load and flushed after it carries a smaller `last_seq`
    // than the load's edit; its edit must not lower the manifest's (it did: the flush was
    // refused and the database poisoned, found by `cellar ingest` after a recovery).
    let ffs = FaultFs::new(SimFs::new());
    let opts = || sim_options(&ffs);
    let db = Db::open(Path::new("/db"), opts()).unwrap();
    db.create_table(
        TableDescriptor::new("t")
            .family(FamilyDescriptor::new("cf"))
            .family(FamilyDescriptor::new("other")),
    )
    .unwrap();
    let t = db.table("t").unwrap();
    t.put(Put::new("x").add_at("other", "q", 1, "v")).unwrap();
    db.flush().unwrap();
    let other_dir = ffs
        .list(Path::new("/db/data"))
        .unwrap()
        .into_iter()
        .find(|d| !ffs.list(&Path::new("/db/data").join(d)).unwrap().is_empty())
        .unwrap();
    t.put(Put::new("y").add_at("other", "q", 2, "w")).unwrap();
    // The flush of `other` fails for lack of space and stays frozen, retried every second.
    let mut rule = Rule::on(OpKind::Create, Fault::NoSpace).path(&format!("/db/data/{other_dir}/"));
    rule.persistent = true;
    ffs.add_rule(rule);
    let e = db.flush().unwrap_err();
    assert!(e.is_no_space(), "{e}");
    let src = Path::new("/load.hfile");
    let f = ffs.create(src).unwrap();
    f.write_all_at(
        &hfile_bytes("cf", &[Op::Put("r".into(), "q".into(), 3, "loaded".into())]),
        0,
    )
    .unwrap();
    drop(f);
    t.ingest("cf", &[src]).unwrap();
    ffs.clear_rules();
    db.flush().unwrap();
    assert!(db.poisoned().is_none(), "{:?}", db.poisoned());
    drop(t);
    db.close().unwrap();
    let db = Db::open(Path::new("/db"), opts()).unwrap();
    let t = db.table("t").unwrap();
    assert_eq!(t.scan(Scan::new()).unwrap().count(), 3);
}

#[test]
fn a_power_loss_during_or_after_a_load_leaves_all_of_it_or_none() {
    // Into rows holding data: rewritten. Into rows holding none, at seq 0: copied as it is.
    for as_is in [false, true] {
        power_loss_during_a_load(as_is);
    }
}

fn power_loss_during_a_load(as_is: bool) {
    let sim_opts = sim_options;
    let load: Vec<Op> = (0..400)
        .map(|i| {
            Op::Put(
                format!("{}{:03}", if as_is { "s" } else { "r" }, i % 250),
                "q".into(),
                2 + i / 250,
                format!("l{i}"),
            )
        })
        .collect();
    let run = |nth: Option<u64>, policy: CrashPolicy, seed: u64| {
        let sim = SimFs::new();
        let ffs = FaultFs::new(sim.clone());
        let db = Db::open(Path::new("/db"), sim_opts(&ffs)).unwrap();
        db.create_table(schema()).unwrap();
        let t = db.table("t").unwrap();
        for i in 0..100 {
            t.put(Put::new(format!("r{:03}", i * 3)).add_at("cf", "q", 1, "old"))
                .unwrap();
        }
        db.flush().unwrap();
        let before = contents(&db);
        let src = Path::new("/src/load.hfile");
        ffs.create_dir_all(Path::new("/src")).unwrap();
        let f = ffs.create(src).unwrap();
        f.write_all_at(&hfile_bytes_from("cf", &load, u64::from(!as_is)), 0)
            .unwrap();
        drop(f);
        let rule = Rule::any_op(Fault::Eio).path("/db/");
        let base = ffs.count_matching(&rule);
        if let Some(n) = nth {
            ffs.add_rule(Rule::any_op(Fault::Eio).path("/db/").nth(n));
        }
        let r = t.ingest("cf", &[src]);
        if nth.is_none() {
            assert_eq!(r.as_ref().unwrap().files[0].as_is, as_is);
        }
        let done = r.is_ok();
        let ops = ffs.count_matching(&rule) - base;
        ffs.clear_rules();
        let with_load = done.then(|| contents(&db));
        let after = FaultFs::new(sim.crash(policy, seed));
        drop(t);
        drop(db);
        let what = format!("fault at op {nth:?} of the load, {policy:?} seed {seed}, done {done}");
        let db = Db::open(Path::new("/db"), sim_opts(&after)).unwrap();
        let got = contents(&db);
        match &with_load {
            Some(w) => assert_eq!(&got, w, "{what}: an acknowledged load is lost"),
            None => assert!(
                got == before || got.1.len() == if as_is { 350 } else { 250 + 100 - 84 },
                "{what}: neither before nor after: {} cells",
                got.1.len()
            ),
        }
        // Whatever survived, no file of a load the manifest does not list stays behind.
        let on_disk = after
            .list(Path::new("/db/data"))
            .unwrap()
            .into_iter()
            .map(|d| after.list(&Path::new("/db/data").join(d)).unwrap().len() as u64)
            .sum::<u64>();
        assert_eq!(on_disk, db.stats().live_files, "{what}: orphan files");
        (done, ops)
    };
    let (done, total) = run(None, CrashPolicy::DropAll, 0);
    assert!(done && total > 5, "{total} operations");
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

#[test]
fn a_damaged_source_is_refused_or_loads_exactly_its_cells() {
    // Every byte of an HFile is under a checksum. A rewritten load reads the trailer, the
    // file info, the index and every data block, so damage there is refused; the source's
    // bloom filter is not read (the load builds the family's own), so damage there loses
    // nothing. A load copied as it is goes through the whole verifier: all damage is refused.
    let tmp = tempfile::tempdir().unwrap();
    let ops: Vec<Op> = (0..3000)
        .map(|i| {
            Op::Put(
                format!("r{:04}", i / 3),
                format!("q{}", i % 3),
                1,
                format!("v{i}"),
            )
        })
        .collect();
    // Numbered from 1 the load is rewritten; at seq 0 into an empty family, copied as it is.
    for first in [1, 0] {
        damaged_loads(tmp.path(), &ops, first);
    }
}

fn damaged_loads(tmp: &Path, ops: &[Op], first: u64) {
    let good = hfile_bytes_from("cf", ops, first);
    let want = {
        let db = open(&tmp.join(format!("want{first}")));
        let p = tmp.join(format!("good{first}"));
        std::fs::write(&p, &good).unwrap();
        let info = db.table("t").unwrap().ingest("cf", &[p]).unwrap();
        assert_eq!(info.files[0].as_is, first == 0);
        contents(&db)
    };
    let (mut refused, mut loaded) = (0, 0);
    for (i, at) in (0..good.len())
        .step_by(131)
        .chain([good.len() - 1])
        .enumerate()
    {
        let mut bytes = good.clone();
        bytes[at] ^= 1 << (i % 8);
        let path = tmp.join(format!("bad{first}-{i}"));
        std::fs::write(&path, &bytes).unwrap();
        let db = open(&tmp.join(format!("db{first}-{i}")));
        match db.table("t").unwrap().ingest("cf", &[&path]) {
            Ok(_) => {
                loaded += 1;
                assert_eq!(contents(&db), want, "byte {at}: loaded other cells");
            }
            Err(e) => {
                refused += 1;
                assert!(matches!(e, Error::Corruption { .. }), "byte {at}: {e}");
                assert!(contents(&db).0.is_empty(), "byte {at}");
                assert_eq!(db.stats().live_files, 0, "byte {at}");
            }
        }
        let hfiles: usize = std::fs::read_dir(tmp.join(format!("db{first}-{i}")).join("data"))
            .unwrap()
            .map(|d| std::fs::read_dir(d.unwrap().path()).unwrap().count())
            .sum();
        assert_eq!(
            hfiles as u64,
            db.stats().live_files,
            "byte {at}: files left"
        );
    }
    if first == 0 {
        assert_eq!(loaded, 0, "the verifier reads every byte");
    } else {
        assert!(
            refused > loaded && loaded > 0,
            "refused {refused}, loaded {loaded}"
        );
    }
}

#[test]
fn moved_sources_are_taken_over_only_by_a_load_that_lands() {
    use std::os::unix::fs::MetadataExt;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    let db = open(&dir);
    let t = db.table("t").unwrap();
    t.put(Put::new("a1").add_at("cf", "q", 1, "written"))
        .unwrap();
    let moved = cellar::IngestOptions::default().move_files(true);
    let file = |name: &str, row: &str, first: u64| {
        let p = tmp.path().join(name);
        let op = Op::Put(row.into(), "q".into(), 5, name.into());
        std::fs::write(&p, hfile_bytes_from("cf", &[op], first)).unwrap();
        p
    };
    // Rows holding nothing: hard-linked, then the source's name goes.
    let src = file("fresh", "z1", 0);
    let ino = std::fs::metadata(&src).unwrap().ino();
    let info = t.ingest_with("cf", &[&src], moved).unwrap();
    assert!(info.files[0].as_is);
    assert!(!src.exists(), "the source is taken over");
    let number = info.files[0].files[0];
    let stored = std::fs::read_dir(dir.join("data"))
        .unwrap()
        .map(|d| d.unwrap().path().join(format!("{number:06}.hfile")))
        .find(|p| p.exists())
        .unwrap();
    let m = std::fs::metadata(&stored).unwrap();
    assert_eq!((m.ino(), m.nlink()), (ino, 1), "linked, not copied");
    // Rows holding data: rewritten, and the source's name goes too.
    let src = file("over", "a1", 0);
    let info = t.ingest_with("cf", &[&src], moved).unwrap();
    assert!(!info.files[0].as_is);
    assert!(!src.exists());
    // A refused load takes nothing.
    let src = file("other", "b1", 0);
    let e = db
        .table("t")
        .unwrap()
        .ingest_with("nope", &[&src], moved)
        .unwrap_err();
    assert!(matches!(e, Error::FamilyNotFound { .. }), "{e}");
    assert!(src.exists());
    let got = |row: &str| {
        t.get(&Get::new(row))
            .unwrap()
            .unwrap()
            .value("cf", "q")
            .map(<[u8]>::to_vec)
    };
    assert_eq!(got("z1"), Some(b"fresh".to_vec()));
    assert_eq!(got("a1"), Some(b"over".to_vec()), "ts 5 over ts 1");
    drop(t);
    db.close().unwrap();
    let db = open(&dir);
    assert_eq!(contents(&db).1.len(), 2);
}
