//! The feed slots' file (SPEC.md §16.9): arbitrary bytes as a database's `FEED_SLOTS` →
//! `read_feed_slots` and `Db::open` never panic and agree: bytes the reader refuses fail the
//! open with `Corruption`; bytes it accepts open the database with those slots, each either
//! lost or holding a segment that serves its feed.
#![no_main]

use std::path::Path;
use std::sync::Arc;

use cellar::fs::{FileSystem, SimFs};
use cellar::{Db, Error, Options};
use libfuzzer_sys::fuzz_target;

fn options(fs: &SimFs) -> Options {
    let mut o = Options {
        fs: Arc::new(fs.clone()),
        ..Options::default()
    };
    o.compaction.threads = 0;
    o
}

fuzz_target!(|data: &[u8]| {
    let fs = SimFs::new();
    let dir = Path::new("/db");
    // Segments 1 (closed clean) and 2 (its successor) exist.
    Db::open(dir, options(&fs)).unwrap().close().unwrap();
    let f = fs.create(&dir.join(cellar::FEED_SLOTS)).unwrap();
    f.write_all_at(data, 0).unwrap();
    drop(f);
    let read = cellar::read_feed_slots(&fs, dir, &dir.join("wal"));
    match (read, Db::open(dir, options(&fs))) {
        (Err(Error::Corruption { .. }), Err(Error::Corruption { .. })) => {}
        (Ok(stored), Ok(db)) => {
            let open = db.feed_slots().unwrap();
            let names = |v: &[cellar::FeedSlotInfo]| -> Vec<String> {
                v.iter().map(|s| s.name.clone()).collect()
            };
            assert_eq!(names(&stored), names(&open));
            for (s, o) in stored.iter().zip(&open) {
                assert_eq!((s.acked, s.segment), (o.acked, o.segment));
                assert!(o.lost || !s.lost, "a lost slot came back");
                match db.feed_slot_changes(&o.name, Default::default()) {
                    Ok(mut feed) => {
                        assert!(!o.lost);
                        while feed.next_batch().unwrap().is_some() {}
                    }
                    Err(Error::FeedSlotLost(_)) => assert!(o.lost),
                    Err(e) => panic!("slot {}: {e}", o.name),
                }
            }
        }
        (r, o) => panic!("the reader says {r:?}, the open {o:?}"),
    }
});
