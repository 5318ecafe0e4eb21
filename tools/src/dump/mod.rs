//! `hfile-dump`: print what a file holds, section by section (ECOSYSTEM.md §4.1, §4.5).
//!
//! Flag names follow HBase's HFilePrettyPrinter, row ranges follow RocksDB's `sst_dump`. Every
//! section reads the file through `cellar_format`'s reader, so the dump shows exactly what the
//! engine would see.

mod blocks;
mod bloom;
mod cells;
mod index;
mod meta;
mod stats;

use std::fs::File;
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;

use cellar_format::{HFileReader, ReaderOptions};

use crate::emit::{Emitter, Format};
use crate::text::parse_bytes_arg;
use crate::{Result, ToolError, EXIT_OK};

pub use cells::CellRange;

/// Arguments of `hfile-dump` / `cellar hfile dump`.
#[derive(Debug, Clone, clap::Args)]
pub struct DumpArgs {
    /// Files to dump.
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<PathBuf>,
    /// Trailer, every file-info entry and derived figures (the default).
    #[arg(short = 'm', long)]
    pub meta: bool,
    /// Every level of the block index, from the root.
    #[arg(short = 'i', long)]
    pub index: bool,
    /// The envelope of every block: offset, type, sizes, compression, checksum.
    #[arg(short = 'b', long)]
    pub blocks: bool,
    /// Bloom filter parameters and chunks.
    #[arg(long)]
    pub bloom: bool,
    /// Cells with their values.
    #[arg(short = 'p', long)]
    pub kv: bool,
    /// Cell keys only.
    #[arg(short = 'e', long, conflicts_with = "kv")]
    pub keys: bool,
    /// Only this row (seeks to it); `\xNN` escapes allowed.
    #[arg(short = 'w', long, value_name = "ROW", conflicts_with_all = ["from", "to"])]
    pub row: Option<String>,
    /// First row of a range (inclusive); `\xNN` escapes allowed.
    #[arg(long, value_name = "ROW")]
    pub from: Option<String>,
    /// End row of a range (exclusive); `\xNN` escapes allowed.
    #[arg(long, value_name = "ROW")]
    pub to: Option<String>,
    /// Stop after N cells.
    #[arg(short = 'l', long, value_name = "N")]
    pub limit: Option<u64>,
    /// Size histograms, versions, cell types, compression ratios, the biggest row.
    #[arg(short = 's', long)]
    pub stats: bool,
    /// Output shape.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
}

/// What to print, resolved from the flags.
#[derive(Debug, Clone)]
struct Plan {
    meta: bool,
    index: bool,
    blocks: bool,
    bloom: bool,
    cells: Option<bool>,
    stats: bool,
    range: CellRange,
}

impl Plan {
    fn from_args(a: &DumpArgs) -> Result<Self> {
        let arg = |s: &Option<String>, what: &str| -> Result<Option<Vec<u8>>> {
            s.as_deref()
                .map(parse_bytes_arg)
                .transpose()
                .map_err(|e| ToolError::Usage(format!("--{what}: {e}")))
        };
        let range = CellRange {
            row: arg(&a.row, "row")?,
            from: arg(&a.from, "from")?,
            to: arg(&a.to, "to")?,
            limit: a.limit,
        };
        // A row filter alone means "show me those cells".
        let filtered = range.row.is_some() || range.from.is_some() || range.to.is_some();
        let cells = if a.kv {
            Some(true)
        } else if a.keys {
            Some(false)
        } else if filtered && !a.stats {
            Some(true)
        } else {
            None
        };
        let any = a.meta || a.index || a.blocks || a.bloom || cells.is_some() || a.stats;
        Ok(Plan {
            meta: a.meta || !any,
            index: a.index,
            blocks: a.blocks,
            bloom: a.bloom,
            cells,
            stats: a.stats,
            range,
        })
    }
}

/// An open file and what the sections need of it.
pub(crate) struct Ctx<'a> {
    pub reader: &'a HFileReader<Arc<File>>,
    pub source: &'a Arc<File>,
}

/// Run a dump, writing to `out`; returns the exit code.
pub fn run<W: Write>(args: &DumpArgs, out: W) -> Result<i32> {
    let plan = Plan::from_args(args)?;
    let mut em = Emitter::new(out, args.format);
    let mut code = EXIT_OK;
    for path in &args.files {
        let name = path.display().to_string();
        em.begin_file(&name)?;
        let outcome = dump_file(path, &name, &plan, &mut em);
        match outcome {
            Ok(c) => {
                code = code.max(c);
                em.end_file(None)?;
            }
            Err(e @ ToolError::Output(_)) => return Err(e),
            Err(e) => {
                code = code.max(e.exit_code());
                if em.format() == Format::Text {
                    eprintln!("error: {e}");
                }
                em.end_file(Some(&e))?;
            }
        }
    }
    em.finish(code)?;
    Ok(code)
}

fn dump_file<W: Write>(
    path: &std::path::Path,
    name: &str,
    plan: &Plan,
    em: &mut Emitter<W>,
) -> Result<i32> {
    let file = Arc::new(File::open(path).map_err(|e| ToolError::io(path, e))?);
    if file
        .metadata()
        .map_err(|e| ToolError::io(path, e))?
        .is_dir()
    {
        return Err(ToolError::Usage(format!("{name}: is a directory")));
    }
    let reader = HFileReader::open_with(file.clone(), name, ReaderOptions::default())?;
    let ctx = Ctx {
        reader: &reader,
        source: &file,
    };
    let mut code = EXIT_OK;
    if plan.meta {
        em.section(&meta::Meta::read(&ctx))?;
    }
    if plan.index {
        em.section(&index::IndexDump::read(&ctx)?)?;
    }
    if plan.blocks {
        let b = blocks::BlockList::read(&ctx)?;
        if b.bad_checksums > 0 {
            code = crate::EXIT_CORRUPT;
        }
        em.section(&b)?;
    }
    if plan.bloom {
        em.section(&bloom::BloomDump::read(&ctx))?;
    }
    if let Some(values) = plan.cells {
        cells::dump_cells(&ctx, &plan.range, values, em)?;
    }
    if plan.stats {
        em.section(&stats::Stats::read(&ctx, &plan.range)?)?;
    }
    Ok(code)
}
