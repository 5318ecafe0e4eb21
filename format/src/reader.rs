//! `HFileReader`: opens a file from its trailer and reads blocks through [`ReadAt`].
//!
//! Open reads the trailer, the root index, the file info and the bloom meta block — nothing
//! proportional to the file's size. Every other block is read on demand, through an optional
//! [`BlockCache`], with its checksum verified unless the caller turned that off.
//!
//! # Pinned meta blocks
//! Every point read needs a bloom chunk and, in a file of two or more index levels, a child
//! of the root; through a shared cache each is a hashed lookup of its own (a cached Get spent
//! 11% of its time in three cache lookups). A reader with a cache may instead hold those
//! blocks itself, once read, for as long as it lives (RocksDB's default,
//! `cache_index_and_filter_blocks = false`, and fjall's): the cache decides, through
//! [`BlockCache::pin`], whether it gives up the block's bytes from its own budget, so memory
//! stays bounded by the cache's size; the reader gives them back when it drops. Only the
//! root's children are pinned (the blocks every lookup passes through); deeper index levels
//! of very large files go through the cache.
//!
//! # Block map
//! From its second seek on, a reader with a cache also holds a block map (module
//! `blockmap`): a word and a handle per data block, so a seek finds its data block without
//! descending the index (SPEC.md §5, *Reading*). Its bytes are charged through
//! [`BlockCache::pin_bytes`] and given back with the pins.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use crate::block::{
    unseal_block_vec, Block, BlockHandle, BlockIter, BlockType, DataBlockEncoding, Envelope,
    UnsealError,
};
use crate::blockmap::BlockMap;
use crate::bloom::{chunk_may_contain, hash_key, BloomMeta, BloomType, ChunkSearch};
use crate::cell::{CellKey, CellType, KeyRef};
use crate::error::{Error, Malformed, Region, Result};
use crate::file_info::FileInfo;
use crate::index::IndexValue;
use crate::iter::HFileIter;
use crate::trailer::{Trailer, TrailerError, TRAILER_LEN};
use crate::version::FormatVersion;

/// Positional reads of an immutable file. The engine plugs in pread, io_uring or a cache.
pub trait ReadAt: Send + Sync {
    /// Fill `buf` from `offset`, or fail (a short file is an error).
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<()>;
    /// Size of the file.
    fn size(&self) -> std::io::Result<u64>;
    /// `len` bytes from `offset` in a new vector (a short file is an error). The default zeroes
    /// the vector, then reads into it; a source that can read into uninitialized memory (the
    /// engine's real files) overrides it, because every block a Get misses in the cache is
    /// read through here and the zeroing was 7.5% of such a Get (perf).
    fn read_vec_at(&self, len: usize, offset: u64) -> std::io::Result<Vec<u8>> {
        let mut buf = vec![0u8; len];
        self.read_exact_at(&mut buf, offset)?;
        Ok(buf)
    }
}

#[cfg(unix)]
impl ReadAt for std::fs::File {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
        std::os::unix::fs::FileExt::read_exact_at(self, buf, offset)
    }
    fn size(&self) -> std::io::Result<u64> {
        Ok(self.metadata()?.len())
    }
}

impl ReadAt for [u8] {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
        let src = usize::try_from(offset)
            .ok()
            .and_then(|o| self.get(o..)?.get(..buf.len()))
            .ok_or_else(|| std::io::Error::from(std::io::ErrorKind::UnexpectedEof))?;
        buf.copy_from_slice(src);
        Ok(())
    }
    fn size(&self) -> std::io::Result<u64> {
        Ok(self.len() as u64)
    }
}

impl ReadAt for Vec<u8> {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
        self.as_slice().read_exact_at(buf, offset)
    }
    fn size(&self) -> std::io::Result<u64> {
        Ok(self.len() as u64)
    }
}

impl<T: ReadAt + ?Sized> ReadAt for Arc<T> {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
        (**self).read_exact_at(buf, offset)
    }
    fn size(&self) -> std::io::Result<u64> {
        (**self).size()
    }
    fn read_vec_at(&self, len: usize, offset: u64) -> std::io::Result<Vec<u8>> {
        (**self).read_vec_at(len, offset)
    }
}

impl<T: ReadAt + ?Sized> ReadAt for &T {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
        (**self).read_exact_at(buf, offset)
    }
    fn size(&self) -> std::io::Result<u64> {
        (**self).size()
    }
    fn read_vec_at(&self, len: usize, offset: u64) -> std::io::Result<Vec<u8>> {
        (**self).read_vec_at(len, offset)
    }
}

/// A decoded block kept by a [`BlockCache`].
#[derive(Debug, Clone)]
pub enum CachedBlock {
    /// A data or index block.
    Keyed(Arc<Block>),
    /// A bloom chunk's bits.
    Bloom(Arc<Vec<u8>>),
}

/// A cache of decoded blocks shared by readers; keys are `(cache_id, block offset)`.
///
/// Both calls name the block's type (`Data`, `LeafIndex`, `IntermediateIndex`, `RootIndex` or
/// `BloomChunk`) so a cache can give index and bloom blocks priority over data blocks and count
/// hits per kind; the type is not part of the key (an offset holds one block).
pub trait BlockCache: Send + Sync + std::fmt::Debug {
    /// Look a block of type `ty` up.
    fn get(&self, cache_id: u64, offset: u64, ty: BlockType) -> Option<CachedBlock>;
    /// Offer a block of type `ty` read from disk.
    fn insert(&self, cache_id: u64, offset: u64, ty: BlockType, block: CachedBlock);
    /// Whether a reader may hold `block` (a bloom chunk or a child of the root index, of type
    /// `ty`) itself for its lifetime instead of caching it: the bytes charged against the
    /// cache's budget, which the reader gives back through [`BlockCache::unpin`] when it
    /// drops, or `None` to cache the block as usual. The default never pins.
    fn pin(&self, ty: BlockType, block: &CachedBlock) -> Option<u64> {
        let _ = (ty, block);
        None
    }
    /// Whether a reader may hold `bytes` of search structures it built from its index blocks
    /// (its block map: a word and a handle per data block) for its lifetime: the bytes
    /// charged against the cache's budget, as [`BlockCache::pin`]'s, or `None` to go without
    /// them (seeks then descend the index). The default declines.
    fn pin_bytes(&self, bytes: u64) -> Option<u64> {
        let _ = bytes;
        None
    }
    /// Give back bytes a [`BlockCache::pin`] or [`BlockCache::pin_bytes`] charged.
    fn unpin(&self, bytes: u64) {
        let _ = bytes;
    }
}

/// The blocks a reader holds itself (module docs, "Pinned meta blocks").
#[derive(Debug, Default)]
struct Pins {
    /// The root's children when they are index blocks: offset, ascending, and the block once
    /// read and pinned.
    index: Box<[(u64, OnceLock<Arc<Block>>)]>,
    /// One slot per bloom chunk.
    bloom: Box<[OnceLock<Arc<Vec<u8>>>]>,
    /// Bytes the cache charged for what is pinned, given back to it on drop.
    charged: AtomicU64,
    /// The cache that charged them (`None` without a cache). The drop is here, not on the
    /// reader, so a reader of borrowed bytes needs them only as long as it is used.
    cache: Option<Arc<dyn BlockCache>>,
    /// The block map, built on the reader's second seek (`None` inside when it could not be
    /// built or the cache declined its bytes).
    map: OnceLock<Option<BlockMap>>,
    /// Whether a seek has asked for the map.
    map_sought: AtomicBool,
}

impl Drop for Pins {
    fn drop(&mut self) {
        let charged = *self.charged.get_mut();
        if let (Some(cache), true) = (&self.cache, charged > 0) {
            cache.unpin(charged);
        }
    }
}

impl Pins {
    fn index_slot(&self, offset: u64) -> Option<&OnceLock<Arc<Block>>> {
        let i = self.index.binary_search_by_key(&offset, |e| e.0).ok()?;
        self.index.get(i).map(|e| &e.1)
    }
}

/// Reader settings.
#[derive(Debug, Clone)]
pub struct ReaderOptions {
    /// Verify each block's checksum when it is read (default true).
    pub verify_checksums: bool,
    /// A block cache, and this file's id in it.
    pub cache: Option<(Arc<dyn BlockCache>, u64)>,
}

impl Default for ReaderOptions {
    fn default() -> Self {
        ReaderOptions {
            verify_checksums: true,
            cache: None,
        }
    }
}

/// An open file.
#[derive(Debug)]
pub struct HFileReader<R: ReadAt> {
    source: R,
    name: String,
    file_len: u64,
    trailer: Trailer,
    info: FileInfo,
    root: Arc<Block>,
    bloom: Option<BloomMeta>,
    /// Search fences of the bloom chunks (see [`ChunkSearch`]).
    chunk_search: Option<ChunkSearch>,
    opts: ReaderOptions,
    /// How the data blocks store their keys (from the file info).
    encoding: DataBlockEncoding,
    /// Meta blocks held by this reader (empty without a cache).
    pins: Pins,
}

impl<R: ReadAt> HFileReader<R> {
    /// Open with default options.
    pub fn open(source: R, name: impl Into<String>) -> Result<Self> {
        Self::open_with(source, name, ReaderOptions::default())
    }

    /// Open: trailer, root index, file info, bloom meta.
    pub fn open_with(source: R, name: impl Into<String>, opts: ReaderOptions) -> Result<Self> {
        let name = name.into();
        let file_len = source
            .size()
            .map_err(|e| io_err(&name, "reading file size", e))?;
        let trailer = read_trailer(&source, &name, file_len)?;
        let mut r = HFileReader {
            source,
            name,
            file_len,
            trailer,
            info: FileInfo::default(),
            root: Arc::new(
                Block::new(0u32.to_le_bytes().to_vec()).map_err(|m| Error::invalid(m.0))?,
            ),
            bloom: None,
            chunk_search: None,
            opts,
            encoding: DataBlockEncoding::Prefix,
            pins: Pins::default(),
        };
        r.root = r.read_keyed(trailer.root_index, BlockType::RootIndex)?;
        let (raw, _) = r.read_block(trailer.file_info, &[BlockType::FileInfo])?;
        r.info = FileInfo::decode(&raw)
            .map_err(|m| r.corrupt(trailer.file_info, Region::FileInfo, m))?;
        if r.info.format_version != trailer.version.0 {
            return Err(r.corrupt(
                trailer.file_info,
                Region::FileInfo,
                Malformed(format!(
                    "file info says format version {}, trailer says {}",
                    r.info.format_version, trailer.version.0
                )),
            ));
        }
        r.encoding = r
            .info
            .data_encoding()
            .map_err(|m| r.corrupt(trailer.file_info, Region::FileInfo, m))?;
        if let Some(h) = trailer.bloom_meta {
            let (raw, _) = r.read_block(h, &[BlockType::BloomMeta])?;
            let meta = BloomMeta::decode(&raw).map_err(|m| r.corrupt(h, Region::BloomMeta, m))?;
            r.chunk_search = ChunkSearch::new(&meta);
            r.bloom = Some(meta);
        }
        if let Some((cache, _)) = &r.opts.cache {
            let cache = Some(cache.clone());
            let chunks = r.bloom.as_ref().map_or(0, |m| m.chunks.len());
            r.pins = Pins {
                index: r
                    .root_children()
                    .into_iter()
                    .map(|o| (o, OnceLock::new()))
                    .collect(),
                bloom: (0..chunks).map(|_| OnceLock::new()).collect(),
                charged: AtomicU64::new(0),
                cache,
                map: OnceLock::new(),
                map_sought: AtomicBool::new(false),
            };
        }
        Ok(r)
    }

    /// Offsets of the root's children when they are index blocks, ascending and distinct;
    /// none when a root entry does not decode (reading that entry reports it).
    fn root_children(&self) -> Vec<u64> {
        if self.trailer.index_levels < 2 {
            return Vec::new();
        }
        let mut out = Vec::new();
        let mut it = BlockIter::new(self.root.clone());
        if it.seek_to_first().is_err() {
            return Vec::new();
        }
        while it.valid() {
            match IndexValue::decode(it.value()) {
                Ok(v) => out.push(v.handle.offset),
                Err(_) => return Vec::new(),
            }
            if it.next().is_err() {
                return Vec::new();
            }
        }
        out.sort_unstable();
        out.dedup();
        out
    }

    /// Whether `ty` is the type of the root's children (the index blocks [`Pins`] holds).
    fn pinnable_index(&self, ty: BlockType) -> bool {
        ty != BlockType::Data && ty == self.child_type(0)
    }

    /// Offer `block`, just read, to the cache to pin in `slot`; false when the cache declined.
    fn try_pin<T>(&self, slot: &OnceLock<T>, value: T, ty: BlockType, block: &CachedBlock) -> bool {
        let Some((cache, _)) = &self.opts.cache else {
            return false;
        };
        let Some(bytes) = cache.pin(ty, block) else {
            return false;
        };
        if slot.set(value).is_ok() {
            self.pins.charged.fetch_add(bytes, Ordering::Relaxed);
        } else {
            // Another thread pinned the same block first.
            cache.unpin(bytes);
        }
        true
    }

    /// The block map a seek searches instead of descending the index (see
    /// [`crate::blockmap`]): only through a cache, which charges its bytes; none on the
    /// reader's first seek (a file sought once, as by one scan or one Get, does not repay
    /// reading its whole index), built on the second.
    #[inline]
    pub(crate) fn block_map(&self) -> Option<&BlockMap> {
        if let Some(m) = self.pins.map.get() {
            return m.as_ref();
        }
        let cache = self.pins.cache.as_ref()?;
        // Read before writing: seeks from several threads only read the flag once it is set.
        if !self.pins.map_sought.load(Ordering::Relaxed) {
            self.pins.map_sought.store(true, Ordering::Relaxed);
            return None;
        }
        self.pins
            .map
            .get_or_init(|| {
                // Asked before the walk, from the file info's count of data blocks: a cache
                // that declines (its meta share is spent) costs no read of the whole index.
                let estimate = BlockMap::estimate(self.info.data_blocks);
                let mut charged = cache.pin_bytes(estimate)?;
                let map = BlockMap::build(self).and_then(|map| {
                    // The file info is only a claim: a map larger than it said asks for the
                    // rest.
                    let more = u64::try_from(map.memory()).ok()?.saturating_sub(estimate);
                    if more > 0 {
                        charged = charged.saturating_add(cache.pin_bytes(more)?);
                    }
                    Some(map)
                });
                if map.is_none() {
                    cache.unpin(charged);
                    return None;
                }
                self.pins.charged.fetch_add(charged, Ordering::Relaxed);
                map
            })
            .as_ref()
    }

    /// The block map if already built: for a scan from the file's first block, which
    /// does not count as a seek towards building it.
    #[inline]
    pub(crate) fn built_block_map(&self) -> Option<&BlockMap> {
        self.pins.map.get().and_then(Option::as_ref)
    }

    /// Bytes of the block map, once built (0 before, and when there is none).
    pub fn block_map_bytes(&self) -> usize {
        self.pins
            .map
            .get()
            .and_then(Option::as_ref)
            .map_or(0, BlockMap::memory)
    }

    /// Bytes of meta blocks this reader holds itself, charged to its cache.
    pub fn pinned_bytes(&self) -> u64 {
        self.pins.charged.load(Ordering::Relaxed)
    }

    /// The file's name as given at open.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Size of the file.
    pub fn file_len(&self) -> u64 {
        self.file_len
    }

    /// The trailer.
    pub fn trailer(&self) -> &Trailer {
        &self.trailer
    }

    /// The format version.
    pub fn version(&self) -> FormatVersion {
        self.trailer.version
    }

    /// The file info.
    pub fn info(&self) -> &FileInfo {
        &self.info
    }

    /// How the data blocks store their keys.
    pub fn data_block_encoding(&self) -> DataBlockEncoding {
        self.encoding
    }

    /// The bloom meta block, if the file has a filter.
    pub fn bloom_meta(&self) -> Option<&BloomMeta> {
        self.bloom.as_ref()
    }

    /// The root index block.
    pub fn root(&self) -> &Arc<Block> {
        &self.root
    }

    /// End of the block region (where the trailer starts).
    pub fn data_end(&self) -> u64 {
        self.file_len - TRAILER_LEN as u64
    }

    /// A cursor over every cell.
    pub fn iter(&self) -> HFileIter<'_, R> {
        HFileIter::new(self)
    }

    pub(crate) fn corrupt(&self, h: BlockHandle, region: Region, m: Malformed) -> Error {
        m.at(&self.name, h.offset, region)
    }

    /// Read a block, check its envelope, checksum (if enabled) and type, decompress it.
    pub fn read_block(
        &self,
        h: BlockHandle,
        expected: &[BlockType],
    ) -> Result<(Vec<u8>, Envelope)> {
        read_block_from(
            &self.source,
            &self.name,
            self.data_end(),
            h,
            expected,
            self.opts.verify_checksums,
        )
    }

    /// Read a data or index block (through the cache).
    pub fn read_keyed(&self, h: BlockHandle, ty: BlockType) -> Result<Arc<Block>> {
        self.read_keyed_noting(h, ty).map(|(b, _)| b)
    }

    /// [`HFileReader::read_keyed`], and whether the block was read from the file (not held
    /// by the reader or its cache).
    pub(crate) fn read_keyed_noting(
        &self,
        h: BlockHandle,
        ty: BlockType,
    ) -> Result<(Arc<Block>, bool)> {
        let slot = if self.pins.index.is_empty() || !self.pinnable_index(ty) {
            None
        } else {
            self.pins.index_slot(h.offset)
        };
        if let Some(b) = slot.and_then(OnceLock::get) {
            return Ok((b.clone(), false));
        }
        if let Some((cache, id)) = &self.opts.cache {
            if let Some(CachedBlock::Keyed(b)) = cache.get(*id, h.offset, ty) {
                return Ok((b, false));
            }
        }
        let (raw, _) = self.read_block(h, &[ty])?;
        let encoding = if ty == BlockType::Data {
            self.encoding
        } else {
            DataBlockEncoding::Prefix
        };
        let block = Arc::new(
            Block::with_encoding(raw, encoding).map_err(|m| self.corrupt(h, ty.region(), m))?,
        );
        if let Some((cache, id)) = &self.opts.cache {
            let cached = CachedBlock::Keyed(block.clone());
            let pinned = slot.is_some_and(|s| self.try_pin(s, block.clone(), ty, &cached));
            if !pinned {
                cache.insert(*id, h.offset, ty, cached);
            }
        }
        Ok((block, true))
    }

    /// Read bloom chunk `i` (through the cache).
    pub fn read_bloom_chunk(&self, i: usize) -> Result<Arc<Vec<u8>>> {
        let Some(meta) = &self.bloom else {
            return Err(Error::invalid("file has no bloom filter"));
        };
        let Some(chunk) = meta.chunks.get(i) else {
            return Err(Error::invalid(format!("no bloom chunk {i}")));
        };
        let h = chunk.handle;
        let slot = self.pins.bloom.get(i);
        if let Some(b) = slot.and_then(OnceLock::get) {
            return Ok(b.clone());
        }
        if let Some((cache, id)) = &self.opts.cache {
            if let Some(CachedBlock::Bloom(b)) = cache.get(*id, h.offset, BlockType::BloomChunk) {
                return Ok(b);
            }
        }
        let (raw, _) = self.read_block(h, &[BlockType::BloomChunk])?;
        let bits = Arc::new(raw);
        if let Some((cache, id)) = &self.opts.cache {
            let ty = BlockType::BloomChunk;
            let cached = CachedBlock::Bloom(bits.clone());
            let pinned = slot.is_some_and(|s| self.try_pin(s, bits.clone(), ty, &cached));
            if !pinned {
                cache.insert(*id, h.offset, ty, cached);
            }
        }
        Ok(bits)
    }

    /// The block type of the children of an index block at `depth` (0 = root).
    pub fn child_type(&self, depth: usize) -> BlockType {
        let levels = usize::from(self.trailer.index_levels);
        if depth + 1 >= levels {
            BlockType::Data
        } else if depth + 2 == levels {
            BlockType::LeafIndex
        } else {
            BlockType::IntermediateIndex
        }
    }

    /// Whether the filter may hold a bloom key (false only when it certainly does not).
    fn probe(&self, key: &[u8]) -> Result<bool> {
        let Some(meta) = &self.bloom else {
            return Ok(true);
        };
        let chunk = match &self.chunk_search {
            Some(s) => s.chunk_for(meta, key),
            None => meta.chunk_for(key),
        };
        let Some(i) = chunk else {
            return Ok(false);
        };
        let bits = self.read_bloom_chunk(i)?;
        Ok(chunk_may_contain(&bits, meta.num_probes, hash_key(key)))
    }

    /// Whether the file may hold cells of `row` (false only when it certainly does not).
    /// Answers `true` when the filter cannot tell (no filter, or ROWCOL).
    pub fn may_contain_row(&self, row: &[u8]) -> Result<bool> {
        let Some(meta) = &self.bloom else {
            return Ok(true);
        };
        match meta.bloom_type {
            // A ROW filter's key is the row itself: no copy per probe.
            BloomType::Row => self.probe(row),
            BloomType::RowPrefix(_) => {
                let mut key = Vec::new();
                meta.bloom_type.key(row, &[], &mut key);
                self.probe(&key)
            }
            BloomType::RowCol | BloomType::None => Ok(true),
        }
    }

    /// Whether the file may hold cells of column `(row, qualifier)` or a family marker of `row`
    /// that could mask it (false only when it certainly holds neither).
    pub fn may_contain_column(&self, row: &[u8], qualifier: &[u8]) -> Result<bool> {
        let Some(meta) = &self.bloom else {
            return Ok(true);
        };
        if meta.bloom_type != BloomType::RowCol {
            return self.may_contain_row(row);
        }
        let mut key = Vec::new();
        meta.bloom_type.key(row, qualifier, &mut key);
        if self.probe(&key)? {
            return Ok(true);
        }
        let has_family_markers = self.info.count_of(CellType::DeleteFamily) > 0
            || self.info.count_of(CellType::DeleteFamilyVersion) > 0;
        if has_family_markers && !qualifier.is_empty() {
            meta.bloom_type.key(row, &[], &mut key);
            return self.probe(&key);
        }
        Ok(false)
    }

    /// Every cell of column `(row, qualifier)` in this file, newest first, with values.
    pub fn get_column(&self, row: &[u8], qualifier: &[u8]) -> Result<Vec<(CellKey, Vec<u8>)>> {
        let mut out = Vec::new();
        if !self.may_contain_column(row, qualifier)? {
            return Ok(out);
        }
        let target = CellKey::first_on_column(row, &self.info.family, qualifier);
        let mut it = self.iter();
        it.seek(&target.as_ref())?;
        while let Some(k) = it.key_ref() {
            if k.row != row || k.qualifier != qualifier {
                break;
            }
            out.push((k.to_owned_key(), it.value().to_vec()));
            it.next()?;
        }
        Ok(out)
    }

    /// The data block a seek to `target` would search (`None` when every key of the file is
    /// before it), found through the index alone: no data block is read. Size estimates over
    /// key ranges take its offset (RocksDB's `GetApproximateSizes` does the same).
    pub fn data_block_for(&self, target: &KeyRef<'_>) -> Result<Option<BlockHandle>> {
        let (mut block, mut handle, mut ty) = (
            self.root.clone(),
            self.trailer.root_index,
            BlockType::RootIndex,
        );
        for depth in 0..usize::from(self.trailer.index_levels).max(1) {
            let mut it = BlockIter::new(block);
            it.seek(target)
                .map_err(|m| self.corrupt(handle, ty.region(), m))?;
            if !it.valid() {
                return Ok(None);
            }
            let child = self.decode_index_value(it.value(), handle, ty)?.handle;
            let child_ty = self.child_type(depth);
            if child_ty == BlockType::Data {
                return Ok(Some(child));
            }
            block = self.read_keyed(child, child_ty)?;
            (handle, ty) = (child, child_ty);
        }
        Ok(None)
    }

    /// Where the data blocks end: one past the last data block's envelope (0 for a file
    /// without cells). Inline index blocks lie among the data, so this is what a share of the
    /// file's data by offset is taken of. Reads index blocks only.
    pub fn data_blocks_end(&self) -> Result<u64> {
        Ok(self
            .descend_by_offset(u64::MAX)?
            .map_or(0, |(h, _)| h.end()))
    }

    /// HBase's midkey: the first key of the data block that holds the middle byte of the
    /// file's data blocks. `None` for a file without cells. Reads index blocks only. A region
    /// split point is the row of the largest file's midkey.
    pub fn mid_key(&self) -> Result<Option<Vec<u8>>> {
        let end = self.data_blocks_end()?;
        Ok(self
            .descend_by_offset(end / 2)?
            .map(|(_, first_key)| first_key))
    }

    /// Descend the index to the data block holding byte `at` of the file (the last one when
    /// `at` is past the data): its handle and first key. Every child lies before its parent
    /// and each level's blocks lie in key order (SPEC.md §5's layout rule), so an index
    /// block's offset is past all the data under it, and the first entry whose child ends
    /// at or beyond `at` covers it.
    fn descend_by_offset(&self, at: u64) -> Result<Option<(BlockHandle, Vec<u8>)>> {
        let (mut block, mut handle, mut ty) = (
            self.root.clone(),
            self.trailer.root_index,
            BlockType::RootIndex,
        );
        for depth in 0..usize::from(self.trailer.index_levels).max(1) {
            let fail = |m| self.corrupt(handle, ty.region(), m);
            let child_ty = self.child_type(depth);
            let mut it = BlockIter::new(block.clone());
            it.seek_to_first().map_err(fail)?;
            let mut chosen: Option<(BlockHandle, Vec<u8>)> = None;
            while it.valid() {
                let v = self.decode_index_value(it.value(), handle, ty)?;
                let reach = if child_ty == BlockType::Data {
                    v.handle.end()
                } else {
                    v.handle.offset
                };
                chosen = Some((v.handle, v.first_key.to_vec()));
                if reach > at {
                    break;
                }
                it.next().map_err(fail)?;
            }
            let Some((child, first_key)) = chosen else {
                return Ok(None);
            };
            if child_ty == BlockType::Data {
                return Ok(Some((child, first_key)));
            }
            block = self.read_keyed(child, child_ty)?;
            (handle, ty) = (child, child_ty);
        }
        Ok(None)
    }

    /// Decode an index entry's value read from a block at `h` of type `ty`.
    pub fn decode_index_value<'v>(
        &self,
        value: &'v [u8],
        h: BlockHandle,
        ty: BlockType,
    ) -> Result<IndexValue<'v>> {
        IndexValue::decode(value).map_err(|m| self.corrupt(h, ty.region(), m))
    }
}

/// Read and decode the trailer of a file of `file_len` bytes, checking that its handles stay
/// inside the block region.
pub fn read_trailer<R: ReadAt + ?Sized>(source: &R, name: &str, file_len: u64) -> Result<Trailer> {
    let corrupt = |offset: u64, what: String| Error::Corruption {
        file: name.to_owned(),
        offset,
        region: Region::Trailer,
        what,
    };
    if file_len < TRAILER_LEN as u64 {
        return Err(corrupt(
            0,
            format!("file of {file_len} bytes is shorter than the {TRAILER_LEN}-byte trailer"),
        ));
    }
    let at = file_len - TRAILER_LEN as u64;
    let mut buf = [0u8; TRAILER_LEN];
    source
        .read_exact_at(&mut buf, at)
        .map_err(|e| io_err(name, "reading trailer", e))?;
    let t = Trailer::decode(&buf).map_err(|e| match e {
        TrailerError::BadMagic(m) => corrupt(
            at,
            format!(
                "bad magic {} (expected {})",
                crate::display::to_string_binary(&m),
                crate::display::to_string_binary(&crate::trailer::MAGIC)
            ),
        ),
        TrailerError::Checksum { expected, actual } => Error::ChecksumMismatch {
            file: name.to_owned(),
            offset: at,
            region: Region::Trailer,
            expected,
            actual,
        },
        TrailerError::Unsupported(v) => Error::Unsupported {
            file: name.to_owned(),
            version: v,
            min: FormatVersion::MIN_READ.0,
            max: FormatVersion::CURRENT.0,
        },
        TrailerError::Malformed(m) => corrupt(at, m.0),
    })?;
    for (what, h) in [
        ("root index", Some(t.root_index)),
        ("file info", Some(t.file_info)),
        ("bloom meta", t.bloom_meta),
    ] {
        if let Some(h) = h {
            if h.end() > at || h.offset > at {
                return Err(corrupt(
                    at,
                    format!(
                        "{what} handle {}+{} points past the block region end {at}",
                        h.offset,
                        h.total_len()
                    ),
                ));
            }
        }
    }
    Ok(t)
}

/// Read the block at `h` from `source` (whose block region ends at `data_end`), check its
/// envelope, checksum (if `verify`) and type, and decompress it.
pub fn read_block_from<R: ReadAt + ?Sized>(
    source: &R,
    name: &str,
    data_end: u64,
    h: BlockHandle,
    expected: &[BlockType],
    verify: bool,
) -> Result<(Vec<u8>, Envelope)> {
    let region = expected.first().map_or(Region::File, |t| t.region());
    let corrupt = |what: String| Error::Corruption {
        file: name.to_owned(),
        offset: h.offset,
        region,
        what,
    };
    if h.end() > data_end || h.offset > data_end {
        return Err(corrupt(format!(
            "block handle {}+{} runs past the end of the block region at {data_end}",
            h.offset,
            h.total_len()
        )));
    }
    let buf = source
        .read_vec_at(h.total_len() as usize, h.offset)
        .map_err(|e| io_err(name, &format!("reading {region} at {}", h.offset), e))?;
    unseal_block_vec(buf, h.offset, expected, verify).map_err(|e| match e {
        UnsealError::Checksum { expected, actual } => Error::ChecksumMismatch {
            file: name.to_owned(),
            offset: h.offset,
            region,
            expected,
            actual,
        },
        UnsealError::Malformed(m) => corrupt(m.0),
    })
}

fn io_err(name: &str, doing: &str, source: std::io::Error) -> Error {
    Error::Io {
        file: name.to_owned(),
        doing: doing.to_owned(),
        source,
    }
}

/// Make sure a parsed key is present (helper for callers of [`KeyRef::parse`] on keys the block
/// decoder already validated).
pub(crate) fn parsed(key: &[u8]) -> Option<KeyRef<'_>> {
    KeyRef::parse(key).ok()
}

#[cfg(test)]
mod read_at_tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A source that serves `read_vec_at` itself, as the engine's real files do.
    struct Own(AtomicUsize);

    impl ReadAt for Own {
        fn read_exact_at(&self, buf: &mut [u8], _offset: u64) -> std::io::Result<()> {
            buf.fill(1);
            Ok(())
        }
        fn size(&self) -> std::io::Result<u64> {
            Ok(1 << 20)
        }
        fn read_vec_at(&self, len: usize, _offset: u64) -> std::io::Result<Vec<u8>> {
            self.0.fetch_add(1, Ordering::Relaxed);
            Ok(vec![2; len])
        }
    }

    /// The wrappers the reader is used through pass `read_vec_at` on: the default would
    /// quietly zero every block read again.
    #[test]
    fn wrappers_forward_the_uninitialized_read() {
        // Generic, so that each call goes through the wrapper's impl, not auto-deref.
        fn read<R: ReadAt>(source: R, len: usize) -> Vec<u8> {
            source.read_vec_at(len, 0).unwrap()
        }
        let own = Arc::new(Own(AtomicUsize::new(0)));
        assert_eq!(read(Arc::clone(&own), 3), vec![2; 3]);
        assert_eq!(read(&*own, 2), vec![2; 2]);
        assert_eq!(read(&own, 1), vec![2; 1]);
        assert_eq!(own.0.load(Ordering::Relaxed), 3);
        // The default reads through `read_exact_at`.
        assert_eq!(b"abcdef".as_slice().read_vec_at(3, 2).unwrap(), b"cde");
        assert!(b"abc".as_slice().read_vec_at(2, 2).is_err());
    }
}
