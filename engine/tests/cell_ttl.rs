//! Per-cell TTL (HBase's `Put.setTTL`, MISSION.md rule 7, SPEC.md §13 rule 7): a cell expires its TTL
//! after its timestamp, can only shorten the family TTL, is not kept by MIN_VERSIONS, survives
//! flush, reopen and compaction as long as it lives, and is dropped by compaction once expired.

use std::sync::Arc;
use std::time::Duration;

use cellar::types::now_ms;
use cellar::{Db, FamilyDescriptor, Get, ManualClock, Options, Put, Scan, TableDescriptor};

fn open(dir: &std::path::Path, fam: FamilyDescriptor) -> Db {
    open_with(dir, fam, None)
}

/// `open` on `clock` when given (background compaction off either way).
fn open_with(dir: &std::path::Path, fam: FamilyDescriptor, clock: Option<Arc<ManualClock>>) -> Db {
    let mut o = Options::default();
    o.compaction.threads = 0;
    if let Some(c) = clock {
        o.clock = c;
    }
    let db = Db::open(dir, o).unwrap();
    if !db.table_exists("t").unwrap() {
        db.create_table(TableDescriptor::new("t").family(fam))
            .unwrap();
    }
    db
}

fn value(db: &Db, row: &str) -> Option<Vec<u8>> {
    db.table("t")
        .unwrap()
        .get(&Get::new(row).column("f", "q"))
        .unwrap()
        .and_then(|r| r.value("f", "q").map(|v| v.to_vec()))
}

#[test]
fn a_cell_expires_after_its_own_ttl_and_compaction_drops_it() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path(), FamilyDescriptor::new("f").max_versions(3));
    let t = db.table("t").unwrap();
    let now = now_ms();
    // Timestamps in the past: one already past a 1 s TTL, one well within a 1 h TTL.
    t.put(
        Put::new("old")
            .add_at("f", "q", now - 5_000, "x")
            .ttl(Duration::from_secs(1)),
    )
    .unwrap();
    t.put(
        Put::new("young")
            .add_at("f", "q", now, "y")
            .ttl(Duration::from_secs(3600)),
    )
    .unwrap();
    t.put(Put::new("plain").add_at("f", "q", now - 5_000, "p"))
        .unwrap();
    assert_eq!(value(&db, "old"), None);
    assert_eq!(value(&db, "young").as_deref(), Some(&b"y"[..]));
    assert_eq!(value(&db, "plain").as_deref(), Some(&b"p"[..]));
    // Through a flush (the tag goes to the file) and a reopen.
    db.flush().unwrap();
    drop(t);
    drop(db);
    let db = open(dir.path(), FamilyDescriptor::new("f"));
    assert_eq!(value(&db, "old"), None);
    assert_eq!(value(&db, "young").as_deref(), Some(&b"y"[..]));
    // The flush already dropped the expired cell; raw scans show what is stored.
    let raw: Vec<_> = db
        .table("t")
        .unwrap()
        .scan(Scan::new().raw())
        .unwrap()
        .map(|r| r.unwrap().key)
        .collect();
    assert_eq!(raw, vec![b"plain".to_vec(), b"young".to_vec()]);
    db.major_compact("t", None).unwrap();
    assert_eq!(value(&db, "young").as_deref(), Some(&b"y"[..]));
    assert_eq!(value(&db, "plain").as_deref(), Some(&b"p"[..]));
}

#[test]
fn a_cell_ttl_shortens_but_never_extends_the_family_ttl() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(
        dir.path(),
        FamilyDescriptor::new("f").ttl(Duration::from_secs(10)),
    );
    let t = db.table("t").unwrap();
    let now = now_ms();
    // 60 s old with a 1 h cell TTL: the family's 10 s still expires it.
    t.put(
        Put::new("a")
            .add_at("f", "q", now - 60_000, "a")
            .ttl(Duration::from_secs(3600)),
    )
    .unwrap();
    // 5 s old with a 1 s cell TTL: gone although the family would keep it.
    t.put(
        Put::new("b")
            .add_at("f", "q", now - 5_000, "b")
            .ttl(Duration::from_secs(1)),
    )
    .unwrap();
    // 5 s old, no cell TTL: the family keeps it.
    t.put(Put::new("c").add_at("f", "q", now - 5_000, "c"))
        .unwrap();
    assert_eq!(value(&db, "a"), None);
    assert_eq!(value(&db, "b"), None);
    assert_eq!(value(&db, "c").as_deref(), Some(&b"c"[..]));
}

#[test]
fn min_versions_do_not_keep_a_cell_past_its_own_ttl_and_an_older_write_shows() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(
        dir.path(),
        FamilyDescriptor::new("f")
            .max_versions(3)
            .min_versions(1)
            .ttl(Duration::from_secs(3600)),
    );
    let t = db.table("t").unwrap();
    let now = now_ms();
    let ts = now - 5_000;
    t.put(Put::new("r").add_at("f", "q", ts, "kept")).unwrap();
    // A newer write at the same timestamp with a short TTL: once it expires it neither shows
    // nor shadows the older write (it counts as no version).
    t.put(
        Put::new("r")
            .add_at("f", "q", ts, "short")
            .ttl(Duration::from_secs(1)),
    )
    .unwrap();
    assert_eq!(value(&db, "r").as_deref(), Some(&b"kept"[..]));
    // MIN_VERSIONS 1 does not keep a cell past its own TTL.
    t.put(
        Put::new("s")
            .add_at("f", "q", ts, "gone")
            .ttl(Duration::from_secs(1)),
    )
    .unwrap();
    assert_eq!(value(&db, "s"), None);
    db.major_compact("t", None).unwrap();
    assert_eq!(value(&db, "r").as_deref(), Some(&b"kept"[..]));
    assert_eq!(value(&db, "s"), None);
}

#[test]
fn a_live_cell_ttl_expires_while_the_database_runs() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path(), FamilyDescriptor::new("f"));
    let t = db.table("t").unwrap();
    t.put(
        Put::new("r")
            .add("f", "q", "v")
            .ttl(Duration::from_millis(300)),
    )
    .unwrap();
    assert_eq!(value(&db, "r").as_deref(), Some(&b"v"[..]));
    db.flush().unwrap();
    assert_eq!(value(&db, "r").as_deref(), Some(&b"v"[..]));
    std::thread::sleep(Duration::from_millis(400));
    assert_eq!(value(&db, "r"), None);
    let reversed: Vec<_> = t.scan(Scan::new().reversed()).unwrap().collect();
    assert!(reversed.is_empty());
}

/// A new database on `clock` with the family `fam` in table "t".
fn open_clocked(dir: &std::path::Path, fam: FamilyDescriptor, clock: Arc<ManualClock>) -> Db {
    open_with(dir, fam, Some(clock))
}

/// SPEC.md §13 rule 7 says an expired cell counts as no version and shadows no older write.
/// Before it expires it does both, so a flush or compaction that ran meanwhile must not have
/// dropped what it hid: the older write behind it at its timestamp, the versions it pushed
/// beyond VERSIONS, the expired version it pushed out of MIN_VERSIONS. With the clock moved
/// past the cell's TTL, every read equals the read of a database that never flushed.
#[test]
fn what_a_live_cell_ttl_hides_comes_back_when_it_expires_whatever_flushes_ran() {
    for nvb in [false, true] {
        for purge in ["none", "flush", "major"] {
            let dir = tempfile::tempdir().unwrap();
            let clock = Arc::new(ManualClock::new(1_000));
            let fam = FamilyDescriptor::new("f")
                .max_versions(1)
                .min_versions(1)
                .ttl(Duration::from_millis(300))
                .new_version_behavior(nvb);
            let db = open_clocked(dir.path(), fam, clock.clone());
            let t = db.table("t").unwrap();
            let brief = |row: &str, ts: u64, v: &str| {
                t.put(
                    Put::new(row)
                        .add_at("f", "q", ts, v)
                        .ttl(Duration::from_millis(100)),
                )
                .unwrap();
            };
            // Same timestamp: the later write shadows the earlier one while it lives.
            t.put(Put::new("dup").add_at("f", "q", 900, "kept"))
                .unwrap();
            brief("dup", 900, "brief");
            // VERSIONS 1: the brief write pushes the older version beyond it.
            t.put(Put::new("ver").add_at("f", "q", 800, "older"))
                .unwrap();
            brief("ver", 950, "brief");
            // Family TTL 300 ms with MIN_VERSIONS 1: the version at 500 is expired at 1,000
            // and shows only while it is the newest; the brief write outranks it.
            t.put(Put::new("min").add_at("f", "q", 500, "floor"))
                .unwrap();
            brief("min", 950, "brief");
            for row in ["dup", "ver", "min"] {
                assert_eq!(value(&db, row).as_deref(), Some(&b"brief"[..]), "{row}");
            }
            match purge {
                "flush" => db.flush().unwrap(),
                "major" => db.major_compact("t", None).unwrap(),
                _ => {}
            }
            for row in ["dup", "ver", "min"] {
                assert_eq!(value(&db, row).as_deref(), Some(&b"brief"[..]), "{row}");
            }
            // 950 + 100 < 1,051: every brief write has expired.
            clock.set(1_051);
            let ctx = format!("nvb {nvb}, {purge}");
            assert_eq!(value(&db, "dup").as_deref(), Some(&b"kept"[..]), "{ctx}");
            assert_eq!(value(&db, "ver").as_deref(), Some(&b"older"[..]), "{ctx}");
            assert_eq!(value(&db, "min").as_deref(), Some(&b"floor"[..]), "{ctx}");
            // And once gone, a compaction drops the expired writes and nothing else.
            db.major_compact("t", None).unwrap();
            assert_eq!(value(&db, "dup").as_deref(), Some(&b"kept"[..]), "{ctx}");
            assert_eq!(value(&db, "ver").as_deref(), Some(&b"older"[..]), "{ctx}");
            assert_eq!(value(&db, "min").as_deref(), Some(&b"floor"[..]), "{ctx}");
            let raw = t.scan(Scan::new().raw()).unwrap().count();
            assert_eq!(raw, 3, "{ctx}: only the three older writes are stored");
        }
    }
}

/// The clock decides what LATEST means and when a family TTL runs out, in reads, flushes and
/// compactions alike.
#[test]
fn the_clock_option_sets_latest_timestamps_and_family_ttl_expiry() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(5_000));
    let fam = FamilyDescriptor::new("f").ttl(Duration::from_millis(1_000));
    let db = open_clocked(dir.path(), fam, clock.clone());
    let t = db.table("t").unwrap();
    t.put(Put::new("r").add("f", "q", "v")).unwrap();
    let row = t.get(&Get::new("r")).unwrap().unwrap();
    assert_eq!(row.cells[0].timestamp, 5_000, "LATEST is the clock's time");
    db.flush().unwrap();
    clock.set(6_000);
    assert_eq!(
        value(&db, "r").as_deref(),
        Some(&b"v"[..]),
        "5,000 < 6,000 - 1,000 is false"
    );
    clock.set(6_001);
    assert_eq!(value(&db, "r"), None);
    db.major_compact("t", None).unwrap();
    assert_eq!(
        t.scan(Scan::new().raw()).unwrap().count(),
        0,
        "compaction purged it"
    );
}

/// Files whose every cell is past the family TTL go by themselves: the TTL pick (SPEC.md
/// §20.1) finds them due once the clock passes their newest timestamp plus the TTL, and the
/// compaction leaves nothing — no major compaction asked for. Before that instant they stay.
#[test]
fn files_past_the_family_ttl_are_compacted_away_when_the_clock_passes_it() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(10_000));
    let fam = FamilyDescriptor::new("f").ttl(Duration::from_millis(1_000));
    let db = open_clocked(dir.path(), fam, clock.clone());
    let t = db.table("t").unwrap();
    // Three files, newest timestamps 10,000, 10,500 and 11,000.
    for (i, at) in [10_000u64, 10_500, 11_000].into_iter().enumerate() {
        clock.set(at);
        for r in 0..20 {
            t.put(Put::new(format!("{i}-{r:02}")).add("f", "q", "v"))
                .unwrap();
        }
        db.flush().unwrap();
    }
    assert_eq!(db.stats().live_files, 3);
    // At 11,000: nothing expired yet (10,000 + 1,000 is not below 11,000).
    db.wait_for_compactions().unwrap();
    assert_eq!(t.scan(Scan::new()).unwrap().count(), 60);
    // At 11,501: the first two files are entirely past the TTL, the third is not.
    clock.set(11_501);
    db.wait_for_compactions().unwrap();
    assert_eq!(t.scan(Scan::new()).unwrap().count(), 20);
    assert_eq!(
        t.scan(Scan::new().raw()).unwrap().count(),
        20,
        "expired cells are gone"
    );
    let st = db.stats();
    assert_eq!(st.live_files, 1, "the third file is untouched");
    assert_eq!(
        st.compaction.by_reason.get("ttl"),
        Some(&2),
        "{:?}",
        st.compaction.by_reason
    );
    assert_eq!(st.compaction.by_reason.len(), 1, "only TTL picks ran");
    // At 12,001 the last file goes too, and nothing is stored.
    clock.set(12_001);
    db.wait_for_compactions().unwrap();
    assert_eq!(t.scan(Scan::new().raw()).unwrap().count(), 0);
    assert_eq!(db.stats().live_files, 0);
}

/// A clock at a fixed reading that counts the readings taken by the thread that made it.
#[derive(Debug)]
struct Counting {
    now: u64,
    reads: std::sync::atomic::AtomicU64,
    owner: std::thread::ThreadId,
}

impl cellar::Clock for Counting {
    fn now_ms(&self) -> u64 {
        if std::thread::current().id() == self.owner {
            self.reads.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
        self.now
    }
}

/// A Get reads the clock only when a TTL can apply: once up front when a family of the table
/// has a TTL, once at the first cell that carries its own TTL otherwise, and not at all for a
/// row of untagged cells in a table without TTLs. Whichever way it read the clock, the cell's
/// own TTL is judged at that reading, through a single Get, a borrowed one and a batch, from
/// the memstore and from a file.
#[test]
fn a_get_reads_the_clock_only_when_a_ttl_can_apply() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(Counting {
        now: 100_000,
        reads: std::sync::atomic::AtomicU64::new(0),
        owner: std::thread::current().id(),
    });
    let mut o = Options::default();
    o.compaction.threads = 0;
    o.clock = clock.clone();
    let db = Db::open(dir.path(), o).unwrap();
    db.create_table(TableDescriptor::new("plain").family(FamilyDescriptor::new("f")))
        .unwrap();
    db.create_table(
        TableDescriptor::new("ttl")
            .family(FamilyDescriptor::new("f").ttl(Duration::from_secs(3600))),
    )
    .unwrap();
    for name in ["plain", "ttl"] {
        let t = db.table(name).unwrap();
        t.put(Put::new("untagged").add_at("f", "q", 99_000, "u"))
            .unwrap();
        // Two cells of their own TTL in one row: the live one first, then one past its TTL.
        t.put(
            Put::new("tagged")
                .add_at("f", "a", 99_000, "live")
                .add_at("f", "b", 98_000, "gone")
                .ttl(Duration::from_millis(1_500)),
        )
        .unwrap();
    }
    let reads = || clock.reads.load(std::sync::atomic::Ordering::SeqCst);
    for flushed in [false, true] {
        if flushed {
            db.flush().unwrap();
        }
        for (name, untagged_reads, tagged_reads) in [("plain", 0, 1), ("ttl", 1, 1)] {
            let t = db.table(name).unwrap();
            let before = reads();
            let row = t.get(&Get::new("untagged")).unwrap().unwrap();
            assert_eq!(row.value("f", "q"), Some(&b"u"[..]));
            assert_eq!(
                reads() - before,
                untagged_reads,
                "{name}, flushed {flushed}"
            );
            let before = reads();
            let row = t.get(&Get::new("tagged")).unwrap().unwrap();
            assert_eq!(reads() - before, tagged_reads, "{name}, flushed {flushed}");
            assert_eq!(row.value("f", "a"), Some(&b"live"[..]));
            assert_eq!(row.value("f", "b"), None, "{name}, flushed {flushed}");
            let before = reads();
            let seen = t
                .get_view(&Get::new("tagged"), |r| {
                    r.map(|r| (r.len(), r.value("f", "b").is_some()))
                })
                .unwrap();
            assert_eq!(seen, Some((1, false)), "{name}, flushed {flushed}");
            assert_eq!(reads() - before, tagged_reads, "{name}, flushed {flushed}");
            // A batch reads once whatever it holds.
            let before = reads();
            let rows = t
                .get_many(&[Get::new("tagged"), Get::new("untagged")])
                .unwrap();
            assert_eq!(reads() - before, 1);
            assert_eq!(rows[0].as_ref().unwrap().cells.len(), 1);
            assert_eq!(rows[1].as_ref().unwrap().cells.len(), 1);
        }
    }
}
