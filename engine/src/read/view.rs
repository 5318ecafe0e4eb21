//! Borrowed results of a streamed scan ([`Table::scan_each`](crate::Table::scan_each)): a
//! [`RowView`] of [`CellRef`]s that point into buffers the scan reuses from row to row.
//!
//! Why: an owned [`Row`] costs an allocation for its key, its cell vector and each cell's row,
//! family and value, and the scan re-seeks its sources for every batch of rows it buffers. In
//! a profile of `cellar bench`'s seekrandom (system allocator), a third of the time went to
//! allocating and freeing. A streamed scan hands each row to a callback while its merge is
//! still positioned, from buffers that stop allocating once they have grown to the widest
//! row.

use cellar_format::{bytes_eq, CellType, KeyRef};

use crate::error::{Error, Result};
use crate::read::query::{Cell, Row};
use crate::types::Timestamp;

/// One cell of a [`RowView`]: the fields of a [`Cell`], borrowed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct CellRef<'a> {
    /// Row key.
    pub row: &'a [u8],
    /// Family name.
    pub family: &'a str,
    /// Qualifier.
    pub qualifier: &'a [u8],
    /// Timestamp.
    pub timestamp: Timestamp,
    /// Put, or a marker type in raw results.
    pub cell_type: CellType,
    /// Value (empty for markers).
    pub value: &'a [u8],
}

impl CellRef<'_> {
    /// An owned copy.
    pub fn to_cell(&self) -> Cell {
        Cell::new(
            self.row,
            self.family,
            self.qualifier,
            self.timestamp,
            self.cell_type,
            self.value,
        )
    }
}

impl<'a> From<&'a Cell> for CellRef<'a> {
    fn from(c: &'a Cell) -> Self {
        CellRef {
            row: &c.row,
            family: &c.family,
            qualifier: &c.qualifier,
            timestamp: c.timestamp,
            cell_type: c.cell_type,
            value: &c.value,
        }
    }
}

/// One row of a streamed scan, or one chunk of it when the scan sets `batch` (as the
/// iterator returns it). Valid only during the callback that receives it.
#[derive(Debug, Clone, Copy)]
pub struct RowView<'a> {
    key: &'a [u8],
    cells: Cells<'a>,
}

#[derive(Debug, Clone, Copy)]
enum Cells<'a> {
    Raw(&'a RawCells<'a>, usize, usize),
    Owned(&'a [Cell]),
}

impl<'a> RowView<'a> {
    /// A view of an owned row.
    pub fn of(row: &'a Row) -> Self {
        RowView {
            key: &row.key,
            cells: Cells::Owned(&row.cells),
        }
    }

    /// Cells `from..to` of `raw`, all of row `key`.
    pub(crate) fn raw(key: &'a [u8], raw: &'a RawCells<'a>, from: usize, to: usize) -> Self {
        RowView {
            key,
            cells: Cells::Raw(raw, from, to),
        }
    }

    /// Row key.
    pub fn key(&self) -> &'a [u8] {
        self.key
    }

    /// Number of cells.
    pub fn len(&self) -> usize {
        match self.cells {
            Cells::Raw(_, from, to) => to - from,
            Cells::Owned(c) => c.len(),
        }
    }

    /// True when the view has no cell (a streamed scan never delivers one).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Cell `i`, in cell order.
    pub fn cell(&self, i: usize) -> Option<CellRef<'a>> {
        match self.cells {
            Cells::Raw(raw, from, to) => (i < to - from)
                .then(|| raw.get(self.key, from + i))
                .flatten(),
            Cells::Owned(c) => c.get(i).map(CellRef::from),
        }
    }

    /// The cells, in cell order (family, qualifier, newest first).
    pub fn cells(&self) -> impl ExactSizeIterator<Item = CellRef<'a>> + 'a {
        let view = *self;
        (0..self.len()).map(move |i| {
            // `i` is in range, and raw cells were checked when they were stored.
            view.cell(i).unwrap_or(CellRef {
                row: view.key,
                family: "",
                qualifier: &[],
                timestamp: 0,
                cell_type: CellType::Put,
                value: &[],
            })
        })
    }

    /// The newest value of a column (as [`Row::value`]).
    #[inline]
    pub fn value(&self, family: &str, qualifier: impl AsRef<[u8]>) -> Option<&'a [u8]> {
        self.value_of(family, qualifier.as_ref())
    }

    // Inlined into the caller's closure, a scan's one lookup a row costs no call (nor the
    // saving of registers a call of this size made: 18 of its 90 instructions).
    #[inline]
    fn value_of(&self, family: &str, q: &[u8]) -> Option<&'a [u8]> {
        match self.cells {
            // Straight over the packed cells: building each `CellRef` to test it was most of
            // the lookup (a seekrandom row of one cell spent 150 instructions here).
            // The lengths are compared before any byte is: most cells of a wide row differ
            // from the wanted column in length already.
            Cells::Raw(raw, from, to) => raw.cells.get(from..to)?.iter().find_map(|c| {
                if c.qualifier != q.len()
                    || c.family.len() != family.len()
                    || c.cell_type != CellType::Put
                {
                    return None;
                }
                let q_end = c.at + c.qualifier;
                let cq = raw.bytes.get(c.at..q_end)?;
                if bytes_eq(c.family.as_bytes(), family.as_bytes()) && bytes_eq(cq, q) {
                    raw.bytes.get(q_end..q_end + c.value)
                } else {
                    None
                }
            }),
            Cells::Owned(cells) => owned_value(cells, family, q),
        }
    }

    /// An owned copy.
    pub fn to_row(&self) -> Row {
        Row::new(self.key, self.cells().map(|c| c.to_cell()).collect())
    }
}

/// [`RowView::value`] over owned cells (a scan with a filter, a reversed scan): out of line,
/// so that the packed cells' lookup stays small enough to inline.
#[inline(never)]
fn owned_value<'a>(cells: &'a [Cell], family: &str, q: &[u8]) -> Option<&'a [u8]> {
    cells
        .iter()
        .find(|c| {
            c.cell_type == CellType::Put
                && bytes_eq(c.family.as_bytes(), family.as_bytes())
                && bytes_eq(&c.qualifier, q)
        })
        .map(|c| c.value.as_slice())
}

/// Where version resolution puts the cells it returns: owned [`Cell`]s, or a [`RawCells`]
/// buffer for a streamed scan. `family` is the family's declared name (the bytes of
/// `key.family`), borrowed from the table's schema for `'f`.
pub(crate) trait CellSink<'f> {
    /// Append the cell of `key` with `value` (already emptied for markers).
    fn push_cell(&mut self, key: &KeyRef<'_>, family: &'f str, value: &[u8]) -> Result<()>;
}

impl CellSink<'_> for Vec<Cell> {
    fn push_cell(&mut self, key: &KeyRef<'_>, family: &str, value: &[u8]) -> Result<()> {
        let mut c = Cell::from_key(
            &KeyRef {
                family: &[],
                ..*key
            },
            value,
        )?;
        family.clone_into(&mut c.family);
        self.push(c);
        Ok(())
    }
}

/// The cells of one row, their qualifier and value bytes packed in one buffer reused from row
/// to row; family names are borrowed from the schema.
#[derive(Debug, Default)]
pub(crate) struct RawCells<'f> {
    bytes: Vec<u8>,
    cells: Vec<RawCell<'f>>,
}

#[derive(Debug, Clone, Copy)]
struct RawCell<'f> {
    family: &'f str,
    /// Qualifier and value follow one another in `bytes` from here.
    at: usize,
    qualifier: usize,
    value: usize,
    timestamp: Timestamp,
    cell_type: CellType,
}

impl RawCells<'_> {
    pub(crate) fn clear(&mut self) {
        self.bytes.clear();
        self.cells.clear();
    }

    pub(crate) fn len(&self) -> usize {
        self.cells.len()
    }

    fn get<'a>(&'a self, row: &'a [u8], i: usize) -> Option<CellRef<'a>> {
        let c = self.cells.get(i)?;
        let q_end = c.at + c.qualifier;
        Some(CellRef {
            row,
            family: c.family,
            qualifier: self.bytes.get(c.at..q_end)?,
            timestamp: c.timestamp,
            cell_type: c.cell_type,
            value: self.bytes.get(q_end..q_end + c.value)?,
        })
    }
}

impl<'f> CellSink<'f> for RawCells<'f> {
    #[inline]
    fn push_cell(&mut self, key: &KeyRef<'_>, family: &'f str, value: &[u8]) -> Result<()> {
        let cell_type = key.cell_type().ok_or_else(|| {
            Error::InvalidArgument(format!("type code {} is not a cell type", key.type_code))
        })?;
        let at = self.bytes.len();
        self.bytes.reserve(key.qualifier.len() + value.len());
        // As `ColumnState::start`: no `memcpy` call for an empty qualifier.
        if !key.qualifier.is_empty() {
            self.bytes.extend_from_slice(key.qualifier);
        }
        self.bytes.extend_from_slice(value);
        self.cells.push(RawCell {
            family,
            at,
            qualifier: key.qualifier.len(),
            value: value.len(),
            timestamp: key.timestamp,
            cell_type,
        });
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `value` over packed cells (the scan's fast path) answers as over owned cells and as
    /// the first Put of the column in `cells()`: markers, other families, a qualifier that
    /// is a prefix of another, and the empty qualifier.
    #[test]
    fn raw_value_lookup_matches_the_owned_row() {
        let cells = [
            ("a", "", 9, CellType::DeleteFamily, ""),
            ("a", "", 7, CellType::Put, "a-empty"),
            ("a", "q", 8, CellType::Delete, ""),
            ("a", "q", 5, CellType::Put, "a-q-old"),
            ("a", "qq", 4, CellType::Put, "a-qq"),
            ("bb", "q", 3, CellType::Put, "bb-q"),
            (
                "bb",
                "a-long-qualifier-past-32-bytes-of-it",
                2,
                CellType::Put,
                "long",
            ),
        ];
        let mut raw = RawCells::default();
        let mut owned = Vec::new();
        for (fam, q, ts, ty, v) in cells {
            let key = KeyRef {
                row: b"r",
                family: fam.as_bytes(),
                qualifier: q.as_bytes(),
                timestamp: ts,
                type_code: ty as u8,
                seq: 1,
            };
            raw.push_cell(&key, fam, v.as_bytes()).unwrap();
            owned.push(Cell::new("r", fam, q, ts, ty, v));
        }
        let row = Row::new("r", owned);
        let views = [RowView::raw(b"r", &raw, 0, raw.len()), RowView::of(&row)];
        let asks = [
            ("a", ""),
            ("a", "q"),
            ("a", "qq"),
            ("a", "x"),
            ("b", "q"),
            ("bb", "q"),
            ("bb", "a-long-qualifier-past-32-bytes-of-it"),
            ("bb", "a-long-qualifier-past-32-bytes-of-iT"),
        ];
        for (fam, q) in asks {
            let expected = views[1]
                .cells()
                .find(|c| {
                    c.cell_type == CellType::Put && c.family == fam && c.qualifier == q.as_bytes()
                })
                .map(|c| c.value);
            for v in &views {
                assert_eq!(v.value(fam, q), expected, "{fam}:{q}");
            }
        }
        assert_eq!(views[0].value("a", "q"), Some(&b"a-q-old"[..]));
        assert_eq!(views[0].value("a", "x"), None);
        // A window of the packed cells sees only its own.
        let tail = RowView::raw(b"r", &raw, 5, raw.len());
        assert_eq!(tail.value("a", ""), None);
        assert_eq!(tail.value("bb", "q"), Some(&b"bb-q"[..]));
    }
}
