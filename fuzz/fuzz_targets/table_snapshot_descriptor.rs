//! A table snapshot's `SNAPSHOT` descriptor (SPEC.md §17.13): arbitrary bytes →
//! `TableSnapshotInfo::parse_descriptor` never panics, and what it accepts is consistent (the
//! files' bytes add up, the table has families).
#![no_main]

use cellar::TableSnapshotInfo;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(info) = TableSnapshotInfo::parse_descriptor("s", data) {
        assert_eq!(info.name, "s");
        assert!(info.files == 0 || !info.table.families.is_empty());
    }
});
