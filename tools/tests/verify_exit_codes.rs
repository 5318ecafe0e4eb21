//! `hfile-verify` on clean and deliberately damaged files: problem lines, summaries and exit
//! codes pinned against golden files.

mod common;

use std::path::Path;

use cellar_format::{FormatVersion, Trailer, TRAILER_LEN};
use common::{build_samples, check, run, VERIFY};

fn samples() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
    build_samples(dir.path());
    dir
}

fn damaged(dir: &Path, name: &str, edit: impl FnOnce(&mut Vec<u8>)) {
    let mut bytes = std::fs::read(dir.join("anchor.hfile")).unwrap_or_default();
    edit(&mut bytes);
    std::fs::write(dir.join(name), bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
}

#[test]
fn clean_files_and_directories_verify_ok() {
    let d = samples();
    let r = check(
        "verify_clean",
        VERIFY,
        &["contents.hfile", "anchor.hfile"],
        d.path(),
    );
    assert_eq!(r.code, 0);
    let r = check("verify_dir", VERIFY, &["."], d.path());
    assert_eq!(r.code, 0);
    let r = check(
        "verify_json",
        VERIFY,
        &["--format", "json", "contents.hfile"],
        d.path(),
    );
    assert_eq!(r.code, 0);
}

#[test]
fn flipped_data_byte_is_reported_with_offset_and_region() {
    let d = samples();
    // The first data block starts at offset 0; byte 20 is inside its first key.
    damaged(d.path(), "flipped.hfile", |b| b[20] ^= 0x55);
    let r = check("verify_flipped", VERIFY, &["flipped.hfile"], d.path());
    assert_eq!(r.code, 1);
    assert!(r
        .stdout
        .starts_with("flipped.hfile:0: data block: checksum mismatch"));
}

#[test]
fn truncated_file_is_corrupt() {
    let d = samples();
    damaged(d.path(), "truncated.hfile", |b| b.truncate(b.len() - 10));
    damaged(d.path(), "stub.hfile", |b| b.truncate(40));
    let r = check(
        "verify_truncated",
        VERIFY,
        &["truncated.hfile", "stub.hfile"],
        d.path(),
    );
    assert_eq!(r.code, 1);
}

#[test]
fn overwritten_magic_is_corrupt_and_dump_agrees() {
    let d = samples();
    damaged(d.path(), "magic.hfile", |b| {
        let n = b.len();
        b[n - 8..].copy_from_slice(b"NotCelar");
    });
    let r = check("verify_magic", VERIFY, &["magic.hfile"], d.path());
    assert_eq!(r.code, 1);
    let r = check("dump_magic", common::DUMP, &["magic.hfile"], d.path());
    assert_eq!(r.code, 1);
}

#[test]
fn unsupported_version_missing_file_and_bad_usage_exit_2() {
    let d = samples();
    damaged(d.path(), "future.hfile", |b| {
        let at = b.len() - TRAILER_LEN;
        let Ok(mut t) = Trailer::decode(&b[at..]) else {
            panic!("sample trailer does not decode");
        };
        t.version = FormatVersion(99);
        b[at..].copy_from_slice(&t.encode());
    });
    let r = check(
        "verify_unsupported",
        VERIFY,
        &["future.hfile", "contents.hfile"],
        d.path(),
    );
    assert_eq!(r.code, 2);
    assert_eq!(run(VERIFY, &["missing.hfile"], d.path()).code, 2);
    assert_eq!(run(VERIFY, &[], d.path()).code, 2);
    assert_eq!(run(VERIFY, &["--format", "xml", "."], d.path()).code, 2);
}

/// `--mmap` reads through a memory map and must report exactly what positional reads report,
/// on a clean file and on a damaged one.
#[test]
fn mmap_source_reports_the_same_as_pread() {
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("good.hfile");
    let tsv = dir.path().join("in.tsv");
    std::fs::write(&tsv, "r1\tcf:q\t1\tPut\tv1\nr2\tcf:q\t2\tPut\tv2\n").unwrap();
    let st = std::process::Command::new(env!("CARGO_BIN_EXE_cellar"))
        .args(["hfile", "build", "--family", "cf", "--out"])
        .arg(&good)
        .arg(&tsv)
        .status()
        .unwrap();
    assert!(st.success());
    let bad = dir.path().join("bad.hfile");
    let mut bytes = std::fs::read(&good).unwrap();
    bytes[3] ^= 0x40;
    std::fs::write(&bad, &bytes).unwrap();
    for (file, code) in [(&good, 0), (&bad, 1)] {
        let run = |extra: &[&str]| {
            std::process::Command::new(env!("CARGO_BIN_EXE_hfile-verify"))
                .args(extra)
                .arg(file)
                .output()
                .unwrap()
        };
        let (plain, mapped) = (run(&[]), run(&["--mmap"]));
        assert_eq!(plain.status.code(), Some(code));
        assert_eq!(mapped.status.code(), Some(code));
        assert_eq!(plain.stdout, mapped.stdout);
    }
}
