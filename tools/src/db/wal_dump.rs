//! `cellar wal-dump DIR [--values] [--since SEQ]`: every record of every WAL segment (RocksDB's
//! `ldb dump_wal`): segment, offset, seq, size and the batch's mutations, then what the
//! engine's recovery would make of the log.
//!
//! Family ids are named from the manifest when it can be read (the dump works without it).
//! Exit codes: 0 the log replays (a torn tail is normal after a crash and is only reported),
//! 1 recovery would refuse it as corrupt, 2 I/O error.

use std::io::Write;

use cellar::fs::RealFs;
use cellar::inspect::{self, WalEntry};
use serde::Serialize;

use super::{json_line, DbFormat, DirArgs, Names};
use crate::text::{bin, human_size};
use crate::{Result, ToolError, EXIT_CORRUPT, EXIT_OK};

/// Arguments of `cellar wal-dump`.
#[derive(Debug, Clone, clap::Args)]
pub struct WalDumpArgs {
    #[command(flatten)]
    pub common: DirArgs,
    /// Print values (text: toStringBinary; JSON: a `value` field), not only their sizes.
    #[arg(long)]
    pub values: bool,
    /// Only the batches after this seq (what `Db::changes_since(SEQ)` would hand out, from
    /// the segments on disk); seals and links are left out too.
    #[arg(long, value_name = "SEQ")]
    pub since: Option<u64>,
}

#[derive(Debug, Serialize)]
struct MutationJson {
    table: Option<String>,
    family_id: u32,
    /// `family:qualifier` as the shell prints columns (`family#id:` when the family is unknown,
    /// `schema:` for the schema records of family id 0, SPEC.md §16.10).
    column: String,
    row: String,
    timestamp: u64,
    #[serde(rename = "type")]
    cell_type: &'static str,
    value_len: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    value: Option<String>,
}

#[derive(Debug, Serialize)]
struct RecordJson {
    segment: u64,
    /// The segment's record layout: `"v2"` (`.wal2`) or the legacy `"v1"` (`.wal`).
    format: &'static str,
    offset: u64,
    len: u64,
    kind: &'static str,
    seq: u64,
    synced_upto: u64,
    /// Whether recovery replays the segment (it is at or above the manifest's log number).
    live: bool,
    mutations: Vec<MutationJson>,
    /// A LINK's previous segment and the offset where its data ended.
    #[serde(skip_serializing_if = "Option::is_none")]
    link: Option<LinkJson>,
}

#[derive(Debug, Serialize)]
struct LinkJson {
    previous_segment: u64,
    previous_end: u64,
}

#[derive(Debug, Serialize)]
struct DamageJson {
    error: String,
}

#[derive(Debug, Serialize)]
struct TornJson {
    segment: u64,
    offset: u64,
    what: String,
}

/// What the engine's recovery would make of the log.
#[derive(Debug, Serialize)]
struct RecoveryJson {
    /// `ok`, `torn_tail` or `corrupt`.
    status: &'static str,
    from_segment: u64,
    records: u64,
    bytes: u64,
    last_seq: Option<u64>,
    torn_tail: Option<TornJson>,
    error: Option<String>,
}

fn mutation_json(m: &cellar::batch::Mutation, names: &Names, values: bool) -> MutationJson {
    let (table, family) = match names.get(m.family) {
        Some((t, f)) => (Some(t.to_owned()), f.to_owned()),
        None if m.family == cellar::SCHEMA_FAMILY => (None, "schema".to_owned()),
        None => (None, format!("family#{}", m.family)),
    };
    MutationJson {
        table,
        family_id: m.family,
        column: format!("{}:{}", bin(family.as_bytes()), bin(&m.qualifier)),
        row: bin(&m.row),
        timestamp: m.timestamp,
        cell_type: m.cell_type.name(),
        value_len: m.value.len(),
        value: values.then(|| bin(&m.value)),
    }
}

fn record_json(e: &WalEntry, names: &Names, values: bool, log_number: u64) -> RecordJson {
    RecordJson {
        segment: e.segment,
        format: match e.format {
            cellar::wal::WalFormat::V1 => "v1",
            cellar::wal::WalFormat::V2 => "v2",
        },
        offset: e.offset,
        len: e.len,
        kind: e.kind.name(),
        seq: e.seq,
        synced_upto: e.synced_upto,
        live: e.segment >= log_number,
        mutations: e
            .mutations
            .iter()
            .map(|m| mutation_json(m, names, values))
            .collect(),
        link: e.link.map(|(previous_segment, previous_end)| LinkJson {
            previous_segment,
            previous_end,
        }),
    }
}

fn record_text(r: &RecordJson, s: &mut String) {
    if let Some(l) = &r.link {
        s.push_str(&format!(
            "  @{} LINK len {}: follows segment {} whose data ended at {}\n",
            r.offset, r.len, l.previous_segment, l.previous_end
        ));
        return;
    }
    if r.kind == "SEAL" {
        s.push_str(&format!(
            "  @{} SEAL len {} synced_upto {}\n",
            r.offset, r.len, r.synced_upto
        ));
        return;
    }
    let n = r.mutations.len();
    s.push_str(&format!(
        "  @{} seq {} len {} synced_upto {}: {n} mutation{}\n",
        r.offset,
        r.seq,
        r.len,
        r.synced_upto,
        if n == 1 { "" } else { "s" }
    ));
    for m in &r.mutations {
        let table = m.table.as_deref().unwrap_or("?");
        let value = match &m.value {
            Some(v) => format!("value={v}"),
            None => format!("value_len={}", m.value_len),
        };
        s.push_str(&format!(
            "    {} {table} row={} column={} timestamp={} {value}\n",
            m.cell_type, m.row, m.column, m.timestamp
        ));
    }
}

/// Run `cellar wal-dump`; returns the exit code.
pub fn run<W: Write>(args: &WalDumpArgs, mut out: W) -> Result<i32> {
    let dir = &args.common.dir;
    let json = args.common.format == DbFormat::Json;
    if !dir.is_dir() {
        return Err(ToolError::Usage(format!(
            "{}: not a database directory",
            dir.display()
        )));
    }
    // Without a readable manifest the dump still runs: ids stay unnamed and recovery is judged
    // from the first segment.
    let (names, log_number, manifest_error) = match inspect::read_manifest(&RealFs, dir) {
        Ok(st) => (Names::of_state(&st), st.log_number(), None),
        Err(e) => (Names::default(), 0, Some(e.to_string())),
    };
    let w = |out: &mut W, s: &str| out.write_all(s.as_bytes()).map_err(ToolError::Output);
    if json {
        w(
            &mut out,
            &format!(
                "{{\"dir\":{},\"manifest_error\":{},\"log_number\":{log_number},\"records\":[",
                json_line(&dir.display().to_string())?,
                json_line(&manifest_error)?
            ),
        )?;
    } else if let Some(e) = &manifest_error {
        w(&mut out, &format!("warning: manifest unreadable: {e}\n"))?;
    }
    let mut first = true;
    let mut segment = None;
    let mut damage = Vec::new();
    let mut counted = (0u64, 0u64);
    for item in inspect::wal_records(&RealFs, dir)? {
        match item {
            Ok(e) if args.since.is_some_and(|s| e.seq <= s) => {}
            Ok(e) => {
                counted.0 += 1;
                counted.1 += e.mutations.len() as u64;
                let r = record_json(&e, &names, args.values, log_number);
                if json {
                    let sep = if first { "" } else { "," };
                    w(&mut out, &format!("{sep}{}", json_line(&r)?))?;
                } else {
                    let mut s = String::new();
                    if segment != Some(e.segment) {
                        segment = Some(e.segment);
                        let note = if r.live {
                            ""
                        } else {
                            " (below the manifest's log number: flushed, not replayed)"
                        };
                        let name = match e.format {
                            cellar::wal::WalFormat::V1 => cellar::wal::segment_file_name_v1,
                            cellar::wal::WalFormat::V2 => cellar::wal::segment_file_name,
                        };
                        s.push_str(&format!("{}{note}\n", name(e.segment)));
                    }
                    record_text(&r, &mut s);
                    w(&mut out, &s)?;
                }
                first = false;
            }
            Err(e) => {
                if !json {
                    w(&mut out, &format!("  damage: {e}\n"))?;
                }
                damage.push(DamageJson {
                    error: e.to_string(),
                });
            }
        }
    }
    let recovery = match inspect::check_wal(&RealFs, dir, log_number) {
        Ok(s) => RecoveryJson {
            status: if s.torn_tail.is_some() {
                "torn_tail"
            } else {
                "ok"
            },
            from_segment: log_number,
            records: s.records,
            bytes: s.bytes,
            last_seq: s.last_seq,
            torn_tail: s.torn_tail.map(|t| TornJson {
                segment: t.segment,
                offset: t.offset,
                what: t.what,
            }),
            error: None,
        },
        Err(e @ cellar::Error::Corruption { .. }) => RecoveryJson {
            status: "corrupt",
            from_segment: log_number,
            records: 0,
            bytes: 0,
            last_seq: None,
            torn_tail: None,
            error: Some(e.to_string()),
        },
        Err(e) => return Err(e.into()),
    };
    let code = if recovery.status == "corrupt" {
        EXIT_CORRUPT
    } else {
        EXIT_OK
    };
    if json {
        w(
            &mut out,
            &format!(
                "],\"damage\":{},\"recovery\":{},\"exit_code\":{code}}}\n",
                json_line(&damage)?,
                json_line(&recovery)?
            ),
        )?;
    } else {
        let mut s = format!("{} record(s), {} mutation(s)\n", counted.0, counted.1);
        let last = recovery
            .last_seq
            .map_or("none".to_owned(), |q| q.to_string());
        match (&recovery.error, &recovery.torn_tail) {
            (Some(e), _) => s.push_str(&format!(
                "recovery from segment {}: CORRUPT: {e}\n",
                recovery.from_segment
            )),
            (None, Some(t)) => s.push_str(&format!(
                "recovery from segment {}: {} record(s), {}, last seq {last}; torn tail at segment {} offset {} dropped: {}\n",
                recovery.from_segment,
                recovery.records,
                human_size(recovery.bytes),
                t.segment,
                t.offset,
                t.what
            )),
            (None, None) => s.push_str(&format!(
                "recovery from segment {}: OK, {} record(s), {}, last seq {last}\n",
                recovery.from_segment,
                recovery.records,
                human_size(recovery.bytes)
            )),
        }
        w(&mut out, &s)?;
    }
    out.flush().map_err(ToolError::Output)?;
    Ok(code)
}
