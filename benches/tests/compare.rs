//! The comparison tool end to end on Cellar alone (peers need `--features peers`): child
//! processes run, their figures come back, and the workloads' own checks (every key read back
//! as written, no missing key found, readseq sees every live key) pass.

use std::process::Command;

#[test]
fn compare_runs_cellar_and_reports_every_figure() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_cellar-benches"))
        .args([
            "compare",
            "--num=3000",
            "--rounds=1",
            "--sync-ops=40",
            "--sync-threads=4",
            "--write-buffer-bytes=65536",
            // Batches that do not divide the reads evenly.
            "--batch-size=7",
            "--engines=cellar",
            "--json",
        ])
        .arg("--dir")
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let m = &v["medians"]["cellar"];
    for k in [
        "fillrandom",
        "overwrite",
        "readrandom",
        "readmissing",
        "multireadrandom",
        "seekrandom",
        "readseq",
        "readrandom_cached",
        "fillsync",
        "fillsync_group",
        "group_records_per_sync",
        "write_amp",
        "disk_bytes",
        "peak_rss",
    ] {
        let x = m[k]
            .as_f64()
            .unwrap_or_else(|| panic!("{k} missing in {m}"));
        assert!(x > 0.0, "{k} = {x}");
    }
    // Four writers, each with one record outstanding: no fdatasync carries more than four.
    let per_sync = m["group_records_per_sync"].as_f64().unwrap();
    assert!(per_sync <= 4.0, "{per_sync} records per sync");
    // fillrandom and overwrite draw 6000 keys with repeats from 3000: 1 - e^-2, about 86%.
    let live = m["live_bytes"].as_f64().unwrap() / 116.0;
    assert!((2450.0..2750.0).contains(&live), "{live} live keys");
    // Every child cleaned up after itself.
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

#[test]
fn an_engine_not_built_in_is_a_clear_error() {
    if cfg!(feature = "peers") {
        return;
    }
    let out = Command::new(env!("CARGO_BIN_EXE_cellar-benches"))
        .args(["compare", "--num=10", "--engines=rocksdb"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--features peers"), "{err}");
}
