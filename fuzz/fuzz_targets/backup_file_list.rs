//! A backup's `FILES` list (SPEC.md §17.11): arbitrary bytes → `BackupInfo::parse_file_list`
//! never panics, and every list it accepts renders to a list that parses to the same backup.
#![no_main]

use cellar::BackupInfo;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(info) = BackupInfo::parse_file_list(data) {
        let again = BackupInfo::parse_file_list(info.file_list().as_bytes())
            .expect("a rendered list must parse");
        assert_eq!(again, info);
    }
});
