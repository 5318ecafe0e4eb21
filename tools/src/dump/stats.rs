//! `--stats`: size histograms, versions, cell types, block compression, the biggest row.
//!
//! Histograms use power-of-two buckets so memory stays constant whatever the file size.

use std::collections::BTreeMap;

use cellar_format::block::{read_envelope, BLOCK_TRAILER_LEN};
use cellar_format::display::to_string_binary;
use cellar_format::{BlockHandle, BlockType, Error, ReadAt};
use serde::Serialize;

use super::cells::{for_each_cell, CellRange};
use super::{index, Ctx};
use crate::emit::Section;
use crate::text::{human_size, Align, Table};
use crate::Result;

/// A histogram over power-of-two buckets: bucket `i` holds values of bit length `i`.
#[derive(Debug, Clone)]
pub struct Histogram {
    counts: [u64; 65],
    count: u64,
    sum: u128,
    min: u64,
    max: u64,
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram {
            counts: [0; 65],
            count: 0,
            sum: 0,
            min: u64::MAX,
            max: 0,
        }
    }
}

/// One bucket as printed: values in `[lo, hi)`.
#[derive(Debug, Serialize)]
pub struct Bucket {
    lo: u64,
    hi: u64,
    count: u64,
}

/// The printed form of a [`Histogram`].
#[derive(Debug, Serialize)]
pub struct HistogramView {
    count: u64,
    min: u64,
    max: u64,
    mean: f64,
    buckets: Vec<Bucket>,
}

impl Histogram {
    /// Record a value.
    pub fn add(&mut self, v: u64) {
        let i = (64 - v.leading_zeros()) as usize;
        if let Some(c) = self.counts.get_mut(i) {
            *c += 1;
        }
        self.count += 1;
        self.sum += u128::from(v);
        self.min = self.min.min(v);
        self.max = self.max.max(v);
    }

    /// Summary and non-empty bucket span.
    pub fn view(&self) -> HistogramView {
        let first = self.counts.iter().position(|&c| c > 0);
        let last = self.counts.iter().rposition(|&c| c > 0);
        let buckets = match (first, last) {
            (Some(a), Some(b)) => (a..=b)
                .map(|i| Bucket {
                    lo: if i == 0 { 0 } else { 1u64 << (i - 1) },
                    hi: if i >= 64 { u64::MAX } else { 1u64 << i },
                    count: self.counts.get(i).copied().unwrap_or(0),
                })
                .collect(),
            _ => Vec::new(),
        };
        HistogramView {
            count: self.count,
            min: if self.count == 0 { 0 } else { self.min },
            max: self.max,
            mean: if self.count == 0 {
                0.0
            } else {
                ((self.sum as f64 / self.count as f64) * 10.0).round() / 10.0
            },
            buckets,
        }
    }
}

impl HistogramView {
    fn text(&self, title: &str, out: &mut String) {
        out.push_str(&format!(
            "{title}: count {}, min {}, mean {:.1}, max {}\n",
            self.count, self.min, self.mean, self.max
        ));
        let r = Align::Right;
        let mut t = Table::new(
            &["from", "to", "count", "%", ""],
            &[r, r, r, r, Align::Left],
        );
        for b in &self.buckets {
            let pct = if self.count == 0 {
                0.0
            } else {
                b.count as f64 * 100.0 / self.count as f64
            };
            t.row(vec![
                b.lo.to_string(),
                format!("<{}", b.hi),
                b.count.to_string(),
                format!("{pct:.1}"),
                "#".repeat((pct / 2.5).ceil() as usize),
            ]);
        }
        t.render(4, out);
    }
}

#[derive(Debug, Serialize)]
struct Ratio {
    blocks: u64,
    min: f64,
    avg: f64,
    max: f64,
}

#[derive(Debug, Serialize, Default)]
struct BiggestRow {
    row: String,
    bytes: u64,
    cells: u64,
}

/// The `stats` section.
#[derive(Debug, Serialize)]
pub struct Stats {
    cells: u64,
    rows: u64,
    columns: u64,
    cells_by_type: BTreeMap<String, u64>,
    key_size: HistogramView,
    value_size: HistogramView,
    row_size: HistogramView,
    cells_per_row: HistogramView,
    versions_per_column: HistogramView,
    block_compression_ratio: Ratio,
    biggest_row: Option<BiggestRow>,
}

/// Running totals of the current row and column while scanning.
#[derive(Default)]
struct Acc {
    row: Option<Vec<u8>>,
    row_bytes: u64,
    row_cells: u64,
    column: Option<(Vec<u8>, Vec<u8>)>,
    versions: u64,
}

impl Stats {
    pub(crate) fn read(ctx: &Ctx<'_>, range: &CellRange) -> Result<Self> {
        let mut key_h = Histogram::default();
        let mut value_h = Histogram::default();
        let mut row_size = Histogram::default();
        let mut per_row = Histogram::default();
        let mut versions = Histogram::default();
        let mut by_type: BTreeMap<String, u64> = BTreeMap::new();
        let mut biggest: Option<BiggestRow> = None;
        let mut acc = Acc::default();
        let (mut rows, mut columns) = (0u64, 0u64);
        let mut close_row = |acc: &mut Acc, rs: &mut Histogram, pr: &mut Histogram| {
            if let Some(row) = acc.row.take() {
                rs.add(acc.row_bytes);
                pr.add(acc.row_cells);
                if biggest.as_ref().is_none_or(|b| acc.row_bytes > b.bytes) {
                    biggest = Some(BiggestRow {
                        row: to_string_binary(&row),
                        bytes: acc.row_bytes,
                        cells: acc.row_cells,
                    });
                }
            }
        };
        let cells = for_each_cell(ctx.reader, range, |c| {
            let k = &c.key;
            key_h.add(c.key_len as u64);
            value_h.add(c.value.len() as u64);
            let ty = k
                .cell_type()
                .map_or_else(|| format!("Type{}", k.type_code), |t| t.name().to_owned());
            *by_type.entry(ty).or_default() += 1;
            if acc.row.as_deref() != Some(k.row) {
                close_row(&mut acc, &mut row_size, &mut per_row);
                acc.row = Some(k.row.to_vec());
                acc.row_bytes = 0;
                acc.row_cells = 0;
                rows += 1;
            }
            acc.row_bytes += (c.key_len + c.value.len() + c.tags.len()) as u64;
            acc.row_cells += 1;
            let same_col = acc.column.as_ref().is_some_and(|(f, q)| {
                f.as_slice() == k.family && q.as_slice() == k.qualifier && acc.row_cells > 1
            });
            if same_col {
                acc.versions += 1;
            } else {
                if acc.column.is_some() {
                    versions.add(acc.versions);
                }
                acc.column = Some((k.family.to_vec(), k.qualifier.to_vec()));
                acc.versions = 1;
                columns += 1;
            }
            Ok(())
        })?;
        close_row(&mut acc, &mut row_size, &mut per_row);
        if acc.column.is_some() {
            versions.add(acc.versions);
        }
        Ok(Stats {
            cells,
            rows,
            columns,
            cells_by_type: by_type,
            key_size: key_h.view(),
            value_size: value_h.view(),
            row_size: row_size.view(),
            cells_per_row: per_row.view(),
            versions_per_column: versions.view(),
            block_compression_ratio: block_ratios(ctx)?,
            biggest_row: biggest,
        })
    }
}

/// raw/stored payload ratio of every data block of the file, from the envelopes alone.
fn block_ratios(ctx: &Ctx<'_>) -> Result<Ratio> {
    let idx = index::walk(ctx)?;
    let mut r = Ratio {
        blocks: 0,
        min: f64::MAX,
        avg: 0.0,
        max: 0.0,
    };
    let mut sum = 0.0;
    for h in index::data_blocks(&idx) {
        let raw = envelope_raw_len(ctx, h)?;
        let ratio = raw as f64 / h.stored_len.max(1) as f64;
        r.blocks += 1;
        sum += ratio;
        r.min = r.min.min(ratio);
        r.max = r.max.max(ratio);
    }
    if r.blocks == 0 {
        r.min = 0.0;
    } else {
        r.avg = sum / r.blocks as f64;
    }
    let round = |x: f64| (x * 1000.0).round() / 1000.0;
    (r.min, r.avg, r.max) = (round(r.min), round(r.avg), round(r.max));
    Ok(r)
}

fn envelope_raw_len(ctx: &Ctx<'_>, h: BlockHandle) -> Result<u32> {
    let r = ctx.reader;
    let corrupt = |what: String| Error::Corruption {
        file: r.name().to_owned(),
        offset: h.offset,
        region: BlockType::Data.region(),
        what,
    };
    if h.end() > r.data_end() || h.offset > r.data_end() {
        return Err(corrupt(format!(
            "block handle {}+{} runs past the block region",
            h.offset,
            h.total_len()
        ))
        .into());
    }
    let mut buf = [0u8; BLOCK_TRAILER_LEN];
    ctx.source
        .read_exact_at(&mut buf, h.offset + h.stored_len)
        .map_err(|e| Error::Io {
            file: r.name().to_owned(),
            doing: format!("reading the envelope of block {}", h.offset),
            source: e,
        })?;
    let (_, env) = read_envelope(&buf).map_err(|m| corrupt(m.0))?;
    Ok(env.raw_len)
}

impl Section for Stats {
    fn name(&self) -> &'static str {
        "stats"
    }

    fn text(&self, out: &mut String) {
        out.push_str("Stats:\n");
        let mut t = Table::pairs();
        t.pair("cells", self.cells.to_string());
        t.pair("rows", self.rows.to_string());
        t.pair("columns", self.columns.to_string());
        for (ty, n) in &self.cells_by_type {
            t.pair(&format!("type {ty}"), n.to_string());
        }
        let b = &self.block_compression_ratio;
        t.pair(
            "block compression",
            format!(
                "{} data blocks, raw/stored min {:.3}, avg {:.3}, max {:.3}",
                b.blocks, b.min, b.avg, b.max
            ),
        );
        if let Some(r) = &self.biggest_row {
            t.pair(
                "biggest row",
                format!("{} ({}, {} cells)", r.row, human_size(r.bytes), r.cells),
            );
        }
        t.render(2, out);
        self.key_size.text("  key size (bytes)", out);
        self.value_size.text("  value size (bytes)", out);
        self.row_size.text("  row size (bytes)", out);
        self.cells_per_row.text("  cells per row", out);
        self.versions_per_column.text("  versions per column", out);
    }
}
