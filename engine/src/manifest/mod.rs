//! The manifest: the durable log of version edits, and the in-memory state it describes
//! (SPEC.md §17).
//!
//! **Layout** of the database directory, as far as this module is concerned:
//!
//! ```text
//! {dir}/CURRENT                          "MANIFEST-000007\n"                (current)
//! {dir}/MANIFEST-000007                  record(seq 1: snapshot) record(2) … (log)
//! {dir}/data/{family_id}/{n:06}.hfile    an HFile, live iff the version lists number n
//! ```
//!
//! **Records** reuse the WAL framing (`wal::record`): `segment` = the manifest's number,
//! `seq` = 1, 2, 3…, payload = one encoded [`VersionEdit`] ([`edit`]). Every manifest starts
//! with a snapshot of the whole state, so replay needs only the file `CURRENT` names.
//!
//! **Open** replays that manifest and then always starts a *new* one, numbered above every file
//! number seen (in the state and on disk), writes the snapshot, installs `CURRENT` and deletes
//! the old manifest: a torn tail is never appended to (RocksDB #6316), and a number an
//! unlogged file took is never handed out again.
//!
//! **log_and_apply** checks the edit against the state first (an invalid edit on disk would
//! make the next open fail), makes it durable (write + fdatasync, or a roll-over to a new
//! manifest whose snapshot folds it in), and only then installs it in memory.
//!
//! **Poisoning.** The first failed write, sync, create or rename poisons the manifest: that call
//! and every later one return [`Error::Poisoned`]; nothing is retried. Except that a full disk
//! is reported by kind: the call that hit ENOSPC returns [`Error::NoSpace`], later ones
//! `Poisoned` with [`crate::PoisonCause::NoSpace`]; callers test [`Manifest::is_poisoned`], not
//! the variant. No later edit goes into the file that took the failed one: the next open writes
//! a new manifest (the fix of RocksDB #6316). The failed edit may or may
//! not be on disk (RocksDB #4990: a sync reported failure, yet the record persisted), so after
//! `Poisoned` the engine MUST NOT delete any file the edit would have made obsolete; the state
//! is left as before the edit, and [`Manifest::obsolete_files`] refuses to answer.
//!
//! # Concurrency
//!
//! [`Manifest`] takes `&mut self` everywhere: the engine holds it and its [`ManifestState`]
//! together under one mutex, so edits are serialized and file order equals apply order.
//! Readers take `state.current().clone()` under that mutex and then read without it.

pub mod current;
pub mod edit;
pub mod log;
pub mod version;

use std::path::{Path, PathBuf};

pub use current::{CURRENT, CURRENT_TMP};
pub use edit::{EditError, SchemaRecord, TableEntry, VersionEdit};
pub use log::{manifest_file_name, parse_manifest_file_name, LogSummary, TornTail};
pub use version::{Levels, ManifestState, Version, NUM_LEVELS, WAL_FORMAT};

use crate::error::{Error, Result};
use crate::fs::{FileSystem, SharedFs};
use crate::types::{FamilyId, FileNumber};
use crate::wal::record::MAX_PAYLOAD;
use log::LogWriter;

/// Directory under the database directory that holds one directory per family.
pub const DATA_DIR: &str = "data";
/// Suffix of HFile names.
pub const HFILE_SUFFIX: &str = ".hfile";

/// Options of [`Manifest`].
#[derive(Debug, Clone)]
pub struct ManifestOptions {
    /// Roll over to a new manifest once the current one is at least this large (and its edits
    /// outweigh its snapshot, so a snapshot larger than this does not roll on every edit).
    pub max_size: u64,
}

impl Default for ManifestOptions {
    fn default() -> Self {
        ManifestOptions { max_size: 64 << 20 }
    }
}

/// The directory of family `family`'s files.
pub fn family_dir(dir: &Path, family: FamilyId) -> PathBuf {
    dir.join(DATA_DIR).join(family.to_string())
}

/// The file name of HFile `number`.
pub fn hfile_file_name(number: FileNumber) -> String {
    format!("{number:06}{HFILE_SUFFIX}")
}

/// The path of HFile `number` of `family`.
pub fn hfile_path(dir: &Path, family: FamilyId, number: FileNumber) -> PathBuf {
    family_dir(dir, family).join(hfile_file_name(number))
}

/// The file number an HFile name denotes (canonical form only).
pub fn parse_hfile_file_name(name: &str) -> Option<FileNumber> {
    let digits = name.strip_suffix(HFILE_SUFFIX)?;
    if digits.len() < 6 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let n: u64 = digits.parse().ok()?;
    (hfile_file_name(n) == name).then_some(n)
}

/// Names in `dir`; a directory that does not exist (or is not one) has none.
fn list_or_empty(fs: &dyn FileSystem, dir: &Path) -> Result<Vec<String>> {
    match fs.list(dir) {
        Ok(v) => Ok(v),
        Err(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory
            ) =>
        {
            Ok(Vec::new())
        }
        Err(e) => Err(Error::io(dir, "listing directory", e)),
    }
}

/// Every family directory under `{dir}/data`: (its name, the family id it denotes).
fn family_dirs(fs: &dyn FileSystem, dir: &Path) -> Result<Vec<(String, FamilyId)>> {
    Ok(list_or_empty(fs, &dir.join(DATA_DIR))?
        .into_iter()
        .filter_map(|name| {
            let id: FamilyId = name.parse().ok()?;
            (id.to_string() == name).then_some((name, id))
        })
        .collect())
}

/// The highest manifest or HFile number present in `dir`, 0 if none.
fn max_number_on_disk(fs: &dyn FileSystem, dir: &Path) -> Result<u64> {
    let mut max = list_or_empty(fs, dir)?
        .iter()
        .filter_map(|n| parse_manifest_file_name(n))
        .max()
        .unwrap_or(0);
    for (name, _) in family_dirs(fs, dir)? {
        let sub = dir.join(DATA_DIR).join(name);
        for f in list_or_empty(fs, &sub)? {
            if let Some(n) = parse_hfile_file_name(&f) {
                max = max.max(n);
            }
        }
    }
    Ok(max)
}

/// Whether `dir` holds a database (has `CURRENT`): the engine's choice between
/// [`Manifest::open`] and [`Manifest::create`].
pub fn database_exists(fs: &dyn FileSystem, dir: &Path) -> Result<bool> {
    let cur = dir.join(CURRENT);
    fs.exists(&cur)
        .map_err(|e| Error::io(&cur, "checking for CURRENT", e))
}

/// The writer of a database's manifest. See the module docs.
///
/// # Concurrency
///
/// Not shared: every method takes `&self`/`&mut self` and the engine keeps the `Manifest`
/// and its [`ManifestState`] under one mutex, so edits are serialized.
#[derive(Debug)]
pub struct Manifest {
    fs: SharedFs,
    dir: PathBuf,
    opts: ManifestOptions,
    writer: LogWriter,
    /// Why the manifest is poisoned, once it is.
    poisoned: Option<crate::Poison>,
    /// What replay found at open (`None` after create).
    recovered: Option<LogSummary>,
}

impl Manifest {
    /// Create the manifest of a new database in `dir` (created if missing): a first manifest
    /// holding the snapshot of an empty database (the `default` namespace), then `CURRENT`.
    /// Fails with `InvalidArgument` if `CURRENT` already exists.
    pub fn create(fs: SharedFs, dir: &Path) -> Result<(Manifest, ManifestState)> {
        Self::create_with(fs, dir, ManifestOptions::default())
    }

    /// [`create`](Self::create) with options.
    pub fn create_with(
        fs: SharedFs,
        dir: &Path,
        opts: ManifestOptions,
    ) -> Result<(Manifest, ManifestState)> {
        fs.create_dir_all(dir)
            .map_err(|e| Error::io(dir, "creating database directory", e))?;
        // The directory's own entry must survive a power loss too, or CURRENT goes with it.
        if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
            fs.sync_dir(parent)
                .map_err(|e| Error::io(parent, "syncing the parent directory", e))?;
        }
        if database_exists(&*fs, dir)? {
            return Err(Error::InvalidArgument(format!(
                "a database already exists in {}",
                dir.display()
            )));
        }
        // Normally number 1; a create that crashed before installing CURRENT may have left
        // manifests behind, which are skipped (create is exclusive) and later reported obsolete.
        let mut state = ManifestState::new_database();
        state.reserve_file_numbers_through(max_number_on_disk(&*fs, dir)?);
        let number = state.allocate_file_number();
        let writer = LogWriter::create(&*fs, dir, number, &state.snapshot_edit())?;
        current::install_current(&*fs, dir, number)?;
        let m = Manifest {
            fs,
            dir: dir.to_owned(),
            opts,
            writer,
            poisoned: None,
            recovered: None,
        };
        Ok((m, state))
    }

    /// Open the manifest of an existing database: replay the one `CURRENT` names, then start a
    /// new one (see the module docs).
    pub fn open(fs: SharedFs, dir: &Path) -> Result<(Manifest, ManifestState)> {
        Self::open_with(fs, dir, ManifestOptions::default())
    }

    /// [`open`](Self::open) with options.
    pub fn open_with(
        fs: SharedFs,
        dir: &Path,
        opts: ManifestOptions,
    ) -> Result<(Manifest, ManifestState)> {
        let old = current::read_current(&*fs, dir)?;
        let old_path = dir.join(manifest_file_name(old));
        let mut state = ManifestState::empty();
        let summary = log::read_log(&*fs, &old_path, old, |offset, edit| {
            if offset == 0 && !is_snapshot(&edit) {
                return Err(Error::Corruption {
                    file: old_path.clone(),
                    offset,
                    what: "the first record is not a snapshot (a counter is missing)".into(),
                });
            }
            state.apply_replayed(&edit, &old_path, offset)
        })?;
        if let Some(t) = &summary.torn_tail {
            tracing::warn!(
                manifest = %old_path.display(),
                offset = t.offset,
                what = %t.what,
                "manifest ends in a torn record (an unacknowledged edit); ignored"
            );
        }
        state.reserve_file_numbers_through(old.max(max_number_on_disk(&*fs, dir)?));
        let number = state.allocate_file_number();
        let writer = LogWriter::create(&*fs, dir, number, &state.snapshot_edit())?;
        current::install_current(&*fs, dir, number)?;
        // Unreferenced from here on; if removal fails, `obsolete_files` reports it later.
        if let Err(e) = fs.remove(&old_path) {
            tracing::warn!(manifest = %old_path.display(), error = %e, "could not remove old manifest");
        }
        let m = Manifest {
            fs,
            dir: dir.to_owned(),
            opts,
            writer,
            poisoned: None,
            recovered: Some(summary),
        };
        Ok((m, state))
    }

    /// Make `edit` durable, then apply it to `state`.
    ///
    /// When `edit.next_file_number` is unset it is filled from `state`, so file numbers taken
    /// with [`ManifestState::allocate_file_number`] are recorded by the next edit.
    ///
    /// Errors: `InvalidArgument` if the edit does not apply (nothing written, state unchanged,
    /// not poisoned); `Poisoned` if the manifest is, or becomes so because a write, sync, create
    /// or rename failed (`NoSpace` if that failure was a full disk) — then the edit may or may
    /// not be durable, `state` is unchanged, and the caller must not delete any file (test
    /// [`Manifest::is_poisoned`]).
    pub fn log_and_apply(
        &mut self,
        state: &mut ManifestState,
        mut edit: VersionEdit,
    ) -> Result<()> {
        self.check_poisoned()?;
        if edit.next_file_number.is_none() {
            edit.next_file_number = Some(state.next_file_number());
        }
        let mut next = state.checked_apply(&edit)?;
        let rolled = if self.should_roll() {
            let number = next.allocate_file_number();
            let snapshot = next.snapshot_edit();
            self.roll(number, &snapshot)
        } else {
            let payload = edit.encode();
            if payload.len() > MAX_PAYLOAD as usize {
                return Err(Error::InvalidArgument(format!(
                    "version edit of {} bytes exceeds the record limit {MAX_PAYLOAD}",
                    payload.len()
                )));
            }
            self.writer.append_encoded(&payload)
        };
        if let Err(e) = rolled {
            return Err(self.poison(e));
        }
        *state = next;
        Ok(())
    }

    /// Files in the database directory that nothing references: HFiles under `data/` whose
    /// number is not live in `state`, manifests other than the current one, and `CURRENT.tmp`.
    /// Paths are relative to the database directory.
    ///
    /// Only meaningful while no flush or compaction is writing a file not yet in the manifest
    /// (the engine calls it at open). Refused with `Poisoned` once the manifest is poisoned: a
    /// failed edit may be on disk and reference files the in-memory state does not.
    pub fn obsolete_files(&self, state: &ManifestState) -> Result<Vec<String>> {
        self.check_poisoned()?;
        let fs = &*self.fs;
        let mut out = Vec::new();
        for name in list_or_empty(fs, &self.dir)? {
            let stale_manifest =
                parse_manifest_file_name(&name).is_some_and(|n| n != self.writer.number());
            if stale_manifest || name == CURRENT_TMP {
                out.push(name);
            }
        }
        let live = state.live_files();
        for (fam, _) in family_dirs(fs, &self.dir)? {
            let sub = self.dir.join(DATA_DIR).join(&fam);
            for name in list_or_empty(fs, &sub)? {
                if parse_hfile_file_name(&name).is_some_and(|n| !live.contains(&n)) {
                    out.push(format!("{DATA_DIR}/{fam}/{name}"));
                }
            }
        }
        Ok(out)
    }

    /// The family directories under `data/` (relative to the database directory) whose family
    /// `state` no longer has: dropped families (a dropped table's, or one removed by an
    /// alter). Their HFiles are among [`Manifest::obsolete_files`]; once those are deleted the
    /// directories are empty and can go too. Family ids are never reused, so nothing will be
    /// written into them again.
    pub fn dropped_family_dirs(&self, state: &ManifestState) -> Result<Vec<String>> {
        Ok(family_dirs(&*self.fs, &self.dir)?
            .into_iter()
            .filter(|(_, id)| state.family(*id).is_none())
            .map(|(name, _)| format!("{DATA_DIR}/{name}"))
            .collect())
    }

    /// Number of the manifest being written.
    pub fn number(&self) -> u64 {
        self.writer.number()
    }

    /// Bytes written to the current manifest.
    pub fn size(&self) -> u64 {
        self.writer.size()
    }

    /// Whether a failure has poisoned the manifest.
    pub fn is_poisoned(&self) -> bool {
        self.poisoned.is_some()
    }

    /// What replaying the previous manifest found at open (`None` for a new database).
    pub fn recovered(&self) -> Option<&LogSummary> {
        self.recovered.as_ref()
    }

    /// The database directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn check_poisoned(&self) -> Result<()> {
        match &self.poisoned {
            Some(why) => Err(Error::Poisoned(why.clone())),
            None => Ok(()),
        }
    }

    /// Enter the poisoned state because of `e`; returns what the failing call reports: `e`
    /// itself for a full disk (typed, so the caller sees `NoSpace`), else `Poisoned`.
    fn poison(&mut self, e: Error) -> Error {
        let why = crate::Poison::from_error("manifest", &e);
        tracing::error!(error = %why, "manifest poisoned");
        self.poisoned = Some(why.clone());
        if matches!(e, Error::NoSpace { .. }) {
            e
        } else {
            Error::Poisoned(why)
        }
    }

    /// Why the manifest is poisoned, if it is.
    pub fn poison_reason(&self) -> Option<&crate::Poison> {
        self.poisoned.as_ref()
    }

    fn should_roll(&self) -> bool {
        let size = self.writer.size();
        size >= self.opts.max_size && size - self.writer.first_len() >= self.writer.first_len()
    }

    /// Switch to manifest `number` whose first record is `snapshot`.
    fn roll(&mut self, number: u64, snapshot: &VersionEdit) -> Result<()> {
        let w = LogWriter::create(&*self.fs, &self.dir, number, snapshot)?;
        crate::kill_point!("manifest.roll.before_current");
        current::install_current(&*self.fs, &self.dir, number)?;
        let old = std::mem::replace(&mut self.writer, w);
        let old_path = self.dir.join(manifest_file_name(old.number()));
        if let Err(e) = self.fs.remove(&old_path) {
            tracing::warn!(manifest = %old_path.display(), error = %e, "could not remove old manifest");
        }
        Ok(())
    }
}

/// Whether `e` can be the first record of a manifest: a snapshot sets every counter.
pub(crate) fn is_snapshot(e: &VersionEdit) -> bool {
    e.next_file_number.is_some()
        && e.last_seq.is_some()
        && e.log_number.is_some()
        && e.next_table_id.is_some()
        && e.next_family_id.is_some()
}
