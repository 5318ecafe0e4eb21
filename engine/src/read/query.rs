//! What a reader asks for ([`Get`], [`Scan`]) and what it gets back ([`Row`], [`Cell`]).
//!
//! Shapes follow HBase's client API (ECOSYSTEM.md §3.3): filters ([`Filter`]), batching and
//! reversed scans included. The types are `#[non_exhaustive]` so fields can be added, and are
//! built through their builder methods.

use std::collections::{BTreeMap, BTreeSet};

use cellar_format::{CellType, KeyRef};

use crate::error::{Error, Result};
use crate::read::filter::Filter;
use crate::types::{SeqNo, Timestamp};

/// A half-open time range `[min, max)` (HBase's TimeRange). The default covers all time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TimeRange {
    /// Smallest timestamp included.
    pub min: Timestamp,
    /// First timestamp excluded.
    pub max: Timestamp,
}

impl Default for TimeRange {
    fn default() -> Self {
        TimeRange::ALL
    }
}

impl TimeRange {
    /// Every timestamp. `u64::MAX` itself is excluded, which loses nothing: it is
    /// [`LATEST_TIMESTAMP`](crate::types::LATEST_TIMESTAMP), "now", and never stored.
    pub const ALL: TimeRange = TimeRange {
        min: 0,
        max: u64::MAX,
    };

    /// `[min, max)`.
    pub fn new(min: Timestamp, max: Timestamp) -> Self {
        TimeRange { min, max }
    }

    /// Exactly `ts` (`[ts, ts + 1)`).
    pub fn at(ts: Timestamp) -> Self {
        TimeRange {
            min: ts,
            max: ts.saturating_add(1),
        }
    }

    /// True when `ts` is in the range.
    pub fn contains(&self, ts: Timestamp) -> bool {
        self.min <= ts && ts < self.max
    }

    /// True for [`TimeRange::ALL`].
    pub fn is_all(&self) -> bool {
        *self == TimeRange::ALL
    }

    /// An inverted range is refused (HBase throws too); an empty one (`min == max`) is legal
    /// and matches nothing.
    pub fn validate(&self) -> Result<()> {
        if self.min > self.max {
            return Err(Error::InvalidArgument(format!(
                "time range [{}, {}) has min after max",
                self.min, self.max
            )));
        }
        Ok(())
    }
}

/// The builder methods `Get` and `Scan` share: which families and columns, how many versions,
/// which time range.
macro_rules! selection_builders {
    () => {
        /// Read all of `family`.
        pub fn family(mut self, family: impl Into<String>) -> Self {
            self.selection.add_family(family);
            self
        }

        /// Read one column.
        pub fn column(mut self, family: impl Into<String>, qualifier: impl Into<Vec<u8>>) -> Self {
            self.selection.add_column(family, qualifier);
            self
        }

        /// Up to `n` versions per column (0 is treated as 1, as HBase refuses it).
        pub fn max_versions(mut self, n: u32) -> Self {
            self.max_versions = n.max(1);
            self
        }

        /// Every version the family keeps.
        pub fn all_versions(mut self) -> Self {
            self.max_versions = u32::MAX;
            self
        }

        /// Only cells with `min <= ts < max`.
        pub fn time_range(mut self, min: Timestamp, max: Timestamp) -> Self {
            self.time_range = TimeRange::new(min, max);
            self
        }

        /// Only cells at exactly `ts`.
        pub fn timestamp(mut self, ts: Timestamp) -> Self {
            self.time_range = TimeRange::at(ts);
            self
        }
    };
}

/// Which families and columns a read covers. Empty means every family.
///
/// Choice (differs from HBase): a whole family stays whole when columns of it are also named,
/// so `family(f)` and `column(f, q)` in either order read all of `f`. HBase's `addColumn`
/// after `addFamily` narrows the family to that column, a known trap.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Selection {
    /// Family name → `None` (all its columns) or the chosen qualifiers.
    pub families: BTreeMap<String, Option<BTreeSet<Vec<u8>>>>,
}

impl Selection {
    /// Select all of `family`.
    pub fn add_family(&mut self, family: impl Into<String>) {
        self.families.insert(family.into(), None);
    }

    /// Select one column.
    pub fn add_column(&mut self, family: impl Into<String>, qualifier: impl Into<Vec<u8>>) {
        if let Some(cols) = self
            .families
            .entry(family.into())
            .or_insert_with(|| Some(BTreeSet::new()))
        {
            cols.insert(qualifier.into());
        }
    }

    /// True when every family is read.
    pub fn is_all(&self) -> bool {
        self.families.is_empty()
    }

    /// Whether `family` is read at all.
    pub fn reads_family(&self, family: &str) -> bool {
        self.is_all() || self.families.contains_key(family)
    }

    /// The qualifiers chosen in `family`: `None` means all of them (or the family is not read:
    /// ask [`Selection::reads_family`] first).
    pub fn columns(&self, family: &str) -> Option<&BTreeSet<Vec<u8>>> {
        self.families.get(family).and_then(|c| c.as_ref())
    }
}

/// A point read of one row (HBase's Get).
///
/// ```
/// use cellar::read::Get;
/// let g = Get::new("u#42").family("info").max_versions(2).time_range(100, 200);
/// assert!(g.selection.reads_family("info"));
/// assert_eq!(g.max_versions, 2);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Get {
    /// The row.
    pub row: Vec<u8>,
    /// Families and columns read.
    pub selection: Selection,
    /// Most versions returned per column (default 1); the family's VERSIONS also caps it.
    pub max_versions: u32,
    /// Only cells in this range.
    pub time_range: TimeRange,
    /// Read at this sequence number (an explicit snapshot's) instead of the latest.
    pub read_point: Option<SeqNo>,
    /// Applied to the row's resolved cells (see [`crate::read::filter`]); a row it empties is
    /// `None`.
    pub filter: Option<Filter>,
}

impl Get {
    /// The newest version of every column of `row`.
    pub fn new(row: impl Into<Vec<u8>>) -> Self {
        Get {
            row: row.into(),
            selection: Selection::default(),
            max_versions: 1,
            time_range: TimeRange::ALL,
            read_point: None,
            filter: None,
        }
    }

    /// Filter the row (replaces any earlier filter; combine with [`Filter::And`]).
    pub fn filter(mut self, filter: Filter) -> Self {
        self.filter = Some(filter);
        self
    }

    selection_builders!();

    /// Check the arguments.
    pub fn validate(&self) -> Result<()> {
        if self.row.is_empty() {
            return Err(Error::InvalidArgument("get of an empty row key".into()));
        }
        self.time_range.validate()
    }
}

/// A range read (HBase's Scan): rows from `start_row` (inclusive) to `stop_row` (exclusive
/// unless `inclusive_stop`); an empty bound is open.
///
/// A [reversed](Scan::reversed) scan walks from `start_row` toward smaller rows, so its start
/// is the larger bound (an empty start is the table's last row, an empty stop its first); the
/// cells within each row still come in cell order.
///
/// ```
/// use cellar::read::Scan;
/// let s = Scan::new().prefix("u#").family("info").limit(100);
/// assert!(s.contains_row(b"u#42"));
/// assert!(!s.contains_row(b"v"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Scan {
    /// First row (inclusive unless `exclusive_start`); empty is the table's start (its end
    /// when reversed).
    pub start_row: Vec<u8>,
    /// Skip `start_row` itself.
    pub exclusive_start: bool,
    /// Row where the scan ends (exclusive unless `inclusive_stop`); empty is the table's end
    /// (its start when reversed).
    pub stop_row: Vec<u8>,
    /// Include `stop_row` itself.
    pub inclusive_stop: bool,
    /// Families and columns read.
    pub selection: Selection,
    /// Most versions returned per column (default 1).
    pub max_versions: u32,
    /// Only cells in this range.
    pub time_range: TimeRange,
    /// Most rows returned; `None` is unlimited. A row split by `batch` counts once.
    pub limit: Option<usize>,
    /// Most cells per returned [`Row`]: a wider row comes back as several chunks with the same
    /// key, in cell order (HBase's `setBatch`). `None` returns whole rows.
    pub batch: Option<usize>,
    /// Applied inside the scan (see [`crate::read::filter`] for which parts act when).
    pub filter: Option<Filter>,
    /// Return every cell and marker visible at the read point, unresolved (HBase's raw scan).
    pub raw: bool,
    /// Read at this sequence number (an explicit snapshot's) instead of the latest.
    pub read_point: Option<SeqNo>,
    /// Rows in descending order, from `start_row` down to `stop_row` (HBase's
    /// `setReversed(true)`).
    pub reversed: bool,
    /// The row prefix [`Scan::prefix`] set, while it defines the bounds: a later
    /// [`Scan::reversed`] recomputes them for the other direction; setting a bound clears it.
    pub prefix: Option<Vec<u8>>,
}

impl Default for Scan {
    fn default() -> Self {
        Scan::new()
    }
}

impl Scan {
    /// The whole table, newest version of each column.
    pub fn new() -> Self {
        Scan {
            start_row: Vec::new(),
            exclusive_start: false,
            stop_row: Vec::new(),
            inclusive_stop: false,
            selection: Selection::default(),
            max_versions: 1,
            time_range: TimeRange::ALL,
            limit: None,
            batch: None,
            filter: None,
            raw: false,
            read_point: None,
            reversed: false,
            prefix: None,
        }
    }

    /// Start at `row`, inclusive (as HBase's `withStartRow(row)`; see
    /// [`Scan::exclusive_start`]).
    pub fn start_row(mut self, row: impl Into<Vec<u8>>) -> Self {
        self.start_row = row.into();
        self.exclusive_start = false;
        self.prefix = None;
        self
    }

    /// Stop before `row`.
    pub fn stop_row(mut self, row: impl Into<Vec<u8>>) -> Self {
        self.stop_row = row.into();
        self.prefix = None;
        self
    }

    /// `[start, stop)`.
    pub fn range(self, start: impl Into<Vec<u8>>, stop: impl Into<Vec<u8>>) -> Self {
        self.start_row(start).stop_row(stop)
    }

    /// Whether the stop row itself is returned.
    pub fn inclusive_stop(mut self, on: bool) -> Self {
        self.inclusive_stop = on;
        self
    }

    /// Rows starting with `prefix`: sets the start and stop rows, as HBase's
    /// `setRowPrefixFilter` does. A reversed scan reads them backward, whichever of `prefix`
    /// and [`Scan::reversed`] is called first.
    pub fn prefix(mut self, prefix: impl Into<Vec<u8>>) -> Self {
        self.prefix = Some(prefix.into());
        self.apply_prefix();
        self
    }

    /// Walk the rows in descending order (HBase's `setReversed(true)`): from `start_row`
    /// (inclusive; empty is the table's last row) down to `stop_row` (exclusive unless
    /// `inclusive_stop`; empty is the first row).
    pub fn reversed(mut self) -> Self {
        if !self.reversed {
            self.reversed = true;
            self.apply_prefix();
        }
        self
    }

    /// Set the bounds from `prefix` for the direction of travel.
    fn apply_prefix(&mut self) {
        let Some(p) = self.prefix.as_ref() else {
            return;
        };
        let end = prefix_end(p).unwrap_or_default();
        if self.reversed {
            // From the last row with the prefix down to its first. No inclusive start names
            // that last row, so the start is the prefix's end, excluded.
            self.exclusive_start = !end.is_empty();
            self.start_row = end;
            self.stop_row = p.clone();
            self.inclusive_stop = true;
        } else {
            self.exclusive_start = false;
            self.start_row = p.clone();
            self.stop_row = end;
            self.inclusive_stop = false;
        }
    }

    /// Whether the start row itself is skipped (HBase's `withStartRow(row, false)`).
    pub fn exclusive_start(mut self, on: bool) -> Self {
        self.exclusive_start = on;
        self
    }

    selection_builders!();

    /// At most `n` rows.
    pub fn limit(mut self, n: usize) -> Self {
        self.limit = Some(n);
        self
    }

    /// At most `n` cells per returned chunk of a row (0 is treated as 1).
    pub fn batch(mut self, n: usize) -> Self {
        self.batch = Some(n.max(1));
        self
    }

    /// Filter the scan (replaces any earlier filter; combine with [`Filter::And`]).
    pub fn filter(mut self, filter: Filter) -> Self {
        self.filter = Some(filter);
        self
    }

    /// A raw scan: markers and masked cells too.
    pub fn raw(mut self) -> Self {
        self.raw = true;
        self
    }

    /// True when `row` is at or after the start row (at or before it when reversed), or
    /// past it when the start is exclusive.
    pub fn after_start(&self, row: &[u8]) -> bool {
        let start = self.start_row.as_slice();
        if start.is_empty() {
            return true;
        }
        match (self.reversed, self.exclusive_start) {
            (false, false) => row >= start,
            (false, true) => row > start,
            (true, false) => row <= start,
            (true, true) => row < start,
        }
    }

    /// True when `row` is past the stop row in the direction of travel: the scan ends at the
    /// first such row.
    pub fn past_stop(&self, row: &[u8]) -> bool {
        let stop = self.stop_row.as_slice();
        if stop.is_empty() {
            return false;
        }
        match (self.reversed, self.inclusive_stop) {
            (false, true) => row > stop,
            (false, false) => row >= stop,
            (true, true) => row < stop,
            (true, false) => row <= stop,
        }
    }

    /// True when `row` is inside the scan's range.
    pub fn contains_row(&self, row: &[u8]) -> bool {
        self.after_start(row) && !self.past_stop(row)
    }

    /// Check the arguments: the stop row may not lie before the start row in the direction
    /// of travel.
    pub fn validate(&self) -> Result<()> {
        let open = self.stop_row.is_empty() || self.start_row.is_empty();
        if !open && !self.reversed && self.stop_row < self.start_row {
            return Err(Error::InvalidArgument(
                "scan stop row is before its start row".into(),
            ));
        }
        if !open && self.reversed && self.stop_row > self.start_row {
            return Err(Error::InvalidArgument(
                "reversed scan stop row is after its start row".into(),
            ));
        }
        self.time_range.validate()
    }
}

/// The smallest row greater than every row starting with `prefix`; `None` when there is none
/// (empty prefix or all `0xff`), meaning "to the end of the table".
pub fn prefix_end(prefix: &[u8]) -> Option<Vec<u8>> {
    let keep = prefix.iter().rposition(|&b| b != 0xff)?;
    let mut end = prefix.get(..=keep)?.to_vec();
    if let Some(last) = end.last_mut() {
        *last += 1;
    }
    Some(end)
}

/// One cell of a result.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Cell {
    /// Row key.
    pub row: Vec<u8>,
    /// Family name.
    pub family: String,
    /// Qualifier.
    pub qualifier: Vec<u8>,
    /// Timestamp.
    pub timestamp: Timestamp,
    /// Put, or a marker type in raw results.
    pub cell_type: CellType,
    /// Value (empty for markers).
    pub value: Vec<u8>,
}

impl Cell {
    /// A cell.
    pub fn new(
        row: impl Into<Vec<u8>>,
        family: impl Into<String>,
        qualifier: impl Into<Vec<u8>>,
        timestamp: Timestamp,
        cell_type: CellType,
        value: impl Into<Vec<u8>>,
    ) -> Self {
        Cell {
            row: row.into(),
            family: family.into(),
            qualifier: qualifier.into(),
            timestamp,
            cell_type,
            value: value.into(),
        }
    }

    /// Copy a stored cell out. A key whose type code is not a cell type (only search keys
    /// have one) is refused.
    pub fn from_key(key: &KeyRef<'_>, value: &[u8]) -> Result<Self> {
        let cell_type = key.cell_type().ok_or_else(|| {
            Error::InvalidArgument(format!("type code {} is not a cell type", key.type_code))
        })?;
        Ok(Cell {
            row: key.row.to_vec(),
            // Family names are validated ASCII when declared.
            family: String::from_utf8_lossy(key.family).into_owned(),
            qualifier: key.qualifier.to_vec(),
            timestamp: key.timestamp,
            cell_type,
            value: value.to_vec(),
        })
    }
}

/// One row of a result: its visible cells in cell order (family, qualifier, newest first).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Row {
    /// Row key.
    pub key: Vec<u8>,
    /// Cells in cell order.
    pub cells: Vec<Cell>,
}

impl Row {
    /// A row.
    pub fn new(key: impl Into<Vec<u8>>, cells: Vec<Cell>) -> Self {
        Row {
            key: key.into(),
            cells,
        }
    }

    /// The cells.
    pub fn cells(&self) -> &[Cell] {
        &self.cells
    }

    /// True when no cell is visible.
    pub fn is_empty(&self) -> bool {
        self.cells.is_empty()
    }

    /// The newest value of a column.
    pub fn value(&self, family: &str, qualifier: impl AsRef<[u8]>) -> Option<&[u8]> {
        let q = qualifier.as_ref();
        self.cells
            .iter()
            .find(|c| c.cell_type == CellType::Put && c.family == family && c.qualifier == q)
            .map(|c| c.value.as_slice())
    }

    /// Every returned cell of a column, newest first.
    pub fn versions(&self, family: &str, qualifier: impl AsRef<[u8]>) -> Vec<&Cell> {
        let q = qualifier.as_ref();
        self.cells
            .iter()
            .filter(|c| c.family == family && c.qualifier == q)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_end_bumps_the_last_byte_that_can_grow() {
        assert_eq!(prefix_end(b"ab"), Some(b"ac".to_vec()));
        assert_eq!(prefix_end(b"a\xff\xff"), Some(b"b".to_vec()));
        assert_eq!(prefix_end(b"\xff"), None);
        assert_eq!(prefix_end(b""), None);
    }

    #[test]
    fn scan_bounds() {
        let s = Scan::new().range("b", "d");
        assert!(!s.contains_row(b"a"));
        assert!(s.contains_row(b"b"));
        assert!(s.contains_row(b"c\xff"));
        assert!(!s.contains_row(b"d"));
        assert!(s.clone().inclusive_stop(true).contains_row(b"d"));
        assert!(!s.clone().inclusive_stop(true).contains_row(b"d\x00"));
        assert!(Scan::new().contains_row(b"anything"));
        assert!(Scan::new().range("d", "b").validate().is_err());
        assert!(Scan::new().time_range(5, 4).validate().is_err());
    }

    #[test]
    fn family_stays_whole_when_a_column_is_added() {
        let g = Get::new("r").family("cf").column("cf", "q");
        assert_eq!(g.selection.columns("cf"), None);
        assert!(g.selection.reads_family("cf"));
        assert!(!g.selection.reads_family("other"));
        let g = Get::new("r").column("cf", "q").column("cf", "p");
        assert_eq!(g.selection.columns("cf").map(|c| c.len()), Some(2));
        let g = Get::new("r").column("cf", "q").family("cf");
        assert_eq!(g.selection.columns("cf"), None);
    }

    #[test]
    fn row_accessors() {
        let r = Row::new(
            "r",
            vec![
                Cell::new("r", "cf", "a", 9, CellType::Put, "a9"),
                Cell::new("r", "cf", "a", 5, CellType::Put, "a5"),
                Cell::new("r", "cf", "b", 7, CellType::Put, "b7"),
            ],
        );
        assert_eq!(r.value("cf", "a"), Some(&b"a9"[..]));
        assert_eq!(r.value("cf", "c"), None);
        assert_eq!(r.versions("cf", "a").len(), 2);
        assert_eq!(r.cells().len(), 3);
    }
}
