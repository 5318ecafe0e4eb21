//! Named regression tests for the ten real bugs of RELIABILITY.md §4 and three of its honorable
//! mentions. Each reproduces the bug's *mechanism* against Cellar, on the in-memory power-loss
//! model (`SimFs`) and the fault injector (`FaultFs`), and asserts Cellar's correct behaviour.
//! The point is the failure class, not the other code base. The whole file runs in a few
//! seconds in debug.
//!
//! | test | bug | fails if (✓: seen failing with that change made) |
//! |---|---|---|
//! | `bug01_leveldb_251_torn_wal_tail_never_yields_a_garbled_value` | LevelDB #251 / PebblesDB #28: a torn or garbled last log append returned as a corrupted value | WAL replay accepts a record whose checksum fails (✓ `wal/record.rs` checksum comparison disabled: the garbage reaches the batch decoder), or stops accepting a torn unsynced tail (reopen fails) |
//! | `bug02_leveldb_193_old_wal_is_synced_before_a_new_one_takes_over` | LevelDB #193: the old log was not synced before a new one took over; power loss kept Put₂ and lost Put₁ (a hole) | the WAL roll stops fdatasyncing the old segment before creating the next (✓ `wal/writer.rs` `Writer::roll`: `flush(false)`) |
//! | `bug03_leveldb_189_195_crash_at_any_step_of_create_and_manifest_switch` | LevelDB #189 (MANIFEST not synced at create) and #195 (CURRENT rename not ordered before the unlink of the old manifest) | a step of create, roll-over or open loses its sync or its order: ✓ `LogWriter::create` without its fdatasync ("manifest holds no complete record"); ✓ the old manifest removed before CURRENT names the new one; ✓ `install_current` without the directory sync before the rename (the engine bug this test found, see below) |
//! | `bug04_rocksdb_10573_current_rename_is_made_durable` | RocksDB PR #10573: no directory fsync after the rename that installs CURRENT | ✓ `manifest/current.rs` `install_current` without its final `sync_dir` |
//! | `bug05_rocksdb_6316_enospc_mid_manifest_record_is_never_appended_to` | RocksDB #6316 → PR #6331: a half-written manifest record followed by later edits made the next open fail | the manifest keeps taking edits after a failed append (✓ `Manifest::log_and_apply` without `poison`), or an open appends to the old manifest instead of starting a new one |
//! | `bug06_rocksdb_4990_failed_manifest_sync_that_persisted_keeps_its_files` | RocksDB #4990 → PR #5379: files deleted after a manifest sync error although the edit had persisted | a flush or compaction removes its outputs after a manifest error (✓ `db/flush.rs` `flush_generation` removing the written files on an install error; ✓ `db/compact.rs` `run_task` with `maybe_logged = false`) |
//! | `bug07_rocksdb_7701_damage_in_an_older_wal_segment_is_not_a_torn_tail` | RocksDB PR #7701: a WAL cut by corruption was taken for a crash tail and recovery went on into the next WAL (a hole) | replay treats an anomaly outside the newest segment, or one a later record's `synced_upto` covers, as the end of the log (✓ `wal/reader.rs` without its "not in the last segment" check: opens with 14 of 17 rows) |
//! | `bug08_rocksdb_12995_failed_wal_write_keeps_multi_family_rows_whole` | RocksDB PR #12995: a WAL write error, then auto-recovery, left a multi-family batch half recovered | a failed WAL write is retried or resumed instead of poisoning (✓ `wal/writer.rs` retrying a failed device write), a group is acknowledged after torn bytes, or a batch reaches the memstores without its whole WAL record |
//! | `bug09_fjall_241_truncate_drop_alter_and_deleteall_stay_deleted` | fjall #241 → PR #242: `clear()` was not journaled and deleted data came back at recovery | a dropped table's or family's WAL records replay into a new table or family, e.g. family ids handed out again (✓ `Db::create_table` deriving ids from the live tables: refused by the manifest's own check, which this test then trips over), or a drop not logged |
//! | `bug10_hbase_26195_failed_wal_sync_poisons_and_is_maybe` | HBASE-26195: a failed WAL sync was rolled back while the edit had gone out; fix: abort | the WAL retries a failed fdatasync (✓ `wal/sync.rs` retrying `sync_data`: the retry "succeeds" after Linux dropped the pages, and the write is acknowledged), or writes after it |
//! | `hm_leveldb_333_zero_length_hfile_named_by_the_manifest_is_corruption` | LevelDB #333: a zero-length table file named by the manifest after power loss | an HFile shorter than its trailer reads as empty instead of `Corruption` (`cellar_format::reader::read_trailer`'s length check) |
//! | `hm_rocksdb_7621_crash_during_recovery_does_not_reuse_a_file_number` | RocksDB PR #7621: a crash during recovery reused a file number | ✓ `Manifest::open_with` reserving numbers through the old manifest's only, not `max_number_on_disk` |
//! | `hm_rocksdb_5287_crash_at_any_step_of_flush_and_compaction` | RocksDB #5287: no directory fsync after file ingestion | ✓ `db/flush.rs` `write_generation` without its family-directory syncs |
//!
//! Engine bug found here and fixed: `bug03` crashes before every file operation of a database's
//! life. `install_current` created the new manifest and `CURRENT.tmp`, then renamed over
//! `CURRENT` and only then synced the directory. Unsynced entry operations of one directory are
//! not ordered, so a power loss between the rename and that sync could keep the rename and drop
//! the manifest's creation: CURRENT named a missing manifest and open failed ("the manifest
//! CURRENT names does not exist"). The directory is now synced before the rename too (SPEC.md
//! §17.1, step 4).
//!
//! Older tests cover several of these mechanisms too; each test's doc names them.

mod sim_common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use cellar::fs::{CrashPolicy, Fault, FaultFs, FileSystem, OpKind, Rule, SimFs};
use cellar::manifest::ManifestOptions;
use cellar::wal::RecoveryMode;
use cellar::{
    Db, Delete, Durability, Error, FamilyDescriptor, Options, PoisonCause, Put, Scan,
    TableDescriptor, WriteOptions,
};
use sim_common::{Mix, Model, Step, DIR};

const FSYNC: Durability = Durability::FsyncWal;

/// The model's options with a write buffer large enough that only explicit flushes flush, and
/// no background compaction, so each test controls which files exist.
fn quiet_options(fs: impl FileSystem) -> Options {
    let mut o = sim_common::options(Arc::new(fs)).write_buffer_size(1 << 20);
    o.compaction.threads = 0;
    o
}

fn open_quiet(fs: impl FileSystem) -> cellar::Result<Db> {
    Db::open(DIR, quiet_options(fs))
}

fn two_families(name: &str) -> TableDescriptor {
    TableDescriptor::new(name)
        .family(FamilyDescriptor::new("a"))
        .family(FamilyDescriptor::new("b"))
}

/// A value `len` bytes long determined by the row and family, so a torn, garbled or misplaced
/// value never matches.
fn val(row: &str, fam: &str, len: usize) -> Vec<u8> {
    let unit = format!("{row}/{fam}/");
    unit.bytes().cycle().take(len.max(unit.len())).collect()
}

/// One row mutation across both families.
fn row_put(row: &str, len: usize) -> Put {
    Put::new(row)
        .add("a", "q", val(row, "a", len))
        .add("b", "q", val(row, "b", len))
}

fn put(db: &Db, table: &str, row: &str, len: usize, d: Durability) -> cellar::Result<u64> {
    db.table(table)?
        .put_with(row_put(row, len), WriteOptions::durability(d))
}

/// Every row of `table`: row key -> `family:qualifier` -> value (newest version).
fn rows(db: &Db, table: &str) -> Result<BTreeMap<String, BTreeMap<String, Vec<u8>>>, Error> {
    let mut out = BTreeMap::new();
    for r in db.table(table)?.scan(Scan::new())? {
        let r = r?;
        let cells = r
            .cells()
            .iter()
            .map(|c| {
                (
                    format!("{}:{}", c.family, String::from_utf8_lossy(&c.qualifier)),
                    c.value.clone(),
                )
            })
            .collect();
        out.insert(String::from_utf8_lossy(&r.key).into_owned(), cells);
    }
    Ok(out)
}

/// Whether `cells` is exactly what `row_put(row, len)` wrote, for some `len`.
fn whole(row: &str, cells: &BTreeMap<String, Vec<u8>>) -> bool {
    let Some(a) = cells.get("a:q") else {
        return false;
    };
    cells.len() == 2
        && *a == val(row, "a", a.len())
        && cells.get("b:q") == Some(&val(row, "b", a.len()))
}

fn is_corruption(e: &Error) -> bool {
    match e {
        Error::Corruption { .. } => true,
        Error::Format(f) => f.is_corruption(),
        _ => false,
    }
}

/// Numbers of the HFiles in the live view of `fs`.
fn hfile_numbers(fs: &SimFs) -> BTreeSet<u64> {
    fs.files()
        .iter()
        .filter_map(|p| cellar::manifest::parse_hfile_file_name(p.file_name()?.to_str()?))
        .collect()
}

/// Paths (as strings) of the files in the live view of `fs` that end in `suffix`.
fn files_named(fs: &SimFs, suffix: &str) -> BTreeSet<String> {
    fs.files()
        .into_iter()
        .map(|p| p.to_string_lossy().into_owned())
        .filter(|p| p.ends_with(suffix))
        .collect()
}

/// Bug 1 — google/leveldb #251 (PebblesDB #28): after a power loss the last log append was
/// partly zeros or garbage, and recovery returned a corrupted value for that put.
///
/// Unsynced multi-sector row mutations at the end of the WAL go through `Tear` (sectors
/// persist out of order) and `Garble` (lost sectors hold zeros or random bytes) power losses
/// for many seeds. Every recovery must open, keep every `FsyncWal` row, and show only whole
/// rows with exactly their values, as a prefix of the writes. Also covered by
/// `sim_crash_model.rs` (`crash_tear`, `crash_garble`,
/// `torn_unsynced_wal_sector_is_a_torn_tail_not_corruption`) and `db_recovery.rs`
/// (`torn_wal_tail_is_tolerated_and_only_the_torn_write_is_lost`).
#[test]
fn bug01_leveldb_251_torn_wal_tail_never_yields_a_garbled_value() {
    let fs = SimFs::new();
    let db = open_quiet(fs.clone()).unwrap();
    db.create_table(two_families("t")).unwrap();
    let durable: Vec<String> = (0..4).map(|i| format!("d{i}")).collect();
    for r in &durable {
        put(&db, "t", r, 100, FSYNC).unwrap();
    }
    // Unsynced, each value spanning several 512-byte sectors.
    let tail: Vec<String> = (0..6).map(|i| format!("u{i}")).collect();
    for r in &tail {
        put(&db, "t", r, 2500, Durability::SyncWal).unwrap();
    }
    for policy in [
        CrashPolicy::Tear { sector: 512 },
        CrashPolicy::Garble { sector: 512 },
    ] {
        let (mut torn, mut partial) = (0, 0);
        for seed in 0..40 {
            let crashed = fs.crash(policy, seed);
            let db2 = open_quiet(crashed)
                .unwrap_or_else(|e| panic!("{policy:?} seed {seed}: reopen failed: {e}"));
            let got = rows(&db2, "t").unwrap();
            for r in &durable {
                assert!(got.contains_key(r), "{policy:?} seed {seed}: lost {r}");
            }
            for (r, cells) in &got {
                assert!(
                    whole(r, cells),
                    "{policy:?} seed {seed}: row {r} is torn or garbled: {cells:?}"
                );
            }
            let survived = tail.iter().take_while(|r| got.contains_key(*r)).count();
            assert_eq!(
                got.len(),
                durable.len() + survived,
                "{policy:?} seed {seed}: not a prefix: {:?}",
                got.keys().collect::<Vec<_>>()
            );
            torn += usize::from(db2.stats().recovery.torn_tail);
            partial += usize::from(survived > 0 && survived < tail.len());
        }
        // Evidence that the crashes really tore the tail and sometimes kept part of it.
        assert!(torn > 0, "{policy:?}: no seed tore the WAL tail");
        assert!(partial > 0, "{policy:?}: no seed kept part of the tail");
    }
}

/// A database on `fs` with table `t` whose rows `r0000`, `r0001`, … (values `len` bytes,
/// durability `d`) fill WAL segments until the log has rolled twice. Returns the database, the
/// rows and the number of the first segment.
fn fill_two_segments(fs: &SimFs, d: Durability, len: usize) -> (Db, Vec<String>, u64) {
    let db = open_quiet(fs.clone()).unwrap();
    db.create_table(two_families("t")).unwrap();
    let first = db.stats().wal.current_segment;
    let mut rows = Vec::new();
    while db.stats().wal.current_segment < first + 2 {
        let r = format!("r{:04}", rows.len());
        put(&db, "t", &r, len, d).unwrap();
        rows.push(r);
        assert!(rows.len() < 1000, "the WAL never rolled");
    }
    (db, rows, first)
}

/// Bug 2 — google/leveldb #193: the old log was never synced before a new one took over, so
/// after a power loss a synced put in the new log survived while earlier puts in the old one
/// were lost: a hole.
///
/// `SyncWal` puts (not synced by themselves) fill WAL segments until the log rolls, then one
/// `FsyncWal` put lands in the new segment. After a power loss that drops everything unsynced,
/// or keeps a random prefix per file (unsynced data of one file may vanish while a later,
/// synced write to another survives), the fsynced row and *every* row before it must be there.
/// The model test `sim_crash_model.rs` covers it statistically.
#[test]
fn bug02_leveldb_193_old_wal_is_synced_before_a_new_one_takes_over() {
    let fs = SimFs::new();
    let (db, before, _) = fill_two_segments(&fs, Durability::SyncWal, 1000);
    put(&db, "t", "z-fsynced", 100, FSYNC).unwrap();
    let mut crashes = vec![fs.crash(CrashPolicy::DropAll, 0)];
    crashes.extend((0..8).map(|s| fs.crash(CrashPolicy::KeepRandomPrefix, s)));
    for (i, crashed) in crashes.into_iter().enumerate() {
        let db2 = open_quiet(crashed).unwrap();
        let got = rows(&db2, "t").unwrap();
        assert!(
            got.contains_key("z-fsynced"),
            "crash {i}: lost the fsynced row"
        );
        let missing: Vec<&String> = before.iter().filter(|r| !got.contains_key(*r)).collect();
        assert!(
            missing.is_empty(),
            "crash {i}: a hole: the fsynced row survived but {} earlier rows in older \
             segments did not ({:?}...)",
            missing.len(),
            &missing[..missing.len().min(3)]
        );
    }
}

/// What a workload run on a failing file system got acknowledged.
#[derive(Debug, Default)]
struct Acked {
    tables: Vec<String>,
    rows: Vec<String>,
}

/// Run `workload` once without faults (returning its operation count and what it got
/// acknowledged), then once per operation n with a crash just before the n-th: it and every
/// later one fail, so the durable state is what it was before it. Then cut the power (drop
/// everything unsynced; keep a random prefix of each file and a random subset of directory
/// operations, twice; garble torn sectors) and `check` each recovery, which must open, against
/// what that run got acknowledged.
fn crash_before_every_operation<A: Default>(
    workload: impl Fn(&FaultFs<SimFs>, &mut A),
    check: impl Fn(&Db, &A, &str),
) -> (u64, A) {
    let ffs = FaultFs::new(SimFs::new());
    let mut clean = A::default();
    workload(&ffs, &mut clean);
    let total = ffs.total();
    for n in 1..=total {
        let sim = SimFs::new();
        let ffs = FaultFs::new(sim.clone());
        ffs.add_rule(Rule::any_op(Fault::Eio).nth(n).persistent());
        let mut acked = A::default();
        workload(&ffs, &mut acked);
        for (how, policy, seed) in [
            ("drop-all", CrashPolicy::DropAll, n),
            ("prefix", CrashPolicy::KeepRandomPrefix, n),
            ("prefix", CrashPolicy::KeepRandomPrefix, n + 1000),
            ("garble", CrashPolicy::Garble { sector: 512 }, n),
        ] {
            let what = format!("crash before operation {n} of {total} ({how})");
            let db = open_quiet(sim.crash(policy, seed))
                .unwrap_or_else(|e| panic!("{what}: open failed: {e}"));
            check(&db, &acked, &what);
        }
    }
    (total, clean)
}

/// Bug 3's workload: create a database, create tables until the manifest rolls over (tiny
/// manifest), an fsynced put, then reopen twice (each open writes a new manifest, swaps CURRENT
/// and removes the old manifest) with a table created after each. Stops at the first failure.
fn create_and_switch(fs: &FaultFs<SimFs>, acked: &mut Acked) {
    let opts = || {
        let mut o = quiet_options(fs.clone());
        o.manifest = ManifestOptions { max_size: 400 };
        o
    };
    for round in 0..3 {
        let Ok(db) = Db::open(DIR, opts()) else {
            return;
        };
        let n = if round == 0 { 6 } else { 1 };
        for i in 0..n {
            let name = format!("t{round}{i}");
            if db.create_table(two_families(&name)).is_err() {
                return;
            }
            acked.tables.push(name);
        }
        let row = format!("row{round}");
        if put(&db, "t00", &row, 50, FSYNC).is_err() {
            return;
        }
        acked.rows.push(row);
    }
}

/// Bug 3 — google/leveldb #189 and #195: MANIFEST-000001 was not synced when the database was
/// created, so after a crash CURRENT named an empty manifest and open failed ("no
/// meta-nextfile entry"); and the CURRENT rename was not ordered before the unlink of the old
/// manifest, so a crash could leave CURRENT naming a deleted manifest.
///
/// A crash is placed before every file operation of "create the database, create tables
/// through a manifest roll-over, put, reopen twice" (the operation and every later one fail,
/// so the durable state is what it was just before it), then the power is cut (everything
/// unsynced dropped; or a random subset of unsynced directory operations kept, in any order).
/// The database must always open, with every table and row acknowledged before the crash.
/// Older coverage: `manifest_files.rs`, `sim_crash_model.rs` (`wal_dir_of_a_new_database_…`),
/// and the kill points `current.*` and `manifest.roll.before_current` of `crash-harness`.
#[test]
fn bug03_leveldb_189_195_crash_at_any_step_of_create_and_manifest_switch() {
    let (total, clean) = crash_before_every_operation(create_and_switch, |db, acked, what| {
        for t in &acked.tables {
            assert!(
                db.table_exists(t).unwrap(),
                "{what}: acknowledged table {t} is gone"
            );
        }
        if acked.rows.is_empty() {
            return;
        }
        let got = rows(db, "t00").unwrap_or_else(|e| panic!("{what}: read failed: {e}"));
        for r in &acked.rows {
            assert!(got.contains_key(r), "{what}: acknowledged row {r} is gone");
        }
    });
    assert_eq!(
        clean.rows.len(),
        3,
        "the workload must finish without faults"
    );
    assert!(
        total >= 100,
        "only {total} operations: the workload is too small"
    );
}

/// The manifest CURRENT names in `fs`.
fn current(fs: &SimFs) -> String {
    let bytes = fs
        .contents(&Path::new(DIR).join("CURRENT"))
        .unwrap_or_default();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// Bug 4 — facebook/rocksdb PR #10573: after the rename that installs a new CURRENT, the
/// directory was sometimes not fsynced, so a host crash brought back a stale CURRENT.
///
/// After every call that installs CURRENT and returns (a database created, a table created
/// across manifest roll-overs, a reopen), a power loss that drops every unsynced directory
/// operation must leave CURRENT naming the live manifest, and the database must hold every
/// table. Also covered by `bug03_…` (at every operation) and the `current.after_rename`
/// kill point of `crash-harness` (process crashes only).
#[test]
fn bug04_rocksdb_10573_current_rename_is_made_durable() {
    let fs = SimFs::new();
    let opts = || {
        let mut o = quiet_options(fs.clone());
        o.manifest = ManifestOptions { max_size: 400 };
        o
    };
    let mut tables = Vec::new();
    let mut manifests = BTreeSet::new();
    let check = |tables: &[String], what: &str| {
        let crashed = fs.crash(CrashPolicy::DropAll, 0);
        assert_eq!(
            current(&crashed),
            current(&fs),
            "{what}: the CURRENT rename did not survive a power loss"
        );
        let db = open_quiet(crashed).unwrap();
        for t in tables {
            assert!(db.table_exists(t).unwrap(), "{what}: table {t} lost");
        }
    };
    for round in 0..3 {
        let db = Db::open(DIR, opts()).unwrap();
        manifests.insert(current(&fs));
        check(&tables, &format!("open {round}"));
        for i in 0..8 {
            let name = format!("t{round}_{i}");
            db.create_table(two_families(&name)).unwrap();
            tables.push(name);
            manifests.insert(current(&fs));
            check(&tables, &format!("create {}", tables.len()));
        }
    }
    // Evidence: CURRENT was swapped by roll-overs as well as by opens.
    assert!(
        manifests.len() > 4,
        "only {} manifests: no roll-over happened",
        manifests.len()
    );
}

/// A database with table `t` on a `FaultFs` (no rule yet) over a `SimFs`.
fn faulty_db() -> (SimFs, FaultFs<SimFs>, Db) {
    let sim = SimFs::new();
    let ffs = FaultFs::new(sim.clone());
    let db = open_quiet(ffs.clone()).unwrap();
    db.create_table(two_families("t")).unwrap();
    (sim, ffs, db)
}

/// Bug 5 — facebook/rocksdb #6316 → PR #6331: with the disk full, appending a version edit to
/// the manifest failed halfway, later edits were appended after the broken record, and the
/// next open could not read the manifest.
///
/// A manifest append is cut short (half the record written) and its continuation hits ENOSPC.
/// The call reports the full disk, the database is poisoned with cause `NoSpace` and no later
/// edit reaches the file; then the database reopens (as after a process crash, and after a
/// power loss), takes new edits and flushes, and reopens again. Also covered by
/// `manifest_faults.rs` (`failed_write_poisons_and_reopen_sees_a_prefix`) and `disk_full.rs`.
#[test]
fn bug05_rocksdb_6316_enospc_mid_manifest_record_is_never_appended_to() {
    let (sim, ffs, db) = faulty_db();
    put(&db, "t", "r1", 100, FSYNC).unwrap();
    let manifest = Path::new(DIR).join(current(&sim).trim_end());
    let len_before = sim.contents(&manifest).unwrap().len();
    ffs.add_rule(Rule::on(OpKind::Write, Fault::ShortWrite).path("MANIFEST"));
    ffs.add_rule(
        Rule::on(OpKind::Write, Fault::NoSpace)
            .path("MANIFEST")
            .nth(2),
    );
    let e = db.create_table(two_families("t2")).unwrap_err();
    assert!(e.is_no_space(), "the full disk is reported as such: {e}");
    let torn_len = sim.contents(&manifest).unwrap().len();
    assert!(
        torn_len > len_before,
        "the half record must be in the file for this test to mean anything"
    );
    ffs.clear_rules();
    let later = db.create_table(two_families("t3")).unwrap_err();
    assert!(matches!(later, Error::Poisoned(_)), "{later}");
    assert_eq!(db.poison().map(|p| p.cause), Some(PoisonCause::NoSpace));
    assert!(matches!(
        put(&db, "t", "r2", 100, FSYNC),
        Err(Error::Poisoned(_))
    ));
    assert_eq!(
        sim.contents(&manifest).unwrap().len(),
        torn_len,
        "an edit was appended after the broken record"
    );
    for (how, fs) in [
        ("process crash", sim.fork()),
        ("power loss", sim.crash(CrashPolicy::DropAll, 5)),
    ] {
        {
            let db = open_quiet(fs.clone()).unwrap_or_else(|e| panic!("{how}: reopen: {e}"));
            assert!(db.table_exists("t").unwrap());
            assert!(rows(&db, "t").unwrap().contains_key("r1"), "{how}");
            db.create_table(two_families("t4")).unwrap();
            put(&db, "t4", "x", 100, FSYNC).unwrap();
            db.flush().unwrap();
        }
        let db = open_quiet(fs).unwrap_or_else(|e| panic!("{how}: second reopen: {e}"));
        assert!(rows(&db, "t4").unwrap().contains_key("x"), "{how}");
    }
}

/// Bug 6 — facebook/rocksdb #4990 → PR #5379: the manifest sync returned an error, so RocksDB
/// deleted the new files of that flush or compaction; but the manifest record had persisted,
/// and after restart it referenced missing files.
///
/// The manifest's fdatasync fails *after* persisting (`FsyncFailMode::ErrorButPersisted`)
/// during a flush, then during a major compaction. The call fails and the database is
/// poisoned, but no file the edit names may be deleted: reopened after a process crash and
/// after a power loss, every file the manifest names exists and every acknowledged row reads
/// back. Also covered by `manifest_faults.rs` (`failed_sync_poisons_and_is_never_retried`, at
/// the manifest level) and `sim_faults.rs` (`eio_on_manifest_sync`).
#[test]
fn bug06_rocksdb_4990_failed_manifest_sync_that_persisted_keeps_its_files() {
    for compaction in [false, true] {
        let what = if compaction { "compaction" } else { "flush" };
        let (sim, ffs, db) = faulty_db();
        let mut acked = Vec::new();
        for batch in 0..2 {
            for i in 0..20 {
                let r = format!("r{batch}-{i:02}");
                put(&db, "t", &r, 200, Durability::SyncWal).unwrap();
                acked.push(r);
            }
            if compaction {
                db.flush().unwrap();
            }
        }
        let before = hfile_numbers(&sim);
        ffs.add_rule(Rule::on(OpKind::SyncData, Fault::SyncErrorButPersisted).path("MANIFEST"));
        let r = if compaction {
            db.major_compact("t", None)
        } else {
            db.flush()
        };
        assert!(
            r.is_err(),
            "{what}: the failed manifest sync must fail the call"
        );
        assert!(db.poison().is_some(), "{what}: not poisoned");
        // The edit is on disk (that is the scenario): every file it or the version before it
        // names must still exist.
        let on_disk = hfile_numbers(&sim);
        let named = cellar::inspect::read_manifest(&sim.fork(), Path::new(DIR))
            .unwrap()
            .live_files();
        let missing: Vec<&u64> = named.difference(&on_disk).collect();
        assert!(
            missing.is_empty(),
            "{what}: files {missing:?} named by the persisted edit were deleted"
        );
        let gone: Vec<&u64> = before.difference(&on_disk).collect();
        assert!(gone.is_empty(), "{what}: inputs {gone:?} were deleted");
        assert!(
            named.iter().any(|n| !before.contains(n)),
            "{what}: the persisted edit names no new file: the scenario did not happen"
        );
        let images = [
            ("process crash", sim.fork()),
            ("power loss", sim.crash(CrashPolicy::DropAll, 1)),
        ];
        drop(db);
        for (how, fs) in images {
            let db = open_quiet(fs).unwrap_or_else(|e| panic!("{what}, {how}: reopen: {e}"));
            let got = rows(&db, "t")
                .unwrap_or_else(|e| panic!("{what}, {how}: a named file is unreadable: {e}"));
            for r in &acked {
                assert!(got.contains_key(r), "{what}, {how}: lost {r}");
            }
            // The edit did persist (that is the scenario): its files are live.
            assert!(db.stats().live_files > 0, "{what}, {how}");
        }
    }
}

/// WAL records of the database in `fs`: `(segment, offset, length)` of each batch.
fn wal_batches(fs: &SimFs) -> Vec<(u64, u64, u64)> {
    cellar::inspect::wal_records(fs, Path::new(DIR))
        .unwrap()
        .map(|r| r.unwrap())
        .filter(|r| r.kind == cellar::inspect::WalEntryKind::Batch)
        .map(|r| (r.segment, r.offset, r.len))
        .collect()
}

fn segment_path(n: u64) -> PathBuf {
    Path::new(DIR)
        .join("wal")
        .join(cellar::wal::segment_file_name(n))
}

/// Bug 7 — facebook/rocksdb PR #7701: a WAL cut to an incomplete record by *corruption* was
/// treated like a crash tail, recovery went on into the next WAL, and produced a hole.
///
/// `FsyncWal` rows fill three segments; after a power loss (everything was synced), one of
/// these is damaged: a bit flip in a record in the middle of the first (older) segment; that
/// segment cut to zeros from the middle of a record on; a bit flip in the newest segment under
/// a later record whose `synced_upto` proves the bytes had been synced. Open must fail with
/// `Corruption` in each case (never succeed with the rows after the damage and not the damaged
/// one); salvage (`RecoveryMode::SkipCorrupted`) opens and reports the skipped range. Also
/// covered by `corruption_sweep.rs` (WAL header and payload bytes) and `db_recovery.rs`
/// (`corrupted_wal_record_before_valid_ones_fails_open_unless_salvaging`).
#[test]
fn bug07_rocksdb_7701_damage_in_an_older_wal_segment_is_not_a_torn_tail() {
    let fs = SimFs::new();
    let (db, written, first) = fill_two_segments(&fs, FSYNC, 1200);
    let mut n = written.len();
    for _ in 0..4 {
        put(&db, "t", &format!("r{n:04}"), 1200, FSYNC).unwrap();
        n += 1;
    }
    let pristine = fs.crash(CrashPolicy::DropAll, 0);
    drop(db);
    let batches = wal_batches(&pristine);
    let in_seg =
        |s: u64| -> Vec<(u64, u64, u64)> { batches.iter().copied().filter(|b| b.0 == s).collect() };
    let old = in_seg(first);
    let newest = in_seg(first + 2);
    assert!(old.len() >= 5 && newest.len() >= 3, "{batches:?}");
    let (seg, off, len) = old[old.len() / 2];
    let (nseg, noff, nlen) = newest[0];
    type Damage = Box<dyn Fn(&mut Vec<u8>)>;
    let cases: Vec<(&str, u64, Damage)> = vec![
        (
            "bit flip in an older segment",
            seg,
            Box::new(move |b: &mut Vec<u8>| b[(off + len / 2) as usize] ^= 0x20),
        ),
        (
            "older segment cut inside a record",
            seg,
            Box::new(move |b: &mut Vec<u8>| b[(off + len / 2) as usize..].fill(0)),
        ),
        (
            "bit flip in synced bytes of the newest segment",
            nseg,
            Box::new(move |b: &mut Vec<u8>| b[(noff + nlen / 2) as usize] ^= 0x20),
        ),
    ];
    for (what, s, damage) in cases {
        let img = pristine.fork();
        let path = segment_path(s);
        let mut bytes = img.contents(&path).unwrap();
        damage(&mut bytes);
        img.set_contents(&path, &bytes).unwrap();
        match open_quiet(img.fork()) {
            Err(e) => assert!(is_corruption(&e), "{what}: wrong error: {e}"),
            Ok(db) => {
                let got = rows(&db, "t").unwrap();
                panic!(
                    "{what}: opened with {} of {n} rows and recovery {:?}: damage to synced \
                     bytes taken for a torn tail",
                    got.len(),
                    db.stats().recovery
                );
            }
        }
        let mut salvage = quiet_options(img);
        salvage.wal_recovery = RecoveryMode::SkipCorrupted;
        let db = Db::open(DIR, salvage).unwrap_or_else(|e| panic!("{what}: salvage: {e}"));
        assert!(
            !db.stats().recovery.skipped_ranges.is_empty(),
            "{what}: salvage skipped nothing"
        );
    }
}

/// Bug 8 — facebook/rocksdb PR #12995: a retryable WAL write error dropped buffered WAL data,
/// auto-recovery flushed one column family's memtable, and after a crash a multi-family write
/// batch was partly recovered.
///
/// The model workload (row mutations across families `a` and `b`) runs until a WAL write is cut
/// short and its continuation fails (EIO, then ENOSPC), leaving half a group in the file. Every
/// later write and flush must fail (poisoned: no auto-resume); live reads and every recovery —
/// process crash, power losses dropping, keeping a prefix of, and tearing unsynced data — must
/// show a prefix of the writes with whole rows, the failed ones whole or absent. Also covered
/// by `sim_faults.rs` (`enospc_on_wal_write` and the sweep).
#[test]
fn bug08_rocksdb_12995_failed_wal_write_keeps_multi_family_rows_whole() {
    for fault in [Fault::Eio, Fault::NoSpace] {
        for seed in 0..4u64 {
            let what = format!("{fault:?} seed {seed}");
            let sim = SimFs::new();
            let ffs = FaultFs::new(sim.clone());
            let db = sim_common::open(ffs.clone()).unwrap();
            sim_common::create_table(&db).unwrap();
            let mut model = Model::new(seed, Mix::Logged);
            model.flush_percent = 5;
            for _ in 0..30 {
                let step = model.next_step();
                model.run(&db, step).unwrap();
            }
            ffs.add_rule(Rule::on(OpKind::Write, Fault::ShortWrite).path("/wal/"));
            ffs.add_rule(Rule::on(OpKind::Write, fault).path("/wal/").nth(2));
            let mut failed = 0;
            for _ in 0..40 {
                let step = model.next_step();
                if matches!(step, Step::Flush) {
                    continue;
                }
                if model.run(&db, step).is_err() {
                    failed += 1;
                } else {
                    assert_eq!(failed, 0, "{what}: a write succeeded after a failed one");
                }
            }
            assert!(failed > 0, "{what}: the fault never surfaced");
            assert!(db.flush().is_err(), "{what}: a poisoned database flushed");
            ffs.clear_rules();
            let acked = model.acked();
            model
                .check_need(&db, acked, false)
                .unwrap_or_else(|e| panic!("{what}: live reads: {e}"));
            let images = [
                (false, sim.fork()),
                (true, sim.crash(CrashPolicy::DropAll, seed)),
                (true, sim.crash(CrashPolicy::KeepRandomPrefix, seed)),
                (true, sim.crash(CrashPolicy::Tear { sector: 512 }, seed)),
            ];
            drop(db);
            for (power_loss, fs) in images {
                let db = sim_common::open(fs)
                    .unwrap_or_else(|e| panic!("{what} (power loss {power_loss}): {e}"));
                let need = model.required(power_loss);
                model
                    .check_need(&db, need, false)
                    .unwrap_or_else(|e| panic!("{what} (power loss {power_loss}): {e}"));
            }
        }
    }
}

/// `table` holds exactly the rows of `want`, each with exactly the families listed and the
/// values `row_put(row, 100)` wrote.
fn expect_rows(db: &Db, table: &str, want: &[(&str, &[&str])], what: &str) {
    let got = rows(db, table).unwrap_or_else(|e| panic!("{what}: {table}: {e}"));
    let got: BTreeMap<&str, Vec<&str>> = got
        .iter()
        .map(|(r, cells)| {
            for (col, v) in cells {
                let fam = &col[..1];
                assert_eq!(
                    *v,
                    val(r, fam, 100),
                    "{what}: {table}/{r}/{col} has a wrong value"
                );
            }
            (
                r.as_str(),
                cells.keys().map(|c| &c[..1]).collect::<Vec<&str>>(),
            )
        })
        .collect();
    let want: BTreeMap<&str, Vec<&str>> = want.iter().map(|(r, f)| (*r, f.to_vec())).collect();
    assert_eq!(got, want, "{what}: {table} (row -> families)");
}

/// Bug 9 — fjall-rs/fjall #241 → PR #242: `clear()` reset the on-disk version but wrote nothing
/// to the journal, so recovery replayed the cleared entries and deleted data came back.
///
/// Cellar's equivalents: `truncate` (the shell's drop and re-create of a table with the same
/// descriptor), `drop_table`, `alter_table` dropping a family and adding it back, and
/// `deleteall` (a row delete, and a delete of every family of the row). Data written before
/// each sits in flushed files *and* in WAL segments still to be replayed. After a process
/// crash and power losses, and again after a flush and major compaction of the recovered
/// database, none of the deleted data is back and everything written after is.
#[test]
fn bug09_fjall_241_truncate_drop_alter_and_deleteall_stay_deleted() {
    let fs = SimFs::new();
    let db = open_quiet(fs.clone()).unwrap();
    // 't' last: its family ids are the highest, the ones a counter derived from the live
    // tables would hand out again after the drop.
    for t in ["w", "u", "v", "t"] {
        db.create_table(two_families(t)).unwrap();
    }
    let p = |t: &str, r: &str| put(&db, t, r, 100, FSYNC).unwrap();
    // Before each delete: half in files, half only in the WAL.
    for i in 0..10 {
        p("t", &format!("old{i}"));
        p("u", &format!("r{i}"));
        p("v", &format!("x{i}"));
        p("w", &format!("w{i}"));
        if i == 4 {
            db.flush().unwrap();
        }
    }
    // truncate 't'
    db.drop_table("t").unwrap();
    db.create_table(two_families("t")).unwrap();
    for i in 0..3 {
        p("t", &format!("new{i}"));
    }
    // deleteall on 'u': whole-row deletes, and a delete of each family
    let ut = db.table("u").unwrap();
    for r in ["r0", "r3", "r7"] {
        ut.delete_with(Delete::new(r), WriteOptions::durability(FSYNC))
            .unwrap();
    }
    for r in ["r1", "r8"] {
        ut.delete_with(
            Delete::new(r).family("a").family("b"),
            WriteOptions::durability(FSYNC),
        )
        .unwrap();
    }
    // family 'b' of 'v' dropped and added back empty
    db.alter_table(TableDescriptor::new("v").family(FamilyDescriptor::new("a")))
        .unwrap();
    db.alter_table(two_families("v")).unwrap();
    p("v", "x10");
    db.drop_table("w").unwrap();

    let new: Vec<(&str, &[&str])> = vec![
        ("new0", &["a", "b"]),
        ("new1", &["a", "b"]),
        ("new2", &["a", "b"]),
    ];
    let u_left: Vec<(&str, &[&str])> = ["r2", "r4", "r5", "r6", "r9"]
        .iter()
        .map(|r| (*r, &["a", "b"][..]))
        .collect();
    let v_names: Vec<String> = (0..10).map(|i| format!("x{i}")).collect();
    let mut v_rows: Vec<(&str, &[&str])> =
        v_names.iter().map(|r| (r.as_str(), &["a"][..])).collect();
    v_rows.push(("x10", &["a", "b"]));
    let check = |db: &Db, what: &str| {
        expect_rows(db, "t", &new, what);
        expect_rows(db, "u", &u_left, what);
        expect_rows(db, "v", &v_rows, what);
        assert!(
            !db.table_exists("w").unwrap(),
            "{what}: dropped table w is back"
        );
    };
    check(&db, "live");
    let mut images = vec![("process crash".to_string(), fs.fork())];
    images.push(("drop-all".into(), fs.crash(CrashPolicy::DropAll, 0)));
    for s in 0..4 {
        images.push((
            format!("prefix {s}"),
            fs.crash(CrashPolicy::KeepRandomPrefix, s),
        ));
    }
    drop(db);
    for (what, img) in images {
        let db = open_quiet(img.clone()).unwrap_or_else(|e| panic!("{what}: {e}"));
        check(&db, &what);
        db.flush().unwrap();
        for t in ["t", "u", "v"] {
            db.major_compact(t, None).unwrap();
        }
        check(&db, &format!("{what}, compacted"));
        drop(db);
        let db = open_quiet(img).unwrap();
        check(&db, &format!("{what}, compacted and reopened"));
    }
}

/// Bug 10 — HBASE-26195 (apache/hbase PR #3611): a WAL sync timed out, the client got an
/// exception and the edit was rolled back although it had gone out. The fix: a failed WAL sync
/// is fatal for the server.
///
/// The WAL's fdatasync fails the Linux way (`FsyncFailMode::ErrorAndDrop`: EIO, the dirty
/// pages are dropped from the durable image, and the *next* sync succeeds). The write is not
/// acknowledged; the database is poisoned, writes no more WAL bytes, never syncs again (a
/// retried sync would succeed and lie), and refuses every later write and flush. After a
/// process crash and a power loss, earlier acknowledged rows are there and the failed row is
/// whole or absent (a "Maybe"). Also covered by `sim_faults.rs` (`eio_on_wal_sync`) and
/// `wal_durability.rs` (the WAL alone).
#[test]
fn bug10_hbase_26195_failed_wal_sync_poisons_and_is_maybe() {
    let (sim, ffs, db) = faulty_db();
    for i in 0..5 {
        put(&db, "t", &format!("a{i}"), 100, FSYNC).unwrap();
    }
    ffs.add_rule(Rule::on(OpKind::SyncData, Fault::SyncErrorAndDrop).path("/wal/"));
    let e = put(&db, "t", "maybe", 100, FSYNC).unwrap_err();
    assert!(!e.is_no_space(), "{e}");
    assert_eq!(db.poison().map(|p| p.cause), Some(PoisonCause::Io));
    let wal = Rule::any_op(Fault::Eio).path("/wal/");
    let wal_ops = ffs.count_matching(&wal);
    for d in [
        Durability::FsyncWal,
        Durability::SyncWal,
        Durability::AsyncWal,
    ] {
        assert!(
            matches!(put(&db, "t", "after", 100, d), Err(Error::Poisoned(_))),
            "{d:?} write accepted after a failed WAL sync"
        );
    }
    assert!(matches!(db.flush(), Err(Error::Poisoned(_))));
    std::thread::sleep(std::time::Duration::from_millis(50));
    assert_eq!(
        ffs.count_matching(&wal),
        wal_ops,
        "the WAL was written or synced again after its sync failed"
    );
    let live = rows(&db, "t").unwrap();
    assert!(!live.contains_key("after"));
    for (how, fs) in [
        ("process crash", sim.fork()),
        ("power loss", sim.crash(CrashPolicy::DropAll, 0)),
    ] {
        let db2 = open_quiet(fs).unwrap_or_else(|e| panic!("{how}: {e}"));
        let got = rows(&db2, "t").unwrap();
        for i in 0..5 {
            assert!(got.contains_key(&format!("a{i}")), "{how}: lost a{i}");
        }
        for (r, cells) in &got {
            assert!(whole(r, cells), "{how}: {r} is torn");
        }
        assert!(
            !got.contains_key("after"),
            "{how}: a refused write appeared"
        );
    }
    drop(db);
}

/// Honorable mention — google/leveldb #333: a zero-length table file referenced by the
/// manifest after a power loss. Such a file must be reported as corruption when it is read,
/// never read as an empty file (a missing result). Also: `corruption_sweep.rs` damages every
/// byte, not the length.
#[test]
fn hm_leveldb_333_zero_length_hfile_named_by_the_manifest_is_corruption() {
    let fs = SimFs::new();
    {
        let db = open_quiet(fs.clone()).unwrap();
        db.create_table(two_families("t")).unwrap();
        for i in 0..20 {
            put(&db, "t", &format!("r{i:02}"), 100, FSYNC).unwrap();
        }
        db.flush().unwrap();
    }
    let hfiles = files_named(&fs, ".hfile");
    assert_eq!(hfiles.len(), 2, "one file per family: {hfiles:?}");
    for victim in &hfiles {
        let img = fs.fork();
        img.set_contents(Path::new(victim), b"").unwrap();
        let db = match open_quiet(img) {
            Err(e) => {
                assert!(is_corruption(&e), "{victim}: {e}");
                continue;
            }
            Ok(db) => db,
        };
        match rows(&db, "t") {
            Err(e) => assert!(is_corruption(&e), "{victim}: {e}"),
            Ok(got) => panic!(
                "{victim} emptied, yet the scan returned {} rows without an error",
                got.len()
            ),
        }
        let g = db
            .table("t")
            .unwrap()
            .get(&cellar::Get::new("r05").column("b", "q"));
        assert!(
            matches!(&g, Err(e) if is_corruption(e)) || matches!(&g, Ok(Some(_))),
            "{victim}: a Get answered {g:?}"
        );
    }
}

/// File numbers (HFiles and manifests) of the files in `fs`.
fn numbers_on_disk(fs: &SimFs) -> BTreeSet<u64> {
    fs.files()
        .iter()
        .filter_map(|p| {
            let name = p.file_name()?.to_str()?;
            cellar::manifest::parse_hfile_file_name(name)
                .or_else(|| cellar::manifest::parse_manifest_file_name(name))
        })
        .collect()
}

/// Honorable mention — facebook/rocksdb PR #7621: a crash *during recovery* reused a file
/// number that an unsynced manifest edit later referenced.
///
/// A database with rows to replay is recovered with a crash before each file operation of
/// the recovery (it writes a new manifest and CURRENT, flushes the replayed rows to HFiles,
/// logs the flush); then a power loss; then a second recovery. The second recovery must not
/// create a file under a number that any file left on disk by the first one had, even an
/// orphan it is about to delete; and it must recover every row.
#[test]
fn hm_rocksdb_7621_crash_during_recovery_does_not_reuse_a_file_number() {
    let base = SimFs::new();
    let rows_written: Vec<String> = (0..30).map(|i| format!("r{i:02}")).collect();
    {
        let db = open_quiet(base.clone()).unwrap();
        db.create_table(two_families("t")).unwrap();
        for (i, r) in rows_written.iter().enumerate() {
            put(&db, "t", r, 100, FSYNC).unwrap();
            if i == 9 {
                db.flush().unwrap();
            }
        }
    }
    let crashed = base.crash(CrashPolicy::DropAll, 0);
    let total = {
        let ffs = FaultFs::new(crashed.fork());
        drop(open_quiet(ffs.clone()).unwrap());
        ffs.total()
    };
    let mut orphans_seen = 0;
    for n in 1..=total {
        let first = crashed.fork();
        let ffs = FaultFs::new(first.clone());
        ffs.add_rule(Rule::any_op(Fault::Eio).nth(n).persistent());
        drop(open_quiet(ffs));
        for policy in [CrashPolicy::DropAll, CrashPolicy::KeepRandomPrefix] {
            let img = first.crash(policy, n);
            let left = numbers_on_disk(&img);
            let second = FaultFs::new(img.clone());
            let db = open_quiet(second.clone())
                .unwrap_or_else(|e| panic!("crash before recovery op {n}: second recovery: {e}"));
            let created: BTreeSet<u64> = second
                .log()
                .iter()
                .filter(|r| r.kind == OpKind::Create && r.fault.is_none())
                .filter_map(|r| {
                    let name = r.path.file_name()?.to_str()?;
                    cellar::manifest::parse_hfile_file_name(name)
                        .or_else(|| cellar::manifest::parse_manifest_file_name(name))
                })
                .collect();
            let reused: Vec<&u64> = created.intersection(&left).collect();
            assert!(
                reused.is_empty(),
                "crash before recovery op {n} ({policy:?}): file numbers {reused:?} reused \
                 (on disk before: {left:?})"
            );
            let got = rows(&db, "t").unwrap();
            for r in &rows_written {
                assert!(
                    got.contains_key(r),
                    "crash before recovery op {n}: lost {r}"
                );
            }
            // Evidence the scenario bites: files the first recovery left that nothing names.
            let live = cellar::inspect::read_manifest(&img, Path::new(DIR)).unwrap();
            let named = live.live_files();
            orphans_seen += left
                .iter()
                .filter(|n| {
                    !named.contains(n)
                        && current(&img).trim_end() != cellar::manifest::manifest_file_name(**n)
                })
                .count();
        }
    }
    assert!(
        orphans_seen > 0,
        "no crash left an orphan file: the test exercises nothing"
    );
}

/// Workload of the flush and compaction enumeration: fsynced puts, flushes (the first creates
/// the family directories), a major compaction, more puts and a flush. Stops at the first
/// failure; returns the rows acknowledged.
fn flush_and_compact(fs: &FaultFs<SimFs>, acked: &mut Vec<String>) {
    let Ok(db) = open_quiet(fs.clone()) else {
        return;
    };
    if db.create_table(two_families("t")).is_err() {
        return;
    }
    for round in 0..4 {
        for i in 0..6 {
            let r = format!("r{round}-{i}");
            if put(&db, "t", &r, 300, FSYNC).is_err() {
                return;
            }
            acked.push(r);
        }
        let step = if round == 2 {
            db.major_compact("t", None)
        } else {
            db.flush()
        };
        if step.is_err() {
            return;
        }
    }
}

/// Honorable mention — facebook/rocksdb #5287: no directory fsync after file ingestion, so
/// files the manifest named could vanish with a power loss. Cellar's files enter the manifest
/// through flushes and compactions: a crash is placed before every file operation of a
/// workload of fsynced puts, flushes (the first one creates `data/` and the family
/// directories) and a major compaction, followed by power losses; every recovery must open,
/// read every file the manifest names, and hold every acknowledged row. The same enumeration
/// as bug 3, on the data path.
#[test]
fn hm_rocksdb_5287_crash_at_any_step_of_flush_and_compaction() {
    let (_, clean) = crash_before_every_operation(flush_and_compact, |db, acked, what| {
        if acked.is_empty() && !db.table_exists("t").unwrap() {
            return;
        }
        let got = rows(db, "t").unwrap_or_else(|e| panic!("{what}: read failed: {e}"));
        for r in acked {
            assert!(got.contains_key(r), "{what}: acknowledged row {r} lost");
        }
        for (r, cells) in &got {
            assert!(whole(r, cells), "{what}: row {r} is torn");
        }
    });
    assert_eq!(clean.len(), 24, "the workload must finish without faults");
}
