//! `cellar bench`: a tiny run of every workload through the real binary, checking the JSON
//! contract (one object per line per benchmark, with every documented field).

mod common;

use common::{run, CELLAR};
use serde_json::Value;

const FIELDS: &[&str] = &[
    "benchmark",
    "ops",
    "threads",
    "seconds",
    "ops_per_sec",
    "mb_per_sec",
    "micros_per_op",
    "p50_us",
    "p99_us",
    "p999_us",
    "max_us",
    "found",
    "write_amplification",
    "space_amplification",
    "stall_micros",
    "wal_records_per_sync",
    "block_cache_hit_ratio",
    "peak_rss_bytes",
    "db_bytes",
    "settle_seconds",
    "files_dropped",
    "bytes_dropped",
    "key_size",
    "value_size",
    "durability",
];

fn bench(args: &[&str]) -> Vec<Value> {
    let d = tempfile::tempdir().unwrap();
    let mut all = vec!["bench", "--format", "json"];
    all.extend_from_slice(args);
    let r = run(CELLAR, &all, d.path());
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    r.stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

#[test]
fn every_workload_reports_every_field() {
    let names =
        "fillseq,fillrandom,overwrite,readrandom,readmissing,multireadrandom,seekrandom,readseq,\
                 readreverse,deleterandom,deleterange,compact,readwhilewriting,fillsync,ycsb-a,ycsb-b,ycsb-c,\
                 ycsb-d,ycsb-e,ycsb-f";
    let out = bench(&["--num", "2000", "--benchmarks", names, "--seek-nexts", "10"]);
    let expected: Vec<&str> = names.split(',').collect();
    let got: Vec<&str> = out
        .iter()
        .map(|v| v["benchmark"].as_str().unwrap())
        .collect();
    assert_eq!(got, expected);
    for v in &out {
        let name = v["benchmark"].as_str().unwrap();
        for f in FIELDS {
            assert!(v.get(*f).is_some(), "{name}: no field {f}: {v}");
        }
        assert!(v["ops"].as_u64().unwrap() > 0, "{name}: {v}");
        assert!(v["ops_per_sec"].as_f64().unwrap() > 0.0, "{name}");
        let (p50, p99, p999) = (
            v["p50_us"].as_f64().unwrap(),
            v["p99_us"].as_f64().unwrap(),
            v["p999_us"].as_f64().unwrap(),
        );
        assert!(p50 <= p99 && p99 <= p999, "{name}: {v}");
        assert_eq!(v["key_size"], 16);
        assert_eq!(v["value_size"], 100);
    }
    let by = |n: &str| out.iter().find(|v| v["benchmark"] == n).unwrap();
    assert_eq!(by("fillseq")["ops"], 2000);
    assert_eq!(by("fillseq")["found"], Value::Null);
    assert!(by("fillseq")["write_amplification"].as_f64().unwrap() > 0.0);
    assert!(by("fillseq")["db_bytes"].as_u64().unwrap() > 0);
    assert_eq!(by("readmissing")["found"], 0);
    // After fillrandom + overwrite most keys exist.
    assert!(by("readrandom")["found"].as_u64().unwrap() > 1000);
    assert!(by("readrandom")["block_cache_hit_ratio"].as_f64().unwrap() > 0.0);
    // fillseq then reads in order: readseq sees every key.
    assert_eq!(by("readseq")["ops"], by("readreverse")["ops"]);
    assert_eq!(by("fillsync")["durability"], "fsync");
    assert_eq!(by("fillsync")["ops"], 20);
    // One writer: every put is its own fsynced group (a WAL roll may add a sync of no record).
    let per_sync = by("fillsync")["wal_records_per_sync"].as_f64().unwrap();
    assert!(per_sync > 0.0 && per_sync <= 1.0, "{per_sync}");
    assert_eq!(by("readrandom")["wal_records_per_sync"], Value::Null);
    assert_eq!(by("ycsb-c")["write_amplification"], 0.0);
    assert_eq!(by("ycsb-c")["found"], 2000, "YCSB runs on a full load");
}

/// multireadrandom reads every key of a full table through `get_many_view`, in batches that do
/// not divide the operations evenly, on two threads.
#[test]
fn multireadrandom_reads_in_batches() {
    let out = bench(&[
        "--num",
        "2000",
        "--threads",
        "2",
        "--batch-size",
        "7",
        "--benchmarks",
        "fillseq,multireadrandom",
    ]);
    let m = &out[1];
    assert_eq!(m["benchmark"], "multireadrandom");
    assert_eq!(m["ops"], 2000);
    assert_eq!(m["found"], 2000);
    assert_eq!(m["write_amplification"], 0.0);
    // Latency samples are calls of 7 keys; the mean is per key: the time recorded over the
    // operations, which cannot exceed the two threads' wall time (a mean per call would be
    // about 7 times that).
    let (mean, secs) = (
        m["micros_per_op"].as_f64().unwrap(),
        m["seconds"].as_f64().unwrap(),
    );
    let recorded = mean * 2000.0 / 1e6;
    assert!(
        recorded <= 2.0 * secs * 1.01,
        "{recorded} s recorded in {secs} s on 2 threads"
    );
}

#[test]
fn threads_duration_and_text_summary() {
    let d = tempfile::tempdir().unwrap();
    let r = run(
        CELLAR,
        &[
            "bench",
            "--num",
            "3000",
            "--threads",
            "3",
            "--benchmarks",
            "fillseq,readrandom",
            "--db",
            "db",
        ],
        d.path(),
    );
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert!(r.stdout.contains("fillseq         :"), "{}", r.stdout);
    assert!(r.stdout.contains("(3000 of 3000 found)"), "{}", r.stdout);
    assert!(r.stdout.contains("BENCHMARK"), "{}", r.stdout);
    assert!(r.stdout.contains("P99.9 US"), "{}", r.stdout);
    // The database stays and is whole.
    let v = run(CELLAR, &["verify", "db"], d.path());
    assert_eq!(v.code, 0, "{}", v.stdout);

    let out = bench(&[
        "--num",
        "1000",
        "--benchmarks",
        "readrandom",
        "--duration",
        "0.3",
        "--threads",
        "2",
    ]);
    let s = out[0]["seconds"].as_f64().unwrap();
    assert!((0.25..5.0).contains(&s), "{s}");
    assert_eq!(out[0]["threads"], 2);
}

/// deleterange over small files: the range-delete trigger drops the files a delete holds whole
/// while settling, without reading them (and rewrites those it cuts for half or more);
/// `compact` then reclaims the rest.
#[test]
fn deleterange_drops_whole_files_and_compact_reclaims_the_rest() {
    let out = bench(&[
        "--num",
        "20000",
        "--target-file-size",
        "64K",
        "--range-width",
        "12000",
        "--deletes",
        "1",
        "--benchmarks",
        "fillseq,compact,deleterange,compact,readseq",
    ]);
    // The first compact cuts the flushed file into files of the target size.
    let (filled, deleted, compacted) = (&out[1], &out[2], &out[3]);
    assert_eq!(deleted["ops"], 1);
    assert_eq!(deleted["durability"], "fsync");
    assert!(deleted["files_dropped"].as_u64().unwrap() > 0, "{deleted}");
    let dropped = deleted["bytes_dropped"].as_u64().unwrap();
    let size = |v: &Value| v["db_bytes"].as_u64().unwrap();
    // The files the delete cuts may be rewritten too (when it covers half of one or more).
    assert!(
        size(deleted) <= size(filled) - dropped,
        "{filled} {deleted}"
    );
    assert_eq!(compacted["ops"], 1);
    assert_eq!(compacted["files_dropped"], 0);
    assert!(size(compacted) <= size(deleted), "{deleted} {compacted}");
    // 12000 keys are gone, or every key from a start past 8000.
    let left = out[4]["ops"].as_u64().unwrap();
    assert!((8000..20000).contains(&left), "{left}");
}

#[test]
fn bad_arguments_exit_2() {
    let d = tempfile::tempdir().unwrap();
    for args in [
        &["bench", "--benchmarks", "nosuch"][..],
        &["bench", "--threads", "0"],
        &["bench", "--num", "100000", "--key-size", "3"],
        &["bench", "--duration", "-1"],
        &["bench", "--benchmarks", "deleterange", "--range-width", "0"],
        &["bench", "--benchmarks", "deleterange", "--deletes", "0"],
        &["bench", "--target-file-size", "100"],
        &[
            "bench",
            "--benchmarks",
            "multireadrandom",
            "--batch-size",
            "0",
        ],
    ] {
        let r = run(CELLAR, args, d.path());
        assert_eq!(r.code, 2, "{args:?}: {}{}", r.stdout, r.stderr);
        assert!(!r.stderr.contains("panicked"));
    }
}
