//! WAL record framing (SPEC.md §16.2), both layouts: arbitrary bytes → `record::decode_wal`
//! never panics; a record, seal or link that decodes re-encodes to the same bytes; an arbitrary
//! record round-trips, `synced_upto` included. The manifest's framing (§17.2, the legacy WAL
//! layout's code without `synced_upto`) gets the same decode/re-encode check.
#![no_main]

use cellar::wal::record::{self, Decoded, WalDecoded, WalFormat};
use libfuzzer_sys::fuzz_target;

/// The encoders of one layout: a BATCH record, a SEAL, a LINK.
type Encoders = (
    fn(u64, u64, u64, &[u8], &mut Vec<u8>),
    fn(u64, u64, &mut Vec<u8>),
    fn(u64, u64, u64, &mut Vec<u8>),
);

fuzz_target!(|data: &[u8]| {
    let segment = data.first().map_or(1, |&b| u64::from(b % 4) + 1);
    for format in [WalFormat::V2, WalFormat::V1] {
        let (wal, seal, link): Encoders = match format {
            WalFormat::V2 => (record::encode_wal, record::encode_seal, record::encode_link),
            WalFormat::V1 => (
                record::encode_wal_v1,
                record::encode_seal_v1,
                record::encode_link_v1,
            ),
        };
        let mut again = Vec::new();
        match record::decode_wal(format, data, segment) {
            Ok(WalDecoded::Record(r)) => {
                wal(segment, r.seq, r.synced_upto, r.payload, &mut again);
                assert_eq!(r.len, again.len());
            }
            Ok(WalDecoded::Seal { synced_upto, len }) => {
                seal(segment, synced_upto, &mut again);
                assert_eq!(len, again.len());
            }
            Ok(WalDecoded::Link {
                previous,
                previous_end,
                len,
            }) => {
                link(segment, previous, previous_end, &mut again);
                assert_eq!(len, again.len());
            }
            Ok(WalDecoded::End) | Err(_) => {}
        }
        assert_eq!(
            &data[..again.len()],
            &again[..],
            "WAL decode/encode is not the identity ({format:?})"
        );
        let synced_upto = (data.len() as u64).wrapping_mul(0x9e37_79b9);
        let seq = u64::from(data.len() as u32) + 1;
        let mut framed = Vec::new();
        wal(segment, seq, synced_upto, data, &mut framed);
        assert_eq!(record::peek_wal_len(format, &framed), Some(framed.len()));
        match record::decode_wal(format, &framed, segment) {
            Ok(WalDecoded::Record(r)) => {
                assert_eq!((r.seq, r.payload, r.synced_upto), (seq, data, synced_upto))
            }
            other => panic!("a framed record did not decode ({format:?}): {other:?}"),
        }
    }
    if let Ok(Decoded::Record(r)) = record::decode(data, segment) {
        let mut m = Vec::new();
        record::encode(segment, r.seq, r.payload, &mut m);
        assert_eq!(
            &data[..m.len()],
            &m[..],
            "manifest decode/encode is not the identity"
        );
    }
});
