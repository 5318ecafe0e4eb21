//! `cellar`: the embeddable engine (memstore, WAL, flush, manifest, compaction, cache, MVCC
//! read path, admin, recovery).
//!
//! **Under construction.** What exists: the error type, the file-system layer ([`fs`]) and the
//! write-ahead log ([`wal`]). The rest of the write path (memstore, flush, manifest, recovery,
//! the public `Db` API) is the next piece of work; the file format it builds on is complete in
//! [`format`].

pub mod error;
pub mod fs;
pub mod schema;
pub mod types;
pub mod wal;

pub use cellar_format as format;
pub use error::{Error, Result};
