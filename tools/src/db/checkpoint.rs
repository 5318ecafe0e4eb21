//! `cellar checkpoint DIR TARGET`: open the database and make an online checkpoint of it in
//! `TARGET` (`Db::checkpoint`): HFiles hard-linked (copied across devices), the WAL segments
//! still needed copied, a manifest of its own. `TARGET` then opens as a database; `cellar
//! verify TARGET` checks it.
//!
//! Like `compact`, this opens the database, so it takes the lock (exit 2 with `Locked` while
//! another process has it open: that process should call `Db::checkpoint` itself).

use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;

use serde::Serialize;

use super::{emit, open_existing, DirArgs};
use crate::text::human_size;
use crate::{Result, EXIT_OK};

/// Arguments of `cellar checkpoint`.
#[derive(Debug, Clone, clap::Args)]
pub struct CheckpointArgs {
    #[command(flatten)]
    pub common: DirArgs,
    /// Where the checkpoint goes; must not exist.
    #[arg(value_name = "TARGET")]
    pub target: PathBuf,
}

/// The `--format json` document.
#[derive(Debug, Serialize)]
struct CheckpointDoc {
    ok: bool,
    dir: String,
    target: String,
    manifest_seq: u64,
    linked_files: u64,
    copied_files: u64,
    file_bytes: u64,
    wal_segments: u64,
    wal_bytes: u64,
    seconds: f64,
}

fn text(d: &CheckpointDoc) -> String {
    format!(
        "Checkpoint of {} in {} ({:.3} s): {} HFiles linked, {} copied ({}); {} WAL segments \
         copied ({}); manifest through seq {}\n",
        d.dir,
        d.target,
        d.seconds,
        d.linked_files,
        d.copied_files,
        human_size(d.file_bytes),
        d.wal_segments,
        human_size(d.wal_bytes),
        d.manifest_seq
    )
}

/// Run `cellar checkpoint`; returns the exit code.
pub fn run<W: Write>(args: &CheckpointArgs, mut out: W) -> Result<i32> {
    let dir = &args.common.dir;
    let db = open_existing(dir)?;
    let start = Instant::now();
    let info = db.checkpoint(&args.target)?;
    let doc = CheckpointDoc {
        ok: true,
        dir: dir.display().to_string(),
        target: info.dir.display().to_string(),
        manifest_seq: info.manifest_seq,
        linked_files: info.linked_files,
        copied_files: info.copied_files,
        file_bytes: info.file_bytes,
        wal_segments: info.wal_segments,
        wal_bytes: info.wal_bytes,
        seconds: start.elapsed().as_secs_f64(),
    };
    db.close()?;
    emit(&mut out, args.common.format, &doc, text)?;
    Ok(EXIT_OK)
}
