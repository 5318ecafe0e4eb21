//! The one error type of `cellar-format`.
//!
//! Callers and tools branch on the *category* ([`Error::kind`]), never on message text:
//! `hfile-verify` maps [`ErrorKind::Corruption`] to exit code 1 and everything else to 2.

use std::fmt;

/// Which structure of the file a problem was found in. Printed in corruption reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Region {
    /// The fixed-size trailer at the end of the file.
    Trailer,
    /// A data block.
    Data,
    /// A leaf index block.
    LeafIndex,
    /// An intermediate index block.
    IntermediateIndex,
    /// The root index block.
    RootIndex,
    /// A bloom filter chunk.
    BloomChunk,
    /// The bloom meta block.
    BloomMeta,
    /// The file-info block.
    FileInfo,
    /// The file as a whole (size, layout of regions).
    File,
}

impl fmt::Display for Region {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Region::Trailer => "trailer",
            Region::Data => "data block",
            Region::LeafIndex => "leaf index block",
            Region::IntermediateIndex => "intermediate index block",
            Region::RootIndex => "root index block",
            Region::BloomChunk => "bloom chunk",
            Region::BloomMeta => "bloom meta block",
            Region::FileInfo => "file-info block",
            Region::File => "file",
        })
    }
}

/// Coarse category of an [`Error`], for callers that branch on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The operating system failed a read or write.
    Io,
    /// The bytes on disk are not a valid file (including checksum mismatches).
    Corruption,
    /// A well-formed file of a format version this build cannot read.
    Unsupported,
    /// The caller passed something invalid (out-of-order key, oversized row, bad option).
    InvalidArgument,
}

/// Errors of the file format crate.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An I/O error, with what was being done when it happened.
    #[error("{file}: I/O error while {doing}: {source}")]
    Io {
        /// The file's name as given to the reader or writer.
        file: String,
        /// What the code was doing (`"reading trailer"`, `"writing block"`, ...).
        doing: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The file's bytes are malformed.
    #[error("{file}:{offset}: {region}: {what}")]
    Corruption {
        /// The file's name.
        file: String,
        /// Byte offset of the structure (block start, or trailer start) in the file.
        offset: u64,
        /// The structure in which the problem was found.
        region: Region,
        /// What is wrong, naming the field.
        what: String,
    },
    /// A stored checksum does not match the bytes.
    #[error("{file}:{offset}: {region}: checksum mismatch (stored {expected:#010x}, computed {actual:#010x})")]
    ChecksumMismatch {
        /// The file's name.
        file: String,
        /// Byte offset of the block or trailer.
        offset: u64,
        /// The structure whose checksum failed.
        region: Region,
        /// The checksum stored in the file (masked form).
        expected: u32,
        /// The checksum computed over the bytes read (masked form).
        actual: u32,
    },
    /// A valid trailer names a format version this build cannot read.
    #[error("{file}: format version {version} is not supported (this build reads {min}..={max})")]
    Unsupported {
        /// The file's name.
        file: String,
        /// The version found.
        version: u32,
        /// Oldest readable version.
        min: u32,
        /// Newest readable version.
        max: u32,
    },
    /// The caller passed an invalid argument.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
}

impl Error {
    /// The category of this error.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::Io { .. } => ErrorKind::Io,
            Error::Corruption { .. } | Error::ChecksumMismatch { .. } => ErrorKind::Corruption,
            Error::Unsupported { .. } => ErrorKind::Unsupported,
            Error::InvalidArgument(_) => ErrorKind::InvalidArgument,
        }
    }

    /// True for [`ErrorKind::Corruption`].
    pub fn is_corruption(&self) -> bool {
        self.kind() == ErrorKind::Corruption
    }

    /// Offset and region of a corruption error, if it is one.
    pub fn location(&self) -> Option<(u64, Region)> {
        match self {
            Error::Corruption { offset, region, .. }
            | Error::ChecksumMismatch { offset, region, .. } => Some((*offset, *region)),
            _ => None,
        }
    }

    pub(crate) fn invalid(msg: impl Into<String>) -> Self {
        Error::InvalidArgument(msg.into())
    }
}

/// Result alias of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// A decoding failure inside a buffer, before it is given a file and offset.
///
/// Decoders of in-memory buffers return this; the reader attaches the location with
/// [`Malformed::at`] so that every corruption error names file, offset and region.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Malformed(pub String);

impl Malformed {
    /// Attach the location of the structure being decoded.
    pub fn at(self, file: &str, offset: u64, region: Region) -> Error {
        Error::Corruption {
            file: file.to_owned(),
            offset,
            region,
            what: self.0,
        }
    }
}

impl fmt::Display for Malformed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Shorthand for a [`Malformed`] result.
pub(crate) fn malformed<T>(what: impl Into<String>) -> std::result::Result<T, Malformed> {
    Err(Malformed(what.into()))
}
