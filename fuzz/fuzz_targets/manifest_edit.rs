//! Manifest version edits (SPEC.md §17.3): arbitrary bytes → `VersionEdit::decode` never panics
//! and every edit it accepts re-encodes to an edit that decodes to the same value.
#![no_main]

use cellar::manifest::VersionEdit;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(edit) = VersionEdit::decode(data) {
        let again = VersionEdit::decode(&edit.encode()).expect("a re-encoded edit must decode");
        assert_eq!(again, edit);
    }
});
