//! Block compression (SPEC.md §4.2): NONE or LZ4 block format, decompression bounded.

use crate::error::{malformed, Malformed};

/// Compression of a stored block. Persisted in every block envelope: never renumber.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum CompressionType {
    /// Stored as is.
    None = 0,
    /// LZ4 block format (no frame), raw length kept in the envelope.
    Lz4 = 1,
}

impl TryFrom<u8> for CompressionType {
    type Error = u8;
    fn try_from(v: u8) -> Result<Self, u8> {
        match v {
            0 => Ok(CompressionType::None),
            1 => Ok(CompressionType::Lz4),
            other => Err(other),
        }
    }
}

impl CompressionType {
    /// Name used in file info, tools and options (`NONE`, `LZ4`).
    pub fn name(self) -> &'static str {
        match self {
            CompressionType::None => "NONE",
            CompressionType::Lz4 => "LZ4",
        }
    }

    /// Parse a name as [`CompressionType::name`] prints it (case-insensitive).
    pub fn from_name(s: &str) -> Option<Self> {
        match s.to_ascii_uppercase().as_str() {
            "NONE" => Some(CompressionType::None),
            "LZ4" => Some(CompressionType::Lz4),
            _ => None,
        }
    }
}

/// Largest raw (uncompressed) block payload a reader accepts: a guard against a lying length
/// making us allocate gigabytes. A single cell larger than this cannot be written either.
pub const MAX_RAW_BLOCK_LEN: u32 = 1 << 30;

/// LZ4 cannot expand data more than ~255x, so a claimed raw length beyond that bound for the
/// stored length is a lie that we refuse before allocating.
pub fn lz4_raw_len_plausible(stored_len: usize, raw_len: u32) -> bool {
    (raw_len as u64) <= (stored_len as u64).saturating_mul(255).saturating_add(16)
}

/// Compress `raw` with `ty` into `out` (cleared first). Returns the type actually used: a block
/// is kept uncompressed when compression saves less than 1/8 of its size (SPEC.md §4.2).
pub fn compress(ty: CompressionType, raw: &[u8], out: &mut Vec<u8>) -> CompressionType {
    out.clear();
    match ty {
        CompressionType::None => CompressionType::None,
        CompressionType::Lz4 => {
            out.resize(lz4_flex::block::get_maximum_output_size(raw.len()), 0);
            match lz4_flex::block::compress_into(raw, out) {
                Ok(n) if n <= raw.len() - raw.len() / 8 => {
                    out.truncate(n);
                    CompressionType::Lz4
                }
                _ => {
                    out.clear();
                    CompressionType::None
                }
            }
        }
    }
}

/// Consecutive data blocks compression failed to shrink by 1/8 before a writer stops trying.
const GATE_FAILURES: u32 = 4;
/// Blocks stored raw untried after the first such run; doubled after each failed retry.
const GATE_FIRST_SKIP: u32 = 8;
/// The most blocks stored raw untried between two retries.
const GATE_MAX_SKIP: u32 = 64;

/// Whether a writer tries to compress its next data block (SPEC.md §4.2).
///
/// Why: incompressible values (random ids, encrypted or already compressed payloads) make
/// every LZ4 attempt a full pass over the block that is then thrown away. On the comparison's
/// random 100-byte values that was a tenth of writing an HFile for a bulk load and 2% of the
/// whole main phase's CPU (flushes and compactions; `perf`, benches/RESULTS.md session 56).
/// After [`GATE_FAILURES`] blocks in a row that did not compress, the next blocks are stored
/// raw without trying: 8, then 16, 32 and at most 64 after each retry that fails too. A block
/// that compresses again ends the skipping. The bytes are those a failed attempt writes (the
/// block raw, NONE in its envelope), so readers see nothing new; the cost is at most
/// [`GATE_MAX_SKIP`] blocks stored raw after the data turns compressible within a file.
#[derive(Debug, Clone)]
pub struct CompressionGate {
    failures: u32,
    skip: u32,
    backoff: u32,
}

impl Default for CompressionGate {
    fn default() -> Self {
        CompressionGate {
            failures: 0,
            skip: 0,
            backoff: GATE_FIRST_SKIP,
        }
    }
}

impl CompressionGate {
    /// The compression to try on the next block: `configured`, or NONE while skipping.
    pub fn choose(&mut self, configured: CompressionType) -> CompressionType {
        if configured == CompressionType::None {
            return configured;
        }
        if self.skip > 0 {
            self.skip -= 1;
            return CompressionType::None;
        }
        configured
    }

    /// Note what the block [`CompressionGate::choose`] was asked for got: `tried` the type
    /// chosen, `used` the type [`compress`] returned.
    pub fn record(&mut self, tried: CompressionType, used: CompressionType) {
        if tried == CompressionType::None {
            return;
        }
        if used != CompressionType::None {
            self.failures = 0;
            self.backoff = GATE_FIRST_SKIP;
            return;
        }
        self.failures += 1;
        if self.failures >= GATE_FAILURES {
            self.skip = self.backoff;
            self.backoff = (self.backoff * 2).min(GATE_MAX_SKIP);
            // One more failure, at the retry after the skip, starts the next skip.
            self.failures = GATE_FAILURES - 1;
        }
    }
}

/// Decompress a stored payload whose envelope claims `raw_len` bytes.
pub fn decompress(ty: CompressionType, stored: &[u8], raw_len: u32) -> Result<Vec<u8>, Malformed> {
    check_raw_len(raw_len)?;
    match ty {
        CompressionType::None => {
            check_uncompressed(stored.len(), raw_len)?;
            Ok(stored.to_vec())
        }
        CompressionType::Lz4 => {
            if !lz4_raw_len_plausible(stored.len(), raw_len) {
                return malformed(format!(
                    "raw length {raw_len} impossible for {} LZ4 bytes",
                    stored.len()
                ));
            }
            // A fresh buffer every time: lz4_flex's advisory RUSTSEC-2026-0041 concerned
            // reused output buffers.
            let mut out = vec![0u8; raw_len as usize];
            match lz4_flex::block::decompress_into(stored, &mut out) {
                Ok(n) if n == raw_len as usize => Ok(out),
                Ok(n) => malformed(format!(
                    "LZ4 payload decompressed to {n} bytes, raw length says {raw_len}"
                )),
                Err(e) => malformed(format!("LZ4 payload does not decompress: {e}")),
            }
        }
    }
}

/// [`decompress`] of the first `payload_len` bytes of `stored`, which it may reuse: an
/// uncompressed payload is `stored` cut to its length, not a copy (a block read from a file
/// is payload then envelope, so the read buffer is the raw block once its envelope is cut
/// off). The same checks and errors as [`decompress`].
pub fn decompress_vec(
    ty: CompressionType,
    mut stored: Vec<u8>,
    payload_len: usize,
    raw_len: u32,
) -> Result<Vec<u8>, Malformed> {
    let Some(payload) = stored.get(..payload_len) else {
        return malformed(format!(
            "payload of {payload_len} bytes in a buffer of {}",
            stored.len()
        ));
    };
    if ty != CompressionType::None {
        return decompress(ty, payload, raw_len);
    }
    check_raw_len(raw_len)?;
    check_uncompressed(payload_len, raw_len)?;
    stored.truncate(payload_len);
    Ok(stored)
}

fn check_raw_len(raw_len: u32) -> Result<(), Malformed> {
    if raw_len > MAX_RAW_BLOCK_LEN {
        return malformed(format!(
            "raw length {raw_len} exceeds the limit {MAX_RAW_BLOCK_LEN}"
        ));
    }
    Ok(())
}

fn check_uncompressed(stored_len: usize, raw_len: u32) -> Result<(), Malformed> {
    if stored_len != raw_len as usize {
        return malformed(format!(
            "uncompressed block stores {stored_len} bytes but its raw length says {raw_len}"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Which of `outcomes` (true: the block compressed) the gate has the writer try.
    fn tried(outcomes: &[bool]) -> Vec<bool> {
        let mut g = CompressionGate::default();
        outcomes
            .iter()
            .map(|&ok| {
                let tried = g.choose(CompressionType::Lz4) == CompressionType::Lz4;
                let used = if tried && ok {
                    CompressionType::Lz4
                } else {
                    CompressionType::None
                };
                let t = if tried {
                    CompressionType::Lz4
                } else {
                    CompressionType::None
                };
                g.record(t, used);
                tried
            })
            .collect()
    }

    /// Blocks tried, as positions.
    fn positions(t: &[bool]) -> Vec<usize> {
        t.iter()
            .enumerate()
            .filter(|(_, &t)| t)
            .map(|(i, _)| i)
            .collect()
    }

    #[test]
    fn the_gate_backs_off_on_incompressible_blocks_and_resets_on_a_success() {
        // Never compressible: 4 tries, then skips of 8, 16, 32, 64, 64, ... with one try
        // after each.
        let t = tried(&[false; 300]);
        assert_eq!(positions(&t), vec![0, 1, 2, 3, 12, 29, 62, 127, 192, 257]);
        // Always compressible: every block tried.
        assert!(tried(&[true; 100]).iter().all(|&t| t));
        // Incompressible, then compressible from block 40: the skip of 32 after the try at
        // 29 runs to 61, the try at 62 succeeds, and every block after it is tried again.
        let mut o = vec![false; 40];
        o.extend([true; 60]);
        let t = tried(&o);
        assert_eq!(positions(&t)[..6], [0, 1, 2, 3, 12, 29]);
        assert!(t[30..62].iter().all(|&t| !t));
        assert!(t[62..].iter().all(|&t| t));
        // A success among failures starts the count again: 3 failures, a success, 3 more
        // failures are all tried.
        let t = tried(&[false, false, false, true, false, false, false]);
        assert!(t.iter().all(|&t| t));
        // A writer not configured to compress never tries.
        let mut g = CompressionGate::default();
        for _ in 0..10 {
            assert_eq!(g.choose(CompressionType::None), CompressionType::None);
            g.record(CompressionType::None, CompressionType::None);
        }
    }

    /// 4 KiB that LZ4 compresses, and its compressed form.
    fn compressible() -> (Vec<u8>, Vec<u8>) {
        let raw: Vec<u8> = b"abcdefgh".iter().cycle().take(4096).copied().collect();
        let mut out = Vec::new();
        assert_eq!(
            compress(CompressionType::Lz4, &raw, &mut out),
            CompressionType::Lz4
        );
        (raw, out)
    }

    #[test]
    fn lz4_round_trip_and_incompressible_fallback() {
        let (raw, mut out) = compressible();
        assert_eq!(decompress(CompressionType::Lz4, &out, 4096).ok(), Some(raw));
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let noise: Vec<u8> = (0..4096)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        assert_eq!(
            compress(CompressionType::Lz4, &noise, &mut out),
            CompressionType::None
        );
    }

    /// The reusing variant answers as the copying one: the same bytes, the same refusals.
    #[test]
    fn decompress_vec_agrees_with_decompress() {
        let (raw, lz) = compressible();
        let tail = [7u8; 10];
        for (ty, payload) in [(CompressionType::None, &raw), (CompressionType::Lz4, &lz)] {
            let stored = [payload.as_slice(), &tail].concat();
            for raw_len in [4096, 4095, 4097, MAX_RAW_BLOCK_LEN + 1] {
                let want = decompress(ty, payload, raw_len);
                let got = decompress_vec(ty, stored.clone(), payload.len(), raw_len);
                assert_eq!(got, want, "{ty:?} raw_len {raw_len}");
            }
        }
        assert!(decompress_vec(CompressionType::None, vec![0; 4], 8, 8).is_err());
    }

    #[test]
    fn lying_raw_length_is_refused_before_allocating() {
        assert!(decompress(CompressionType::Lz4, &[0; 4], u32::MAX).is_err());
        assert!(decompress(CompressionType::Lz4, &[0; 4], 1 << 20).is_err());
        assert!(decompress(CompressionType::None, &[0; 4], 5).is_err());
    }
}
