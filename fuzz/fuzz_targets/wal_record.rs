//! WAL record framing (SPEC.md §16.2): arbitrary bytes → `record::decode_wal` never panics; a
//! record, seal or link that decodes re-encodes to the same bytes; an arbitrary record round-trips,
//! `synced_upto` included. The manifest's framing (§17.2, same code, no `synced_upto`) gets the
//! same decode/re-encode check.
#![no_main]

use cellar::wal::record::{self, Decoded, WalDecoded};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let segment = data.first().map_or(1, |&b| u64::from(b % 4) + 1);
    let mut again = Vec::new();
    match record::decode_wal(data, segment) {
        Ok(WalDecoded::Record(r)) => {
            record::encode_wal(segment, r.seq, r.synced_upto, r.payload, &mut again);
            assert_eq!(r.len, again.len());
        }
        Ok(WalDecoded::Seal { synced_upto, len }) => {
            record::encode_seal(segment, synced_upto, &mut again);
            assert_eq!(len, again.len());
        }
        Ok(WalDecoded::Link {
            previous,
            previous_end,
            len,
        }) => {
            record::encode_link(segment, previous, previous_end, &mut again);
            assert_eq!(len, again.len());
        }
        Ok(WalDecoded::End) | Err(_) => {}
    }
    assert_eq!(
        &data[..again.len()],
        &again[..],
        "WAL decode/encode is not the identity"
    );
    if let Ok(Decoded::Record(r)) = record::decode(data, segment) {
        let mut m = Vec::new();
        record::encode(segment, r.seq, r.payload, &mut m);
        assert_eq!(
            &data[..m.len()],
            &m[..],
            "manifest decode/encode is not the identity"
        );
    }
    let synced_upto = (data.len() as u64).wrapping_mul(0x9e37_79b9);
    let mut framed = Vec::new();
    record::encode_wal(
        segment,
        u64::from(data.len() as u32) + 1,
        synced_upto,
        data,
        &mut framed,
    );
    match record::decode_wal(&framed, segment) {
        Ok(WalDecoded::Record(r)) => {
            assert_eq!((r.payload, r.synced_upto), (data, synced_upto))
        }
        other => panic!("a framed record did not decode: {other:?}"),
    }
});
