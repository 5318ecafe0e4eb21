//! Small files that hold exactly one record: a table snapshot's descriptor (SPEC.md §17.13)
//! and the feed slots (§16.9).
//!
//! ```text
//! file := record (the manifest's framing, §17.2, with segment 0 and seq 1) and nothing after it
//! ```
//!
//! The framing brings its checksum over the whole payload; a file that is cut, extended or
//! damaged anywhere reads as `Corruption`.

use std::path::Path;

use crate::error::{Error, Result};
use crate::fs::FileSystem;
use crate::wal::record::{self, Decoded};

/// The file's bytes for `payload`.
pub(super) fn encode(payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(record::framed_len(payload.len()));
    record::encode(0, 1, payload, &mut out);
    out
}

/// Offset of the payload in the file, for the offsets of errors found in it.
pub(super) fn payload_at() -> usize {
    record::framed_len(0)
}

/// The payload of `data`, the whole file at `path`; `what` names the file in errors.
pub(super) fn payload<'a>(path: &Path, data: &'a [u8], what: &str) -> Result<&'a [u8]> {
    let bad = |offset: usize, detail: String| Error::Corruption {
        file: path.to_owned(),
        offset: offset as u64,
        what: format!("{what}: {detail}"),
    };
    let r = match record::decode(data, 0) {
        Ok(Decoded::Record(r)) => r,
        Ok(Decoded::End) => return Err(bad(0, "empty".into())),
        Err(e) => return Err(bad(0, e.to_string())),
    };
    if r.seq != 1 || r.len != data.len() {
        return Err(bad(
            r.len,
            format!(
                "one record of seq 1 expected (seq {}, {} bytes after it)",
                r.seq,
                data.len() - r.len
            ),
        ));
    }
    Ok(r.payload)
}

/// The whole file at `path`, or `None` when there is none; `doing` says what for in I/O
/// errors, `what` names the file in corruption errors.
pub(super) fn read(
    fs: &dyn FileSystem,
    path: &Path,
    doing: &'static str,
    what: &str,
) -> Result<Option<Vec<u8>>> {
    let file = match fs.open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::io(path, doing, e)),
    };
    let len = file.len().map_err(|e| Error::io(path, doing, e))?;
    // A length no record can have is refused before anything is allocated.
    let len = usize::try_from(len)
        .ok()
        .filter(|&l| l <= record::framed_len(record::MAX_PAYLOAD as usize))
        .ok_or_else(|| Error::Corruption {
            file: path.to_owned(),
            offset: 0,
            what: format!("{what} of {len} bytes"),
        })?;
    file.read_vec_at(len, 0)
        .map(Some)
        .map_err(|e| Error::io(path, doing, e))
}
