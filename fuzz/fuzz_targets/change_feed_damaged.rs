//! The change feed over a damaged WAL: a small database on `SimFs` keeps every flushed WAL
//! segment (`WalOptions::retain_bytes`), and its whole log read as a feed is the truth. An
//! input changes bytes of one WAL segment in a copy, which is opened (recovery may refuse it,
//! or cut a torn tail) and read as a feed from seq 0. Whatever the damage: no panic, and the
//! batches the feed hands out are a prefix of the truth, each exactly as written; the feed
//! then ends or fails with a typed error.
//!
//! Input: a segment index byte, then (offset u16 LE, xor byte) triples applied to it.
#![no_main]

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use cellar::fs::SimFs;
use cellar::wal::WalOptions;
use cellar::{ChangeBatch, Db, FamilyDescriptor, Options, Put, TableDescriptor};
use libfuzzer_sys::fuzz_target;

const DIR: &str = "/db";

fn options(fs: SimFs) -> Options {
    let mut o = Options {
        fs: Arc::new(fs),
        wal: WalOptions {
            segment_size: 8 << 10,
            retain_bytes: u64::MAX,
            ..WalOptions::default()
        },
        ..Options::default()
    }
    .write_buffer_size(16 << 10);
    o.compaction.threads = 0;
    o
}

struct Pristine {
    fs: SimFs,
    truth: Vec<ChangeBatch>,
    segments: Vec<PathBuf>,
}

fn drain(db: &Db) -> cellar::Result<Vec<ChangeBatch>> {
    let mut feed = db.changes_since(0)?;
    let mut out = Vec::new();
    while let Some(b) = feed.next_batch()? {
        out.push(b);
    }
    Ok(out)
}

fn pristine() -> &'static Pristine {
    static P: OnceLock<Pristine> = OnceLock::new();
    P.get_or_init(|| {
        let fs = SimFs::new();
        {
            let db = Db::open(DIR, options(fs.clone())).expect("open");
            db.create_table(
                TableDescriptor::new("t")
                    .family(FamilyDescriptor::new("a"))
                    .family(FamilyDescriptor::new("b")),
            )
            .expect("create");
            let t = db.table("t").expect("table");
            for i in 0..600u32 {
                t.put(
                    Put::new(format!("r{i:04}"))
                        .add_at("a", "q", u64::from(i), format!("{i}-{}", "v".repeat(40)))
                        .add_at("b", "z", 7, "w"),
                )
                .expect("put");
                if i % 150 == 149 {
                    db.flush().expect("flush");
                }
            }
            // Dropped without a close: the newest segment keeps records to replay.
        }
        let truth = {
            let db = Db::open(DIR, options(fs.fork())).expect("reopen");
            // Most segments must lie below the log number (flushed, kept for the feed), where
            // recovery does not read and only the feed finds damage.
            assert!(
                db.stats().wal.kept_segments >= 2,
                "the pristine database kept no flushed segment"
            );
            drain(&db).expect("the pristine feed")
        };
        assert!(truth.len() >= 600, "the pristine feed lost batches");
        let mut segments: Vec<PathBuf> = fs
            .files()
            .into_iter()
            .filter(|p| p.extension().is_some_and(|e| e == "wal2"))
            .collect();
        segments.sort();
        Pristine {
            fs,
            truth,
            segments,
        }
    })
}

fuzz_target!(|data: &[u8]| {
    let p = pristine();
    let Some((&which, edits)) = data.split_first() else {
        return;
    };
    let path: &Path = &p.segments[usize::from(which) % p.segments.len()];
    let edits = cellar_fuzz::byte_edits(edits);
    if edits.is_empty() {
        return;
    }
    let copy = p.fs.fork();
    let mut bytes = copy.contents(path).expect("segment");
    cellar_fuzz::apply_edits(&mut bytes, &edits);
    copy.set_contents(path, &bytes).expect("set");
    let Ok(db) = Db::open(DIR, options(copy)) else {
        return;
    };
    let Ok(mut feed) = db.changes_since(0) else {
        return;
    };
    let mut n = 0;
    while let Ok(Some(b)) = feed.next_batch() {
        assert!(
            n < p.truth.len() && b == p.truth[n],
            "batch {n} (seq {}) differs from the pristine feed after damaging {}",
            b.seq,
            path.display()
        );
        n += 1;
    }
});
