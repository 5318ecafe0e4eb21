//! Compaction: which files to merge ([`picker`], a pure function of a [`Version`](crate::manifest::Version)), what a
//! merge keeps ([`purge`], HBase's purge rules over the read path's version resolution), and the
//! shared vocabulary of both. The engine runs the tasks (`db::compact`).
//!
//! # Layout (per family)
//! L0 holds flush outputs, which may overlap; each of L1..L6 is one sorted run of files with
//! disjoint key ranges, and a row's cells of one family never straddle two files of a level.
//! Level targets grow by [`CompactionOptions::level_size_multiplier`] toward the last level,
//! which is sized by the data (dynamic level bytes: the last level holds ~90% of it).

pub mod cut;
pub mod picker;
pub mod purge;

use std::sync::Arc;
use std::time::Duration;

use crate::types::{FamilyId, FileMeta, FileNumber, RangeDelete, SeqNo};

/// Tunables of compaction and of the write back-pressure that depends on it.
#[derive(Debug, Clone, PartialEq)]
pub struct CompactionOptions {
    /// L0 is compacted once it holds this many files (default 4).
    pub level0_file_num_compaction_trigger: usize,
    /// Writers are slowed once L0 holds this many files (default 20).
    pub level0_slowdown_writes_trigger: usize,
    /// Writers stop once L0 holds this many files (default 36).
    pub level0_stop_writes_trigger: usize,
    /// Target size of the first non-empty level below L0 when the data is small (default
    /// 256 MiB); with dynamic level bytes the base level moves down as data grows.
    pub max_bytes_for_level_base: u64,
    /// Each level's target is this many times the one above (default 10).
    pub level_size_multiplier: u64,
    /// Size at which compaction outputs are cut, at a row boundary (default 64 MiB).
    pub target_file_size: u64,
    /// Cut compaction outputs where files of the level below them begin or end, once they hold
    /// at least half the target, letting one grow to twice the target to reach such a
    /// boundary (RocksDB's `level_compaction_dynamic_file_size`; [`cut`]); default true.
    pub align_output_files: bool,
    /// Size the last level's target from the data actually there (RocksDB's
    /// `level_compaction_dynamic_level_bytes`, default true).
    pub dynamic_level_bytes: bool,
    /// Most bytes one compaction reads (default 25 × `target_file_size`).
    pub max_compaction_bytes: u64,
    /// A family whose oldest file is older than this gets a major compaction (HBase's
    /// `hbase.hregion.majorcompaction`, default 7 days); `None` disables it.
    pub periodic_major: Option<Duration>,
    /// Fraction of `periodic_major` by which each family's period is jittered, deterministic
    /// per family (HBase's `majorcompaction.jitter`, default 0.5).
    pub periodic_major_jitter: f64,
    /// A file whose delete markers are at least this fraction of its cells is compacted down
    /// (default 0.5); markers only leave at the bottom, so pushing them there frees space.
    pub tombstone_density_trigger: f64,
    /// Files with at least this many cells count for the tombstone trigger (default 1000), so
    /// a tiny file of a few deletes does not churn.
    pub tombstone_min_entries: u64,
    /// A file at L1..L6 that row-range deletes cut (cover part of its rows) is rewritten into
    /// its own level, dropping what they mask, when they cover at least this fraction of its
    /// data, estimated from its index (default 0.5; SPEC.md §20.1 step 3). Above 1 or NaN:
    /// never. Files they hold whole are dropped or rewritten whatever this says.
    pub range_delete_rewrite_ratio: f64,
    /// Background compaction threads (default 1).
    pub threads: usize,
    /// Compaction I/O limit in bytes per second (reads and writes); `None` is unlimited.
    pub rate_limit_bytes_per_sec: Option<u64>,
    /// Delete markers younger than this (by their timestamp) survive even a bottommost
    /// compaction (HBase's `hbase.hstore.time.to.purge.deletes`, default 0).
    pub purge_delay: Duration,
    /// Writers are slowed when the bytes compaction still owes exceed this (default 64 GiB).
    pub soft_pending_compaction_bytes: u64,
    /// Writers stop when the bytes compaction still owes exceed this (default 256 GiB).
    pub hard_pending_compaction_bytes: u64,
}

impl Default for CompactionOptions {
    fn default() -> Self {
        let target = 64 << 20;
        CompactionOptions {
            level0_file_num_compaction_trigger: 4,
            level0_slowdown_writes_trigger: 20,
            level0_stop_writes_trigger: 36,
            max_bytes_for_level_base: 256 << 20,
            level_size_multiplier: 10,
            target_file_size: target,
            dynamic_level_bytes: true,
            align_output_files: true,
            max_compaction_bytes: 25 * target,
            periodic_major: Some(Duration::from_secs(7 * 24 * 3600)),
            periodic_major_jitter: 0.5,
            tombstone_density_trigger: 0.5,
            tombstone_min_entries: 1000,
            range_delete_rewrite_ratio: 0.5,
            threads: 1,
            rate_limit_bytes_per_sec: None,
            purge_delay: Duration::ZERO,
            soft_pending_compaction_bytes: 64 << 30,
            hard_pending_compaction_bytes: 256 << 30,
        }
    }
}

/// What the picker knows of a family beyond its files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FamilyPolicy {
    /// The family.
    pub family: FamilyId,
    /// Its TTL, if any: files whose newest cell is older than `now - ttl` are all expired.
    pub ttl: Option<Duration>,
    /// MIN_VERSIONS: when nonzero, expired files may still hold readable versions, so the TTL
    /// trigger does not apply.
    pub min_versions: u32,
    /// KEEP_DELETED_CELLS is TRUE or TTL: a bottommost compaction may keep delete markers, so
    /// the tombstone trigger leaves last-level files alone (rewriting one would not shrink it,
    /// and the trigger would fire again on the output forever).
    pub keep_deleted_cells: bool,
    /// The family's row-range deletes that every compaction applies in full now (SPEC.md
    /// §20.2 rules 3 and 7): classic mode, KEEP_DELETED_CELLS FALSE, written at or below
    /// `purge_horizon`. The range-delete trigger drops or rewrites the files they cover.
    pub range_deletes: Arc<[RangeDelete]>,
    /// The oldest read point any reader may still use (the purger's `smallest_snapshot`):
    /// only files whose cells are all at or below it are judged whole by a compaction.
    pub purge_horizon: SeqNo,
    /// Files of the family, at L1..L6 with `max_seq ≤ purge_horizon`, that `range_deletes`
    /// above their `range_clean` cut (cover part of their rows), with the bytes of their data
    /// those deletes cover, estimated from the files' indexes: `(file number, bytes)`, sorted
    /// by file number. The picker cannot read indexes, so the database computes this.
    pub partly_covered: Arc<[(FileNumber, u64)]>,
}

impl FamilyPolicy {
    /// A family with no TTL, MIN_VERSIONS 0 and KEEP_DELETED_CELLS false (what the picker
    /// assumes for a family it was given no policy for).
    pub fn plain(family: FamilyId) -> Self {
        FamilyPolicy {
            family,
            ttl: None,
            min_versions: 0,
            keep_deleted_cells: false,
            range_deletes: Arc::from(Vec::new()),
            purge_horizon: 0,
            partly_covered: Arc::from(Vec::new()),
        }
    }
}

/// Why a compaction was picked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum CompactionReason {
    /// L0 reached its file-count trigger.
    Level0FileCount,
    /// A level exceeded its target size.
    LevelSize,
    /// Files entirely past the family's TTL.
    Ttl,
    /// Files whose rows lie inside a row-range delete.
    RangeDelete,
    /// Files dense with delete markers.
    TombstoneDensity,
    /// The periodic major compaction came due.
    PeriodicMajor,
    /// Asked for by `Db::major_compact`.
    Manual,
    /// Gets kept having to search a file as well as another one (LevelDB's seek compaction).
    Seek,
}

impl CompactionReason {
    /// A short name for stats and logs.
    pub fn name(self) -> &'static str {
        match self {
            CompactionReason::Level0FileCount => "l0-file-count",
            CompactionReason::LevelSize => "level-size",
            CompactionReason::Ttl => "ttl",
            CompactionReason::RangeDelete => "range-delete",
            CompactionReason::TombstoneDensity => "tombstone-density",
            CompactionReason::PeriodicMajor => "periodic-major",
            CompactionReason::Manual => "manual",
            CompactionReason::Seek => "seek",
        }
    }
}

/// One compaction: input files of one family from one level, or from a level and the one it
/// compacts into (adjacent, or L0 and the base level), or from every level for a major
/// compaction, merged into files of `output_level` (see `picker`).
#[derive(Debug, Clone, PartialEq)]
pub struct CompactionTask {
    /// The family compacted.
    pub family: FamilyId,
    /// Inputs, grouped by level, each group in the level's order (L0 newest first).
    pub inputs: Vec<(u32, Vec<Arc<FileMeta>>)>,
    /// Level the outputs go to.
    pub output_level: u32,
    /// The inputs overlap nothing at `output_level` and need no rewrite: move the file
    /// (one input file, manifest edit only).
    pub trivial_move: bool,
    /// A row-range delete masks every cell of the inputs for every reader: remove them,
    /// reading and writing nothing (what a compaction of them would leave: no cell).
    pub drop_inputs: bool,
    /// No file of the family below `output_level` (nor in it, outside the inputs) overlaps
    /// the inputs' key range: markers and masked cells may be purged (HBase's major
    /// compaction, SPEC.md §20).
    pub bottommost: bool,
    /// Outputs are cut at the first row boundary past this size.
    pub target_file_size: u64,
    /// Why.
    pub reason: CompactionReason,
}

impl CompactionTask {
    /// Every input file.
    pub fn input_files(&self) -> impl Iterator<Item = &Arc<FileMeta>> + '_ {
        self.inputs.iter().flat_map(|(_, fs)| fs.iter())
    }

    /// Total bytes of the inputs.
    pub fn input_bytes(&self) -> u64 {
        self.input_files().map(|f| f.size).sum()
    }
}
