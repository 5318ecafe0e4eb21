//! Corruption sweep over every file type of a small database (RELIABILITY.md §2.4, invariant 7).
//!
//! The database: one table, family `a` with a row bloom and `b` with a row+column bloom, 1 KiB
//! blocks (many data blocks per file), three flushes (several HFiles per family, some compacted
//! by the background L0 trigger), then `FsyncWal` writes left unflushed (WAL records replayed at
//! open), a manifest and CURRENT. Closed cleanly, so every WAL byte is synced and attested.
//!
//! Each case copies the pristine directory, flips one bit, opens the copy and reads everything
//! (a scan of all versions, and a Get per row written plus rows never written, by row and by
//! column, which consults the blooms). The outcome must be a typed error on open or on a read,
//! or results identical to the pristine database's — never a different answer (a corrupted
//! bloom's false "not found" included) and never a panic (caught with `catch_unwind` and
//! reported as a failure).
//!
//! Offsets are classified by what they hold: HFile data, root index, other index, bloom chunk,
//! bloom meta, file info, trailer; WAL record header, payload and the preallocated zero tail;
//! manifest record header and payload; CURRENT. The default run samples every class
//! (`CORRUPTION_SAMPLES` offsets per file and class, default 16); the full sweep flips one random
//! bit in every byte:
//!
//! ```text
//! cargo test --release -p cellar --test corruption_sweep -- --ignored --nocapture
//! ```

use std::collections::BTreeMap;
use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};

use cellar::format::block::BLOCK_TRAILER_LEN;
use cellar::format::{HFileReader, TRAILER_LEN};
use cellar::wal::WalOptions;
use cellar::{
    BloomType, Db, Durability, Error, FamilyDescriptor, Get, Options, Put, Scan, TableDescriptor,
    WriteOptions,
};

const TABLE: &str = "t";
const ROWS: u32 = 400;
/// Bytes of a WAL record header (with `synced_upto`) and of a manifest record header.
const WAL_HEADER: u64 = 33;
const MANIFEST_HEADER: u64 = 25;

fn options() -> Options {
    Options {
        wal: WalOptions {
            segment_size: 16 << 10,
            ..WalOptions::default()
        },
        ..Options::default()
    }
    .write_buffer_size(1 << 20)
}

fn key(i: u32) -> String {
    format!("row{i:05}")
}

fn value(i: u32, f: &str, round: u32) -> String {
    format!("{f}-{i}-{round}-{}", "z".repeat((i % 13) as usize))
}

/// Build the pristine database in `dir`.
fn build(dir: &Path) {
    let db = Db::open(dir, options()).unwrap();
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
    )
    .unwrap();
    let t = db.table(TABLE).unwrap();
    for round in 0..3 {
        for i in (round..ROWS).step_by(2) {
            t.put(
                Put::new(key(i).as_str())
                    .add("a", "x", value(i, "a", round))
                    .add("b", "y", value(i, "b", round)),
            )
            .unwrap();
        }
        db.flush().unwrap();
    }
    db.wait_for_compactions().unwrap();
    // Unflushed, durable: replayed from the WAL at every open.
    for i in (0..ROWS).step_by(7) {
        t.put_with(
            Put::new(key(i).as_str()).add("a", "x", value(i, "a", 9)),
            WriteOptions::durability(Durability::FsyncWal),
        )
        .unwrap();
    }
    drop(t);
    drop(db);
}

/// Everything the database answers: a full scan of all versions, then per-row and per-column
/// Gets (rows past `ROWS` were never written: a bloom must not turn a row into "not found" or
/// the reverse).
fn read_all(db: &Db) -> Result<Vec<String>, Error> {
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

fn copy_dir(from: &Path, to: &Path) {
    let _ = std::fs::remove_dir_all(to);
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let p = e.path();
        let dst = to.join(e.file_name());
        if p.is_dir() {
            copy_dir(&p, &dst);
        } else if e.file_name() != "LOCK" {
            std::fs::copy(&p, &dst).unwrap();
        }
    }
}

/// Every file of the database, relative to it.
fn files(dir: &Path, rel: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir.join(rel)).unwrap() {
        let e = e.unwrap();
        let r = rel.join(e.file_name());
        if e.path().is_dir() {
            files(dir, &r, out);
        } else if e.file_name() != "LOCK" {
            out.push(r);
        }
    }
}

/// `(class, start, end)` byte ranges of a file, by what they hold.
fn classify(dir: &Path, rel: &Path) -> Vec<(&'static str, u64, u64)> {
    let path = dir.join(rel);
    let bytes = std::fs::read(&path).unwrap();
    let len = bytes.len() as u64;
    let name = rel.to_string_lossy();
    if name.ends_with(".hfile") {
        let r = HFileReader::open(bytes.clone(), name.to_string()).unwrap();
        let tr = *r.trailer();
        let span = |h: cellar::format::BlockHandle| {
            (h.offset, h.offset + h.stored_len + BLOCK_TRAILER_LEN as u64)
        };
        let mut known: Vec<(&'static str, (u64, u64))> = vec![
            ("hfile.trailer", (len - TRAILER_LEN as u64, len)),
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
        let mut out = Vec::new();
        let mut o = 0;
        while o < len {
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
            o += 1;
        }
        out
    } else if name == "CURRENT" {
        vec![("current", 0, len)]
    } else {
        // WAL segments and manifests share the record framing.
        let (h, p, z, header) = if name.starts_with("MANIFEST-") {
            (
                "manifest.header",
                "manifest.payload",
                "manifest.tail",
                MANIFEST_HEADER,
            )
        } else {
            (
                "wal.header",
                "wal.payload",
                "wal.preallocated_tail",
                WAL_HEADER,
            )
        };
        let mut out = Vec::new();
        let mut o = 0u64;
        while o + header <= len {
            let hdr = &bytes[o as usize..(o + header) as usize];
            if hdr.iter().all(|&b| b == 0) {
                break;
            }
            let n = u64::from(u32::from_le_bytes(hdr[4..8].try_into().unwrap()));
            out.push((h, o, o + header));
            let end = (o + header + n).min(len);
            if end > o + header {
                out.push((p, o + header, end));
            }
            o = end;
        }
        if o < len {
            out.push((z, o, len));
        }
        out
    }
}

#[derive(Debug, Default, Clone)]
struct Tally {
    cases: u64,
    detected_on_open: u64,
    detected_on_read: u64,
    unchanged: u64,
    /// Detected, but as an error other than Corruption/Format.
    other_error: u64,
}

enum Outcome {
    Unchanged,
    DetectedOnOpen(Error),
    DetectedOnRead(Error),
    Wrong(String),
    Panic(String),
}

fn is_corruption(e: &Error) -> bool {
    match e {
        Error::Corruption { .. } => true,
        Error::Format(f) => f.is_corruption() || f.kind() == cellar::format::ErrorKind::Unsupported,
        _ => false,
    }
}

fn trial(work: &Path, expected: &[String]) -> Outcome {
    let r = std::panic::catch_unwind(AssertUnwindSafe(|| {
        let db = match Db::open(work, options()) {
            Ok(db) => db,
            Err(e) => return Outcome::DetectedOnOpen(e),
        };
        let got = match read_all(&db) {
            Ok(g) => g,
            Err(e) => return Outcome::DetectedOnRead(e),
        };
        if got == expected {
            Outcome::Unchanged
        } else {
            let i = got
                .iter()
                .zip(expected)
                .position(|(a, b)| a != b)
                .unwrap_or(got.len().min(expected.len()));
            Outcome::Wrong(format!(
                "result {i} differs: got {:?}, expected {:?}",
                got.get(i),
                expected.get(i)
            ))
        }
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

/// Run the sweep with `per_class` offsets per (file, class) (`None`: every byte).
fn sweep(per_class: Option<u64>) {
    let tmp = tempfile::tempdir().unwrap();
    let pristine = tmp.path().join("pristine");
    build(&pristine);
    // The pristine answers, from a copy (opening writes a new manifest and flushes the WAL).
    let work = tmp.path().join("work");
    copy_dir(&pristine, &work);
    let expected = {
        let db = Db::open(&work, options()).unwrap();
        read_all(&db).unwrap()
    };
    let mut all = Vec::new();
    files(&pristine, Path::new(""), &mut all);
    all.sort();
    let mut tallies: BTreeMap<&'static str, Tally> = BTreeMap::new();
    let mut failures = Vec::new();
    let mut seed = 0x5eed_u64;
    let start = std::time::Instant::now();
    for rel in &all {
        // Every offset of each class in this file, then a sample spread over them.
        let mut by_class: BTreeMap<&'static str, Vec<u64>> = BTreeMap::new();
        for (class, s, e) in classify(&pristine, rel) {
            by_class.entry(class).or_default().extend(s..e);
        }
        for (class, all_offsets) in by_class {
            let n = all_offsets.len();
            let offsets: Vec<u64> = match per_class {
                Some(k) if (k as usize) < n => (0..k as usize)
                    .map(|i| all_offsets[i * n / k as usize])
                    .collect(),
                _ => all_offsets,
            };
            for off in offsets {
                seed = seed
                    .wrapping_mul(6_364_136_223_846_793_005)
                    .wrapping_add(1_442_695_040_888_963_407);
                let bit = (seed >> 61) as u8;
                copy_dir(&pristine, &work);
                let path = work.join(rel);
                let mut bytes = std::fs::read(&path).unwrap();
                bytes[off as usize] ^= 1 << bit;
                std::fs::write(&path, &bytes).unwrap();
                let t = tallies.entry(class).or_default();
                t.cases += 1;
                let what = format!("{} offset {off} bit {bit} ({class})", rel.display());
                match trial(&work, &expected) {
                    Outcome::Unchanged => t.unchanged += 1,
                    Outcome::DetectedOnOpen(e) | Outcome::DetectedOnRead(e)
                        if !is_corruption(&e) =>
                    {
                        t.other_error += 1;
                        eprintln!("{what}: detected as a non-corruption error: {e}");
                    }
                    Outcome::DetectedOnOpen(_) => t.detected_on_open += 1,
                    Outcome::DetectedOnRead(_) => t.detected_on_read += 1,
                    Outcome::Wrong(d) => failures.push(format!("{what}: WRONG ANSWER: {d}")),
                    Outcome::Panic(m) => failures.push(format!("{what}: PANIC: {m}")),
                }
            }
        }
    }
    let _ = std::fs::remove_dir_all(&work);
    eprintln!(
        "corruption sweep: {} files, {} cases in {:.1?}",
        all.len(),
        tallies.values().map(|t| t.cases).sum::<u64>(),
        start.elapsed()
    );
    eprintln!(
        "  {:<22} {:>6} {:>9} {:>9} {:>9} {:>9}",
        "block type", "cases", "open", "read", "other-err", "unchanged"
    );
    for (c, t) in &tallies {
        eprintln!(
            "  {c:<22} {:>6} {:>9} {:>9} {:>9} {:>9}",
            t.cases, t.detected_on_open, t.detected_on_read, t.other_error, t.unchanged
        );
    }
    for class in [
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
    ] {
        let t = tallies.get(class).cloned().unwrap_or_default();
        assert!(t.cases > 0, "no case in {class}: the database lacks it");
        assert!(
            t.detected_on_open + t.detected_on_read + t.other_error > 0,
            "no flip in {class} was detected"
        );
    }
    assert!(
        failures.is_empty(),
        "{} of the cases gave a wrong answer or panicked:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn sampled_bit_flips_in_every_block_type_are_detected_or_harmless() {
    let k = std::env::var("CORRUPTION_SAMPLES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(16);
    sweep(Some(k));
}

/// Regression (found by the sweep): a bit flip in the manifest's last edit of a cleanly closed
/// database used to read as a torn append and be dropped, losing the last flush (its WAL
/// segments already deleted). The close now appends an empty edit that attests the rest.
#[test]
fn damage_to_the_last_manifest_edit_is_corruption() {
    let tmp = tempfile::tempdir().unwrap();
    let pristine = tmp.path().join("pristine");
    build(&pristine);
    let manifest = std::fs::read_dir(&pristine)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .find(|n| n.starts_with("MANIFEST-"))
        .unwrap();
    let payloads: Vec<(u64, u64)> = classify(&pristine, Path::new(&manifest))
        .into_iter()
        .filter(|(c, _, _)| *c == "manifest.payload")
        .map(|(_, s, e)| (s, e))
        .collect();
    // The last real edit (a flush's, naming files: large); the close marker after it, an empty
    // edit, is a few bytes.
    let (s, e) = *payloads.iter().rev().find(|(s, e)| e - s > 40).unwrap();
    let work = tmp.path().join("work");
    for off in [s, (s + e) / 2, e - 1] {
        copy_dir(&pristine, &work);
        let path = work.join(&manifest);
        let mut bytes = std::fs::read(&path).unwrap();
        bytes[off as usize] ^= 0x10;
        std::fs::write(&path, &bytes).unwrap();
        match Db::open(&work, options()) {
            Err(e) => assert!(is_corruption(&e), "offset {off}: {e}"),
            Ok(_) => panic!("offset {off}: a damaged acknowledged edit was dropped silently"),
        }
    }
}

#[test]
#[ignore = "every byte of the database: minutes in release mode"]
fn every_byte() {
    sweep(None);
}
