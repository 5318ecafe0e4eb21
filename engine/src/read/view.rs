//! Borrowed results of a streamed scan ([`Table::scan_each`](crate::Table::scan_each)): a
//! [`RowView`] of [`CellRef`]s that point into buffers the scan reuses from row to row.
//!
//! Why: an owned [`Row`] costs an allocation for its key, its cell vector and each cell's row,
//! family and value, and the scan re-seeks its sources for every batch of rows it buffers. In
//! a profile of `cellar bench`'s seekrandom (system allocator), a third of the time went to
//! allocating and freeing. A streamed scan hands each row to a callback while its merge is
//! still positioned, from buffers that stop allocating once they have grown to the widest
//! row.

use cellar_format::{CellType, KeyRef};

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
    pub fn value(&self, family: &str, qualifier: impl AsRef<[u8]>) -> Option<&'a [u8]> {
        let q = qualifier.as_ref();
        self.cells()
            .find(|c| c.cell_type == CellType::Put && c.family == family && c.qualifier == q)
            .map(|c| c.value)
    }

    /// An owned copy.
    pub fn to_row(&self) -> Row {
        Row::new(self.key, self.cells().map(|c| c.to_cell()).collect())
    }
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
    fn push_cell(&mut self, key: &KeyRef<'_>, family: &'f str, value: &[u8]) -> Result<()> {
        let cell_type = key.cell_type().ok_or_else(|| {
            Error::InvalidArgument(format!("type code {} is not a cell type", key.type_code))
        })?;
        let at = self.bytes.len();
        self.bytes.extend_from_slice(key.qualifier);
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
