//! The change feed (`Db::changes_since`, SPEC.md §16.8): every committed batch after a seq, in
//! commit order, whole, with names; the WAL segments it needs held while it reads; retention
//! across reopens; `ChangesUnavailable` once they are gone; damage reported, never a wrong
//! batch; and a replica fed from it that ends up reading like the primary.

mod common;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use cellar::format::CellType;
use cellar::wal::WalOptions;
use cellar::{
    ChangeBatch, ChangeFeedOptions, Db, Delete, Durability, Error, FamilyDescriptor, Options, Put,
    Scan, TableDescriptor, WriteBatch, WriteOptions,
};
use common::{flip_byte, open, wal_records, wal_segments};
use rand::{rngs::StdRng, Rng, SeedableRng};

/// Small segments and memstores, so a few hundred writes roll segments and flush.
fn small(retain_bytes: u64) -> Options {
    let mut o = Options {
        wal: WalOptions {
            segment_size: 16 << 10,
            retain_bytes,
            ..WalOptions::default()
        },
        ..Options::default()
    }
    .write_buffer_size(64 << 10);
    o.compaction.threads = 0;
    o
}

fn schema(db: &Db) {
    db.create_table(
        TableDescriptor::new("t")
            .family(FamilyDescriptor::new("a").max_versions(10_000))
            .family(FamilyDescriptor::new("b").max_versions(10_000)),
    )
    .unwrap();
    db.create_namespace("ns").unwrap();
    db.create_table(
        TableDescriptor::new("ns:u").family(FamilyDescriptor::new("c").max_versions(10_000)),
    )
    .unwrap();
}

/// Every batch a feed has now.
fn drain(feed: &mut cellar::ChangeFeed) -> Vec<ChangeBatch> {
    let mut out = Vec::new();
    while let Some(b) = feed.next_batch().unwrap() {
        out.push(b);
    }
    out
}

/// A feed from seq 0 read until it has nothing more or fails (opening it included): the
/// batches, and the error if any.
fn read_to_error(db: &Db) -> (Vec<ChangeBatch>, Option<Error>) {
    let mut got = Vec::new();
    let mut feed = match db.changes_since(0) {
        Ok(f) => f,
        Err(e) => return (got, Some(e)),
    };
    loop {
        match feed.next_batch() {
            Ok(Some(b)) => got.push(b),
            Ok(None) => return (got, None),
            Err(e) => return (got, Some(e)),
        }
    }
}

fn put(i: u64) -> Put {
    Put::new(format!("r{i:05}")).add_at("a", "q", i, format!("{i:0>120}"))
}

#[test]
fn every_batch_in_order_whole_with_names_and_resolved_fields() {
    let d = tempfile::tempdir().unwrap();
    let db = open(d.path(), Options::default());
    schema(&db);
    let start = db.flushed_seq();
    let t = db.table("t").unwrap();
    let s1 = t.put(Put::new("r1").add_at("a", "q", 5, "v1")).unwrap();
    let s2 = t
        .put(
            Put::new("r2")
                .add_at("b", "x", 6, "v2")
                .ttl(Duration::from_secs(60)),
        )
        .unwrap();
    let s3 = db
        .write(
            WriteBatch::new()
                .put("t", Put::new("r3").add_at("a", "q", 7, "v3"))
                .put("ns:u", Put::new("r3").add_at("c", "z", 8, "v4"))
                .delete("t", Delete::new("r1").columns_at("a", "q", 9)),
            WriteOptions::default(),
        )
        .unwrap();
    // A version delete without a timestamp is resolved to the newest version's when applied.
    let s4 = t.delete(Delete::new("r3").column("a", "q")).unwrap();
    let s5 = t
        .delete(Delete::new("r2").family_at("b", 10).family_version("a", 11))
        .unwrap();
    let s6 = t.put(Put::new("r4").add("a", "q", "now")).unwrap();

    let mut feed = db.changes_since(start).unwrap();
    let got = drain(&mut feed);
    assert_eq!(
        got.iter().map(|b| b.seq).collect::<Vec<_>>(),
        vec![s1, s2, s3, s4, s5, s6]
    );
    assert_eq!(feed.position(), s6);
    let cell = |b: usize, c: usize| &got[b].cells[c];
    assert_eq!(cell(0, 0).table.as_ref().unwrap().to_string(), "t");
    assert_eq!(cell(0, 0).family.as_deref(), Some("a"));
    assert_eq!(
        (
            &cell(0, 0).row[..],
            &cell(0, 0).qualifier[..],
            cell(0, 0).timestamp
        ),
        (&b"r1"[..], &b"q"[..], 5)
    );
    assert_eq!(cell(0, 0).value, b"v1");
    assert_eq!(cell(1, 0).ttl, Some(Duration::from_secs(60)));
    assert_eq!(cell(0, 0).ttl, None);
    // The cross-table batch is one batch, in its order.
    assert_eq!(got[2].cells.len(), 3);
    assert_eq!(cell(2, 1).table.as_ref().unwrap().to_string(), "ns:u");
    assert_eq!(cell(2, 1).family.as_deref(), Some("c"));
    assert_eq!(cell(2, 2).cell_type, CellType::DeleteColumn);
    assert_eq!(cell(2, 2).timestamp, 9);
    assert_eq!(cell(3, 0).cell_type, CellType::Delete);
    assert_eq!(cell(3, 0).timestamp, 7, "resolved to the newest version");
    let kinds: Vec<_> = got[4].cells.iter().map(|c| c.cell_type).collect();
    assert!(
        kinds.contains(&CellType::DeleteFamily) && kinds.contains(&CellType::DeleteFamilyVersion)
    );
    assert!(
        cell(5, 0).timestamp > 1_000_000_000_000,
        "\"now\" is resolved"
    );

    // Caught up: None, then later writes come through the same feed.
    assert!(feed.next_batch().unwrap().is_none());
    let s7 = t.put(put(7)).unwrap();
    assert_eq!(feed.next_batch().unwrap().unwrap().seq, s7);
    assert!(feed.next_batch().unwrap().is_none());

    // A feed from the middle starts right after it.
    let mut mid = db.changes_since(s3).unwrap();
    assert_eq!(
        drain(&mut mid).iter().map(|b| b.seq).collect::<Vec<_>>(),
        vec![s4, s5, s6, s7]
    );

    // A family dropped since: its cells keep their id, without names.
    db.drop_table("ns:u").unwrap();
    let mut again = db.changes_since(start).unwrap();
    let got = drain(&mut again);
    assert!(got[2].cells[1].table.is_none() && got[2].cells[1].family.is_none());
    assert_eq!(
        got[2].to_write_batch().len(),
        2,
        "dropped families' cells are left out"
    );

    // A seq never given out is refused.
    assert!(matches!(
        db.changes_since(s7 + 1_000),
        Err(Error::InvalidArgument(_))
    ));
}

/// A table and a row range narrow the cells handed out; batches left with none are passed
/// over, and the position moves past them.
#[test]
fn filters_by_table_and_rows_pass_over_what_they_leave_out() {
    let d = tempfile::tempdir().unwrap();
    let db = open(d.path(), Options::default());
    schema(&db);
    let start = db.flushed_seq();
    let t = db.table("t").unwrap();
    let s1 = t.put(put(1)).unwrap();
    let s2 = db
        .write(
            WriteBatch::new()
                .put("t", put(2))
                .put("t", put(70))
                .put("ns:u", Put::new("r00002").add_at("c", "z", 1, "x")),
            WriteOptions::default(),
        )
        .unwrap();
    let s3 = db
        .table("ns:u")
        .unwrap()
        .put(Put::new("r00003").add_at("c", "z", 1, "x"))
        .unwrap();
    let opts = ChangeFeedOptions::default()
        .table("t")
        .rows("r00002", "r00050");
    let mut feed = db.changes_since_with(start, opts.clone()).unwrap();
    let got = drain(&mut feed);
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(got[0].seq, s2);
    assert_eq!(got[0].cells.len(), 1);
    assert_eq!(got[0].cells[0].row, b"r00002");
    assert_eq!(feed.position(), s3, "past the batches left out");
    let mut only_u = db
        .changes_since_with(start, ChangeFeedOptions::default().table("ns:u"))
        .unwrap();
    let got: Vec<_> = drain(&mut only_u).into_iter().map(|b| b.seq).collect();
    assert_eq!(got, vec![s2, s3]);
    let mut rows_only = db
        .changes_since_with(start, ChangeFeedOptions::default().rows("r00001", ""))
        .unwrap();
    let got: Vec<_> = drain(&mut rows_only).into_iter().map(|b| b.seq).collect();
    assert_eq!(got, vec![s1, s2, s3]);
    for bad in [
        ChangeFeedOptions::default().rows("b", "a"),
        ChangeFeedOptions::default().table("no such:name:at all"),
    ] {
        assert!(db.changes_since_with(start, bad).is_err());
    }
}

#[test]
fn skip_wal_writes_are_not_in_the_feed_and_durable_only_waits_for_an_fsync() {
    let d = tempfile::tempdir().unwrap();
    let db = open(d.path(), Options::default());
    schema(&db);
    let t = db.table("t").unwrap();
    let start = db.flushed_seq();
    let w = |d| WriteOptions::durability(d);
    let a = t.put_with(put(1), w(Durability::SyncWal)).unwrap();
    t.put_with(put(2), w(Durability::SkipWal)).unwrap();
    let c = t.put_with(put(3), w(Durability::AsyncWal)).unwrap();
    let durable = ChangeFeedOptions::default().durable_only(true);
    let mut dfeed = db.changes_since_with(start, durable).unwrap();
    let mut feed = db.changes_since(start).unwrap();
    // Written (the async one once the WAL got to it), not synced.
    let mut seen = Vec::new();
    for _ in 0..10_000 {
        seen.extend(drain(&mut feed).into_iter().map(|b| b.seq));
        if seen.len() == 2 {
            break;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(seen, vec![a, c]);
    assert!(dfeed.next_batch().unwrap().is_none(), "nothing fsynced yet");
    let e = t.put_with(put(4), w(Durability::FsyncWal)).unwrap();
    let got: Vec<_> = drain(&mut dfeed).into_iter().map(|b| b.seq).collect();
    assert_eq!(got, vec![a, c, e]);
}

/// `next_batch_wait`: a consumer that only waits (never sleeps itself) gets every batch of
/// writers of each durability, in order, including `AsyncWal` ones visible before they are
/// written; with nothing coming, or only batches the filter leaves out, it returns `None`
/// once its time is up, the position moved past what was left out.
#[test]
fn a_waiting_feed_wakes_for_each_write_and_times_out_without_one() {
    let d = tempfile::tempdir().unwrap();
    let db = open(d.path(), small(0));
    schema(&db);
    let start = db.flushed_seq();
    let mut feed = db.changes_since(start).unwrap();
    let mut durable = db
        .changes_since_with(start, ChangeFeedOptions::default().durable_only(true))
        .unwrap();
    assert!(feed
        .next_batch_wait(Duration::from_millis(20))
        .unwrap()
        .is_none());
    let writer = {
        let db = db.clone();
        std::thread::spawn(move || {
            let t = db.table("t").unwrap();
            let mut rng = StdRng::seed_from_u64(7);
            let mut seqs = Vec::new();
            for i in 0..300 {
                let d = [
                    Durability::SyncWal,
                    Durability::AsyncWal,
                    Durability::FsyncWal,
                    Durability::SkipWal,
                ][i % 4];
                let seq = t
                    .put_with(put(i as u64), WriteOptions::durability(d))
                    .unwrap();
                if d != Durability::SkipWal {
                    seqs.push(seq);
                }
                if rng.random_range(0..10) == 0 {
                    std::thread::sleep(Duration::from_millis(1));
                }
            }
            seqs
        })
    };
    let mut got = Vec::new();
    while got.len() < 225 {
        match feed.next_batch_wait(Duration::from_secs(30)).unwrap() {
            Some(b) => got.push(b.seq),
            None => panic!("no batch within 30 s after {} of 225", got.len()),
        }
    }
    let mut want = writer.join().unwrap();
    assert_eq!(got, want);
    // The durable feed gets them once an fsync covers them: AsyncWal and SyncWal puts after
    // the last FsyncWal one wait for the next sync, which this put makes.
    want.push(
        db.table("t")
            .unwrap()
            .put_with(put(1_000), WriteOptions::durability(Durability::FsyncWal))
            .unwrap(),
    );
    let mut got = Vec::new();
    while let Some(b) = durable.next_batch_wait(Duration::from_secs(5)).unwrap() {
        got.push(b.seq);
        if got.len() == want.len() {
            break;
        }
    }
    assert_eq!(got, want);
    // Only batches the filter leaves out: `None` when the time is up, the position past them.
    let mut only_u = db
        .changes_since_with(db.flushed_seq(), ChangeFeedOptions::default().table("ns:u"))
        .unwrap();
    let skipped = db.table("t").unwrap().put(put(999)).unwrap();
    assert!(only_u
        .next_batch_wait(Duration::from_millis(30))
        .unwrap()
        .is_none());
    assert_eq!(only_u.position(), skipped);
}

#[test]
fn a_live_feed_holds_the_segments_it_needs_and_lets_go_when_dropped() {
    let d = tempfile::tempdir().unwrap();
    let db = open(d.path(), small(0));
    schema(&db);
    let t = db.table("t").unwrap();
    for i in 0..50 {
        t.put(put(i)).unwrap();
    }
    db.flush().unwrap();
    let from = db.flushed_seq();
    assert!(
        matches!(db.changes_since(0), Err(Error::ChangesUnavailable { since: 0, oldest }) if oldest <= from),
        "flushed segments are gone without retention"
    );
    let mut feed = db.changes_since(from).unwrap();
    let mut seqs = Vec::new();
    for i in 50..1_000 {
        seqs.push(t.put(put(i)).unwrap());
    }
    db.flush().unwrap();
    let held = wal_segments(d.path()).len();
    assert!(
        held > 10,
        "the feed holds every segment since it began: {held}"
    );
    // Reading moves the pin: segments read past go at the next release.
    let got: Vec<_> = drain(&mut feed).into_iter().map(|b| b.seq).collect();
    assert_eq!(got, seqs);
    assert!(wal_segments(d.path()).len() <= 2);
    let more = t.put(put(5_000)).unwrap();
    db.flush().unwrap();
    assert_eq!(feed.next_batch().unwrap().unwrap().seq, more);
    drop(feed);
    assert_eq!(db.stats().wal.feeds, 0);
    for i in 0..200 {
        t.put(put(i)).unwrap();
    }
    db.flush().unwrap();
    assert!(wal_segments(d.path()).len() <= 2);
    assert_eq!(db.stats().wal.kept_segments, 0);
}

#[test]
fn retained_segments_serve_a_feed_across_reopens_until_the_budget_drops_them() {
    let d = tempfile::tempdir().unwrap();
    let mut seqs = Vec::new();
    {
        let db = open(d.path(), small(u64::MAX));
        schema(&db);
        let t = db.table("t").unwrap();
        for i in 0..600 {
            seqs.push(t.put(put(i)).unwrap());
        }
        db.close().unwrap();
    }
    let db = open(d.path(), small(u64::MAX));
    let t = db.table("t").unwrap();
    for i in 600..700 {
        seqs.push(t.put(put(i)).unwrap());
    }
    db.flush().unwrap();
    let mut feed = db.changes_since(0).unwrap();
    let all = drain(&mut feed);
    // The schema first (table t, namespace ns, table ns:u: one record each), then the puts.
    let schema: Vec<_> = all[..3].iter().map(|b| b.schema.len()).collect();
    assert_eq!(schema, [1, 1, 1]);
    assert!(all[..3].iter().all(|b| b.cells.is_empty()));
    let got: Vec<_> = all[3..].iter().map(|b| b.seq).collect();
    assert_eq!(got, seqs);
    // A consumer that stopped at a position resumes right after it, after a reopen.
    let at = seqs[333];
    drop((feed, t));
    db.close().unwrap();
    let db = open(d.path(), small(u64::MAX));
    let mut feed = db.changes_since(at).unwrap();
    let got: Vec<_> = drain(&mut feed).into_iter().map(|b| b.seq).collect();
    assert_eq!(got, seqs[334..]);
    drop(feed);
    db.close().unwrap();

    // A budget of eight segments: the oldest go at the next release, the rest still serve.
    let db = open(d.path(), small(8 * (16 << 10)));
    let t = db.table("t").unwrap();
    t.put(put(9_999)).unwrap();
    db.flush().unwrap();
    let oldest = match db.changes_since(0) {
        Err(Error::ChangesUnavailable { since: 0, oldest }) => oldest,
        other => panic!("expected ChangesUnavailable, got {other:?}"),
    };
    assert!(oldest > seqs[0] && oldest < seqs[699], "{oldest}");
    let mut feed = db.changes_since(oldest).unwrap();
    let got: Vec<_> = drain(&mut feed).into_iter().map(|b| b.seq).collect();
    let want: Vec<_> = seqs.iter().copied().filter(|s| *s > oldest).collect();
    assert_eq!(got[..want.len()], want[..]);
    assert_eq!(got.len(), want.len() + 1);
}

/// A byte flipped anywhere in a finished segment: the feed hands out a prefix of the true
/// batches, each exactly as written, then stops at `Corruption`, or reads everything when the
/// byte lay outside any record; it never panics and never hands out a wrong batch.
#[test]
fn damage_in_a_finished_segment_is_corruption_never_a_wrong_batch() {
    let d = tempfile::tempdir().unwrap();
    let db = open(d.path(), small(u64::MAX));
    schema(&db);
    let t = db.table("t").unwrap();
    for i in 0..200 {
        t.put(put(i)).unwrap();
    }
    db.flush().unwrap();
    let truth = drain(&mut db.changes_since(0).unwrap());
    let segs = wal_segments(d.path());
    // The second segment: finished, with a LINK before it and a successor after it.
    let seg = &segs[1];
    let records = wal_records(seg);
    assert!(records.len() > 5);
    let end = records.last().unwrap().2 as u64;
    let (mut corrupt, mut whole) = (0, 0);
    for off in (0..end + 16).step_by(3) {
        flip_byte(seg, off);
        let (got, err) = read_to_error(&db);
        flip_byte(seg, off);
        assert_eq!(got[..], truth[..got.len()], "flip at {off}: a wrong batch");
        match err {
            Some(Error::Corruption { .. }) => corrupt += 1,
            Some(e) => panic!("flip at {off}: {e}"),
            None => {
                assert_eq!(
                    got.len(),
                    truth.len(),
                    "flip at {off}: batches lost silently"
                );
                whole += 1;
            }
        }
    }
    assert!(corrupt > 0, "no flip was detected");
    // Only bytes past the data's end marker may go unnoticed.
    assert!(whole <= 4, "{whole} flips went unnoticed");
}

/// A byte flipped in the live segment, below where the writer's data ends: the feed hands out
/// a prefix of the true batches, then stops at `Corruption` at once, or reads everything when
/// the byte lay outside any record. (It used to wait on such damage as on a tail still being
/// written, answering `None`, until the segment was finished.) Never a wrong batch.
#[test]
fn damage_in_the_live_segment_is_corruption_at_once() {
    let d = tempfile::tempdir().unwrap();
    let mut o = small(u64::MAX);
    // Nothing rolls or flushes: every record stays in the live segment.
    o.wal.segment_size = 64 << 20;
    let db = open(d.path(), o);
    schema(&db);
    let t = db.table("t").unwrap();
    for i in 0..100 {
        t.put(put(i)).unwrap();
    }
    let truth = drain(&mut db.changes_since(0).unwrap());
    assert_eq!(truth.len(), 103);
    let (seg, records) = common::newest_wal_with_records(d.path());
    assert_eq!(
        seg,
        *wal_segments(d.path()).last().unwrap(),
        "the records' segment is the live one"
    );
    let end = records.last().unwrap().2 as u64;
    let (mut corrupt, mut whole) = (0, 0);
    for off in (records[0].0 as u64..end).step_by(5) {
        flip_byte(&seg, off);
        // The feed's start is searched by the segments' first records: damage there is found
        // by `changes_since` itself.
        let (got, err) = read_to_error(&db);
        flip_byte(&seg, off);
        assert_eq!(got[..], truth[..got.len()], "flip at {off}: a wrong batch");
        match err {
            Some(Error::Corruption { what, .. }) => {
                assert!(what.contains("live segment"), "flip at {off}: {what}");
                corrupt += 1;
            }
            Some(e) => panic!("flip at {off}: {e}"),
            None => {
                assert_eq!(
                    got.len(),
                    truth.len(),
                    "flip at {off}: the feed waits on damage as on a tail"
                );
                whole += 1;
            }
        }
    }
    assert!(corrupt > 100, "{corrupt} flips detected");
    assert!(whole <= 2, "{whole} flips went unnoticed");
    // Undamaged, the feed still reads to the tail and waits there.
    let mut feed = db.changes_since(0).unwrap();
    assert_eq!(drain(&mut feed), truth);
    t.put(put(100)).unwrap();
    assert_eq!(drain(&mut feed).len(), 1);
}

/// The oldest segment's first record damaged: the feed's start search says `Corruption` (the
/// successor's LINK says the data goes on past it), not that the log starts later.
#[test]
fn damage_at_the_head_of_the_oldest_segment_is_corruption_not_a_shorter_log() {
    let d = tempfile::tempdir().unwrap();
    let db = open(d.path(), small(u64::MAX));
    schema(&db);
    let t = db.table("t").unwrap();
    for i in 0..200 {
        t.put(put(i)).unwrap();
    }
    db.flush().unwrap();
    drop(t);
    db.close().unwrap();
    let segs = wal_segments(d.path());
    let (first, records) = (&segs[0], wal_records(&segs[0]));
    assert!(segs.len() > 2 && records.len() > 1);
    let (start, payload, end) = records[0];
    for off in [start, payload - 1, payload, end - 1] {
        flip_byte(first, off as u64);
        // A fresh process: finished segments' first seqs are remembered once read.
        let db = open(d.path(), small(u64::MAX));
        match db.changes_since(0) {
            Err(Error::Corruption { what, .. }) => {
                assert!(what.contains("LINK"), "flip at {off}: {what}")
            }
            Err(e) => panic!("flip at {off}: {e}"),
            Ok(_) => panic!("flip at {off}: a feed from a damaged segment"),
        }
        db.close().unwrap();
        flip_byte(first, off as u64);
    }
    let db = open(d.path(), small(u64::MAX));
    assert_eq!(drain(&mut db.changes_since(0).unwrap()).len(), 203);
}

/// A feed tailing the live segment while fsynced writers append to it (synced groups go out
/// as direct writes of whole blocks, SPEC.md §16.5) never takes bytes still being written for
/// damage: the check against the writer's published end sees only whole records below it.
#[test]
fn a_feed_tailing_fsynced_writers_sees_no_damage() {
    let d = tempfile::tempdir().unwrap();
    let mut o = small(u64::MAX);
    o.wal.segment_size = 64 << 20;
    o = o.write_buffer_size(64 << 20);
    o.default_durability = cellar::Durability::FsyncWal;
    let db = open(d.path(), o);
    schema(&db);
    let start = db.flushed_seq();
    let mut feed = db.changes_since(start).unwrap();
    let writers: Vec<_> = (0..2u64)
        .map(|w| {
            let t = db.table("t").unwrap();
            std::thread::spawn(move || {
                (0..300)
                    .map(|i| t.put(put(w * 1000 + i)).unwrap())
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let mut got = Vec::new();
    while got.len() < 600 {
        match feed.next_batch().unwrap() {
            Some(b) => got.push(b.seq),
            None => std::thread::yield_now(),
        }
    }
    let mut acked: Vec<_> = writers
        .into_iter()
        .flat_map(|h| h.join().unwrap())
        .collect();
    acked.sort_unstable();
    assert_eq!(got, acked);
    assert!(db.stats().wal.direct_groups > 0, "{:?}", db.stats().wal);
}

/// Writers on three threads (puts, every delete kind, cross-table batches, ties on
/// timestamps) while the memstores flush and segments roll; a consumer tails the feed and
/// applies each batch to a second database. Once caught up, both read alike, every version
/// and marker's effect included.
#[test]
fn a_replica_fed_from_the_feed_reads_like_the_primary() {
    let d = tempfile::tempdir().unwrap();
    let primary = open(&d.path().join("p"), small(0));
    let replica = open(&d.path().join("r"), Options::default());
    schema(&primary);
    schema(&replica);
    let stop = Arc::new(AtomicBool::new(false));
    let last = Arc::new(AtomicU64::new(0));
    let written = Arc::new(AtomicU64::new(0));
    // The feed begins before the writers; its consumer waits until half of their writes are
    // in, flushed and their segments released: only the feed's pin keeps them.
    let mut feed = primary.changes_since(primary.flushed_seq()).unwrap();
    let consumer = {
        let (replica, stop, last, written) =
            (replica.clone(), stop.clone(), last.clone(), written.clone());
        std::thread::spawn(move || {
            while written.load(Ordering::Acquire) < 2_250 {
                std::thread::sleep(Duration::from_millis(1));
            }
            let mut applied = 0u64;
            loop {
                match feed.next_batch().unwrap() {
                    Some(b) => {
                        replica
                            .write(b.to_write_batch(), WriteOptions::default())
                            .unwrap();
                        applied += 1;
                    }
                    None if stop.load(Ordering::Acquire)
                        && feed.position() >= last.load(Ordering::Acquire) =>
                    {
                        return applied
                    }
                    None => std::thread::sleep(Duration::from_micros(200)),
                }
            }
        })
    };
    let writers: Vec<_> = (0..3u64)
        .map(|w| {
            let (db, written) = (primary.clone(), written.clone());
            std::thread::spawn(move || {
                let mut rng = StdRng::seed_from_u64(0xfeed + w);
                let mut top = 0;
                for i in 0..1_500 {
                    let b = common::random_replication_batch(&mut rng, w);
                    top = top.max(db.write(b, WriteOptions::default()).unwrap());
                    written.fetch_add(1, Ordering::Release);
                    // Flushes under the feed, whatever the pace of the background ones.
                    if w == 0 && i % 300 == 299 {
                        db.flush().unwrap();
                    }
                }
                top
            })
        })
        .collect();
    let top = writers
        .into_iter()
        .map(|h| h.join().unwrap())
        .max()
        .unwrap();
    last.store(top, Ordering::Release);
    stop.store(true, Ordering::Release);
    let applied = consumer.join().unwrap();
    assert_eq!(applied, 4_500, "one replica batch per primary write");
    assert!(
        primary.stats().flushes > 3,
        "the test is meant to flush under the feed"
    );
    for table in ["t", "ns:u"] {
        let rows = |db: &Db| -> Vec<cellar::Row> {
            db.table(table)
                .unwrap()
                .scan(Scan::new().all_versions())
                .unwrap()
                .map(|r| r.unwrap())
                .collect()
        };
        let (p, r) = (rows(&primary), rows(&replica));
        assert!(!p.is_empty());
        assert_eq!(p, r, "table {table}");
    }
}

/// Schema changes are in the feed (SPEC.md §16.10), each once, in commit order between the
/// writes: a replica applying the feed with `apply_changes` — every schema change twice, to
/// show it idempotent — has the primary's namespaces, tables and descriptors after each step:
/// created, altered (a family added, one dropped, a setting changed), cloned from a snapshot,
/// restored (data replaced: the replica's copy is emptied), dropped. A table filter keeps that
/// table's changes only.
#[test]
fn schema_changes_are_in_the_feed_and_a_replica_follows_them() {
    use cellar::SchemaChange;
    let d = tempfile::tempdir().unwrap();
    let p = open(&d.path().join("p"), small(0));
    let r = open(&d.path().join("r"), Options::default());
    let mut feed = p.changes_since(p.flushed_seq()).unwrap();
    let mut only_t = p
        .changes_since_with(p.flushed_seq(), ChangeFeedOptions::default().table("ns:t"))
        .unwrap();
    let rows = |db: &Db, t: &str| -> Vec<cellar::Row> {
        db.table(t)
            .unwrap()
            .scan(Scan::new().all_versions())
            .unwrap()
            .map(|r| r.unwrap())
            .collect()
    };
    let mut follow = |step: &str| {
        while let Some(b) = feed.next_batch().unwrap() {
            r.apply_changes(&b, WriteOptions::default()).unwrap();
            for c in &b.schema {
                r.apply_schema_change(c).unwrap();
            }
        }
        assert_eq!(p.list_namespaces(), r.list_namespaces(), "{step}");
        assert_eq!(p.list_tables(), r.list_tables(), "{step}");
        for t in p.list_tables() {
            let t = t.to_string();
            assert_eq!(
                p.describe(&t).unwrap(),
                r.describe(&t).unwrap(),
                "{step}: {t}"
            );
        }
    };
    p.create_namespace("ns").unwrap();
    p.create_table(
        TableDescriptor::new("ns:t")
            .family(FamilyDescriptor::new("a").max_versions(3))
            .family(FamilyDescriptor::new("b")),
    )
    .unwrap();
    let t = p.table("ns:t").unwrap();
    for i in 0..20 {
        t.put(
            Put::new(format!("r{i:02}"))
                .add_at("a", "q", 5, "x")
                .add_at("b", "z", 5, "y"),
        )
        .unwrap();
    }
    follow("create");
    assert_eq!(rows(&p, "ns:t"), rows(&r, "ns:t"));

    p.alter_table(
        TableDescriptor::new("ns:t")
            .family(FamilyDescriptor::new("a").max_versions(5))
            .family(FamilyDescriptor::new("c")),
    )
    .unwrap();
    t.put(Put::new("r00").add_at("c", "n", 9, "new")).unwrap();
    follow("alter");
    assert_eq!(rows(&p, "ns:t"), rows(&r, "ns:t"));

    p.snapshot_table("ns:t", "s1").unwrap();
    p.clone_table_snapshot("s1", "ns:copy").unwrap();
    follow("clone");
    assert!(
        rows(&r, "ns:copy").is_empty(),
        "a clone's data is not in the feed"
    );

    t.put(Put::new("r99").add_at("a", "q", 1, "after")).unwrap();
    p.restore_table_snapshot("s1").unwrap();
    follow("restore");
    assert!(
        rows(&r, "ns:t").is_empty(),
        "a replaced table is emptied on the replica"
    );

    p.drop_table("ns:copy").unwrap();
    p.drop_table("ns:t").unwrap();
    p.drop_namespace("ns").unwrap();
    follow("drop");
    assert!(r.list_tables().is_empty());

    let mut kinds = Vec::new();
    while let Some(b) = only_t.next_batch().unwrap() {
        for c in b.schema {
            assert_eq!(c.table().map(|n| n.to_string()).as_deref(), Some("ns:t"));
            kinds.push(match c {
                SchemaChange::Table { data_replaced, .. } => {
                    if data_replaced {
                        "replaced"
                    } else {
                        "table"
                    }
                }
                SchemaChange::TableDropped { .. } => "dropped",
                other => panic!("{other:?}"),
            });
        }
    }
    assert_eq!(kinds, ["table", "table", "replaced", "dropped"]);
}

/// A schema record is fsynced before the call returns: after a power loss (only synced data
/// survives) the feed still has every schema change whose call returned, in order.
#[test]
fn schema_changes_survive_a_power_loss_once_their_call_returned() {
    use cellar::fs::{CrashPolicy, SimFs};
    use cellar::SchemaChange;
    use std::path::Path;
    let fs = SimFs::new();
    let opts = |fs: &SimFs| {
        let mut o = small(u64::MAX);
        o.fs = Arc::new(fs.clone());
        o
    };
    let db = Db::open(Path::new("/db"), opts(&fs)).unwrap();
    db.create_namespace("ns").unwrap();
    db.create_table(TableDescriptor::new("ns:t").family(FamilyDescriptor::new("a")))
        .unwrap();
    db.drop_table("ns:t").unwrap();
    let crashed = fs.crash(CrashPolicy::DropAll, 1);
    let db = Db::open(Path::new("/db"), opts(&crashed)).unwrap();
    let mut feed = db.changes_since(0).unwrap();
    let got: Vec<SchemaChange> = drain(&mut feed)
        .into_iter()
        .flat_map(|b| b.schema)
        .collect();
    let t = cellar::TableName::parse("ns:t").unwrap();
    assert!(
        matches!(&got[..], [
            SchemaChange::Namespace { name },
            SchemaChange::Table { descriptor, data_replaced: false },
            SchemaChange::TableDropped { name: dropped },
        ] if name == "ns" && descriptor.name == t && *dropped == t),
        "{got:?}"
    );
}

/// A schema change whose manifest edit is durable but whose record never reached the log (the
/// append failed, or the process died between the two) is still in the feed after the next
/// open: the edit carries the record, and recovery appends it once (SPEC.md §16.10).
#[test]
fn a_schema_record_lost_after_its_edit_is_appended_at_the_next_open() {
    use cellar::fs::{CrashPolicy, Fault, FaultFs, OpKind, Rule, SimFs};
    use cellar::SchemaChange;
    use std::path::Path;
    let opts = |fs: Arc<dyn cellar::fs::FileSystem>| {
        let mut o = small(u64::MAX);
        o.fs = fs;
        o
    };
    let sim = SimFs::new();
    let fs = FaultFs::new(sim.clone());
    let db = Db::open(Path::new("/db"), opts(Arc::new(fs.clone()))).unwrap();
    db.create_table(TableDescriptor::new("t").family(FamilyDescriptor::new("a").max_versions(1)))
        .unwrap();
    let t = db.table("t").unwrap();
    t.put_with(put(1), WriteOptions::durability(Durability::FsyncWal))
        .unwrap();
    // Every write to the log fails from here: the alter's edit is made, its record is not.
    fs.add_rule(
        Rule::on(OpKind::Write, Fault::Eio)
            .path("/wal/")
            .persistent(),
    );
    db.alter_table(TableDescriptor::new("t").family(FamilyDescriptor::new("a").max_versions(7)))
        .unwrap();
    assert!(db.poisoned().is_some(), "the failed append poisons");
    let alters = |db: &Db| -> Vec<u32> {
        let mut feed = db.changes_since(0).unwrap();
        drain(&mut feed)
            .into_iter()
            .flat_map(|b| b.schema)
            .filter_map(|c| match c {
                SchemaChange::Table { descriptor, .. } => Some(descriptor.families[0].max_versions),
                _ => None,
            })
            .collect()
    };
    // The process dies: what was not synced is gone, the edit (synced) stays.
    let crashed = sim.crash(CrashPolicy::DropAll, 3);
    drop((t, db));
    let db = Db::open(Path::new("/db"), opts(Arc::new(crashed.clone()))).unwrap();
    assert!(db.stats().recovery.schema_record_relogged);
    assert_eq!(db.describe("t").unwrap().families[0].max_versions, 7);
    // The creation, then the alter, after the write that came before it.
    assert_eq!(alters(&db), [1, 7]);
    let mut feed = db.changes_since(0).unwrap();
    let batches = drain(&mut feed);
    let put_at = batches.iter().position(|b| !b.cells.is_empty()).unwrap();
    let last = batches.last().unwrap();
    assert!(
        put_at < batches.len() - 1 && last.seq > batches[put_at].seq,
        "{batches:?}"
    );
    assert!(
        matches!(&last.schema[..], [SchemaChange::Table { descriptor, .. }] if descriptor.families[0].max_versions == 7),
        "{batches:?}"
    );
    // Appended once: not again at the next open, nor once the log that holds it is gone.
    drop((feed, db));
    let db = Db::open(Path::new("/db"), opts(Arc::new(crashed.clone()))).unwrap();
    assert!(!db.stats().recovery.schema_record_relogged);
    assert_eq!(alters(&db), [1, 7]);
    drop(db);
    let no_retain = || {
        let mut o = small(0);
        o.fs = Arc::new(crashed.clone());
        o
    };
    let db = Db::open(Path::new("/db"), no_retain()).unwrap();
    db.table("t").unwrap().put(put(2)).unwrap();
    db.flush().unwrap();
    assert!(
        matches!(db.changes_since(0), Err(Error::ChangesUnavailable { .. })),
        "the segments are gone"
    );
    drop(db);
    let db = Db::open(Path::new("/db"), no_retain()).unwrap();
    assert!(!db.stats().recovery.schema_record_relogged);
    assert_eq!(db.describe("t").unwrap().families[0].max_versions, 7);
}
