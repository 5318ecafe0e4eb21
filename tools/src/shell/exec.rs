//! Running parsed commands against a [`Db`].
//!
//! Disabled tables: the engine has no enabled/disabled state, so the shell keeps one, as HBase
//! operators expect it (`disable` before `drop`; reads and writes of a disabled table refused
//! with `TableNotEnabled`). The set persists in `shell-disabled-tables` in the database
//! directory (one name a line; the engine ignores the file), so `disable` and `drop` can be two
//! runs of `cellar shell -e`. It binds the shell only: a Rust program embedding the database
//! reads and writes a "disabled" table as usual.

use std::collections::BTreeSet;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

use cellar::types::LATEST_TIMESTAMP;
use cellar::{
    Append, Db, Delete, FamilyDescriptor, Filter, Get, Increment, Options, Put, Scan, TableName,
};

use super::convert::Show;
use super::output::{cell_json, error_json, Explained, ExplainedJson, Output, SourceJson};
use super::parse::{parse_script, AlterOp, ColumnSpec, Command, DeleteKind, RowSel, COMMANDS};
use super::{kind, Format, ShellError};
use crate::text::bin;

/// File in the database directory that lists the tables the shell disabled.
pub const DISABLED_FILE: &str = "shell-disabled-tables";

/// An open shell: the database and the shell's own state.
#[derive(Debug)]
pub struct Shell {
    db: Db,
    format: Format,
    disabled: BTreeSet<String>,
    disabled_path: PathBuf,
}

/// What a run of statements came to.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Outcome {
    /// Statements run.
    pub run: usize,
    /// Statements that failed (parse or execution).
    pub failed: usize,
    /// `exit` was given (or stdout closed): stop reading.
    pub exit: bool,
}

type R<T> = Result<T, ShellError>;

/// Canonical form of a table name (`default:t` and `t` are one table).
fn canonical(table: &str) -> R<String> {
    Ok(TableName::parse(table)?.to_string())
}

impl Shell {
    /// Open (or create) the database in `dir`.
    pub fn open(dir: &Path, format: Format) -> Result<Shell, ShellError> {
        let db = Db::open(dir, Options::default())?;
        let disabled_path = dir.join(DISABLED_FILE);
        let disabled = match std::fs::read_to_string(&disabled_path) {
            Ok(s) => s
                .lines()
                .filter(|l| !l.is_empty())
                .map(str::to_owned)
                .collect(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => BTreeSet::new(),
            Err(e) => {
                return Err(ShellError::new(
                    kind::IO,
                    format!("{}: {e}", disabled_path.display()),
                ))
            }
        };
        Ok(Shell {
            db,
            format,
            disabled,
            disabled_path,
        })
    }

    /// Close the database (flushes what only memstores hold).
    pub fn close(self) -> Result<(), cellar::Error> {
        self.db.close()
    }

    /// The database.
    pub fn db(&self) -> &Db {
        &self.db
    }

    /// Parse and run `src`, printing each command's output (stdout) or error (stderr in text
    /// mode, one JSON line on stdout in JSON mode).
    pub fn run_source(&mut self, src: &str) -> Outcome {
        let mut o = Outcome::default();
        for stmt in parse_script(src) {
            o.run += 1;
            let started = Instant::now();
            let res = stmt.and_then(|s| {
                if s.command == Command::Exit {
                    o.exit = true;
                }
                self.execute(&s.command)
            });
            let took = started.elapsed();
            let mut stdout = std::io::stdout().lock();
            let written = match (&res, self.format) {
                (Ok(out), Format::Text) => stdout.write_all(out.text(took).as_bytes()),
                (Ok(out), Format::Json) => writeln!(stdout, "{}", out.json()),
                (Err(e), Format::Text) => {
                    let _ = stdout.flush();
                    eprintln!("ERROR: {e}");
                    Ok(())
                }
                (Err(e), Format::Json) => writeln!(stdout, "{}", error_json(e)),
            };
            if res.is_err() {
                o.failed += 1;
            }
            if written.and_then(|()| stdout.flush()).is_err() {
                // Nobody reads our output any more (a closed pipe): stop quietly.
                o.exit = true;
            }
            if o.exit {
                break;
            }
        }
        o
    }

    fn save_disabled(&self) -> R<()> {
        let mut s = String::new();
        for t in &self.disabled {
            s.push_str(t);
            s.push('\n');
        }
        let res = if self.disabled.is_empty() {
            match std::fs::remove_file(&self.disabled_path) {
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
                other => other,
            }
        } else {
            std::fs::write(&self.disabled_path, s)
        };
        res.map_err(|e| ShellError::new(kind::IO, format!("{}: {e}", self.disabled_path.display())))
    }

    fn is_disabled(&self, table: &str) -> R<bool> {
        Ok(self.disabled.contains(&canonical(table)?))
    }

    /// A handle on an enabled table.
    fn data_table(&self, table: &str) -> R<cellar::Table> {
        let t = self.db.table(table)?;
        if self.is_disabled(table)? {
            return Err(ShellError::new(
                kind::TABLE_NOT_ENABLED,
                format!("table {table} is disabled"),
            ));
        }
        Ok(t)
    }

    /// Run one command.
    pub fn execute(&mut self, cmd: &Command) -> R<Output> {
        let db = &self.db;
        Ok(match cmd {
            Command::CreateNamespace { name } => {
                if db.list_namespaces().iter().any(|n| n == name) {
                    return Err(ShellError::new(
                        kind::NAMESPACE_EXISTS,
                        format!("namespace {name} exists"),
                    ));
                }
                db.create_namespace(name)?;
                Output::Done
            }
            Command::DropNamespace { name } => {
                db.drop_namespace(name)?;
                Output::Done
            }
            Command::ListNamespace { pattern } => Output::Names {
                header: "NAMESPACE",
                field: "namespaces",
                names: filtered(db.list_namespaces(), pattern.as_deref()),
                echo: false,
            },
            Command::ListNamespaceTables { namespace } => {
                if !db.list_namespaces().iter().any(|n| n == namespace) {
                    return Err(cellar::Error::NamespaceNotFound(namespace.clone()).into());
                }
                let names = db
                    .list_tables()
                    .into_iter()
                    .filter(|t| t.namespace == *namespace)
                    .map(|t| t.table)
                    .collect();
                Output::Names {
                    header: "TABLE",
                    field: "tables",
                    names,
                    echo: true,
                }
            }
            Command::Create { desc } => {
                db.create_table(desc.clone())?;
                let name = desc.name.to_string();
                // A table of this name dropped outside the shell may have left its mark.
                if self.disabled.remove(&name) {
                    self.save_disabled()?;
                }
                Output::Message(format!("Created table {name}"))
            }
            Command::Alter { table, ops } => {
                let mut desc = db.describe(table)?;
                for op in ops {
                    match op {
                        AlterOp::Family(p) => {
                            match desc.families.iter_mut().find(|f| f.name == p.name) {
                                Some(f) => *f = p.apply(f.clone()),
                                None => desc
                                    .families
                                    .push(p.apply(FamilyDescriptor::new(p.name.clone()))),
                            }
                        }
                        AlterOp::Delete(name) => {
                            let before = desc.families.len();
                            desc.families.retain(|f| f.name != *name);
                            if desc.families.len() == before {
                                return Err(cellar::Error::FamilyNotFound {
                                    table: table.clone(),
                                    family: name.clone(),
                                }
                                .into());
                            }
                        }
                    }
                }
                db.alter_table(desc)?;
                Output::Done
            }
            Command::Describe { table } => {
                let desc = db.describe(table)?;
                Output::Describe {
                    table: desc.name.to_string(),
                    enabled: !self.is_disabled(table)?,
                    families: desc.families,
                }
            }
            Command::List { pattern } => Output::Names {
                header: "TABLE",
                field: "tables",
                names: filtered(
                    db.list_tables().iter().map(|t| t.to_string()).collect(),
                    pattern.as_deref(),
                ),
                echo: true,
            },
            Command::Exists { table } => {
                let value = db.table_exists(table)?;
                let not = if value { "" } else { "not " };
                Output::Flag {
                    field: "exists",
                    value,
                    text: format!("Table {table} does {not}exist"),
                }
            }
            Command::IsEnabled { table } | Command::IsDisabled { table } => {
                db.describe(table)?;
                let disabled = self.is_disabled(table)?;
                let (field, value) = match cmd {
                    Command::IsEnabled { .. } => ("enabled", !disabled),
                    _ => ("disabled", disabled),
                };
                Output::Flag {
                    field,
                    value,
                    text: value.to_string(),
                }
            }
            Command::Disable { table } => {
                db.describe(table)?;
                if !self.disabled.insert(canonical(table)?) {
                    return Err(ShellError::new(
                        kind::TABLE_NOT_ENABLED,
                        format!("table {table} is already disabled"),
                    ));
                }
                self.save_disabled()?;
                Output::Done
            }
            Command::Enable { table } => {
                db.describe(table)?;
                if !self.disabled.remove(&canonical(table)?) {
                    return Err(ShellError::new(
                        kind::TABLE_NOT_DISABLED,
                        format!("table {table} is already enabled"),
                    ));
                }
                self.save_disabled()?;
                Output::Done
            }
            Command::Drop { table } => {
                db.describe(table)?;
                if !self.is_disabled(table)? {
                    return Err(ShellError::new(
                        kind::TABLE_NOT_DISABLED,
                        format!("table {table} is enabled; disable it first"),
                    ));
                }
                db.drop_table(table)?;
                self.disabled.remove(&canonical(table)?);
                self.save_disabled()?;
                Output::Done
            }
            Command::Truncate { table } => {
                // Not atomic: the engine has no truncate, so this is HBase's own recipe
                // (drop, then create with the same descriptor). A crash in between leaves the
                // table absent, never half-filled.
                let desc = db.describe(table)?;
                db.drop_table(table)?;
                db.create_table(desc)?;
                if self.disabled.remove(&canonical(table)?) {
                    self.save_disabled()?;
                }
                Output::Message(format!("Truncating '{table}' table (it may take a while):"))
            }
            Command::CloneTableSchema { src, dst } => {
                let mut desc = db.describe(src)?;
                desc.name = TableName::parse(dst)?;
                let name = desc.name.to_string();
                db.create_table(desc)?;
                // As `create`: a table of this name dropped outside the shell may have left
                // its mark.
                if self.disabled.remove(&name) {
                    self.save_disabled()?;
                }
                Output::Message(format!("Created table {name} with the families of {src}"))
            }
            Command::Put {
                table,
                row,
                family,
                qualifier,
                value,
                ts,
                ttl_ms,
            } => {
                let t = self.data_table(table)?;
                let mut p = Put::new(row.clone());
                if let Some(ms) = ttl_ms {
                    p = p.ttl(std::time::Duration::from_millis(*ms));
                }
                let p = match ts {
                    Some(ts) => p.add_at(family, qualifier.clone(), *ts, value.clone()),
                    None => p.add(family, qualifier.clone(), value.clone()),
                };
                t.put(p)?;
                Output::Done
            }
            Command::Get { table, get, show } => {
                let t = self.data_table(table)?;
                let cells = t.get(get)?.map(|r| r.cells).unwrap_or_default();
                Output::Cells {
                    get: true,
                    rows: usize::from(!cells.is_empty()),
                    cells: show.cells(&cells)?,
                    max_length: show.max_length,
                }
            }
            Command::Explain { table, get, show } => {
                let t = self.data_table(table)?;
                Output::Explain(Box::new(explained(&t.explain(get)?, show)?))
            }
            Command::Scan { table, scan, show } => {
                let t = self.data_table(table)?;
                let mut cells = Vec::new();
                let mut rows = 0;
                let mut last: Option<Vec<u8>> = None;
                for row in t.scan((**scan).clone())? {
                    let row = row?;
                    // A row split by BATCH arrives as chunks with the same key: one row.
                    if last.as_deref() != Some(row.key.as_slice()) {
                        rows += 1;
                        last = Some(row.key.clone());
                    }
                    cells.extend(show.cells(&row.cells)?);
                }
                Output::Cells {
                    get: false,
                    rows,
                    cells,
                    max_length: show.max_length,
                }
            }
            Command::Delete {
                table,
                row,
                column,
                ts,
                kind,
            } => {
                let t = self.data_table(table)?;
                let at = ts.unwrap_or(LATEST_TIMESTAMP);
                let d = Delete::new(row.clone());
                let q = column.qualifier.clone().unwrap_or_default();
                let f = column.family.as_str();
                let d = match kind {
                    DeleteKind::Column => d.columns_at(f, q, at),
                    DeleteKind::Family => d.family_at(f, at),
                    DeleteKind::Version => d.column_at(f, q, at),
                    DeleteKind::FamilyVersion => d.family_version(f, at),
                };
                t.delete(d)?;
                Output::Done
            }
            Command::DeleteAll {
                table,
                rows,
                column,
                ts,
            } => {
                let t = self.data_table(table)?;
                let families: Vec<String> = db
                    .describe(table)?
                    .families
                    .into_iter()
                    .map(|f| f.name)
                    .collect();
                let keys = match rows {
                    RowSel::Row(r) => vec![r.clone()],
                    RowSel::Prefix(p) => {
                        let scan = Scan::new()
                            .prefix(p.clone())
                            .filter(Filter::And(vec![Filter::FirstKeyOnly, Filter::KeyOnly]));
                        t.scan(scan)?
                            .map(|r| r.map(|r| r.key))
                            .collect::<Result<Vec<_>, _>>()?
                    }
                };
                for key in keys {
                    t.delete(delete_all(key, column.as_ref(), *ts, &families))?;
                }
                Output::Done
            }
            Command::DeleteRows {
                table,
                start,
                stop,
                families,
                ts,
            } => {
                let t = self.data_table(table)?;
                let mut d = cellar::DeleteRows::new(start.clone(), stop.clone());
                if let Some(ts) = ts {
                    d = d.timestamp(*ts);
                }
                for f in families.iter().flatten() {
                    d = d.family(f);
                }
                t.delete_rows_with(d)?;
                Output::Done
            }
            // Listed for a disabled table too, as describe is: it reads the schema, not data.
            Command::ListRangeDeletes { table } => Output::RangeDeletes(db.range_deletes(table)?),
            // Metadata, as list_range_deletes: answered for a disabled table too.
            Command::ApproxSize { table, start, stop } => {
                let t = db.table(table)?;
                Output::ApproxSize {
                    estimate: t.estimate_range(start, stop)?,
                    split_point: t.split_point()?,
                }
            }
            Command::Incr {
                table,
                row,
                family,
                qualifier,
                amount,
            } => {
                let t = self.data_table(table)?;
                let r = t.increment(Increment::new(row.clone()).add(
                    family,
                    qualifier.clone(),
                    *amount,
                ))?;
                Output::Counter(Some(counter(r.value(family, qualifier))?.unwrap_or(0)))
            }
            Command::GetCounter {
                table,
                row,
                family,
                qualifier,
            } => {
                let t = self.data_table(table)?;
                let r = t.get(&Get::new(row.clone()).column(family.clone(), qualifier.clone()))?;
                Output::Counter(counter(
                    r.as_ref().and_then(|r| r.value(family, qualifier)),
                )?)
            }
            Command::Append {
                table,
                row,
                family,
                qualifier,
                value,
            } => {
                let t = self.data_table(table)?;
                let r = t.append(Append::new(row.clone()).add(
                    family,
                    qualifier.clone(),
                    value.clone(),
                ))?;
                Output::Appended(r.value(family, qualifier).unwrap_or_default().to_vec())
            }
            Command::Count {
                table,
                interval,
                filter,
            } => {
                let t = self.data_table(table)?;
                // HBase's count reads one cell per row, keys only.
                let mut parts: Vec<Filter> = filter.iter().cloned().collect();
                parts.extend([Filter::FirstKeyOnly, Filter::KeyOnly]);
                let mut n = 0u64;
                let mut last: Option<Vec<u8>> = None;
                for row in t.scan(Scan::new().filter(Filter::And(parts)))? {
                    let row = row?;
                    if last.as_deref() == Some(row.key.as_slice()) {
                        continue;
                    }
                    n += 1;
                    if n % interval == 0 && self.format == Format::Text {
                        let mut out = std::io::stdout().lock();
                        // Progress only; a closed stdout is noticed when the result is written.
                        let _ = writeln!(
                            out,
                            "Current count: {n}, row: {}",
                            crate::text::bin(&row.key)
                        );
                        let _ = out.flush();
                    }
                    last = Some(row.key);
                }
                Output::Count(n)
            }
            Command::Flush { table } => {
                if let Some(t) = table {
                    db.describe(t)?;
                }
                // The engine flushes all memstores together (one WAL): a table's flush is the
                // database's.
                db.flush()?;
                Output::Done
            }
            Command::Compact { table, family } => {
                check_family(db, table, family.as_deref())?;
                // The engine picks and runs compactions itself: a "minor compaction request"
                // is running what is due now.
                db.wait_for_compactions()?;
                Output::Done
            }
            Command::MajorCompact { table, family } => {
                db.major_compact(table, family.as_deref())?;
                Output::Done
            }
            Command::Status => {
                let stats = db.stats();
                Output::Status {
                    report: cellar::Db::stats_report(db),
                    stats: stats_json(&stats),
                }
            }
            Command::Help { command } => Output::Help(help(command.as_deref())?),
            Command::DescribeNamespace { name } => {
                if !db.list_namespaces().iter().any(|n| n == name) {
                    return Err(cellar::Error::NamespaceNotFound(name.clone()).into());
                }
                Output::Info {
                    field: "namespace",
                    value: name.clone(),
                    text: format!("DESCRIPTION\n{{NAME => '{name}'}}"),
                }
            }
            Command::Version => Output::Info {
                field: "version",
                value: env!("CARGO_PKG_VERSION").to_owned(),
                text: format!("cellar {}", env!("CARGO_PKG_VERSION")),
            },
            Command::Snapshot {
                table,
                name,
                skip_flush,
            } => {
                let opts = cellar::TableSnapshotOptions::default().skip_flush(*skip_flush);
                let info = db.snapshot_table_with(table, name, opts)?;
                Output::Message(format!(
                    "Snapshot {name} of {table}: {} file(s), {} bytes",
                    info.files, info.bytes
                ))
            }
            Command::CloneSnapshot { name, table } => {
                db.clone_table_snapshot(name, table)?;
                // As `create`: a table of this name dropped outside the shell may have left
                // its mark.
                if self.disabled.remove(&canonical(table)?) {
                    self.save_disabled()?;
                }
                Output::Done
            }
            Command::RestoreSnapshot { name } => {
                // HBase's rule: the table must be disabled (or gone); it stays disabled.
                let info = db.table_snapshot_info(name)?;
                let table = info.table.name.to_string();
                if db.table_exists(&table)? && !self.is_disabled(&table)? {
                    return Err(ShellError::new(
                        kind::TABLE_NOT_DISABLED,
                        format!("table {table} is enabled; disable it before restore_snapshot"),
                    ));
                }
                db.restore_table_snapshot(name)?;
                Output::Done
            }
            Command::ListSnapshots {
                table_pattern,
                pattern,
            } => Output::Snapshots(
                snapshots_matching(db, table_pattern.as_deref(), pattern.as_deref())?
                    .iter()
                    .map(Into::into)
                    .collect(),
            ),
            Command::ListFeedSlots => Output::FeedSlots(db.feed_slots()?),
            Command::CreateFeedSlot { name, since } => {
                let since = since.unwrap_or_else(|| db.stats().read_point);
                db.create_feed_slot(name, since)?;
                Output::Done
            }
            Command::DropFeedSlot { name } => {
                db.drop_feed_slot(name)?;
                Output::Done
            }
            Command::DeleteSnapshot { name } => {
                db.delete_table_snapshot(name)?;
                Output::Done
            }
            Command::DeleteSnapshots {
                table_pattern,
                pattern,
            } => {
                let mut deleted = Vec::new();
                for s in snapshots_matching(db, table_pattern.as_deref(), pattern.as_deref())? {
                    db.delete_table_snapshot(&s.name)?;
                    deleted.push(s.name);
                }
                Output::Message(format!(
                    "Deleted {} snapshot(s){}{}",
                    deleted.len(),
                    if deleted.is_empty() { "" } else { ": " },
                    deleted.join(", ")
                ))
            }
            Command::ShowFilters => Output::Names {
                header: "FILTER",
                field: "filters",
                names: super::filter::FILTERS
                    .iter()
                    .map(|f| f.to_string())
                    .collect(),
                echo: false,
            },
            Command::Exit => Output::Exit,
        })
    }
}

fn check_family(db: &Db, table: &str, family: Option<&str>) -> R<()> {
    let desc = db.describe(table)?;
    if let Some(f) = family {
        if desc.get_family(f).is_none() {
            return Err(cellar::Error::FamilyNotFound {
                table: table.to_owned(),
                family: f.to_owned(),
            }
            .into());
        }
    }
    Ok(())
}

/// `deleteall` of one row: the column or family named, else one DeleteFamily per family.
fn delete_all(
    row: Vec<u8>,
    column: Option<&ColumnSpec>,
    ts: Option<u64>,
    families: &[String],
) -> Delete {
    let at = ts.unwrap_or(LATEST_TIMESTAMP);
    let d = Delete::new(row);
    match column {
        Some(ColumnSpec {
            family,
            qualifier: Some(q),
            ..
        }) => d.columns_at(family, q.clone(), at),
        Some(ColumnSpec {
            family,
            qualifier: None,
            ..
        }) => d.family_at(family, at),
        None => families.iter().fold(d, |d, f| d.family_at(f, at)),
    }
}

/// A counter's value: 8 bytes, big-endian, signed (HBase's `Bytes.toLong`).
fn counter(v: Option<&[u8]>) -> R<Option<i64>> {
    match v {
        None => Ok(None),
        Some(b) => <[u8; 8]>::try_from(b)
            .map(|a| Some(i64::from_be_bytes(a)))
            .map_err(|_| {
                ShellError::new(
                    kind::BAD_VALUE,
                    format!("the value is {} bytes long; a counter is 8", b.len()),
                )
            }),
    }
}

fn stats_json(s: &cellar::Stats) -> serde_json::Value {
    let levels: Vec<serde_json::Value> = s
        .compaction
        .levels
        .iter()
        .enumerate()
        .map(|(i, l)| {
            serde_json::json!({
                "level": i,
                "files": l.files,
                "bytes": l.bytes,
                "compactions": l.compactions,
                "bytes_written": l.bytes_written,
            })
        })
        .collect();
    serde_json::json!({
        "writes": s.writes,
        "user_bytes_written": s.user_bytes_written,
        "flushes": s.flushes,
        "flushed_bytes": s.flushed_bytes,
        "live_files": s.live_files,
        "range_deletes": s.range_deletes,
        "memstore_active_bytes": s.memstore_active_bytes,
        "memstore_frozen_bytes": s.memstore_frozen_bytes,
        "read_point": s.read_point,
        "gets": s.gets,
        "gets_found": s.gets_found,
        "scans": s.scans,
        "scan_rows": s.scan_rows,
        "skipped_cells": s
            .skipped_cells
            .by_cause()
            .iter()
            .map(|&(cause, n)| (cause.to_owned(), serde_json::Value::from(n)))
            .collect::<serde_json::Map<_, _>>(),
        "stalls": s.stalls,
        "stall_micros": s.stall_micros,
        "write_amplification": s.write_amplification(),
        "space_amplification": s.space_amplification(),
        "compactions_running": s.compaction.running,
        "compaction_pending_bytes": s.compaction.pending_bytes,
        "compaction_files_dropped": s.compaction.files_dropped,
        "compaction_bytes_dropped": s.compaction.bytes_dropped,
        "compaction_range_deletes_gone": s.compaction.range_deletes_gone,
        "levels": levels,
        "wal": {
            "device": s.wal.backend.to_string(),
            "segment": s.wal.current_segment,
            "records": s.wal.records,
            "groups": s.wal.groups,
            "mapped_groups": s.wal.mapped_groups,
            "max_group": s.wal.max_group,
            "bytes": s.wal.bytes,
            "syncs": s.wal.syncs,
            "direct_groups": s.wal.direct_groups,
            "kept_segments": s.wal.kept_segments,
            "kept_bytes": s.wal.kept_bytes,
            "feeds": s.wal.feeds,
        },
        "feed_slots": s.feed_slots.iter().map(super::output::feed_slot_json).collect::<Vec<_>>(),
        "prefault": {
            "active": s.prefault.active,
            "requests": s.prefault.requests,
            "populated_bytes": s.prefault.populated_bytes,
            "dropped": s.prefault.dropped,
            "failures": s.prefault.failures,
        },
    })
}

fn help(command: Option<&str>) -> R<String> {
    let mut out = String::new();
    match command {
        Some(c) => {
            let c = if c == "desc" { "describe" } else { c };
            let Some((_, usage, what)) = COMMANDS.iter().find(|x| x.0 == c) else {
                return Err(ShellError::new(
                    kind::PARSE,
                    format!("unknown command '{c}'"),
                ));
            };
            out.push_str(&format!("{what}.\n  {usage}\n"));
        }
        None => {
            out.push_str(
                "Commands (HBase shell syntax; separate commands with newlines or ';'):\n",
            );
            for (name, _, what) in COMMANDS {
                out.push_str(&format!("  {name:<22} {what}\n"));
            }
            out.push_str("Enter help 'command' for its arguments.\n");
        }
    }
    Ok(out)
}

/// Names matching `pattern` (all when `None`), sorted.
/// The table snapshots whose table and name match the patterns (HBase's regular expressions,
/// as `list` takes them), by name.
fn snapshots_matching(
    db: &cellar::Db,
    table_pattern: Option<&str>,
    pattern: Option<&str>,
) -> R<Vec<cellar::TableSnapshotInfo>> {
    let mut all = db.list_table_snapshots()?;
    all.retain(|s| {
        table_pattern.is_none_or(|p| regex_matches(p, &s.table.name.to_string()))
            && pattern.is_none_or(|p| regex_matches(p, &s.name))
    });
    Ok(all)
}

fn filtered(mut names: Vec<String>, pattern: Option<&str>) -> Vec<String> {
    if let Some(p) = pattern {
        names.retain(|n| regex_matches(p, n));
    }
    names.sort();
    names
}

/// One element of a pattern: what it matches, and whether it repeats (`*`, `+`, `?`).
#[derive(Debug, Clone)]
struct Atom {
    /// `None` is `.`.
    class: Option<(Vec<(char, char)>, bool)>,
    min: usize,
    many: bool,
}

impl Atom {
    fn matches(&self, c: char) -> bool {
        match &self.class {
            None => true,
            Some((ranges, negated)) => ranges.iter().any(|(a, b)| *a <= c && c <= *b) != *negated,
        }
    }
}

/// HBase's `list 'regex'` matches the whole name (Java's `matches`). This supports the part of
/// the syntax used on table names — literals, `.`, `[a-z]` / `[^...]` classes, `\` escapes and
/// the `*`, `+`, `?` repeats — and matches in O(pattern × name), whatever the input.
pub fn regex_matches(pattern: &str, name: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let mut atoms: Vec<Atom> = Vec::new();
    let mut i = 0;
    while i < p.len() {
        let class = match p[i] {
            '.' => None,
            '\\' if i + 1 < p.len() => {
                i += 1;
                Some((vec![(p[i], p[i])], false))
            }
            '[' => {
                let mut j = i + 1;
                let negated = p.get(j) == Some(&'^');
                if negated {
                    j += 1;
                }
                let mut ranges = Vec::new();
                while j < p.len() && (p[j] != ']' || j == i + 1 + usize::from(negated)) {
                    if p.get(j + 1) == Some(&'-') && p.get(j + 2).is_some_and(|c| *c != ']') {
                        ranges.push((p[j], p[j + 2]));
                        j += 3;
                    } else {
                        ranges.push((p[j], p[j]));
                        j += 1;
                    }
                }
                i = j;
                Some((ranges, negated))
            }
            c => Some((vec![(c, c)], false)),
        };
        i += 1;
        let (min, many) = match p.get(i) {
            Some('*') => (0, true),
            Some('+') => (1, true),
            Some('?') => (0, false),
            _ => (1, false),
        };
        if min != 1 || many {
            i += 1;
        }
        atoms.push(Atom { class, min, many });
    }
    let s: Vec<char> = name.chars().collect();
    // ok[a][j]: atoms[a..] match s[j..].
    let mut ok = vec![vec![false; s.len() + 1]; atoms.len() + 1];
    ok[atoms.len()][s.len()] = true;
    for a in (0..atoms.len()).rev() {
        for j in (0..=s.len()).rev() {
            let at = &atoms[a];
            let one = j < s.len() && at.matches(s[j]);
            ok[a][j] = match (at.min, at.many) {
                (1, false) => one && ok[a + 1][j + 1],
                (0, false) => ok[a + 1][j] || (one && ok[a + 1][j + 1]),
                // x* : skip, or take one and stay; x+ : take one, then as x*.
                (0, true) => ok[a + 1][j] || (one && ok[a][j + 1]),
                _ => one && (ok[a][j + 1] || ok[a + 1][j + 1]),
            };
        }
    }
    ok[0][0]
}

/// `explain`'s report with the get's converters applied.
fn explained(e: &cellar::Explanation, show: &Show) -> Result<Explained, ShellError> {
    use cellar::{SourceDecision, SourceKind, Verdict};
    let sources = e
        .sources
        .iter()
        .map(|s| {
            let (source, detail) = match &s.kind {
                SourceKind::ActiveMemstore => ("memstore".to_owned(), String::new()),
                SourceKind::FrozenMemstore { index } => {
                    (format!("frozen memstore {index}"), String::new())
                }
                SourceKind::File {
                    number,
                    level,
                    rows,
                    timestamps,
                    entries,
                    deletes,
                } => (
                    format!("file {number:06}"),
                    format!(
                        "L{level}, rows {}..{}, timestamps {}..{}, {entries} cells, {deletes} markers",
                        bin(&rows.0),
                        bin(&rows.1),
                        timestamps.0,
                        timestamps.1
                    ),
                ),
                _ => ("source".to_owned(), String::new()),
            };
            let (decision, cells) = match s.decision {
                SourceDecision::Read { cells } => ("read", cells),
                SourceDecision::KeyRange => ("skipped: key range", 0),
                SourceDecision::TimeRange => ("skipped: time range", 0),
                SourceDecision::Bloom => ("skipped: bloom filter", 0),
                _ => ("skipped", 0),
            };
            SourceJson {
                family: s.family.clone(),
                source,
                detail,
                decision: decision.to_owned(),
                cells,
            }
        })
        .collect();
    let cells = e
        .cells
        .iter()
        .map(|c| {
            let verdict = match c.verdict {
                Verdict::Include if c.filtered => "removed by the filter",
                Verdict::Include => "returned",
                Verdict::Invisible => "not visible (written after the read point)",
                Verdict::NotSelected => "column not read",
                Verdict::Marker => "marker",
                Verdict::Masked => "masked",
                Verdict::Duplicate => "hidden (a newer write at the same timestamp)",
                Verdict::Expired => "expired (TTL)",
                Verdict::OutOfRange => "outside the time range",
                Verdict::TooManyVersions => "beyond the version limit",
                _ => "not returned",
            };
            Ok(ExplainedJson {
                cell: cell_json(&show.cell(&c.cell)?),
                seq: c.seq,
                source: c.source,
                verdict,
                masked_by: c.masked_by,
            })
        })
        .collect::<Result<_, ShellError>>()?;
    let result = match &e.row {
        Some(r) => show.cells(&r.cells)?.iter().map(cell_json).collect(),
        None => Vec::new(),
    };
    Ok(Explained {
        read_point: e.read_point,
        now_ms: e.now_ms,
        sources,
        cells,
        rows: usize::from(e.row.is_some()),
        result,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn list_patterns_match_whole_names() {
        assert!(regex_matches("web.*", "webtable"));
        assert!(!regex_matches("web", "webtable"));
        assert!(regex_matches("ns:t[0-9]+", "ns:t42"));
        assert!(!regex_matches("ns:t[0-9]+", "ns:t"));
        assert!(regex_matches("a\\.b?c*", "a."));
        assert!(regex_matches("[^x]y", "zy"));
        assert!(!regex_matches(
            &"a*".repeat(50),
            &format!("{}b", "a".repeat(200))
        ));
    }

    #[test]
    fn counters_are_eight_bytes() {
        assert_eq!(counter(Some(&5i64.to_be_bytes())).unwrap(), Some(5));
        assert_eq!(counter(None).unwrap(), None);
        assert_eq!(counter(Some(b"abc")).unwrap_err().kind, kind::BAD_VALUE);
    }
}
