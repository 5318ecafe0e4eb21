//! The one error type of the `cellar` engine.

use std::path::PathBuf;

/// Errors of the engine. Callers branch on the variant, never on the message.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An operating-system I/O error, with the file and what was being done.
    #[error("I/O error on {path} while {doing}: {source}")]
    Io {
        /// File or directory concerned.
        path: PathBuf,
        /// What the engine was doing.
        doing: &'static str,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// Bytes on disk are malformed (WAL, manifest, CURRENT).
    #[error("corruption in {file} at offset {offset}: {what}")]
    Corruption {
        /// The file.
        file: PathBuf,
        /// Byte offset of the damaged structure.
        offset: u64,
        /// What is wrong.
        what: String,
    },
    /// An HFile could not be read or written.
    #[error(transparent)]
    Format(#[from] cellar_format::Error),
    /// A write or sync failed earlier: the database accepts no more durable writes until it is
    /// reopened (an fsync that failed is never retried and trusted; see RELIABILITY.md §2.0).
    #[error("a previous write or sync failed ({0}); the database is read-only until reopened")]
    Poisoned(String),
    /// Another process (or another `Db` in this one) holds the database directory.
    #[error("database directory {0} is locked by another process")]
    Locked(PathBuf),
    /// No table of that name.
    #[error("table not found: {0}")]
    TableNotFound(String),
    /// A table of that name exists already.
    #[error("table exists: {0}")]
    TableExists(String),
    /// No namespace of that name.
    #[error("namespace not found: {0}")]
    NamespaceNotFound(String),
    /// The table has no family of that name.
    #[error("column family {family} not found in table {table}")]
    FamilyNotFound {
        /// Table.
        table: String,
        /// Family asked for.
        family: String,
    },
    /// The caller passed something invalid.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// The database or component was closed.
    #[error("closed")]
    Closed,
}

impl Error {
    pub(crate) fn io(
        path: impl Into<PathBuf>,
        doing: &'static str,
        source: std::io::Error,
    ) -> Self {
        Error::Io {
            path: path.into(),
            doing,
            source,
        }
    }
}

/// Result alias of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;
