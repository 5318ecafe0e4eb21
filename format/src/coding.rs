//! Integer encodings (SPEC.md §2) and a bounds-checked decoding cursor.
//!
//! Fixed-width integers are little-endian. Varints are unsigned LEB128: seven bits per byte,
//! low group first, high bit set on every byte but the last; at most 5 bytes for a `u32` and 10
//! for a `u64`, and an encoding longer than that, or one whose value overflows, is malformed.

use crate::error::{malformed, Malformed};

/// Append `v` as a varint.
pub fn put_varint64(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Append `v` as a varint.
pub fn put_varint32(out: &mut Vec<u8>, v: u32) {
    put_varint64(out, u64::from(v));
}

/// Number of bytes [`put_varint64`] writes for `v`.
pub fn varint_len(mut v: u64) -> usize {
    let mut n = 1;
    while v >= 0x80 {
        v >>= 7;
        n += 1;
    }
    n
}

/// The varint that ends within the 8 bytes of `w` (read little-endian) and its length in
/// bytes; `None` when all 8 have the continuation bit.
#[inline(always)]
fn varint_in_word(w: u64) -> Option<(u64, usize)> {
    let stops = !w & 0x8080_8080_8080_8080;
    if stops == 0 {
        return None;
    }
    // The last byte's high bit is bit 8·len − 1.
    let bits = stops.trailing_zeros() + 1;
    let kept = w & (u64::MAX >> (64 - bits)) & 0x7f7f_7f7f_7f7f_7f7f;
    Some((gather7(kept), (bits / 8) as usize))
}

/// [`varint_in_word`] for a varint that ends within the 4 bytes of `w`: two gathering steps
/// instead of three, with masks that fit an instruction's 32-bit immediate. `None` when all
/// 4 have the continuation bit.
///
/// Why: a DIFF entry's timestamp and sequence differences take 2–4 bytes; through the 8-byte
/// gather they were ~30 instructions each, the largest part of a cached scan's entry decode
/// (callgrind: RESULTS.md, session 37).
#[inline(always)]
fn varint_in_u32(w: u32) -> Option<(u64, usize)> {
    let stops = !w & 0x8080_8080;
    if stops == 0 {
        return None;
    }
    let bits = stops.trailing_zeros() + 1;
    let x = w & (u32::MAX >> (32 - bits)) & 0x7f7f_7f7f;
    let x = (x & 0x007f_007f) | ((x & 0x7f00_7f00) >> 1);
    let x = (x & 0x0000_3fff) | ((x & 0x3fff_0000) >> 2);
    Some((u64::from(x), (bits / 8) as usize))
}

/// The 7-bit groups of the low bytes of `x` (each byte's high bit clear), low group first,
/// packed together: `b0 | b1 << 7 | b2 << 14 | ...`.
#[inline(always)]
fn gather7(x: u64) -> u64 {
    let x = (x & 0x007f_007f_007f_007f) | ((x & 0x7f00_7f00_7f00_7f00) >> 1);
    let x = (x & 0x0000_3fff_0000_3fff) | ((x & 0x3fff_0000_3fff_0000) >> 2);
    (x & 0x0000_0000_0fff_ffff) | ((x & 0x0fff_ffff_0000_0000) >> 4)
}

#[cold]
#[inline(never)]
fn overflow32(what: &str, v: u64) -> Malformed {
    Malformed(format!("{what} varint {v} overflows 32 bits"))
}

/// A read position in a byte slice whose every read is bounds-checked and names the field
/// it was reading, so that a truncated structure reports *what* was cut short.
#[derive(Debug, Clone)]
pub struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    /// A cursor at the start of `buf`.
    pub fn new(buf: &'a [u8]) -> Self {
        Cursor { buf, pos: 0 }
    }

    /// Bytes consumed so far.
    pub fn position(&self) -> usize {
        self.pos
    }

    /// Bytes left.
    pub fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    /// True when every byte has been consumed.
    pub fn is_empty(&self) -> bool {
        self.remaining() == 0
    }

    /// The next `n` bytes.
    #[inline]
    pub fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8], Malformed> {
        match self.buf.get(self.pos..).and_then(|rest| rest.get(..n)) {
            Some(s) => {
                self.pos += n;
                Ok(s)
            }
            None => Err(self.truncated(n, what)),
        }
    }

    /// The error of a read of `n` bytes past the end. Out of line and cold: every entry
    /// decode makes several reads, and with the message built inline they were calls
    /// (callgrind: a quarter of a block seek's instructions).
    #[cold]
    #[inline(never)]
    fn truncated(&self, n: usize, what: &str) -> Malformed {
        Malformed(format!(
            "{what} truncated: needs {n} bytes, {} left",
            self.remaining()
        ))
    }

    /// The next `N` bytes as an array.
    #[inline]
    pub fn array<const N: usize>(&mut self, what: &str) -> Result<[u8; N], Malformed> {
        match self
            .buf
            .get(self.pos..)
            .and_then(|rest| rest.first_chunk::<N>())
        {
            Some(a) => {
                self.pos += N;
                Ok(*a)
            }
            None => Err(self.truncated(N, what)),
        }
    }

    /// A byte.
    #[inline]
    pub fn u8(&mut self, what: &str) -> Result<u8, Malformed> {
        match self.buf.get(self.pos) {
            Some(&b) => {
                self.pos += 1;
                Ok(b)
            }
            None => Err(self.truncated(1, what)),
        }
    }

    /// A little-endian `u16`.
    pub fn u16(&mut self, what: &str) -> Result<u16, Malformed> {
        Ok(u16::from_le_bytes(self.array(what)?))
    }

    /// A little-endian `u32`.
    pub fn u32(&mut self, what: &str) -> Result<u32, Malformed> {
        Ok(u32::from_le_bytes(self.array(what)?))
    }

    /// A little-endian `u64`.
    pub fn u64(&mut self, what: &str) -> Result<u64, Malformed> {
        Ok(u64::from_le_bytes(self.array(what)?))
    }

    /// A varint of at most 64 bits.
    #[inline(always)]
    pub fn varint64(&mut self, what: &str) -> Result<u64, Malformed> {
        // Block entries are four varints, nearly always one byte each: the hot path of every
        // seek and scan (15% of a read profile went to the general loop). This test comes
        // first and the loops of long varints stay out of line: with a loop in the same
        // function the compiler called the whole decode out of line, and the call was most of
        // a one-byte varint's cost (callgrind: 24 instructions a varint, 7% of a scan). The
        // branch-free 2–8-byte decode below is inlined as well: 4.6% fewer instructions for a
        // cached scan than calling it.
        if let Some(&b) = self.buf.get(self.pos) {
            if b < 0x80 {
                self.pos += 1;
                return Ok(u64::from(b));
            }
        }
        self.varint64_multi(what)
    }

    /// [`Cursor::varint64`] for a caller with a slower way to fall back on: `None`, without
    /// the error path, for a varint longer than 8 bytes, or longer than one with fewer than 8
    /// bytes left (and at the buffer's end). Inlined whole, where `varint64`'s 2–8-byte
    /// decode was called out of line (a scan's entry decode, `decode_simple`: ~30
    /// instructions a call).
    #[inline(always)]
    pub fn varint64_short(&mut self) -> Option<u64> {
        let rest = self.buf.get(self.pos..)?;
        let &b = rest.first()?;
        if b < 0x80 {
            self.pos += 1;
            return Some(u64::from(b));
        }
        let w = u64::from_le_bytes(*rest.first_chunk::<8>()?);
        let (v, len) = match varint_in_u32(w as u32) {
            Some(short) => short,
            None => varint_in_word(w)?,
        };
        self.pos += len;
        Some(v)
    }

    /// A varint of two bytes or more (or none left).
    #[inline]
    fn varint64_multi(&mut self, what: &str) -> Result<u64, Malformed> {
        // The timestamp and seq differences of DIFF entries take 2–4 bytes, a different
        // number from entry to entry: a loop that stops at the last byte mispredicts its exit
        // about once a varint (perf: 7% of a cached scan here). With 8 bytes left, the length
        // comes from the first clear high bit of one load and the 7-bit groups are gathered
        // with masks and shifts, without a branch on the length.
        // Up to 4 bytes (nearly every difference) in a 32-bit word, as `varint64_short`.
        let rest = self.buf.get(self.pos..).unwrap_or_default();
        if let Some(head) = rest.first_chunk::<8>() {
            let w = u64::from_le_bytes(*head);
            if let Some((v, len)) = varint_in_u32(w as u32).or_else(|| varint_in_word(w)) {
                self.pos += len;
                return Ok(v);
            }
        }
        self.varint64_long(what)
    }

    /// A varint of 9 or 10 bytes, or one with fewer than 8 bytes left.
    #[cold]
    #[inline(never)]
    fn varint64_long(&mut self, what: &str) -> Result<u64, Malformed> {
        let rest = self.buf.get(self.pos..).unwrap_or_default();
        if let Some(head) = rest.first_chunk::<10>() {
            let mut v: u64 = 0;
            for (i, &b) in head.iter().enumerate() {
                v |= u64::from(b & 0x7f) << (7 * i);
                if b & 0x80 == 0 {
                    if i == 9 && b > 1 {
                        break;
                    }
                    self.pos += i + 1;
                    return Ok(v);
                }
            }
        }
        self.varint64_slow(what)
    }

    #[cold]
    fn varint64_slow(&mut self, what: &str) -> Result<u64, Malformed> {
        let mut v: u64 = 0;
        for i in 0..10u32 {
            let Some(&b) = self.buf.get(self.pos) else {
                return malformed(format!("{what} truncated: needs 1 bytes, 0 left"));
            };
            self.pos += 1;
            let bits = u64::from(b & 0x7f);
            if i == 9 && bits > 1 {
                return malformed(format!("{what} varint overflows 64 bits"));
            }
            v |= bits << (7 * i);
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        malformed(format!("{what} varint longer than 10 bytes"))
    }

    /// A varint of at most 32 bits.
    #[inline(always)]
    pub fn varint32(&mut self, what: &str) -> Result<u32, Malformed> {
        let v = self.varint64(what)?;
        u32::try_from(v).map_err(|_| overflow32(what, v))
    }

    /// A varint used as a length of bytes still in this buffer: checked against what is left
    /// before anything is allocated or sliced.
    pub fn len_prefixed(&mut self, what: &str) -> Result<&'a [u8], Malformed> {
        let n = self.varint32(what)? as usize;
        self.take(n, what)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varint_round_trips_edges() {
        for v in [
            0u64,
            1,
            127,
            128,
            300,
            16383,
            16384,
            u32::MAX as u64,
            u64::MAX,
        ] {
            let mut b = Vec::new();
            put_varint64(&mut b, v);
            assert_eq!(b.len(), varint_len(v));
            let mut c = Cursor::new(&b);
            assert_eq!(c.varint64("v").ok(), Some(v));
            assert!(c.is_empty());
        }
    }

    #[test]
    fn varints_followed_by_more_bytes_decode_the_same() {
        // With ten bytes or more left, `varint64` takes its unchecked path.
        let mut b = Vec::new();
        let values: Vec<u64> = (0..64).map(|s| (1u64 << s) | (1u64 << s) >> 1).collect();
        for &v in values.iter().chain(&[0, 127, 128, 16383, 16384, u64::MAX]) {
            put_varint64(&mut b, v);
        }
        let end = b.len();
        b.extend_from_slice(&[0x80; 10]);
        let mut c = Cursor::new(&b);
        for &v in values.iter().chain(&[0, 127, 128, 16383, 16384, u64::MAX]) {
            assert_eq!(c.varint64("v").ok(), Some(v));
        }
        assert_eq!(c.position(), end);
        let mut overflow = vec![0xff; 9];
        overflow.extend_from_slice(&[0x02, 0, 0, 0]);
        assert!(Cursor::new(&overflow).varint64("v").is_err());
        assert!(Cursor::new(&[0x80u8; 16]).varint64("v").is_err());
    }

    #[test]
    fn every_varint_length_decodes_the_same_on_every_path() {
        // Each length from 1 to 10 bytes, at its edges and in between, followed by 0 to 12
        // more bytes: the one-byte test, the masked 8-byte load, the 10-byte loop and the
        // checked loop must agree.
        let mut values = vec![0u64, 1, u64::MAX, 0x0123_4567_89ab_cdef];
        for s in 1..64 {
            values.extend([(1u64 << s) - 1, 1u64 << s, (1u64 << s) | 0x55]);
        }
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..200 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            values.push(x >> (x % 64));
        }
        for &v in &values {
            for tail in 0..=12 {
                let mut b = Vec::new();
                put_varint64(&mut b, v);
                let len = b.len();
                b.extend(std::iter::repeat_n(0xff, tail));
                let mut c = Cursor::new(&b);
                assert_eq!(c.varint64("v").ok(), Some(v), "{v:#x} with {tail} more");
                assert_eq!(c.position(), len);
                // The scan's decode: up to 4 bytes in a 32-bit word, up to 8 in a 64-bit one,
                // `None` past that or with fewer than 8 bytes to load.
                let mut c = Cursor::new(&b);
                let short = c.varint64_short();
                if len == 1 || (len <= 8 && b.len() >= 8) {
                    assert_eq!(short, Some(v), "short {v:#x} with {tail} more");
                    assert_eq!(c.position(), len);
                } else {
                    assert_eq!(short, None, "short {v:#x} with {tail} more");
                    assert_eq!(c.position(), 0);
                }
            }
        }
    }

    #[test]
    fn varint_overlong_and_overflow_are_rejected() {
        let eleven = [0x80u8; 11];
        assert!(Cursor::new(&eleven).varint64("v").is_err());
        let overflow = [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02];
        assert!(Cursor::new(&overflow).varint64("v").is_err());
        let big = [0xff, 0xff, 0xff, 0xff, 0x1f];
        assert!(Cursor::new(&big).varint32("v").is_err());
    }

    #[test]
    fn truncated_reads_name_the_field() {
        let mut c = Cursor::new(&[1, 2]);
        let e = c.u32("restart count").unwrap_err();
        assert!(e.0.contains("restart count truncated"), "{e}");
        assert!(Cursor::new(&[5, 1]).len_prefixed("key").is_err());
    }
}
