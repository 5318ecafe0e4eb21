//! Format versions and the features each one has (SPEC.md §10).
//!
//! Every version-dependent branch in a reader asks a named predicate here, never compares
//! numbers inline. Reading supports `MIN_READ..=CURRENT`; writing always writes `CURRENT`.

/// A file format version, as stored in the trailer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct FormatVersion(pub u32);

impl FormatVersion {
    /// Version 1: the first published layout.
    pub const V1: FormatVersion = FormatVersion(1);
    /// Version 2: data blocks may use the DIFF entry layout (named in file info).
    pub const V2: FormatVersion = FormatVersion(2);
    /// Version 3: data blocks may use the ANCHORED_DIFF entry layout (restart entries
    /// differ from the block's first entry instead of standing alone).
    pub const V3: FormatVersion = FormatVersion(3);
    /// Oldest version this build reads.
    pub const MIN_READ: FormatVersion = FormatVersion::V1;
    /// Version this build writes.
    pub const CURRENT: FormatVersion = FormatVersion::V3;

    /// Whether this build can read the version.
    pub fn is_readable(self) -> bool {
        (Self::MIN_READ..=Self::CURRENT).contains(&self)
    }

    /// Index entries carry each child's timestamp range (since v1).
    pub fn has_index_time_ranges(self) -> bool {
        self >= Self::V1
    }

    /// Index entries carry each child's first key (since v1).
    pub fn has_index_first_keys(self) -> bool {
        self >= Self::V1
    }

    /// Block checksums mix in the block offset (since v1).
    pub fn has_offset_checksums(self) -> bool {
        self >= Self::V1
    }

    /// Data block entries have a tags section (since v1).
    pub fn has_cell_tags(self) -> bool {
        self >= Self::V1
    }

    /// Data blocks may use an encoding other than PREFIX, named by the file info's
    /// `data_block_encoding` (since v2; a version 1 file says PREFIX).
    pub fn has_data_block_encodings(self) -> bool {
        self >= Self::V2
    }
}
