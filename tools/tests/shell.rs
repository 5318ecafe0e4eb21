//! `cellar shell` end to end: the real binary, with `-e`, a script file and stdin, in text and
//! JSON, against the seeds' webtable example; and the results compared with the Rust API.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

use cellar::{Db, Get, Options, Scan};

const CELLAR: &str = env!("CARGO_BIN_EXE_cellar");

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

/// Run `cellar shell --db DIR ARGS...` with `stdin` piped in.
fn shell(db: &Path, args: &[&str], stdin: &str) -> Run {
    let mut child = Command::new(CELLAR)
        .arg("shell")
        .arg("--db")
        .arg(db)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run cellar");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(stdin.as_bytes())
        .expect("write stdin");
    let out = child.wait_with_output().expect("wait");
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: mask(&String::from_utf8_lossy(&out.stdout)),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Each line of a `--format json` run, parsed.
fn json_lines(stdout: &str) -> Vec<serde_json::Value> {
    stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// Timings vary: `Took 0.0012 seconds` becomes `Took X seconds`.
fn mask(s: &str) -> String {
    s.lines()
        .map(|l| {
            if l.starts_with("Took ") && l.ends_with(" seconds") {
                "Took X seconds"
            } else {
                l
            }
        })
        .map(|l| format!("{l}\n"))
        .collect()
}

const WEBTABLE: &str = "\
create 'webtable', {NAME => 'contents', VERSIONS => 3}, 'anchor'
put 'webtable', 'com.cnn.www', 'contents:html', '<html>v3', 3
put 'webtable', 'com.cnn.www', 'contents:html', '<html>v5', 5
put 'webtable', 'com.cnn.www', 'contents:html', '<html>v6', 6
put 'webtable', 'com.cnn.www', 'anchor:cnnsi.com', 'CNN', 9
put 'webtable', 'com.cnn.www', 'anchor:my.look.ca', 'CNN.com', 8
get 'webtable', 'com.cnn.www', {COLUMN => 'contents:html', VERSIONS => 3}
delete 'webtable', 'com.cnn.www', 'contents:html', 5, {TYPE => 'VERSION'}
delete 'webtable', 'com.cnn.www', 'anchor:my.look.ca', 8
get 'webtable', 'com.cnn.www', {VERSIONS => 3}
scan 'webtable'
scan 'webtable', {RAW => true, VERSIONS => 3}
";

const WEBTABLE_TEXT: &str = "\
Created table webtable
Took X seconds
Took X seconds
Took X seconds
Took X seconds
Took X seconds
Took X seconds
COLUMN          CELL
 contents:html  timestamp=6, value=<html>v6
 contents:html  timestamp=5, value=<html>v5
 contents:html  timestamp=3, value=<html>v3
1 row(s)
Took X seconds
Took X seconds
Took X seconds
COLUMN             CELL
 anchor:cnnsi.com  timestamp=9, value=CNN
 contents:html     timestamp=6, value=<html>v6
 contents:html     timestamp=3, value=<html>v3
1 row(s)
Took X seconds
ROW           COLUMN+CELL
 com.cnn.www  column=anchor:cnnsi.com, timestamp=9, value=CNN
 com.cnn.www  column=contents:html, timestamp=6, value=<html>v6
1 row(s)
Took X seconds
ROW           COLUMN+CELL
 com.cnn.www  column=anchor:cnnsi.com, timestamp=9, value=CNN
 com.cnn.www  column=anchor:my.look.ca, timestamp=8, type=DeleteColumn
 com.cnn.www  column=anchor:my.look.ca, timestamp=8, value=CNN.com
 com.cnn.www  column=contents:html, timestamp=6, value=<html>v6
 com.cnn.www  column=contents:html, timestamp=5, type=Delete
 com.cnn.www  column=contents:html, timestamp=5, value=<html>v5
 com.cnn.www  column=contents:html, timestamp=3, value=<html>v3
1 row(s)
Took X seconds
";

/// Assert that `line` is the JSON answer of a failed command of `kind`.
fn assert_error(line: &str, kind: &str) {
    assert!(
        line.starts_with(&format!(r#"{{"ok":false,"kind":"{kind}","#)),
        "expected a {kind} error: {line}"
    );
}

fn cell(column: &str, ts: u64, kind: &str, value: &str) -> String {
    format!(
        r#"{{"row":"com.cnn.www","column":"{column}","timestamp":{ts},"type":"{kind}","value":"{value}"}}"#
    )
}

fn cells(rows: usize, cells: &[String]) -> String {
    format!(
        r#"{{"ok":true,"rows":{rows},"cells":[{}]}}"#,
        cells.join(",")
    )
}

fn webtable_json() -> String {
    let ok = r#"{"ok":true}"#.to_owned();
    let lines = [
        ok.clone(),
        ok.clone(),
        ok.clone(),
        ok.clone(),
        ok.clone(),
        ok.clone(),
        cells(
            1,
            &[
                cell("contents:html", 6, "Put", "<html>v6"),
                cell("contents:html", 5, "Put", "<html>v5"),
                cell("contents:html", 3, "Put", "<html>v3"),
            ],
        ),
        ok.clone(),
        ok,
        cells(
            1,
            &[
                cell("anchor:cnnsi.com", 9, "Put", "CNN"),
                cell("contents:html", 6, "Put", "<html>v6"),
                cell("contents:html", 3, "Put", "<html>v3"),
            ],
        ),
        cells(
            1,
            &[
                cell("anchor:cnnsi.com", 9, "Put", "CNN"),
                cell("contents:html", 6, "Put", "<html>v6"),
            ],
        ),
        cells(
            1,
            &[
                cell("anchor:cnnsi.com", 9, "Put", "CNN"),
                cell("anchor:my.look.ca", 8, "DeleteColumn", ""),
                cell("anchor:my.look.ca", 8, "Put", "CNN.com"),
                cell("contents:html", 6, "Put", "<html>v6"),
                cell("contents:html", 5, "Delete", ""),
                cell("contents:html", 5, "Put", "<html>v5"),
                cell("contents:html", 3, "Put", "<html>v3"),
            ],
        ),
    ];
    lines.iter().map(|l| format!("{l}\n")).collect()
}

#[test]
fn webtable_text_with_e() {
    let dir = tempfile::tempdir().unwrap();
    let r = shell(&dir.path().join("db"), &["-e", WEBTABLE], "");
    assert_eq!((r.code, r.stderr.as_str()), (0, ""));
    assert_eq!(r.stdout, WEBTABLE_TEXT);
}

#[test]
fn webtable_json_from_stdin() {
    let dir = tempfile::tempdir().unwrap();
    let r = shell(&dir.path().join("db"), &["--format", "json"], WEBTABLE);
    assert_eq!((r.code, r.stderr.as_str()), (0, ""));
    assert_eq!(r.stdout, webtable_json());
}

#[test]
fn webtable_from_a_script_file_and_semicolons() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("web.hbase");
    std::fs::write(&script, WEBTABLE).unwrap();
    let r = shell(&dir.path().join("db"), &[script.to_str().unwrap()], "");
    assert_eq!((r.code, r.stdout.as_str()), (0, WEBTABLE_TEXT));
    // The same statements on one line, separated by ';'.
    let one_line = WEBTABLE
        .replace("webtable'", "webtable2'")
        .replace('\n', "; ");
    let r = shell(
        &dir.path().join("db"),
        &["--format", "json", "-e", &one_line],
        "",
    );
    assert_eq!((r.code, r.stdout), (0, webtable_json()));
}

#[test]
fn errors_are_reported_and_the_run_goes_on_with_exit_code_1() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let script = "get 'nope', 'r'\nput 't', 'r'\ncreate 't', 'cf'\nput 't', 'r', 'cf:q', 'v', 1\nscan 't', {REVERSED => true}\nscan 't', {LIMIT => 1}\n";
    let r = shell(&db, &["--format", "json"], script);
    assert_eq!(r.code, 1);
    let expected = concat!(
        r#"{"ok":false,"kind":"TableNotFound","error":"table not found: nope"}"#,
        "\n",
        r#"{"ok":false,"kind":"ParseError","error":"line 2, column 13: expected a column 'family:qualifier' (usage: put 't', 'row', 'cf:q', 'value'[, ts][, {TTL => ms}])"}"#,
        "\n",
        r#"{"ok":true}"#,
        "\n",
        r#"{"ok":true}"#,
        "\n",
        r#"{"ok":true,"rows":1,"cells":[{"row":"r","column":"cf:q","timestamp":1,"type":"Put","value":"v"}]}"#,
        "\n",
        r#"{"ok":true,"rows":1,"cells":[{"row":"r","column":"cf:q","timestamp":1,"type":"Put","value":"v"}]}"#,
        "\n",
    );
    assert_eq!(r.stdout, expected);

    // Text mode: errors go to stderr with the same message.
    let r = shell(&db, &["-e", "get 'nope', 'r'; list"], "");
    assert_eq!(r.code, 1);
    assert_eq!(r.stderr, "ERROR: table not found: nope\n");
    assert_eq!(r.stdout, "TABLE\nt\n1 row(s)\nTook X seconds\n=> [\"t\"]\n");

    // An unterminated string costs its line only.
    let r = shell(&db, &["--format", "json"], "put 't', 'r\nexists 't'\n");
    assert_eq!(r.code, 1);
    assert_eq!(
        r.stdout,
        "{\"ok\":false,\"kind\":\"ParseError\",\"error\":\"line 1, column 10: unterminated string (a string ends on its line; write \\\\n for a newline)\"}\n{\"ok\":true,\"exists\":true}\n"
    );
}

#[test]
fn binary_keys_round_trip_escaped() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let script = "create 't', 'cf'\nput 't', \"r\\x00\\xff\", 'cf:q\\x01', \"a\\tb\"\nget 't', 'r\\x00\\xFF'\n";
    let r = shell(&db, &[], script);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stdout.starts_with(
            "Created table t\nTook X seconds\nTook X seconds\nCOLUMN     CELL\n cf:q\\x01  timestamp="
        ),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout.contains(", value=a\\x09b\n1 row(s)\n"),
        "{}",
        r.stdout
    );
    let d = Db::open(&db, Options::default()).unwrap();
    let row = d
        .table("t")
        .unwrap()
        .get(&Get::new(b"r\x00\xff".to_vec()))
        .unwrap()
        .unwrap();
    assert_eq!(row.value("cf", b"q\x01"), Some(&b"a\tb"[..]));
}

#[test]
fn shell_results_agree_with_the_rust_api() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let mut script = String::from("create 'users', {NAME => 'info', VERSIONS => 2}, 'stats'\n");
    for i in 0..20u64 {
        script += &format!("put 'users', 'u{i:02}', 'info:name', 'n{i}', {}\n", 100 + i);
        script += &format!("put 'users', 'u{i:02}', 'info:name', 'm{i}', {}\n", 200 + i);
        if i % 3 == 0 {
            script += &format!("incr 'users', 'u{i:02}', 'stats:visits', {i}\n");
        }
        if i % 4 == 0 {
            script += &format!("deleteall 'users', 'u{i:02}', 'info:name', {}\n", 150 + i);
        }
    }
    script += "delete 'users', 'u05', 'info'\nflush 'users'\n";
    let r = shell(&db, &["--format", "json"], &script);
    assert_eq!(r.code, 0, "{}", r.stdout);

    let queries = "scan 'users', {VERSIONS => 2}\nscan 'users', {STARTROW => 'u03', STOPROW => 'u09', COLUMNS => ['info:name']}\nscan 'users', {FILTER => \"PrefixFilter('u1') AND ValueFilter(=, 'binaryprefix:m1')\"}\ncount 'users'\nget_counter 'users', 'u09', 'stats:visits'\n";
    let r = shell(&db, &["--format", "json"], queries);
    assert_eq!(r.code, 0, "{}", r.stdout);
    let lines = json_lines(&r.stdout);

    let d = Db::open(&db, Options::default()).unwrap();
    let t = d.table("users").unwrap();
    let api = |scan: Scan| -> serde_json::Value {
        let rows: Vec<cellar::Row> = t.scan(scan).unwrap().map(|r| r.unwrap()).collect();
        let cells: Vec<serde_json::Value> = rows
            .iter()
            .flat_map(|r| r.cells.iter())
            .map(|c| {
                serde_json::json!({
                    "row": String::from_utf8(c.row.clone()).unwrap(),
                    "column": format!("{}:{}", c.family, String::from_utf8(c.qualifier.clone()).unwrap()),
                    "timestamp": c.timestamp,
                    "type": c.cell_type.name(),
                    "value": String::from_utf8(c.value.clone()).unwrap().replace('\0', "\\x00"),
                })
            })
            .collect();
        serde_json::json!({"ok": true, "rows": rows.len(), "cells": cells})
    };
    let fix_counters = |mut v: serde_json::Value| {
        // Counter values are 8 binary bytes: compare them as the shell escapes them.
        for c in v["cells"].as_array_mut().unwrap() {
            if c["column"] == "stats:visits" {
                c["value"] = serde_json::Value::Null;
            }
        }
        v
    };
    assert_eq!(
        fix_counters(lines[0].clone()),
        fix_counters(api(Scan::new().max_versions(2)))
    );
    assert_eq!(
        lines[1],
        api(Scan::new().range("u03", "u09").column("info", "name"))
    );
    assert_eq!(
        lines[2],
        api(Scan::new().filter(cellar::Filter::And(vec![
            cellar::Filter::RowPrefix(b"u1".to_vec()),
            cellar::Filter::And(vec![
                cellar::Filter::Value(cellar::CompareOp::GreaterOrEqual, b"m1".to_vec()),
                cellar::Filter::Value(cellar::CompareOp::Less, b"m2".to_vec()),
            ]),
        ])))
    );
    assert_eq!(lines[2]["rows"], 10);
    assert_eq!(lines[3], serde_json::json!({"ok": true, "count": 19}));
    assert_eq!(lines[4], serde_json::json!({"ok": true, "value": 9}));
}

#[test]
fn disable_drop_truncate_and_namespaces() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let r = shell(
        &db,
        &["--format", "json"],
        "create_namespace 'ns'\ncreate 'ns:t', {NAME => 'cf', TTL => 86400, BLOOMFILTER => 'ROWCOL'}\nput 'ns:t', 'r', 'cf:q', 'v'\ndrop 'ns:t'\ndisable 'ns:t'\nput 'ns:t', 'r', 'cf:q', 'v'\nis_enabled 'ns:t'\n",
    );
    assert_eq!(r.code, 1);
    let expected = concat!(
        "{\"ok\":true}\n{\"ok\":true}\n{\"ok\":true}\n",
        "{\"ok\":false,\"kind\":\"TableNotDisabled\",\"error\":\"table ns:t is enabled; disable it first\"}\n",
        "{\"ok\":true}\n",
        "{\"ok\":false,\"kind\":\"TableNotEnabled\",\"error\":\"table ns:t is disabled\"}\n",
        "{\"ok\":true,\"enabled\":false}\n",
    );
    assert_eq!(r.stdout, expected);
    // The disabled state outlives the run, so `drop` can be a separate one.
    let r = shell(
        &db,
        &["--format", "json"],
        "describe 'ns:t'\ndrop 'ns:t'\nlist_namespace_tables 'ns'\ncreate_namespace 'ns'\ndrop_namespace 'ns'\nlist_namespace\n",
    );
    assert_eq!(r.code, 1);
    let expected = concat!(
        "{\"ok\":true,\"table\":\"ns:t\",\"enabled\":false,\"families\":[{\"NAME\":\"cf\",\"VERSIONS\":3,\"MIN_VERSIONS\":0,\"TTL\":86400,\"KEEP_DELETED_CELLS\":\"FALSE\",\"BLOOMFILTER\":\"ROWCOL\",\"COMPRESSION\":\"NONE\",\"BLOCKSIZE\":65536,\"NEW_VERSION_BEHAVIOR\":false}]}\n",
        "{\"ok\":true}\n",
        "{\"ok\":true,\"tables\":[]}\n",
        "{\"ok\":false,\"kind\":\"NamespaceExists\",\"error\":\"namespace ns exists\"}\n",
        "{\"ok\":true}\n",
        "{\"ok\":true,\"namespaces\":[\"default\"]}\n",
    );
    assert_eq!(r.stdout, expected);

    let r = shell(
        &db,
        &[],
        "create 't', 'a', 'b'\nput 't', 'r', 'a:q', 'v'\ntruncate 't'\ncount 't'\nalter 't', NAME => 'a', VERSIONS => 5\nalter 't', 'delete' => 'b'\ndescribe 't'\n",
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(
        r.stdout,
        "Created table t\nTook X seconds\nTook X seconds\nTruncating 't' table (it may take a while):\nTook X seconds\n0 row(s)\nTook X seconds\nTook X seconds\nTook X seconds\nTable t is ENABLED\nt\nCOLUMN FAMILIES DESCRIPTION\n{NAME => 'a', VERSIONS => '5', MIN_VERSIONS => '0', TTL => 'FOREVER', KEEP_DELETED_CELLS => 'FALSE', BLOOMFILTER => 'ROW', COMPRESSION => 'NONE', BLOCKSIZE => '65536', NEW_VERSION_BEHAVIOR => 'false'}\n\n1 row(s)\nTook X seconds\n"
    );
}

#[test]
fn family_deletes_and_counters() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let script = "\
create 't', 'cf'
put 't', 'r', 'cf:a', '1', 10
put 't', 'r', 'cf:b', '2', 10
put 't', 'r', 'cf:b', '3', 20
delete 't', 'r', 'cf', 10, {TYPE => 'FAMILY_VERSION'}
scan 't', {RAW => true, VERSIONS => 5}
get 't', 'r'
delete 't', 'r', 'cf', 30
get 't', 'r'
incr 't', 'c', 'cf:n'
incr 't', 'c', 'cf:n', -3
get_counter 't', 'c', 'cf:n'
get_counter 't', 'c', 'cf:missing'
append 't', 'c', 'cf:s', 'ab'
append 't', 'c', 'cf:s', \"\\x00\"
";
    let r = shell(&db, &["--format", "json"], script);
    assert_eq!(r.code, 0, "{}", r.stdout);
    let lines: Vec<&str> = r.stdout.lines().collect();
    assert_eq!(
        lines[5],
        r#"{"ok":true,"rows":1,"cells":[{"row":"r","column":"cf:","timestamp":10,"type":"DeleteFamilyVersion","value":""},{"row":"r","column":"cf:a","timestamp":10,"type":"Put","value":"1"},{"row":"r","column":"cf:b","timestamp":20,"type":"Put","value":"3"},{"row":"r","column":"cf:b","timestamp":10,"type":"Put","value":"2"}]}"#
    );
    assert_eq!(
        lines[6],
        r#"{"ok":true,"rows":1,"cells":[{"row":"r","column":"cf:b","timestamp":20,"type":"Put","value":"3"}]}"#
    );
    assert_eq!(lines[8], r#"{"ok":true,"rows":0,"cells":[]}"#);
    assert_eq!(lines[9], r#"{"ok":true,"value":1}"#);
    assert_eq!(lines[10], r#"{"ok":true,"value":-2}"#);
    assert_eq!(lines[11], r#"{"ok":true,"value":-2}"#);
    assert_eq!(lines[12], r#"{"ok":true,"value":null}"#);
    assert_eq!(lines[13], r#"{"ok":true,"value":"ab"}"#);
    assert_eq!(lines[14], r#"{"ok":true,"value":"ab\\x00"}"#);
}

#[test]
fn usage_errors_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let r = shell(
        &dir.path().join("db"),
        &[dir.path().join("missing.txt").to_str().unwrap()],
        "",
    );
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("missing.txt"), "{}", r.stderr);
}

#[test]
fn reversed_scans_walk_rows_backward() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let script = "create 't', 'cf'\nput 't', 'a', 'cf:q', '1', 1\nput 't', 'b', 'cf:q', '2', 1\nput 't', 'c', 'cf:q', '3', 1\nscan 't', {REVERSED => true}\nscan 't', {REVERSED => true, STARTROW => 'b'}\n";
    let r = shell(&db, &["--format", "json"], script);
    assert_eq!(r.code, 0, "{}", r.stdout);
    let lines: Vec<&str> = r.stdout.lines().collect();
    assert_eq!(
        lines[4],
        r#"{"ok":true,"rows":3,"cells":[{"row":"c","column":"cf:q","timestamp":1,"type":"Put","value":"3"},{"row":"b","column":"cf:q","timestamp":1,"type":"Put","value":"2"},{"row":"a","column":"cf:q","timestamp":1,"type":"Put","value":"1"}]}"#
    );
    assert_eq!(
        lines[5],
        r#"{"ok":true,"rows":2,"cells":[{"row":"b","column":"cf:q","timestamp":1,"type":"Put","value":"2"},{"row":"a","column":"cf:q","timestamp":1,"type":"Put","value":"1"}]}"#
    );
}

#[test]
fn put_with_a_ttl_attribute_writes_a_cell_that_expires() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    // A timestamp 10 s in the past with a 1 s TTL is already gone; one with a 1 h TTL is not.
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    let script = format!(
        "create 't', 'cf'\nput 't', 'a', 'cf:q', 'gone', {old}, {{TTL => 1000}}\nput 't', 'b', 'cf:q', 'kept', {{TTL => 3600000}}\nput 't', 'c', 'cf:q', 'x', {{TTL => 'soon'}}\ncount 't'\n",
        old = now - 10_000
    );
    let r = shell(&db, &["--format", "json"], &script);
    assert_eq!(r.code, 1, "{}", r.stdout);
    let lines: Vec<&str> = r.stdout.lines().collect();
    assert_eq!(lines[1], r#"{"ok":true}"#);
    assert_eq!(lines[2], r#"{"ok":true}"#);
    assert!(lines[3].contains(r#""ok":false"#), "{}", lines[3]);
    assert_eq!(lines[4], r#"{"ok":true,"count":1}"#);
}

/// `status` reports the WAL: its device and how its groups were written. The shell's puts
/// are `SyncWal`, copied through a map of the segment unless the environment turns maps off
/// (CI runs the tests both ways); the `create` logs an fsynced schema record.
#[test]
fn status_reports_the_wal() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let script = "create 't', 'cf'\nput 't', 'a', 'cf:q', '1'\nput 't', 'b', 'cf:q', '2'\nput 't', 'c', 'cf:q', '3'\nstatus\n";
    let r = shell(&db, &["--format", "json"], script);
    assert_eq!(r.code, 0, "{}", r.stdout);
    let last = r.stdout.lines().last().unwrap();
    let v: serde_json::Value = serde_json::from_str(last).unwrap();
    let wal = &v["stats"]["wal"];
    // The puts, and the table's creation (a schema record, fsynced: never through the map).
    assert_eq!(wal["records"], 4, "{last}");
    assert_eq!(wal["groups"], 4, "{last}");
    let mapped = std::env::var("CELLAR_WAL_MAPPED").as_deref() != Ok("0");
    assert_eq!(wal["mapped_groups"], if mapped { 3 } else { 0 }, "{last}");
    assert!(
        wal["device"] == "io_uring" || wal["device"] == "sync",
        "{last}"
    );
    assert!(
        v["report"]
            .as_str()
            .unwrap()
            .contains("records 4 in 4 groups"),
        "{last}"
    );
    // The first window the WAL maps is handed to the prefault thread past its first page.
    let p = &v["stats"]["prefault"];
    if mapped && p["active"] == true {
        assert!(p["requests"].as_u64().unwrap() >= 1, "{last}");
    }
    assert!(v["report"].as_str().unwrap().contains("Prefault (process)"));
    // No row-range delete: nothing dropped by one.
    assert_eq!(v["stats"]["compaction_files_dropped"], 0, "{last}");
    assert_eq!(v["stats"]["compaction_bytes_dropped"], 0, "{last}");
    assert_eq!(v["stats"]["compaction_range_deletes_gone"], 0, "{last}");
    assert!(v["report"]
        .as_str()
        .unwrap()
        .contains("files they dropped unread 0 (0.0 MB)"));
}

/// `status` counts the cells reads examined and did not return, by cause, in its JSON and
/// its report: a masked put and its marker, and versions beyond a Get's limit.
#[test]
fn status_counts_skipped_cells_by_cause() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let script = "\
create 't', {NAME => 'cf', VERSIONS => 3}
put 't', 'r', 'cf:q', 'v1', 1
put 't', 'r', 'cf:q', 'v2', 2
put 't', 'r', 'cf:q', 'v3', 3
put 't', 'm', 'cf:q', 'gone', 1
delete 't', 'm', 'cf:q', 5
get 't', 'r'
get 't', 'm'
status
";
    let r = shell(&db, &["--format", "json"], script);
    assert_eq!(r.code, 0, "{}", r.stdout);
    let last = r.stdout.lines().last().unwrap();
    let v: serde_json::Value = serde_json::from_str(last).unwrap();
    let skipped = &v["stats"]["skipped_cells"];
    assert_eq!(skipped["versions"], 2, "{last}");
    assert_eq!(skipped["marker"], 1, "{last}");
    assert_eq!(skipped["masked"], 1, "{last}");
    assert_eq!(skipped["expired"], 0, "{last}");
    assert!(
        v["report"]
            .as_str()
            .unwrap()
            .contains("Cells read and not returned: 4 ("),
        "{last}"
    );
}

#[test]
fn converters_and_formatter_print_values_as_hbase_does() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let script = "\
create 't', 'cf'
incr 't', 'r', 'cf:n', 42
put 't', 'r', 'cf:s', 'caf\\xC3\\xA9', 5
put 't', 'r', 'cf:a:b', 'colon', 5
get 't', 'r', 'cf:n:toLong'
get 't', 'r', {COLUMNS => ['cf:n:c(org.apache.hadoop.hbase.util.Bytes).toLong', 'cf:s']}
scan 't', {COLUMNS => ['cf:s'], FORMATTER => 'toString'}
get 't', 'r', 'cf:a:b'
get 't', 'r', 'cf:s:toLong'
scan 't', {FORMATTER => 'toMoney'}
scan 't', {FORMATTER_CLASS => 'com.example.Money'}
get 't', 'r', {COLUMN => 'cf:s', MAXLENGTH => 14}
put 't', 'r', 'cf:x:toLong', 'stripped', 6
get 't', 'r', 'cf:x'
";
    let r = shell(&db, &["--format", "json"], script);
    assert_eq!(r.code, 1, "{}", r.stdout);
    let lines: Vec<&str> = r.stdout.lines().collect();
    let n = r#"{"row":"r","column":"cf:n","#;
    assert!(
        lines[4].starts_with(r#"{"ok":true,"rows":1,"cells":[{"row":"r","column":"cf:n","#)
            && lines[4].ends_with(r#""type":"Put","value":"42"}]}"#),
        "{}",
        lines[4]
    );
    assert!(
        lines[5].contains(n) && lines[5].contains(r#""value":"42"}"#),
        "{}",
        lines[5]
    );
    assert!(
        lines[5].contains(r#""value":"caf\\xC3\\xA9"}"#),
        "{}",
        lines[5]
    );
    assert_eq!(
        lines[6],
        r#"{"ok":true,"rows":1,"cells":[{"row":"r","column":"cf:s","timestamp":5,"type":"Put","value":"café"}]}"#
    );
    // Text after a second ':' that names no converter is part of the qualifier.
    assert_eq!(
        lines[7],
        r#"{"ok":true,"rows":1,"cells":[{"row":"r","column":"cf:a:b","timestamp":5,"type":"Put","value":"colon"}]}"#
    );
    assert!(
        lines[8].starts_with(r#"{"ok":false,"kind":"BadValue","#)
            && lines[8].contains("toLong needs 8 bytes, the value has 5"),
        "{}",
        lines[8]
    );
    assert_error(lines[9], "Unsupported");
    assert_error(lines[10], "Unsupported");
    // MAXLENGTH cuts text output only; JSON keeps the value whole.
    assert!(
        lines[11].contains(r#""value":"caf\\xC3\\xA9""#),
        "{}",
        lines[11]
    );
    // As in HBase, a converter in a written column is not part of the qualifier.
    assert_eq!(
        lines[13],
        r#"{"ok":true,"rows":1,"cells":[{"row":"r","column":"cf:x","timestamp":6,"type":"Put","value":"stripped"}]}"#
    );

    let text = shell(
        &db,
        &[],
        "get 't', 'r', {COLUMN => 'cf:s', MAXLENGTH => 14}\nscan 't', {COLUMNS => 'cf:n:toLong'}\n",
    );
    assert_eq!(text.code, 0, "{}", text.stdout);
    assert_eq!(
        text.stdout,
        "COLUMN  CELL\n cf:s   timestamp=5, v\n1 row(s)\nTook X seconds\n".to_owned()
            + &format!(
                "ROW  COLUMN+CELL\n r   column=cf:n, timestamp={}, value=42\n1 row(s)\nTook X seconds\n",
                text.stdout
                    .split("timestamp=")
                    .nth(2)
                    .and_then(|s| s.split(',').next())
                    .unwrap_or("?")
            )
    );
}

#[test]
fn substring_and_regex_filters_select_as_hbase_does() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let script = "\
create 't', 'cf'
put 't', 'u1', 'cf:name', 'Alice Smith'
put 't', 'u2', 'cf:name', 'Bob'
put 't', 'u10', 'cf:name', 'SMITHERS'
put 't', 'x', 'cf:name', 'smith'
scan 't', {FILTER => \"ValueFilter(=, 'substring:smith')\"}
scan 't', {FILTER => \"RowFilter(=, 'regexstring:^u[0-9]$') AND ValueFilter(!=, 'substring:BOB')\"}
count 't', {FILTER => \"SingleColumnValueFilter('cf', 'name', !=, 'regexstring:(?i)^smith')\"}
scan 't', {FILTER => \"ValueFilter(=, 'regexstring:(')\"}
scan 't', {FILTER => \"ValueFilter(>, 'substring:a')\"}
";
    let r = shell(&db, &["--format", "json"], script);
    assert_eq!(r.code, 1, "{}", r.stdout);
    let lines: Vec<&str> = r.stdout.lines().collect();
    let rows = |l: &str| -> Vec<String> {
        let v: serde_json::Value = serde_json::from_str(l).unwrap();
        v["cells"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["row"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(rows(lines[5]), ["u1", "u10", "x"], "case ignored");
    assert_eq!(rows(lines[6]), ["u1"]);
    assert_eq!(lines[7], r#"{"ok":true,"count":2}"#, "Alice Smith and Bob");
    assert_error(lines[8], "InvalidArgument");
    assert!(
        lines[9].starts_with(r#"{"ok":false,"kind":"ParseError","#) && lines[9].contains("= or !="),
        "{}",
        lines[9]
    );
}

#[test]
fn family_range_pagination_and_exclude_filters_end_to_end() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let script = "\
create 't', {NAME => 'a', VERSIONS => 3}, 'b'
put 't', 'r', 'a:c1', 'x', 1
put 't', 'r', 'a:c1', 'y', 2
put 't', 'r', 'a:c2', 'z', 1
put 't', 'r', 'a:c3', 'w', 1
put 't', 'r', 'b:c1', 'v', 1
put 't', 's', 'a:c1', 'no', 1
scan 't', {FILTER => \"FamilyFilter(=, 'binary:b')\"}
scan 't', {VERSIONS => 3, FILTER => \"ColumnPaginationFilter(2, 1)\"}
scan 't', {FILTER => \"ColumnRangeFilter('c2', true, 'c3', false)\"}
scan 't', {FILTER => \"SingleColumnValueExcludeFilter('a', 'c1', =, 'binary:y')\"}
scan 't', {FILTER => \"DependentColumnFilter('a', 'c2', true)\"}
scan 't', {FILTER => \"SKIP ValueFilter(!=, 'binary:no')\"}
scan 't', {FILTER => \"WHILE ValueFilter(!=, 'binary:no')\"}
scan 't', {FILTER => \"WHILE ValueFilter(!=, 'binary:y')\"}
";
    let r = shell(&db, &["--format", "json"], script);
    assert_eq!(r.code, 0, "{}", r.stdout);
    let lines: Vec<&str> = r.stdout.lines().collect();
    let cells = |l: &str| -> Vec<String> {
        let v: serde_json::Value = serde_json::from_str(l).unwrap();
        v["cells"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| {
                format!(
                    "{}/{}={}",
                    c["row"].as_str().unwrap(),
                    c["column"].as_str().unwrap(),
                    c["value"].as_str().unwrap()
                )
            })
            .collect()
    };
    assert_eq!(cells(lines[7]), ["r/b:c1=v"]);
    // Row r's columns: a:c1, a:c2, a:c3, b:c1; skip one, keep two, one version each.
    assert_eq!(cells(lines[8]), ["r/a:c2=z", "r/a:c3=w"]);
    assert_eq!(cells(lines[9]), ["r/a:c2=z"]);
    assert_eq!(cells(lines[10]), ["r/a:c2=z", "r/a:c3=w", "r/b:c1=v"]);
    // a:c2 is at timestamp 1: the cells at 1, a:c2 itself dropped (a:c1's newest is at 2).
    assert_eq!(cells(lines[11]), ["r/a:c3=w", "r/b:c1=v"]);
    let whole_r = ["r/a:c1=y", "r/a:c2=z", "r/a:c3=w", "r/b:c1=v"];
    assert_eq!(
        cells(lines[12]),
        whole_r,
        "SKIP drops row s, which holds 'no'"
    );
    assert_eq!(cells(lines[13]), whole_r, "WHILE stops at row s");
    assert!(cells(lines[14]).is_empty(), "WHILE stops at row r");
}

#[test]
fn version_describe_namespace_and_truncate_preserve() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let script = "\
version
create_namespace 'ns'
describe_namespace 'ns'
describe_namespace 'missing'
create 'ns:t', 'cf'
put 'ns:t', 'r', 'cf:q', 'v'
disable 'ns:t'
truncate_preserve 'ns:t'
count 'ns:t'
";
    let r = shell(&db, &["--format", "json"], script);
    assert_eq!(r.code, 1, "{}", r.stdout);
    let lines: Vec<&str> = r.stdout.lines().collect();
    assert_eq!(
        lines[0],
        format!(r#"{{"ok":true,"version":"{}"}}"#, env!("CARGO_PKG_VERSION"))
    );
    assert_eq!(lines[2], r#"{"ok":true,"namespace":"ns"}"#);
    assert_error(lines[3], "NamespaceNotFound");
    assert_eq!(lines[7], r#"{"ok":true}"#);
    assert_eq!(
        lines[8], r#"{"ok":true,"count":0}"#,
        "emptied and enabled again"
    );
}

#[test]
fn clone_table_schema_copies_families_not_cells() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let script = "\
create 't', {NAME => 'a', VERSIONS => 3, TTL => 3600}, {NAME => 'b', BLOOMFILTER => 'ROWCOL'}
put 't', 'r', 'a:q', 'v'
clone_table_schema 't', 'ns2:copy'
create_namespace 'ns2'
clone_table_schema 't', 'ns2:copy', false
count 'ns2:copy'
clone_table_schema 't', 'ns2:copy'
clone_table_schema 'missing', 'other'
clone_table_schema 't'
clone_table_schema 't', 'x', 'maybe'
";
    let r = shell(&db, &["--format", "json"], script);
    assert_eq!(r.code, 1, "{}", r.stdout);
    let lines: Vec<&str> = r.stdout.lines().collect();
    assert_error(lines[2], "NamespaceNotFound");
    assert_eq!(lines[4], r#"{"ok":true}"#);
    assert_eq!(lines[5], r#"{"ok":true,"count":0}"#, "cells stay behind");
    assert_error(lines[6], "TableExists");
    assert_error(lines[7], "TableNotFound");
    for l in &lines[8..10] {
        assert_error(l, "ParseError");
    }
    // The copy has the source's families, attribute for attribute.
    let d = cellar::Db::open(&db, cellar::Options::default()).unwrap();
    let (src, copy) = (d.describe("t").unwrap(), d.describe("ns2:copy").unwrap());
    assert_eq!(src.families, copy.families);
    assert_eq!(copy.families.len(), 2);
    assert_eq!(copy.get_family("a").unwrap().max_versions, 3);
}

#[test]
fn status_takes_hbases_detail_words_and_refuses_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let script = "status 'summary'\nstatus 'detailed'\nstatus 'tasks'\nstatus 'detial'\n";
    let r = shell(&db, &["--format", "json"], script);
    assert_eq!(r.code, 1, "{}", r.stdout);
    let lines: Vec<&str> = r.stdout.lines().collect();
    for l in &lines[..2] {
        assert!(l.starts_with(r#"{"ok":true,"stats":"#), "{l}");
    }
    assert_error(lines[2], "Unsupported");
    assert_error(lines[3], "ParseError");
}

#[test]
fn create_takes_region_options_and_refuses_other_table_options() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let script = "\
create 't', 'f', SPLITS => ['10', '20']
create 'u', 'f', {NUMREGIONS => 15, SPLITALGO => 'HexStringSplit'}
create 'v', 'f', {DURABILITY => 'ASYNC_WAL'}
create 'w', 'f', SPLITS => [10]
create 'x', 'f', {SPLITS => ['a'], BOGUS => 1}
put 't', '15', 'f:q', 'one region'
count 't'
";
    let r = shell(&db, &["--format", "json"], script);
    assert_eq!(r.code, 1, "{}", r.stdout);
    let lines: Vec<&str> = r.stdout.lines().collect();
    assert_eq!(&lines[..2], [r#"{"ok":true}"#, r#"{"ok":true}"#]);
    assert!(
        lines[2].starts_with(r#"{"ok":false,"kind":"Unsupported""#)
            && lines[2].contains("DURABILITY"),
        "{}",
        lines[2]
    );
    for l in &lines[3..5] {
        assert_error(l, "ParseError");
    }
    assert_eq!(lines[6], r#"{"ok":true,"count":1}"#);
    let d = cellar::Db::open(&db, cellar::Options::default()).unwrap();
    assert!(d.table_exists("u").unwrap());
    assert!(!d.table_exists("v").unwrap() && !d.table_exists("w").unwrap());
}

#[test]
fn a_family_alone_names_its_empty_qualifier_as_in_hbase() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let script = "\
create 't', 'cf'
put 't', 'r', 'cf', 'v', 7
append 't', 'r', 'cf', 'w'
incr 't', 'n', 'cf', 2
get_counter 't', 'n', 'cf'
get 't', 'r'
";
    let r = shell(&db, &["--format", "json"], script);
    assert_eq!(r.code, 0, "{}", r.stdout);
    let lines: Vec<&str> = r.stdout.lines().collect();
    assert_eq!(lines[4], r#"{"ok":true,"value":2}"#);
    assert!(
        lines[5].starts_with(r#"{"ok":true,"rows":1,"cells":[{"row":"r","column":"cf:","#)
            && lines[5].ends_with(r#""type":"Put","value":"vw"}]}"#),
        "{}",
        lines[5]
    );
    let d = cellar::Db::open(&db, cellar::Options::default()).unwrap();
    let row = d
        .table("t")
        .unwrap()
        .get(&cellar::Get::new("r"))
        .unwrap()
        .unwrap();
    assert_eq!(row.value("cf", ""), Some(&b"vw"[..]));
}

#[test]
fn hbase_commands_without_a_counterpart_say_why() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let script = "assign 'r1'\nsplit 't'\ngrant 'bob', 'RW'\nfrobnicate 't'\n";
    let r = shell(&db, &["--format", "json"], script);
    assert_eq!(r.code, 1, "{}", r.stdout);
    let lines: Vec<&str> = r.stdout.lines().collect();
    for l in &lines[..3] {
        assert_error(l, "Unsupported");
    }
    assert!(lines[0].contains("region servers"), "{}", lines[0]);
    assert!(lines[1].contains("one region"), "{}", lines[1]);
    assert_error(lines[3], "ParseError");
    assert!(
        lines[3].contains("unknown command 'frobnicate'"),
        "{}",
        lines[3]
    );
}

/// `explain` shows each source with its decision and every cell of the row with its fate: a
/// DeleteColumn in the memstore masks the flushed versions at or below it and names itself as
/// their mask; the result is the get's; a row outside the file's keys skips the file. JSON and
/// text agree on the verdicts.
#[test]
fn explain_shows_sources_verdicts_and_the_masking_marker() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let script = "create 't', {NAME => 'cf', VERSIONS => 2}
put 't', 'r1', 'cf:q', 'v1', 10
put 't', 'r1', 'cf:q', 'v2', 20
flush 't'
put 't', 'r1', 'cf:q', 'v3', 30
delete 't', 'r1', 'cf:q', 20
explain 't', 'r1', {VERSIONS => 3}
get 't', 'r1', {VERSIONS => 3}
explain 't', 'r0'
explain 't', 'r1', {VERSIONS => 3, FILTER => \"ValueFilter(=, 'binary:v1')\"}
";
    let r = shell(&db, &["--format", "json"], script);
    assert_eq!(r.code, 0, "{}", r.stdout);
    let lines = json_lines(&r.stdout);
    let e = &lines[6];
    let sources = e["sources"].as_array().unwrap();
    assert_eq!(sources.len(), 2, "{e}");
    assert_eq!(sources[0]["source"], "memstore");
    assert_eq!(sources[0]["cells"], 2);
    assert!(sources[1]["source"].as_str().unwrap().starts_with("file "));
    assert_eq!(sources[1]["decision"], "read");
    let fate: Vec<(String, String, serde_json::Value)> = e["cells"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["value"].as_str().unwrap().to_owned(),
                c["verdict"].as_str().unwrap().to_owned(),
                c["masked_by"].clone(),
            )
        })
        .collect();
    let s = |x: &str| x.to_owned();
    assert_eq!(
        fate,
        vec![
            (s("v3"), s("returned"), serde_json::Value::Null),
            (s(""), s("marker"), serde_json::Value::Null),
            (s("v2"), s("masked"), 1.into()),
            (s("v1"), s("masked"), 1.into()),
        ]
    );
    assert_eq!(e["cells"][1]["type"], "DeleteColumn");
    // The result is the get's.
    assert_eq!(e["result"], lines[7]["cells"], "{e}");
    assert_eq!(e["rows"], 1);
    // Outside the file's rows: skipped by its key range, nothing found.
    let miss = &lines[8];
    assert_eq!(
        miss["sources"][1]["decision"], "skipped: key range",
        "{miss}"
    );
    assert_eq!(miss["cells"].as_array().unwrap().len(), 0);
    assert_eq!(miss["rows"], 0);
    // A filter leaves out a cell resolution returned: v3 is removed by it, nothing is left.
    let f = &lines[9];
    assert_eq!(f["cells"][0]["verdict"], "removed by the filter", "{f}");
    assert_eq!(f["rows"], 0, "{f}");
    // Text mode: the same verdicts, the marker named by its index.
    let r = shell(&db, &[], "explain 't', 'r1', {VERSIONS => 3}\n");
    assert_eq!(r.code, 0, "{}", r.stdout);
    assert!(r.stdout.contains("masked by #1"), "{}", r.stdout);
    assert!(r
        .stdout
        .lines()
        .any(|l| l.starts_with("SOURCE") && l.contains("DECISION")));
    assert!(r.stdout.contains("1 row(s)"), "{}", r.stdout);
}

/// HBase's snapshot commands: a snapshot keeps the table as it was; clone makes a new table
/// of it, restore (of a disabled table) puts the table back; list and delete by name and by
/// pattern. The shell's answers are the Rust API's.
#[test]
fn snapshots_clone_restore_list_and_delete() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let script = "create 't', {NAME => 'cf', VERSIONS => 3}
put 't', 'r1', 'cf:q', 'v1', 10
put 't', 'r2', 'cf:q', 'w1', 10
snapshot 't', 's1'
put 't', 'r1', 'cf:q', 'v2', 20
deleteall 't', 'r2'
snapshot 't', 's2', {SKIP_FLUSH => true}
snapshot 't', 's1'
clone_snapshot 's1', 't1'
scan 't1', {VERSIONS => 3}
clone_snapshot 's1', 't1'
restore_snapshot 's1'
disable 't'
restore_snapshot 's1'
enable 't'
scan 't', {VERSIONS => 3}
list_snapshots
list_table_snapshots 't', 's.*'
list_snapshots 'nope.*'
delete_snapshot 's1'
delete_snapshot 's1'
clone_snapshot 'missing', 't9'
snapshot 't', 'bad/name'
snapshot 't', 's3', {TTL => 5}
delete_all_snapshot 's.*'
list_snapshots
";
    let r = shell(&db, &["--format", "json"], script);
    assert_eq!(r.code, 1, "{}", r.stderr);
    let lines: Vec<&str> = r.stdout.lines().collect();
    assert_eq!(lines.len(), 26, "{}", r.stdout);
    let cells = |vals: &[(&str, u64, &str)]| -> String {
        let c: Vec<String> = vals
            .iter()
            .map(|(row, ts, v)| {
                format!(
                    r#"{{"row":"{row}","column":"cf:q","timestamp":{ts},"type":"Put","value":"{v}"}}"#
                )
            })
            .collect();
        format!(r#"{{"ok":true,"rows":2,"cells":[{}]}}"#, c.join(","))
    };
    let then = cells(&[("r1", 10, "v1"), ("r2", 10, "w1")]);
    assert_eq!(
        lines[9], then,
        "the clone holds the table as the snapshot took it"
    );
    assert_error(lines[7], "SnapshotExists");
    assert_error(lines[10], "TableExists");
    assert_error(lines[11], "TableNotDisabled");
    assert_eq!(lines[13], r#"{"ok":true}"#);
    assert_eq!(lines[15], then, "restored");
    let list = json_lines(lines[16]);
    let snaps = list[0]["snapshots"].as_array().unwrap();
    let names: Vec<&str> = snaps.iter().map(|s| s["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["s1", "s2"]);
    assert_eq!(snaps[0]["table"], "t");
    assert!(snaps[0]["files"].as_u64().unwrap() >= 1);
    assert!(snaps[0]["created_ms"].as_u64().unwrap() > 1_700_000_000_000);
    assert_eq!(
        json_lines(lines[17])[0]["snapshots"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
    assert_eq!(lines[18], r#"{"ok":true,"snapshots":[]}"#);
    assert_eq!(lines[19], r#"{"ok":true}"#);
    assert_error(lines[20], "SnapshotNotFound");
    assert_error(lines[21], "SnapshotNotFound");
    assert_error(lines[22], "InvalidArgument");
    assert_error(lines[23], "Unsupported");
    assert_eq!(lines[24], r#"{"ok":true}"#);
    assert_eq!(lines[25], r#"{"ok":true,"snapshots":[]}"#);

    // The same database through the Rust API: s2 (SKIP_FLUSH) was deleted with the rest, the
    // clone and the restored table read as the shell showed them.
    let d = cellar::Db::open(&db, cellar::Options::default()).unwrap();
    assert!(d.list_table_snapshots().unwrap().is_empty());
    for t in ["t", "t1"] {
        let row = d
            .table(t)
            .unwrap()
            .get(&cellar::Get::new("r2"))
            .unwrap()
            .unwrap();
        assert_eq!(row.value("cf", "q"), Some(&b"w1"[..]), "{t}");
    }
    drop(d);

    // Text: HBase's layout.
    let r = shell(
        &db,
        &[],
        "snapshot 't', 'snap'\nlist_snapshots\ndelete_snapshot 'snap'\n",
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    let lines: Vec<&str> = r.stdout.lines().collect();
    assert!(lines[0].starts_with("Snapshot snap of t: "), "{}", r.stdout);
    assert_eq!(lines[2], "SNAPSHOT TABLE + CREATION TIME");
    assert!(lines[3].starts_with(" snap     t ("), "{}", lines[3]);
    assert!(lines[3].contains(" UTC), "), "{}", lines[3]);
    assert_eq!(lines[4], "1 row(s)");
    assert_eq!(lines[6], r#"=> ["snap"]"#);

    // A damaged descriptor of another snapshot: listing reports it, a restore of a sound one
    // still works (it reads its own descriptor only).
    let r = shell(
        &db,
        &["--format", "json"],
        "snapshot 't', 'good'\nsnapshot 't', 'bad'\n",
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    let bad = db.join(cellar::SNAPSHOTS_DIR).join("bad").join("SNAPSHOT");
    let mut bytes = std::fs::read(&bad).unwrap();
    bytes[20] ^= 0x10;
    std::fs::write(&bad, bytes).unwrap();
    let r = shell(
        &db,
        &["--format", "json"],
        "list_snapshots\ndisable 't'\nrestore_snapshot 'good'\nrestore_snapshot 'bad'\n",
    );
    let lines: Vec<&str> = r.stdout.lines().collect();
    assert_error(lines[0], "Corruption");
    assert_eq!(lines[2], r#"{"ok":true}"#, "{}", r.stdout);
    assert_error(lines[3], "Corruption");
}

/// `create_feed_slot`, `list_feed_slots`, `drop_feed_slot`: the slots the Rust API sees, the
/// errors by kind; `status` lists them too.
#[test]
fn feed_slots_are_created_listed_and_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let script = "create 't', 'cf'
put 't', 'r1', 'cf:q', 'v1'
create_feed_slot 'replica'
create_feed_slot 'from-start', 0
create_feed_slot 'replica'
create_feed_slot 'bad name'
create_feed_slot 'far', 99999
create_feed_slot 'neg', -1
list_feed_slots
drop_feed_slot 'replica'
drop_feed_slot 'replica'
list_feed_slots
";
    let r = shell(&db, &["--format", "json"], script);
    assert_eq!(r.code, 1, "errors were made: {}", r.stdout);
    let lines: Vec<&str> = r.stdout.lines().collect();
    assert_eq!(lines.len(), 12, "{}", r.stdout);
    for l in &lines[2..4] {
        assert_eq!(*l, r#"{"ok":true}"#, "{}", r.stdout);
    }
    assert_error(lines[4], "FeedSlotExists");
    assert_error(lines[5], "InvalidArgument");
    assert_error(lines[6], "InvalidArgument");
    assert_error(lines[7], "ParseError");
    let listed = &json_lines(lines[8])[0]["feed_slots"];
    assert_eq!(listed[0]["name"], "from-start", "{listed}");
    assert_eq!(listed[0]["acked"], 0);
    assert_eq!(listed[1]["name"], "replica");
    assert_eq!(
        listed[1]["acked"], 2,
        "the put's seq (the table's creation took 1): {listed}"
    );
    assert_eq!(listed[1]["lost"], false);
    assert_eq!(lines[9], r#"{"ok":true}"#);
    assert_error(lines[10], "FeedSlotNotFound");
    let listed = &json_lines(lines[11])[0]["feed_slots"];
    assert_eq!(listed.as_array().unwrap().len(), 1);

    // What the shell made, the Rust API finds, and text mode lists it.
    let d = cellar::Db::open(&db, cellar::Options::default()).unwrap();
    let slots = d.feed_slots().unwrap();
    assert_eq!(slots.len(), 1);
    assert_eq!(slots[0].name, "from-start");
    drop(d);
    let r = shell(&db, &[], "list_feed_slots\n");
    let lines: Vec<&str> = r.stdout.lines().collect();
    assert_eq!(lines[0], "FEED SLOT  ACKED SEQ + WAL HELD", "{}", r.stdout);
    assert!(
        lines[1].starts_with(" from-start 0, segment "),
        "{}",
        r.stdout
    );
    assert_eq!(lines[2], "1 row(s)");
    let r = shell(&db, &["--format", "json"], "status\n");
    let v = &json_lines(&r.stdout)[0];
    assert_eq!(v["stats"]["feed_slots"][0]["name"], "from-start", "{v}");
}

/// `delete_rows` masks a range of rows with one write, `list_range_deletes` lists what the
/// Rust API lists (text and JSON), and a bad request fails alone with exit code 1.
#[test]
fn delete_rows_masks_a_range_and_list_range_deletes_shows_it() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    // Families that keep deleted cells keep their row-range deletes too: in the others a
    // delete whose cells all went at a flush (the close's) leaves at once, and the listings
    // below would race with it.
    let mut script = String::from(
        "create 't', {NAME => 'cf', KEEP_DELETED_CELLS => 'TRUE'}, \
         {NAME => 'meta', KEEP_DELETED_CELLS => 'TRUE'}\n",
    );
    for r in ["a", "b1", "b2", "c", "d1"] {
        script += &format!("put 't', '{r}', 'cf:q', 'v', 10\nput 't', '{r}', 'meta:m', 'm', 10\n");
    }
    script += "delete_rows 't', {STARTROW => 'b', STOPROW => 'c', TIMESTAMP => 100}
delete_rows 't', ROWPREFIXFILTER => 'd', COLUMNS => ['meta:'], TIMESTAMP => 200
scan 't'
list_range_deletes 't'
";
    let r = shell(&db, &["--format", "json"], &script);
    assert_eq!((r.code, r.stderr.as_str()), (0, ""), "{}", r.stdout);
    let lines: Vec<&str> = r.stdout.lines().collect();
    assert_eq!(lines.len(), 15, "{}", r.stdout);
    for l in &lines[..13] {
        assert_eq!(*l, r#"{"ok":true}"#, "{}", r.stdout);
    }
    let scanned = &json_lines(lines[13])[0];
    let cells: Vec<(&str, &str)> = scanned["cells"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["row"].as_str().unwrap(), c["column"].as_str().unwrap()))
        .collect();
    assert_eq!(
        cells,
        [
            ("a", "cf:q"),
            ("a", "meta:m"),
            ("c", "cf:q"),
            ("c", "meta:m"),
            ("d1", "cf:q")
        ],
        "{scanned}"
    );

    // The shell lists what the Rust API lists, in seq order.
    let d = Db::open(&db, Options::default()).unwrap();
    let api = d.range_deletes("t").unwrap();
    drop(d);
    let (s1, s2) = (api[0].1.seq, api[2].1.seq);
    assert!(s1 < s2, "{api:?}");
    let want = format!(
        concat!(
            r#"{{"ok":true,"range_deletes":["#,
            r#"{{"family":"cf","start":"b","stop":"c","timestamp":100,"seq":{s1}}},"#,
            r#"{{"family":"meta","start":"b","stop":"c","timestamp":100,"seq":{s1}}},"#,
            r#"{{"family":"meta","start":"d","stop":"e","timestamp":200,"seq":{s2}}}]}}"#
        ),
        s1 = s1,
        s2 = s2
    );
    assert_eq!(lines[14], want);
    let r = shell(&db, &["-e", "list_range_deletes 't'"], "");
    assert_eq!((r.code, r.stderr.as_str()), (0, ""));
    assert_eq!(
        r.stdout,
        format!(
            "FAMILY  START  STOP  TIMESTAMP  SEQ\n cf     b      c     100        {s1}\n meta   b      c     100        {s1}\n meta   d      e     200        {s2}\n3 row(s)\nTook X seconds\n"
        )
    );

    // Each bad request fails alone, and none of them deletes anything.
    let script = "delete_rows 't'
delete_rows 't', {STARTROW => 'c', STOPROW => 'b'}
delete_rows 't', {COLUMN => 'nope'}
delete_rows 't', {COLUMNS => ['cf:q']}
delete_rows 't', {STARTROW => 'a', ROWPREFIXFILTER => 'a'}
delete_rows 'nope', {}
list_range_deletes 'nope'
disable 't'
delete_rows 't', {}
list_range_deletes 't'
enable 't'
";
    let r = shell(&db, &["--format", "json"], script);
    assert_eq!(r.code, 1, "{}", r.stdout);
    let lines: Vec<&str> = r.stdout.lines().collect();
    assert_eq!(lines.len(), 11, "{}", r.stdout);
    assert_eq!(
        lines[0],
        format!(
            r#"{{"ok":false,"kind":"ParseError","error":"line 1, column 16: expected {{STARTROW => 'a', STOPROW => 'b'}}, {{ROWPREFIXFILTER => 'p'}}, or {{}} for every row (usage: {})"}}"#,
            "delete_rows 't', {STARTROW => 'a', STOPROW => 'b' | ROWPREFIXFILTER => 'p', COLUMN => 'cf' | COLUMNS => ['cf1', 'cf2'], TIMESTAMP => ts} ({} deletes every row)"
        )
    );
    assert_eq!(
        lines[1],
        r#"{"ok":false,"kind":"ParseError","error":"line 2, column 47: STOPROW must be after STARTROW (leave it out, or '', for the end of the table)"}"#
    );
    assert_error(lines[2], "FamilyNotFound");
    assert_error(lines[3], "ParseError");
    assert!(lines[3].contains("line 4, column 31: "), "{}", lines[3]);
    assert_error(lines[4], "ParseError");
    assert_error(lines[5], "TableNotFound");
    assert_error(lines[6], "TableNotFound");
    assert_eq!(lines[7], r#"{"ok":true}"#);
    assert_error(lines[8], "TableNotEnabled");
    // Listing reads the schema, not data: a disabled table's deletes are listed too.
    assert_eq!(
        json_lines(lines[9])[0]["range_deletes"]
            .as_array()
            .unwrap()
            .len(),
        3,
        "{}",
        lines[9]
    );
    assert_eq!(lines[10], r#"{"ok":true}"#);

    // Text mode: the error on stderr with its position; a write prints only its timing.
    let r = shell(
        &db,
        &[
            "-e",
            "delete_rows 't', {COLUMN => 'cf:q'}\ndelete_rows 't', {}\ncount 't'",
        ],
        "",
    );
    assert_eq!(r.code, 1);
    assert_eq!(
        r.stderr,
        "ERROR: line 1, column 29: delete_rows deletes whole families; \"cf:q\" names a column (give its family alone)\n"
    );
    assert_eq!(r.stdout, "Took X seconds\n0 row(s)\nTook X seconds\n");
    let d = Db::open(&db, Options::default()).unwrap();
    assert_eq!(d.table("t").unwrap().scan(Scan::new()).unwrap().count(), 0);
    // Two deletes of cf and three of meta, all kept.
    let listed = d.range_deletes("t").unwrap();
    for (family, written) in [("cf", 2), ("meta", 3)] {
        let n = listed.iter().filter(|(f, _)| f == family).count();
        assert_eq!(n, written, "{family}: {listed:?}");
    }
}

/// `approxsize` gives what `Table::estimate_range` and `Table::split_point` give: unflushed
/// rows in the memstore columns, flushed ones in the files' (the same figures the Rust API
/// reads after the shell exits), a range and a prefix, and an unknown table as an error.
#[test]
fn approxsize_agrees_with_the_rust_api() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let mut script = String::from("create 't', 'cf'\n");
    for i in 0..300 {
        script += &format!("put 't', 'r{i:03}', 'cf:q', '{}'\n", "v".repeat(1000));
    }
    script += "approxsize 't'
flush 't'
approxsize 't'
approxsize 't', {STARTROW => 'r100', STOPROW => 'r200'}
approxsize 't', {ROWPREFIXFILTER => 'x'}
approxsize 'nope'
";
    let r = shell(&db, &["--format", "json"], &script);
    assert_eq!(r.code, 1, "{}", r.stdout);
    let lines = json_lines(&r.stdout);
    let n = lines.len();
    assert_eq!(n, 307, "{}", r.stdout);
    // Before the flush: every cell in the memstore, counted exactly for the whole table.
    let mem = &lines[n - 6];
    assert_eq!(
        (&mem["files"], &mem["cells"], &mem["memstore_cells"]),
        (&0.into(), &0.into(), &300.into()),
        "{mem}"
    );
    assert!(
        mem["memstore_bytes"].as_u64().unwrap() > 300 * 1000,
        "{mem}"
    );
    assert_eq!(
        mem["split_point"],
        serde_json::Value::Null,
        "no file to split"
    );
    // After: the files' figures, as the Rust API reads them.
    let d = Db::open(&db, Options::default()).unwrap();
    let t = d.table("t").unwrap();
    for (line, (start, stop)) in [
        (&lines[n - 4], (&b""[..], &b""[..])),
        (&lines[n - 3], (&b"r100"[..], &b"r200"[..])),
        (&lines[n - 2], (&b"x"[..], &b"y"[..])),
    ] {
        let e = t.estimate_range(start, stop).unwrap();
        let split = t
            .split_point()
            .unwrap()
            .map(|p| String::from_utf8(p).unwrap());
        let want = serde_json::json!({
            "ok": true,
            "bytes": e.bytes,
            "cells": e.cells,
            "files": e.files,
            "memstore_bytes": 0,
            "memstore_cells": 0,
            "split_point": split,
        });
        assert_eq!(line, &want);
    }
    assert_eq!(lines[n - 4]["cells"], 300);
    assert_eq!(lines[n - 2]["files"], 0, "no row starts with x");
    assert!(lines[n - 4]["split_point"].is_string());
    assert_error(r.stdout.lines().last().unwrap(), "TableNotFound");
    drop((t, d));
    // Text: files, memstores, split point.
    let r = shell(&db, &["-e", "approxsize 't'"], "");
    assert_eq!((r.code, r.stderr.as_str()), (0, ""));
    assert!(r.stdout.starts_with("            BYTES"), "{}", r.stdout);
    assert!(r.stdout.contains("\n files      "), "{}", r.stdout);
    assert!(r.stdout.contains("\nsplit point: r"), "{}", r.stdout);
}
