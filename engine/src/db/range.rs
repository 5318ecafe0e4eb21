//! Estimates over a table's row ranges, for the layer that shards tables into regions
//! (ECOSYSTEM.md §5.3's range primitives; HBase's region size and split point).
//!
//! Both read the files' indexes only, never a data block:
//! - [`Table::estimate_range`] adds up, per family and file, the bytes and cells of the files
//!   inside the range, and for a file the range cuts, the share of its data blocks between
//!   the blocks a seek to the range's ends would read (RocksDB's `GetApproximateSizes`): exact
//!   to a block's size per end.
//! - [`Table::split_point`] is HBase's: the row of the midkey of the largest file of the family
//!   that holds the most bytes, unless that row is the file's first (then the largest file is
//!   one row, or nearly, and no row splits it).
//!
//! Memstore cells are estimated apart ([`RangeEstimate::memstore_cells`]): from the share of
//! one level of each memstore's skip list, a few thousand steps at most, never a walk over the
//! cells. The split point reads files only.

use cellar_format::cell::CellKey;
use cellar_format::KeyRef;

use super::sv::{SuperVersion, TableInfo};
use super::Table;
use crate::compaction::picker::{row, Rows};
use crate::error::{Error, Result};

/// What [`Table::estimate_range`] found.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RangeEstimate {
    /// Bytes of the files' data in the range (whole files inside it, shares of the others).
    pub bytes: u64,
    /// Cells in the range (every version and delete marker; shares as for bytes).
    pub cells: u64,
    /// Files holding rows in the range.
    pub files: u64,
    /// Cells of the memstores (not yet flushed) in the range, estimated: not in `cells`.
    pub memstore_cells: u64,
    /// Memstore bytes those cells take (their share of the write buffer): not in `bytes`.
    pub memstore_bytes: u64,
}

impl Table {
    /// The table in `sv`, or `TableNotFound` (dropped since the handle was made).
    fn info<'s>(&self, sv: &'s SuperVersion) -> Result<&'s TableInfo> {
        sv.tables
            .get(&self.name)
            .map(|t| &**t)
            .ok_or_else(|| Error::TableNotFound(self.name.to_string()))
    }

    /// Estimate the bytes and cells the table's files hold for rows in `[start, stop)` (an
    /// empty `stop`: to the end), from their indexes, and, apart, those of its memstores.
    ///
    /// ```
    /// use cellar::{Db, FamilyDescriptor, Options, Put, TableDescriptor};
    /// # let tmp = tempfile::tempdir().unwrap();
    /// let db = Db::open(tmp.path(), Options::default())?;
    /// db.create_table(TableDescriptor::new("t").family(FamilyDescriptor::new("cf")))?;
    /// let t = db.table("t")?;
    /// for i in 0..10_000 {
    ///     t.put(Put::new(format!("r{i:05}")).add("cf", "q", vec![7u8; 100]))?;
    /// }
    /// // Not flushed yet: in the memstore, estimated apart from the files.
    /// let mem = t.estimate_range(b"r05000", b"")?;
    /// assert_eq!((mem.files, mem.bytes), (0, 0));
    /// assert!(mem.memstore_cells > 4_000 && mem.memstore_cells < 6_000);
    /// db.flush()?;
    /// let all = t.estimate_range(b"", b"")?;
    /// let half = t.estimate_range(b"r05000", b"")?;
    /// assert!(half.bytes > all.bytes / 3 && half.bytes < all.bytes * 2 / 3);
    /// let split = t.split_point()?.unwrap();
    /// assert!(split > b"r03000".to_vec() && split < b"r07000".to_vec());
    /// # Ok::<(), cellar::Error>(())
    /// ```
    pub fn estimate_range(&self, start: &[u8], stop: &[u8]) -> Result<RangeEstimate> {
        let inner = &self.db.inner;
        let sv = inner.sv();
        let info = self.info(&sv)?;
        let below_stop = |r: &[u8]| stop.is_empty() || r < stop;
        let mut est = RangeEstimate::default();
        // Encoded once, for the memstores and every file the range cuts; a row too long for
        // a key makes no key and is refused.
        let bound = |at: &[u8]| -> Result<Vec<u8>> {
            let key = CellKey::first_on_row(at).encode();
            KeyRef::parse(&key)
                .map_err(|m| Error::InvalidArgument(format!("row of {} bytes: {m}", at.len())))?;
            Ok(key)
        };
        let lo = bound(start)?;
        let hi = if stop.is_empty() {
            None
        } else {
            Some(bound(stop)?)
        };
        for fam in &info.families {
            if let Some(m) = sv.mems.get(&fam.id) {
                for mem in std::iter::once(&m.active).chain(&m.frozen) {
                    let (cells, bytes) = mem.estimate_range(&lo, hi.as_deref());
                    est.memstore_cells += cells;
                    est.memstore_bytes += bytes;
                }
            }
            let Some(levels) = sv.version.levels(fam.id) else {
                continue;
            };
            for f in levels.iter().flatten() {
                let rows = Rows::of(f);
                if rows.hi < start || !below_stop(rows.lo) {
                    continue;
                }
                if rows.lo >= start && below_stop(rows.hi) {
                    est.bytes += f.size;
                    est.cells += f.entries;
                    est.files += 1;
                    continue;
                }
                let r = inner.reader(fam.id, f.number)?;
                let end = r.data_blocks_end()?;
                let offset = |key: &[u8]| -> Result<u64> {
                    // Checked by `bound`.
                    let key = KeyRef::parse(key)
                        .map_err(|m| Error::InvalidArgument(format!("range bound: {m}")))?;
                    Ok(r.data_block_for(&key)?.map_or(end, |h| h.offset))
                };
                let a = offset(&lo)?;
                let b = match &hi {
                    None => end,
                    Some(hi) => offset(hi)?,
                };
                let part = b.saturating_sub(a);
                if part == 0 {
                    continue;
                }
                // The share of the data region, applied to the whole file (index and bloom
                // grow with the data) and to its cells.
                let share =
                    |n: u64| (u128::from(n) * u128::from(part) / u128::from(end.max(1))) as u64;
                est.bytes += share(f.size);
                est.cells += share(f.entries);
                est.files += 1;
            }
        }
        Ok(est)
    }

    /// HBase's split point: the row of the midkey of the largest file of the family holding
    /// the most bytes. `None` when the table has no files or that row is its file's first
    /// (no row would split it). Memstore cells do not count: flush first.
    pub fn split_point(&self) -> Result<Option<Vec<u8>>> {
        let inner = &self.db.inner;
        let sv = inner.sv();
        let info = self.info(&sv)?;
        let largest = info
            .families
            .iter()
            .filter_map(|fam| {
                let levels = sv.version.levels(fam.id)?;
                let bytes: u64 = levels.iter().flatten().map(|f| f.size).sum();
                let file = levels.iter().flatten().max_by_key(|f| f.size)?;
                Some((bytes, fam.id, file.clone()))
            })
            .max_by_key(|(bytes, ..)| *bytes);
        let Some((_, family, file)) = largest else {
            return Ok(None);
        };
        let r = inner.reader(family, file.number)?;
        let Some(mid) = r.mid_key()? else {
            return Ok(None);
        };
        let mid_row = row(&mid);
        Ok((mid_row != row(&file.smallest)).then(|| mid_row.to_vec()))
    }
}
