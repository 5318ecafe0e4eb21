//! The fixed-size trailer at the end of every file (SPEC.md §8).
//!
//! ```text
//! offset  size  field
//!  0      8     root_index.offset       u64 LE
//!  8      8     root_index.stored_len   u64 LE
//! 16      8     file_info.offset        u64 LE
//! 24      8     file_info.stored_len    u64 LE
//! 32      8     bloom_meta.offset       u64 LE   (0 with no bloom)
//! 40      8     bloom_meta.stored_len   u64 LE   (0 with no bloom)
//! 48      1     index_levels            u8       (1..=16; 1 = the root points at data blocks)
//! 49      1     checksum_type           u8       (1 = CRC32C)
//! 50      6     reserved                zero
//! 56      4     format_version          u32 LE
//! 60      4     trailer_checksum        u32 LE   mask(crc32c(bytes 0..60))
//! 64      8     magic                   "CellarHF"
//! ```
//! Readers check the magic, then the checksum, then the version: a flipped version byte is
//! corruption, a well-formed unknown version is [`Error::Unsupported`](crate::Error).

use crate::block::BlockHandle;
use crate::checksum::{plain_checksum, ChecksumType};
use crate::coding::Cursor;
use crate::error::Malformed;
use crate::version::FormatVersion;

/// The magic at the very end of every file.
pub const MAGIC: [u8; 8] = *b"CellarHF";

const ROOT_INDEX_AT: usize = 0;
const FILE_INFO_AT: usize = ROOT_INDEX_AT + 16;
const BLOOM_META_AT: usize = FILE_INFO_AT + 16;
const INDEX_LEVELS_AT: usize = BLOOM_META_AT + 16;
const CHECKSUM_TYPE_AT: usize = INDEX_LEVELS_AT + 1;
const RESERVED_AT: usize = CHECKSUM_TYPE_AT + 1;
const RESERVED_LEN: usize = 6;
const VERSION_AT: usize = RESERVED_AT + RESERVED_LEN;
const CHECKSUM_AT: usize = VERSION_AT + 4;
const MAGIC_AT: usize = CHECKSUM_AT + 4;
/// Size of the trailer.
pub const TRAILER_LEN: usize = MAGIC_AT + MAGIC.len();
const _: () = assert!(TRAILER_LEN == 72);
const _: () = assert!(VERSION_AT == 56 && CHECKSUM_AT == 60 && MAGIC_AT == 64);

/// Most index levels a reader follows (a guard against loops in a damaged index).
pub const MAX_INDEX_LEVELS: u8 = 16;

/// The decoded trailer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Trailer {
    /// Root index block.
    pub root_index: BlockHandle,
    /// File-info block.
    pub file_info: BlockHandle,
    /// Bloom meta block, if the file has a filter.
    pub bloom_meta: Option<BlockHandle>,
    /// Index levels, root included.
    pub index_levels: u8,
    /// Checksum algorithm of the blocks.
    pub checksum_type: ChecksumType,
    /// Format version.
    pub version: FormatVersion,
}

/// How decoding a trailer failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TrailerError {
    /// The magic is wrong: not a Cellar file, or the tail is damaged.
    BadMagic([u8; 8]),
    /// The checksum does not match.
    Checksum {
        /// Stored.
        expected: u32,
        /// Computed.
        actual: u32,
    },
    /// A well-formed trailer of an unknown version.
    Unsupported(u32),
    /// Any other malformed field.
    Malformed(Malformed),
}

impl From<Malformed> for TrailerError {
    fn from(m: Malformed) -> Self {
        TrailerError::Malformed(m)
    }
}

impl Trailer {
    /// Encode the trailer.
    pub fn encode(&self) -> [u8; TRAILER_LEN] {
        let mut out = Vec::with_capacity(TRAILER_LEN);
        let bloom = self.bloom_meta.unwrap_or_default();
        for h in [self.root_index, self.file_info, bloom] {
            out.extend_from_slice(&h.offset.to_le_bytes());
            out.extend_from_slice(&h.stored_len.to_le_bytes());
        }
        out.push(self.index_levels);
        out.push(self.checksum_type as u8);
        out.extend_from_slice(&[0u8; RESERVED_LEN]);
        out.extend_from_slice(&self.version.0.to_le_bytes());
        let crc = plain_checksum(&out);
        out.extend_from_slice(&crc.to_le_bytes());
        out.extend_from_slice(&MAGIC);
        let mut arr = [0u8; TRAILER_LEN];
        arr.copy_from_slice(&out);
        arr
    }

    /// Decode the last [`TRAILER_LEN`] bytes of a file.
    pub fn decode(buf: &[u8]) -> Result<Self, TrailerError> {
        if buf.len() != TRAILER_LEN {
            return Err(TrailerError::Malformed(Malformed(format!(
                "trailer is {} bytes, not {TRAILER_LEN}",
                buf.len()
            ))));
        }
        let (body, magic) = buf.split_at(MAGIC_AT);
        if magic != MAGIC {
            let mut m = [0u8; 8];
            m.copy_from_slice(magic);
            return Err(TrailerError::BadMagic(m));
        }
        let (covered, stored) = body.split_at(CHECKSUM_AT);
        let expected = Cursor::new(stored).u32("trailer checksum")?;
        let actual = plain_checksum(covered);
        if expected != actual {
            return Err(TrailerError::Checksum { expected, actual });
        }
        let mut c = Cursor::new(covered);
        let mut handle = |what: &str| -> Result<BlockHandle, Malformed> {
            Ok(BlockHandle {
                offset: c.u64(what)?,
                stored_len: c.u64(what)?,
            })
        };
        let root_index = handle("root index handle")?;
        let file_info = handle("file-info handle")?;
        let bloom = handle("bloom meta handle")?;
        let index_levels = c.u8("index levels")?;
        let checksum_type = c.u8("checksum type")?;
        let reserved = c.take(RESERVED_LEN, "reserved bytes")?;
        let version = FormatVersion(c.u32("format version")?);
        if !version.is_readable() {
            return Err(TrailerError::Unsupported(version.0));
        }
        if reserved.iter().any(|&b| b != 0) {
            return Err(Malformed("reserved trailer bytes are not zero".into()).into());
        }
        let checksum_type = ChecksumType::try_from(checksum_type)
            .map_err(|t| Malformed(format!("unknown checksum type {t}")))?;
        if index_levels == 0 || index_levels > MAX_INDEX_LEVELS {
            return Err(Malformed(format!(
                "index levels {index_levels} outside 1..={MAX_INDEX_LEVELS}"
            ))
            .into());
        }
        Ok(Trailer {
            root_index,
            file_info,
            bloom_meta: (bloom != BlockHandle::default()).then_some(bloom),
            index_levels,
            checksum_type,
            version,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Trailer {
        Trailer {
            root_index: BlockHandle {
                offset: 100,
                stored_len: 20,
            },
            file_info: BlockHandle {
                offset: 130,
                stored_len: 40,
            },
            bloom_meta: None,
            index_levels: 1,
            checksum_type: ChecksumType::Crc32c,
            version: FormatVersion::CURRENT,
        }
    }

    #[test]
    fn round_trip() {
        let t = sample();
        assert_eq!(Trailer::decode(&t.encode()), Ok(t));
    }

    #[test]
    fn bad_magic_checksum_and_version_are_distinguished() {
        let mut b = sample().encode();
        b[70] ^= 1;
        assert!(matches!(
            Trailer::decode(&b),
            Err(TrailerError::BadMagic(_))
        ));
        let mut b = sample().encode();
        b[56] = 9;
        assert!(matches!(
            Trailer::decode(&b),
            Err(TrailerError::Checksum { .. })
        ));
        let mut t = sample();
        t.version = FormatVersion(99);
        assert_eq!(
            Trailer::decode(&t.encode()),
            Err(TrailerError::Unsupported(99))
        );
        assert!(Trailer::decode(&b[..10]).is_err());
    }
}
