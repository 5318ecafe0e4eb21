//! Cell keys: encoding, decoding and the total order (SPEC.md §3).
//!
//! ```text
//! +-----------+-----+-----------+--------+-----------+-----------+------+---------+
//! | row_len   | row | fam_len   | family | qualifier | timestamp | type | seq     |
//! | u16 LE    |     | u8        |        | (rest)    | u64 LE    | u8   | u64 LE  |
//! +-----------+-----+-----------+--------+-----------+-----------+------+---------+
//! ```
//! The qualifier's length is implied: the key's length minus everything else. Order: row,
//! family, qualifier ascending (bytewise); timestamp, type and sequence number descending, so
//! the newest version comes first and a marker sorts before the puts it masks.

use std::cmp::Ordering;

use crate::error::{malformed, Malformed};

/// Bytes after the qualifier: timestamp (8), type (1), sequence number (8).
pub const KEY_SUFFIX_LEN: usize = 8 + 1 + 8;
/// Smallest possible encoded key: empty row, family and qualifier.
pub const MIN_KEY_LEN: usize = 2 + 1 + KEY_SUFFIX_LEN;
/// Longest row key (a two-byte length, as in HBase).
pub const MAX_ROW_LEN: usize = u16::MAX as usize;
/// Longest family name (a one-byte length).
pub const MAX_FAMILY_LEN: usize = u8::MAX as usize;
/// Longest qualifier the writer accepts.
pub const MAX_QUALIFIER_LEN: usize = u16::MAX as usize;
/// Longest value the writer accepts.
pub const MAX_VALUE_LEN: usize = 256 << 20;
/// Longest tags section the writer accepts.
pub const MAX_TAGS_LEN: usize = u16::MAX as usize;

/// The type code of a cell. Values are HBase's and are persisted: never renumber.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum CellType {
    /// A value.
    Put = 4,
    /// Masks the one version of a column at exactly its timestamp.
    Delete = 8,
    /// Masks every column of the family at exactly its timestamp.
    DeleteFamilyVersion = 10,
    /// Masks every version of a column at or below its timestamp.
    DeleteColumn = 12,
    /// Masks every column of the family at or below its timestamp.
    DeleteFamily = 14,
}

/// Type code that sorts before every real type at equal coordinates; used only in search and
/// index keys ("first key on a row/column"), never stored as a cell.
pub const TYPE_MAXIMUM: u8 = 255;
/// Type code that sorts after every real type; used only in search keys.
pub const TYPE_MINIMUM: u8 = 0;

impl TryFrom<u8> for CellType {
    type Error = u8;
    fn try_from(v: u8) -> Result<Self, u8> {
        Ok(match v {
            4 => CellType::Put,
            8 => CellType::Delete,
            10 => CellType::DeleteFamilyVersion,
            12 => CellType::DeleteColumn,
            14 => CellType::DeleteFamily,
            other => return Err(other),
        })
    }
}

impl CellType {
    /// All cell types, in code order.
    pub const ALL: [CellType; 5] = [
        CellType::Put,
        CellType::Delete,
        CellType::DeleteFamilyVersion,
        CellType::DeleteColumn,
        CellType::DeleteFamily,
    ];

    /// HBase's name for the type (`Put`, `Delete`, `DeleteColumn`, ...).
    pub fn name(self) -> &'static str {
        match self {
            CellType::Put => "Put",
            CellType::Delete => "Delete",
            CellType::DeleteFamilyVersion => "DeleteFamilyVersion",
            CellType::DeleteColumn => "DeleteColumn",
            CellType::DeleteFamily => "DeleteFamily",
        }
    }

    /// Parse [`CellType::name`] (case-insensitive).
    pub fn from_name(s: &str) -> Option<Self> {
        CellType::ALL
            .into_iter()
            .find(|t| t.name().eq_ignore_ascii_case(s))
    }

    /// True for every marker type.
    pub fn is_delete(self) -> bool {
        self != CellType::Put
    }

    /// True for the family-level markers, which carry an empty qualifier.
    pub fn is_family_marker(self) -> bool {
        matches!(self, CellType::DeleteFamily | CellType::DeleteFamilyVersion)
    }
}

/// A borrowed, parsed view of an encoded key. Parsing does not allocate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyRef<'a> {
    /// Row key.
    pub row: &'a [u8],
    /// Column family.
    pub family: &'a [u8],
    /// Column qualifier.
    pub qualifier: &'a [u8],
    /// Timestamp (milliseconds by convention).
    pub timestamp: u64,
    /// Raw type code; a [`CellType`] for stored cells, [`TYPE_MAXIMUM`]/[`TYPE_MINIMUM`] in
    /// search keys.
    pub type_code: u8,
    /// Sequence number of the write.
    pub seq: u64,
}

impl<'a> KeyRef<'a> {
    /// The smallest key of `row`, borrowing it: seeking to it lands on the row's first cell
    /// (as [`CellKey::first_on_row`], without copying the row).
    pub fn first_on_row(row: &'a [u8]) -> Self {
        KeyRef {
            row,
            family: &[],
            qualifier: &[],
            timestamp: u64::MAX,
            type_code: TYPE_MAXIMUM,
            seq: u64::MAX,
        }
    }

    /// Parse an encoded key.
    #[inline]
    pub fn parse(key: &'a [u8]) -> Result<Self, Malformed> {
        // Every cell a read resolves is parsed here: inlined, without the error wording in
        // the way (callgrind: 4% fewer instructions for a cached scan than out of line).
        match Self::split(key) {
            Some(k) => Ok(k),
            None => Err(Self::parse_error(key)),
        }
    }

    /// The parts of a well-formed key, `None` for a key `parse` refuses.
    #[inline(always)]
    fn split(key: &'a [u8]) -> Option<Self> {
        let head_len = key.len().checked_sub(KEY_SUFFIX_LEN)?;
        if key.len() < MIN_KEY_LEN {
            return None;
        }
        let (head, suffix) = key.split_at(head_len);
        let row_len = usize::from(u16::from_le_bytes(*head.first_chunk::<2>()?));
        let fam_len_at = 2 + row_len;
        let fam_len = usize::from(*head.get(fam_len_at)?);
        let qual_at = fam_len_at + 1 + fam_len;
        let (ts, rest) = suffix.split_first_chunk::<8>()?;
        let (&ty, seq) = rest.split_first()?;
        Some(KeyRef {
            row: head.get(2..fam_len_at)?,
            family: head.get(fam_len_at + 1..qual_at)?,
            qualifier: head.get(qual_at..)?,
            timestamp: u64::from_le_bytes(*ts),
            type_code: ty,
            seq: u64::from_le_bytes(*seq.first_chunk::<8>()?),
        })
    }

    /// Why [`KeyRef::parse`] refused `key`.
    #[cold]
    #[inline(never)]
    fn parse_error(key: &[u8]) -> Malformed {
        match Self::parse_checked(key) {
            Err(m) => m,
            Ok(_) => Malformed("key does not parse".into()),
        }
    }

    /// The parse with a message for each way a key can be malformed.
    fn parse_checked(key: &[u8]) -> Result<KeyRef<'_>, Malformed> {
        if key.len() < MIN_KEY_LEN {
            return malformed(format!(
                "key of {} bytes is shorter than the minimum {MIN_KEY_LEN}",
                key.len()
            ));
        }
        let (head, suffix) = key.split_at(key.len() - KEY_SUFFIX_LEN);
        let (row_len, rest) = head.split_at(2);
        let row_len = u16::from_le_bytes([
            row_len.first().copied().unwrap_or(0),
            row_len.get(1).copied().unwrap_or(0),
        ]) as usize;
        let Some((row, rest)) = split(rest, row_len) else {
            return malformed(format!("key row length {row_len} runs past the key"));
        };
        let Some((&fam_len, rest)) = rest.split_first() else {
            return malformed("key family length truncated");
        };
        let Some((family, qualifier)) = split(rest, fam_len as usize) else {
            return malformed(format!("key family length {fam_len} runs past the key"));
        };
        let (ts, rest) = suffix.split_at(8);
        let (ty, seq) = rest.split_at(1);
        Ok(KeyRef {
            row,
            family,
            qualifier,
            timestamp: u64::from_le_bytes(ts.try_into().unwrap_or_default()),
            type_code: ty.first().copied().unwrap_or(0),
            seq: u64::from_le_bytes(seq.try_into().unwrap_or_default()),
        })
    }

    /// The cell type, if the code is one.
    pub fn cell_type(&self) -> Option<CellType> {
        CellType::try_from(self.type_code).ok()
    }

    /// Encoded length.
    pub fn encoded_len(&self) -> usize {
        2 + self.row.len() + 1 + self.family.len() + self.qualifier.len() + KEY_SUFFIX_LEN
    }

    /// Append the encoding to `out`. Panics never; lengths beyond the limits are truncated
    /// by the caller's validation ([`CellKey::validate`]) before this is reached.
    pub fn encode_into(&self, out: &mut Vec<u8>) {
        out.reserve(self.encoded_len());
        out.extend_from_slice(&(self.row.len() as u16).to_le_bytes());
        out.extend_from_slice(self.row);
        out.push(self.family.len() as u8);
        out.extend_from_slice(self.family);
        out.extend_from_slice(self.qualifier);
        out.extend_from_slice(&self.timestamp.to_le_bytes());
        out.push(self.type_code);
        out.extend_from_slice(&self.seq.to_le_bytes());
    }

    /// Encode into a fresh vector.
    pub fn encode(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(self.encoded_len());
        self.encode_into(&mut v);
        v
    }

    /// Call `f` with the encoding, built in a stack buffer when it fits (keys of rows up to
    /// about 230 bytes) and in a vector otherwise: a hot path that only needs the bytes for a
    /// moment allocates nothing for them.
    pub fn with_encoded<R>(&self, f: impl FnOnce(&[u8]) -> R) -> R {
        let mut stack = [0u8; 256];
        match self.encode_to_slice(&mut stack) {
            Some(n) => f(stack.get(..n).unwrap_or_default()),
            None => f(&self.encode()),
        }
    }

    /// Write the encoding at the front of `out` (for a caller's buffer, without allocating);
    /// returns its length, or `None` (nothing written) when `out` is shorter.
    pub fn encode_to_slice(&self, out: &mut [u8]) -> Option<usize> {
        let n = self.encoded_len();
        let mut rest = out.get_mut(..n)?;
        let parts: [&[u8]; 8] = [
            &(self.row.len() as u16).to_le_bytes(),
            self.row,
            &[self.family.len() as u8],
            self.family,
            self.qualifier,
            &self.timestamp.to_le_bytes(),
            &[self.type_code],
            &self.seq.to_le_bytes(),
        ];
        for p in parts {
            // The parts sum to `n`, the length of `rest` at the start.
            let (head, tail) = std::mem::take(&mut rest).split_at_mut(p.len());
            head.copy_from_slice(p);
            rest = tail;
        }
        Some(n)
    }

    /// Compare row, family and qualifier only.
    pub fn cmp_column(&self, other: &KeyRef<'_>) -> Ordering {
        self.row
            .cmp(other.row)
            .then_with(|| self.family.cmp(other.family))
            .then_with(|| self.qualifier.cmp(other.qualifier))
    }

    /// An owned copy.
    pub fn to_owned_key(&self) -> CellKey {
        CellKey {
            row: self.row.to_vec(),
            family: self.family.to_vec(),
            qualifier: self.qualifier.to_vec(),
            timestamp: self.timestamp,
            type_code: self.type_code,
            seq: self.seq,
        }
    }
}

fn split(s: &[u8], n: usize) -> Option<(&[u8], &[u8])> {
    (n <= s.len()).then(|| s.split_at(n))
}

impl Ord for KeyRef<'_> {
    fn cmp(&self, other: &Self) -> Ordering {
        self.cmp_column(other)
            .then_with(|| other.timestamp.cmp(&self.timestamp))
            .then_with(|| other.type_code.cmp(&self.type_code))
            .then_with(|| other.seq.cmp(&self.seq))
    }
}

impl PartialOrd for KeyRef<'_> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// Compare two encoded keys in cell order without allocating.
///
/// A key that does not parse (only possible for bytes read from a damaged file) sorts by its
/// raw bytes after every well-formed key, so the order stays total and nothing panics; the
/// decoders report such keys as corruption before they reach a caller.
#[inline]
pub fn compare_keys(a: &[u8], b: &[u8]) -> Ordering {
    // Most comparisons (a skip-list insert, a block seek) are decided by the row, so compare
    // rows straight from the bytes and parse the rest only on a tie. Taking the shortcut only
    // when both keys are well formed keeps the order exactly the one below. The memstore
    // insert profile was 40% in the full parse before this.
    if let (Some(ra), Some(rb)) = (row_if_well_formed(a), row_if_well_formed(b)) {
        let o = compare_bytes(ra, rb);
        if o != Ordering::Equal {
            return o;
        }
    }
    compare_parsed(a, b)
}

/// [`compare_keys`] past the row: out of line, so the row comparison inlines small.
#[inline(never)]
fn compare_parsed(a: &[u8], b: &[u8]) -> Ordering {
    match (KeyRef::parse(a), KeyRef::parse(b)) {
        (Ok(x), Ok(y)) => x.cmp(&y),
        (Ok(_), Err(_)) => Ordering::Less,
        (Err(_), Ok(_)) => Ordering::Greater,
        (Err(_), Err(_)) => a.cmp(b),
    }
}

/// Bytewise order of `a` and `b` (as `a.cmp(b)`), eight bytes at a time as big-endian words.
/// Rows are short (16 bytes in the benchmarks): a call to `memcmp` per comparison cost more
/// than the comparison (a skip-list insert makes about 25; callgrind: 26 instructions a call).
#[inline]
pub fn compare_bytes(a: &[u8], b: &[u8]) -> Ordering {
    let (mut x, mut y) = (a, b);
    while let (Some((wx, rx)), Some((wy, ry))) =
        (x.split_first_chunk::<8>(), y.split_first_chunk::<8>())
    {
        if wx != wy {
            return u64::from_be_bytes(*wx).cmp(&u64::from_be_bytes(*wy));
        }
        (x, y) = (rx, ry);
    }
    // Under 8 bytes left in one of them: the rest byte by byte, then the shorter first.
    for (p, q) in x.iter().zip(y) {
        if p != q {
            return p.cmp(q);
        }
    }
    x.len().cmp(&y.len())
}

/// Whether `a` and `b` are the same bytes (as `a == b`), eight bytes at a time. Rows, family
/// names and qualifiers are short: a scan compares a few per cell (its row with the row being
/// gathered, its family with the resolvers', a column lookup's names), and a call to `memcmp`
/// for each cost more than the comparison (callgrind, seekrandom: 2.5% of the instructions
/// in `memcmp`, as many again in the calls around it). Long strings still go to `memcmp`.
#[inline]
pub fn bytes_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    if a.len() > 32 {
        return a == b;
    }
    let (mut x, mut y) = (a, b);
    while let (Some((wx, rx)), Some((wy, ry))) =
        (x.split_first_chunk::<8>(), y.split_first_chunk::<8>())
    {
        if wx != wy {
            return false;
        }
        (x, y) = (rx, ry);
    }
    x.iter().zip(y).all(|(p, q)| p == q)
}

/// A key prepared for comparing against many others (a skip-list search compares one key
/// against about 25): its row is located and checked once instead of at every comparison.
#[derive(Debug, Clone, Copy)]
pub struct KeyProbe<'a> {
    key: &'a [u8],
    row: Option<&'a [u8]>,
}

impl<'a> KeyProbe<'a> {
    /// Prepare `key`.
    pub fn new(key: &'a [u8]) -> Self {
        KeyProbe {
            key,
            row: row_if_well_formed(key),
        }
    }

    /// The key.
    pub fn key(&self) -> &'a [u8] {
        self.key
    }

    /// False when `other` is known to be of another row than the probe's key; true when it
    /// is of the same row, or either key is malformed.
    #[inline]
    pub fn may_share_row(&self, other: &[u8]) -> bool {
        match (self.row, row_if_well_formed(other)) {
            (Some(r), Some(o)) => bytes_eq(r, o),
            _ => true,
        }
    }

    /// `compare_keys(other, key)`: the order of `other` relative to the probe's key.
    #[inline]
    pub fn order_of(&self, other: &[u8]) -> Ordering {
        if let (Some(r), Some(ro)) = (self.row, row_if_well_formed(other)) {
            let o = compare_bytes(ro, r);
            if o != Ordering::Equal {
                return o;
            }
        }
        compare_parsed(other, self.key)
    }
}

/// The row of `key` if [`KeyRef::parse`] would accept the key (the same length checks).
#[inline]
pub fn row_if_well_formed(key: &[u8]) -> Option<&[u8]> {
    KeyRef::split(key).map(|k| k.row)
}

/// An owned cell key.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CellKey {
    /// Row key.
    pub row: Vec<u8>,
    /// Column family.
    pub family: Vec<u8>,
    /// Column qualifier.
    pub qualifier: Vec<u8>,
    /// Timestamp.
    pub timestamp: u64,
    /// Raw type code (see [`KeyRef::type_code`]).
    pub type_code: u8,
    /// Sequence number.
    pub seq: u64,
}

impl CellKey {
    /// A stored cell's key.
    pub fn new(
        row: impl Into<Vec<u8>>,
        family: impl Into<Vec<u8>>,
        qualifier: impl Into<Vec<u8>>,
        timestamp: u64,
        cell_type: CellType,
        seq: u64,
    ) -> Self {
        CellKey {
            row: row.into(),
            family: family.into(),
            qualifier: qualifier.into(),
            timestamp,
            type_code: cell_type as u8,
            seq,
        }
    }

    /// The smallest key with this row: seeking to it lands on the row's first cell.
    pub fn first_on_row(row: &[u8]) -> Self {
        CellKey {
            row: row.to_vec(),
            family: Vec::new(),
            qualifier: Vec::new(),
            timestamp: u64::MAX,
            type_code: TYPE_MAXIMUM,
            seq: u64::MAX,
        }
    }

    /// The smallest key of a column: seeking to it lands on the column's newest cell.
    pub fn first_on_column(row: &[u8], family: &[u8], qualifier: &[u8]) -> Self {
        CellKey {
            row: row.to_vec(),
            family: family.to_vec(),
            qualifier: qualifier.to_vec(),
            timestamp: u64::MAX,
            type_code: TYPE_MAXIMUM,
            seq: u64::MAX,
        }
    }

    /// A borrowed view.
    pub fn as_ref(&self) -> KeyRef<'_> {
        KeyRef {
            row: &self.row,
            family: &self.family,
            qualifier: &self.qualifier,
            timestamp: self.timestamp,
            type_code: self.type_code,
            seq: self.seq,
        }
    }

    /// Encode into a fresh vector.
    pub fn encode(&self) -> Vec<u8> {
        self.as_ref().encode()
    }

    /// The cell type, if the code is one.
    pub fn cell_type(&self) -> Option<CellType> {
        CellType::try_from(self.type_code).ok()
    }

    /// Check the limits a stored cell must meet.
    pub fn validate(&self) -> Result<CellType, String> {
        validate_key(&self.as_ref())
    }
}

/// Check the limits a stored cell's key must meet; returns its type.
pub fn validate_key(k: &KeyRef<'_>) -> Result<CellType, String> {
    if k.row.is_empty() {
        return Err("row key is empty".into());
    }
    if k.row.len() > MAX_ROW_LEN {
        return Err(format!(
            "row key of {} bytes exceeds {MAX_ROW_LEN}",
            k.row.len()
        ));
    }
    if k.family.is_empty() || k.family.len() > MAX_FAMILY_LEN {
        return Err(format!(
            "family name of {} bytes is outside 1..={MAX_FAMILY_LEN}",
            k.family.len()
        ));
    }
    if k.qualifier.len() > MAX_QUALIFIER_LEN {
        return Err(format!(
            "qualifier of {} bytes exceeds {MAX_QUALIFIER_LEN}",
            k.qualifier.len()
        ));
    }
    let ty = k
        .cell_type()
        .ok_or_else(|| format!("type code {} is not a cell type", k.type_code))?;
    if ty.is_family_marker() && !k.qualifier.is_empty() {
        return Err(format!("{} marker must have an empty qualifier", ty.name()));
    }
    Ok(ty)
}

impl Ord for CellKey {
    fn cmp(&self, other: &Self) -> Ordering {
        self.as_ref().cmp(&other.as_ref())
    }
}

impl PartialOrd for CellKey {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// A key that sorts at or after `last` and strictly before `next` (or after every key with
/// `last`'s row when `next` is `None`), as short as a row-level cut allows. Used as the index
/// key of a block: the index then only needs to separate blocks, not to name their last key.
pub fn shortest_separator(last: &KeyRef<'_>, next: Option<&KeyRef<'_>>) -> Vec<u8> {
    let candidate_row = match next {
        Some(n) if n.row != last.row => row_between(last.row, n.row),
        Some(_) => None,
        None => row_successor(last.row),
    };
    match candidate_row {
        Some(r) if r.len() < last.row.len() + last.family.len() + last.qualifier.len() => {
            CellKey::first_on_row(&r).encode()
        }
        _ => last.encode(),
    }
}

/// A row `r` with `a < r < b`, shorter than `b`, if one is found by bumping one byte of `a`.
fn row_between(a: &[u8], b: &[u8]) -> Option<Vec<u8>> {
    let common = a.iter().zip(b).take_while(|(x, y)| x == y).count();
    let (&ab, &bb) = (a.get(common)?, b.get(common)?);
    if ab < 0xff && ab + 1 < bb {
        let mut r = a.get(..common)?.to_vec();
        r.push(ab + 1);
        return Some(r);
    }
    None
}

/// The shortest row greater than every row that starts with `a`, if `a` is not all `0xff`.
fn row_successor(a: &[u8]) -> Option<Vec<u8>> {
    let i = a.iter().position(|&b| b != 0xff)?;
    let mut r = a.get(..=i)?.to_vec();
    if let Some(last) = r.last_mut() {
        *last += 1;
    }
    (r.len() <= MAX_ROW_LEN).then_some(r)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The order `compare_keys` must keep: full parse, malformed keys last by raw bytes.
    fn reference_compare(a: &[u8], b: &[u8]) -> Ordering {
        match (KeyRef::parse(a), KeyRef::parse(b)) {
            (Ok(x), Ok(y)) => x.cmp(&y),
            (Ok(_), Err(_)) => Ordering::Less,
            (Err(_), Ok(_)) => Ordering::Greater,
            (Err(_), Err(_)) => a.cmp(b),
        }
    }

    /// A key that is well formed, or damaged by a truncation or a changed length byte.
    fn key_bytes() -> impl Strategy<Value = Vec<u8>> {
        (
            prop::collection::vec(0u8..4, 0..4),
            prop::collection::vec(0u8..3, 0..3),
            prop::collection::vec(0u8..3, 0..3),
            0u64..3,
            0u64..3,
            0usize..40,
            prop::option::of((0usize..4, any::<u8>())),
        )
            .prop_map(|(row, fam, q, ts, seq, cut, poke)| {
                let mut v = CellKey::new(row, fam, q, ts, CellType::Put, seq).encode();
                if cut < 8 {
                    v.truncate(v.len().saturating_sub(cut));
                }
                if let Some((at, b)) = poke {
                    if let Some(x) = v.get_mut(at) {
                        *x = b;
                    }
                }
                v
            })
    }

    /// Keys with rows of up to 24 bytes over a two-letter alphabet: long shared prefixes,
    /// rows that differ past the first 8-byte word, in its middle and in the tail.
    fn long_row_key() -> impl Strategy<Value = Vec<u8>> {
        (
            prop::collection::vec(0u8..2, 0..24),
            0u64..3,
            prop::option::of((0usize..4, any::<u8>())),
        )
            .prop_map(|(row, seq, poke)| {
                let mut v = CellKey::new(row, "f", "q", 7, CellType::Put, seq).encode();
                if let Some((at, b)) = poke {
                    if let Some(x) = v.get_mut(at) {
                        *x = b;
                    }
                }
                v
            })
    }

    proptest! {
        #[test]
        fn inlined_parse_agrees_with_the_checked_one(k in key_bytes()) {
            let fast = KeyRef::parse(&k);
            let checked = KeyRef::parse_checked(&k);
            prop_assert_eq!(fast.as_ref().ok(), checked.as_ref().ok());
            prop_assert_eq!(row_if_well_formed(&k).is_some(), checked.is_ok());
            prop_assert_eq!(fast.err(), checked.err());
        }

        #[test]
        fn row_shortcut_keeps_the_full_order(a in key_bytes(), b in key_bytes()) {
            prop_assert_eq!(compare_keys(&a, &b), reference_compare(&a, &b));
            prop_assert_eq!(KeyProbe::new(&b).order_of(&a), reference_compare(&a, &b));
        }

        #[test]
        fn long_rows_keep_the_full_order(a in long_row_key(), b in long_row_key()) {
            prop_assert_eq!(compare_keys(&a, &b), reference_compare(&a, &b));
            prop_assert_eq!(KeyProbe::new(&b).order_of(&a), reference_compare(&a, &b));
        }

        #[test]
        fn word_compare_is_bytewise(
            a in prop::collection::vec(0u8..3, 0..40),
            b in prop::collection::vec(0u8..3, 0..40),
        ) {
            prop_assert_eq!(compare_bytes(&a, &b), a.cmp(&b));
        }

        #[test]
        fn word_equality_is_bytewise(
            a in prop::collection::vec(0u8..2, 0..48),
            b in prop::collection::vec(0u8..2, 0..48),
            at in any::<prop::sample::Index>(),
        ) {
            prop_assert_eq!(bytes_eq(&a, &b), a == b);
            prop_assert!(bytes_eq(&a, &a.clone()));
            // Equal lengths differing in one byte, in a word or in the tail after them.
            let mut c = a.clone();
            if !c.is_empty() {
                let i = at.index(c.len());
                c[i] ^= 1;
                prop_assert!(!bytes_eq(&a, &c));
                prop_assert!(!bytes_eq(&c, &a));
            }
        }
    }

    fn k(row: &str, q: &str, ts: u64, t: CellType, seq: u64) -> CellKey {
        CellKey::new(row, "cf", q, ts, t, seq)
    }

    #[test]
    fn order_is_row_family_qualifier_then_newest_first() {
        let mut keys = [
            k("r2", "a", 1, CellType::Put, 1),
            k("r1", "b", 5, CellType::Put, 1),
            k("r1", "a", 1, CellType::Put, 1),
            k("r1", "a", 9, CellType::Put, 1),
            k("r1", "a", 9, CellType::DeleteColumn, 1),
            k("r1", "a", 9, CellType::Put, 7),
            k("r1", "", 3, CellType::DeleteFamily, 1),
        ];
        keys.sort();
        let got: Vec<_> = keys
            .iter()
            .map(|c| {
                (
                    String::from_utf8_lossy(&c.row).into_owned(),
                    c.timestamp,
                    c.type_code,
                    c.seq,
                )
            })
            .collect();
        assert_eq!(
            got,
            vec![
                ("r1".into(), 3, 14, 1),
                ("r1".into(), 9, 12, 1),
                ("r1".into(), 9, 4, 7),
                ("r1".into(), 9, 4, 1),
                ("r1".into(), 1, 4, 1),
                ("r1".into(), 5, 4, 1),
                ("r2".into(), 1, 4, 1),
            ]
        );
    }

    #[test]
    fn encoding_into_a_slice_matches_encode() {
        let k = k("row", "qual", 10, CellType::DeleteColumn, 3);
        let want = k.encode();
        let mut buf = [0xaau8; 64];
        assert_eq!(k.as_ref().encode_to_slice(&mut buf), Some(want.len()));
        assert_eq!(&buf[..want.len()], want.as_slice());
        assert!(buf[want.len()..].iter().all(|b| *b == 0xaa));
        let mut short = vec![0u8; want.len() - 1];
        assert_eq!(k.as_ref().encode_to_slice(&mut short), None);
        assert!(short.iter().all(|b| *b == 0));
    }

    #[test]
    fn encoded_compare_matches_struct_compare() {
        let a = k("row", "q", 10, CellType::Put, 3);
        let b = k("row", "q", 10, CellType::Put, 2);
        assert_eq!(compare_keys(&a.encode(), &b.encode()), a.cmp(&b));
        assert_eq!(KeyRef::parse(&a.encode()).ok(), Some(a.as_ref()));
    }

    #[test]
    fn malformed_keys_are_rejected_and_order_stays_total() {
        assert!(KeyRef::parse(&[0u8; 5]).is_err());
        let mut bad = k("r", "q", 1, CellType::Put, 1).encode();
        bad[0] = 200; // row length past the key
        assert!(KeyRef::parse(&bad).is_err());
        let good = k("r", "q", 1, CellType::Put, 1).encode();
        assert_eq!(compare_keys(&good, &bad), Ordering::Less);
        assert_eq!(compare_keys(&bad, &good), Ordering::Greater);
    }

    #[test]
    fn separator_brackets_the_boundary() {
        let cases = [
            (
                k("abcdef", "q", 1, CellType::Put, 1),
                Some(k("abzz", "q", 1, CellType::Put, 1)),
            ),
            (
                k("abc", "q", 1, CellType::Put, 1),
                Some(k("abd", "q", 1, CellType::Put, 1)),
            ),
            (
                k("abc", "q", 2, CellType::Put, 1),
                Some(k("abc", "q", 1, CellType::Put, 1)),
            ),
            (
                CellKey::new(b"a\xff".to_vec(), "cf", "q", 1, CellType::Put, 1),
                None,
            ),
            (k("\u{7f}\u{7f}", "q", 1, CellType::Put, 1), None),
        ];
        for (last, next) in cases {
            let sep =
                shortest_separator(&last.as_ref(), next.as_ref().map(|n| n.as_ref()).as_ref());
            let s = KeyRef::parse(&sep).ok();
            let Some(s) = s else {
                panic!("separator does not parse")
            };
            assert!(s >= last.as_ref());
            if let Some(n) = &next {
                assert!(s < n.as_ref());
            }
        }
    }

    #[test]
    fn cell_type_codes_are_hbase_codes() {
        assert_eq!(CellType::Put as u8, 4);
        assert_eq!(CellType::DeleteFamily as u8, 14);
        assert_eq!(CellType::try_from(9), Err(9));
        assert_eq!(
            CellType::from_name("deletecolumn"),
            Some(CellType::DeleteColumn)
        );
    }
}
