//! `cellar hfile build`: input validation, the external sort, and larger files end to end.

mod common;

use std::fmt::Write as _;
use std::path::Path;
use std::time::Instant;

use common::{run, CELLAR, CREATED_AT_MS, DUMP, VERIFY};

fn tempdir() -> tempfile::TempDir {
    tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"))
}

/// `n` cells of family `cf` in scrambled order, with repeated columns (versions), markers and
/// escaped bytes, so the sort and the stats have something to do.
fn generate_tsv(n: u64) -> String {
    let rows = (n / 4).max(1);
    let mut s = String::with_capacity(n as usize * 60);
    s.push_str("# generated\n");
    for i in 0..n {
        let row = (i.wrapping_mul(2_654_435_761)) % rows;
        let ty = if i % 97 == 0 { "Delete" } else { "Put" };
        let pad = "x".repeat((i % 40) as usize);
        let nul = if i % 1000 == 0 { "\\x00" } else { "" };
        let _ = writeln!(
            s,
            "user{row:08}\tcf:q{}\t{}\t{ty}\tvalue-{i}-{pad}{nul}",
            i % 3,
            1000 + i % 5
        );
    }
    s
}

fn build(dir: &Path, input: &str, out: &str, extra: &[&str]) -> common::Run {
    let mut args = vec![
        "hfile",
        "build",
        "--family",
        "cf",
        "--out",
        out,
        "--created-at-ms",
        CREATED_AT_MS,
    ];
    args.extend_from_slice(extra);
    args.push(input);
    run(CELLAR, &args, dir)
}

fn only_file_is(dir: &Path, name: &str) {
    let names: Vec<String> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(names, vec![name.to_owned()], "leftover files");
}

#[test]
fn malformed_line_is_refused_with_its_number_and_nothing_is_written() {
    let d = tempdir();
    let cases = [
        (
            "r1\tcf:q\t1\tPut\tv\n# c\nr2\tcf:q\t1\tUpsert\tv\n",
            ":3: type",
        ),
        (
            "r1\tcf:q\t1\tPut\tv\nr2\tother:q\t1\tPut\tv\n",
            ":2: family",
        ),
        ("\nr1\tcf:q\tten\tPut\tv\n", ":2: timestamp"),
        ("r1\tcf:q\t1\tPut\n", ":1: expected 5"),
        ("r1\\xZ\tcf:q\t1\tPut\tv\n", ":1: row"),
        ("r1\tcf:q\t1\tDeleteFamily\t\n", ":1: DeleteFamily marker"),
    ];
    for (tsv, want) in cases {
        std::fs::write(d.path().join("in.tsv"), tsv).unwrap_or_default();
        let r = build(d.path(), "in.tsv", "out.hfile", &[]);
        assert_eq!(r.code, 2, "{tsv:?}: {r:?}");
        assert!(
            r.stderr.contains(&format!("in.tsv{want}")),
            "{tsv:?}: stderr {:?} lacks {want:?}",
            r.stderr
        );
        only_file_is(d.path(), "in.tsv");
    }
}

#[test]
fn existing_output_is_kept_unless_forced() {
    let d = tempdir();
    std::fs::write(d.path().join("in.tsv"), "r\tcf:q\t1\tPut\tv\n").unwrap_or_default();
    std::fs::write(d.path().join("out.hfile"), "precious").unwrap_or_default();
    assert_eq!(build(d.path(), "in.tsv", "out.hfile", &[]).code, 2);
    assert_eq!(
        std::fs::read(d.path().join("out.hfile")).unwrap_or_default(),
        b"precious"
    );
    assert_eq!(build(d.path(), "in.tsv", "out.hfile", &["--force"]).code, 0);
    assert_eq!(run(VERIFY, &["out.hfile"], d.path()).code, 0);
}

#[test]
fn external_sort_with_tiny_memory_matches_the_in_memory_sort() {
    let d = tempdir();
    std::fs::write(d.path().join("in.tsv"), generate_tsv(5000)).unwrap_or_default();
    let mem = build(d.path(), "in.tsv", "mem.hfile", &[]);
    assert_eq!(mem.code, 0, "{mem:?}");
    assert!(mem.stdout.contains("in memory"), "{}", mem.stdout);
    let ext = build(
        d.path(),
        "in.tsv",
        "ext.hfile",
        &["--sort-memory", "4096", "--tmp-dir", "."],
    );
    assert_eq!(ext.code, 0, "{ext:?}");
    // ~100 bytes a record against 4 KiB: well over the merge fan-in, so merge passes run too.
    let runs: usize = ext
        .stdout
        .lines()
        .find_map(|l| l.trim().strip_prefix("sort"))
        .and_then(|l| l.split_whitespace().next()?.parse().ok())
        .unwrap_or(0);
    assert!(runs > 64, "only {runs} runs: {}", ext.stdout);
    let a = std::fs::read(d.path().join("mem.hfile")).unwrap_or_default();
    let b = std::fs::read(d.path().join("ext.hfile")).unwrap_or_default();
    assert!(!a.is_empty() && a == b, "external sort changed the file");
    assert_eq!(run(VERIFY, &["ext.hfile"], d.path()).code, 0);
}

#[test]
fn two_hundred_thousand_cells_build_verify_and_dump_stats() {
    let d = tempdir();
    std::fs::write(d.path().join("in.tsv"), generate_tsv(200_000)).unwrap_or_default();
    let t = Instant::now();
    let r = build(
        d.path(),
        "in.tsv",
        "big.hfile",
        &[
            "--compression",
            "lz4",
            "--bloom",
            "rowcol",
            "--block-size",
            "16KiB",
        ],
    );
    assert_eq!(r.code, 0, "{r:?}");
    let v = run(VERIFY, &["big.hfile"], d.path());
    assert_eq!(v.code, 0, "{v:?}");
    assert!(
        v.stdout.starts_with("big.hfile: OK (200000 cells,"),
        "{}",
        v.stdout
    );
    let s = run(DUMP, &["--stats", "big.hfile"], d.path());
    assert_eq!(s.code, 0, "{s:?}");
    assert!(
        s.stdout.contains("  cells              200000\n"),
        "{}",
        s.stdout
    );
    assert!(
        s.stdout.contains("type Delete        2062\n"),
        "{}",
        s.stdout
    );
    eprintln!("200k cells: build+verify+stats in {:?}", t.elapsed());
}

/// A 1,000,000-cell file from generated TSV, through build, verify and dump --stats. Run with:
/// `cargo test --release -p cellar-tools -- --ignored million --nocapture`
#[test]
#[ignore = "slow: run in release"]
fn million_cell_file_builds_verifies_and_dumps() {
    let d = tempdir();
    std::fs::write(d.path().join("in.tsv"), generate_tsv(1_000_000)).unwrap_or_default();
    let t = Instant::now();
    let r = build(
        d.path(),
        "in.tsv",
        "million.hfile",
        &["--compression", "lz4"],
    );
    assert_eq!(r.code, 0, "{r:?}");
    let built = t.elapsed();
    let v = run(VERIFY, &["million.hfile"], d.path());
    assert_eq!(v.code, 0, "{v:?}");
    let verified = t.elapsed() - built;
    let s = run(DUMP, &["--stats", "million.hfile"], d.path());
    assert_eq!(s.code, 0, "{s:?}");
    assert!(s.stdout.contains("  cells              1000000\n"));
    let size = std::fs::metadata(d.path().join("million.hfile")).map_or(0, |m| m.len());
    eprintln!("{}", r.stdout);
    eprintln!(
        "million: file {size} bytes; build {built:?}, verify {verified:?}, stats {:?}",
        t.elapsed() - built - verified
    );
}

/// `cellar hfile diff`: a file and a copy of its cells with other compression and block size
/// have the same cells (exit 0); a changed value, a cell dropped and one added show as `~`,
/// `-` and `+` in key order (exit 1); `--limit` caps the list, not the counts.
#[test]
fn diff_compares_cells_not_layout() {
    let d = tempdir();
    let tsv = generate_tsv(2_000);
    std::fs::write(d.path().join("in.tsv"), &tsv).unwrap();
    assert_eq!(build(d.path(), "in.tsv", "a.hfile", &[]).code, 0);
    let other = ["--compression", "lz4", "--block-size", "4KiB"];
    assert_eq!(build(d.path(), "in.tsv", "b.hfile", &other).code, 0);
    let r = run(CELLAR, &["hfile", "diff", "a.hfile", "b.hfile"], d.path());
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert!(r.stdout.contains("Same cells: "), "{}", r.stdout);

    // One value changed, one cell removed, one added.
    let mut lines: Vec<String> = tsv.lines().map(str::to_owned).collect();
    let changed = lines.iter().position(|l| l.contains("\tvalue-7-")).unwrap();
    lines[changed] = lines[changed].replace("\tvalue-7-", "\tVALUE-7-");
    // A comment in its place: a cell's seq is its line's number, which the others keep.
    let removed = lines.iter().position(|l| l.contains("\tvalue-8-")).unwrap();
    lines[removed] = "# removed".to_owned();
    lines.push("zzz\tcf:new\t5\tPut\tadded".to_owned());
    std::fs::write(d.path().join("c.tsv"), lines.join("\n") + "\n").unwrap();
    assert_eq!(build(d.path(), "c.tsv", "c.hfile", &[]).code, 0);
    let r = run(
        CELLAR,
        &["hfile", "diff", "a.hfile", "c.hfile", "--format", "json"],
        d.path(),
    );
    assert_eq!(r.code, 1, "{}{}", r.stdout, r.stderr);
    let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(
        (v["only_a"].as_u64(), v["only_b"].as_u64()),
        (Some(1), Some(1)),
        "{v}"
    );
    assert_eq!(v["changed"], 1, "{v}");
    let ops: Vec<(&str, &str)> = v["differences"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| (x["op"].as_str().unwrap(), x["key"].as_str().unwrap()))
        .collect();
    assert_eq!(ops.len(), 3, "{v}");
    assert!(ops.iter().any(|(op, _)| *op == "~"), "{v}");
    assert!(ops.iter().any(|(op, _)| *op == "-"), "{v}");
    assert_eq!(ops[2].0, "+", "{v}");
    assert!(ops[2].1.starts_with("zzz/cf:new/5/Put"), "{v}");
    let r = run(
        CELLAR,
        &["hfile", "diff", "a.hfile", "c.hfile", "--limit", "1"],
        d.path(),
    );
    assert_eq!(r.code, 1);
    assert!(
        r.stdout.contains("... 2 more difference(s)"),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout
            .contains("1 only in a.hfile, 1 only in c.hfile, 1 changed"),
        "{}",
        r.stdout
    );
}
