//! Row-key design helpers, after the seeds' advice on HBase row keys.
//!
//! Rows sort bytewise, so how a key is built decides both where writes land and which scans
//! are cheap. The seeds teach six tricks, each a function here:
//!
//! | trick | helper | trade-off |
//! |---|---|---|
//! | salting (加盐) | [`salt`], [`salt_decimal`], [`merge_salted`] | spreads writes; a range read becomes one scan per salt |
//! | hashing | [`hash_prefix`], [`hash_prefixed`] | fixed-length, even spread; no range reads on the original key |
//! | reversing (翻转) | [`reverse_bytes`], [`reverse_domain`] | spreads sequential ids; groups a domain's hosts |
//! | zero-padding (补0) | [`pad_u64`], [`be_u64`] | numbers sort numerically |
//! | reversed timestamps | [`reversed_ts`] | newest first in a scan |
//! | composite keys | [`composite`], [`join`] | `followerId+followedId`: one row per relation |
//!
//! The hash is XXH3 (64-bit for salts, 128-bit for hex prefixes) from `xxhash-rust`, seed 0:
//! it is specified and portable, so a key salted today is salted the same way by any later
//! build. The seeds use MD5 for the hex prefix; any stable hash spreads keys alike, and XXH3 is
//! much faster and already in the workspace. Changing the hash would orphan every stored key,
//! so it is fixed here for good.

use std::num::{NonZeroU32, NonZeroU8};

use xxhash_rust::xxh3::{xxh3_128, xxh3_64};

use crate::error::Result;
use crate::read::Row;

/// The salt bucket of `key`: a stable hash of the key, modulo `buckets`.
pub fn salt_bucket(key: &[u8], buckets: u32) -> u32 {
    match u64::from(buckets) {
        0 => 0,
        n => (xxh3_64(key) % n) as u32,
    }
}

/// `key` behind a one-byte salt, the bucket number `0..buckets` (seed 004's 'a'..'d' prefixes,
/// as bytes). The same key always gets the same salt, so a point read recomputes it.
///
/// ```
/// use std::num::NonZeroU8;
/// use cellar::keys::{salt, salted_prefixes};
///
/// let four = NonZeroU8::new(4).unwrap();
/// let k = salt(b"2019_01_10_10_34_36", four);
/// assert_eq!(&k[1..], b"2019_01_10_10_34_36");
/// assert!(k[0] < 4);
/// assert_eq!(k, salt(b"2019_01_10_10_34_36", four)); // stable
/// assert_eq!(salted_prefixes(four), vec![vec![0], vec![1], vec![2], vec![3]]);
/// ```
pub fn salt(key: &[u8], buckets: NonZeroU8) -> Vec<u8> {
    let b = salt_bucket(key, u32::from(buckets.get())) as u8;
    let mut out = Vec::with_capacity(1 + key.len());
    out.push(b);
    out.extend_from_slice(key);
    out
}

/// The one-byte prefixes [`salt`] produces, in order: a range read scans each.
pub fn salted_prefixes(buckets: NonZeroU8) -> Vec<Vec<u8>> {
    (0..buckets.get()).map(|b| vec![b]).collect()
}

/// Digits of the largest bucket number, the width of a decimal salt.
fn decimal_width(buckets: NonZeroU32) -> usize {
    (buckets.get() - 1).max(1).ilog10() as usize + 1
}

/// `key` behind a zero-padded decimal salt `0..buckets` (seed 003: "0到9或者a-z"): with 10
/// buckets the prefix is one digit `0`..`9`, with 100 two digits `00`..`99`.
///
/// ```
/// use std::num::NonZeroU32;
/// use cellar::keys::{salt_decimal, salted_decimal_prefixes};
///
/// let ten = NonZeroU32::new(10).unwrap();
/// let k = salt_decimal(b"123+2021-11-11-11:11:11", ten);
/// assert!(k[0].is_ascii_digit());
/// assert_eq!(&k[1..], b"123+2021-11-11-11:11:11");
/// let hundred = NonZeroU32::new(100).unwrap();
/// assert_eq!(salted_decimal_prefixes(hundred)[7], b"07");
/// ```
pub fn salt_decimal(key: &[u8], buckets: NonZeroU32) -> Vec<u8> {
    let b = salt_bucket(key, buckets.get());
    let mut out = pad_u64(u64::from(b), decimal_width(buckets));
    out.extend_from_slice(key);
    out
}

/// The decimal prefixes [`salt_decimal`] produces, in order.
pub fn salted_decimal_prefixes(buckets: NonZeroU32) -> Vec<Vec<u8>> {
    let w = decimal_width(buckets);
    (0..buckets.get())
        .map(|b| pad_u64(u64::from(b), w))
        .collect()
}

/// Merge per-salt scans back into the order of the unsalted keys.
///
/// Each input yields rows in key order, all with a salt prefix of `prefix_len` bytes; the
/// output yields every row (keys still salted, so they can be read or deleted again) ordered
/// by the key after the prefix, ties by input order. An error is passed on as soon as it is
/// met and ends the input that produced it; the others go on.
///
/// ```
/// use cellar::keys::merge_salted;
/// use cellar::read::Row;
///
/// let bucket0 = vec![Ok(Row::new("0b", vec![])), Ok(Row::new("0d", vec![]))];
/// let bucket1 = vec![Ok(Row::new("1a", vec![])), Ok(Row::new("1c", vec![]))];
/// let keys: Vec<Vec<u8>> = merge_salted(vec![bucket0.into_iter(), bucket1.into_iter()], 1)
///     .map(|r| r.unwrap().key)
///     .collect();
/// assert_eq!(keys, vec![b"1a".to_vec(), b"0b".to_vec(), b"1c".to_vec(), b"0d".to_vec()]);
/// ```
pub fn merge_salted<I>(iters: Vec<I>, prefix_len: usize) -> MergeSalted<I>
where
    I: Iterator<Item = Result<Row>>,
{
    MergeSalted {
        heads: iters.into_iter().map(|it| (None, Some(it))).collect(),
        prefix_len,
    }
}

/// The iterator of [`merge_salted`].
///
/// A linear pick over the inputs' heads: salt counts are small (a region server count), and
/// this avoids copying keys into a heap.
#[derive(Debug)]
pub struct MergeSalted<I> {
    /// Per input: its next row (if pulled) and the input (`None` once finished).
    heads: Vec<(Option<Row>, Option<I>)>,
    prefix_len: usize,
}

impl<I: Iterator<Item = Result<Row>>> Iterator for MergeSalted<I> {
    type Item = Result<Row>;

    fn next(&mut self) -> Option<Result<Row>> {
        for (head, input) in &mut self.heads {
            if head.is_none() {
                if let Some(it) = input {
                    match it.next() {
                        Some(Ok(row)) => *head = Some(row),
                        Some(Err(e)) => {
                            *input = None;
                            return Some(Err(e));
                        }
                        None => *input = None,
                    }
                }
            }
        }
        let p = self.prefix_len;
        let best = self
            .heads
            .iter()
            .enumerate()
            .filter_map(|(i, (h, _))| h.as_ref().map(|r| (i, r)))
            .min_by(|(i, a), (j, b)| {
                let (ka, kb) = (
                    a.key.get(p..).unwrap_or_default(),
                    b.key.get(p..).unwrap_or_default(),
                );
                ka.cmp(kb).then(i.cmp(j))
            })
            .map(|(i, _)| i);
        best.and_then(|i| self.heads.get_mut(i))
            .and_then(|(h, _)| h.take())
            .map(Ok)
    }
}

/// The first `n_hex` lowercase hex digits (at most 32) of the key's XXH3-128 hash: seed 004's
/// `substr(md5(key), 0, x)` with XXH3 for MD5 (see the module notes).
///
/// ```
/// use cellar::keys::hash_prefix;
/// let p = hash_prefix(b"device-0001", 6);
/// assert_eq!(p.len(), 6);
/// assert!(p.iter().all(|c| c.is_ascii_hexdigit()));
/// assert_eq!(p, hash_prefix(b"device-0001", 6));
/// ```
pub fn hash_prefix(key: &[u8], n_hex: usize) -> Vec<u8> {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let h = xxh3_128(key);
    (0..n_hex.min(32))
        .map(|i| {
            let nibble = (h >> (124 - 4 * i)) & 0xf;
            HEX.get(nibble as usize).copied().unwrap_or(b'0')
        })
        .collect()
}

/// [`hash_prefix`] followed by the key: seed 003's `new_row_key = hash(old_row_key) +
/// old_row_key`, which keeps the key readable and unique while spreading it.
///
/// ```
/// use cellar::keys::hash_prefixed;
/// let k = hash_prefixed(b"uid42", 5);
/// assert_eq!(&k[5..], b"uid42");
/// ```
pub fn hash_prefixed(key: &[u8], n_hex: usize) -> Vec<u8> {
    let mut out = hash_prefix(key, n_hex);
    out.extend_from_slice(key);
    out
}

/// The key's bytes in reverse order: seed 003's "user_id=123, 翻转之后得到 321", which spreads
/// sequential ids (their fast-changing last digit comes first).
///
/// ```
/// use cellar::keys::reverse_bytes;
/// assert_eq!(reverse_bytes(b"123"), b"321");
/// ```
pub fn reverse_bytes(key: &[u8]) -> Vec<u8> {
    key.iter().rev().copied().collect()
}

/// A host name with its labels reversed, as the webtable stores `com.cnn.www`: all hosts of a
/// domain become neighbours, so one prefix scan reads a whole site. Applying it twice gives
/// the host back.
///
/// ```
/// use cellar::keys::reverse_domain;
/// assert_eq!(reverse_domain("www.cnn.com"), "com.cnn.www");
/// assert_eq!(reverse_domain("www.example.com"), "com.example.www");
/// ```
pub fn reverse_domain(host: &str) -> String {
    host.rsplit('.').collect::<Vec<_>>().join(".")
}

/// `n` in decimal, zero-padded to `width` digits, so numbers of up to `width` digits sort
/// numerically as strings (seed 003: 123 and 23 as `0000000123` and `0000000023`). A number
/// with more digits than `width` is written in full and then sorts wrongly: choose `width` for
/// the largest value (20 covers every `u64`).
///
/// ```
/// use cellar::keys::pad_u64;
/// assert_eq!(pad_u64(123, 10), b"0000000123");
/// assert_eq!(pad_u64(23, 10), b"0000000023");
/// assert!(pad_u64(23, 10) < pad_u64(123, 10));
/// ```
pub fn pad_u64(n: u64, width: usize) -> Vec<u8> {
    format!("{n:0width$}").into_bytes()
}

/// `n` as 8 big-endian bytes, which sort numerically (shorter and faster than padded
/// decimal, not human-readable).
///
/// ```
/// use cellar::keys::be_u64;
/// assert!(be_u64(23) < be_u64(123));
/// assert!(be_u64(255) < be_u64(256));
/// ```
pub fn be_u64(n: u64) -> [u8; 8] {
    n.to_be_bytes()
}

/// Read back [`be_u64`] from the first 8 bytes of `b`.
pub fn from_be_u64(b: &[u8]) -> Option<u64> {
    let bytes: [u8; 8] = b.get(..8)?.try_into().ok()?;
    Some(u64::from_be_bytes(bytes))
}

/// `i64` as 8 bytes that sort numerically, negatives first (the sign bit flipped).
///
/// ```
/// use cellar::keys::be_i64;
/// assert!(be_i64(-5) < be_i64(-1));
/// assert!(be_i64(-1) < be_i64(0));
/// assert!(be_i64(0) < be_i64(7));
/// ```
pub fn be_i64(n: i64) -> [u8; 8] {
    ((n as u64) ^ (1 << 63)).to_be_bytes()
}

/// A reversed timestamp, `u64::MAX - ts` big-endian: seed 004's `uid + Long.Max_Value -
/// timestamp`, so a scan of `uid` returns the newest records first.
///
/// ```
/// use cellar::keys::{reversed_ts, from_reversed_ts};
/// assert!(reversed_ts(2_000) < reversed_ts(1_000)); // newer sorts first
/// assert_eq!(from_reversed_ts(&reversed_ts(1_000)), Some(1_000));
/// ```
pub fn reversed_ts(ts: u64) -> [u8; 8] {
    (u64::MAX - ts).to_be_bytes()
}

/// Read back [`reversed_ts`] from the first 8 bytes of `b`.
pub fn from_reversed_ts(b: &[u8]) -> Option<u64> {
    from_be_u64(b).map(|r| u64::MAX - r)
}

/// Parts joined with a separator, as the seeds write `followerId+followedId` ("Jame+Emma").
/// Refused (`None`) when a part contains the separator, since the key could not be split
/// back; parts of different lengths sort by the separator byte, so prefer fixed-width parts
/// or [`composite`].
///
/// ```
/// use cellar::keys::join;
/// assert_eq!(join(&[b"Jame", b"Emma"], b'+'), Some(b"Jame+Emma".to_vec()));
/// assert_eq!(join(&[b"a+b", b"c"], b'+'), None);
/// ```
pub fn join(parts: &[&[u8]], sep: u8) -> Option<Vec<u8>> {
    if parts.iter().any(|p| p.contains(&sep)) {
        return None;
    }
    Some(parts.join(&sep))
}

/// Escape byte of [`composite`]; a literal 0x00 in a part is written `00 FF`.
const ESC: u8 = 0x00;
/// Second byte of a part's terminator `00 01`.
const TERM: u8 = 0x01;
/// Second byte of an escaped 0x00.
const ESCAPED_ZERO: u8 = 0xff;

/// An order-preserving composite key: tuples of byte strings sort as the tuples do (first
/// part, then second, ...), whatever bytes the parts hold, and `composite(&[a])` is a prefix
/// of every `composite(&[a, ...])`, so a prefix scan finds all rows starting with `a`. Each
/// part is written with 0x00 escaped as `00 FF` and ends with `00 01`.
///
/// The seeds' follower table (`followerId+followedId`):
///
/// ```
/// use cellar::keys::{composite, split_composite};
/// let jame_emma = composite(&[b"Jame", b"Emma"]);
/// let jame = composite(&[b"Jame"]);
/// assert!(jame_emma.starts_with(&jame)); // scan prefix `jame`: everyone Jame follows
/// assert!(composite(&[b"Jam", b"Zed"]) < jame_emma); // "Jam" < "Jame", as tuples
/// assert_eq!(split_composite(&jame_emma), Some(vec![b"Jame".to_vec(), b"Emma".to_vec()]));
/// ```
pub fn composite(parts: &[&[u8]]) -> Vec<u8> {
    let mut out = Vec::with_capacity(parts.iter().map(|p| p.len() + 2).sum());
    for p in parts {
        for &b in *p {
            out.push(b);
            if b == ESC {
                out.push(ESCAPED_ZERO);
            }
        }
        out.push(ESC);
        out.push(TERM);
    }
    out
}

/// The parts of a [`composite`] key; `None` if it is not one.
pub fn split_composite(key: &[u8]) -> Option<Vec<Vec<u8>>> {
    let mut parts = Vec::new();
    let mut cur = Vec::new();
    let mut it = key.iter();
    while let Some(&b) = it.next() {
        if b != ESC {
            cur.push(b);
            continue;
        }
        match it.next() {
            Some(&ESCAPED_ZERO) => cur.push(ESC),
            Some(&TERM) => parts.push(std::mem::take(&mut cur)),
            _ => return None,
        }
    }
    cur.is_empty().then_some(parts)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;

    fn nz8(n: u8) -> NonZeroU8 {
        NonZeroU8::new(n).unwrap_or(NonZeroU8::MIN)
    }

    #[test]
    fn salt_is_stable_and_spreads() {
        // Pinned: a change of hash would orphan stored keys.
        assert_eq!(salt_bucket(b"row-1", 16), salt_bucket(b"row-1", 16));
        let b = nz8(4);
        let mut seen = [0usize; 4];
        for i in 0..1000u32 {
            let k = salt(format!("2019_01_10_10_{i:05}").as_bytes(), b);
            if let Some(s) = seen.get_mut(k[0] as usize) {
                *s += 1;
            }
        }
        assert!(seen.iter().all(|&n| n > 150), "uneven spread {seen:?}");
        assert_eq!(salt(b"x", nz8(1))[0], 0);
    }

    #[test]
    fn decimal_salt_width_follows_bucket_count() {
        let w = |n| decimal_width(NonZeroU32::new(n).unwrap_or(NonZeroU32::MIN));
        assert_eq!(
            (w(1), w(2), w(10), w(11), w(100), w(101)),
            (1, 1, 1, 2, 2, 3)
        );
        let p = salted_decimal_prefixes(NonZeroU32::new(11).unwrap_or(NonZeroU32::MIN));
        assert_eq!(p.first().map(Vec::as_slice), Some(&b"00"[..]));
        assert_eq!(p.last().map(Vec::as_slice), Some(&b"10"[..]));
        let mut sorted = p.clone();
        sorted.sort();
        assert_eq!(p, sorted);
    }

    #[test]
    fn merge_salted_restores_key_order_and_passes_errors() {
        let b = nz8(3);
        let keys: Vec<String> = (0..50).map(|i| format!("k{i:03}")).collect();
        let mut buckets: Vec<Vec<Row>> = vec![Vec::new(); 3];
        for k in &keys {
            let s = salt(k.as_bytes(), b);
            if let Some(v) = buckets.get_mut(s[0] as usize) {
                v.push(Row::new(s, vec![]));
            }
        }
        for v in &mut buckets {
            v.sort_by(|a, b| a.key.cmp(&b.key));
        }
        let iters: Vec<_> = buckets.into_iter().map(|v| v.into_iter().map(Ok)).collect();
        let got: Vec<Vec<u8>> = merge_salted(iters, 1)
            .map(|r| r.map(|r| r.key[1..].to_vec()).unwrap_or_default())
            .collect();
        let want: Vec<Vec<u8>> = keys.iter().map(|k| k.as_bytes().to_vec()).collect();
        assert_eq!(got, want);

        let failing: Vec<std::vec::IntoIter<Result<Row>>> = vec![
            vec![Ok(Row::new("0a", vec![])), Ok(Row::new("0c", vec![]))].into_iter(),
            vec![Err(Error::Closed), Ok(Row::new("1z", vec![]))].into_iter(),
        ];
        let out: Vec<_> = merge_salted(failing, 1).collect();
        assert!(matches!(out.first(), Some(Err(Error::Closed))));
        let rest: Vec<Vec<u8>> = out
            .into_iter()
            .skip(1)
            .filter_map(|r| r.ok().map(|r| r.key))
            .collect();
        assert_eq!(rest, vec![b"0a".to_vec(), b"0c".to_vec()]);
    }

    #[test]
    fn hash_prefix_is_hex_and_clamped() {
        assert_eq!(hash_prefix(b"k", 0), b"");
        assert_eq!(hash_prefix(b"k", 100).len(), 32);
        assert_ne!(hash_prefix(b"k1", 8), hash_prefix(b"k2", 8));
        assert!(hash_prefix(b"k1", 32).iter().all(u8::is_ascii_hexdigit));
    }

    #[test]
    fn numbers_sort_numerically() {
        let ns = [0u64, 1, 9, 10, 23, 123, 255, 256, 1 << 40, u64::MAX];
        for w in ns.windows(2) {
            assert!(pad_u64(w[0], 20) < pad_u64(w[1], 20));
            assert!(be_u64(w[0]) < be_u64(w[1]));
            assert!(reversed_ts(w[0]) > reversed_ts(w[1]));
            assert_eq!(from_be_u64(&be_u64(w[0])), Some(w[0]));
            assert_eq!(from_reversed_ts(&reversed_ts(w[1])), Some(w[1]));
        }
        assert_eq!(from_be_u64(b"short"), None);
        let is = [i64::MIN, -100, -1, 0, 1, i64::MAX];
        for w in is.windows(2) {
            assert!(be_i64(w[0]) < be_i64(w[1]));
        }
    }

    #[test]
    fn reversing() {
        assert_eq!(reverse_bytes(b""), b"");
        assert_eq!(reverse_bytes(b"123+2021"), b"1202+321");
        assert_eq!(reverse_domain("com"), "com");
        assert_eq!(reverse_domain(&reverse_domain("a.b.c.d")), "a.b.c.d");
    }

    #[test]
    fn composite_keys_sort_as_tuples_and_round_trip() {
        let tuples: Vec<Vec<&[u8]>> = vec![
            vec![b""],
            vec![b"", b"x"],
            vec![b"\x00"],
            vec![b"\x00", b"\xff"],
            vec![b"\x00\x00"],
            vec![b"\x00\x01"],
            vec![b"a"],
            vec![b"a", b"\x00"],
            vec![b"a", b"b"],
            vec![b"a\x00"],
            vec![b"ab"],
            vec![b"b"],
        ];
        for w in tuples.windows(2) {
            assert!(
                composite(&w[0]) < composite(&w[1]),
                "{:?} !< {:?}",
                w[0],
                w[1]
            );
        }
        for t in &tuples {
            let back = split_composite(&composite(t));
            let want: Vec<Vec<u8>> = t.iter().map(|p| p.to_vec()).collect();
            assert_eq!(back, Some(want));
        }
        assert_eq!(split_composite(b"abc"), None);
        assert_eq!(split_composite(b"a\x00\x02"), None);
        assert_eq!(split_composite(b""), Some(vec![]));
    }
}
