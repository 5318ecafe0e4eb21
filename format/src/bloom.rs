//! Bloom filters (SPEC.md §6): a cache-local blocked bloom over xxh3, in chunks.
//!
//! Each chunk's payload is `num_blocks` blocks of 64 bytes (512 bits). A key's 64-bit hash
//! `h = xxh3_64(bloom_key)` picks the block `((h >> 32) * num_blocks) >> 32`; then, starting with
//! `x = h as u32`, each of the `num_probes` probes sets bit `x >> 23` of that block (bit `b` is
//! bit `b % 8` of byte `b / 8`) and steps `x = x * 0x9e3779b9 (mod 2^32)`. One cache line per
//! lookup. The hash is xxh3 with seed 0 over explicitly defined bytes, so it is the same on every
//! platform and build (the `bloomfilter` crate hashes through `std::hash` and is not).
//!
//! Bloom meta block:
//! ```text
//! filter_kind u8 (1) | hash_kind u8 (1) | bloom_type u8 | num_probes u8 | prefix_len u32 LE
//! | bits_per_key_milli u32 LE | total_keys u64 LE | chunk_count u32 LE
//! | chunk* := first_key len-prefixed | last_key len-prefixed | handle varint | num_keys varint32
//! ```

use std::cmp::Ordering;

use xxhash_rust::xxh3::xxh3_64;

use crate::block::BlockHandle;
use crate::coding::{put_varint32, put_varint64, Cursor};
use crate::error::{malformed, Malformed};
use crate::fence::{locate, shared_prefix_len, word_after, FencePos};

/// Which keys a file's bloom filter holds (HBase's BLOOMFILTER family setting).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum BloomType {
    /// No filter.
    None,
    /// The row key.
    #[default]
    Row,
    /// Row and qualifier.
    RowCol,
    /// The first `n` bytes of the row (the whole row when shorter).
    RowPrefix(u32),
}

/// Persisted codes of [`BloomType`]: never renumber.
const BLOOM_NONE: u8 = 0;
const BLOOM_ROW: u8 = 1;
const BLOOM_ROWCOL: u8 = 2;
const BLOOM_ROWPREFIX: u8 = 3;

/// Persisted filter kind: blocked bloom with 512-bit blocks.
pub const FILTER_KIND_BLOCKED_512: u8 = 1;
/// Persisted hash kind: xxh3_64, seed 0.
pub const HASH_KIND_XXH3_64: u8 = 1;

impl BloomType {
    /// Code and prefix length as stored.
    pub fn to_code(self) -> (u8, u32) {
        match self {
            BloomType::None => (BLOOM_NONE, 0),
            BloomType::Row => (BLOOM_ROW, 0),
            BloomType::RowCol => (BLOOM_ROWCOL, 0),
            BloomType::RowPrefix(n) => (BLOOM_ROWPREFIX, n),
        }
    }

    /// Decode [`to_code`](Self::to_code).
    pub fn from_code(code: u8, prefix_len: u32) -> Option<Self> {
        Some(match code {
            BLOOM_NONE => BloomType::None,
            BLOOM_ROW => BloomType::Row,
            BLOOM_ROWCOL => BloomType::RowCol,
            BLOOM_ROWPREFIX if prefix_len > 0 => BloomType::RowPrefix(prefix_len),
            _ => return None,
        })
    }

    /// The name as the family setting and the tools print it (`ROWPREFIX:4`).
    pub fn name(self) -> String {
        match self {
            BloomType::None => "NONE".into(),
            BloomType::Row => "ROW".into(),
            BloomType::RowCol => "ROWCOL".into(),
            BloomType::RowPrefix(n) => format!("ROWPREFIX:{n}"),
        }
    }

    /// Parse [`name`](Self::name), case-insensitive; `rowprefix:N` needs N >= 1.
    pub fn from_name(s: &str) -> Option<Self> {
        let up = s.to_ascii_uppercase();
        match up.as_str() {
            "NONE" => Some(BloomType::None),
            "ROW" => Some(BloomType::Row),
            "ROWCOL" => Some(BloomType::RowCol),
            _ => {
                let n: u32 = up.strip_prefix("ROWPREFIX:")?.parse().ok()?;
                (n > 0).then_some(BloomType::RowPrefix(n))
            }
        }
    }

    /// The bytes a cell contributes to the filter, or `None` for [`BloomType::None`].
    ///
    /// ROWCOL keys are `row_len u16 LE ‖ row ‖ qualifier`; family markers (empty qualifier)
    /// are added like any cell, so a reader looking up `(row, q)` must also probe `(row, "")`.
    pub fn key(self, row: &[u8], qualifier: &[u8], out: &mut Vec<u8>) -> bool {
        out.clear();
        match self {
            BloomType::None => return false,
            BloomType::Row => out.extend_from_slice(row),
            BloomType::RowCol => {
                out.extend_from_slice(&(row.len() as u16).to_le_bytes());
                out.extend_from_slice(row);
                out.extend_from_slice(qualifier);
            }
            BloomType::RowPrefix(n) => {
                out.extend_from_slice(row.get(..n as usize).unwrap_or(row));
            }
        }
        true
    }

    /// Order of bloom keys of this type, matching cell order (so chunks are sorted).
    pub fn compare_keys(self, a: &[u8], b: &[u8]) -> Ordering {
        match self {
            BloomType::RowCol => match (split_rowcol(a), split_rowcol(b)) {
                (Some(x), Some(y)) => x.cmp(&y),
                _ => a.cmp(b),
            },
            _ => a.cmp(b),
        }
    }
}

fn split_rowcol(k: &[u8]) -> Option<(&[u8], &[u8])> {
    let mut c = Cursor::new(k);
    let n = c.u16("row length").ok()? as usize;
    let row = c.take(n, "row").ok()?;
    Some((row, k.get(2 + n..)?))
}

/// Bits per key times 1000 → number of probes (RocksDB's FastLocalBloom choice, which accounts
/// for the blocking penalty).
pub fn probes_for(bits_per_key_milli: u32) -> u8 {
    match bits_per_key_milli {
        0..=2080 => 1,
        2081..=3580 => 2,
        3581..=5100 => 3,
        5101..=6640 => 4,
        6641..=8300 => 5,
        8301..=10070 => 6,
        10071..=11720 => 7,
        11721..=14001 => 8,
        14002..=16050 => 9,
        16051..=18300 => 10,
        18301..=22001 => 11,
        22002..=25501 => 12,
        _ => 13,
    }
}

const BLOCK_BYTES: usize = 64;
const PROBE_STEP: u32 = 0x9e37_79b9;

/// Hash of a bloom key.
#[inline]
pub fn hash_key(key: &[u8]) -> u64 {
    xxh3_64(key)
}

#[inline]
fn block_of(h: u64, num_blocks: usize) -> usize {
    (((h >> 32) * num_blocks as u64) >> 32) as usize
}

/// Build a chunk's bit array from key hashes.
pub fn build_chunk(hashes: &[u64], bits_per_key_milli: u32, num_probes: u8) -> Vec<u8> {
    let bits = (hashes.len() as u64 * u64::from(bits_per_key_milli)).div_ceil(1000);
    let num_blocks = bits.div_ceil(512).max(1) as usize;
    let mut out = vec![0u8; num_blocks * BLOCK_BYTES];
    for &h in hashes {
        let base = block_of(h, num_blocks) * BLOCK_BYTES;
        let mut x = h as u32;
        for _ in 0..num_probes {
            let bit = (x >> 23) as usize;
            if let Some(b) = out.get_mut(base + bit / 8) {
                *b |= 1 << (bit % 8);
            }
            x = x.wrapping_mul(PROBE_STEP);
        }
    }
    out
}

/// Probe a chunk's bit array. An empty or misshapen array answers "maybe" (never a false
/// negative from a structure we cannot interpret; the verifier reports it instead).
#[inline]
pub fn chunk_may_contain(bits: &[u8], num_probes: u8, h: u64) -> bool {
    let num_blocks = bits.len() / BLOCK_BYTES;
    if num_blocks == 0 || bits.len() % BLOCK_BYTES != 0 {
        return true;
    }
    let base = block_of(h, num_blocks) * BLOCK_BYTES;
    let Some(block) = bits.get(base..base + BLOCK_BYTES) else {
        return true;
    };
    let mut x = h as u32;
    for _ in 0..num_probes {
        let bit = (x >> 23) as usize;
        match block.get(bit / 8) {
            Some(b) if b & (1 << (bit % 8)) != 0 => {}
            _ => return false,
        }
        x = x.wrapping_mul(PROBE_STEP);
    }
    true
}

/// Settings of a file's filter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BloomConfig {
    /// What keys go in.
    pub bloom_type: BloomType,
    /// Bits per key × 1000 (10 bits per key is 10000).
    pub bits_per_key_milli: u32,
    /// Distinct keys per chunk before a new chunk starts.
    pub keys_per_chunk: u32,
}

impl Default for BloomConfig {
    fn default() -> Self {
        BloomConfig {
            bloom_type: BloomType::Row,
            bits_per_key_milli: 10_000,
            keys_per_chunk: 128 * 1024,
        }
    }
}

/// One chunk's entry in the meta block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChunkMeta {
    /// First bloom key in the chunk.
    pub first_key: Vec<u8>,
    /// Last bloom key in the chunk.
    pub last_key: Vec<u8>,
    /// Where the chunk is.
    pub handle: BlockHandle,
    /// Distinct keys added.
    pub num_keys: u32,
}

/// The decoded bloom meta block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BloomMeta {
    /// Key type.
    pub bloom_type: BloomType,
    /// Probes per key.
    pub num_probes: u8,
    /// Bits per key × 1000 used when building.
    pub bits_per_key_milli: u32,
    /// Distinct keys over all chunks.
    pub total_keys: u64,
    /// The chunks, in key order.
    pub chunks: Vec<ChunkMeta>,
}

impl BloomMeta {
    /// Encode the meta block payload.
    pub fn encode(&self) -> Vec<u8> {
        let (code, prefix) = self.bloom_type.to_code();
        let mut out = vec![
            FILTER_KIND_BLOCKED_512,
            HASH_KIND_XXH3_64,
            code,
            self.num_probes,
        ];
        out.extend_from_slice(&prefix.to_le_bytes());
        out.extend_from_slice(&self.bits_per_key_milli.to_le_bytes());
        out.extend_from_slice(&self.total_keys.to_le_bytes());
        out.extend_from_slice(&(self.chunks.len() as u32).to_le_bytes());
        for c in &self.chunks {
            put_varint32(&mut out, c.first_key.len() as u32);
            out.extend_from_slice(&c.first_key);
            put_varint32(&mut out, c.last_key.len() as u32);
            out.extend_from_slice(&c.last_key);
            put_varint64(&mut out, c.handle.offset);
            put_varint64(&mut out, c.handle.stored_len);
            put_varint32(&mut out, c.num_keys);
        }
        out
    }

    /// Decode a meta block payload.
    pub fn decode(buf: &[u8]) -> Result<Self, Malformed> {
        let mut c = Cursor::new(buf);
        let kind = c.u8("filter kind")?;
        if kind != FILTER_KIND_BLOCKED_512 {
            return malformed(format!("unknown filter kind {kind}"));
        }
        let hash = c.u8("hash kind")?;
        if hash != HASH_KIND_XXH3_64 {
            return malformed(format!("unknown bloom hash kind {hash}"));
        }
        let code = c.u8("bloom type")?;
        let num_probes = c.u8("probe count")?;
        let prefix = c.u32("row prefix length")?;
        let bloom_type = BloomType::from_code(code, prefix)
            .ok_or_else(|| Malformed(format!("unknown bloom type {code} (prefix {prefix})")))?;
        if bloom_type == BloomType::None {
            return malformed("bloom meta block with bloom type NONE");
        }
        if !(1..=30).contains(&num_probes) {
            return malformed(format!("probe count {num_probes} outside 1..=30"));
        }
        let bits_per_key_milli = c.u32("bits per key")?;
        let total_keys = c.u64("total keys")?;
        let count = c.u32("chunk count")? as usize;
        // Each chunk entry takes at least 5 bytes: refuse counts the buffer cannot hold.
        if count > c.remaining() / 5 {
            return malformed(format!(
                "chunk count {count} does not fit in the meta block"
            ));
        }
        let mut chunks = Vec::with_capacity(count);
        for _ in 0..count {
            chunks.push(ChunkMeta {
                first_key: c.len_prefixed("chunk first key")?.to_vec(),
                last_key: c.len_prefixed("chunk last key")?.to_vec(),
                handle: BlockHandle::decode_varint(&mut c)?,
                num_keys: c.varint32("chunk key count")?,
            });
        }
        if !c.is_empty() {
            return malformed(format!(
                "bloom meta block has {} trailing bytes",
                c.remaining()
            ));
        }
        Ok(BloomMeta {
            bloom_type,
            num_probes,
            bits_per_key_milli,
            total_keys,
            chunks,
        })
    }

    /// The chunk that would hold `key`, if any chunk's range covers it.
    pub fn chunk_for(&self, key: &[u8]) -> Option<usize> {
        let ty = self.bloom_type;
        if ty != BloomType::RowCol {
            // Plain byte order (`compare_keys` for every type but ROWCOL), compared in words
            // rather than through `memcmp`: every Get that reaches a file searches its chunks
            // (the calls were 40% of a missing row's bloom probe, callgrind).
            use crate::cell::compare_bytes;
            let i = self
                .chunks
                .partition_point(|c| compare_bytes(&c.first_key, key).is_le())
                .checked_sub(1)?;
            let c = self.chunks.get(i)?;
            return compare_bytes(key, &c.last_key).is_le().then_some(i);
        }
        let idx = self
            .chunks
            .partition_point(|c| ty.compare_keys(&c.first_key, key) != Ordering::Greater);
        let i = idx.checked_sub(1)?;
        let c = self.chunks.get(i)?;
        (ty.compare_keys(key, &c.last_key) != Ordering::Greater).then_some(i)
    }
}

/// [`BloomMeta::chunk_for`] over search fences (`crate::fence`) of the chunks' first keys,
/// built once when a reader opens the file. A key is compared with a chunk's first key only
/// when their words tie. Every Get that reaches a file searches its chunks,
/// and comparing whole keys was most of a missing row's bloom probe (callgrind).
#[derive(Debug, Clone)]
pub struct ChunkSearch {
    prefix: Vec<u8>,
    words: Vec<u64>,
}

impl ChunkSearch {
    /// Fences for `meta`'s chunks; `None` for a ROWCOL filter (its keys are not in plain byte
    /// order) or fewer than two chunks (nothing to search).
    pub fn new(meta: &BloomMeta) -> Option<Self> {
        if meta.bloom_type == BloomType::RowCol || meta.chunks.len() < 2 {
            return None;
        }
        let first = &meta.chunks.first()?.first_key;
        let shared = shared_prefix_len(first, meta.chunks.iter().skip(1).map(|c| &c.first_key[..]));
        let words = meta
            .chunks
            .iter()
            .map(|c| word_after(&c.first_key, shared))
            .collect();
        Some(ChunkSearch {
            prefix: first.get(..shared)?.to_vec(),
            words,
        })
    }

    /// What [`BloomMeta::chunk_for`] answers for `meta`, the meta these fences were built from.
    pub fn chunk_for(&self, meta: &BloomMeta, key: &[u8]) -> Option<usize> {
        use crate::cell::compare_bytes;
        // Chunks whose first key is at most `key`.
        let at_most = match locate(&self.prefix, key) {
            FencePos::Before => 0,
            FencePos::After => self.words.len(),
            FencePos::Word(t) => {
                let mut i = self.words.partition_point(|&w| w < t);
                // Equal words: the first keys decide, in order.
                while self.words.get(i) == Some(&t)
                    && meta
                        .chunks
                        .get(i)
                        .is_some_and(|c| compare_bytes(&c.first_key, key).is_le())
                {
                    i += 1;
                }
                i
            }
        };
        let i = at_most.checked_sub(1)?;
        let c = meta.chunks.get(i)?;
        compare_bytes(key, &c.last_key).is_le().then_some(i)
    }
}

/// Collects distinct bloom keys and cuts chunks of `keys_per_chunk` keys.
#[derive(Debug)]
pub struct BloomBuilder {
    config: BloomConfig,
    num_probes: u8,
    hashes: Vec<u64>,
    first_key: Vec<u8>,
    last_key: Vec<u8>,
    scratch: Vec<u8>,
    total_keys: u64,
}

/// A finished chunk the writer must store.
#[derive(Debug)]
pub struct PendingChunk {
    /// Bit array.
    pub bits: Vec<u8>,
    /// First bloom key.
    pub first_key: Vec<u8>,
    /// Last bloom key.
    pub last_key: Vec<u8>,
    /// Keys in it.
    pub num_keys: u32,
}

impl BloomBuilder {
    /// A builder for `config`; `None` when the type is NONE.
    pub fn new(config: BloomConfig) -> Option<Self> {
        (config.bloom_type != BloomType::None).then(|| BloomBuilder {
            num_probes: probes_for(config.bits_per_key_milli),
            config,
            hashes: Vec::new(),
            first_key: Vec::new(),
            last_key: Vec::new(),
            scratch: Vec::new(),
            total_keys: 0,
        })
    }

    /// Probes per key.
    pub fn num_probes(&self) -> u8 {
        self.num_probes
    }

    /// Add a cell; returns a full chunk when one is cut. Cells arrive in cell order, so equal
    /// bloom keys are adjacent and deduplicating against the last one suffices.
    pub fn add(&mut self, row: &[u8], qualifier: &[u8]) -> Option<PendingChunk> {
        let mut key = std::mem::take(&mut self.scratch);
        self.config.bloom_type.key(row, qualifier, &mut key);
        let mut cut = None;
        if self.hashes.is_empty() || key != self.last_key {
            if self.hashes.len() >= self.config.keys_per_chunk.max(1) as usize {
                cut = self.cut();
            }
            if self.hashes.is_empty() {
                self.first_key.clone_from(&key);
            }
            self.hashes.push(hash_key(&key));
            self.last_key.clone_from(&key);
            self.total_keys += 1;
        }
        self.scratch = key;
        cut
    }

    fn cut(&mut self) -> Option<PendingChunk> {
        if self.hashes.is_empty() {
            return None;
        }
        let bits = build_chunk(
            &self.hashes,
            self.config.bits_per_key_milli,
            self.num_probes,
        );
        let num_keys = self.hashes.len() as u32;
        self.hashes.clear();
        Some(PendingChunk {
            bits,
            first_key: std::mem::take(&mut self.first_key),
            last_key: self.last_key.clone(),
            num_keys,
        })
    }

    /// The last, partial chunk, if any key is pending.
    pub fn finish(&mut self) -> Option<PendingChunk> {
        self.cut()
    }

    /// The meta block for the chunks stored.
    pub fn meta(&self, chunks: Vec<ChunkMeta>) -> BloomMeta {
        BloomMeta {
            bloom_type: self.config.bloom_type,
            num_probes: self.num_probes,
            bits_per_key_milli: self.config.bits_per_key_milli,
            total_keys: self.total_keys,
            chunks,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use proptest::prelude::*;

    proptest! {
        /// The fences find the chunk a plain search of the first keys does: keys before,
        /// inside and after the shared prefix, equal to a chunk's first or last key, and
        /// chunks whose first keys tie on their 8-byte words.
        #[test]
        fn chunk_search_agrees_with_chunk_for(
            mut bounds in prop::collection::vec(prop::collection::vec(0u8..4, 0..14), 4..24),
            probes in prop::collection::vec(prop::collection::vec(0u8..4, 0..14), 1..40),
            prefix in prop::collection::vec(any::<u8>(), 0..6),
        ) {
            let with_prefix = |k: &Vec<u8>| -> Vec<u8> { prefix.iter().chain(k).copied().collect() };
            let mut keys: Vec<Vec<u8>> = bounds.drain(..).map(|k| with_prefix(&k)).collect();
            keys.sort();
            keys.dedup();
            let chunks: Vec<ChunkMeta> = keys
                .chunks(2)
                .filter(|p| p.len() == 2)
                .map(|p| ChunkMeta {
                    first_key: p[0].clone(),
                    last_key: p[1].clone(),
                    handle: BlockHandle { offset: 0, stored_len: 0 },
                    num_keys: 2,
                })
                .collect();
            let meta = BloomMeta {
                bloom_type: BloomType::Row,
                num_probes: 6,
                bits_per_key_milli: 10_000,
                total_keys: 0,
                chunks,
            };
            let Some(search) = ChunkSearch::new(&meta) else {
                return Ok(());
            };
            let mut targets: Vec<Vec<u8>> = probes.iter().map(with_prefix).collect();
            targets.extend(probes.iter().cloned());
            targets.extend(keys.iter().cloned());
            for t in &targets {
                prop_assert_eq!(search.chunk_for(&meta, t), meta.chunk_for(t), "key {:?}", t);
            }
        }
    }

    #[test]
    fn no_false_negatives_and_fp_rate_near_one_percent() {
        let keys: Vec<Vec<u8>> = (0..100_000u32)
            .map(|i| format!("user{i:08}").into_bytes())
            .collect();
        let hashes: Vec<u64> = keys.iter().map(|k| hash_key(k)).collect();
        let k = probes_for(10_000);
        let bits = build_chunk(&hashes, 10_000, k);
        assert!(hashes.iter().all(|&h| chunk_may_contain(&bits, k, h)));
        let fp = (0..100_000u32)
            .filter(|i| chunk_may_contain(&bits, k, hash_key(format!("miss{i:08}").as_bytes())))
            .count();
        // Blocked bloom at 10 bits/key: about 0.96% expected.
        assert!(fp < 1_500, "false positives {fp} of 100000");
    }

    #[test]
    fn golden_hash_and_bits_are_frozen() {
        // The filter is on disk: its hash and bit positions must never change.
        assert_eq!(hash_key(b"row1"), xxh3_64(b"row1"));
        let bits = build_chunk(&[hash_key(b"row1")], 10_000, 6);
        assert_eq!(bits.len(), 64);
        let set: Vec<usize> = (0..512)
            .filter(|b| bits[b / 8] & (1 << (b % 8)) != 0)
            .collect();
        assert_eq!(set.len(), 6);
        assert!(chunk_may_contain(&bits, 6, hash_key(b"row1")));
    }

    #[test]
    fn bloom_type_names_and_keys() {
        for t in [
            BloomType::None,
            BloomType::Row,
            BloomType::RowCol,
            BloomType::RowPrefix(4),
        ] {
            assert_eq!(BloomType::from_name(&t.name()), Some(t));
        }
        assert_eq!(BloomType::from_name("rowprefix:0"), None);
        let mut k = Vec::new();
        BloomType::RowPrefix(3).key(b"ab", b"q", &mut k);
        assert_eq!(k, b"ab");
        BloomType::RowCol.key(b"ab", b"q", &mut k);
        assert_eq!(k, b"\x02\x00abq");
        assert_eq!(
            BloomType::RowCol.compare_keys(b"\x02\x00abq", b"\x01\x00bq"),
            Ordering::Less
        );
    }

    #[test]
    fn builder_chunks_and_meta_round_trip() {
        let cfg = BloomConfig {
            bloom_type: BloomType::Row,
            bits_per_key_milli: 10_000,
            keys_per_chunk: 10,
        };
        let mut b = BloomBuilder::new(cfg).unwrap();
        let mut chunks = Vec::new();
        for i in 0..35u32 {
            for _ in 0..3 {
                if let Some(c) = b.add(format!("r{i:03}").as_bytes(), b"q") {
                    chunks.push(c);
                }
            }
        }
        chunks.extend(b.finish());
        assert_eq!(
            chunks.iter().map(|c| c.num_keys).collect::<Vec<_>>(),
            vec![10, 10, 10, 5]
        );
        let metas: Vec<ChunkMeta> = chunks
            .iter()
            .enumerate()
            .map(|(i, c)| ChunkMeta {
                first_key: c.first_key.clone(),
                last_key: c.last_key.clone(),
                handle: BlockHandle {
                    offset: i as u64 * 100,
                    stored_len: 64,
                },
                num_keys: c.num_keys,
            })
            .collect();
        let meta = b.meta(metas);
        assert_eq!(meta.total_keys, 35);
        let back = BloomMeta::decode(&meta.encode()).unwrap();
        assert_eq!(back, meta);
        assert_eq!(back.chunk_for(b"r000"), Some(0));
        assert_eq!(back.chunk_for(b"r015"), Some(1));
        assert_eq!(back.chunk_for(b"r034"), Some(3));
        assert_eq!(back.chunk_for(b"r035"), None);
        assert_eq!(back.chunk_for(b"a"), None);
    }
}
