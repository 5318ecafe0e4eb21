//! `cellar verify DIR`: the whole database, read-only — the manifest replays; every live HFile
//! exists, has the size the manifest recorded, passes the format verifier (checksums, ordering,
//! bloom, entry count), holds as many cells as the manifest says and, when the manifest
//! recorded one, has the whole-file CRC-32C it recorded; levels ≥ 1 are sorted and
//! non-overlapping; the WAL replays as recovery would read it.
//!
//! One line per problem (`file:offset: what`), one per file, then a summary. Exit codes as
//! `hfile-verify`: 0 clean, 1 corruption found, 2 usage or I/O error (a file that cannot be
//! read). Files on disk the manifest does not name are warnings: the engine deletes them at
//! the next open.

use std::cmp::Ordering;
use std::collections::BTreeSet;
use std::io::Write;
use std::path::Path;

use cellar::format::cell::compare_keys;
use cellar::fs::RealFs;
use cellar::inspect;
use cellar::manifest::{self as man, ManifestState, NUM_LEVELS};
use serde::Serialize;

use super::{emit, DirArgs, Names};
use crate::verify::{text_of, verify_file, FileResult};
use crate::{Result, ToolError, EXIT_CORRUPT, EXIT_OK, EXIT_USAGE};

/// Arguments of `cellar verify`.
#[derive(Debug, Clone, clap::Args)]
pub struct DbVerifyArgs {
    #[command(flatten)]
    pub common: DirArgs,
    /// Stop checking HFiles after the first one that is not clean.
    #[arg(long)]
    pub fail_fast: bool,
}

#[derive(Debug, Serialize)]
struct Problem {
    file: String,
    offset: u64,
    what: String,
}

#[derive(Debug, Serialize)]
struct LiveFile {
    table: Option<String>,
    family: Option<String>,
    family_id: u32,
    level: u32,
    number: u64,
    manifest_size: u64,
    manifest_entries: u64,
    #[serde(flatten)]
    check: FileResult,
}

#[derive(Debug, Serialize)]
struct WalJson {
    status: &'static str,
    from_segment: u64,
    records: u64,
    last_seq: Option<u64>,
    detail: Option<String>,
}

/// One table snapshot (`snapshots/{name}/`).
#[derive(Debug, Serialize)]
struct SnapshotCheck {
    name: String,
    table: Option<String>,
    files: u64,
    /// `ok`, `corrupt` (descriptor or a file), `incomplete` (no descriptor: cut short, a
    /// warning), or `error` (could not be read).
    status: &'static str,
}

/// One feed slot (`FEED_SLOTS`).
#[derive(Debug, Serialize)]
struct SlotCheck {
    name: String,
    acked: u64,
    segment: u64,
    held_bytes: u64,
    /// `ok`, `lost` (it gave its segments up: a warning), or `missing_segment` (not lost,
    /// but the segment it holds is gone: a problem; the next open marks it lost).
    status: &'static str,
}

/// The `--format json` document.
#[derive(Debug, Serialize)]
struct VerifyDoc {
    dir: String,
    manifest: Option<String>,
    /// `ok`, `corrupt` or `error`.
    manifest_status: &'static str,
    files: Vec<LiveFile>,
    /// Manifest and cross-file problems (HFile problems are under `files`).
    problems: Vec<Problem>,
    wal: Option<WalJson>,
    /// Flushed segments kept for change feeds (`WalOptions::retain_bytes`), read from the
    /// oldest through the live log as one chain; absent when none is kept.
    retained_wal: Option<WalJson>,
    snapshots: Vec<SnapshotCheck>,
    feed_slots: Vec<SlotCheck>,
    warnings: Vec<String>,
    exit_code: i32,
}

fn rel(dir: &Path, p: &Path) -> String {
    p.strip_prefix(dir).unwrap_or(p).display().to_string()
}

/// Levels ≥ 1 sorted by smallest key and disjoint. Replay enforces this already; checked again
/// here so a tool built against a lenient engine still reports it.
fn level_problems(dir: &Path, state: &ManifestState, names: &Names, out: &mut Vec<Problem>) {
    let v = state.current();
    for fam in v.families() {
        for level in 1..NUM_LEVELS {
            for w in v.files(fam, level).windows(2) {
                let [a, b] = w else { continue };
                let order = compare_keys(&a.smallest, &b.smallest);
                let overlap = compare_keys(&a.largest, &b.smallest) != Ordering::Less;
                if order == Ordering::Greater || overlap {
                    out.push(Problem {
                        file: rel(dir, &man::hfile_path(dir, fam, b.number)),
                        offset: 0,
                        what: format!(
                            "{} L{level}: files {} and {} are out of order or overlap",
                            names.label(fam),
                            a.number,
                            b.number
                        ),
                    });
                }
            }
        }
    }
}

/// HFiles under `data/` the manifest does not name, and stray manifests.
fn orphans(dir: &Path, state: &ManifestState, current: u64) -> Vec<String> {
    let live: BTreeSet<u64> = state.live_files();
    let mut out = Vec::new();
    if let Ok(rd) = std::fs::read_dir(dir) {
        let mut names: Vec<String> = rd
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        for n in names {
            if man::parse_manifest_file_name(&n).is_some_and(|m| m != current) {
                out.push(format!("{n}: a manifest CURRENT does not name"));
            }
        }
    }
    let data = dir.join(man::DATA_DIR);
    let Ok(fams) = std::fs::read_dir(&data) else {
        return out;
    };
    let mut fams: Vec<_> = fams.filter_map(|e| e.ok()).map(|e| e.path()).collect();
    fams.sort();
    for f in fams {
        let Ok(rd) = std::fs::read_dir(&f) else {
            continue;
        };
        let mut files: Vec<_> = rd.filter_map(|e| e.ok()).map(|e| e.path()).collect();
        files.sort();
        for p in files {
            let name = p.file_name().map(|n| n.to_string_lossy().into_owned());
            if let Some(n) = name.as_deref().and_then(man::parse_hfile_file_name) {
                if !live.contains(&n) {
                    out.push(format!(
                        "{}: not in the manifest (deleted at the next open)",
                        rel(dir, &p)
                    ));
                }
            }
        }
    }
    out
}

fn check_files(
    dir: &Path,
    state: &ManifestState,
    names: &Names,
    fail_fast: bool,
    problems: &mut Vec<Problem>,
) -> Vec<LiveFile> {
    let v = state.current();
    let mut out = Vec::new();
    for fam in v.families() {
        let (table, family) = match names.get(fam) {
            Some((t, f)) => (Some(t.to_owned()), Some(f.to_owned())),
            None => (None, None),
        };
        for level in 0..NUM_LEVELS {
            for meta in v.files(fam, level) {
                let path = man::hfile_path(dir, fam, meta.number);
                let name = rel(dir, &path);
                // Missing or resized files are manifest inconsistencies (corruption of the
                // database), reported as such rather than as the verifier's I/O error.
                match std::fs::metadata(&path) {
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                        problems.push(Problem {
                            file: name.clone(),
                            offset: 0,
                            what: format!(
                                "live in the manifest ({} L{level}) but missing",
                                names.label(fam)
                            ),
                        });
                        continue;
                    }
                    Ok(md) if md.len() != meta.size => problems.push(Problem {
                        file: name.clone(),
                        offset: 0,
                        what: format!("size {} but the manifest recorded {}", md.len(), meta.size),
                    }),
                    _ => {}
                }
                let mut check = verify_file(&path, false);
                check.file = name.clone();
                if let Some(st) = &check.stats {
                    if check.error.is_none() && st.cells != meta.entries {
                        problems.push(Problem {
                            file: name.clone(),
                            offset: 0,
                            what: format!(
                                "{} cells but the manifest recorded {}",
                                st.cells, meta.entries
                            ),
                        });
                    }
                }
                // The whole file against the checksum its writer recorded: damage the format
                // verifier passed (it reads what the index reaches) still shows here.
                if let (Some(want), None) = (meta.crc, &check.error) {
                    match inspect::file_crc32c(&RealFs, &path) {
                        Ok((_, got)) if got != want => problems.push(Problem {
                            file: name.clone(),
                            offset: 0,
                            what: format!("CRC-32C {got:08x} but the manifest recorded {want:08x}"),
                        }),
                        Ok(_) => {}
                        Err(e) => problems.push(Problem {
                            file: name.clone(),
                            offset: 0,
                            what: format!("reading it whole: {e}"),
                        }),
                    }
                }
                let bad = check.exit_code != EXIT_OK;
                out.push(LiveFile {
                    table: table.clone(),
                    family: family.clone(),
                    family_id: fam,
                    level: meta.level,
                    number: meta.number,
                    manifest_size: meta.size,
                    manifest_entries: meta.entries,
                    check,
                });
                if bad && fail_fast {
                    return out;
                }
            }
        }
    }
    out
}

/// Each table snapshot: its descriptor, and every file it holds against the descriptor's size
/// and whole-file CRC-32C (the format verifier where the descriptor has no checksum).
/// Problems go to `problems` (exit 1); a snapshot cut short is a warning.
fn check_snapshots(dir: &Path, doc: &mut VerifyDoc) {
    let all = match inspect::read_table_snapshots(&RealFs, dir) {
        Ok(all) => all,
        Err(e) => {
            doc.problems.push(Problem {
                file: cellar::SNAPSHOTS_DIR.to_owned(),
                offset: 0,
                what: format!("listing table snapshots: {e}"),
            });
            return;
        }
    };
    for (name, read) in all {
        let snap = match read {
            Ok(s) => s,
            Err(cellar::Error::SnapshotNotFound(_)) => {
                doc.warnings.push(format!(
                    "{}/{name}: a table snapshot cut short (no descriptor; the next snapshot operation removes it)",
                    cellar::SNAPSHOTS_DIR
                ));
                doc.snapshots.push(SnapshotCheck {
                    name,
                    table: None,
                    files: 0,
                    status: "incomplete",
                });
                continue;
            }
            Err(e) => {
                let corrupt = matches!(e, cellar::Error::Corruption { .. });
                let (file, offset) = match &e {
                    cellar::Error::Corruption { file, offset, .. } => (rel(dir, file), *offset),
                    _ => (format!("{}/{name}", cellar::SNAPSHOTS_DIR), 0),
                };
                doc.problems.push(Problem {
                    file,
                    offset,
                    what: e.to_string(),
                });
                doc.snapshots.push(SnapshotCheck {
                    name,
                    table: None,
                    files: 0,
                    status: if corrupt { "corrupt" } else { "error" },
                });
                continue;
            }
        };
        let before = doc.problems.len();
        for (path, meta) in &snap.files {
            let file = rel(dir, path);
            let what = match inspect::file_crc32c(&RealFs, path) {
                Err(e) => Some(format!("table snapshot {name}: {e}")),
                Ok((len, _)) if len != meta.size => Some(format!(
                    "table snapshot {name}: size {len} but its descriptor recorded {}",
                    meta.size
                )),
                Ok((_, got)) if meta.crc.is_some_and(|want| want != got) => Some(format!(
                    "table snapshot {name}: CRC-32C {got:08x} but its descriptor recorded {:08x}",
                    meta.crc.unwrap_or_default()
                )),
                Ok(_) if meta.crc.is_some() => None,
                // No checksum recorded: the format verifier reads what the index reaches.
                Ok(_) => {
                    let check = verify_file(path, false);
                    (check.exit_code != EXIT_OK).then(|| {
                        format!(
                            "table snapshot {name}: the format verifier found it {}",
                            check.status
                        )
                    })
                }
            };
            if let Some(what) = what {
                doc.problems.push(Problem {
                    file,
                    offset: 0,
                    what,
                });
            }
        }
        doc.snapshots.push(SnapshotCheck {
            name,
            table: Some(snap.info.table.name.to_string()),
            files: snap.files.len() as u64,
            status: if doc.problems.len() == before {
                "ok"
            } else {
                "corrupt"
            },
        });
    }
}

fn verify_db(dir: &Path, fail_fast: bool) -> Result<VerifyDoc> {
    let mut doc = VerifyDoc {
        dir: dir.display().to_string(),
        manifest: None,
        manifest_status: "ok",
        files: Vec::new(),
        problems: Vec::new(),
        wal: None,
        retained_wal: None,
        snapshots: Vec::new(),
        feed_slots: Vec::new(),
        warnings: Vec::new(),
        exit_code: EXIT_OK,
    };
    if !dir.is_dir() {
        return Err(ToolError::Usage(format!(
            "{}: not a directory",
            dir.display()
        )));
    }
    let replayed = inspect::manifest_edits(&RealFs, dir).and_then(|log| {
        let st = inspect::replay_manifest(&log)?;
        Ok((log, st))
    });
    let (log, state) = match replayed {
        Ok(x) => x,
        Err(e) => {
            let corrupt = matches!(e, cellar::Error::Corruption { .. });
            doc.manifest_status = if corrupt { "corrupt" } else { "error" };
            let (file, offset) = match &e {
                cellar::Error::Corruption { file, offset, .. } => (rel(dir, file), *offset),
                _ => (man::CURRENT.to_owned(), 0),
            };
            doc.problems.push(Problem {
                file,
                offset,
                what: e.to_string(),
            });
            doc.exit_code = if corrupt { EXIT_CORRUPT } else { EXIT_USAGE };
            return Ok(doc);
        }
    };
    doc.manifest = Some(rel(dir, &log.path));
    if let Some(t) = &log.summary.torn_tail {
        doc.warnings.push(format!(
            "{}:{}: torn last edit (never acknowledged; ignored): {}",
            rel(dir, &log.path),
            t.offset,
            t.what
        ));
    }
    let names = Names::of_state(&state);
    level_problems(dir, &state, &names, &mut doc.problems);
    doc.files = check_files(dir, &state, &names, fail_fast, &mut doc.problems);
    doc.wal = Some(match inspect::check_wal(&RealFs, dir, state.log_number()) {
        Ok(s) => WalJson {
            status: if s.torn_tail.is_some() {
                "torn_tail"
            } else {
                "ok"
            },
            from_segment: state.log_number(),
            records: s.records,
            last_seq: s.last_seq,
            detail: s.torn_tail.map(|t| {
                format!(
                    "segment {} offset {}: {} (an unacknowledged write, dropped by recovery)",
                    t.segment, t.offset, t.what
                )
            }),
        },
        Err(e) => {
            let corrupt = matches!(e, cellar::Error::Corruption { .. });
            if let cellar::Error::Corruption { file, offset, .. } = &e {
                doc.problems.push(Problem {
                    file: rel(dir, file),
                    offset: *offset,
                    what: e.to_string(),
                });
            } else {
                doc.exit_code = doc.exit_code.max(EXIT_USAGE);
            }
            WalJson {
                status: if corrupt { "corrupt" } else { "error" },
                from_segment: state.log_number(),
                records: 0,
                last_seq: None,
                detail: Some(e.to_string()),
            }
        }
    });
    // The last schema change's change-feed record, lost after its edit (SPEC.md §16.10):
    // nothing in the log or the manifest reaches past the seqs used before the edit. Not
    // damage: the next open appends it, as it finds it here.
    if let (Some(r), Some(w)) = (state.schema_record(), &doc.wal) {
        let seen = state.last_seq().max(w.last_seq.unwrap_or(0));
        if matches!(w.status, "ok" | "torn_tail") && seen <= r.after {
            doc.warnings.push(format!(
                "the last schema change's change-feed record is not in the log (seqs stop at \
                 {seen}, the change came after {}): a crash between its manifest edit and the \
                 record; the next open appends it",
                r.after
            ));
        }
    }
    doc.retained_wal = check_retained_wal(dir, state.log_number(), &mut doc);
    doc.warnings.extend(orphans(dir, &state, log.number));
    check_snapshots(dir, &mut doc);
    check_feed_slots(dir, &mut doc);
    let files_code = doc.files.iter().map(|f| f.check.exit_code).max();
    let files_code = files_code.unwrap_or(EXIT_OK);
    let problems_code = if doc.problems.is_empty() {
        EXIT_OK
    } else {
        EXIT_CORRUPT
    };
    doc.exit_code = doc.exit_code.max(files_code).max(problems_code);
    Ok(doc)
}

/// The segments below the log number (kept for change feeds): readable, each finished, linked
/// to the next. Read from the oldest one on, the live log included, as a feed would.
fn check_retained_wal(dir: &Path, log_number: u64, doc: &mut VerifyDoc) -> Option<WalJson> {
    let segs = match cellar::wal::list_segments(&RealFs, &inspect::wal_dir(dir)) {
        Ok(s) => s,
        Err(e) => {
            doc.exit_code = doc.exit_code.max(EXIT_USAGE);
            return Some(WalJson {
                status: "error",
                from_segment: 0,
                records: 0,
                last_seq: None,
                detail: Some(e.to_string()),
            });
        }
    };
    let oldest = segs.first().map(|(n, _)| *n).filter(|n| *n < log_number)?;
    Some(match inspect::check_wal(&RealFs, dir, oldest) {
        Ok(s) => WalJson {
            status: "ok",
            from_segment: oldest,
            records: s.records,
            last_seq: s.last_seq,
            detail: Some(format!(
                "{} segment(s) below the log number, kept for change feeds",
                segs.iter().filter(|(n, _)| *n < log_number).count()
            )),
        },
        Err(e) => {
            if let cellar::Error::Corruption { file, offset, .. } = &e {
                doc.problems.push(Problem {
                    file: rel(dir, file),
                    offset: *offset,
                    what: format!("retained WAL (change feeds): {e}"),
                });
            } else {
                doc.exit_code = doc.exit_code.max(EXIT_USAGE);
            }
            WalJson {
                status: if matches!(e, cellar::Error::Corruption { .. }) {
                    "corrupt"
                } else {
                    "error"
                },
                from_segment: oldest,
                records: 0,
                last_seq: None,
                detail: Some(e.to_string()),
            }
        }
    })
}

/// The feed slots' file reads, and every slot not lost still has its segment.
fn check_feed_slots(dir: &Path, doc: &mut VerifyDoc) {
    let wal_dir = inspect::wal_dir(dir);
    let slots = match cellar::read_feed_slots(&RealFs, dir, &wal_dir) {
        Ok(s) => s,
        Err(e) => {
            match &e {
                cellar::Error::Corruption { file, offset, .. } => doc.problems.push(Problem {
                    file: rel(dir, file),
                    offset: *offset,
                    what: e.to_string(),
                }),
                _ => doc.exit_code = doc.exit_code.max(EXIT_USAGE),
            }
            return;
        }
    };
    let present: Vec<u64> = cellar::wal::list_segments(&RealFs, &wal_dir)
        .map(|v| v.into_iter().map(|(n, _)| n).collect())
        .unwrap_or_default();
    for s in slots {
        let status = if s.lost {
            doc.warnings.push(format!(
                "feed slot {} is lost (its consumer must start again from a copy)",
                s.name
            ));
            "lost"
        } else if !present.contains(&s.segment) {
            doc.problems.push(Problem {
                file: cellar::FEED_SLOTS.to_owned(),
                offset: 0,
                what: format!(
                    "feed slot {} holds WAL segment {}, which is missing",
                    s.name, s.segment
                ),
            });
            "missing_segment"
        } else {
            "ok"
        };
        doc.feed_slots.push(SlotCheck {
            name: s.name,
            acked: s.acked,
            segment: s.segment,
            held_bytes: s.held_bytes,
            status,
        });
    }
}

fn text(doc: &VerifyDoc) -> String {
    let mut s = String::new();
    for p in &doc.problems {
        s.push_str(&format!("{}:{}: {}\n", p.file, p.offset, p.what));
    }
    for f in &doc.files {
        s.push_str(&text_of(&f.check));
    }
    if let Some(m) = &doc.manifest {
        s.push_str(&format!(
            "{m}: {} ({} live file(s))\n",
            doc.manifest_status,
            doc.files.len()
        ));
    }
    if let Some(w) = &doc.wal {
        let detail = w
            .detail
            .as_deref()
            .map(|d| format!(": {d}"))
            .unwrap_or_default();
        s.push_str(&format!(
            "WAL from segment {}: {} ({} record(s)){detail}\n",
            w.from_segment, w.status, w.records
        ));
    }
    if let Some(w) = &doc.retained_wal {
        let detail = w.detail.as_deref().unwrap_or_default();
        s.push_str(&format!(
            "retained WAL from segment {}: {} ({} record(s)): {detail}\n",
            w.from_segment, w.status, w.records
        ));
    }
    for snap in &doc.snapshots {
        let table = snap.table.as_deref().unwrap_or("?");
        s.push_str(&format!(
            "table snapshot {} of {table}: {} ({} file(s))\n",
            snap.name, snap.status, snap.files
        ));
    }
    for slot in &doc.feed_slots {
        s.push_str(&format!(
            "feed slot {}: {} (acked seq {}, holds WAL segment {} on, {} bytes)\n",
            slot.name, slot.status, slot.acked, slot.segment, slot.held_bytes
        ));
    }
    for w in &doc.warnings {
        s.push_str(&format!("warning: {w}\n"));
    }
    let bad_files = doc
        .files
        .iter()
        .filter(|f| f.check.exit_code != EXIT_OK)
        .count();
    let verdict = match doc.exit_code {
        EXIT_OK => "OK".to_owned(),
        EXIT_CORRUPT => format!(
            "CORRUPT ({} problem(s), {bad_files} bad file(s))",
            doc.problems.len()
        ),
        _ => "ERROR (a file could not be read)".to_owned(),
    };
    s.push_str(&format!("verify {}: {verdict}\n", doc.dir));
    s
}

/// Run `cellar verify`; returns the exit code.
pub fn run<W: Write>(args: &DbVerifyArgs, mut out: W) -> Result<i32> {
    let doc = verify_db(&args.common.dir, args.fail_fast)?;
    emit(&mut out, args.common.format, &doc, text)?;
    Ok(doc.exit_code)
}
