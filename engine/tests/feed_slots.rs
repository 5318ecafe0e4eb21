//! Feed slots (`Db::create_feed_slot`, SPEC.md §16.9): a named change-feed position kept across
//! reopens that holds the WAL its consumer has yet to acknowledge — no more, no less; a gap of
//! unlogged seqs that refuses a plain feed does not lose a slot; a slot past
//! `slot_max_bytes` is lost (durably) and lets go; refusals, damage and failed writes of the
//! slots file; and a replica fed through a slot across restarts of both sides.

mod common;

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use cellar::wal::WalOptions;
use cellar::{
    ChangeFeedOptions, Db, Durability, Error, FamilyDescriptor, FeedSlotInfo, Options, Put, Scan,
    TableDescriptor, WriteOptions, FEED_SLOTS,
};
use common::{flip_byte, open, wal_segments};
use rand::{rngs::StdRng, Rng, SeedableRng};

const SEG: u64 = 16 << 10;

/// Small segments and memstores, so a few hundred writes roll segments and flush; no budget.
fn small(slot_max_bytes: u64) -> Options {
    let mut o = Options {
        wal: WalOptions {
            segment_size: SEG,
            slot_max_bytes,
            ..WalOptions::default()
        },
        ..Options::default()
    }
    .write_buffer_size(64 << 10);
    o.compaction.threads = 0;
    o
}

fn schema(db: &Db) {
    db.create_table(TableDescriptor::new("t").family(FamilyDescriptor::new("a").max_versions(10)))
        .unwrap();
}

fn put(i: u64) -> Put {
    Put::new(format!("r{i:05}")).add_at("a", "q", i, format!("{i:0>120}"))
}

/// Seqs of every batch the slot's feed has now.
fn drain_slot(db: &Db, name: &str) -> Vec<u64> {
    let mut feed = db.feed_slot_changes(name, Default::default()).unwrap();
    let mut out = Vec::new();
    while let Some(b) = feed.next_batch().unwrap() {
        out.push(b.seq);
    }
    out
}

fn slot(db: &Db, name: &str) -> FeedSlotInfo {
    db.feed_slots()
        .unwrap()
        .into_iter()
        .find(|s| s.name == name)
        .unwrap_or_else(|| panic!("no slot {name}"))
}

#[test]
fn a_slot_holds_the_log_across_reopens_until_its_consumer_acks() {
    let d = tempfile::tempdir().unwrap();
    let mut seqs = Vec::new();
    {
        let db = open(d.path(), small(0));
        schema(&db);
        db.create_feed_slot("replica", db.flushed_seq()).unwrap();
        let t = db.table("t").unwrap();
        for i in 0..1_500 {
            seqs.push(t.put(put(i)).unwrap());
        }
        db.flush().unwrap();
        // Without the slot every segment but the live one would be gone (the flush released
        // them all; the WAL rolls every 16 KiB).
        assert!(wal_segments(d.path()).len() > 10);
        db.close().unwrap();
    }
    let db = open(d.path(), small(0));
    let t = db.table("t").unwrap();
    for i in 1_500..1_700 {
        seqs.push(t.put(put(i)).unwrap());
    }
    db.flush().unwrap();
    assert_eq!(drain_slot(&db, "replica"), seqs, "every batch, in order");
    // Reading moves nothing: the same batches again.
    assert_eq!(drain_slot(&db, "replica"), seqs);
    let before = slot(&db, "replica");
    assert_eq!(before.acked, seqs[0] - 1);
    assert!(!before.lost);
    let segments_before = wal_segments(d.path()).len();
    assert!(before.held_bytes >= (segments_before as u64 - 1) * SEG);

    db.ack_feed_slot("replica", seqs[999]).unwrap();
    let after = slot(&db, "replica");
    let stats = db.stats();
    assert_eq!(stats.feed_slots, std::slice::from_ref(&after));
    let text = stats.prometheus();
    assert!(
        text.contains(&format!(
            "cellar_feed_slot_acked_seq{{slot=\"replica\"}} {}\n",
            seqs[999]
        )),
        "{text}"
    );
    assert!(text.contains(&format!(
        "cellar_feed_slot_held_bytes{{slot=\"replica\"}} {}\n",
        after.held_bytes
    )));
    assert!(db.stats_report().contains("Feed slot replica: acked seq"));
    assert_eq!(after.acked, seqs[999]);
    assert!(after.segment > before.segment);
    assert!(after.held_bytes < before.held_bytes);
    assert!(
        wal_segments(d.path()).len() < segments_before,
        "acked segments go"
    );
    // A plain feed from the start finds them gone; the slot's feed starts after the ack.
    assert!(matches!(
        db.changes_since(0),
        Err(Error::ChangesUnavailable { .. })
    ));
    assert_eq!(drain_slot(&db, "replica"), seqs[1_000..]);
    // An ack at or below the slot's position changes nothing.
    db.ack_feed_slot("replica", seqs[10]).unwrap();
    assert_eq!(slot(&db, "replica"), after);
    drop(t);
    db.close().unwrap();

    let db = open(d.path(), small(0));
    assert_eq!(slot(&db, "replica").acked, seqs[999]);
    assert_eq!(drain_slot(&db, "replica"), seqs[1_000..]);
    let last = *seqs.last().unwrap();
    db.ack_feed_slot("replica", last).unwrap();
    // Caught up: new writes come next.
    let more = db.table("t").unwrap().put(put(9_000)).unwrap();
    assert_eq!(drain_slot(&db, "replica"), [more]);
    // Acked up to the live segment's first batch: the slot holds that segment alone.
    db.ack_feed_slot("replica", more).unwrap();
    db.flush().unwrap();
    assert_eq!(wal_segments(d.path()).len(), 2);
    db.drop_feed_slot("replica").unwrap();
    assert!(db.feed_slots().unwrap().is_empty());
    db.flush().unwrap();
    assert_eq!(wal_segments(d.path()).len(), 1);
}

/// Seqs given without WAL records (`SkipWal`, ingest) after a position: a plain feed from
/// there is refused (it cannot tell the gap from a removed segment), a slot at that position
/// is not (its pin proves nothing after it was removed).
#[test]
fn a_gap_of_unlogged_seqs_does_not_lose_a_slot() {
    let d = tempfile::tempdir().unwrap();
    let db = open(d.path(), small(0));
    schema(&db);
    let t = db.table("t").unwrap();
    t.put(put(0)).unwrap();
    db.flush().unwrap();
    let at = db.flushed_seq();
    db.create_feed_slot("s", at).unwrap();
    for i in 1..6 {
        t.put_with(put(i), WriteOptions::durability(Durability::SkipWal))
            .unwrap();
    }
    db.flush().unwrap();
    let logged = t.put(put(6)).unwrap();
    assert!(logged > at + 1);
    assert!(matches!(
        db.changes_since(at),
        Err(Error::ChangesUnavailable { .. })
    ));
    assert_eq!(drain_slot(&db, "s"), [logged]);
    drop(t);
    db.close().unwrap();
    let db = open(d.path(), small(0));
    assert_eq!(drain_slot(&db, "s"), [logged]);
}

#[test]
fn a_slot_past_its_byte_limit_is_lost_for_good_and_lets_go() {
    let d = tempfile::tempdir().unwrap();
    let limit = 4 * SEG;
    let db = open(d.path(), small(limit));
    schema(&db);
    let start = db.flushed_seq();
    db.create_feed_slot("lagging", start).unwrap();
    db.create_feed_slot("keeping-up", start).unwrap();
    let t = db.table("t").unwrap();
    let mut last = 0;
    for i in 0..2_000 {
        last = t.put(put(i)).unwrap();
        if i % 100 == 99 {
            db.ack_feed_slot("keeping-up", last).unwrap();
        }
    }
    db.flush().unwrap();
    let lagging = slot(&db, "lagging");
    assert!(lagging.lost);
    assert_eq!(lagging.held_bytes, 0);
    let keeping = slot(&db, "keeping-up");
    assert!(!keeping.lost);
    assert!(keeping.held_bytes <= limit, "{}", keeping.held_bytes);
    assert!(wal_segments(d.path()).len() as u64 <= limit / SEG + 2);
    for r in [
        db.feed_slot_changes("lagging", Default::default())
            .map(|_| ()),
        db.ack_feed_slot("lagging", last),
    ] {
        assert!(matches!(r, Err(Error::FeedSlotLost(ref n)) if n == "lagging"));
    }
    let next = t.put(put(5_000)).unwrap();
    assert_eq!(drain_slot(&db, "keeping-up"), [next]);
    drop(t);
    db.close().unwrap();
    // Lost is recorded: still lost after a reopen, until dropped and made anew.
    let db = open(d.path(), small(limit));
    assert!(slot(&db, "lagging").lost);
    assert!(!slot(&db, "keeping-up").lost);
    db.drop_feed_slot("lagging").unwrap();
    db.create_feed_slot("lagging", db.flushed_seq()).unwrap();
    assert!(drain_slot(&db, "lagging").is_empty());
}

#[test]
fn bad_requests_are_refused_and_change_nothing() {
    let d = tempfile::tempdir().unwrap();
    let db = open(d.path(), small(0));
    schema(&db);
    let seq = db.table("t").unwrap().put(put(1)).unwrap();
    for bad in ["", ".x", "-x", "a b", "a/b", &"x".repeat(300)] {
        assert!(
            matches!(db.create_feed_slot(bad, 0), Err(Error::InvalidArgument(_))),
            "{bad:?}"
        );
    }
    assert!(matches!(
        db.create_feed_slot("s", seq + 1),
        Err(Error::InvalidArgument(_))
    ));
    assert!(!d.path().join(FEED_SLOTS).exists(), "nothing written yet");
    db.create_feed_slot("s", 0).unwrap();
    assert!(matches!(
        db.create_feed_slot("s", 0),
        Err(Error::FeedSlotExists(_))
    ));
    for r in [
        db.feed_slot_changes("nope", Default::default()).map(|_| ()),
        db.ack_feed_slot("nope", 1),
        db.drop_feed_slot("nope"),
    ] {
        assert!(matches!(r, Err(Error::FeedSlotNotFound(ref n)) if n == "nope"));
    }
    assert!(matches!(
        db.ack_feed_slot("s", seq + 1),
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        db.feed_slot_changes("s", ChangeFeedOptions::default().rows("b", "a")),
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        db.feed_slot_changes("s", ChangeFeedOptions::default().table("bad name!")),
        Err(Error::InvalidArgument(_))
    ));
    assert_eq!(slot(&db, "s").acked, 0);
    // The table's creation (a schema record, seq 1), then the put.
    assert_eq!(drain_slot(&db, "s"), [1, seq]);

    // Flushed away before the slot was made: refused as a plain feed is.
    db.flush().unwrap();
    db.table("t").unwrap().put(put(2)).unwrap();
    db.drop_feed_slot("s").unwrap();
    db.flush().unwrap();
    assert!(matches!(
        db.create_feed_slot("late", 0),
        Err(Error::ChangesUnavailable { since: 0, .. })
    ));
    assert!(db.feed_slots().unwrap().is_empty());
}

/// A damaged slots file fails the open (a silent loss of slots would let their segments go);
/// a slot whose segment vanished while the database was closed is marked lost, and the
/// database opens.
#[test]
fn a_damaged_slots_file_fails_the_open_and_a_missing_segment_loses_the_slot() {
    let d = tempfile::tempdir().unwrap();
    {
        let db = open(d.path(), small(0));
        schema(&db);
        let t = db.table("t").unwrap();
        t.put(put(0)).unwrap();
        db.flush().unwrap();
        db.create_feed_slot("a", db.flushed_seq()).unwrap();
        for i in 1..400 {
            t.put(put(i)).unwrap();
        }
        db.flush().unwrap();
        db.create_feed_slot("b", db.flushed_seq()).unwrap();
        drop(t);
        db.close().unwrap();
    }
    let file = d.path().join(FEED_SLOTS);
    let good = std::fs::read(&file).unwrap();
    for at in [0, good.len() as u64 / 2, good.len() as u64 - 1] {
        flip_byte(&file, at);
        match Db::open(d.path(), small(0)) {
            Err(Error::Corruption { file: f, .. }) => assert_eq!(f, file),
            other => panic!("flip at {at}: expected Corruption, got {other:?}"),
        }
        std::fs::write(&file, &good).unwrap();
    }
    std::fs::write(&file, &good[..good.len() - 3]).unwrap();
    assert!(matches!(
        Db::open(d.path(), small(0)),
        Err(Error::Corruption { .. })
    ));
    std::fs::write(&file, &good).unwrap();

    let a = {
        let db = open(d.path(), small(0));
        let a = slot(&db, "a");
        db.close().unwrap();
        a
    };
    let gone = wal_segments(d.path())
        .into_iter()
        .find(|p| {
            cellar::wal::parse_segment_name(p.file_name().unwrap().to_str().unwrap())
                .map(|(n, _)| n)
                == Some(a.segment)
        })
        .unwrap();
    std::fs::remove_file(gone).unwrap();
    let db = open(d.path(), small(0));
    assert!(slot(&db, "a").lost);
    assert!(!slot(&db, "b").lost);
    assert!(matches!(
        db.feed_slot_changes("a", Default::default()),
        Err(Error::FeedSlotLost(_))
    ));
    db.close().unwrap();
    let db = open(d.path(), small(0));
    assert!(slot(&db, "a").lost, "recorded at the open that found it");
}

/// Every failure of the slots file's own operations (EIO, a full disk; creating, writing,
/// syncing, renaming it, syncing the directory) fails the create, ack or drop with a typed
/// error, leaves the slots as they were, and the same call then succeeds.
#[test]
fn a_failed_slots_write_changes_nothing_and_the_next_one_works() {
    use cellar::fs::{Fault, FaultFs, OpKind, Rule, SimFs};
    let ffs = FaultFs::new(SimFs::new());
    let mut o = small(0);
    o.fs = Arc::new(ffs.clone());
    let db = Db::open(Path::new("/db"), o).unwrap();
    schema(&db);
    db.create_feed_slot("kept", db.flushed_seq()).unwrap();
    let t = db.table("t").unwrap();
    let mut last = 0;
    for i in 0..600 {
        last = t.put(put(i)).unwrap();
    }
    db.flush().unwrap();
    let before = db.feed_slots().unwrap();
    let mut failed = 0;
    for op in [
        OpKind::Create,
        OpKind::Write,
        OpKind::SyncData,
        OpKind::Rename,
        OpKind::SyncDir,
    ] {
        for fault in [Fault::Eio, Fault::NoSpace] {
            let path = if op == OpKind::SyncDir {
                "/db"
            } else {
                "FEED_SLOTS"
            };
            for call in 0..3 {
                ffs.add_rule(Rule::on(op, fault).path(path));
                let r = match call {
                    0 => db.create_feed_slot("new", 0),
                    1 => db.ack_feed_slot("kept", last),
                    _ => db.drop_feed_slot("kept"),
                };
                ffs.clear_rules();
                let e = r.expect_err("the call saw its fault");
                let want = match fault {
                    Fault::NoSpace => cellar::PoisonCause::NoSpace,
                    _ => cellar::PoisonCause::Io,
                };
                assert_eq!(e.poison_cause(), want, "{op:?} {fault:?} call {call}: {e}");
                assert_eq!(db.feed_slots().unwrap(), before, "{op:?} {fault:?} {call}");
                failed += 1;
            }
        }
    }
    assert_eq!(failed, 30);
    assert_eq!(
        drain_slot(&db, "kept").len(),
        600,
        "the slot's log is whole"
    );
    db.ack_feed_slot("kept", last).unwrap();
    db.create_feed_slot("new", last).unwrap();
    assert_eq!(slot(&db, "kept").acked, last);
    db.drop_feed_slot("kept").unwrap();
    assert_eq!(db.feed_slots().unwrap().len(), 1);
    // Writes were never affected.
    t.put(put(7_000)).unwrap();
}

/// A replica fed through a slot while three writers run and the primary flushes; the consumer
/// restarts every few hundred batches (re-reading what it had not acknowledged, as a crashed
/// consumer would: delivery is at least once), and midway both databases close and reopen.
/// The consumer applies each batch exactly once by storing the last seq applied with the data
/// (re-applying is not harmless: a marker a compaction purged no longer masks an old put
/// applied again). The replica ends up reading exactly like the primary.
#[test]
fn a_replica_fed_through_a_slot_across_restarts_reads_like_the_primary() {
    let d = tempfile::tempdir().unwrap();
    let (pdir, rdir) = (d.path().join("p"), d.path().join("r"));
    let desc = || {
        TableDescriptor::new("t")
            .family(FamilyDescriptor::new("a").max_versions(10_000))
            .family(FamilyDescriptor::new("b").max_versions(10_000))
    };
    let schema = |db: &Db| {
        db.create_table(desc()).unwrap();
        db.create_namespace("ns").unwrap();
        db.create_table(
            TableDescriptor::new("ns:u").family(FamilyDescriptor::new("c").max_versions(10_000)),
        )
        .unwrap();
    };
    {
        let p = open(&pdir, small(0));
        schema(&p);
        p.create_feed_slot("replica", p.flushed_seq()).unwrap();
        let r = open(&rdir, Options::default());
        schema(&r);
        r.create_table(TableDescriptor::new("pos").family(FamilyDescriptor::new("p")))
            .unwrap();
    }
    let mut rng = StdRng::seed_from_u64(0x5107);
    for round in 0..2u64 {
        let primary = open(&pdir, small(0));
        let replica = open(&rdir, Options::default());
        let stop = Arc::new(AtomicBool::new(false));
        let last = Arc::new(AtomicU64::new(0));
        let consumer = {
            let (primary, replica, stop, last) =
                (primary.clone(), replica.clone(), stop.clone(), last.clone());
            let restart_every = rng.random_range(150..400);
            std::thread::spawn(move || {
                let mut applied = 0u64;
                'restart: loop {
                    // What a restarted consumer knows: the seq stored with the data it
                    // applied last. Batches up to it come again (acks lag), and are skipped.
                    let done = replica
                        .table("pos")
                        .unwrap()
                        .get(&cellar::Get::new("pos"))
                        .unwrap()
                        .and_then(|r| r.value("p", "seq").map(|v| v.to_vec()))
                        .map_or(0, |v| u64::from_be_bytes(v.try_into().unwrap()));
                    let mut feed = primary
                        .feed_slot_changes("replica", Default::default())
                        .unwrap();
                    let mut n = 0;
                    loop {
                        match feed.next_batch_wait(Duration::from_millis(20)).unwrap() {
                            Some(b) if b.seq <= done => {}
                            Some(b) => {
                                let batch = b.to_write_batch().put(
                                    "pos",
                                    Put::new("pos").add("p", "seq", b.seq.to_be_bytes()),
                                );
                                replica.write(batch, WriteOptions::default()).unwrap();
                                applied += 1;
                                n += 1;
                                // Acknowledge now and then, not at every batch; restart
                                // between acks so some batches are read twice.
                                if n % 97 == 0 {
                                    primary.ack_feed_slot("replica", b.seq).unwrap();
                                }
                                if n == restart_every {
                                    continue 'restart;
                                }
                            }
                            None if stop.load(Ordering::Acquire)
                                && feed.position() >= last.load(Ordering::Acquire) =>
                            {
                                primary.ack_feed_slot("replica", feed.position()).unwrap();
                                return applied;
                            }
                            None => {}
                        }
                    }
                }
            })
        };
        let writers: Vec<_> = (0..3u64)
            .map(|w| {
                let db = primary.clone();
                std::thread::spawn(move || {
                    let mut rng = StdRng::seed_from_u64(round * 10 + w);
                    let mut top = 0;
                    for i in 0..1_000 {
                        let b = common::random_replication_batch(&mut rng, w);
                        top = top.max(db.write(b, WriteOptions::default()).unwrap());
                        // Flushes under the consumer, whatever the pace of the background
                        // ones: segments are released while the slot holds them.
                        if w == 0 && i % 250 == 249 {
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
        assert_eq!(applied, 3_000, "round {round}: each batch applied once");
        assert!(primary.stats().flushes >= 4);
        assert_eq!(slot(&primary, "replica").acked, top);
        primary.close().unwrap();
        replica.close().unwrap();
    }
    let rows = |dir: &Path| -> Vec<cellar::Row> {
        let db = open(dir, Options::default());
        ["t", "ns:u"]
            .iter()
            .flat_map(|t| {
                db.table(t)
                    .unwrap()
                    .scan(Scan::new().all_versions())
                    .unwrap()
                    .map(|r| r.unwrap())
                    .collect::<Vec<_>>()
            })
            .collect()
    };
    let (p, r) = (rows(&pdir), rows(&rdir));
    assert!(p.iter().any(|r| r.cells.iter().any(|c| c.family == "c")));
    let cells = |rows: &[cellar::Row]| rows.iter().map(|r| r.cells.len()).sum::<usize>();
    // Not assert_eq: the rows' debug output would bury the message.
    assert!(
        p == r,
        "the replica differs: {} rows of {} cells, the primary's {} of {}",
        r.len(),
        cells(&r),
        p.len(),
        cells(&p)
    );
}

/// Power loss (every crash policy of `SimFs`) after each step of a workload of fsynced puts,
/// flushes and acks: the slot is there, at the last ack that returned (an ack is durable when
/// it returns), never lost, and its feed holds every fsynced put after that ack, in order —
/// nothing it needed was removed before the ack that let it go was durable.
#[test]
fn a_slot_survives_power_loss_at_every_step() {
    use cellar::fs::{CrashPolicy, SimFs};
    let fs = SimFs::new();
    let opts = |fs: &SimFs| {
        let mut o = small(0);
        o.fs = Arc::new(fs.clone());
        o
    };
    let dir = Path::new("/db");
    let db = Db::open(dir, opts(&fs)).unwrap();
    schema(&db);
    let t = db.table("t").unwrap();
    let mut acked = db.flushed_seq();
    db.create_feed_slot("s", acked).unwrap();
    let mut fsynced: Vec<u64> = Vec::new();
    let policies = [
        CrashPolicy::DropAll,
        CrashPolicy::KeepRandomPrefix,
        CrashPolicy::Tear { sector: 512 },
        CrashPolicy::Garble { sector: 512 },
    ];
    let mut checked = 0;
    for step in 0..40u64 {
        match step % 5 {
            0..=2 => {
                for i in 0..40 {
                    let seq = t
                        .put_with(
                            put(step * 100 + i),
                            WriteOptions::durability(Durability::FsyncWal),
                        )
                        .unwrap();
                    fsynced.push(seq);
                }
            }
            3 => db.flush().unwrap(),
            _ => {
                // A consumer two thirds of the way through.
                let to = fsynced[fsynced.len() * 2 / 3];
                if to > acked {
                    db.ack_feed_slot("s", to).unwrap();
                    acked = to;
                }
            }
        }
        for (k, policy) in policies.iter().enumerate() {
            let crashed = fs.crash(*policy, step * 10 + k as u64);
            let db2 = Db::open(dir, opts(&crashed))
                .unwrap_or_else(|e| panic!("step {step} {policy:?}: open: {e}"));
            let s = slot(&db2, "s");
            assert!(!s.lost, "step {step} {policy:?}");
            assert_eq!(s.acked, acked, "step {step} {policy:?}");
            let got = drain_slot(&db2, "s");
            let want: Vec<u64> = fsynced.iter().copied().filter(|&q| q > acked).collect();
            assert_eq!(
                got, want,
                "step {step} {policy:?}: the slot's feed after seq {acked}"
            );
            db2.close().unwrap();
            checked += 1;
        }
    }
    assert_eq!(checked, 160);
    assert!(db.stats().flushes >= 8);
}
