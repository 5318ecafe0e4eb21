//! Record framing of the WAL (SPEC.md §16.2) and of the manifest (§17.2). Pure functions over
//! byte slices, no I/O, so the decoders can be fuzzed.
//!
//! WAL records (all integers little-endian, §2.1):
//!
//! ```text
//! offset  size  field
//!      0     4  checksum     mask(crc32c(bytes 4..33 of the header ‖ payload))
//!      4     4  length       payload length, at most MAX_PAYLOAD
//!      8     1  kind         1 = BATCH, 2 = SEAL, 3 = LINK; every other value is corrupt
//!      9     8  segment      number of the segment file the record was written into
//!     17     8  seq          sequence number assigned by the WAL (0 in a SEAL)
//!     25     8  synced_upto  offset in this segment up to which an fdatasync had completed
//!                            before the record's group was written (0 if none yet)
//!     33     n  payload      opaque bytes (none in a SEAL)
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
//! Manifest records ([`encode`], [`decode`], [`HEADER_LEN`]) use the same framing without
//! `synced_upto` (a 25-byte header, checksum over bytes 4..25) and only kind BATCH: every
//! manifest append is fdatasynced before the next one, so there is nothing to attest.
//!
//! A header of zero bytes (or a zero-filled remainder shorter than a header) marks the end of
//! written data: WAL segments are preallocated, so the unwritten tail reads as zeros. A zero
//! header can never be a record because kind 0 is not a valid kind.
//!
//! The segment number inside every record makes a record that is intact but sits in the wrong
//! file (a copied or reused file) fail like a damaged one.

use cellar_format::checksum::{mask, unmask};

/// Bytes of a WAL record header.
pub const WAL_HEADER_LEN: usize = 33;
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
            Layout::Wal => WAL_HEADER_LEN,
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

/// Append the framed WAL BATCH record to `out`. `synced_upto` is the offset of segment
/// `segment` up to which an fdatasync had completed before the record's group is written.
///
/// The caller guarantees `payload.len() <= MAX_PAYLOAD` (the WAL checks it at `append`).
pub fn encode_wal(segment: u64, seq: u64, synced_upto: u64, payload: &[u8], out: &mut Vec<u8>) {
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

/// Append a WAL SEAL of segment `segment` attesting that its bytes up to `synced_upto` are
/// durable.
pub fn encode_seal(segment: u64, synced_upto: u64, out: &mut Vec<u8>) {
    encode_with(Layout::Wal, KIND_SEAL, segment, 0, synced_upto, &[], out);
}

/// Append a WAL LINK opening segment `segment`: it follows segment `previous`, whose data
/// ends at `previous_end`.
pub fn encode_link(segment: u64, previous: u64, previous_end: u64, out: &mut Vec<u8>) {
    let mut payload = [0u8; LINK_PAYLOAD_LEN];
    payload[..8].copy_from_slice(&previous.to_le_bytes());
    payload[8..].copy_from_slice(&previous_end.to_le_bytes());
    encode_with(Layout::Wal, KIND_LINK, segment, 0, 0, &payload, out);
}

/// Append the framed manifest record to `out` (file number `segment`).
///
/// The caller guarantees `payload.len() <= MAX_PAYLOAD`.
pub fn encode(segment: u64, seq: u64, payload: &[u8], out: &mut Vec<u8>) {
    encode_with(Layout::Manifest, KIND_BATCH, segment, seq, 0, payload, out);
}

/// Framed size of a WAL record with `payload_len` bytes of payload.
pub fn wal_framed_len(payload_len: usize) -> usize {
    WAL_HEADER_LEN + payload_len
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

/// The payload length a WAL header announces, if `buf` holds a whole header whose length field
/// is in range. Lets a lazy reader know how many bytes to load before calling [`decode_wal`].
pub fn peek_wal_length(buf: &[u8]) -> Option<u32> {
    peek_length_with(Layout::Wal, buf)
}

/// [`peek_wal_length`] for a manifest record.
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

/// Decode the WAL record at the start of `buf`, which is the data of segment `segment` from
/// the record's offset up to the end of the file (or of what has been loaded).
pub fn decode_wal(buf: &[u8], segment: u64) -> Result<WalDecoded<'_>, RecordError> {
    Ok(match decode_with(Layout::Wal, buf, segment)? {
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
    data: &[u8],
    from: usize,
    segment: u64,
    after: u64,
) -> Option<(usize, u64)> {
    find_with(Layout::Wal, data, from, segment, after)
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

#[cfg(test)]
mod tests {
    use super::*;

    fn one(segment: u64, seq: u64, payload: &[u8]) -> Vec<u8> {
        let mut v = Vec::new();
        encode(segment, seq, payload, &mut v);
        v
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

    /// The worked example of the WAL section of SPEC.md (§16.2); change both together.
    #[test]
    fn worked_example_bytes() {
        let rec = wal_one(1, 1, 0, b"hello");
        assert_eq!(rec.len(), 38);
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
        match decode_wal(&rec, 1).unwrap() {
            WalDecoded::Record(r) => {
                assert_eq!((r.seq, r.synced_upto), (1, 0));
                assert_eq!(r.payload, b"hello");
                assert_eq!(r.len, 38);
            }
            other => panic!("expected a record, got {other:?}"),
        }
        // The seal a clean close would write right after it (SPEC.md §16.2).
        let mut seal = Vec::new();
        encode_seal(1, 38, &mut seal);
        assert_eq!(
            hex(&seal),
            concat!(
                "5312efd6",         // checksum
                "00000000",         // length 0
                "02",               // kind SEAL
                "0100000000000000", // segment 1
                "0000000000000000", // seq 0
                "2600000000000000", // synced_upto 38
            )
        );
        // Segment 2's LINK, after that seal made segment 1's data end at 38 + 33 = 71.
        let mut link = Vec::new();
        encode_link(2, 1, 71, &mut link);
        assert_eq!(
            hex(&link),
            concat!(
                "c79c3252",         // checksum
                "10000000",         // length 16
                "03",               // kind LINK
                "0200000000000000", // segment 2
                "0000000000000000", // seq 0
                "0000000000000000", // synced_upto 0
                "0100000000000000", // previous segment 1
                "4700000000000000", // its data ended at 71
            )
        );
        assert_eq!(
            decode_wal(&link, 2).unwrap(),
            WalDecoded::Link {
                previous: 1,
                previous_end: 71,
                len: 49
            }
        );
        // A LINK with a seq, or with a payload other than 16 bytes, is malformed.
        let mut bad = Vec::new();
        encode_with(Layout::Wal, KIND_LINK, 2, 5, 0, &[0u8; 16], &mut bad);
        assert_eq!(decode_wal(&bad, 2), Err(RecordError::BadLink));
        bad.clear();
        encode_with(Layout::Wal, KIND_LINK, 2, 0, 0, &[0u8; 8], &mut bad);
        assert_eq!(decode_wal(&bad, 2), Err(RecordError::BadLink));
        assert!(!RecordError::BadLink.could_be_torn_write());
        // The two layouts never accept each other's records.
        assert!(decode(&rec, 1).is_err());
        assert!(decode_wal(&one(1, 1, b"hello"), 1).is_err());
    }

    #[test]
    fn wal_round_trip_and_synced_upto_is_checksummed() {
        for payload in [&b""[..], b"x", &[7u8; 1000]] {
            let mut buf = wal_one(9, 42, 0x1234_5678_9abc, payload);
            buf.extend_from_slice(&[0u8; WAL_HEADER_LEN]);
            assert_eq!(peek_wal_length(&buf), Some(payload.len() as u32));
            let WalDecoded::Record(r) = decode_wal(&buf, 9).unwrap() else {
                panic!("no record")
            };
            assert_eq!(
                (r.seq, r.synced_upto, r.payload, r.len),
                (42, 0x1234_5678_9abc, payload, wal_framed_len(payload.len()))
            );
            assert_eq!(decode_wal(&buf[r.len..], 9).unwrap(), WalDecoded::End);
        }
        let mut rec = wal_one(4, 8, 100, b"p");
        rec[26] ^= 1;
        assert!(matches!(
            decode_wal(&rec, 4),
            Err(RecordError::BadChecksum { .. })
        ));
        for cut in 1..WAL_HEADER_LEN {
            assert_eq!(
                decode_wal(&rec[..cut], 4),
                Err(RecordError::TruncatedHeader { available: cut })
            );
        }
        assert_eq!(
            decode_wal(&[0u8; WAL_HEADER_LEN - 1], 4),
            Ok(WalDecoded::End)
        );
    }

    #[test]
    fn seal_decodes_and_malformed_seals_are_not_torn() {
        let mut seal = Vec::new();
        encode_seal(3, 4096, &mut seal);
        assert_eq!(seal.len(), WAL_HEADER_LEN);
        assert_eq!(
            decode_wal(&seal, 3),
            Ok(WalDecoded::Seal {
                synced_upto: 4096,
                len: WAL_HEADER_LEN
            })
        );
        assert!(matches!(
            decode_wal(&seal, 4),
            Err(RecordError::WrongSegment { .. })
        ));
        // A well-checksummed kind-2 record with a seq or a payload is not something a writer
        // makes; nor is a kind-2 record in a manifest.
        for (seq, payload) in [(1u64, &b""[..]), (0, b"x")] {
            let mut bad = Vec::new();
            encode_with(Layout::Wal, KIND_SEAL, 3, seq, 4096, payload, &mut bad);
            assert_eq!(decode_wal(&bad, 3), Err(RecordError::BadSeal));
        }
        assert!(!RecordError::BadSeal.could_be_torn_write());
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
        assert_eq!(find_valid_wal_record(&data, 0, 2, 0), Some((at, 7)));
        assert_eq!(find_valid_wal_record(&data, 0, 2, 10), None);
        assert_eq!(find_valid_wal_record(&data, 0, 3, 0), None);
        // A seal is found whatever `after` is.
        let seal_at = data.len();
        encode_seal(2, 99, &mut data);
        assert_eq!(find_valid_wal_record(&data, 0, 2, 10), Some((seal_at, 99)));
        // The manifest scanner sees neither.
        assert_eq!(find_valid_record(&data, 0, 2, 0), None);
    }

    #[test]
    fn wal_decoder_never_panics_on_arbitrary_bytes() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(8);
        let mut base = wal_one(1, 1, 0, b"some payload bytes");
        encode_seal(1, 51, &mut base);
        for _ in 0..20_000 {
            let mut b = base.clone();
            let n = rng.random_range(0..4);
            for _ in 0..n {
                let i = rng.random_range(0..b.len());
                b[i] = rng.random();
            }
            let cut = rng.random_range(0..=b.len());
            let _ = decode_wal(&b[..cut], 1);
            let _ = find_valid_wal_record(&b[..cut], 0, 1, 0);
        }
    }
}
