//! Range export: a table's rows in `[start, stop)` written as one HFile per family, which
//! another database loads with `Table::ingest` (SPEC.md §17.14). With the change feed it moves
//! or copies a range between databases: export at seq S, ingest, then apply
//! `Db::changes_since(S)` for the rows of the range.
//!
//! What a file holds: every cell of the range the database stores and a read at the export's
//! read point could use — each version and delete marker, cells a marker masks, expired ones
//! (the target judges TTL itself), with their tags (a per-cell TTL) — at sequence number 0, as
//! `cellar hfile build --seq-zero` writes them. Cells written after the read point are left
//! out. Of cells with the same coordinates (row, family, qualifier, timestamp, type), which only
//! their sequence numbers told apart, the newest is kept: the one every read chose. So a read of
//! the target answers as the source did at the export, with one exception: in a
//! NEW_VERSION_BEHAVIOR family, a put written *after* a marker of the same timestamp (which the
//! marker then did not mask) comes out at the marker's sequence number, and is masked.
//!
//! The files are read through uncached readers (a bulk pass should not evict the reads' blocks)
//! from one super-version held for the whole export, so no flush or compaction removes them
//! meanwhile.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use cellar_format::cell::compare_keys;
use cellar_format::{CellType, HFileReader, HFileWriter, KeyRef};

use super::read::RowSpan;
use super::{DbInner, Table};
use crate::error::{Error, Result};
use crate::fs::{AppendWriter, FormatSource};
use crate::read::merge::{HFileCellIter, MergeIter};
use crate::schema::TableName;
use crate::types::{CellIter, RangeDelete, SeqNo};

/// What [`Table::export_range`] wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ExportInfo {
    /// The read point the export saw: it holds every write at or below it, none above. A
    /// change feed from here (`Db::changes_since(seq)`) carries what came after.
    pub seq: SeqNo,
    /// The table's descriptor at the export: what a target without the table creates first
    /// (`Db::create_table`) so that the files find their families.
    pub table: crate::schema::TableDescriptor,
    /// One file per family that had cells in the range, in the table's family order.
    pub files: Vec<ExportedFile>,
}

/// One file of an export.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ExportedFile {
    /// The family (the file's own family name, as `Table::ingest` checks).
    pub family: String,
    /// Where it is: `{dir}/{family}.hfile`.
    pub path: PathBuf,
    /// Cells written.
    pub cells: u64,
    /// File size.
    pub bytes: u64,
}

impl Table {
    /// Write the rows in `[start, stop)` (an empty `stop`: to the end) as one HFile per family
    /// into `dir`, which must not exist yet; see the module docs for what the files hold.
    /// Writes and reads go on meanwhile.
    ///
    /// ```
    /// use cellar::{Db, FamilyDescriptor, Get, Options, Put, TableDescriptor};
    /// # let tmp = tempfile::tempdir().unwrap();
    /// let a = Db::open(tmp.path().join("a"), Options::default())?;
    /// let b = Db::open(tmp.path().join("b"), Options::default())?;
    /// for db in [&a, &b] {
    ///     db.create_table(TableDescriptor::new("t").family(FamilyDescriptor::new("cf")))?;
    /// }
    /// let t = a.table("t")?;
    /// for r in ["r1", "r2", "r3"] {
    ///     t.put(Put::new(r).add_at("cf", "q", 5, r))?;
    /// }
    /// let out = t.export_range(b"r2", b"r3", tmp.path().join("export"))?;
    /// for f in &out.files {
    ///     b.table("t")?.ingest(&f.family, &[&f.path])?;
    /// }
    /// let tb = b.table("t")?;
    /// assert!(tb.get(&Get::new("r1"))?.is_none());
    /// assert_eq!(tb.get(&Get::new("r2"))?.unwrap().value("cf", "q"), Some(&b"r2"[..]));
    /// # Ok::<(), cellar::Error>(())
    /// ```
    pub fn export_range(
        &self,
        start: &[u8],
        stop: &[u8],
        dir: impl AsRef<Path>,
    ) -> Result<ExportInfo> {
        self.db
            .inner
            .export_range(&self.name, start, stop, dir.as_ref())
    }
}

/// A family's export being written.
struct Out {
    path: PathBuf,
    part: PathBuf,
    file: Arc<dyn crate::fs::File>,
    writer: HFileWriter<AppendWriter>,
    cells: u64,
}

impl DbInner {
    pub(super) fn export_range(
        &self,
        table: &TableName,
        start: &[u8],
        stop: &[u8],
        dir: &Path,
    ) -> Result<ExportInfo> {
        if !stop.is_empty() && start >= stop {
            return Err(Error::InvalidArgument(
                "export range: the start row must come before the stop row".into(),
            ));
        }
        let fs = &*self.fs;
        match fs.exists(dir) {
            Ok(false) => {}
            Ok(true) => {
                return Err(Error::InvalidArgument(format!(
                    "export directory {} exists",
                    dir.display()
                )))
            }
            Err(e) => return Err(Error::io(dir, "checking the export directory", e)),
        }
        let (seq, sv) = self.read_view(None);
        let info = super::read::table_info(&sv, table)?.clone();
        let span = tracing::info_span!("export_range", table = %table, seq);
        let _g = span.enter();
        crate::fs::create_dir_durable(fs, dir)
            .map_err(|e| Error::io(dir, "creating the export directory", e))?;
        let rows = RowSpan {
            start,
            stop: (!stop.is_empty()).then_some(stop),
            inclusive_stop: false,
        };
        let mut files = Vec::new();
        let result = (|| -> Result<()> {
            for fam in &info.families {
                let readers = sv
                    .version
                    .levels(fam.id)
                    .into_iter()
                    .flatten()
                    .flatten()
                    .filter(|f| rows.overlaps(f))
                    .map(|f| self.uncached_reader(fam.id, f.number))
                    .collect::<Result<Vec<HFileReader<FormatSource>>>>()?;
                let mut sources: Vec<Box<dyn CellIter + '_>> = sv
                    .mems
                    .get(&fam.id)
                    .into_iter()
                    .flat_map(|m| std::iter::once(&m.active).chain(&m.frozen))
                    .map(|m| Box::new(m.iter()) as Box<dyn CellIter + '_>)
                    .collect();
                for r in &readers {
                    sources.push(Box::new(HFileCellIter::new(r.iter())));
                }
                let mut merge = MergeIter::new(sources);
                merge.seek(&KeyRef::first_on_row(start).encode())?;
                let name = &fam.descriptor.name;
                let mut out: Option<Out> = None;
                let mut emit = |k: &KeyRef<'_>, value: &[u8], tags: &[u8]| -> Result<()> {
                    if out.is_none() {
                        out = Some(self.export_file(dir, name, &fam.descriptor)?);
                    }
                    if let Some(o) = out.as_mut() {
                        o.writer.append_with_tags(k, value, tags)?;
                        o.cells += 1;
                    }
                    Ok(())
                };
                // The coordinates (the key but its 8-byte seq) of the cell written last: equal
                // ones come newest first, so the first is the one kept.
                let mut last: Vec<u8> = Vec::new();
                // The row-range deletes covering the current row, as the DeleteFamily markers
                // still to write into it (timestamps descending): the target has no range
                // deletes, so they travel as what they are to each row.
                let mut row: Vec<u8> = Vec::new();
                let mut pending: Vec<u64> = Vec::new();
                while merge.valid() {
                    let raw = merge.key();
                    let key = super::read::parse(raw)?;
                    if !stop.is_empty() && key.row >= stop {
                        break;
                    }
                    if !fam.range_deletes.is_empty() && key.row != row.as_slice() {
                        flush_markers(&row, name, &mut pending, None, &mut emit)?;
                        row.clear();
                        row.extend_from_slice(key.row);
                        pending = covering(fam.range_deletes.list(), key.row, seq);
                    }
                    let coords = &raw[..raw.len().saturating_sub(8)];
                    if key.seq <= seq && (last.is_empty() || last.as_slice() != coords) {
                        let k = KeyRef { seq: 0, ..key };
                        if !pending.is_empty() {
                            flush_markers(&row, name, &mut pending, Some(&k), &mut emit)?;
                        }
                        last.clear();
                        last.extend_from_slice(coords);
                        emit(&k, merge.value(), merge.tags())?;
                    }
                    merge.next()?;
                }
                flush_markers(&row, name, &mut pending, None, &mut emit)?;
                drop(merge);
                if let Some(o) = out {
                    let (_, summary) = o.writer.finish()?;
                    o.file
                        .sync_data()
                        .map_err(|e| Error::io(&o.part, "syncing an exported HFile", e))?;
                    fs.rename(&o.part, &o.path)
                        .map_err(|e| Error::io(&o.path, "installing an exported HFile", e))?;
                    files.push(ExportedFile {
                        family: name.clone(),
                        path: o.path,
                        cells: o.cells,
                        bytes: summary.file_size,
                    });
                }
            }
            fs.sync_dir(dir)
                .map_err(|e| Error::io(dir, "syncing the export directory", e))
        })();
        if let Err(e) = result {
            // Whatever was written (finished files and a `.part`) goes with the directory.
            for name in fs.list(dir).unwrap_or_default() {
                let _ = fs.remove(&dir.join(name));
            }
            let _ = fs.remove_dir(dir);
            return Err(e);
        }
        Ok(ExportInfo {
            seq,
            table: info.descriptor.clone(),
            files,
        })
    }

    /// A writer on `{dir}/{family}.hfile.part` with the family's settings.
    fn export_file(
        &self,
        dir: &Path,
        family: &str,
        desc: &crate::schema::FamilyDescriptor,
    ) -> Result<Out> {
        let path = dir.join(format!("{family}.hfile"));
        let part = dir.join(format!("{family}.hfile.part"));
        let file = self
            .fs
            .create(&part)
            .map_err(|e| Error::io(&part, "creating an exported HFile", e))?;
        let o = super::flush::family_writer_options(desc, self.opts.clock.now_ms());
        let writer = HFileWriter::new(
            AppendWriter::new(file.clone()),
            path.display().to_string(),
            o,
        )?;
        Ok(Out {
            path,
            part,
            file,
            writer,
            cells: 0,
        })
    }
}

/// Timestamps of the range deletes visible at `seq` that cover `row`, descending, once each.
fn covering(deletes: &[RangeDelete], row: &[u8], seq: SeqNo) -> Vec<u64> {
    let mut ts: Vec<u64> = deletes
        .iter()
        .filter(|d| d.seq <= seq && d.covers(row))
        .map(|d| d.ts)
        .collect();
    ts.sort_unstable_by(|a, b| b.cmp(a));
    ts.dedup();
    ts
}

/// Write the DeleteFamily markers of `row` in `pending` that sort before `next` (all of them
/// when `None`: the row ended), at seq 0 as every exported cell. One with the coordinates of
/// `next` (a stored DeleteFamily marker at the same timestamp) is not written twice.
fn flush_markers(
    row: &[u8],
    family: &str,
    pending: &mut Vec<u64>,
    next: Option<&KeyRef<'_>>,
    emit: &mut impl FnMut(&KeyRef<'_>, &[u8], &[u8]) -> Result<()>,
) -> Result<()> {
    while let Some(&ts) = pending.first() {
        let marker = KeyRef {
            row,
            family: family.as_bytes(),
            qualifier: b"",
            timestamp: ts,
            type_code: CellType::DeleteFamily as u8,
            seq: 0,
        };
        if let Some(n) = next {
            match compare_keys(&marker.encode(), &n.encode()) {
                std::cmp::Ordering::Less => {}
                std::cmp::Ordering::Equal => {
                    pending.remove(0);
                    continue;
                }
                std::cmp::Ordering::Greater => return Ok(()),
            }
        }
        emit(&marker, &[], &[])?;
        pending.remove(0);
    }
    Ok(())
}
