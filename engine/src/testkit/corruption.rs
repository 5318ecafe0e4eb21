//! Bit flips in every file and block type of a small database (RELIABILITY.md §2.4, invariant
//! 7): the body of `tests/corruption_sweep.rs` and of the "corruption" section of `cellar
//! reliability-report`.
//!
//! The database, on a [`SimFs`]: one table, family `a` with a row bloom and `b` with a
//! row+column bloom, 1 KiB blocks (many data blocks per file), three flushes (several HFiles
//! per family, some compacted by the background L0 trigger), then `FsyncWal` writes left
//! unflushed (WAL records replayed at open), a manifest and CURRENT. Closed cleanly, so every
//! WAL byte is synced and attested.
//!
//! Each case copies the pristine file system, flips one bit, opens the copy and reads
//! everything (a scan of all versions, and a Get per row written plus rows never written, by
//! row and by column, which consults the blooms). The outcome must be a typed error on open or
//! on a read, or results identical to the pristine database's — never a different answer (a
//! corrupted bloom's false "not found" included) and never a panic (caught and reported).
//!
//! Offsets are classified by what they hold: HFile data, root index, other index, bloom
//! chunk, bloom meta, file info, trailer; WAL record header, payload and the preallocated zero
//! tail; manifest record header and payload; CURRENT.

use std::collections::BTreeMap;
use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::format::block::BLOCK_TRAILER_LEN;
use crate::format::{HFileReader, TRAILER_LEN};
use crate::fs::SimFs;
use crate::wal::record::{peek_wal_header, HEADER_LEN as MANIFEST_HEADER};
use crate::wal::WalOptions;
use crate::{
    BloomType, Db, Durability, Error, FamilyDescriptor, Get, Options, Put, Scan, TableDescriptor,
    WriteOptions,
};

/// The database directory in the simulated file system.
pub const DIR: &str = "/db";
const TABLE: &str = "t";
const ROWS: u32 = 400;

/// Every class a sweep must find in the database and see detected at least once.
pub const REQUIRED_CLASSES: [&str; 11] = [
    "hfile.data",
    "hfile.root_index",
    "hfile.bloom_chunk",
    "hfile.bloom_meta",
    "hfile.file_info",
    "hfile.trailer",
    "wal.header",
    "wal.payload",
    "manifest.header",
    "manifest.payload",
    "current",
];

/// The options of the canonical database and of every open of a damaged copy.
pub fn options(fs: SimFs) -> Options {
    Options {
        fs: Arc::new(fs),
        wal: WalOptions {
            segment_size: 16 << 10,
            ..WalOptions::default()
        },
        ..Options::default()
    }
    .write_buffer_size(1 << 20)
}

/// Open the database on `fs`.
pub fn open(fs: SimFs) -> crate::Result<Db> {
    Db::open(DIR, options(fs))
}

fn key(i: u32) -> String {
    format!("row{i:05}")
}

fn value(i: u32, f: &str, round: u32) -> String {
    format!("{f}-{i}-{round}-{}", "z".repeat((i % 13) as usize))
}

fn build(fs: &SimFs) -> crate::Result<()> {
    let db = open(fs.clone())?;
    db.create_table(
        TableDescriptor::new(TABLE)
            .family(
                FamilyDescriptor::new("a")
                    .bloom(BloomType::Row)
                    .block_size(1024)
                    .max_versions(3),
            )
            .family(
                FamilyDescriptor::new("b")
                    .bloom(BloomType::RowCol)
                    .block_size(1024)
                    .max_versions(3),
            ),
    )?;
    let t = db.table(TABLE)?;
    for round in 0..3 {
        for i in (round..ROWS).step_by(2) {
            t.put(
                Put::new(key(i).as_str())
                    .add("a", "x", value(i, "a", round))
                    .add("b", "y", value(i, "b", round)),
            )?;
        }
        db.flush()?;
    }
    db.wait_for_compactions()?;
    // Unflushed, durable: replayed from the WAL at every open.
    for i in (0..ROWS).step_by(7) {
        t.put_with(
            Put::new(key(i).as_str()).add("a", "x", value(i, "a", 9)),
            WriteOptions::durability(Durability::FsyncWal),
        )?;
    }
    Ok(())
}

/// Everything the database answers: a full scan of all versions, then per-row and per-column
/// Gets (rows past the last written were never written: a bloom must not turn a row into "not
/// found" or the reverse).
pub fn read_all(db: &Db) -> crate::Result<Vec<String>> {
    let t = db.table(TABLE)?;
    let mut out = Vec::new();
    for r in t.scan(Scan::new().all_versions())? {
        out.push(format!("{:?}", r?));
    }
    for i in (0..ROWS + 40).step_by(3) {
        let k = key(i);
        out.push(format!("{:?}", t.get(&Get::new(k.as_str()))?));
        out.push(format!(
            "{:?}",
            t.get(&Get::new(k.as_str()).column("b", "y"))?
        ));
    }
    Ok(out)
}

/// A byte range of a file and what it holds: `(class, start, end)`.
pub type Range = (&'static str, u64, u64);

/// The byte ranges of a file, by what they hold.
pub fn classify(name: &str, bytes: &[u8]) -> Result<Vec<Range>, String> {
    let len = bytes.len() as u64;
    if name.ends_with(crate::manifest::HFILE_SUFFIX) {
        let r = HFileReader::open(bytes.to_vec(), name.to_string())
            .map_err(|e| format!("{name}: {e}"))?;
        let tr = *r.trailer();
        let span = |h: crate::format::BlockHandle| {
            (h.offset, h.offset + h.stored_len + BLOCK_TRAILER_LEN as u64)
        };
        let mut known: Vec<(&'static str, (u64, u64))> = vec![
            (
                "hfile.trailer",
                (len.saturating_sub(TRAILER_LEN as u64), len),
            ),
            ("hfile.root_index", span(tr.root_index)),
            ("hfile.file_info", span(tr.file_info)),
        ];
        if let Some(h) = tr.bloom_meta {
            known.push(("hfile.bloom_meta", span(h)));
        }
        if let Some(m) = r.bloom_meta() {
            for c in &m.chunks {
                known.push(("hfile.bloom_chunk", span(c.handle)));
            }
        }
        let data_end = r.data_end();
        let mut out: Vec<Range> = Vec::new();
        for o in 0..len {
            let class = known
                .iter()
                .find(|(_, (s, e))| (*s..*e).contains(&o))
                .map(|(c, _)| *c)
                .unwrap_or(if o < data_end {
                    "hfile.data"
                } else {
                    "hfile.other_index"
                });
            match out.last_mut() {
                Some((c, _, e)) if *c == class && *e == o => *e = o + 1,
                _ => out.push((class, o, o + 1)),
            }
        }
        return Ok(out);
    }
    if name == crate::manifest::CURRENT {
        return Ok(vec![("current", 0, len)]);
    }
    // WAL segments and manifests share the record framing (WAL headers vary in length).
    let wal = !name.starts_with(crate::manifest::log::MANIFEST_PREFIX);
    let (h, p, z) = if wal {
        ("wal.header", "wal.payload", "wal.preallocated_tail")
    } else {
        ("manifest.header", "manifest.payload", "manifest.tail")
    };
    let format = crate::wal::segment_format(Path::new(name));
    let mut out = Vec::new();
    let mut o = 0u64;
    loop {
        let rest = &bytes[o as usize..];
        let (header, n) = if wal {
            match peek_wal_header(format, rest) {
                Some((hl, n)) => (hl as u64, n as u64),
                None => break,
            }
        } else {
            let header = MANIFEST_HEADER as u64;
            if o + header > len || rest[..header as usize].iter().all(|&b| b == 0) {
                break;
            }
            (
                header,
                u64::from(u32::from_le_bytes([rest[4], rest[5], rest[6], rest[7]])),
            )
        };
        out.push((h, o, o + header));
        let end = (o + header).saturating_add(n).min(len);
        if end > o + header {
            out.push((p, o + header, end));
        }
        o = end;
    }
    if o < len {
        out.push((z, o, len));
    }
    Ok(out)
}

/// Whether `e` reports damage (rather than another failure).
pub fn is_corruption(e: &Error) -> bool {
    match e {
        Error::Corruption { .. } => true,
        Error::Format(f) => f.is_corruption() || f.kind() == crate::format::ErrorKind::Unsupported,
        _ => false,
    }
}

/// Reorder `v` so that every prefix is spread over the whole: position `i` goes by the bits
/// of `i` reversed (0, ½, ¼, ¾, …).
fn spread(v: &mut Vec<u64>) {
    let mut keyed: Vec<(u64, u64)> = v
        .iter()
        .enumerate()
        .map(|(i, &x)| ((i as u64).reverse_bits(), x))
        .collect();
    keyed.sort_unstable();
    *v = keyed.into_iter().map(|(_, x)| x).collect();
}

/// One bit flip.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Case {
    /// The file.
    pub path: PathBuf,
    /// What the byte holds.
    pub class: &'static str,
    /// The byte.
    pub offset: u64,
    /// The bit (0..8).
    pub bit: u8,
}

impl std::fmt::Display for Case {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} offset {} bit {} ({})",
            self.path.display(),
            self.offset,
            self.bit,
            self.class
        )
    }
}

/// What a damaged copy did.
#[derive(Debug)]
pub enum Outcome {
    /// Answered exactly as the pristine database.
    Unchanged,
    /// Open failed.
    DetectedOnOpen(Error),
    /// A read failed.
    DetectedOnRead(Error),
    /// A different answer: a violation.
    Wrong(String),
    /// A panic: a violation.
    Panic(String),
}

/// Outcomes of one class.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct ClassTally {
    /// Cases run.
    pub cases: u64,
    /// Open failed with a corruption error.
    pub detected_on_open: u64,
    /// A read failed with a corruption error.
    pub detected_on_read: u64,
    /// Detected, but as an error other than corruption (refused, not a wrong answer).
    pub other_error: u64,
    /// Answers identical to the pristine ones (a bit no answer depends on, or one that a
    /// checksum did not need to catch because the damaged structure is never read).
    pub unchanged: u64,
    /// Different answers.
    pub wrong: u64,
    /// Panics.
    pub panics: u64,
}

impl ClassTally {
    /// Count `o`.
    pub fn add(&mut self, o: &Outcome) {
        self.cases += 1;
        match o {
            Outcome::Unchanged => self.unchanged += 1,
            Outcome::DetectedOnOpen(e) | Outcome::DetectedOnRead(e) if !is_corruption(e) => {
                self.other_error += 1
            }
            Outcome::DetectedOnOpen(_) => self.detected_on_open += 1,
            Outcome::DetectedOnRead(_) => self.detected_on_read += 1,
            Outcome::Wrong(_) => self.wrong += 1,
            Outcome::Panic(_) => self.panics += 1,
        }
    }

    /// Detected in any way.
    pub fn detected(&self) -> u64 {
        self.detected_on_open + self.detected_on_read + self.other_error
    }
}

/// The canonical database, its answers, and the classes of its bytes.
#[derive(Debug)]
pub struct Pristine {
    fs: SimFs,
    expected: Vec<String>,
    /// Every file (LOCK aside) with its classified ranges.
    pub files: Vec<(PathBuf, Vec<Range>)>,
}

impl Pristine {
    /// Build the database and read its answers.
    pub fn build() -> Result<Pristine, String> {
        let fs = SimFs::new();
        build(&fs).map_err(|e| format!("building the database: {e}"))?;
        // Opening writes a new manifest and flushes the WAL: answers come from a copy.
        let expected = {
            let db = open(fs.fork()).map_err(|e| format!("opening the copy: {e}"))?;
            read_all(&db).map_err(|e| format!("reading the copy: {e}"))?
        };
        let mut files = Vec::new();
        for path in fs.files() {
            let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
                continue;
            };
            if name == "LOCK" {
                continue;
            }
            let bytes = fs
                .contents(&path)
                .ok_or_else(|| format!("{}: vanished", path.display()))?;
            files.push((path.clone(), classify(name, &bytes)?));
        }
        Ok(Pristine {
            fs,
            expected,
            files,
        })
    }

    /// Length of `path` in the pristine database (0 if it has no such file).
    pub fn file_len(&self, path: &Path) -> usize {
        self.fs.contents(path).map_or(0, |b| b.len())
    }

    /// Bytes of each class in the database (the denominators of a sampled sweep).
    pub fn bytes_by_class(&self) -> BTreeMap<&'static str, u64> {
        let mut out = BTreeMap::new();
        for (_, ranges) in &self.files {
            for (c, s, e) in ranges {
                *out.entry(*c).or_insert(0) += e - s;
            }
        }
        out
    }

    /// The cases of a sweep: per file and class, `per_class` offsets spread evenly over the
    /// class's bytes (`None`: every byte), one pseudo-random bit each, drawn from `seed`.
    /// Ordered round-robin over the (file, class) groups, each group's offsets in a
    /// van der Corput order, so any prefix covers every class and spreads over its bytes.
    pub fn cases(&self, per_class: Option<u64>, seed: u64) -> Vec<Case> {
        let mut groups: Vec<Vec<Case>> = Vec::new();
        let mut state = seed;
        for (path, ranges) in &self.files {
            let mut by_class: BTreeMap<&'static str, Vec<u64>> = BTreeMap::new();
            for (class, s, e) in ranges {
                by_class.entry(*class).or_default().extend(*s..*e);
            }
            for (class, all) in by_class {
                let n = all.len();
                let mut offsets: Vec<u64> = match per_class {
                    Some(k) if (k as usize) < n => {
                        (0..k as usize).map(|i| all[i * n / k as usize]).collect()
                    }
                    _ => all,
                };
                spread(&mut offsets);
                let group = offsets
                    .into_iter()
                    .map(|offset| {
                        state = state
                            .wrapping_mul(6_364_136_223_846_793_005)
                            .wrapping_add(1_442_695_040_888_963_407);
                        Case {
                            path: path.clone(),
                            class,
                            offset,
                            bit: (state >> 61) as u8,
                        }
                    })
                    .collect();
                groups.push(group);
            }
        }
        let longest = groups.iter().map(Vec::len).max().unwrap_or(0);
        let mut out = Vec::new();
        for i in 0..longest {
            for g in &groups {
                if let Some(c) = g.get(i) {
                    out.push(c.clone());
                }
            }
        }
        out
    }

    /// A copy of the database with `path`'s bytes changed by `damage`.
    pub fn damaged(&self, path: &Path, damage: impl FnOnce(&mut Vec<u8>)) -> Result<SimFs, String> {
        let copy = self.fs.fork();
        let mut bytes = copy
            .contents(path)
            .ok_or_else(|| format!("{}: no such file", path.display()))?;
        damage(&mut bytes);
        copy.set_contents(path, &bytes)
            .map_err(|e| format!("{}: {e}", path.display()))?;
        Ok(copy)
    }

    /// Flip the case's bit in a copy, open it and read everything.
    pub fn trial(&self, case: &Case) -> Outcome {
        self.trial_with(&case.path, |b| {
            if let Some(x) = b.get_mut(case.offset as usize) {
                *x ^= 1 << (case.bit % 8);
            }
        })
    }

    /// Change `path`'s bytes in a copy with `damage`, open it and read everything (the
    /// `db_damaged` fuzz target's many-byte damage; [`Pristine::trial`] flips one bit).
    pub fn trial_with(&self, path: &Path, damage: impl FnOnce(&mut Vec<u8>)) -> Outcome {
        let fs = match self.damaged(path, damage) {
            Ok(fs) => fs,
            Err(e) => return Outcome::Wrong(format!("could not damage the copy: {e}")),
        };
        let r = std::panic::catch_unwind(AssertUnwindSafe(|| {
            let db = match open(fs) {
                Ok(db) => db,
                Err(e) => return Outcome::DetectedOnOpen(e),
            };
            let got = match read_all(&db) {
                Ok(g) => g,
                Err(e) => return Outcome::DetectedOnRead(e),
            };
            if got == self.expected {
                return Outcome::Unchanged;
            }
            let i = got
                .iter()
                .zip(&self.expected)
                .position(|(a, b)| a != b)
                .unwrap_or(got.len().min(self.expected.len()));
            Outcome::Wrong(format!(
                "result {i} differs: got {:?}, expected {:?}",
                got.get(i),
                self.expected.get(i)
            ))
        }));
        r.unwrap_or_else(|p| {
            Outcome::Panic(
                p.downcast_ref::<String>()
                    .cloned()
                    .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default(),
            )
        })
    }
}
