//! Borrowed results of a streamed scan ([`Table::scan_each`](crate::Table::scan_each)): a
//! [`RowView`] of [`CellRef`]s that point into buffers the scan reuses from row to row.
//!
//! Why: an owned [`Row`] costs an allocation for its key, its cell vector and each cell's row,
//! family and value, and the scan re-seeks its sources for every batch of rows it buffers. In
//! a profile of `cellar bench`'s seekrandom (system allocator), a third of the time went to
//! allocating and freeing. A streamed scan hands each row to a callback while its merge is
//! still positioned, from buffers that stop allocating once they have grown to the widest
//! row.

use std::marker::PhantomData;

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
    /// Packed cells, and the bytes their qualifiers and values are in.
    Raw(&'a [RawCell<'a>], &'a [u8]),
    Owned(&'a [Cell]),
    /// A row of one cell, borrowed from where the scan read it (see
    /// [`CellEntry::last_in_row`](cellar_format::CellEntry::last_in_row)).
    One(CellRef<'a>),
}

impl<'a> RowView<'a> {
    /// A view of an owned row.
    pub fn of(row: &'a Row) -> Self {
        RowView {
            key: &row.key,
            cells: Cells::Owned(&row.cells),
        }
    }

    /// A row of the one cell `cell`.
    pub(crate) fn one(cell: CellRef<'a>) -> Self {
        RowView {
            key: cell.row,
            cells: Cells::One(cell),
        }
    }

    /// Cells `from..to` of `raw`, all of row `key` (none out of range).
    pub(crate) fn raw<'f: 'a, S: CellStore<'f>>(
        key: &'a [u8],
        raw: &'a RawCells<'f, S>,
        from: usize,
        to: usize,
    ) -> Self {
        RowView {
            key,
            cells: Cells::Raw(
                raw.cells.as_slice().get(from..to).unwrap_or_default(),
                &raw.bytes.0,
            ),
        }
    }

    /// Row key.
    pub fn key(&self) -> &'a [u8] {
        self.key
    }

    /// Number of cells.
    pub fn len(&self) -> usize {
        match self.cells {
            Cells::Raw(cells, _) => cells.len(),
            Cells::Owned(c) => c.len(),
            Cells::One(_) => 1,
        }
    }

    /// True when the view has no cell (a streamed scan never delivers one).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Cell `i`, in cell order.
    pub fn cell(&self, i: usize) -> Option<CellRef<'a>> {
        match self.cells {
            Cells::Raw(cells, bytes) => cells.get(i)?.to_ref(self.key, bytes),
            Cells::Owned(c) => c.get(i).map(CellRef::from),
            Cells::One(c) => (i == 0).then_some(c),
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
            Cells::Raw(cells, bytes) => cells.iter().find_map(|c| {
                if c.qualifier != q.len()
                    || c.family.len() != family.len()
                    || c.cell_type != CellType::Put
                {
                    return None;
                }
                let q_end = c.at + c.qualifier;
                let cq = bytes.get(c.at..q_end)?;
                if bytes_eq(c.family.as_bytes(), family.as_bytes()) && bytes_eq(cq, q) {
                    bytes.get(q_end..q_end + c.value)
                } else {
                    None
                }
            }),
            Cells::Owned(cells) => owned_value(cells, family, q),
            Cells::One(c) => (c.cell_type == CellType::Put
                && bytes_eq(c.family.as_bytes(), family.as_bytes())
                && bytes_eq(c.qualifier, q))
            .then_some(c.value),
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
/// to row; family names are borrowed from the schema. A scan's keeps its cells in a vector
/// grown once to its widest row; a Get's, built for its row alone, in [`InlineCells`] (see
/// [`GetCells`]). The bytes come from the thread's buffer pool and go back to it when dropped.
#[derive(Debug, Default)]
pub(crate) struct RawCells<'f, S = Vec<RawCell<'f>>> {
    bytes: PooledBytes,
    cells: S,
    _cells: PhantomData<RawCell<'f>>,
}

/// A single Get's packed cells: nothing to allocate for a row of up to [`INLINE_CELLS`] cells.
/// Allocating and growing a Get's two buffers was ~480 of a cached Get's ~6,450 instructions
/// (callgrind). Scans keep the plain vector: with inline cells a cached scan cost ~27
/// instructions a row more (callgrind, one cell a row).
pub(crate) type GetCells<'f> = RawCells<'f, InlineCells<'f>>;

/// Where [`RawCells`] keeps its cells.
pub(crate) trait CellStore<'f> {
    fn push(&mut self, c: RawCell<'f>);
    fn clear(&mut self);
    fn as_slice(&self) -> &[RawCell<'f>];
}

impl<'f> CellStore<'f> for Vec<RawCell<'f>> {
    #[inline]
    fn push(&mut self, c: RawCell<'f>) {
        Vec::push(self, c);
    }
    fn clear(&mut self) {
        Vec::clear(self);
    }
    #[inline]
    fn as_slice(&self) -> &[RawCell<'f>] {
        self
    }
}

/// Cells [`InlineCells`] holds before it allocates: a Get of a row of a few columns.
const INLINE_CELLS: usize = 4;

/// A vector of cells whose first [`INLINE_CELLS`] are kept inline, as `SmallVec` keeps them:
/// once it outgrows them every cell moves to the heap, and stays there when cleared. Not
/// `SmallVec` itself: its `Drop` would make the borrow checker require the families the cells
/// borrow to outlive the buffer, which a Get's locals do not (Vec's `Drop` promises not to
/// look at them; SmallVec's cannot on stable Rust).
#[derive(Debug)]
pub(crate) struct InlineCells<'f> {
    inline: [RawCell<'f>; INLINE_CELLS],
    len: usize,
    /// Every cell once the inline ones overflowed (its capacity is then non-zero).
    heap: Vec<RawCell<'f>>,
}

impl Default for InlineCells<'_> {
    fn default() -> Self {
        let blank = RawCell {
            family: "",
            at: 0,
            qualifier: 0,
            value: 0,
            timestamp: 0,
            cell_type: CellType::Put,
        };
        InlineCells {
            inline: [blank; INLINE_CELLS],
            len: 0,
            heap: Vec::new(),
        }
    }
}

impl<'f> CellStore<'f> for InlineCells<'f> {
    #[inline]
    fn push(&mut self, c: RawCell<'f>) {
        if self.heap.capacity() == 0 {
            if let Some(slot) = self.inline.get_mut(self.len) {
                *slot = c;
                self.len += 1;
                return;
            }
            self.heap.reserve(2 * INLINE_CELLS);
            self.heap.extend_from_slice(&self.inline);
        }
        self.heap.push(c);
    }

    fn clear(&mut self) {
        self.len = 0;
        self.heap.clear();
    }

    #[inline]
    fn as_slice(&self) -> &[RawCell<'f>] {
        if self.heap.capacity() > 0 {
            &self.heap
        } else {
            self.inline.get(..self.len).unwrap_or_default()
        }
    }
}

/// A byte buffer from the thread's pool, given back when dropped. Its own type, without the
/// cells' lifetime, so that dropping a [`RawCells`] asks nothing of what its cells borrow.
#[derive(Debug)]
struct PooledBytes(Vec<u8>);

impl Default for PooledBytes {
    fn default() -> Self {
        PooledBytes(cellar_format::bufpool::take())
    }
}

impl Drop for PooledBytes {
    fn drop(&mut self) {
        cellar_format::bufpool::give(std::mem::take(&mut self.0));
    }
}

/// One packed cell of [`RawCells`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct RawCell<'f> {
    family: &'f str,
    /// Qualifier and value follow one another in `bytes` from here.
    at: usize,
    qualifier: usize,
    value: usize,
    timestamp: Timestamp,
    cell_type: CellType,
}

impl<'f> RawCell<'f> {
    /// The cell as a [`CellRef`] of row `row`, its bytes in `bytes`.
    fn to_ref<'a>(self, row: &'a [u8], bytes: &'a [u8]) -> Option<CellRef<'a>>
    where
        'f: 'a,
    {
        let q_end = self.at + self.qualifier;
        Some(CellRef {
            row,
            family: self.family,
            qualifier: bytes.get(self.at..q_end)?,
            timestamp: self.timestamp,
            cell_type: self.cell_type,
            value: bytes.get(q_end..q_end + self.value)?,
        })
    }
}

impl<'f, S: CellStore<'f>> RawCells<'f, S> {
    pub(crate) fn clear(&mut self) {
        self.bytes.0.clear();
        self.cells.clear();
    }

    pub(crate) fn len(&self) -> usize {
        self.cells.as_slice().len()
    }
}

impl<'f, S: CellStore<'f>> CellSink<'f> for RawCells<'f, S> {
    #[inline(always)]
    fn push_cell(&mut self, key: &KeyRef<'_>, family: &'f str, value: &[u8]) -> Result<()> {
        let cell_type = key.cell_type().ok_or_else(|| {
            Error::InvalidArgument(format!("type code {} is not a cell type", key.type_code))
        })?;
        let at = self.bytes.0.len();
        self.bytes.0.reserve(key.qualifier.len() + value.len());
        // As `ColumnState::start`: no `memcpy` call for an empty qualifier.
        if !key.qualifier.is_empty() {
            self.bytes.0.extend_from_slice(key.qualifier);
        }
        self.bytes.0.extend_from_slice(value);
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

    /// Packed cells read back as pushed across a Get's move from inline to heap storage, and
    /// after a clear (a buffer reused for a narrower row); a scan's vector likewise.
    #[test]
    fn packed_cells_survive_spilling_and_clearing() {
        fn exercise<S: CellStore<'static> + Default>() {
            let quals: Vec<String> = (0..3 * INLINE_CELLS).map(|i| format!("q{i}")).collect();
            let push = |raw: &mut RawCells<'static, S>, n: usize| {
                for (i, q) in quals.iter().take(n).enumerate() {
                    let key = KeyRef {
                        row: b"r",
                        family: b"f",
                        qualifier: q.as_bytes(),
                        timestamp: i as u64,
                        type_code: CellType::Put as u8,
                        seq: 1,
                    };
                    raw.push_cell(&key, "f", format!("v{i}").as_bytes())
                        .unwrap();
                }
            };
            let check = |raw: &RawCells<'static, S>, n: usize| {
                assert_eq!(raw.len(), n);
                let view = RowView::raw(b"r", raw, 0, n);
                assert_eq!(view.len(), n);
                for (i, c) in view.cells().enumerate() {
                    assert_eq!(c.qualifier, quals[i].as_bytes());
                    assert_eq!(c.timestamp, i as u64);
                    assert_eq!(c.value, format!("v{i}").as_bytes());
                    assert_eq!(view.value("f", &quals[i]), Some(c.value));
                }
                assert_eq!(view.cell(n), None);
                // A window sees only its own cells.
                let tail = RowView::raw(b"r", raw, 1, n);
                assert_eq!(tail.len(), n - 1);
                assert_eq!(tail.cell(0).map(|c| c.timestamp), Some(1));
                assert_eq!(tail.value("f", "q0"), None);
            };
            let mut raw = RawCells::<'static, S>::default();
            for n in [
                INLINE_CELLS - 1,
                INLINE_CELLS,
                INLINE_CELLS + 1,
                3 * INLINE_CELLS,
            ] {
                raw.clear();
                push(&mut raw, n);
                check(&raw, n);
            }
            // A narrow row after a wide one (a Get's cells are on the heap by now).
            raw.clear();
            push(&mut raw, 2);
            check(&raw, 2);
        }
        exercise::<InlineCells<'static>>();
        exercise::<Vec<RawCell<'static>>>();
    }

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
        let mut raw: RawCells<'_> = RawCells::default();
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
