//! Helpers shared by the integration tests: running the binaries, building the sample files,
//! and golden-file comparison (`REWRITE=1 cargo test -p cellar-tools` regenerates goldens).

#![allow(dead_code, reason = "each test crate uses a different subset")]

use std::path::{Path, PathBuf};
use std::process::Command;

pub const DUMP: &str = env!("CARGO_BIN_EXE_hfile-dump");
pub const VERIFY: &str = env!("CARGO_BIN_EXE_hfile-verify");
pub const CELLAR: &str = env!("CARGO_BIN_EXE_cellar");

/// Fixed creation time so that file bytes, and so every dump, are reproducible.
pub const CREATED_AT_MS: &str = "1700000000000";

/// Outcome of one run of a binary.
#[derive(Debug)]
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

pub fn run(bin: &str, args: &[&str], cwd: &Path) -> Run {
    let out = Command::new(bin)
        .args(args)
        .current_dir(cwd)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {bin}: {e}"));
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

pub fn samples_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("samples")
}

/// Build `contents.hfile` (one data block, ROW bloom, LZ4) and `anchor.hfile` (tiny blocks: five
/// data blocks, a two-level index and three ROWCOL bloom chunks) from the sample TSVs in `dir`.
pub fn build_samples(dir: &Path) {
    let contents = samples_dir().join("webtable-contents.tsv");
    let anchor = samples_dir().join("webtable-anchor.tsv");
    let r = run(
        CELLAR,
        &[
            "hfile",
            "build",
            "--family",
            "contents",
            "--compression",
            "lz4",
            "--out",
            "contents.hfile",
            "--created-at-ms",
            CREATED_AT_MS,
            contents.to_str().unwrap_or_default(),
        ],
        dir,
    );
    assert_eq!(r.code, 0, "build contents: {r:?}");
    let r = run(
        CELLAR,
        &[
            "hfile",
            "build",
            "--family",
            "anchor",
            "--bloom",
            "rowcol",
            "--block-size",
            "64",
            "--index-block-size",
            "256",
            "--bloom-keys-per-chunk",
            "2",
            "--out",
            "anchor.hfile",
            "--created-at-ms",
            CREATED_AT_MS,
            anchor.to_str().unwrap_or_default(),
        ],
        dir,
    );
    assert_eq!(r.code, 0, "build anchor: {r:?}");
}

/// The transcript of a run as pinned in a golden file, with `dir` replaced by `$TMP`.
pub fn transcript(cmd: &str, r: &Run, dir: &Path) -> String {
    let scrub = |s: &str| s.replace(&dir.display().to_string(), "$TMP");
    format!(
        "$ {cmd}\nexit {}\n--- stdout\n{}--- stderr\n{}",
        r.code,
        scrub(&r.stdout),
        scrub(&r.stderr)
    )
}

/// Compare `actual` with `tests/golden/<name>.txt`, or rewrite it when `REWRITE=1`.
pub fn golden(name: &str, actual: &str) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(format!("{name}.txt"));
    if std::env::var_os("REWRITE").is_some_and(|v| v == "1") {
        std::fs::write(&path, actual).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        return;
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e} (run `REWRITE=1 cargo test -p cellar-tools` to create it)",
            path.display()
        )
    });
    if expected != actual {
        let first_diff = expected
            .lines()
            .zip(actual.lines())
            .position(|(a, b)| a != b)
            .unwrap_or(expected.lines().count().min(actual.lines().count()));
        panic!(
            "golden {name} differs at line {}:\n--- expected\n{expected}\n--- actual\n{actual}\n\
             (REWRITE=1 cargo test -p cellar-tools regenerates goldens)",
            first_diff + 1
        );
    }
}

/// Run `bin args` in `dir` and pin its transcript as golden `name`; returns the run.
pub fn check(name: &str, bin: &str, args: &[&str], dir: &Path) -> Run {
    let r = run(bin, args, dir);
    let tool = Path::new(bin)
        .file_name()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    golden(
        name,
        &transcript(&format!("{tool} {}", args.join(" ")), &r, dir),
    );
    r
}
