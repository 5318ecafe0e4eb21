//! Arbitrary bytes as a raw index block payload: iterate it, decode every entry's value with
//! `IndexValue::decode`, seek in it. Nothing may panic, and a value that decodes must survive
//! an encode/decode round trip unchanged.
#![no_main]

use std::sync::Arc;

use cellar_format::block::Block;
use cellar_format::index::IndexValue;
use cellar_fuzz::{scan_block, seek_block, seek_targets};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // The value decoder on its own, so it sees inputs the block decoder would reject.
    check_value(data);
    let Ok(block) = Block::new(data.to_vec()) else {
        return;
    };
    let block = Arc::new(block);
    let scan = scan_block(&block);
    for v in &scan.values {
        check_value(v);
    }
    seek_block(&block, &seek_targets(&scan.forward, data));
});

fn check_value(bytes: &[u8]) {
    let Ok(v) = IndexValue::decode(bytes) else {
        return;
    };
    assert!(
        v.min_ts <= v.max_ts,
        "decoder accepted an inverted time range"
    );
    let mut buf = Vec::new();
    v.encode(&mut buf);
    // Varints may be over-long in the input, so compare decoded values, not bytes.
    assert_eq!(
        IndexValue::decode(&buf).ok(),
        Some(v),
        "index value round trip"
    );
}
