//! `Table::get_many` and `Table::get_many_view`: each Get of a batch returns what `Table::get`
//! returns for it, in the order asked (the view in row order, with each Get's index), every
//! Get of a batch reads at one read point, and a bad Get fails the batch before any row is
//! read, and a batch that reaches a damaged block fails with a corruption error.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use common::{damaged_db_value, one_file_with_a_damaged_block};

use cellar::{
    Db, Error, FamilyDescriptor, Filter, Get, Options, Put, Row, Table, TableDescriptor,
    WriteBatch, WriteOptions,
};

fn table(dir: &std::path::Path) -> (Db, Table) {
    let db = Db::open(dir, Options::default().write_buffer_size(64 << 10)).unwrap();
    db.create_table(
        TableDescriptor::new("t")
            .family(FamilyDescriptor::new("a").max_versions(3))
            .family(FamilyDescriptor::new("b")),
    )
    .unwrap();
    let t = db.table("t").unwrap();
    (db, t)
}

/// 2000 rows over flushed files and the memstore, a few with versions and columns in both
/// families.
fn load(db: &Db, t: &Table) {
    for i in 0..2000u32 {
        let row = format!("r{i:05}");
        let mut p = Put::new(row.as_str()).add("b", "q", format!("b{i}"));
        for v in 0..(i % 4) {
            p = p.add_at("a", format!("c{v}"), 100 + u64::from(v), format!("{i}.{v}"));
        }
        t.put(p).unwrap();
        if i % 3 == 0 {
            t.put(Put::new(row.as_str()).add_at("a", "c0", 50, "old"))
                .unwrap();
        }
        if i == 700 || i == 1400 {
            db.flush().unwrap();
        }
    }
}

fn gets() -> Vec<Get> {
    let mut gets = Vec::new();
    // Rows out of order, missing rows, a row twice, and every shape of Get.
    for i in (0..2100u32).rev().step_by(13) {
        gets.push(Get::new(format!("r{i:05}")));
    }
    gets.push(Get::new("r00013"));
    gets.push(Get::new("r00013").family("a").max_versions(3));
    gets.push(Get::new("r00015").column("a", "c0").max_versions(2));
    gets.push(Get::new("r00015").time_range(0, 101));
    gets.push(Get::new("r00999").family("b"));
    gets.push(Get::new("r01003").filter(Filter::RowPrefix(b"r010".to_vec())));
    gets.push(Get::new("r01003").filter(Filter::RowPrefix(b"r011".to_vec())));
    gets.push(Get::new("absent"));
    gets
}

fn one_by_one(t: &Table, gets: &[Get]) -> Vec<Option<Row>> {
    gets.iter().map(|g| t.get(g).unwrap()).collect()
}

fn viewed(t: &Table, gets: &[Get]) -> Vec<(usize, Option<Row>)> {
    let mut out = Vec::new();
    t.get_many_view(gets, |i, row| {
        if let Some(r) = &row {
            assert!(!r.is_empty());
        }
        out.push((i, row.map(|r| r.to_row())));
    })
    .unwrap();
    out
}

#[test]
fn each_get_of_a_batch_reads_what_a_single_get_reads() {
    let dir = tempfile::tempdir().unwrap();
    let (db, t) = table(dir.path());
    load(&db, &t);
    let gets = gets();
    let want = one_by_one(&t, &gets);
    assert!(want.iter().filter(|r| r.is_some()).count() > 100);
    assert!(want.iter().any(Option::is_none));
    assert_eq!(t.get_many(&gets).unwrap(), want);

    // The view: every Get once, in row order, each with its own index and row.
    let seen = viewed(&t, &gets);
    assert_eq!(seen.len(), gets.len());
    let rows: Vec<&[u8]> = seen.iter().map(|(i, _)| gets[*i].row.as_slice()).collect();
    assert!(rows.windows(2).all(|w| w[0] <= w[1]), "not in row order");
    let mut indexes: Vec<usize> = seen.iter().map(|(i, _)| *i).collect();
    indexes.sort_unstable();
    assert_eq!(indexes, (0..gets.len()).collect::<Vec<_>>());
    for (i, row) in &seen {
        assert_eq!(row, &want[*i], "{:?}", gets[*i]);
    }
    // Equal rows come in the order given.
    let dup: Vec<usize> = seen
        .iter()
        .map(|(i, _)| *i)
        .filter(|i| gets[*i].row == b"r00013")
        .collect();
    assert!(dup.windows(2).all(|w| w[0] < w[1]), "{dup:?}");

    // After a major compaction the files are new; the answers are not. Each row now has one
    // file and no memstore: the view stages its seeks ahead (DbInner::get_many_view).
    db.major_compact("t", None).unwrap();
    assert_eq!(t.get_many(&gets).unwrap(), want);
    for (i, row) in viewed(&t, &gets) {
        assert_eq!(row, want[i], "{:?}", gets[i]);
    }
    assert!(t.get_many(&[]).unwrap().is_empty());
    t.get_many_view(&[], |_, _| panic!("no row expected"))
        .unwrap();
}

#[test]
fn a_get_with_a_snapshot_keeps_its_own_read_point() {
    let dir = tempfile::tempdir().unwrap();
    let (db, t) = table(dir.path());
    t.put(Put::new("r1").add("b", "q", "old")).unwrap();
    let snap = db.snapshot();
    t.put(Put::new("r1").add("b", "q", "new")).unwrap();
    t.put(Put::new("r2").add("b", "q", "later")).unwrap();
    let rows = t
        .get_many(&[
            Get::new("r1").at(&snap),
            Get::new("r1"),
            Get::new("r2").at(&snap),
        ])
        .unwrap();
    let value = |r: &Option<Row>| {
        r.as_ref()
            .and_then(|r| r.value("b", "q"))
            .map(<[u8]>::to_vec)
    };
    assert_eq!(value(&rows[0]), Some(b"old".to_vec()));
    assert_eq!(value(&rows[1]), Some(b"new".to_vec()));
    assert_eq!(rows[2], None);
}

#[test]
fn a_bad_get_fails_the_batch() {
    let dir = tempfile::tempdir().unwrap();
    let (db, t) = table(dir.path());
    t.put(Put::new("r1").add("b", "q", "v")).unwrap();
    let never = |_: usize, _: Option<cellar::RowView<'_>>| panic!("no row expected");
    // An empty row anywhere in the batch: checked before the first row is read.
    let bad = [Get::new("r1"), Get::new("")];
    assert!(matches!(t.get_many(&bad), Err(Error::InvalidArgument(_))));
    assert!(matches!(
        t.get_many_view(&bad, never),
        Err(Error::InvalidArgument(_))
    ));
    let unknown = [Get::new("r1"), Get::new("r2").family("nope")];
    assert!(matches!(
        t.get_many(&unknown),
        Err(Error::FamilyNotFound { .. })
    ));
    let gone = db.table("t").unwrap();
    db.drop_table("t").unwrap();
    assert!(matches!(
        gone.get_many(&[Get::new("r1")]),
        Err(Error::TableNotFound(_))
    ));
}

/// A writer moves a value between two rows in atomic batches (the rows' sum stays 100); a
/// batch read must always see a sum of 100, since all its Gets read at one point. Reading the
/// two rows with two single Gets is not atomic: the test checks that it can see other sums
/// here, so the check on the batch is not vacuous.
#[test]
fn a_batch_reads_one_snapshot_while_writes_run() {
    let dir = tempfile::tempdir().unwrap();
    let (db, t) = table(dir.path());
    let write = |db: &Db, x: u32| {
        let batch = WriteBatch::new()
            .put("t", Put::new("x").add("b", "q", x.to_string()))
            .put("t", Put::new("y").add("b", "q", (100 - x).to_string()));
        db.write(batch, WriteOptions::default()).unwrap();
    };
    write(&db, 0);
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (db, stop) = (db.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut x = 0;
            while !stop.load(Ordering::Relaxed) {
                x = (x + 1) % 101;
                write(&db, x);
            }
        })
    };
    let num = |r: &Option<Row>| -> u32 {
        let v = r.as_ref().and_then(|r| r.value("b", "q")).unwrap();
        std::str::from_utf8(v).unwrap().parse().unwrap()
    };
    let gets = [Get::new("y"), Get::new("x")];
    let (mut torn_singles, mut batches) = (0, 0);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while (torn_singles == 0 || batches < 2000) && std::time::Instant::now() < deadline {
        let rows = t.get_many(&gets).unwrap();
        assert_eq!(num(&rows[0]) + num(&rows[1]), 100, "batch saw two points");
        let mut sum = 0;
        t.get_many_view(&gets, |_, row| {
            let v = row.and_then(|r| r.value("b", "q")).unwrap();
            sum += std::str::from_utf8(v).unwrap().parse::<u32>().unwrap();
        })
        .unwrap();
        assert_eq!(sum, 100, "view batch saw two points");
        batches += 1;
        if num(&t.get(&gets[0]).unwrap()) + num(&t.get(&gets[1]).unwrap()) != 100 {
            torn_singles += 1;
        }
    }
    stop.store(true, Ordering::Relaxed);
    writer.join().unwrap();
    assert!(batches >= 2000, "only {batches} batches");
    assert!(
        torn_singles > 0,
        "two single Gets never saw different points: the test cannot tell"
    );
}

/// A batch's rows staged ahead are read through the same checked paths as single Gets: a
/// batch that reaches a damaged data block fails with a corruption error (whether the stage
/// or the Get's own seek meets it), the other batches return what single Gets return, and
/// a later batch over the damaged block fails again instead of reading what a failed stage
/// left behind.
#[test]
fn a_batch_over_a_damaged_block_fails_and_the_others_read_right() {
    let dir = tempfile::tempdir().unwrap();
    one_file_with_a_damaged_block(dir.path());
    let value = damaged_db_value;
    let db = match Db::open(dir.path(), Options::default()) {
        Ok(db) => db,
        Err(e) => panic!("open checks no data block: {e:?}"),
    };
    let t = db.table("t").unwrap();
    let batch = |b: usize| -> Vec<Get> {
        // Ten rows of one stretch, asked for backward and with a missing row among them.
        let mut gets: Vec<Get> = (b * 10..b * 10 + 10)
            .rev()
            .map(|i| Get::new(format!("r{i:04}")))
            .collect();
        gets.push(Get::new(format!("r{:04}x", b * 10)));
        gets
    };
    let mut failed = Vec::new();
    for round in 0..2 {
        for b in 0..50 {
            match t.get_many(&batch(b)) {
                Ok(rows) => {
                    assert!(
                        !failed.contains(&b) || round == 0,
                        "batch {b} read after failing"
                    );
                    for (k, row) in rows.iter().enumerate() {
                        let want = (k < 10).then(|| value(b * 10 + 9 - k));
                        let got = row.as_ref().map(|r| {
                            String::from_utf8(r.value("a", "q").unwrap().to_vec()).unwrap()
                        });
                        assert_eq!(got, want, "batch {b}, get {k}");
                    }
                }
                Err(e) => {
                    assert!(
                        matches!(e, Error::Format(_) | Error::Corruption { .. }),
                        "{e:?}"
                    );
                    if round == 0 {
                        failed.push(b);
                    } else {
                        assert!(failed.contains(&b), "batch {b} failed only the second time");
                    }
                }
            }
        }
    }
    assert!(!failed.is_empty(), "no batch reached the damaged block");
    assert!(
        failed.len() <= 2,
        "batches {failed:?} failed: more than one 1 KiB block"
    );
}

/// A clock that moves `step` ms forward at each reading by the test's thread (the engine's
/// background threads read it without moving it).
#[derive(Debug)]
struct Ticking {
    now: std::sync::atomic::AtomicU64,
    step: std::sync::atomic::AtomicU64,
    owner: std::thread::ThreadId,
}

impl cellar::Clock for Ticking {
    fn now_ms(&self) -> u64 {
        if std::thread::current().id() == self.owner {
            self.now
                .fetch_add(self.step.load(Ordering::SeqCst), Ordering::SeqCst)
        } else {
            self.now.load(Ordering::SeqCst)
        }
    }
}

/// A batch reads the clock once, as it takes one read point: a TTL that runs out while the
/// batch reads its rows expires for all of its Gets or for none (here none: the batch's
/// reading is a millisecond before the cells expire, and every later reading after). Single
/// Gets read the clock each.
#[test]
fn a_batch_reads_the_clock_once() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(Ticking {
        now: std::sync::atomic::AtomicU64::new(5_000),
        step: std::sync::atomic::AtomicU64::new(0),
        owner: std::thread::current().id(),
    });
    let opts = Options {
        clock: clock.clone(),
        ..Options::default()
    };
    let db = Db::open(dir.path(), opts).unwrap();
    db.create_table(
        TableDescriptor::new("t")
            .family(FamilyDescriptor::new("a").ttl(std::time::Duration::from_millis(1_000))),
    )
    .unwrap();
    let t = db.table("t").unwrap();
    for i in 0..40 {
        t.put(Put::new(format!("r{i:02}")).add_at("a", "q", 10_000, "v"))
            .unwrap();
        if i == 19 {
            // Half in a file, half in the memstore: both of a batch's paths.
            db.flush().unwrap();
        }
    }
    // Every fourth Get filtered (a filter that keeps every row): a filtered Get of a batch
    // takes the single Get's path, with the batch's clock reading.
    let gets: Vec<Get> = (0..40)
        .map(|i| {
            let g = Get::new(format!("r{i:02}"));
            if i % 4 == 0 {
                g.filter(Filter::RowPrefix(b"r".to_vec()))
            } else {
                g
            }
        })
        .collect();
    // Written at 10,000 with a TTL of 1,000: alive until 11,000.
    clock.now.store(10_999, Ordering::SeqCst);
    clock.step.store(1_000, Ordering::SeqCst);
    let rows = t.get_many(&gets).unwrap();
    assert!(rows.iter().all(Option::is_some), "{rows:?}");
    let mut viewed = 0;
    clock.now.store(10_999, Ordering::SeqCst);
    t.get_many_view(&gets, |_, row| viewed += usize::from(row.is_some()))
        .unwrap();
    assert_eq!(viewed, 40);
    // Single Gets read the clock each: the first sees the cells, the next ones do not.
    clock.now.store(10_999, Ordering::SeqCst);
    let singles: Vec<bool> = gets.iter().map(|g| t.get(g).unwrap().is_some()).collect();
    assert!(
        singles[0] && !singles[1..].iter().any(|&s| s),
        "{singles:?}"
    );
}
