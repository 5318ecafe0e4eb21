//! Small shared types of the engine.

/// Sequence number of a write batch: assigned by the WAL in log order, 1 upward. A read at
/// read point `P` sees exactly the batches with `seq <= P`.
pub type SeqNo = u64;

/// Number of a file (HFile or manifest) in the database directory, never reused.
pub type FileNumber = u64;

/// Identifier of a table, never reused within a database.
pub type TableId = u32;

/// Identifier of a column family, unique across the whole database (not per table), never
/// reused: files, memstores and WAL records name families by it.
pub type FamilyId = u32;

/// Cell timestamp in milliseconds since the Unix epoch (HBase's convention).
pub type Timestamp = u64;

/// "Assign the current time when the write is applied" (HBase's LATEST_TIMESTAMP).
pub const LATEST_TIMESTAMP: Timestamp = u64::MAX;

/// Current wall-clock time in milliseconds.
pub fn now_ms() -> Timestamp {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// What the manifest records of one HFile.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileMeta {
    /// File number; the file is `{number:06}.hfile` in the family's directory.
    pub number: FileNumber,
    /// Family the file belongs to.
    pub family: FamilyId,
    /// LSM level (0 = flush output, overlapping).
    pub level: u32,
    /// Size in bytes.
    pub size: u64,
    /// First cell key (encoded, SPEC.md §3.1).
    pub smallest: Vec<u8>,
    /// Last cell key (encoded).
    pub largest: Vec<u8>,
    /// Smallest sequence number in the file.
    pub min_seq: SeqNo,
    /// Largest sequence number in the file.
    pub max_seq: SeqNo,
    /// Smallest cell timestamp.
    pub min_ts: Timestamp,
    /// Largest cell timestamp.
    pub max_ts: Timestamp,
    /// Number of cells.
    pub entries: u64,
    /// Number of delete markers among them (the picker's tombstone density).
    pub deletes: u64,
    /// When the file was written, ms since the epoch (periodic major compaction ages by it).
    pub created_ms: u64,
    /// CRC-32C of the whole file, as its writer computed it (`None` for files written before
    /// the manifest recorded it): backups copy and check files by it.
    pub crc: Option<u32>,
    /// Every cell a row-range delete of the family with seq at or below this masks is absent
    /// from the file (0: not known). A compaction of a classic family with KEEP_DELETED_CELLS
    /// FALSE sets it on its outputs (SPEC.md §17.3 `file_range_clean`); the range-delete
    /// trigger rewrites a file the deletes partly cover only for deletes above it, so a
    /// rewritten file is not picked again.
    pub range_clean: SeqNo,
}

/// A row-range delete of one family (SPEC.md §13 rule 8): to every row in `[start, stop)`
/// it is what a DeleteFamily marker at `ts`, written at `seq`, is to one row. It lives in the
/// manifest, not in files, until a major compaction has removed what it masks (§20.2).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RangeDelete {
    /// First row covered.
    pub start: Vec<u8>,
    /// First row past the range; empty for "to the end of the table".
    pub stop: Vec<u8>,
    /// Cells at or below this timestamp are masked.
    pub ts: Timestamp,
    /// The write's sequence number: readers at a lower read point do not see it.
    pub seq: SeqNo,
}

impl RangeDelete {
    /// Whether `row` is in `[start, stop)`.
    #[inline]
    pub fn covers(&self, row: &[u8]) -> bool {
        row >= self.start.as_slice() && (self.stop.is_empty() || row < self.stop.as_slice())
    }
}

/// A cursor over cells in key order (SPEC.md §3.2), the one interface the read path merges:
/// memstores and HFiles both provide it, in both directions (reversed scans walk backward).
/// Verbs as everywhere in Cellar.
pub trait CellIter {
    /// Position on the first cell whose key is `>= target` (an encoded key).
    fn seek(&mut self, target: &[u8]) -> crate::Result<()>;
    /// Position on the last cell whose key is `<= target` (an encoded key).
    fn seek_for_prev(&mut self, target: &[u8]) -> crate::Result<()>;
    /// Position on the first cell.
    fn seek_to_first(&mut self) -> crate::Result<()>;
    /// Position on the last cell.
    fn seek_to_last(&mut self) -> crate::Result<()>;
    /// Advance.
    fn next(&mut self) -> crate::Result<()>;
    /// Step back to the previous cell (invalid before the first).
    fn prev(&mut self) -> crate::Result<()>;
    /// Advance within the current cell's row, whose row is `row_len` bytes long: false when
    /// the next cell is known to be of another row, the cursor then left where it is (a
    /// reader of one row stops there); true once advanced (the cell reached may still be of
    /// another row). Cursors over files override it to tell from the next entry's encoding
    /// without decoding it.
    fn next_in_row(&mut self, row_len: usize) -> crate::Result<bool> {
        let _ = row_len;
        self.next()?;
        Ok(true)
    }

    /// True when positioned on a cell.
    fn valid(&self) -> bool;
    /// Current encoded key.
    fn key(&self) -> &[u8];
    /// Current value.
    fn value(&self) -> &[u8];
    /// Current cell's tags (SPEC.md §3.4); empty for sources that keep none. Compaction
    /// carries them to its outputs.
    fn tags(&self) -> &[u8] {
        &[]
    }
    /// The current cell's key, value and tags in one call, `None` when not valid: what a
    /// scan reads of every cell, without walking the layers of a merge once per field.
    fn current(&self) -> Option<cellar_format::CellEntry<'_>> {
        self.valid().then(|| cellar_format::CellEntry {
            key: self.key(),
            value: self.value(),
            tags: self.tags(),
            last_in_row: false,
        })
    }

    /// Hand `f` the current cell and each one after it, moving on with `next` after every
    /// cell it returns true for; returns when `f` returns false (positioned on that cell) or
    /// the cursor is exhausted. The cells and positions of `current` and `next` in a loop
    /// ([`run_by_steps`]): cursors over files override it to loop inside a data block, where
    /// a scan's cell otherwise walked every layer twice (`next`, then `current`).
    fn run_forward(
        &mut self,
        f: &mut dyn FnMut(cellar_format::CellEntry<'_>) -> bool,
    ) -> crate::Result<()> {
        run_by_steps(self, f)
    }
}

/// [`CellIter::run_forward`] as `current` and `next` in a loop: the default, and what an
/// override falls back on where it has no faster way.
pub fn run_by_steps<I: CellIter + ?Sized>(
    it: &mut I,
    f: &mut dyn FnMut(cellar_format::CellEntry<'_>) -> bool,
) -> crate::Result<()> {
    while let Some(e) = it.current() {
        if !f(e) {
            return Ok(());
        }
        it.next()?;
    }
    Ok(())
}
