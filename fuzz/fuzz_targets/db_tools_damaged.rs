//! The read-only database tools over a damaged database: `cellar verify`, `levels`,
//! `manifest-dump` and `wal-dump`, in text and JSON, on a copy of the small canonical database
//! (`cellar::testkit::corruption`) written to a real directory with one file damaged. These
//! are the tools an operator reaches for when a database is damaged, so whatever the damage
//! they answer (an exit code, or a typed error the binary reports with exit 1 or 2) and
//! never panic; a JSON answer is one JSON document.
//!
//! Input: a file index byte, a cut byte (0: keep the length; otherwise cut the file to
//! `len * cut / 256` bytes, which the tools, unlike a database open, must take as well), then
//! (offset u16 LE, xor byte) triples applied to that file.
#![no_main]

use std::sync::OnceLock;

use cellar::testkit::corruption::{Pristine, DIR};
use cellar_tools::db::levels::{self, LevelsArgs};
use cellar_tools::db::manifest_dump::{self, ManifestDumpArgs};
use cellar_tools::db::verify::{self, DbVerifyArgs};
use cellar_tools::db::wal_dump::{self, WalDumpArgs};
use cellar_tools::db::{DbFormat, DirArgs};
use libfuzzer_sys::fuzz_target;

fn pristine() -> &'static Pristine {
    static P: OnceLock<Pristine> = OnceLock::new();
    P.get_or_init(|| Pristine::build().expect("the canonical database builds"))
}

/// Run one tool; a JSON answer must parse.
fn check(
    name: &str,
    format: DbFormat,
    run: impl FnOnce(&mut Vec<u8>) -> cellar_tools::Result<i32>,
) {
    let mut out = Vec::new();
    // An `Err` is a failure the binary reports (exit 1 or 2); the output up to it is not
    // checked.
    if let Ok(code) = run(&mut out) {
        assert!((0..=2).contains(&code), "{name}: exit code {code}");
        if format == DbFormat::Json {
            if let Err(e) = serde_json::from_slice::<serde_json::Value>(&out) {
                panic!(
                    "{name}: not one JSON document ({e}): {}",
                    String::from_utf8_lossy(&out)
                );
            }
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let p = pristine();
    let [which, cut, edits @ ..] = data else {
        return;
    };
    if p.files.is_empty() {
        return;
    }
    let (path, _) = &p.files[usize::from(*which) % p.files.len()];
    let edits = cellar_fuzz::byte_edits(edits);
    if edits.is_empty() && *cut == 0 {
        return;
    }
    let fs = p
        .damaged(path, |bytes| {
            if *cut != 0 {
                bytes.truncate(bytes.len() * usize::from(*cut) / 256);
            }
            cellar_fuzz::apply_edits(bytes, &edits);
        })
        .expect("the copy is damaged");
    // The copy, on a real file system, where the tools read.
    let dir = cellar_fuzz::scratch_dir();
    for f in fs.files() {
        let Ok(rel) = f.strip_prefix(DIR) else {
            continue;
        };
        let to = dir.path().join(rel);
        if let Some(parent) = to.parent() {
            std::fs::create_dir_all(parent).expect("a directory of the copy");
        }
        std::fs::write(&to, fs.contents(&f).unwrap_or_default()).expect("a file of the copy");
    }
    for format in [DbFormat::Text, DbFormat::Json] {
        let common = || DirArgs {
            dir: dir.path().to_path_buf(),
            format,
        };
        check("verify", format, |out| {
            verify::run(
                &DbVerifyArgs {
                    common: common(),
                    fail_fast: false,
                },
                out,
            )
        });
        check("levels", format, |out| {
            levels::run(&LevelsArgs { common: common() }, out)
        });
        check("manifest-dump", format, |out| {
            manifest_dump::run(&ManifestDumpArgs { common: common() }, out)
        });
        check("wal-dump", format, |out| {
            wal_dump::run(
                &WalDumpArgs {
                    common: common(),
                    values: true,
                    // The filter path too: records at or below seq 3 are left out.
                    since: Some(3),
                },
                out,
            )
        });
    }
});
