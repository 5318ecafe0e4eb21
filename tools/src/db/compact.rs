//! `cellar compact DIR [--table T [--family F]] [--major]`: open the database and compact it —
//! run the picker's due compactions to completion (`wait_for_compactions`), or with `--major`
//! rewrite every family (of `T`, or of every table) into the last level (`major_compact`) —
//! then print the levels before and after.
//!
//! Unlike the other database tools this one opens the database, so it takes the lock (exit 2
//! with `Locked` while another process has it open) and recovers the WAL first.

use std::io::Write;
use std::time::Instant;

use cellar::Db;
use serde::Serialize;

use super::{emit, open_existing, DirArgs};
use crate::text::{human_size, Align, Table};
use crate::{Result, EXIT_OK};

/// Arguments of `cellar compact`.
#[derive(Debug, Clone, clap::Args)]
pub struct CompactArgs {
    #[command(flatten)]
    pub common: DirArgs,
    /// With `--major`: only this table (`ns:table` or `table`). The picker's compactions are
    /// not per table, so without `--major` it has no meaning and is refused.
    #[arg(long, requires = "major")]
    pub table: Option<String>,
    /// Only this family of `--table`.
    #[arg(long, requires = "table")]
    pub family: Option<String>,
    /// Major compaction: rewrite every file into the last level, dropping what the purge rules
    /// allow (delete markers, masked and expired cells, versions beyond VERSIONS).
    #[arg(long)]
    pub major: bool,
}

#[derive(Debug, Serialize, Clone, PartialEq, Eq)]
struct LevelJson {
    level: usize,
    files: u64,
    bytes: u64,
}

/// The `--format json` document.
#[derive(Debug, Serialize)]
struct CompactDoc {
    ok: bool,
    dir: String,
    /// `major` or `wait` (the picker's due compactions).
    mode: &'static str,
    tables: Vec<String>,
    seconds: f64,
    before: Vec<LevelJson>,
    after: Vec<LevelJson>,
    write_amplification: f64,
    space_amplification: f64,
}

fn levels(db: &Db) -> Vec<LevelJson> {
    db.stats()
        .compaction
        .levels
        .iter()
        .enumerate()
        .map(|(level, l)| LevelJson {
            level,
            files: l.files,
            bytes: l.bytes,
        })
        .collect()
}

fn text(doc: &CompactDoc) -> String {
    let mut s = format!(
        "Compacted {} ({}{}) in {:.3} s\n",
        doc.dir,
        doc.mode,
        if doc.tables.is_empty() {
            String::new()
        } else {
            format!(": {}", doc.tables.join(", "))
        },
        doc.seconds
    );
    let mut t = Table::new(
        &[
            "LEVEL",
            "FILES BEFORE",
            "BYTES BEFORE",
            "FILES AFTER",
            "BYTES AFTER",
        ],
        &[
            Align::Left,
            Align::Right,
            Align::Right,
            Align::Right,
            Align::Right,
        ],
    );
    for (b, a) in doc.before.iter().zip(&doc.after) {
        if b.files == 0 && a.files == 0 {
            continue;
        }
        t.row(vec![
            format!("L{}", b.level),
            b.files.to_string(),
            human_size(b.bytes),
            a.files.to_string(),
            human_size(a.bytes),
        ]);
    }
    t.render(2, &mut s);
    s.push_str(&format!(
        "space amplification {:.2}\n",
        doc.space_amplification
    ));
    s
}

/// Run `cellar compact`; returns the exit code.
pub fn run<W: Write>(args: &CompactArgs, mut out: W) -> Result<i32> {
    let dir = &args.common.dir;
    let db = open_existing(dir)?;
    // Files left by recovery's flush count as "before".
    db.flush()?;
    let before = levels(&db);
    let start = Instant::now();
    let major = args.major;
    let tables: Vec<String> = match &args.table {
        Some(t) => vec![t.clone()],
        None if major => db.list_tables().iter().map(|t| t.to_string()).collect(),
        None => Vec::new(),
    };
    if major {
        for t in &tables {
            db.major_compact(t, args.family.as_deref())?;
        }
    }
    db.wait_for_compactions()?;
    let seconds = start.elapsed().as_secs_f64();
    let stats = db.stats();
    let doc = CompactDoc {
        ok: true,
        dir: dir.display().to_string(),
        mode: if major { "major" } else { "wait" },
        tables,
        seconds,
        before,
        after: levels(&db),
        write_amplification: stats.write_amplification(),
        space_amplification: stats.space_amplification(),
    };
    db.close()?;
    emit(&mut out, args.common.format, &doc, text)?;
    Ok(EXIT_OK)
}
