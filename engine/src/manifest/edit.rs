//! Version edits and their encoding (SPEC.md §17.3). Pure functions over byte slices, no I/O, so
//! the decoder can be fuzzed.
//!
//! An encoded edit is a sequence of fields, back to back, until the end of the payload:
//!
//! ```text
//! field     := tag varint32 | body
//! body      := fixed layout of the tag (table below), or, when tag & 0x4000 != 0,
//!              len varint32 | len bytes        (a "safe to ignore" field)
//!
//!  tag  field               body
//!    1  next_file_number    varint64
//!    2  last_seq            varint64
//!    3  log_number          varint64
//!    4  flushed_seq         family varint32 | seq varint64
//!    5  added_file          family varint32 | level varint32 | number varint64 | size varint64
//!                           | smallest bytes | largest bytes | min_seq varint64 | max_seq varint64
//!                           | min_ts varint64 | max_ts varint64 | entries varint64
//!                           | deletes varint64 | created_ms varint64
//!    6  deleted_file        family varint32 | level varint32 | number varint64
//!    7  create_namespace    name bytes
//!    8  drop_namespace      name bytes
//!    9  put_table           table_id varint32 | namespace bytes | table bytes | n varint32
//!                           | n × (family_id varint32 | family descriptor)
//!   10  drop_table          table_id varint32
//!   11  next_table_id       varint32
//!   12  next_family_id      varint32
//!   13  wal_format          varint32
//!   14  range_delete        family varint32 | seq varint64 | ts varint64 | start bytes
//!                           | stop bytes (empty = to the end)
//!   15  range_delete_gone   family varint32 | seq varint64
//! 0x4001  file_crc          len varint32 | family varint32 | number varint64 | crc u32 LE
//!                           (safe to ignore; names an added_file of the same edit)
//! 0x4002  file_range_clean  len varint32 | family varint32 | number varint64 | seq varint64
//!                           (safe to ignore; names an added_file of the same edit)
//! 0x4003  schema_record     len varint32 | after varint64 | payload (the rest of the body)
//!                           (safe to ignore; at most once per edit)
//!
//! family descriptor := name bytes | max_versions varint32 | min_versions varint32
//!                      | ttl_ms varint64 (0 = forever) | keep_deleted u8 | bloom_code u8
//!                      | bloom_prefix varint32 | compression u8 | block_size varint32
//!                      | new_version_behavior u8
//! bytes := len varint32 | len bytes
//! ```
//!
//! Scalar tags (1, 2, 3, 11, 12, 13) appear at most once per edit. Any other unknown tag is
//! corruption: a reader that silently dropped a field it does not understand could lose files or
//! tables. The decoder checks structure only; whether the edit makes sense against the current
//! state is [`ManifestState`](super::ManifestState)'s job.

use std::time::Duration;

use cellar_format::coding::{put_varint32, put_varint64, Cursor};
use cellar_format::error::Malformed;

use crate::schema::{
    BloomType, CompressionType, FamilyDescriptor, KeepDeletedCells, TableDescriptor, TableName,
};
use crate::types::{FamilyId, FileMeta, FileNumber, RangeDelete, SeqNo, TableId};

/// Persisted field tags: never renumber.
pub mod tag {
    /// `next_file_number`.
    pub const NEXT_FILE_NUMBER: u32 = 1;
    /// `last_seq`.
    pub const LAST_SEQ: u32 = 2;
    /// `log_number`.
    pub const LOG_NUMBER: u32 = 3;
    /// One `flushed_seq` entry.
    pub const FLUSHED_SEQ: u32 = 4;
    /// One added file.
    pub const ADDED_FILE: u32 = 5;
    /// One deleted file.
    pub const DELETED_FILE: u32 = 6;
    /// One namespace created.
    pub const CREATE_NAMESPACE: u32 = 7;
    /// One namespace dropped.
    pub const DROP_NAMESPACE: u32 = 8;
    /// One table created or altered.
    pub const PUT_TABLE: u32 = 9;
    /// One table dropped.
    pub const DROP_TABLE: u32 = 10;
    /// `next_table_id`.
    pub const NEXT_TABLE_ID: u32 = 11;
    /// `next_family_id`.
    pub const NEXT_FAMILY_ID: u32 = 12;
    /// `wal_format`.
    pub const WAL_FORMAT: u32 = 13;
    /// One row-range delete added. Not safe to ignore: a reader that dropped it would show
    /// the deleted rows again.
    pub const RANGE_DELETE: u32 = 14;
    /// One row-range delete removed (a major compaction purged what it masked).
    pub const RANGE_DELETE_GONE: u32 = 15;
    /// Bit marking a field a reader may skip when it does not know the tag.
    pub const SAFE_TO_IGNORE: u32 = 0x4000;
    /// The whole-file CRC-32C of an added file (safe to ignore: an older reader loses only
    /// the checksum).
    pub const FILE_CRC: u32 = SAFE_TO_IGNORE | 1;
    /// The seq through which an added file holds nothing a row-range delete masks (safe to
    /// ignore: an older reader only rewrites the file once more).
    pub const FILE_RANGE_CLEAN: u32 = SAFE_TO_IGNORE | 2;
    /// The change-feed record of a schema edit, kept so recovery can log it again when a
    /// crash lost it (safe to ignore: an older reader only leaves a lost record lost).
    pub const SCHEMA_RECORD: u32 = SAFE_TO_IGNORE | 3;
}

/// Persisted codes of [`KeepDeletedCells`]: never renumber.
const KEEP_DELETED_FALSE: u8 = 0;
const KEEP_DELETED_TRUE: u8 = 1;
const KEEP_DELETED_TTL: u8 = 2;

/// A table as the manifest records it: the descriptor plus the id of each family.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableEntry {
    /// Table id.
    pub id: TableId,
    /// Full descriptor (a put replaces the previous one whole).
    pub descriptor: TableDescriptor,
    /// One id per descriptor family, in the same order.
    pub family_ids: Vec<FamilyId>,
}

/// One atomic change to the database's metadata. Every field is optional; see SPEC.md §17.5 for
/// the order in which the parts are applied.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VersionEdit {
    /// Next unused file number (HFiles and manifests share the number space).
    pub next_file_number: Option<FileNumber>,
    /// Highest sequence number known to be used.
    pub last_seq: Option<SeqNo>,
    /// Oldest WAL segment recovery must replay from.
    pub log_number: Option<u64>,
    /// Per family: every write with seq at or below this is in the family's files.
    pub flushed_seq: Vec<(FamilyId, SeqNo)>,
    /// Files added.
    pub added_files: Vec<FileMeta>,
    /// Files deleted: (family, level, number).
    pub deleted_files: Vec<(FamilyId, u32, FileNumber)>,
    /// Namespaces created.
    pub create_namespaces: Vec<String>,
    /// Namespaces dropped (must hold no table).
    pub drop_namespaces: Vec<String>,
    /// Tables created or altered (full replace).
    pub put_tables: Vec<TableEntry>,
    /// Tables dropped, with their families and files.
    pub drop_tables: Vec<TableId>,
    /// Next unused table id.
    pub next_table_id: Option<TableId>,
    /// Next unused family id.
    pub next_family_id: Option<FamilyId>,
    /// The WAL record layout the database's writers use (2: `.wal2` segments). Deliberately
    /// not safe to ignore: a build that does not know the field would not see those segments
    /// and would open without replaying them.
    pub wal_format: Option<u32>,
    /// Row-range deletes added, per family.
    pub range_deletes: Vec<(FamilyId, RangeDelete)>,
    /// Row-range deletes removed: (family, seq).
    pub range_deletes_gone: Vec<(FamilyId, SeqNo)>,
    /// The schema record (SPEC.md §16.10) this edit's changes are logged as, right after it.
    pub schema_record: Option<SchemaRecord>,
}

/// A schema edit's change-feed record, as the edit that made the changes carries it: the WAL
/// record is appended only after the edit is durable, so a crash in between would lose it;
/// recovery finds it here and appends it then (SPEC.md §16.10).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchemaRecord {
    /// Every seq the database had used when the edit was made: the record, once appended,
    /// takes a higher one, so a log and manifest whose seqs stop here do not hold it.
    pub after: SeqNo,
    /// The record's BATCH payload (§16.10), exactly as appended.
    pub payload: Vec<u8>,
}

/// Why an encoded edit is malformed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EditError {
    /// Offset inside the payload of the field that failed.
    pub offset: usize,
    /// What is wrong.
    pub what: String,
}

impl std::fmt::Display for EditError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} (edit byte {})", self.what, self.offset)
    }
}

fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    // Lengths come from names (≤ 255 bytes) and cell keys (bounded by the format far below
    // 4 GiB), so the cast cannot truncate for anything the engine produces.
    put_varint32(out, b.len() as u32);
    out.extend_from_slice(b);
}

fn put_family(out: &mut Vec<u8>, f: &FamilyDescriptor) {
    put_bytes(out, f.name.as_bytes());
    put_varint32(out, f.max_versions);
    put_varint32(out, f.min_versions);
    put_varint64(out, ttl_ms(f.ttl));
    out.push(match f.keep_deleted_cells {
        KeepDeletedCells::False => KEEP_DELETED_FALSE,
        KeepDeletedCells::True => KEEP_DELETED_TRUE,
        KeepDeletedCells::Ttl => KEEP_DELETED_TTL,
    });
    let (code, prefix) = f.bloom.to_code();
    out.push(code);
    put_varint32(out, prefix);
    out.push(f.compression as u8);
    put_varint32(out, f.block_size);
    out.push(u8::from(f.new_version_behavior));
}

/// The TTL as stored: whole milliseconds, 0 for "forever". A TTL that does not survive this
/// (under 1 ms, or not a whole number of ms) is refused by [`super::ManifestState::apply`].
pub(crate) fn ttl_ms(ttl: Option<Duration>) -> u64 {
    ttl.map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

impl VersionEdit {
    /// Whether the edit changes nothing.
    pub fn is_empty(&self) -> bool {
        *self == VersionEdit::default()
    }

    /// The encoded form (fields in tag order, lists in their order).
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        if let Some(v) = self.next_file_number {
            put_varint32(&mut out, tag::NEXT_FILE_NUMBER);
            put_varint64(&mut out, v);
        }
        if let Some(v) = self.last_seq {
            put_varint32(&mut out, tag::LAST_SEQ);
            put_varint64(&mut out, v);
        }
        if let Some(v) = self.log_number {
            put_varint32(&mut out, tag::LOG_NUMBER);
            put_varint64(&mut out, v);
        }
        for &(family, seq) in &self.flushed_seq {
            put_varint32(&mut out, tag::FLUSHED_SEQ);
            put_varint32(&mut out, family);
            put_varint64(&mut out, seq);
        }
        for f in &self.added_files {
            put_varint32(&mut out, tag::ADDED_FILE);
            put_varint32(&mut out, f.family);
            put_varint32(&mut out, f.level);
            put_varint64(&mut out, f.number);
            put_varint64(&mut out, f.size);
            put_bytes(&mut out, &f.smallest);
            put_bytes(&mut out, &f.largest);
            put_varint64(&mut out, f.min_seq);
            put_varint64(&mut out, f.max_seq);
            put_varint64(&mut out, f.min_ts);
            put_varint64(&mut out, f.max_ts);
            put_varint64(&mut out, f.entries);
            put_varint64(&mut out, f.deletes);
            put_varint64(&mut out, f.created_ms);
        }
        for &(family, level, number) in &self.deleted_files {
            put_varint32(&mut out, tag::DELETED_FILE);
            put_varint32(&mut out, family);
            put_varint32(&mut out, level);
            put_varint64(&mut out, number);
        }
        for ns in &self.create_namespaces {
            put_varint32(&mut out, tag::CREATE_NAMESPACE);
            put_bytes(&mut out, ns.as_bytes());
        }
        for ns in &self.drop_namespaces {
            put_varint32(&mut out, tag::DROP_NAMESPACE);
            put_bytes(&mut out, ns.as_bytes());
        }
        for t in &self.put_tables {
            put_varint32(&mut out, tag::PUT_TABLE);
            put_varint32(&mut out, t.id);
            put_bytes(&mut out, t.descriptor.name.namespace.as_bytes());
            put_bytes(&mut out, t.descriptor.name.table.as_bytes());
            // Written as the descriptor's count; a mismatched `family_ids` is refused by
            // `apply` before anything is logged, so here the two are equal.
            let n = t.descriptor.families.len().min(t.family_ids.len());
            put_varint32(&mut out, n as u32);
            for (f, id) in t.descriptor.families.iter().zip(&t.family_ids) {
                put_varint32(&mut out, *id);
                put_family(&mut out, f);
            }
        }
        for &id in &self.drop_tables {
            put_varint32(&mut out, tag::DROP_TABLE);
            put_varint32(&mut out, id);
        }
        if let Some(v) = self.next_table_id {
            put_varint32(&mut out, tag::NEXT_TABLE_ID);
            put_varint32(&mut out, v);
        }
        if let Some(v) = self.next_family_id {
            put_varint32(&mut out, tag::NEXT_FAMILY_ID);
            put_varint32(&mut out, v);
        }
        if let Some(v) = self.wal_format {
            put_varint32(&mut out, tag::WAL_FORMAT);
            put_varint32(&mut out, v);
        }
        for (family, d) in &self.range_deletes {
            put_varint32(&mut out, tag::RANGE_DELETE);
            put_varint32(&mut out, *family);
            put_varint64(&mut out, d.seq);
            put_varint64(&mut out, d.ts);
            put_bytes(&mut out, &d.start);
            put_bytes(&mut out, &d.stop);
        }
        for &(family, seq) in &self.range_deletes_gone {
            put_varint32(&mut out, tag::RANGE_DELETE_GONE);
            put_varint32(&mut out, family);
            put_varint64(&mut out, seq);
        }
        for f in &self.added_files {
            if let Some(crc) = f.crc {
                let mut body = Vec::with_capacity(16);
                put_varint32(&mut body, f.family);
                put_varint64(&mut body, f.number);
                body.extend_from_slice(&crc.to_le_bytes());
                put_varint32(&mut out, tag::FILE_CRC);
                put_bytes(&mut out, &body);
            }
        }
        for f in &self.added_files {
            if f.range_clean > 0 {
                let mut body = Vec::with_capacity(24);
                put_varint32(&mut body, f.family);
                put_varint64(&mut body, f.number);
                put_varint64(&mut body, f.range_clean);
                put_varint32(&mut out, tag::FILE_RANGE_CLEAN);
                put_bytes(&mut out, &body);
            }
        }
        if let Some(r) = &self.schema_record {
            let mut body = Vec::with_capacity(10 + r.payload.len());
            put_varint64(&mut body, r.after);
            body.extend_from_slice(&r.payload);
            put_varint32(&mut out, tag::SCHEMA_RECORD);
            put_bytes(&mut out, &body);
        }
        out
    }

    /// Decode an edit. Never panics; every length and count is checked against the bytes left
    /// before anything is allocated.
    pub fn decode(buf: &[u8]) -> Result<VersionEdit, EditError> {
        let mut c = Cursor::new(buf);
        let mut e = VersionEdit::default();
        let mut crcs = Vec::new();
        let mut cleans = Vec::new();
        while !c.is_empty() {
            let start = c.position();
            decode_field(&mut c, &mut e, &mut crcs, &mut cleans).map_err(|m| EditError {
                offset: start,
                what: m.0,
            })?;
        }
        // Each checksum belongs to one file added by the same edit, given once.
        for (offset, family, number, crc) in crcs {
            let f = e
                .added_files
                .iter_mut()
                .find(|f| f.family == family && f.number == number);
            match f {
                Some(f) if f.crc.is_none() => f.crc = Some(crc),
                Some(_) => {
                    return Err(EditError {
                        offset,
                        what: format!("file_crc of file {number} appears twice"),
                    })
                }
                None => {
                    return Err(EditError {
                        offset,
                        what: format!("file_crc of file {number}, which the edit does not add"),
                    })
                }
            }
        }
        // Likewise each file_range_clean; 0 is never written (it means "not known").
        for (offset, family, number, seq) in cleans {
            let f = e
                .added_files
                .iter_mut()
                .find(|f| f.family == family && f.number == number);
            let what = match f {
                Some(f) if f.range_clean == 0 && seq > 0 => {
                    f.range_clean = seq;
                    continue;
                }
                Some(_) if seq == 0 => format!("file_range_clean of file {number} is 0"),
                Some(_) => format!("file_range_clean of file {number} appears twice"),
                None => {
                    format!("file_range_clean of file {number}, which the edit does not add")
                }
            };
            return Err(EditError { offset, what });
        }
        Ok(e)
    }
}

fn set_once<T>(slot: &mut Option<T>, v: T, what: &str) -> Result<(), Malformed> {
    if slot.is_some() {
        return Err(Malformed(format!("{what} appears twice in one edit")));
    }
    *slot = Some(v);
    Ok(())
}

fn string(c: &mut Cursor<'_>, what: &str) -> Result<String, Malformed> {
    let b = c.len_prefixed(what)?;
    String::from_utf8(b.to_vec()).map_err(|_| Malformed(format!("{what} is not UTF-8")))
}

/// A `file_crc` field: where it starts, the file's family and number, and the checksum.
type FileCrc = (usize, FamilyId, u64, u32);

/// A `file_range_clean` field: where it starts, the file's family and number, and the seq.
type FileRangeClean = (usize, FamilyId, u64, SeqNo);

fn decode_field(
    c: &mut Cursor<'_>,
    e: &mut VersionEdit,
    crcs: &mut Vec<FileCrc>,
    cleans: &mut Vec<FileRangeClean>,
) -> Result<(), Malformed> {
    let start = c.position();
    let t = c.varint32("field tag")?;
    match t {
        tag::NEXT_FILE_NUMBER => {
            let v = c.varint64("next_file_number")?;
            set_once(&mut e.next_file_number, v, "next_file_number")
        }
        tag::LAST_SEQ => {
            let v = c.varint64("last_seq")?;
            set_once(&mut e.last_seq, v, "last_seq")
        }
        tag::LOG_NUMBER => {
            let v = c.varint64("log_number")?;
            set_once(&mut e.log_number, v, "log_number")
        }
        tag::FLUSHED_SEQ => {
            let family = c.varint32("flushed_seq family")?;
            let seq = c.varint64("flushed_seq seq")?;
            e.flushed_seq.push((family, seq));
            Ok(())
        }
        tag::ADDED_FILE => {
            let family = c.varint32("added file family")?;
            let level = c.varint32("added file level")?;
            let number = c.varint64("added file number")?;
            let size = c.varint64("added file size")?;
            let smallest = c.len_prefixed("added file smallest key")?.to_vec();
            let largest = c.len_prefixed("added file largest key")?.to_vec();
            e.added_files.push(FileMeta {
                number,
                family,
                level,
                size,
                smallest,
                largest,
                min_seq: c.varint64("added file min_seq")?,
                max_seq: c.varint64("added file max_seq")?,
                min_ts: c.varint64("added file min_ts")?,
                max_ts: c.varint64("added file max_ts")?,
                entries: c.varint64("added file entries")?,
                deletes: c.varint64("added file deletes")?,
                created_ms: c.varint64("added file created_ms")?,
                crc: None,
                range_clean: 0,
            });
            Ok(())
        }
        tag::DELETED_FILE => {
            let family = c.varint32("deleted file family")?;
            let level = c.varint32("deleted file level")?;
            let number = c.varint64("deleted file number")?;
            e.deleted_files.push((family, level, number));
            Ok(())
        }
        tag::CREATE_NAMESPACE => {
            e.create_namespaces.push(string(c, "created namespace")?);
            Ok(())
        }
        tag::DROP_NAMESPACE => {
            e.drop_namespaces.push(string(c, "dropped namespace")?);
            Ok(())
        }
        tag::PUT_TABLE => {
            let id = c.varint32("table id")?;
            let namespace = string(c, "table namespace")?;
            let table = string(c, "table name")?;
            let n = c.varint32("table family count")? as usize;
            // Each family takes well over one byte, so a count above the bytes left is corrupt;
            // checked before the allocation so a damaged count cannot allocate gigabytes.
            if n > c.remaining() {
                return Err(Malformed(format!(
                    "table family count {n} exceeds the {} bytes left",
                    c.remaining()
                )));
            }
            let mut families = Vec::with_capacity(n);
            let mut family_ids = Vec::with_capacity(n);
            for _ in 0..n {
                family_ids.push(c.varint32("family id")?);
                families.push(decode_family(c)?);
            }
            e.put_tables.push(TableEntry {
                id,
                descriptor: TableDescriptor {
                    name: TableName { namespace, table },
                    families,
                },
                family_ids,
            });
            Ok(())
        }
        tag::DROP_TABLE => {
            e.drop_tables.push(c.varint32("dropped table id")?);
            Ok(())
        }
        tag::NEXT_TABLE_ID => {
            let v = c.varint32("next_table_id")?;
            set_once(&mut e.next_table_id, v, "next_table_id")
        }
        tag::NEXT_FAMILY_ID => {
            let v = c.varint32("next_family_id")?;
            set_once(&mut e.next_family_id, v, "next_family_id")
        }
        tag::WAL_FORMAT => {
            let v = c.varint32("wal_format")?;
            set_once(&mut e.wal_format, v, "wal_format")
        }
        tag::RANGE_DELETE => {
            let family = c.varint32("range_delete family")?;
            let seq = c.varint64("range_delete seq")?;
            let ts = c.varint64("range_delete ts")?;
            let start = c.len_prefixed("range_delete start")?.to_vec();
            let stop = c.len_prefixed("range_delete stop")?.to_vec();
            e.range_deletes.push((
                family,
                RangeDelete {
                    start,
                    stop,
                    ts,
                    seq,
                },
            ));
            Ok(())
        }
        tag::RANGE_DELETE_GONE => {
            let family = c.varint32("range_delete_gone family")?;
            let seq = c.varint64("range_delete_gone seq")?;
            e.range_deletes_gone.push((family, seq));
            Ok(())
        }
        tag::FILE_CRC => {
            let mut b = Cursor::new(c.len_prefixed("file_crc body")?);
            let family = b.varint32("file_crc family")?;
            let number = b.varint64("file_crc number")?;
            let crc = b.u32("file_crc")?;
            if !b.is_empty() {
                return Err(Malformed("file_crc body longer than its fields".into()));
            }
            crcs.push((start, family, number, crc));
            Ok(())
        }
        tag::FILE_RANGE_CLEAN => {
            let mut b = Cursor::new(c.len_prefixed("file_range_clean body")?);
            let family = b.varint32("file_range_clean family")?;
            let number = b.varint64("file_range_clean number")?;
            let seq = b.varint64("file_range_clean seq")?;
            if !b.is_empty() {
                return Err(Malformed(
                    "file_range_clean body longer than its fields".into(),
                ));
            }
            cleans.push((start, family, number, seq));
            Ok(())
        }
        tag::SCHEMA_RECORD => {
            let mut b = Cursor::new(c.len_prefixed("schema_record body")?);
            let after = b.varint64("schema_record after")?;
            let payload = b.take(b.remaining(), "schema_record payload")?.to_vec();
            set_once(
                &mut e.schema_record,
                SchemaRecord { after, payload },
                "schema_record",
            )
        }
        t if t & tag::SAFE_TO_IGNORE != 0 => {
            // A field from a newer writer that declared it optional: skip its body whole.
            c.len_prefixed("ignorable field body")?;
            Ok(())
        }
        t => Err(Malformed(format!("unknown edit field tag {t}"))),
    }
}

fn decode_family(c: &mut Cursor<'_>) -> Result<FamilyDescriptor, Malformed> {
    let name = string(c, "family name")?;
    let max_versions = c.varint32("family max_versions")?;
    let min_versions = c.varint32("family min_versions")?;
    let ttl = match c.varint64("family ttl_ms")? {
        0 => None,
        ms => Some(Duration::from_millis(ms)),
    };
    let keep_deleted_cells = match c.u8("family keep_deleted")? {
        KEEP_DELETED_FALSE => KeepDeletedCells::False,
        KEEP_DELETED_TRUE => KeepDeletedCells::True,
        KEEP_DELETED_TTL => KeepDeletedCells::Ttl,
        k => return Err(Malformed(format!("unknown keep_deleted code {k}"))),
    };
    let code = c.u8("family bloom code")?;
    let prefix = c.varint32("family bloom prefix")?;
    let bloom = BloomType::from_code(code, prefix)
        .ok_or_else(|| Malformed(format!("bad bloom code {code} (prefix {prefix})")))?;
    let comp = c.u8("family compression")?;
    let compression = CompressionType::try_from(comp)
        .map_err(|v| Malformed(format!("unknown compression code {v}")))?;
    let block_size = c.varint32("family block_size")?;
    let new_version_behavior = match c.u8("family new_version_behavior")? {
        0 => false,
        1 => true,
        v => {
            return Err(Malformed(format!(
                "new_version_behavior must be 0 or 1, found {v}"
            )))
        }
    };
    Ok(FamilyDescriptor {
        name,
        max_versions,
        min_versions,
        ttl,
        keep_deleted_cells,
        bloom,
        compression,
        block_size,
        new_version_behavior,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use cellar_format::cell::CellKey;

    pub(crate) fn hex(b: &[u8]) -> String {
        b.iter().map(|x| format!("{x:02x}")).collect()
    }

    fn full_edit() -> VersionEdit {
        VersionEdit {
            next_file_number: Some(1 << 40),
            last_seq: Some(u64::MAX),
            log_number: Some(17),
            flushed_seq: vec![(3, 99), (4, 0)],
            added_files: vec![FileMeta {
                number: 12,
                family: 3,
                level: 2,
                size: 1 << 33,
                smallest: CellKey::first_on_row(b"aaa").encode(),
                largest: CellKey::first_on_row(b"zzz").encode(),
                min_seq: 5,
                max_seq: 77,
                min_ts: 0,
                max_ts: u64::MAX,
                entries: 1000,
                deletes: 10,
                created_ms: 1_700_000_000_000,
                crc: None,
                range_clean: 0,
            }],
            deleted_files: vec![(3, 0, 9), (4, 6, u64::MAX)],
            create_namespaces: vec!["ns1".into(), "ns2".into()],
            drop_namespaces: vec!["old".into()],
            put_tables: vec![TableEntry {
                id: 7,
                descriptor: TableDescriptor::new("ns1:users")
                    .family(FamilyDescriptor::new("cf"))
                    .family(
                        FamilyDescriptor::new("meta")
                            .max_versions(10)
                            .min_versions(2)
                            .ttl(Duration::from_secs(86_400))
                            .keep_deleted_cells(KeepDeletedCells::Ttl)
                            .bloom(BloomType::RowPrefix(4))
                            .compression(CompressionType::Lz4)
                            .block_size(4096)
                            .new_version_behavior(true),
                    ),
                family_ids: vec![3, 4],
            }],
            drop_tables: vec![2, 5],
            next_table_id: Some(8),
            next_family_id: Some(u32::MAX),
            wal_format: Some(2),
            range_deletes: vec![
                (
                    3,
                    RangeDelete {
                        start: b"a".to_vec(),
                        stop: b"m".to_vec(),
                        ts: 1_700_000_000_000,
                        seq: 299,
                    },
                ),
                (
                    4,
                    RangeDelete {
                        start: Vec::new(),
                        stop: Vec::new(),
                        ts: u64::MAX,
                        seq: 300,
                    },
                ),
            ],
            range_deletes_gone: vec![(3, 17), (4, u64::MAX)],
            schema_record: None,
        }
    }

    #[test]
    fn schema_record_is_safe_to_ignore_and_at_most_once() {
        let mut e = full_edit();
        e.schema_record = Some(SchemaRecord {
            after: 1 << 40,
            payload: b"batch payload".to_vec(),
        });
        let b = e.encode();
        assert_eq!(VersionEdit::decode(&b).unwrap(), e);
        // Last, safe to ignore: tag 0x4003, its length, `after`, the payload.
        let mut body = Vec::new();
        put_varint64(&mut body, 1 << 40);
        body.extend_from_slice(b"batch payload");
        let mut tail = Vec::new();
        put_varint32(&mut tail, tag::SCHEMA_RECORD);
        put_bytes(&mut tail, &body);
        assert!(b.ends_with(&tail), "{}", hex(&b));
        assert_eq!(
            tag::SCHEMA_RECORD & tag::SAFE_TO_IGNORE,
            tag::SAFE_TO_IGNORE
        );
        // A reader that does not know the tag skips it.
        assert_eq!(
            VersionEdit::decode(&b[..b.len() - tail.len()]).unwrap(),
            full_edit()
        );
        // An empty payload is kept as such; twice in one edit, or cut short, is corrupt.
        let mut empty = Vec::new();
        put_varint32(&mut empty, tag::SCHEMA_RECORD);
        put_bytes(&mut empty, &[5]);
        assert_eq!(
            VersionEdit::decode(&empty).unwrap().schema_record,
            Some(SchemaRecord {
                after: 5,
                payload: Vec::new()
            })
        );
        let err = VersionEdit::decode(&[tail.clone(), tail.clone()].concat()).unwrap_err();
        assert!(err.what.contains("twice"), "{err:?}");
        let mut cut = Vec::new();
        put_varint32(&mut cut, tag::SCHEMA_RECORD);
        put_bytes(&mut cut, &[0x80]);
        assert!(VersionEdit::decode(&cut).is_err());
    }

    #[test]
    fn round_trip_every_field() {
        let e = full_edit();
        let b = e.encode();
        assert_eq!(VersionEdit::decode(&b).unwrap(), e);
        assert_eq!(
            VersionEdit::decode(&[]).unwrap(),
            VersionEdit::default(),
            "an empty payload is the empty edit"
        );
        assert!(VersionEdit::default().is_empty());
        assert!(VersionEdit::default().encode().is_empty());
    }

    #[test]
    fn file_range_clean_rides_with_its_added_file() {
        let mut e = full_edit();
        let mut second = e.added_files[0].clone();
        second.number = 13;
        second.crc = Some(7);
        second.range_clean = 300;
        e.added_files.push(second);
        let b = e.encode();
        assert_eq!(VersionEdit::decode(&b).unwrap(), e);
        // After the checksums, safe to ignore: tag 0x4002, its length, family, number, seq.
        let mut tail = Vec::new();
        put_varint32(&mut tail, tag::FILE_RANGE_CLEAN);
        put_varint32(&mut tail, 4);
        put_varint32(&mut tail, 3);
        put_varint64(&mut tail, 13);
        put_varint64(&mut tail, 300);
        assert!(b.ends_with(&tail), "{}", hex(&b));
        assert_eq!(
            tag::FILE_RANGE_CLEAN & tag::SAFE_TO_IGNORE,
            tag::SAFE_TO_IGNORE
        );
        // A reader that does not know the tag skips it: the edit without the field.
        let plain = {
            let mut p = e.clone();
            p.added_files[1].range_clean = 0;
            p
        };
        assert_eq!(
            VersionEdit::decode(&b[..b.len() - tail.len()]).unwrap(),
            plain
        );

        let field = |family: u32, number: u64, seq: u64, extra: &[u8]| {
            let mut body = Vec::new();
            put_varint32(&mut body, family);
            put_varint64(&mut body, number);
            put_varint64(&mut body, seq);
            body.extend_from_slice(extra);
            let mut f = Vec::new();
            put_varint32(&mut f, tag::FILE_RANGE_CLEAN);
            put_bytes(&mut f, &body);
            f
        };
        let base = full_edit().encode();
        assert_eq!(
            VersionEdit::decode(&[base.clone(), field(3, 12, 9, &[])].concat())
                .unwrap()
                .added_files[0]
                .range_clean,
            9
        );
        for (f, what) in [
            (field(3, 99, 9, &[]), "does not add"),
            (
                [field(3, 12, 9, &[]), field(3, 12, 9, &[])].concat(),
                "twice",
            ),
            (field(3, 12, 0, &[]), "is 0"),
            (field(3, 12, 9, &[0]), "longer"),
            (field(3, 12, 9, &[])[..4].to_vec(), ""),
        ] {
            let err = VersionEdit::decode(&[base.clone(), f].concat()).unwrap_err();
            assert!(err.what.contains(what), "{err:?}");
        }
    }

    #[test]
    fn file_crc_rides_with_its_added_file() {
        let mut e = full_edit();
        let mut second = e.added_files[0].clone();
        second.number = 13;
        second.crc = Some(0xdead_beef);
        e.added_files.push(second);
        let b = e.encode();
        assert_eq!(VersionEdit::decode(&b).unwrap(), e);
        // The field follows every fixed one, safe to ignore: tag 0x4001, then its length.
        let mut tail = Vec::new();
        put_varint32(&mut tail, tag::FILE_CRC);
        put_varint32(&mut tail, 6);
        put_varint32(&mut tail, 3);
        put_varint64(&mut tail, 13);
        tail.extend_from_slice(&0xdead_beef_u32.to_le_bytes());
        assert!(b.ends_with(&tail), "{}", hex(&b));
        assert_eq!(tag::FILE_CRC & tag::SAFE_TO_IGNORE, tag::SAFE_TO_IGNORE);

        let crc_field = |family: u32, number: u64, extra: &[u8]| {
            let mut body = Vec::new();
            put_varint32(&mut body, family);
            put_varint64(&mut body, number);
            body.extend_from_slice(&7u32.to_le_bytes());
            body.extend_from_slice(extra);
            let mut f = Vec::new();
            put_varint32(&mut f, tag::FILE_CRC);
            put_bytes(&mut f, &body);
            f
        };
        let base = full_edit().encode();
        // A checksum of a file the edit does not add, of one already given, or with a longer
        // body is corrupt.
        for (field, what) in [
            (crc_field(3, 99, &[]), "does not add"),
            (crc_field(4, 12, &[]), "does not add"),
            (
                [crc_field(3, 12, &[]), crc_field(3, 12, &[])].concat(),
                "twice",
            ),
            (crc_field(3, 12, &[0]), "longer"),
        ] {
            let err = VersionEdit::decode(&[base.clone(), field].concat()).unwrap_err();
            assert!(err.what.contains(what), "{err:?}");
        }
        let ok = VersionEdit::decode(&[base, crc_field(3, 12, &[])].concat()).unwrap();
        assert_eq!(ok.added_files[0].crc, Some(7));
    }

    #[test]
    fn every_keep_deleted_and_bloom_code_round_trips() {
        for k in [
            KeepDeletedCells::False,
            KeepDeletedCells::True,
            KeepDeletedCells::Ttl,
        ] {
            for b in [
                BloomType::None,
                BloomType::Row,
                BloomType::RowCol,
                BloomType::RowPrefix(1),
            ] {
                let e = VersionEdit {
                    put_tables: vec![TableEntry {
                        id: 1,
                        descriptor: TableDescriptor::new("t")
                            .family(FamilyDescriptor::new("f").keep_deleted_cells(k).bloom(b)),
                        family_ids: vec![1],
                    }],
                    ..Default::default()
                };
                assert_eq!(VersionEdit::decode(&e.encode()).unwrap(), e);
            }
        }
    }

    #[test]
    fn ignorable_unknown_tag_is_skipped() {
        let mut b = Vec::new();
        put_varint32(&mut b, tag::LAST_SEQ);
        put_varint64(&mut b, 5);
        put_varint32(&mut b, tag::SAFE_TO_IGNORE | 99);
        put_bytes(&mut b, b"future stuff");
        put_varint32(&mut b, tag::LOG_NUMBER);
        put_varint64(&mut b, 2);
        let e = VersionEdit::decode(&b).unwrap();
        assert_eq!(e.last_seq, Some(5));
        assert_eq!(e.log_number, Some(2));
    }

    #[test]
    fn unknown_tag_is_rejected_with_its_offset() {
        let mut b = Vec::new();
        put_varint32(&mut b, tag::LAST_SEQ);
        put_varint64(&mut b, 5);
        let at = b.len();
        // How a build from before `range_delete` (14) treats it, and this build tag 16.
        put_varint32(&mut b, 16);
        put_varint64(&mut b, 1);
        let err = VersionEdit::decode(&b).unwrap_err();
        assert_eq!(err.offset, at);
        assert!(err.what.contains("unknown edit field tag 16"), "{err}");
        assert_eq!(tag::WAL_FORMAT & tag::SAFE_TO_IGNORE, 0);
        assert_eq!(tag::RANGE_DELETE & tag::SAFE_TO_IGNORE, 0);
        assert_eq!(tag::RANGE_DELETE_GONE & tag::SAFE_TO_IGNORE, 0);
        assert!(VersionEdit::decode(&[0]).is_err(), "tag 0 is not defined");
    }

    #[test]
    fn duplicate_scalar_is_rejected() {
        let mut b = Vec::new();
        for _ in 0..2 {
            put_varint32(&mut b, tag::NEXT_FILE_NUMBER);
            put_varint64(&mut b, 5);
        }
        assert!(VersionEdit::decode(&b).unwrap_err().what.contains("twice"));
    }

    #[test]
    fn huge_family_count_is_rejected_before_allocating() {
        let mut b = Vec::new();
        put_varint32(&mut b, tag::PUT_TABLE);
        put_varint32(&mut b, 1);
        put_bytes(&mut b, b"default");
        put_bytes(&mut b, b"t");
        put_varint32(&mut b, u32::MAX);
        let err = VersionEdit::decode(&b).unwrap_err();
        assert!(err.what.contains("family count"), "{err}");
    }

    #[test]
    fn bad_enum_codes_are_rejected() {
        let e = VersionEdit {
            put_tables: vec![TableEntry {
                id: 1,
                descriptor: TableDescriptor::new("t").family(FamilyDescriptor::new("f")),
                family_ids: vec![1],
            }],
            ..Default::default()
        };
        let good = e.encode();
        // The descriptor's trailing bytes: ... compression u8 | block_size varint (3 bytes for
        // 65536) | new_version_behavior u8.
        let n = good.len();
        for (pos, val) in [(n - 1, 2u8), (n - 5, 9)] {
            let mut b = good.clone();
            b[pos] = val;
            assert!(VersionEdit::decode(&b).is_err(), "byte {pos} = {val}");
        }
    }

    #[test]
    fn every_truncation_and_random_damage_is_an_error_not_a_panic() {
        use rand::{Rng, SeedableRng};
        let b = full_edit().encode();
        for cut in 0..b.len() {
            // A cut exactly between two fields is a valid shorter edit; any other cut fails.
            let _ = VersionEdit::decode(&b[..cut]);
        }
        let mut rng = rand::rngs::StdRng::seed_from_u64(11);
        for _ in 0..20_000 {
            let mut d = b.clone();
            for _ in 0..rng.random_range(1..4) {
                let i = rng.random_range(0..d.len());
                d[i] = rng.random();
            }
            let _ = VersionEdit::decode(&d);
        }
    }

    /// The worked example of SPEC.md §17.3; change both together.
    #[test]
    fn worked_example_bytes() {
        let e = VersionEdit {
            next_file_number: Some(7),
            last_seq: Some(300),
            deleted_files: vec![(1, 0, 5)],
            create_namespaces: vec!["ns1".into()],
            ..Default::default()
        };
        let b = e.encode();
        assert_eq!(
            hex(&b),
            concat!(
                "01", "07", // next_file_number 7
                "02", "ac02", // last_seq 300
                "06", "01", "00", "05", // deleted_file family 1, level 0, number 5
                "07", "03", "6e7331", // create_namespace "ns1"
            )
        );
        assert_eq!(VersionEdit::decode(&b).unwrap(), e);
        let mut rec = Vec::new();
        crate::wal::record::encode(1, 2, &b, &mut rec);
        assert_eq!(
            hex(&rec),
            concat!(
                "5894cc8c",         // checksum
                "0e000000",         // length 14
                "01",               // kind
                "0100000000000000", // "segment" = manifest number 1
                "0200000000000000", // "seq" = record index 2
                "0107",             // next_file_number 7
                "02ac02",           // last_seq 300
                "06010005",         // deleted_file (1, 0, 5)
                "07036e7331",       // create_namespace "ns1"
            )
        );
    }
}
