//! Checksums (SPEC.md §2.3): masked CRC32C, with the block's file offset mixed in.
//!
//! The mask (LevelDB's) keeps a CRC computed over bytes that themselves contain CRCs from being
//! weak. Mixing the offset in makes a block that is intact but sits at the wrong place (a
//! misdirected write, a stale copy) fail verification just like a flipped bit.

/// Which checksum a file uses. Persisted in the trailer: values must never be renumbered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum ChecksumType {
    /// CRC32C (Castagnoli), masked.
    Crc32c = 1,
}

impl TryFrom<u8> for ChecksumType {
    type Error = u8;
    fn try_from(v: u8) -> Result<Self, u8> {
        match v {
            1 => Ok(ChecksumType::Crc32c),
            other => Err(other),
        }
    }
}

const MASK_DELTA: u32 = 0xa282_ead8;

/// LevelDB's CRC mask.
#[inline]
pub fn mask(crc: u32) -> u32 {
    crc.rotate_right(15).wrapping_add(MASK_DELTA)
}

/// Inverse of [`mask`].
#[inline]
pub fn unmask(masked: u32) -> u32 {
    masked.wrapping_sub(MASK_DELTA).rotate_left(15)
}

/// The stored checksum of a block: `mask(crc32c(offset as u64 LE ‖ parts...))`.
pub fn block_checksum(offset: u64, parts: &[&[u8]]) -> u32 {
    let mut crc = crc32c::crc32c(&offset.to_le_bytes());
    for p in parts {
        crc = crc32c::crc32c_append(crc, p);
    }
    mask(crc)
}

/// The stored checksum of a structure that has no offset context (the trailer).
pub fn plain_checksum(bytes: &[u8]) -> u32 {
    mask(crc32c::crc32c(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mask_round_trips_and_changes_value() {
        for c in [0u32, 1, 0xdead_beef, u32::MAX] {
            assert_eq!(unmask(mask(c)), c);
            assert_ne!(mask(c), c);
        }
    }

    #[test]
    fn crc32c_known_vector() {
        // RFC 3720 B.4: 32 bytes of zeros.
        assert_eq!(crc32c::crc32c(&[0u8; 32]), 0x8a91_36aa);
    }

    #[test]
    fn offset_is_part_of_the_checksum() {
        assert_ne!(
            block_checksum(0, &[b"abc"]),
            block_checksum(4096, &[b"abc"])
        );
        assert_eq!(
            block_checksum(7, &[b"ab", b"c"]),
            block_checksum(7, &[b"abc"])
        );
    }
}
