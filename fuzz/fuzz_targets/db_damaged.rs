//! Recovery over damaged files: a small canonical database (`cellar::testkit::corruption`:
//! HFiles with every block type, a manifest, CURRENT and WAL segments on `SimFs`) gets the
//! input's byte changes in one of its files, then is opened and read whole. Whatever the
//! damage, opening and reading return answers identical to the undamaged database's or a
//! typed error, and never panic: this drives manifest replay, WAL replay and every HFile
//! decoder through the engine's real open path, beyond the single-bit sweep of the tests.
//!
//! Input: a file index byte, then (offset u16 LE, xor byte) triples applied to that file.
//! Only byte changes, no truncation. Cutting the newest WAL segment exactly at a record
//! boundary cannot be told from a real end, and would be reported here as a false finding.
//! An older segment's cut is caught by its successor's LINK
//! (`an_older_segment_cut_at_a_record_boundary_is_corruption`), and so is one of a cleanly
//! closed database's last segment, which a LINK-only segment follows.
#![no_main]

use std::sync::OnceLock;

use cellar::testkit::corruption::{Outcome, Pristine};
use libfuzzer_sys::fuzz_target;

fn pristine() -> &'static Pristine {
    static P: OnceLock<Pristine> = OnceLock::new();
    P.get_or_init(|| Pristine::build().expect("the canonical database builds"))
}

fuzz_target!(|data: &[u8]| {
    let p = pristine();
    let Some((&which, edits)) = data.split_first() else {
        return;
    };
    if p.files.is_empty() {
        return;
    }
    let (path, _) = &p.files[usize::from(which) % p.files.len()];
    let edits = cellar_fuzz::byte_edits(edits);
    if edits.is_empty() {
        return;
    }
    let outcome = p.trial_with(path, |bytes| cellar_fuzz::apply_edits(bytes, &edits));
    match outcome {
        Outcome::Wrong(why) => panic!("wrong answer after damaging {}: {why}", path.display()),
        Outcome::Panic(why) => panic!("panic after damaging {}: {why}", path.display()),
        _ => {}
    }
});
