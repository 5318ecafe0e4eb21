//! Incremental backups (SPEC.md §17.11): each backup is a checkpoint whose HFiles live in a
//! store shared by every backup under the same root, and whose every file is listed with its
//! length and CRC-32C, checked again on verify and on restore.
//!
//! ```text
//! {root}/shared/{number:06}_{len}_{crc:08x}.hfile   an HFile's bytes, kept once for all backups
//! {root}/LOCK                                       held while a backup is made, purged,
//!                                                   restored or verified
//! {root}/backup-{id:06}/FILES                       the list (below), written last
//! {root}/backup-{id:06}/MANIFEST-{m}, CURRENT, wal/{segment}   the checkpoint's own files
//! ```
//!
//! `FILES` is text, one item per line:
//! ```text
//! cellar-backup 1
//! id {id}
//! seq {manifest_seq}
//! hfile {path} {len} {crc:08x} {shared name}      path: data/{family}/{n}.hfile in a restore
//! file {path} {len} {crc:08x}                      a file of the backup directory, same path
//! end {crc:08x}                                    CRC-32C of every byte before this line
//! ```
//!
//! Why: an HFile never changes once written and its number is never reused in a database, so
//! a backup copies only the files the previous ones do not have (the length and checksum in
//! the shared name keep two databases backed up under one root apart). A backup exists once
//! its `FILES` does, which is renamed into place after every other byte is synced: a crash
//! leaves a directory without it, which listing ignores and the next backup or purge removes. A
//! restore writes `CURRENT` last and keeps the checkpoint's `CHECKPOINT-INCOMPLETE` marker until
//! then.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::checkpoint::{begin_incomplete, copy_file, end_incomplete, file_crc, Place};
use super::DbInner;
use crate::error::{Error, Result};
use crate::fs::{create_dir_durable, FileSystem, LockGuard, RealFs, SharedFs};
use crate::manifest::{self, CURRENT};
use crate::types::{FileMeta, SeqNo};

const SHARED: &str = "shared";
const FILES: &str = "FILES";
const BACKUP_PREFIX: &str = "backup-";
const HEADER: &str = "cellar-backup 1";
const LOCK: &str = "LOCK";

/// One file of a backup.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct BackupFile {
    /// Its path in a restored database, relative to the database directory.
    pub path: String,
    /// Length in bytes.
    pub len: u64,
    /// CRC-32C of its bytes.
    pub crc: u32,
    /// For an HFile, its name in the shared store; `None` for a file of the backup directory.
    pub shared: Option<String>,
}

/// A backup, as its `FILES` lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct BackupInfo {
    /// Its number, from 1, in the order backups were made under the root.
    pub id: u64,
    /// The highest sequence number of its manifest (its WAL copy may hold later writes).
    pub manifest_seq: SeqNo,
    /// Every file.
    pub files: Vec<BackupFile>,
    /// Bytes this backup added to the shared store when it was made (0 when listed later).
    pub new_shared_bytes: u64,
}

impl BackupInfo {
    /// Bytes of every file of the backup.
    pub fn total_bytes(&self) -> u64 {
        self.files.iter().map(|f| f.len).sum()
    }

    /// The backup's `FILES` text (SPEC.md §17.11).
    pub fn file_list(&self) -> String {
        render_files(self)
    }

    /// Parse a `FILES` text; `Corruption` (naming `FILES`) if it breaks any rule of SPEC.md
    /// §17.11. `new_shared_bytes` is 0: the list does not hold it.
    pub fn parse_file_list(bytes: &[u8]) -> Result<BackupInfo> {
        parse_files(Path::new(FILES), bytes)
    }
}

/// What [`Backups::purge`] removed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct PurgeInfo {
    /// Backups removed, by id.
    pub removed_backups: Vec<u64>,
    /// Shared HFiles no remaining backup lists, removed.
    pub removed_shared_files: u64,
    /// Their bytes.
    pub removed_shared_bytes: u64,
    /// Directories of backups cut short, removed.
    pub removed_incomplete: u64,
}

/// The backups under one root directory: list, verify, restore, purge. Making one is
/// [`Db::backup`](crate::Db::backup).
#[derive(Debug, Clone)]
pub struct Backups {
    fs: SharedFs,
    root: PathBuf,
}

impl Backups {
    /// The backups under `root` on the real file system.
    pub fn open(root: impl AsRef<Path>) -> Backups {
        Backups::with_fs(root, Arc::new(RealFs))
    }

    /// The backups under `root` on `fs`.
    pub fn with_fs(root: impl AsRef<Path>, fs: SharedFs) -> Backups {
        Backups {
            fs,
            root: root.as_ref().to_owned(),
        }
    }

    /// The root directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Ids of the complete backups (with their `FILES`), oldest first.
    pub fn ids(&self) -> Result<Vec<u64>> {
        let mut ids = Vec::new();
        for (id, complete) in self.all_ids()? {
            if complete {
                ids.push(id);
            }
        }
        Ok(ids)
    }

    /// Every backup directory's id, with whether it is complete, oldest first.
    fn all_ids(&self) -> Result<Vec<(u64, bool)>> {
        let mut ids = Vec::new();
        for n in self.names()? {
            let Some(id) = n.strip_prefix(BACKUP_PREFIX).and_then(|i| i.parse().ok()) else {
                continue;
            };
            let list = self.dir(id).join(FILES);
            let complete = self
                .fs
                .exists(&list)
                .map_err(|e| Error::io(&list, "checking a backup", e))?;
            ids.push((id, complete));
        }
        ids.sort_unstable();
        Ok(ids)
    }

    fn names(&self) -> Result<Vec<String>> {
        list_or_empty(&*self.fs, &self.root)
    }

    fn dir(&self, id: u64) -> PathBuf {
        self.root.join(format!("{BACKUP_PREFIX}{id:06}"))
    }

    /// The root's lock, held by whatever writes under the root or reads a backup whole (make,
    /// purge, restore, verify): a purge must not delete what a backup being made has copied
    /// and not yet listed, nor what a restore is reading. `Locked` while another holds it;
    /// `None` when the root does not exist (nothing to protect).
    fn lock(&self) -> Result<Option<Box<dyn LockGuard>>> {
        let exists = self
            .fs
            .exists(&self.root)
            .map_err(|e| Error::io(&self.root, "checking the backup root", e))?;
        if !exists {
            return Ok(None);
        }
        let path = self.root.join(LOCK);
        match self.fs.lock(&path) {
            Ok(g) => Ok(Some(g)),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                Err(Error::Locked(self.root.clone()))
            }
            Err(e) => Err(Error::io(&path, "locking the backup root", e)),
        }
    }

    /// Every complete backup, oldest first, as its `FILES` lists it (nothing else is read).
    pub fn list(&self) -> Result<Vec<BackupInfo>> {
        self.ids()?.into_iter().map(|id| self.info(id)).collect()
    }

    /// The newest complete backup's id.
    pub fn latest(&self) -> Result<u64> {
        self.ids()?
            .last()
            .copied()
            .ok_or_else(|| Error::InvalidArgument(format!("no backup in {}", self.root.display())))
    }

    /// Backup `id` as its `FILES` lists it.
    pub fn info(&self, id: u64) -> Result<BackupInfo> {
        let path = self.dir(id).join(FILES);
        let f = self.fs.open(&path).map_err(|e| {
            if e.kind() == std::io::ErrorKind::NotFound {
                Error::InvalidArgument(format!("no backup {id} in {}", self.root.display()))
            } else {
                Error::io(&path, "opening a backup's file list", e)
            }
        })?;
        let len = f
            .len()
            .map_err(|e| Error::io(&path, "reading a backup's file list", e))?;
        let bytes = f
            .read_vec_at(
                usize::try_from(len).map_err(|_| corrupt(&path, "the file list is too large"))?,
                0,
            )
            .map_err(|e| Error::io(&path, "reading a backup's file list", e))?;
        let info = parse_files(&path, &bytes)?;
        // A list moved from another backup's directory would restore that backup instead.
        if info.id != id {
            return Err(corrupt(
                &path,
                &format!(
                    "the list is backup {}'s, in backup {id}'s directory",
                    info.id
                ),
            ));
        }
        Ok(info)
    }

    /// Read every file of backup `id` and check its length and CRC-32C; `Corruption` names
    /// the first that differs.
    pub fn verify(&self, id: u64) -> Result<BackupInfo> {
        let _lock = self.lock()?;
        let info = self.info(id)?;
        for f in &info.files {
            let from = self.source(id, f);
            let got = file_crc(&*self.fs, &from)?;
            check(&from, f, got)?;
        }
        Ok(info)
    }

    fn source(&self, id: u64, f: &BackupFile) -> PathBuf {
        match &f.shared {
            Some(name) => self.root.join(SHARED).join(name),
            None => self.dir(id).join(&f.path),
        }
    }

    /// Restore backup `id` into `target`, which must not exist: every file is copied and
    /// checked against its length and CRC-32C (`Corruption` on a difference), `CURRENT`
    /// last. The result opens as a database; until it is complete it holds
    /// `CHECKPOINT-INCOMPLETE`, and opening it is refused.
    pub fn restore(&self, id: u64, target: impl AsRef<Path>) -> Result<BackupInfo> {
        let target = target.as_ref();
        let fs = &*self.fs;
        let _lock = self.lock()?;
        let info = self.info(id)?;
        if fs
            .exists(target)
            .map_err(|e| Error::io(target, "checking the restore directory", e))?
        {
            return Err(Error::InvalidArgument(format!(
                "restore directory {} already exists",
                target.display()
            )));
        }
        let marker = begin_incomplete(fs, target)?;
        for d in [super::WAL_DIR, manifest::DATA_DIR] {
            let d = target.join(d);
            create_dir_durable(fs, &d).map_err(|e| Error::io(&d, "creating a directory", e))?;
        }
        let mut current = None;
        let mut dirs = BTreeSet::new();
        for f in &info.files {
            if f.path == CURRENT {
                current = Some(f);
                continue;
            }
            let to = target.join(&f.path);
            if let Some(parent) = to.parent() {
                if dirs.insert(parent.to_owned()) {
                    create_dir_durable(fs, parent)
                        .map_err(|e| Error::io(parent, "creating a directory", e))?;
                }
            }
            let from = self.source(id, f);
            let got = copy_file(fs, &from, &to)?;
            check(&from, f, got)?;
        }
        for d in &dirs {
            fs.sync_dir(d)
                .map_err(|e| Error::io(d, "syncing a restored directory", e))?;
        }
        let Some(cur) = current else {
            return Err(corrupt(
                &self.dir(id).join(FILES),
                "the file list has no CURRENT",
            ));
        };
        let from = self.source(id, cur);
        let got = copy_file(fs, &from, &target.join(CURRENT))?;
        check(&from, cur, got)?;
        end_incomplete(fs, target, &marker)?;
        Ok(info)
    }

    /// Keep the newest `keep` backups: remove the older ones, then every shared HFile no
    /// remaining backup lists, and the directories of backups cut short.
    pub fn purge(&self, keep: usize) -> Result<PurgeInfo> {
        let fs = &*self.fs;
        let _lock = self.lock()?;
        let mut out = PurgeInfo::default();
        for (id, complete) in self.all_ids()? {
            if !complete {
                remove_tree(fs, &self.dir(id))?;
                out.removed_incomplete += 1;
            }
        }
        let ids = self.ids()?;
        let cut = ids.len().saturating_sub(keep);
        for &id in &ids[..cut] {
            // The list first: a purge cut short leaves an incomplete backup, not a damaged one.
            let list = self.dir(id).join(FILES);
            fs.remove(&list)
                .and_then(|()| fs.sync_dir(&self.dir(id)))
                .map_err(|e| Error::io(&list, "removing a backup", e))?;
            remove_tree(fs, &self.dir(id))?;
            out.removed_backups.push(id);
        }
        let mut listed = BTreeSet::new();
        for id in &ids[cut..] {
            for f in self.info(*id)?.files {
                listed.extend(f.shared);
            }
        }
        let shared = self.root.join(SHARED);
        for name in list_or_empty(fs, &shared)? {
            if listed.contains(&name) {
                continue;
            }
            let p = shared.join(&name);
            if let Some(len) = parse_shared_len(&name) {
                out.removed_shared_bytes += len;
            }
            fs.remove(&p)
                .map_err(|e| Error::io(&p, "removing a shared HFile", e))?;
            out.removed_shared_files += 1;
        }
        for d in [&shared, &self.root] {
            if fs.exists(d).unwrap_or(false) {
                fs.sync_dir(d)
                    .map_err(|e| Error::io(d, "syncing the backup root", e))?;
            }
        }
        Ok(out)
    }
}

impl DbInner {
    pub(super) fn backup(&self, root: &Path) -> Result<BackupInfo> {
        let fs = &*self.fs;
        let backups = Backups::with_fs(root, self.fs.clone());
        let shared = root.join(SHARED);
        create_dir_durable(fs, &shared)
            .map_err(|e| Error::io(&shared, "creating the backup root", e))?;
        let _lock = backups.lock()?;
        let id = backups.ids()?.last().map_or(1, |l| l + 1);
        let tmp = backups.dir(id);
        if fs
            .exists(&tmp)
            .map_err(|e| Error::io(&tmp, "checking for a backup cut short", e))?
        {
            remove_tree(fs, &tmp)?;
        }
        let mut files = Vec::new();
        let mut new_shared_bytes = 0;
        let mut put = |f: &FileMeta, from: &Path| -> Result<()> {
            let path = format!(
                "{}/{}/{}",
                manifest::DATA_DIR,
                f.family,
                manifest::hfile_file_name(f.number)
            );
            // The manifest's checksum spares reading a file the store already has; a file
            // from before the manifest recorded one is read for it.
            let (len, crc) = match f.crc {
                Some(crc) => (f.size, crc),
                None => file_crc(fs, from)?,
            };
            let name = format!("{:06}_{len}_{crc:08x}.hfile", f.number);
            let dest = shared.join(&name);
            let have = fs
                .exists(&dest)
                .map_err(|e| Error::io(&dest, "checking the shared store", e))?;
            if !have {
                // Copied under a temporary name and renamed once synced: a shared name
                // always holds the whole file.
                let part = shared.join(format!("{name}.part"));
                let _ = fs.remove(&part);
                let got = copy_file(fs, from, &part)?;
                if got != (len, crc) {
                    let _ = fs.remove(&part);
                    return Err(corrupt(
                        from,
                        &format!(
                            "{} bytes with CRC-32C {:08x}, the manifest records {len} bytes \
                             with {crc:08x}: the live file is damaged",
                            got.0, got.1
                        ),
                    ));
                }
                fs.rename(&part, &dest)
                    .map_err(|e| Error::io(&dest, "installing a shared HFile", e))?;
                new_shared_bytes += len;
            }
            files.push(BackupFile {
                path,
                len,
                crc,
                shared: Some(name),
            });
            Ok(())
        };
        let cp = self.capture(&tmp, Place::With(&mut put))?;
        fs.sync_dir(&shared)
            .map_err(|e| Error::io(&shared, "syncing the shared store", e))?;
        // The checkpoint's own files: its manifest, CURRENT and WAL copies (its empty `data/`
        // is made again by a restore; the marker is gone).
        let mut own = Vec::new();
        for name in fs
            .list(&tmp)
            .map_err(|e| Error::io(&tmp, "listing a backup", e))?
        {
            if name == super::WAL_DIR {
                let wal = tmp.join(&name);
                for seg in fs
                    .list(&wal)
                    .map_err(|e| Error::io(&wal, "listing a backup", e))?
                {
                    own.push(format!("{name}/{seg}"));
                }
            } else if name != manifest::DATA_DIR {
                own.push(name);
            }
        }
        for path in own {
            let (len, crc) = file_crc(fs, &tmp.join(&path))?;
            files.push(BackupFile {
                path,
                len,
                crc,
                shared: None,
            });
        }
        let info = BackupInfo {
            id,
            manifest_seq: cp.manifest_seq,
            files,
            new_shared_bytes,
        };
        let part = tmp.join(format!("{FILES}.part"));
        let f = fs
            .create(&part)
            .map_err(|e| Error::io(&part, "creating a backup's file list", e))?;
        f.write_all_at(render_files(&info).as_bytes(), 0)
            .and_then(|()| f.sync_data())
            .map_err(|e| Error::io(&part, "writing a backup's file list", e))?;
        let list = tmp.join(FILES);
        fs.rename(&part, &list)
            .and_then(|()| fs.sync_dir(&tmp))
            .map_err(|e| Error::io(&list, "installing a backup's file list", e))?;
        tracing::info!(
            id,
            files = info.files.len(),
            new_shared_bytes,
            "backup made"
        );
        Ok(info)
    }
}

fn render_files(info: &BackupInfo) -> String {
    let mut s = format!("{HEADER}\nid {}\nseq {}\n", info.id, info.manifest_seq);
    for f in &info.files {
        match &f.shared {
            Some(name) => writeln!(s, "hfile {} {} {:08x} {name}", f.path, f.len, f.crc),
            None => writeln!(s, "file {} {} {:08x}", f.path, f.len, f.crc),
        }
        .expect("writing to a String cannot fail");
    }
    let crc = crc32c::crc32c(s.as_bytes());
    writeln!(s, "end {crc:08x}").expect("writing to a String cannot fail");
    s
}

fn parse_files(path: &Path, bytes: &[u8]) -> Result<BackupInfo> {
    let text = std::str::from_utf8(bytes).map_err(|_| corrupt(path, "not UTF-8"))?;
    let body_end = text
        .trim_end_matches('\n')
        .rfind('\n')
        .map(|i| i + 1)
        .ok_or_else(|| corrupt(path, "no end line"))?;
    let (body, last) = text.split_at(body_end);
    let want = last
        .trim_end()
        .strip_prefix("end ")
        .and_then(|h| u32::from_str_radix(h, 16).ok())
        .ok_or_else(|| corrupt(path, "the last line is not `end {crc}` (cut short?)"))?;
    if crc32c::crc32c(body.as_bytes()) != want {
        return Err(corrupt(path, "its checksum does not match"));
    }
    let mut lines = body.lines();
    if lines.next() != Some(HEADER) {
        return Err(corrupt(path, "unknown header"));
    }
    let mut num = |key: &str| -> Result<u64> {
        lines
            .next()
            .and_then(|l| l.strip_prefix(key)?.strip_prefix(' ')?.parse().ok())
            .ok_or_else(|| corrupt(path, &format!("no `{key}` line")))
    };
    let id = num("id")?;
    let manifest_seq = num("seq")?;
    let mut files = Vec::new();
    for line in lines {
        let parts: Vec<&str> = line.split(' ').collect();
        let bad = || corrupt(path, &format!("malformed line `{line}`"));
        let (path_s, len, crc, shared) = match parts.as_slice() {
            ["hfile", p, len, crc, name] => (p, len, crc, Some(name.to_string())),
            ["file", p, len, crc] => (p, len, crc, None),
            _ => return Err(bad()),
        };
        // A listed path stays inside the restore directory.
        if path_s.is_empty()
            || path_s.starts_with('/')
            || path_s
                .split('/')
                .any(|c| c.is_empty() || c == "." || c == "..")
            || shared
                .as_deref()
                .is_some_and(|n| n.contains('/') || n.starts_with('.'))
        {
            return Err(bad());
        }
        files.push(BackupFile {
            path: path_s.to_string(),
            len: len.parse().map_err(|_| bad())?,
            crc: u32::from_str_radix(crc, 16).map_err(|_| bad())?,
            shared,
        });
    }
    Ok(BackupInfo {
        id,
        manifest_seq,
        files,
        new_shared_bytes: 0,
    })
}

fn parse_shared_len(name: &str) -> Option<u64> {
    name.split('_').nth(1)?.parse().ok()
}

fn check(from: &Path, f: &BackupFile, (len, crc): (u64, u32)) -> Result<()> {
    if (len, crc) != (f.len, f.crc) {
        return Err(corrupt(
            from,
            &format!(
                "{} bytes with CRC-32C {crc:08x}, the backup lists {} bytes with {:08x}",
                len, f.len, f.crc
            ),
        ));
    }
    Ok(())
}

fn corrupt(path: &Path, what: &str) -> Error {
    Error::Corruption {
        file: path.to_owned(),
        offset: 0,
        what: what.to_owned(),
    }
}

pub(super) fn list_or_empty(fs: &dyn FileSystem, dir: &Path) -> Result<Vec<String>> {
    match fs.list(dir) {
        Ok(n) => Ok(n),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(Error::io(dir, "listing a directory", e)),
    }
}

/// Remove `dir` and everything under it (files are told from directories by trying).
pub(super) fn remove_tree(fs: &dyn FileSystem, dir: &Path) -> Result<()> {
    for name in list_or_empty(fs, dir)? {
        let p = dir.join(&name);
        if fs.remove(&p).is_err() {
            remove_tree(fs, &p)?;
        }
    }
    fs.remove_dir(dir)
        .map_err(|e| Error::io(dir, "removing a directory", e))
}
