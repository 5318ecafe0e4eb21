//! The fixed-size trailer: arbitrary bytes → `Trailer::decode` (never panics; whatever decodes
//! re-encodes to the same 72 bytes, since every byte is covered by the magic, the checksum or a
//! field), and an arbitrary `Trailer` → encode → decode round trip.
#![no_main]

use arbitrary::{Arbitrary, Unstructured};
use cellar_format::checksum::ChecksumType;
use cellar_format::trailer::{TrailerError, MAX_INDEX_LEVELS};
use cellar_format::{BlockHandle, FormatVersion, Trailer, TRAILER_LEN};
use libfuzzer_sys::fuzz_target;

#[derive(Debug, Arbitrary)]
struct Fields {
    root: (u64, u64),
    info: (u64, u64),
    bloom: Option<(u64, u64)>,
    index_levels: u8,
    version: u32,
}

fuzz_target!(|data: &[u8]| {
    // As the reader calls it: the last TRAILER_LEN bytes, or a buffer of the wrong size.
    let tail = data
        .get(data.len().saturating_sub(TRAILER_LEN)..)
        .unwrap_or(data);
    for buf in [data, tail] {
        if let Ok(t) = Trailer::decode(buf) {
            assert_eq!(
                &t.encode()[..],
                buf,
                "trailer decode/encode is not the identity"
            );
            assert!((1..=MAX_INDEX_LEVELS).contains(&t.index_levels));
            assert!(t.version.is_readable());
        }
    }

    let Ok(f) = Fields::arbitrary_take_rest(Unstructured::new(data)) else {
        return;
    };
    let h = |(offset, stored_len): (u64, u64)| BlockHandle { offset, stored_len };
    let t = Trailer {
        root_index: h(f.root),
        file_info: h(f.info),
        // An all-zero handle is how "no bloom" is stored, so it reads back as None.
        bloom_meta: f.bloom.map(h).filter(|b| *b != BlockHandle::default()),
        index_levels: f.index_levels,
        checksum_type: ChecksumType::Crc32c,
        version: FormatVersion(f.version),
    };
    let encoded = t.encode();
    match Trailer::decode(&encoded) {
        Ok(back) => assert_eq!(back, t, "trailer round trip"),
        Err(TrailerError::Unsupported(v)) => {
            assert_eq!(v, f.version);
            assert!(!t.version.is_readable());
        }
        Err(TrailerError::Malformed(_)) => assert!(
            t.index_levels == 0 || t.index_levels > MAX_INDEX_LEVELS,
            "a valid trailer was rejected: {t:?}"
        ),
        Err(e) => panic!("encoded trailer rejected: {e:?} for {t:?}"),
    }
});
