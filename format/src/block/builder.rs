//! Builder of keyed blocks (data and index blocks; SPEC.md §4.3).
//!
//! ```text
//! entry    := shared varint32 | unshared varint32 | value_len varint32 | tags_len varint32
//!             | key_delta[unshared] | value[value_len] | tags[tags_len]
//! payload  := entry* | restart u32 LE * num_restarts | num_restarts u32 LE
//! ```
//! Every `restart_interval`-th entry stores its whole key (`shared = 0`) and its offset goes in
//! the restart array, which is what binary search and backward iteration start from. Data
//! blocks may use the DIFF or ANCHORED_DIFF entry layouts instead (`encoding.rs`); an
//! ANCHORED_DIFF restart entry after the first is encoded against the block's first entry, and
//! the builder makes an entry a restart point as soon as that is cheap (below).

use super::encoding::{put_diff_entry, DataBlockEncoding};
use crate::cell::KEY_SUFFIX_LEN;
use crate::coding::put_varint32;

/// ANCHORED_DIFF: entries between restart points at least. A seek walks half an interval on
/// average: 4 made a cached Get 13% fewer instructions than DIFF's 16 (callgrind).
pub const ANCHORED_MIN_RESTART_INTERVAL: usize = 4;

/// ANCHORED_DIFF: an entry at least [`ANCHORED_MIN_RESTART_INTERVAL`] past the last restart
/// point becomes one when it shares at most this many fewer bytes of coordinates with the
/// anchor than with the entry before it. Rows of one length share about as much with the
/// anchor as with a neighbour (the comparison's files: the same size as DIFF's with a restart
/// point every 4 entries instead of 16); the cells of a wide row, or a row length other than
/// the anchor's, share far more with their neighbour, and there the restart points stay
/// `restart_interval` apart as in DIFF (the webtable example's block with a restart point every
/// 4 entries regardless: 22% larger).
const ANCHORED_RESTART_SLACK: usize = 2;

/// Accumulates sorted entries into one raw block payload.
#[derive(Debug, Clone)]
pub struct BlockBuilder {
    buf: Vec<u8>,
    restarts: Vec<u32>,
    restart_interval: usize,
    since_restart: usize,
    last_key: Vec<u8>,
    /// The block's first key (ANCHORED_DIFF restart entries are encoded against it).
    anchor: Vec<u8>,
    entries: usize,
    encoding: DataBlockEncoding,
}

impl BlockBuilder {
    /// A builder of [`DataBlockEncoding::Prefix`] entries that stores a whole key every
    /// `restart_interval` entries (at least 1).
    pub fn new(restart_interval: usize) -> Self {
        Self::with_encoding(restart_interval, DataBlockEncoding::Prefix)
    }

    /// A builder of `encoding` entries with a restart every `restart_interval` entries.
    pub fn with_encoding(restart_interval: usize, encoding: DataBlockEncoding) -> Self {
        BlockBuilder {
            buf: Vec::new(),
            restarts: Vec::new(),
            restart_interval: restart_interval.max(1),
            since_restart: 0,
            last_key: Vec::new(),
            anchor: Vec::new(),
            entries: 0,
            encoding,
        }
    }

    /// Append an entry. Keys must come in increasing order; the writer checks that, and that
    /// they are whole cell keys when the encoding is DIFF.
    pub fn add(&mut self, key: &[u8], value: &[u8], tags: &[u8]) {
        let restart = self.since_restart == 0
            || self.since_restart >= self.restart_interval
            || (self.encoding == DataBlockEncoding::AnchoredDiff
                && self.since_restart >= ANCHORED_MIN_RESTART_INTERVAL
                && self.cheap_against_anchor(key));
        if restart {
            self.restarts.push(self.buf.len() as u32);
            self.since_restart = 0;
        }
        if self.encoding == DataBlockEncoding::Diff {
            put_diff_entry(
                &mut self.buf,
                &self.last_key,
                restart,
                false,
                key,
                value,
                tags,
            );
            self.last_key.clear();
            self.last_key.extend_from_slice(key);
            self.since_restart += 1;
            self.entries += 1;
            return;
        }
        if self.encoding == DataBlockEncoding::AnchoredDiff {
            // A restart entry after the first is encoded against the first (the anchor), the
            // others against the entry before them.
            let against = if restart {
                &self.anchor
            } else {
                &self.last_key
            };
            put_diff_entry(&mut self.buf, against, false, true, key, value, tags);
            if self.entries == 0 {
                self.anchor.extend_from_slice(key);
            }
            self.last_key.clear();
            self.last_key.extend_from_slice(key);
            self.since_restart += 1;
            self.entries += 1;
            return;
        }
        let shared = if restart {
            0
        } else {
            self.last_key
                .iter()
                .zip(key)
                .take_while(|(a, b)| a == b)
                .count()
        };
        let unshared = key.get(shared..).unwrap_or_default();
        put_varint32(&mut self.buf, shared as u32);
        put_varint32(&mut self.buf, unshared.len() as u32);
        put_varint32(&mut self.buf, value.len() as u32);
        put_varint32(&mut self.buf, tags.len() as u32);
        self.buf.extend_from_slice(unshared);
        self.buf.extend_from_slice(value);
        self.buf.extend_from_slice(tags);
        self.last_key.truncate(shared);
        self.last_key.extend_from_slice(unshared);
        self.since_restart += 1;
        self.entries += 1;
    }

    /// Whether `key`, encoded against the anchor, shares at most
    /// [`ANCHORED_RESTART_SLACK`] bytes of coordinates fewer than against the last key.
    fn cheap_against_anchor(&self, key: &[u8]) -> bool {
        let coords = |k: &[u8]| -> usize { k.len().saturating_sub(KEY_SUFFIX_LEN) };
        let c = key.get(..coords(key)).unwrap_or_default();
        let shared = |other: &[u8]| {
            other
                .get(..coords(other))
                .unwrap_or_default()
                .iter()
                .zip(c)
                .take_while(|(a, b)| a == b)
                .count()
        };
        shared(&self.anchor) + ANCHORED_RESTART_SLACK >= shared(&self.last_key)
    }

    /// Size of the payload if finished now.
    pub fn estimated_size(&self) -> usize {
        self.buf.len() + 4 * self.restarts.len() + 4
    }

    /// Entries added since the last reset.
    pub fn len(&self) -> usize {
        self.entries
    }

    /// True when nothing was added since the last reset.
    pub fn is_empty(&self) -> bool {
        self.entries == 0
    }

    /// The last key added.
    pub fn last_key(&self) -> &[u8] {
        &self.last_key
    }

    /// Finish the payload and reset the builder for the next block.
    pub fn finish(&mut self) -> Vec<u8> {
        let mut out = std::mem::take(&mut self.buf);
        out.reserve(4 * self.restarts.len() + 4);
        for r in &self.restarts {
            out.extend_from_slice(&r.to_le_bytes());
        }
        out.extend_from_slice(&(self.restarts.len() as u32).to_le_bytes());
        self.restarts.clear();
        self.since_restart = 0;
        self.last_key.clear();
        self.anchor.clear();
        self.entries = 0;
        out
    }
}
