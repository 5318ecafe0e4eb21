//! Concurrent writers and readers on one database with a small write buffer, so memstore
//! switches and flushes happen during the run. Readers check row atomicity (every column of a
//! row carries the same write id) and snapshot stability (a counter row and its mirror, written
//! in one cross-row batch, always agree within one scan, and never go backwards). At the end
//! every acknowledged write is readable, and again after a reopen.

mod common;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use cellar::{Db, Get, Options, Put, Row, RowMutations, Scan, WriteBatch, WriteOptions};
use common::{open, table_desc};

const WRITERS: u64 = 8;
const READERS: usize = 2;
/// Row mutations per writer.
const OPS: u64 = 300;
/// Rows each writer cycles over.
/// 8 x 40 rows: more than one scan batch (256 rows), so the counters (`ctr-*`, first) and
/// their mirrors (`zz-mir-*`, last) are read in different refills of one scan.
const ROWS_PER_WRITER: u64 = 40;
/// Columns per row mutation (half in each family).
const COLS: usize = 6;

fn opts() -> Options {
    Options::default().write_buffer_size(64 << 10)
}

fn row_key(w: u64, r: u64) -> String {
    format!("row-{w}-{r:03}")
}

/// Every column of a row mutation: (family, qualifier).
fn columns() -> Vec<(&'static str, String)> {
    (0..COLS)
        .map(|c| (if c % 2 == 0 { "a" } else { "b" }, format!("c{c}")))
        .collect()
}

/// Value of column `c` for write id `id`, padded so the memstore fills quickly.
fn value(id: u64, c: usize) -> Vec<u8> {
    format!("{id}:{c}:{}", "p".repeat(100)).into_bytes()
}

/// A put of every column of row `k` for write id `id`.
fn row_put(k: &str, id: u64) -> Put {
    columns()
        .iter()
        .enumerate()
        .fold(Put::new(k), |p, (c, (f, q))| {
            p.add(f, q.as_str(), value(id, c))
        })
}

fn parse_id(v: &[u8], c: usize) -> u64 {
    let s = std::str::from_utf8(v).unwrap();
    let mut it = s.splitn(3, ':');
    let id = it.next().unwrap().parse().unwrap();
    assert_eq!(it.next().unwrap().parse::<usize>().unwrap(), c, "{s}");
    id
}

/// The write id a `row-*` row carries; panics unless every column carries the same one.
fn atomic_id(r: &Row) -> u64 {
    let ids: Vec<u64> = columns()
        .iter()
        .enumerate()
        .map(|(c, (f, q))| {
            let v = r.value(f, q).unwrap_or_else(|| {
                panic!("row {:?} lacks {f}:{q}", String::from_utf8_lossy(&r.key))
            });
            parse_id(v, c)
        })
        .collect();
    assert!(
        ids.iter().all(|&i| i == ids[0]),
        "torn row {:?}: {ids:?}",
        String::from_utf8_lossy(&r.key)
    );
    assert_eq!(r.cells().len(), COLS);
    ids[0]
}

fn counter(r: &Row) -> u64 {
    std::str::from_utf8(r.value("a", "n").unwrap())
        .unwrap()
        .parse()
        .unwrap()
}

/// Every acknowledged write readable: each row holds the id of its writer's last mutation of
/// it, each counter and mirror the writer's last batch.
fn verify_final(db: &Db, last: &HashMap<String, u64>, counters: &HashMap<u64, u64>) {
    let t = db.table("c").unwrap();
    for (k, id) in last {
        let r = t.get(&Get::new(k.as_str())).unwrap().unwrap();
        assert_eq!(atomic_id(&r), *id, "row {k}");
    }
    for (w, n) in counters {
        for p in ["ctr", "zz-mir"] {
            let r = t.get(&Get::new(format!("{p}-{w}"))).unwrap().unwrap();
            assert_eq!(counter(&r), *n, "{p}-{w}");
        }
    }
    let rows = t.scan(Scan::new()).unwrap().count();
    assert_eq!(rows, last.len() + 2 * counters.len());
}

#[test]
fn writers_and_readers_see_atomic_rows_and_stable_snapshots_through_flushes() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path(), opts());
    db.create_table(table_desc("c", &["a", "b"], 1)).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let scans = Arc::new(AtomicU64::new(0));
    let deadline = Instant::now() + Duration::from_secs(120);

    let readers: Vec<_> = (0..READERS)
        .map(|ri| {
            let db = db.clone();
            let stop = stop.clone();
            let scans = scans.clone();
            std::thread::spawn(move || {
                let t = db.table("c").unwrap();
                let mut seen_ctr: HashMap<String, u64> = HashMap::new();
                let mut seen_row: HashMap<Vec<u8>, u64> = HashMap::new();
                let mut i = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    i += 1;
                    if ri == 0 || i % 4 == 0 {
                        // A whole scan: counters and mirrors agree, rows are whole.
                        let mut ctr: HashMap<String, u64> = HashMap::new();
                        for r in t.scan(Scan::new()).unwrap() {
                            let r = r.unwrap();
                            let k = String::from_utf8(r.key.clone()).unwrap();
                            if let Some(w) = k.strip_prefix("ctr-") {
                                ctr.insert(w.to_string(), counter(&r));
                            } else if let Some(w) = k.strip_prefix("zz-mir-") {
                                let n = counter(&r);
                                assert_eq!(
                                    ctr.get(w),
                                    Some(&n),
                                    "mirror of writer {w} disagrees with its counter in one scan"
                                );
                                let prev = seen_ctr.insert(w.to_string(), n).unwrap_or(0);
                                assert!(n >= prev, "counter {w} went back from {prev} to {n}");
                            } else {
                                let id = atomic_id(&r);
                                let prev = seen_row.insert(r.key.clone(), id).unwrap_or(0);
                                assert!(id >= prev, "row {k} went back from {prev} to {id}");
                            }
                        }
                        scans.fetch_add(1, Ordering::Relaxed);
                    } else {
                        // Gets of random rows.
                        for w in 0..WRITERS {
                            let k = row_key(w, (i * 7 + w) % ROWS_PER_WRITER);
                            if let Some(r) = t.get(&Get::new(k)).unwrap() {
                                let id = atomic_id(&r);
                                let prev = seen_row.insert(r.key.clone(), id).unwrap_or(0);
                                assert!(id >= prev, "row went back from {prev} to {id}");
                            }
                        }
                    }
                }
            })
        })
        .collect();

    let writers: Vec<_> = (0..WRITERS)
        .map(|w| {
            let db = db.clone();
            std::thread::spawn(move || {
                let t = db.table("c").unwrap();
                let mut last: HashMap<String, u64> = HashMap::new();
                let mut n = 0u64;
                for i in 1..=OPS {
                    assert!(Instant::now() < deadline, "writer {w} too slow");
                    // Write ids grow per row: writer-major, so ids of one row are ordered.
                    let id = w * 1_000_000 + i;
                    let k = row_key(w, i % ROWS_PER_WRITER);
                    let put = row_put(&k, id);
                    t.mutate_row(
                        RowMutations::new(k.as_str()).put(put),
                        WriteOptions::default(),
                    )
                    .unwrap();
                    last.insert(k, id);
                    if i % 3 == 0 {
                        n += 1;
                        let v = n.to_string();
                        db.write(
                            WriteBatch::new()
                                .put("c", Put::new(format!("ctr-{w}")).add("a", "n", v.as_str()))
                                .put(
                                    "c",
                                    Put::new(format!("zz-mir-{w}")).add("a", "n", v.as_str()),
                                ),
                            WriteOptions::default(),
                        )
                        .unwrap();
                    }
                }
                (w, last, n)
            })
        })
        .collect();

    let mut last = HashMap::new();
    let mut counters = HashMap::new();
    for h in writers {
        let (w, l, n) = h.join().unwrap();
        last.extend(l);
        counters.insert(w, n);
    }
    stop.store(true, Ordering::Relaxed);
    for r in readers {
        r.join().unwrap();
    }
    let s = db.stats();
    assert!(s.flushes >= 2, "no flush happened during the run: {s:?}");
    assert!(scans.load(Ordering::Relaxed) > 0);
    assert_eq!(s.writes, WRITERS * OPS + WRITERS * (OPS / 3));
    assert_eq!(last.len() as u64, WRITERS * ROWS_PER_WRITER);
    verify_final(&db, &last, &counters);
    drop(db);
    let db = open(dir.path(), opts());
    verify_final(&db, &last, &counters);
    db.flush().unwrap();
    drop(db);
    let db = open(dir.path(), opts());
    verify_final(&db, &last, &counters);
}

/// Fsyncing writers share group commits whose leader applies every writer's batch: a write
/// that returned is visible to its own writer's next read, through memstore switches.
#[test]
fn fsync_writers_read_their_own_writes() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path(), opts());
    db.create_table(table_desc("c", &["a", "b"], 1)).unwrap();
    let writers: Vec<_> = (0..WRITERS)
        .map(|w| {
            let db = db.clone();
            std::thread::spawn(move || {
                let t = db.table("c").unwrap();
                for i in 1..=100u64 {
                    let id = w * 1_000_000 + i;
                    let k = row_key(w, i % ROWS_PER_WRITER);
                    let put = row_put(&k, id);
                    t.mutate_row(
                        RowMutations::new(k.as_str()).put(put),
                        WriteOptions::durability(cellar::Durability::FsyncWal),
                    )
                    .unwrap();
                    let r = t.get(&Get::new(k.as_str())).unwrap().expect("own write");
                    assert_eq!(atomic_id(&r), id, "writer {w} missed its own write");
                }
            })
        })
        .collect();
    for t in writers {
        t.join().unwrap();
    }
}
