//! Helpers shared by the `db_*` integration tests: opening databases, looking at the files a
//! database leaves on disk, and walking WAL segments the way replay does.

#![allow(dead_code, reason = "each test binary uses a different subset")]

use std::path::{Path, PathBuf};

use cellar::{Db, FamilyDescriptor, Options, TableDescriptor};

/// Open `dir` with `opts`, panicking with the error on failure.
pub fn open(dir: &Path, opts: Options) -> Db {
    match Db::open(dir, opts) {
        Ok(db) => db,
        Err(e) => panic!("Db::open({}) failed: {e}", dir.display()),
    }
}

/// Open `dir` with default options.
pub fn open_default(dir: &Path) -> Db {
    open(dir, Options::default())
}

/// Open `dir` with default options but no background compaction: for tests that compare raw
/// scans (which show what is physically stored) taken at different moments.
pub fn open_without_compaction(dir: &Path) -> Db {
    let mut o = Options::default();
    o.compaction.threads = 0;
    open(dir, o)
}

/// A table descriptor with `families`, each with VERSIONS `versions`.
pub fn table_desc(name: &str, families: &[&str], versions: u32) -> TableDescriptor {
    families.iter().fold(TableDescriptor::new(name), |t, f| {
        t.family(FamilyDescriptor::new(*f).max_versions(versions))
    })
}

/// Every file under `dir`, recursively, sorted.
pub fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// The HFiles of a database (`data/<family>/<n>.hfile`), sorted.
pub fn hfiles(dir: &Path) -> Vec<PathBuf> {
    files_under(&dir.join("data"))
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "hfile"))
        .collect()
}

/// Bytes allocated on disk to all files under `dir` (as `du`; preallocated WAL segments
/// count what is allocated, not their apparent length).
pub fn du(dir: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    files_under(dir)
        .iter()
        .filter_map(|p| std::fs::metadata(p).ok())
        .map(|m| m.blocks() * 512)
        .sum()
}

/// WAL segment files of a database, by increasing number.
pub fn wal_segments(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir.join("wal"))
        .map(|rd| {
            rd.flatten()
                .map(|e| e.path())
                .filter(|p| {
                    p.file_name()
                        .and_then(|n| n.to_str())
                        .and_then(cellar::wal::parse_segment_name)
                        .is_some()
                })
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// `(start, payload start, end)` of every BATCH record in a WAL segment, in file order, from
/// offset 0 to the end of its data (leaving out a LINK and the SEAL of a clean close). Meant for
/// files written by a clean run: panics at anything that does not decode.
pub fn wal_records(path: &Path) -> Vec<(usize, usize, usize)> {
    use cellar::wal::record::{decode_wal, peek_wal_header, WalDecoded};
    let bytes = std::fs::read(path).unwrap();
    let name = path.file_name().unwrap().to_str().unwrap();
    let (segment, format) = cellar::wal::parse_segment_name(name).unwrap();
    let mut out = Vec::new();
    let mut off = 0usize;
    loop {
        match decode_wal(format, &bytes[off..], segment).unwrap() {
            WalDecoded::End => break,
            WalDecoded::Seal { len, .. } | WalDecoded::Link { len, .. } => off += len,
            WalDecoded::Record(r) => {
                let (header, _) = peek_wal_header(format, &bytes[off..]).unwrap();
                out.push((off, off + header, off + r.len));
                off += r.len;
            }
        }
    }
    out
}

/// The newest WAL segment that holds at least one record, with its records.
pub fn newest_wal_with_records(dir: &Path) -> (PathBuf, Vec<(usize, usize, usize)>) {
    wal_segments(dir)
        .into_iter()
        .rev()
        .map(|p| {
            let r = wal_records(&p);
            (p, r)
        })
        .find(|(_, r)| !r.is_empty())
        .expect("no WAL segment holds a record")
}

/// The value of row `r{i:04}` in [`one_file_with_a_damaged_block`]'s database.
pub fn damaged_db_value(i: usize) -> String {
    format!("{i:06}-{}", "v".repeat(90))
}

/// A database in `dir` whose table "t" (family "a", 1 KiB blocks) holds rows `r0000`–`r0499`
/// (column `a:q`, [`damaged_db_value`]) in one HFile, with a byte of one data block flipped.
/// The database is closed when this returns.
pub fn one_file_with_a_damaged_block(dir: &Path) {
    {
        let db = open_default(dir);
        db.create_table(
            cellar::TableDescriptor::new("t")
                .family(cellar::FamilyDescriptor::new("a").block_size(1024)),
        )
        .unwrap();
        let t = db.table("t").unwrap();
        for i in 0..500 {
            t.put(cellar::Put::new(format!("r{i:04}")).add_at("a", "q", 1, damaged_db_value(i)))
                .unwrap();
        }
        db.flush().unwrap();
    }
    let files = hfiles(dir);
    assert_eq!(files.len(), 1);
    let len = std::fs::metadata(&files[0]).unwrap().len();
    // Data blocks come first and are most of the file.
    flip_byte(&files[0], len / 3);
}

/// Flip every bit of the byte at `offset` of `path`.
pub fn flip_byte(path: &Path, offset: u64) {
    use std::os::unix::fs::FileExt;
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .unwrap();
    let mut b = [0u8; 1];
    f.read_exact_at(&mut b, offset).unwrap();
    b[0] ^= 0xff;
    f.write_all_at(&b, offset).unwrap();
    f.sync_all().unwrap();
}

/// Writer threads each putting rows `w{w}-{i:08}` to families `a` and `b` of `table` in one
/// `RowMutations` (value: `i` zero-padded to 200 bytes), counting what was acknowledged: for
/// tests that cut a copy of the table while they write (checkpoints, table snapshots) and
/// check it holds whole batches and every acknowledged one.
pub struct BatchWriters {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    acked: std::sync::Arc<Vec<std::sync::atomic::AtomicU64>>,
    handles: Vec<std::thread::JoinHandle<()>>,
}

impl BatchWriters {
    /// Start `n` writers on `table`.
    pub fn start(db: &Db, table: &str, n: usize) -> BatchWriters {
        use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
        use std::sync::Arc;
        let stop = Arc::new(AtomicBool::new(false));
        let acked: Arc<Vec<AtomicU64>> = Arc::new((0..n).map(|_| AtomicU64::new(0)).collect());
        let handles = (0..n)
            .map(|w| {
                let (db, stop, acked) = (db.clone(), stop.clone(), acked.clone());
                let t = db.table(table).unwrap();
                std::thread::spawn(move || {
                    let mut i = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        i += 1;
                        let row = format!("w{w}-{i:08}");
                        let v = format!("{i:0>200}");
                        let rm = cellar::RowMutations::new(row.clone())
                            .put(cellar::Put::new(row.clone()).add("a", "q", v.clone()))
                            .put(cellar::Put::new(row).add("b", "q", v));
                        t.mutate_row(rm, cellar::WriteOptions::default()).unwrap();
                        acked[w].store(i, Ordering::Release);
                    }
                })
            })
            .collect();
        BatchWriters {
            stop,
            acked,
            handles,
        }
    }

    /// Batches each writer has had acknowledged.
    pub fn acked(&self) -> Vec<u64> {
        use std::sync::atomic::Ordering;
        self.acked
            .iter()
            .map(|a| a.load(Ordering::Acquire))
            .collect()
    }

    /// Wait until every writer has had `n` batches acknowledged.
    pub fn wait_for(&self, n: u64) {
        while self.acked().iter().any(|&a| a < n) {
            std::thread::yield_now();
        }
    }

    /// Stop the writers and join them.
    pub fn stop(self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        for h in self.handles {
            h.join().unwrap();
        }
    }
}

/// One random batch of writer `w` for the replication tests: rows `r000`..`r059` of table `t`
/// (families `a`, `b`, three qualifiers, timestamps 1..200), every marker kind (a version, a
/// column, a family, a family version, the newest version), and puts, some of them in one
/// batch with a put to `ns:u` (family `c`).
pub fn random_replication_batch(rng: &mut rand::rngs::StdRng, w: u64) -> cellar::WriteBatch {
    use cellar::{Delete, Put, WriteBatch};
    use rand::Rng;
    let row = format!("r{:03}", rng.random_range(0..60));
    let ts = rng.random_range(1..200u64);
    let fam = ["a", "b"][rng.random_range(0..2)];
    let q = format!("q{}", rng.random_range(0..3));
    match rng.random_range(0..10) {
        0 => WriteBatch::new().delete("t", Delete::new(row).column_at(fam, q, ts)),
        1 => WriteBatch::new().delete("t", Delete::new(row).columns_at(fam, q, ts)),
        2 => WriteBatch::new().delete("t", Delete::new(row).family_at(fam, ts)),
        3 => WriteBatch::new().delete("t", Delete::new(row).family_version(fam, ts)),
        4 => WriteBatch::new().delete("t", Delete::new(row).column(fam, q)),
        5 => WriteBatch::new()
            .put("t", Put::new(row.clone()).add_at(fam, q, ts, "x"))
            .put("ns:u", Put::new(row).add_at("c", "z", ts, format!("{w}"))),
        _ => WriteBatch::new().put(
            "t",
            Put::new(row).add_at(fam, q, ts, format!("{w}-{ts}-{}", "v".repeat(60))),
        ),
    }
}
