//! Where a compaction cuts its outputs (SPEC.md §20.3 item 3).
//!
//! A file of level n is later compacted into level n+1 together with every file there that
//! overlaps it. If its boundaries fall in the middle of files of n+1, the parts of those files
//! outside it are read and rewritten for nothing, and rewritten again when the neighbouring
//! file comes down: on average half a file at each end of every compaction. RocksDB measured
//! that at ~14% of all compaction bytes and since 7.8 aligns outputs with the files of the
//! level below the output (the *grandparents*); on our 10M-cell load the same misalignment was
//! most of Cellar's excess write amplification over RocksDB's.
//!
//! [`OutputCutter`] decides, at each new row of the merge, whether the current output ends
//! before it. The rules, checked in order:
//!
//! 1. The output has reached the largest size allowed: `target_file_size`, or twice that when
//!    there are grandparents to align with (a file may grow past the target to reach a
//!    boundary).
//! 2. The row crosses a grandparent boundary (enters or leaves a grandparent file) and:
//!    a. the output plus the grandparent bytes it overlaps exceeds `max_compaction_bytes`, so
//!    compacting it down later would exceed that limit; or
//!    b. the row has passed over a whole grandparent file larger than `target_file_size / 8`
//!    since the previous row: cutting here leaves that file outside both outputs, so a later
//!    compaction of either does not rewrite it; or
//!    c. the output has reached `(50 + 5 × boundaries it has crossed, at most 90)%` of
//!    `target_file_size`: cut at this boundary rather than mid-file later. The more
//!    boundaries it has crossed, the likelier another comes before the target, so the
//!    threshold rises with them.
//!
//! Cuts happen only between rows (a row's cells of one family never straddle files of a
//! level), and grandparent files are compared by row, as the picker compares files. Without
//! grandparents — a bottommost output, or alignment turned off — rule 1 with the plain target
//! is all there is, which was the rule before alignment.

use std::sync::Arc;

use cellar_format::KeyRef;

use crate::types::FileMeta;

/// The row of an encoded key (a key that does not parse counts as its own bytes, as in the
/// picker: total order, no panic on a damaged file's metadata).
fn row(key: &[u8]) -> &[u8] {
    KeyRef::parse(key).map_or(key, |k| k.row)
}

/// Decides where a compaction's outputs end. Feed it every row of the output in order.
#[derive(Debug)]
pub struct OutputCutter {
    /// Row ranges and sizes of the grandparent files, in order, disjoint.
    grandparents: Vec<(Vec<u8>, Vec<u8>, u64)>,
    target: u64,
    max_file: u64,
    max_compaction_bytes: u64,
    /// Index of the grandparent file the cursor is in or before.
    idx: usize,
    /// The cursor is before `grandparents[idx]` (between files), not inside it.
    in_gap: bool,
    /// Boundaries crossed since the current output began.
    crossed: u64,
    /// Bytes of the grandparent files the current output overlaps.
    overlapped: u64,
    /// The current output has at least one row.
    started: bool,
}

impl OutputCutter {
    /// A cutter for outputs of `target_file_size` that align with `grandparents` (the files of
    /// the level below the output level, in order; empty to cut by size alone).
    pub fn new(
        grandparents: &[Arc<FileMeta>],
        target_file_size: u64,
        max_compaction_bytes: u64,
    ) -> Self {
        let grandparents: Vec<_> = grandparents
            .iter()
            .map(|f| (row(&f.smallest).to_vec(), row(&f.largest).to_vec(), f.size))
            .collect();
        let target = target_file_size.max(1);
        let max_file = if grandparents.is_empty() {
            target
        } else {
            target.saturating_mul(2)
        };
        OutputCutter {
            grandparents,
            target,
            max_file,
            max_compaction_bytes,
            idx: 0,
            in_gap: true,
            crossed: 0,
            overlapped: 0,
            started: false,
        }
    }

    /// `row` is the next row of the merge, and the current output holds `size` bytes (0 when
    /// no output is open). True if the current output must end before `row`; either way `row`
    /// then belongs to the (possibly new) current output.
    pub fn cut_before(&mut self, row: &[u8], size: u64) -> bool {
        let before = self.overlapped;
        let crossed_now = self.advance(row);
        let cut = self.started && self.should_cut(size, crossed_now, before);
        if cut || !self.started {
            // A new output begins at `row`: it overlaps the grandparent it starts in.
            self.crossed = 0;
            self.overlapped = if self.in_gap {
                0
            } else {
                self.grandparents.get(self.idx).map_or(0, |g| g.2)
            };
        }
        self.started = true;
        cut
    }

    fn should_cut(&self, size: u64, crossed_now: u64, overlapped_before: u64) -> bool {
        if size >= self.max_file {
            return true;
        }
        if crossed_now == 0 {
            return false;
        }
        if self.overlapped.saturating_add(size) > self.max_compaction_bytes {
            return true;
        }
        // Entering from a gap, passing a whole file takes 2 crossings (in, out) plus the one
        // into the file the row is in; from inside a file, its end, a whole file, and the next.
        let skippable = if self.in_gap { 2 } else { 3 };
        if crossed_now >= skippable
            && self.overlapped.saturating_sub(overlapped_before) > self.target / 8
        {
            return true;
        }
        let pct = 50 + (self.crossed * 5).min(40);
        size >= self.target.div_ceil(100).saturating_mul(pct)
    }

    /// Move the cursor to `row`; returns the boundaries crossed to get there (counted only
    /// within an output, i.e. after its first row).
    fn advance(&mut self, row: &[u8]) -> u64 {
        let mut crossed = 0;
        while let Some((lo, hi, size)) = self.grandparents.get(self.idx) {
            if self.in_gap {
                if row < lo.as_slice() {
                    break;
                }
                self.in_gap = false;
                if self.started {
                    crossed += 1;
                    self.overlapped = self.overlapped.saturating_add(*size);
                }
            } else {
                if row <= hi.as_slice() {
                    break;
                }
                self.in_gap = true;
                self.idx += 1;
                if self.started {
                    crossed += 1;
                }
            }
        }
        self.crossed += crossed;
        crossed
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cellar_format::CellKey;

    fn key(row: &str) -> Vec<u8> {
        CellKey::first_on_row(row.as_bytes()).encode()
    }

    fn gp(lo: &str, hi: &str, size: u64) -> Arc<FileMeta> {
        Arc::new(FileMeta {
            number: 0,
            family: 1,
            level: 6,
            size,
            smallest: key(lo),
            largest: key(hi),
            min_seq: 1,
            max_seq: 1,
            min_ts: 1,
            max_ts: 1,
            entries: 1,
            deletes: 0,
            created_ms: 0,
            crc: None,
            range_clean: 0,
        })
    }

    /// Feed rows `r000`.. each adding `per_row` bytes; return the rows that start outputs.
    fn cuts(c: &mut OutputCutter, rows: usize, per_row: u64) -> Vec<String> {
        let mut size = 0;
        let mut starts = Vec::new();
        for i in 0..rows {
            let r = format!("r{i:03}");
            if c.cut_before(r.as_bytes(), size) || i == 0 {
                size = 0;
                starts.push(r);
            }
            size += per_row;
        }
        starts
    }

    #[test]
    fn without_grandparents_outputs_are_cut_at_the_target() {
        let mut c = OutputCutter::new(&[], 100, 2500);
        assert_eq!(cuts(&mut c, 30, 10), ["r000", "r010", "r020"]);
    }

    #[test]
    fn outputs_end_where_grandparent_files_begin() {
        // Grandparents of 70 rows each start at r000, r070, r140: the second output starts
        // at r070 although the target (100 rows' worth) would put the cut at r100.
        let g = [
            gp("r000", "r069", 700),
            gp("r070", "r139", 700),
            gp("r140", "r209", 700),
        ];
        let mut c = OutputCutter::new(&g, 1000, 1 << 40);
        assert_eq!(cuts(&mut c, 210, 10), ["r000", "r070", "r140"]);
    }

    #[test]
    fn a_boundary_too_early_is_passed_and_files_stay_below_twice_the_target() {
        // A boundary at 20% of the target is no place to cut; with the next boundary far
        // beyond the target, the output is cut at twice the target.
        let g = [gp("r000", "r019", 200), gp("r020", "r499", 4800)];
        let mut c = OutputCutter::new(&g, 1000, 1 << 40);
        assert_eq!(cuts(&mut c, 450, 10), ["r000", "r200", "r400"]);
    }

    #[test]
    fn a_whole_grandparent_file_in_a_gap_of_the_input_is_left_out() {
        // The merge jumps from r010 to r200 over a grandparent file of r050..r060: cutting
        // there keeps that file out of both outputs' ranges.
        let g = [gp("r050", "r060", 500)];
        let mut c = OutputCutter::new(&g, 1000, 1 << 40);
        assert!(!c.cut_before(b"r000", 0));
        assert!(!c.cut_before(b"r010", 10));
        assert!(c.cut_before(b"r200", 20));
        // A small file (≤ target / 8) is not worth a small output.
        let g = [gp("r050", "r060", 100)];
        let mut c = OutputCutter::new(&g, 1000, 1 << 40);
        assert!(!c.cut_before(b"r000", 0));
        assert!(!c.cut_before(b"r010", 10));
        assert!(!c.cut_before(b"r200", 20));
    }

    #[test]
    fn an_output_whose_later_compaction_would_be_too_big_is_cut_at_a_boundary() {
        let g = [gp("r000", "r009", 300), gp("r010", "r019", 300)];
        let mut c = OutputCutter::new(&g, 1000, 500);
        assert!(!c.cut_before(b"r000", 0));
        assert!(!c.cut_before(b"r005", 10));
        // Entering the second file: 600 bytes of grandparents + 20 > 500.
        assert!(c.cut_before(b"r010", 20));
    }
}
