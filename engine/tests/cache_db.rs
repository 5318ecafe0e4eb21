//! The block cache and the open-file cache seen through a `Db`: repeated Gets are served from
//! the cache, a scan larger than the cache stays within its bytes, a small `max_open_files`
//! bounds open readers without changing any answer, dropped files leave both caches, and the
//! stats report all of it. One ignored test prints Get throughput with and without the cache.

mod common;

use std::time::Instant;

use cellar::{Db, FamilyDescriptor, Get, Options, Put, Scan, TableDescriptor};
use common::open;

/// A table `t` with one family `f` of small blocks, so a few rows make many blocks.
fn small_block_table(db: &Db) {
    db.create_table(TableDescriptor::new("t").family(FamilyDescriptor::new("f").block_size(4096)))
        .unwrap();
}

fn row(i: u32) -> String {
    format!("row{i:06}")
}

fn value(i: u32, len: usize) -> Vec<u8> {
    let mut v = format!("v{i}-").into_bytes();
    v.resize(len, b'x');
    v
}

/// Rows `range` with values of `len` bytes.
fn put_rows(db: &Db, range: std::ops::Range<u32>, len: usize) {
    let t = db.table("t").unwrap();
    for i in range {
        t.put(Put::new(row(i)).add("f", "q", value(i, len)))
            .unwrap();
    }
}

fn get_value(db: &Db, i: u32) -> Option<Vec<u8>> {
    let r = db
        .table("t")
        .unwrap()
        .get(&Get::new(row(i)).column("f", "q"))
        .unwrap()?;
    r.value("f", "q").map(<[u8]>::to_vec)
}

#[test]
fn repeated_gets_hit_the_cache() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(
        dir.path(),
        Options {
            block_cache_bytes: 4 << 20,
            ..Options::default()
        },
    );
    small_block_table(&db);
    put_rows(&db, 0..2_000, 200);
    db.flush().unwrap();

    assert_eq!(get_value(&db, 777), Some(value(777, 200)));
    let warm = db.stats().block_cache;
    assert!(warm.misses > 0 && warm.inserts > 0, "{warm:?}");
    for _ in 0..100 {
        assert_eq!(get_value(&db, 777), Some(value(777, 200)));
    }
    let after = db.stats().block_cache;
    assert_eq!(after.misses, warm.misses, "a warm row costs no block read");
    assert!(after.hits >= warm.hits + 100, "{after:?}");
    // The root index stays in the reader; the data block and the bloom chunk come from the
    // cache (a 4 MiB cache's meta share is all its meta pool's floor, so its readers pin
    // nothing).
    assert!(
        after.data.hits >= 100 && after.bloom.hits >= 100,
        "{after:?}"
    );
    assert!(after.hit_ratio() > 0.9);
    assert_eq!(after.evictions, 0);
    assert!(after.usage > 0 && after.usage <= after.capacity);
}

#[test]
fn scan_larger_than_the_cache_stays_within_capacity() {
    let dir = tempfile::tempdir().unwrap();
    let cap = 256 << 10;
    let db = open(
        dir.path(),
        Options {
            block_cache_bytes: cap,
            ..Options::default()
        },
    );
    small_block_table(&db);
    // About 2 MiB of cells: eight times the cache.
    put_rows(&db, 0..2_000, 1_000);
    db.flush().unwrap();

    let t = db.table("t").unwrap();
    for pass in 0..2 {
        let rows: Vec<_> = t.scan(Scan::new()).unwrap().map(|r| r.unwrap()).collect();
        assert_eq!(rows.len(), 2_000, "pass {pass}");
        for (i, r) in rows.iter().enumerate() {
            assert_eq!(r.key, row(i as u32).into_bytes());
            assert_eq!(r.value("f", "q"), Some(&value(i as u32, 1_000)[..]));
        }
        let s = db.stats().block_cache;
        assert!(s.capacity <= cap as u64 && s.capacity > 0);
        assert!(s.usage <= s.capacity, "{} > {}", s.usage, s.capacity);
        assert!(
            s.data.evictions > 0,
            "the scan cycles blocks through: {s:?}"
        );
    }
    // Point reads still work and fill the cache back within bounds.
    for i in (0..2_000).step_by(97) {
        assert_eq!(get_value(&db, i), Some(value(i, 1_000)));
    }
    let s = db.stats().block_cache;
    assert!(s.usage <= s.capacity);
}

#[test]
fn few_open_files_many_flushed_files() {
    let dir = tempfile::tempdir().unwrap();
    let opts = Options {
        max_open_files: 4,
        block_cache_bytes: 1 << 20,
        // No compaction thread: the test wants many files.
        compaction: cellar::compaction::CompactionOptions {
            threads: 0,
            ..Default::default()
        },
        ..Options::default()
    };
    let db = open(dir.path(), opts.clone());
    small_block_table(&db);
    // 20 files with disjoint rows, plus overwrites of every 10th row in the newest file.
    for f in 0..20u32 {
        put_rows(&db, f * 100..(f + 1) * 100, 64);
        db.flush().unwrap();
    }
    let t = db.table("t").unwrap();
    for i in (0..2_000u32).step_by(10) {
        t.put(Put::new(row(i)).add("f", "q", b"new".to_vec()))
            .unwrap();
    }
    db.flush().unwrap();
    assert_eq!(db.stats().live_files, 21);

    let check = |db: &Db| {
        for round in 0..2 {
            for i in 0..2_000u32 {
                let want = if i % 10 == 0 {
                    b"new".to_vec()
                } else {
                    value(i, 64)
                };
                assert_eq!(get_value(db, i), Some(want), "row {i}, round {round}");
                assert!(db.stats().open_files.open <= 4);
            }
        }
        let scanned = db.table("t").unwrap().scan(Scan::new()).unwrap().count();
        assert_eq!(scanned, 2_000);
        let s = db.stats().open_files;
        assert!(s.open <= 4 && s.capacity == 4, "{s:?}");
        assert!(s.evictions > 0 && s.opens > 21 && s.hits > 0, "{s:?}");
    };
    check(&db);
    drop((t, db));
    let db = open(dir.path(), opts);
    check(&db);
}

#[test]
fn dropped_files_leave_both_caches() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path(), Options::default());
    small_block_table(&db);
    put_rows(&db, 0..500, 100);
    db.flush().unwrap();
    for i in 0..500 {
        assert!(get_value(&db, i).is_some());
    }
    let s = db.stats();
    assert!(s.block_cache.entries > 0 && s.open_files.open == 1, "{s:?}");
    db.drop_table("t").unwrap();
    let s = db.stats();
    assert_eq!(s.block_cache.entries, 0);
    assert_eq!(s.block_cache.usage, 0);
    assert_eq!(s.open_files.open, 0);

    // A new table's files get new numbers: nothing of the old one is served.
    small_block_table(&db);
    put_rows(&db, 0..10, 5);
    db.flush().unwrap();
    assert_eq!(get_value(&db, 3), Some(value(3, 5)));
    assert_eq!(get_value(&db, 300), None);
}

/// A compaction's inputs leave the block cache when it installs, even while a reader still
/// holds the old version and the files wait for deletion: their blocks no longer serve new
/// reads, and kept until the deletion pass they filled the cache past the live data (peak RSS
/// of `compare` after a seek compaction during readrandom).
#[test]
fn compacted_inputs_leave_the_block_cache_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path(), Options::default());
    small_block_table(&db);
    for part in 0..3 {
        put_rows(&db, part * 300..(part + 1) * 300, 100);
        db.flush().unwrap();
    }
    for i in 0..900 {
        assert!(get_value(&db, i).is_some());
    }
    let warm = db.stats().block_cache;
    assert!(warm.data.inserts > 0, "{warm:?}");
    assert!(
        warm.pinned > 0,
        "the readers hold their bloom chunks: {warm:?}"
    );
    // An open scan pins the version listing the three flushed files.
    let t = db.table("t").unwrap();
    let mut scan = t.scan(Scan::new()).unwrap();
    assert!(scan.next().is_some());
    db.major_compact("t", None).unwrap();
    let s = db.stats();
    assert!(
        s.compaction.awaiting_deletion >= 3,
        "the scan keeps the inputs alive: {:?}",
        s.compaction
    );
    // Anything left is what readers still open on the old files hold themselves, charged to
    // the cache until they drop.
    assert_eq!(
        s.block_cache.usage, s.block_cache.pinned,
        "blocks of compacted inputs stayed cached: {:?}",
        s.block_cache
    );
    // The scan still reads the old files, from disk, to the end. The readers the Gets
    // opened left the open-file cache at install, giving back the bloom chunks and block
    // maps they pinned (the scan opens its own, lazily, through the open-file cache again;
    // those stay until the files are deleted, below). The scan's readers pin no bloom chunk,
    // only the block maps its refills' seeks build, smaller than what the Gets held.
    assert_eq!(scan.count(), 899);
    let s = db.stats().block_cache;
    assert!(s.pinned < warm.pinned, "{s:?} against {warm:?}");
    // Once the files are deleted (a flush wakes the compaction thread, whose idle pass
    // deletes them), the readers the scan reopened leave the open-file cache and the blocks
    // it read leave the block cache.
    put_rows(&db, 2000..2001, 10);
    db.flush().unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while db.stats().compaction.awaiting_deletion > 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "the inputs were never deleted"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let s = db.stats().block_cache;
    assert_eq!(
        (s.usage, s.pinned),
        (0, 0),
        "the last readers gave back: {s:?}"
    );
    assert_eq!(get_value(&db, 5), Some(value(5, 100)));
}

#[test]
fn stats_report_the_memory_budget() {
    let d = Options::default();
    assert_eq!(d.block_cache_bytes, 256 << 20);
    assert_eq!(d.memory_budget_bytes(), 512 << 20);
    let o = Options::default().memory_budget(64 << 20);
    assert_eq!(o.block_cache_bytes, 32 << 20);
    assert_eq!(o.write_buffer_size, 8 << 20);
    assert_eq!(o.slowdown_write_buffer_size, 24 << 20);
    assert_eq!(o.stop_write_buffer_size, 32 << 20);

    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path(), o);
    let s = db.stats();
    assert_eq!(s.memory_budget.total(), 64 << 20);
    assert_eq!(s.memory_budget.block_cache_bytes, 32 << 20);
    assert!(s.block_cache.capacity <= 32 << 20 && s.block_cache.capacity > 31 << 20);
    // The meta pool starts at its floor: sharded for a quarter of its 8 MiB share, 2 shards
    // of 1 MiB, leaving the rest of the share to pins and, until then, to data blocks.
    assert_eq!(s.block_cache.meta_capacity, 2 << 20);
    // 1000, or a little less when the shard count does not divide it.
    assert!(s.open_files.capacity <= 1000 && s.open_files.capacity > 900);
    assert_eq!(s.block_cache.hit_ratio(), 0.0);

    // Turned off: reads work, nothing is cached.
    let dir = tempfile::tempdir().unwrap();
    let db = open(
        dir.path(),
        Options {
            block_cache_bytes: 0,
            ..Options::default()
        },
    );
    small_block_table(&db);
    put_rows(&db, 0..100, 10);
    db.flush().unwrap();
    assert_eq!(get_value(&db, 42), Some(value(42, 10)));
    let s = db.stats().block_cache;
    assert_eq!((s.capacity, s.hits, s.misses), (0, 0, 0));
}

/// Figures, not a check: `cargo test --release -p cellar --test cache_db -- --ignored
/// --nocapture`. Random Gets over 4 flushed files, with the block cache on and off.
#[test]
#[ignore = "measurement; prints figures"]
fn measure_get_throughput_with_and_without_cache() {
    const ROWS: u32 = 100_000;
    const GETS: u32 = 100_000;
    for cache in [64usize << 20, 4 << 20, 0] {
        let dir = tempfile::tempdir().unwrap();
        let db = open(
            dir.path(),
            Options {
                block_cache_bytes: cache,
                ..Options::default()
            },
        );
        db.create_table(TableDescriptor::new("t").family(FamilyDescriptor::new("f")))
            .unwrap();
        for f in 0..4u32 {
            let t = db.table("t").unwrap();
            for i in (f..ROWS).step_by(4) {
                t.put(Put::new(row(i)).add("f", "q", value(i, 100)))
                    .unwrap();
            }
            db.flush().unwrap();
        }
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let start = Instant::now();
        for _ in 0..GETS {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let i = (x % u64::from(ROWS)) as u32;
            assert!(get_value(&db, i).is_some());
        }
        let secs = start.elapsed().as_secs_f64();
        let s = db.stats().block_cache;
        eprintln!(
            "block cache {:>3} MiB: {:>8.0} Gets/s, hit ratio {:.3} (data {}/{}, index {}/{}, \
             bloom {}/{} hits/lookups), usage {} KiB, evictions {}",
            cache >> 20,
            f64::from(GETS) / secs,
            s.hit_ratio(),
            s.data.hits,
            s.data.hits + s.data.misses,
            s.index.hits,
            s.index.hits + s.index.misses,
            s.bloom.hits,
            s.bloom.hits + s.bloom.misses,
            s.usage >> 10,
            s.evictions,
        );
    }
}
