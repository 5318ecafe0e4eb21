//! Helpers shared by the robustness tests (`malformed.rs`, `bitflip.rs`, `fixtures.rs`):
//! deterministic sample files, a map of where every block of a file lies, and surgical edits
//! that damage exactly one field — either breaking a checksum, or re-sealing the block (or
//! re-encoding the trailer) so that only the lying field is wrong.
//!
//! Each test binary uses a different subset of these helpers.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::sync::Arc;

use cellar_format::block::{
    seal_block, Block, BlockBuilder, BlockIter, DataBlockEncoding, Envelope,
};
use cellar_format::bloom::{BloomConfig, BloomMeta};
use cellar_format::checksum::{block_checksum, plain_checksum, ChecksumType};
use cellar_format::error::Region;
use cellar_format::index::IndexValue;
use cellar_format::reader::read_block_from;
use cellar_format::{
    BlockHandle, BlockType, BloomType, CellKey, CellType, CompressionType, Error, ErrorKind,
    FileInfo, FormatVersion, HFileReader, HFileWriter, Trailer, WriterOptions, TRAILER_LEN,
};

/// One cell: key, value, tags.
pub type Cell = (CellKey, Vec<u8>, Vec<u8>);

/// Cells as a scan returns them: encoded key, value, tags.
pub type Rows = Vec<(Vec<u8>, Vec<u8>, Vec<u8>)>;

/// A deterministic xorshift generator (no dependency on `rand`'s stream stability).
#[derive(Debug, Clone)]
pub struct XorShift(pub u64);

impl XorShift {
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next_u64() as u8).collect()
    }
}

/// Cells of `rows` rows: three qualifiers of puts per row, a family marker on every fifth row,
/// a column marker on every seventh, a version marker on every eleventh. Values of rows in
/// alternating runs of ten are compressible (LZ4 keeps those blocks compressed) or random and
/// three times as long (LZ4 gives up and stores those blocks raw). Every sixth cell has tags.
pub fn sample_cells(rows: usize, value_len: usize) -> Vec<Cell> {
    let mut rng = XorShift(0x5eed_cafe_f00d_1234);
    let mut m: BTreeMap<CellKey, (Vec<u8>, Vec<u8>)> = BTreeMap::new();
    for i in 0..rows {
        let row = format!("row{i:04}");
        let ts = 1000 + i as u64;
        let seq = 1 + i as u64 * 10;
        let compressible = (i / 10) % 2 == 0;
        let value = |rng: &mut XorShift, q: usize| {
            if compressible {
                vec![b'a' + ((i + q) % 26) as u8; value_len]
            } else {
                rng.bytes(value_len * 3)
            }
        };
        for q in 0..3 {
            let k = CellKey::new(
                row.as_bytes(),
                "cf",
                format!("q{q}"),
                ts,
                CellType::Put,
                seq + q as u64,
            );
            let v = value(&mut rng, q);
            m.insert(k, (v, Vec::new()));
        }
        if i % 5 == 0 {
            let k = CellKey::new(
                row.as_bytes(),
                "cf",
                "",
                ts - 1,
                CellType::DeleteFamily,
                seq,
            );
            m.insert(k, (Vec::new(), Vec::new()));
        }
        if i % 7 == 0 {
            let k = CellKey::new(
                row.as_bytes(),
                "cf",
                "q1",
                ts - 2,
                CellType::DeleteColumn,
                seq,
            );
            m.insert(k, (Vec::new(), Vec::new()));
            let k = CellKey::new(row.as_bytes(), "cf", "q2", ts - 3, CellType::Delete, seq);
            m.insert(k, (Vec::new(), Vec::new()));
        }
        if i % 11 == 0 {
            let k = CellKey::new(
                row.as_bytes(),
                "cf",
                "",
                ts - 4,
                CellType::DeleteFamilyVersion,
                seq,
            );
            m.insert(k, (Vec::new(), Vec::new()));
        }
    }
    m.into_iter()
        .enumerate()
        .map(|(n, (k, (v, _)))| {
            let tags = if n % 6 == 0 {
                b"tag".to_vec()
            } else {
                Vec::new()
            };
            (k, v, tags)
        })
        .collect()
}

/// Writer options for family `cf`, created at time 0 (so output is reproducible).
pub fn options(
    block_size: usize,
    index_block_size: usize,
    restart_interval: usize,
    compression: CompressionType,
    bloom: BloomType,
    keys_per_chunk: u32,
) -> WriterOptions {
    let mut o = WriterOptions::new("cf");
    o.block_size = block_size;
    o.index_block_size = index_block_size;
    o.restart_interval = restart_interval;
    o.compression = compression;
    o.bloom = BloomConfig {
        bloom_type: bloom,
        bits_per_key_milli: 10_000,
        keys_per_chunk,
    };
    o.created_at_ms = 0;
    o
}

/// Write `cells` (sorted) with `opts`.
pub fn write_file(cells: &[Cell], opts: WriterOptions) -> Vec<u8> {
    let mut w = HFileWriter::new(Vec::new(), "sample", opts).unwrap();
    for (k, v, t) in cells {
        w.append_with_tags(&k.as_ref(), v, t).unwrap();
    }
    w.finish().unwrap().0
}

/// The file most malformed-input tests damage: 60 rows (~250 cells) in many small data blocks,
/// some LZ4-compressed and some stored raw, two index levels, a ROW bloom in several chunks.
/// Its data blocks are PREFIX encoded, the layout [`parse_block`] takes apart field by field;
/// [`sample_file_diff`] is the same file with DIFF data blocks.
pub fn sample_file() -> (Vec<Cell>, Vec<u8>) {
    sample_file_with(DataBlockEncoding::Prefix)
}

/// [`sample_file`] with DIFF data blocks (the writer's default).
pub fn sample_file_diff() -> (Vec<Cell>, Vec<u8>) {
    sample_file_with(DataBlockEncoding::Diff)
}

fn sample_file_with(encoding: DataBlockEncoding) -> (Vec<Cell>, Vec<u8>) {
    let cells = sample_cells(60, 24);
    let mut o = options(400, 1024, 2, CompressionType::Lz4, BloomType::Row, 16);
    o.data_block_encoding = encoding;
    let bytes = write_file(&cells, o);
    (cells, bytes)
}

/// Where one block of a file is, what its envelope says, and its raw payload.
#[derive(Debug, Clone)]
pub struct BlockInfo {
    pub handle: BlockHandle,
    pub ty: BlockType,
    pub env: Envelope,
    pub raw: Vec<u8>,
}

impl BlockInfo {
    /// File offset of the envelope trailer (block type byte).
    pub fn envelope_at(&self) -> u64 {
        self.handle.offset + self.handle.stored_len
    }
}

/// Every block of a sound file, found through the reader (index walk, bloom meta, trailer).
#[derive(Debug, Clone)]
pub struct Layout {
    pub file_len: u64,
    pub trailer: Trailer,
    pub blocks: Vec<BlockInfo>,
    pub bloom: Option<BloomMeta>,
}

impl Layout {
    pub fn of(bytes: &[u8]) -> Layout {
        let r = HFileReader::open(bytes, "layout").unwrap();
        let t = *r.trailer();
        let mut blocks = Vec::new();
        walk(&r, t.root_index, BlockType::RootIndex, 0, &mut blocks);
        if let Some(m) = r.bloom_meta() {
            for c in &m.chunks {
                blocks.push(read_info(&r, c.handle, BlockType::BloomChunk));
            }
        }
        if let Some(h) = t.bloom_meta {
            blocks.push(read_info(&r, h, BlockType::BloomMeta));
        }
        blocks.push(read_info(&r, t.file_info, BlockType::FileInfo));
        blocks.sort_by_key(|b| b.handle.offset);
        // The blocks of a sound file tile the block region exactly.
        let mut pos = 0;
        for b in &blocks {
            assert_eq!(b.handle.offset, pos, "layout has a gap or overlap");
            pos = b.handle.end();
        }
        assert_eq!(pos, bytes.len() as u64 - TRAILER_LEN as u64);
        Layout {
            file_len: bytes.len() as u64,
            trailer: t,
            blocks,
            bloom: r.bloom_meta().cloned(),
        }
    }

    pub fn of_type(&self, ty: BlockType) -> Vec<&BlockInfo> {
        self.blocks.iter().filter(|b| b.ty == ty).collect()
    }

    /// The `n`-th block of type `ty` in file order.
    pub fn nth(&self, ty: BlockType, n: usize) -> &BlockInfo {
        self.of_type(ty)[n]
    }

    /// The first data block stored with compression `c`.
    pub fn data_with(&self, c: CompressionType) -> &BlockInfo {
        self.of_type(BlockType::Data)
            .into_iter()
            .find(|b| b.env.compression == c)
            .unwrap_or_else(|| panic!("no data block stored as {c:?}"))
    }

    /// The uncompressed data block with the most entries (its raw payload is what is stored).
    pub fn richest_raw_data(&self) -> &BlockInfo {
        self.of_type(BlockType::Data)
            .into_iter()
            .filter(|b| b.env.compression == CompressionType::None)
            .max_by_key(|b| parse_block(&b.raw).entries.len())
            .expect("an uncompressed data block")
    }

    pub fn data_end(&self) -> u64 {
        self.file_len - TRAILER_LEN as u64
    }

    pub fn trailer_at(&self) -> u64 {
        self.data_end()
    }

    /// The region a byte of the file belongs to.
    pub fn region_at(&self, off: u64) -> Region {
        if off >= self.data_end() {
            return Region::Trailer;
        }
        self.blocks
            .iter()
            .find(|b| (b.handle.offset..b.handle.end()).contains(&off))
            .map_or(Region::File, |b| b.ty.region())
    }
}

fn read_info(r: &HFileReader<&[u8]>, h: BlockHandle, ty: BlockType) -> BlockInfo {
    let (raw, env) = r.read_block(h, &[ty]).unwrap();
    BlockInfo {
        handle: h,
        ty,
        env,
        raw,
    }
}

fn walk(
    r: &HFileReader<&[u8]>,
    h: BlockHandle,
    ty: BlockType,
    depth: usize,
    out: &mut Vec<BlockInfo>,
) {
    let info = read_info(r, h, ty);
    let block = Arc::new(Block::new(info.raw.clone()).unwrap());
    out.push(info);
    let child_ty = r.child_type(depth);
    let mut it = BlockIter::new(block);
    it.seek_to_first().unwrap();
    while it.valid() {
        let v = IndexValue::decode(it.value()).unwrap();
        if child_ty == BlockType::Data {
            out.push(read_info(r, v.handle, BlockType::Data));
        } else {
            walk(r, v.handle, child_ty, depth + 1, out);
        }
        it.next().unwrap();
    }
}

/// One entry of a keyed block, with the positions of its fields in the raw payload.
#[derive(Debug, Clone)]
pub struct RawEntry {
    /// Offset of the entry (its `shared` varint).
    pub offset: usize,
    pub shared: u32,
    pub unshared: u32,
    pub value_len: u32,
    pub tags_len: u32,
    /// Offset of each of the four header varints.
    pub field_at: [usize; 4],
    /// Offset of the key delta.
    pub key_at: usize,
    /// Offset of the value.
    pub value_at: usize,
    /// The whole key, prefix included.
    pub key: Vec<u8>,
}

/// A raw keyed block payload taken apart: entries, restart points, and where they start.
#[derive(Debug, Clone)]
pub struct RawBlock {
    pub entries: Vec<RawEntry>,
    pub restarts: Vec<u32>,
    pub restarts_at: usize,
    pub count_at: usize,
}

fn varint(buf: &[u8], pos: &mut usize) -> u32 {
    let mut v = 0u32;
    let mut shift = 0;
    loop {
        let b = buf[*pos];
        *pos += 1;
        v |= u32::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return v;
        }
        shift += 7;
    }
}

/// Parse a sound keyed block payload.
pub fn parse_block(raw: &[u8]) -> RawBlock {
    let count_at = raw.len() - 4;
    let n = u32::from_le_bytes(raw[count_at..].try_into().unwrap()) as usize;
    let restarts_at = count_at - 4 * n;
    let restarts = (0..n)
        .map(|i| {
            let at = restarts_at + 4 * i;
            u32::from_le_bytes(raw[at..at + 4].try_into().unwrap())
        })
        .collect();
    let mut entries = Vec::new();
    let mut pos = 0;
    let mut key: Vec<u8> = Vec::new();
    while pos < restarts_at {
        let offset = pos;
        let mut field_at = [0; 4];
        let mut f = [0u32; 4];
        for i in 0..4 {
            field_at[i] = pos;
            f[i] = varint(raw, &mut pos);
        }
        let [shared, unshared, value_len, tags_len] = f;
        let key_at = pos;
        key.truncate(shared as usize);
        key.extend_from_slice(&raw[key_at..key_at + unshared as usize]);
        let value_at = key_at + unshared as usize;
        pos = value_at + value_len as usize + tags_len as usize;
        entries.push(RawEntry {
            offset,
            shared,
            unshared,
            value_len,
            tags_len,
            field_at,
            key_at,
            value_at,
            key: key.clone(),
        });
    }
    RawBlock {
        entries,
        restarts,
        restarts_at,
        count_at,
    }
}

/// Decoded `(key, value, tags)` entries of a sound keyed block.
pub fn block_entries(raw: &[u8]) -> Vec<(Vec<u8>, Vec<u8>, Vec<u8>)> {
    let mut it = BlockIter::new(Arc::new(Block::new(raw.to_vec()).unwrap()));
    it.seek_to_first().unwrap();
    let mut out = Vec::new();
    while it.valid() {
        out.push((it.key().to_vec(), it.value().to_vec(), it.tags().to_vec()));
        it.next().unwrap();
    }
    out
}

/// Build a keyed block payload from entries.
pub fn build_block(entries: &[(Vec<u8>, Vec<u8>, Vec<u8>)], restart_interval: usize) -> Vec<u8> {
    let mut b = BlockBuilder::new(restart_interval);
    for (k, v, t) in entries {
        b.add(k, v, t);
    }
    b.finish()
}

/// Flip bit `bit` (0..8) of byte `offset`.
pub fn flip_bit(bytes: &mut [u8], offset: u64, bit: u32) {
    bytes[offset as usize] ^= 1 << bit;
}

/// Seal `raw` as a block of `ty` for `offset`, forcing compression `comp` to be tried.
pub fn seal(raw: &[u8], ty: BlockType, comp: CompressionType, offset: u64) -> Vec<u8> {
    seal_block(raw, ty, comp, offset, &mut Vec::new()).0
}

/// A stored block with arbitrary envelope fields and a *correct* checksum over them.
pub fn seal_fields(
    payload: &[u8],
    type_code: u8,
    comp_code: u8,
    raw_len: u32,
    offset: u64,
) -> Vec<u8> {
    let mut head = vec![type_code, comp_code];
    head.extend_from_slice(&raw_len.to_le_bytes());
    let crc = block_checksum(offset, &[payload, &head]);
    let mut out = payload.to_vec();
    out.extend_from_slice(&head);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// Replace block `b` in place by `raw` re-sealed at the same offset with the block's own
/// compression. The stored size must not change (true for uncompressed blocks whose payload
/// keeps its length).
pub fn reseal_in_place(bytes: &mut [u8], b: &BlockInfo, raw: &[u8]) {
    let stored = seal(raw, b.ty, b.env.compression, b.handle.offset);
    assert_eq!(
        stored.len() as u64,
        b.handle.total_len(),
        "re-sealed block changed size"
    );
    put(bytes, b.handle.offset, &stored);
}

/// Overwrite bytes at `offset`.
pub fn put(bytes: &mut [u8], offset: u64, data: &[u8]) {
    bytes[offset as usize..offset as usize + data.len()].copy_from_slice(data);
}

/// Decode the trailer of a sound file, let `f` change it, and write it back with a valid
/// checksum.
pub fn rewrite_trailer(bytes: &mut [u8], f: impl FnOnce(&mut Trailer)) {
    let at = bytes.len() - TRAILER_LEN;
    let mut t = Trailer::decode(&bytes[at..]).unwrap();
    f(&mut t);
    bytes[at..].copy_from_slice(&t.encode());
}

/// Recompute the trailer checksum after raw edits of its covered bytes.
pub fn refresh_trailer_checksum(bytes: &mut [u8]) {
    let at = bytes.len() - TRAILER_LEN;
    let crc = plain_checksum(&bytes[at..at + 60]);
    bytes[at + 60..at + 64].copy_from_slice(&crc.to_le_bytes());
}

/// Rewrite the end of a writer-produced file (root index, file info, trailer — the last three
/// structures, in that order) with new raw payloads for the root and/or the file info. Their
/// sizes may change: the file info moves and the trailer is re-encoded to match.
pub fn rebuild_tail(bytes: &[u8], root_raw: Option<&[u8]>, fi_raw: Option<&[u8]>) -> Vec<u8> {
    let at = bytes.len() - TRAILER_LEN;
    let mut t = Trailer::decode(&bytes[at..]).unwrap();
    let data_end = at as u64;
    assert_eq!(
        t.root_index.end(),
        t.file_info.offset,
        "root must precede file info"
    );
    assert_eq!(
        t.file_info.end(),
        data_end,
        "file info must end the block region"
    );
    let read = |h: BlockHandle, ty: BlockType| {
        read_block_from(bytes, "tail", data_end, h, &[ty], true)
            .unwrap()
            .0
    };
    let root_raw =
        root_raw.map_or_else(|| read(t.root_index, BlockType::RootIndex), <[u8]>::to_vec);
    let fi_raw = fi_raw.map_or_else(|| read(t.file_info, BlockType::FileInfo), <[u8]>::to_vec);
    let mut out = bytes[..t.root_index.offset as usize].to_vec();
    let root = seal(
        &root_raw,
        BlockType::RootIndex,
        CompressionType::None,
        out.len() as u64,
    );
    t.root_index = BlockHandle {
        offset: out.len() as u64,
        stored_len: root.len() as u64 - 10,
    };
    out.extend_from_slice(&root);
    let fi = seal(
        &fi_raw,
        BlockType::FileInfo,
        CompressionType::None,
        out.len() as u64,
    );
    t.file_info = BlockHandle {
        offset: out.len() as u64,
        stored_len: fi.len() as u64 - 10,
    };
    out.extend_from_slice(&fi);
    out.extend_from_slice(&t.encode());
    out
}

/// Rewrite index block entries: `f` may change each entry's separator and decoded value.
pub fn edit_index_entries(
    raw: &[u8],
    mut f: impl FnMut(usize, &mut Vec<u8>, &mut IndexEdit),
) -> Vec<u8> {
    let entries: Vec<_> = block_entries(raw)
        .into_iter()
        .enumerate()
        .map(|(i, (mut k, v, t))| {
            let d = IndexValue::decode(&v).unwrap();
            let mut e = IndexEdit {
                handle: d.handle,
                min_ts: d.min_ts,
                max_ts: d.max_ts,
                first_key: d.first_key.to_vec(),
            };
            f(i, &mut k, &mut e);
            let mut nv = Vec::new();
            IndexValue {
                handle: e.handle,
                min_ts: e.min_ts,
                max_ts: e.max_ts,
                first_key: &e.first_key,
            }
            .encode(&mut nv);
            (k, nv, t)
        })
        .collect();
    build_block(&entries, 1)
}

/// An owned, editable index entry value.
#[derive(Debug, Clone)]
pub struct IndexEdit {
    pub handle: BlockHandle,
    pub min_ts: u64,
    pub max_ts: u64,
    pub first_key: Vec<u8>,
}

/// Encode file-info entries in the given order (no sorting, no checks).
pub fn encode_info_entries(entries: &[(String, Vec<u8>)]) -> Vec<u8> {
    let mut out = (entries.len() as u32).to_le_bytes().to_vec();
    for (k, v) in entries {
        out.extend_from_slice(&(k.len() as u16).to_le_bytes());
        out.extend_from_slice(k.as_bytes());
        out.extend_from_slice(&(v.len() as u32).to_le_bytes());
        out.extend_from_slice(v);
    }
    out
}

/// A data block of a crafted file: its cells, in the order they are stored.
pub type CraftBlock = Vec<(CellKey, Vec<u8>)>;

/// Where a crafted data block was placed.
#[derive(Debug, Clone)]
pub struct Placed {
    pub handle: BlockHandle,
    pub raw_len: usize,
    pub cells: CraftBlock,
}

/// Write a file by hand from data blocks, bypassing the writer's order checks: each block is
/// preceded by `padding[i]` zero bytes (a gap no block owns). The single-level root index,
/// file info (no bloom) and trailer are all truthful, so the only thing wrong with the file is
/// what the blocks themselves contain (or the padding).
pub fn craft_file(blocks: &[CraftBlock], padding: &[usize]) -> Vec<u8> {
    craft_file_as(blocks, padding, FormatVersion::CURRENT)
}

/// [`craft_file`] with the trailer and file info saying `version` (the blocks are PREFIX
/// encoded, which every version reads).
pub fn craft_file_as(blocks: &[CraftBlock], padding: &[usize], version: FormatVersion) -> Vec<u8> {
    let mut bytes = Vec::new();
    let mut placed = Vec::new();
    for (i, cells) in blocks.iter().enumerate() {
        bytes.resize(bytes.len() + padding.get(i).copied().unwrap_or(0), 0);
        let raw = raw_data_block(cells);
        let off = bytes.len() as u64;
        let stored = seal(&raw, BlockType::Data, CompressionType::None, off);
        placed.push(Placed {
            handle: BlockHandle {
                offset: off,
                stored_len: stored.len() as u64 - 10,
            },
            raw_len: raw.len(),
            cells: cells.clone(),
        });
        bytes.extend_from_slice(&stored);
    }
    finish_crafted_as(bytes, &placed, version)
}

/// The raw payload of a crafted data block (restart interval 4, no tags).
pub fn raw_data_block(cells: &CraftBlock) -> Vec<u8> {
    let entries: Vec<_> = cells
        .iter()
        .map(|(k, v)| (k.encode(), v.clone(), Vec::new()))
        .collect();
    build_block(&entries, 4)
}

/// Append a truthful root index (one entry per placed block, separator = its last key), file
/// info and trailer to `bytes`, which already holds the data blocks.
pub fn finish_crafted(bytes: Vec<u8>, placed: &[Placed]) -> Vec<u8> {
    finish_crafted_as(bytes, placed, FormatVersion::CURRENT)
}

/// [`finish_crafted`] for a file of format `version`.
pub fn finish_crafted_as(mut bytes: Vec<u8>, placed: &[Placed], version: FormatVersion) -> Vec<u8> {
    let mut info = FileInfo {
        min_timestamp: u64::MAX,
        ..FileInfo::default()
    };
    let mut root = Vec::new();
    for p in placed {
        let (mut min_ts, mut max_ts) = (u64::MAX, 0);
        for (k, v) in &p.cells {
            let kr = k.as_ref();
            let enc = k.encode();
            info.entries += 1;
            info.count(k.cell_type().unwrap());
            if info.first_key.is_none() {
                info.first_key = Some(enc.clone());
            }
            info.last_key = Some(enc.clone());
            info.min_timestamp = info.min_timestamp.min(kr.timestamp);
            info.max_timestamp = info.max_timestamp.max(kr.timestamp);
            info.max_seq = info.max_seq.max(kr.seq);
            info.raw_key_bytes += enc.len() as u64;
            info.raw_value_bytes += v.len() as u64;
            min_ts = min_ts.min(kr.timestamp);
            max_ts = max_ts.max(kr.timestamp);
        }
        info.data_blocks += 1;
        info.data_raw_bytes += p.raw_len as u64;
        info.data_stored_bytes += p.handle.total_len();
        let mut v = Vec::new();
        IndexValue {
            handle: p.handle,
            min_ts,
            max_ts,
            first_key: &p.cells[0].0.encode(),
        }
        .encode(&mut v);
        root.push((p.cells.last().unwrap().0.encode(), v, Vec::new()));
    }
    let root_raw = build_block(&root, 1);
    let root_off = bytes.len() as u64;
    let root_stored = seal(
        &root_raw,
        BlockType::RootIndex,
        CompressionType::None,
        root_off,
    );
    bytes.extend_from_slice(&root_stored);
    info.index_blocks = 1;
    info.compression = Some(CompressionType::None);
    info.block_size = 4096;
    info.restart_interval = 4;
    info.bloom_type = BloomType::None;
    info.data_block_encoding = "PREFIX".into();
    info.family = b"cf".to_vec();
    info.format_version = version.0;
    let fi_off = bytes.len() as u64;
    let fi_stored = seal(
        &info.encode(),
        BlockType::FileInfo,
        CompressionType::None,
        fi_off,
    );
    bytes.extend_from_slice(&fi_stored);
    let t = Trailer {
        root_index: BlockHandle {
            offset: root_off,
            stored_len: root_stored.len() as u64 - 10,
        },
        file_info: BlockHandle {
            offset: fi_off,
            stored_len: fi_stored.len() as u64 - 10,
        },
        bloom_meta: None,
        index_levels: 1,
        checksum_type: ChecksumType::Crc32c,
        version,
    };
    bytes.extend_from_slice(&t.encode());
    bytes
}

/// A put of row `row`, qualifier `q` at timestamp `ts` in family `cf`.
pub fn put_key(row: &str, q: &str, ts: u64) -> CellKey {
    CellKey::new(row, "cf", q, ts, CellType::Put, ts)
}

/// Two blocks whose key ranges overlap: every checksum, index entry and file-info field is
/// true, but `row15` (second block) is stored after `row20` (end of the first).
pub fn out_of_order_blocks() -> Vec<CraftBlock> {
    let block = |rows: &[u32]| -> CraftBlock {
        rows.iter()
            .map(|r| {
                (
                    put_key(&format!("row{r:02}"), "q", 10),
                    format!("v{r}").into_bytes(),
                )
            })
            .collect()
    };
    vec![block(&[10, 12, 14, 16, 18, 20]), block(&[15, 21, 22, 23])]
}

/// Scan a file forward, collecting `(key, value, tags)`.
pub fn scan_forward<R: cellar_format::ReadAt>(r: &HFileReader<R>) -> Result<Rows, Error> {
    let mut it = r.iter();
    it.seek_to_first()?;
    let mut out = Vec::new();
    while it.valid() {
        out.push((it.key().to_vec(), it.value().to_vec(), it.tags().to_vec()));
        it.next()?;
    }
    Ok(out)
}

/// Scan a file backward, collecting `(key, value, tags)` in the order visited.
pub fn scan_backward<R: cellar_format::ReadAt>(r: &HFileReader<R>) -> Result<Rows, Error> {
    let mut it = r.iter();
    it.seek_to_last()?;
    let mut out = Vec::new();
    while it.valid() {
        out.push((it.key().to_vec(), it.value().to_vec(), it.tags().to_vec()));
        it.prev()?;
    }
    Ok(out)
}

/// True for the categories a damaged file may produce.
pub fn is_damage(e: &Error) -> bool {
    matches!(e.kind(), ErrorKind::Corruption | ErrorKind::Unsupported)
}
