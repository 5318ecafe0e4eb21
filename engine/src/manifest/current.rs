//! `CURRENT`: names the live manifest (SPEC.md §17.1).
//!
//! ```text
//! CURRENT := "MANIFEST-" digits "\n"     (exactly the canonical file name, one newline)
//! ```
//!
//! Installed by write-to-temp-then-rename so a reader sees either the old or the new content,
//! never a mix: create `CURRENT.tmp` (after removing a stale one), write, fdatasync, sync the
//! directory (so the new manifest's entry is durable before the rename can be), rename over
//! `CURRENT`, then sync the directory again so the rename itself survives a power loss (RocksDB
//! PR #10573 lost exactly that sync).

use std::path::Path;

use super::log::{manifest_file_name, parse_manifest_file_name};
use crate::error::{Error, Result};
use crate::fs::FileSystem;

/// Name of the pointer file.
pub const CURRENT: &str = "CURRENT";
/// Name of the temporary file an install writes before renaming it.
pub const CURRENT_TMP: &str = "CURRENT.tmp";

/// Longest CURRENT a reader accepts; anything larger is not a manifest name.
const MAX_CURRENT_LEN: u64 = 64;

/// Make `CURRENT` name manifest `number`, durably.
pub(crate) fn install_current(fs: &dyn FileSystem, dir: &Path, number: u64) -> Result<()> {
    let tmp = dir.join(CURRENT_TMP);
    // A stale temp file is what a crash mid-install leaves; `create` is exclusive.
    match fs.remove(&tmp) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(Error::io(&tmp, "removing stale CURRENT.tmp", e)),
    }
    let content = format!("{}\n", manifest_file_name(number));
    let f = fs
        .create(&tmp)
        .map_err(|e| Error::io(&tmp, "creating CURRENT.tmp", e))?;
    f.write_all_at(content.as_bytes(), 0)
        .map_err(|e| Error::io(&tmp, "writing CURRENT.tmp", e))?;
    f.sync_data()
        .map_err(|e| Error::io(&tmp, "syncing CURRENT.tmp", e))?;
    drop(f);
    // Make the entries of the new manifest (created by the caller) and of CURRENT.tmp durable
    // before the rename. Unsynced entry operations of one directory are not ordered against
    // each other: without this sync a power loss could keep the rename and drop the manifest's
    // creation, leaving CURRENT naming a file that does not exist (LevelDB #189/#195; found by
    // `tests/known_bugs.rs`, bug03, crashing before every file operation of a create).
    fs.sync_dir(dir)
        .map_err(|e| Error::io(dir, "syncing the database directory", e))?;
    crate::kill_point!("current.before_rename");
    let cur = dir.join(CURRENT);
    fs.rename(&tmp, &cur)
        .map_err(|e| Error::io(&cur, "renaming CURRENT.tmp over CURRENT", e))?;
    crate::kill_point!("current.after_rename");
    fs.sync_dir(dir)
        .map_err(|e| Error::io(dir, "syncing the database directory", e))
}

/// The manifest number `CURRENT` names. A missing file is `Io` (NotFound); content that is not
/// exactly one canonical manifest name and a newline is `Corruption`.
pub(crate) fn read_current(fs: &dyn FileSystem, dir: &Path) -> Result<u64> {
    let path = dir.join(CURRENT);
    let f = fs
        .open(&path)
        .map_err(|e| Error::io(&path, "opening CURRENT", e))?;
    let len = f
        .len()
        .map_err(|e| Error::io(&path, "reading CURRENT length", e))?;
    let bad = |what: String| Error::Corruption {
        file: path.clone(),
        offset: 0,
        what,
    };
    if len > MAX_CURRENT_LEN {
        return Err(bad(format!("CURRENT is {len} bytes, too long for a name")));
    }
    let mut buf = vec![0u8; len as usize];
    f.read_exact_at(&mut buf, 0)
        .map_err(|e| Error::io(&path, "reading CURRENT", e))?;
    let text = std::str::from_utf8(&buf).map_err(|_| bad("CURRENT is not UTF-8".into()))?;
    text.strip_suffix('\n')
        .and_then(parse_manifest_file_name)
        .ok_or_else(|| bad(format!("CURRENT does not name a manifest: {text:?}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::RealFs;

    #[test]
    fn install_and_read_back_replacing_a_stale_tmp() {
        let dir = tempfile::tempdir().unwrap();
        let fs = RealFs;
        let stale = fs.create(&dir.path().join(CURRENT_TMP)).unwrap();
        stale.write_all_at(b"junk", 0).unwrap();
        install_current(&fs, dir.path(), 5).unwrap();
        assert_eq!(read_current(&fs, dir.path()).unwrap(), 5);
        assert!(!fs.exists(&dir.path().join(CURRENT_TMP)).unwrap());
        install_current(&fs, dir.path(), 1234567).unwrap();
        assert_eq!(read_current(&fs, dir.path()).unwrap(), 1234567);
    }

    #[test]
    fn bad_content_is_corruption_and_missing_is_io() {
        let dir = tempfile::tempdir().unwrap();
        let fs = RealFs;
        assert!(matches!(
            read_current(&fs, dir.path()),
            Err(Error::Io { .. })
        ));
        for bad in [
            &b""[..],
            b"MANIFEST-000005",
            b"MANIFEST-000005\n\n",
            b"MANIFEST-5\n",
            b"MANIFEST-00000a\n",
            b" MANIFEST-000005\n",
            b"\xff\xfe\n",
            &[b'9'; 100],
        ] {
            let p = dir.path().join(CURRENT);
            let _ = fs.remove(&p);
            fs.create(&p).unwrap().write_all_at(bad, 0).unwrap();
            assert!(
                matches!(read_current(&fs, dir.path()), Err(Error::Corruption { .. })),
                "{bad:?}"
            );
        }
    }
}
