//! [`Stats`] in the Prometheus text exposition format (version 0.0.4), for an application
//! that embeds Cellar to serve on its `/metrics` endpoint.
//!
//! Every counter of [`Stats`] becomes one metric family named `cellar_...`: monotonic counts
//! end in `_total` (TYPE counter), levels and sizes are gauges. Time is in seconds and sizes
//! in bytes, as Prometheus' naming rules ask, so microsecond counters are divided by 10^6.
//! Breakdowns are labels (`kind` of cache block, `level`, compaction `reason`, dropped-cell
//! `cause`) rather than separate names, so a query can sum over them. The overall cache
//! counters are not repeated beside the per-kind ones: they are the sum of the kinds.
//!
//! Why written by hand rather than with a client library: the engine has no registry or
//! HTTP server to feed (the application owns both), and a snapshot rendered on demand has
//! nothing to keep in step with the engine's own atomics.

use std::fmt::Write as _;

use crate::cache::KindStats;
use crate::wal::BackendKind;
use crate::Stats;

#[derive(Clone, Copy)]
enum Kind {
    Counter,
    Gauge,
}

/// The text being built. A family's HELP and TYPE lines come once, before its first sample,
/// and its samples follow without another family between (the format's rule).
struct Exposition {
    out: String,
    open: Option<&'static str>,
}

impl Exposition {
    fn family(&mut self, name: &'static str, kind: Kind, help: &str) {
        debug_assert!(self.open != Some(name), "{name} opened twice");
        self.open = Some(name);
        let t = match kind {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
        };
        let _ = writeln!(self.out, "# HELP {name} {help}");
        let _ = writeln!(self.out, "# TYPE {name} {t}");
    }

    fn sample(&mut self, labels: &[(&str, &str)], value: Value) {
        let name = self.open.expect("a sample belongs to a family");
        self.out.push_str(name);
        if !labels.is_empty() {
            self.out.push('{');
            for (i, (k, v)) in labels.iter().enumerate() {
                if i > 0 {
                    self.out.push(',');
                }
                let _ = write!(self.out, "{k}=\"");
                escape_label(&mut self.out, v);
                self.out.push('"');
            }
            self.out.push('}');
        }
        match value {
            Value::Int(v) => {
                let _ = writeln!(self.out, " {v}");
            }
            Value::Float(v) if v.is_finite() => {
                let _ = writeln!(self.out, " {v}");
            }
            Value::Float(v) if v.is_nan() => self.out.push_str(" NaN\n"),
            Value::Float(v) => {
                self.out
                    .push_str(if v > 0.0 { " +Inf\n" } else { " -Inf\n" });
            }
        }
    }

    /// A family of one unlabelled sample.
    fn one(&mut self, name: &'static str, kind: Kind, help: &str, value: Value) {
        self.family(name, kind, help);
        self.sample(&[], value);
    }
}

#[derive(Clone, Copy)]
enum Value {
    Int(u64),
    Float(f64),
}

fn int(v: u64) -> Value {
    Value::Int(v)
}

fn seconds(micros: u64) -> Value {
    Value::Float(micros as f64 / 1e6)
}

/// A label value as the format quotes it: backslash, double quote and newline escaped.
fn escape_label(out: &mut String, v: &str) {
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
}

impl Stats {
    /// These counters in the Prometheus text format (`text/plain; version=0.0.4`), every
    /// metric named `cellar_...`.
    ///
    /// ```
    /// # fn main() -> cellar::Result<()> {
    /// use cellar::{Db, FamilyDescriptor, Options, Put, TableDescriptor};
    /// let dir = tempfile::tempdir().unwrap();
    /// let db = Db::open(dir.path(), Options::default())?;
    /// db.create_table(TableDescriptor::new("t").family(FamilyDescriptor::new("cf")))?;
    /// db.table("t")?.put(Put::new("r").add("cf", "q", "v"))?;
    /// let text = db.stats().prometheus();
    /// assert!(text.contains("# TYPE cellar_writes_total counter\ncellar_writes_total 1\n"));
    /// # Ok(())
    /// # }
    /// ```
    pub fn prometheus(&self) -> String {
        use Kind::{Counter, Gauge};
        let mut e = Exposition {
            out: String::with_capacity(8 << 10),
            open: None,
        };
        e.one(
            "cellar_writes_total",
            Counter,
            "Write calls applied.",
            int(self.writes),
        );
        e.one(
            "cellar_user_bytes_written_total",
            Counter,
            "Bytes of keys and values written by users.",
            int(self.user_bytes_written),
        );
        e.one(
            "cellar_flushes_total",
            Counter,
            "Memstore generations flushed.",
            int(self.flushes),
        );
        e.one(
            "cellar_flushed_bytes_total",
            Counter,
            "Bytes of HFiles written by flushes.",
            int(self.flushed_bytes),
        );
        e.one(
            "cellar_flushed_files_total",
            Counter,
            "HFiles written by flushes.",
            int(self.flushed_files),
        );
        e.one(
            "cellar_flush_failures_total",
            Counter,
            "Flush attempts that failed for lack of space (each cleaned up and retried).",
            int(self.flush_failures),
        );
        e.one(
            "cellar_write_stalls_total",
            Counter,
            "Writes that waited for flushes (memstore stop condition).",
            int(self.stalls),
        );
        e.one(
            "cellar_write_stall_seconds_total",
            Counter,
            "Time writers spent stopped waiting for flushes.",
            seconds(self.stall_micros),
        );
        e.one(
            "cellar_write_slowdowns_total",
            Counter,
            "Writes delayed by the memstore slowdown condition.",
            int(self.slowdowns),
        );
        e.family(
            "cellar_reads_total",
            Counter,
            "Reads served: Gets (each of a batch), and scans opened.",
        );
        e.sample(&[("op", "get")], int(self.gets));
        e.sample(&[("op", "scan")], int(self.scans));
        e.family(
            "cellar_read_rows_total",
            Counter,
            "Rows reads returned: Gets that found their row, rows of finished scans.",
        );
        e.sample(&[("op", "get")], int(self.gets_found));
        e.sample(&[("op", "scan")], int(self.scan_rows));
        e.family(
            "cellar_read_file_skips_total",
            Counter,
            "Files a read skipped without searching them, by what excluded them.",
        );
        e.sample(&[("by", "bloom")], int(self.bloom_skips));
        e.sample(&[("by", "key_range")], int(self.range_skips));
        e.sample(&[("by", "time_range")], int(self.time_skips));
        e.family(
            "cellar_read_cells_skipped_total",
            Counter,
            "Cells reads examined and did not return, by the read path's verdict on them.",
        );
        for (cause, n) in self.skipped_cells.by_cause() {
            e.sample(&[("cause", cause)], int(n));
        }
        e.one(
            "cellar_ingests_total",
            Counter,
            "Bulk loads of external HFiles (Table::ingest).",
            int(self.ingests),
        );
        e.one(
            "cellar_ingested_files_total",
            Counter,
            "HFiles bulk loads added.",
            int(self.ingested_files),
        );
        e.one(
            "cellar_ingested_cells_total",
            Counter,
            "Cells bulk loads added.",
            int(self.ingested_cells),
        );
        e.one(
            "cellar_ingested_bytes_total",
            Counter,
            "Bytes of the HFiles bulk loads wrote.",
            int(self.ingested_bytes),
        );
        e.one(
            "cellar_ingest_write_hold_seconds_total",
            Counter,
            "Time writes waited while bulk loads rewrote and installed their files.",
            seconds(self.ingest_held_micros),
        );
        e.one(
            "cellar_read_view_retries_total",
            Counter,
            "Reads that took a newer read point because a flush or compaction installed as they started.",
            int(self.read_view_retries),
        );
        e.family(
            "cellar_memstore_bytes",
            Gauge,
            "Bytes in memstores: active, or frozen and waiting for a flush.",
        );
        e.sample(&[("state", "active")], int(self.memstore_active_bytes));
        e.sample(&[("state", "frozen")], int(self.memstore_frozen_bytes));
        e.one(
            "cellar_live_files",
            Gauge,
            "HFiles live.",
            int(self.live_files),
        );
        e.one(
            "cellar_range_deletes",
            Gauge,
            "Row-range deletes live in the manifest (removed by major compactions).",
            int(self.range_deletes),
        );
        e.one(
            "cellar_read_point",
            Gauge,
            "The highest sequence number visible to reads.",
            int(self.read_point),
        );
        e.one(
            "cellar_live_snapshots",
            Gauge,
            "Snapshots held open.",
            int(self.live_snapshots),
        );
        if let Some(seq) = self.oldest_snapshot {
            e.one(
                "cellar_oldest_snapshot_seq",
                Gauge,
                "Sequence number of the oldest live snapshot (compaction keeps what it sees); absent with none.",
                int(seq),
            );
        }
        self.wal_metrics(&mut e);
        self.cache_metrics(&mut e);
        self.compaction_metrics(&mut e);
        let b = &self.memory_budget;
        e.family(
            "cellar_memory_budget_bytes",
            Gauge,
            "The memory the options allow: block cache capacity, memstore stop limit.",
        );
        e.sample(&[("part", "block_cache")], int(b.block_cache_bytes));
        e.sample(&[("part", "memstore")], int(b.memstore_bytes));
        let r = &self.recovery;
        e.one(
            "cellar_recovery_replayed_batches",
            Gauge,
            "Batches the WAL replay at open put back into memstores.",
            int(r.replayed_batches),
        );
        e.one(
            "cellar_recovery_torn_tail",
            Gauge,
            "1 if the newest WAL segment ended in a torn, unacknowledged write that the open dropped.",
            int(u64::from(r.torn_tail)),
        );
        e.one(
            "cellar_recovery_skipped_ranges",
            Gauge,
            "Damaged WAL ranges skipped at open (RecoveryMode::SkipCorrupted): records there are lost.",
            int(r.skipped_ranges.len() as u64),
        );
        let p = &self.prefault;
        e.one(
            "cellar_prefault_requests_total",
            Counter,
            "Ranges of WAL and memstore pages the write path asked the prefault thread to fault in (whole process).",
            int(p.requests),
        );
        e.one(
            "cellar_prefault_dropped_total",
            Counter,
            "Prefault requests dropped because the thread was behind: the writer faulted those pages in (whole process).",
            int(p.dropped),
        );
        e.one(
            "cellar_prefault_populated_bytes_total",
            Counter,
            "Bytes the prefault thread faulted in (whole process).",
            int(p.populated_bytes),
        );
        e.one(
            "cellar_prefault_failures_total",
            Counter,
            "Prefault ranges the kernel refused to populate (whole process).",
            int(p.failures),
        );
        e.one(
            "cellar_prefault_active",
            Gauge,
            "1 while the prefault thread takes requests; 0 when the kernel lacks MADV_POPULATE_WRITE or the thread could not start.",
            int(u64::from(p.active)),
        );
        e.out
    }

    fn wal_metrics(&self, e: &mut Exposition) {
        use Kind::{Counter, Gauge};
        let w = &self.wal;
        e.family(
            "cellar_wal_info",
            Gauge,
            "The WAL device that runs, as a label (io_uring or pwrite); always 1.",
        );
        let backend = match w.backend {
            BackendKind::IoUring => "io_uring",
            BackendKind::Sync => "pwrite",
            BackendKind::Auto => "auto",
        };
        e.sample(&[("backend", backend)], int(1));
        e.one(
            "cellar_wal_records_total",
            Counter,
            "WAL records written.",
            int(w.records),
        );
        e.one(
            "cellar_wal_bytes_total",
            Counter,
            "Framed WAL bytes written.",
            int(w.bytes),
        );
        e.one(
            "cellar_wal_groups_total",
            Counter,
            "WAL groups written (group commit: one device write or mapped copy each).",
            int(w.groups),
        );
        e.one(
            "cellar_wal_mapped_groups_total",
            Counter,
            "Of the WAL groups, those copied through a memory map.",
            int(w.mapped_groups),
        );
        e.one(
            "cellar_wal_syncs_total",
            Counter,
            "WAL fdatasyncs, counting the O_DSYNC direct writes that stand for one.",
            int(w.syncs),
        );
        e.one(
            "cellar_wal_direct_groups_total",
            Counter,
            "Synced WAL groups written O_DIRECT|O_DSYNC instead of written and fdatasynced.",
            int(w.direct_groups),
        );
        e.one(
            "cellar_wal_current_segment",
            Gauge,
            "Number of the WAL segment being appended to.",
            int(w.current_segment),
        );
        e.one(
            "cellar_wal_max_group_records",
            Gauge,
            "Most records written in one WAL group.",
            int(w.max_group),
        );
        e.one(
            "cellar_wal_kept_segments",
            Gauge,
            "Flushed WAL segments still on disk, held by change feeds or the retention budget.",
            int(w.kept_segments),
        );
        e.one(
            "cellar_wal_kept_bytes",
            Gauge,
            "Bytes of the flushed WAL segments still on disk.",
            int(w.kept_bytes),
        );
        e.one(
            "cellar_change_feeds",
            Gauge,
            "Live change feeds and feed slots (each holds the WAL from the segment it reads).",
            int(w.feeds),
        );
        if self.feed_slots.is_empty() {
            return;
        }
        type Field = fn(&crate::FeedSlotInfo) -> u64;
        let per_slot: [(&'static str, &str, Field); 3] = [
            (
                "cellar_feed_slot_acked_seq",
                "The last seq a feed slot's consumer acknowledged.",
                |s| s.acked,
            ),
            (
                "cellar_feed_slot_held_bytes",
                "Bytes of WAL segments a feed slot holds (up to the live segment).",
                |s| s.held_bytes,
            ),
            (
                "cellar_feed_slot_lost",
                "1 once a feed slot gave its segments up (slot_max_bytes, or a missing segment).",
                |s| u64::from(s.lost),
            ),
        ];
        for (name, help, get) in per_slot {
            e.family(name, Gauge, help);
            for s in &self.feed_slots {
                e.sample(&[("slot", &s.name)], int(get(s)));
            }
        }
    }

    fn cache_metrics(&self, e: &mut Exposition) {
        use Kind::{Counter, Gauge};
        let c = &self.block_cache;
        let kinds: [(&str, &KindStats); 3] =
            [("data", &c.data), ("index", &c.index), ("bloom", &c.bloom)];
        type Field = fn(&KindStats) -> u64;
        let per_kind: [(&'static str, &str, Field); 5] = [
            (
                "cellar_block_cache_hits_total",
                "Block cache lookups answered from the cache, by block kind.",
                |k| k.hits,
            ),
            (
                "cellar_block_cache_misses_total",
                "Block cache lookups that read the file, by block kind.",
                |k| k.misses,
            ),
            (
                "cellar_block_cache_inserts_total",
                "Blocks admitted to the block cache, by block kind.",
                |k| k.inserts,
            ),
            (
                "cellar_block_cache_evictions_total",
                "Blocks evicted from the block cache to make room, by block kind.",
                |k| k.evictions,
            ),
            (
                "cellar_block_cache_rejected_total",
                "Blocks too large for a cache shard, not cached, by block kind.",
                |k| k.rejected,
            ),
        ];
        for (name, help, get) in per_kind {
            e.family(name, Counter, help);
            for (label, k) in kinds {
                e.sample(&[("kind", label)], int(get(k)));
            }
        }
        e.one(
            "cellar_block_cache_capacity_bytes",
            Gauge,
            "Bytes the block cache may hold (0: no cache).",
            int(c.capacity),
        );
        e.one(
            "cellar_block_cache_usage_bytes",
            Gauge,
            "Bytes the block cache holds, pinned blocks included.",
            int(c.usage),
        );
        e.one(
            "cellar_block_cache_meta_capacity_bytes",
            Gauge,
            "Of the capacity, bytes reserved for index and bloom blocks (0: one shared pool).",
            int(c.meta_capacity),
        );
        e.one(
            "cellar_block_cache_meta_usage_bytes",
            Gauge,
            "Of the usage, bytes in the index and bloom pool.",
            int(c.meta_usage),
        );
        e.one(
            "cellar_block_cache_pinned_bytes",
            Gauge,
            "Of the usage, bytes of index, bloom and block-map blocks that open files hold themselves.",
            int(c.pinned),
        );
        e.one(
            "cellar_block_cache_entries",
            Gauge,
            "Blocks the block cache holds.",
            int(c.entries),
        );
        let o = &self.open_files;
        e.one(
            "cellar_open_files",
            Gauge,
            "HFiles open in the open-file cache.",
            int(o.open),
        );
        e.one(
            "cellar_open_files_capacity",
            Gauge,
            "HFiles the open-file cache may keep open.",
            int(o.capacity),
        );
        e.one(
            "cellar_file_opens_total",
            Counter,
            "HFiles opened (open-file cache misses).",
            int(o.opens),
        );
        e.one(
            "cellar_open_file_cache_hits_total",
            Counter,
            "Lookups answered by an open reader.",
            int(o.hits),
        );
        e.one(
            "cellar_open_file_cache_evictions_total",
            Counter,
            "Readers dropped from the open-file cache to stay within its bound.",
            int(o.evictions),
        );
    }

    fn compaction_metrics(&self, e: &mut Exposition) {
        use Kind::{Counter, Gauge};
        let c = &self.compaction;
        let names: Vec<String> = (0..c.levels.len()).map(|l| l.to_string()).collect();
        type Field = fn(&crate::LevelStats) -> Value;
        let per_level: [(&'static str, Kind, &str, Field); 8] = [
            (
                "cellar_level_compactions_total",
                Counter,
                "Compactions whose output went to the level.",
                |l| int(l.compactions),
            ),
            (
                "cellar_level_read_bytes_total",
                Counter,
                "Bytes compactions read from the level.",
                |l| int(l.bytes_read),
            ),
            (
                "cellar_level_written_bytes_total",
                Counter,
                "Bytes compactions wrote into the level (flushes count for level 0).",
                |l| int(l.bytes_written),
            ),
            (
                "cellar_level_read_from_above_bytes_total",
                Counter,
                "Bytes read from the level above by the compactions writing into the level.",
                |l| int(l.bytes_read_from_above),
            ),
            (
                "cellar_level_files_written_total",
                Counter,
                "Files compactions wrote into the level.",
                |l| int(l.files_written),
            ),
            (
                "cellar_level_compaction_seconds_total",
                Counter,
                "Time spent in compactions writing into the level.",
                |l| seconds(l.micros),
            ),
            (
                "cellar_level_files",
                Gauge,
                "Files in the level now, all families.",
                |l| int(l.files),
            ),
            (
                "cellar_level_bytes",
                Gauge,
                "Bytes in the level now, all families.",
                |l| int(l.bytes),
            ),
        ];
        for (name, kind, help, get) in per_level {
            e.family(name, kind, help);
            for (l, stats) in names.iter().zip(&c.levels) {
                e.sample(&[("level", l)], get(stats));
            }
        }
        e.family(
            "cellar_compactions_total",
            Counter,
            "Compactions run (trivial moves included), by the reason they were picked.",
        );
        for (reason, n) in &c.by_reason {
            e.sample(&[("reason", reason)], int(*n));
        }
        e.one(
            "cellar_compaction_trivial_moves_total",
            Counter,
            "Files moved down a level without a rewrite.",
            int(c.trivial_moves),
        );
        e.one(
            "cellar_compaction_files_dropped_total",
            Counter,
            "Files removed unread because a row-range delete masked every cell in them.",
            int(c.files_dropped),
        );
        e.one(
            "cellar_compaction_dropped_bytes_total",
            Counter,
            "Bytes of the files removed unread under row-range deletes.",
            int(c.bytes_dropped),
        );
        e.one(
            "cellar_compaction_range_deletes_gone_total",
            Counter,
            "Row-range deletes that left with a compaction once nothing they mask was left.",
            int(c.range_deletes_gone),
        );
        e.one(
            "cellar_compaction_failures_total",
            Counter,
            "Compactions that failed (their inputs kept, retried later).",
            int(c.failures),
        );
        e.family(
            "cellar_compaction_cells_total",
            Counter,
            "Cells compactions read and wrote.",
        );
        e.sample(&[("op", "read")], int(c.cells_read));
        e.sample(&[("op", "written")], int(c.cells_written));
        e.family(
            "cellar_dropped_cells_total",
            Counter,
            "Cells flushes and compactions dropped, by why.",
        );
        for (cause, n) in &c.dropped {
            e.sample(&[("cause", cause)], int(*n));
        }
        e.one(
            "cellar_compaction_pending_bytes",
            Gauge,
            "Bytes compaction still owes (the picker's estimate), all families.",
            int(c.pending_bytes),
        );
        e.one(
            "cellar_compactions_running",
            Gauge,
            "Compactions running now.",
            int(c.running),
        );
        e.one(
            "cellar_files_awaiting_deletion",
            Gauge,
            "Replaced files not yet deleted because a reader may still use them.",
            int(c.awaiting_deletion),
        );
        e.family(
            "cellar_compaction_write_slowdowns_total",
            Counter,
            "Writes slowed by compaction debt, by its measure.",
        );
        e.sample(&[("by", "l0_files")], int(c.slowdowns_l0));
        e.sample(&[("by", "pending_bytes")], int(c.slowdowns_pending));
        e.family(
            "cellar_compaction_write_stops_total",
            Counter,
            "Writes stopped by compaction debt, by its measure.",
        );
        e.sample(&[("by", "l0_files")], int(c.stops_l0));
        e.sample(&[("by", "pending_bytes")], int(c.stops_pending));
        e.one(
            "cellar_compaction_stall_seconds_total",
            Counter,
            "Time writers spent stopped or slowed by compaction debt.",
            seconds(c.stall_micros),
        );
        e.one(
            "cellar_write_amplification",
            Gauge,
            "Bytes flushes and compactions wrote per byte users wrote.",
            Value::Float(self.write_amplification()),
        );
        e.one(
            "cellar_space_amplification",
            Gauge,
            "Bytes of all live files per byte in the last non-empty level.",
            Value::Float(self.space_amplification()),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_values_are_escaped() {
        let mut s = String::new();
        escape_label(&mut s, "a\"b\\c\nd");
        assert_eq!(s, "a\\\"b\\\\c\\nd");
    }

    #[test]
    fn non_finite_values_are_spelled_as_the_format_asks() {
        let mut e = Exposition {
            out: String::new(),
            open: None,
        };
        e.family("x", Kind::Gauge, "h");
        e.sample(&[], Value::Float(f64::INFINITY));
        e.sample(&[], Value::Float(f64::NEG_INFINITY));
        e.sample(&[], Value::Float(f64::NAN));
        e.sample(&[], Value::Float(0.25));
        assert_eq!(
            e.out,
            "# HELP x h\n# TYPE x gauge\nx +Inf\nx -Inf\nx NaN\nx 0.25\n"
        );
    }
}
