//! The change feed: every committed batch after a sequence number, read back from the WAL in
//! commit order (SPEC.md §16.8), for replication and change data capture.
//!
//! [`Db::changes_since`] pins the WAL (`wal::WalPin`) at the segment holding the first batch
//! after `since`, and [`ChangeFeed::next_batch`] reads records onward from there, one batch a
//! call. A batch is handed out only once the WAL's `written` watermark (with
//! [`ChangeFeedOptions::durable_only`], the `synced` one) and the read point both cover its
//! seq: its bytes are whole in the file, and readers of the database already see it. Past the
//! last such batch `next_batch` answers `None`; called again later it goes on from where it
//! stopped, so a consumer tails the log by polling.
//!
//! Why the end of a segment is trusted: the writer finishes a segment before it creates the
//! next one, and the next one opens with a LINK naming where the previous one's data ended. So
//! end-of-data (or damage) in a segment with no successor yet is the live tail (bytes still
//! being written); in a segment that has a successor it must be exactly the LINK's end, or the
//! log is damaged (`Corruption`). The feed re-reads the old segment after it sees the
//! successor, since records may have landed between its read and its listing. In the live
//! segment, the writer's published end (`Wal::written_end`) tells damage from bytes to come:
//! no record below it, read afresh after taking it, is `Corruption` at once.
//!
//! What the feed does not carry: writes made with `Durability::SkipWal`, files loaded by
//! `Db::ingest`, and the data of table snapshot restores and clones. They take seqs (or none)
//! without WAL records; a consumer that must see them copies the data again. Schema changes
//! are in it (`schema_feed`, [`ChangeBatch::schema`]).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use rustc_hash::{FxHashMap, FxHashSet};

use super::schema_feed::{self, SchemaChange, SCHEMA_FAMILY};
use super::{Db, WriteOptions};
use crate::error::{Error, Result};
use crate::fs::File;
use crate::schema::TableName;
use crate::types::{FamilyId, SeqNo, Timestamp};
use crate::wal::record::{self, WalDecoded, WalFormat, WAL_MAX_HEADER_LEN};
use crate::wal::{self, WalPin};
use cellar_format::CellType;

/// How a [`ChangeFeed`] reads.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ChangeFeedOptions {
    /// Hand out a batch only once it is fdatasynced (survives power loss), not merely written
    /// and visible. A replica that must never hold a write the primary could lose sets this.
    pub durable_only: bool,
    /// Only the cells of this table (`ns:table` or `table`); a batch left with none is passed
    /// over. Cells of families dropped since match no table.
    pub table: Option<String>,
    /// Only the cells of rows in `[start, stop)` (an empty `stop`: to the end), as a region
    /// covers them; a batch left with none is passed over.
    pub rows: Option<(Vec<u8>, Vec<u8>)>,
}

impl ChangeFeedOptions {
    /// Only cells of `table`.
    pub fn table(mut self, table: &str) -> Self {
        self.table = Some(table.to_owned());
        self
    }

    /// The table named, once the options are checked.
    pub(super) fn check(&self) -> Result<Option<TableName>> {
        if let Some((start, stop)) = &self.rows {
            if !stop.is_empty() && start >= stop {
                return Err(Error::InvalidArgument(
                    "change feed rows: the start row must come before the stop row".into(),
                ));
            }
        }
        self.table.as_deref().map(TableName::parse).transpose()
    }

    /// Only cells of rows in `[start, stop)`.
    pub fn rows(mut self, start: impl Into<Vec<u8>>, stop: impl Into<Vec<u8>>) -> Self {
        self.rows = Some((start.into(), stop.into()));
        self
    }

    /// Only batches fdatasynced.
    pub fn durable_only(mut self, on: bool) -> Self {
        self.durable_only = on;
        self
    }
}

/// One committed batch: everything one write call wrote, whole.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChangeBatch {
    /// The batch's sequence number (every cell of it carries this one).
    pub seq: SeqNo,
    /// Its cells, in the order the batch held them.
    pub cells: Vec<ChangeCell>,
    /// The schema changes it records, in order (SPEC.md §16.10): a batch holds either cells
    /// or schema changes, never both. [`Db::apply_changes`] applies either kind.
    pub schema: Vec<SchemaChange>,
}

/// One cell of a [`ChangeBatch`]: a put or a delete marker, with its timestamp resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChangeCell {
    /// The table, or `None` when the family was dropped since the write.
    pub table: Option<TableName>,
    /// The family's name, or `None` when it was dropped since the write.
    pub family: Option<String>,
    /// The family's database-wide id (never reused: a re-created family gets a new one).
    pub family_id: FamilyId,
    /// Row key.
    pub row: Vec<u8>,
    /// Qualifier (empty for family markers).
    pub qualifier: Vec<u8>,
    /// Timestamp (as stored: the write's time for cells written at "now").
    pub timestamp: Timestamp,
    /// Put or marker kind.
    pub cell_type: CellType,
    /// Value (empty for markers).
    pub value: Vec<u8>,
    /// The cell's own TTL (`Put::ttl`), if it has one.
    pub ttl: Option<Duration>,
}

impl ChangeBatch {
    /// The same cells as a [`super::WriteBatch`] of puts and deletes at their exact
    /// timestamps: what a replica applies to reproduce the batch. Cells of dropped families
    /// are left out; a batch of schema changes gives an empty one ([`Db::apply_changes`]
    /// applies both kinds).
    pub fn to_write_batch(&self) -> super::WriteBatch {
        use super::{Delete, Put};
        let mut b = super::WriteBatch::new();
        for c in &self.cells {
            let (Some(table), Some(family)) = (&c.table, &c.family) else {
                continue;
            };
            let table = table.to_string();
            let (row, q, ts) = (c.row.clone(), c.qualifier.clone(), c.timestamp);
            b = match c.cell_type {
                CellType::Put => {
                    let mut p = Put::new(row).add_at(family, q, ts, c.value.clone());
                    if let Some(ttl) = c.ttl {
                        p = p.ttl(ttl);
                    }
                    b.put(&table, p)
                }
                CellType::Delete => b.delete(&table, Delete::new(row).column_at(family, q, ts)),
                CellType::DeleteColumn => {
                    b.delete(&table, Delete::new(row).columns_at(family, q, ts))
                }
                CellType::DeleteFamily => b.delete(&table, Delete::new(row).family_at(family, ts)),
                CellType::DeleteFamilyVersion => {
                    b.delete(&table, Delete::new(row).family_version(family, ts))
                }
            };
        }
        b
    }
}

/// What the reader found at its position in the current segment.
enum Step {
    /// A batch record: its seq, payload range in `buf`, and framed length.
    Record {
        seq: SeqNo,
        payload: std::ops::Range<usize>,
        len: usize,
    },
    /// A SEAL, skipped.
    Skip(usize),
    /// A LINK at offset 0.
    Link {
        previous: u64,
        previous_end: u64,
        len: usize,
    },
    /// End of written data.
    End,
    /// Bytes that do not decode: the live tail, or damage.
    Damaged(String),
}

/// The segment being read.
struct Segment {
    number: u64,
    path: PathBuf,
    format: WalFormat,
    file: Arc<dyn File>,
}

/// An open change feed: see the module docs. Holds the WAL segments it has yet to read on disk
/// while it lives (drop it when done).
pub struct ChangeFeed {
    db: Db,
    durable_only: bool,
    table: Option<TableName>,
    rows: Option<(Vec<u8>, Vec<u8>)>,
    pin: WalPin,
    seg: Segment,
    /// Offset of the next record in the segment.
    pos: u64,
    /// Bytes of the segment from offset `buf_at`.
    buf: Vec<u8>,
    buf_at: u64,
    /// The highest seq handed out or passed over by the filters, or `since`.
    position: SeqNo,
    /// The highest seq read from the log (handed out or skipped): seqs must increase.
    last_read: SeqNo,
    /// The seq below which (inclusive) batches may be handed out, as last learned.
    upper: SeqNo,
    /// The segment read before this one and where its data ended, for the LINK check.
    came_from: Option<(u64, u64)>,
    names: FxHashMap<FamilyId, (TableName, String)>,
    /// Families found dropped (missing from the schema when the map was last built).
    dropped: FxHashSet<FamilyId>,
}

impl std::fmt::Debug for ChangeFeed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChangeFeed")
            .field("position", &self.position)
            .field("segment", &self.seg.number)
            .field("offset", &self.pos)
            .finish()
    }
}

/// Smallest read from a segment: records are small, so one read serves many.
const READ_AHEAD: usize = 64 << 10;

fn open_segment(db: &Db, number: u64, path: PathBuf) -> Result<Segment> {
    let file = db
        .inner
        .fs
        .open(&path)
        .map_err(|e| Error::io(&path, "opening WAL segment", e))?;
    Ok(Segment {
        number,
        format: wal::segment_format(&path),
        path,
        file,
    })
}

impl Db {
    /// A feed of every batch committed after `since` (see [`ChangeFeed`]); `since` is the last
    /// seq the caller has (0 for the whole log, a write's returned seq, or
    /// [`ChangeBatch::seq`]).
    ///
    /// Fails with [`Error::ChangesUnavailable`] when the WAL no longer holds every batch after
    /// `since` (flushed segments are removed unless [`crate::wal::WalOptions::retain_bytes`]
    /// keeps them), and with `InvalidArgument` for a `since` beyond the last seq given out.
    ///
    /// ```
    /// use cellar::{Db, FamilyDescriptor, Options, Put, TableDescriptor};
    /// # let tmp = tempfile::tempdir().unwrap();
    /// let db = Db::open(tmp.path(), Options::default())?;
    /// db.create_table(TableDescriptor::new("t").family(FamilyDescriptor::new("cf")))?;
    /// let start = db.flushed_seq();
    /// let seq = db.table("t")?.put(Put::new("r").add_at("cf", "q", 7, "v"))?;
    /// let mut feed = db.changes_since(start)?;
    /// let batch = feed.next_batch()?.unwrap();
    /// assert_eq!(batch.seq, seq);
    /// assert_eq!(batch.cells[0].row, b"r");
    /// assert_eq!(batch.cells[0].family.as_deref(), Some("cf"));
    /// assert!(feed.next_batch()?.is_none()); // caught up; poll again later
    /// # Ok::<(), cellar::Error>(())
    /// ```
    pub fn changes_since(&self, since: SeqNo) -> Result<ChangeFeed> {
        self.changes_since_with(since, ChangeFeedOptions::default())
    }

    /// [`Db::changes_since`] with options.
    pub fn changes_since_with(&self, since: SeqNo, opts: ChangeFeedOptions) -> Result<ChangeFeed> {
        let table = opts.check()?;
        // Hold everything while the start is searched: nothing listed below can vanish.
        let mut pin = self.inner.wal.pin(0);
        let (number, path) = self.feed_start(since)?;
        pin.move_to(number);
        self.open_feed(pin, number, path, since, opts, table)
    }

    /// The segment a feed of every batch after `since` starts in (SPEC.md §16.8), with every
    /// segment pinned by the caller. `ChangesUnavailable` when the log no longer holds them
    /// all, `InvalidArgument` for a `since` beyond every seq given out.
    pub(super) fn feed_start(&self, since: SeqNo) -> Result<(u64, PathBuf)> {
        let inner = &self.inner;
        let given = inner.wal.watermarks().0.max(inner.visibility.read_point());
        if since > given {
            return Err(Error::InvalidArgument(format!(
                "changes since seq {since}: no seq above {given} has been given out"
            )));
        }
        let segs = wal::list_segments(&*inner.fs, inner.wal.dir())?;
        let Some(last) = segs.last().cloned() else {
            return Err(Error::Corruption {
                file: inner.wal.dir().to_path_buf(),
                offset: 0,
                what: "the WAL directory holds no segment".into(),
            });
        };
        // Forget removed segments (numbers are never reused): the cache is as small as the log.
        inner.feed_first_seqs.lock().retain(|&n, _| n >= segs[0].0);
        // The segment to start in: the last whose first batch is at or below since + 1.
        let mut start: Option<(u64, PathBuf)> = None;
        let mut oldest: Option<SeqNo> = None;
        for (n, path) in &segs {
            let Some(first) = self.first_seq(*n, path)? else {
                continue;
            };
            oldest.get_or_insert(first);
            if first > since.saturating_add(1) {
                break;
            }
            start = Some((*n, path.clone()));
        }
        // No batch at or below since + 1 is held: the feed is whole only if none after `since`
        // existed before the oldest one held (or, with none held, before the next to come).
        let floor = oldest.unwrap_or(given.saturating_add(1));
        if start.is_none() && since.saturating_add(1) < floor {
            return Err(Error::ChangesUnavailable {
                since,
                oldest: floor - 1,
            });
        }
        // With no start found and no error, no segment holds a batch: begin at the newest.
        Ok(start.unwrap_or(last))
    }

    /// A feed reading segment `number` from its start, handing out batches after `since`;
    /// `pin` holds that segment.
    pub(super) fn open_feed(
        &self,
        pin: WalPin,
        number: u64,
        path: PathBuf,
        since: SeqNo,
        opts: ChangeFeedOptions,
        table: Option<TableName>,
    ) -> Result<ChangeFeed> {
        let upper = self.feed_upper(opts.durable_only);
        let seg = open_segment(self, number, path)?;
        Ok(ChangeFeed {
            db: self.clone(),
            durable_only: opts.durable_only,
            table,
            rows: opts.rows,
            pin,
            seg,
            pos: 0,
            buf: Vec::new(),
            buf_at: 0,
            position: since,
            last_read: 0,
            upper,
            came_from: None,
            names: FxHashMap::default(),
            dropped: FxHashSet::default(),
        })
    }

    /// The seq of segment `number`'s first batch record, if it holds one: read once per
    /// process for a finished segment (its first record never changes), every time for the
    /// live one (whose first record may be yet to come).
    pub(super) fn first_seq(&self, number: u64, path: &std::path::Path) -> Result<Option<SeqNo>> {
        let inner = &self.inner;
        if let Some(&first) = inner.feed_first_seqs.lock().get(&number) {
            return Ok(first);
        }
        // Finished before the read (not after it: a live segment read empty may take
        // records and be finished by the time the read returns).
        let finished = number < inner.wal.current_segment();
        // Likewise where the writer's data ended: below it, the live segment holds records.
        let written = match inner.wal.written_end() {
            (segment, end) if segment == number => end,
            _ => 0,
        };
        let first = match first_seq(self, number, path, written)? {
            First::Seq(seq) => Some(seq),
            First::NoneAt(pos) if finished => {
                self.check_finished_end(number, path, pos)?;
                None
            }
            First::NoneAt(_) => None,
        };
        if finished {
            inner.feed_first_seqs.lock().insert(number, first);
        }
        Ok(first)
    }

    /// A finished segment `number` with no batch record before `pos`, where its data ends
    /// (end marker, or bytes that do not decode): `Corruption` if its successor's LINK says the
    /// data goes on past `pos` (a torn first record left by a crash is cut there, and the LINK
    /// names the cut). A successor without a LINK (or none) tells nothing.
    fn check_finished_end(&self, number: u64, path: &std::path::Path, pos: u64) -> Result<()> {
        let inner = &self.inner;
        let next = wal::list_segments(&*inner.fs, inner.wal.dir())?
            .into_iter()
            .find(|(n, _)| *n > number);
        let Some((succ, succ_path)) = next else {
            return Ok(());
        };
        let seg = open_segment(self, succ, succ_path)?;
        let mut r = Reader::new(&seg);
        match r.step(0)? {
            Step::Link {
                previous,
                previous_end,
                ..
            } if previous == number && previous_end > pos => Err(Error::Corruption {
                file: path.to_path_buf(),
                offset: pos,
                what: format!(
                    "no readable record, but segment {succ}'s LINK says the data ends at \
                     offset {previous_end}"
                ),
            }),
            _ => Ok(()),
        }
    }

    /// Apply one batch of another database's change feed here (a replica): its schema
    /// changes with [`Db::apply_schema_change`], or its cells as one write
    /// ([`ChangeBatch::to_write_batch`]) with `opts`. Returns the write's seq, if it wrote.
    ///
    /// Delivery from a feed is at least once (a consumer restarting re-reads what it had not
    /// acknowledged); a replica that must apply each batch once keeps the last seq applied
    /// with the data and skips up to it (SPEC.md §16.9).
    pub fn apply_changes(&self, batch: &ChangeBatch, opts: WriteOptions) -> Result<Option<SeqNo>> {
        for c in &batch.schema {
            self.apply_schema_change(c)?;
        }
        if batch.cells.is_empty() {
            return Ok(None);
        }
        self.write(batch.to_write_batch(), opts).map(Some)
    }

    /// The highest seq a feed may hand out now: covered by the WAL's watermark and the read
    /// point (an `AsyncWal` write is visible before it is written, a `SyncWal` one written
    /// before it is visible).
    fn feed_upper(&self, durable_only: bool) -> SeqNo {
        let (written, synced) = self.inner.wal.watermarks();
        let wal = if durable_only { synced } else { written };
        wal.min(self.inner.visibility.read_point())
    }
}

/// The seq of the first batch record of a segment, if it holds one (a segment may hold only
/// its LINK, or a SEAL). `written`: where the writer had written the segment up to before
/// the read (0 when not known): no record below it is `Corruption`, not a record yet to come
/// (which would make the log seem to start later: `ChangesUnavailable`).
fn first_seq(db: &Db, number: u64, path: &std::path::Path, written: u64) -> Result<First> {
    let seg = open_segment(db, number, path.to_path_buf())?;
    let mut r = Reader::new(&seg);
    let mut pos = 0u64;
    loop {
        match r.step(pos)? {
            Step::Record { seq, .. } => return Ok(First::Seq(seq)),
            Step::Skip(len) | Step::Link { len, .. } => pos += len as u64,
            Step::End | Step::Damaged(_) if pos >= written => return Ok(First::NoneAt(pos)),
            Step::End | Step::Damaged(_) => {
                return Err(Error::Corruption {
                    file: path.to_path_buf(),
                    offset: pos,
                    what: format!(
                        "no readable record where the writer had written up to offset {written} \
                         (in the live segment)"
                    ),
                })
            }
        }
    }
}

/// What [`first_seq`] found.
enum First {
    /// The first batch record's seq.
    Seq(SeqNo),
    /// No batch record before this offset, where the readable data ends.
    NoneAt(u64),
}

/// Decoding at an offset of a segment through a read-ahead buffer.
struct Reader<'a> {
    seg: &'a Segment,
    buf: Vec<u8>,
    buf_at: u64,
    /// Whether the last `step` read its bytes from the file (rather than the buffer, which
    /// may predate records written since).
    fresh: bool,
}

impl<'a> Reader<'a> {
    /// A reader of `seg` with nothing buffered: its first step reads the file.
    fn new(seg: &'a Segment) -> Self {
        Reader {
            seg,
            buf: Vec::new(),
            buf_at: 0,
            fresh: false,
        }
    }
}

impl Reader<'_> {
    /// Make `buf` hold `[pos, pos + need)` where the file has those bytes (fewer at its end).
    fn fill(&mut self, pos: u64, need: usize) -> Result<()> {
        let have_end = self.buf_at + self.buf.len() as u64;
        if pos >= self.buf_at && pos + need as u64 <= have_end {
            return Ok(());
        }
        self.fresh = true;
        let path = &self.seg.path;
        let len = self
            .seg
            .file
            .len()
            .map_err(|e| Error::io(path, "reading WAL segment length", e))?;
        let n = need.max(READ_AHEAD) as u64;
        let n = n.min(len.saturating_sub(pos));
        let n = usize::try_from(n).map_err(|_| Error::Corruption {
            file: path.clone(),
            offset: pos,
            what: "segment larger than the address space".into(),
        })?;
        self.buf.clear();
        self.buf.resize(n, 0);
        self.buf_at = pos;
        self.seg
            .file
            .read_exact_at(&mut self.buf, pos)
            .map_err(|e| Error::io(path, "reading WAL segment", e))
    }

    #[inline]
    fn step(&mut self, pos: u64) -> Result<Step> {
        self.fresh = false;
        self.fill(pos, WAL_MAX_HEADER_LEN)?;
        let off = (pos - self.buf_at) as usize;
        if let Some(len) = record::peek_wal_len(self.seg.format, &self.buf[off..]) {
            self.fill(pos, len)?;
        }
        let off = (pos - self.buf_at) as usize;
        let data = &self.buf[off..];
        Ok(
            match record::decode_wal(self.seg.format, data, self.seg.number) {
                Ok(WalDecoded::Record(r)) => {
                    let start = off + (r.payload.as_ptr() as usize - data.as_ptr() as usize);
                    Step::Record {
                        seq: r.seq,
                        payload: start..start + r.payload.len(),
                        len: r.len,
                    }
                }
                Ok(WalDecoded::Seal { len, .. }) => Step::Skip(len),
                Ok(WalDecoded::Link {
                    previous,
                    previous_end,
                    len,
                }) => {
                    if pos == 0 {
                        Step::Link {
                            previous,
                            previous_end,
                            len,
                        }
                    } else {
                        Step::Damaged("link record inside the segment".into())
                    }
                }
                Ok(WalDecoded::End) => Step::End,
                Err(e) => Step::Damaged(e.to_string()),
            },
        )
    }
}

impl ChangeFeed {
    /// The last seq handed out or passed over by the options' filters (or the `since` the
    /// feed began after): where a consumer that stops now resumes with [`Db::changes_since`].
    pub fn position(&self) -> SeqNo {
        self.position
    }

    /// [`ChangeFeed::next_batch`], waiting up to `timeout` for a batch to be committed when
    /// the feed has caught up: a consumer tailing the log calls this in a loop instead of
    /// polling. `None` once `timeout` passed without one (or with only batches the options
    /// filter out). Wakes when a write becomes visible; a visible batch whose bytes the feed
    /// may not read yet (an `AsyncWal` write not yet written by the WAL's thread, or one not
    /// yet fsynced under `durable_only`) is looked for again after short naps.
    ///
    /// ```
    /// use cellar::{Db, FamilyDescriptor, Options, Put, TableDescriptor};
    /// use std::time::Duration;
    /// # let tmp = tempfile::tempdir().unwrap();
    /// let db = Db::open(tmp.path(), Options::default())?;
    /// db.create_table(TableDescriptor::new("t").family(FamilyDescriptor::new("cf")))?;
    /// let mut feed = db.changes_since(db.flushed_seq())?;
    /// let writer = {
    ///     let db = db.clone();
    ///     std::thread::spawn(move || db.table("t")?.put(Put::new("r").add("cf", "q", "v")))
    /// };
    /// let batch = feed.next_batch_wait(Duration::from_secs(10))?.expect("the put came");
    /// assert_eq!(batch.seq, writer.join().unwrap()?);
    /// assert!(feed.next_batch_wait(Duration::from_millis(10))?.is_none());
    /// # Ok::<(), cellar::Error>(())
    /// ```
    pub fn next_batch_wait(&mut self, timeout: Duration) -> Result<Option<ChangeBatch>> {
        let deadline = std::time::Instant::now() + timeout;
        let mut nap = Duration::from_micros(50);
        loop {
            // Taken before the look: if the log covered the read point then, the look hands
            // out everything visible then, and only a later write can bring more.
            let visible = self.db.inner.visibility.read_point();
            let covered = self.db.feed_upper(self.durable_only) >= visible;
            if let Some(b) = self.next_batch()? {
                return Ok(Some(b));
            }
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                return Ok(None);
            }
            if covered {
                if !self.db.inner.visibility.wait_above(visible, left)? {
                    return Ok(None);
                }
                nap = Duration::from_micros(50);
            } else {
                std::thread::sleep(nap.min(left));
                nap = (nap * 2).min(Duration::from_millis(5));
            }
        }
    }

    /// The next committed batch, or `None` when every batch visible so far was handed out
    /// (call again later to follow the log). `Corruption` when the log is damaged where it
    /// was finished, or seqs do not increase.
    pub fn next_batch(&mut self) -> Result<Option<ChangeBatch>> {
        loop {
            let mut r = Reader {
                seg: &self.seg,
                buf: std::mem::take(&mut self.buf),
                buf_at: self.buf_at,
                fresh: false,
            };
            let step = r.step(self.pos);
            let fresh = r.fresh;
            (self.buf, self.buf_at) = (r.buf, r.buf_at);
            match step? {
                Step::Record { seq, payload, len } => {
                    if seq <= self.last_read {
                        return Err(self.corruption(format!(
                            "seq {seq} does not follow seq {}",
                            self.last_read
                        )));
                    }
                    if seq <= self.position {
                        self.last_read = seq;
                        self.pos += len as u64;
                        continue;
                    }
                    if seq > self.upper {
                        self.upper = self.db.feed_upper(self.durable_only);
                        if seq > self.upper {
                            return Ok(None);
                        }
                    }
                    let (cells, schema) = self.decode(seq, payload)?;
                    self.last_read = seq;
                    self.position = seq;
                    self.pos += len as u64;
                    if !cells.is_empty() || !schema.is_empty() {
                        return Ok(Some(ChangeBatch { seq, cells, schema }));
                    }
                }
                Step::Skip(len) => self.pos += len as u64,
                Step::Link {
                    previous,
                    previous_end,
                    len,
                } => {
                    if let Some((prev, end)) = self.came_from {
                        if (previous, previous_end) != (prev, end) {
                            return Err(self.corruption(format!(
                                "segment {} follows segment {previous} up to offset \
                                 {previous_end}, but the log read segment {prev} up to {end}",
                                self.seg.number
                            )));
                        }
                    }
                    self.pos += len as u64;
                }
                // Buffered bytes of the tail may predate records written since: look again.
                Step::End | Step::Damaged(_) if !fresh => self.buf.clear(),
                // The live tail, or the end of a finished segment: `next_segment` tells.
                Step::End | Step::Damaged(_) => {
                    self.check_live_tail()?;
                    if !self.next_segment()? {
                        return Ok(None);
                    }
                }
            }
        }
    }

    /// No record at the feed's offset, read afresh: damage if the writer had written past it.
    /// The writer publishes where its data ends ([`crate::wal::Wal::written_end`]); taken
    /// before a second fresh read, an end past the offset in this segment means the bytes
    /// there were whole records before that read, so a read that still finds none is
    /// `Corruption` now, not a tail to wait on until the segment is finished (which may be
    /// long: segments roll by size or at flushes). Records that landed meanwhile are read
    /// as usual.
    fn check_live_tail(&mut self) -> Result<()> {
        let (segment, end) = self.db.inner.wal.written_end();
        if segment != self.seg.number || self.pos >= end {
            return Ok(());
        }
        self.buf.clear();
        let mut r = Reader::new(&self.seg);
        match r.step(self.pos)? {
            Step::End => Err(self.corruption(format!(
                "no record where the writer had written up to offset {end} (in the live segment)"
            ))),
            Step::Damaged(what) => Err(self.corruption(format!(
                "{what} (in the live segment, which the writer had written up to offset {end})"
            ))),
            _ => Ok(()),
        }
    }

    /// At the end of the current segment's readable data: move to the next segment if the
    /// writer has started one (then this one is finished). Returns whether the feed moved.
    fn next_segment(&mut self) -> Result<bool> {
        // Bytes at the tail may be written yet: the next look reads them afresh.
        self.buf.clear();
        // The live segment has no successor: a caught-up feed polling the tail lists no
        // directory.
        if self.db.inner.wal.current_segment() <= self.seg.number {
            return Ok(false);
        }
        let next = wal::list_segments(&*self.db.inner.fs, self.db.inner.wal.dir())?
            .into_iter()
            .find(|(n, _)| *n > self.seg.number);
        let Some((number, path)) = next else {
            return Ok(false);
        };
        // The segment is finished now; what this read found may predate its last records.
        let mut r = Reader::new(&self.seg);
        match r.step(self.pos)? {
            Step::End => {}
            Step::Damaged(what) => {
                return Err(self.corruption(format!("{what} (in a finished segment)")));
            }
            // Records landed since: read them first.
            _ => return Ok(true),
        }
        self.came_from = Some((self.seg.number, self.pos));
        self.seg = open_segment(&self.db, number, path)?;
        self.pos = 0;
        self.pin.move_to(number);
        Ok(true)
    }

    fn corruption(&self, what: String) -> Error {
        Error::Corruption {
            file: self.seg.path.clone(),
            offset: self.pos,
            what,
        }
    }

    fn decode(
        &mut self,
        seq: SeqNo,
        payload: std::ops::Range<usize>,
    ) -> Result<(Vec<ChangeCell>, Vec<SchemaChange>)> {
        let muts = crate::batch::decode(&self.buf[payload], self.seg.format)
            .map_err(|what| self.corruption(format!("batch of seq {seq}: {what}")))?;
        // Schema records hold nothing else (`schema_feed`).
        if muts.first().is_some_and(|m| m.family == SCHEMA_FAMILY) {
            return Ok((Vec::new(), self.decode_schema(seq, &muts)?));
        }
        // A family missing after a look at the schema was dropped for good (ids are never
        // reused): the log of a dropped table does not rebuild the map at every batch.
        let known = |m: &crate::batch::MutationRef<'_>| {
            self.names.contains_key(&m.family) || self.dropped.contains(&m.family)
        };
        if !muts.iter().all(known) {
            self.names = family_names(&self.db);
            for m in &muts {
                if !self.names.contains_key(&m.family) {
                    self.dropped.insert(m.family);
                }
            }
        }
        let in_rows = |row: &[u8]| {
            self.rows.as_ref().is_none_or(|(start, stop)| {
                row >= start.as_slice() && (stop.is_empty() || row < stop.as_slice())
            })
        };
        let cells = muts
            .into_iter()
            .filter_map(|m| {
                let named = self.names.get(&m.family);
                if let Some(t) = &self.table {
                    if named.is_none_or(|(name, _)| name != t) {
                        return None;
                    }
                }
                if !in_rows(m.row) {
                    return None;
                }
                Some(ChangeCell {
                    table: named.map(|(t, _)| t.clone()),
                    family: named.map(|(_, f)| f.clone()),
                    family_id: m.family,
                    row: m.row.to_vec(),
                    qualifier: m.qualifier.to_vec(),
                    timestamp: m.timestamp,
                    cell_type: m.cell_type,
                    value: m.value.to_vec(),
                    ttl: crate::tags::cell_ttl(m.tags).map(Duration::from_millis),
                })
            })
            .collect();
        Ok((cells, Vec::new()))
    }

    /// The changes of a schema record (rare: kept out of the per-batch path).
    #[cold]
    #[inline(never)]
    fn decode_schema(
        &self,
        seq: SeqNo,
        muts: &[crate::batch::MutationRef<'_>],
    ) -> Result<Vec<SchemaChange>> {
        let mut schema = Vec::new();
        for m in muts {
            if m.family != SCHEMA_FAMILY {
                return Err(self.corruption(format!(
                    "batch of seq {seq}: a schema record with a cell of family {}",
                    m.family
                )));
            }
            let change = schema_feed::decode(m)
                .map_err(|what| self.corruption(format!("schema record of seq {seq}: {what}")))?;
            let wanted = match (&self.table, change.table()) {
                (None, _) => true,
                (Some(t), Some(c)) => t == c,
                (Some(_), None) => false,
            };
            if wanted {
                schema.push(change);
            }
        }
        Ok(schema)
    }
}

fn family_names(db: &Db) -> FxHashMap<FamilyId, (TableName, String)> {
    let sv = db.inner.sv();
    sv.tables
        .iter()
        .flat_map(|(t, info)| {
            info.families
                .iter()
                .map(move |f| (f.id, (t.clone(), f.descriptor.name.clone())))
        })
        .collect()
}
