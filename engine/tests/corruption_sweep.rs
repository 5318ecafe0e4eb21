//! Corruption sweep over every file type of a small database (RELIABILITY.md §2.4, invariant 7).
//!
//! The database, the classification of its bytes and the trial of one bit flip are
//! `cellar::testkit::corruption` (shared with `cellar reliability-report`; see its docs): one
//! table over two families with row and row+column blooms and 1 KiB blocks, several HFiles,
//! unflushed `FsyncWal` writes, a manifest and CURRENT, on the simulated file system. Each case
//! flips one bit in a copy, opens it and reads everything; the outcome must be a typed error on
//! open or on a read, or answers identical to the pristine database's — never a different
//! answer (a corrupted bloom's false "not found" included) and never a panic.
//!
//! The default run samples every class (`CORRUPTION_SAMPLES` offsets per file and class,
//! default 16); the full sweep flips one random bit in every byte:
//!
//! ```text
//! cargo test --release -p cellar --test corruption_sweep -- --ignored --nocapture
//! ```

use std::collections::BTreeMap;

use cellar::testkit::corruption::{
    is_corruption, open, ClassTally, Outcome, Pristine, Range, REQUIRED_CLASSES,
};

/// Run the sweep with `per_class` offsets per (file, class) (`None`: every byte).
fn sweep(per_class: Option<u64>) {
    let pristine = Pristine::build().unwrap_or_else(|e| panic!("{e}"));
    let cases = pristine.cases(per_class, 0x5eed);
    let mut tallies: BTreeMap<&'static str, ClassTally> = BTreeMap::new();
    let mut failures = Vec::new();
    let start = std::time::Instant::now();
    for case in &cases {
        let outcome = pristine.trial(case);
        tallies.entry(case.class).or_default().add(&outcome);
        let what = case.to_string();
        match outcome {
            Outcome::DetectedOnOpen(e) | Outcome::DetectedOnRead(e) if !is_corruption(&e) => {
                eprintln!("{what}: detected as a non-corruption error: {e}");
            }
            Outcome::Wrong(d) => failures.push(format!("{what}: WRONG ANSWER: {d}")),
            Outcome::Panic(m) => failures.push(format!("{what}: PANIC: {m}")),
            _ => {}
        }
    }
    eprintln!(
        "corruption sweep: {} files, {} cases in {:.1?}",
        pristine.files.len(),
        cases.len(),
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
    for class in REQUIRED_CLASSES {
        let t = tallies.get(class).copied().unwrap_or_default();
        assert!(t.cases > 0, "no case in {class}: the database lacks it");
        assert!(t.detected() > 0, "no flip in {class} was detected");
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

/// The manifest's path and classified ranges.
fn manifest_of(pristine: &Pristine) -> &(std::path::PathBuf, Vec<Range>) {
    pristine
        .files
        .iter()
        .find(|(p, _)| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("MANIFEST-"))
        })
        .expect("a manifest")
}

/// Regression (found by the sweep): a bit flip in the manifest's last edit of a cleanly closed
/// database used to read as a torn append and be dropped, losing the last flush (its WAL
/// segments already deleted). The close now appends an empty edit that attests the rest.
#[test]
fn damage_to_the_last_manifest_edit_is_corruption() {
    let pristine = Pristine::build().unwrap_or_else(|e| panic!("{e}"));
    let (manifest, ranges) = manifest_of(&pristine);
    // The last real edit (a flush's, naming files: large); the close marker after it, an empty
    // edit, is a few bytes.
    let (s, e) = ranges
        .iter()
        .rev()
        .filter(|(c, _, _)| *c == "manifest.payload")
        .map(|(_, s, e)| (*s, *e))
        .find(|(s, e)| e - s > 40)
        .expect("a flush edit");
    for off in [s, (s + e) / 2, e - 1] {
        let fs = pristine
            .damaged(manifest, |b| b[off as usize] ^= 0x10)
            .unwrap();
        match open(fs) {
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

/// Found by the `db_damaged` fuzz target: one byte changed in the last flush's edit and one in
/// the close marker after it. With both damaged nothing valid follows the flush's edit, so it
/// read as a torn tail: the open dropped it, deleted the flush's files as unreferenced, and
/// replayed from the log number before it, whose WAL segments that flush had deleted. A round
/// of writes was gone without an error. Replay now takes the first segment's LINK, naming a
/// segment at or after the manifest's log number that is missing, for a lost edit (SPEC.md
/// §16.6).
#[test]
fn damage_to_the_last_flush_edit_and_the_close_marker_is_corruption() {
    let pristine = Pristine::build().unwrap_or_else(|e| panic!("{e}"));
    let (manifest, ranges) = manifest_of(&pristine);
    let payloads: Vec<(u64, u64)> = ranges
        .iter()
        .filter(|(c, _, _)| *c == "manifest.payload")
        .map(|(_, s, e)| (*s, *e))
        .collect();
    let &(ms, me) = payloads.last().expect("the close marker");
    let &(fs_, fe) = payloads
        .iter()
        .rev()
        .find(|(s, e)| e - s > 40)
        .expect("a flush edit");
    assert!(fe <= ms, "the close marker follows the flush edit");
    for (a, b) in [(fs_, ms), ((fs_ + fe) / 2, me - 1), (fe - 1, (ms + me) / 2)] {
        let fs = pristine
            .damaged(manifest, |bytes| {
                bytes[a as usize] ^= 0x66;
                bytes[b as usize] ^= 0x79;
            })
            .unwrap();
        match open(fs) {
            Err(e) => assert!(is_corruption(&e), "offsets {a}, {b}: {e}"),
            Ok(_) => panic!("offsets {a}, {b}: a damaged acknowledged edit was dropped silently"),
        }
    }
}

/// The torn-tail rule's one window (SPEC.md §16.6, limit), closed at a clean close: damage to
/// the SEAL and to a run of records up to the last would read as a torn tail in the newest
/// segment, because nothing valid follows it. The close starts one more segment holding only a
/// LINK to the sealed one, so the sealed segment is older and every such damage is
/// `Corruption`; damage to the LINK-only segment loses nothing. (`db_damaged` skipped this
/// case before the LINK-only segment existed.)
#[test]
fn after_a_clean_close_damage_to_the_seal_and_the_last_records_is_corruption() {
    let pristine = Pristine::build().unwrap_or_else(|e| panic!("{e}"));
    let wal = |p: &std::path::Path| {
        cellar::wal::parse_segment_name(&p.file_name().unwrap().to_string_lossy()).map(|s| s.0)
    };
    let headers = |ranges: &[Range]| -> Vec<usize> {
        ranges
            .iter()
            .filter(|r| r.0 == "wal.header")
            .map(|r| r.1 as usize)
            .collect()
    };
    let mut segments: Vec<_> = pristine
        .files
        .iter()
        .filter(|(p, _)| wal(p).is_some())
        .collect();
    segments.sort_by_key(|(p, _)| wal(p));
    // The newest segment holds the closing LINK alone; the one before it was sealed.
    let (newest, newest_ranges) = segments.last().expect("a WAL segment");
    assert_eq!(
        headers(newest_ranges).len(),
        1,
        "the closing segment holds one LINK"
    );
    let (path, ranges) = segments
        .iter()
        .rev()
        .find(|(_, r)| headers(r).len() >= 4)
        .expect("a sealed segment with records");
    assert_eq!(
        wal(path).map(|n| n + 1),
        wal(newest),
        "the LINK follows the sealed segment"
    );
    // The SEAL is the last header before the zero tail; the records before it are the last
    // groups' (one record per group: the writes are FsyncWal).
    let h = headers(ranges);
    let (seal_at, record_at, earlier) = (h[h.len() - 1], h[h.len() - 2], h[h.len() - 3]);
    let damage = |offs: &[usize]| {
        pristine.trial_with(path, |b| {
            for &o in offs {
                b[o] ^= 0x5a;
            }
        })
    };
    for offs in [
        &[record_at][..],
        &[earlier, seal_at],
        &[record_at, seal_at],
        &[earlier, record_at, seal_at],
    ] {
        match damage(offs) {
            Outcome::DetectedOnOpen(e) => assert!(is_corruption(&e), "{offs:?}: {e}"),
            other => panic!("damage at {offs:?} of the sealed segment: {other:?}"),
        }
    }
    assert!(
        matches!(
            damage(&[seal_at]),
            Outcome::Unchanged | Outcome::DetectedOnOpen(_)
        ),
        "damage to the SEAL alone"
    );
    // The closing LINK damaged: nothing is lost, and the sealed segment stays older.
    let link_at = headers(newest_ranges)[0];
    assert!(
        matches!(
            pristine.trial_with(newest, |b| b[link_at] ^= 0x5a),
            Outcome::Unchanged | Outcome::DetectedOnOpen(_)
        ),
        "damage to the closing LINK"
    );
}
