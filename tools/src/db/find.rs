//! `cellar find DIR ROW [--table T]`: every stored cell of one row, read-only (Pebble's `find`):
//! in each live HFile whose key range holds the row, with each cell's sequence number and what
//! the file's bloom filter says of the row, and in each WAL record that writes the row, with
//! its segment, offset and sequence number and whether recovery replays it. Where the answer of
//! a Get comes from, on a database that is open elsewhere or will not open; the shell's
//! `explain` then says which of these cells a Get returns and why.
//!
//! The files are read without their bloom filters (a filter that wrongly rules the row out
//! would otherwise hide the cells it is asked about): a file whose filter says "absent" but
//! that holds the row is reported as corruption (exit 1).

use std::io::Write;
use std::path::Path;
use std::sync::Arc;

use cellar::format::display::parse_binary;
use cellar::format::{CellKey, HFileReader, ReaderOptions};
use cellar::fs::RealFs;
use cellar::inspect::{self, WalEntryKind};
use cellar::manifest as man;
use cellar::manifest::NUM_LEVELS;
use serde::Serialize;

use super::{emit, DirArgs, Names};
use crate::text::{bin, key_text};
use crate::{Result, ToolError, EXIT_CORRUPT, EXIT_OK};

/// Arguments of `cellar find`.
#[derive(Debug, Clone, clap::Args)]
pub struct FindArgs {
    #[command(flatten)]
    pub common: DirArgs,
    /// The row (`\xNN` escapes allowed).
    #[arg(value_name = "ROW")]
    pub row: String,
    /// Only this table's files and mutations.
    #[arg(long)]
    pub table: Option<String>,
}

#[derive(Debug, Serialize)]
struct CellJson {
    /// `row/family:qualifier/timestamp/Type/seqid=N`.
    key: String,
    column: String,
    timestamp: u64,
    #[serde(rename = "type")]
    cell_type: &'static str,
    seq: u64,
    value: String,
}

#[derive(Debug, Serialize)]
struct FileHit {
    table: Option<String>,
    family: Option<String>,
    family_id: u32,
    level: usize,
    /// `data/...` path relative to the database directory.
    file: String,
    /// What the file's bloom filter says of the row.
    bloom_says_present: bool,
    cells: Vec<CellJson>,
}

#[derive(Debug, Serialize)]
struct WalHit {
    segment: u64,
    offset: u64,
    seq: u64,
    /// Whether recovery replays the record's segment (at or above the manifest's log number;
    /// older segments were flushed).
    live: bool,
    table: Option<String>,
    cells: Vec<CellJson>,
}

#[derive(Debug, Serialize)]
struct FindDoc {
    row: String,
    /// Live files whose key range holds the row, and the row's cells in each.
    files: Vec<FileHit>,
    /// WAL records that write the row.
    wal: Vec<WalHit>,
    /// Files whose bloom filter rules out a row they hold.
    problems: Vec<String>,
}

fn text(doc: &FindDoc) -> String {
    let mut s = format!("Row '{}'\n", doc.row);
    if doc.files.is_empty() && doc.wal.is_empty() {
        s.push_str("No file's key range holds it and no WAL record writes it.\n");
    }
    for f in &doc.files {
        let name = match (&f.table, &f.family) {
            (Some(t), Some(fam)) => format!("{t}/{fam}"),
            _ => format!("family#{}", f.family_id),
        };
        s.push_str(&format!(
            "\n{} L{} {}: {} cell(s), bloom filter says {}\n",
            name,
            f.level,
            f.file,
            f.cells.len(),
            if f.bloom_says_present {
                "maybe present"
            } else {
                "absent"
            }
        ));
        for c in &f.cells {
            s.push_str(&format!("  {} value={}\n", c.key, c.value));
        }
    }
    for w in &doc.wal {
        s.push_str(&format!(
            "\nWAL segment {} offset {} seq {}{}: {} cell(s)\n",
            w.segment,
            w.offset,
            w.seq,
            if w.live { "" } else { " (flushed)" },
            w.cells.len()
        ));
        for c in &w.cells {
            s.push_str(&format!(
                "  {}/{}/{} value={}\n",
                c.column, c.timestamp, c.cell_type, c.value
            ));
        }
    }
    for p in &doc.problems {
        s.push_str(&format!("\nCORRUPTION: {p}\n"));
    }
    s
}

/// The row's cells in the HFile at `path`, read past its bloom filter, and what the filter says.
fn file_cells(path: &Path, name: &str, row: &[u8]) -> Result<(bool, Vec<CellJson>)> {
    let file = Arc::new(std::fs::File::open(path).map_err(|e| ToolError::io(path, e))?);
    let reader = HFileReader::open_with(file, name, ReaderOptions::default())?;
    let present = reader.may_contain_row(row)?;
    let mut it = reader.iter();
    it.seek(&CellKey::first_on_row(row).as_ref())?;
    let mut cells = Vec::new();
    while let Some(k) = it.key_ref() {
        if k.row != row {
            break;
        }
        let value = it.value();
        cells.push(CellJson {
            key: key_text(it.key()),
            column: format!("{}:{}", bin(k.family), bin(k.qualifier)),
            timestamp: k.timestamp,
            cell_type: k.cell_type().map_or("Unknown", |t| t.name()),
            seq: k.seq,
            value: bin(value),
        });
        it.next()?;
    }
    Ok((present, cells))
}

/// Run `cellar find`; returns the exit code.
pub fn run<W: Write>(args: &FindArgs, mut out: W) -> Result<i32> {
    let dir = &args.common.dir;
    let row = parse_binary(&args.row).map_err(|e| ToolError::Usage(format!("ROW: {e}")))?;
    let log = inspect::manifest_edits(&RealFs, dir)?;
    let state = inspect::replay_manifest(&log)?;
    let mut names = Names::of_state(&state);
    for e in &log.edits {
        names.learn(&e.edit);
    }
    let wanted = |id: u32| {
        args.table
            .as_deref()
            .is_none_or(|t| names.get(id).is_some_and(|(table, _)| table == t))
    };
    let version = state.current();
    let mut doc = FindDoc {
        row: bin(&row),
        files: Vec::new(),
        wal: Vec::new(),
        problems: Vec::new(),
    };
    for fam in version.families().filter(|&f| wanted(f)) {
        for level in 0..NUM_LEVELS {
            for meta in version.files(fam, level) {
                let row_of =
                    |key: &[u8]| cellar::format::KeyRef::parse(key).map(|k| k.row.to_vec());
                let (Ok(lo), Ok(hi)) = (row_of(&meta.smallest), row_of(&meta.largest)) else {
                    continue;
                };
                if row < lo || row > hi {
                    continue;
                }
                let path = man::hfile_path(dir, fam, meta.number);
                let name = path
                    .strip_prefix(dir)
                    .unwrap_or(&path)
                    .display()
                    .to_string();
                let (present, cells) = file_cells(&path, &name, &row)?;
                if !present && !cells.is_empty() {
                    doc.problems.push(format!(
                        "{name}: its bloom filter rules out row '{}', which it holds",
                        bin(&row)
                    ));
                }
                let (table, family) = match names.get(fam) {
                    Some((t, f)) => (Some(t.to_owned()), Some(f.to_owned())),
                    None => (None, None),
                };
                doc.files.push(FileHit {
                    table,
                    family,
                    family_id: fam,
                    level,
                    file: name,
                    bloom_says_present: present,
                    cells,
                });
            }
        }
    }
    for e in inspect::wal_records(&RealFs, dir)? {
        let e = e?;
        if e.kind != WalEntryKind::Batch {
            continue;
        }
        let cells: Vec<CellJson> = e
            .mutations
            .iter()
            .filter(|m| m.row == row && wanted(m.family))
            .map(|m| {
                let family = names
                    .get(m.family)
                    .map_or_else(|| format!("family#{}", m.family), |(_, f)| f.to_owned());
                CellJson {
                    key: format!(
                        "{}/{}:{}/{}/{}/seqid={}",
                        bin(&m.row),
                        family,
                        bin(&m.qualifier),
                        m.timestamp,
                        m.cell_type.name(),
                        e.seq
                    ),
                    column: format!("{family}:{}", bin(&m.qualifier)),
                    timestamp: m.timestamp,
                    cell_type: m.cell_type.name(),
                    seq: e.seq,
                    value: bin(&m.value),
                }
            })
            .collect();
        if cells.is_empty() {
            continue;
        }
        let table = e
            .mutations
            .iter()
            .find(|m| m.row == row)
            .and_then(|m| names.get(m.family))
            .map(|(t, _)| t.to_owned());
        doc.wal.push(WalHit {
            segment: e.segment,
            offset: e.offset,
            seq: e.seq,
            live: e.segment >= state.log_number(),
            table,
            cells,
        });
    }
    let code = if doc.problems.is_empty() {
        EXIT_OK
    } else {
        EXIT_CORRUPT
    };
    emit(&mut out, args.common.format, &doc, text)?;
    Ok(code)
}
