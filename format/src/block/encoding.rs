//! Data block encodings: how an entry of a data block stores its cell key (SPEC.md §4.3, §4.4).
//!
//! `PREFIX` (every version) stores the whole encoded key, prefix-compressed against the
//! previous entry's:
//! ```text
//! entry := shared varint32 | unshared varint32 | value_len varint32 | tags_len varint32
//!          | key_delta[unshared] | value[value_len] | tags[tags_len]
//! ```
//! `DIFF` (format version 2) prefix-compresses only the key's coordinates (row length, row,
//! family length, family, qualifier) and stores the 17-byte suffix as a flags byte and
//! differences, as HBase's DIFF/FAST_DIFF encodings do:
//! ```text
//! entry := shared varint32 | unshared varint32 | value_len varint32 | flags u8
//!          | [tags_len varint32]          (flags bit 7)
//!          | coords_delta[unshared]
//!          | [ts_delta varint64]          (absent when flags bit 6: equal to the base)
//!          | [seq_delta varint64]         (absent when flags bit 5: equal to the base)
//!          | value[value_len] | tags[tags_len]
//! flags  := bits 0..=4: the type code | bit 5: seq = base | bit 6: ts = base | bit 7: tags
//! ```
//! The base of an entry whose `shared` is 0 (every restart entry, and any entry sharing
//! nothing) is timestamp 0 and sequence number 0; otherwise it is the previous entry's.
//! A delta is the wrapping difference from the base, zigzag-encoded: `zz(d) = (d << 1) ^ (d >>
//! 63)` over `d` as an `i64`.
//!
//! Why: the suffix is 17 of the ~37 key bytes of a typical cell and is never shared with the
//! neighbour's (the row or qualifier differs first), but a block's cells were written close
//! together in time and sequence, so their differences fit in 2–4 bytes. On the comparison
//! load (16-byte rows, 100-byte values) an entry shrinks from 129 to about 118 bytes.
//!
//! `ANCHORED_DIFF` (format version 3) has DIFF's entry layout, but a restart entry other than
//! the block's first is encoded against the first (the *anchor*) instead of standing alone: it
//! shares a prefix of the anchor's coordinates, and its timestamp and sequence number are
//! differences from the anchor's. Every other entry is encoded against the entry before it, as
//! in DIFF, and its base is that entry's timestamp and sequence number whatever it shares. The
//! anchor is encoded against nothing (shares 0 bytes, base 0).
//!
//! Why: a seek walks from a restart point to its key, decoding every entry on the way, and
//! with a DIFF restart every 16 entries that walk was the largest part of a cached Get
//! (callgrind: ~400 instructions an entry, 8.5 entries a seek). A DIFF restart entry stores
//! its coordinates, timestamp and sequence number whole, so more of them cost space (4.2%
//! larger files at one every 4 entries); against the anchor, which a reader decodes once per
//! block, a restart entry costs about what any other does, and the writer puts one every 4
//! entries. The entries between restart points stay chained to their neighbours, which share
//! the whole row, family and qualifier with them in a wide row or a column's versions: encoded
//! against the anchor as well, the webtable example's block grew by 40%.

use crate::cell::{bytes_eq, KEY_SUFFIX_LEN};
use crate::coding::{put_varint32, put_varint64, Cursor};
use crate::error::{malformed, Malformed};

/// How a block's entries store their keys. Index blocks are always [`DataBlockEncoding::Prefix`];
/// a file's data blocks use the encoding its file info names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum DataBlockEncoding {
    /// Whole keys, prefix-compressed (format version 1's only encoding).
    #[default]
    Prefix,
    /// Coordinates prefix-compressed, timestamp and sequence number as differences.
    Diff,
    /// DIFF entries encoded against the block's first entry.
    AnchoredDiff,
}

impl DataBlockEncoding {
    /// The name stored in file info (`PREFIX`, `DIFF`).
    pub fn name(self) -> &'static str {
        match self {
            DataBlockEncoding::Prefix => "PREFIX",
            DataBlockEncoding::Diff => "DIFF",
            DataBlockEncoding::AnchoredDiff => "ANCHORED_DIFF",
        }
    }

    /// The oldest format version whose files may use the encoding.
    pub fn since(self) -> crate::version::FormatVersion {
        use crate::version::FormatVersion;
        match self {
            DataBlockEncoding::Prefix => FormatVersion::V1,
            DataBlockEncoding::Diff => FormatVersion::V2,
            DataBlockEncoding::AnchoredDiff => FormatVersion::V3,
        }
    }

    /// Whether entries store coordinates and suffix differences (DIFF, ANCHORED_DIFF).
    pub(crate) fn is_diff(self) -> bool {
        matches!(
            self,
            DataBlockEncoding::Diff | DataBlockEncoding::AnchoredDiff
        )
    }

    /// Whether entries are encoded against the block's first entry (ANCHORED_DIFF).
    pub(crate) fn is_anchored(self) -> bool {
        self == DataBlockEncoding::AnchoredDiff
    }

    /// Parse [`DataBlockEncoding::name`] (case-insensitive).
    pub fn from_name(s: &str) -> Option<Self> {
        [
            DataBlockEncoding::Prefix,
            DataBlockEncoding::Diff,
            DataBlockEncoding::AnchoredDiff,
        ]
        .into_iter()
        .find(|e| e.name().eq_ignore_ascii_case(s))
    }
}

impl std::fmt::Display for DataBlockEncoding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

const TYPE_MASK: u8 = 0x1f;
const SAME_SEQ: u8 = 0x20;
const SAME_TS: u8 = 0x40;
const HAS_TAGS: u8 = 0x80;

fn zigzag(d: u64) -> u64 {
    let d = d as i64;
    ((d << 1) ^ (d >> 63)) as u64
}

fn unzigzag(z: u64) -> u64 {
    (z >> 1) ^ (z & 1).wrapping_neg()
}

/// The suffix fields of a whole encoded key (timestamp, type, seq); `None` when the key is too
/// short to have one.
fn suffix_of(key: &[u8]) -> Option<(u64, u8, u64)> {
    let at = key.len().checked_sub(KEY_SUFFIX_LEN)?;
    let s = key.get(at..)?;
    let ts = u64::from_le_bytes(s.get(..8)?.try_into().ok()?);
    let ty = *s.get(8)?;
    let seq = u64::from_le_bytes(s.get(9..17)?.try_into().ok()?);
    Some((ts, ty, seq))
}

/// Append one DIFF or ANCHORED_DIFF entry for `key` (a whole encoded key, already validated
/// by the writer) against `prev`, the whole key of the entry it is encoded against (empty for
/// none). `restart`: the entry shares nothing (a DIFF restart). `anchored`: the base is
/// `prev`'s timestamp and sequence number whatever the entry shares (ANCHORED_DIFF), not only
/// when it shares something (DIFF).
pub(crate) fn put_diff_entry(
    out: &mut Vec<u8>,
    prev: &[u8],
    restart: bool,
    anchored: bool,
    key: &[u8],
    value: &[u8],
    tags: &[u8],
) {
    let coords_len = key.len().saturating_sub(KEY_SUFFIX_LEN);
    let coords = key.get(..coords_len).unwrap_or_default();
    let (ts, ty, seq) = suffix_of(key).unwrap_or((0, 0, 0));
    let prev_coords = prev
        .get(..prev.len().saturating_sub(KEY_SUFFIX_LEN))
        .unwrap_or_default();
    let shared = if restart {
        0
    } else {
        prev_coords
            .iter()
            .zip(coords)
            .take_while(|(a, b)| a == b)
            .count()
    };
    let (base_ts, base_seq) = if shared == 0 && !anchored {
        (0, 0)
    } else {
        suffix_of(prev).map_or((0, 0), |(t, _, s)| (t, s))
    };
    let mut flags = ty & TYPE_MASK;
    if ts == base_ts {
        flags |= SAME_TS;
    }
    if seq == base_seq {
        flags |= SAME_SEQ;
    }
    if !tags.is_empty() {
        flags |= HAS_TAGS;
    }
    let delta = coords.get(shared..).unwrap_or_default();
    put_varint32(out, shared as u32);
    put_varint32(out, delta.len() as u32);
    put_varint32(out, value.len() as u32);
    out.push(flags);
    if !tags.is_empty() {
        put_varint32(out, tags.len() as u32);
    }
    out.extend_from_slice(delta);
    if ts != base_ts {
        put_varint64(out, zigzag(ts.wrapping_sub(base_ts)));
    }
    if seq != base_seq {
        put_varint64(out, zigzag(seq.wrapping_sub(base_seq)));
    }
    out.extend_from_slice(value);
    out.extend_from_slice(tags);
}

/// Where a decoded entry's value and tags lie in its region, and where the next entry starts
/// (all relative to the start of the region passed in).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Decoded {
    pub value: (usize, usize),
    pub tags: (usize, usize),
    pub next: usize,
}

/// The row of the DIFF entry at the start of `region`, which shares nothing (a restart
/// entry): its coordinates are stored whole, so the row is read in place, without rebuilding
/// the key. `None` when the coordinates are too short to hold a row and family (the key would
/// not parse: the caller then decodes it fully and lets the comparison rank it).
pub(crate) fn diff_restart_row(region: &[u8]) -> Result<Option<&[u8]>, Malformed> {
    let mut c = Cursor::new(region);
    let shared = c.varint32("entry shared length")?;
    if shared != 0 {
        return malformed(format!("restart entry shares {shared} bytes"));
    }
    let unshared = c.varint32("entry unshared length")? as usize;
    c.varint32("entry value length")?;
    if c.u8("entry flags")? & HAS_TAGS != 0 {
        c.varint32("entry tags length")?;
    }
    let coords = c.take(unshared, "entry key")?;
    Ok(coords_row(coords))
}

/// The row of a key's coordinates (row length u16 | row | family length u8 | family |
/// qualifier, §3.1), under the bounds `cell::row_if_well_formed` checks on a whole key; `None`
/// when they are too short to hold a row and family.
#[inline]
pub(crate) fn coords_row(coords: &[u8]) -> Option<&[u8]> {
    let &[lo, hi] = coords.first_chunk::<2>()?;
    let fam_len_at = 2 + usize::from(u16::from_le_bytes([lo, hi]));
    let fam_len = *coords.get(fam_len_at)?;
    if fam_len_at + 1 + usize::from(fam_len) > coords.len() {
        return None;
    }
    coords.get(2..fam_len_at)
}

/// Append a key's 17-byte suffix (timestamp, type, sequence number; §3.1).
#[inline]
pub(crate) fn push_suffix(key: &mut Vec<u8>, ts: u64, ty: u8, seq: u64) {
    // Built whole and appended once: three appends checked the capacity three times (every
    // entry a scan decodes comes through here).
    let mut suffix = [0u8; KEY_SUFFIX_LEN];
    suffix[..8].copy_from_slice(&ts.to_le_bytes());
    suffix[8] = ty;
    suffix[9..].copy_from_slice(&seq.to_le_bytes());
    key.extend_from_slice(&suffix);
}

/// The suffix fields of a DIFF entry's key, kept as numbers while a seek walks a block.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Suffix {
    pub ts: u64,
    pub ty: u8,
    pub seq: u64,
}

/// Decode the DIFF entry at the start of `region` into key coordinates and suffix fields:
/// `coords` and `suffix` hold the previous entry's (anything when the entry shares nothing)
/// and are left holding this entry's. A seek walking a block compares rows on the
/// coordinates and writes a whole key only for the entry it stops at; [`decode_diff_entry`]
/// keeps whole keys.
pub(crate) fn decode_diff_coords(
    region: &[u8],
    coords: &mut Vec<u8>,
    suffix: &mut Suffix,
) -> Result<Decoded, Malformed> {
    let mut c = Cursor::new(region);
    let shared = c.varint32("entry shared length")? as usize;
    let unshared = c.varint32("entry unshared length")? as usize;
    let value_len = c.varint32("entry value length")? as usize;
    let flags = c.u8("entry flags")?;
    let tags_len = if flags & HAS_TAGS != 0 {
        c.varint32("entry tags length")? as usize
    } else {
        0
    };
    let (base_ts, base_seq) = if shared == 0 {
        (0, 0)
    } else {
        if shared > coords.len() {
            return malformed(format!(
                "entry shares {shared} bytes of a previous key with {} bytes of coordinates",
                coords.len()
            ));
        }
        (suffix.ts, suffix.seq)
    };
    let delta = c.take(unshared, "entry key")?;
    let ts = if flags & SAME_TS != 0 {
        base_ts
    } else {
        base_ts.wrapping_add(unzigzag(c.varint64("entry timestamp delta")?))
    };
    let seq = if flags & SAME_SEQ != 0 {
        base_seq
    } else {
        base_seq.wrapping_add(unzigzag(c.varint64("entry sequence delta")?))
    };
    let value_start = c.position();
    c.take(value_len, "entry value")?;
    c.take(tags_len, "entry tags")?;
    coords.truncate(shared);
    coords.extend_from_slice(delta);
    *suffix = Suffix {
        ts,
        ty: flags & TYPE_MASK,
        seq,
    };
    Ok(Decoded {
        value: (value_start, value_start + value_len),
        tags: (value_start + value_len, value_start + value_len + tags_len),
        next: c.position(),
    })
}

/// Decode the DIFF entry at the start of `region`, given in `key` the previous entry's whole
/// key (anything when the entry shares nothing), and leave in `key` this entry's whole key.
/// The caller validates the key.
pub(crate) fn decode_diff_entry(region: &[u8], key: &mut Vec<u8>) -> Result<Decoded, Malformed> {
    let (ts, ty, seq) = suffix_of(key).unwrap_or((0, 0, 0));
    let mut suffix = Suffix { ts, ty, seq };
    // The previous key's coordinates (none when it is shorter than a suffix).
    key.truncate(key.len().saturating_sub(KEY_SUFFIX_LEN));
    let d = decode_diff_coords(region, key, &mut suffix)?;
    push_suffix(key, suffix.ts, suffix.ty, suffix.seq);
    Ok(d)
}

/// What an ANCHORED_DIFF entry is encoded against.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Against<'a> {
    /// Nothing: the anchor itself (shares 0 bytes, base 0).
    Nothing,
    /// The anchor, whose coordinates these are: a restart entry after the first.
    Anchor(&'a [u8]),
    /// The entry before, whose coordinates `key` holds: every other entry.
    Previous,
}

/// Decode the ANCHORED_DIFF entry at the start of `region` against `against`, with `base` the
/// timestamp and sequence number of what it is encoded against (ignored for
/// [`Against::Nothing`]).
///
/// `key` holds the coordinates of the entry decoded before (followed by its suffix when
/// `whole`), of which the first `*matched` bytes are known to be the anchor's: a restart
/// entry is then decoded in place when it shares no more of the anchor than that, as a
/// scan's nearly always does (keys are sorted, so each shares no more of the first than the
/// one before when their rows have one length), instead of copying the anchor's prefix. `key`
/// is left holding the entry's coordinates (and its suffix when `whole`) and `*matched` a
/// lower bound of how many of them are the anchor's. Returns where the entry's value and tags
/// lie and its suffix.
#[inline]
pub(crate) fn decode_anchored(
    region: &[u8],
    key: &mut Vec<u8>,
    matched: &mut usize,
    base: Suffix,
    against: Against<'_>,
    whole: bool,
) -> Result<(Decoded, Suffix), Malformed> {
    let mut c = Cursor::new(region);
    let shared = c.varint32("entry shared length")? as usize;
    let unshared = c.varint32("entry unshared length")? as usize;
    let value_len = c.varint32("entry value length")? as usize;
    let flags = c.u8("entry flags")?;
    let tags_len = if flags & HAS_TAGS != 0 {
        c.varint32("entry tags length")? as usize
    } else {
        0
    };
    let prev_coords = if whole {
        key.len().saturating_sub(KEY_SUFFIX_LEN)
    } else {
        key.len()
    };
    let (base, copy) = match against {
        Against::Nothing if shared == 0 => (Suffix::default(), None),
        Against::Nothing => return malformed(format!("first entry shares {shared} bytes")),
        Against::Anchor(anchor) => {
            let Some(prefix) = anchor.get(..shared) else {
                return malformed(format!(
                    "entry shares {shared} bytes of an anchor with {} bytes of coordinates",
                    anchor.len()
                ));
            };
            let in_place = shared <= *matched && shared <= prev_coords;
            (base, (!in_place).then_some(prefix))
        }
        Against::Previous if shared <= prev_coords => (base, None),
        Against::Previous => {
            return malformed(format!(
                "entry shares {shared} bytes of a previous key with {prev_coords} bytes of \
                 coordinates"
            ))
        }
    };
    let delta = c.take(unshared, "entry key")?;
    let ts = if flags & SAME_TS != 0 {
        base.ts
    } else {
        base.ts
            .wrapping_add(unzigzag(c.varint64("entry timestamp delta")?))
    };
    let seq = if flags & SAME_SEQ != 0 {
        base.seq
    } else {
        base.seq
            .wrapping_add(unzigzag(c.varint64("entry sequence delta")?))
    };
    let value_start = c.position();
    c.take(value_len, "entry value")?;
    c.take(tags_len, "entry tags")?;
    match copy {
        Some(prefix) => {
            key.clear();
            key.extend_from_slice(prefix);
        }
        None => key.truncate(shared),
    }
    key.extend_from_slice(delta);
    *matched = match against {
        Against::Nothing => key.len(),
        Against::Anchor(_) => shared,
        Against::Previous => (*matched).min(shared),
    };
    let suffix = Suffix {
        ts,
        ty: flags & TYPE_MASK,
        seq,
    };
    if whole {
        push_suffix(key, suffix.ts, suffix.ty, suffix.seq);
    }
    let d = Decoded {
        value: (value_start, value_start + value_len),
        tags: (value_start + value_len, value_start + value_len + tags_len),
        next: c.position(),
    };
    Ok((d, suffix))
}

/// A scan's common entry decoded into a whole key without [`decode_anchored`]'s general
/// case: `shared` and `unshared` of one byte each, a value length of one or two bytes (values
/// up to 16 KiB), no tags, and decoded in place (against the entry before it, or against the
/// anchor when the key already starts with the bytes it shares). `None` when the entry is not
/// of that shape or does not fit `region`, `key` and `matched` then untouched: the caller
/// decodes it the general way, which also says what is wrong. `anchor` is the anchor's
/// coordinates when the entry is a restart point; `base` the suffix of what it is encoded
/// against.
///
/// Why: the general decoder, out of line with its error paths and a result returned through
/// memory, was ~300 of the ~1,000 instructions a cached scan spends on a row of one cell;
/// this path cut a scan's instructions by ~10% (callgrind). Inlining the general decoder
/// instead made the scan 8% dearer.
#[inline(always)]
pub(crate) fn decode_simple(
    region: &[u8],
    key: &mut Vec<u8>,
    matched: &mut usize,
    base: Suffix,
    anchor: Option<&[u8]>,
) -> Option<Decoded> {
    let &[shared, unshared, v0, ..] = region else {
        return None;
    };
    if (shared | unshared) & 0x80 != 0 {
        return None;
    }
    let (shared, unshared) = (usize::from(shared), usize::from(unshared));
    // A value length of one or two bytes (values up to 16 KiB).
    let (value_len, flags_at) = if v0 < 0x80 {
        (usize::from(v0), 3)
    } else {
        let &v1 = region.get(3)?;
        if v1 >= 0x80 {
            return None;
        }
        (usize::from(v0 & 0x7f) | usize::from(v1) << 7, 4)
    };
    let &flags = region.get(flags_at)?;
    if flags & HAS_TAGS != 0 {
        return None;
    }
    let prev_coords = key.len().checked_sub(KEY_SUFFIX_LEN)?;
    if shared > prev_coords {
        return None;
    }
    if let Some(anchor) = anchor {
        // In place only: the key's first `shared` bytes must be the anchor's.
        if shared > *matched || shared > anchor.len() {
            return None;
        }
    }
    let delta_at = flags_at + 1;
    let delta = region.get(delta_at..delta_at + unshared)?;
    let mut c = Cursor::new(region.get(delta_at + unshared..)?);
    let ts = if flags & SAME_TS != 0 {
        base.ts
    } else {
        base.ts.wrapping_add(unzigzag(c.varint64_short()?))
    };
    let seq = if flags & SAME_SEQ != 0 {
        base.seq
    } else {
        base.seq.wrapping_add(unzigzag(c.varint64_short()?))
    };
    let value_start = delta_at + unshared + c.position();
    let value_end = value_start + value_len;
    if value_end > region.len() {
        return None;
    }
    key.truncate(shared);
    key.extend_from_slice(delta);
    *matched = if anchor.is_some() {
        shared
    } else {
        (*matched).min(shared)
    };
    push_suffix(key, ts, flags & TYPE_MASK, seq);
    Some(Decoded {
        value: (value_start, value_end),
        tags: (value_end, value_end),
        next: value_end,
    })
}

/// True when the ANCHORED_DIFF restart entry at the start of `region`, encoded against the
/// anchor whose coordinates are `anchor`, is known to hold another row than the key whose
/// first bytes (its row length and row, §3.1) are `row_prefix`; false when it is of that row
/// or does not decode this far. Read from the entry's header, the anchor's first `shared`
/// bytes and its coordinates' delta, without decoding the entry: a restart entry's `shared`
/// says nothing of the entry before it (§4.5), unlike every other entry's. `matched`: how many
/// of the key's first bytes are known to be the anchor's.
///
/// Why: a scan hands over a row of one cell at once when it knows the row ended
/// ([`crate::CellEntry::last_in_row`]), and the rows before a restart point (one in four on
/// the comparison's files) took the gathering path, ~170 instructions more (callgrind).
#[inline(never)]
pub(crate) fn anchored_restart_leaves_row(
    region: &[u8],
    anchor: &[u8],
    row_prefix: &[u8],
    matched: usize,
) -> bool {
    // The header read byte by byte, as `decode_simple` does: through `Cursor` this cost ~155
    // instructions an entry, more than the gathering path it spares (callgrind). Lengths of
    // more than one byte (a `shared` or delta of 128 bytes or more, values over 16 KiB, tags
    // of 128 bytes or more) answer not known.
    let &[shared, unshared, v0, ..] = region else {
        return false;
    };
    if (shared | unshared) & 0x80 != 0 {
        return false;
    }
    let flags_at = match (v0, region.get(3)) {
        (0..=0x7f, _) => 3,
        (_, Some(0..=0x7f)) => 4,
        _ => return false,
    };
    let delta_at = match (region.get(flags_at), region.get(flags_at + 1)) {
        (Some(&flags), _) if flags & HAS_TAGS == 0 => flags_at + 1,
        (Some(_), Some(0..=0x7f)) => flags_at + 2,
        _ => return false,
    };
    let (shared, unshared) = (usize::from(shared), usize::from(unshared));
    let (Some(prefix), Some(delta)) = (
        anchor.get(..shared),
        region.get(delta_at..delta_at + unshared),
    ) else {
        return false;
    };
    // The entry's coordinates are `prefix ‖ delta`: compare their first bytes with the row's.
    // Those of the prefix that the current key is known to share with the anchor need no
    // look (a scan's restart entries nearly always share no more than that), and the rest
    // are few: a loop, not a call.
    let (head, rest) = row_prefix.split_at(shared.min(row_prefix.len()));
    if head.len() > matched && !bytes_eq(head, prefix.get(..head.len()).unwrap_or_default()) {
        return true;
    }
    let m = rest.len().min(delta.len());
    let (Some(ours), Some(theirs)) = (rest.get(..m), delta.get(..m)) else {
        return false;
    };
    ours.iter().zip(theirs).any(|(a, b)| a != b)
}

/// The suffix fields at the end of a whole key (zero when it has none).
#[inline]
pub(crate) fn key_suffix(key: &[u8]) -> Suffix {
    let (ts, ty, seq) = suffix_of(key).unwrap_or((0, 0, 0));
    Suffix { ts, ty, seq }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        /// Whatever `decode_simple` accepts, the general decoder decodes the same way: the
        /// same key, the same count of the anchor's bytes, the same value and next entry.
        /// Entries of both shapes are drawn (one-byte lengths or not, tags or not, one-byte
        /// or longer differences, lengths past the region's end), against the entry before
        /// and against an anchor, with a key that does or does not start with the anchor.
        #[test]
        fn decode_simple_agrees_with_the_general_decoder(
            shared in 0u8..40,
            unshared in prop_oneof![0u8..24, 120u8..=255],
            value_len in prop_oneof![0u8..24, 120u8..=255],
            flags in any::<u8>(),
            tail in proptest::collection::vec(any::<u8>(), 0..80),
            prev_coords in proptest::collection::vec(any::<u8>(), 0..32),
            prev_suffix in any::<[u8; KEY_SUFFIX_LEN]>(),
            anchor in proptest::option::of(proptest::collection::vec(any::<u8>(), 0..32)),
            matched in 0usize..40,
            base_ts in any::<u64>(),
            base_seq in any::<u64>(),
        ) {
            let mut region = vec![shared, unshared, value_len, flags];
            region.extend_from_slice(&tail);
            let mut key = prev_coords.clone();
            key.extend_from_slice(&prev_suffix);
            let base = Suffix { ts: base_ts, ty: 0, seq: base_seq };
            let (mut k1, mut m1) = (key.clone(), matched);
            let simple = decode_simple(&region, &mut k1, &mut m1, base, anchor.as_deref());
            let against = match &anchor {
                Some(a) => Against::Anchor(a),
                None => Against::Previous,
            };
            let (mut k2, mut m2) = (key.clone(), matched);
            let general = decode_anchored(&region, &mut k2, &mut m2, base, against, true);
            match simple {
                None => {
                    prop_assert_eq!(&k1, &key);
                    prop_assert_eq!(m1, matched);
                }
                Some(d) => {
                    let Ok((g, _)) = general else {
                        return Err(TestCaseError::fail(format!("general: {general:?}")));
                    };
                    prop_assert_eq!((d.value, d.tags, d.next), (g.value, g.tags, g.next));
                    prop_assert_eq!(&k1, &k2);
                    prop_assert_eq!(m1, m2);
                }
            }
        }
    }

    /// The common shapes take the quick path: without this a `decode_simple` that refused
    /// everything would pass the test above.
    #[test]
    fn decode_simple_takes_the_common_shapes() {
        // Previous key: row "r1", family "cf", no qualifier; ts 7, seq 1.
        let mut key = vec![2, 0, b'r', b'1', 2, b'c', b'f'];
        push_suffix(&mut key, 7, 4, 1);
        let base = key_suffix(&key);
        // Shares "02 00 72", adds "2" + family; ts +2, seq +2; value "y".
        let region = [3, 4, 1, 4, b'2', 2, b'c', b'f', 4, 4, b'y', 0xff];
        let mut matched = 7;
        let d = decode_simple(&region, &mut key, &mut matched, base, None).unwrap();
        let mut want = vec![2, 0, b'r', b'2', 2, b'c', b'f'];
        push_suffix(&mut want, 9, 4, 3);
        assert_eq!(key, want);
        assert_eq!((d.value, d.next, matched), ((10, 11), 11, 3));
        // A restart entry against an anchor whose first 3 bytes the key starts with.
        let anchor = [2, 0, b'r', b'0', 2, b'c', b'f'];
        let mut matched = 3;
        let d = decode_simple(&region, &mut key, &mut matched, base, Some(&anchor)).unwrap();
        assert_eq!((d.next, matched), (11, 3));
        // Not in place (shares more of the anchor than the key is known to start with).
        let mut matched = 2;
        assert!(decode_simple(&region, &mut key, &mut matched, base, Some(&anchor)).is_none());
        // A value of 200 bytes: its length takes two bytes.
        let mut long = vec![3, 4, 0xc8, 0x01, 4, b'3', 2, b'c', b'f', 4, 4];
        long.extend_from_slice(&[b'v'; 200]);
        let d = decode_simple(&long, &mut key, &mut matched, base, None).unwrap();
        assert_eq!((d.value, d.next), ((11, 211), 211));
        assert_eq!(&key[..7], &[2, 0, b'r', b'3', 2, b'c', b'f']);
    }

    #[test]
    fn zigzag_round_trips_every_difference() {
        for (a, b) in [
            (0u64, 0u64),
            (5, 3),
            (3, 5),
            (0, u64::MAX),
            (u64::MAX, 0),
            (1 << 63, 1),
            (1_795_511_869_751, 1_795_511_852_761),
        ] {
            let d = a.wrapping_sub(b);
            assert_eq!(b.wrapping_add(unzigzag(zigzag(d))), a);
        }
        assert_eq!(zigzag(1), 2);
        assert_eq!(zigzag((-1i64) as u64), 1);
    }
}
