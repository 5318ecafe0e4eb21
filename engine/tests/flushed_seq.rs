//! `Db::flushed_seq`: every write at or below it survives without the WAL. Writers put with
//! `SkipWal` while memstores switch and flush in the background; the flushed sequence number
//! read at random moments never goes back, and after a power loss every write at or below
//! the last one read is there.

use std::path::Path;
use std::sync::Arc;

use cellar::fs::{CrashPolicy, SimFs};
use cellar::{Db, Durability, FamilyDescriptor, Get, Options, Put, TableDescriptor, WriteOptions};

#[test]
fn writes_at_or_below_the_flushed_seq_survive_a_power_loss_without_the_wal() {
    for seed in 0..3u64 {
        let sim = SimFs::new();
        let mut o = Options {
            fs: Arc::new(sim.clone()),
            ..Options::default()
        }
        .write_buffer_size(32 << 10);
        o.compaction.threads = 1;
        let db = Db::open(Path::new("/db"), o.clone()).unwrap();
        db.create_table(
            TableDescriptor::new("t")
                .family(FamilyDescriptor::new("a"))
                .family(FamilyDescriptor::new("b")),
        )
        .unwrap();
        let t = db.table("t").unwrap();
        let skip = WriteOptions::durability(Durability::SkipWal);
        let mut written = Vec::new();
        let mut last_flushed = 0;
        let mut checked = 0;
        for i in 0..4000u64 {
            let row = format!("r{seed}-{i:05}");
            let fam = if i % 3 == 0 { "b" } else { "a" };
            let seq = t
                .put_with(Put::new(row.as_str()).add(fam, "q", vec![b'v'; 64]), skip)
                .unwrap();
            written.push((seq, row, fam));
            if i % 97 == seed {
                let f = db.flushed_seq();
                assert!(
                    f >= last_flushed,
                    "flushed seq went back: {f} < {last_flushed}"
                );
                assert!(f <= seq, "flushed seq {f} above the last write's {seq}");
                last_flushed = f;
            }
        }
        assert!(last_flushed > 0, "no flush installed during the run");
        // The machine loses power: the memstores (and any WAL) are gone.
        let after = sim.crash(CrashPolicy::DropAll, seed);
        drop(t);
        drop(db);
        let db = Db::open(
            Path::new("/db"),
            Options {
                fs: Arc::new(after),
                ..o
            },
        )
        .unwrap();
        let t = db.table("t").unwrap();
        for (seq, row, fam) in written.iter().filter(|(s, ..)| *s <= last_flushed) {
            let got = t.get(&Get::new(row.as_str())).unwrap();
            assert!(
                got.is_some_and(|r| r.value(fam, "q").is_some()),
                "seed {seed}: write {seq} ({row}) at or below flushed seq {last_flushed} lost"
            );
            checked += 1;
        }
        assert!(checked > 100, "seed {seed}: {checked} writes checked");
    }
}
