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
