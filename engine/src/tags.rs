//! The engine's use of a cell's tags (SPEC.md §3.4, §13 rule 7): a sequence of tagged fields.
//!
//! ```text
//! tags  := field*
//! field := type u8 | len varint32 | len bytes
//!
//!  type  field     body
//!     1  cell TTL  u64 LE: milliseconds after the cell's timestamp at which it expires
//! ```
//!
//! Unknown types are skipped (a newer engine may add some); a malformed sequence is read as
//! far as it is well formed, so a damaged tag can never make a read fail or panic — at worst a
//! cell TTL is not seen, and the family TTL still applies.

use cellar_format::coding::{put_varint32, Cursor};

/// Tag type of a per-cell TTL.
pub const TAG_CELL_TTL: u8 = 1;

/// Tags holding one cell TTL of `ttl_ms` milliseconds.
pub fn encode_cell_ttl(ttl_ms: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(10);
    out.push(TAG_CELL_TTL);
    put_varint32(&mut out, 8);
    out.extend_from_slice(&ttl_ms.to_le_bytes());
    out
}

/// The cell TTL in `tags`, if any (the first one when several).
#[inline]
pub fn cell_ttl(tags: &[u8]) -> Option<u64> {
    // Every put a read resolves asks, and nearly none has tags: answered inline.
    if tags.is_empty() {
        return None;
    }
    cell_ttl_in(tags)
}

#[inline(never)]
fn cell_ttl_in(tags: &[u8]) -> Option<u64> {
    let mut c = Cursor::new(tags);
    while !c.is_empty() {
        let ty = c.u8("tag type").ok()?;
        let body = c.len_prefixed("tag body").ok()?;
        if ty == TAG_CELL_TTL {
            let b: [u8; 8] = body.try_into().ok()?;
            return Some(u64::from_le_bytes(b));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ttl_round_trips_and_unknown_or_damaged_tags_are_harmless() {
        assert_eq!(cell_ttl(&encode_cell_ttl(1234)), Some(1234));
        assert_eq!(cell_ttl(&[]), None);
        // An unknown field before the TTL is skipped.
        let mut t = vec![9, 2, 0xAA, 0xBB];
        t.extend(encode_cell_ttl(7));
        assert_eq!(cell_ttl(&t), Some(7));
        // Truncated or lying lengths never panic.
        let good = encode_cell_ttl(5);
        for cut in 0..good.len() {
            assert_eq!(cell_ttl(&good[..cut]), None);
        }
        assert_eq!(cell_ttl(&[1, 200, 1]), None);
        assert_eq!(cell_ttl(&[1, 3, 1, 2, 3]), None);
    }
}
