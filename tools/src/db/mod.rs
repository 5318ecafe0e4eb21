//! Database tools, the `ldb` of Cellar: `cellar levels`, `manifest-dump`, `wal-dump`, `find`,
//! `verify`, `compact`, `ingest`, `checkpoint` and `backup`.
//!
//! The others read the directory through `cellar::inspect`, which never writes and takes no
//! lock: they work on a database another process has open, and on a damaged one (which is when
//! an operator needs them). `compact`, `ingest`, `checkpoint` and `backup create` open the database like
//! any embedder; the other `backup` commands read and write only the backup root.
//!
//! Output: human text by default, `--format json` for one JSON document on stdout. Exit codes
//! as `hfile-verify`: 0 clean, 1 corruption found, 2 usage or I/O error.

pub mod backup;
pub mod checkpoint;
pub mod compact;
pub mod export;
pub mod find;
pub mod ingest;
pub mod levels;
pub mod manifest_dump;
pub mod verify;
pub mod wal_dump;

use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;

use cellar::format::KeyRef;
use cellar::manifest::{ManifestState, VersionEdit};
use cellar::types::FileMeta;
use serde::Serialize;

use crate::text::bin;
use crate::{Result, ToolError};

/// `--format` of the database tools.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Default)]
pub enum DbFormat {
    /// Aligned human text.
    #[default]
    Text,
    /// One JSON document.
    Json,
}

/// Arguments every read-only database tool takes.
#[derive(Debug, Clone, clap::Args)]
pub struct DirArgs {
    /// The database directory.
    #[arg(value_name = "DIR")]
    pub dir: PathBuf,
    /// Output shape.
    #[arg(long, value_enum, default_value_t = DbFormat::Text)]
    pub format: DbFormat,
}

/// Family id → `(table, family)` names, from every table a state or a manifest log has known.
/// Ids are never reused (manifest invariant 3), so one map serves the whole history.
#[derive(Debug, Default, Clone)]
pub struct Names {
    map: BTreeMap<u32, (String, String)>,
}

impl Names {
    /// The names of the tables of `state`.
    pub fn of_state(state: &ManifestState) -> Names {
        let mut n = Names::default();
        for t in state.tables().values() {
            n.learn_table(t);
        }
        n
    }

    /// Learn the families an edit puts.
    pub fn learn(&mut self, e: &VersionEdit) {
        for t in &e.put_tables {
            self.learn_table(t);
        }
    }

    fn learn_table(&mut self, t: &cellar::manifest::TableEntry) {
        for (f, id) in t.descriptor.families.iter().zip(&t.family_ids) {
            self.map
                .insert(*id, (t.descriptor.name.to_string(), f.name.clone()));
        }
    }

    /// `(table, family)` of a family id, if known.
    pub fn get(&self, id: u32) -> Option<(&str, &str)> {
        self.map.get(&id).map(|(t, f)| (t.as_str(), f.as_str()))
    }

    /// `table/family`, or `family#id` when unknown.
    pub fn label(&self, id: u32) -> String {
        match self.get(id) {
            Some((t, f)) => format!("{t}/{f}"),
            None => format!("family#{id}"),
        }
    }
}

/// The row of an encoded key, as toStringBinary prints it (the key escaped whole if it does
/// not parse: the tools show damaged metadata rather than fail on it).
pub fn key_row(encoded: &[u8]) -> String {
    match KeyRef::parse(encoded) {
        Ok(k) => bin(k.row),
        Err(_) => format!("<malformed key {}>", bin(encoded)),
    }
}

/// A live or added file as the JSON output shows it.
#[derive(Debug, Serialize)]
pub struct FileJson {
    /// File number.
    pub number: u64,
    /// `{number:06}.hfile`.
    pub name: String,
    /// Family id.
    pub family_id: u32,
    /// Level.
    pub level: u32,
    /// Bytes.
    pub size: u64,
    /// Cells.
    pub entries: u64,
    /// Delete markers among them.
    pub deletes: u64,
    /// Row of the first key (toStringBinary).
    pub smallest_row: String,
    /// Row of the last key.
    pub largest_row: String,
    /// First key, `row/family:qualifier/ts/Type/seqid=N`.
    pub smallest_key: String,
    /// Last key.
    pub largest_key: String,
    /// Smallest sequence number.
    pub min_seq: u64,
    /// Largest sequence number.
    pub max_seq: u64,
    /// Smallest timestamp.
    pub min_ts: u64,
    /// Largest timestamp.
    pub max_ts: u64,
    /// Creation time, ms since the epoch.
    pub created_ms: u64,
    /// CRC-32C of the whole file as the manifest records it (8 hex digits), if it does.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub crc32c: Option<String>,
    /// The seq through which the file holds nothing a row-range delete masks, if known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub range_clean: Option<u64>,
}

impl From<&FileMeta> for FileJson {
    fn from(f: &FileMeta) -> Self {
        FileJson {
            number: f.number,
            name: cellar::manifest::hfile_file_name(f.number),
            family_id: f.family,
            level: f.level,
            size: f.size,
            entries: f.entries,
            deletes: f.deletes,
            smallest_row: key_row(&f.smallest),
            largest_row: key_row(&f.largest),
            smallest_key: crate::text::key_text(&f.smallest),
            largest_key: crate::text::key_text(&f.largest),
            min_seq: f.min_seq,
            max_seq: f.max_seq,
            min_ts: f.min_ts,
            max_ts: f.max_ts,
            created_ms: f.created_ms,
            crc32c: f.crc.map(|c| format!("{c:08x}")),
            range_clean: (f.range_clean > 0).then_some(f.range_clean),
        }
    }
}

/// Map an engine error to the tools' error (its exit code: 1 for corruption, 2 otherwise).
impl From<cellar::Error> for ToolError {
    fn from(e: cellar::Error) -> Self {
        ToolError::Engine(e)
    }
}

/// Serialize a document as one pretty JSON document and a newline.
pub fn write_json<W: Write, T: Serialize>(out: &mut W, doc: &T) -> Result<()> {
    let s = serde_json::to_string_pretty(doc)
        .map_err(|e| ToolError::Output(std::io::Error::other(e)))?;
    writeln!(out, "{s}").map_err(ToolError::Output)
}

/// Write a tool's document in the chosen shape (`text` renders the human form), then flush.
pub fn emit<W: Write, T: Serialize>(
    out: &mut W,
    format: DbFormat,
    doc: &T,
    text: impl FnOnce(&T) -> String,
) -> Result<()> {
    match format {
        DbFormat::Json => write_json(out, doc)?,
        DbFormat::Text => out
            .write_all(text(doc).as_bytes())
            .map_err(ToolError::Output)?,
    }
    out.flush().map_err(ToolError::Output)
}

/// Open the database in `dir` as the tools that write do: an existing one only, never a new
/// one made where the operator mistyped a path.
pub fn open_existing(dir: &std::path::Path) -> Result<cellar::Db> {
    let opts = cellar::Options {
        create_if_missing: false,
        ..cellar::Options::default()
    };
    Ok(cellar::Db::open(dir, opts)?)
}

/// Compact JSON of a value (one line), for streamed documents.
pub(crate) fn json_line<T: Serialize>(v: &T) -> Result<String> {
    serde_json::to_string(v).map_err(|e| ToolError::Output(std::io::Error::other(e)))
}
