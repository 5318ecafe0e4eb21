//! `cellar-tools`: the operator tools of Cellar, as a library so that the thin binaries
//! (`hfile-dump`, `hfile-verify`, `cellar`) share one implementation and the tests can pin it.
//!
//! Conventions (ECOSYSTEM.md §4.5): human text by default, `--format json` for one document,
//! `jsonl` for streams; bytes printed as HBase's `Bytes.toStringBinary`; progress bars only on a
//! TTY and to stderr; exit codes 0 (clean), 1 (corruption found), 2 (usage or I/O error).

pub mod bench;
pub mod build;
pub mod crash;
pub mod db;
pub mod diff;
pub mod dump;
pub mod emit;
pub mod mmap;
pub mod progress;
pub mod reliability;
pub mod shell;
pub mod text;
pub mod verify;

use std::path::{Path, PathBuf};

/// Exit code: everything was fine.
pub const EXIT_OK: i32 = 0;
/// Exit code: a file is corrupt.
pub const EXIT_CORRUPT: i32 = 1;
/// Exit code: bad usage, I/O error, or a file this build cannot read.
pub const EXIT_USAGE: i32 = 2;

/// Errors of the tools. Each maps to one exit code, so callers never parse messages.
#[derive(Debug, thiserror::Error)]
pub enum ToolError {
    /// The format crate reported a problem (corruption, I/O, unsupported version).
    #[error("{0}")]
    Format(#[from] cellar_format::Error),
    /// Opening, reading or writing a path failed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The path concerned.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// Writing the report to stdout failed (a closed pipe is handled by the caller).
    #[error("writing output: {0}")]
    Output(std::io::Error),
    /// A bad argument or bad input data.
    #[error("{0}")]
    Usage(String),
    /// The engine reported a problem (opening, reading the manifest or the WAL, a write).
    #[error("{0}")]
    Engine(cellar::Error),
}

impl ToolError {
    /// The process exit code this error calls for.
    pub fn exit_code(&self) -> i32 {
        match self {
            ToolError::Format(e) if e.is_corruption() => EXIT_CORRUPT,
            ToolError::Engine(cellar::Error::Corruption { .. }) => EXIT_CORRUPT,
            ToolError::Engine(cellar::Error::Format(e)) if e.is_corruption() => EXIT_CORRUPT,
            _ => EXIT_USAGE,
        }
    }

    /// True when stdout was closed under us (`hfile-dump --kv | head`): not worth a message.
    pub fn is_broken_pipe(&self) -> bool {
        matches!(self, ToolError::Output(e) if e.kind() == std::io::ErrorKind::BrokenPipe)
    }

    pub(crate) fn io(path: &Path, source: std::io::Error) -> Self {
        ToolError::Io {
            path: path.to_owned(),
            source,
        }
    }
}

/// Result alias of the tools.
pub type Result<T, E = ToolError> = std::result::Result<T, E>;

/// Turn a tool's outcome into an exit code, printing the error (if any) to stderr.
pub fn finish(outcome: Result<i32>) -> i32 {
    match outcome {
        Ok(code) => code,
        Err(e) if e.is_broken_pipe() => EXIT_OK,
        Err(e) => {
            eprintln!("error: {e}");
            e.exit_code()
        }
    }
}

/// Print the engine's `tracing` events (flush and compaction spans, deleted files) to stderr
/// when `RUST_LOG` names them, e.g. `RUST_LOG=cellar=info`. Off by default so that the tools'
/// output stays what their docs say; a bad filter is reported and ignored rather than fatal.
pub fn init_logging() {
    let Ok(spec) = std::env::var("RUST_LOG") else {
        return;
    };
    match tracing_subscriber::EnvFilter::try_new(&spec) {
        Ok(filter) => {
            let _ = tracing_subscriber::fmt()
                .with_env_filter(filter)
                .with_writer(std::io::stderr)
                .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
                .try_init();
        }
        Err(e) => eprintln!("warning: ignoring RUST_LOG={spec:?}: {e}"),
    }
}
