//! The write batch: the payload of a WAL BATCH record (SPEC.md §18), and what the memstore
//! applies. Encoded once per write, so the bytes logged are exactly the cells inserted.
//!
//! ```text
//! batch    := version u8 (1) | count varint32 | mutation*
//! mutation := family varint32 | type u8 | row len-prefixed | qualifier len-prefixed
//!             | timestamp u64 LE | value len-prefixed | tags len-prefixed
//! ```
//! Every mutation of a batch carries the batch's sequence number (the WAL record's `seq`).

use cellar_format::cell::validate_key;
use cellar_format::coding::{put_varint32, Cursor};
use cellar_format::{CellType, KeyRef};

use crate::error::{Error, Result};
use crate::types::{FamilyId, SeqNo, Timestamp};

const BATCH_VERSION: u8 = 1;
/// Smallest encoded mutation: family, type, four empty length prefixes, timestamp.
const MIN_MUTATION_LEN: usize = 1 + 1 + 1 + 1 + 8 + 1 + 1;

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

impl MutationRef<'_> {
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

/// Encode mutations as a batch payload.
pub fn encode(mutations: &[Mutation]) -> Vec<u8> {
    let size: usize = mutations
        .iter()
        .map(|m| 24 + m.row.len() + m.qualifier.len() + m.value.len() + m.tags.len())
        .sum();
    let mut out = Vec::with_capacity(size + 6);
    out.push(BATCH_VERSION);
    put_varint32(&mut out, mutations.len() as u32);
    for m in mutations {
        put_varint32(&mut out, m.family);
        out.push(m.cell_type as u8);
        for part in [&m.row, &m.qualifier] {
            put_varint32(&mut out, part.len() as u32);
            out.extend_from_slice(part);
        }
        out.extend_from_slice(&m.timestamp.to_le_bytes());
        for part in [&m.value, &m.tags] {
            put_varint32(&mut out, part.len() as u32);
            out.extend_from_slice(part);
        }
    }
    out
}

/// Decode a batch payload. Checks every length and the cell limits; never panics.
pub fn decode(payload: &[u8]) -> std::result::Result<Vec<MutationRef<'_>>, String> {
    let mut c = Cursor::new(payload);
    let version = c.u8("batch version").map_err(|m| m.0)?;
    if version != BATCH_VERSION {
        return Err(format!("unknown batch version {version}"));
    }
    let count = c.varint32("mutation count").map_err(|m| m.0)? as usize;
    if count > c.remaining() / MIN_MUTATION_LEN {
        return Err(format!("mutation count {count} does not fit the batch"));
    }
    let mut out = Vec::with_capacity(count);
    for _ in 0..count {
        let family = c.varint32("family").map_err(|m| m.0)?;
        let ty = c.u8("cell type").map_err(|m| m.0)?;
        let cell_type = CellType::try_from(ty).map_err(|t| format!("bad cell type {t}"))?;
        let row = c.len_prefixed("row").map_err(|m| m.0)?;
        let qualifier = c.len_prefixed("qualifier").map_err(|m| m.0)?;
        let timestamp = c.u64("timestamp").map_err(|m| m.0)?;
        let value = c.len_prefixed("value").map_err(|m| m.0)?;
        let tags = c.len_prefixed("tags").map_err(|m| m.0)?;
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
        out.push(m);
    }
    if !c.is_empty() {
        return Err(format!(
            "{} trailing bytes after the mutations",
            c.remaining()
        ));
    }
    Ok(out)
}

/// Check a mutation against the cell limits before it is logged.
pub fn validate(m: &Mutation) -> Result<()> {
    let r = MutationRef {
        family: m.family,
        row: &m.row,
        qualifier: &m.qualifier,
        timestamp: m.timestamp,
        cell_type: m.cell_type,
        value: &m.value,
        tags: &m.tags,
    };
    validate_key(&r.key(b"f", 0)).map_err(Error::InvalidArgument)?;
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
        let ms = vec![
            m("r1", "q", CellType::Put, "v"),
            m("r2", "", CellType::DeleteFamily, ""),
        ];
        let enc = encode(&ms);
        let dec = decode(&enc).unwrap();
        assert_eq!(dec.len(), 2);
        assert_eq!(dec[0].row, b"r1");
        assert_eq!(dec[1].cell_type, CellType::DeleteFamily);
        assert_eq!(dec[0].family, 7);
        assert_eq!(dec[0].timestamp, 42);
    }

    #[test]
    fn malformed_batches_are_rejected() {
        let enc = encode(&[m("r1", "q", CellType::Put, "v")]);
        for cut in 0..enc.len() {
            assert!(decode(&enc[..cut]).is_err(), "prefix {cut} accepted");
        }
        let mut bad = enc.clone();
        bad[0] = 9;
        assert!(decode(&bad).is_err());
        let mut bad = enc.clone();
        bad[3] = 99; // cell type
        assert!(decode(&bad).is_err());
        let mut long = enc.clone();
        long.push(0);
        assert!(decode(&long).is_err());
        assert!(decode(&[1, 0xff, 0xff, 0xff, 0xff, 0x0f]).is_err());
        let empty_row = encode(&[m("", "q", CellType::Put, "v")]);
        assert!(decode(&empty_row).is_err());
    }
}
