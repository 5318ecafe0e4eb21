//! WAL record framing. Pure functions over byte slices, no I/O, so the decoder can be fuzzed.
//!
//! Layout (SPEC.md §16.2; all integers little-endian, §2.1):
//!
//! ```text
//! offset  size  field
//!      0     4  checksum  mask(crc32c(bytes 4..25 of the header ‖ payload))
//!      4     4  length    payload length, at most MAX_PAYLOAD
//!      8     1  kind      1 = BATCH; every other value is corrupt
//!      9     8  segment   number of the segment file the record was written into
//!     17     8  seq       sequence number assigned by the WAL
//!     25     n  payload   opaque bytes
//! ```
//!
//! A header of 25 zero bytes (or a zero-filled remainder shorter than a header) marks the end
//! of written data: segments are preallocated, so the unwritten tail reads as zeros. A zero
//! header can never be a record because kind 0 is not a valid kind.
//!
//! The segment number inside every record makes a record that is intact but sits in the wrong
//! file (a copied or reused file) fail like a damaged one.

use cellar_format::checksum::{mask, unmask};

/// Bytes of a record header.
pub const HEADER_LEN: usize = 25;
/// Largest payload a record may carry; a larger length field is corrupt. Checked before any
/// allocation or slicing so a damaged length cannot make a reader allocate gigabytes.
pub const MAX_PAYLOAD: u32 = 256 << 20;
/// The only record kind defined: an opaque write batch.
pub const KIND_BATCH: u8 = 1;

/// Offset of the kind byte inside a header; the corruption scanner searches for it.
pub(crate) const KIND_OFFSET: usize = 8;

/// A successfully decoded record, borrowing its payload from the input.
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

/// Why the bytes at a position are not a valid record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordError {
    /// Fewer than [`HEADER_LEN`] bytes remain and they are not all zero.
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
    /// The checksum matches but the kind is not [`KIND_BATCH`].
    BadKind(u8),
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
    /// wrong (bad kind), which no crash can produce.
    pub fn could_be_torn_write(&self) -> bool {
        !matches!(self, RecordError::BadKind(_))
    }
}

impl std::fmt::Display for RecordError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RecordError::TruncatedHeader { available } => {
                write!(
                    f,
                    "truncated record header ({available} of {HEADER_LEN} bytes)"
                )
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
            RecordError::WrongSegment { found, expected } => write!(
                f,
                "record belongs to segment {found}, found in segment {expected}"
            ),
        }
    }
}

fn header_fields(h: &[u8]) -> (u32, u32, u8, u64, u64) {
    let u32_at = |o: usize| u32::from_le_bytes([h[o], h[o + 1], h[o + 2], h[o + 3]]);
    let u64_at = |o: usize| {
        let mut b = [0u8; 8];
        b.copy_from_slice(&h[o..o + 8]);
        u64::from_le_bytes(b)
    };
    (u32_at(0), u32_at(4), h[8], u64_at(9), u64_at(17))
}

/// The stored checksum of a record: covers header bytes 4..25 and the payload.
fn checksum(header_tail: &[u8], payload: &[u8]) -> u32 {
    let crc = crc32c::crc32c(header_tail);
    mask(crc32c::crc32c_append(crc, payload))
}

/// Append the framed record to `out`.
///
/// The caller guarantees `payload.len() <= MAX_PAYLOAD` (the WAL checks it at `append`).
pub fn encode(segment: u64, seq: u64, payload: &[u8], out: &mut Vec<u8>) {
    debug_assert!(payload.len() <= MAX_PAYLOAD as usize);
    let start = out.len();
    out.extend_from_slice(&[0u8; 4]);
    out.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    out.push(KIND_BATCH);
    out.extend_from_slice(&segment.to_le_bytes());
    out.extend_from_slice(&seq.to_le_bytes());
    let sum = checksum(&out[start + 4..start + HEADER_LEN], payload);
    out[start..start + 4].copy_from_slice(&sum.to_le_bytes());
    out.extend_from_slice(payload);
}

/// Framed size of a record with `payload_len` bytes of payload.
pub fn framed_len(payload_len: usize) -> usize {
    HEADER_LEN + payload_len
}

/// The payload length a header announces, if `buf` holds a whole header whose length field is
/// in range. Lets a lazy reader know how many bytes to load before calling [`decode`].
pub fn peek_length(buf: &[u8]) -> Option<u32> {
    let h = buf.get(..HEADER_LEN)?;
    let (_, length, ..) = header_fields(h);
    (length <= MAX_PAYLOAD).then_some(length)
}

/// Decode the record at the start of `buf`, which is the data of segment `segment` from the
/// record's offset up to the end of the file (or of what has been loaded).
pub fn decode(buf: &[u8], segment: u64) -> Result<Decoded<'_>, RecordError> {
    if buf.len() < HEADER_LEN {
        return if buf.iter().all(|&b| b == 0) {
            Ok(Decoded::End)
        } else {
            Err(RecordError::TruncatedHeader {
                available: buf.len(),
            })
        };
    }
    let header = &buf[..HEADER_LEN];
    if header.iter().all(|&b| b == 0) {
        return Ok(Decoded::End);
    }
    let (stored, length, kind, rec_segment, seq) = header_fields(header);
    if length > MAX_PAYLOAD {
        return Err(RecordError::Oversized { length });
    }
    let available = buf.len() - HEADER_LEN;
    if length as usize > available {
        return Err(RecordError::TruncatedPayload { length, available });
    }
    let payload = &buf[HEADER_LEN..HEADER_LEN + length as usize];
    let computed = checksum(&header[4..], payload);
    if computed != stored {
        return Err(RecordError::BadChecksum {
            stored: unmask(stored),
            computed: unmask(computed),
        });
    }
    // Kind and segment are checked after the checksum: with a good checksum these are bytes
    // the writer really produced, so they mean a foreign or stale record, not random damage.
    if kind != KIND_BATCH {
        return Err(RecordError::BadKind(kind));
    }
    if rec_segment != segment {
        return Err(RecordError::WrongSegment {
            found: rec_segment,
            expected: segment,
        });
    }
    Ok(Decoded::Record(Record {
        seq,
        payload,
        len: HEADER_LEN + length as usize,
    }))
}

/// Whether a valid record of `segment` with a seq above `after` starts at `buf[0]`. Cheap
/// rejections (kind, segment) come before the checksum so scanning a damaged region byte by
/// byte stays fast.
pub(crate) fn is_valid_record_start(buf: &[u8], segment: u64, after: u64) -> bool {
    if buf.len() < HEADER_LEN
        || buf[KIND_OFFSET] != KIND_BATCH
        || buf[9..17] != segment.to_le_bytes()
    {
        return false;
    }
    matches!(decode(buf, segment), Ok(Decoded::Record(r)) if r.seq > after)
}

/// The first offset `>= from` in `data` where a valid record of `segment` with a seq above
/// `after` starts. Only offsets whose kind byte is BATCH are candidates, which skips zero-filled
/// regions in a single memchr-like pass.
pub(crate) fn find_valid_record(
    data: &[u8],
    from: usize,
    segment: u64,
    after: u64,
) -> Option<usize> {
    let mut p = from;
    while p + HEADER_LEN <= data.len() {
        let rel = data[p + KIND_OFFSET..]
            .iter()
            .position(|&b| b == KIND_BATCH)?;
        p += rel;
        if is_valid_record_start(&data[p..], segment, after) {
            return Some(p);
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

    fn hex(b: &[u8]) -> String {
        b.iter().map(|x| format!("{x:02x}")).collect()
    }

    /// The worked example of the WAL section of SPEC.md; change both together.
    #[test]
    fn worked_example_bytes() {
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
        assert!(!is_valid_record_start(&rec, 4, 0));
        assert!(is_valid_record_start(&rec, 3, 0));
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
}
