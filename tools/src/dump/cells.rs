//! `--kv` / `--keys` with `--row`, `--from`/`--to` and `--limit`: the cells, in file order.

use std::io::Write;

use cellar_format::display::key_to_string;
use cellar_format::{CellKey, HFileReader, KeyRef, ReadAt};
use serde::Serialize;

use super::Ctx;
use crate::emit::{Emitter, Section};
use crate::text::bin;
use crate::Result;

/// Which cells to visit.
#[derive(Debug, Clone, Default)]
pub struct CellRange {
    /// Only this row.
    pub row: Option<Vec<u8>>,
    /// Rows from here (inclusive).
    pub from: Option<Vec<u8>>,
    /// Rows before this one.
    pub to: Option<Vec<u8>>,
    /// At most this many cells.
    pub limit: Option<u64>,
}

/// A cell as the visitors see it.
#[derive(Debug, Clone, Copy)]
pub struct CellView<'a> {
    /// The parsed key.
    pub key: KeyRef<'a>,
    /// The encoded key's length.
    pub key_len: usize,
    /// The value.
    pub value: &'a [u8],
    /// The tags section (usually empty).
    pub tags: &'a [u8],
}

/// Visit the cells of `range` in order; returns how many were visited. A single row is looked up
/// in the bloom filter first, so asking for an absent row reads no data block.
pub fn for_each_cell<R: ReadAt>(
    reader: &HFileReader<R>,
    range: &CellRange,
    mut f: impl FnMut(&CellView<'_>) -> Result<()>,
) -> Result<u64> {
    let mut it = reader.iter();
    match (&range.row, &range.from) {
        (Some(row), _) => {
            if !reader.may_contain_row(row)? {
                return Ok(0);
            }
            it.seek(&CellKey::first_on_row(row).as_ref())?;
        }
        (None, Some(from)) => it.seek(&CellKey::first_on_row(from).as_ref())?,
        (None, None) => it.seek_to_first()?,
    }
    let mut n = 0u64;
    while let Some(k) = it.key_ref() {
        if range.limit.is_some_and(|l| n >= l)
            || range.row.as_deref().is_some_and(|r| k.row != r)
            || range.to.as_deref().is_some_and(|t| k.row >= t)
        {
            break;
        }
        f(&CellView {
            key: k,
            key_len: it.key().len(),
            value: it.value(),
            tags: it.tags(),
        })?;
        n += 1;
        it.next()?;
    }
    Ok(n)
}

#[derive(Debug, Serialize)]
struct CellJson {
    row: String,
    family: String,
    qualifier: String,
    timestamp: u64,
    #[serde(rename = "type")]
    cell_type: String,
    seq: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    value: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tags: Option<String>,
}

/// Closing count of a cell listing.
#[derive(Debug, Serialize)]
struct Scanned {
    cells: u64,
}

impl Section for Scanned {
    fn name(&self) -> &'static str {
        "scanned"
    }
    fn text(&self, out: &mut String) {
        out.push_str(&format!("Scanned {} cells\n", self.cells));
    }
}

pub(crate) fn dump_cells<W: Write>(
    ctx: &Ctx<'_>,
    range: &CellRange,
    values: bool,
    em: &mut Emitter<W>,
) -> Result<()> {
    let n = for_each_cell(ctx.reader, range, |c| {
        let k = &c.key;
        let mut line = format!("K: {}", key_to_string(k));
        if values {
            line.push_str(" V: ");
            line.push_str(&bin(c.value));
        }
        if !c.tags.is_empty() {
            line.push_str(" T: ");
            line.push_str(&bin(c.tags));
        }
        let json = CellJson {
            row: bin(k.row),
            family: bin(k.family),
            qualifier: bin(k.qualifier),
            timestamp: k.timestamp,
            cell_type: k
                .cell_type()
                .map_or_else(|| format!("Type{}", k.type_code), |t| t.name().to_owned()),
            seq: k.seq,
            value: values.then(|| bin(c.value)),
            tags: (!c.tags.is_empty()).then(|| bin(c.tags)),
        };
        em.cell(&line, &json)
    })?;
    // JSON lines stay one object per cell; the other shapes close the listing with a count.
    if em.format() == crate::emit::Format::Jsonl {
        return Ok(());
    }
    em.section(&Scanned { cells: n })
}
