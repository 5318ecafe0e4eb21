//! Disk-full policy (RELIABILITY.md §2.8), on `FaultFs<SimFs>`: ENOSPC during a WAL append, a
//! flush, a compaction output and a manifest write.
//!
//! Every scenario checks:
//! - the call that hit the full disk gets a typed error: `Error::NoSpace`, or `Poisoned` whose
//!   cause is `PoisonCause::NoSpace` (`Error::is_no_space` is true for both);
//! - the database stays readable and shows exactly the acknowledged writes (a prefix of the
//!   write log, whole rows);
//! - WAL and manifest failures poison the database with cause `NoSpace`; flush and compaction
//!   failures do not: their outputs are removed, nothing references them, and they are retried
//!   once space is back (`Stats::flush_failures`, `Stats::compaction.failures`);
//! - every HFile the manifest lists exists, and no stray HFile is left;
//! - reopened on the healed file system, as a process crash (the `SimFs` as it is) and as a
//!   power loss (`CrashPolicy::DropAll`), every write that had to survive is there.
//!
//! The budget sweep fills the disk at a sample of points through a fixed workload
//! (`FaultFs::set_space_budget`): wherever the disk fills, the same holds.

mod sim_common;

use std::path::Path;
use std::time::{Duration, Instant};

use cellar::fs::{CrashPolicy, Fault, FaultFs, FileSystem, OpKind, Rule, SimFs};
use cellar::{Db, Durability, Error, Get, PoisonCause, Put};
use sim_common::{create_table, Mix, Model, Step, DIR, TABLE};

const WATCHDOG: Duration = Duration::from_secs(60);

/// Run `f` under `testkit`'s watchdog; a hang or a panic fails the test.
fn watchdog<T: Send + 'static>(what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    cellar::testkit::faults::watchdog(WATCHDOG, move || Ok(f()))
        .unwrap_or_else(|e| panic!("{what}: {e}"))
}

fn open_on(fs: impl FileSystem, big_buffer: bool) -> Db {
    let mut o = sim_common::options(std::sync::Arc::new(fs));
    if big_buffer {
        // Flushes only when the test asks, so it knows how many files each one makes.
        o = o.write_buffer_size(1 << 20);
    }
    Db::open(DIR, o).expect("open")
}

fn setup(seed: u64, big_buffer: bool) -> (SimFs, FaultFs<SimFs>, Db, Model) {
    let sim = SimFs::new();
    let ffs = FaultFs::new(sim.clone());
    let db = open_on(ffs.clone(), big_buffer);
    create_table(&db).expect("create table");
    let mut model = Model::new(seed, Mix::Logged);
    model.flush_percent = 0;
    (sim, ffs, db, model)
}

fn write_steps(db: &Db, model: &mut Model, n: usize) {
    for _ in 0..n {
        let step = model.next_step();
        model.run(db, step).expect("write before the fault");
    }
}

fn flush(db: &Db, model: &mut Model) {
    model.run(db, Step::Flush).expect("flush before the fault");
}

/// HFile numbers under `data/` on the file system.
fn hfiles_on_disk(fs: &dyn FileSystem) -> Vec<String> {
    let data = Path::new(DIR).join("data");
    let mut out = Vec::new();
    for fam in fs.list(&data).unwrap_or_default() {
        for name in fs.list(&data.join(&fam)).unwrap_or_default() {
            if name.ends_with(".hfile") {
                out.push(format!("{fam}/{name}"));
            }
        }
    }
    out
}

/// Every HFile the database lists exists and no other is on disk. Replaced compaction inputs
/// are deleted once no reader holds them, by the compaction thread's next pass; with `settle`
/// (space is back) let compactions finish, which collects them, else poll a little.
fn check_files(db: &Db, fs: &dyn FileSystem, what: &str, settle: bool) {
    if settle {
        db.wait_for_compactions()
            .unwrap_or_else(|e| panic!("{what}: {e}"));
    }
    let start = Instant::now();
    loop {
        let on_disk = hfiles_on_disk(fs);
        let live = db.stats().live_files;
        if on_disk.len() as u64 == live {
            return;
        }
        assert!(
            start.elapsed() < Duration::from_secs(15),
            "{what}: HFiles on disk {on_disk:?} differ from the {live} live ones"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Reads after the fault show every acknowledged write; then reopen on the healed file system
/// (process crash and power loss) keeps every write that had to survive and takes writes.
fn verify(sim: &SimFs, db: Db, model: &mut Model) {
    let acked = model.acked();
    model
        .check_need(&db, acked, false)
        .unwrap_or_else(|e| panic!("live reads after the fault: {e}"));
    drop(db);
    let crashed = sim.crash(CrashPolicy::DropAll, 1);
    for (fs, power_loss) in [(sim.clone(), false), (crashed, true)] {
        let db = open_on(fs.clone(), false);
        let need = model.required(power_loss);
        model
            .check_need(&db, need, false)
            .unwrap_or_else(|e| panic!("after reopen (power_loss={power_loss}): {e}"));
        check_files(
            &db,
            &fs,
            &format!("after reopen (power_loss={power_loss})"),
            true,
        );
        if let Step::Write(op, d) = model.next_step() {
            op.send(&db, d)
                .unwrap_or_else(|e| panic!("write after reopen (power_loss={power_loss}): {e}"));
        }
    }
}

fn assert_no_space_poison(db: &Db) {
    let p = db.poison().expect("poisoned");
    assert_eq!(p.cause, PoisonCause::NoSpace, "{p}");
}

#[test]
fn enospc_on_wal_append_is_typed_and_poisons_with_its_cause() {
    watchdog("wal", || {
        let (sim, ffs, db, mut model) = setup(1, false);
        write_steps(&db, &mut model, 30);
        ffs.add_rule(
            Rule::on(OpKind::Write, Fault::NoSpace)
                .path("/wal/")
                .persistent(),
        );
        let step = model.next_step();
        let e = model.run(&db, step).expect_err("the write must fail");
        assert!(matches!(e, Error::NoSpace { .. }), "got {e:?}");
        assert!(e.is_no_space());
        assert_no_space_poison(&db);
        // Later writes are refused with the cause kept.
        let step = model.next_step();
        let e = model.run(&db, step).expect_err("poisoned");
        assert!(matches!(e, Error::Poisoned(_)) && e.is_no_space(), "{e:?}");
        verify(&sim, db, &mut model);
    });
}

/// A group of concurrent writers hits the full disk: each gets `NoSpace` or a `NoSpace`
/// poison, none hangs, and every acknowledged write survives.
#[test]
fn enospc_in_a_group_commit_fails_every_member_typed() {
    watchdog("group", || {
        let (sim, ffs, db, _) = setup(2, false);
        ffs.set_space_budget(Some(24 << 10));
        let handles: Vec<_> = (0..4)
            .map(|w| {
                let db = db.clone();
                std::thread::spawn(move || {
                    let t = db.table(TABLE).unwrap();
                    let mut acked = Vec::new();
                    for i in 0..400u32 {
                        let row = format!("g{w}-{i:04}");
                        let put = Put::new(row.as_str()).add("a", "q", row.as_bytes()).add(
                            "b",
                            "q",
                            row.as_bytes(),
                        );
                        match t
                            .put_with(put, cellar::WriteOptions::durability(Durability::FsyncWal))
                        {
                            Ok(_) => acked.push(row),
                            Err(e) => {
                                assert!(e.is_no_space(), "writer {w}: {e:?}");
                                return (acked, Some(e));
                            }
                        }
                    }
                    (acked, None)
                })
            })
            .collect();
        let mut acked = Vec::new();
        let mut typed = Vec::new();
        let mut errors = Vec::new();
        for h in handles {
            let (a, e) = h.join().unwrap();
            acked.extend(a);
            if let Some(Error::NoSpace { path, .. }) = &e {
                typed.push(path.clone());
            }
            errors.push(e);
        }
        // Every writer that failed got NoSpace or a NoSpace poison (asserted in its thread);
        // the disk is too small for all of them to finish.
        assert!(
            errors.iter().any(Option::is_some),
            "every write fit in the budget ({} acknowledged)",
            acked.len()
        );
        // Which file hit the full disk first decides the rest. The WAL (a writer's group, or
        // a roll by the flush thread, whose writers then see the poison) poisons the database
        // with that cause. A flush the writers were stalled behind is retried, not a poison
        // (its generation is still in the memstores and the WAL): they get its NoSpace.
        match db.poison() {
            Some(p) => assert_eq!(p.cause, PoisonCause::NoSpace, "{p}"),
            None => assert!(
                !typed.is_empty()
                    && typed
                        .iter()
                        .all(|p| p.to_string_lossy().ends_with(".hfile")),
                "{errors:?}"
            ),
        }
        drop(db);
        ffs.set_space_budget(None);
        for fs in [sim.clone(), sim.crash(CrashPolicy::DropAll, 3)] {
            let db = open_on(fs, false);
            let t = db.table(TABLE).unwrap();
            for row in &acked {
                let got = t.get(&cellar::Get::new(row.as_str())).unwrap();
                let got = got.unwrap_or_else(|| panic!("acknowledged row {row} lost"));
                // Whole rows: both families or none.
                assert_eq!(got.cells().len(), 2, "torn row {row}");
            }
        }
    });
}

#[test]
fn enospc_during_flush_is_retried_and_does_not_poison() {
    watchdog("flush", || {
        let (sim, ffs, db, mut model) = setup(3, true);
        write_steps(&db, &mut model, 30);
        ffs.add_rule(
            Rule::on(OpKind::Write, Fault::NoSpace)
                .path(".hfile")
                .persistent(),
        );
        let e = model.run(&db, Step::Flush).expect_err("flush must fail");
        assert!(matches!(e, Error::NoSpace { .. }), "got {e:?}");
        assert!(
            db.poison().is_none(),
            "a failed flush output must not poison"
        );
        assert!(db.stats().flush_failures >= 1);
        // The partial output is gone; the data is still readable from the memstores.
        check_files(&db, &ffs, "live", false);
        write_steps(&db, &mut model, 5);
        // Space comes back: the flush thread's retry succeeds.
        ffs.clear_rules();
        flush(&db, &mut model);
        assert!(db.stats().live_files >= 1);
        check_files(&db, &ffs, "live", false);
        verify(&sim, db, &mut model);
    });
}

/// A flush that keeps failing leaves the rows in a frozen memstore, with no file to ask: a
/// Get (which, with no file passing its bloom filters, looks only for the row in the
/// memstores before building a merge) must find them there, and a missing row stays missing.
#[test]
fn gets_find_rows_in_a_frozen_memstore_while_its_flush_fails() {
    watchdog("frozen gets", || {
        let (_sim, ffs, db, _model) = setup(5, true);
        let t = db.table(TABLE).expect("table");
        for i in 0..20 {
            t.put(Put::new(format!("row{i:02}")).add("a", "q", format!("v{i}")))
                .expect("put");
        }
        ffs.add_rule(
            Rule::on(OpKind::Write, Fault::NoSpace)
                .path(".hfile")
                .persistent(),
        );
        assert!(db.flush().is_err(), "the flush must fail");
        t.put(Put::new("row99").add("a", "q", "active"))
            .expect("put");
        let s = db.stats();
        assert!(s.memstore_frozen_bytes > 0 && s.memstore_active_bytes > 0);
        assert_eq!(s.live_files, 0);
        for i in 0..20 {
            let row = t
                .get(&Get::new(format!("row{i:02}")))
                .expect("get")
                .unwrap_or_else(|| panic!("row{i:02} lost while frozen"));
            assert_eq!(row.value("a", "q"), Some(format!("v{i}").as_bytes()));
        }
        assert!(t.get(&Get::new("row99")).expect("get").is_some());
        assert_eq!(t.get(&Get::new("row50")).expect("get"), None);
        ffs.clear_rules();
    });
}

#[test]
fn enospc_during_compaction_keeps_inputs_and_retries_later() {
    watchdog("compaction", || {
        let (sim, ffs, db, mut model) = setup(4, true);
        for _ in 0..3 {
            write_steps(&db, &mut model, 10);
            flush(&db, &mut model);
        }
        // The 4th flush writes one file per family (allowed), then its L0 files trigger the
        // background compactions, whose outputs find the disk full.
        ffs.add_rule(
            Rule::on(OpKind::Create, Fault::NoSpace)
                .path(".hfile")
                .nth(3)
                .persistent(),
        );
        write_steps(&db, &mut model, 10);
        flush(&db, &mut model);
        let start = Instant::now();
        while db.stats().compaction.failures < 2 {
            assert!(
                start.elapsed() < Duration::from_secs(20),
                "no compaction failed"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(db.poison().is_none(), "a failed compaction must not poison");
        let live = db.stats().live_files;
        assert_eq!(live, 8, "the inputs stay in place");
        check_files(&db, &ffs, "live", false);
        model
            .check_need(&db, model.acked(), false)
            .unwrap_or_else(|e| panic!("reads while compactions fail: {e}"));
        // A manual major compaction on the full disk reports the typed error too.
        let e = db.major_compact(TABLE, None).expect_err("disk full");
        assert!(e.is_no_space(), "{e:?}");
        // Space comes back: the background retry (after its back-off) compacts.
        ffs.clear_rules();
        db.wait_for_compactions().unwrap();
        let stats = db.stats();
        assert!(stats.live_files < live, "never retried: {stats:?}");
        check_files(&db, &ffs, "live", false);
        verify(&sim, db, &mut model);
    });
}

#[test]
fn enospc_on_manifest_write_is_typed_and_reopen_starts_a_new_manifest() {
    watchdog("manifest", || {
        let (sim, ffs, db, mut model) = setup(5, true);
        write_steps(&db, &mut model, 20);
        let manifests_before: Vec<String> = sim
            .list(Path::new(DIR))
            .unwrap()
            .into_iter()
            .filter(|n| n.starts_with("MANIFEST-"))
            .collect();
        ffs.add_rule(
            Rule::on(OpKind::Write, Fault::NoSpace)
                .path("MANIFEST")
                .persistent(),
        );
        // A schema change is a manifest edit of the caller's own: it gets `NoSpace`.
        let e = db
            .create_table(
                cellar::TableDescriptor::new("other").family(cellar::FamilyDescriptor::new("f")),
            )
            .expect_err("manifest write must fail");
        assert!(matches!(e, Error::NoSpace { .. }), "got {e:?}");
        assert_no_space_poison(&db);
        // A flush's edit fails the same way (the flush thread hit it: `Poisoned`, cause kept).
        let e = model.run(&db, Step::Flush).expect_err("poisoned");
        assert!(e.is_no_space(), "{e:?}");
        // Reads still work.
        assert!(!db.table_exists("other").unwrap());
        drop(db);
        ffs.clear_rules();
        {
            // Nothing goes into the manifest that took the failed record: reopen writes a new
            // one (RocksDB #6316).
            let db = open_on(sim.clone(), false);
            let after: Vec<String> = sim
                .list(Path::new(DIR))
                .unwrap()
                .into_iter()
                .filter(|n| n.starts_with("MANIFEST-"))
                .collect();
            assert_eq!(after.len(), 1);
            assert!(!manifests_before.contains(&after[0]), "{after:?}");
            drop(db);
        }
        let db = open_on(ffs.clone(), false);
        verify(&sim, db, &mut model);
    });
}

/// Fill the disk at a sample of points of one workload: the first failing call is typed, and
/// the database is consistent live and after reopen.
#[test]
fn budget_sweep_fills_the_disk_anywhere() {
    // Bytes the workload writes in total, measured with an unlimited budget.
    let total = watchdog("count", || {
        let (_, ffs, db, mut model) = setup(6, false);
        ffs.set_space_budget(Some(u64::MAX / 2));
        model.flush_percent = 6;
        for _ in 0..150 {
            let step = model.next_step();
            model.run(&db, step).unwrap();
        }
        u64::MAX / 2 - ffs.space_left().unwrap()
    });
    let points: u64 = std::env::var("DISK_FULL_POINTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(24);
    let start = Instant::now();
    let (mut surfaced, mut poisoned) = (0, 0);
    for i in 0..points {
        let budget = total * i / points;
        let (s, p) = watchdog("sweep", move || {
            let (sim, ffs, db, mut model) = setup(6, false);
            ffs.set_space_budget(Some(budget));
            model.flush_percent = 6;
            let mut first = None;
            for _ in 0..150 {
                let step = model.next_step();
                if let Err(e) = model.run(&db, step.clone()) {
                    assert!(
                        e.is_no_space(),
                        "budget {budget}: {step:?} failed with {e:?}, not a typed disk-full error"
                    );
                    first = Some(e);
                    break;
                }
            }
            let poisoned = db.poison().is_some();
            if let Some(p) = db.poison() {
                assert_eq!(p.cause, PoisonCause::NoSpace, "budget {budget}: {p}");
            }
            // Reads work on the full disk.
            model
                .check_need(&db, model.acked(), false)
                .unwrap_or_else(|e| panic!("budget {budget}: live reads: {e}"));
            ffs.set_space_budget(None);
            verify(&sim, db, &mut model);
            (first.is_some(), poisoned)
        });
        surfaced += usize::from(s);
        poisoned += usize::from(p);
    }
    eprintln!(
        "disk-full sweep: {points} fill points over {total} bytes, {surfaced} surfaced as a \
         typed error, {poisoned} poisoned, in {:.1?}",
        start.elapsed()
    );
    assert!(surfaced as u64 >= points / 2);
}

/// Short writes and EINTR are not failures: with every write short and every third one
/// interrupted (WAL pwrite device, HFile `AppendWriter`, manifest, CURRENT), the workload runs
/// without an error and recovers whole.
#[test]
fn short_writes_and_eintr_are_continued_everywhere() {
    watchdog("short", || {
        let (sim, ffs, db, mut model) = setup(7, false);
        ffs.add_rule(Rule::on(OpKind::Write, Fault::Interrupted).nth(3));
        for n in (6..3000).step_by(3) {
            ffs.add_rule(Rule::on(OpKind::Write, Fault::Interrupted).nth(n));
        }
        ffs.add_rule(Rule::on(OpKind::Write, Fault::ShortWrite).persistent());
        model.flush_percent = 6;
        for _ in 0..150 {
            let step = model.next_step();
            model
                .run(&db, step.clone())
                .unwrap_or_else(|e| panic!("{step:?} failed under short writes/EINTR: {e}"));
        }
        let injected = ffs.injected();
        assert!(injected.iter().any(|r| r.fault == Some(Fault::Interrupted)));
        assert!(injected.iter().any(|r| r.fault == Some(Fault::ShortWrite)));
        assert!(db.poison().is_none());
        assert!(db.stats().flushes > 0);
        verify(&sim, db, &mut model);
    });
}
