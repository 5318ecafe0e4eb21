//! WAL replay over arbitrary segment bytes (the segment files are real files in a temp dir,
//! named once in each record layout): never panics in any recovery mode, and what it delivers
//! is a strictly increasing run of sequence numbers.
#![no_main]

use std::sync::Arc;

use cellar::fs::{FileSystem, RealFs};
use cellar::wal::{replay, RecoveryMode};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let fs: Arc<dyn FileSystem> = Arc::new(RealFs);
    // Two segments: the first byte gives the first one's length, the rest follows.
    let (cut, rest) = match data.split_first() {
        Some((&b, rest)) => (usize::from(b).min(rest.len()), rest),
        None => (0, data),
    };
    for name in [
        cellar::wal::segment_file_name,
        cellar::wal::segment_file_name_v1,
    ] {
        let Ok(dir) = tempfile::tempdir() else {
            return;
        };
        for (i, part) in [&rest[..cut], &rest[cut..]].into_iter().enumerate() {
            let path = dir.path().join(name(i as u64 + 1));
            let Ok(f) = fs.create(&path) else { return };
            if f.write_all_at(part, 0).is_err() {
                return;
            }
        }
        for mode in [
            RecoveryMode::TolerateTornTail,
            RecoveryMode::SkipCorrupted,
            RecoveryMode::Strict,
        ] {
            let mut last = 0u64;
            let _ = replay(&*fs, dir.path(), 1, mode, |seq, _payload, _| {
                assert!(seq > last, "replay delivered seq {seq} after {last}");
                last = seq;
                Ok(())
            });
        }
    }
});
