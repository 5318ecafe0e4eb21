//! Blocks: the pointer type and the envelope every stored block is wrapped in (SPEC.md §4).
//!
//! ```text
//! +----------------------+------------+-------------+-------------+-------------+
//! | payload (stored_len) | block_type | compression | raw_len     | checksum    |
//! |                      | u8         | u8          | u32 LE      | u32 LE      |
//! +----------------------+------------+-------------+-------------+-------------+
//! checksum = mask(crc32c(block_offset as u64 LE ‖ payload ‖ block_type ‖ compression ‖ raw_len))
//! ```
//! A [`BlockHandle`] names the payload (`offset`, `stored_len`); the 10-byte envelope trailer
//! follows it.

mod builder;
mod encoding;
mod iter;

pub use builder::BlockBuilder;
pub use encoding::DataBlockEncoding;
pub(crate) use iter::{prefetch_spots, BlockSpots};
pub use iter::{Block, BlockIter, CellEntry, Entry};

use crate::checksum::block_checksum;
use crate::coding::{put_varint64, Cursor};
use crate::compression::{compress, decompress, decompress_vec, CompressionType};
use crate::error::{malformed, Malformed, Region};

/// Bytes of the envelope that follows each payload.
pub const BLOCK_TRAILER_LEN: usize = 1 + 1 + 4 + 4;

/// What a block holds. Persisted in the envelope: never renumber.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum BlockType {
    /// Cells.
    Data = 1,
    /// Index entries pointing at data blocks.
    LeafIndex = 2,
    /// Index entries pointing at index blocks of the level below.
    IntermediateIndex = 3,
    /// The top of the index.
    RootIndex = 4,
    /// A chunk of the bloom filter.
    BloomChunk = 5,
    /// Bloom parameters and the list of chunks.
    BloomMeta = 6,
    /// The file-info key/value block.
    FileInfo = 7,
}

impl TryFrom<u8> for BlockType {
    type Error = u8;
    fn try_from(v: u8) -> Result<Self, u8> {
        Ok(match v {
            1 => BlockType::Data,
            2 => BlockType::LeafIndex,
            3 => BlockType::IntermediateIndex,
            4 => BlockType::RootIndex,
            5 => BlockType::BloomChunk,
            6 => BlockType::BloomMeta,
            7 => BlockType::FileInfo,
            other => return Err(other),
        })
    }
}

impl BlockType {
    /// The region this block type is reported as.
    pub fn region(self) -> Region {
        match self {
            BlockType::Data => Region::Data,
            BlockType::LeafIndex => Region::LeafIndex,
            BlockType::IntermediateIndex => Region::IntermediateIndex,
            BlockType::RootIndex => Region::RootIndex,
            BlockType::BloomChunk => Region::BloomChunk,
            BlockType::BloomMeta => Region::BloomMeta,
            BlockType::FileInfo => Region::FileInfo,
        }
    }

    /// Short name used by the tools (`DATA`, `LEAF_INDEX`, ...).
    pub fn name(self) -> &'static str {
        match self {
            BlockType::Data => "DATA",
            BlockType::LeafIndex => "LEAF_INDEX",
            BlockType::IntermediateIndex => "INTERMEDIATE_INDEX",
            BlockType::RootIndex => "ROOT_INDEX",
            BlockType::BloomChunk => "BLOOM_CHUNK",
            BlockType::BloomMeta => "BLOOM_META",
            BlockType::FileInfo => "FILE_INFO",
        }
    }
}

/// Where a block's payload is: `offset` of its first byte, `stored_len` bytes before the
/// envelope trailer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct BlockHandle {
    /// File offset of the payload.
    pub offset: u64,
    /// Length of the stored (possibly compressed) payload, envelope excluded.
    pub stored_len: u64,
}

impl BlockHandle {
    /// Total bytes the block occupies in the file, envelope included. Saturates: a handle
    /// decoded from a damaged file may carry any length, and must then fail the bounds check
    /// against the file, not overflow.
    pub fn total_len(&self) -> u64 {
        self.stored_len.saturating_add(BLOCK_TRAILER_LEN as u64)
    }

    /// Offset one past the block's envelope.
    pub fn end(&self) -> u64 {
        self.offset.saturating_add(self.total_len())
    }

    /// Varint encoding used inside index entries and the bloom meta block.
    pub fn encode_varint(&self, out: &mut Vec<u8>) {
        put_varint64(out, self.offset);
        put_varint64(out, self.stored_len);
    }

    /// Decode [`BlockHandle::encode_varint`].
    pub fn decode_varint(c: &mut Cursor<'_>) -> Result<Self, Malformed> {
        Ok(BlockHandle {
            offset: c.varint64("block handle offset")?,
            stored_len: c.varint64("block handle length")?,
        })
    }
}

/// Envelope fields of a stored block, as read from its trailer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Envelope {
    /// Block type.
    pub block_type: BlockType,
    /// Compression actually used.
    pub compression: CompressionType,
    /// Raw payload length after decompression.
    pub raw_len: u32,
    /// Stored checksum (masked).
    pub checksum: u32,
}

/// Wrap a raw payload for writing at `offset`: compresses (when worth it) and appends the
/// envelope. Returns the stored bytes and the envelope.
pub fn seal_block(
    raw: &[u8],
    block_type: BlockType,
    compression: CompressionType,
    offset: u64,
    scratch: &mut Vec<u8>,
) -> (Vec<u8>, Envelope) {
    let used = compress(compression, raw, scratch);
    let payload: &[u8] = if used == CompressionType::None {
        raw
    } else {
        scratch
    };
    let raw_len = raw.len() as u32;
    let mut head = Vec::with_capacity(6);
    head.push(block_type as u8);
    head.push(used as u8);
    head.extend_from_slice(&raw_len.to_le_bytes());
    let checksum = block_checksum(offset, &[payload, &head]);
    let mut out = Vec::with_capacity(payload.len() + BLOCK_TRAILER_LEN);
    out.extend_from_slice(payload);
    out.extend_from_slice(&head);
    out.extend_from_slice(&checksum.to_le_bytes());
    (
        out,
        Envelope {
            block_type,
            compression: used,
            raw_len,
            checksum,
        },
    )
}

/// Parse the envelope trailer of `stored` (payload + trailer) without checking anything but
/// its own fields.
pub fn read_envelope(stored: &[u8]) -> Result<(&[u8], Envelope), Malformed> {
    let Some(split) = stored.len().checked_sub(BLOCK_TRAILER_LEN) else {
        return malformed(format!(
            "block of {} bytes is shorter than its {BLOCK_TRAILER_LEN}-byte envelope",
            stored.len()
        ));
    };
    let (payload, trailer) = stored.split_at(split);
    let mut c = Cursor::new(trailer);
    let ty = c.u8("block type")?;
    let comp = c.u8("compression")?;
    let raw_len = c.u32("raw length")?;
    let checksum = c.u32("checksum")?;
    let block_type =
        BlockType::try_from(ty).or_else(|t| malformed(format!("unknown block type {t}")))?;
    let compression = CompressionType::try_from(comp)
        .or_else(|t| malformed(format!("unknown compression {t}")))?;
    Ok((
        payload,
        Envelope {
            block_type,
            compression,
            raw_len,
            checksum,
        },
    ))
}

/// Why opening a stored block failed: the checksum, or anything else.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UnsealError {
    /// Stored and computed checksums differ.
    Checksum {
        /// Stored value.
        expected: u32,
        /// Computed value.
        actual: u32,
    },
    /// Envelope or payload malformed.
    Malformed(Malformed),
}

impl From<Malformed> for UnsealError {
    fn from(m: Malformed) -> Self {
        UnsealError::Malformed(m)
    }
}

/// Check and open a stored block read from `offset`: checksum (when `verify`) first — so a
/// flipped type or compression byte reads as the checksum mismatch it is — then envelope
/// fields, expected type, bounded decompression. Returns the raw payload.
pub fn unseal_block(
    stored: &[u8],
    offset: u64,
    expected: &[BlockType],
    verify: bool,
) -> Result<(Vec<u8>, Envelope), UnsealError> {
    let (payload, env) = open_envelope(stored, offset, expected, verify)?;
    let raw = decompress(env.compression, payload, env.raw_len)?;
    Ok((raw, env))
}

/// [`unseal_block`] of a block read into a buffer of its own, which becomes the raw payload
/// when the block is stored uncompressed (no copy; see [`decompress_vec`]). Same checks and
/// errors.
pub fn unseal_block_vec(
    stored: Vec<u8>,
    offset: u64,
    expected: &[BlockType],
    verify: bool,
) -> Result<(Vec<u8>, Envelope), UnsealError> {
    let (payload_len, env) = {
        let (payload, env) = open_envelope(&stored, offset, expected, verify)?;
        (payload.len(), env)
    };
    let raw = decompress_vec(env.compression, stored, payload_len, env.raw_len)?;
    Ok((raw, env))
}

/// The checks of [`unseal_block`] before decompression; the stored payload and the envelope.
fn open_envelope<'s>(
    stored: &'s [u8],
    offset: u64,
    expected: &[BlockType],
    verify: bool,
) -> Result<(&'s [u8], Envelope), UnsealError> {
    if verify && stored.len() >= BLOCK_TRAILER_LEN {
        let (covered, sum) = stored.split_at(stored.len() - 4);
        let expected_sum = Cursor::new(sum).u32("checksum")?;
        let actual = block_checksum(offset, &[covered]);
        if actual != expected_sum {
            return Err(UnsealError::Checksum {
                expected: expected_sum,
                actual,
            });
        }
    }
    let (payload, env) = read_envelope(stored)?;
    if !expected.contains(&env.block_type) {
        return Err(UnsealError::Malformed(Malformed(format!(
            "block type {} where {} was expected",
            env.block_type.name(),
            expected
                .iter()
                .map(|t| t.name())
                .collect::<Vec<_>>()
                .join(" or ")
        ))));
    }
    Ok((payload, env))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seal_then_unseal_round_trips() {
        let raw: Vec<u8> = b"hello block ".repeat(100);
        let mut scratch = Vec::new();
        for comp in [CompressionType::None, CompressionType::Lz4] {
            let (stored, env) = seal_block(&raw, BlockType::Data, comp, 4096, &mut scratch);
            let (back, env2) = unseal_block(&stored, 4096, &[BlockType::Data], true).unwrap();
            assert_eq!(back, raw);
            assert_eq!(env, env2);
        }
    }

    #[test]
    fn moved_block_fails_its_checksum() {
        let mut scratch = Vec::new();
        let (stored, _) = seal_block(
            b"abc",
            BlockType::Data,
            CompressionType::None,
            0,
            &mut scratch,
        );
        assert!(matches!(
            unseal_block(&stored, 64, &[BlockType::Data], true),
            Err(UnsealError::Checksum { .. })
        ));
    }

    #[test]
    fn wrong_type_and_unknown_type_are_malformed() {
        let mut scratch = Vec::new();
        let (mut stored, _) = seal_block(
            b"abc",
            BlockType::Data,
            CompressionType::None,
            0,
            &mut scratch,
        );
        assert!(matches!(
            unseal_block(&stored, 0, &[BlockType::RootIndex], true),
            Err(UnsealError::Malformed(_))
        ));
        stored[3] = 99;
        assert!(matches!(
            unseal_block(&stored, 0, &[BlockType::Data], false),
            Err(UnsealError::Malformed(_))
        ));
    }
}
