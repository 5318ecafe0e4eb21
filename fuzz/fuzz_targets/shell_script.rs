//! The shell (`cellar shell`, README "Shell"): arbitrary text through the lexer, the parser
//! and the filter language, and the statements that parse run against a fresh database.
//! Whatever the input, nothing panics; every command answers with exactly one line of JSON,
//! an object whose `ok` is a boolean, with a non-empty `kind` and `error` when it is false (the
//! documented contract); and the text form of every answer is produced too.
//!
//! Input: the script's text (invalid UTF-8 becomes U+FFFD, as `cellar shell` reads scripts).
//! The database is opened only when a statement parses.
#![no_main]

use std::time::Duration;

use cellar_tools::shell::exec::Shell;
use cellar_tools::shell::filter::parse_filter;
use cellar_tools::shell::output::error_json;
use cellar_tools::shell::parse::{parse_script, Command};
use cellar_tools::shell::Format;
use libfuzzer_sys::fuzz_target;

/// Check one JSON answer against the contract.
fn check_json(line: &str) {
    assert!(!line.contains('\n'), "a JSON answer spans lines: {line:?}");
    let v: serde_json::Value =
        serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line:?}"));
    let ok = v
        .get("ok")
        .and_then(serde_json::Value::as_bool)
        .unwrap_or_else(|| panic!("no boolean ok: {line}"));
    if !ok {
        for field in ["kind", "error"] {
            let s = v.get(field).and_then(serde_json::Value::as_str);
            assert!(s.is_some_and(|s| !s.is_empty()), "no {field}: {line}");
        }
    }
}

fuzz_target!(|data: &[u8]| {
    // The filter language alone as well: a script reaches it only through a get or scan
    // of a table that exists.
    let _ = parse_filter(data);
    let src = String::from_utf8_lossy(data);
    let statements = parse_script(&src);
    if !statements.iter().any(Result::is_ok) {
        for e in statements.iter().filter_map(|s| s.as_ref().err()) {
            check_json(&error_json(e));
        }
        return;
    }
    let dir = cellar_fuzz::scratch_dir();
    let mut shell = Shell::open(dir.path(), Format::Json).expect("a fresh database opens");
    for s in &statements {
        let s = match s {
            Ok(s) if s.command == Command::Exit => break,
            Ok(s) => s,
            Err(e) => {
                check_json(&error_json(e));
                continue;
            }
        };
        match shell.execute(&s.command) {
            Ok(out) => {
                check_json(&out.json());
                let _ = out.text(Duration::ZERO);
            }
            Err(e) => check_json(&error_json(&e)),
        }
    }
    // Closing may fail (a typed error), never panic.
    let _ = shell.close();
});
