//! The block envelope: arbitrary stored bytes (payload + 10-byte envelope) → `unseal_block`
//! (and `unseal_block_vec`, which reuses the buffer and must answer the same),
//! with and without checksum verification, so LZ4 decompression sees arbitrary input with an
//! arbitrary claimed raw length. Also `decompress` directly, and a seal → unseal round trip of
//! the input used as a raw payload.
#![no_main]

use arbitrary::{Arbitrary, Unstructured};
use cellar_format::block::{seal_block, unseal_block, unseal_block_vec, UnsealError};
use cellar_format::compression::{decompress, MAX_RAW_BLOCK_LEN};
use cellar_format::{BlockType, CompressionType};
use libfuzzer_sys::fuzz_target;

const TYPES: [BlockType; 7] = [
    BlockType::Data,
    BlockType::LeafIndex,
    BlockType::IntermediateIndex,
    BlockType::RootIndex,
    BlockType::BloomChunk,
    BlockType::BloomMeta,
    BlockType::FileInfo,
];

#[derive(Debug, Arbitrary)]
struct Params {
    offset: u64,
    /// Bit i set: TYPES[i] is an expected type.
    expected: u8,
    raw_len: u32,
    lz4: bool,
}

fuzz_target!(|data: &[u8]| {
    let mut u = Unstructured::new(data);
    let Ok(p) = Params::arbitrary(&mut u) else {
        return;
    };
    let stored = u.take_rest();
    let expected: Vec<BlockType> = TYPES
        .iter()
        .enumerate()
        .filter(|(i, _)| p.expected & (1 << i) != 0)
        .map(|(_, t)| *t)
        .collect();

    for verify in [false, true] {
        // The variant that reuses the read buffer answers exactly as the copying one.
        assert_eq!(
            unseal_block_vec(stored.to_vec(), p.offset, &expected, verify),
            unseal_block(stored, p.offset, &expected, verify),
            "unseal_block_vec disagrees"
        );
        match unseal_block(stored, p.offset, &expected, verify) {
            Ok((raw, env)) => {
                assert_eq!(raw.len(), env.raw_len as usize, "raw length not honoured");
                assert!(
                    expected.contains(&env.block_type),
                    "unexpected type accepted"
                );
            }
            Err(UnsealError::Checksum { .. }) => assert!(verify),
            Err(UnsealError::Malformed(_)) => {}
        }
    }

    // The decompressor on its own, with a length the envelope did not have to agree with.
    let ty = if p.lz4 {
        CompressionType::Lz4
    } else {
        CompressionType::None
    };
    if let Ok(raw) = decompress(ty, stored, p.raw_len) {
        assert_eq!(raw.len(), p.raw_len as usize);
        assert!(p.raw_len <= MAX_RAW_BLOCK_LEN);
    }

    // Seal the input as a payload and open it again at the same offset.
    let bt = TYPES[usize::from(p.expected) % TYPES.len()];
    let mut scratch = Vec::new();
    let (sealed, env) = seal_block(stored, bt, ty, p.offset, &mut scratch);
    let (back, env2) = unseal_block(&sealed, p.offset, &[bt], true)
        .unwrap_or_else(|e| panic!("sealed block does not unseal: {e:?}"));
    assert_eq!(back, stored, "seal/unseal round trip");
    assert_eq!(env, env2);
    if p.offset != 0 && p.offset <= u64::from(u32::MAX) {
        // The offset is part of the checksum: the same bytes elsewhere must fail. CRC32C
        // catches every difference confined to 32 consecutive bits, hence the bound; larger
        // offsets can collide in theory.
        assert!(matches!(
            unseal_block(&sealed, 0, &[bt], true),
            Err(UnsealError::Checksum { .. })
        ));
    }
});
