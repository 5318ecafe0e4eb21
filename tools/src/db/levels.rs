//! `cellar levels DIR`: the LSM shape per table and family — each level's files with sizes,
//! entry counts, row ranges, sequence and time ranges — from the manifest, read-only.

use std::io::Write;
use std::path::Path;

use cellar::fs::RealFs;
use cellar::inspect;
use cellar::manifest::{ManifestState, NUM_LEVELS};
use serde::Serialize;

use super::{emit, DirArgs, FileJson};
use crate::text::{human_size, Align, Table};
use crate::{Result, EXIT_OK};

/// Arguments of `cellar levels`.
#[derive(Debug, Clone, clap::Args)]
pub struct LevelsArgs {
    #[command(flatten)]
    pub common: DirArgs,
}

#[derive(Debug, Serialize)]
struct LevelJson {
    level: usize,
    num_files: usize,
    bytes: u64,
    entries: u64,
    files: Vec<FileJson>,
}

#[derive(Debug, Serialize)]
struct FamilyJson {
    family: String,
    id: u32,
    flushed_seq: u64,
    num_files: usize,
    bytes: u64,
    entries: u64,
    /// Non-empty levels only.
    levels: Vec<LevelJson>,
}

#[derive(Debug, Serialize)]
struct TableJson {
    table: String,
    id: u32,
    families: Vec<FamilyJson>,
}

/// One table snapshot (`snapshots/{name}/`), and what it keeps on disk.
#[derive(Debug, Serialize)]
struct SnapshotJson {
    name: String,
    table: String,
    created_ms: u64,
    seq: u64,
    num_files: u64,
    bytes: u64,
    /// Bytes of its files the live version no longer lists: disk space only the snapshot
    /// keeps (deleting it frees them).
    exclusive_bytes: u64,
}

/// The `--format json` document (a contract: fields are only ever added).
#[derive(Debug, Serialize)]
struct LevelsDoc {
    dir: String,
    manifest: String,
    last_seq: u64,
    log_number: u64,
    next_file_number: u64,
    num_files: usize,
    bytes: u64,
    tables: Vec<TableJson>,
    /// Table snapshots, by name (a damaged or unfinished one is left out, with a warning).
    snapshots: Vec<SnapshotJson>,
    warnings: Vec<String>,
}

fn document(dir: &Path, manifest: String, state: &ManifestState) -> LevelsDoc {
    let version = state.current();
    let mut tables: Vec<TableJson> = state
        .tables()
        .values()
        .map(|t| TableJson {
            table: t.descriptor.name.to_string(),
            id: t.id,
            families: t
                .descriptor
                .families
                .iter()
                .zip(&t.family_ids)
                .map(|(f, &id)| {
                    let levels: Vec<LevelJson> = (0..NUM_LEVELS)
                        .filter_map(|level| {
                            let files = version.files(id, level);
                            (!files.is_empty()).then(|| LevelJson {
                                level,
                                num_files: files.len(),
                                bytes: files.iter().map(|f| f.size).sum(),
                                entries: files.iter().map(|f| f.entries).sum(),
                                files: files.iter().map(|f| FileJson::from(&**f)).collect(),
                            })
                        })
                        .collect();
                    FamilyJson {
                        family: f.name.clone(),
                        id,
                        flushed_seq: state.flushed_seq(id),
                        num_files: levels.iter().map(|l| l.num_files).sum(),
                        bytes: levels.iter().map(|l| l.bytes).sum(),
                        entries: levels.iter().map(|l| l.entries).sum(),
                        levels,
                    }
                })
                .collect(),
        })
        .collect();
    tables.sort_by(|a, b| a.table.cmp(&b.table));
    LevelsDoc {
        dir: dir.display().to_string(),
        manifest,
        last_seq: state.last_seq(),
        log_number: state.log_number(),
        next_file_number: state.next_file_number(),
        num_files: version.num_files(),
        bytes: version.all_files().map(|f| f.size).sum(),
        tables,
        snapshots: Vec::new(),
        warnings: Vec::new(),
    }
}

/// Each table snapshot of the database in `dir`, with the bytes only it keeps.
fn snapshots(dir: &Path, state: &ManifestState, doc: &mut LevelsDoc) -> Result<()> {
    let live = state.live_files();
    for (name, read) in inspect::read_table_snapshots(&RealFs, dir)? {
        match read {
            Ok(snap) => doc.snapshots.push(SnapshotJson {
                table: snap.info.table.name.to_string(),
                created_ms: snap.info.created_ms,
                seq: snap.info.seq,
                num_files: snap.info.files,
                bytes: snap.info.bytes,
                exclusive_bytes: snap
                    .files
                    .iter()
                    .filter(|(_, f)| !live.contains(&f.number))
                    .map(|(_, f)| f.size)
                    .sum(),
                name,
            }),
            Err(cellar::Error::SnapshotNotFound(_)) => doc.warnings.push(format!(
                "table snapshot {name} was cut short (no descriptor)"
            )),
            Err(e) => doc.warnings.push(format!("table snapshot {name}: {e}")),
        }
    }
    Ok(())
}

fn plural(n: usize, what: &str) -> String {
    if n == 1 {
        format!("1 {what}")
    } else {
        format!("{n} {what}s")
    }
}

fn text(doc: &LevelsDoc) -> String {
    let mut s = format!(
        "Database {} ({}): {}, {}; last seq {}, WAL replay from segment {}\n",
        doc.dir,
        doc.manifest,
        plural(doc.num_files, "file"),
        human_size(doc.bytes),
        doc.last_seq,
        doc.log_number
    );
    if doc.tables.is_empty() {
        s.push_str("\nNo tables.\n");
    }
    for t in &doc.tables {
        s.push_str(&format!("\nTable {} (id {})\n", t.table, t.id));
        for f in &t.families {
            s.push_str(&format!(
                "  Family {} (id {}): {}, {}, {} entries; flushed through seq {}\n",
                f.family,
                f.id,
                plural(f.num_files, "file"),
                human_size(f.bytes),
                f.entries,
                f.flushed_seq
            ));
            for l in &f.levels {
                s.push_str(&format!(
                    "    L{}: {}, {}, {} entries\n",
                    l.level,
                    plural(l.num_files, "file"),
                    human_size(l.bytes),
                    l.entries
                ));
                let mut tab = Table::new(
                    &[
                        "FILE",
                        "SIZE",
                        "ENTRIES",
                        "DELETES",
                        "SEQ",
                        "TIMESTAMPS",
                        "ROWS",
                    ],
                    &[
                        Align::Left,
                        Align::Right,
                        Align::Right,
                        Align::Right,
                        Align::Left,
                        Align::Left,
                        Align::Left,
                    ],
                );
                for file in &l.files {
                    tab.row(vec![
                        file.name.clone(),
                        human_size(file.size),
                        file.entries.to_string(),
                        file.deletes.to_string(),
                        format!("{}..{}", file.min_seq, file.max_seq),
                        format!("{}..{}", file.min_ts, file.max_ts),
                        format!("'{}' .. '{}'", file.smallest_row, file.largest_row),
                    ]);
                }
                tab.render(6, &mut s);
            }
        }
    }
    if !doc.snapshots.is_empty() {
        s.push_str(&format!("\nTable snapshots: {}\n", doc.snapshots.len()));
        let mut tab = Table::new(
            &[
                "SNAPSHOT",
                "TABLE",
                "SEQ",
                "FILES",
                "SIZE",
                "ONLY IN SNAPSHOT",
            ],
            &[
                Align::Left,
                Align::Left,
                Align::Right,
                Align::Right,
                Align::Right,
                Align::Right,
            ],
        );
        for snap in &doc.snapshots {
            tab.row(vec![
                snap.name.clone(),
                snap.table.clone(),
                snap.seq.to_string(),
                snap.num_files.to_string(),
                human_size(snap.bytes),
                human_size(snap.exclusive_bytes),
            ]);
        }
        tab.render(2, &mut s);
    }
    for w in &doc.warnings {
        s.push_str(&format!("warning: {w}\n"));
    }
    s
}

/// Run `cellar levels`; returns the exit code.
pub fn run<W: Write>(args: &LevelsArgs, mut out: W) -> Result<i32> {
    let dir = &args.common.dir;
    let log = inspect::manifest_edits(&RealFs, dir)?;
    let state = inspect::replay_manifest(&log)?;
    let name = log
        .path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut doc = document(dir, name, &state);
    snapshots(dir, &state, &mut doc)?;
    emit(&mut out, args.common.format, &doc, text)?;
    Ok(EXIT_OK)
}
