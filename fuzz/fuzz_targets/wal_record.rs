//! WAL record framing (SPEC.md §16.2): arbitrary bytes → `record::decode` never panics; a
//! record that decodes re-encodes to the same bytes; an arbitrary record round-trips.
#![no_main]

use cellar::wal::record::{self, Decoded};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let segment = data.first().map_or(1, |&b| u64::from(b % 4) + 1);
    if let Ok(Decoded::Record(r)) = record::decode(data, segment) {
        let mut again = Vec::new();
        record::encode(segment, r.seq, r.payload, &mut again);
        assert_eq!(
            &data[..again.len()],
            &again[..],
            "decode/encode is not the identity"
        );
    }
    let mut framed = Vec::new();
    record::encode(segment, u64::from(data.len() as u32) + 1, data, &mut framed);
    match record::decode(&framed, segment) {
        Ok(Decoded::Record(r)) => assert_eq!(r.payload, data),
        other => panic!("a framed record did not decode: {other:?}"),
    }
});
