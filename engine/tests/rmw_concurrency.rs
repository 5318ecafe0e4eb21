//! Read-modify-write under concurrency: no lost increment, check-and-mutate as a correct
//! compare-and-swap, results that survive flush and reopen, and the delete of a column's
//! newest version racing with puts.

mod common;

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use cellar::{
    CheckAndMutate, Db, Delete, FamilyDescriptor, Get, Increment, Options, Put, RowMutations,
    Table, TableDescriptor,
};
use common::{open, table_desc};

fn counter(t: &Table, row: &str, f: &str, q: &str) -> Option<i64> {
    let r = t.get(&Get::new(row).column(f, q)).unwrap()?;
    let v = r.value(f, q)?;
    Some(i64::from_be_bytes(v.try_into().unwrap()))
}

/// Small buffer: memstore switches and flushes happen while the threads run.
fn opts() -> Options {
    Options::default().write_buffer_size(32 << 10)
}

#[test]
fn sixteen_threads_increment_one_counter_without_losing_any() {
    const THREADS: usize = 16;
    const EACH: usize = 200;
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path(), opts());
    db.create_table(table_desc("t", &["cf"], 1)).unwrap();
    let t = db.table("t").unwrap();
    let seen: Vec<Vec<i64>> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..THREADS)
            .map(|_| {
                let t = t.clone();
                s.spawn(move || {
                    (0..EACH)
                        .map(|_| {
                            let r = t
                                .increment(Increment::new("ctr").add("cf", "n", 1))
                                .unwrap();
                            i64::from_be_bytes(r.value("cf", "n").unwrap().try_into().unwrap())
                        })
                        .collect::<Vec<i64>>()
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let total = (THREADS * EACH) as i64;
    // Each increment returned a distinct value: together exactly 1..=3200.
    let all: BTreeSet<i64> = seen.iter().flatten().copied().collect();
    assert_eq!(all.len(), THREADS * EACH);
    assert_eq!(all.first().copied(), Some(1));
    assert_eq!(all.last().copied(), Some(total));
    assert_eq!(counter(&t, "ctr", "cf", "n"), Some(total));
    db.flush().unwrap();
    assert_eq!(counter(&t, "ctr", "cf", "n"), Some(total));
    drop((t, db));
    let db = open(dir.path(), opts());
    let t = db.table("t").unwrap();
    assert_eq!(counter(&t, "ctr", "cf", "n"), Some(total));
}

#[test]
fn increments_and_compare_and_swap_on_several_rows() {
    const THREADS: usize = 8;
    const ROWS: usize = 4;
    const ROUNDS: usize = 60;
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path(), opts());
    db.create_table(table_desc("t", &["cf", "x"], 2)).unwrap();
    let t = db.table("t").unwrap();
    let retries = AtomicU64::new(0);
    std::thread::scope(|s| {
        for th in 0..THREADS {
            let (t, retries) = (t.clone(), &retries);
            s.spawn(move || {
                for i in 0..ROUNDS {
                    let row = format!("row{}", (th + i) % ROWS);
                    t.increment(
                        Increment::new(row.as_str())
                            .add("cf", "n", 1)
                            .add("x", "m", -1),
                    )
                    .unwrap();
                    // A compare-and-swap loop on a decimal counter in "cf:v", with a
                    // padded value so memstores fill and switch during the run.
                    loop {
                        let cur = t
                            .get(&Get::new(row.as_str()).column("cf", "v"))
                            .unwrap()
                            .and_then(|r| r.value("cf", "v").map(<[u8]>::to_vec));
                        let (cam, next) = match &cur {
                            None => (CheckAndMutate::row(row.as_str()).if_absent("cf", "v"), 1),
                            Some(v) => {
                                let n: u64 = std::str::from_utf8(&v[..8]).unwrap().parse().unwrap();
                                (
                                    CheckAndMutate::row(row.as_str()).if_equals(
                                        "cf",
                                        "v",
                                        v.clone(),
                                    ),
                                    n + 1,
                                )
                            }
                        };
                        let value = format!("{next:08}{}", "p".repeat(200));
                        let rm = RowMutations::new(row.as_str())
                            .put(Put::new(row.as_str()).add("cf", "v", value));
                        if t.check_and_mutate(cam.then(rm)).unwrap() {
                            break;
                        }
                        retries.fetch_add(1, Ordering::Relaxed);
                    }
                }
            });
        }
    });
    let per_row = (THREADS * ROUNDS / ROWS) as i64;
    let check = |t: &Table| {
        for r in 0..ROWS {
            let row = format!("row{r}");
            assert_eq!(counter(t, &row, "cf", "n"), Some(per_row), "{row}");
            assert_eq!(counter(t, &row, "x", "m"), Some(-per_row), "{row}");
            let v = t
                .get(&Get::new(row.as_str()).column("cf", "v"))
                .unwrap()
                .unwrap();
            let v = v.value("cf", "v").unwrap();
            let n: i64 = std::str::from_utf8(&v[..8]).unwrap().parse().unwrap();
            assert_eq!(n, per_row, "{row}: every successful swap counted once");
        }
    };
    check(&t);
    db.flush().unwrap();
    check(&t);
    drop((t, db));
    let db = open(dir.path(), opts());
    check(&db.table("t").unwrap());
    eprintln!(
        "compare-and-swap retries: {}",
        retries.load(Ordering::Relaxed)
    );
}

/// Versions of `r/cf:q` (timestamps, newest first) visible at `read_point`.
fn versions_at(t: &Table, read_point: u64) -> Vec<u64> {
    let mut g = Get::new("r").column("cf", "q").all_versions();
    g.read_point = Some(read_point);
    t.get(&g)
        .unwrap()
        .map(|r| r.cells().iter().map(|c| c.timestamp).collect())
        .unwrap_or_default()
}

#[test]
fn delete_of_the_newest_version_racing_with_puts() {
    const WRITERS: usize = 2;
    const PUTS: usize = 400;
    const DELETERS: usize = 2;
    const DELETES: usize = 250;
    let dir = tempfile::tempdir().unwrap();
    // A large buffer (no switch, so no flush drops versions) and every version kept, so old
    // read points can be read back exactly.
    let db: Db = open(dir.path(), Options::default().write_buffer_size(256 << 20));
    db.create_table(
        TableDescriptor::new("t").family(FamilyDescriptor::new("cf").max_versions(100_000)),
    )
    .unwrap();
    let t = db.table("t").unwrap();
    // Unique small timestamps; "newest" is the largest one.
    let next_ts = Arc::new(AtomicU64::new(1));
    let delete_seqs: Vec<u64> = std::thread::scope(|s| {
        for _ in 0..WRITERS {
            let (t, next_ts) = (t.clone(), next_ts.clone());
            s.spawn(move || {
                for _ in 0..PUTS {
                    let ts = next_ts.fetch_add(1, Ordering::Relaxed);
                    t.put(Put::new("r").add_at("cf", "q", ts, "v")).unwrap();
                }
            });
        }
        let hs: Vec<_> = (0..DELETERS)
            .map(|_| {
                let t = t.clone();
                s.spawn(move || {
                    (0..DELETES)
                        .map(|_| t.delete(Delete::new("r").column("cf", "q")).unwrap())
                        .collect::<Vec<u64>>()
                })
            })
            .collect();
        hs.into_iter().flat_map(|h| h.join().unwrap()).collect()
    });
    let mut effective = 0;
    for seq in delete_seqs {
        let before = versions_at(&t, seq - 1);
        let after = versions_at(&t, seq);
        match before.first() {
            // Nothing to delete: nothing changes.
            None => assert!(after.is_empty(), "delete at seq {seq}"),
            // Exactly the newest version just before the delete went, nothing else.
            Some(&newest) => {
                let want: Vec<u64> = before.iter().copied().filter(|&v| v != newest).collect();
                assert_eq!(
                    after, want,
                    "delete at seq {seq} removed a non-newest version"
                );
                effective += 1;
            }
        }
    }
    assert!(
        effective > 0,
        "no delete found a version: the race was not exercised"
    );
}
