//! `Stats::prometheus`: the exposition of a database that has written, flushed, compacted,
//! deleted and read, checked line by line against the text format's rules and against the
//! `Stats` it renders.

use std::collections::{BTreeMap, BTreeSet};

use cellar::{Db, Delete, FamilyDescriptor, Get, Options, Put, Scan, Stats, TableDescriptor};

/// One parsed family: its TYPE and its samples (labels as written, value).
#[derive(Debug, Default)]
struct Family {
    kind: String,
    samples: Vec<(BTreeMap<String, String>, f64)>,
}

fn valid_name(n: &str) -> bool {
    let mut cs = n.chars();
    matches!(cs.next(), Some(c) if c.is_ascii_alphabetic() || c == '_' || c == ':')
        && cs.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
}

/// Parse `text` strictly: HELP then TYPE then the family's samples, each family once, every
/// sample named as its family, labels `name="value"` with the format's escapes, values
/// Prometheus floats. Panics naming the line on any deviation.
fn parse(text: &str) -> BTreeMap<String, Family> {
    let mut out: BTreeMap<String, Family> = BTreeMap::new();
    let mut open: Option<String> = None;
    let mut lines = text.lines().enumerate().peekable();
    assert!(text.ends_with('\n'), "the text ends with a newline");
    while let Some((i, line)) = lines.next() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let (name, help) = rest.split_once(' ').expect("HELP name text");
            assert!(valid_name(name), "line {i}: name {name:?}");
            assert!(!help.is_empty() && !help.contains('\\'), "line {i}: help");
            assert!(!out.contains_key(name), "line {i}: {name} twice");
            let (_, t) = lines.next().expect("TYPE after HELP");
            let t = t
                .strip_prefix(&format!("# TYPE {name} "))
                .unwrap_or_else(|| panic!("line {}: TYPE of {name}: {t:?}", i + 1));
            assert!(matches!(t, "counter" | "gauge"), "line {i}: type {t}");
            assert_eq!(
                t == "counter",
                name.ends_with("_total"),
                "{name}: counters and only counters end in _total"
            );
            out.insert(
                name.to_string(),
                Family {
                    kind: t.to_string(),
                    samples: Vec::new(),
                },
            );
            open = Some(name.to_string());
            continue;
        }
        assert!(!line.starts_with('#'), "line {i}: stray comment {line:?}");
        let name = open.as_deref().expect("a sample after a family's HELP");
        let (series, value) = line.rsplit_once(' ').expect("series value");
        let value: f64 = match value {
            "+Inf" => f64::INFINITY,
            "-Inf" => f64::NEG_INFINITY,
            "NaN" => f64::NAN,
            v => v
                .parse()
                .unwrap_or_else(|_| panic!("line {i}: value {v:?}")),
        };
        let mut labels = BTreeMap::new();
        let sname = match series.split_once('{') {
            None => series,
            Some((n, rest)) => {
                let mut rest = rest.strip_suffix('}').expect("labels end with }");
                while !rest.is_empty() {
                    let (k, after) = rest.split_once("=\"").expect("label=\"");
                    assert!(valid_name(k), "line {i}: label {k:?}");
                    let mut v = String::new();
                    let mut cs = after.char_indices();
                    let end = loop {
                        match cs.next().expect("closing quote") {
                            (j, '"') => break j,
                            (_, '\\') => match cs.next().expect("escape").1 {
                                'n' => v.push('\n'),
                                c @ ('\\' | '"') => v.push(c),
                                c => panic!("line {i}: escape \\{c}"),
                            },
                            (_, c) => v.push(c),
                        }
                    };
                    assert!(labels.insert(k.to_string(), v).is_none(), "line {i}");
                    rest = &after[end + 1..];
                    rest = rest.strip_prefix(',').unwrap_or(rest);
                }
                n
            }
        };
        assert_eq!(sname, name, "line {i}: sample outside its family");
        let f = out.get_mut(name).unwrap();
        assert!(
            f.samples.iter().all(|(l, _)| *l != labels),
            "line {i}: series twice"
        );
        f.samples.push((labels, value));
    }
    out
}

fn value(m: &BTreeMap<String, Family>, name: &str, label: Option<(&str, &str)>) -> f64 {
    let f = m
        .get(name)
        .unwrap_or_else(|| panic!("{name} missing from the exposition"));
    let hits: Vec<f64> = f
        .samples
        .iter()
        .filter(|(l, _)| match label {
            None => l.is_empty(),
            Some((k, v)) => l.get(k).map(String::as_str) == Some(v),
        })
        .map(|(_, v)| *v)
        .collect();
    assert_eq!(hits.len(), 1, "{name} {label:?}: {:?}", f.samples);
    hits[0]
}

fn busy_db(dir: &std::path::Path) -> Db {
    let db = Db::open(dir, Options::default().write_buffer_size(64 << 10)).unwrap();
    db.create_table(TableDescriptor::new("t").family(FamilyDescriptor::new("f").block_size(1024)))
        .unwrap();
    let t = db.table("t").unwrap();
    for round in 0..4u32 {
        for i in 0..500u32 {
            t.put(Put::new(format!("r{i:05}")).add("f", "q", format!("v{round}-{i}")))
                .unwrap();
        }
        db.flush().unwrap();
    }
    for i in (0..500u32).step_by(7) {
        t.delete(Delete::new(format!("r{i:05}"))).unwrap();
    }
    db.major_compact("t", None).unwrap();
    for i in 0..600u32 {
        let _ = t.get(&Get::new(format!("r{i:05}"))).unwrap();
    }
    assert!(t.scan(Scan::new()).unwrap().count() > 400);
    db
}

#[test]
fn the_exposition_is_well_formed_and_says_what_stats_says() {
    let dir = tempfile::tempdir().unwrap();
    let db = busy_db(dir.path());
    let _snap = db.snapshot();
    let s: Stats = db.stats();
    let text = s.prometheus();
    let m = parse(&text);

    assert_eq!(value(&m, "cellar_writes_total", None), s.writes as f64);
    assert!(s.writes >= 2000);
    assert_eq!(
        value(&m, "cellar_user_bytes_written_total", None),
        s.user_bytes_written as f64
    );
    assert_eq!(value(&m, "cellar_flushes_total", None), s.flushes as f64);
    assert!(s.flushes >= 4);
    assert_eq!(
        value(&m, "cellar_read_file_skips_total", Some(("by", "bloom"))),
        s.bloom_skips as f64
    );
    // 600 Gets, of rows 0..500 less every 7th deleted: 428 found; one scan of those rows.
    assert_eq!(
        (s.gets, s.gets_found, s.scans, s.scan_rows),
        (600, 428, 1, 428)
    );
    assert_eq!(value(&m, "cellar_reads_total", Some(("op", "get"))), 600.0);
    assert_eq!(value(&m, "cellar_reads_total", Some(("op", "scan"))), 1.0);
    assert_eq!(
        value(&m, "cellar_read_rows_total", Some(("op", "get"))),
        428.0
    );
    assert_eq!(
        value(&m, "cellar_read_rows_total", Some(("op", "scan"))),
        428.0
    );
    assert_eq!(
        value(&m, "cellar_memstore_bytes", Some(("state", "active"))),
        s.memstore_active_bytes as f64
    );
    assert_eq!(value(&m, "cellar_live_files", None), s.live_files as f64);
    assert_eq!(value(&m, "cellar_live_snapshots", None), 1.0);
    assert_eq!(
        value(&m, "cellar_oldest_snapshot_seq", None),
        s.oldest_snapshot.unwrap() as f64
    );
    assert_eq!(
        value(&m, "cellar_wal_records_total", None),
        s.wal.records as f64
    );
    assert_eq!(m["cellar_wal_info"].samples.len(), 1);

    // The per-kind cache counters add up to the overall ones, which are not repeated.
    for (name, total) in [
        ("cellar_block_cache_hits_total", s.block_cache.hits),
        ("cellar_block_cache_misses_total", s.block_cache.misses),
        ("cellar_block_cache_inserts_total", s.block_cache.inserts),
        (
            "cellar_block_cache_evictions_total",
            s.block_cache.evictions,
        ),
    ] {
        let f = &m[name];
        let kinds: BTreeSet<&str> = f.samples.iter().map(|(l, _)| l["kind"].as_str()).collect();
        assert_eq!(kinds, BTreeSet::from(["bloom", "data", "index"]), "{name}");
        let sum: f64 = f.samples.iter().map(|(_, v)| v).sum();
        assert_eq!(sum, total as f64, "{name}");
    }
    assert!(s.block_cache.hits > 0);

    // One sample per level, each with the level's figures.
    let levels = &m["cellar_level_bytes"];
    assert_eq!(levels.samples.len(), s.compaction.levels.len());
    for (i, l) in s.compaction.levels.iter().enumerate() {
        let at = i.to_string();
        assert_eq!(
            value(&m, "cellar_level_bytes", Some(("level", &at))),
            l.bytes as f64
        );
        assert_eq!(
            value(&m, "cellar_level_written_bytes_total", Some(("level", &at))),
            l.bytes_written as f64
        );
        assert!(
            (value(
                &m,
                "cellar_level_compaction_seconds_total",
                Some(("level", &at))
            ) - l.micros as f64 / 1e6)
                .abs()
                < 1e-9
        );
    }
    assert!(s.compaction.levels.iter().any(|l| l.bytes > 0));
    for (reason, n) in &s.compaction.by_reason {
        assert_eq!(
            value(&m, "cellar_compactions_total", Some(("reason", reason))),
            *n as f64
        );
    }
    assert!(
        !s.compaction.by_reason.is_empty(),
        "the major compaction ran"
    );
    for (cause, n) in &s.compaction.dropped {
        assert_eq!(
            value(&m, "cellar_dropped_cells_total", Some(("cause", cause))),
            *n as f64
        );
    }
    assert!(
        s.compaction.dropped.values().sum::<u64>() > 0,
        "overwritten versions and deleted rows were dropped"
    );
    assert_eq!(
        value(&m, "cellar_compaction_cells_total", Some(("op", "read"))),
        s.compaction.cells_read as f64
    );
    assert!((value(&m, "cellar_write_amplification", None) - s.write_amplification()).abs() < 1e-9);
    for f in m.values() {
        assert!(!f.samples.is_empty() || f.kind == "counter");
    }
}

#[test]
fn a_fresh_database_has_every_family_but_the_snapshot_age() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    let m = parse(&db.stats().prometheus());
    assert!(!m.contains_key("cellar_oldest_snapshot_seq"));
    assert_eq!(value(&m, "cellar_writes_total", None), 0.0);
    assert_eq!(value(&m, "cellar_recovery_torn_tail", None), 0.0);
    assert!(m.len() > 50, "{} families", m.len());
}

/// Every read path counts its Gets and rows: `get`, `get_view`, `get_many`, a scan iterated
/// (a row split by `batch` counts once), a scan dropped early, `scan_each`, `explain`.
#[test]
fn read_counters_count_each_read_path() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    db.create_table(TableDescriptor::new("t").family(FamilyDescriptor::new("f")))
        .unwrap();
    let t = db.table("t").unwrap();
    for i in 0..10u32 {
        t.put(
            Put::new(format!("r{i}"))
                .add("f", "a", "1")
                .add("f", "b", "2"),
        )
        .unwrap();
    }
    let counts = |db: &Db| {
        let s = db.stats();
        (s.gets, s.gets_found, s.scans, s.scan_rows)
    };
    assert_eq!(counts(&db), (0, 0, 0, 0));
    t.get(&Get::new("r1")).unwrap();
    t.get(&Get::new("nope")).unwrap();
    t.get_view(&Get::new("r2"), |_| ()).unwrap();
    assert_eq!(counts(&db), (3, 2, 0, 0));
    let many: Vec<Get> = ["r3", "r4", "x"].iter().map(|r| Get::new(*r)).collect();
    t.get_many(&many).unwrap();
    assert_eq!(counts(&db), (6, 4, 0, 0));
    t.explain(&Get::new("r5")).unwrap();
    assert_eq!(counts(&db), (7, 5, 0, 0));
    // Batches of one cell: 20 chunks, 10 rows.
    assert_eq!(t.scan(Scan::new().batch(1)).unwrap().count(), 20);
    assert_eq!(counts(&db), (7, 5, 1, 10));
    // Dropped after three rows: three count.
    let mut it = t.scan(Scan::new()).unwrap();
    for _ in 0..3 {
        it.next().unwrap().unwrap();
    }
    drop(it);
    assert_eq!(counts(&db), (7, 5, 2, 13));
    let mut seen = 0;
    t.scan_each(Scan::new(), |_| {
        seen += 1;
        std::ops::ControlFlow::Continue(())
    })
    .unwrap();
    assert_eq!(seen, 10);
    assert_eq!(counts(&db), (7, 5, 3, 23));
}

/// `Stats::skipped_cells`: each row below makes a read examine cells it does not return for
/// one cause, and the counters say exactly how many for which, for Gets, for a scan (the same
/// rows, so the same counts again), after a flush (the same cells read from a file), in the
/// report and in Prometheus.
#[test]
fn skipped_cells_are_counted_by_cause() {
    use cellar::{ManualClock, SkippedCells};
    use std::sync::Arc;
    use std::time::Duration;

    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(1_000_000));
    let opts = Options {
        clock: clock.clone(),
        ..Options::default()
    };
    let db = Db::open(dir.path(), opts).unwrap();
    db.create_table(
        TableDescriptor::new("t")
            .family(FamilyDescriptor::new("f").max_versions(3))
            .family(FamilyDescriptor::new("g").ttl(Duration::from_secs(1))),
    )
    .unwrap();
    let t = db.table("t").unwrap();
    // A put masked by a DeleteColumn above it.
    t.put(Put::new("mask").add_at("f", "a", 10, "v")).unwrap();
    t.delete(Delete::new("mask").columns_at("f", "a", 20))
        .unwrap();
    // Two puts at one timestamp: the newer write wins.
    t.put(Put::new("dup").add_at("f", "a", 5, "x")).unwrap();
    t.put(Put::new("dup").add_at("f", "a", 5, "y")).unwrap();
    // Three versions, a Get returns one.
    for ts in 1..=3 {
        t.put(Put::new("vers").add_at("f", "a", ts, "v")).unwrap();
    }
    // Outside a time range, and not a selected column.
    t.put(Put::new("range").add_at("f", "a", 100, "v")).unwrap();
    t.put(Put::new("sel").add("f", "a", "1").add("f", "b", "2"))
        .unwrap();
    // Past the family's TTL once the clock moves.
    t.put(Put::new("old").add("g", "a", "v")).unwrap();
    clock.advance(5_000);
    // Written after a snapshot.
    let snap = db.snapshot();
    t.put(Put::new("new").add("f", "a", "v")).unwrap();

    let gets = |db: &Db| {
        let before = db.stats().skipped_cells;
        assert!(t.get(&Get::new("mask")).unwrap().is_none());
        assert_eq!(t.get(&Get::new("dup")).unwrap().unwrap().cells().len(), 1);
        assert_eq!(t.get(&Get::new("vers")).unwrap().unwrap().cells().len(), 1);
        assert!(t
            .get(&Get::new("range").time_range(0, 50))
            .unwrap()
            .is_none());
        assert_eq!(
            t.get(&Get::new("sel").column("f", "a"))
                .unwrap()
                .unwrap()
                .cells()
                .len(),
            1
        );
        assert!(t.get(&Get::new("old")).unwrap().is_none());
        let mut at_snap = Get::new("new");
        at_snap.read_point = Some(snap.seq());
        assert!(t.get(&at_snap).unwrap().is_none());
        let after = db.stats().skipped_cells;
        diff(&after, &before)
    };
    let expected = [
        ("invisible", 1),
        ("not_selected", 1),
        ("marker", 1),
        ("masked", 1),
        ("duplicate", 1),
        ("expired", 1),
        ("out_of_range", 1),
        ("versions", 2),
    ];
    assert_eq!(gets(&db), expected, "Gets over the memstore");
    // A scan of every row at the snapshot's point: the same cells but the time range's and
    // the selection's, and nothing invisible is returned.
    let scan_expected = [
        ("invisible", 1),
        ("not_selected", 0),
        ("marker", 1),
        ("masked", 1),
        ("duplicate", 1),
        ("expired", 1),
        ("out_of_range", 0),
        ("versions", 2),
    ];
    // Forward (refilled batches), reversed, and streamed by `scan_each`.
    for mode in 0..3 {
        let before = db.stats().skipped_cells;
        let mut scan = if mode == 1 {
            Scan::new().reversed()
        } else {
            Scan::new()
        };
        scan.read_point = Some(snap.seq());
        let mut names: Vec<Vec<u8>> = Vec::new();
        if mode == 2 {
            t.scan_each(scan, |r| {
                names.push(r.key().to_vec());
                std::ops::ControlFlow::Continue(())
            })
            .unwrap();
        } else {
            names = t.scan(scan).unwrap().map(|r| r.unwrap().key).collect();
        }
        if mode == 1 {
            names.reverse();
        }
        assert_eq!(
            names,
            [&b"dup"[..], b"range", b"sel", b"vers"],
            "mode {mode}"
        );
        assert_eq!(
            diff(&db.stats().skipped_cells, &before),
            scan_expected,
            "scan mode {mode}"
        );
    }
    // From an HFile: the flush dropped the masked put, the losing duplicate and the expired
    // cell (SPEC.md §20's purge rules; the snapshot is newer than all three), and kept the
    // rest.
    db.flush().unwrap();
    let mut flushed = expected;
    for (cause, n) in &mut flushed {
        if matches!(*cause, "masked" | "duplicate" | "expired") {
            *n = 0;
        }
    }
    assert_eq!(gets(&db), flushed, "Gets over a flushed file");
    let s = db.stats();
    assert_eq!(s.skipped_cells.total(), 9 + 3 * 7 + 6);
    assert!(db.stats_report().contains(
        "Cells read and not returned: 36 (invisible 5, not_selected 2, marker 5, \
                   masked 4, duplicate 4, expired 4, out_of_range 2, versions 10)"
    ));
    let text = s.prometheus();
    assert!(text.contains("cellar_read_cells_skipped_total{cause=\"versions\"} 10\n"));
    assert!(text.contains("cellar_read_cells_skipped_total{cause=\"masked\"} 4\n"));
    drop(snap);

    fn diff(a: &SkippedCells, b: &SkippedCells) -> Vec<(&'static str, u64)> {
        a.by_cause()
            .iter()
            .zip(b.by_cause())
            .map(|(&(name, x), (_, y))| (name, x - y))
            .collect()
    }
}
