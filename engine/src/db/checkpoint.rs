//! Online checkpoints: a new directory that opens as a database of its own, holding every
//! write acknowledged before the call (SPEC.md §17.10).
//!
//! ```text
//! {target}/data/{family}/{n:06}.hfile   hard links to the live HFiles (copies across devices)
//! {target}/wal/{n:020}.wal2             copies of the WAL segments the manifest still replays
//! {target}/MANIFEST-{m:06}              one record: a snapshot of the captured state
//! {target}/CURRENT                      installed last
//! ```
//!
//! Why this order of steps:
//! 1. Memstores are flushed first. SkipWal writes live only there, and what the flush persists
//!    is what the WAL no longer has to carry, so the copied tail is short.
//! 2. The WAL is synced, so AsyncWal writes still queued are in a segment before it is copied.
//! 3. Under the manifest's mutex, the state is cloned and the WAL segments it replays are copied.
//!    A flush deletes segments only after it has logged its edit under that mutex, so none of
//!    them can go while they are copied. A record the copy cuts in two is a torn tail of the
//!    copy's newest segment, dropped at open as any unacknowledged write is: a batch is in the
//!    checkpoint whole or not at all, across its families.
//! 4. The cloned state holds its files' shared entries, so the graveyard keeps every file it
//!    lists on disk until the links are made, whatever compactions finish meanwhile.
//! 5. HFiles never change once written, so a hard link is as good as a copy, costs no space,
//!    and needs only its directory synced. A copy is fdatasynced.
//! 6. The directory holds a `CHECKPOINT-INCOMPLETE` marker from its creation until `CURRENT`
//!    is installed, the last step. [`Db::open`](crate::Db::open) refuses a directory with the
//!    marker: without it, a checkpoint cut short by a crash or an error has no `CURRENT`, and
//!    an open would create an empty database there and delete the files as obsolete.

use std::path::{Path, PathBuf};
use std::time::Instant;

use super::{DbInner, WAL_DIR};
use crate::error::{Error, Result};
use crate::fs::{create_dir_durable, File, FileSystem};
use crate::manifest::{self, current, log::LogWriter};
use crate::types::{FileMeta, SeqNo};
use crate::wal::list_segments;

/// What [`Db::checkpoint`](crate::Db::checkpoint) made.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct CheckpointInfo {
    /// The checkpoint's directory.
    pub dir: PathBuf,
    /// The highest sequence number in the checkpoint's manifest; its WAL copy may hold later
    /// writes (in flight during the call), which its open replays.
    pub manifest_seq: SeqNo,
    /// HFiles hard-linked.
    pub linked_files: u64,
    /// HFiles copied (the target is on another device, or the file system has no links).
    pub copied_files: u64,
    /// Bytes of the HFiles, linked or copied.
    pub file_bytes: u64,
    /// WAL segments copied.
    pub wal_segments: u64,
    /// Bytes of the WAL segments copied.
    pub wal_bytes: u64,
}

/// A file in a checkpoint directory from its creation until it is complete; a database
/// directory holding it is refused at open.
pub(crate) const INCOMPLETE_MARKER: &str = "CHECKPOINT-INCOMPLETE";

/// Bytes a copy reads and writes at a time.
const COPY_CHUNK: usize = 1 << 20;

/// Where [`DbInner::capture`] puts each live HFile.
pub(super) enum Place<'a> {
    /// `{target}/data/{family}/{n}.hfile`, linked, or copied when links are missing.
    LinkOrCopy,
    /// Handed to the closure (backups copy into their shared store); nothing under `data/`.
    With(&'a mut dyn FnMut(&FileMeta, &Path) -> Result<()>),
}

impl DbInner {
    pub(super) fn checkpoint(&self, target: &Path) -> Result<CheckpointInfo> {
        self.capture(target, Place::LinkOrCopy)
    }

    /// A checkpoint in `target` (see the module docs), with the HFiles placed as `place` says.
    pub(super) fn capture(&self, target: &Path, mut place: Place<'_>) -> Result<CheckpointInfo> {
        self.check_poisoned()?;
        let fs = &*self.fs;
        let started = Instant::now();
        let span = tracing::info_span!("checkpoint", target = %target.display());
        let _g = span.enter();
        match fs.exists(target) {
            Ok(false) => {}
            Ok(true) => {
                return Err(Error::InvalidArgument(format!(
                    "checkpoint directory {} already exists",
                    target.display()
                )))
            }
            Err(e) => return Err(Error::io(target, "checking the checkpoint directory", e)),
        }
        let marker = begin_incomplete(fs, target)?;
        let wal_target = target.join(WAL_DIR);
        let data_target = target.join(manifest::DATA_DIR);
        for d in [&wal_target, &data_target] {
            create_dir_durable(fs, d)
                .map_err(|e| Error::io(d, "creating a checkpoint directory", e))?;
        }
        self.flush_and_wait()?;
        self.wal.sync()?;
        let mut info = CheckpointInfo {
            dir: target.to_owned(),
            manifest_seq: 0,
            linked_files: 0,
            copied_files: 0,
            file_bytes: 0,
            wal_segments: 0,
            wal_bytes: 0,
        };
        let mut state = {
            let m = self.manifest.lock();
            let state = m.1.clone();
            for (num, path) in list_segments(fs, self.wal.dir())? {
                if num < state.log_number() {
                    continue;
                }
                let name = file_name(&path)?;
                info.wal_bytes += copy_file(fs, &path, &wal_target.join(name))?.0;
                info.wal_segments += 1;
            }
            state
        };
        let mut dirs = Vec::new();
        for f in state.current().all_files() {
            let from = manifest::hfile_path(&self.dir, f.family, f.number);
            info.file_bytes += f.size;
            if let Place::With(put) = &mut place {
                put(f, &from)?;
                info.copied_files += 1;
                continue;
            }
            let dir = manifest::family_dir(target, f.family);
            if !dirs.contains(&dir) {
                create_dir_durable(fs, &dir)
                    .map_err(|e| Error::io(&dir, "creating a checkpoint directory", e))?;
                dirs.push(dir);
            }
            let to = manifest::hfile_path(target, f.family, f.number);
            if link_or_copy(fs, &from, &to, "linking an HFile into a checkpoint")? {
                info.linked_files += 1;
            } else {
                info.copied_files += 1;
            }
        }
        for d in dirs.iter().chain([&wal_target, &data_target]) {
            fs.sync_dir(d)
                .map_err(|e| Error::io(d, "syncing a checkpoint directory", e))?;
        }
        // A number no file of the state has: the checkpoint's own next open goes above it.
        let number = state.allocate_file_number();
        LogWriter::create(fs, target, number, &state.snapshot_edit())?;
        current::install_current(fs, target, number)?;
        end_incomplete(fs, target, &marker)?;
        info.manifest_seq = state.last_seq();
        tracing::info!(
            linked = info.linked_files,
            copied = info.copied_files,
            file_bytes = info.file_bytes,
            wal_segments = info.wal_segments,
            wal_bytes = info.wal_bytes,
            ms = started.elapsed().as_millis() as u64,
            "checkpoint made"
        );
        Ok(info)
    }
}

/// Create `target` durably with the [`INCOMPLETE_MARKER`] in it; returns the marker's path.
pub(crate) fn begin_incomplete(fs: &dyn FileSystem, target: &Path) -> Result<PathBuf> {
    create_dir_durable(fs, target)
        .map_err(|e| Error::io(target, "creating the checkpoint directory", e))?;
    let marker = target.join(INCOMPLETE_MARKER);
    if let Err(e) = fs.create(&marker) {
        // Nothing in the directory yet: removed, so no empty database is opened there.
        let _ = fs.remove_dir(target);
        return Err(Error::io(&marker, "creating the checkpoint's marker", e));
    }
    fs.sync_dir(target)
        .map_err(|e| Error::io(target, "syncing the checkpoint directory", e))?;
    Ok(marker)
}

/// Remove the marker [`begin_incomplete`] made, durably: the directory is a database now.
pub(crate) fn end_incomplete(fs: &dyn FileSystem, target: &Path, marker: &Path) -> Result<()> {
    fs.remove(marker)
        .and_then(|()| fs.sync_dir(target))
        .map_err(|e| Error::io(marker, "removing the checkpoint's marker", e))
}

fn file_name(path: &Path) -> Result<&str> {
    path.file_name()
        .and_then(|n| n.to_str())
        .ok_or_else(|| Error::InvalidArgument(format!("unnamed file {}", path.display())))
}

/// Hard-link `from` as `to`, or copy it (fdatasynced) where links are missing (another
/// device, a file system without them); true when linked. HFiles never change once written,
/// so a link is as good as a copy and costs no space. `doing` names the step in errors.
pub(crate) fn link_or_copy(
    fs: &dyn FileSystem,
    from: &Path,
    to: &Path,
    doing: &'static str,
) -> Result<bool> {
    match fs.hard_link(from, to) {
        Ok(()) => Ok(true),
        Err(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::CrossesDevices | std::io::ErrorKind::Unsupported
            ) =>
        {
            copy_file(fs, from, to)?;
            Ok(false)
        }
        Err(e) => Err(Error::io(to, doing, e)),
    }
}

/// Copy `from` to the new file `to` and fdatasync it; returns the bytes copied and their
/// CRC-32C (of the bytes read, which are the bytes written).
pub(crate) fn copy_file(fs: &dyn FileSystem, from: &Path, to: &Path) -> Result<(u64, u32)> {
    let src = open_whole(fs, from)?;
    let dst = fs
        .create(to)
        .map_err(|e| Error::io(to, "creating a file to copy into", e))?;
    let got = read_chunks(&*src, from, |at, chunk| {
        dst.write_all_at(chunk, at)
            .map_err(|e| Error::io(to, "writing a copied file", e))
    })?;
    dst.sync_data()
        .map_err(|e| Error::io(to, "syncing a copied file", e))?;
    Ok(got)
}

/// The length and CRC-32C of the file at `path`.
pub(crate) fn file_crc(fs: &dyn FileSystem, path: &Path) -> Result<(u64, u32)> {
    read_chunks(&*open_whole(fs, path)?, path, |_, _| Ok(()))
}

fn open_whole(fs: &dyn FileSystem, path: &Path) -> Result<std::sync::Arc<dyn File>> {
    fs.open(path)
        .map_err(|e| Error::io(path, "opening a file to read whole", e))
}

/// Read file `f` (at `path`, for errors) from start to end in [`COPY_CHUNK`]s, handing each
/// to `each` with its offset; returns the length and the CRC-32C of the bytes read.
fn read_chunks(
    f: &dyn File,
    path: &Path,
    mut each: impl FnMut(u64, &[u8]) -> Result<()>,
) -> Result<(u64, u32)> {
    let len = f
        .len()
        .map_err(|e| Error::io(path, "reading a file's length", e))?;
    let mut buf = vec![0u8; COPY_CHUNK];
    let (mut at, mut crc) = (0u64, 0u32);
    while at < len {
        let n = usize::try_from(len - at).map_or(COPY_CHUNK, |r| r.min(COPY_CHUNK));
        let chunk = &mut buf[..n];
        f.read_exact_at(chunk, at)
            .map_err(|e| Error::io(path, "reading a file whole", e))?;
        crc = crc32c::crc32c_append(crc, chunk);
        each(at, chunk)?;
        at += n as u64;
    }
    Ok((len, crc))
}
