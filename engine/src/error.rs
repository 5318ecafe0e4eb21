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
    /// The file system is full (ENOSPC, or a disk quota: EDQUOT). Returned to the call whose
    /// write hit it; what that means for the database depends on the file (SPEC.md §22,
    /// RELIABILITY.md §2.8): a WAL or manifest write poisons the database (cause
    /// [`PoisonCause::NoSpace`]; reopen once space is back), a flush or compaction output is
    /// removed and retried later.
    #[error("no space left on device: {path} while {doing}")]
    NoSpace {
        /// File or directory concerned.
        path: PathBuf,
        /// What the engine was doing.
        doing: String,
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
    Format(cellar_format::Error),
    /// A write or sync failed earlier: the database accepts no more durable writes until it is
    /// reopened (an fsync that failed is never retried and trusted; see RELIABILITY.md §2.0).
    /// [`Poison`] says why, including its [`PoisonCause`] (a full disk or another I/O error), so
    /// a caller can tell "free space, then reopen" from "the device failed".
    #[error("a previous write or sync failed ({0}); the database is read-only until reopened")]
    Poisoned(Poison),
    /// Another process (or another `Db` in this one) holds the database directory.
    #[error("database directory {0} is locked by another process")]
    Locked(PathBuf),
    /// No table of that name.
    #[error("table not found: {0}")]
    TableNotFound(String),
    /// A table of that name exists already.
    #[error("table exists: {0}")]
    TableExists(String),
    /// No table snapshot of that name.
    #[error("snapshot not found: {0}")]
    SnapshotNotFound(String),
    /// A table snapshot of that name exists already.
    #[error("snapshot exists: {0}")]
    SnapshotExists(String),
    /// The WAL no longer holds every batch after `since` (`Db::changes_since`): flushed
    /// segments were removed. `oldest` is the smallest `since` a feed can start from now.
    #[error("changes since seq {since} are no longer in the WAL (a feed can start at seq {oldest} or later)")]
    ChangesUnavailable {
        /// The seq asked for.
        since: u64,
        /// The smallest seq a feed can start after.
        oldest: u64,
    },
    /// No feed slot of that name (`Db::create_feed_slot`).
    #[error("feed slot not found: {0}")]
    FeedSlotNotFound(String),
    /// A feed slot of that name exists already.
    #[error("feed slot exists: {0}")]
    FeedSlotExists(String),
    /// The feed slot gave up the WAL segments it held (it fell further behind than
    /// `WalOptions::slot_max_bytes` allows, or its segment was missing at open): its consumer
    /// must start again from a copy of the data (an export or a checkpoint), and the slot be
    /// dropped and created anew.
    #[error("feed slot {0} is lost: the WAL it held was given up")]
    FeedSlotLost(String),
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
    /// A memstore ran out of its arena's address space (16 GiB: its links are 32-bit). Only a
    /// write buffer of gigabytes filled by many large concurrent batches gets there.
    #[error("memstore of family {family} is full ({bytes} bytes of cells)")]
    MemstoreFull {
        /// Family id.
        family: u32,
        /// Bytes the memstore held.
        bytes: u64,
    },
}

/// What kind of failure poisoned a database, WAL or manifest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum PoisonCause {
    /// The file system was full ([`Error::NoSpace`]): the device is healthy, so once space is
    /// freed a reopen resumes writing.
    NoSpace,
    /// Another I/O error (EIO, a failed fsync, a failed rename...): the device may have lost
    /// data it had acknowledged, which is why nothing is retried.
    Io,
    /// Anything else (a panicked writer thread, a malformed edit discovered while logging).
    Other,
}

/// Why a component entered the sticky read-only state: the cause kind and a message naming the
/// file and the operation. Cheap to clone, so every later call can report the first failure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Poison {
    /// The kind of the first failure.
    pub cause: PoisonCause,
    /// The first failure, as text.
    pub message: String,
}

impl Poison {
    /// A poison of `cause` with `message`.
    pub fn new(cause: PoisonCause, message: impl Into<String>) -> Self {
        Poison {
            cause,
            message: message.into(),
        }
    }

    /// The poison the failure `e` causes, with `context` (e.g. `"flush failed"`) before its
    /// message.
    pub fn from_error(context: &str, e: &Error) -> Self {
        let message = if context.is_empty() {
            e.to_string()
        } else {
            format!("{context}: {e}")
        };
        Poison {
            cause: e.poison_cause(),
            message,
        }
    }
}

impl std::fmt::Display for Poison {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

/// Whether an OS error means "the file system is full": ENOSPC (`StorageFull`) or EDQUOT
/// (`QuotaExceeded`, a full quota is a full disk to this process).
pub fn is_no_space_io(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::StorageFull | std::io::ErrorKind::QuotaExceeded
    )
}

impl Error {
    /// Map an OS error on `path` while `doing` to the engine's error: [`Error::NoSpace`] for a
    /// full file system, [`Error::Io`] otherwise.
    pub(crate) fn io(
        path: impl Into<PathBuf>,
        doing: &'static str,
        source: std::io::Error,
    ) -> Self {
        if is_no_space_io(&source) {
            return Error::NoSpace {
                path: path.into(),
                doing: doing.to_owned(),
            };
        }
        Error::Io {
            path: path.into(),
            doing,
            source,
        }
    }

    /// Whether this error comes from a full file system: [`Error::NoSpace`], an HFile write
    /// that failed with ENOSPC, or [`Error::Poisoned`] with [`PoisonCause::NoSpace`].
    pub fn is_no_space(&self) -> bool {
        self.poison_cause() == PoisonCause::NoSpace
    }

    /// The poison cause this error stands for: what a component poisoned by it reports.
    pub fn poison_cause(&self) -> PoisonCause {
        match self {
            Error::NoSpace { .. } => PoisonCause::NoSpace,
            Error::Poisoned(p) => p.cause,
            Error::Io { .. } => PoisonCause::Io,
            Error::Format(cellar_format::Error::Io { source, .. }) => {
                if is_no_space_io(source) {
                    PoisonCause::NoSpace
                } else {
                    PoisonCause::Io
                }
            }
            _ => PoisonCause::Other,
        }
    }
}

impl From<cellar_format::Error> for Error {
    /// An HFile error; an ENOSPC from the writer becomes [`Error::NoSpace`], so a full disk
    /// reads the same whichever layer hit it.
    fn from(e: cellar_format::Error) -> Self {
        match e {
            cellar_format::Error::Io {
                file,
                doing,
                source,
            } if is_no_space_io(&source) => Error::NoSpace {
                path: file.into(),
                doing,
            },
            e => Error::Format(e),
        }
    }
}

/// Result alias of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;
