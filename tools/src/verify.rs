//! `hfile-verify`: run the format crate's structural verifier over files or directory trees.
//!
//! One line per problem, `file:offset: region: what`, then one summary line per file. The
//! checks themselves live in `cellar_format::verify`, shared with the test suite and the engine,
//! so this module only finds files, reports and picks the exit code.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

use cellar_format::reader::read_trailer;
use cellar_format::verify::{verify_with_progress, VerifyReport};
use serde::Serialize;

use crate::progress;
use crate::{Result, ToolError, EXIT_CORRUPT, EXIT_OK, EXIT_USAGE};

/// `--format` of the verifier.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Default)]
pub enum VerifyFormat {
    /// Problem lines and summaries.
    #[default]
    Text,
    /// One JSON document.
    Json,
}

/// Arguments of `hfile-verify` / `cellar hfile verify`.
#[derive(Debug, Clone, clap::Args)]
pub struct VerifyArgs {
    /// Files, or directories searched recursively for `*.hfile` files.
    #[arg(required = true, value_name = "FILE|DIR")]
    pub paths: Vec<PathBuf>,
    /// Output shape.
    #[arg(long, value_enum, default_value_t = VerifyFormat::Text)]
    pub format: VerifyFormat,
    /// Stop after the first file that is not clean.
    #[arg(long)]
    pub fail_fast: bool,
    /// Read files through a memory map instead of positional reads: faster on large healthy
    /// local files, but a file truncated or unreadable while mapped kills the process (SIGBUS).
    #[arg(long)]
    pub mmap: bool,
}

#[derive(Debug, Serialize)]
pub(crate) struct ProblemJson {
    pub(crate) offset: u64,
    pub(crate) region: String,
    pub(crate) what: String,
}

#[derive(Debug, Serialize)]
pub(crate) struct StatsJson {
    pub(crate) cells: u64,
    blocks: u64,
    data_blocks: u64,
    index_blocks: u64,
    bloom_chunks: u64,
    bloom_keys_checked: u64,
}

/// The outcome for one file, in the shape `--format json` prints.
#[derive(Debug, Serialize)]
pub(crate) struct FileResult {
    pub(crate) file: String,
    pub(crate) status: &'static str,
    pub(crate) file_len: Option<u64>,
    pub(crate) problems: Vec<ProblemJson>,
    pub(crate) truncated: bool,
    pub(crate) stats: Option<StatsJson>,
    pub(crate) error: Option<String>,
    #[serde(skip)]
    pub(crate) exit_code: i32,
}

/// Expand directories into their `*.hfile` files (recursively, sorted); files stay as given.
pub fn collect_files(paths: &[PathBuf]) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for p in paths {
        let md = std::fs::metadata(p).map_err(|e| ToolError::io(p, e))?;
        if md.is_dir() {
            let mut found = Vec::new();
            walk_dir(p, &mut found)?;
            found.sort();
            if found.is_empty() {
                eprintln!("warning: no *.hfile files under {}", p.display());
            }
            out.extend(found);
        } else {
            out.push(p.clone());
        }
    }
    Ok(out)
}

fn walk_dir(dir: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
    let rd = std::fs::read_dir(dir).map_err(|e| ToolError::io(dir, e))?;
    for entry in rd {
        let entry = entry.map_err(|e| ToolError::io(dir, e))?;
        let path = entry.path();
        let ft = entry.file_type().map_err(|e| ToolError::io(&path, e))?;
        if ft.is_dir() {
            walk_dir(&path, out)?;
        } else if path.extension().is_some_and(|x| x == "hfile") {
            out.push(path);
        }
    }
    Ok(())
}

pub(crate) fn verify_file(path: &Path, mmap: bool) -> FileResult {
    let name = path.display().to_string();
    let failed = |e: String| FileResult {
        file: name.clone(),
        status: "error",
        file_len: None,
        problems: Vec::new(),
        truncated: false,
        stats: None,
        error: Some(e),
        exit_code: EXIT_USAGE,
    };
    let file = match File::open(path) {
        Ok(f) => f,
        Err(e) => return failed(ToolError::io(path, e).to_string()),
    };
    let len = file.metadata().map(|m| m.len()).unwrap_or(0);
    let pb = progress::bar(len, &name, true);
    let outcome = if mmap {
        match crate::mmap::MmapFile::map(&file) {
            Ok(m) => verify_with_progress(&m, &name, &mut |off| pb.set_position(off)),
            Err(e) => return failed(ToolError::io(path, e).to_string()),
        }
    } else {
        verify_with_progress(&file, &name, &mut |off| pb.set_position(off))
    };
    pb.finish_and_clear();
    match outcome {
        Ok(report) => {
            let bloom_meta = read_trailer(&file, &name, report.file_len)
                .ok()
                .and_then(|t| t.bloom_meta);
            from_report(report, bloom_meta.is_some())
        }
        Err(e) => failed(e.to_string()),
    }
}

fn from_report(r: VerifyReport, has_bloom_meta: bool) -> FileResult {
    let s = &r.stats;
    // Every block: data, index, bloom chunks, plus the file-info and bloom meta blocks.
    let blocks = s.data_blocks + s.index_blocks + s.bloom_chunks + 1 + u64::from(has_bloom_meta);
    let clean = r.is_clean();
    FileResult {
        status: if clean { "ok" } else { "corrupt" },
        file_len: Some(r.file_len),
        problems: r
            .problems
            .iter()
            .map(|p| ProblemJson {
                offset: p.offset,
                region: p.region.to_string(),
                what: p.what.clone(),
            })
            .collect(),
        truncated: r.truncated,
        stats: Some(StatsJson {
            cells: s.cells,
            blocks,
            data_blocks: s.data_blocks,
            index_blocks: s.index_blocks,
            bloom_chunks: s.bloom_chunks,
            bloom_keys_checked: s.bloom_keys_checked,
        }),
        error: None,
        exit_code: if clean { EXIT_OK } else { EXIT_CORRUPT },
        file: r.file,
    }
}

pub(crate) fn text_of(r: &FileResult) -> String {
    let mut s = String::new();
    for p in &r.problems {
        s.push_str(&format!(
            "{}:{}: {}: {}\n",
            r.file, p.offset, p.region, p.what
        ));
    }
    let summary = match (&r.error, &r.stats) {
        (Some(e), _) => {
            // Errors of the format crate already name the file; don't say it twice.
            let prefix = format!("{}: ", r.file);
            format!(
                "{}: error: {}",
                r.file,
                e.strip_prefix(&prefix).unwrap_or(e)
            )
        }
        (None, Some(st)) if r.problems.is_empty() => {
            format!("{}: OK ({} cells, {} blocks)", r.file, st.cells, st.blocks)
        }
        _ => {
            let n = r.problems.len();
            let plural = if n == 1 { "" } else { "s" };
            let more = if r.truncated { " (more not shown)" } else { "" };
            format!("{}: {n} problem{plural}{more}", r.file)
        }
    };
    s.push_str(&summary);
    s.push('\n');
    s
}

/// Run the verifier, writing to `out`; returns the exit code.
pub fn run<W: Write>(args: &VerifyArgs, mut out: W) -> Result<i32> {
    let files = collect_files(&args.paths)?;
    let mut code = EXIT_OK;
    let mut results = Vec::new();
    for f in &files {
        let r = verify_file(f, args.mmap);
        code = code.max(r.exit_code);
        if args.format == VerifyFormat::Text {
            out.write_all(text_of(&r).as_bytes())
                .map_err(ToolError::Output)?;
        }
        let stop = args.fail_fast && r.exit_code != EXIT_OK;
        results.push(r);
        if stop {
            break;
        }
    }
    if args.format == VerifyFormat::Json {
        #[derive(Serialize)]
        struct Doc<'a> {
            files: &'a [FileResult],
            exit_code: i32,
        }
        let doc = Doc {
            files: &results,
            exit_code: code,
        };
        let s = serde_json::to_string_pretty(&doc)
            .map_err(|e| ToolError::Output(std::io::Error::other(e)))?;
        writeln!(out, "{s}").map_err(ToolError::Output)?;
    }
    out.flush().map_err(ToolError::Output)?;
    Ok(code)
}
