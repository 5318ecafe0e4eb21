//! `cellar hfile diff A B`: two HFiles compared cell by cell, in key order (FEATURES.md §3, "diff
//! a.hfile b.hfile at the cell level"): cells only in A (`-`), only in B (`+`), and cells whose
//! key (row, column, timestamp, type, sequence number) is in both with another value or tags
//! (`~`). For checking a rewrite (a compaction's output against its input, a recompressed
//! copy, a file built twice) without trusting either file's metadata: only cells are compared.
//!
//! Exit codes as `diff`: 0 the cells are the same, 1 they differ, 2 usage, I/O or a damaged
//! file (which is reported, not compared).

use std::cmp::Ordering;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use cellar_format::cell::compare_keys;
use cellar_format::{HFileReader, ReaderOptions};
use serde::Serialize;

use crate::db::{emit, DbFormat};
use crate::text::{bin, key_text};
use crate::{Result, ToolError, EXIT_OK};

/// The cells differ (`diff`'s 1).
const EXIT_DIFFER: i32 = 1;

/// Arguments of `cellar hfile diff`.
#[derive(Debug, Clone, clap::Args)]
pub struct DiffArgs {
    /// The first file.
    #[arg(value_name = "A")]
    pub a: PathBuf,
    /// The second file.
    #[arg(value_name = "B")]
    pub b: PathBuf,
    /// Differences listed at most (all are counted).
    #[arg(long, value_name = "N", default_value_t = 100)]
    pub limit: usize,
    /// Output shape.
    #[arg(long, value_enum, default_value_t = DbFormat::Text)]
    pub format: DbFormat,
}

#[derive(Debug, Serialize)]
struct Difference {
    /// `-` only in A, `+` only in B, `~` in both with another value or tags.
    op: &'static str,
    /// `row/family:qualifier/timestamp/Type/seqid=N`.
    key: String,
    /// A's value (absent for `+`).
    #[serde(skip_serializing_if = "Option::is_none")]
    a: Option<String>,
    /// B's value (absent for `-`).
    #[serde(skip_serializing_if = "Option::is_none")]
    b: Option<String>,
}

#[derive(Debug, Default, Serialize)]
struct DiffDoc {
    a: String,
    b: String,
    /// Cells in both, equal.
    same: u64,
    only_a: u64,
    only_b: u64,
    changed: u64,
    /// The first `--limit` differences, in key order.
    differences: Vec<Difference>,
}

fn text(d: &DiffDoc) -> String {
    let mut s = String::new();
    for x in &d.differences {
        match x.op {
            "-" => s.push_str(&format!(
                "- {} value={}\n",
                x.key,
                x.a.as_deref().unwrap_or("")
            )),
            "+" => s.push_str(&format!(
                "+ {} value={}\n",
                x.key,
                x.b.as_deref().unwrap_or("")
            )),
            _ => s.push_str(&format!(
                "~ {} value={} -> {}\n",
                x.key,
                x.a.as_deref().unwrap_or(""),
                x.b.as_deref().unwrap_or("")
            )),
        }
    }
    let listed = d.differences.len() as u64;
    let total = d.only_a + d.only_b + d.changed;
    if listed < total {
        s.push_str(&format!("... {} more difference(s)\n", total - listed));
    }
    s.push_str(&format!(
        "{}: {} same, {} only in {}, {} only in {}, {} changed\n",
        if total == 0 {
            "Same cells"
        } else {
            "Cells differ"
        },
        d.same,
        d.only_a,
        d.a,
        d.only_b,
        d.b,
        d.changed
    ));
    s
}

fn open(path: &Path) -> Result<HFileReader<Arc<std::fs::File>>> {
    let file = Arc::new(std::fs::File::open(path).map_err(|e| ToolError::io(path, e))?);
    Ok(HFileReader::open_with(
        file,
        path.display().to_string(),
        ReaderOptions::default(),
    )?)
}

/// Run `cellar hfile diff`; returns the exit code.
pub fn run<W: Write>(args: &DiffArgs, mut out: W) -> Result<i32> {
    let (ra, rb) = (open(&args.a)?, open(&args.b)?);
    let (mut ia, mut ib) = (ra.iter(), rb.iter());
    ia.seek_to_first()?;
    ib.seek_to_first()?;
    let mut d = DiffDoc {
        a: args.a.display().to_string(),
        b: args.b.display().to_string(),
        ..DiffDoc::default()
    };
    let note = |d: &mut DiffDoc, x: Difference| {
        if d.differences.len() < args.limit {
            d.differences.push(x);
        }
    };
    loop {
        let order = match (ia.current(), ib.current()) {
            (None, None) => break,
            (Some(_), None) => Ordering::Less,
            (None, Some(_)) => Ordering::Greater,
            (Some(a), Some(b)) => compare_keys(a.key, b.key),
        };
        match order {
            Ordering::Less => {
                d.only_a += 1;
                let key = key_text(ia.key());
                let a = Some(bin(ia.value()));
                note(
                    &mut d,
                    Difference {
                        op: "-",
                        key,
                        a,
                        b: None,
                    },
                );
                ia.next()?;
            }
            Ordering::Greater => {
                d.only_b += 1;
                let key = key_text(ib.key());
                let b = Some(bin(ib.value()));
                note(
                    &mut d,
                    Difference {
                        op: "+",
                        key,
                        a: None,
                        b,
                    },
                );
                ib.next()?;
            }
            Ordering::Equal => {
                if ia.value() == ib.value() && ia.tags() == ib.tags() {
                    d.same += 1;
                } else {
                    d.changed += 1;
                    let key = key_text(ia.key());
                    let (a, b) = (Some(bin(ia.value())), Some(bin(ib.value())));
                    note(&mut d, Difference { op: "~", key, a, b });
                }
                ia.next()?;
                ib.next()?;
            }
        }
    }
    let code = if d.only_a + d.only_b + d.changed == 0 {
        EXIT_OK
    } else {
        EXIT_DIFFER
    };
    emit(&mut out, args.format, &d, text)?;
    Ok(code)
}
