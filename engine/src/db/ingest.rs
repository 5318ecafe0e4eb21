//! Bulk load: HFiles written outside the engine become part of a family (HBase's
//! `BulkLoadHFiles`, RocksDB's `IngestExternalFile`). SPEC.md §17.12 states the rules; this
//! module is their implementation.
//!
//! A bulk load is one write: unless it is loaded as it is (the last paragraph), each source
//! file is given one fresh sequence number, as a write batch is, and becomes visible whole at
//! once, in the order the files were given. Its cells
//! keep their rows, columns, timestamps, types, values and tags; only their sequence numbers
//! change. Duplicates within a file (cells equal but for the sequence number) keep the one
//! with the highest: the file's later write, as `cellar hfile build` numbers them.
//!
//! The steps, and why they are in this order:
//!
//! 1. Every source is opened (trailer, file info, root index checked) and must name the target
//!    family. The cells are checked as step 4 reads them — every block's checksum, every key
//!    well formed, of the family and above the one before, the count the file info gives — and
//!    any failure there also ends the load with nothing done. (A separate pass of the format
//!    verifier first cost a fifth of a load's time: 0.32 s of 1.49 s for 2M cells.)
//! 2. Compaction is held off the family (`hold_for_ingest`): the placement below reads the
//!    levels, and a task running meanwhile could write an output across the range later.
//! 3. Memstore cells in the sources' rows are flushed first. They are older than the load; a
//!    load placed below a later flush of them would break the rule that a level holds nothing
//!    older than the levels under it in the same rows, and a bottommost compaction could then
//!    drop a marker of the load whose masked puts still sit above.
//! 4. Under the exclusive switch gate — no write between its WAL record and its memstore —
//!    the load takes its sequence numbers from the WAL (`Wal::reserve_seqs`), so they are
//!    newer than every write before and older than every write after. Snapshots taken
//!    before the load sit below its numbers and never see it. The files are rewritten with
//!    the new numbers into the family's directory with the family's block size, encoding,
//!    compression and bloom filter (split at `target_file_size` between rows), synced, and
//!    placed: each file goes to the deepest level whose rows it overlaps nowhere at or above
//!    (L0 if memstore data in its rows arrived after the flush of step 3). One manifest edit
//!    adds all the files and raises `last_seq` past the load; then the super-version is
//!    swapped and the read point passes the load's numbers.
//!
//! Writes wait while step 4 runs: the rewrite is the price of keeping sequence numbers in the
//! cells (the read path needs no per-file override). `Stats::ingest_held_micros` counts it.
//!
//! A load into rows that hold nothing skips the rewrite (`fits_as_is`, SPEC.md §17.12 rule 6):
//! when no file or memstore cell of the family meets the sources' rows, the sources' rows do
//! not meet each other, every cell's sequence number is at or below the read point and no
//! snapshot is live, the cells may keep their own numbers — they read as writes made long ago,
//! which nothing newer in their rows contradicts (nor any row-range delete of the family, which
//! would mask them). Each source is then copied whole into the
//! family's directory (hard-linked with `move_files`) and checked by the whole format verifier
//! while writes go on, and only
//! the manifest edit waits under the gate (which checks the conditions again; if a write or a
//! snapshot came meanwhile, the copies are removed and the load is rewritten). Such files go to
//! the last level. Measured on 2M sorted cells: see benches/RESULTS.md, session 46.

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use cellar_format::cell::compare_keys;
use cellar_format::{HFileReader, KeyRef, ReaderOptions};

use super::flush::{file_meta, NewHFile};
use super::read::table_info;
use super::sv::SuperVersion;
use super::DbInner;
use crate::compaction::picker::{row, Rows};
use crate::error::{Error, Result};
use crate::fs::FormatSource;
use crate::manifest::{self, Levels, VersionEdit, NUM_LEVELS};
use crate::schema::{FamilyDescriptor, TableName};
use crate::types::{FamilyId, FileMeta, FileNumber, SeqNo, LATEST_TIMESTAMP};

/// How [`Table::ingest_with`](crate::Table::ingest_with) treats its sources.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct IngestOptions {
    /// Take the sources over (RocksDB's `move_files`): a source loaded as it is becomes the
    /// family's file by a hard link instead of a copy (a copy where the file system cannot
    /// link it), and every source's name is removed once the load is installed. Default:
    /// sources are only read.
    pub move_files: bool,
}

impl IngestOptions {
    /// Set [`IngestOptions::move_files`].
    pub fn move_files(mut self, yes: bool) -> Self {
        self.move_files = yes;
        self
    }
}

/// What one source file became.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct IngestedFile {
    /// The file given.
    pub source: PathBuf,
    /// The sequence number every cell of it now carries.
    pub seq: SeqNo,
    /// The level its cells went to.
    pub level: u32,
    /// The numbers of the family's HFiles written from it (none for a file without cells).
    pub files: Vec<FileNumber>,
    /// Cells read from the source.
    pub cells: u64,
    /// Cells dropped as duplicates: equal to the one before but for the sequence number.
    pub duplicates: u64,
    /// Bytes of the HFiles written.
    pub bytes: u64,
    /// Loaded as it is (SPEC.md §17.12 rule 6): copied whole, its cells keeping their own
    /// sequence numbers (`seq` is then 0), because its rows held nothing; otherwise rewritten.
    pub as_is: bool,
}

/// What [`Table::ingest`](crate::Table::ingest) did.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct IngestInfo {
    /// One entry per source, in the order given.
    pub files: Vec<IngestedFile>,
    /// How long writes to the database waited for the load (step 4 of the module docs).
    pub writes_held: Duration,
}

/// A checked source.
struct Source {
    path: PathBuf,
    reader: HFileReader<FormatSource>,
    /// First and last row, `None` for a file without cells.
    rows: Option<(Vec<u8>, Vec<u8>)>,
}

impl Source {
    /// Its rows, `None` for a file without cells.
    fn rows(&self) -> Option<Rows<'_>> {
        self.rows.as_ref().map(|(lo, hi)| Rows { lo, hi })
    }
}

/// Releases the family's compaction hold however the load ends.
struct Hold<'a> {
    db: &'a DbInner,
    family: FamilyId,
}

impl Drop for Hold<'_> {
    fn drop(&mut self) {
        self.db.release_ingest_hold(self.family);
        self.db.kick_compaction();
    }
}

/// Completes the load's reserved sequence numbers however the load ends: the read point
/// moves in order, so numbers left open would hold every later write back. After a failure
/// nothing carries them, and completing them shows nothing.
struct Reserved<'a> {
    db: &'a DbInner,
    first: SeqNo,
    n: u64,
}

impl Drop for Reserved<'_> {
    fn drop(&mut self) {
        for s in self.first..self.first + self.n {
            self.db.visibility.complete(s);
        }
    }
}

/// The error of a source that is not a sound HFile.
fn damaged(path: &Path, offset: u64, what: &str) -> Error {
    Error::Corruption {
        file: path.to_path_buf(),
        offset,
        what: format!("refusing to ingest a damaged HFile: {what}"),
    }
}

/// A format error reading a source: damage as [`damaged`], anything else (I/O) as it is.
fn source_error(path: &Path, e: cellar_format::Error) -> Error {
    if e.is_corruption() {
        damaged(path, 0, &e.to_string())
    } else {
        e.into()
    }
}

/// The level a load's file of rows `rows` goes to: the deepest level such that no file at it
/// or above overlaps those rows (levels ≥ 1 stay sorted runs, and nothing older sits above
/// the load); 0 when a memstore holds cells in those rows (`mem_overlap`).
pub(crate) fn ingest_level(levels: Option<&Levels>, rows: Rows<'_>, mem_overlap: bool) -> u32 {
    if mem_overlap {
        return 0;
    }
    let mut target = 0u32;
    for level in 0..NUM_LEVELS {
        let hit = levels
            .and_then(|ls| ls.get(level))
            .is_some_and(|files| files.iter().any(|f| Rows::of(f).overlaps(&rows)));
        if hit {
            break;
        }
        target = level as u32;
    }
    target
}

/// True when a memstore of `family` in `sv`, active or frozen, holds a cell of a row in
/// `rows`.
fn mems_meet(sv: &SuperVersion, family: FamilyId, rows: Rows<'_>) -> bool {
    let target = KeyRef::first_on_row(rows.lo).encode();
    sv.mems.get(&family).is_some_and(|m| {
        std::iter::once(&m.active)
            .chain(m.frozen.iter())
            .any(|mem| {
                mem.key_at_or_after(&target)
                    .is_some_and(|k| row(k) <= rows.hi)
            })
    })
}

impl DbInner {
    /// See [`Table::ingest`](crate::Table::ingest).
    pub(super) fn ingest(
        &self,
        table: &TableName,
        family: &str,
        sources: &[PathBuf],
        opts: IngestOptions,
    ) -> Result<IngestInfo> {
        self.check_poisoned()?;
        if sources.is_empty() {
            return Err(Error::InvalidArgument("ingest: no files given".into()));
        }
        let (fid, desc) = {
            let sv = self.sv();
            let t = table_info(&sv, table)?;
            let f = t.family(family).ok_or_else(|| Error::FamilyNotFound {
                table: table.to_string(),
                family: family.to_owned(),
            })?;
            (f.id, f.descriptor.clone())
        };
        let span = tracing::info_span!("ingest", table = %table, family, files = sources.len());
        let _enter = span.enter();
        let checked = sources
            .iter()
            .map(|p| self.check_source(p, &desc))
            .collect::<Result<Vec<_>>>()?;
        self.hold_for_ingest(fid)?;
        let _hold = Hold {
            db: self,
            family: fid,
        };
        let sv = self.sv();
        let in_mem = checked
            .iter()
            .filter_map(Source::rows)
            .any(|r| mems_meet(&sv, fid, r));
        drop(sv);
        if in_mem {
            self.flush_and_wait()?;
        }
        self.check_poisoned()?;
        let copied = if self.fits_as_is(&checked, fid, &self.sv()) {
            self.copy_as_is(&checked, fid, opts.move_files)?
        } else {
            Vec::new()
        };
        let gate = self.switch.exclusive();
        let held = Instant::now();
        let r = match self.install_as_is(table, &checked, fid, copied) {
            Ok(Some(files)) => Ok(files),
            Ok(None) => self.ingest_locked(table, &checked, fid, &desc),
            Err(e) => Err(e),
        };
        drop(gate);
        let writes_held = held.elapsed();
        self.counters
            .ingest_held_micros
            .fetch_add(writes_held.as_micros() as u64, Ordering::Relaxed);
        let files = r?;
        if opts.move_files {
            for s in sources {
                if let Err(e) = self.fs.remove(s) {
                    tracing::warn!(file = %s.display(), error = %e, "could not remove an ingested source");
                }
            }
        }
        let written: u64 = files.iter().map(|f| f.bytes).sum();
        let outputs: usize = files.iter().map(|f| f.files.len()).sum();
        let cells: u64 = files.iter().map(|f| f.cells - f.duplicates).sum();
        self.counters.ingests.fetch_add(1, Ordering::Relaxed);
        self.counters
            .ingested_files
            .fetch_add(outputs as u64, Ordering::Relaxed);
        self.counters
            .ingested_bytes
            .fetch_add(written, Ordering::Relaxed);
        self.counters
            .ingested_cells
            .fetch_add(cells, Ordering::Relaxed);
        self.update_pressure();
        tracing::info!(
            files = outputs,
            bytes = written,
            cells,
            held_ms = writes_held.as_millis() as u64,
            "ingested"
        );
        Ok(IngestInfo { files, writes_held })
    }

    /// Whether the sources can be loaded as they are (SPEC.md §17.12 rule 6): their rows meet
    /// nothing of the family (no file at any level, no memstore cell) nor each other, every
    /// cell's sequence number is already visible, and no snapshot is live. Then the cells
    /// keep their own sequence numbers and read as writes made long ago.
    fn fits_as_is(&self, sources: &[Source], family: FamilyId, sv: &SuperVersion) -> bool {
        let rows: Vec<Rows<'_>> = sources.iter().filter_map(Source::rows).collect();
        if rows.is_empty() || !self.snapshots.lock().is_empty() {
            return false;
        }
        let read_point = self.visibility.read_point();
        let sound = sources.iter().all(|s| {
            let i = s.reader.info();
            i.max_seq <= read_point && i.max_timestamp != LATEST_TIMESTAMP
        });
        let apart = rows
            .iter()
            .enumerate()
            .all(|(i, a)| rows[i + 1..].iter().all(|b| !a.overlaps(b)));
        let clear = rows.iter().all(|&r| {
            let in_files = sv
                .version
                .levels(family)
                .is_some_and(|ls| ls.iter().flatten().any(|f| Rows::of(f).overlaps(&r)));
            !in_files && !mems_meet(sv, family, r)
        });
        // A row-range delete was written after the cells' own (old) numbers: it would mask
        // them, where the load must read as written after it.
        let undeleted = sv.range_deletes(family).is_empty();
        sound && apart && clear && undeleted
    }

    /// Copy each source with cells into the family's directory as it is, synced, and run the
    /// whole format verifier over the copy (the cells are not read otherwise). Writes go on
    /// meanwhile. Returns the copies, described for the last level.
    fn copy_as_is(
        &self,
        sources: &[Source],
        family: FamilyId,
        link: bool,
    ) -> Result<Vec<(usize, FileMeta)>> {
        let dir = manifest::family_dir(&self.dir, family);
        self.fs
            .create_dir_all(&dir)
            .map_err(|e| Error::io(&dir, "creating a family directory", e))?;
        let mut out: Vec<(usize, FileMeta)> = Vec::new();
        let remove = |out: &[(usize, FileMeta)]| self.remove_files(out.iter().map(|(_, m)| m));
        for (i, s) in sources.iter().enumerate() {
            if s.rows.is_none() {
                continue;
            }
            let number = self.manifest.lock().1.allocate_file_number();
            let path = manifest::hfile_path(&self.dir, family, number);
            let info = s.reader.info();
            let meta = FileMeta {
                number,
                family,
                level: (NUM_LEVELS - 1) as u32,
                size: 0,
                smallest: info.first_key.clone().unwrap_or_default(),
                largest: info.last_key.clone().unwrap_or_default(),
                // Not recorded by the file; 0 keeps every judgement by it conservative.
                min_seq: 0,
                max_seq: info.max_seq,
                min_ts: info.min_timestamp,
                max_ts: info.max_timestamp,
                entries: info.entries,
                deletes: info.deletes(),
                created_ms: info.created_at_ms,
                crc: None,
                range_clean: 0,
            };
            let linked = link && self.fs.hard_link(&s.path, &path).is_ok();
            let copy = if linked {
                super::checkpoint::file_crc(&*self.fs, &path)
            } else {
                super::checkpoint::copy_file(&*self.fs, &s.path, &path)
            };
            let copied = copy.and_then(|c| {
                let file = self
                    .fs
                    .open(&path)
                    .map_err(|e| Error::io(&path, "opening an ingested HFile", e))?;
                let report =
                    cellar_format::verify(&FormatSource(file), &path.display().to_string())?;
                match report.problems.first() {
                    Some(p) => Err(damaged(
                        &s.path,
                        p.offset,
                        &format!(
                            "{} problem(s), first in {:?}: {}",
                            report.problems.len(),
                            p.region,
                            p.what
                        ),
                    )),
                    None => Ok(c),
                }
            });
            match copied {
                Ok((size, crc)) => out.push((
                    i,
                    FileMeta {
                        size,
                        crc: Some(crc),
                        range_clean: 0,
                        ..meta
                    },
                )),
                Err(e) => {
                    let _ = self.fs.remove(&path);
                    remove(&out);
                    return Err(e);
                }
            }
        }
        for d in [dir.as_path(), &self.dir.join(manifest::DATA_DIR)] {
            if let Err(e) = self.fs.sync_dir(d) {
                remove(&out);
                return Err(Error::io(
                    d,
                    "syncing a family directory after an ingest",
                    e,
                ));
            }
        }
        Ok(out)
    }

    /// Under the exclusive switch gate: install the copies of [`DbInner::copy_as_is`] if the
    /// sources still fit as they are (a write or a snapshot may have come since); `None`
    /// (copies removed) if they do not, or there are none, and the load is rewritten instead.
    fn install_as_is(
        &self,
        table: &TableName,
        sources: &[Source],
        family: FamilyId,
        copied: Vec<(usize, FileMeta)>,
    ) -> Result<Option<Vec<IngestedFile>>> {
        if copied.is_empty() {
            return Ok(None);
        }
        let remove =
            |copied: &[(usize, FileMeta)]| self.remove_files(copied.iter().map(|(_, m)| m));
        self.check_poisoned().inspect_err(|_| remove(&copied))?;
        let sv = self.sv();
        if !self.fits_as_is(sources, family, &sv) {
            remove(&copied);
            return Ok(None);
        }
        // Held until readers can see the files: a snapshot taken before would see them
        // appear, as their cells are not newer than it.
        let snapshots = self.snapshots.lock();
        if !snapshots.is_empty() {
            drop(snapshots);
            remove(&copied);
            return Ok(None);
        }

        // Their seqs are at or below the read point, so already within what the WAL or the
        // manifest accounts for; recorded anyway, so that no later open can give them out.
        let files: Vec<FileMeta> = copied.iter().map(|(_, f)| f.clone()).collect();
        let max_seq = files.iter().map(|f| f.max_seq).max().unwrap_or(0);
        self.log_load(table, family, &sv, files, max_seq)?;
        drop(snapshots);
        Ok(Some(
            sources
                .iter()
                .enumerate()
                .map(|(i, s)| {
                    let f = copied.iter().find(|(j, _)| *j == i).map(|(_, f)| f);
                    IngestedFile {
                        source: s.path.clone(),
                        seq: 0,
                        level: f.map_or(0, |f| f.level),
                        files: f.map(|f| f.number).into_iter().collect(),
                        cells: s.reader.info().entries,
                        duplicates: 0,
                        bytes: f.map_or(0, |f| f.size),
                        as_is: true,
                    }
                })
                .collect(),
        ))
    }

    /// Step 1: the file opens, its family the target's.
    fn check_source(&self, path: &Path, desc: &FamilyDescriptor) -> Result<Source> {
        let file = self
            .fs
            .open(path)
            .map_err(|e| Error::io(path, "opening a file to ingest", e))?;
        let name = path.display().to_string();
        let reader = HFileReader::open_with(FormatSource(file), name, ReaderOptions::default())
            .map_err(|e| source_error(path, e))?;
        let info = reader.info();
        if info.family != desc.name.as_bytes() {
            return Err(Error::InvalidArgument(format!(
                "{}: its cells are of family {:?}, not {:?}",
                path.display(),
                String::from_utf8_lossy(&info.family),
                desc.name
            )));
        }
        let rows = match (&info.first_key, &info.last_key) {
            (Some(a), Some(b)) if info.entries > 0 => Some((row(a).to_vec(), row(b).to_vec())),
            _ => None,
        };
        Ok(Source {
            path: path.to_path_buf(),
            reader,
            rows,
        })
    }

    /// Step 4, under the exclusive switch gate.
    fn ingest_locked(
        &self,
        table: &TableName,
        sources: &[Source],
        family: FamilyId,
        desc: &FamilyDescriptor,
    ) -> Result<Vec<IngestedFile>> {
        self.check_poisoned()?;
        let n = sources.len() as u64;
        let first = self.wal.reserve_seqs(n)?;
        let reserved = Reserved { db: self, first, n };
        let mut done: Vec<(IngestedFile, Vec<FileMeta>)> = Vec::new();
        let remove_all = |done: &[(IngestedFile, Vec<FileMeta>)]| {
            self.remove_files(done.iter().flat_map(|(_, ms)| ms))
        };
        for (i, s) in sources.iter().enumerate() {
            match self.rewrite(s, family, desc, first + i as u64) {
                Ok(d) => done.push(d),
                Err(e) => {
                    remove_all(&done);
                    return Err(e);
                }
            }
        }
        let dir = manifest::family_dir(&self.dir, family);
        for d in [dir.as_path(), &self.dir.join(manifest::DATA_DIR)] {
            if let Err(e) = self.fs.sync_dir(d) {
                remove_all(&done);
                return Err(Error::io(
                    d,
                    "syncing a family directory after an ingest",
                    e,
                ));
            }
        }
        let sv = self.sv();
        // Placed one after another: a later file of the load is newer than an earlier one
        // and must not go below it where their rows meet.
        let mut levels: Levels = self
            .manifest
            .lock()
            .1
            .current()
            .levels(family)
            .cloned()
            .unwrap_or_else(|| vec![Vec::new(); NUM_LEVELS]);
        let mut added = Vec::new();
        for (f, metas) in &mut done {
            let Some(rows) = sources
                .iter()
                .find(|s| s.path == f.source)
                .and_then(Source::rows)
            else {
                continue;
            };
            let level = ingest_level(Some(&levels), rows, mems_meet(&sv, family, rows));
            f.level = level;
            for meta in metas.iter_mut() {
                meta.level = level;
                if let Some(l) = levels.get_mut(level as usize) {
                    l.push(Arc::new(meta.clone()));
                }
                added.push(meta.clone());
            }
        }
        self.log_load(table, family, &sv, added, first + n - 1)?;
        drop(reserved);
        Ok(done.into_iter().map(|(f, _)| f).collect())
    }

    /// Log the edit adding a load's `files` (raising `last_seq` to `last_seq` if below) and
    /// swap in a super-version with them. If the family is gone or the edit fails, the files
    /// are removed — unless the manifest is poisoned: the edit may be on disk then, and the
    /// files stay for the next open to judge (the database is poisoned).
    fn log_load(
        &self,
        table: &TableName,
        family: FamilyId,
        sv: &SuperVersion,
        files: Vec<FileMeta>,
        last_seq: SeqNo,
    ) -> Result<()> {
        let mut m = self.manifest.lock();
        let (man, state) = &mut *m;
        if state.family(family).is_none() {
            drop(m);
            self.remove_files(&files);
            return Err(Error::FamilyNotFound {
                table: table.to_string(),
                family: format!("(id {family}, dropped during the load)"),
            });
        }
        let edit = VersionEdit {
            last_seq: Some(last_seq.max(state.last_seq())),
            added_files: files.clone(),
            ..VersionEdit::default()
        };
        if let Err(e) = man.log_and_apply(state, edit) {
            let poison = man.poison_reason().cloned();
            drop(m);
            match poison {
                Some(p) => self.poison(p),
                None => self.remove_files(&files),
            }
            return Err(e);
        }
        *self.sv.write() = Arc::new(SuperVersion::build(state, Some(sv)));
        Ok(())
    }

    /// Delete the family files `files` names (a load's, not yet or never installed).
    fn remove_files<'a>(&self, files: impl IntoIterator<Item = &'a FileMeta>) {
        for m in files {
            let _ = self
                .fs
                .remove(&manifest::hfile_path(&self.dir, m.family, m.number));
        }
    }

    /// Rewrite one source with sequence number `seq`, split at the target file size between
    /// rows; the files are synced and described, at level 0 until placed.
    fn rewrite(
        &self,
        s: &Source,
        family: FamilyId,
        desc: &FamilyDescriptor,
        seq: SeqNo,
    ) -> Result<(IngestedFile, Vec<FileMeta>)> {
        let mut out = IngestedFile {
            source: s.path.clone(),
            seq,
            level: 0,
            files: Vec::new(),
            cells: 0,
            duplicates: 0,
            bytes: 0,
            as_is: false,
        };
        let mut metas: Vec<FileMeta> = Vec::new();
        let mut cur: Option<(FileNumber, NewHFile)> = None;
        let target = self.opts.compaction.target_file_size.max(1);
        let mut prev: Vec<u8> = Vec::new();
        let mut last_row: Vec<u8> = Vec::new();
        let corrupt = |what: String| damaged(&s.path, 0, &what);
        let entries = s.reader.info().entries;
        let result = (|| -> Result<()> {
            let mut it = s.reader.iter();
            let read_err = |e: cellar_format::Error| source_error(&s.path, e);
            it.seek_to_first().map_err(read_err)?;
            while it.valid() {
                let raw = it.key();
                let key = KeyRef::parse(raw).map_err(|m| corrupt(format!("cell key: {m}")))?;
                let n = out.cells;
                out.cells += 1;
                cellar_format::cell::validate_key(&key)
                    .map_err(|m| corrupt(format!("cell {n}: {m}")))?;
                if key.family != desc.name.as_bytes() {
                    return Err(corrupt(format!(
                        "cell {n} is of another family than the file"
                    )));
                }
                if n > 0 && compare_keys(&prev, raw) != std::cmp::Ordering::Less {
                    return Err(corrupt(format!("cell {n} is not above the one before")));
                }
                if key.timestamp == LATEST_TIMESTAMP {
                    return Err(Error::InvalidArgument(format!(
                        "{}: a cell of row {:?} has the LATEST timestamp ({}), which only a \
                         write can resolve; give the file real timestamps",
                        s.path.display(),
                        String::from_utf8_lossy(key.row),
                        LATEST_TIMESTAMP
                    )));
                }
                // Everything but the trailing 8-byte sequence number (SPEC.md §3.1).
                let coords = ..raw.len() - 8;
                let duplicate = n > 0 && prev.get(coords) == raw.get(coords);
                prev.clear();
                prev.extend_from_slice(raw);
                if duplicate {
                    out.duplicates += 1;
                    it.next().map_err(read_err)?;
                    continue;
                }
                let new_row = last_row.as_slice() != key.row;
                let full = cur
                    .as_ref()
                    .is_some_and(|(_, h)| h.writer.bytes_written() >= target);
                if new_row && full {
                    if let Some((number, h)) = cur.take() {
                        metas.push(self.finish_ingested(h, number, family, seq)?);
                    }
                }
                if cur.is_none() {
                    let number = self.manifest.lock().1.allocate_file_number();
                    cur = Some((number, self.create_hfile(family, number, desc, false)?));
                }
                if let Some((_, h)) = cur.as_mut() {
                    let k = KeyRef { seq, ..key };
                    h.writer.append_with_tags(&k, it.value(), it.tags())?;
                }
                if new_row {
                    last_row.clear();
                    last_row.extend_from_slice(key.row);
                }
                it.next().map_err(read_err)?;
            }
            if out.cells != entries {
                return Err(corrupt(format!(
                    "{} cells read, the file info gives {entries}",
                    out.cells
                )));
            }
            if let Some((number, h)) = cur.take() {
                metas.push(self.finish_ingested(h, number, family, seq)?);
            }
            Ok(())
        })();
        if let Err(e) = result {
            if let Some((_, h)) = cur.take() {
                drop(h.writer);
                let _ = self.fs.remove(&h.path);
            }
            self.remove_files(&metas);
            return Err(e);
        }
        out.files = metas.iter().map(|m| m.number).collect();
        out.bytes = metas.iter().map(|m| m.size).sum();
        Ok((out, metas))
    }

    fn finish_ingested(
        &self,
        h: NewHFile,
        number: FileNumber,
        family: FamilyId,
        seq: SeqNo,
    ) -> Result<FileMeta> {
        let NewHFile { path, file, writer } = h;
        let (sink, summary) = match writer.finish() {
            Ok(r) => r,
            Err(e) => {
                let _ = self.fs.remove(&path);
                return Err(e.into());
            }
        };
        if let Err(e) = file.sync_data() {
            let _ = self.fs.remove(&path);
            return Err(Error::io(&path, "syncing an ingested HFile", e));
        }
        Ok(file_meta(number, family, 0, seq, &summary, sink.crc()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cellar_format::cell::CellKey;

    fn levels(files: &[(u32, &str, &str)]) -> Levels {
        let mut ls: Levels = vec![Vec::new(); NUM_LEVELS];
        for (i, &(level, lo, hi)) in files.iter().enumerate() {
            ls[level as usize].push(Arc::new(FileMeta {
                number: i as u64 + 1,
                family: 1,
                level,
                size: 1,
                smallest: CellKey::first_on_row(lo.as_bytes()).encode(),
                largest: CellKey::first_on_row(hi.as_bytes()).encode(),
                min_seq: 1,
                max_seq: 1,
                min_ts: 0,
                max_ts: 0,
                entries: 1,
                deletes: 0,
                created_ms: 0,
                crc: None,
                range_clean: 0,
            }));
        }
        ls
    }

    #[test]
    fn a_load_goes_to_the_deepest_level_clear_above_it() {
        let r = Rows {
            lo: b"m".as_slice(),
            hi: b"p".as_slice(),
        };
        assert_eq!(
            ingest_level(None, r, false),
            6,
            "an empty family: the last level"
        );
        let ls = levels(&[(6, "a", "z")]);
        assert_eq!(ingest_level(Some(&ls), r, false), 5);
        let ls = levels(&[(6, "a", "c"), (6, "q", "z"), (3, "a", "l")]);
        assert_eq!(ingest_level(Some(&ls), r, false), 6, "fits a gap of L6");
        let ls = levels(&[(6, "a", "z"), (2, "o", "o")]);
        assert_eq!(
            ingest_level(Some(&ls), r, false),
            1,
            "above the first overlap"
        );
        let ls = levels(&[(6, "a", "z"), (0, "p", "q")]);
        assert_eq!(
            ingest_level(Some(&ls), r, false),
            0,
            "an L0 overlap keeps it in L0"
        );
        let ls = levels(&[(4, "p", "p")]);
        assert_eq!(
            ingest_level(Some(&ls), r, false),
            3,
            "rows meet at the bound"
        );
        assert_eq!(
            ingest_level(Some(&levels(&[])), r, true),
            0,
            "memstore cells in its rows"
        );
    }
}
