//! What each durability level promises within a process, and how open treats damaged or
//! stray files: WAL replay after drop, SkipWal loss, a torn WAL tail, a corrupted WAL record,
//! a corrupted HFile block, and files no version refers to.

mod common;

use std::path::Path;

use cellar::{Db, Delete, Durability, Error, Get, Options, Put, RecoveryMode, Scan, WriteOptions};
use common::{
    damaged_db_value, flip_byte, hfiles, newest_wal_with_records, one_file_with_a_damaged_block,
    open, open_default, table_desc,
};

fn create(dir: &Path) -> Db {
    let db = open_default(dir);
    db.create_table(table_desc("t", &["a", "b"], 3)).unwrap();
    db
}

fn put_rows(db: &Db, prefix: &str, n: usize, d: Durability) {
    let t = db.table("t").unwrap();
    for i in 0..n {
        t.put_with(
            Put::new(format!("{prefix}{i:04}"))
                .add_at("a", "q", 1, format!("a-{prefix}{i}"))
                .add_at("b", "q", 1, format!("b-{prefix}{i}")),
            WriteOptions::durability(d),
        )
        .unwrap();
    }
}

/// Keys of the rows of `t` starting with `prefix`, each checked to hold both its cells.
fn rows_with(db: &Db, prefix: &str) -> Vec<String> {
    db.table("t")
        .unwrap()
        .scan(Scan::new().prefix(prefix))
        .unwrap()
        .map(|r| {
            let r = r.unwrap();
            let k = String::from_utf8(r.key.clone()).unwrap();
            let i: usize = k[prefix.len()..].parse().unwrap();
            assert_eq!(r.value("a", "q"), Some(format!("a-{prefix}{i}").as_bytes()));
            assert_eq!(r.value("b", "q"), Some(format!("b-{prefix}{i}").as_bytes()));
            k
        })
        .collect()
}

fn keys(prefix: &str, r: std::ops::Range<usize>) -> Vec<String> {
    r.map(|i| format!("{prefix}{i:04}")).collect()
}

#[test]
fn wal_levels_survive_drop_and_reopen_without_flush_and_skip_wal_does_not() {
    let dir = tempfile::tempdir().unwrap();
    let db = create(dir.path());
    put_rows(&db, "sync", 50, Durability::SyncWal);
    put_rows(&db, "fsync", 50, Durability::FsyncWal);
    put_rows(&db, "async", 50, Durability::AsyncWal);
    put_rows(&db, "skip", 50, Durability::SkipWal);
    // Deletes are replayed too.
    let t = db.table("t").unwrap();
    t.delete_with(
        Delete::new("sync0007"),
        WriteOptions::durability(Durability::SyncWal),
    )
    .unwrap();
    drop(t);
    assert_eq!(db.stats().flushes, 0);
    assert!(hfiles(dir.path()).is_empty());
    drop(db);

    let db = open_default(dir.path());
    let mut want = keys("sync", 0..50);
    want.retain(|k| k != "sync0007");
    assert_eq!(rows_with(&db, "sync"), want);
    assert_eq!(rows_with(&db, "fsync"), keys("fsync", 0..50));
    // AsyncWal records are queued; a clean drop writes the queue.
    assert_eq!(rows_with(&db, "async"), keys("async", 0..50));
    // SkipWal writes are in no WAL: a clean close flushes them (a crash loses them).
    assert_eq!(rows_with(&db, "skip"), keys("skip", 0..50));
    // Replayed data was flushed at open, so a second reopen reads it from files.
    drop(db);
    let db = open_default(dir.path());
    assert_eq!(rows_with(&db, "fsync"), keys("fsync", 0..50));
    assert!(!hfiles(dir.path()).is_empty());
    // Still deleted.
    assert_eq!(rows_with(&db, "sync").len(), 49);
}

#[test]
fn skip_wal_writes_are_kept_once_flushed() {
    let dir = tempfile::tempdir().unwrap();
    let db = create(dir.path());
    put_rows(&db, "skip", 40, Durability::SkipWal);
    db.flush().unwrap();
    put_rows(&db, "later", 10, Durability::SkipWal);
    drop(db);
    let db = open_default(dir.path());
    assert_eq!(rows_with(&db, "skip"), keys("skip", 0..40));
    // Unflushed SkipWal writes are flushed by a clean close.
    assert_eq!(rows_with(&db, "later"), keys("later", 0..10));
}

#[test]
fn min_durability_raises_skip_wal_writes() {
    let dir = tempfile::tempdir().unwrap();
    let opts = || Options {
        min_durability: Durability::SyncWal,
        ..Options::default()
    };
    let db = open(dir.path(), opts());
    db.create_table(table_desc("t", &["a", "b"], 3)).unwrap();
    put_rows(&db, "skip", 20, Durability::SkipWal);
    drop(db);
    let db = open(dir.path(), opts());
    assert_eq!(rows_with(&db, "skip"), keys("skip", 0..20));
}

#[test]
fn replay_after_partial_flush_neither_loses_nor_duplicates() {
    let dir = tempfile::tempdir().unwrap();
    let db = create(dir.path());
    let t = db.table("t").unwrap();
    for ts in 1..=2u64 {
        t.put(Put::new("r").add_at("a", "q", ts, format!("v{ts}")))
            .unwrap();
    }
    db.flush().unwrap();
    t.put(Put::new("r").add_at("a", "q", 3, "v3")).unwrap();
    t.delete(Delete::new("r").column_at("a", "q", 1)).unwrap();
    drop(t);
    drop(db);
    for _ in 0..2 {
        let db = open_default(dir.path());
        let r = db
            .table("t")
            .unwrap()
            .get(&Get::new("r").all_versions())
            .unwrap()
            .unwrap();
        let got: Vec<(u64, Vec<u8>)> = r
            .cells()
            .iter()
            .map(|c| (c.timestamp, c.value.clone()))
            .collect();
        assert_eq!(got, vec![(3, b"v3".to_vec()), (2, b"v2".to_vec())]);
    }
}

/// Writes `n` single-thread SyncWal rows `w0000..`, drops, and returns the newest segment with
/// records and those records (the last one is the last row).
fn wal_of_rows(dir: &Path, n: usize) -> (std::path::PathBuf, Vec<(usize, usize, usize)>) {
    let db = create(dir);
    put_rows(&db, "w", n, Durability::SyncWal);
    drop(db);
    let (seg, mut recs) = newest_wal_with_records(dir);
    // The table's creation logged a schema record first (SPEC.md §16.10); then one per put.
    assert_eq!(recs.len(), n + 1, "one record per put");
    recs.remove(0);
    // The clean close started a segment holding only a LINK to `seg`. The damage these tests
    // make to `seg` stands for a crash (or, rewritten, a log an older build wrote), which
    // leaves no such segment: remove it, so that `seg` is the newest again.
    for later in common::wal_segments(dir).into_iter().filter(|p| *p > seg) {
        std::fs::remove_file(later).unwrap();
    }
    (seg, recs)
}

#[test]
fn torn_wal_tail_is_tolerated_and_only_the_torn_write_is_lost() {
    // Cut inside the last record's payload, inside its header, and just after its first byte.
    for cut in [None, Some(6), Some(1)] {
        let dir = tempfile::tempdir().unwrap();
        let (seg, recs) = wal_of_rows(dir.path(), 20);
        let (start, payload, end) = recs[19];
        let cut = cut.unwrap_or(payload - start + 5);
        assert!(start + cut != payload);
        assert!(start + cut < end);
        let f = std::fs::OpenOptions::new().write(true).open(&seg).unwrap();
        f.set_len((start + cut) as u64).unwrap();
        drop(f);
        let db = open_default(dir.path());
        assert_eq!(rows_with(&db, "w"), keys("w", 0..19), "cut {cut}");
        // The log stays usable: new writes, a reopen, and nothing of the torn one appears.
        put_rows(&db, "x", 5, Durability::SyncWal);
        drop(db);
        let db = open_default(dir.path());
        assert_eq!(rows_with(&db, "w"), keys("w", 0..19));
        assert_eq!(rows_with(&db, "x"), keys("x", 0..5));
    }
}

#[test]
fn unwritten_tail_of_the_last_record_is_tolerated() {
    // The preallocated segment keeps its length; the last record's end never reached the disk.
    let dir = tempfile::tempdir().unwrap();
    let (seg, recs) = wal_of_rows(dir.path(), 20);
    let (_, payload, end) = recs[19];
    use std::os::unix::fs::FileExt;
    let f = std::fs::OpenOptions::new().write(true).open(&seg).unwrap();
    // Nor did the seal the clean close wrote after it: the fdatasync that would have made the
    // record durable never completed, so nothing attests it.
    let from = payload + 5;
    let zeros = vec![0u8; end + cellar::wal::record::WAL_MAX_HEADER_LEN - from];
    f.write_all_at(&zeros, from as u64).unwrap();
    drop(f);
    let db = open_default(dir.path());
    assert_eq!(rows_with(&db, "w"), keys("w", 0..19));
}

#[test]
fn corrupted_wal_record_before_valid_ones_fails_open_unless_salvaging() {
    let dir = tempfile::tempdir().unwrap();
    let (seg, recs) = wal_of_rows(dir.path(), 30);
    let (_, payload, end) = recs[10];
    flip_byte(&seg, ((payload + end) / 2) as u64);
    let wal_before = std::fs::read(&seg).unwrap();

    let e = Db::open(dir.path(), Options::default()).unwrap_err();
    assert!(matches!(e, Error::Corruption { .. }), "{e:?}");
    // Strict fails too.
    let e = Db::open(
        dir.path(),
        Options {
            wal_recovery: RecoveryMode::Strict,
            ..Options::default()
        },
    )
    .unwrap_err();
    assert!(matches!(e, Error::Corruption { .. }), "{e:?}");
    // A failed open changes nothing on disk, and fails the same way again.
    assert_eq!(std::fs::read(&seg).unwrap(), wal_before);
    let e = Db::open(dir.path(), Options::default()).unwrap_err();
    assert!(matches!(e, Error::Corruption { .. }), "{e:?}");

    let salvage = Options {
        wal_recovery: RecoveryMode::SkipCorrupted,
        ..Options::default()
    };
    let db = open(dir.path(), salvage);
    let report = db.stats().recovery;
    assert_eq!(report.skipped_ranges.len(), 1, "{report:?}");
    let mut want = keys("w", 0..30);
    want.remove(10);
    assert_eq!(rows_with(&db, "w"), want);
    drop(db);
    // What was salvaged is now in files: a normal open works and sees the same.
    let db = open_default(dir.path());
    assert_eq!(rows_with(&db, "w"), want);
}

#[test]
fn corrupted_hfile_block_makes_reads_fail_never_return_wrong_data() {
    let dir = tempfile::tempdir().unwrap();
    one_file_with_a_damaged_block(dir.path());
    let value = damaged_db_value;

    let db = match Db::open(dir.path(), Options::default()) {
        Ok(db) => db,
        // Verifying files at open is also within the contract.
        Err(e) => {
            assert!(
                matches!(e, Error::Format(_) | Error::Corruption { .. }),
                "{e:?}"
            );
            return;
        }
    };
    let t = db.table("t").unwrap();
    let mut errors = 0;
    for i in 0..500 {
        match t.get(&Get::new(format!("r{i:04}"))) {
            Ok(Some(r)) => assert_eq!(r.value("a", "q"), Some(value(i).as_bytes())),
            Ok(None) => panic!("row {i} silently missing"),
            Err(e) => {
                assert!(
                    matches!(e, Error::Format(_) | Error::Corruption { .. }),
                    "{e:?}"
                );
                errors += 1;
            }
        }
    }
    assert!(errors > 0, "no read touched the damaged block");
    assert!(
        errors < 100,
        "{errors} rows failed: more than one 1 KiB block"
    );
    // A full scan reaches the damaged block: it yields an error, and the rows before it are
    // right.
    let mut scan_err = false;
    for (i, r) in t.scan(Scan::new()).unwrap().enumerate() {
        match r {
            Ok(r) => {
                assert_eq!(r.key, format!("r{i:04}").into_bytes());
                assert_eq!(r.value("a", "q"), Some(value(i).as_bytes()));
            }
            Err(e) => {
                assert!(
                    matches!(e, Error::Format(_) | Error::Corruption { .. }),
                    "{e:?}"
                );
                scan_err = true;
            }
        }
    }
    assert!(scan_err, "the scan never reported the damaged block");
}

#[test]
fn files_no_version_refers_to_are_deleted_at_open() {
    let dir = tempfile::tempdir().unwrap();
    let db = create(dir.path());
    put_rows(&db, "r", 10, Durability::SyncWal);
    db.flush().unwrap();
    drop(db);
    let live = hfiles(dir.path());
    assert_eq!(live.len(), 2);
    let fam_dir = live[0].parent().unwrap().to_path_buf();
    let stray = fam_dir.join("999999.hfile");
    std::fs::write(&stray, b"not an hfile").unwrap();
    // A stray in the directory of a family that does not exist.
    let other = dir.path().join("data").join("4242");
    std::fs::create_dir_all(&other).unwrap();
    let stray2 = other.join("000077.hfile");
    std::fs::write(&stray2, b"junk").unwrap();
    // A file that is not named like an HFile is not the engine's to delete.
    let foreign = fam_dir.join("notes.txt");
    std::fs::write(&foreign, b"keep me").unwrap();

    let db = open_default(dir.path());
    assert!(!stray.exists(), "stray HFile kept");
    assert!(!stray2.exists(), "stray HFile of an unknown family kept");
    assert!(foreign.exists());
    assert_eq!(hfiles(dir.path()), live);
    assert_eq!(rows_with(&db, "r"), keys("r", 0..10));
    // New files do not collide with the stray's number.
    put_rows(&db, "s", 3, Durability::SyncWal);
    db.flush().unwrap();
    assert_eq!(hfiles(dir.path()).len(), 4);
    drop(db);
    let db = open_default(dir.path());
    assert_eq!(rows_with(&db, "s"), keys("s", 0..3));
}

#[test]
fn close_flushes_skip_wal_writes() {
    let dir = tempfile::tempdir().unwrap();
    let db = create(dir.path());
    put_rows(&db, "skip", 10, Durability::SkipWal);
    db.close().unwrap();
    let db = open_default(dir.path());
    assert_eq!(rows_with(&db, "skip"), keys("skip", 0..10));
}

/// Each open starts a new WAL segment (preallocated to `segment_size`, 64 MiB by default);
/// segments are deleted only by a flush. Opening and closing a database with nothing to replay
/// must not leave one more segment behind each time.
///
/// Bug: `DbInner::open` (engine/src/db/mod.rs) always lets `Wal::open` start a new segment, and
/// when replay applied nothing (`replayed == 0`) no switch or flush follows, so the older,
/// fully-flushed segments stay until some later flush: 5 idle reopens leave 6 segments and
/// 384 MiB allocated.
#[test]
fn reopening_without_writes_does_not_pile_up_wal_segments() {
    let dir = tempfile::tempdir().unwrap();
    let db = create(dir.path());
    put_rows(&db, "r", 5, Durability::SyncWal);
    db.flush().unwrap();
    drop(db);
    for _ in 0..5 {
        drop(open_default(dir.path()));
    }
    let segs = common::wal_segments(dir.path());
    assert!(
        segs.len() <= 2,
        "{} WAL segments after 5 idle reopens ({} MiB allocated)",
        segs.len(),
        common::du(&dir.path().join("wal")) >> 20
    );
}

/// Sequence numbers never go back, even when every cell that carried the highest ones is
/// gone: written to a table dropped since, whose WAL records replay into nothing. A reopen
/// that retires such a WAL must still remember how far the numbers went (a later write at a
/// number already used would break the WAL's strictly increasing order and every snapshot
/// taken across it).
#[test]
fn sequence_numbers_never_go_back_after_the_table_that_held_them_is_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let db = create(dir.path());
    let t = db.table("t").unwrap();
    let mut last = 0;
    for i in 0..5 {
        last = t.put(Put::new(format!("r{i}")).add("a", "q", "v")).unwrap();
    }
    drop(t);
    db.drop_table("t").unwrap();
    db.create_table(table_desc("t", &["a", "b"], 3)).unwrap();
    drop(db);
    // Idle reopens first: each may retire the WAL whose records all went with the table.
    for _ in 0..2 {
        drop(open_default(dir.path()));
    }
    for round in 0..3 {
        let db = open_default(dir.path());
        let seq = db
            .table("t")
            .unwrap()
            .put(Put::new("x").add("a", "q", "v"))
            .unwrap();
        assert!(seq > last, "round {round}: seq {seq} after {last}");
        last = seq;
        drop(db);
    }
}

/// A table or family dropped while a flush of its memstore is under way: the flush's file has
/// no place in the version any more. The flush must install the rest and delete that file;
/// before, the manifest refused the edit and the database went read-only. The open after a
/// WAL replay flushes in the background, so a drop right after it lands inside that flush.
#[test]
fn dropping_a_table_or_family_during_its_flush_leaves_the_database_writable() {
    let dir = tempfile::tempdir().unwrap();
    let db = create(dir.path());
    db.create_table(table_desc("keep", &["a"], 1)).unwrap();
    drop(db);
    for round in 0..10 {
        let db = open_default(dir.path());
        for table in ["t", "keep"] {
            let t = db.table(table).unwrap();
            for i in 0..200 {
                t.put(Put::new(format!("{round}-{i}")).add("a", "q", "v"))
                    .unwrap();
            }
        }
        drop(db);
        // Replays the puts and starts flushing them; the drop races that flush.
        let db = open_default(dir.path());
        if round % 2 == 0 {
            db.drop_table("t").unwrap();
            db.create_table(table_desc("t", &["a", "b"], 3)).unwrap();
        } else {
            db.alter_table(table_desc("t", &["b"], 3)).unwrap();
            db.alter_table(table_desc("t", &["a", "b"], 3)).unwrap();
        }
        db.flush().unwrap();
        assert_eq!(db.poisoned(), None, "round {round}");
        // The flush deleted its file of the dropped family: once compactions are quiet (a
        // running one has an output not yet installed), every HFile on disk is live or a
        // dropped one some reader (the flush's own view, when the drop came) still held.
        db.wait_for_compactions().unwrap();
        let st = db.stats();
        assert_eq!(
            hfiles(dir.path()).len() as u64,
            st.live_files + st.compaction.awaiting_deletion,
            "round {round}: {:?}",
            hfiles(dir.path())
        );
        let keep = db.table("keep").unwrap();
        keep.put(Put::new("after").add("a", "q", "v")).unwrap();
        let n = keep.scan(Scan::new()).unwrap().count();
        assert_eq!(
            n,
            200 * (round + 1) + 1,
            "round {round}: the other table's rows"
        );
        keep.delete(Delete::new("after")).unwrap();
        assert_eq!(
            db.table("t").unwrap().scan(Scan::new()).unwrap().count(),
            0,
            "round {round}: the dropped data stays gone"
        );
        drop(keep);
        drop(db);
    }
    let db = open_default(dir.path());
    assert_eq!(db.table("t").unwrap().scan(Scan::new()).unwrap().count(), 0);
}

/// Rewrite WAL segment `path` (V2, `.wal2`) in the legacy V1 layout under its `.wal` name, as
/// an older build would have written it: every batch re-encoded as a version-1 batch; a seal
/// attests the new file's length at that point. Returns the new path.
fn rewrite_as_v1(path: &Path) -> std::path::PathBuf {
    use cellar::batch::{self, Mutation, WalFormat};
    use cellar::wal::record::{self, WalDecoded};
    let bytes = std::fs::read(path).unwrap();
    let name = path.file_name().unwrap().to_str().unwrap();
    let (segment, format) = cellar::wal::parse_segment_name(name).unwrap();
    assert_eq!(format, WalFormat::V2);
    let mut out = Vec::new();
    let mut off = 0;
    loop {
        match record::decode_wal(format, &bytes[off..], segment).unwrap() {
            WalDecoded::End => break,
            WalDecoded::Record(r) => {
                let muts: Vec<Mutation> = batch::decode(r.payload, format)
                    .unwrap()
                    .iter()
                    .map(batch::MutationRef::to_mutation)
                    .collect();
                record::encode_wal_v1(segment, r.seq, 0, &batch::encode_v1(&muts), &mut out);
                off += r.len;
            }
            WalDecoded::Seal { len, .. } => {
                let synced = out.len() as u64;
                record::encode_seal_v1(segment, synced, &mut out);
                off += len;
            }
            WalDecoded::Link {
                previous,
                previous_end,
                len,
            } => {
                record::encode_link_v1(segment, previous, previous_end, &mut out);
                off += len;
            }
        }
    }
    std::fs::remove_file(path).unwrap();
    let v1 = path.with_file_name(cellar::wal::segment_file_name_v1(segment));
    std::fs::write(&v1, &out).unwrap();
    v1
}

/// Rewrite the live manifest of the database in `dir` without `wal_format`, as builds before
/// WAL layout V2 wrote it.
fn strip_wal_format(dir: &Path) {
    use cellar::manifest::VersionEdit;
    use cellar::wal::record::{self, Decoded};
    let name = std::fs::read_to_string(dir.join("CURRENT")).unwrap();
    let path = dir.join(name.trim());
    let number = cellar::manifest::log::parse_manifest_file_name(name.trim()).unwrap();
    let bytes = std::fs::read(&path).unwrap();
    let (mut out, mut off) = (Vec::new(), 0);
    while let Decoded::Record(r) = record::decode(&bytes[off..], number).unwrap() {
        let mut e = VersionEdit::decode(r.payload).unwrap();
        e.wal_format = None;
        record::encode(number, r.seq, &e.encode(), &mut out);
        off += r.len;
    }
    std::fs::write(&path, out).unwrap();
}

/// A database whose log an older build wrote (V1 segments, `.wal`) opens with every record
/// replayed and goes on in the new layout (`.wal2`). (A log holding both layouts at once, and
/// the link check across them, is covered in `wal::reader`'s tests.)
#[test]
fn a_wal_in_the_legacy_layout_replays_and_continues_in_the_new_one() {
    let dir = tempfile::tempdir().unwrap();
    let (seg, recs) = wal_of_rows(dir.path(), 30);
    let v1 = rewrite_as_v1(&seg);
    strip_wal_format(dir.path());
    let before = cellar::inspect::read_manifest(&cellar::fs::RealFs, dir.path()).unwrap();
    assert_eq!(before.wal_format(), 0);
    // Version-1 framing is larger: 33-byte headers, fixed timestamps, a count and a version.
    assert!(std::fs::metadata(&v1).unwrap().len() > recs.last().unwrap().2 as u64);
    let db = open_default(dir.path());
    assert_eq!(rows_with(&db, "w"), keys("w", 0..30));
    assert!(!db.stats().recovery.torn_tail);
    assert_eq!(db.stats().recovery.replayed_batches, 30);
    // The manifest now says the log is in layout 2, so an older build refuses the database
    // instead of opening it without the `.wal2` segments.
    let after = cellar::inspect::read_manifest(&cellar::fs::RealFs, dir.path()).unwrap();
    assert_eq!(after.wal_format(), cellar::manifest::WAL_FORMAT);
    put_rows(&db, "x", 10, Durability::SyncWal);
    drop(db);
    let db = open_default(dir.path());
    assert_eq!(rows_with(&db, "w"), keys("w", 0..30));
    assert_eq!(rows_with(&db, "x"), keys("x", 0..10));
    // Once everything is flushed, every segment left is in the new layout.
    db.close().unwrap();
    let db = open_default(dir.path());
    assert_eq!(rows_with(&db, "w"), keys("w", 0..30));
    assert!(common::wal_segments(dir.path())
        .iter()
        .all(|p| p.extension().is_some_and(|e| e == "wal2")));
}

/// The family directories under `data/`, by name.
fn family_dirs(dir: &Path) -> std::collections::BTreeSet<String> {
    std::fs::read_dir(dir.join("data"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect()
}

/// A dropped family's directory (a dropped table's, a truncated one's, one an alter removed)
/// is deleted at the next open, once its files are; a running database keeps it until then.
#[test]
fn directories_of_dropped_families_are_removed_at_the_next_open() {
    let dir = tempfile::tempdir().unwrap();
    let db = create(dir.path());
    put_rows(&db, "w", 10, Durability::SyncWal);
    db.flush().unwrap();
    let first = family_dirs(dir.path());
    assert_eq!(first.len(), 2, "{first:?}");
    // A truncate: the table's families get new ids.
    db.drop_table("t").unwrap();
    db.create_table(table_desc("t", &["a", "b"], 3)).unwrap();
    put_rows(&db, "x", 10, Durability::SyncWal);
    db.flush().unwrap();
    assert_eq!(family_dirs(dir.path()).len(), 4);
    drop(db);
    let db = open_default(dir.path());
    let second = family_dirs(dir.path());
    assert_eq!(second.len(), 2, "{second:?}");
    assert!(second.is_disjoint(&first));
    assert_eq!(rows_with(&db, "x"), keys("x", 0..10));
    assert!(rows_with(&db, "w").is_empty());
    // An alter that removes family "b".
    db.alter_table(table_desc("t", &["a"], 3)).unwrap();
    drop(db);
    let db = open_default(dir.path());
    let third = family_dirs(dir.path());
    assert_eq!(third.len(), 1, "{third:?}");
    assert!(third.is_subset(&second));
    // Nothing else was touched: the remaining family still reads.
    let t = db.table("t").unwrap();
    let r = t.get(&Get::new("x0003")).unwrap().unwrap();
    assert_eq!(r.value("a", "q"), Some(&b"a-x3"[..]));
}
