//! `cellar manifest-dump DIR`: every version edit of the manifest CURRENT names, in order
//! (RocksDB's `ldb manifest_dump`), then whether the edits replay into a valid state.
//!
//! Exit codes: 0 the manifest replays, 1 it is corrupt (damaged record, undecodable or
//! inapplicable edit), 2 CURRENT or the manifest cannot be read.

use std::io::Write;

use cellar::fs::RealFs;
use cellar::inspect::{self, LoggedEdit};
use cellar::manifest::VersionEdit;
use serde::Serialize;

use super::{write_json, DbFormat, DirArgs, FileJson, Names};
use crate::shell::output::family_text;
use crate::text::{bin, human_size};
use crate::{Result, ToolError, EXIT_CORRUPT, EXIT_OK};

/// Arguments of `cellar manifest-dump`.
#[derive(Debug, Clone, clap::Args)]
pub struct ManifestDumpArgs {
    #[command(flatten)]
    pub common: DirArgs,
}

#[derive(Debug, Serialize)]
struct FamilyJson {
    id: u32,
    name: String,
    /// HBase's describe form, `{NAME => 'cf', VERSIONS => '1', ...}`.
    descriptor: String,
}

#[derive(Debug, Serialize)]
struct TableJson {
    id: u32,
    table: String,
    families: Vec<FamilyJson>,
}

#[derive(Debug, Serialize)]
struct DeletedJson {
    family_id: u32,
    level: u32,
    number: u64,
}

#[derive(Debug, Serialize)]
struct FlushedJson {
    family_id: u32,
    seq: u64,
}

#[derive(Debug, Serialize)]
struct RangeDeleteJson {
    family_id: u32,
    start: String,
    /// Empty: to the end of the table.
    stop: String,
    ts: u64,
    seq: u64,
}

/// The change-feed record a schema edit carries (SPEC.md §16.10).
#[derive(Debug, Serialize)]
struct SchemaRecordJson {
    /// Every seq used before the edit: the record in the log is above it.
    after: u64,
    /// Size of the record's payload.
    bytes: usize,
}

#[derive(Debug, Serialize)]
struct RangeDeleteGoneJson {
    family_id: u32,
    seq: u64,
}

/// One edit; absent fields and empty lists are left out.
#[derive(Debug, Serialize)]
struct EditJson {
    index: usize,
    offset: u64,
    snapshot: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    next_file_number: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    last_seq: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    log_number: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    next_table_id: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    next_family_id: Option<u32>,
    /// The WAL record layout the writers use (2: `.wal2` segments).
    #[serde(skip_serializing_if = "Option::is_none")]
    wal_format: Option<u32>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    create_namespaces: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    drop_namespaces: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    put_tables: Vec<TableJson>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    drop_tables: Vec<u32>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    flushed_seq: Vec<FlushedJson>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    deleted_files: Vec<DeletedJson>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    added_files: Vec<FileJson>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    range_deletes: Vec<RangeDeleteJson>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    range_deletes_gone: Vec<RangeDeleteGoneJson>,
    #[serde(skip_serializing_if = "Option::is_none")]
    schema_record: Option<SchemaRecordJson>,
}

#[derive(Debug, Serialize)]
struct TornJson {
    offset: u64,
    what: String,
}

/// The `--format json` document.
#[derive(Debug, Serialize)]
struct ManifestDoc {
    manifest: String,
    number: u64,
    records: u64,
    bytes: u64,
    torn_tail: Option<TornJson>,
    edits: Vec<EditJson>,
    /// Why the edits do not replay into a valid state (null when they do).
    replay_error: Option<String>,
    live_files: Option<usize>,
    tables: Option<usize>,
    exit_code: i32,
}

fn is_snapshot(e: &VersionEdit) -> bool {
    e.next_file_number.is_some()
        && e.last_seq.is_some()
        && e.log_number.is_some()
        && e.next_table_id.is_some()
        && e.next_family_id.is_some()
}

fn edit_json(index: usize, l: &LoggedEdit) -> EditJson {
    let e = &l.edit;
    EditJson {
        index,
        offset: l.offset,
        snapshot: l.offset == 0 && is_snapshot(e),
        next_file_number: e.next_file_number,
        last_seq: e.last_seq,
        log_number: e.log_number,
        next_table_id: e.next_table_id,
        next_family_id: e.next_family_id,
        wal_format: e.wal_format,
        create_namespaces: e.create_namespaces.clone(),
        drop_namespaces: e.drop_namespaces.clone(),
        put_tables: e
            .put_tables
            .iter()
            .map(|t| TableJson {
                id: t.id,
                table: t.descriptor.name.to_string(),
                families: t
                    .descriptor
                    .families
                    .iter()
                    .zip(&t.family_ids)
                    .map(|(f, &id)| FamilyJson {
                        id,
                        name: f.name.clone(),
                        descriptor: family_text(f),
                    })
                    .collect(),
            })
            .collect(),
        drop_tables: e.drop_tables.clone(),
        flushed_seq: e
            .flushed_seq
            .iter()
            .map(|&(family_id, seq)| FlushedJson { family_id, seq })
            .collect(),
        deleted_files: e
            .deleted_files
            .iter()
            .map(|&(family_id, level, number)| DeletedJson {
                family_id,
                level,
                number,
            })
            .collect(),
        added_files: e.added_files.iter().map(FileJson::from).collect(),
        range_deletes: e
            .range_deletes
            .iter()
            .map(|(family, d)| RangeDeleteJson {
                family_id: *family,
                start: bin(&d.start),
                stop: bin(&d.stop),
                ts: d.ts,
                seq: d.seq,
            })
            .collect(),
        range_deletes_gone: e
            .range_deletes_gone
            .iter()
            .map(|&(family_id, seq)| RangeDeleteGoneJson { family_id, seq })
            .collect(),
        schema_record: e.schema_record.as_ref().map(|r| SchemaRecordJson {
            after: r.after,
            bytes: r.payload.len(),
        }),
    }
}

fn edit_text(e: &EditJson, names: &Names, s: &mut String) {
    let kind = if e.snapshot { " (snapshot)" } else { "" };
    s.push_str(&format!("#{} @{}{kind}\n", e.index, e.offset));
    let counters: Vec<String> = [
        ("next_file_number", e.next_file_number),
        ("last_seq", e.last_seq),
        ("log_number", e.log_number),
        ("next_table_id", e.next_table_id.map(u64::from)),
        ("next_family_id", e.next_family_id.map(u64::from)),
        ("wal_format", e.wal_format.map(u64::from)),
    ]
    .iter()
    .filter_map(|(n, v)| v.map(|v| format!("{n} {v}")))
    .collect();
    if !counters.is_empty() {
        s.push_str(&format!("  {}\n", counters.join(", ")));
    }
    for ns in &e.create_namespaces {
        s.push_str(&format!("  create_namespace {ns}\n"));
    }
    for t in &e.put_tables {
        s.push_str(&format!("  put_table {} (id {})\n", t.table, t.id));
        for f in &t.families {
            s.push_str(&format!("    family {} {}\n", f.id, f.descriptor));
        }
    }
    for f in &e.flushed_seq {
        s.push_str(&format!(
            "  flushed_seq {} through {}\n",
            names.label(f.family_id),
            f.seq
        ));
    }
    for d in &e.deleted_files {
        s.push_str(&format!(
            "  delete_file {} {} L{}\n",
            cellar::manifest::hfile_file_name(d.number),
            names.label(d.family_id),
            d.level
        ));
    }
    for f in &e.added_files {
        s.push_str(&format!(
            "  add_file {} {} L{}: {}, {} entries ({} deletes), rows '{}' .. '{}', seq {}..{}, ts {}..{}, created {}{}{}\n",
            f.name,
            names.label(f.family_id),
            f.level,
            human_size(f.size),
            f.entries,
            f.deletes,
            f.smallest_row,
            f.largest_row,
            f.min_seq,
            f.max_seq,
            f.min_ts,
            f.max_ts,
            f.created_ms,
            f.crc32c
                .as_deref()
                .map_or(String::new(), |c| format!(", crc32c {c}")),
            f.range_clean.map_or(String::new(), |s| format!(
                ", range deletes applied through seq {s}"
            ))
        ));
    }
    for d in &e.range_deletes {
        let stop = if d.stop.is_empty() {
            "end".to_owned()
        } else {
            format!("'{}'", d.stop)
        };
        s.push_str(&format!(
            "  range_delete {} seq {}: rows ['{}', {stop}), ts <= {}\n",
            names.label(d.family_id),
            d.seq,
            d.start,
            d.ts
        ));
    }
    for d in &e.range_deletes_gone {
        s.push_str(&format!(
            "  range_delete_gone {} seq {}\n",
            names.label(d.family_id),
            d.seq
        ));
    }
    for id in &e.drop_tables {
        s.push_str(&format!("  drop_table {id}\n"));
    }
    for ns in &e.drop_namespaces {
        s.push_str(&format!("  drop_namespace {ns}\n"));
    }
    if let Some(r) = &e.schema_record {
        s.push_str(&format!(
            "  schema_record of {} bytes, logged after seq {}\n",
            r.bytes, r.after
        ));
    }
}

/// Run `cellar manifest-dump`; returns the exit code.
pub fn run<W: Write>(args: &ManifestDumpArgs, mut out: W) -> Result<i32> {
    let log = inspect::manifest_edits(&RealFs, &args.common.dir)?;
    let mut names = Names::default();
    for e in &log.edits {
        names.learn(&e.edit);
    }
    let (replay_error, live_files, tables) = match inspect::replay_manifest(&log) {
        Ok(st) => (
            None,
            Some(st.current().num_files()),
            Some(st.tables().len()),
        ),
        Err(e) => (Some(e.to_string()), None, None),
    };
    let exit_code = if replay_error.is_some() {
        EXIT_CORRUPT
    } else {
        EXIT_OK
    };
    let doc = ManifestDoc {
        manifest: log.path.display().to_string(),
        number: log.number,
        records: log.summary.records,
        bytes: log.summary.bytes,
        torn_tail: log.summary.torn_tail.as_ref().map(|t| TornJson {
            offset: t.offset,
            what: t.what.clone(),
        }),
        edits: log
            .edits
            .iter()
            .enumerate()
            .map(|(i, e)| edit_json(i + 1, e))
            .collect(),
        replay_error,
        live_files,
        tables,
        exit_code,
    };
    match args.common.format {
        DbFormat::Json => write_json(&mut out, &doc)?,
        DbFormat::Text => {
            let mut s = format!(
                "{}: {} records, {}\n",
                doc.manifest,
                doc.records,
                human_size(doc.bytes)
            );
            for e in &doc.edits {
                edit_text(e, &names, &mut s);
            }
            if let Some(t) = &doc.torn_tail {
                s.push_str(&format!(
                    "torn tail at offset {} (an unacknowledged edit, ignored): {}\n",
                    t.offset, t.what
                ));
            }
            match (&doc.replay_error, doc.live_files, doc.tables) {
                (Some(e), _, _) => s.push_str(&format!("replay: CORRUPT: {e}\n")),
                (None, Some(f), Some(t)) => {
                    s.push_str(&format!("replay: OK ({t} table(s), {f} live file(s))\n"))
                }
                _ => {}
            }
            out.write_all(s.as_bytes()).map_err(ToolError::Output)?;
        }
    }
    out.flush().map_err(ToolError::Output)?;
    Ok(exit_code)
}
