//! Manifest files: `MANIFEST-{n:06}` in the database directory, a log of version edits in the
//! legacy (V1) WAL record framing (SPEC.md §16.2.1, reused as §17.2 says):
//!
//! ```text
//! record := checksum u32 | length u32 | kind u8 = 1 | segment u64 = n | seq u64 | payload
//!           (header 25 bytes; payload = one encoded VersionEdit)
//! file   := record(seq 1: snapshot edit) record(seq 2) record(seq 3) ...
//! ```
//!
//! `segment` is the manifest's own number, so a record copied from another manifest fails like
//! a damaged one; `seq` counts records from 1 with no gaps. Files are not preallocated: each
//! append writes exactly one record at the end and fdatasyncs before returning.
//!
//! Reading tolerates damage only as the last thing in the file, and only damage an interrupted
//! append can leave (truncated, bad checksum, zeros, a stale block), and only when no valid
//! record with a later seq follows anywhere after it: an append whose sync never returned was
//! never acknowledged, so dropping it loses nothing. Everything else is `Corruption`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::edit::VersionEdit;
use crate::error::{Error, Result};
use crate::fs::{File, FileSystem};
use crate::wal::record::{self, Decoded, HEADER_LEN, MAX_PAYLOAD};

/// Prefix of manifest file names.
pub const MANIFEST_PREFIX: &str = "MANIFEST-";

/// The file name of manifest `n`.
pub fn manifest_file_name(n: u64) -> String {
    format!("{MANIFEST_PREFIX}{n:06}")
}

/// The manifest number a file name denotes. Only the canonical form (at least six digits, no
/// extra leading zeros beyond the padding) is accepted, so a name maps to one number and back.
pub fn parse_manifest_file_name(name: &str) -> Option<u64> {
    let digits = name.strip_prefix(MANIFEST_PREFIX)?;
    if digits.len() < 6 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let n: u64 = digits.parse().ok()?;
    (manifest_file_name(n) == name).then_some(n)
}

/// Appends records to one manifest file.
#[derive(Debug)]
pub(crate) struct LogWriter {
    file: Arc<dyn File>,
    path: PathBuf,
    number: u64,
    offset: u64,
    next_seq: u64,
    /// Framed size of the first record (the snapshot); roll-over compares against it.
    first_len: u64,
}

impl LogWriter {
    /// Create manifest `number` in `dir` (fails if it exists) and write `snapshot` as its first
    /// record, durable on return. The directory entry is made durable by the CURRENT install
    /// that must follow (same directory) before anyone relies on this file.
    pub(crate) fn create(
        fs: &dyn FileSystem,
        dir: &Path,
        number: u64,
        snapshot: &VersionEdit,
    ) -> Result<LogWriter> {
        let path = dir.join(manifest_file_name(number));
        let file = fs
            .create(&path)
            .map_err(|e| Error::io(&path, "creating manifest", e))?;
        let mut w = LogWriter {
            file,
            path,
            number,
            offset: 0,
            next_seq: 1,
            first_len: 0,
        };
        w.append(snapshot)?;
        w.first_len = w.offset;
        Ok(w)
    }

    /// Write one edit as the next record and fdatasync it.
    pub(crate) fn append(&mut self, edit: &VersionEdit) -> Result<()> {
        let payload = edit.encode();
        if payload.len() > MAX_PAYLOAD as usize {
            return Err(Error::InvalidArgument(format!(
                "version edit of {} bytes exceeds the record limit {MAX_PAYLOAD}",
                payload.len()
            )));
        }
        self.append_encoded(&payload)
    }

    /// Write an encoded edit (at most `MAX_PAYLOAD` bytes) as the next record and fdatasync it.
    pub(crate) fn append_encoded(&mut self, payload: &[u8]) -> Result<()> {
        let mut buf = Vec::with_capacity(record::framed_len(payload.len()));
        record::encode(self.number, self.next_seq, payload, &mut buf);
        self.file
            .write_all_at(&buf, self.offset)
            .map_err(|e| Error::io(&self.path, "appending to manifest", e))?;
        self.file
            .sync_data()
            .map_err(|e| Error::io(&self.path, "syncing manifest", e))?;
        self.offset += buf.len() as u64;
        self.next_seq += 1;
        Ok(())
    }

    pub(crate) fn number(&self) -> u64 {
        self.number
    }

    /// Bytes written.
    pub(crate) fn size(&self) -> u64 {
        self.offset
    }

    /// Bytes of the snapshot record.
    pub(crate) fn first_len(&self) -> u64 {
        self.first_len
    }
}

/// A torn last record that reading ignored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TornTail {
    /// Offset of the first byte not part of a valid record.
    pub offset: u64,
    /// What was found there.
    pub what: String,
}

/// What reading a manifest found.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LogSummary {
    /// Records read (the snapshot included).
    pub records: u64,
    /// Bytes of valid records.
    pub bytes: u64,
    /// Set when the file ended in a torn record.
    pub torn_tail: Option<TornTail>,
}

/// Read manifest `number` at `path`, calling `apply(offset, edit)` for each record in order.
/// An error from `apply` stops the read and is returned.
pub(crate) fn read_log<F>(
    fs: &dyn FileSystem,
    path: &Path,
    number: u64,
    mut apply: F,
) -> Result<LogSummary>
where
    F: FnMut(u64, VersionEdit) -> Result<()>,
{
    let file = fs.open(path).map_err(|e| {
        if e.kind() == std::io::ErrorKind::NotFound {
            // CURRENT names it, and CURRENT is installed only after its manifest is durable:
            // a missing one means CURRENT (or the directory) is damaged.
            corruption(path, 0, "the manifest CURRENT names does not exist")
        } else {
            Error::io(path, "opening manifest", e)
        }
    })?;
    let len = file
        .len()
        .map_err(|e| Error::io(path, "reading manifest length", e))?;
    let len = usize::try_from(len).map_err(|_| Error::Corruption {
        file: path.to_owned(),
        offset: 0,
        what: format!("manifest of {len} bytes is too large to read"),
    })?;
    let mut data = vec![0u8; len];
    file.read_exact_at(&mut data, 0)
        .map_err(|e| Error::io(path, "reading manifest", e))?;
    scan(&data, path, number, &mut apply)
}

fn corruption(path: &Path, offset: usize, what: impl Into<String>) -> Error {
    Error::Corruption {
        file: path.to_owned(),
        offset: offset as u64,
        what: what.into(),
    }
}

fn scan<F>(data: &[u8], path: &Path, number: u64, apply: &mut F) -> Result<LogSummary>
where
    F: FnMut(u64, VersionEdit) -> Result<()>,
{
    let mut summary = LogSummary::default();
    let mut pos = 0usize;
    let mut last_seq = 0u64;
    loop {
        let rest = data.get(pos..).unwrap_or(&[]);
        let stop = match record::decode(rest, number) {
            Ok(Decoded::Record(r)) => {
                if r.seq != last_seq + 1 {
                    return Err(corruption(
                        path,
                        pos,
                        format!("record seq {} where {} was expected", r.seq, last_seq + 1),
                    ));
                }
                let edit = VersionEdit::decode(r.payload).map_err(|e| {
                    corruption(
                        path,
                        pos + HEADER_LEN + e.offset,
                        format!("bad version edit: {}", e.what),
                    )
                })?;
                apply(pos as u64, edit)?;
                last_seq = r.seq;
                summary.records += 1;
                summary.bytes += r.len as u64;
                pos += r.len;
                continue;
            }
            Ok(Decoded::End) if rest.iter().all(|&b| b == 0) => None,
            Ok(Decoded::End) => Some("zero-filled record header".to_owned()),
            Err(e) if e.could_be_torn_write() => Some(e.to_string()),
            Err(e) => return Err(corruption(path, pos, e.to_string())),
        };
        if let Some(what) = stop {
            // A torn append is the last thing ever written; a valid later record means the
            // damage is in the middle of acknowledged history.
            if let Some(at) = record::find_valid_record(data, pos + 1, number, last_seq) {
                return Err(corruption(
                    path,
                    pos,
                    format!("{what}, followed by a valid record at offset {at}"),
                ));
            }
            summary.torn_tail = Some(TornTail {
                offset: pos as u64,
                what,
            });
        }
        break;
    }
    if summary.records == 0 {
        return Err(corruption(
            path,
            0,
            "manifest holds no complete record (its snapshot is missing)",
        ));
    }
    Ok(summary)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn log_of(number: u64, edits: &[VersionEdit]) -> Vec<u8> {
        let mut out = Vec::new();
        for (i, e) in edits.iter().enumerate() {
            record::encode(number, i as u64 + 1, &e.encode(), &mut out);
        }
        out
    }

    fn edits(n: u64) -> Vec<VersionEdit> {
        (1..=n)
            .map(|i| VersionEdit {
                last_seq: Some(i * 10),
                ..Default::default()
            })
            .collect()
    }

    fn read(data: &[u8], number: u64) -> Result<(Vec<VersionEdit>, LogSummary)> {
        let mut got = Vec::new();
        let s = scan(data, Path::new("MANIFEST-000003"), number, &mut |_, e| {
            got.push(e);
            Ok(())
        })?;
        Ok((got, s))
    }

    #[test]
    fn names_round_trip_and_reject_noise() {
        assert_eq!(manifest_file_name(5), "MANIFEST-000005");
        assert_eq!(manifest_file_name(1234567), "MANIFEST-1234567");
        assert_eq!(parse_manifest_file_name("MANIFEST-000005"), Some(5));
        assert_eq!(parse_manifest_file_name("MANIFEST-1234567"), Some(1234567));
        for bad in [
            "MANIFEST-5",
            "MANIFEST-0000005",
            "MANIFEST-00000x",
            "MANIFEST-000005.tmp",
            "CURRENT",
        ] {
            assert_eq!(parse_manifest_file_name(bad), None, "{bad}");
        }
    }

    #[test]
    fn reads_all_records() {
        let (got, s) = read(&log_of(3, &edits(5)), 3).unwrap();
        assert_eq!(got, edits(5));
        assert_eq!((s.records, s.torn_tail), (5, None));
    }

    #[test]
    fn every_truncation_of_the_last_record_is_a_torn_tail() {
        let full = log_of(3, &edits(3));
        let two = log_of(3, &edits(2)).len();
        for cut in two + 1..full.len() {
            let (got, s) = read(&full[..cut], 3).unwrap();
            assert_eq!(got.len(), 2, "cut {cut}");
            assert_eq!(s.torn_tail.unwrap().offset, two as u64);
        }
    }

    #[test]
    fn garbled_last_record_is_a_torn_tail_and_zeros_after_it_are_fine() {
        let mut d = log_of(3, &edits(3));
        let last = d.len() - 1;
        d[last] ^= 0xff;
        d.extend_from_slice(&[0u8; 100]);
        let (got, s) = read(&d, 3).unwrap();
        assert_eq!(got.len(), 2);
        assert!(s.torn_tail.unwrap().what.contains("checksum"));
        let mut d = log_of(3, &edits(3));
        d.extend_from_slice(&[0u8; 100]);
        let (got, s) = read(&d, 3).unwrap();
        assert_eq!(
            (got.len(), s.torn_tail),
            (3, None),
            "zeros alone are no tail"
        );
    }

    #[test]
    fn damage_before_a_valid_record_is_corruption() {
        let mut d = log_of(3, &edits(4));
        let second = log_of(3, &edits(1)).len();
        d[second + HEADER_LEN] ^= 1;
        let e = read(&d, 3).unwrap_err();
        assert!(
            matches!(&e, Error::Corruption { offset, what, .. } if *offset == second as u64 && what.contains("followed by a valid record")),
            "{e}"
        );
    }

    #[test]
    fn records_out_of_order_or_from_another_file_are_corruption() {
        let mut d = Vec::new();
        record::encode(3, 1, &edits(1)[0].encode(), &mut d);
        record::encode(3, 3, &edits(1)[0].encode(), &mut d);
        assert!(matches!(read(&d, 3), Err(Error::Corruption { .. })));
        // A complete record of another manifest as the only record: the file has no snapshot.
        let d = log_of(2, &edits(1));
        assert!(matches!(read(&d, 3), Err(Error::Corruption { .. })));
    }

    #[test]
    fn empty_or_torn_only_manifest_is_corruption() {
        assert!(matches!(read(&[], 3), Err(Error::Corruption { .. })));
        let d = log_of(3, &edits(1));
        assert!(matches!(
            read(&d[..d.len() - 1], 3),
            Err(Error::Corruption { .. })
        ));
    }

    #[test]
    fn undecodable_edit_in_a_valid_record_is_corruption() {
        let mut d = log_of(3, &edits(1));
        record::encode(3, 2, &[0x10, 0x01], &mut d);
        let e = read(&d, 3).unwrap_err();
        assert!(
            matches!(&e, Error::Corruption { what, .. } if what.contains("unknown edit field tag 16")),
            "{e}"
        );
    }
}
