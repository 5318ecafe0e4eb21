//! Table snapshots: HBase's `snapshot`, `clone_snapshot`, `restore_snapshot`,
//! `list_snapshots` and `delete_snapshot` (SPEC.md §17.13).
//!
//! ```text
//! {dir}/snapshots/{name}/SNAPSHOT                   the descriptor; the snapshot exists once it does
//! {dir}/snapshots/{name}/SNAPSHOT.part              the descriptor being written
//! {dir}/snapshots/{name}/data/{family}/{n:06}.hfile a hard link to the table's HFile n (a copy
//!                                                   where links are missing)
//!
//! SNAPSHOT := record (manifest framing, §17.2: segment 0, seq 1) whose payload is
//!             format varint32 = 1 | created_ms varint64 | version edit (§17.3)
//! edit     := exactly one put_table (the table as it was: id, name, families and their ids)
//!             | last_seq (the database's at the capture) | one added_file (+ file_crc) per file
//!             | one range_delete per live row-range delete of its families
//! ```
//!
//! Why it is built this way:
//! - HFiles never change, so a snapshot is the table's file list at one instant, its files
//!   hard-linked: it costs no space until compaction or a drop would delete the originals,
//!   and it outlives the table (drop the table, clone it back).
//! - The file list is taken under the manifest's lock after a flush. Flushes install whole
//!   generations, each frozen under the exclusive switch gate, in order, so the version at any
//!   instant holds a prefix of the writes: every batch whole or not at all, across the table's
//!   families. The flush before it puts every write acknowledged before the call in it.
//! - The descriptor reuses the manifest's framing (a checksum over all of it) and edit
//!   encoding (the table's descriptor, every file's metadata and CRC-32C), so a clone or
//!   restore logs the same `added_file` fields a flush would.
//! - Like a backup's `FILES`, the descriptor is written last and renamed into place: a
//!   directory without it is a snapshot cut short, removed by the next snapshot operation.
//!   Deleting removes the descriptor first.
//! - A clone or restore links the files into new families of the database, numbered afresh,
//!   and installs them in one edit with the table entry: all or nothing. A crash before the
//!   edit leaves files and directories of families the version does not have, which the next
//!   open removes (§17.9).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use cellar_format::coding::{put_varint32, put_varint64, Cursor};

use super::backup::{list_or_empty, remove_tree};
use super::checkpoint::link_or_copy;
use super::{files_of, framed, DbInner};
use crate::error::{Error, Result};
use crate::fs::{create_dir_durable, FileSystem};
use crate::manifest::{self, TableEntry, VersionEdit, NUM_LEVELS};
use crate::schema::{validate_name, TableDescriptor, TableName};
use crate::types::{FamilyId, FileMeta, RangeDelete, SeqNo};

/// The directory of table snapshots, in the database directory.
pub const SNAPSHOTS_DIR: &str = "snapshots";
/// A snapshot's descriptor; the snapshot exists once it does.
const DESCRIPTOR: &str = "SNAPSHOT";
/// The descriptor while it is written.
const DESCRIPTOR_PART: &str = "SNAPSHOT.part";
/// The descriptor layout this build writes and reads.
const DESCRIPTOR_FORMAT: u32 = 1;

/// How [`Db::snapshot_table_with`](crate::Db::snapshot_table_with) takes a snapshot.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct TableSnapshotOptions {
    /// HBase's `SKIP_FLUSH`: take the table's files as they are, without flushing its
    /// memstores first. Writes still in memstores are then not in the snapshot (each batch
    /// is in it whole or not at all either way).
    pub skip_flush: bool,
}

impl TableSnapshotOptions {
    /// Skip the flush (see the field).
    pub fn skip_flush(mut self, yes: bool) -> Self {
        self.skip_flush = yes;
        self
    }
}

/// A table snapshot, as listed.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct TableSnapshotInfo {
    /// The snapshot's name.
    pub name: String,
    /// The table it was taken of, with its families as they were then.
    pub table: TableDescriptor,
    /// When it was taken, in ms since the epoch.
    pub created_ms: u64,
    /// The database's last sequence number when the files were taken: the snapshot holds
    /// no write with a larger one.
    pub seq: SeqNo,
    /// HFiles in it.
    pub files: u64,
    /// Their bytes (shared with the table's files while those live: hard links).
    pub bytes: u64,
}

impl TableSnapshotInfo {
    /// Decode and check the bytes of a snapshot's `SNAPSHOT` descriptor (SPEC.md §17.13), as
    /// `name`. Any damage is `Corruption`; never panics (fuzzed).
    pub fn parse_descriptor(name: &str, bytes: &[u8]) -> Result<TableSnapshotInfo> {
        Descriptor::decode(Path::new(DESCRIPTOR), bytes).map(|d| d.info(name))
    }
}

/// A snapshot's descriptor, decoded and checked.
#[derive(Debug, Clone)]
struct Descriptor {
    created_ms: u64,
    table: TableEntry,
    seq: SeqNo,
    files: Vec<FileMeta>,
    /// The families' row-range deletes: the files' cells they mask stay masked in a clone.
    range_deletes: Vec<(FamilyId, RangeDelete)>,
}

impl Descriptor {
    fn info(&self, name: &str) -> TableSnapshotInfo {
        TableSnapshotInfo {
            name: name.to_owned(),
            table: self.table.descriptor.clone(),
            created_ms: self.created_ms,
            seq: self.seq,
            files: self.files.len() as u64,
            bytes: self.files.iter().map(|f| f.size).sum(),
        }
    }

    /// The framed record.
    fn encode(&self) -> Vec<u8> {
        let mut payload = Vec::new();
        put_varint32(&mut payload, DESCRIPTOR_FORMAT);
        put_varint64(&mut payload, self.created_ms);
        payload.extend_from_slice(
            &VersionEdit {
                last_seq: Some(self.seq),
                added_files: self.files.clone(),
                put_tables: vec![self.table.clone()],
                range_deletes: self.range_deletes.clone(),
                ..VersionEdit::default()
            }
            .encode(),
        );
        framed::encode(&payload)
    }

    /// Decode and check a descriptor read whole from `path`.
    fn decode(path: &Path, data: &[u8]) -> Result<Descriptor> {
        let bad = |offset: usize, what: String| Error::Corruption {
            file: path.to_owned(),
            offset: offset as u64,
            what: format!("table snapshot descriptor: {what}"),
        };
        let payload = framed::payload(path, data, "table snapshot descriptor")?;
        let at = framed::payload_at();
        let mut c = Cursor::new(payload);
        let format = c.varint32("format").map_err(|m| bad(at, m.0))?;
        if format != DESCRIPTOR_FORMAT {
            return Err(bad(
                at,
                format!("format {format}, this build reads {DESCRIPTOR_FORMAT}"),
            ));
        }
        let created_ms = c.varint64("created_ms").map_err(|m| bad(at, m.0))?;
        let start = c.position();
        let edit = VersionEdit::decode(&payload[start..])
            .map_err(|e| bad(at + start + e.offset, e.what))?;
        let (Some(seq), [table]) = (edit.last_seq, &edit.put_tables[..]) else {
            return Err(bad(
                at + start,
                "no last_seq, or not exactly one table".into(),
            ));
        };
        let others = VersionEdit {
            last_seq: None,
            added_files: Vec::new(),
            put_tables: Vec::new(),
            range_deletes: Vec::new(),
            ..edit.clone()
        };
        if !others.is_empty() || table.family_ids.len() != table.descriptor.families.len() {
            return Err(bad(at + start, "fields a snapshot does not hold".into()));
        }
        if let Err(e) = table.descriptor.validate() {
            return Err(bad(at + start, e.to_string()));
        }
        for (i, f) in edit.added_files.iter().enumerate() {
            let twice = edit.added_files[..i]
                .iter()
                .any(|g| (g.family, g.number) == (f.family, f.number));
            if twice {
                return Err(bad(at + start, format!("file {} listed twice", f.number)));
            }
            if !table.family_ids.contains(&f.family) || f.level as usize >= NUM_LEVELS {
                return Err(bad(
                    at + start,
                    format!(
                        "file {} of family {} at level {}, not of the table",
                        f.number, f.family, f.level
                    ),
                ));
            }
            if f.max_seq > seq {
                return Err(bad(
                    at + start,
                    format!(
                        "file {} holds seq {} above the snapshot's {seq}",
                        f.number, f.max_seq
                    ),
                ));
            }
        }
        for (family, d) in &edit.range_deletes {
            let ok = table.family_ids.contains(family)
                && d.seq <= seq
                && d.seq > 0
                && (d.stop.is_empty() || d.start < d.stop);
            if !ok {
                return Err(bad(
                    at + start,
                    format!(
                        "range delete {} of family {family} is not the table's",
                        d.seq
                    ),
                ));
            }
        }
        Ok(Descriptor {
            created_ms,
            table: table.clone(),
            seq,
            files: edit.added_files,
            range_deletes: edit.range_deletes,
        })
    }
}

/// Where snapshot `name` keeps HFile `f`.
fn snapshot_file(snap: &Path, f: &FileMeta) -> PathBuf {
    manifest::hfile_path(snap, f.family, f.number)
}

fn read_descriptor(fs: &dyn FileSystem, snap: &Path, name: &str) -> Result<Descriptor> {
    let path = snap.join(DESCRIPTOR);
    let what = "table snapshot descriptor";
    match framed::read(fs, &path, "reading a table snapshot's descriptor", what)? {
        Some(data) => Descriptor::decode(&path, &data),
        None => Err(Error::SnapshotNotFound(name.to_owned())),
    }
}

/// A table snapshot read from a database directory without opening the database
/// ([`read_table_snapshots`]).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct StoredSnapshot {
    /// What [`Db::list_table_snapshots`](crate::Db::list_table_snapshots) says of it.
    pub info: TableSnapshotInfo,
    /// Each HFile: where the snapshot keeps it, and the metadata its descriptor records
    /// (`size`, `entries`, `crc` to check it against).
    pub files: Vec<(PathBuf, FileMeta)>,
}

/// Every directory under `{dir}/snapshots/`, by name, with its snapshot read, or why it could
/// not be: `SnapshotNotFound` for one without a descriptor (cut short; the next snapshot
/// operation removes it), `Corruption` for a damaged descriptor. Only reads; for operator
/// tools (`cellar verify`).
pub fn read_table_snapshots(
    fs: &dyn FileSystem,
    dir: &Path,
) -> Result<Vec<(String, Result<StoredSnapshot>)>> {
    let root = dir.join(SNAPSHOTS_DIR);
    let mut names = list_or_empty(fs, &root)?;
    names.sort();
    Ok(names
        .into_iter()
        .map(|name| {
            let snap = root.join(&name);
            let read = read_descriptor(fs, &snap, &name).map(|d| StoredSnapshot {
                info: d.info(&name),
                files: d
                    .files
                    .iter()
                    .map(|f| (snapshot_file(&snap, f), f.clone()))
                    .collect(),
            });
            (name, read)
        })
        .collect())
}

impl DbInner {
    fn snapshots_root(&self) -> PathBuf {
        self.dir.join(SNAPSHOTS_DIR)
    }

    /// Remove snapshot directories that have no descriptor: cut short while being taken or
    /// deleted. Called under `table_snapshots`, so none is in progress.
    fn remove_incomplete_snapshots(&self) -> Result<()> {
        let fs = &*self.fs;
        let root = self.snapshots_root();
        for name in list_or_empty(fs, &root)? {
            let snap = root.join(&name);
            let complete = fs
                .exists(&snap.join(DESCRIPTOR))
                .map_err(|e| Error::io(&snap, "checking a table snapshot", e))?;
            if !complete {
                tracing::info!(snapshot = %name, "removing a table snapshot cut short");
                remove_tree(fs, &snap)?;
            }
        }
        Ok(())
    }

    pub(super) fn snapshot_table(
        &self,
        table: &TableName,
        name: &str,
        opts: TableSnapshotOptions,
    ) -> Result<TableSnapshotInfo> {
        self.check_poisoned()?;
        validate_name("snapshot", name)?;
        let fs = &*self.fs;
        let _one = self.table_snapshots.lock();
        let span = tracing::info_span!("table_snapshot", table = %table, snapshot = name);
        let _g = span.enter();
        if !self.sv().tables.contains_key(table) {
            return Err(Error::TableNotFound(table.to_string()));
        }
        let root = self.snapshots_root();
        create_dir_durable(fs, &root)
            .map_err(|e| Error::io(&root, "creating the snapshots directory", e))?;
        self.remove_incomplete_snapshots()?;
        let snap = root.join(name);
        if fs
            .exists(&snap)
            .map_err(|e| Error::io(&snap, "checking a table snapshot", e))?
        {
            return Err(Error::SnapshotExists(name.to_owned()));
        }
        if !opts.skip_flush {
            self.flush_and_wait()?;
        }
        // Holding the entries keeps the files out of the graveyard until they are linked.
        let (entry, files, seq, range_deletes) = {
            let m = self.manifest.lock();
            let state = &m.1;
            let entry = state
                .table_by_name(table)
                .cloned()
                .ok_or_else(|| Error::TableNotFound(table.to_string()))?;
            let files = files_of(state, &entry.family_ids);
            // The descriptor's seq bounds every file's (its decoder checks that).
            let seq = files
                .iter()
                .map(|f| f.max_seq)
                .fold(state.last_seq(), u64::max);
            let range_deletes: Vec<(FamilyId, RangeDelete)> = entry
                .family_ids
                .iter()
                .flat_map(|&id| state.range_deletes(id).iter().map(move |d| (id, d.clone())))
                .collect();
            (entry, files, seq, range_deletes)
        };
        let made = self.write_snapshot(&snap, entry, &files, seq, range_deletes);
        if made.is_err() {
            if let Err(e) = remove_tree(fs, &snap) {
                tracing::warn!(error = %e, "could not remove a table snapshot cut short");
            }
        }
        let d = made?;
        tracing::info!(files = d.files.len(), "table snapshot taken");
        Ok(d.info(name))
    }

    fn write_snapshot(
        &self,
        snap: &Path,
        table: TableEntry,
        files: &[Arc<FileMeta>],
        seq: SeqNo,
        range_deletes: Vec<(FamilyId, RangeDelete)>,
    ) -> Result<Descriptor> {
        let fs = &*self.fs;
        create_dir_durable(fs, snap)
            .map_err(|e| Error::io(snap, "creating a table snapshot", e))?;
        let data = snap.join(manifest::DATA_DIR);
        let mut dirs = vec![data.clone()];
        create_dir_durable(fs, &data)
            .map_err(|e| Error::io(&data, "creating a table snapshot", e))?;
        for f in files {
            let dir = manifest::family_dir(snap, f.family);
            if !dirs.contains(&dir) {
                fs.create_dir_all(&dir)
                    .map_err(|e| Error::io(&dir, "creating a table snapshot", e))?;
                dirs.push(dir);
            }
            let from = manifest::hfile_path(&self.dir, f.family, f.number);
            link_or_copy(
                fs,
                &from,
                &snapshot_file(snap, f),
                "linking an HFile into a table snapshot",
            )?;
        }
        // The links' entries, then the family directories' entries, before the descriptor.
        for d in dirs.iter().rev() {
            fs.sync_dir(d)
                .map_err(|e| Error::io(d, "syncing a table snapshot", e))?;
        }
        let d = Descriptor {
            created_ms: self.opts.clock.now_ms(),
            table,
            seq,
            files: files.iter().map(|f| FileMeta::clone(f)).collect(),
            range_deletes,
        };
        let part = snap.join(DESCRIPTOR_PART);
        let file = fs
            .create(&part)
            .map_err(|e| Error::io(&part, "creating a table snapshot's descriptor", e))?;
        file.write_all_at(&d.encode(), 0)
            .and_then(|()| file.sync_data())
            .map_err(|e| Error::io(&part, "writing a table snapshot's descriptor", e))?;
        drop(file);
        crate::kill_point!("table_snapshot.before_rename");
        let path = snap.join(DESCRIPTOR);
        fs.rename(&part, &path)
            .and_then(|()| fs.sync_dir(snap))
            .map_err(|e| Error::io(&path, "installing a table snapshot's descriptor", e))?;
        Ok(d)
    }

    pub(super) fn list_table_snapshots(&self) -> Result<Vec<TableSnapshotInfo>> {
        let mut out = Vec::new();
        for (_, read) in read_table_snapshots(&*self.fs, &self.dir)? {
            match read {
                Ok(s) => out.push(s.info),
                // Cut short: not a snapshot (the next snapshot operation removes it).
                Err(Error::SnapshotNotFound(_)) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(out)
    }

    pub(super) fn table_snapshot_info(&self, name: &str) -> Result<TableSnapshotInfo> {
        validate_name("snapshot", name)?;
        let snap = self.snapshots_root().join(name);
        Ok(read_descriptor(&*self.fs, &snap, name)?.info(name))
    }

    pub(super) fn delete_table_snapshot(&self, name: &str) -> Result<()> {
        validate_name("snapshot", name)?;
        let fs = &*self.fs;
        let _one = self.table_snapshots.lock();
        let snap = self.snapshots_root().join(name);
        let path = snap.join(DESCRIPTOR);
        match fs.exists(&path) {
            Ok(true) => {}
            Ok(false) => return Err(Error::SnapshotNotFound(name.to_owned())),
            Err(e) => return Err(Error::io(&path, "checking a table snapshot", e)),
        }
        // The descriptor goes first, durably: cut short, the rest is an incomplete snapshot.
        fs.remove(&path)
            .and_then(|()| fs.sync_dir(&snap))
            .map_err(|e| Error::io(&path, "removing a table snapshot's descriptor", e))?;
        remove_tree(fs, &snap)?;
        let root = self.snapshots_root();
        fs.sync_dir(&root)
            .map_err(|e| Error::io(&root, "syncing the snapshots directory", e))
    }

    /// `clone_snapshot` (`into` is a new table) or `restore_snapshot` (`into` is `None`: the
    /// snapshot's own table, replaced whole, or created again if it was dropped).
    pub(super) fn materialize_snapshot(&self, name: &str, into: Option<&TableName>) -> Result<()> {
        self.check_poisoned()?;
        validate_name("snapshot", name)?;
        let fs = &*self.fs;
        let _one = self.table_snapshots.lock();
        let snap = self.snapshots_root().join(name);
        let d = read_descriptor(fs, &snap, name)?;
        let target = into.unwrap_or(&d.table.descriptor.name).clone();
        let span = tracing::info_span!("table_snapshot_install", snapshot = name, table = %target);
        let _g = span.enter();
        for f in &d.files {
            let p = snapshot_file(&snap, f);
            let len = fs
                .open(&p)
                .and_then(|h| h.len())
                .map_err(|e| Error::io(&p, "opening a table snapshot's HFile", e))?;
            if len != f.size {
                return Err(Error::Corruption {
                    file: p,
                    offset: len,
                    what: format!(
                        "table snapshot HFile of {len} bytes, its descriptor says {}",
                        f.size
                    ),
                });
            }
        }
        let check = |state: &manifest::ManifestState| -> Result<()> {
            if !state.namespaces().contains(&target.namespace) {
                return Err(Error::NamespaceNotFound(target.namespace.clone()));
            }
            if into.is_some() && state.table_by_name(&target).is_some() {
                return Err(Error::TableExists(target.to_string()));
            }
            let last = state.last_seq().max(self.visibility.read_point());
            if d.seq > last {
                return Err(Error::InvalidArgument(format!(
                    "table snapshot {name} holds writes up to seq {}, above this database's {last}: taken in another database",
                    d.seq
                )));
            }
            Ok(())
        };
        let n = d.table.family_ids.len() as u32;
        let mut linked = Vec::new();
        // Linked under the manifest's lock and the exclusive switch gate: the new families'
        // ids name the files' directories, and an id becomes the table's only with the edit
        // that adds its files (ids below `next_family_id` that no family has are refused as
        // reused, §17.5). Links take microseconds each; writes wait for them.
        let installed = self.admin_edit_with_files(|state| {
            check(state)?;
            let first = state.next_family_id();
            let new_id = |old: u32| -> u32 {
                let i = d
                    .table
                    .family_ids
                    .iter()
                    .position(|&f| f == old)
                    .unwrap_or(0);
                first + i as u32
            };
            let start = state.next_file_number();
            let added = self.link_snapshot_files(&snap, &d, &new_id, start, &mut linked)?;
            let entry = TableEntry {
                id: 0,
                descriptor: TableDescriptor {
                    name: target.clone(),
                    families: d.table.descriptor.families.clone(),
                },
                family_ids: (first..first + n).collect(),
            };
            let mut edit = VersionEdit {
                next_file_number: Some(start + added.len() as u64),
                next_family_id: Some(first + n),
                added_files: added,
                range_deletes: d
                    .range_deletes
                    .iter()
                    .map(|(f, r)| (new_id(*f), r.clone()))
                    .collect(),
                ..VersionEdit::default()
            };
            let retired = match state.table_by_name(&target) {
                Some(old) => {
                    edit.put_tables.push(TableEntry {
                        id: old.id,
                        ..entry
                    });
                    files_of(state, &old.family_ids)
                }
                None => {
                    let id = state.next_table_id();
                    edit.next_table_id = Some(id + 1);
                    edit.put_tables.push(TableEntry { id, ..entry });
                    Vec::new()
                }
            };
            Ok((edit, retired))
        });
        match installed {
            Ok(retired) => {
                self.retire_files(retired);
                tracing::info!(files = d.files.len(), "table snapshot installed");
                Ok(())
            }
            Err(e) => {
                for p in &linked {
                    let _ = fs.remove(p);
                }
                Err(e)
            }
        }
    }

    /// Link the snapshot's files into the new families, numbered from `start`, synced;
    /// `linked` collects every name made, so a failure can remove them.
    fn link_snapshot_files(
        &self,
        snap: &Path,
        d: &Descriptor,
        new_id: &dyn Fn(u32) -> u32,
        start: u64,
        linked: &mut Vec<PathBuf>,
    ) -> Result<Vec<FileMeta>> {
        let fs = &*self.fs;
        let mut dirs = Vec::new();
        let mut added = Vec::new();
        for (number, f) in (start..).zip(&d.files) {
            let family = new_id(f.family);
            let dir = manifest::family_dir(&self.dir, family);
            if !dirs.contains(&dir) {
                fs.create_dir_all(&dir)
                    .map_err(|e| Error::io(&dir, "creating a family directory", e))?;
                dirs.push(dir);
            }
            let to = manifest::hfile_path(&self.dir, family, number);
            linked.push(to.clone());
            link_or_copy(
                fs,
                &snapshot_file(snap, f),
                &to,
                "linking a table snapshot's HFile",
            )?;
            added.push(FileMeta {
                number,
                family,
                ..f.clone()
            });
        }
        dirs.push(self.dir.join(manifest::DATA_DIR));
        for d in &dirs {
            fs.sync_dir(d)
                .map_err(|e| Error::io(d, "syncing a family directory", e))?;
        }
        Ok(added)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::FamilyDescriptor;
    use crate::wal::record;

    fn file(number: u64, family: u32, level: u32) -> FileMeta {
        FileMeta {
            number,
            family,
            level,
            size: 100 + number,
            smallest: b"a".to_vec(),
            largest: b"z".to_vec(),
            min_seq: 1,
            max_seq: 50,
            min_ts: 1,
            max_ts: 2,
            entries: 3,
            deletes: 0,
            created_ms: 7,
            crc: Some(0xdead_beef),
            range_clean: 0,
        }
    }

    fn table() -> TableEntry {
        TableEntry {
            id: 4,
            descriptor: TableDescriptor::new("ns:t")
                .family(FamilyDescriptor::new("a"))
                .family(FamilyDescriptor::new("b").max_versions(3)),
            family_ids: vec![7, 9],
        }
    }

    /// A descriptor's bytes around any edit.
    fn framed(edit: &VersionEdit) -> Vec<u8> {
        let mut payload = Vec::new();
        put_varint32(&mut payload, DESCRIPTOR_FORMAT);
        put_varint64(&mut payload, 1234);
        payload.extend_from_slice(&edit.encode());
        let mut out = Vec::new();
        record::encode(0, 1, &payload, &mut out);
        out
    }

    fn edit(files: Vec<FileMeta>) -> VersionEdit {
        VersionEdit {
            last_seq: Some(100),
            added_files: files,
            put_tables: vec![table()],
            ..VersionEdit::default()
        }
    }

    fn refused(bytes: &[u8]) -> String {
        match Descriptor::decode(Path::new("SNAPSHOT"), bytes) {
            Err(Error::Corruption { what, .. }) => what,
            other => panic!("accepted or not corruption: {other:?}"),
        }
    }

    #[test]
    fn a_descriptor_round_trips() {
        let d = Descriptor {
            created_ms: 1234,
            table: table(),
            seq: 100,
            files: vec![file(3, 7, 0), file(5, 9, 6)],
            range_deletes: Vec::new(),
        };
        let bytes = d.encode();
        assert_eq!(bytes, framed(&edit(d.files.clone())));
        let back = Descriptor::decode(Path::new("SNAPSHOT"), &bytes).unwrap();
        assert_eq!(back.table, d.table);
        assert_eq!(back.files, d.files);
        assert_eq!((back.created_ms, back.seq), (1234, 100));
        let info = TableSnapshotInfo::parse_descriptor("x", &bytes).unwrap();
        assert_eq!((info.files, info.bytes, info.seq), (2, 208, 100));
    }

    #[test]
    fn descriptors_that_no_snapshot_writes_are_refused() {
        let ok = framed(&edit(vec![file(3, 7, 0)]));
        let mut longer = ok.clone();
        longer.push(0);
        assert!(refused(&longer).contains("bytes after it"));
        let mut other = edit(vec![file(3, 7, 0)]);
        other.deleted_files.push((7, 0, 2));
        assert!(refused(&framed(&other)).contains("does not hold"));
        let no_seq = VersionEdit {
            last_seq: None,
            ..edit(vec![])
        };
        assert!(refused(&framed(&no_seq)).contains("no last_seq"));
        let two_tables = VersionEdit {
            put_tables: vec![table(), table()],
            ..edit(vec![])
        };
        assert!(refused(&framed(&two_tables)).contains("exactly one table"));
        assert!(refused(&framed(&edit(vec![file(3, 8, 0)]))).contains("not of the table"));
        assert!(refused(&framed(&edit(vec![file(3, 7, 7)]))).contains("not of the table"));
        let mut newer = file(3, 7, 0);
        newer.max_seq = 101;
        assert!(refused(&framed(&edit(vec![newer]))).contains("above the snapshot"));
        assert!(refused(&framed(&edit(vec![file(3, 7, 0), file(3, 7, 1)]))).contains("twice"));
        let mut bad_family = edit(vec![]);
        bad_family.put_tables[0].descriptor.families[1].max_versions = 0;
        assert!(refused(&framed(&bad_family)).contains("VERSIONS"));
        // Format 2 is a later build's.
        let mut payload = Vec::new();
        put_varint32(&mut payload, 2);
        put_varint64(&mut payload, 0);
        let mut later = Vec::new();
        record::encode(0, 1, &payload, &mut later);
        assert!(refused(&later).contains("format 2"));
        assert!(refused(&[]).contains("empty"));
    }
}
