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
