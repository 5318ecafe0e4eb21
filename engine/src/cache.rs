//! The read path's two caches: the block cache and the open-file cache.
//!
//! # Block cache ([`ShardedBlockCache`])
//! Decoded data, index and bloom blocks, bounded in **bytes** (each entry weighs its payload
//! plus [`ENTRY_OVERHEAD`]), built on `quick_cache` (sharded, S3-FIFO, scan resistant; see
//! `shared/ECOSYSTEM.md`). Keys are `(file number, block offset)`. Cellar never reuses a file
//! number (`ManifestState::allocate_file_number` counts up, skipping every number found on
//! disk at open, and a cache lives no longer than one open database), so an entry of a deleted
//! file can never be served for another file, even if it outlives the file; [`evict_file`]
//! only gives its bytes back early. For the same reason a cache belongs to one database: two
//! databases number their files independently.
//!
//! **Priority.** Index and bloom blocks (the "meta" blocks) live in their own pool, which may
//! grow to a share of the capacity ([`Options::block_cache_meta_ratio`], default 1/4); data
//! blocks live in the rest. Data-block churn (a large scan, random Gets over a data set larger
//! than the cache) therefore can never evict a meta block, which every Get needs before it can
//! touch a data block: a lost bloom chunk costs a read on every negative probe of the file.
//! This is HBase's CombinedBlockCache (index and bloom in L1, data in L2) inside one byte
//! budget. Index plus bloom blocks are about 1–4% of the data (10 bits per key is ~1.25 bytes
//! per cell, one index entry per data block), so a quarter of the cache holds the meta blocks
//! of a data set 6–25 times the cache's size.
//!
//! **The split follows use.** The meta pool starts at a floor (one [`MIN_SHARD_BYTES`] per
//! shard) and grows in steps when a meta block would not fit, up to its share; when files are
//! deleted and it is less than half full it gives the space back. Data blocks get whatever the
//! meta pool does not hold: with a data set about the cache's size (the comparison's 2M keys:
//! ~6 MiB of meta blocks in a 256 MiB cache), a fixed quarter left data blocks 192 MiB and
//! every fourth Get read a block from the file, where RocksDB (index and filters outside its
//! cache) gave its data the whole 256 MiB. A ratio of 0 gives one shared pool, where only
//! S3-FIFO's frequency bias protects meta blocks. `tests::meta_pool_survives_data_churn` measures both
//! with 200 index blocks and a data working set 4× an 8 MiB cache: under a scan (one pass) the
//! index hit ratio is 1.000 split / 0.976 shared, since S3-FIFO already evicts one-hit blocks
//! first; under random Gets it is 1.000 split / 0.743 shared, for a data hit ratio of 0.177 /
//! 0.213 — 0.82 block reads per Get with the split against 1.04 shared.
//!
//! **Pinned meta blocks.** A reader may hold its bloom chunks and the children of its root
//! index itself, once read, instead of looking them up here on every Get (format crate,
//! `reader.rs`): a cached Get made three lookups (bloom chunk, leaf index, data block), 11%
//! of its time, and pinned pairs of cached present-row Gets ran +5% to +17% faster with one
//! lookup. The cache grants a pin ([`BlockCache::pin`]) while the meta pool's capacity and
//! the pinned bytes together stay within the meta share, and takes the bytes from the data
//! pool, so the cache's size still bounds its memory; the reader gives them back when it
//! drops (the open-file cache evicts it, or the file is deleted). Pinned lookups are not
//! counted as hits; [`CacheStats::pinned`] shows the bytes. A pin is never evicted while its
//! reader lives: past the meta share, a file's meta blocks go to the meta pool as before.
//! A reader's block map (a word and a handle per data block, which its seeks search instead
//! of descending the index; format crate, `blockmap.rs`) is pinned by the same rule
//! ([`BlockCache::pin_bytes`]); refused, the reader's seeks descend the index.
//! The rule counts the meta pool's capacity, not its use (counting use would let pins take
//! up to a further share from data blocks beside an idle pool), so the pool's floor (one
//! [`MIN_SHARD_BYTES`] per shard) must leave room: the meta pool is sharded as a pool of a
//! quarter of its share would be, and its floor is at most a quarter of the share (or 1 MiB).
//! Sharded for its whole share with up to 4 shards per core, the floor was the whole share
//! on 16 cores with the default 256 MiB cache (and on 2 cores up to 32 MiB), and no pin was
//! ever granted there; fewer meta shards cost little, since pinned readers rarely look a meta
//! block up.
//!
//! Within a pool, entries larger than a shard's admission limit are not cached (counted as
//! `rejected`): shard counts are chosen so a shard holds at least [`MIN_SHARD_BYTES`].
//!
//! Two threads missing the same block both read it and both insert (the second replaces the
//! first): the format's `BlockCache` trait has no "load once" hook, and a duplicate read costs
//! less than a placeholder per lookup.
//!
//! # Measured
//! `engine/tests/cache_db.rs::measure_get_throughput_with_and_without_cache` (release, 2 cores,
//! 100,000 random Gets over 100,000 rows of 100-byte values in 4 flushed files, ~12 MiB of
//! decoded blocks): a 64 MiB cache serves 107k Gets/s at hit ratio 1.000; a 4 MiB cache (data
//! hit ratio 0.24, bloom 1.00) 49k Gets/s; no cache 12k Gets/s (every Get reads and checks
//! the bloom chunk of 4 files and a data block, from the OS page cache).
//!
//! # Open-file cache ([`FileCache`])
//! Open readers (`Arc<HFileReader>`), keyed by file number, at most `max_open_files` of them,
//! evicted S3-FIFO (LRU-ish). Eviction only drops the cache's reference: a Get or scan holding
//! the `Arc` keeps reading its file. Concurrent opens of one file are coalesced (one opens, the
//! others wait for it), and no cache lock is held while a file is opened. [`FileCache::evict`]
//! removes an entry, including an open in flight, whose result is then not cached.
//!
//! [`evict_file`]: ShardedBlockCache::evict_file
//! [`Options::block_cache_meta_ratio`]: crate::Options::block_cache_meta_ratio

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use cellar_format::{BlockCache, BlockType, CachedBlock};
use quick_cache::sync::{Cache, GuardResult};
use quick_cache::{DefaultHashBuilder, Lifecycle, OptionsBuilder, UnitWeighter, Weighter};

use crate::types::FileNumber;

/// Bytes charged per cache entry on top of its payload: the key, the value's enum and `Arc`
/// headers, the `Block` fields and quick_cache's slot. Also keeps every weight non-zero
/// (quick_cache never evicts zero-weight entries).
pub const ENTRY_OVERHEAD: u64 = 96;

/// Smallest shard: shards of a byte-bounded cache must each hold many 64 KiB blocks, or large
/// blocks would be refused and eviction would be coarse.
pub const MIN_SHARD_BYTES: u64 = 1 << 20;

/// quick_cache's share of a shard for "hot" entries (its default); an entry heavier than this
/// share of a shard is never admitted.
const HOT_ALLOCATION: f64 = 0.97;

/// What a cached block is: decides its pool and its counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BlockKind {
    /// Cells.
    Data,
    /// Root, intermediate and leaf index blocks.
    Index,
    /// Bloom filter chunks.
    Bloom,
}

impl BlockKind {
    /// The kind of a block of type `ty`.
    pub fn of(ty: BlockType) -> Self {
        match ty {
            BlockType::Data => BlockKind::Data,
            BlockType::BloomChunk | BlockType::BloomMeta => BlockKind::Bloom,
            _ => BlockKind::Index,
        }
    }

    fn slot(self) -> usize {
        match self {
            BlockKind::Data => 0,
            BlockKind::Index => 1,
            BlockKind::Bloom => 2,
        }
    }

    fn is_meta(self) -> bool {
        self != BlockKind::Data
    }
}

/// Counters of one block kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct KindStats {
    /// Lookups answered from the cache.
    pub hits: u64,
    /// Lookups that had to read the file.
    pub misses: u64,
    /// Blocks admitted.
    pub inserts: u64,
    /// Blocks evicted to make room.
    pub evictions: u64,
    /// Blocks too large for a shard, not cached.
    pub rejected: u64,
}

/// A snapshot of the block cache's counters and gauges.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct CacheStats {
    /// Bytes the cache may hold (0: no cache).
    pub capacity: u64,
    /// Bytes held now.
    pub usage: u64,
    /// Of `capacity`, the bytes reserved for index and bloom blocks (0: one shared pool).
    pub meta_capacity: u64,
    /// Of `usage`, the bytes in the meta pool.
    pub meta_usage: u64,
    /// Of `usage`, the bytes of index and bloom blocks, and of block maps, that open files'
    /// readers hold themselves (pinned, outside the pools; their lookups are not counted as
    /// hits).
    pub pinned: u64,
    /// Blocks held now.
    pub entries: u64,
    /// Lookups answered from the cache, all kinds.
    pub hits: u64,
    /// Lookups that missed, all kinds.
    pub misses: u64,
    /// Blocks admitted, all kinds.
    pub inserts: u64,
    /// Blocks evicted, all kinds.
    pub evictions: u64,
    /// Data blocks.
    pub data: KindStats,
    /// Index blocks.
    pub index: KindStats,
    /// Bloom chunks.
    pub bloom: KindStats,
}

impl CacheStats {
    /// Hits over lookups, in `[0, 1]` (0 before any lookup).
    pub fn hit_ratio(&self) -> f64 {
        ratio(self.hits, self.hits + self.misses)
    }
}

fn ratio(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 / whole as f64
    }
}

#[derive(Debug, Default)]
struct KindCounters {
    hits: AtomicU64,
    misses: AtomicU64,
    inserts: AtomicU64,
    evictions: AtomicU64,
    rejected: AtomicU64,
}

impl KindCounters {
    fn snapshot(&self) -> KindStats {
        KindStats {
            hits: self.hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
            inserts: self.inserts.load(Ordering::Relaxed),
            evictions: self.evictions.load(Ordering::Relaxed),
            rejected: self.rejected.load(Ordering::Relaxed),
        }
    }
}

type BlockKey = (u64, u64);

#[derive(Debug, Clone)]
struct Entry {
    kind: BlockKind,
    block: CachedBlock,
}

fn block_weight(block: &CachedBlock) -> u64 {
    let payload = match block {
        CachedBlock::Keyed(b) => b.memory(),
        CachedBlock::Bloom(bits) => bits.len(),
    };
    payload as u64 + ENTRY_OVERHEAD
}

#[derive(Debug, Clone, Copy)]
struct BlockWeighter;

impl Weighter<BlockKey, Entry> for BlockWeighter {
    fn weight(&self, _key: &BlockKey, val: &Entry) -> u64 {
        block_weight(&val.block)
    }
}

type EvictCount = Arc<dyn Fn(&Entry) + Send + Sync>;

/// Counts evictions by kind, and holds evicted blocks until the request ends so they are freed
/// after the shard lock is released.
#[derive(Clone)]
struct BlockEvict(EvictCount);

impl std::fmt::Debug for BlockEvict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("BlockEvict")
    }
}

impl Lifecycle<BlockKey, Entry> for BlockEvict {
    type RequestState = Vec<Entry>;

    fn on_evict(&self, state: &mut Vec<Entry>, _key: BlockKey, val: Entry) {
        (self.0)(&val);
        state.push(val);
    }
}

type Pool = Cache<BlockKey, Entry, BlockWeighter, DefaultHashBuilder, BlockEvict>;

/// A pool of blocks.
#[derive(Debug)]
struct PoolOf {
    cache: Pool,
}

impl PoolOf {
    /// The heaviest entry its shards admit now (a hair under quick_cache's own limit, which
    /// set_capacity may round down by a byte).
    fn max_entry(&self) -> u64 {
        (self.cache.shard_capacity() as f64 * (HOT_ALLOCATION - 0.005)) as u64
    }

    /// Resize to `bytes` (rounded down to a multiple of the shard count, see
    /// [`strict_capacity`]); evicts when shrinking.
    fn resize(&self, bytes: u64) {
        let n = self.cache.num_shards() as u64;
        self.cache.set_capacity(bytes / n * n);
    }
}

/// Shards for a pool of `capacity` bytes: up to 4 per core, each at least [`MIN_SHARD_BYTES`].
fn shard_count(capacity: u64, cores: usize) -> usize {
    let by_size = usize::try_from(capacity / MIN_SHARD_BYTES).unwrap_or(usize::MAX);
    let n = by_size.clamp(1, cores * 4);
    // quick_cache rounds up to a power of two; round down instead so shards stay large enough.
    1 << n.ilog2()
}

/// A pool of `capacity` bytes with shards for `shard_basis` bytes (see [`shard_count`]).
fn new_pool(
    capacity: u64,
    shard_basis: u64,
    cores: usize,
    counters: &Arc<[KindCounters; 3]>,
) -> Option<PoolOf> {
    let shards = shard_count(shard_basis, cores);
    let opts = OptionsBuilder::new()
        .shards(shards)
        // A rough count is enough: it sizes the ghost list (recently evicted keys).
        .estimated_items_capacity(usize::try_from(capacity / (16 << 10)).unwrap_or(1).max(1))
        .weight_capacity(capacity)
        .hot_allocation(HOT_ALLOCATION)
        .build()
        .ok()?;
    let c = counters.clone();
    let evict = BlockEvict(Arc::new(move |e: &Entry| {
        c[e.kind.slot()].evictions.fetch_add(1, Ordering::Relaxed);
    }));
    let cache = Cache::with_options(opts, BlockWeighter, DefaultHashBuilder::default(), evict);
    strict_capacity(&cache, capacity);
    Some(PoolOf { cache })
}

/// Whether a pool should grow before taking `needed` more bytes. Shards fill unevenly (a
/// pool of a few 1 MiB shards holding 64 KiB blocks starts evicting in its fullest shard at
/// about two thirds of its total), so a pool counts as full at 70%.
fn needs_room(p: &PoolOf, needed: u64) -> bool {
    (p.cache.weight() + needed) * 10 > p.cache.capacity() * 7
}

/// quick_cache gives each shard `ceil(capacity / shards)`: round down so the shards' sum never
/// exceeds what was asked.
fn strict_capacity<K, V, We, B, L>(cache: &Cache<K, V, We, B, L>, capacity: u64)
where
    K: Eq + std::hash::Hash,
    V: Clone,
    We: Weighter<K, V> + Clone,
    B: std::hash::BuildHasher + Clone,
    L: Lifecycle<K, V> + Clone,
{
    if cache.capacity() > capacity {
        let n = cache.num_shards() as u64;
        cache.set_capacity(capacity / n * n);
    }
}

/// The block cache: a sharded, byte-bounded cache of decoded blocks with a reserved pool for
/// index and bloom blocks (see the module docs).
#[derive(Debug)]
pub struct ShardedBlockCache {
    data: Option<PoolOf>,
    meta: Option<PoolOf>,
    counters: Arc<[KindCounters; 3]>,
    /// Bytes of both pools together: moving space between them keeps the sum.
    total: u64,
    /// The meta pool's smallest and largest capacities (module docs: the split follows use).
    meta_floor: u64,
    meta_limit: u64,
    /// Bytes of meta blocks readers hold themselves ([`BlockCache::pin`]), taken from the
    /// data pool within the meta pool's limit; changed under `resizing`.
    pinned: AtomicU64,
    /// Held while space moves between the pools.
    resizing: parking_lot::Mutex<()>,
    /// Meta evictions counted when the meta pool last grew: more since means it is full
    /// somewhere (a shard) whatever its total says.
    meta_evictions_seen: AtomicU64,
}

impl ShardedBlockCache {
    /// A cache of `capacity` bytes, `meta_ratio` of which (clamped to `[0, 1]`) is reserved for
    /// index and bloom blocks; 0 shares one pool among all kinds.
    pub fn new(capacity: u64, meta_ratio: f64) -> Self {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        Self::for_cores(capacity, meta_ratio, cores)
    }

    /// [`ShardedBlockCache::new`] sharded as on a machine of `cores` cores.
    fn for_cores(capacity: u64, meta_ratio: f64, cores: usize) -> Self {
        let counters: Arc<[KindCounters; 3]> = Arc::new(Default::default());
        let ratio = if meta_ratio.is_finite() {
            meta_ratio.clamp(0.0, 1.0)
        } else {
            0.0
        };
        let meta_limit = (capacity as f64 * ratio) as u64;
        let (data, meta) = if meta_limit == 0 {
            (new_pool(capacity, capacity, cores, &counters), None)
        } else {
            let data_cap = capacity - meta_limit;
            // The meta pool is sharded for a quarter of its share: its floor (a shard's
            // minimum times the shards) then leaves at least three quarters of the share
            // to pins. Sharded for the whole share, a pool of 4 shards per core filled it
            // at its floor wherever the share was at most 4 MiB per core (the default
            // 256 MiB cache on 16 cores), and no reader could pin a block there.
            (
                new_pool(data_cap, data_cap, cores, &counters),
                new_pool(meta_limit, meta_limit / 4, cores, &counters),
            )
        };
        let data = data.filter(|p| p.cache.capacity() > 0);
        let meta = meta.filter(|p| p.cache.capacity() > 0);
        // The data pool was built for its smallest size so its shards stay large enough;
        // it gets the meta pool's unused share now.
        let meta_floor = meta.as_ref().map_or(0, |m| {
            (m.cache.num_shards() as u64 * MIN_SHARD_BYTES).min(m.cache.capacity())
        });
        let total = data.as_ref().map_or(0, |p| p.cache.capacity())
            + meta.as_ref().map_or(0, |p| p.cache.capacity());
        let c = ShardedBlockCache {
            data,
            meta,
            counters,
            total,
            meta_floor,
            meta_limit: meta_floor.max(meta_limit.min(total)),
            pinned: AtomicU64::new(0),
            resizing: parking_lot::Mutex::new(()),
            meta_evictions_seen: AtomicU64::new(0),
        };
        if let (Some(d), Some(m)) = (&c.data, &c.meta) {
            m.resize(c.meta_floor);
            d.resize(c.total - m.cache.capacity());
        }
        c
    }

    /// Give the meta pool room for `needed` more bytes, up to its limit, taking it from the
    /// data pool (which evicts to fit). Skipped when another thread is moving space: the meta
    /// insert then evicts within its pool, as a full pool does.
    fn grow_meta(&self, meta: &PoolOf, needed: u64) {
        let Some(data) = &self.data else { return };
        let Some(_g) = self.resizing.try_lock() else {
            return;
        };
        let cap = meta.cache.capacity();
        let pinned = self.pinned.load(Ordering::Relaxed);
        let limit = self.meta_limit.saturating_sub(pinned).max(self.meta_floor);
        if !(needs_room(meta, needed) || self.meta_evicted()) || cap >= limit {
            return;
        }
        self.meta_evictions_seen
            .store(self.meta_evictions(), Ordering::Relaxed);
        // Steps of a quarter (at least the floor): a growing data set resizes rarely.
        let step = (cap / 4).max(self.meta_floor);
        let want = (meta.cache.weight() + needed).max(cap) + step;
        let new = want.min(limit);
        data.resize(self.total.saturating_sub(new + pinned));
        meta.resize(new);
    }

    fn meta_evictions(&self) -> u64 {
        [BlockKind::Index, BlockKind::Bloom]
            .iter()
            .map(|k| self.counters[k.slot()].evictions.load(Ordering::Relaxed))
            .sum()
    }

    fn meta_evicted(&self) -> bool {
        self.meta_evictions() > self.meta_evictions_seen.load(Ordering::Relaxed)
    }

    /// After files were dropped: a meta pool less than half full gives space back to data.
    fn shrink_meta(&self) {
        let (Some(data), Some(meta)) = (&self.data, &self.meta) else {
            return;
        };
        let _g = self.resizing.lock();
        let cap = meta.cache.capacity();
        let used = meta.cache.weight();
        if cap <= self.meta_floor || used * 2 >= cap {
            return;
        }
        let new = (used + used / 2).max(self.meta_floor).min(cap);
        meta.resize(new);
        self.resize_data(data, meta);
    }

    /// Give the data pool what the meta pool and the pinned blocks leave. Called under
    /// `resizing`.
    fn resize_data(&self, data: &PoolOf, meta: &PoolOf) {
        let taken = meta.cache.capacity() + self.pinned.load(Ordering::Relaxed);
        data.resize(self.total.saturating_sub(taken));
    }

    /// Bytes of meta blocks readers hold themselves (charged to this cache's budget).
    pub fn pinned(&self) -> u64 {
        self.pinned.load(Ordering::Relaxed)
    }

    fn pool(&self, kind: BlockKind) -> Option<&PoolOf> {
        if kind.is_meta() && self.meta.is_some() {
            self.meta.as_ref()
        } else {
            self.data.as_ref()
        }
    }

    fn pools(&self) -> impl Iterator<Item = &PoolOf> {
        self.data.iter().chain(self.meta.iter())
    }

    /// Bytes the cache may hold, the pinned blocks' included.
    pub fn capacity(&self) -> u64 {
        self.pools().map(|p| p.cache.capacity()).sum::<u64>() + self.pinned()
    }

    /// Bytes held now, the pinned blocks' included.
    pub fn usage(&self) -> u64 {
        self.pools().map(|p| p.cache.weight()).sum::<u64>() + self.pinned()
    }

    /// Drop every block of file `number` (a deleted file's blocks would otherwise age out).
    /// Walks the whole cache: batch deletions through [`ShardedBlockCache::evict_files`].
    pub fn evict_file(&self, number: FileNumber) {
        self.evict_files(&[number]);
    }

    /// Drop every block of the files `numbers`, in one pass over the cache.
    pub fn evict_files(&self, numbers: &[FileNumber]) {
        if numbers.is_empty() {
            return;
        }
        for p in self.pools() {
            p.cache.retain(|(id, _), _| !numbers.contains(id));
        }
        self.shrink_meta();
    }

    /// Counters and gauges.
    pub fn stats(&self) -> CacheStats {
        let [data, index, bloom] = [0, 1, 2].map(|i| self.counters[i].snapshot());
        let (meta_capacity, meta_usage) = self
            .meta
            .as_ref()
            .map_or((0, 0), |p| (p.cache.capacity(), p.cache.weight()));
        let all = [data, index, bloom];
        CacheStats {
            capacity: self.capacity(),
            usage: self.usage(),
            meta_capacity,
            meta_usage,
            pinned: self.pinned(),
            entries: self.pools().map(|p| p.cache.len() as u64).sum(),
            hits: all.iter().map(|k| k.hits).sum(),
            misses: all.iter().map(|k| k.misses).sum(),
            inserts: all.iter().map(|k| k.inserts).sum(),
            evictions: all.iter().map(|k| k.evictions).sum(),
            data,
            index,
            bloom,
        }
    }
}

impl BlockCache for ShardedBlockCache {
    fn get(&self, cache_id: u64, offset: u64, ty: BlockType) -> Option<CachedBlock> {
        let kind = BlockKind::of(ty);
        let c = &self.counters[kind.slot()];
        let found = self
            .pool(kind)
            .and_then(|p| p.cache.get(&(cache_id, offset)));
        match found {
            Some(e) => {
                c.hits.fetch_add(1, Ordering::Relaxed);
                Some(e.block)
            }
            None => {
                c.misses.fetch_add(1, Ordering::Relaxed);
                None
            }
        }
    }

    fn insert(&self, cache_id: u64, offset: u64, ty: BlockType, block: CachedBlock) {
        let kind = BlockKind::of(ty);
        let c = &self.counters[kind.slot()];
        let Some(pool) = self.pool(kind) else {
            return;
        };
        let weight = block_weight(&block);
        if kind.is_meta() && self.data.is_some() {
            if let Some(m) = &self.meta {
                if needs_room(m, weight) || self.meta_evicted() {
                    self.grow_meta(m, weight);
                }
            }
        }
        if weight > pool.max_entry() {
            c.rejected.fetch_add(1, Ordering::Relaxed);
            return;
        }
        c.inserts.fetch_add(1, Ordering::Relaxed);
        pool.cache.insert((cache_id, offset), Entry { kind, block });
    }

    /// Pins only with a meta pool (a ratio of 0 asks for one shared pool, where S3-FIFO
    /// decides for every block), and only while the meta pool and the pinned blocks together
    /// stay within the meta limit: the bytes come out of the data pool, so the cache's whole
    /// budget still bounds its memory.
    fn pin(&self, ty: BlockType, block: &CachedBlock) -> Option<u64> {
        if !BlockKind::of(ty).is_meta() {
            return None;
        }
        self.pin_weight(block_weight(block))
    }

    /// A reader's block map (a word and a handle per data block, built from its index) is
    /// index in another shape: it is pinned by the same rule as the index blocks.
    fn pin_bytes(&self, bytes: u64) -> Option<u64> {
        self.pin_weight(bytes + ENTRY_OVERHEAD)
    }

    fn unpin(&self, bytes: u64) {
        let (Some(data), Some(meta)) = (&self.data, &self.meta) else {
            return;
        };
        let _g = self.resizing.lock();
        let pinned = self.pinned.load(Ordering::Relaxed);
        self.pinned
            .store(pinned.saturating_sub(bytes), Ordering::Relaxed);
        self.resize_data(data, meta);
    }
}

impl ShardedBlockCache {
    /// Grant a pin of `weight` bytes while the meta pool and the pinned bytes stay within the
    /// meta share (see [`BlockCache::pin`] above).
    fn pin_weight(&self, weight: u64) -> Option<u64> {
        let (Some(data), Some(meta)) = (&self.data, &self.meta) else {
            return None;
        };
        let _g = self.resizing.lock();
        let pinned = self.pinned.load(Ordering::Relaxed);
        if meta.cache.capacity() + pinned + weight > self.meta_limit {
            return None;
        }
        self.pinned.store(pinned + weight, Ordering::Relaxed);
        self.resize_data(data, meta);
        Some(weight)
    }
}

/// A snapshot of the open-file cache's counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct OpenFileStats {
    /// Most files kept open (`Options::max_open_files`, rounded down to a multiple of the
    /// shard count).
    pub capacity: u64,
    /// Files the cache keeps open now (readers still used by a Get or scan after eviction are
    /// not counted).
    pub open: u64,
    /// Files opened (misses).
    pub opens: u64,
    /// Lookups answered by an open reader.
    pub hits: u64,
    /// Readers dropped from the cache to stay within the bound.
    pub evictions: u64,
}

type EvictFn = Arc<dyn Fn() + Send + Sync>;

/// Counts evictions of open files; holds the evicted values until the request ends, so a
/// reader's file is closed after the shard lock is released.
#[derive(Clone)]
struct FileEvict(EvictFn);

impl std::fmt::Debug for FileEvict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("FileEvict")
    }
}

impl<V> Lifecycle<FileNumber, V> for FileEvict {
    type RequestState = Vec<V>;

    fn on_evict(&self, state: &mut Vec<V>, _key: FileNumber, val: V) {
        (self.0)();
        state.push(val);
    }
}

#[derive(Debug, Default)]
struct FileCounters {
    opens: AtomicU64,
    hits: AtomicU64,
    evictions: AtomicU64,
}

/// The open-file cache: at most `max_open` values (readers) by file number (see the module
/// docs).
#[derive(Debug)]
pub struct FileCache<V: Clone> {
    cache: Cache<FileNumber, V, UnitWeighter, DefaultHashBuilder, FileEvict>,
    counters: Arc<FileCounters>,
}

impl<V: Clone> FileCache<V> {
    /// A cache of at most `max_open` entries (at least one).
    pub fn new(max_open: usize) -> Self {
        let max_open = max_open.max(1);
        let counters = Arc::new(FileCounters::default());
        let c = counters.clone();
        let evict = FileEvict(Arc::new(move || {
            c.evictions.fetch_add(1, Ordering::Relaxed);
        }));
        let cap = max_open as u64;
        // quick_cache keeps shards of at least 32 entries by itself; a small bound gets one
        // shard, so it is exact.
        let cache = match OptionsBuilder::new()
            .estimated_items_capacity(max_open)
            .weight_capacity(cap)
            .build()
        {
            Ok(o) => Cache::with_options(o, UnitWeighter, DefaultHashBuilder::default(), evict),
            // Unreachable (both required settings are given); one shard is always valid.
            Err(_) => Cache::with(max_open, cap, UnitWeighter, Default::default(), evict),
        };
        strict_capacity(&cache, cap);
        FileCache { cache, counters }
    }

    /// The value of file `number`, opening it with `open` on a miss. Concurrent misses on one
    /// file run `open` once; no lock is held while it runs. An error is returned and not cached.
    pub fn get_or_open<E>(
        &self,
        number: FileNumber,
        open: impl FnOnce() -> Result<V, E>,
    ) -> Result<V, E> {
        match self.cache.get_value_or_guard(&number, None) {
            GuardResult::Value(v) => {
                self.counters.hits.fetch_add(1, Ordering::Relaxed);
                Ok(v)
            }
            GuardResult::Guard(g) => {
                self.counters.opens.fetch_add(1, Ordering::Relaxed);
                let v = open()?;
                // Err: evicted (file deleted) while opening; the caller still gets its reader.
                let _ = g.insert(v.clone());
                Ok(v)
            }
            // No timeout was given, so this does not happen; open uncached if it does.
            GuardResult::Timeout => {
                self.counters.opens.fetch_add(1, Ordering::Relaxed);
                open()
            }
        }
    }

    /// Drop file `number`'s entry (its file was deleted), and cancel an open of it in flight.
    pub fn evict(&self, number: FileNumber) {
        // The removed value is dropped here, after the shard lock is released.
        let _removed = self.cache.remove(&number);
    }

    /// Counters and gauges.
    pub fn stats(&self) -> OpenFileStats {
        OpenFileStats {
            capacity: self.cache.capacity(),
            open: self.cache.len() as u64,
            opens: self.counters.opens.load(Ordering::Relaxed),
            hits: self.counters.hits.load(Ordering::Relaxed),
            evictions: self.counters.evictions.load(Ordering::Relaxed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cellar_format::block::{Block, BlockBuilder};
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    /// A data or index block of about `bytes` bytes.
    fn keyed(bytes: usize) -> CachedBlock {
        let mut b = BlockBuilder::new(16);
        b.add(b"k", &vec![7u8; bytes.saturating_sub(16)], &[]);
        CachedBlock::Keyed(Arc::new(Block::new(b.finish()).expect("valid block")))
    }

    fn bloom(bytes: usize) -> CachedBlock {
        CachedBlock::Bloom(Arc::new(vec![0xA5; bytes]))
    }

    #[test]
    fn byte_bound_holds_under_random_inserts() {
        let cap = 4 << 20;
        for ratio in [0.0, 0.25] {
            let c = ShardedBlockCache::new(cap, ratio);
            assert!(c.capacity() <= cap && c.capacity() > cap - 64);
            let mut rng = StdRng::seed_from_u64(7);
            for i in 0..5_000u64 {
                let size = rng.random_range(16..70_000);
                let ty = match rng.random_range(0..4) {
                    0 => BlockType::LeafIndex,
                    1 => BlockType::BloomChunk,
                    _ => BlockType::Data,
                };
                let block = if ty == BlockType::BloomChunk {
                    bloom(size)
                } else {
                    keyed(size)
                };
                c.insert(rng.random_range(0..20), i * 100_000, ty, block);
                let s = c.stats();
                assert!(s.usage <= s.capacity, "{} > {}", s.usage, s.capacity);
                assert!(s.meta_usage <= s.meta_capacity || ratio == 0.0);
            }
            let s = c.stats();
            assert!(s.evictions > 0 && s.inserts > s.evictions);
            assert!(s.usage > cap / 2, "the cache fills up: {s:?}");
        }
    }

    #[test]
    fn get_counts_hits_and_misses_by_kind() {
        let c = ShardedBlockCache::new(8 << 20, 0.25);
        assert!(c.get(1, 0, BlockType::Data).is_none());
        c.insert(1, 0, BlockType::Data, keyed(1000));
        c.insert(1, 5000, BlockType::RootIndex, keyed(100));
        c.insert(1, 6000, BlockType::BloomChunk, bloom(100));
        assert!(c.get(1, 0, BlockType::Data).is_some());
        assert!(c.get(1, 5000, BlockType::RootIndex).is_some());
        assert!(c.get(1, 6000, BlockType::BloomChunk).is_some());
        assert!(
            c.get(2, 0, BlockType::Data).is_none(),
            "another file's block"
        );
        let s = c.stats();
        assert_eq!((s.data.hits, s.data.misses, s.data.inserts), (1, 2, 1));
        assert_eq!((s.index.hits, s.bloom.hits), (1, 1));
        assert_eq!(s.entries, 3);
        assert!((s.hit_ratio() - 0.6).abs() < 1e-9);
        assert_eq!(s.meta_usage, 2 * ENTRY_OVERHEAD + 100 + c_keyed_size(100));
        c.evict_file(1);
        assert_eq!(c.stats().entries, 0);
        assert_eq!(c.usage(), 0);
    }

    fn c_keyed_size(bytes: usize) -> u64 {
        block_weight(&keyed(bytes)) - ENTRY_OVERHEAD
    }

    #[test]
    fn oversized_blocks_are_rejected_not_cached() {
        let c = ShardedBlockCache::new(256 << 10, 0.0);
        c.insert(1, 0, BlockType::Data, keyed(300 << 10));
        let s = c.stats();
        assert_eq!((s.data.rejected, s.data.inserts, s.entries), (1, 0, 0));
        let off = ShardedBlockCache::new(0, 0.25);
        off.insert(1, 0, BlockType::Data, keyed(10));
        assert!(off.get(1, 0, BlockType::Data).is_none());
        assert_eq!(off.stats().capacity, 0);
    }

    /// Simulated Gets: each reads one of 200 index blocks (4 KiB) and one data block
    /// (64 KiB) of a working set 4× the cache, either streamed once (`random = false`, a scan)
    /// or drawn at random with repeats (`random = true`). Returns the index and data hit ratios
    /// over the last half of the run.
    fn hit_ratios_under_churn(meta_ratio: f64, random: bool) -> (f64, f64) {
        let cap = 8 << 20;
        let c = ShardedBlockCache::new(cap, meta_ratio);
        let (index_blocks, data_blocks, gets) = (200u64, 512u64, 20_000u64);
        let mut rng = StdRng::seed_from_u64(11);
        let mut mark = c.stats();
        for j in 0..gets {
            if j == gets / 2 {
                mark = c.stats();
            }
            let ix = rng.random_range(0..index_blocks);
            if c.get(ix, 0, BlockType::LeafIndex).is_none() {
                c.insert(ix, 0, BlockType::LeafIndex, keyed(4096));
            }
            let d = if random {
                rng.random_range(0..data_blocks)
            } else {
                j
            };
            if c.get(1_000 + d, 64, BlockType::Data).is_none() {
                c.insert(1_000 + d, 64, BlockType::Data, keyed(64 << 10));
            }
        }
        let end = c.stats();
        let r = |a: KindStats, b: KindStats| {
            ratio(a.hits - b.hits, a.hits + a.misses - b.hits - b.misses)
        };
        (r(end.index, mark.index), r(end.data, mark.data))
    }

    #[test]
    fn meta_pool_survives_data_churn() {
        for random in [false, true] {
            let (split_ix, split_data) = hit_ratios_under_churn(0.25, random);
            let (shared_ix, shared_data) = hit_ratios_under_churn(0.0, random);
            eprintln!(
                "{}: index hit ratio reserved pool {split_ix:.3} / shared pool {shared_ix:.3}; \
                 data hit ratio {split_data:.3} / {shared_data:.3}",
                if random { "random Gets" } else { "scan" }
            );
            assert!(split_ix > 0.99, "the meta pool loses nothing to data churn");
            assert!(split_ix >= shared_ix);
        }
    }

    /// The meta pool starts at its floor, grows when meta blocks need room (the data pool
    /// shrinking by as much), never past its share, and gives the space back when the files
    /// go; the two pools always sum to the capacity.
    #[test]
    fn meta_space_follows_use_and_data_gets_the_rest() {
        let cap = 64 << 20;
        let c = ShardedBlockCache::new(cap, 0.25);
        let s0 = c.stats();
        assert_eq!(s0.capacity, c.total);
        assert!(s0.capacity <= cap && s0.capacity > cap - (1 << 10));
        assert!(s0.meta_capacity < cap / 4, "{s0:?}");
        let data_cap = |c: &ShardedBlockCache| c.data.as_ref().unwrap().cache.capacity();
        assert_eq!(data_cap(&c) + s0.meta_capacity, s0.capacity);
        // 12 MiB of index blocks in files 1..=3: more than the floor, less than the share.
        let mut offset = 0;
        for file in 1..=3u64 {
            for _ in 0..64 {
                c.insert(file, offset, BlockType::LeafIndex, keyed(64 << 10));
                offset += 1;
            }
        }
        let s1 = c.stats();
        assert!(s1.meta_capacity > s0.meta_capacity, "{s1:?}");
        assert!(s1.meta_capacity <= cap / 4);
        assert_eq!(data_cap(&c) + s1.meta_capacity, s1.capacity);
        // A shard can fill before the pool looks full: a few evictions, then it grows. The
        // blocks land in the shards by a per-process random hash, so an unlucky run puts more
        // of the 192 into one 4 MiB shard of the full 16 MiB pool than it holds (about 62): 10
        // and 12 evictions were seen in two of about 1,500 runs.
        assert!(s1.index.evictions <= 19, "{s1:?}");
        // Far more than the share: the pool stops at it and evicts within itself.
        for _ in 0..600 {
            c.insert(9, offset, BlockType::BloomChunk, bloom(64 << 10));
            offset += 1;
        }
        let s2 = c.stats();
        assert!(s2.meta_capacity <= cap / 4 && s2.meta_capacity >= cap / 4 - (1 << 20));
        assert!(s2.meta_usage <= s2.meta_capacity);
        // The files go: space returns to data.
        c.evict_files(&[1, 2, 3, 9]);
        let s3 = c.stats();
        assert_eq!(s3.meta_usage, 0);
        assert_eq!(s3.meta_capacity, s0.meta_capacity);
        assert_eq!(data_cap(&c) + s3.meta_capacity, s3.capacity);
    }

    /// Pinned meta blocks are charged to the data pool within the meta share, keep the
    /// cache's total, hold back the meta pool's growth, and give the space back on unpin;
    /// data blocks, and every block of a single shared pool, are never pinned.
    #[test]
    fn pins_come_out_of_the_data_pool_within_the_meta_share() {
        let cap = 64 << 20;
        let c = ShardedBlockCache::new(cap, 0.25);
        let data_cap = |c: &ShardedBlockCache| c.data.as_ref().unwrap().cache.capacity();
        let shards = c.data.as_ref().unwrap().cache.num_shards() as u64;
        let (total, d0) = (c.capacity(), data_cap(&c));
        assert!(c.pin(BlockType::Data, &keyed(1000)).is_none());
        let b = bloom(1 << 20);
        let w = c
            .pin(BlockType::BloomChunk, &b)
            .expect("room for one chunk");
        assert_eq!(w, block_weight(&b));
        assert!(
            d0 - w - data_cap(&c) < shards,
            "the data pool gave up the pinned bytes"
        );
        assert!(total - c.capacity() < shards, "the total stays");
        let mut charged = vec![w];
        while let Some(w) = c.pin(BlockType::LeafIndex, &keyed(1 << 20)) {
            charged.push(w);
        }
        let s = c.stats();
        assert_eq!(s.pinned, charged.iter().sum::<u64>());
        assert!(s.pinned + s.meta_capacity <= c.meta_limit, "{s:?}");
        assert!(
            s.pinned + s.meta_capacity + (2 << 20) > c.meta_limit,
            "{s:?}"
        );
        assert!(s.usage <= s.capacity && total - s.capacity < shards);
        // Meta blocks still offered to the pool cannot grow it past what the pins leave.
        for i in 0..64 {
            c.insert(1, i, BlockType::LeafIndex, keyed(256 << 10));
        }
        let s = c.stats();
        assert!(
            s.meta_capacity <= (c.meta_limit - s.pinned).max(c.meta_floor),
            "{s:?}"
        );
        for w in charged {
            c.unpin(w);
        }
        assert_eq!(c.stats().pinned, 0);
        assert!(data_cap(&c) + c.meta.as_ref().unwrap().cache.capacity() + shards > total);
        let shared = ShardedBlockCache::new(cap, 0.0);
        assert!(shared.pin(BlockType::BloomChunk, &bloom(1000)).is_none());
    }

    /// The meta pool's floor leaves room for pins on every core count: sharded for its whole
    /// share, the default 256 MiB cache on 16 cores (and a 32 MiB one on 2) had a floor equal
    /// to the share and granted no pin.
    #[test]
    fn pins_fit_beside_the_meta_floor_on_many_cores() {
        for (cap, cores) in [
            (256u64 << 20, 16),
            (256 << 20, 64),
            (32 << 20, 2),
            (8 << 20, 1),
        ] {
            let c = ShardedBlockCache::for_cores(cap, 0.25, cores);
            assert!(
                c.meta_floor * 2 <= c.meta_limit,
                "{cap} bytes on {cores} cores: floor {} of limit {}",
                c.meta_floor,
                c.meta_limit
            );
            let mut pinned = 0;
            while let Some(w) = c.pin(BlockType::LeafIndex, &keyed(64 << 10)) {
                pinned += w;
            }
            assert!(
                pinned + c.meta_floor + (64 << 10) + ENTRY_OVERHEAD > c.meta_limit,
                "{cap} bytes on {cores} cores: pinned {pinned} beside floor {}",
                c.meta_floor
            );
            assert!(c.capacity() <= cap && c.usage() <= c.capacity());
        }
    }

    #[test]
    fn concurrent_use_from_8_threads() {
        let cap = 2 << 20;
        let c = Arc::new(ShardedBlockCache::new(cap, 0.25));
        let threads: Vec<_> = (0..8u64)
            .map(|t| {
                let c = c.clone();
                std::thread::spawn(move || {
                    let mut rng = StdRng::seed_from_u64(t);
                    for _ in 0..3_000 {
                        let id = rng.random_range(0..8u64);
                        let off = rng.random_range(0..64u64) * 4096;
                        let ty = if off % 3 == 0 {
                            BlockType::BloomChunk
                        } else {
                            BlockType::Data
                        };
                        match c.get(id, off, ty) {
                            Some(CachedBlock::Bloom(b)) => assert!(b.iter().all(|&x| x == 0xA5)),
                            Some(CachedBlock::Keyed(b)) => assert!(b.size() >= 100),
                            None if ty == BlockType::BloomChunk => {
                                c.insert(id, off, ty, bloom(1 + (off as usize % 9000)))
                            }
                            None => c.insert(id, off, ty, keyed(100 + (off as usize % 60_000))),
                        }
                        assert!(c.usage() <= cap);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().expect("no thread panics");
        }
        let s = c.stats();
        assert_eq!(s.hits + s.misses, 8 * 3_000);
        assert!(s.hits > 0 && s.usage <= s.capacity);
    }

    #[test]
    fn file_cache_bounds_and_counts() {
        let fc: FileCache<Arc<u64>> = FileCache::new(4);
        assert_eq!(fc.stats().capacity, 4);
        let held = fc
            .get_or_open(1, || Ok::<_, ()>(Arc::new(1)))
            .expect("opens");
        for n in 2..=20u64 {
            let v = fc
                .get_or_open(n, || Ok::<_, ()>(Arc::new(n)))
                .expect("opens");
            assert_eq!(*v, n);
            assert!(fc.stats().open <= 4);
        }
        // An evicted reader still in use stays valid.
        assert_eq!(*held, 1);
        let hit = fc.get_or_open(20, || Err(())).expect("cached");
        assert_eq!(*hit, 20);
        assert!(fc.get_or_open(99, || Err::<Arc<u64>, _>("io")).is_err());
        let s = fc.stats();
        assert_eq!((s.opens, s.hits), (21, 1));
        assert!(s.evictions >= 16, "{s:?}");
        fc.evict(20);
        assert_eq!(
            *fc.get_or_open(20, || Ok::<_, ()>(Arc::new(21)))
                .expect("reopens"),
            21
        );
    }

    #[test]
    fn file_cache_opens_once_under_contention() {
        let fc: Arc<FileCache<Arc<u64>>> = Arc::new(FileCache::new(100));
        let opened = Arc::new(AtomicU64::new(0));
        let threads: Vec<_> = (0..8)
            .map(|_| {
                let (fc, opened) = (fc.clone(), opened.clone());
                std::thread::spawn(move || {
                    fc.get_or_open(7, || {
                        opened.fetch_add(1, Ordering::SeqCst);
                        std::thread::sleep(std::time::Duration::from_millis(20));
                        Ok::<_, ()>(Arc::new(7))
                    })
                    .map(|v| *v)
                })
            })
            .collect();
        for t in threads {
            assert_eq!(t.join().expect("no panic"), Ok(7));
        }
        assert_eq!(opened.load(Ordering::SeqCst), 1);
    }
}
