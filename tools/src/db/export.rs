//! `cellar export DIR TABLE OUT [--start ROW] [--stop ROW]`: write a table's rows in
//! `[start, stop)` as one HFile per family into `OUT` (`Table::export_range`, SPEC.md §17.14),
//! for `cellar ingest` into another database; the seq printed is where a change feed of the
//! source (`Db::changes_since`) picks up after it.
//!
//! Opens the database like `compact` does: it takes the lock (exit 2 with `Locked` while
//! another process has it open) and recovers the WAL first. Rows are written as the shell
//! writes byte strings (`\xNN` escapes).

use std::io::Write;
use std::path::PathBuf;

use serde::Serialize;

use super::{emit, open_existing, DirArgs};
use crate::text::{bin, human_size, parse_bytes_arg, Align, Table};
use crate::{Result, ToolError, EXIT_OK};

/// Arguments of `cellar export`.
#[derive(Debug, Clone, clap::Args)]
pub struct ExportArgs {
    #[command(flatten)]
    pub common: DirArgs,
    /// The table (`ns:table` or `table`).
    #[arg(value_name = "TABLE")]
    pub table: String,
    /// Directory to write the files into; must not exist.
    #[arg(value_name = "OUT")]
    pub out: PathBuf,
    /// First row (inclusive); default: the table's start.
    #[arg(long, default_value = "")]
    pub start: String,
    /// Stop row (exclusive); default: the table's end.
    #[arg(long, default_value = "")]
    pub stop: String,
}

#[derive(Debug, Serialize)]
struct FileJson {
    family: String,
    path: String,
    cells: u64,
    bytes: u64,
}

/// The `--format json` document.
#[derive(Debug, Serialize)]
struct ExportDoc {
    ok: bool,
    dir: String,
    table: String,
    start: String,
    stop: String,
    /// The export's read point: `Db::changes_since(seq)` carries every later write.
    seq: u64,
    files: Vec<FileJson>,
}

fn text(doc: &ExportDoc) -> String {
    let mut s = format!(
        "Exported {} [{}, {}) of {} at seq {}: {} file(s)\n",
        doc.table,
        doc.start,
        doc.stop,
        doc.dir,
        doc.seq,
        doc.files.len()
    );
    let mut t = Table::new(
        &["FAMILY", "FILE", "CELLS", "BYTES"],
        &[Align::Left, Align::Left, Align::Right, Align::Right],
    );
    for f in &doc.files {
        t.row(vec![
            f.family.clone(),
            f.path.clone(),
            f.cells.to_string(),
            human_size(f.bytes),
        ]);
    }
    t.render(2, &mut s);
    s
}

/// Run `cellar export`; returns the exit code.
pub fn run<W: Write>(args: &ExportArgs, mut out: W) -> Result<i32> {
    let start =
        parse_bytes_arg(&args.start).map_err(|e| ToolError::Usage(format!("--start: {e}")))?;
    let stop = parse_bytes_arg(&args.stop).map_err(|e| ToolError::Usage(format!("--stop: {e}")))?;
    let db = open_existing(&args.common.dir)?;
    let info = db
        .table(&args.table)?
        .export_range(&start, &stop, &args.out)?;
    let doc = ExportDoc {
        ok: true,
        dir: args.common.dir.display().to_string(),
        table: args.table.clone(),
        start: bin(&start),
        stop: bin(&stop),
        seq: info.seq,
        files: info
            .files
            .iter()
            .map(|f| FileJson {
                family: f.family.clone(),
                path: f.path.display().to_string(),
                cells: f.cells,
                bytes: f.bytes,
            })
            .collect(),
    };
    db.close()?;
    emit(&mut out, args.common.format, &doc, text)?;
    Ok(EXIT_OK)
}
