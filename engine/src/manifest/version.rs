//! The in-memory state the manifest describes: namespaces, tables, families, counters, and the
//! current [`Version`] (which files make up each family, level by level).
//!
//! # Concurrency
//!
//! [`Version`] is immutable once built; readers hold an `Arc<Version>` for as long as they read
//! its files, and the files stay on disk while any `Arc` to a version listing them is alive (the
//! engine's deletion policy, not this module's). [`ManifestState`] is plain data with no
//! interior locking: the engine keeps it beside the [`Manifest`](super::Manifest) under one mutex,
//! and only [`Manifest::log_and_apply`](super::Manifest::log_and_apply) (or replay) changes it.
//!
//! # Invariants (checked by every apply; a violating edit is refused whole)
//!
//! 1. The namespace `default` exists; every table's namespace exists.
//! 2. Table names are unique; each table's `family_ids` has one id per descriptor family, and a
//!    family id belongs to exactly one table.
//! 3. A new table id is at or above `next_table_id` and a new family id at or above
//!    `next_family_id` as they were before the edit: ids are never reused. A family that is
//!    kept by an alter keeps its name.
//! 4. A file number is live in at most one place; levels are below [`NUM_LEVELS`]; levels ≥ 1
//!    hold files with disjoint key ranges.
//! 5. `last_seq`, `log_number`, each family's `flushed_seq` and the three `next_*` counters
//!    never decrease, and after every edit the counters exceed every id or number in use.

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;

use cellar_format::cell::compare_keys;

use super::edit::{ttl_ms, SchemaRecord, TableEntry, VersionEdit};
use crate::error::{Error, Result};
use crate::schema::{validate_name, FamilyDescriptor, TableName, DEFAULT_NAMESPACE};
use crate::types::{FamilyId, FileMeta, FileNumber, RangeDelete, SeqNo, TableId};

/// Number of LSM levels per family (0 ..= 6). A file at a higher level is refused.
pub const NUM_LEVELS: usize = 7;

/// Files of one family, level by level: `NUM_LEVELS` entries. Level 0 is ordered newest first
/// (by `max_seq`, then file number, descending); deeper levels by smallest key.
pub type Levels = Vec<Vec<Arc<FileMeta>>>;

/// An immutable set of files per family.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Version {
    families: BTreeMap<FamilyId, Levels>,
}

impl Version {
    /// The levels of `family`, or `None` if no such live family.
    pub fn levels(&self, family: FamilyId) -> Option<&Levels> {
        self.families.get(&family)
    }

    /// Files of `family` at `level` (empty for an unknown family or level).
    pub fn files(&self, family: FamilyId, level: usize) -> &[Arc<FileMeta>] {
        self.families
            .get(&family)
            .and_then(|l| l.get(level))
            .map_or(&[], |v| v.as_slice())
    }

    /// Live family ids, ascending.
    pub fn families(&self) -> impl Iterator<Item = FamilyId> + '_ {
        self.families.keys().copied()
    }

    /// Every file of every family.
    pub fn all_files(&self) -> impl Iterator<Item = &Arc<FileMeta>> + '_ {
        self.families.values().flatten().flatten()
    }

    /// Number of files in the version.
    pub fn num_files(&self) -> usize {
        self.all_files().count()
    }

    /// A version of exactly `files`, each in its family at its level, ordered as the manifest
    /// orders them (L0 newest first by `max_seq` then number; deeper levels by smallest key).
    /// For simulators, tools and tests: nothing else is checked (levels ≥ 1 may overlap, numbers
    /// repeat), except that a file at a level of [`NUM_LEVELS`] or more is left out.
    pub fn from_files<F: Into<Arc<FileMeta>>>(files: impl IntoIterator<Item = F>) -> Version {
        let mut families: BTreeMap<FamilyId, Levels> = BTreeMap::new();
        for f in files {
            let f: Arc<FileMeta> = f.into();
            let levels = families
                .entry(f.family)
                .or_insert_with(|| vec![Vec::new(); NUM_LEVELS]);
            if let Some(files) = levels.get_mut(f.level as usize) {
                files.push(f);
            }
        }
        for levels in families.values_mut() {
            for (level, files) in levels.iter_mut().enumerate() {
                if level == 0 {
                    files.sort_by_key(|f| std::cmp::Reverse((f.max_seq, f.number)));
                } else {
                    files.sort_by(|a, b| compare_keys(&a.smallest, &b.smallest));
                }
            }
        }
        Version { families }
    }
}

/// Everything the manifest knows. See the module docs for invariants.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ManifestState {
    namespaces: BTreeSet<String>,
    tables: BTreeMap<TableId, TableEntry>,
    table_ids: BTreeMap<TableName, TableId>,
    families: BTreeMap<FamilyId, (TableId, FamilyDescriptor)>,
    next_file_number: FileNumber,
    next_table_id: TableId,
    next_family_id: FamilyId,
    last_seq: SeqNo,
    log_number: u64,
    flushed_seq: BTreeMap<FamilyId, SeqNo>,
    /// WAL record layout the writers use; 0 before any edit set it (a database that only
    /// builds before layout 2 wrote).
    wal_format: u32,
    /// Row-range deletes per family, in seq order (SPEC.md §13 rule 8).
    range_deletes: BTreeMap<FamilyId, Vec<RangeDelete>>,
    /// The last schema edit's change-feed record (SPEC.md §16.10): recovery appends it again
    /// when neither the log nor the manifest reaches past its `after`.
    schema_record: Option<SchemaRecord>,
    current: Arc<Version>,
}

/// The WAL record layout this build writes (SPEC.md §16.2); also the highest it reads.
pub const WAL_FORMAT: u32 = 2;

/// Whether an edit being checked came from the engine or from a manifest on disk; only the
/// error kind differs.
#[derive(Debug, Clone, Copy)]
enum Source<'a> {
    Proposed,
    Replayed { file: &'a Path, offset: u64 },
}

impl ManifestState {
    /// The state replay starts from: nothing at all, not even the `default` namespace (every
    /// manifest's first record is a snapshot that creates it).
    pub(crate) fn empty() -> Self {
        ManifestState {
            namespaces: BTreeSet::new(),
            tables: BTreeMap::new(),
            table_ids: BTreeMap::new(),
            families: BTreeMap::new(),
            next_file_number: 1,
            next_table_id: 1,
            next_family_id: 1,
            last_seq: 0,
            log_number: 0,
            flushed_seq: BTreeMap::new(),
            wal_format: 0,
            range_deletes: BTreeMap::new(),
            schema_record: None,
            current: Arc::new(Version::default()),
        }
    }

    /// The state of a brand-new database: the `default` namespace and nothing else.
    pub fn new_database() -> Self {
        let mut s = Self::empty();
        s.namespaces.insert(DEFAULT_NAMESPACE.to_owned());
        s.wal_format = WAL_FORMAT;
        s
    }

    /// The WAL record layout the database's writers use (0: never recorded, layout 1).
    pub fn wal_format(&self) -> u32 {
        self.wal_format
    }

    /// Namespaces, sorted; always contains `default`.
    pub fn namespaces(&self) -> &BTreeSet<String> {
        &self.namespaces
    }

    /// Tables by id.
    pub fn tables(&self) -> &BTreeMap<TableId, TableEntry> {
        &self.tables
    }

    /// A table by id.
    pub fn table(&self, id: TableId) -> Option<&TableEntry> {
        self.tables.get(&id)
    }

    /// A table by name.
    pub fn table_by_name(&self, name: &TableName) -> Option<&TableEntry> {
        self.table_ids.get(name).and_then(|id| self.tables.get(id))
    }

    /// A family: its table and descriptor.
    pub fn family(&self, id: FamilyId) -> Option<(TableId, &FamilyDescriptor)> {
        self.families.get(&id).map(|(t, d)| (*t, d))
    }

    /// Next unused file number.
    pub fn next_file_number(&self) -> FileNumber {
        self.next_file_number
    }

    /// Take a file number for a new HFile. Only the in-memory counter moves; the next edit
    /// [`Manifest::log_and_apply`](super::Manifest::log_and_apply) writes carries it, and a number
    /// taken by a file that never reached the manifest is never handed out again in this process
    /// (open skips every number found on disk).
    pub fn allocate_file_number(&mut self) -> FileNumber {
        let n = self.next_file_number;
        self.next_file_number += 1;
        n
    }

    /// Make sure numbers up to and including `n` are never handed out (open and create use it
    /// for every number found on disk).
    pub(crate) fn reserve_file_numbers_through(&mut self, n: FileNumber) {
        self.next_file_number = self.next_file_number.max(n.saturating_add(1));
    }

    /// Next unused table id: the id to give a new table.
    pub fn next_table_id(&self) -> TableId {
        self.next_table_id
    }

    /// Next unused family id.
    pub fn next_family_id(&self) -> FamilyId {
        self.next_family_id
    }

    /// Highest sequence number recorded as used.
    pub fn last_seq(&self) -> SeqNo {
        self.last_seq
    }

    /// Oldest WAL segment recovery must replay from.
    pub fn log_number(&self) -> u64 {
        self.log_number
    }

    /// The family's flushed seq (0 when it was never flushed).
    pub fn flushed_seq(&self, family: FamilyId) -> SeqNo {
        self.flushed_seq.get(&family).copied().unwrap_or(0)
    }

    /// The family's row-range deletes, in seq order (empty for an unknown family).
    pub fn range_deletes(&self, family: FamilyId) -> &[RangeDelete] {
        self.range_deletes.get(&family).map_or(&[], Vec::as_slice)
    }

    /// The last schema edit's change-feed record, if any edit carried one.
    pub fn schema_record(&self) -> Option<&SchemaRecord> {
        self.schema_record.as_ref()
    }

    /// The current version.
    pub fn current(&self) -> &Arc<Version> {
        &self.current
    }

    /// Numbers of every file in the current version.
    pub fn live_files(&self) -> BTreeSet<FileNumber> {
        self.current.all_files().map(|f| f.number).collect()
    }

    /// An edit that, applied to the empty state replay starts from, recreates this state
    /// exactly: the first record of every manifest.
    pub fn snapshot_edit(&self) -> VersionEdit {
        VersionEdit {
            next_file_number: Some(self.next_file_number),
            last_seq: Some(self.last_seq),
            log_number: Some(self.log_number),
            flushed_seq: self.flushed_seq.iter().map(|(f, s)| (*f, *s)).collect(),
            added_files: self.current.all_files().map(|f| (**f).clone()).collect(),
            deleted_files: Vec::new(),
            create_namespaces: self.namespaces.iter().cloned().collect(),
            drop_namespaces: Vec::new(),
            put_tables: self.tables.values().cloned().collect(),
            drop_tables: Vec::new(),
            next_table_id: Some(self.next_table_id),
            next_family_id: Some(self.next_family_id),
            wal_format: (self.wal_format > 0).then_some(self.wal_format),
            range_deletes: self
                .range_deletes
                .iter()
                .flat_map(|(f, ds)| ds.iter().map(|d| (*f, d.clone())))
                .collect(),
            range_deletes_gone: Vec::new(),
            schema_record: self.schema_record.clone(),
        }
    }

    /// Apply an edit the engine proposes. A violation is `InvalidArgument` and changes nothing.
    pub fn apply(&mut self, edit: &VersionEdit) -> Result<()> {
        *self = self.applied(edit, Source::Proposed)?;
        Ok(())
    }

    /// Apply an edit read back from manifest `file` (record at `offset`). A violation is
    /// `Corruption` and changes nothing.
    pub fn apply_replayed(&mut self, edit: &VersionEdit, file: &Path, offset: u64) -> Result<()> {
        *self = self.applied(edit, Source::Replayed { file, offset })?;
        Ok(())
    }

    /// The state after `edit`, checked; `self` is untouched so a refused edit leaves no trace.
    /// [`Manifest::log_and_apply`](super::Manifest::log_and_apply) needs this split: it must
    /// know an edit is valid before making it durable (an invalid edit on disk would make the
    /// next open fail), but may install it in memory only after the sync succeeded.
    pub(crate) fn checked_apply(&self, edit: &VersionEdit) -> Result<ManifestState> {
        self.applied(edit, Source::Proposed)
    }

    fn applied(&self, edit: &VersionEdit, src: Source<'_>) -> Result<ManifestState> {
        let mut next = self.clone();
        next.apply_inner(edit, self).map_err(|what| match src {
            Source::Proposed => Error::InvalidArgument(format!("version edit refused: {what}")),
            Source::Replayed { file, offset } => Error::Corruption {
                file: file.to_owned(),
                offset,
                what: format!("version edit cannot apply: {what}"),
            },
        })?;
        Ok(next)
    }

    /// The order of the steps is normative (SPEC.md §17.5): it is what lets one edit move a
    /// file between levels (delete, then add) and drop a table together with its namespace.
    fn apply_inner(&mut self, e: &VersionEdit, before: &ManifestState) -> Result<(), String> {
        // 1. Namespaces created.
        for ns in &e.create_namespaces {
            validate_name("namespace", ns).map_err(|e| e.to_string())?;
            if !self.namespaces.insert(ns.clone()) {
                return Err(format!("namespace {ns} already exists"));
            }
        }
        // 2. Tables put.
        let mut levels: BTreeMap<FamilyId, Levels> = self.current.families.clone();
        for t in &e.put_tables {
            self.put_table(t, before, &mut levels)?;
        }
        // 3. Files deleted.
        for &(family, level, number) in &e.deleted_files {
            let files = levels
                .get_mut(&family)
                .and_then(|l| l.get_mut(level as usize))
                .ok_or_else(|| {
                    format!("deleted file {number}: no family {family} level {level}")
                })?;
            let pos = files
                .iter()
                .position(|f| f.number == number)
                .ok_or_else(|| {
                    format!("deleted file {number} is not in family {family} level {level}")
                })?;
            files.remove(pos);
        }
        // 4. Files added.
        let mut live: BTreeSet<FileNumber> = levels
            .values()
            .flatten()
            .flatten()
            .map(|f| f.number)
            .collect();
        for f in &e.added_files {
            check_file(f)?;
            let lv = levels
                .get_mut(&f.family)
                .ok_or_else(|| format!("added file {}: no family {}", f.number, f.family))?;
            if !live.insert(f.number) {
                return Err(format!("added file number {} is already live", f.number));
            }
            // `check_file` bounded the level below NUM_LEVELS, the length of every Levels.
            if let Some(files) = lv.get_mut(f.level as usize) {
                files.push(Arc::new(f.clone()));
            }
        }
        // 5. Flushed seqs.
        for &(family, seq) in &e.flushed_seq {
            if !self.families.contains_key(&family) {
                return Err(format!("flushed_seq for unknown family {family}"));
            }
            let old = self.flushed_seq.entry(family).or_insert(0);
            if seq < *old {
                return Err(format!(
                    "flushed_seq of family {family} goes back from {old} to {seq}"
                ));
            }
            *old = seq;
        }
        // 6. Row-range deletes: removed, then added. An added one names a live family, a
        //    valid range and a seq already given out, once.
        for &(family, seq) in &e.range_deletes_gone {
            let list = self.range_deletes.get_mut(&family);
            // Kept in seq order (added below at their place): an edit that lets thousands go
            // costs a search each, not a walk.
            let pos = list
                .as_ref()
                .and_then(|l| l.binary_search_by_key(&seq, |d| d.seq).ok());
            match (list, pos) {
                (Some(l), Some(i)) => {
                    l.remove(i);
                    if l.is_empty() {
                        self.range_deletes.remove(&family);
                    }
                }
                _ => {
                    return Err(format!(
                        "removed range delete {seq} of family {family} does not exist"
                    ))
                }
            }
        }
        let last_seq = e.last_seq.unwrap_or(0).max(self.last_seq);
        for (family, d) in &e.range_deletes {
            if !self.families.contains_key(family) {
                return Err(format!(
                    "range delete {} for unknown family {family}",
                    d.seq
                ));
            }
            if !d.stop.is_empty() && d.start >= d.stop {
                return Err(format!(
                    "range delete {} of family {family} is an empty range",
                    d.seq
                ));
            }
            if d.seq == 0 || d.seq > last_seq {
                return Err(format!(
                    "range delete of family {family} at seq {} beyond last_seq {last_seq}",
                    d.seq
                ));
            }
            let list = self.range_deletes.entry(*family).or_default();
            let Err(at) = list.binary_search_by_key(&d.seq, |x| x.seq) else {
                return Err(format!(
                    "range delete {} of family {family} added twice",
                    d.seq
                ));
            };
            list.insert(at, d.clone());
        }
        // 7. Tables dropped, with their families, files and flushed seqs.
        for &id in &e.drop_tables {
            let entry = self
                .tables
                .remove(&id)
                .ok_or_else(|| format!("dropped table {id} does not exist"))?;
            self.table_ids.remove(&entry.descriptor.name);
            for fid in &entry.family_ids {
                self.forget_family(*fid, &mut levels);
            }
        }
        // 8. Namespaces dropped.
        for ns in &e.drop_namespaces {
            if ns == DEFAULT_NAMESPACE {
                return Err("the default namespace cannot be dropped".into());
            }
            if !self.namespaces.remove(ns) {
                return Err(format!("dropped namespace {ns} does not exist"));
            }
            if let Some(t) = self.table_ids.keys().find(|t| &t.namespace == ns) {
                return Err(format!("dropped namespace {ns} still holds table {t}"));
            }
        }
        // 9. Counters.
        if let Some(v) = e.last_seq {
            if v < self.last_seq {
                return Err(format!("last_seq goes back from {} to {v}", self.last_seq));
            }
            self.last_seq = v;
        }
        if let Some(v) = e.log_number {
            if v < self.log_number {
                return Err(format!(
                    "log_number goes back from {} to {v}",
                    self.log_number
                ));
            }
            self.log_number = v;
        }
        raise(
            &mut self.next_file_number,
            e.next_file_number,
            "next_file_number",
        )?;
        raise(&mut self.next_table_id, e.next_table_id, "next_table_id")?;
        raise(&mut self.next_family_id, e.next_family_id, "next_family_id")?;
        if e.wal_format.is_some_and(|v| v > WAL_FORMAT) {
            return Err(format!(
                "the WAL is in record layout {}, newer than this build reads ({WAL_FORMAT})",
                e.wal_format.unwrap_or_default()
            ));
        }
        raise(&mut self.wal_format, e.wal_format, "wal_format")?;
        if let Some(r) = &e.schema_record {
            self.schema_record = Some(r.clone());
        }
        // Counters always end past every id in use, so an edit that names an id without
        // bumping the counter cannot lead to reuse.
        if let Some(&max) = live.last() {
            self.next_file_number = self.next_file_number.max(max.saturating_add(1));
        }
        if let Some((&max, _)) = self.tables.last_key_value() {
            self.next_table_id = self.next_table_id.max(max.saturating_add(1));
        }
        if let Some((&max, _)) = self.families.last_key_value() {
            self.next_family_id = self.next_family_id.max(max.saturating_add(1));
        }
        if !self.namespaces.contains(DEFAULT_NAMESPACE) {
            return Err("the default namespace is missing".into());
        }

        // Level order, then the disjointness of levels >= 1 (invariant 4).
        for (family, lv) in levels.iter_mut() {
            for (level, files) in lv.iter_mut().enumerate() {
                if level == 0 {
                    files.sort_by_key(|f| std::cmp::Reverse((f.max_seq, f.number)));
                    continue;
                }
                files.sort_by(|a, b| compare_keys(&a.smallest, &b.smallest));
                for w in files.windows(2) {
                    if let [a, b] = w {
                        if compare_keys(&a.largest, &b.smallest) != Ordering::Less {
                            return Err(format!(
                                "files {} and {} overlap in family {family} level {level}",
                                a.number, b.number
                            ));
                        }
                    }
                }
            }
        }
        self.current = Arc::new(Version { families: levels });
        Ok(())
    }

    fn put_table(
        &mut self,
        t: &TableEntry,
        before: &ManifestState,
        levels: &mut BTreeMap<FamilyId, Levels>,
    ) -> Result<(), String> {
        let d = &t.descriptor;
        d.validate().map_err(|e| e.to_string())?;
        if t.family_ids.len() != d.families.len() {
            return Err(format!(
                "table {}: {} family ids for {} families",
                d.name,
                t.family_ids.len(),
                d.families.len()
            ));
        }
        for f in &d.families {
            // The manifest keeps whole milliseconds, 0 meaning forever; anything else would
            // come back different after a reopen.
            if let Some(ttl) = f.ttl {
                if ttl_ms(Some(ttl)) == 0 || ttl.subsec_nanos() % 1_000_000 != 0 {
                    return Err(format!(
                        "family {}: TTL {ttl:?} is not a positive whole number of milliseconds",
                        f.name
                    ));
                }
            }
        }
        if !self.namespaces.contains(&d.name.namespace) {
            return Err(format!(
                "table {}: no namespace {}",
                d.name, d.name.namespace
            ));
        }
        if let Some(&other) = self.table_ids.get(&d.name) {
            if other != t.id {
                return Err(format!("table name {} is taken by table {other}", d.name));
            }
        }
        let old = self.tables.get(&t.id).cloned();
        if old.is_none() && t.id < before.next_table_id {
            return Err(format!(
                "new table id {} is below next_table_id {}: ids are never reused",
                t.id, before.next_table_id
            ));
        }
        for (i, (fid, f)) in t.family_ids.iter().zip(&d.families).enumerate() {
            if t.family_ids[..i].contains(fid) {
                return Err(format!("table {}: family id {fid} given twice", d.name));
            }
            match self.families.get(fid) {
                Some((owner, _)) if *owner != t.id => {
                    return Err(format!("family id {fid} belongs to table {owner}"));
                }
                Some((_, old_f)) if old_f.name != f.name => {
                    return Err(format!(
                        "family id {fid} is {}; it cannot be renamed to {}",
                        old_f.name, f.name
                    ));
                }
                Some(_) => {}
                None if *fid < before.next_family_id => {
                    return Err(format!(
                        "new family id {fid} is below next_family_id {}: ids are never reused",
                        before.next_family_id
                    ));
                }
                None => {}
            }
        }
        if let Some(old) = &old {
            self.table_ids.remove(&old.descriptor.name);
            // Families an alter leaves out are dropped with their files.
            for fid in &old.family_ids {
                if !t.family_ids.contains(fid) {
                    self.forget_family(*fid, levels);
                }
            }
        }
        for (fid, f) in t.family_ids.iter().zip(&d.families) {
            self.families.insert(*fid, (t.id, f.clone()));
            levels
                .entry(*fid)
                .or_insert_with(|| vec![Vec::new(); NUM_LEVELS]);
        }
        self.table_ids.insert(d.name.clone(), t.id);
        self.tables.insert(t.id, t.clone());
        Ok(())
    }

    fn forget_family(&mut self, fid: FamilyId, levels: &mut BTreeMap<FamilyId, Levels>) {
        self.families.remove(&fid);
        self.flushed_seq.remove(&fid);
        self.range_deletes.remove(&fid);
        levels.remove(&fid);
    }
}

fn raise<T: Ord + Copy + std::fmt::Display>(
    slot: &mut T,
    v: Option<T>,
    what: &str,
) -> Result<(), String> {
    if let Some(v) = v {
        if v < *slot {
            return Err(format!("{what} goes back from {slot} to {v}"));
        }
        *slot = v;
    }
    Ok(())
}

fn check_file(f: &FileMeta) -> Result<(), String> {
    if f.level as usize >= NUM_LEVELS {
        return Err(format!(
            "file {}: level {} is not below {NUM_LEVELS}",
            f.number, f.level
        ));
    }
    if f.min_seq > f.max_seq || f.min_ts > f.max_ts {
        return Err(format!("file {}: min above max", f.number));
    }
    if compare_keys(&f.smallest, &f.largest) == Ordering::Greater {
        return Err(format!("file {}: smallest key after largest key", f.number));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::{FamilyDescriptor, TableDescriptor};
    use cellar_format::cell::CellKey;

    fn key(row: &str) -> Vec<u8> {
        CellKey::first_on_row(row.as_bytes()).encode()
    }

    pub(crate) fn file(number: u64, family: u32, level: u32, lo: &str, hi: &str) -> FileMeta {
        FileMeta {
            number,
            family,
            level,
            size: 100,
            smallest: key(lo),
            largest: key(hi),
            min_seq: number,
            max_seq: number * 10,
            min_ts: 1,
            max_ts: 2,
            entries: 3,
            deletes: 0,
            created_ms: 0,
            crc: None,
            range_clean: 0,
        }
    }

    fn table(id: u32, name: &str, fams: &[(&str, u32)]) -> TableEntry {
        let mut d = TableDescriptor::new(name);
        for (f, _) in fams {
            d = d.family(FamilyDescriptor::new(*f));
        }
        TableEntry {
            id,
            descriptor: d,
            family_ids: fams.iter().map(|(_, id)| *id).collect(),
        }
    }

    fn with_table() -> ManifestState {
        let mut s = ManifestState::new_database();
        s.apply(&VersionEdit {
            put_tables: vec![table(1, "t", &[("a", 1), ("b", 2)])],
            ..Default::default()
        })
        .unwrap();
        s
    }

    fn refused(s: &ManifestState, e: VersionEdit, needle: &str) {
        let mut c = s.clone();
        match c.apply(&e) {
            Err(Error::InvalidArgument(m)) => assert!(m.contains(needle), "{m}"),
            other => panic!("expected refusal containing {needle:?}, got {other:?}"),
        }
        assert_eq!(&c, s, "a refused edit must change nothing");
        let mut c = s.clone();
        assert!(matches!(
            c.apply_replayed(&e, Path::new("MANIFEST-000001"), 9),
            Err(Error::Corruption { offset: 9, .. })
        ));
    }

    /// A new database records the WAL layout it writes; one whose manifest never did (written
    /// by builds before layout 2) reads 0 until an edit sets it; it never goes back, and a layout
    /// newer than this build's is refused (so is a database in it, on replay).
    #[test]
    fn wal_format_is_recorded_raised_and_bounded() {
        let s = ManifestState::new_database();
        assert_eq!(s.wal_format(), WAL_FORMAT);
        assert_eq!(s.snapshot_edit().wal_format, Some(WAL_FORMAT));
        let mut old_snapshot = s.snapshot_edit();
        old_snapshot.wal_format = None;
        let mut old = ManifestState::empty();
        old.apply(&old_snapshot).unwrap();
        assert_eq!(old.wal_format(), 0);
        assert_eq!(old.snapshot_edit().wal_format, None);
        let set = |v| VersionEdit {
            wal_format: Some(v),
            ..Default::default()
        };
        old.apply(&set(WAL_FORMAT)).unwrap();
        assert_eq!(old, s);
        refused(&s, set(1), "wal_format goes back");
        refused(&s, set(WAL_FORMAT + 1), "newer than this build reads");
    }

    #[test]
    fn put_table_assigns_families_and_bumps_counters() {
        let s = with_table();
        assert_eq!(s.next_table_id(), 2);
        assert_eq!(s.next_family_id(), 3);
        assert_eq!(s.family(2).unwrap().1.name, "b");
        assert!(s.table_by_name(&TableName::parse("t").unwrap()).is_some());
        assert_eq!(s.current().families().collect::<Vec<_>>(), vec![1, 2]);
    }

    #[test]
    fn files_are_ordered_per_level() {
        let mut s = with_table();
        s.apply(&VersionEdit {
            added_files: vec![
                file(10, 1, 0, "a", "z"),
                file(11, 1, 0, "a", "z"),
                file(12, 1, 1, "m", "n"),
                file(13, 1, 1, "a", "b"),
            ],
            ..Default::default()
        })
        .unwrap();
        let v = s.current();
        let l0: Vec<_> = v.files(1, 0).iter().map(|f| f.number).collect();
        assert_eq!(l0, vec![11, 10], "L0 newest first");
        let l1: Vec<_> = v.files(1, 1).iter().map(|f| f.number).collect();
        assert_eq!(l1, vec![13, 12], "L1 by smallest key");
        assert_eq!(s.next_file_number(), 14);
        assert_eq!(s.live_files(), [10, 11, 12, 13].into_iter().collect());
        // A trivial move: delete from L0 and add at L2 in one edit.
        let mut moved = file(10, 1, 2, "a", "z");
        moved.level = 2;
        s.apply(&VersionEdit {
            deleted_files: vec![(1, 0, 10)],
            added_files: vec![moved],
            ..Default::default()
        })
        .unwrap();
        assert_eq!(s.current().files(1, 2).len(), 1);
    }

    #[test]
    fn invalid_edits_are_refused_whole() {
        let mut s = with_table();
        s.apply(&VersionEdit {
            added_files: vec![file(10, 1, 1, "c", "d")],
            last_seq: Some(50),
            ..Default::default()
        })
        .unwrap();
        let e = |f: fn(&mut VersionEdit)| {
            let mut e = VersionEdit::default();
            f(&mut e);
            e
        };
        refused(
            &s,
            e(|e| e.deleted_files = vec![(1, 0, 10)]),
            "not in family",
        );
        refused(
            &s,
            e(|e| e.added_files = vec![file(10, 2, 0, "a", "b")]),
            "already live",
        );
        refused(
            &s,
            e(|e| e.added_files = vec![file(11, 1, 1, "a", "c")]),
            "overlap",
        );
        refused(
            &s,
            e(|e| e.added_files = vec![file(11, 9, 0, "a", "c")]),
            "no family",
        );
        refused(
            &s,
            e(|e| e.added_files = vec![file(11, 1, 7, "a", "c")]),
            "level",
        );
        refused(
            &s,
            e(|e| {
                let mut t = table(2, "u", &[("x", 5)]);
                t.family_ids.push(6);
                e.put_tables = vec![t];
            }),
            "family ids for",
        );
        refused(
            &s,
            e(|e| e.put_tables = vec![table(2, "t", &[("x", 5)])]),
            "taken",
        );
        refused(
            &s,
            e(|e| e.put_tables = vec![table(2, "u", &[("x", 1)])]),
            "belongs to table",
        );
        refused(
            &s,
            e(|e| e.put_tables = vec![table(2, "u", &[("x", 2)])]),
            "belongs to table",
        );
        refused(
            &s,
            e(|e| e.put_tables = vec![table(1, "t", &[("renamed", 1)])]),
            "renamed",
        );
        refused(
            &s,
            e(|e| e.put_tables = vec![table(0, "u", &[("x", 9)])]),
            "never reused",
        );
        refused(
            &s,
            e(|e| e.put_tables = vec![table(5, "nope:u", &[("x", 9)])]),
            "no namespace",
        );
        refused(
            &s,
            e(|e| e.drop_namespaces = vec!["default".into()]),
            "cannot be dropped",
        );
        refused(
            &s,
            e(|e| e.create_namespaces = vec!["default".into()]),
            "exists",
        );
        refused(&s, e(|e| e.drop_tables = vec![9]), "does not exist");
        refused(&s, e(|e| e.last_seq = Some(49)), "goes back");
        refused(&s, e(|e| e.next_file_number = Some(3)), "goes back");
        refused(&s, e(|e| e.flushed_seq = vec![(77, 1)]), "unknown family");
        refused(
            &s,
            e(|e| {
                let mut t = table(2, "u", &[("x", 5)]);
                t.descriptor.families[0].ttl = Some(std::time::Duration::from_micros(1500));
                e.put_tables = vec![t];
            }),
            "milliseconds",
        );
    }

    #[test]
    fn namespace_with_tables_cannot_be_dropped_but_can_with_its_tables() {
        let mut s = ManifestState::new_database();
        s.apply(&VersionEdit {
            create_namespaces: vec!["ns".into()],
            put_tables: vec![table(1, "ns:t", &[("f", 1)])],
            ..Default::default()
        })
        .unwrap();
        refused(
            &s,
            VersionEdit {
                drop_namespaces: vec!["ns".into()],
                ..Default::default()
            },
            "still holds",
        );
        s.apply(&VersionEdit {
            drop_tables: vec![1],
            drop_namespaces: vec!["ns".into()],
            ..Default::default()
        })
        .unwrap();
        assert_eq!(s.namespaces().len(), 1);
        assert!(s.family(1).is_none());
        assert_eq!(s.next_family_id(), 2, "ids stay used after a drop");
    }

    #[test]
    fn alter_drops_left_out_families_with_their_files() {
        let mut s = with_table();
        s.apply(&VersionEdit {
            added_files: vec![file(10, 2, 0, "a", "b")],
            flushed_seq: vec![(2, 7)],
            ..Default::default()
        })
        .unwrap();
        s.apply(&VersionEdit {
            put_tables: vec![table(1, "t", &[("a", 1), ("c", 3)])],
            ..Default::default()
        })
        .unwrap();
        assert!(s.family(2).is_none());
        assert_eq!(s.flushed_seq(2), 0);
        assert!(s.live_files().is_empty());
        assert_eq!(s.current().families().collect::<Vec<_>>(), vec![1, 3]);
    }

    #[test]
    fn snapshot_recreates_the_state() {
        let mut s = with_table();
        s.apply(&VersionEdit {
            added_files: vec![file(10, 2, 0, "a", "b"), file(11, 1, 3, "a", "b")],
            flushed_seq: vec![(2, 7)],
            last_seq: Some(100),
            log_number: Some(4),
            create_namespaces: vec!["x".into()],
            schema_record: Some(SchemaRecord {
                after: 99,
                payload: b"x created".to_vec(),
            }),
            ..Default::default()
        })
        .unwrap();
        // A later edit without a record leaves the last one; one with a record replaces it.
        s.apply(&VersionEdit {
            last_seq: Some(101),
            ..Default::default()
        })
        .unwrap();
        assert_eq!(s.schema_record().map(|r| r.after), Some(99));
        let mut r = ManifestState::empty();
        r.apply(&s.snapshot_edit()).unwrap();
        assert_eq!(r, s);
        s.apply(&VersionEdit {
            create_namespaces: vec!["y".into()],
            schema_record: Some(SchemaRecord {
                after: 101,
                payload: b"y created".to_vec(),
            }),
            ..Default::default()
        })
        .unwrap();
        assert_eq!(s.schema_record().map(|r| r.after), Some(101));
    }
}
