//! `cellar ingest DIR TABLE FAMILY FILE...`: bulk load HFiles into a family (HBase's
//! `completebulkload`, RocksDB's `ldb ingest_extern_sst`) through `Table::ingest`
//! (SPEC.md §17.12): each file becomes one write, and the files are rewritten into the deepest
//! level they fit. The sources are left as they are.
//!
//! Before opening the database, every file goes through the whole format verifier, as
//! `hfile-verify` runs it (`--no-verify` skips that pass): the load itself checks what it reads
//! — every data block's checksum, the keys' order and family, the cell count — but not the
//! source's bloom filter, which it does not use, and a file damaged anywhere is better refused.
//!
//! Opens the database like `compact` does: it takes the lock (exit 2 with `Locked` while
//! another process has it open) and recovers the WAL first. A refused file (damaged, of
//! another family) fails the whole load with nothing changed: exit 1 for a damaged file, 2 for
//! any other error.

use std::io::Write;
use std::path::PathBuf;

use serde::Serialize;

use super::{emit, open_existing, DirArgs};
use crate::text::{human_size, Align, Table};
use crate::{Result, ToolError, EXIT_OK};

/// Arguments of `cellar ingest`.
#[derive(Debug, Clone, clap::Args)]
pub struct IngestArgs {
    #[command(flatten)]
    pub common: DirArgs,
    /// The table (`ns:table` or `table`).
    #[arg(value_name = "TABLE")]
    pub table: String,
    /// The column family the files' cells belong to (each file's own family must be it).
    #[arg(value_name = "FAMILY")]
    pub family: String,
    /// HFiles to load, in order: of two with equal cells the later wins.
    #[arg(value_name = "FILE", required = true)]
    pub files: Vec<PathBuf>,
    /// Skip the verifier's pass over each file before the load (the load still checks what it
    /// reads).
    #[arg(long)]
    pub no_verify: bool,
    /// Take the files over (RocksDB's `move_files`): hard-linked where they are loaded as they
    /// are, and removed once the load is installed. Without it they are only read.
    #[arg(long = "move")]
    pub move_files: bool,
}

#[derive(Debug, Serialize)]
struct FileJson {
    source: String,
    seq: u64,
    level: u32,
    files: Vec<u64>,
    cells: u64,
    duplicates: u64,
    bytes: u64,
    /// Copied as it is (its rows held nothing) rather than rewritten.
    as_is: bool,
}

/// The `--format json` document.
#[derive(Debug, Serialize)]
struct IngestDoc {
    ok: bool,
    dir: String,
    table: String,
    family: String,
    writes_held_seconds: f64,
    loaded: Vec<FileJson>,
}

fn text(doc: &IngestDoc) -> String {
    let mut s = format!(
        "Ingested {} file(s) into {}:{} of {} (writes held {:.3} s)\n",
        doc.loaded.len(),
        doc.table,
        doc.family,
        doc.dir,
        doc.writes_held_seconds
    );
    let mut t = Table::new(
        &[
            "SOURCE",
            "HOW",
            "SEQ",
            "LEVEL",
            "FILES",
            "CELLS",
            "DUPLICATES",
            "BYTES",
        ],
        &[
            Align::Left,
            Align::Left,
            Align::Right,
            Align::Right,
            Align::Left,
            Align::Right,
            Align::Right,
            Align::Right,
        ],
    );
    for f in &doc.loaded {
        let files: Vec<String> = f.files.iter().map(u64::to_string).collect();
        t.row(vec![
            f.source.clone(),
            if f.as_is { "as is" } else { "rewritten" }.into(),
            if f.as_is {
                "own".into()
            } else {
                f.seq.to_string()
            },
            format!("L{}", f.level),
            if files.is_empty() {
                "-".into()
            } else {
                files.join(",")
            },
            f.cells.to_string(),
            f.duplicates.to_string(),
            human_size(f.bytes),
        ]);
    }
    t.render(2, &mut s);
    s
}

/// Run `cellar ingest`; returns the exit code.
pub fn run<W: Write>(args: &IngestArgs, mut out: W) -> Result<i32> {
    let dir = &args.common.dir;
    if !args.no_verify {
        for f in &args.files {
            let r = crate::verify::verify_file(f, false);
            if let Some(e) = r.error {
                return Err(ToolError::Usage(e));
            }
            if let Some(p) = r.problems.first() {
                return Err(ToolError::Engine(cellar::Error::Corruption {
                    file: f.clone(),
                    offset: p.offset,
                    what: format!(
                        "refusing to ingest a damaged HFile ({} problem(s), first in {}: {}); \
                         hfile-verify lists them",
                        r.problems.len(),
                        p.region,
                        p.what
                    ),
                }));
            }
        }
    }
    let db = open_existing(dir)?;
    let opts = cellar::IngestOptions::default().move_files(args.move_files);
    let info = db
        .table(&args.table)?
        .ingest_with(&args.family, &args.files, opts)?;
    let doc = IngestDoc {
        ok: true,
        dir: dir.display().to_string(),
        table: args.table.clone(),
        family: args.family.clone(),
        writes_held_seconds: info.writes_held.as_secs_f64(),
        loaded: info
            .files
            .iter()
            .map(|f| FileJson {
                source: f.source.display().to_string(),
                seq: f.seq,
                level: f.level,
                files: f.files.clone(),
                cells: f.cells,
                duplicates: f.duplicates,
                bytes: f.bytes,
                as_is: f.as_is,
            })
            .collect(),
    };
    db.close()?;
    emit(&mut out, args.common.format, &doc, text)?;
    Ok(EXIT_OK)
}
