//! Switching memstores and flushing them to L0 HFiles.
//!
//! A switch (under the exclusive `switch` lock, so no write is between WAL and memstore) rolls
//! the WAL to a new segment — the generation's *boundary* — and freezes every non-empty active
//! memstore into one generation. The flush thread writes each frozen memstore of the oldest
//! generation to an HFile, syncs the files and their directories, logs one manifest edit (files
//! added, `log_number` = boundary, `flushed_seq` per family), swaps in a super-version where
//! the files replace the memstores, and only then deletes the WAL segments before the boundary.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use cellar_format::{BloomConfig, HFileWriter, WriterOptions};

use super::sv::{FamilyMems, SuperVersion};
use super::{DbInner, FrozenGen};
use crate::compaction::purge::{PurgeParams, Purger};
use crate::error::{Error, Poison, Result};
use crate::fs::AppendWriter;
use crate::manifest::{self, VersionEdit};
use crate::memstore::MemStore;
use crate::read::range_index::RangeDeletes;
use crate::types::{CellIter, FileMeta};

/// How long the flush thread waits before retrying a flush that failed for lack of space.
const FLUSH_RETRY_BACKOFF: std::time::Duration = std::time::Duration::from_secs(1);

/// What `write_generation` wrote.
#[derive(Debug)]
struct Generation {
    added: Vec<FileMeta>,
    flushed_seq: Vec<(crate::types::FamilyId, u64)>,
    started: Instant,
    /// The oldest read point the purges were judged at (see `SuperVersion::purge_horizon`).
    purge_horizon: u64,
}

/// How a flush failed.
#[derive(Debug)]
enum FlushFailure {
    /// Before the manifest edit, for lack of space: outputs removed, retry later.
    Retry(Error),
    /// Anything else: the database is poisoned.
    Fatal(Error),
}

impl DbInner {
    /// Ask for a switch; only one thread performs it.
    pub(super) fn request_switch(&self) {
        if self.switch_requested.swap(true, Ordering::AcqRel) {
            return;
        }
        let r = self.switch_memstores(false);
        self.switch_requested.store(false, Ordering::Release);
        if let Err(e) = r {
            self.poison(Poison::from_error("memstore switch failed", &e));
        }
    }

    /// Freeze the active memstores into a generation for the flush thread. Unless `force`,
    /// does nothing when they are below the write buffer size (another thread switched first).
    pub(super) fn switch_memstores(&self, force: bool) -> Result<bool> {
        let _exclusive = self.switch.exclusive();
        let sv = self.sv();
        let (active, _) = sv.memstore_bytes();
        let any = sv.mems.values().any(|m| !m.active.is_empty());
        if !any || (!force && active < self.opts.write_buffer_size) {
            return Ok(false);
        }
        let boundary = match self.wal.roll() {
            Ok(b) => b,
            Err(e) => {
                // The WAL is poisoned now; so is the database, as after a failed append.
                // Otherwise a `flush` that failed here left it accepting `SkipWal` writes
                // (they never reach the WAL) into memstores no flush could ever write out
                // (found by the fault matrix of `testkit::faults`, EIO creating a segment).
                if let Some(p) = self.wal.poison() {
                    self.poison(p);
                }
                return Err(e);
            }
        };
        crate::kill_point!("switch.after_wal_roll");
        // Every unlogged write is in the generation frozen now, which the flush thread drains.
        self.unlogged.store(false, Ordering::Release);
        let mut next = SuperVersion::clone(&sv);
        let mut mems = Vec::new();
        for (&id, m) in &sv.mems {
            if m.active.is_empty() {
                continue;
            }
            mems.push(m.active.clone());
            let mut frozen = vec![m.active.clone()];
            frozen.extend(m.frozen.iter().cloned());
            next.mems.insert(
                id,
                FamilyMems {
                    active: Arc::new(MemStore::new(id)),
                    frozen,
                },
            );
        }
        *self.sv.write() = Arc::new(next);
        let gen = FrozenGen {
            boundary,
            last_seq: self.visibility.read_point(),
            mems,
        };
        tracing::debug!(
            boundary,
            last_seq = gen.last_seq,
            families = gen.mems.len(),
            "memstores switched"
        );
        let mut frozen = self.frozen.lock();
        frozen.push_back(gen);
        self.frozen_gens.store(frozen.len(), Ordering::Release);
        drop(frozen);
        self.flush_cv.notify_all();
        Ok(true)
    }

    /// Switch whatever is in the active memstores and wait until every generation frozen so
    /// far is flushed.
    ///
    /// If a flush fails for lack of space meanwhile, returns `NoSpace` (the flush thread keeps
    /// retrying; the data stays in the memstores and the WAL).
    pub(super) fn flush_and_wait(&self) -> Result<()> {
        self.check_poisoned()?;
        let failures = self.counters.flush_failures.load(Ordering::Acquire);
        self.switch_memstores(true)?;
        let mut g = self.frozen.lock();
        loop {
            if let Some(why) = self.poisoned.lock().clone() {
                return Err(Error::Poisoned(why));
            }
            if g.is_empty() {
                return Ok(());
            }
            self.flush_no_space_since(failures)?;
            self.flush_cv.wait(&mut g);
        }
    }

    /// `NoSpace` if a flush failed for lack of space after the failure count was `since`.
    pub(super) fn flush_no_space_since(&self, since: u64) -> Result<()> {
        if self.counters.flush_failures.load(Ordering::Acquire) > since {
            if let Some((path, doing)) = self.flush_no_space.lock().clone() {
                return Err(Error::NoSpace { path, doing });
            }
        }
        Ok(())
    }

    /// The flush thread: oldest generation first, until shutdown with nothing left.
    pub(super) fn flush_loop(&self) {
        loop {
            let gen = {
                let mut g = self.frozen.lock();
                loop {
                    if self.poisoned.lock().is_some() {
                        return;
                    }
                    if let Some(front) = g.front() {
                        break FrozenGen {
                            boundary: front.boundary,
                            last_seq: front.last_seq,
                            mems: front.mems.clone(),
                        };
                    }
                    if self.shutdown.load(Ordering::SeqCst) {
                        return;
                    }
                    self.flush_cv.wait(&mut g);
                }
            };
            match self.flush_generation(&gen) {
                Ok(()) => {
                    let mut g = self.frozen.lock();
                    g.pop_front();
                    self.frozen_gens.store(g.len(), Ordering::Release);
                    self.flush_cv.notify_all();
                }
                Err(FlushFailure::Retry(e)) => {
                    // A full disk before the manifest edit: nothing references the outputs
                    // (removed), the generation is still in the memstores and the WAL, so the
                    // same flush runs again once space may be back. Not a poison: the device
                    // did nothing wrong, and nothing acknowledged depends on the files.
                    tracing::error!(error = %e, "flush failed for lack of space; will retry");
                    if let Error::NoSpace { path, doing } = &e {
                        *self.flush_no_space.lock() = Some((path.clone(), doing.clone()));
                    } else {
                        *self.flush_no_space.lock() =
                            Some((self.dir.clone(), format!("flushing: {e}")));
                    }
                    self.counters.flush_failures.fetch_add(1, Ordering::AcqRel);
                    let mut g = self.frozen.lock();
                    self.flush_cv.notify_all();
                    if self.shutdown.load(Ordering::SeqCst) {
                        // Closing: the WAL still holds the generation; the next open replays it.
                        return;
                    }
                    self.flush_cv.wait_for(&mut g, FLUSH_RETRY_BACKOFF);
                }
                Err(FlushFailure::Fatal(e)) => {
                    self.poison(Poison::from_error("flush failed", &e));
                    return;
                }
            }
        }
    }

    fn flush_generation(&self, gen: &FrozenGen) -> Result<(), FlushFailure> {
        let mut written = Vec::new();
        let added = match self.write_generation(gen, &mut written) {
            Ok(a) => a,
            Err(e) => {
                for p in &written {
                    let _ = self.fs.remove(p);
                }
                return Err(if e.is_no_space() {
                    FlushFailure::Retry(e)
                } else {
                    FlushFailure::Fatal(e)
                });
            }
        };
        self.install_generation(gen, added)
            .map_err(FlushFailure::Fatal)
    }

    /// Write the generation's HFiles, synced, and sync their directories; `written` collects
    /// every file created, so a failure can remove them.
    fn write_generation(
        &self,
        gen: &FrozenGen,
        written: &mut Vec<std::path::PathBuf>,
    ) -> Result<Generation> {
        let started = Instant::now();
        let span = tracing::info_span!("flush", boundary = gen.boundary, families = gen.mems.len());
        let _enter = span.enter();
        // Every row-range delete at or below this read point is in the super-version taken
        // next (a delete's super-version is installed before its seq becomes visible).
        let deletes_known = self.visibility.read_point();
        let sv = self.sv();
        let mut added = Vec::new();
        let mut flushed_seq = Vec::new();
        let purge_horizon = self.smallest_snapshot();
        // As a compaction's outputs (SPEC.md §17.3 `file_range_clean`): the flush dropped every
        // cell at or below the horizon that a delete at or below both masks (rules 3 and 7),
        // so the range-delete trigger need not read the file for those deletes again.
        let clean = purge_horizon.min(deletes_known);
        for mem in &gen.mems {
            // A family dropped since the switch has nothing to keep.
            let Some(desc) = sv.families.get(&mem.family()) else {
                continue;
            };
            let number = self.manifest.lock().1.allocate_file_number();
            written.push(manifest::hfile_path(&self.dir, mem.family(), number));
            let deletes = sv.range_deletes(mem.family());
            let mut meta =
                self.write_hfile(mem, desc, &deletes, number, gen.last_seq, purge_horizon)?;
            if let Some(m) = meta.as_mut() {
                if super::compact::applies_range_deletes(desc) && m.max_seq <= clean {
                    m.range_clean = clean;
                }
            }
            flushed_seq.push((mem.family(), gen.last_seq));
            added.extend(meta);
        }
        let mut dirs: Vec<_> = added
            .iter()
            .map(|m| manifest::family_dir(&self.dir, m.family))
            .collect();
        dirs.push(self.dir.join(manifest::DATA_DIR));
        dirs.dedup();
        for d in &dirs {
            self.fs
                .sync_dir(d)
                .map_err(|e| Error::io(d, "syncing a family directory after flush", e))?;
        }
        crate::kill_point!("flush.after_sync");
        Ok(Generation {
            added,
            flushed_seq,
            started,
            purge_horizon,
        })
    }

    /// Log the flush's manifest edit, swap the files in for the memstores, then delete the WAL
    /// segments the generation covered.
    fn install_generation(&self, gen: &FrozenGen, written: Generation) -> Result<()> {
        let Generation {
            added,
            mut flushed_seq,
            started,
            purge_horizon,
        } = written;
        let (bytes, files, orphans) = {
            let _exclusive = self.switch.exclusive();
            let mut m = self.manifest.lock();
            let (man, state) = &mut *m;
            // A family dropped (with its table, or altered away) after its file was written
            // has no place in the version: the edit would be refused and the database
            // poisoned. Its file is deleted once the edit is logged; the rest installs.
            let (added, orphans): (Vec<FileMeta>, Vec<FileMeta>) = added
                .into_iter()
                .partition(|f| state.family(f.family).is_some());
            flushed_seq.retain(|&(family, _)| state.family(family).is_some());
            let bytes: u64 = added.iter().map(|m| m.size).sum();
            let files = added.len() as u64;
            // A bulk load (db/ingest.rs) committed after this generation froze has raised
            // `last_seq` past the generation's: the edit must not lower it.
            let edit = VersionEdit {
                log_number: Some(gen.boundary),
                last_seq: Some(gen.last_seq.max(state.last_seq())),
                flushed_seq,
                added_files: added,
                ..VersionEdit::default()
            };
            man.log_and_apply(state, edit)?;
            let current = self.sv();
            let mut next = SuperVersion::build(state, Some(&current));
            next.purge_horizon = next.purge_horizon.max(purge_horizon);
            for mem in &gen.mems {
                if let Some(fm) = next.mems.get_mut(&mem.family()) {
                    fm.frozen.retain(|f| !Arc::ptr_eq(f, mem));
                }
            }
            *self.sv.write() = Arc::new(next);
            (bytes, files, orphans)
        };
        for f in &orphans {
            let p = manifest::hfile_path(&self.dir, f.family, f.number);
            if let Err(e) = self.fs.remove(&p) {
                tracing::warn!(file = %p.display(), error = %e, "could not remove a flushed file of a dropped family");
            }
        }
        crate::kill_point!("flush.after_manifest");
        self.update_pressure();
        self.kick_compaction();
        let deleted = self.wal.delete_segments_before(gen.boundary)?;
        self.enforce_slot_limit();
        self.counters.flushes.fetch_add(1, Ordering::Relaxed);
        self.counters
            .flushed_bytes
            .fetch_add(bytes, Ordering::Relaxed);
        self.counters
            .flushed_files
            .fetch_add(files, Ordering::Relaxed);
        tracing::info!(
            files,
            bytes,
            wal_segments_deleted = deleted,
            ms = started.elapsed().as_millis() as u64,
            "flushed"
        );
        Ok(())
    }

    /// Write one memstore as an L0 HFile, synced, dropping what the purge rules of a
    /// non-bottommost compaction drop (SPEC.md §20.2: versions beyond VERSIONS, duplicates,
    /// expired cells, and in classic mode masked puts; never a marker). `None` when nothing
    /// is left, and then no file remains.
    fn write_hfile(
        &self,
        mem: &MemStore,
        desc: &crate::schema::FamilyDescriptor,
        range_deletes: &RangeDeletes,
        number: u64,
        last_seq: u64,
        smallest_snapshot: u64,
    ) -> Result<Option<FileMeta>> {
        let NewHFile {
            path,
            file,
            writer: mut w,
        } = self.create_hfile(mem.family(), number, desc, false)?;
        // Masked puts go here already, as under a stored marker (classic mode); the deletes
        // themselves stay in the manifest.
        let mut purger = Purger::new(
            desc,
            PurgeParams::new(smallest_snapshot, last_seq, self.opts.clock.now_ms()),
        )
        .with_range_deletes(range_deletes);
        let mut it = mem.iter();
        it.seek_to_first()?;
        let mut min_seq = u64::MAX;
        while it.valid() {
            let key = cellar_format::KeyRef::parse(it.key()).map_err(|m| Error::Corruption {
                file: path.clone(),
                offset: 0,
                what: format!("memstore key: {m}"),
            })?;
            if purger.push_with_tags(&key, it.tags()).is_keep() {
                w.append_with_tags(&key, it.value(), it.tags())?;
                min_seq = min_seq.min(key.seq);
            }
            it.next()?;
        }
        self.count_dropped(purger.dropped());
        let (sink, summary) = w.finish()?;
        if summary.info.entries == 0 {
            drop(file);
            self.fs
                .remove(&path)
                .map_err(|e| Error::io(&path, "removing an empty flush output", e))?;
            return Ok(None);
        }
        file.sync_data()
            .map_err(|e| Error::io(&path, "syncing a flushed HFile", e))?;
        Ok(Some(file_meta(
            number,
            mem.family(),
            0,
            min_seq,
            &summary,
            sink.crc(),
        )))
    }

    /// Create HFile `number` of `family` (and the family's directory) and open a writer on it
    /// with the family's block size, compression and bloom settings; `major` marks the output
    /// of a bottommost compaction in its file info. Flush and compaction both write through it.
    pub(super) fn create_hfile(
        &self,
        family: u32,
        number: u64,
        desc: &crate::schema::FamilyDescriptor,
        major: bool,
    ) -> Result<NewHFile> {
        let dir = manifest::family_dir(&self.dir, family);
        self.fs
            .create_dir_all(&dir)
            .map_err(|e| Error::io(&dir, "creating a family directory", e))?;
        let path = manifest::hfile_path(&self.dir, family, number);
        let file = self
            .fs
            .create(&path)
            .map_err(|e| Error::io(&path, "creating an HFile", e))?;
        let mut o = family_writer_options(desc, self.opts.clock.now_ms());
        o.major_compaction = major;
        let writer = HFileWriter::new(
            AppendWriter::new(file.clone()),
            path.display().to_string(),
            o,
        )?;
        Ok(NewHFile { path, file, writer })
    }
}

/// A writer's options for an HFile of the family `desc` describes: its name, block size,
/// compression and bloom; created at `now_ms`. Flush, compaction and range export write
/// through them.
pub(super) fn family_writer_options(
    desc: &crate::schema::FamilyDescriptor,
    now_ms: u64,
) -> WriterOptions {
    let mut o = WriterOptions::new(desc.name.as_bytes());
    o.block_size = desc.block_size as usize;
    // Blocks end at or below BLOCKSIZE where entries allow, so a cached block fits the
    // allocator's size class of the block size instead of the next one up (a fifth of the
    // cache's memory at 16 KiB: see `WriterOptions::block_size_deviation`).
    o.block_size_deviation = 10;
    o.compression = desc.compression;
    o.bloom = BloomConfig {
        bloom_type: desc.bloom,
        ..BloomConfig::default()
    };
    o.created_at_ms = now_ms;
    o
}

/// An HFile being written: its path, its file (to sync) and the writer.
pub(super) struct NewHFile {
    pub path: std::path::PathBuf,
    pub file: std::sync::Arc<dyn crate::fs::File>,
    pub writer: HFileWriter<AppendWriter>,
}

/// What the manifest records of a finished HFile, from the writer's summary. `min_seq` is the
/// smallest sequence number written (the summary records only the largest); `u64::MAX`, an
/// empty file, records 0.
pub(super) fn file_meta(
    number: u64,
    family: u32,
    level: u32,
    min_seq: u64,
    summary: &cellar_format::FileSummary,
    crc: u32,
) -> FileMeta {
    let info = &summary.info;
    FileMeta {
        number,
        family,
        level,
        size: summary.file_size,
        smallest: info.first_key.clone().unwrap_or_default(),
        largest: info.last_key.clone().unwrap_or_default(),
        min_seq: if min_seq == u64::MAX { 0 } else { min_seq },
        max_seq: info.max_seq,
        min_ts: info.min_timestamp,
        max_ts: info.max_timestamp,
        entries: info.entries,
        deletes: info.deletes(),
        created_ms: info.created_at_ms,
        crc: Some(crc),
        range_clean: 0,
    }
}
