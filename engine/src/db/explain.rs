//! [`Table::explain`](super::Table::explain): one Get taken apart, for an operator asking why a
//! read returns what it returns (FEATURES.md: "an explain this Get trace").
//!
//! It reads the row the way a Get does, at one read view: for every family the Get reads, the
//! memstores (active, then frozen, newest first) and the files level by level, each file
//! either read or skipped for the reason the Get would skip it (key range, time range, bloom
//! filter). Unlike a Get it keeps every cell of the row it finds, with its source, and runs
//! them all through the read path's own resolver ([`RowResolver`]) without skipping ahead: so
//! every cell gets the verdict the Get's resolution gives it, or would give the cells a Get
//! seeks past (returned, masked, beyond VERSIONS, expired,
//! out of the time range, written after the read point ...), and a masked put names the marker
//! that masks it ([`RowResolver::mask_cause`]). The semantics are the resolver's, not a second
//! copy of them. The returned row is the real Get's, run at the same read view and clock
//! reading; `tests/explain.rs` checks that it is exactly the cells given
//! [`Verdict::Include`] and not marked [`ExplainedCell::filtered`] (a filter applies after
//! resolution).
//!
//! Costs: every cell of the row in every source that holds it (a Get stops a column at its
//! version limit and seeks past the rest). It charges the statistics of one Get (the real one)
//! and nothing else: the walk over the sources counts no skips and charges no seek compaction.

use cellar_format::cell::compare_keys;
use cellar_format::{CellType, KeyRef};

use super::read::{
    newer_versions_count, parse, selected_families, table_info, time_overlaps, RowSpan,
};
use super::DbInner;
use crate::error::Result;
use crate::read::merge::HFileCellIter;
use crate::read::query::{Cell, Get, Row};
use crate::read::resolve::{ReadParams, RowResolver, Verdict};
use crate::schema::TableName;
use crate::types::{CellIter, SeqNo, Timestamp};

/// What [`Table::explain`](super::Table::explain) found.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Explanation {
    /// The read point of the Get: writes with a higher sequence number are not seen.
    pub read_point: SeqNo,
    /// The clock reading TTLs were judged at (milliseconds since the epoch).
    pub now_ms: Timestamp,
    /// Every source the Get considered, in the order it considers them.
    pub sources: Vec<ExplainSource>,
    /// Every cell of the row in the sources read, in key order (SPEC.md §3.2), with its fate.
    pub cells: Vec<ExplainedCell>,
    /// What the Get returns (after its filter, if it has one).
    pub row: Option<Row>,
}

/// One source of a Get and what the Get did with it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ExplainSource {
    /// The family it belongs to.
    pub family: String,
    /// What it is.
    pub kind: SourceKind,
    /// Read, or skipped and why.
    pub decision: SourceDecision,
}

/// A memstore or a file.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SourceKind {
    /// The family's active memstore.
    ActiveMemstore,
    /// A frozen memstore waiting for its flush (0 is the newest).
    FrozenMemstore {
        /// Position among the frozen ones, newest first.
        index: usize,
    },
    /// An HFile.
    File {
        /// Its number (`{number:06}.hfile` in the family's directory).
        number: u64,
        /// Its level.
        level: u32,
        /// Its smallest and largest rows.
        rows: (Vec<u8>, Vec<u8>),
        /// Its cells' smallest and largest timestamps.
        timestamps: (Timestamp, Timestamp),
        /// Its cells.
        entries: u64,
        /// Delete markers among them.
        deletes: u64,
    },
}

/// What a Get does with a source.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum SourceDecision {
    /// Read: it held this many cells of the row.
    Read {
        /// Cells of the row found in it.
        cells: usize,
    },
    /// Skipped: its key range does not hold the row (listed for level 0 only: a deeper
    /// level's files do not overlap, and only the one that may hold the row is shown).
    KeyRange,
    /// Skipped: its time range cannot change the answer for the Get's time range.
    TimeRange,
    /// Skipped: its bloom filter rules the row (or the one column asked for) out.
    Bloom,
}

/// One cell of the row and its fate.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ExplainedCell {
    /// Index of its source in [`Explanation::sources`].
    pub source: usize,
    /// The cell (a marker's value is empty).
    pub cell: Cell,
    /// The sequence number of the write that made it.
    pub seq: SeqNo,
    /// What the Get's resolution decided for it.
    pub verdict: Verdict,
    /// For a masked put: the index in [`Explanation::cells`] of the marker that masks it.
    pub masked_by: Option<usize>,
    /// Returned by resolution ([`Verdict::Include`]) but left out of the row by the Get's
    /// filter.
    pub filtered: bool,
}

/// A cell found in a source, before resolution.
struct Found {
    source: usize,
    key: Vec<u8>,
    value: Vec<u8>,
    tags: Vec<u8>,
}

/// Every cell of `row` in `it`, appended to `out`; how many.
fn collect(
    it: &mut dyn CellIter,
    first: &[u8],
    row: &[u8],
    source: usize,
    out: &mut Vec<Found>,
) -> Result<usize> {
    it.seek(first)?;
    let mut n = 0;
    while let Some(cur) = it.current() {
        if parse(cur.key)?.row != row {
            break;
        }
        out.push(Found {
            source,
            key: cur.key.to_vec(),
            value: cur.value.to_vec(),
            tags: cur.tags.to_vec(),
        });
        n += 1;
        it.next()?;
    }
    Ok(n)
}

impl DbInner {
    pub(super) fn explain(&self, table: &TableName, get: &Get) -> Result<Explanation> {
        get.validate()?;
        let (read_point, sv) = self.read_view(get.read_point);
        let t = table_info(&sv, table)?;
        let fams = selected_families(t, &get.selection)?;
        let now_ms = self.opts.clock.now_ms();
        let first = KeyRef::first_on_row(&get.row).encode();
        let span = RowSpan {
            start: &get.row,
            stop: Some(&get.row),
            inclusive_stop: true,
        };
        let mut sources = Vec::new();
        let mut found = Vec::new();
        for (family, only_column) in fams.iter() {
            let Some(info) = t.families.iter().find(|f| f.id == *family) else {
                continue;
            };
            let name = info.descriptor.name.as_str();
            let add = |sources: &mut Vec<ExplainSource>, kind, decision| {
                sources.push(ExplainSource {
                    family: name.to_owned(),
                    kind,
                    decision,
                });
                sources.len() - 1
            };
            if let Some(m) = sv.mems.get(family) {
                let mems = std::iter::once((SourceKind::ActiveMemstore, &m.active)).chain(
                    m.frozen
                        .iter()
                        .enumerate()
                        .map(|(index, f)| (SourceKind::FrozenMemstore { index }, f)),
                );
                for (kind, mem) in mems {
                    let i = add(&mut sources, kind, SourceDecision::Read { cells: 0 });
                    let n = collect(&mut mem.iter(), &first, &get.row, i, &mut found)?;
                    sources[i].decision = SourceDecision::Read { cells: n };
                }
            }
            let Some(levels) = sv.version.levels(*family) else {
                continue;
            };
            let newer_count = newer_versions_count(&info.descriptor);
            for (level, files) in levels.iter().enumerate() {
                for f in files {
                    let overlaps = span.overlaps(f);
                    if !overlaps && level > 0 {
                        continue;
                    }
                    let kind = SourceKind::File {
                        number: f.number,
                        level: f.level,
                        rows: (row_of(&f.smallest), row_of(&f.largest)),
                        timestamps: (f.min_ts, f.max_ts),
                        entries: f.entries,
                        deletes: f.deletes,
                    };
                    let decision = if !overlaps {
                        Some(SourceDecision::KeyRange)
                    } else if !time_overlaps(f, &get.time_range, newer_count) {
                        Some(SourceDecision::TimeRange)
                    } else {
                        None
                    };
                    if let Some(d) = decision {
                        add(&mut sources, kind, d);
                        continue;
                    }
                    let r = self.reader(*family, f.number)?;
                    let maybe = match only_column {
                        Some(q) => r.may_contain_column(&get.row, q)?,
                        None => r.may_contain_row(&get.row)?,
                    };
                    if !maybe {
                        add(&mut sources, kind, SourceDecision::Bloom);
                        continue;
                    }
                    let i = add(&mut sources, kind, SourceDecision::Read { cells: 0 });
                    let mut it = HFileCellIter::new(r.iter());
                    let n = collect(&mut it, &first, &get.row, i, &mut found)?;
                    sources[i].decision = SourceDecision::Read { cells: n };
                }
            }
        }
        // Key order across sources; the sort is stable, so a key in two sources keeps the
        // order the merge gives its sources (memstores first, then files by level).
        found.sort_by(|a, b| compare_keys(&a.key, &b.key));
        let mut resolvers: Vec<(&str, RowResolver<'_>)> = t
            .families
            .iter()
            .map(|f| {
                let name = f.descriptor.name.as_str();
                let params = ReadParams::for_get(get, name, read_point, now_ms);
                (
                    name,
                    RowResolver::new(&f.descriptor, params).with_range_deletes(&f.range_deletes),
                )
            })
            .collect();
        let mut cells: Vec<ExplainedCell> = Vec::with_capacity(found.len());
        for f in &found {
            let key = parse(&f.key)?;
            let family = std::str::from_utf8(key.family).unwrap_or_default();
            let Some((_, r)) = resolvers.iter_mut().find(|(n, _)| *n == family) else {
                continue;
            };
            let verdict = r.push_with_tags(&key, &f.tags);
            let masked_by = if verdict == Verdict::Masked {
                r.mask_cause(key.timestamp, key.seq)
                    .and_then(|(ty, seq)| marker_index(&cells, &key, ty, seq))
            } else {
                None
            };
            let value = if key.cell_type() == Some(CellType::Put) {
                f.value.as_slice()
            } else {
                &[]
            };
            cells.push(ExplainedCell {
                source: f.source,
                cell: Cell::from_key(&key, value)?,
                seq: key.seq,
                verdict,
                masked_by,
                filtered: false,
            });
        }
        let row = self.get_row(&sv, t, read_point, get, Some(now_ms))?;
        self.count_gets(1, u64::from(row.is_some()));
        if get.filter.is_some() {
            mark_filtered(&mut cells, row.as_ref().map_or(&[][..], |r| r.cells()));
        }
        Ok(Explanation {
            read_point,
            now_ms,
            sources,
            cells,
            row,
        })
    }
}

/// Mark the cells resolution returned that the filter left out of `kept` (the row's cells, in
/// the same order). Matched by column, timestamp and type, not value: a filter may rewrite
/// values (KeyOnlyFilter empties them).
fn mark_filtered(cells: &mut [ExplainedCell], kept: &[Cell]) {
    let mut kept = kept.iter().peekable();
    for c in cells.iter_mut().filter(|c| c.verdict == Verdict::Include) {
        let same = kept.peek().is_some_and(|k| {
            k.family == c.cell.family
                && k.qualifier == c.cell.qualifier
                && k.timestamp == c.cell.timestamp
                && k.cell_type == c.cell.cell_type
        });
        if same {
            kept.next();
        } else {
            c.filtered = true;
        }
    }
}

/// The row of an encoded key (empty if it does not decode: the file's bounds are only shown).
fn row_of(key: &[u8]) -> Vec<u8> {
    KeyRef::parse(key)
        .map(|k| k.row.to_vec())
        .unwrap_or_default()
}

/// The marker of type `ty` written at `seq` that masks the put `put`, among the cells resolved
/// before it: of the put's family, of its column for the column kinds, covering its timestamp.
fn marker_index(
    cells: &[ExplainedCell],
    put: &KeyRef<'_>,
    ty: CellType,
    seq: SeqNo,
) -> Option<usize> {
    cells.iter().position(|c| {
        let m = &c.cell;
        c.seq == seq
            && m.cell_type == ty
            && m.family.as_bytes() == put.family
            && match ty {
                CellType::Delete | CellType::DeleteFamilyVersion => m.timestamp == put.timestamp,
                CellType::DeleteColumn => {
                    m.qualifier == put.qualifier && m.timestamp >= put.timestamp
                }
                CellType::DeleteFamily => m.timestamp >= put.timestamp,
                CellType::Put => false,
            }
            && (ty != CellType::Delete || m.qualifier == put.qualifier)
    })
}
