//! Search fences: byte strings in order, searched by 8-byte words instead of whole
//! comparisons (nothing of this is on disk). The strings' longest shared prefix is kept once;
//! each string is represented by the 8 bytes after it as a big-endian word, zero-padded.
//! A data or index block builds them over its restart rows, a reader over its bloom chunks'
//! first keys.
//!
//! Exactness: two strings with the prefix order as their words do whenever the words differ
//! (a shorter string's zero padding sorts it first, as bytewise order does); equal words fall
//! back to comparing the strings.

use std::cmp::Ordering;

use crate::cell::compare_bytes;

/// The 8 bytes of `bytes` from `at` as a big-endian word, zero-padded.
#[inline]
pub(crate) fn word_after(bytes: &[u8], at: usize) -> u64 {
    let mut w = [0u8; 8];
    for (d, s) in w.iter_mut().zip(bytes.get(at..).unwrap_or_default()) {
        *d = *s;
    }
    u64::from_be_bytes(w)
}

/// The length of the longest prefix `first` shares with every one of `others`.
pub(crate) fn shared_prefix_len<'a>(first: &[u8], others: impl Iterator<Item = &'a [u8]>) -> usize {
    others.fold(first.len(), |n, s| {
        first
            .iter()
            .take(n)
            .zip(s)
            .take_while(|(a, b)| a == b)
            .count()
    })
}

/// Byte strings side by side in one buffer, as fences are built from: a handful of
/// allocations however many strings.
#[derive(Debug, Default)]
pub(crate) struct Rows {
    bytes: Vec<u8>,
    ends: Vec<usize>,
}

impl Rows {
    /// Room for `n` strings' ends.
    pub(crate) fn with_capacity(n: usize) -> Self {
        Rows {
            bytes: Vec::new(),
            ends: Vec::with_capacity(n),
        }
    }

    pub(crate) fn push(&mut self, s: &[u8]) {
        self.bytes.extend_from_slice(s);
        self.ends.push(self.bytes.len());
    }

    /// String `i` (empty past the last).
    pub(crate) fn get(&self, i: usize) -> &[u8] {
        let start = i
            .checked_sub(1)
            .map_or(0, |p| self.ends.get(p).copied().unwrap_or(0));
        self.bytes
            .get(start..self.ends.get(i).copied().unwrap_or(0))
            .unwrap_or_default()
    }

    /// The longest prefix the first `n` strings share, copied out (`None` when there are
    /// no strings).
    pub(crate) fn shared_prefix(&self, n: usize) -> Option<Vec<u8>> {
        let first = self.get(0);
        let shared = shared_prefix_len(first, (1..n).map(|i| self.get(i)));
        first.get(..shared).map(<[u8]>::to_vec)
    }
}

/// Where a target stands against fences with `prefix`.
pub(crate) enum FencePos {
    /// Before every fenced string (it sorts before the shared prefix).
    Before,
    /// After every fenced string.
    After,
    /// It has the prefix; its word.
    Word(u64),
}

/// Locate `target` against fences whose strings share `prefix`.
#[inline]
pub(crate) fn locate(prefix: &[u8], target: &[u8]) -> FencePos {
    let n = prefix.len();
    match compare_bytes(target.get(..n).unwrap_or(target), prefix) {
        // Shorter than the prefix and a prefix of it, or below it at some byte.
        Ordering::Less => FencePos::Before,
        Ordering::Greater => FencePos::After,
        Ordering::Equal => FencePos::Word(word_after(target, n)),
    }
}
