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
                .filter(|p| p.extension().is_some_and(|e| e == "wal"))
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// WAL record header length (SPEC.md §16.2).
pub const WAL_HEADER: usize = 33;

/// `(start, end)` of every record written in a WAL segment: walks length fields from offset 0
/// until an all-zero header (the preallocated tail) or the end of the file, leaving out the
/// SEAL (kind 2) of a clean close. Does not check checksums; meant for files written by a
/// clean run.
pub fn wal_records(path: &Path) -> Vec<(usize, usize)> {
    let bytes = std::fs::read(path).unwrap();
    let mut out = Vec::new();
    let mut off = 0usize;
    while off + WAL_HEADER <= bytes.len() {
        let header = &bytes[off..off + WAL_HEADER];
        if header.iter().all(|&b| b == 0) {
            break;
        }
        let len = u32::from_le_bytes(header[4..8].try_into().unwrap()) as usize;
        let end = off + WAL_HEADER + len;
        assert!(end <= bytes.len(), "record at {off} runs past the file");
        if header[8] != 2 {
            out.push((off, end));
        }
        off = end;
    }
    out
}

/// The newest WAL segment that holds at least one record, with its records.
pub fn newest_wal_with_records(dir: &Path) -> (PathBuf, Vec<(usize, usize)>) {
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
