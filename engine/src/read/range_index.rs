//! A family's row-range deletes (SPEC.md §13 rule 8) indexed for reads: cut at every start and
//! stop into disjoint pieces of the row space, each listing the deletes that cover all of it,
//! so a read finds the deletes covering a row with one binary search, and a scan reuses the
//! answer for every row of the same piece (or of the same gap between pieces) with two
//! comparisons. Built once per change of the family's deletes, from the previous index
//! (`RangeDeletes::updated`: its orders by start and stop carry over); `SuperVersion::build`
//! reuses the previous index when they did not change.
//!
//! The first version looked at every delete for every row: a scan of 100,000 rows of one
//! column ran 48.4M rows/s with none, 20.2M with 16 live deletes that covered none of its rows
//! and 2.0M with 256 (`cargo bench -p cellar-benches --bench read -- scan_range_deletes`);
//! with the index, 49.8M with none and 43.9M, 43.9M and 44.5M with 1, 16 and 256.
//! The pieces take up to (2 × deletes) × deletes entries when every delete overlaps every other
//! (nested ranges); deletes that do not overlap take one entry each.

use cellar_format::cell::compare_bytes;

use crate::types::{RangeDelete, SeqNo, Timestamp};

/// A bound of a piece: the start (or, with `stop`, the stop) of delete `at` of the list; the
/// pieces keep no row of their own, so building them allocates only their lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Bound {
    at: u32,
    stop: bool,
}

impl Bound {
    #[inline]
    fn row(self, list: &[RangeDelete]) -> &[u8] {
        let d = &list[self.at as usize];
        if self.stop {
            &d.stop
        } else {
            &d.start
        }
    }
}

/// Rows `[start, stop)` (`stop` `None`: to the end), covered by the deletes of
/// `covers[previous piece's end..end]`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Piece {
    start: Bound,
    stop: Option<Bound>,
    end: u32,
}

/// See the module docs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RangeDeletes {
    list: Vec<RangeDelete>,
    /// Positions in `list`, by start.
    by_start: Vec<u32>,
    /// Positions in `list` of the deletes with a stop, by stop.
    by_stop: Vec<u32>,
    /// Covered pieces only, by start; the rows between them are covered by nothing.
    pieces: Vec<Piece>,
    /// The pieces' covering deletes, as (timestamp, seq) pairs, one run a piece.
    covers: Vec<(Timestamp, SeqNo)>,
}

/// Where a row falls: the piece's covering deletes and the bounds of the rows that share them
/// (the piece, or the gap between two pieces).
#[derive(Debug, Clone, Copy)]
pub struct Located<'a> {
    /// The deletes covering the row (empty in a gap).
    pub covers: &'a [(Timestamp, SeqNo)],
    /// First row of the same answer.
    pub lo: &'a [u8],
    /// First row past it; `None`: the end.
    pub hi: Option<&'a [u8]>,
}

impl RangeDeletes {
    /// Index `list` (any order), in one sweep over the sorted bounds: a delete joins the set of
    /// those covering the current piece at its start and leaves it at its stop, so the work is
    /// the sort plus the pieces' lists (one entry a piece for deletes that do not overlap).
    /// The first version asked every delete about every bound: (2 × deletes) × deletes
    /// comparisons at each change, 91% of the time of 1,500 row-range deletes written one
    /// after another (`cellar bench --benchmarks fillseq,deleterange --deletes 1500
    /// --range-width 10`, perf), whose rate fell to 72 a second at 2,000.
    pub fn new(list: Vec<RangeDelete>) -> Self {
        let mut by_start: Vec<u32> = (0..list.len() as u32).collect();
        by_start.sort_unstable_by(|&a, &b| list[a as usize].start.cmp(&list[b as usize].start));
        let mut by_stop: Vec<u32> = (0..list.len() as u32)
            .filter(|&i| !list[i as usize].stop.is_empty())
            .collect();
        by_stop.sort_unstable_by(|&a, &b| list[a as usize].stop.cmp(&list[b as usize].stop));
        Self::sweep(list, by_start, by_stop)
    }

    /// The index of `list` (in seq order, as the manifest keeps a family's deletes), made
    /// from this one's when it holds the same deletes in seq order but for some added and
    /// some removed (a write or a compaction's edit changes a few): the orders by start and
    /// by stop are carried over and the added ones merged in, so no sort of them all is
    /// needed. At 5,000 live deletes written one after another the sorts were 39% of a
    /// delete's time (perf). Anything else is indexed anew.
    pub fn updated(&self, list: Vec<RangeDelete>) -> Self {
        let seq_ordered = |l: &[RangeDelete]| l.windows(2).all(|w| w[0].seq < w[1].seq);
        if !seq_ordered(&self.list) || !seq_ordered(&list) {
            return Self::new(list);
        }
        // Old position → new one (`u32::MAX`: gone); the new positions not in the old list.
        let mut moved = vec![u32::MAX; self.list.len()];
        let mut added: Vec<u32> = Vec::new();
        let mut i = 0;
        for (j, d) in list.iter().enumerate() {
            while i < self.list.len() && self.list[i].seq < d.seq {
                i += 1;
            }
            match self.list.get(i) {
                Some(o) if o.seq == d.seq => {
                    if o != d {
                        // One seq, two deletes: not a change this can follow.
                        return Self::new(list);
                    }
                    moved[i] = j as u32;
                    i += 1;
                }
                _ => added.push(j as u32),
            }
        }
        let kept_in_place = moved.iter().enumerate().all(|(i, &j)| j as usize == i);
        if kept_in_place && added.len() == 1 && added[0] as usize + 1 == list.len() {
            return self.with_last_added(list);
        }
        let merge =
            |old: &[u32], key: fn(&RangeDelete) -> &[u8], keep: fn(&RangeDelete) -> bool| {
                let mut add: Vec<u32> = added
                    .iter()
                    .copied()
                    .filter(|&j| keep(&list[j as usize]))
                    .collect();
                add.sort_unstable_by(|&a, &b| key(&list[a as usize]).cmp(key(&list[b as usize])));
                let mut out = Vec::with_capacity(old.len() + add.len());
                let mut add = add.into_iter().peekable();
                for &o in old {
                    let j = moved[o as usize];
                    if j == u32::MAX {
                        continue;
                    }
                    let at = key(&list[j as usize]);
                    while let Some(a) = add.next_if(|&a| key(&list[a as usize]) < at) {
                        out.push(a);
                    }
                    out.push(j);
                }
                out.extend(add);
                out
            };
        let by_start = merge(&self.by_start, |d| &d.start, |_| true);
        let by_stop = merge(&self.by_stop, |d| &d.stop, |d| !d.stop.is_empty());
        Self::sweep(list, by_start, by_stop)
    }

    /// The index of `list`, which is this one's list plus one delete at the end (a write's):
    /// the pieces outside its rows are kept as they are, those it meets are cut at its bounds
    /// and given it, and the gaps it meets become pieces of it alone. No sweep over every
    /// piece's covering set: at 5,000 live deletes the sweep was 28% of a delete's time.
    fn with_last_added(&self, list: Vec<RangeDelete>) -> Self {
        let at = (list.len() - 1) as u32;
        let row = |b: Bound| b.row(&list);
        let d = &list[at as usize];
        let mut by_start = self.by_start.clone();
        let i = by_start.partition_point(|&o| list[o as usize].start <= d.start);
        by_start.insert(i, at);
        let mut by_stop = self.by_stop.clone();
        if !d.stop.is_empty() {
            let i = by_stop.partition_point(|&o| list[o as usize].stop <= d.stop);
            by_stop.insert(i, at);
        }
        let start = Bound { at, stop: false };
        let stop = (!d.stop.is_empty()).then_some(Bound { at, stop: true });
        let cover = (d.ts, d.seq);
        let mut pieces = Vec::with_capacity(self.pieces.len() + 3);
        let mut covers = Vec::with_capacity(self.covers.len() + self.pieces.len() + 1);
        let mut push = |lo: Bound, hi: Option<Bound>, old: &[(Timestamp, SeqNo)], with: bool| {
            covers.extend_from_slice(old);
            if with {
                covers.push(cover);
            }
            pieces.push(Piece {
                start: lo,
                stop: hi,
                end: covers.len() as u32,
            });
        };
        // The first row of the delete's range not yet given a piece; `None` once it is done.
        // An empty range (only a damaged manifest holds one) covers no row.
        let mut next = match stop {
            Some(e) if row(e) <= row(start) => None,
            _ => Some(start),
        };
        let mut from = 0;
        for p in &self.pieces {
            let old = &self.covers[from..p.end as usize];
            from = p.end as usize;
            // The rows of the range before this piece: a gap, now the delete's alone.
            if let Some(n) = next {
                if row(n) < row(p.start) {
                    match stop {
                        Some(e) if row(e) <= row(p.start) => {
                            push(n, Some(e), &[], true);
                            next = None;
                        }
                        _ => {
                            push(n, Some(p.start), &[], true);
                            next = Some(p.start);
                        }
                    }
                }
            }
            let Some(n) = next else {
                push(p.start, p.stop, old, false);
                continue;
            };
            if p.stop.is_some_and(|s| row(s) <= row(n)) {
                // Wholly before the range.
                push(p.start, p.stop, old, false);
                continue;
            }
            if row(p.start) < row(n) {
                push(p.start, Some(n), old, false);
            }
            match stop {
                Some(e) if p.stop.is_none_or(|s| row(e) < row(s)) => {
                    // The range ends inside this piece.
                    push(n, Some(e), old, true);
                    push(e, p.stop, old, false);
                    next = None;
                }
                _ => {
                    push(n, p.stop, old, true);
                    next = match (p.stop, stop) {
                        (Some(s), Some(e)) if row(s) == row(e) => None,
                        (Some(s), _) => Some(s),
                        (None, _) => None,
                    };
                }
            }
        }
        if let Some(n) = next {
            push(n, stop, &[], true);
        }
        RangeDeletes {
            list,
            by_start,
            by_stop,
            pieces,
            covers,
        }
    }

    /// The pieces, from the deletes' positions by start and by stop.
    fn sweep(list: Vec<RangeDelete>, by_start: Vec<u32>, by_stop: Vec<u32>) -> Self {
        let row = |b: Bound| b.row(&list);
        // Every distinct bound, in order: the two orders merged.
        let mut bounds: Vec<Bound> = Vec::with_capacity(by_start.len() + by_stop.len());
        {
            let mut starts = by_start.iter().map(|&at| Bound { at, stop: false });
            let mut stops = by_stop.iter().map(|&at| Bound { at, stop: true });
            let (mut a, mut b) = (starts.next(), stops.next());
            loop {
                let next = match (a, b) {
                    (Some(x), Some(y)) if row(x) <= row(y) => {
                        a = starts.next();
                        x
                    }
                    (_, Some(y)) => {
                        b = stops.next();
                        y
                    }
                    (Some(x), None) => {
                        a = starts.next();
                        x
                    }
                    (None, None) => break,
                };
                if bounds.last().is_none_or(|&l| row(l) != row(next)) {
                    bounds.push(next);
                }
            }
        }
        let mut next = by_start.iter().map(|&i| &list[i as usize]).peekable();
        let mut active: Vec<&RangeDelete> = Vec::new();
        let mut pieces = Vec::new();
        let mut covers = Vec::new();
        for (i, &b) in bounds.iter().enumerate() {
            let start = row(b);
            // The deletes covering `start` cover the whole piece: every delete starts and
            // stops at a bound.
            active.retain(|d| d.stop.is_empty() || d.stop.as_slice() > start);
            while let Some(d) = next.next_if(|d| d.start.as_slice() <= start) {
                // An empty range (stop at or before start, which only a damaged manifest could
                // hold) covers no row.
                if d.covers(start) {
                    active.push(d);
                }
            }
            if !active.is_empty() {
                covers.extend(active.iter().map(|d| (d.ts, d.seq)));
                pieces.push(Piece {
                    start: b,
                    stop: bounds.get(i + 1).copied(),
                    end: covers.len() as u32,
                });
            }
        }
        RangeDeletes {
            list,
            by_start,
            by_stop,
            pieces,
            covers,
        }
    }

    /// No delete.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// The deletes, as given.
    pub fn list(&self) -> &[RangeDelete] {
        &self.list
    }

    fn row(&self, b: Bound) -> &[u8] {
        b.row(&self.list)
    }

    /// Pieces non-empty, in order, apart, with covering sets, and the orders sorted.
    #[cfg(test)]
    fn assert_well_formed(&self) {
        let mut from = 0;
        for (i, p) in self.pieces.iter().enumerate() {
            let stop = p.stop.map(|b| self.row(b));
            assert!(
                stop.is_none_or(|s| self.row(p.start) < s),
                "piece {i} empty"
            );
            if let Some(q) = self.pieces.get(i + 1) {
                assert!(
                    stop.is_some_and(|s| s <= self.row(q.start)),
                    "piece {i} overlaps"
                );
            }
            assert!(p.end as usize > from, "piece {i} covered by nothing");
            from = p.end as usize;
        }
        assert_eq!(from, self.covers.len());
        let key = |&i: &u32, stop: bool| self.row(Bound { at: i, stop });
        assert!(self
            .by_start
            .windows(2)
            .all(|w| key(&w[0], false) <= key(&w[1], false)));
        assert!(self
            .by_stop
            .windows(2)
            .all(|w| key(&w[0], true) <= key(&w[1], true)));
        assert_eq!(self.by_start.len(), self.list.len());
    }

    /// Where `row` falls.
    pub fn locate(&self, row: &[u8]) -> Located<'_> {
        let n = self
            .pieces
            .partition_point(|p| compare_bytes(self.row(p.start), row).is_le());
        let after = self.pieces.get(n).map(|p| self.row(p.start));
        let Some(i) = n.checked_sub(1) else {
            return Located {
                covers: &[],
                lo: b"",
                hi: after,
            };
        };
        let p = &self.pieces[i];
        let stop = p.stop.map(|b| self.row(b));
        if stop.is_none_or(|s| compare_bytes(row, s).is_lt()) {
            let from = i.checked_sub(1).map_or(0, |k| self.pieces[k].end as usize);
            Located {
                covers: &self.covers[from..p.end as usize],
                lo: self.row(p.start),
                hi: stop,
            }
        } else {
            // A gap: from the end of the piece before (it has one, or it would hold the row)
            // to the start of the next.
            Located {
                covers: &[],
                lo: stop.unwrap_or_default(),
                hi: after,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(start: &str, stop: &str, ts: u64, seq: u64) -> RangeDelete {
        RangeDelete {
            start: start.as_bytes().to_vec(),
            stop: stop.as_bytes().to_vec(),
            ts,
            seq,
        }
    }

    /// Every row's answer is what a walk over the list gives, and its bounds hold exactly the
    /// rows with the same answer.
    #[test]
    fn locate_agrees_with_the_list() {
        let lists = [
            vec![],
            vec![d("b", "d", 1, 1)],
            vec![d("", "", 5, 2)],
            vec![d("b", "", 1, 1), d("a", "c", 2, 2), d("c", "d", 3, 3)],
            vec![
                d("b", "f", 1, 1),
                d("c", "d", 2, 2),
                d("b", "f", 3, 3),
                d("e", "", 4, 4),
            ],
        ];
        let rows: Vec<Vec<u8>> = [
            "", "a", "a0", "b", "b0", "c", "c0", "d", "d0", "e", "f", "z",
        ]
        .iter()
        .map(|r| r.as_bytes().to_vec())
        .collect();
        for list in lists {
            let idx = RangeDeletes::new(list.clone());
            check_answers(&idx, &list, &rows);
        }
    }

    /// Rows `a`..`j` (the random deletes' bounds), the empty row, and a row between each two.
    fn probes() -> Vec<Vec<u8>> {
        (0..=20u8)
            .map(|p| match p {
                0 => Vec::new(),
                p if p % 2 == 1 => vec![b'a' + p / 2],
                p => vec![b'a' + p / 2 - 1, b'0'],
            })
            .collect()
    }

    /// A delete of random bounds among the probes' rows (sometimes from the first row or to
    /// the end; sometimes empty or reversed, as only a damaged manifest holds).
    fn random_delete(rng: &mut rand::rngs::StdRng, seq: u64) -> RangeDelete {
        use rand::Rng;
        let mut bound = |p: f64| {
            if rng.random_bool(p) {
                Vec::new()
            } else {
                vec![b'a' + rng.random_range(0..10)]
            }
        };
        let (start, stop) = (bound(0.1), bound(0.15));
        RangeDelete {
            start,
            stop,
            ts: rng.random_range(0..5),
            seq,
        }
    }

    /// `idx` is well formed and answers for every probe what a walk over `list` gives, with
    /// bounds that hold exactly the probes with the same answer.
    fn check(idx: &RangeDeletes, list: &[RangeDelete]) {
        idx.assert_well_formed();
        check_answers(idx, list, &probes());
    }

    /// `idx` answers for every row of `rows` what a walk over `list` gives, with bounds that
    /// hold exactly the rows with the same answer.
    fn check_answers(idx: &RangeDeletes, list: &[RangeDelete], probes: &[Vec<u8>]) {
        let answer = |r: &[u8]| {
            let mut got = idx.locate(r).covers.to_vec();
            got.sort_unstable();
            got
        };
        for r in probes {
            let mut want: Vec<(u64, u64)> = list
                .iter()
                .filter(|x| x.covers(r))
                .map(|x| (x.ts, x.seq))
                .collect();
            want.sort_unstable();
            assert_eq!(answer(r), want, "{list:?} row {r:?}");
            let at = idx.locate(r);
            assert!(at.lo <= r.as_slice() && at.hi.is_none_or(|h| r.as_slice() < h));
            for other in probes {
                if at.lo <= other.as_slice() && at.hi.is_none_or(|h| other.as_slice() < h) {
                    assert_eq!(
                        answer(other),
                        want,
                        "{list:?}: {r:?} and {other:?} share bounds"
                    );
                }
            }
        }
    }

    /// Indexes made by `updated` from the one before, through random additions and removals
    /// (as the manifest makes them: seq order kept) and through single additions (the path
    /// that keeps the pieces), answer as the list does; so does one made from a list out of
    /// seq order, or with one seq holding another delete, which `updated` indexes anew.
    #[test]
    fn updated_indexes_agree_with_the_list() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(55);
        // Miri runs a few of each (`cargo +nightly miri test -p cellar --lib range_index`).
        let rounds = if cfg!(miri) { 2 } else { 100 };
        for _ in 0..rounds {
            let mut list: Vec<RangeDelete> = Vec::new();
            let mut idx = RangeDeletes::default();
            let mut seq = 0;
            for _ in 0..30 {
                // Remove a few, add a few (new seqs at the end, as writes make them).
                list.retain(|_| !rng.random_bool(0.2));
                for _ in 0..rng.random_range(0..4) {
                    seq += 1;
                    list.push(random_delete(&mut rng, seq));
                }
                idx = idx.updated(list.clone());
                check(&idx, &list);
            }
            let mut shuffled = list.clone();
            shuffled.reverse();
            check(&idx.updated(shuffled.clone()), &shuffled);
        }
        for _ in 0..rounds * 2 {
            let mut list: Vec<RangeDelete> = Vec::new();
            let mut idx = RangeDeletes::default();
            for seq in 1..=12 {
                list.push(random_delete(&mut rng, seq));
                idx = idx.updated(list.clone());
                check(&idx, &list);
            }
        }
        let old = RangeDeletes::new(vec![d("b", "d", 1, 1)]);
        let list = vec![d("c", "e", 1, 1)];
        check(&old.updated(list.clone()), &list);
    }

    /// Random lists (nested, equal, touching and damaged empty ranges) against a walk over the
    /// list, at every bound and between bounds: the sweep must leave no delete behind and keep
    /// none past its stop.
    #[test]
    fn the_sweep_agrees_with_the_list_on_random_lists() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(54);
        for _ in 0..if cfg!(miri) { 20 } else { 500 } {
            let n = rng.random_range(0..12);
            let list: Vec<RangeDelete> = (0..n).map(|i| random_delete(&mut rng, i)).collect();
            check(&RangeDeletes::new(list.clone()), &list);
        }
    }
}
