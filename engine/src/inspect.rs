//! Read-only inspection of a database directory, for operator tools (`cellar levels`,
//! `manifest-dump`, `wal-dump`, `verify`).
//!
//! Opening a database changes its directory: [`Manifest::open`](crate::manifest::Manifest::open)
//! writes a new manifest and CURRENT, and the WAL cuts a torn tail and starts a new segment.
//! A tool that looks at a damaged or live database must not do any of that, so the functions
//! here only ever open files for reading, take no lock, and work while a `Db` has the directory
//! open (they then see the state as of the last durable manifest edit and WAL write).
//!
//! - [`manifest_edits`]: every record of the manifest CURRENT names, decoded, in order.
//! - [`read_manifest`] / [`replay_manifest`]: the [`ManifestState`] those edits build, with the
//!   same checks as the engine's replay (the first record is a snapshot, every edit applies).
//! - [`wal_records`]: every record of every WAL segment, with its position and its batch
//!   decoded into mutations.
//! - [`read_table_snapshots`]: every table snapshot's descriptor, with its files.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::batch;
use crate::error::{Error, Result};
use crate::fs::{File, FileSystem};
use crate::manifest::{self, current, LogSummary, ManifestState, VersionEdit};
use crate::types::SeqNo;
use crate::wal::record::{self, WalDecoded, WAL_MAX_HEADER_LEN};
use crate::wal::{self, list_segments};

/// One record of a manifest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoggedEdit {
    /// Byte offset of the record in the manifest file.
    pub offset: u64,
    /// The decoded edit.
    pub edit: VersionEdit,
}

/// The manifest CURRENT names, decoded record by record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ManifestLog {
    /// Manifest number (`MANIFEST-{number:06}`).
    pub number: u64,
    /// Its path.
    pub path: PathBuf,
    /// Every edit, in file order (the first is the snapshot).
    pub edits: Vec<LoggedEdit>,
    /// Records, valid bytes and any torn tail (an unacknowledged last edit, ignored).
    pub summary: LogSummary,
}

/// Read CURRENT and decode every record of the manifest it names. Nothing is applied, so an
/// edit that would not apply is still listed ([`replay_manifest`] reports it).
///
/// Errors: `Io` (CURRENT or the manifest missing or unreadable), `Corruption` (CURRENT does not
/// name a manifest, a damaged record that is not a torn tail, an undecodable edit).
pub fn manifest_edits(fs: &dyn FileSystem, dir: &Path) -> Result<ManifestLog> {
    let number = current::read_current(fs, dir)?;
    let path = dir.join(manifest::manifest_file_name(number));
    let mut edits = Vec::new();
    let summary = manifest::log::read_log(fs, &path, number, |offset, edit| {
        edits.push(LoggedEdit { offset, edit });
        Ok(())
    })?;
    Ok(ManifestLog {
        number,
        path,
        edits,
        summary,
    })
}

/// Apply a decoded manifest as the engine's replay does: the first record must be a snapshot
/// and every edit must apply to the state before it (`Corruption` naming the record otherwise).
pub fn replay_manifest(log: &ManifestLog) -> Result<ManifestState> {
    let mut state = ManifestState::empty();
    for e in &log.edits {
        if e.offset == 0 && !manifest::is_snapshot(&e.edit) {
            return Err(Error::Corruption {
                file: log.path.clone(),
                offset: 0,
                what: "the first record is not a snapshot (a counter is missing)".into(),
            });
        }
        state.apply_replayed(&e.edit, &log.path, e.offset)?;
    }
    Ok(state)
}

/// The state the manifest of the database in `dir` describes, read without writing anything
/// (unlike [`Manifest::open`](crate::manifest::Manifest::open), which starts a new manifest).
pub fn read_manifest(fs: &dyn FileSystem, dir: &Path) -> Result<ManifestState> {
    replay_manifest(&manifest_edits(fs, dir)?)
}

/// The length and CRC-32C of the whole file at `path` (what the manifest's `file_crc` records
/// of an HFile, SPEC.md §17.3).
pub fn file_crc32c(fs: &dyn FileSystem, path: &Path) -> Result<(u64, u32)> {
    crate::db::file_crc(fs, path)
}

pub use crate::db::{read_table_snapshots, StoredSnapshot};

/// The directory of the WAL segments of the database in `dir`.
pub fn wal_dir(dir: &Path) -> PathBuf {
    dir.join(crate::db::WAL_DIR)
}

/// Kind of a WAL record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WalEntryKind {
    /// A write batch.
    Batch,
    /// A clean close's seal: the segment was durable up to `synced_upto`. Carries no data.
    Seal,
    /// The head of a segment that follows another: see [`WalEntry::link`]. Carries no data.
    Link,
}

impl WalEntryKind {
    /// `BATCH`, `SEAL` or `LINK`.
    pub fn name(self) -> &'static str {
        match self {
            WalEntryKind::Batch => "BATCH",
            WalEntryKind::Seal => "SEAL",
            WalEntryKind::Link => "LINK",
        }
    }
}

/// One record of the WAL, as [`wal_records`] yields it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WalEntry {
    /// Segment number.
    pub segment: u64,
    /// Record layout of its segment (from the segment's file name).
    pub format: wal::WalFormat,
    /// Byte offset of the record in its segment.
    pub offset: u64,
    /// Bytes the record occupies (header and payload).
    pub len: u64,
    /// Batch or seal.
    pub kind: WalEntryKind,
    /// Sequence number of the batch (0 for a seal).
    pub seq: SeqNo,
    /// Segment offset an fdatasync had covered when the record was written.
    pub synced_upto: u64,
    /// The batch's mutations (empty for a seal and a link).
    pub mutations: Vec<batch::Mutation>,
    /// A link's previous segment and the offset where that segment's data ended.
    pub link: Option<(u64, u64)>,
}

/// Iterator over the WAL records of a database; see [`wal_records`].
#[derive(Debug)]
pub struct WalRecords<'a> {
    fs: &'a dyn FileSystem,
    segments: std::vec::IntoIter<(u64, PathBuf)>,
    current: Option<Segment>,
}

#[derive(Debug)]
struct Segment {
    number: u64,
    format: wal::WalFormat,
    path: PathBuf,
    file: Arc<dyn File>,
    len: u64,
    pos: u64,
    buf: Vec<u8>,
}

/// Every record of every WAL segment of the database in `dir`, segments by increasing number,
/// records in file order, read-only.
///
/// Unlike replay, this neither checks that sequence numbers increase nor decides whether damage
/// is a torn tail (use [`wal::replay`] for that): it shows what is there. Damage is yielded as
/// an `Err` and reading goes on: after a record whose batch does not decode, at the next record
/// (its framing was valid); after damaged framing, at the next segment (nothing in the rest of
/// the segment can be trusted to start a record). I/O errors are yielded the same way.
pub fn wal_records<'a>(fs: &'a dyn FileSystem, dir: &Path) -> Result<WalRecords<'a>> {
    let segments = list_segments(fs, &wal_dir(dir))?;
    Ok(WalRecords {
        fs,
        segments: segments.into_iter(),
        current: None,
    })
}

impl Segment {
    /// Read `n` bytes at the current position (fewer at the end of the file) into `buf`.
    fn load(&mut self, n: usize) -> Result<()> {
        let avail = self.len.saturating_sub(self.pos);
        let n = n.min(usize::try_from(avail).unwrap_or(usize::MAX));
        self.buf.resize(n, 0);
        self.file
            .read_exact_at(&mut self.buf, self.pos)
            .map_err(|e| Error::io(&self.path, "reading WAL segment", e))
    }

    /// The next record, `None` at the end of the segment's data.
    fn next_entry(&mut self) -> Result<Option<WalEntry>> {
        self.load(WAL_MAX_HEADER_LEN)?;
        if let Some(len) = record::peek_wal_len(self.format, &self.buf) {
            self.load(len)?;
        }
        let offset = self.pos;
        let corruption = |what: String| Error::Corruption {
            file: self.path.clone(),
            offset,
            what,
        };
        match record::decode_wal(self.format, &self.buf, self.number) {
            Ok(WalDecoded::End) => Ok(None),
            Ok(WalDecoded::Seal { synced_upto, len }) => {
                self.pos += len as u64;
                Ok(Some(WalEntry {
                    segment: self.number,
                    format: self.format,
                    offset,
                    len: len as u64,
                    kind: WalEntryKind::Seal,
                    seq: 0,
                    synced_upto,
                    mutations: Vec::new(),
                    link: None,
                }))
            }
            Ok(WalDecoded::Link {
                previous,
                previous_end,
                len,
            }) => {
                self.pos += len as u64;
                Ok(Some(WalEntry {
                    segment: self.number,
                    format: self.format,
                    offset,
                    len: len as u64,
                    kind: WalEntryKind::Link,
                    seq: 0,
                    synced_upto: 0,
                    mutations: Vec::new(),
                    link: Some((previous, previous_end)),
                }))
            }
            Ok(WalDecoded::Record(r)) => {
                // Advance first: a batch that does not decode still has valid framing, so the
                // next record is found after it.
                self.pos += r.len as u64;
                let muts = batch::decode(r.payload, self.format)
                    .map_err(|what| corruption(format!("batch of seq {}: {what}", r.seq)))?;
                Ok(Some(WalEntry {
                    segment: self.number,
                    format: self.format,
                    offset,
                    len: r.len as u64,
                    kind: WalEntryKind::Batch,
                    seq: r.seq,
                    synced_upto: r.synced_upto,
                    mutations: muts.iter().map(batch::MutationRef::to_mutation).collect(),
                    link: None,
                }))
            }
            Err(e) => {
                // The framing is damaged: stop this segment.
                self.pos = self.len;
                Err(corruption(e.to_string()))
            }
        }
    }
}

impl Iterator for WalRecords<'_> {
    type Item = Result<WalEntry>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if self.current.is_none() {
                let (number, path) = self.segments.next()?;
                let opened = self
                    .fs
                    .open(&path)
                    .and_then(|f| f.len().map(|len| (f, len)));
                match opened {
                    Ok((file, len)) => {
                        self.current = Some(Segment {
                            number,
                            format: wal::segment_format(&path),
                            path,
                            file,
                            len,
                            pos: 0,
                            buf: Vec::new(),
                        })
                    }
                    Err(e) => return Some(Err(Error::io(&path, "opening WAL segment", e))),
                }
            }
            let seg = self.current.as_mut()?;
            match seg.next_entry() {
                Ok(Some(e)) => return Some(Ok(e)),
                Ok(None) => self.current = None,
                Err(e) => {
                    if seg.pos >= seg.len {
                        self.current = None;
                    }
                    return Some(Err(e));
                }
            }
        }
    }
}

/// What a read-only replay of the WAL as the engine's open would do finds: the segments from
/// the manifest's `log_number` on, under [`wal::RecoveryMode::TolerateTornTail`]. `Corruption`
/// means the database would not open.
pub fn check_wal(fs: &dyn FileSystem, dir: &Path, log_number: u64) -> Result<wal::ReplaySummary> {
    wal::replay(
        fs,
        &wal_dir(dir),
        log_number,
        wal::RecoveryMode::TolerateTornTail,
        |seq, payload, format| {
            batch::decode(payload, format)
                .map(drop)
                .map_err(|what| Error::Corruption {
                    file: wal_dir(dir),
                    offset: 0,
                    what: format!("batch of seq {seq}: {what}"),
                })
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::RealFs;
    use crate::{Db, FamilyDescriptor, Options, Put, TableDescriptor};

    fn listing(dir: &Path) -> Vec<(String, u64)> {
        let mut out = Vec::new();
        let mut stack = vec![dir.to_path_buf()];
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).unwrap() {
                let e = e.unwrap();
                let md = e.metadata().unwrap();
                if md.is_dir() {
                    stack.push(e.path());
                } else {
                    out.push((e.path().display().to_string(), md.len()));
                }
            }
        }
        out.sort();
        out
    }

    /// A database with one flushed file and three batches left in the WAL, dropped (not
    /// closed: `close` would flush them).
    fn sample() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(dir.path(), Options::default()).unwrap();
        db.create_table(TableDescriptor::new("t").family(FamilyDescriptor::new("cf")))
            .unwrap();
        let t = db.table("t").unwrap();
        t.put(Put::new("a").add_at("cf", "q", 1, "v1")).unwrap();
        db.flush().unwrap();
        for (i, row) in ["b", "c", "d"].iter().enumerate() {
            t.put(Put::new(*row).add_at("cf", "q", 2 + i as u64, "val"))
                .unwrap();
        }
        drop(t);
        drop(db);
        dir
    }

    #[test]
    fn read_manifest_sees_the_state_and_writes_nothing() {
        let d = sample();
        let before = listing(d.path());
        let state = read_manifest(&RealFs, d.path()).unwrap();
        let log = manifest_edits(&RealFs, d.path()).unwrap();
        assert_eq!(
            listing(d.path()),
            before,
            "inspection changed the directory"
        );
        assert!(log.edits.len() >= 2, "snapshot plus the flush edit");
        assert_eq!(log.summary.records, log.edits.len() as u64);
        assert_eq!(state.current().num_files(), 1);
        let table = state
            .table_by_name(&crate::TableName::parse("t").unwrap())
            .unwrap();
        assert_eq!(table.descriptor.families[0].name, "cf");
        // The same files the engine's own replay arrives at.
        let (_, engine) = crate::manifest::Manifest::open(Arc::new(RealFs), d.path()).unwrap();
        assert_eq!(engine.current(), state.current());
        assert_eq!(engine.log_number(), state.log_number());
    }

    #[test]
    fn manifest_errors_are_typed() {
        let d = tempfile::tempdir().unwrap();
        assert!(matches!(
            read_manifest(&RealFs, d.path()),
            Err(Error::Io { .. })
        ));
        let d = sample();
        let log = manifest_edits(&RealFs, d.path()).unwrap();
        // Damage the first record (not a torn tail: valid records follow).
        let mut bytes = std::fs::read(&log.path).unwrap();
        bytes[30] ^= 0xff;
        std::fs::write(&log.path, bytes).unwrap();
        assert!(matches!(
            read_manifest(&RealFs, d.path()),
            Err(Error::Corruption { .. })
        ));
        // A log whose first record is not a snapshot.
        let mut log2 = log.clone();
        log2.edits.remove(0);
        if let Some(e) = log2.edits.first_mut() {
            e.offset = 0;
        }
        assert!(matches!(
            replay_manifest(&log2),
            Err(Error::Corruption { .. })
        ));
    }

    #[test]
    fn wal_records_lists_batches_with_positions_and_mutations() {
        let d = sample();
        let before = listing(d.path());
        let entries: Vec<WalEntry> = wal_records(&RealFs, d.path())
            .unwrap()
            .collect::<Result<_>>()
            .unwrap();
        assert_eq!(
            listing(d.path()),
            before,
            "inspection changed the directory"
        );
        let batches: Vec<&WalEntry> = entries
            .iter()
            .filter(|e| e.kind == WalEntryKind::Batch)
            .collect();
        assert_eq!(batches.len(), 3, "{entries:?}");
        let rows: Vec<&[u8]> = batches.iter().map(|e| &e.mutations[0].row[..]).collect();
        assert_eq!(rows, [&b"b"[..], b"c", b"d"]);
        assert!(batches.windows(2).all(|w| w[0].seq < w[1].seq));
        for w in batches.windows(2) {
            if w[0].segment == w[1].segment {
                assert_eq!(w[0].offset + w[0].len, w[1].offset);
            }
        }
        assert_eq!(batches[0].mutations[0].value, b"val");
        let state = read_manifest(&RealFs, d.path()).unwrap();
        let s = check_wal(&RealFs, d.path(), state.log_number()).unwrap();
        assert_eq!(s.records, 3);
        assert!(s.torn_tail.is_none());
    }

    #[test]
    fn damaged_wal_is_reported_and_reading_goes_on() {
        let d = sample();
        let segs = list_segments(&RealFs, &wal_dir(d.path())).unwrap();
        let first = wal_records(&RealFs, d.path())
            .unwrap()
            .find_map(|e| e.ok().filter(|e| e.kind == WalEntryKind::Batch))
            .unwrap();
        let path = &segs.iter().find(|(n, _)| *n == first.segment).unwrap().1;
        let mut bytes = std::fs::read(path).unwrap();
        // Flip the last payload byte of the first batch: bad checksum, rest of that segment
        // skipped.
        bytes[(first.offset + first.len) as usize - 1] ^= 0x40;
        std::fs::write(path, bytes).unwrap();
        let items: Vec<Result<WalEntry>> = wal_records(&RealFs, d.path()).unwrap().collect();
        let errs: Vec<&Error> = items.iter().filter_map(|r| r.as_ref().err()).collect();
        assert_eq!(errs.len(), 1);
        assert!(
            matches!(errs[0], Error::Corruption { offset, what, .. }
                if *offset == first.offset && what.contains("checksum")),
            "{:?}",
            errs[0]
        );
        // The engine would refuse this (damage followed by synced records) or drop it as a
        // torn tail; either way check_wal does not panic and names the place.
        let state = read_manifest(&RealFs, d.path()).unwrap();
        match check_wal(&RealFs, d.path(), state.log_number()) {
            Ok(s) => assert!(s.torn_tail.is_some()),
            Err(e) => assert!(matches!(e, Error::Corruption { .. }), "{e}"),
        }
    }

    #[test]
    fn empty_wal_directory_has_no_records() {
        let d = tempfile::tempdir().unwrap();
        assert_eq!(wal_records(&RealFs, d.path()).unwrap().count(), 0);
    }
}
