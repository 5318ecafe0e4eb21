//! The write batch: the payload of a WAL BATCH record (SPEC.md §18), and what the memstore
//! applies. Encoded once per write, so the bytes logged are exactly the cells inserted.
//!
//! ```text
//! batch    := mutation+                      (to the end of the payload)
//! mutation := family varint32 | type u8 (bit 7: tags follow) | row len-prefixed
//!             | qualifier len-prefixed | timestamp varint64 | value len-prefixed
//!             | [tags len-prefixed]
//! ```
//! That is version 2, the payload of [`WalFormat::V2`] segments. Version 1, in segments an
//! older build wrote (`.wal`), began with a version byte and a count, and carried a fixed
//! 8-byte timestamp and a tags length in every mutation: 5 bytes more for a one-cell write,
//! which the log's record checksum and length make unnecessary (the payload cannot lose a
//! tail unnoticed). Every mutation of a batch carries the batch's sequence number (the WAL
//! record's `seq`).

use cellar_format::cell::validate_key;
use cellar_format::coding::{put_varint32, put_varint64, Cursor};
use cellar_format::{CellType, KeyRef};

use crate::error::{Error, Result};
use crate::types::{FamilyId, SeqNo, Timestamp};

pub use crate::wal::WalFormat;

const BATCH_VERSION_1: u8 = 1;
/// Smallest version-1 mutation: family, type, four empty length prefixes, timestamp.
const MIN_MUTATION_LEN_V1: usize = 1 + 1 + 1 + 1 + 8 + 1 + 1;
/// Bit of a version-2 mutation's type byte that says tags follow its value.
const HAS_TAGS: u8 = 0x80;

/// One cell to write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mutation {
    /// Family (database-wide id).
    pub family: FamilyId,
    /// Row key.
    pub row: Vec<u8>,
    /// Qualifier (empty for family markers).
    pub qualifier: Vec<u8>,
    /// Timestamp (already resolved: never LATEST here).
    pub timestamp: Timestamp,
    /// Put or marker.
    pub cell_type: CellType,
    /// Value (empty for markers).
    pub value: Vec<u8>,
    /// Tags (opaque, usually empty).
    pub tags: Vec<u8>,
}

/// A borrowed mutation decoded from a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MutationRef<'a> {
    /// Family id.
    pub family: FamilyId,
    /// Row key.
    pub row: &'a [u8],
    /// Qualifier.
    pub qualifier: &'a [u8],
    /// Timestamp.
    pub timestamp: Timestamp,
    /// Cell type.
    pub cell_type: CellType,
    /// Value.
    pub value: &'a [u8],
    /// Tags.
    pub tags: &'a [u8],
}

impl Mutation {
    /// A borrowed view.
    pub fn as_ref(&self) -> MutationRef<'_> {
        MutationRef {
            family: self.family,
            row: &self.row,
            qualifier: &self.qualifier,
            timestamp: self.timestamp,
            cell_type: self.cell_type,
            value: &self.value,
            tags: &self.tags,
        }
    }
}

impl MutationRef<'_> {
    /// An owned copy.
    pub fn to_mutation(&self) -> Mutation {
        Mutation {
            family: self.family,
            row: self.row.to_vec(),
            qualifier: self.qualifier.to_vec(),
            timestamp: self.timestamp,
            cell_type: self.cell_type,
            value: self.value.to_vec(),
            tags: self.tags.to_vec(),
        }
    }

    /// The cell key of this mutation written at `seq`, with the family's name.
    pub fn key<'k>(&'k self, family_name: &'k [u8], seq: SeqNo) -> KeyRef<'k> {
        KeyRef {
            row: self.row,
            family: family_name,
            qualifier: self.qualifier,
            timestamp: self.timestamp,
            type_code: self.cell_type as u8,
            seq,
        }
    }
}

/// Encode mutations as a batch payload (version 2: the payload of what the WAL writes now).
pub fn encode(mutations: &[Mutation]) -> Vec<u8> {
    let size: usize = mutations
        .iter()
        .map(|m| encoded_len_bound(&m.as_ref()))
        .sum();
    let mut out = Vec::with_capacity(size);
    for m in mutations {
        encode_one(&mut out, &m.as_ref());
    }
    out
}

/// At least the bytes [`encode_one`] appends for `m` (its varints at their longest).
pub fn encoded_len_bound(m: &MutationRef<'_>) -> usize {
    5 + 1 + 5 + 5 + 10 + 5 + 5 + m.row.len() + m.qualifier.len() + m.value.len() + m.tags.len()
}

/// Append one mutation to a version-2 batch payload.
pub fn encode_one(out: &mut Vec<u8>, m: &MutationRef<'_>) {
    put_varint32(out, m.family);
    let tags = !m.tags.is_empty();
    out.push(m.cell_type as u8 | if tags { HAS_TAGS } else { 0 });
    put_bytes(out, m.row);
    put_bytes(out, m.qualifier);
    put_varint64(out, m.timestamp);
    put_bytes(out, m.value);
    if tags {
        put_bytes(out, m.tags);
    }
}

/// The mutations of a version-2 payload in order, each checked as [`decode`] checks it; the
/// first error ends them. What the write path inserts from the very bytes it logged, without
/// collecting them.
pub fn mutations_v2(payload: &[u8]) -> MutationsV2<'_> {
    MutationsV2 {
        c: Cursor::new(payload),
        failed: false,
    }
}

/// See [`mutations_v2`].
#[derive(Debug)]
pub struct MutationsV2<'a> {
    c: Cursor<'a>,
    failed: bool,
}

impl<'a> Iterator for MutationsV2<'a> {
    type Item = std::result::Result<MutationRef<'a>, String>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.c.is_empty() {
            return None;
        }
        let m = decode_mutation(&mut self.c, WalFormat::V2);
        self.failed = m.is_err();
        Some(m)
    }
}

/// Encode mutations as a version-1 batch, the payload of [`WalFormat::V1`] segments. Writers no
/// longer produce it; it stays so tests can build logs an older build wrote.
pub fn encode_v1(mutations: &[Mutation]) -> Vec<u8> {
    let mut out = vec![BATCH_VERSION_1];
    put_varint32(&mut out, mutations.len() as u32);
    for m in mutations {
        put_varint32(&mut out, m.family);
        out.push(m.cell_type as u8);
        put_bytes(&mut out, &m.row);
        put_bytes(&mut out, &m.qualifier);
        out.extend_from_slice(&m.timestamp.to_le_bytes());
        put_bytes(&mut out, &m.value);
        put_bytes(&mut out, &m.tags);
    }
    out
}

/// A `varint32` length and the bytes.
fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    put_varint32(out, b.len() as u32);
    out.extend_from_slice(b);
}

/// Decode a batch payload of a segment in layout `format`. Checks every length and the cell
/// limits; never panics.
pub fn decode(
    payload: &[u8],
    format: WalFormat,
) -> std::result::Result<Vec<MutationRef<'_>>, String> {
    match format {
        WalFormat::V1 => decode_v1(payload),
        WalFormat::V2 => decode_v2(payload),
    }
}

fn decode_v2(payload: &[u8]) -> std::result::Result<Vec<MutationRef<'_>>, String> {
    if payload.is_empty() {
        return Err("empty batch".into());
    }
    mutations_v2(payload).collect()
}

fn decode_v1(payload: &[u8]) -> std::result::Result<Vec<MutationRef<'_>>, String> {
    let mut c = Cursor::new(payload);
    let version = c.u8("batch version").map_err(|m| m.0)?;
    if version != BATCH_VERSION_1 {
        return Err(format!("unknown batch version {version}"));
    }
    let count = c.varint32("mutation count").map_err(|m| m.0)? as usize;
    if count > c.remaining() / MIN_MUTATION_LEN_V1 {
        return Err(format!("mutation count {count} does not fit the batch"));
    }
    let mut out = Vec::with_capacity(count);
    for _ in 0..count {
        out.push(decode_mutation(&mut c, WalFormat::V1)?);
    }
    if !c.is_empty() {
        return Err(format!(
            "{} trailing bytes after the mutations",
            c.remaining()
        ));
    }
    Ok(out)
}

/// One mutation of a batch of version `format` (V2: flagged tags and a varint timestamp; V1:
/// tags always present, a fixed 8-byte timestamp).
fn decode_mutation<'a>(
    c: &mut Cursor<'a>,
    format: WalFormat,
) -> std::result::Result<MutationRef<'a>, String> {
    let v2 = format == WalFormat::V2;
    let family = c.varint32("family").map_err(|m| m.0)?;
    let ty = c.u8("cell type").map_err(|m| m.0)?;
    let flagged = v2 && ty & HAS_TAGS != 0;
    let code = if v2 { ty & !HAS_TAGS } else { ty };
    let cell_type = CellType::try_from(code).map_err(|t| format!("bad cell type {t}"))?;
    let row = c.len_prefixed("row").map_err(|m| m.0)?;
    let qualifier = c.len_prefixed("qualifier").map_err(|m| m.0)?;
    let timestamp = if v2 {
        c.varint64("timestamp")
    } else {
        c.u64("timestamp")
    }
    .map_err(|m| m.0)?;
    let value = c.len_prefixed("value").map_err(|m| m.0)?;
    let tags = if !v2 || flagged {
        c.len_prefixed("tags").map_err(|m| m.0)?
    } else {
        &[]
    };
    if flagged && tags.is_empty() {
        return Err("empty tags marked present".into());
    }
    let m = MutationRef {
        family,
        row,
        qualifier,
        timestamp,
        cell_type,
        value,
        tags,
    };
    validate_key(&m.key(b"f", 0))?;
    Ok(m)
}

/// Check a mutation against the cell limits before it is logged.
pub fn validate(m: &Mutation) -> Result<()> {
    validate_ref(&m.as_ref())
}

/// [`validate`] of a borrowed mutation.
pub fn validate_ref(m: &MutationRef<'_>) -> Result<()> {
    validate_key(&m.key(b"f", 0)).map_err(Error::InvalidArgument)?;
    if m.value.len() > cellar_format::cell::MAX_VALUE_LEN {
        return Err(Error::InvalidArgument(format!(
            "value of {} bytes exceeds {}",
            m.value.len(),
            cellar_format::cell::MAX_VALUE_LEN
        )));
    }
    if m.tags.len() > cellar_format::cell::MAX_TAGS_LEN {
        return Err(Error::InvalidArgument("tags too long".into()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(row: &str, q: &str, ty: CellType, v: &str) -> Mutation {
        Mutation {
            family: 7,
            row: row.into(),
            qualifier: q.into(),
            timestamp: 42,
            cell_type: ty,
            value: v.into(),
            tags: Vec::new(),
        }
    }

    #[test]
    fn round_trip() {
        let mut tagged = m("r3", "q", CellType::Put, "v");
        tagged.tags = b"\x01\x00\x02ab".to_vec();
        tagged.timestamp = u64::MAX - 1;
        let ms = vec![
            m("r1", "q", CellType::Put, "v"),
            m("r2", "", CellType::DeleteFamily, ""),
            tagged,
        ];
        for (enc, format) in [
            (encode(&ms), WalFormat::V2),
            (encode_v1(&ms), WalFormat::V1),
        ] {
            let dec = decode(&enc, format).unwrap();
            assert_eq!(dec.len(), 3);
            assert_eq!(dec[0].row, b"r1");
            assert_eq!(dec[1].cell_type, CellType::DeleteFamily);
            assert_eq!(dec[0].family, 7);
            assert_eq!(dec[0].timestamp, 42);
            assert_eq!(dec[2].tags, ms[2].tags);
            assert_eq!(dec[2].timestamp, u64::MAX - 1);
            assert!(dec[0].tags.is_empty());
        }
    }

    /// A one-cell put of a 16-byte row and 100-byte value under the empty qualifier at a
    /// current millisecond timestamp: 127 bytes in version 2, 5 fewer than version 1.
    #[test]
    fn a_small_put_costs_eleven_bytes_of_framing() {
        let mut p = m("0123456789abcdef", "", CellType::Put, "");
        p.family = 1;
        p.value = vec![7; 100];
        p.timestamp = 1_795_000_000_000;
        assert_eq!(encode(std::slice::from_ref(&p)).len(), 127);
        assert_eq!(encode_v1(std::slice::from_ref(&p)).len(), 132);
    }

    #[test]
    fn malformed_batches_are_rejected() {
        let enc = encode(&[m("r1", "q", CellType::Put, "v")]);
        for cut in 0..enc.len() {
            assert!(
                decode(&enc[..cut], WalFormat::V2).is_err(),
                "prefix {cut} accepted"
            );
        }
        let mut bad = enc.clone();
        bad[1] = 99; // cell type
        assert!(decode(&bad, WalFormat::V2).is_err());
        let mut bad = enc.clone();
        bad[1] |= HAS_TAGS; // tags announced, none follow
        assert!(decode(&bad, WalFormat::V2).is_err());
        let mut long = enc.clone();
        long.push(0);
        assert!(decode(&long, WalFormat::V2).is_err());
        let empty_row = encode(&[m("", "q", CellType::Put, "v")]);
        assert!(decode(&empty_row, WalFormat::V2).is_err());

        let enc = encode_v1(&[m("r1", "q", CellType::Put, "v")]);
        for cut in 0..enc.len() {
            assert!(
                decode(&enc[..cut], WalFormat::V1).is_err(),
                "prefix {cut} accepted"
            );
        }
        let mut bad = enc.clone();
        bad[0] = 9;
        assert!(decode(&bad, WalFormat::V1).is_err());
        let mut bad = enc.clone();
        bad[3] = 99; // cell type
        assert!(decode(&bad, WalFormat::V1).is_err());
        let mut long = enc.clone();
        long.push(0);
        assert!(decode(&long, WalFormat::V1).is_err());
        assert!(decode(&[1, 0xff, 0xff, 0xff, 0xff, 0x0f], WalFormat::V1).is_err());
        // Version 1 in a version-2 segment (or the reverse) is not taken for the other.
        assert!(decode(&enc, WalFormat::V2).is_err());
    }
}
