//! Bloom filter decoding and probing.
//!
//! The first input byte picks a mode:
//! - even: the rest is a bloom meta block payload → `BloomMeta::decode`, re-encode round trip,
//!   `chunk_for` on keys taken from the meta block and the input, and `chunk_may_contain` over
//!   the input used as a chunk's bits;
//! - odd: the rest is structured (`arbitrary`) → a key set goes through `build_chunk` and through
//!   `BloomBuilder` with tiny chunks; every key must then test positive (a false negative would
//!   make the engine skip a file that holds the row).
#![no_main]

use arbitrary::{Arbitrary, Unstructured};
use cellar_format::bloom::{
    build_chunk, chunk_may_contain, hash_key, probes_for, BloomBuilder, BloomConfig, BloomMeta,
    BloomType, ChunkMeta, PendingChunk,
};
use cellar_format::BlockHandle;
use libfuzzer_sys::fuzz_target;

#[derive(Debug, Arbitrary)]
struct Keys {
    /// (row, qualifier) pairs; sorted and deduplicated before use.
    keys: Vec<(Vec<u8>, Vec<u8>)>,
    bits_per_key_milli: u16,
    probes: u8,
    bloom_type: u8,
    prefix_len: u8,
    keys_per_chunk: u8,
    /// Arbitrary bits and a hash, probed only for panics.
    junk_bits: Vec<u8>,
    junk_hash: u64,
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    if mode % 2 == 0 {
        decode_meta(rest);
    } else if let Ok(k) = Keys::arbitrary_take_rest(Unstructured::new(rest)) {
        round_trip(k);
    }
});

fn decode_meta(bytes: &[u8]) {
    let Ok(meta) = BloomMeta::decode(bytes) else {
        return;
    };
    assert_eq!(
        BloomMeta::decode(&meta.encode()).as_ref(),
        Ok(&meta),
        "bloom meta round trip"
    );
    let mut probes: Vec<&[u8]> = vec![bytes, &[]];
    for c in &meta.chunks {
        probes.push(&c.first_key);
        probes.push(&c.last_key);
    }
    for key in probes {
        if let Some(i) = meta.chunk_for(key) {
            assert!(
                i < meta.chunks.len(),
                "chunk_for returned an index past the end"
            );
        }
        // The input doubles as a chunk's bits: probing garbage must answer, not panic.
        let _ = chunk_may_contain(bytes, meta.num_probes, hash_key(key));
    }
}

fn round_trip(k: Keys) {
    let _ = chunk_may_contain(&k.junk_bits, k.probes, k.junk_hash);
    let bpk = u32::from(k.bits_per_key_milli);
    let mut keys = k.keys;
    keys.truncate(4096);

    // build_chunk alone: any probe count 0..=30 (as a meta block may state), any density.
    let probes = k.probes % 31;
    let hashes: Vec<u64> = keys.iter().map(|(r, _)| hash_key(r)).collect();
    let bits = build_chunk(&hashes, bpk, probes);
    for &h in &hashes {
        assert!(
            chunk_may_contain(&bits, probes, h),
            "build_chunk false negative"
        );
    }

    // BloomBuilder + BloomMeta::chunk_for, as the writer and reader use them.
    let bloom_type = match k.bloom_type % 3 {
        0 => BloomType::Row,
        1 => BloomType::RowCol,
        _ => BloomType::RowPrefix(u32::from(k.prefix_len.max(1))),
    };
    // Rows are at most u16::MAX bytes in a real file; ROWCOL keys rely on that.
    keys.retain(|(r, _)| r.len() <= usize::from(u16::MAX));
    keys.sort();
    keys.dedup();
    let config = BloomConfig {
        bloom_type,
        bits_per_key_milli: bpk.max(1),
        keys_per_chunk: u32::from(k.keys_per_chunk),
    };
    let Some(mut builder) = BloomBuilder::new(config) else {
        return;
    };
    assert_eq!(builder.num_probes(), probes_for(config.bits_per_key_milli));
    let mut chunks = Vec::new();
    let mut stored = Vec::new();
    for (row, q) in &keys {
        if let Some(c) = builder.add(row, q) {
            keep(c, &mut chunks, &mut stored);
        }
    }
    if let Some(c) = builder.finish() {
        keep(c, &mut chunks, &mut stored);
    }
    let meta = builder.meta(chunks);
    assert_eq!(
        BloomMeta::decode(&meta.encode()).as_ref(),
        Ok(&meta),
        "built bloom meta round trip"
    );
    let mut key = Vec::new();
    for (row, q) in &keys {
        bloom_type.key(row, q, &mut key);
        let Some(i) = meta.chunk_for(&key) else {
            panic!("no chunk covers a key that was added: {key:?}");
        };
        assert!(
            chunk_may_contain(&stored[i], meta.num_probes, hash_key(&key)),
            "bloom false negative for {key:?} in chunk {i}"
        );
    }
}

/// Record a cut chunk as the writer would: its bits "stored" at index `stored.len()`.
fn keep(c: PendingChunk, chunks: &mut Vec<ChunkMeta>, stored: &mut Vec<Vec<u8>>) {
    chunks.push(ChunkMeta {
        first_key: c.first_key,
        last_key: c.last_key,
        handle: BlockHandle {
            offset: stored.len() as u64,
            stored_len: c.bits.len() as u64,
        },
        num_keys: c.num_keys,
    });
    stored.push(c.bits);
}
