//! `cellar hfile build`: turn a TSV file of cells into one HFile (HBase's ImportTsv plus
//! HFileOutputFormat in spirit).
//!
//! Input of any size is sorted externally (see [`sort`]); the output is written to a temporary
//! file next to `--out` and renamed into place only once complete, so a failed build leaves
//! nothing behind.

pub mod sort;
pub mod tsv;

use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

use cellar_format::bloom::BloomConfig;
use cellar_format::{BloomType, CellType, CompressionType, HFileWriter, KeyRef, WriterOptions};

use crate::progress;
use crate::text::{bin, human_size, parse_bytes_arg, parse_size, Table};
use crate::{Result, ToolError, EXIT_OK};
use sort::ExternalSorter;

fn parse_compression(s: &str) -> Result<CompressionType, String> {
    CompressionType::from_name(s).ok_or_else(|| format!("unknown compression {s:?} (none, lz4)"))
}

fn parse_bloom(s: &str) -> Result<BloomType, String> {
    BloomType::from_name(s)
        .ok_or_else(|| format!("unknown bloom type {s:?} (none, row, rowcol, rowprefix:N)"))
}

/// Arguments of `cellar hfile build`.
#[derive(Debug, Clone, clap::Args)]
pub struct BuildArgs {
    /// The column family of every cell (`\xNN` escapes allowed).
    #[arg(long)]
    pub family: String,
    /// The file to write.
    #[arg(long, value_name = "FILE")]
    pub out: PathBuf,
    /// Data block compression: none or lz4.
    #[arg(long, default_value = "none", value_parser = parse_compression)]
    pub compression: CompressionType,
    /// Bloom filter: none, row, rowcol or rowprefix:N.
    #[arg(long, default_value = "row", value_parser = parse_bloom)]
    pub bloom: BloomType,
    /// Target data block size (bytes, or with a unit: 64KiB).
    #[arg(long, default_value = "64KiB", value_parser = parse_size)]
    pub block_size: u64,
    /// Bloom filter bits per key.
    #[arg(long, default_value_t = 10.0)]
    pub bits_per_key: f64,
    /// Memory for sorting before runs spill to disk.
    #[arg(long, default_value = "256MiB", value_parser = parse_size)]
    pub sort_memory: u64,
    /// Directory for spilled sort runs (default: the system temp directory).
    #[arg(long, value_name = "DIR")]
    pub tmp_dir: Option<PathBuf>,
    /// Replace --out if it exists.
    #[arg(long)]
    pub force: bool,
    /// Write every cell at sequence number 0, keeping only the last line of cells with equal
    /// coordinates: a file `cellar ingest` can load as it is into rows that hold nothing (no
    /// rewrite, writes not held; SPEC.md §17.12 rule 6). Without it each cell carries its
    /// line number, so a later duplicate wins inside the file, and a load rewrites it.
    #[arg(long)]
    pub seq_zero: bool,
    /// Creation time recorded in file info, for reproducible files (tests).
    #[arg(long, hide = true)]
    pub created_at_ms: Option<u64>,
    /// Target index block size, to force a deep index on small inputs (tests).
    #[arg(long, hide = true, value_parser = parse_size)]
    pub index_block_size: Option<u64>,
    /// Distinct keys per bloom chunk, to force many chunks on small inputs (tests).
    #[arg(long, hide = true)]
    pub bloom_keys_per_chunk: Option<u32>,
    /// The TSV input, or `-` for stdin.
    #[arg(value_name = "INPUT.tsv")]
    pub input: PathBuf,
}

impl BuildArgs {
    fn writer_options(&self, family: Vec<u8>) -> Result<WriterOptions> {
        if !(self.bits_per_key > 0.0 && self.bits_per_key <= 100.0) {
            return Err(ToolError::Usage(format!(
                "--bits-per-key {} is outside (0, 100]",
                self.bits_per_key
            )));
        }
        let mut o = WriterOptions::new(family);
        o.block_size = usize::try_from(self.block_size)
            .map_err(|_| ToolError::Usage("--block-size too large".into()))?;
        if let Some(n) = self.index_block_size {
            o.index_block_size = usize::try_from(n)
                .map_err(|_| ToolError::Usage("--index-block-size too large".into()))?;
        }
        o.compression = self.compression;
        o.bloom = BloomConfig {
            bloom_type: self.bloom,
            bits_per_key_milli: (self.bits_per_key * 1000.0).round() as u32,
            keys_per_chunk: self
                .bloom_keys_per_chunk
                .unwrap_or(BloomConfig::default().keys_per_chunk),
        };
        if let Some(t) = self.created_at_ms {
            o.created_at_ms = t;
        }
        Ok(o)
    }
}

/// Read the input into the sorter; returns (bytes read, cells).
fn read_input(args: &BuildArgs, family: &[u8], sorter: &mut ExternalSorter) -> Result<(u64, u64)> {
    let path = &args.input;
    let name = path.display().to_string();
    let (input, len): (Box<dyn Read>, u64) = if name == "-" {
        (Box::new(std::io::stdin().lock()), 0)
    } else {
        let f = File::open(path).map_err(|e| ToolError::io(path, e))?;
        let len = f.metadata().map(|m| m.len()).unwrap_or(0);
        (Box::new(f), len)
    };
    let pb = progress::bar(len, "reading", true);
    let mut r = BufReader::with_capacity(1 << 16, input);
    let mut line = Vec::new();
    let (mut bytes, mut cells, mut lineno) = (0u64, 0u64, 0u64);
    loop {
        line.clear();
        let n = r
            .read_until(b'\n', &mut line)
            .map_err(|e| ToolError::io(path, e))?;
        if n == 0 {
            break;
        }
        lineno += 1;
        bytes += n as u64;
        if lineno % 4096 == 0 {
            pb.set_position(bytes);
        }
        let text = std::str::from_utf8(&line)
            .map_err(|_| ToolError::Usage(format!("{name}:{lineno}: line is not UTF-8")))?;
        let text = text.strip_suffix('\n').unwrap_or(text);
        match tsv::parse_line(text, lineno, family) {
            Ok(Some(rec)) => {
                sorter.push(rec)?;
                cells += 1;
            }
            Ok(None) => {}
            Err(e) => return Err(ToolError::Usage(format!("{name}:{lineno}: {e}"))),
        }
    }
    pb.finish_and_clear();
    Ok((bytes, cells))
}

/// Where the temporary output goes: next to the target, so the final rename stays on one
/// file system and is atomic.
fn out_dir(out: &Path) -> PathBuf {
    match out.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_owned(),
        _ => PathBuf::from("."),
    }
}

/// Run a build, printing the summary to `out`; returns the exit code.
pub fn run<W: Write>(args: &BuildArgs, mut out: W) -> Result<i32> {
    let start = Instant::now();
    let family =
        parse_bytes_arg(&args.family).map_err(|e| ToolError::Usage(format!("--family: {e}")))?;
    let opts = args.writer_options(family.clone())?;
    if !args.force && args.out.exists() {
        return Err(ToolError::Usage(format!(
            "{} exists (use --force to replace it)",
            args.out.display()
        )));
    }
    let tmp_dir = args.tmp_dir.clone().unwrap_or_else(std::env::temp_dir);
    let budget = usize::try_from(args.sort_memory).unwrap_or(usize::MAX);
    let mut sorter = ExternalSorter::new(budget, tmp_dir);
    let (in_bytes, cells) = read_input(args, &family, &mut sorter)?;
    let runs = sorter.runs_spilled;

    let dir = out_dir(&args.out);
    let tmp = tempfile::Builder::new()
        .prefix(".cellar-build-")
        .suffix(".tmp")
        .tempfile_in(&dir)
        .map_err(|e| ToolError::io(&dir, e))?;
    let file = tmp
        .as_file()
        .try_clone()
        .map_err(|e| ToolError::io(tmp.path(), e))?;
    let name = args.out.display().to_string();
    let mut w = HFileWriter::new(BufWriter::with_capacity(1 << 20, file), &name, opts)?;
    let pb = progress::bar(cells, "writing", false);
    let mut written = 0u64;
    // With --seq-zero: the coordinates (the key but its 8-byte seq, SPEC.md §3.1) of the cell
    // written last. Equal coordinates sort newest line first, so the first one is kept.
    let mut last: Option<Vec<u8>> = None;
    sorter.finish(|k, v| {
        let mut key = KeyRef::parse(k).map_err(|m| ToolError::Usage(m.0))?;
        if args.seq_zero {
            let coords = &k[..k.len() - 8];
            if last.as_deref() == Some(coords) {
                return Ok(());
            }
            last = Some(coords.to_vec());
            key.seq = 0;
        }
        w.append(&key, v)?;
        written += 1;
        if written % 8192 == 0 {
            pb.set_position(written);
        }
        Ok(())
    })?;
    pb.finish_and_clear();
    let (bw, summary) = w.finish()?;
    let file = bw
        .into_inner()
        .map_err(|e| ToolError::io(tmp.path(), e.into_error()))?;
    file.sync_all().map_err(|e| ToolError::io(tmp.path(), e))?;
    let persisted = if args.force {
        tmp.persist(&args.out).map(|_| ())
    } else {
        tmp.persist_noclobber(&args.out).map(|_| ())
    };
    persisted.map_err(|e| ToolError::io(&args.out, e.error))?;

    let secs = start.elapsed().as_secs_f64();
    let fi = &summary.info;
    let types: Vec<String> = CellType::ALL
        .iter()
        .filter(|t| fi.count_of(**t) > 0)
        .map(|t| format!("{} {}", t.name(), fi.count_of(*t)))
        .collect();
    let mut t = Table::pairs();
    t.pair("family", bin(&fi.family));
    t.pair("cells", format!("{} ({})", fi.entries, types.join(", ")));
    t.pair(
        "file size",
        format!(
            "{} ({} bytes)",
            human_size(summary.file_size),
            summary.file_size
        ),
    );
    t.pair(
        "blocks",
        format!(
            "{} data, {} index ({} levels), {} bloom chunks",
            fi.data_blocks, fi.index_blocks, summary.trailer.index_levels, fi.bloom_chunks
        ),
    );
    t.pair(
        "sort",
        if runs == 0 {
            "in memory".to_owned()
        } else {
            format!("{runs} runs spilled to disk")
        },
    );
    let rate = |bytes: u64| bytes as f64 / (1 << 20) as f64 / secs.max(1e-9);
    t.pair(
        "time",
        format!(
            "{secs:.2} s ({:.1} MiB/s of input, {:.1} MiB/s written)",
            rate(in_bytes),
            rate(summary.file_size)
        ),
    );
    let mut s = format!("Built {name}\n");
    t.render(2, &mut s);
    out.write_all(s.as_bytes()).map_err(ToolError::Output)?;
    out.flush().map_err(ToolError::Output)?;
    Ok(EXIT_OK)
}
