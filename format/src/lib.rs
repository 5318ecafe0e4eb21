//! `cellar-format`: Cellar's HFile-like on-disk file format, and nothing else.
//!
//! The normative description is `SPEC.md` at the repository root; each module opens with a
//! map of the structure it owns and the SPEC section that defines it. The crate knows
//! nothing of LSM levels, write-ahead logs or threads: it encodes and decodes cells and files.
//!
//! ```
//! use cellar_format::{CellKey, CellType, HFileReader, HFileWriter, WriterOptions};
//!
//! let mut w = HFileWriter::new(Vec::new(), "example", WriterOptions::new("cf"))?;
//! w.append(&CellKey::new("row1", "cf", "q", 10, CellType::Put, 1).as_ref(), b"v1")?;
//! w.append(&CellKey::new("row2", "cf", "q", 10, CellType::Put, 2).as_ref(), b"v2")?;
//! let (bytes, summary) = w.finish()?;
//! assert_eq!(summary.info.entries, 2);
//!
//! let r = HFileReader::open(bytes, "example")?;
//! let cells = r.get_column(b"row2", b"q")?;
//! assert_eq!(cells[0].1, b"v2");
//! # Ok::<(), cellar_format::Error>(())
//! ```
#![deny(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]
#![cfg_attr(
    test,
    allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)
)]

pub mod block;
mod blockmap;
pub mod bloom;
pub mod bufpool;
pub mod cell;
pub mod checksum;
pub mod coding;
pub mod compression;
pub mod display;
pub mod error;
mod fence;
pub mod file_info;
pub mod index;
pub mod iter;
pub mod reader;
pub mod trailer;
pub mod verify;
pub mod version;
pub mod writer;

pub use block::{BlockHandle, BlockType, CellEntry};
pub use bloom::{BloomConfig, BloomType};
pub use cell::{bytes_eq, compare_bytes, compare_keys, CellKey, CellType, KeyProbe, KeyRef};
pub use compression::CompressionType;
pub use error::{Error, ErrorKind, Region, Result};
pub use file_info::FileInfo;
pub use iter::HFileIter;
pub use reader::{BlockCache, CachedBlock, HFileReader, ReadAt, ReaderOptions};
pub use trailer::{Trailer, MAGIC, TRAILER_LEN};
pub use verify::{verify, Problem, VerifyReport};
pub use version::FormatVersion;
pub use writer::{FileSummary, HFileWriter, WriterOptions};
