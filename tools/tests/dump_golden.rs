//! `hfile-dump` output pinned against golden files, on files built from the webtable samples.

mod common;

use common::{build_samples, check, DUMP};

fn samples() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
    build_samples(dir.path());
    dir
}

#[test]
fn dump_meta_is_the_default_and_lists_every_file_info_entry() {
    let d = samples();
    let r = check(
        "dump_meta",
        DUMP,
        &["contents.hfile", "anchor.hfile"],
        d.path(),
    );
    assert_eq!(r.code, 0);
    assert!(r
        .stdout
        .contains("created_at_ms                1700000000000"));
}

#[test]
fn dump_index_shows_every_level_from_the_root() {
    let d = samples();
    let r = check("dump_index", DUMP, &["--index", "anchor.hfile"], d.path());
    assert_eq!(r.code, 0);
    assert!(r.stdout.contains("LEAF_INDEX"));
}

#[test]
fn dump_blocks_lists_every_block_in_file_order() {
    let d = samples();
    let r = check(
        "dump_blocks",
        DUMP,
        &["--blocks", "anchor.hfile", "contents.hfile"],
        d.path(),
    );
    assert_eq!(r.code, 0);
}

#[test]
fn dump_bloom_shows_chunks_with_key_ranges() {
    let d = samples();
    let r = check(
        "dump_bloom",
        DUMP,
        &["--bloom", "anchor.hfile", "contents.hfile"],
        d.path(),
    );
    assert_eq!(r.code, 0);
}

#[test]
fn dump_kv_prints_escaped_cells_in_key_order() {
    let d = samples();
    let r = check(
        "dump_kv",
        DUMP,
        &["--kv", "contents.hfile", "anchor.hfile"],
        d.path(),
    );
    assert_eq!(r.code, 0);
    assert!(r.stdout.contains("Apache HBase\\x00\\xFF"));
}

#[test]
fn dump_row_and_range_use_seek_and_escapes() {
    let d = samples();
    let r = check(
        "dump_row",
        DUMP,
        &["--keys", "--row", "com.\\x63nn.www", "anchor.hfile"],
        d.path(),
    );
    assert_eq!(r.code, 0);
    let r = check(
        "dump_range",
        DUMP,
        &[
            "--kv",
            "--from",
            "com.d",
            "--to",
            "org.apache.hbase",
            "--limit",
            "5",
            "contents.hfile",
        ],
        d.path(),
    );
    assert_eq!(r.code, 0);
}

#[test]
fn dump_stats_histograms() {
    let d = samples();
    let r = check(
        "dump_stats",
        DUMP,
        &["--stats", "contents.hfile", "anchor.hfile"],
        d.path(),
    );
    assert_eq!(r.code, 0);
}

#[test]
fn dump_json_is_one_document_and_jsonl_one_line_per_cell() {
    let d = samples();
    let r = check(
        "dump_json",
        DUMP,
        &[
            "--format",
            "json",
            "--meta",
            "--bloom",
            "--kv",
            "contents.hfile",
        ],
        d.path(),
    );
    assert_eq!(r.code, 0);
    let v: serde_json::Value =
        serde_json::from_str(&r.stdout).unwrap_or_else(|e| panic!("not JSON: {e}"));
    assert_eq!(v["files"][0]["cells"].as_array().map(Vec::len), Some(9));
    let r = check(
        "dump_jsonl",
        DUMP,
        &["--format", "jsonl", "--keys", "anchor.hfile"],
        d.path(),
    );
    assert_eq!(r.code, 0);
    for line in r.stdout.lines() {
        let v: serde_json::Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("{line}: {e}"));
        assert!(v["row"].is_string());
    }
}

#[test]
fn dump_usage_and_io_errors_exit_2() {
    let d = samples();
    let r = common::run(DUMP, &["--row", "\\xZZ", "contents.hfile"], d.path());
    assert_eq!(r.code, 2, "{r:?}");
    let r = common::run(DUMP, &["missing.hfile"], d.path());
    assert_eq!(r.code, 2, "{r:?}");
    let r = common::run(DUMP, &["--no-such-flag", "contents.hfile"], d.path());
    assert_eq!(r.code, 2, "{r:?}");
}

#[test]
fn cellar_hfile_subcommands_match_the_standalone_tools() {
    let d = samples();
    let args = ["--kv", "--stats", "anchor.hfile"];
    let mut sub = vec!["hfile", "dump"];
    sub.extend_from_slice(&args);
    let a = common::run(DUMP, &args, d.path());
    let b = common::run(common::CELLAR, &sub, d.path());
    assert_eq!((a.code, &a.stdout), (b.code, &b.stdout));
    let a = common::run(common::VERIFY, &["."], d.path());
    let b = common::run(common::CELLAR, &["hfile", "verify", "."], d.path());
    assert_eq!((a.code, &a.stdout), (b.code, &b.stdout));
}
