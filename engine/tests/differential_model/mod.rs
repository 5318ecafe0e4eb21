//! The reference model of `tests/differential.rs`: every write ever made, kept as a flat list
//! (nothing is ever physically removed), and reads answered by brute force straight from
//! MISSION.md's "The read semantics in detail" and the choices of SPEC.md §13.
//!
//! Written independently of `engine/src/read/resolve.rs` on purpose: quadratic, no merging, no
//! iterators over sorted sources — for each column, collect the versions the read point sees,
//! apply the markers by the family's masking rule, then TTL / MIN_VERSIONS, the time range and
//! the version limits. Two implementations of one rule set that agree on thousands of random
//! histories are far more convincing than one implementation and its own unit tests.
//!
//! The model knows no flush, reopen or file: a NEW_VERSION_BEHAVIOR family must match it
//! exactly whatever happened physically. A classic family also matches it exactly as long as
//! nothing purges cells (today: flush writes memstores as they are and there is no compaction);
//! once compaction exists, [`Model::compaction_allows`] says which differences are legal.

use std::collections::{BTreeMap, BTreeSet};

use cellar::format::CellType;

/// The TTL of the families that have one in sequences on the wall clock. Explicit timestamps
/// are 1..=10 (1970), always far past it; "latest" timestamps are the current time, never
/// within a day of expiring while a test runs. So the clock moving during a run cannot flip a
/// result. Sequences on a manual clock draw short TTLs that the clock crosses on purpose.
pub const TTL_MS: u64 = 24 * 3600 * 1000;

/// A family's settings as the model needs them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FamSpec {
    /// Name (families are numbered in name order).
    pub name: String,
    /// VERSIONS.
    pub versions: u32,
    /// MIN_VERSIONS.
    pub min_versions: u32,
    /// KEEP_DELETED_CELLS TRUE (otherwise FALSE).
    pub keep_deleted: bool,
    /// NEW_VERSION_BEHAVIOR.
    pub nvb: bool,
    /// TTL in milliseconds, if any.
    pub ttl: Option<u64>,
}

/// One cell ever written, marker or put.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub row: Vec<u8>,
    pub fam: usize,
    pub qual: Vec<u8>,
    pub ts: u64,
    pub ty: CellType,
    /// Sequence number of the write (the model's own counter: one per write call).
    pub seq: u64,
    /// Position inside the write: two cells with equal keys in one batch (same seq) are one
    /// key in the engine's memstore, where the later one replaces the earlier.
    pub sub: u32,
    pub value: Vec<u8>,
    /// The put's per-cell TTL (`Put::ttl`), in ms. Once it has run out (SPEC §13 rule 7) the
    /// put is no version at all — it counts toward nothing and shadows no older write at its
    /// timestamp — and only raw reads may see it, until a flush drops it.
    pub cell_ttl: Option<u64>,
    /// A row-range delete's DeleteFamily marker in this row (SPEC §13 rule 8,
    /// [`Model::apply_range_delete`]): it masks as the marker would, but no read shows it, raw
    /// ones included (the delete is not a cell).
    pub range: bool,
}

impl Entry {
    /// Past its per-cell TTL at `now` (the engine's test: `ts + ttl < now`).
    pub fn cell_expired(&self, now: u64) -> bool {
        self.cell_ttl
            .is_some_and(|ttl| self.ts.saturating_add(ttl) < now)
    }
}

/// A cell of a write, before it gets its sequence number.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewCell {
    pub row: Vec<u8>,
    pub fam: usize,
    pub qual: Vec<u8>,
    pub ts: u64,
    pub ty: CellType,
    pub value: Vec<u8>,
    /// See [`Entry::cell_ttl`].
    pub cell_ttl: Option<u64>,
}

/// A compaction (or a purging flush) the sequence ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Compaction {
    /// Model sequence number when it ran: it saw every write up to here.
    pub seq: u64,
    /// The family compacted, or all.
    pub family: Option<usize>,
    /// Major: markers (and what they mask) are purged unless KEEP_DELETED_CELLS.
    pub purges_markers: bool,
    /// It may have read only some files (a picked L0 → L1 compaction): a marker it purged can
    /// uncover puts written before it that sat in newer files or the memstore.
    pub partial: bool,
}

/// Family index → `None` (the whole family) or chosen qualifiers. Empty: every family.
pub type Selection = BTreeMap<usize, Option<BTreeSet<Vec<u8>>>>;

/// The parts of a Get or Scan that decide cells (row bounds and limit are the caller's).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadQ {
    pub selection: Selection,
    /// Query versions (1 by default, `u32::MAX` for all).
    pub max_versions: u32,
    /// `[min, max)`.
    pub range: (u64, u64),
    pub raw: bool,
    /// Model sequence number read at.
    pub read_point: u64,
    /// Wall clock for TTL (ms).
    pub now: u64,
}

/// One returned cell.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutCell {
    pub row: Vec<u8>,
    pub family: String,
    pub qual: Vec<u8>,
    pub ts: u64,
    pub ty: CellType,
    pub value: Vec<u8>,
}

/// A returned row.
pub type OutRow = (Vec<u8>, Vec<OutCell>);

pub use crate::conformance_common::text;

/// `row/family:qualifier@ts=value` for a put, `row/family:qualifier@ts:Type` for a marker (the
/// conformance tests' notation).
pub fn render(c: &OutCell) -> String {
    crate::conformance_common::render_cell(&c.row, &c.family, &c.qual, c.ts, c.ty, &c.value)
}

/// Render rows, one line per cell, rows separated by their key.
pub fn render_rows(rows: &[OutRow]) -> Vec<String> {
    let mut out = Vec::new();
    for (k, cells) in rows {
        out.push(format!("-- row {}", text(k)));
        out.extend(cells.iter().map(render));
    }
    out
}

fn is_family_marker(ty: CellType) -> bool {
    matches!(ty, CellType::DeleteFamily | CellType::DeleteFamilyVersion)
}

/// One version of a column as a read sees it: the put that wins its timestamp.
#[derive(Debug, Clone)]
struct Version<'a> {
    put: &'a Entry,
    masked: bool,
}

/// The reference model.
#[derive(Debug, Clone)]
pub struct Model {
    pub fams: Vec<FamSpec>,
    pub entries: Vec<Entry>,
    /// Last sequence number given out.
    pub seq: u64,
    pub compactions: Vec<Compaction>,
}

impl Model {
    /// An empty table with these families (in name order).
    pub fn new(fams: Vec<FamSpec>) -> Self {
        Model {
            fams,
            entries: Vec::new(),
            seq: 0,
            compactions: Vec::new(),
        }
    }

    /// Apply one write call: all its cells share one new sequence number. Returns it.
    pub fn apply(&mut self, cells: Vec<NewCell>) -> u64 {
        self.seq += 1;
        let seq = self.seq;
        for (i, c) in cells.into_iter().enumerate() {
            self.entries.push(Entry {
                row: c.row,
                fam: c.fam,
                qual: c.qual,
                ts: c.ts,
                ty: c.ty,
                seq,
                sub: i as u32,
                value: c.value,
                cell_ttl: c.cell_ttl,
                range: false,
            });
        }
        seq
    }

    /// A row-range delete (`Table::delete_rows_with`, SPEC §13 rule 8) of families `fams` at
    /// `ts`: one write, which is to each row of its range — written before it or after — what a
    /// DeleteFamily marker at `ts` and its seq would be. The rows a sequence can write are
    /// known, so `rows` (those of the range) get their markers now, flagged so no read shows
    /// them. Returns the delete's sequence number.
    pub fn apply_range_delete(&mut self, rows: &[&[u8]], fams: &[usize], ts: u64) -> u64 {
        self.seq += 1;
        let seq = self.seq;
        for row in rows {
            for &fam in fams {
                self.entries.push(Entry {
                    row: row.to_vec(),
                    fam,
                    qual: Vec::new(),
                    ts,
                    ty: CellType::DeleteFamily,
                    seq,
                    sub: 0,
                    value: Vec::new(),
                    cell_ttl: None,
                    range: true,
                });
            }
        }
        seq
    }

    /// Every row key ever written.
    pub fn rows(&self) -> BTreeSet<Vec<u8>> {
        self.entries.iter().map(|e| e.row.clone()).collect()
    }

    /// The cells of `(row, fam)` a read at `rp` sees, one per distinct key: of cells with equal
    /// (qualifier, ts, type, seq) — only possible inside one batch — the later one.
    fn view(&self, row: &[u8], fam: usize, rp: u64) -> Vec<&Entry> {
        let mut by_key: BTreeMap<(Vec<u8>, u64, u8, u64), &Entry> = BTreeMap::new();
        for e in &self.entries {
            if e.row != row || e.fam != fam || e.seq > rp {
                continue;
            }
            let k = (e.qual.clone(), e.ts, e.ty as u8, e.seq);
            match by_key.get(&k) {
                Some(old) if old.sub > e.sub => {}
                _ => {
                    by_key.insert(k, e);
                }
            }
        }
        by_key.into_values().collect()
    }

    /// Rule 4 (what a marker covers), rule 5/6 (classic: whenever written; NVB: only puts with
    /// a smaller sequence number) and rule 8 (KEEP_DELETED_CELLS: a marker outside the read's
    /// time range is ignored).
    fn masks(&self, m: &Entry, p: &Entry, range: (u64, u64)) -> bool {
        let f = &self.fams[p.fam];
        let covers = match m.ty {
            CellType::Put => false,
            CellType::Delete => m.qual == p.qual && m.ts == p.ts,
            CellType::DeleteColumn => m.qual == p.qual && m.ts >= p.ts,
            CellType::DeleteFamily => m.ts >= p.ts,
            CellType::DeleteFamilyVersion => m.ts == p.ts,
        };
        if !covers {
            return false;
        }
        // NVB: only puts with a smaller sequence number — so not a put of the same batch.
        if f.nvb && m.seq <= p.seq {
            return false;
        }
        if f.keep_deleted && !(range.0 <= m.ts && m.ts < range.1) {
            return false;
        }
        true
    }

    /// The versions of one column, newest timestamp first: the winning put of each timestamp
    /// (rule 2: the larger sequence number, then the later cell of one batch), and whether a
    /// marker masks it.
    fn versions<'a>(
        &'a self,
        view: &[&'a Entry],
        qual: &[u8],
        range: (u64, u64),
        now: u64,
    ) -> Vec<Version<'a>> {
        let mut winners: BTreeMap<u64, &Entry> = BTreeMap::new();
        for e in view
            .iter()
            .filter(|e| e.ty == CellType::Put && e.qual == qual && !e.cell_expired(now))
        {
            match winners.get(&e.ts) {
                Some(w) if (w.seq, w.sub) > (e.seq, e.sub) => {}
                _ => {
                    winners.insert(e.ts, e);
                }
            }
        }
        winners
            .into_values()
            .rev()
            .map(|p| Version {
                put: p,
                masked: view.iter().any(|m| self.masks(m, p, range)),
            })
            .collect()
    }

    fn expired(&self, fam: usize, ts: u64, now: u64) -> bool {
        self.fams[fam]
            .ttl
            .is_some_and(|ttl| ts < now.saturating_sub(ttl))
    }

    fn out(&self, e: &Entry) -> OutCell {
        OutCell {
            row: e.row.clone(),
            family: self.fams[e.fam].name.clone(),
            qual: e.qual.clone(),
            ts: e.ts,
            ty: e.ty,
            value: e.value.clone(),
        }
    }

    /// The cells one family of one row returns.
    pub fn read_family(
        &self,
        row: &[u8],
        fam: usize,
        cols: Option<&BTreeSet<Vec<u8>>>,
        q: &ReadQ,
    ) -> Vec<OutCell> {
        let view = self.view(row, fam, q.read_point);
        let in_range = |ts: u64| q.range.0 <= ts && ts < q.range.1;
        let wanted = |qual: &[u8]| cols.is_none_or(|c| c.contains(qual));
        if q.raw {
            // Rule 9 and §13: read point, time range and columns only (family markers always);
            // in cell order: qualifier ascending, ts descending, type descending, seq descending.
            let mut cells: Vec<&Entry> = view
                .iter()
                .copied()
                .filter(|e| {
                    !e.range && in_range(e.ts) && (is_family_marker(e.ty) || wanted(&e.qual))
                })
                .collect();
            cells.sort_by(|a, b| {
                a.qual
                    .cmp(&b.qual)
                    .then(b.ts.cmp(&a.ts))
                    .then((b.ty as u8).cmp(&(a.ty as u8)))
                    .then(b.seq.cmp(&a.seq))
            });
            return cells.into_iter().map(|e| self.out(e)).collect();
        }
        let f = &self.fams[fam];
        let quals: BTreeSet<&[u8]> = view
            .iter()
            .filter(|e| e.ty == CellType::Put && wanted(&e.qual))
            .map(|e| e.qual.as_slice())
            .collect();
        let mut out = Vec::new();
        for qual in quals {
            let versions = self.versions(&view, qual, q.range, q.now);
            let keep: Vec<&Entry> = if f.nvb {
                // Rule 6 / §13: VERSIONS over every version the read point sees, deleted ones
                // included, whatever the time range; MIN_VERSIONS counted the same way; the
                // query's limit counts returned cells after the time range.
                versions
                    .iter()
                    .take(f.versions as usize)
                    .enumerate()
                    .filter(|(i, v)| {
                        !v.masked
                            && ((*i as u32) < f.min_versions || !self.expired(fam, v.put.ts, q.now))
                    })
                    .map(|(_, v)| v.put)
                    .filter(|p| in_range(p.ts))
                    .take(q.max_versions as usize)
                    .collect()
            } else {
                // Rule 5 / §13: deleted versions do not count; TTL with MIN_VERSIONS over the
                // unmasked versions whatever the time range; then the time range; then
                // min(query versions, VERSIONS).
                versions
                    .iter()
                    .filter(|v| !v.masked)
                    .enumerate()
                    .filter(|(i, v)| {
                        (*i as u32) < f.min_versions || !self.expired(fam, v.put.ts, q.now)
                    })
                    .map(|(_, v)| v.put)
                    .filter(|p| in_range(p.ts))
                    .take(q.max_versions.min(f.versions) as usize)
                    .collect()
            };
            out.extend(keep.into_iter().map(|e| self.out(e)));
        }
        out
    }

    /// The cells a read returns for `row`, families in name order.
    pub fn read_row(&self, row: &[u8], q: &ReadQ) -> Vec<OutCell> {
        let mut order: Vec<usize> = (0..self.fams.len()).collect();
        order.sort_by(|&a, &b| self.fams[a].name.cmp(&self.fams[b].name));
        let mut out = Vec::new();
        for f in order {
            if q.selection.is_empty() {
                out.extend(self.read_family(row, f, None, q));
            } else if let Some(cols) = q.selection.get(&f) {
                out.extend(self.read_family(row, f, cols.as_ref(), q));
            }
        }
        out
    }

    /// A scan: rows accepted by `in_bounds`, ascending, empty ones left out, at most `limit`.
    pub fn scan(
        &self,
        in_bounds: impl Fn(&[u8]) -> bool,
        limit: Option<usize>,
        q: &ReadQ,
    ) -> Vec<OutRow> {
        let mut out = Vec::new();
        for row in self.rows() {
            if limit.is_some_and(|l| out.len() >= l) {
                break;
            }
            if !in_bounds(&row) {
                continue;
            }
            let cells = self.read_row(&row, q);
            if !cells.is_empty() {
                out.push((row, cells));
            }
        }
        out
    }

    /// Rule 4 / §13: the timestamp a delete of the newest version takes — the newest version a
    /// plain Get of the column returns at `rp`, or `None` (the write then uses its "now").
    pub fn newest_ts(&self, row: &[u8], fam: usize, qual: &[u8], rp: u64, now: u64) -> Option<u64> {
        self.newest(row, fam, qual, rp, now).map(|c| c.ts)
    }

    /// The newest visible version of a column, as a plain Get of it returns it at `rp`: what
    /// increments, appends and check-and-mutate conditions read (MISSION rule 11).
    pub fn newest(
        &self,
        row: &[u8],
        fam: usize,
        qual: &[u8],
        rp: u64,
        now: u64,
    ) -> Option<OutCell> {
        let q = ReadQ {
            selection: Selection::new(),
            max_versions: 1,
            range: (0, u64::MAX),
            raw: false,
            read_point: rp,
            now,
        };
        let cols: BTreeSet<Vec<u8>> = [qual.to_vec()].into();
        self.read_family(row, fam, Some(&cols), &q)
            .into_iter()
            .next()
    }

    fn fam_index(&self, name: &str) -> Option<usize> {
        self.fams.iter().position(|f| f.name == name)
    }

    fn find_put(&self, c: &OutCell) -> Option<&Entry> {
        let fam = self.fam_index(&c.family)?;
        self.entries.iter().find(|e| {
            e.ty == CellType::Put
                && e.fam == fam
                && e.row == c.row
                && e.qual == c.qual
                && e.ts == c.ts
                && e.value == c.value
        })
    }

    /// Whether any flush or compaction may have purged cells of family `fam`.
    pub fn compactions_of_family(&self, fam: usize) -> bool {
        self.compactions_of(fam).next().is_some()
    }

    fn compactions_of(&self, fam: usize) -> impl Iterator<Item = &Compaction> + '_ {
        self.compactions
            .iter()
            .filter(move |c| c.family.is_none_or(|f| f == fam))
    }

    /// A put the model masks that the engine may show once compaction exists: every marker
    /// masking it was purged by a major compaction that ran after the marker and before the
    /// put was written (MISSION rule 5: "a put written after the delete with an older
    /// timestamp stays invisible — until a major compaction purges the marker").
    fn uncovered(&self, c: &OutCell, q: &ReadQ) -> bool {
        let Some(p) = self.find_put(c) else {
            return false;
        };
        let f = &self.fams[p.fam];
        if f.nvb || f.keep_deleted || p.seq > q.read_point {
            return false;
        }
        let view = self.view(&p.row, p.fam, q.read_point);
        let markers: Vec<&&Entry> = view.iter().filter(|m| self.masks(m, p, q.range)).collect();
        markers.iter().all(|m| {
            self.compactions_of(p.fam)
                .any(|k| k.purges_markers && m.seq <= k.seq && (k.partial || k.seq < p.seq))
        })
    }

    /// An expired version the model keeps visible as one of the MIN_VERSIONS newest that the
    /// engine may hide: a newer put of the column that the model masks was uncovered by a
    /// purged marker ([`Model::uncovered`]), and MIN_VERSIONS counts it whatever the read's
    /// time range (SPEC §13), so the expired version falls out of the newest. Found by seed
    /// 226579389097048: a Delete at 10, a major compaction purging it, then puts at 8 and 10
    /// and a scan of `[7, 9)`.
    fn outranked_by_uncovered(&self, c: &OutCell, q: &ReadQ) -> bool {
        let Some(p) = self.find_put(c) else {
            return false;
        };
        let f = &self.fams[p.fam];
        if f.nvb || f.min_versions == 0 || !self.expired(p.fam, p.ts, q.now) {
            return false;
        }
        let view = self.view(&p.row, p.fam, q.read_point);
        self.versions(&view, &p.qual, q.range, q.now)
            .iter()
            .any(|v| v.put.ts > p.ts && v.masked && self.uncovered(&self.out(v.put), q))
    }

    /// Classic mode: a put shadowed by a newer write at the same timestamp shows again once a
    /// flush or compaction trimmed that newer write as beyond VERSIONS while the older one
    /// sat in another file (a time-ranged read, which filters by time before it counts
    /// versions, then finds it). HBase's flush and compaction behave the same way.
    fn resurfaced_duplicate(&self, c: &OutCell, q: &ReadQ) -> bool {
        let Some(p) = self.find_put(c) else {
            return false;
        };
        if self.fams[p.fam].nvb || p.seq > q.read_point {
            return false;
        }
        self.entries.iter().any(|n| {
            n.ty == CellType::Put
                && !n.cell_expired(q.now)
                && n.fam == p.fam
                && n.row == p.row
                && n.qual == p.qual
                && n.ts == p.ts
                && (n.seq, n.sub) > (p.seq, p.sub)
                && n.seq <= q.read_point
                && self.trimmable(
                    &OutCell {
                        value: n.value.clone(),
                        ..c.clone()
                    },
                    q,
                )
        })
    }

    /// A version the model returns that the engine may have dropped: a compaction that saw the
    /// put would not have kept it — it was beyond VERSIONS, masked, or expired past
    /// MIN_VERSIONS at that point — and only later writes (a delete of newer versions) made the
    /// model show it again. "What a full read at the compaction's point returns" is what that
    /// compaction keeps.
    fn trimmable(&self, c: &OutCell, q: &ReadQ) -> bool {
        let Some(p) = self.find_put(c) else {
            return false;
        };
        let f = &self.fams[p.fam];
        if f.nvb {
            return false;
        }
        self.compactions_of(p.fam).any(|k| {
            if k.seq < p.seq {
                return false;
            }
            // A flush or minor compaction reads only some files: without the marker that
            // masks a newer version (it sits in another file), that version counts, and the
            // put is trimmed as beyond VERSIONS (HBase's minor compaction does the same). The
            // most a subset can count is every newer put up to the compaction, masked or not.
            // A put with a per-cell TTL counts for no purge: expired it is no version, alive it
            // is judged as absent (SPEC §20.2 rule 6).
            let newer: BTreeSet<u64> = self
                .entries
                .iter()
                .filter(|e| {
                    e.ty == CellType::Put
                        && e.cell_ttl.is_none()
                        && e.fam == p.fam
                        && e.row == p.row
                        && e.qual == p.qual
                        && e.ts > p.ts
                        && e.seq <= k.seq
                })
                .map(|e| e.ts)
                .collect();
            if newer.len() >= f.versions as usize {
                return true;
            }
            // The same partial view ranks an expired put higher than MIN_VERSIONS protects.
            if self.expired(p.fam, p.ts, q.now) && newer.len() >= f.min_versions as usize {
                return true;
            }
            let at = ReadQ {
                selection: Selection::new(),
                max_versions: u32::MAX,
                range: (0, u64::MAX),
                raw: false,
                read_point: k.seq,
                now: q.now,
            };
            let cols: BTreeSet<Vec<u8>> = [p.qual.clone()].into();
            !self
                .read_family(&p.row, p.fam, Some(&cols), &at)
                .iter()
                .any(|kept| kept.ts == p.ts && kept.value == p.value)
        })
    }

    /// Whether the engine's cells of one row may differ from the model's as they do, given the
    /// compactions that ran. NEW_VERSION_BEHAVIOR families must match exactly; classic ones may
    /// lose trimmed versions and show puts uncovered by a purged marker; a raw read may only
    /// lose cells (compaction never creates one).
    pub fn allowed_row(
        &self,
        q: &ReadQ,
        expected: &[OutCell],
        actual: &[OutCell],
    ) -> Result<(), String> {
        for (fi, f) in self.fams.iter().enumerate() {
            let e: Vec<&OutCell> = expected.iter().filter(|c| c.family == f.name).collect();
            let a: Vec<&OutCell> = actual.iter().filter(|c| c.family == f.name).collect();
            if e == a {
                continue;
            }
            if self.compactions_of(fi).next().is_none() {
                return Err(format!("family {} must match exactly", f.name));
            }
            // Raw reads show what is physically stored, which purges change in every mode:
            // cells may only disappear.
            if q.raw {
                let mut it = e.iter();
                for c in &a {
                    if !it.any(|x| x == c) {
                        return Err(format!("raw cell {} is not in the model", render(c)));
                    }
                }
                continue;
            }
            if f.nvb {
                return Err(format!("family {} must match exactly", f.name));
            }
            let quals: BTreeSet<&[u8]> = e.iter().chain(&a).map(|c| c.qual.as_slice()).collect();
            for qual in quals {
                let ec: Vec<&&OutCell> = e.iter().filter(|c| c.qual == qual).collect();
                let ac: Vec<&&OutCell> = a.iter().filter(|c| c.qual == qual).collect();
                if ac.len() > q.max_versions.min(f.versions) as usize
                    || ac.windows(2).any(|w| w[0].ts <= w[1].ts)
                {
                    return Err(format!(
                        "column {}: too many or unordered versions",
                        text(qual)
                    ));
                }
                let mut any_uncovered = false;
                for c in &ac {
                    if ec.contains(c) {
                        continue;
                    }
                    // A time-ranged read counts versions after the time filter (classic, §13):
                    // when a newer in-range version was trimmed, an older one moves up.
                    let revealed = ec
                        .iter()
                        .any(|e| e.ts > c.ts && !ac.contains(e) && self.trimmable(e, q));
                    if !revealed && !self.uncovered(c, q) && !self.resurfaced_duplicate(c, q) {
                        return Err(format!(
                            "{} is masked and no compaction uncovers it",
                            render(c)
                        ));
                    }
                    any_uncovered = true;
                }
                for c in &ec {
                    // A missing version is legal when compaction trimmed it, or when an
                    // uncovered newer put pushed it out of the version limit or (outside the
                    // time range too) out of the MIN_VERSIONS newest.
                    if !ac.contains(c)
                        && !any_uncovered
                        && !self.trimmable(c, q)
                        && !self.outranked_by_uncovered(c, q)
                    {
                        return Err(format!(
                            "{} is missing and no compaction drops it",
                            render(c)
                        ));
                    }
                }
            }
        }
        Ok(())
    }

    /// [`Model::allowed_row`] over a whole read: `expected_all` is the model's answer without the
    /// row limit (rows may vanish or appear, which shifts which rows a limit lets through).
    pub fn compaction_allows(
        &self,
        q: &ReadQ,
        limit: Option<usize>,
        expected_all: &[OutRow],
        actual: &[OutRow],
    ) -> Result<(), String> {
        self.compaction_allows_in_order(q, limit, expected_all, actual, false)
    }

    /// [`Model::compaction_allows`] for rows in descending key order when `descending` (a
    /// reversed scan: `expected_all` and `actual` both run from the last row down).
    pub fn compaction_allows_in_order(
        &self,
        q: &ReadQ,
        limit: Option<usize>,
        expected_all: &[OutRow],
        actual: &[OutRow],
        descending: bool,
    ) -> Result<(), String> {
        if limit.is_some_and(|l| actual.len() > l) {
            return Err("more rows than the limit".into());
        }
        let before = |a: &[u8], b: &[u8]| if descending { a > b } else { a < b };
        let mut i = 0;
        for (key, cells) in actual {
            while i < expected_all.len() && before(&expected_all[i].0, key) {
                self.allowed_row(q, &expected_all[i].1, &[])?;
                i += 1;
            }
            if i < expected_all.len() && expected_all[i].0 == *key {
                self.allowed_row(q, &expected_all[i].1, cells)?;
                i += 1;
            } else {
                self.allowed_row(q, &[], cells)?;
            }
        }
        if limit.is_none_or(|l| actual.len() < l) {
            for (_, cells) in &expected_all[i..] {
                self.allowed_row(q, cells, &[])?;
            }
        }
        Ok(())
    }
}
