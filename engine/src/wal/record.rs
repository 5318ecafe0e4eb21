//! Record framing of the WAL (SPEC.md §16.2) and of the manifest (§17.2). Pure functions over
//! byte slices, no I/O, so the decoders can be fuzzed.
//!
//! WAL records, layout V2 (segments named `.wal2`; integers little-endian, varints §2.2):
//!
//! ```text
//! offset  size  field
//!      0     4  checksum     mask(crc32c(segment u64 ‖ header[4..h] ‖ payload))
//!      4     1  kind         0x01 BATCH, 0x81 BATCH + synced_upto, 0x82 SEAL, 0x03 LINK
//!      5     1  check        low byte of crc32c(segment u64 ‖ header[4] ‖ header[6..h])
//!      6   1-5  length       varint32, at most MAX_PAYLOAD
//!      .  1-10  seq          varint64 (0 in a SEAL or LINK)
//!      .  1-10  synced_upto  varint64, iff bit 7 of kind: offset in this segment up to which
//!                            an fdatasync had completed before the record's group was written
//!      h     n  payload      opaque bytes (none in a SEAL)
//! ```
//!
//! `synced_upto` lets replay tell a torn *unsynced* write followed by a later unsynced record
//! that did persist (pages of one write-back persist in any order) from damage to bytes an
//! fdatasync had covered. A SEAL is a payload-less record that a clean close writes, and syncs,
//! after its final fdatasync, so that the last sync of a segment is attested even though no
//! record follows it. A LINK opens a segment that follows another: its 16-byte payload names
//! the previous segment and the offset where that segment's data ends, so replay notices an
//! older segment that lost records at its end (cut at a record boundary, which no checksum
//! shows) or a segment missing from the middle of the log.
//!
//! The segment number seeds both checksums instead of being stored, so a record that is intact
//! but sits in the wrong file (a copied or reused file) fails like a damaged one. Eight zero
//! bytes (or a zero-filled remainder shorter than that) mark the end of written data: WAL
//! segments are preallocated, so the unwritten tail reads as zeros; kind 0 is invalid.
//!
//! Layout V1 (segments named `.wal`, written by older builds and still read): a fixed 33-byte
//! header `checksum u32 | length u32 | kind u8 | segment u64 | seq u64 | synced_upto u64`, the
//! checksum over bytes 4..33 and the payload. Manifest records ([`encode`], [`decode`],
//! [`HEADER_LEN`]) use V1's framing without `synced_upto` (a 25-byte header) and only kind
//! BATCH: every manifest append is fdatasynced before the next one, so there is nothing to
//! attest.

use cellar_format::checksum::{mask, unmask};
use cellar_format::coding::{put_varint32, put_varint64, varint_len};

/// Bytes of a record header in the legacy [`WalFormat::V1`] layout.
pub const WAL_V1_HEADER_LEN: usize = 33;
/// Most bytes a WAL record header takes in either layout (V2: 6 fixed bytes, a 5-byte length
/// and two 10-byte varints at most): what a lazy reader loads before decoding.
pub const WAL_MAX_HEADER_LEN: usize = 33;
/// Bytes of zeros that mark the end of a V2 segment's written data; also the smallest V2
/// record.
pub const WAL_V2_END_LEN: usize = 8;

/// The two WAL record layouts. A segment's file name says which one its records use, so a log
/// written by an older build stays readable next to newer segments.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WalFormat {
    /// `{n:020}.wal`: 33-byte fixed headers; payloads are version-1 write batches.
    V1,
    /// `{n:020}.wal2`: compact headers with varints, the segment number folded into the
    /// checksums; payloads are version-2 write batches (SPEC.md §16.2, §18).
    V2,
}
/// Bytes of a manifest record header (the WAL header without `synced_upto`).
pub const HEADER_LEN: usize = 25;
/// Largest payload a record may carry; a larger length field is corrupt. Checked before any
/// allocation or slicing so a damaged length cannot make a reader allocate gigabytes.
pub const MAX_PAYLOAD: u32 = 256 << 20;
/// Record kind of an opaque write batch (WAL) or version edit (manifest).
pub const KIND_BATCH: u8 = 1;
/// WAL record kind of a seal: no payload, seq 0, `synced_upto` = its own offset, written and
/// synced after the final fdatasync of a clean close. Never delivered by replay.
pub const KIND_SEAL: u8 = 2;
/// WAL record kind of a link: seq 0, `synced_upto` 0, a 16-byte payload `previous segment u64
/// LE | end of its data u64 LE`; only at offset 0 of a segment. Never delivered by replay.
pub const KIND_LINK: u8 = 3;
/// Payload bytes of a LINK.
pub const LINK_PAYLOAD_LEN: usize = 16;

/// Offset of the kind byte inside a header; the corruption scanner searches for it.
pub(crate) const KIND_OFFSET: usize = 8;

/// The two header layouts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Layout {
    /// 25 bytes, kind BATCH only.
    Manifest,
    /// 33 bytes with `synced_upto`, kinds BATCH and SEAL.
    Wal,
}

impl Layout {
    const fn header_len(self) -> usize {
        match self {
            Layout::Manifest => HEADER_LEN,
            Layout::Wal => WAL_V1_HEADER_LEN,
        }
    }

    fn kind_ok(self, kind: u8) -> bool {
        kind == KIND_BATCH || (self == Layout::Wal && (kind == KIND_SEAL || kind == KIND_LINK))
    }
}

/// A successfully decoded manifest record, borrowing its payload from the input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Record<'a> {
    /// Sequence number.
    pub seq: u64,
    /// Payload bytes.
    pub payload: &'a [u8],
    /// Bytes the record occupies (header + payload).
    pub len: usize,
}

/// What [`decode`] found at the start of its input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decoded<'a> {
    /// A valid record (checksum, kind and segment all verified; the caller checks seq order).
    Record(Record<'a>),
    /// The end of written data: an all-zero header, a zero-filled short remainder, or no bytes.
    End,
}

/// A successfully decoded WAL BATCH record, borrowing its payload from the input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WalRecord<'a> {
    /// Sequence number.
    pub seq: u64,
    /// Segment offset an fdatasync had covered when the record's group was written.
    pub synced_upto: u64,
    /// Payload bytes.
    pub payload: &'a [u8],
    /// Bytes the record occupies (header + payload).
    pub len: usize,
}

/// What [`decode_wal`] found at the start of its input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WalDecoded<'a> {
    /// A valid BATCH record (checksum, kind and segment verified; the caller checks seq order).
    Record(WalRecord<'a>),
    /// A valid SEAL: bytes of the segment up to `synced_upto` were durable. Not part of the log.
    Seal {
        /// The attested durable offset.
        synced_upto: u64,
        /// Bytes the seal occupies.
        len: usize,
    },
    /// A valid LINK: this segment follows segment `previous`, whose data ended at `previous_end`.
    /// Not part of the log.
    Link {
        /// Number of the segment written before this one.
        previous: u64,
        /// Offset where the previous segment's data ended (its file length after any cut).
        previous_end: u64,
        /// Bytes the link occupies.
        len: usize,
    },
    /// The end of written data: an all-zero header, a zero-filled short remainder, or no bytes.
    End,
}

/// Why the bytes at a position are not a valid record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordError {
    /// Fewer bytes than a header remain and they are not all zero.
    TruncatedHeader {
        /// Bytes available.
        available: usize,
    },
    /// The length field exceeds [`MAX_PAYLOAD`].
    Oversized {
        /// The length field.
        length: u32,
    },
    /// The payload runs past the end of the available bytes.
    TruncatedPayload {
        /// The length field.
        length: u32,
        /// Payload bytes available.
        available: usize,
    },
    /// The checksum does not match.
    BadChecksum {
        /// Stored (unmasked) CRC.
        stored: u32,
        /// Computed CRC.
        computed: u32,
    },
    /// A V2 header whose check byte does not match, or whose varints are malformed: damage,
    /// or a record of another segment (whose number seeds the check).
    BadHeader,
    /// The checksum matches but the kind is not valid for the file.
    BadKind(u8),
    /// The checksum matches, the kind is [`KIND_SEAL`], but the seal has a payload or a seq.
    BadSeal,
    /// The checksum matches, the kind is [`KIND_LINK`], but the payload is not 16 bytes, or
    /// the seq or `synced_upto` is not 0.
    BadLink,
    /// The checksum matches but the record names another segment.
    WrongSegment {
        /// Segment number in the record.
        found: u64,
        /// Segment number of the file.
        expected: u64,
    },
}

impl RecordError {
    /// Whether this damage is what an interrupted write leaves behind (bytes missing or not
    /// yet persisted), as opposed to a record that was completely and validly written but is
    /// wrong (bad kind, malformed seal), which no crash can produce.
    pub fn could_be_torn_write(&self) -> bool {
        !matches!(
            self,
            RecordError::BadKind(_) | RecordError::BadSeal | RecordError::BadLink
        )
    }
}

impl std::fmt::Display for RecordError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RecordError::TruncatedHeader { available } => {
                write!(f, "truncated record header ({available} bytes)")
            }
            RecordError::Oversized { length } => {
                write!(
                    f,
                    "record length {length} exceeds the maximum {MAX_PAYLOAD}"
                )
            }
            RecordError::TruncatedPayload { length, available } => write!(
                f,
                "record payload truncated ({available} of {length} bytes before end of file)"
            ),
            RecordError::BadChecksum { stored, computed } => write!(
                f,
                "record checksum mismatch (stored {stored:#010x}, computed {computed:#010x})"
            ),
            RecordError::BadHeader => write!(
                f,
                "record header check mismatch (damage, or a record of another segment)"
            ),
            RecordError::BadKind(k) => write!(f, "unknown record kind {k}"),
            RecordError::BadSeal => write!(f, "seal record with a payload or a seq"),
            RecordError::BadLink => write!(
                f,
                "link record without a 16-byte payload, or with a seq or synced_upto"
            ),
            RecordError::WrongSegment { found, expected } => write!(
                f,
                "record belongs to segment {found}, found in segment {expected}"
            ),
        }
    }
}

fn u32_at(h: &[u8], o: usize) -> u32 {
    u32::from_le_bytes([h[o], h[o + 1], h[o + 2], h[o + 3]])
}

fn u64_at(h: &[u8], o: usize) -> u64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(&h[o..o + 8]);
    u64::from_le_bytes(b)
}

/// The stored checksum of a record: covers the header after the checksum, and the payload.
fn checksum(header_tail: &[u8], payload: &[u8]) -> u32 {
    let crc = crc32c::crc32c(header_tail);
    mask(crc32c::crc32c_append(crc, payload))
}

fn encode_with(
    layout: Layout,
    kind: u8,
    segment: u64,
    seq: u64,
    synced_upto: u64,
    payload: &[u8],
    out: &mut Vec<u8>,
) {
    debug_assert!(payload.len() <= MAX_PAYLOAD as usize);
    let start = out.len();
    out.extend_from_slice(&[0u8; 4]);
    out.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    out.push(kind);
    out.extend_from_slice(&segment.to_le_bytes());
    out.extend_from_slice(&seq.to_le_bytes());
    if layout == Layout::Wal {
        out.extend_from_slice(&synced_upto.to_le_bytes());
    }
    let end = start + layout.header_len();
    let sum = checksum(&out[start + 4..end], payload);
    out[start..start + 4].copy_from_slice(&sum.to_le_bytes());
    out.extend_from_slice(payload);
}

/// Append a BATCH record in the legacy [`WalFormat::V1`] layout (33-byte header). Writers no
/// longer produce it; it stays so tests and fuzz seeds can build logs an older build wrote.
pub fn encode_wal_v1(segment: u64, seq: u64, synced_upto: u64, payload: &[u8], out: &mut Vec<u8>) {
    encode_with(
        Layout::Wal,
        KIND_BATCH,
        segment,
        seq,
        synced_upto,
        payload,
        out,
    );
}

/// Append a SEAL in the legacy [`WalFormat::V1`] layout.
pub fn encode_seal_v1(segment: u64, synced_upto: u64, out: &mut Vec<u8>) {
    encode_with(Layout::Wal, KIND_SEAL, segment, 0, synced_upto, &[], out);
}

/// Append a LINK in the legacy [`WalFormat::V1`] layout.
pub fn encode_link_v1(segment: u64, previous: u64, previous_end: u64, out: &mut Vec<u8>) {
    encode_with(
        Layout::Wal,
        KIND_LINK,
        segment,
        0,
        0,
        &link_payload(previous, previous_end),
        out,
    );
}

fn link_payload(previous: u64, previous_end: u64) -> [u8; LINK_PAYLOAD_LEN] {
    let mut payload = [0u8; LINK_PAYLOAD_LEN];
    payload[..8].copy_from_slice(&previous.to_le_bytes());
    payload[8..].copy_from_slice(&previous_end.to_le_bytes());
    payload
}

/// Append the framed manifest record to `out` (file number `segment`).
///
/// The caller guarantees `payload.len() <= MAX_PAYLOAD`.
pub fn encode(segment: u64, seq: u64, payload: &[u8], out: &mut Vec<u8>) {
    encode_with(Layout::Manifest, KIND_BATCH, segment, seq, 0, payload, out);
}

/// Framed size of a manifest record with `payload_len` bytes of payload.
pub fn framed_len(payload_len: usize) -> usize {
    HEADER_LEN + payload_len
}

fn peek_length_with(layout: Layout, buf: &[u8]) -> Option<u32> {
    let h = buf.get(..layout.header_len())?;
    let length = u32_at(h, 4);
    (length <= MAX_PAYLOAD).then_some(length)
}

/// The payload length a manifest record's header announces, if `buf` holds a whole header whose
/// length field is in range (what [`peek_wal_len`] is for the WAL).
pub fn peek_length(buf: &[u8]) -> Option<u32> {
    peek_length_with(Layout::Manifest, buf)
}

/// A record whose checksum, kind and segment were verified.
struct Checked<'a> {
    kind: u8,
    seq: u64,
    synced_upto: u64,
    payload: &'a [u8],
    len: usize,
}

/// `Ok(None)` is the end of written data.
fn decode_with(
    layout: Layout,
    buf: &[u8],
    segment: u64,
) -> Result<Option<Checked<'_>>, RecordError> {
    let hl = layout.header_len();
    if buf.len() < hl {
        return if buf.iter().all(|&b| b == 0) {
            Ok(None)
        } else {
            Err(RecordError::TruncatedHeader {
                available: buf.len(),
            })
        };
    }
    let header = &buf[..hl];
    if header.iter().all(|&b| b == 0) {
        return Ok(None);
    }
    let (stored, length, kind) = (u32_at(header, 0), u32_at(header, 4), header[KIND_OFFSET]);
    let (rec_segment, seq) = (u64_at(header, 9), u64_at(header, 17));
    let synced_upto = if layout == Layout::Wal {
        u64_at(header, 25)
    } else {
        0
    };
    if length > MAX_PAYLOAD {
        return Err(RecordError::Oversized { length });
    }
    let available = buf.len() - hl;
    if length as usize > available {
        return Err(RecordError::TruncatedPayload { length, available });
    }
    let payload = &buf[hl..hl + length as usize];
    let computed = checksum(&header[4..], payload);
    if computed != stored {
        return Err(RecordError::BadChecksum {
            stored: unmask(stored),
            computed: unmask(computed),
        });
    }
    // Kind and segment are checked after the checksum: with a good checksum these are bytes
    // the writer really produced, so they mean a foreign or stale record, not random damage.
    if !layout.kind_ok(kind) {
        return Err(RecordError::BadKind(kind));
    }
    if kind == KIND_SEAL && (length != 0 || seq != 0) {
        return Err(RecordError::BadSeal);
    }
    if kind == KIND_LINK && (length as usize != LINK_PAYLOAD_LEN || seq != 0 || synced_upto != 0) {
        return Err(RecordError::BadLink);
    }
    if rec_segment != segment {
        return Err(RecordError::WrongSegment {
            found: rec_segment,
            expected: segment,
        });
    }
    Ok(Some(Checked {
        kind,
        seq,
        synced_upto,
        payload,
        len: hl + length as usize,
    }))
}

fn decode_wal_v1(buf: &[u8], segment: u64) -> Result<WalDecoded<'_>, RecordError> {
    wal_decoded(decode_with(Layout::Wal, buf, segment)?)
}

fn wal_decoded(c: Option<Checked<'_>>) -> Result<WalDecoded<'_>, RecordError> {
    Ok(match c {
        None => WalDecoded::End,
        Some(c) if c.kind == KIND_SEAL => WalDecoded::Seal {
            synced_upto: c.synced_upto,
            len: c.len,
        },
        Some(c) if c.kind == KIND_LINK => WalDecoded::Link {
            previous: u64_at(c.payload, 0),
            previous_end: u64_at(c.payload, 8),
            len: c.len,
        },
        Some(c) => WalDecoded::Record(WalRecord {
            seq: c.seq,
            synced_upto: c.synced_upto,
            payload: c.payload,
            len: c.len,
        }),
    })
}

/// Decode the manifest record at the start of `buf`, which is the data of manifest `segment`
/// from the record's offset up to the end of the file.
pub fn decode(buf: &[u8], segment: u64) -> Result<Decoded<'_>, RecordError> {
    Ok(match decode_with(Layout::Manifest, buf, segment)? {
        None => Decoded::End,
        Some(c) => Decoded::Record(Record {
            seq: c.seq,
            payload: c.payload,
            len: c.len,
        }),
    })
}

/// If a valid record of `segment` with a seq above `after` (or, in the WAL, a valid seal)
/// starts at `buf[0]`: its `synced_upto` (0 in the manifest). Cheap rejections (kind, segment)
/// come before the checksum so scanning a damaged region byte by byte stays fast.
fn valid_start(layout: Layout, buf: &[u8], segment: u64, after: u64) -> Option<u64> {
    if buf.len() < layout.header_len()
        || !layout.kind_ok(buf[KIND_OFFSET])
        || buf[9..17] != segment.to_le_bytes()
    {
        return None;
    }
    match decode_with(layout, buf, segment) {
        Ok(Some(c)) if c.kind == KIND_SEAL || c.seq > after => Some(c.synced_upto),
        _ => None,
    }
}

/// The first offset `>= from` in `data` where a valid record starts, with its `synced_upto`.
/// Only offsets whose kind byte is a valid kind are candidates, which skips zero-filled regions
/// in a single memchr-like pass.
fn find_with(
    layout: Layout,
    data: &[u8],
    from: usize,
    segment: u64,
    after: u64,
) -> Option<(usize, u64)> {
    let mut p = from;
    while p + layout.header_len() <= data.len() {
        let rel = data[p + KIND_OFFSET..]
            .iter()
            .position(|&b| layout.kind_ok(b))?;
        p += rel;
        if let Some(synced_upto) = valid_start(layout, &data[p..], segment, after) {
            return Some((p, synced_upto));
        }
        p += 1;
    }
    None
}

/// The first offset `>= from` in WAL segment data where a valid BATCH record of `segment` with
/// a seq above `after`, or a valid seal of `segment`, starts, with its `synced_upto`.
pub(crate) fn find_valid_wal_record(
    format: WalFormat,
    data: &[u8],
    from: usize,
    segment: u64,
    after: u64,
) -> Option<(usize, u64)> {
    match format {
        WalFormat::V1 => find_with(Layout::Wal, data, from, segment, after),
        WalFormat::V2 => find_v2(data, from, segment, after),
    }
}

/// The first offset `>= from` in manifest data where a valid record of manifest `segment` with
/// a seq above `after` starts.
pub(crate) fn find_valid_record(
    data: &[u8],
    from: usize,
    segment: u64,
    after: u64,
) -> Option<usize> {
    find_with(Layout::Manifest, data, from, segment, after).map(|(p, _)| p)
}

// ---------------------------------------------------------------------------------------------
// The V2 layout (SPEC.md §16.2):
//
// offset  size  field
//      0     4  checksum     mask(crc32c(segment u64 LE ‖ bytes 4..header end ‖ payload))
//      4     1  kind         0x01 BATCH, 0x81 BATCH with synced_upto, 0x82 SEAL, 0x03 LINK
//      5     1  check        low byte of crc32c(segment u64 LE ‖ byte 4 ‖ bytes 6..header end)
//      6     v  length       varint32, at most MAX_PAYLOAD
//      .     v  seq          varint64 (0 in a SEAL or LINK)
//      .     v  synced_upto  varint64, present iff bit 7 of kind is set (absent means 0)
//      .     n  payload
//
// The 33-byte V1 header spent 16 bytes on the segment number and `synced_upto` of every record,
// a quarter of a small write's log bytes. Here the segment number is never stored: it seeds
// both checksums, so a record in the wrong file fails them as damage would (V1 reported it the
// same way, as a torn-like anomaly). The check byte lets the corruption scanner reject a
// candidate offset on its header alone before checksumming a payload.

/// Bit of the kind byte that says `synced_upto` follows the seq.
const V2_SYNCED: u8 = 0x80;
const V2_BATCH: u8 = KIND_BATCH;
const V2_BATCH_SYNCED: u8 = KIND_BATCH | V2_SYNCED;
const V2_SEAL: u8 = KIND_SEAL | V2_SYNCED;
const V2_LINK: u8 = KIND_LINK;
/// Offset of the kind byte in a V2 header.
const V2_KIND_OFFSET: usize = 4;

fn v2_kind_ok(k: u8) -> bool {
    matches!(k, V2_BATCH | V2_BATCH_SYNCED | V2_SEAL | V2_LINK)
}

/// Room for the segment number and a header's bytes after the checksum: the kind, the check
/// byte and three varints of at most 5 + 10 + 10 bytes.
const SEEDED_HEADER_MAX: usize = 8 + 2 + 25;

/// The segment number followed by `parts`, gathered on the stack so that the CRC crate is
/// called once for them (each call of a few bytes costs more in its alignment loops than the
/// bytes do: six calls a record were 8% of a put's instructions, callgrind); `None` when they
/// do not fit, which a well-formed header always does.
fn seeded(segment: u64, parts: [&[u8]; 2]) -> Option<([u8; SEEDED_HEADER_MAX], usize)> {
    let mut buf = [0u8; SEEDED_HEADER_MAX];
    buf[..8].copy_from_slice(&segment.to_le_bytes());
    let mut n = 8;
    for p in parts {
        buf.get_mut(n..n + p.len())?.copy_from_slice(p);
        n += p.len();
    }
    Some((buf, n))
}

/// CRC-32C of the segment number followed by `parts`.
fn seeded_crc(segment: u64, parts: [&[u8]; 2]) -> u32 {
    match seeded(segment, parts) {
        Some((buf, n)) => crc32c::crc32c(&buf[..n]),
        None => {
            let crc = crc32c::crc32c(&segment.to_le_bytes());
            crc32c::crc32c_append(crc32c::crc32c_append(crc, parts[0]), parts[1])
        }
    }
}

fn v2_check(segment: u64, header: &[u8]) -> u8 {
    seeded_crc(
        segment,
        [
            &header[V2_KIND_OFFSET..V2_KIND_OFFSET + 1],
            header.get(6..).unwrap_or_default(),
        ],
    ) as u8
}

fn v2_checksum(segment: u64, header_tail: &[u8], payload: &[u8]) -> u32 {
    let crc = seeded_crc(segment, [header_tail, &[]]);
    mask(crc32c::crc32c_append(crc, payload))
}

pub(crate) fn encode_v2(
    kind: u8,
    segment: u64,
    seq: u64,
    synced_upto: u64,
    payload: &[u8],
    out: &mut Vec<u8>,
) {
    debug_assert!(payload.len() <= MAX_PAYLOAD as usize);
    let start = out.len();
    out.extend_from_slice(&[0, 0, 0, 0, kind, 0]);
    put_varint32(out, payload.len() as u32);
    put_varint64(out, seq);
    if kind & V2_SYNCED != 0 {
        put_varint64(out, synced_upto);
    }
    let check = v2_check(segment, &out[start..]);
    out[start + 5] = check;
    let sum = v2_checksum(segment, &out[start + 4..], payload);
    out[start..start + 4].copy_from_slice(&sum.to_le_bytes());
    out.extend_from_slice(payload);
}

/// A V2 BATCH header (no payload) announcing a payload over [`MAX_PAYLOAD`], with a valid
/// header check: what a damaged length that kept the check would look like.
#[cfg(test)]
pub(crate) fn oversized_v2_header(segment: u64, seq: u64) -> Vec<u8> {
    let mut out = vec![0, 0, 0, 0, V2_BATCH, 0];
    put_varint32(&mut out, MAX_PAYLOAD + 1);
    put_varint64(&mut out, seq);
    out[5] = v2_check(segment, &out);
    out
}

/// Append the framed WAL BATCH record to `out` (layout [`WalFormat::V2`]). `synced_upto` is the
/// offset of segment `segment` up to which an fdatasync had completed before the record's group
/// is written.
///
/// The caller guarantees `payload.len() <= MAX_PAYLOAD` (the WAL checks it at `append`).
pub fn encode_wal(segment: u64, seq: u64, synced_upto: u64, payload: &[u8], out: &mut Vec<u8>) {
    let kind = if synced_upto == 0 {
        V2_BATCH
    } else {
        V2_BATCH_SYNCED
    };
    encode_v2(kind, segment, seq, synced_upto, payload, out);
}

/// Append a WAL SEAL of segment `segment` attesting that its bytes up to `synced_upto` are
/// durable.
pub fn encode_seal(segment: u64, synced_upto: u64, out: &mut Vec<u8>) {
    encode_v2(V2_SEAL, segment, 0, synced_upto, &[], out);
}

/// Append a WAL LINK opening segment `segment`: it follows segment `previous`, whose data
/// ends at `previous_end`.
pub fn encode_link(segment: u64, previous: u64, previous_end: u64, out: &mut Vec<u8>) {
    let payload = link_payload(previous, previous_end);
    encode_v2(V2_LINK, segment, 0, 0, &payload, out);
}

/// Framed size of the BATCH record [`encode_wal`] writes for these fields.
pub fn wal_framed_len(seq: u64, synced_upto: u64, payload_len: usize) -> usize {
    let synced = if synced_upto == 0 {
        0
    } else {
        varint_len(synced_upto)
    };
    6 + varint_len(payload_len as u64) + varint_len(seq) + synced + payload_len
}

/// Framed size of the LINK [`encode_link`] writes.
pub fn link_framed_len() -> usize {
    6 + 1 + 1 + LINK_PAYLOAD_LEN
}

/// A varint of at most `max` bytes at `buf[at..]`: `Ok(None)` if the buffer ends inside it.
fn v2_varint(buf: &[u8], at: &mut usize, max: usize) -> Result<Option<u64>, RecordError> {
    let mut v = 0u64;
    for i in 0..max {
        let Some(&b) = buf.get(*at + i) else {
            return Ok(None);
        };
        let bits = u64::from(b & 0x7f);
        if i == 9 && bits > 1 {
            return Err(RecordError::BadHeader);
        }
        v |= bits << (7 * i);
        if b & 0x80 == 0 {
            // Only the shortest encoding: a record decodes to one set of fields and back to
            // the same bytes.
            if b == 0 && i > 0 {
                return Err(RecordError::BadHeader);
            }
            *at += i + 1;
            return Ok(Some(v));
        }
    }
    Err(RecordError::BadHeader)
}

/// The parsed fixed and varint fields of a V2 header, before any checksum.
struct V2Header {
    kind: u8,
    length: u64,
    seq: u64,
    synced_upto: u64,
    len: usize,
}

/// `Ok(None)` is the end of written data.
fn parse_v2_header(buf: &[u8]) -> Result<Option<V2Header>, RecordError> {
    let truncated = || RecordError::TruncatedHeader {
        available: buf.len(),
    };
    if buf.len() < WAL_V2_END_LEN {
        return if buf.iter().all(|&b| b == 0) {
            Ok(None)
        } else {
            Err(truncated())
        };
    }
    if buf[..WAL_V2_END_LEN].iter().all(|&b| b == 0) {
        return Ok(None);
    }
    let kind = buf[V2_KIND_OFFSET];
    let mut at = 6;
    let length = v2_varint(buf, &mut at, 5)?.ok_or_else(truncated)?;
    let seq = v2_varint(buf, &mut at, 10)?.ok_or_else(truncated)?;
    let synced_upto = if kind & V2_SYNCED != 0 {
        v2_varint(buf, &mut at, 10)?.ok_or_else(truncated)?
    } else {
        0
    };
    Ok(Some(V2Header {
        kind,
        length,
        seq,
        synced_upto,
        len: at,
    }))
}

fn decode_v2(buf: &[u8], segment: u64) -> Result<Option<Checked<'_>>, RecordError> {
    let Some(h) = parse_v2_header(buf)? else {
        return Ok(None);
    };
    let header = &buf[..h.len];
    if v2_check(segment, header) != header[5] {
        return Err(RecordError::BadHeader);
    }
    let length = u32::try_from(h.length)
        .ok()
        .filter(|&l| l <= MAX_PAYLOAD)
        .ok_or(RecordError::Oversized {
            length: u32::try_from(h.length).unwrap_or(u32::MAX),
        })?;
    let available = buf.len() - h.len;
    if length as usize > available {
        return Err(RecordError::TruncatedPayload { length, available });
    }
    let payload = &buf[h.len..h.len + length as usize];
    let stored = u32_at(header, 0);
    let computed = v2_checksum(segment, &header[4..], payload);
    if computed != stored {
        return Err(RecordError::BadChecksum {
            stored: unmask(stored),
            computed: unmask(computed),
        });
    }
    if !v2_kind_ok(h.kind) {
        return Err(RecordError::BadKind(h.kind));
    }
    let kind = h.kind & !V2_SYNCED;
    if kind == KIND_SEAL && (length != 0 || h.seq != 0) {
        return Err(RecordError::BadSeal);
    }
    if kind == KIND_LINK && (length as usize != LINK_PAYLOAD_LEN || h.seq != 0) {
        return Err(RecordError::BadLink);
    }
    Ok(Some(Checked {
        kind,
        seq: h.seq,
        synced_upto: h.synced_upto,
        payload,
        len: h.len + length as usize,
    }))
}

/// Decode the WAL record at the start of `buf`, which is the data of segment `segment` (in
/// layout `format`) from the record's offset up to the end of the file (or of what has been
/// loaded).
pub fn decode_wal(
    format: WalFormat,
    buf: &[u8],
    segment: u64,
) -> Result<WalDecoded<'_>, RecordError> {
    match format {
        WalFormat::V1 => decode_wal_v1(buf, segment),
        WalFormat::V2 => wal_decoded(decode_v2(buf, segment)?),
    }
}

/// The framed length (header and payload) a WAL header announces, if `buf` holds a whole
/// header whose length field is in range. Lets a lazy reader know how many bytes to load
/// before calling [`decode_wal`].
pub fn peek_wal_len(format: WalFormat, buf: &[u8]) -> Option<usize> {
    peek_wal_header(format, buf).map(|(h, p)| h + p)
}

/// The header length and the payload length of the WAL record at the start of `buf`, if it
/// holds a whole header (not the end marker) whose length field is in range. Nothing is
/// checksummed.
pub fn peek_wal_header(format: WalFormat, buf: &[u8]) -> Option<(usize, usize)> {
    match format {
        WalFormat::V1 => {
            if buf.get(..WAL_V1_HEADER_LEN)?.iter().all(|&b| b == 0) {
                return None;
            }
            peek_length_with(Layout::Wal, buf).map(|l| (WAL_V1_HEADER_LEN, l as usize))
        }
        WalFormat::V2 => match parse_v2_header(buf) {
            Ok(Some(h)) if h.length <= u64::from(MAX_PAYLOAD) => Some((h.len, h.length as usize)),
            _ => None,
        },
    }
}

/// [`find_valid_wal_record`] for V2: offsets whose kind byte is valid and whose header check
/// matches are the only ones checksummed whole.
fn find_v2(data: &[u8], from: usize, segment: u64, after: u64) -> Option<(usize, u64)> {
    let mut p = from;
    while p + WAL_V2_END_LEN <= data.len() {
        let rel = data[p + V2_KIND_OFFSET..]
            .iter()
            .position(|&b| v2_kind_ok(b))?;
        p += rel;
        if p + WAL_V2_END_LEN > data.len() {
            return None;
        }
        let buf = &data[p..];
        if let Ok(Some(h)) = parse_v2_header(buf) {
            if v2_check(segment, &buf[..h.len]) == buf[5] {
                match decode_v2(buf, segment) {
                    Ok(Some(c))
                        if c.kind == KIND_SEAL || (c.kind == KIND_BATCH && c.seq > after) =>
                    {
                        return Some((p, c.synced_upto));
                    }
                    _ => {}
                }
            }
        }
        p += 1;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(segment: u64, seq: u64, payload: &[u8]) -> Vec<u8> {
        let mut v = Vec::new();
        encode(segment, seq, payload, &mut v);
        v
    }

    /// The one-call CRC of a segment number and header bytes equals the chained CRC, for
    /// parts that fit the stack buffer and for those that take the fallback.
    #[test]
    fn seeded_crc_is_the_chained_crc() {
        let bytes: Vec<u8> = (0..64u8).map(|i| i.wrapping_mul(37) ^ 0x5a).collect();
        for segment in [0u64, 1, 7, u64::MAX] {
            for a in 0..=40 {
                for b in [0usize, 1, 9, 25, 30] {
                    let (pa, pb) = (&bytes[..a], &bytes[64 - b..]);
                    let chained = crc32c::crc32c_append(
                        crc32c::crc32c_append(crc32c::crc32c(&segment.to_le_bytes()), pa),
                        pb,
                    );
                    assert_eq!(seeded_crc(segment, [pa, pb]), chained, "{segment} {a} {b}");
                    assert_eq!(
                        seeded(segment, [pa, pb]).is_some(),
                        8 + a + b <= SEEDED_HEADER_MAX
                    );
                }
            }
        }
    }

    fn hex(b: &[u8]) -> String {
        b.iter().map(|x| format!("{x:02x}")).collect()
    }

    /// The manifest framing (SPEC.md §17.2): the WAL framing without `synced_upto`.
    #[test]
    fn manifest_record_bytes() {
        let rec = one(1, 1, b"hello");
        assert_eq!(rec.len(), 30);
        assert_eq!(
            hex(&rec),
            concat!(
                "70d544fa",         // checksum
                "05000000",         // length 5
                "01",               // kind BATCH
                "0100000000000000", // segment 1
                "0100000000000000", // seq 1
                "68656c6c6f",       // "hello"
            )
        );
        match decode(&rec, 1).unwrap() {
            Decoded::Record(r) => {
                assert_eq!(r.seq, 1);
                assert_eq!(r.payload, b"hello");
                assert_eq!(r.len, 30);
            }
            Decoded::End => panic!("expected a record"),
        }
    }

    #[test]
    fn round_trip_including_empty_payload() {
        for payload in [&b""[..], b"x", &[7u8; 1000]] {
            let mut buf = one(9, 42, payload);
            buf.extend_from_slice(&[0u8; HEADER_LEN]);
            let Decoded::Record(r) = decode(&buf, 9).unwrap() else {
                panic!("no record")
            };
            assert_eq!(
                (r.seq, r.payload, r.len),
                (42, payload, HEADER_LEN + payload.len())
            );
            assert_eq!(decode(&buf[r.len..], 9).unwrap(), Decoded::End);
        }
    }

    #[test]
    fn bad_checksum() {
        let mut rec = one(1, 5, b"payload");
        rec[HEADER_LEN + 2] ^= 0x10;
        assert!(matches!(
            decode(&rec, 1),
            Err(RecordError::BadChecksum { .. })
        ));
        let mut rec = one(1, 5, b"payload");
        rec[0] ^= 1;
        assert!(matches!(
            decode(&rec, 1),
            Err(RecordError::BadChecksum { .. })
        ));
    }

    #[test]
    fn bad_kind() {
        let mut rec = one(1, 5, b"payload");
        rec[KIND_OFFSET] = 2;
        // Re-seal so only the kind is wrong.
        let sum = checksum(&rec[4..HEADER_LEN], &rec[HEADER_LEN..]);
        rec[..4].copy_from_slice(&sum.to_le_bytes());
        assert_eq!(decode(&rec, 1), Err(RecordError::BadKind(2)));
        assert!(!RecordError::BadKind(2).could_be_torn_write());
    }

    #[test]
    fn length_past_end() {
        let mut rec = one(1, 5, b"payload");
        rec[4..8].copy_from_slice(&1000u32.to_le_bytes());
        assert_eq!(
            decode(&rec, 1),
            Err(RecordError::TruncatedPayload {
                length: 1000,
                available: 7
            })
        );
    }

    #[test]
    fn truncated_header() {
        let rec = one(1, 5, b"payload");
        for cut in 1..HEADER_LEN {
            assert_eq!(
                decode(&rec[..cut], 1),
                Err(RecordError::TruncatedHeader { available: cut }),
                "cut at {cut}"
            );
        }
    }

    #[test]
    fn truncated_payload() {
        let rec = one(1, 5, b"payload");
        for cut in HEADER_LEN..rec.len() {
            assert!(
                matches!(
                    decode(&rec[..cut], 1),
                    Err(RecordError::TruncatedPayload { length: 7, .. })
                ),
                "cut at {cut}"
            );
        }
    }

    #[test]
    fn zero_tail() {
        assert_eq!(decode(&[], 1), Ok(Decoded::End));
        assert_eq!(decode(&[0u8; 10], 1), Ok(Decoded::End));
        assert_eq!(decode(&[0u8; 4096], 1), Ok(Decoded::End));
        let mut almost = [0u8; 30];
        almost[29] = 1;
        // Zero header: the data ends even though a non-zero byte follows.
        assert_eq!(decode(&almost, 1), Ok(Decoded::End));
    }

    #[test]
    fn stale_segment_number() {
        let rec = one(3, 5, b"payload");
        assert_eq!(
            decode(&rec, 4),
            Err(RecordError::WrongSegment {
                found: 3,
                expected: 4
            })
        );
        assert_eq!(valid_start(Layout::Manifest, &rec, 4, 0), None);
        assert_eq!(valid_start(Layout::Manifest, &rec, 3, 0), Some(0));
    }

    #[test]
    fn oversized_length() {
        let mut rec = one(1, 5, b"payload");
        rec[4..8].copy_from_slice(&(MAX_PAYLOAD + 1).to_le_bytes());
        assert_eq!(
            decode(&rec, 1),
            Err(RecordError::Oversized {
                length: MAX_PAYLOAD + 1
            })
        );
        assert_eq!(peek_length(&rec), None);
        rec[4..8].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(matches!(
            decode(&rec, 1),
            Err(RecordError::Oversized { .. })
        ));
    }

    #[test]
    fn scanner_finds_next_valid_record_and_respects_seq() {
        let mut data = vec![0xabu8; 13];
        let at = data.len();
        encode(2, 10, b"abc", &mut data);
        data.extend_from_slice(&[1u8; 40]);
        assert_eq!(find_valid_record(&data, 0, 2, 0), Some(at));
        assert_eq!(find_valid_record(&data, 0, 2, 9), Some(at));
        assert_eq!(
            find_valid_record(&data, 0, 2, 10),
            None,
            "seq must exceed `after`"
        );
        assert_eq!(find_valid_record(&data, at + 1, 2, 0), None);
        assert_eq!(find_valid_record(&data, 0, 3, 0), None);
    }

    #[test]
    fn decoder_never_panics_on_arbitrary_bytes() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let base = one(1, 1, b"some payload bytes");
        for _ in 0..20_000 {
            let mut b = base.clone();
            let n = rng.random_range(0..4);
            for _ in 0..n {
                let i = rng.random_range(0..b.len());
                b[i] = rng.random();
            }
            let cut = rng.random_range(0..=b.len());
            let _ = decode(&b[..cut], 1);
            let _ = find_valid_record(&b[..cut], 0, 1, 0);
        }
    }

    fn wal_one(segment: u64, seq: u64, synced_upto: u64, payload: &[u8]) -> Vec<u8> {
        let mut v = Vec::new();
        encode_wal(segment, seq, synced_upto, payload, &mut v);
        v
    }

    const V2: WalFormat = WalFormat::V2;

    /// The worked example of the WAL section of SPEC.md (§16.2); change both together.
    #[test]
    fn worked_example_bytes() {
        let rec = wal_one(1, 1, 0, b"hello");
        assert_eq!(rec.len(), 13);
        assert_eq!(
            hex(&rec),
            concat!(
                "e119af61",   // checksum
                "01",         // kind BATCH, no synced_upto
                "ef",         // header check
                "05",         // length 5
                "01",         // seq 1
                "68656c6c6f", // "hello"
            )
        );
        match decode_wal(V2, &rec, 1).unwrap() {
            WalDecoded::Record(r) => {
                assert_eq!((r.seq, r.synced_upto), (1, 0));
                assert_eq!(r.payload, b"hello");
                assert_eq!(r.len, 13);
            }
            other => panic!("expected a record, got {other:?}"),
        }
        // The seal a clean close would write right after it (SPEC.md §16.2).
        let mut seal = Vec::new();
        encode_seal(1, 13, &mut seal);
        assert_eq!(
            hex(&seal),
            concat!(
                "1b452f59", // checksum
                "82",       // kind SEAL, synced_upto follows
                "00",       // header check
                "00",       // length 0
                "00",       // seq 0
                "0d",       // synced_upto 13
            )
        );
        // Segment 2's LINK, after that seal made segment 1's data end at 13 + 9 = 22.
        let mut link = Vec::new();
        encode_link(2, 1, 22, &mut link);
        assert_eq!(link.len(), link_framed_len());
        assert_eq!(
            hex(&link),
            concat!(
                "a4439043",         // checksum
                "03",               // kind LINK
                "79",               // header check
                "10",               // length 16
                "00",               // seq 0
                "0100000000000000", // previous segment 1
                "1600000000000000", // its data ended at 22
            )
        );
        assert_eq!(
            decode_wal(V2, &link, 2).unwrap(),
            WalDecoded::Link {
                previous: 1,
                previous_end: 22,
                len: 24
            }
        );
        // A LINK with a seq, or with a payload other than 16 bytes, is malformed.
        let mut bad = Vec::new();
        encode_v2(V2_LINK, 2, 5, 0, &[0u8; 16], &mut bad);
        assert_eq!(decode_wal(V2, &bad, 2), Err(RecordError::BadLink));
        bad.clear();
        encode_v2(V2_LINK, 2, 0, 0, &[0u8; 8], &mut bad);
        assert_eq!(decode_wal(V2, &bad, 2), Err(RecordError::BadLink));
        assert!(!RecordError::BadLink.could_be_torn_write());
        // The layouts never accept each other's records.
        assert!(decode(&rec, 1).is_err());
        assert!(decode_wal(V2, &one(1, 1, b"hello"), 1).is_err());
        let mut v1 = Vec::new();
        encode_wal_v1(1, 1, 0, b"hello", &mut v1);
        assert!(decode_wal(V2, &v1, 1).is_err());
        assert!(decode_wal(WalFormat::V1, &rec, 1).is_err());
    }

    /// The legacy layout's bytes (SPEC.md §16.2.1): a log an older build wrote stays readable.
    #[test]
    fn v1_worked_example_bytes() {
        let mut rec = Vec::new();
        encode_wal_v1(1, 1, 0, b"hello", &mut rec);
        assert_eq!(
            hex(&rec),
            concat!(
                "0abe5945",         // checksum
                "05000000",         // length 5
                "01",               // kind BATCH
                "0100000000000000", // segment 1
                "0100000000000000", // seq 1
                "0000000000000000", // synced_upto 0
                "68656c6c6f",       // "hello"
            )
        );
        let v1 = WalFormat::V1;
        assert_eq!(peek_wal_len(v1, &rec), Some(38));
        let WalDecoded::Record(r) = decode_wal(v1, &rec, 1).unwrap() else {
            panic!("no record")
        };
        assert_eq!((r.seq, r.payload, r.len), (1, &b"hello"[..], 38));
        let mut seal = Vec::new();
        encode_seal_v1(1, 38, &mut seal);
        assert_eq!(hex(&seal[..4]), "5312efd6");
        assert_eq!(
            decode_wal(v1, &seal, 1),
            Ok(WalDecoded::Seal {
                synced_upto: 38,
                len: 33
            })
        );
        let mut link = Vec::new();
        encode_link_v1(2, 1, 71, &mut link);
        assert_eq!(hex(&link[..4]), "c79c3252");
        assert!(matches!(
            decode_wal(v1, &link, 2),
            Ok(WalDecoded::Link {
                previous: 1,
                previous_end: 71,
                len: 49
            })
        ));
        assert!(matches!(
            decode_wal(v1, &rec, 2),
            Err(RecordError::WrongSegment { .. })
        ));
        let mut data = vec![0xabu8; 5];
        data.extend_from_slice(&rec);
        assert_eq!(find_valid_wal_record(v1, &data, 0, 1, 0), Some((5, 0)));
    }

    #[test]
    fn wal_round_trip_and_synced_upto_is_checksummed() {
        for payload in [&b""[..], b"x", &[7u8; 1000]] {
            for (seq, synced) in [(42u64, 0x1234_5678_9abcu64), (1 << 40, 0), (u64::MAX, 1)] {
                let mut buf = wal_one(9, seq, synced, payload);
                let framed = wal_framed_len(seq, synced, payload.len());
                assert_eq!(buf.len(), framed);
                buf.extend_from_slice(&[0u8; WAL_V2_END_LEN]);
                assert_eq!(peek_wal_len(V2, &buf), Some(framed));
                let WalDecoded::Record(r) = decode_wal(V2, &buf, 9).unwrap() else {
                    panic!("no record")
                };
                assert_eq!(
                    (r.seq, r.synced_upto, r.payload, r.len),
                    (seq, synced, payload, framed)
                );
                assert_eq!(decode_wal(V2, &buf[r.len..], 9).unwrap(), WalDecoded::End);
            }
        }
        // A one-cell put of 127 payload bytes at seq 1,000,000: 10 bytes of header (33 in V1).
        assert_eq!(wal_framed_len(1_000_000, 0, 127), 137);
        let rec = wal_one(4, 8, 100, b"p");
        let hl = peek_wal_header(V2, &rec).unwrap().0;
        // Every byte after the checksum is covered: by the header check or the checksum.
        for i in 4..rec.len() {
            let mut bad = rec.clone();
            bad[i] ^= 1;
            let e = decode_wal(V2, &bad, 4).unwrap_err();
            assert!(e.could_be_torn_write(), "byte {i}: {e:?}");
        }
        // Damage to the payload alone is a checksum mismatch.
        let mut bad = rec.clone();
        bad[hl] ^= 1;
        assert!(matches!(
            decode_wal(V2, &bad, 4),
            Err(RecordError::BadChecksum { .. })
        ));
        // Another segment's record fails on its header check.
        assert_eq!(decode_wal(V2, &rec, 5), Err(RecordError::BadHeader));
        for cut in 1..hl {
            let e = decode_wal(V2, &rec[..cut], 4).unwrap_err();
            assert!(
                matches!(
                    e,
                    RecordError::TruncatedHeader { .. } | RecordError::BadHeader
                ),
                "cut {cut}: {e:?}"
            );
        }
        assert_eq!(
            decode_wal(V2, &rec[..hl], 4),
            Err(RecordError::TruncatedPayload {
                length: 1,
                available: 0
            })
        );
        assert_eq!(decode_wal(V2, &[0u8; 7], 4), Ok(WalDecoded::End));
        assert_eq!(decode_wal(V2, &[0u8; 100], 4), Ok(WalDecoded::End));
        // Malformed varints in the header: too long, or longer than needed.
        let mut bad = vec![0, 0, 0, 0, V2_BATCH, 0];
        bad.extend_from_slice(&[0xff; 12]);
        assert_eq!(decode_wal(V2, &bad, 4), Err(RecordError::BadHeader));
        let mut padded = vec![0, 0, 0, 0, V2_BATCH, 0, 0x81, 0x00, 0x01];
        padded[5] = v2_check(4, &padded);
        padded.push(b'p');
        assert_eq!(decode_wal(V2, &padded, 4), Err(RecordError::BadHeader));
        // An oversized length with a valid header check.
        let mut big = oversized_v2_header(4, 1);
        big.extend_from_slice(&[1u8; 64]);
        assert_eq!(
            decode_wal(V2, &big, 4),
            Err(RecordError::Oversized {
                length: MAX_PAYLOAD + 1
            })
        );
        assert_eq!(peek_wal_len(V2, &big), None);
    }

    #[test]
    fn seal_decodes_and_malformed_seals_are_not_torn() {
        let mut seal = Vec::new();
        encode_seal(3, 4096, &mut seal);
        assert_eq!(seal.len(), 10);
        assert_eq!(
            decode_wal(V2, &seal, 3),
            Ok(WalDecoded::Seal {
                synced_upto: 4096,
                len: 10
            })
        );
        assert_eq!(decode_wal(V2, &seal, 4), Err(RecordError::BadHeader));
        // A well-checksummed SEAL with a seq or a payload is not something a writer makes;
        // nor is one without synced_upto, nor any other kind byte.
        for (seq, payload) in [(1u64, &b""[..]), (0, b"x")] {
            let mut bad = Vec::new();
            encode_v2(V2_SEAL, 3, seq, 4096, payload, &mut bad);
            assert_eq!(decode_wal(V2, &bad, 3), Err(RecordError::BadSeal));
        }
        assert!(!RecordError::BadSeal.could_be_torn_write());
        for kind in [0u8, KIND_SEAL, KIND_LINK | V2_SYNCED, 4, 0x7f, 0xff] {
            let mut bad = Vec::new();
            encode_v2(kind, 3, 0, 4096, &[], &mut bad);
            assert_eq!(decode_wal(V2, &bad, 3), Err(RecordError::BadKind(kind)));
        }
        let mut m = Vec::new();
        encode_with(Layout::Manifest, KIND_SEAL, 3, 0, 0, &[], &mut m);
        assert_eq!(decode(&m, 3), Err(RecordError::BadKind(KIND_SEAL)));
    }

    #[test]
    fn wal_scanner_reports_synced_upto_and_finds_seals() {
        let mut data = vec![0xabu8; 13];
        let at = data.len();
        encode_wal(2, 10, 7, b"abc", &mut data);
        data.extend_from_slice(&[1u8; 40]);
        assert_eq!(find_valid_wal_record(V2, &data, 0, 2, 0), Some((at, 7)));
        assert_eq!(find_valid_wal_record(V2, &data, 0, 2, 10), None);
        assert_eq!(find_valid_wal_record(V2, &data, 0, 3, 0), None);
        // A seal is found whatever `after` is; a LINK never is.
        let seal_at = data.len();
        encode_seal(2, 99, &mut data);
        encode_link(2, 1, 5, &mut data);
        assert_eq!(
            find_valid_wal_record(V2, &data, 0, 2, 10),
            Some((seal_at, 99))
        );
        assert_eq!(find_valid_wal_record(V2, &data, seal_at + 1, 2, 0), None);
        // The manifest scanner sees none of them.
        assert_eq!(find_valid_record(&data, 0, 2, 0), None);
    }

    #[test]
    fn wal_decoder_never_panics_on_arbitrary_bytes() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(8);
        for format in [WalFormat::V1, WalFormat::V2] {
            let mut base = Vec::new();
            match format {
                WalFormat::V1 => {
                    encode_wal_v1(1, 1, 0, b"some payload bytes", &mut base);
                    encode_seal_v1(1, 51, &mut base);
                }
                WalFormat::V2 => {
                    encode_wal(1, 1, 0, b"some payload bytes", &mut base);
                    encode_seal(1, 51, &mut base);
                }
            }
            for _ in 0..20_000 {
                let mut b = base.clone();
                let n = rng.random_range(0..4);
                for _ in 0..n {
                    let i = rng.random_range(0..b.len());
                    b[i] = rng.random();
                }
                let cut = rng.random_range(0..=b.len());
                let _ = decode_wal(format, &b[..cut], 1);
                let _ = peek_wal_header(format, &b[..cut]);
                let _ = find_valid_wal_record(format, &b[..cut], 0, 1, 0);
            }
        }
    }
}
