//! The structural verifier (SPEC.md §11), shared by `hfile-verify`, the tests and the engine.
//!
//! It reads every block with its checksum checked whatever the caller's read options, decodes
//! everything, and checks what the format promises: key order within and across blocks, every
//! index entry pointing at a real block whose first key, last key and time range it states
//! truthfully, the bloom filter holding every stored key, the file info's counts and ranges,
//! and the blocks tiling the file with no gap or overlap. Each problem names its offset and
//! region; nothing on any input panics.

use std::cmp::Ordering;

use crate::block::{Block, BlockHandle, BlockIter, BlockType, DataBlockEncoding};
use crate::bloom::{chunk_may_contain, hash_key, BloomMeta};
use crate::cell::{validate_key, CellType, KeyRef};
use crate::display::encoded_key_to_string;
use crate::error::{Error, Malformed, Region, Result};
use crate::file_info::FileInfo;
use crate::index::IndexValue;
use crate::reader::{read_block_from, read_trailer, ReadAt};
use crate::trailer::{Trailer, TRAILER_LEN};

/// One thing wrong with a file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// Offset of the block (or trailer) concerned.
    pub offset: u64,
    /// The structure concerned.
    pub region: Region,
    /// What is wrong.
    pub what: String,
}

/// Counts of what was checked.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VerifyStats {
    /// Cells decoded.
    pub cells: u64,
    /// Data blocks checked.
    pub data_blocks: u64,
    /// Index blocks checked, root included.
    pub index_blocks: u64,
    /// Bloom chunks checked.
    pub bloom_chunks: u64,
    /// Distinct bloom keys looked up in the filter.
    pub bloom_keys_checked: u64,
}

/// The verifier's findings for one file.
#[derive(Debug, Clone)]
pub struct VerifyReport {
    /// The file's name.
    pub file: String,
    /// Its size.
    pub file_len: u64,
    /// Everything wrong, in the order found (empty when the file is sound).
    pub problems: Vec<Problem>,
    /// What was checked.
    pub stats: VerifyStats,
    /// True when more problems were found than [`MAX_PROBLEMS`] and the rest were dropped.
    pub truncated: bool,
}

impl VerifyReport {
    /// True when no problem was found.
    pub fn is_clean(&self) -> bool {
        self.problems.is_empty()
    }
}

/// Most problems kept per file; a badly damaged file would otherwise report one per cell.
pub const MAX_PROBLEMS: usize = 1000;

/// Verify a file. Returns `Err` only when the file cannot be checked at all (an I/O error, or a
/// sound trailer naming an unsupported version); corruption is reported in the report.
pub fn verify<R: ReadAt + ?Sized>(source: &R, name: &str) -> Result<VerifyReport> {
    verify_with_progress(source, name, &mut |_| {})
}

/// [`verify`], calling `progress` with the offset of each data block as it is checked.
pub fn verify_with_progress<R: ReadAt + ?Sized>(
    source: &R,
    name: &str,
    progress: &mut dyn FnMut(u64),
) -> Result<VerifyReport> {
    let file_len = source.size().map_err(|e| Error::Io {
        file: name.to_owned(),
        doing: "reading file size".into(),
        source: e,
    })?;
    let mut v = Verifier {
        source,
        name,
        data_end: file_len.saturating_sub(TRAILER_LEN as u64),
        report: VerifyReport {
            file: name.to_owned(),
            file_len,
            problems: Vec::new(),
            stats: VerifyStats::default(),
            truncated: false,
        },
        regions: Vec::new(),
        last_child: Vec::new(),
        prev_key: None,
        seen: FileInfo {
            min_timestamp: u64::MAX,
            ..FileInfo::default()
        },
        info: None,
        encoding: DataBlockEncoding::Prefix,
        bloom: None,
        bloom_state: BloomState::default(),
        progress,
    };
    let trailer = match read_trailer(source, name, file_len) {
        Ok(t) => t,
        Err(e @ (Error::Io { .. } | Error::Unsupported { .. })) => return Err(e),
        Err(e) => {
            v.push_error(e);
            return Ok(v.report);
        }
    };
    v.run(&trailer)?;
    Ok(v.report)
}

#[derive(Debug, Default)]
struct BloomState {
    last_key: Option<Vec<u8>>,
    chunk: Option<(usize, Vec<u8>)>,
    keys_per_chunk: Vec<u32>,
    key_buf: Vec<u8>,
}

struct Verifier<'a, R: ReadAt + ?Sized> {
    source: &'a R,
    name: &'a str,
    data_end: u64,
    report: VerifyReport,
    /// (offset, total length, region) of every block found.
    regions: Vec<(u64, u64, Region)>,
    /// Offset of the last child visited at each depth: the in-order walk must find them at
    /// strictly increasing offsets (SPEC.md §5), which also keeps a damaged index that shares
    /// blocks between parents from making the walk exponential.
    last_child: Vec<Option<u64>>,
    prev_key: Option<Vec<u8>>,
    /// File info recomputed from the cells and blocks seen.
    seen: FileInfo,
    info: Option<FileInfo>,
    /// How data blocks are decoded: the file info's encoding, or when that is unreadable the
    /// one its version's writer uses (PREFIX before v2, DIFF since), so the blocks are still
    /// checked.
    encoding: DataBlockEncoding,
    bloom: Option<BloomMeta>,
    bloom_state: BloomState,
    progress: &'a mut dyn FnMut(u64),
}

/// First key, last key and time range of what lies under an index entry.
struct Span {
    first: Vec<u8>,
    last: Vec<u8>,
    min_ts: u64,
    max_ts: u64,
}

impl<R: ReadAt + ?Sized> Verifier<'_, R> {
    fn push(&mut self, offset: u64, region: Region, what: impl Into<String>) {
        if self.report.problems.len() >= MAX_PROBLEMS {
            self.report.truncated = true;
            return;
        }
        self.report.problems.push(Problem {
            offset,
            region,
            what: what.into(),
        });
    }

    fn push_error(&mut self, e: Error) {
        match &e {
            Error::Corruption {
                offset,
                region,
                what,
                ..
            } => self.push(*offset, *region, what.clone()),
            Error::ChecksumMismatch {
                offset,
                region,
                expected,
                actual,
                ..
            } => self.push(
                *offset,
                *region,
                format!("checksum mismatch (stored {expected:#010x}, computed {actual:#010x})"),
            ),
            other => self.push(0, Region::File, other.to_string()),
        }
    }

    /// Read a block; I/O errors abort, corruption is recorded and yields `None`.
    fn read(&mut self, h: BlockHandle, ty: BlockType) -> Result<Option<Vec<u8>>> {
        self.regions.push((h.offset, h.total_len(), ty.region()));
        match read_block_from(self.source, self.name, self.data_end, h, &[ty], true) {
            Ok((raw, _)) => Ok(Some(raw)),
            Err(e @ Error::Io { .. }) => Err(e),
            Err(e) => {
                self.push_error(e);
                Ok(None)
            }
        }
    }

    fn run(&mut self, t: &Trailer) -> Result<()> {
        if t.version.has_data_block_encodings() {
            self.encoding = DataBlockEncoding::Diff;
        }
        if let Some(raw) = self.read(t.file_info, BlockType::FileInfo)? {
            match FileInfo::decode(&raw) {
                Ok(fi) => {
                    match fi.data_encoding() {
                        Ok(e) => self.encoding = e,
                        Err(m) => self.push(t.file_info.offset, Region::FileInfo, m.0),
                    }
                    self.info = Some(fi);
                }
                Err(m) => self.push(t.file_info.offset, Region::FileInfo, m.0),
            }
        }
        if let Some(h) = t.bloom_meta {
            if let Some(raw) = self.read(h, BlockType::BloomMeta)? {
                match BloomMeta::decode(&raw) {
                    Ok(m) => {
                        self.bloom_state.keys_per_chunk = vec![0; m.chunks.len()];
                        self.bloom = Some(m);
                    }
                    Err(m) => self.push(h.offset, Region::BloomMeta, m.0),
                }
            }
        }
        self.check_bloom_chunks()?;
        self.walk_index(t.root_index, BlockType::RootIndex, 0, t.index_levels)?;
        self.check_bloom_counts();
        self.check_file_info(t);
        self.check_tiling();
        Ok(())
    }

    fn check_bloom_chunks(&mut self) -> Result<()> {
        let Some(meta) = self.bloom.clone() else {
            return Ok(());
        };
        let ty = meta.bloom_type;
        for (i, c) in meta.chunks.iter().enumerate() {
            if ty.compare_keys(&c.first_key, &c.last_key) == Ordering::Greater {
                self.push(
                    c.handle.offset,
                    Region::BloomMeta,
                    format!("chunk {i} first key sorts after its last key"),
                );
            }
            if let Some(prev) = i.checked_sub(1).and_then(|p| meta.chunks.get(p)) {
                if ty.compare_keys(&prev.last_key, &c.first_key) != Ordering::Less {
                    self.push(
                        c.handle.offset,
                        Region::BloomMeta,
                        format!("chunk {i} overlaps chunk {}", i - 1),
                    );
                }
            }
            if let Some(bits) = self.read(c.handle, BlockType::BloomChunk)? {
                self.report.stats.bloom_chunks += 1;
                if bits.is_empty() || bits.len() % 64 != 0 {
                    self.push(
                        c.handle.offset,
                        Region::BloomChunk,
                        format!(
                            "chunk of {} bytes is not a whole number of 64-byte blocks",
                            bits.len()
                        ),
                    );
                }
            }
        }
        Ok(())
    }

    fn walk_index(
        &mut self,
        h: BlockHandle,
        ty: BlockType,
        depth: usize,
        levels: u8,
    ) -> Result<Option<Span>> {
        let Some(raw) = self.read(h, ty)? else {
            return Ok(None);
        };
        self.report.stats.index_blocks += 1;
        let block = match Block::new(raw) {
            Ok(b) => b,
            Err(m) => {
                self.push(h.offset, ty.region(), m.0);
                return Ok(None);
            }
        };
        let child_ty = if depth + 1 >= usize::from(levels) {
            BlockType::Data
        } else if depth + 2 == usize::from(levels) {
            BlockType::LeafIndex
        } else {
            BlockType::IntermediateIndex
        };
        let mut it = BlockIter::new(std::sync::Arc::new(block));
        let mut span: Option<Span> = None;
        let mut prev_sep: Option<Vec<u8>> = None;
        let mut step = it.seek_to_first();
        loop {
            if let Err(m) = step {
                self.push(h.offset, ty.region(), m.0);
                break;
            }
            if !it.valid() {
                break;
            }
            let sep = it.key().to_vec();
            if let Some(p) = &prev_sep {
                if cmp(p, &sep) != Ordering::Less {
                    self.push(
                        h.offset,
                        ty.region(),
                        format!(
                            "index key {} does not sort after {}",
                            encoded_key_to_string(&sep),
                            encoded_key_to_string(p)
                        ),
                    );
                }
            }
            match IndexValue::decode(it.value()) {
                Err(m) => self.push(
                    h.offset,
                    ty.region(),
                    format!("entry {}: {m}", encoded_key_to_string(&sep)),
                ),
                Ok(v) => {
                    let (first_key, min_ts, max_ts, child) =
                        (v.first_key.to_vec(), v.min_ts, v.max_ts, v.handle);
                    if self.last_child.len() <= depth {
                        self.last_child.resize(depth + 1, None);
                    }
                    let last = self.last_child.get(depth).copied().flatten();
                    let seen_before = last.is_some_and(|l| child.offset <= l);
                    // A child outside the block region is reported by the read below, at the
                    // child's own offset.
                    let in_region = child.end() <= self.data_end;
                    if in_region && (child.offset >= h.offset || seen_before) {
                        self.push(
                            h.offset,
                            ty.region(),
                            format!(
                                "entry {} points at the block at {}, not before its parent or not past the previous block of its level{}",
                                encoded_key_to_string(&sep),
                                child.offset,
                                last.map_or_else(String::new, |l| format!(" at {l}"))
                            ),
                        );
                        prev_sep = Some(sep);
                        step = it.next();
                        continue;
                    }
                    if let Some(slot) = self.last_child.get_mut(depth) {
                        *slot = Some(child.offset);
                    }
                    let sub = if child_ty == BlockType::Data {
                        self.check_data_block(child)?
                    } else {
                        self.walk_index(child, child_ty, depth + 1, levels)?
                    };
                    if let Some(s) = sub {
                        self.check_entry(h, ty, &sep, &first_key, min_ts, max_ts, child, &s);
                        span = Some(match span {
                            None => s,
                            Some(a) => Span {
                                first: a.first,
                                last: s.last,
                                min_ts: a.min_ts.min(s.min_ts),
                                max_ts: a.max_ts.max(s.max_ts),
                            },
                        });
                    }
                }
            }
            prev_sep = Some(sep);
            step = it.next();
        }
        Ok(span)
    }

    #[allow(
        clippy::too_many_arguments,
        reason = "one call site; the fields of one index entry"
    )]
    fn check_entry(
        &mut self,
        h: BlockHandle,
        ty: BlockType,
        sep: &[u8],
        first_key: &[u8],
        min_ts: u64,
        max_ts: u64,
        child: BlockHandle,
        s: &Span,
    ) {
        let at = |what: &str| format!("entry for block at {}: {what}", child.offset);
        if first_key != s.first.as_slice() {
            self.push(
                h.offset,
                ty.region(),
                at(&format!(
                    "first key {} but the block starts with {}",
                    encoded_key_to_string(first_key),
                    encoded_key_to_string(&s.first)
                )),
            );
        }
        if cmp(&s.last, sep) == Ordering::Greater {
            self.push(
                h.offset,
                ty.region(),
                at(&format!(
                    "separator {} sorts before the block's last key {}",
                    encoded_key_to_string(sep),
                    encoded_key_to_string(&s.last)
                )),
            );
        }
        if (min_ts, max_ts) != (s.min_ts, s.max_ts) {
            self.push(
                h.offset,
                ty.region(),
                at(&format!(
                    "time range {min_ts}..={max_ts} but the cells span {}..={}",
                    s.min_ts, s.max_ts
                )),
            );
        }
    }

    fn check_data_block(&mut self, h: BlockHandle) -> Result<Option<Span>> {
        (self.progress)(h.offset);
        let Some(raw) = self.read(h, BlockType::Data)? else {
            return Ok(None);
        };
        self.report.stats.data_blocks += 1;
        self.seen.data_blocks += 1;
        self.seen.data_raw_bytes += raw.len() as u64;
        self.seen.data_stored_bytes += h.total_len();
        let block = match Block::with_encoding(raw, self.encoding) {
            Ok(b) => b,
            Err(m) => {
                self.push(h.offset, Region::Data, m.0);
                return Ok(None);
            }
        };
        if block.is_empty() {
            self.push(h.offset, Region::Data, "data block holds no cell");
            return Ok(None);
        }
        let mut it = BlockIter::new(std::sync::Arc::new(block));
        let mut span: Option<Span> = None;
        // The row of the entry before, when its `shared` said the next row differs.
        let mut left_row: Option<Vec<u8>> = None;
        let mut step = it.seek_to_first();
        loop {
            if let Err(m) = step {
                self.push(h.offset, Region::Data, m.0);
                break;
            }
            if !it.valid() {
                break;
            }
            let key = it.key().to_vec();
            let Ok(k) = KeyRef::parse(&key) else {
                self.push(h.offset, Region::Data, "undecodable key");
                break;
            };
            // A reader stops a row's cells on the next entry's `shared` alone (SPEC.md §4.3:
            // an entry that is not a restart point shares all it has in common with the
            // entry before it); one that shares less would hide the rest of a row.
            if left_row.as_deref() == Some(k.row) {
                self.push(
                    h.offset,
                    Region::Data,
                    format!(
                        "entry at {} shares less than it has in common with the entry before it",
                        it.entry_offset()
                    ),
                );
            }
            left_row = it.next_leaves_row(k.row.len()).then(|| k.row.to_vec());
            self.check_cell(h, &k, &key, it.value().len());
            match &mut span {
                None => {
                    span = Some(Span {
                        first: key.clone(),
                        last: key.clone(),
                        min_ts: k.timestamp,
                        max_ts: k.timestamp,
                    })
                }
                Some(s) => {
                    s.last.clone_from(&key);
                    s.min_ts = s.min_ts.min(k.timestamp);
                    s.max_ts = s.max_ts.max(k.timestamp);
                }
            }
            self.prev_key = Some(key);
            step = it.next();
        }
        Ok(span)
    }

    fn check_cell(&mut self, h: BlockHandle, k: &KeyRef<'_>, key: &[u8], value_len: usize) {
        self.report.stats.cells += 1;
        if let Some(p) = &self.prev_key {
            if cmp(p, key) != Ordering::Less {
                let what = format!(
                    "key {} does not sort after the previous key {}",
                    encoded_key_to_string(key),
                    encoded_key_to_string(p)
                );
                self.push(h.offset, Region::Data, what);
            }
        }
        match validate_key(k) {
            Ok(t) => self.seen.count(t),
            Err(e) => self.push(
                h.offset,
                Region::Data,
                format!("cell {}: {e}", encoded_key_to_string(key)),
            ),
        }
        if let Some(fi) = &self.info {
            if k.family != fi.family.as_slice() {
                let what = format!(
                    "cell {} is not of the file's family",
                    encoded_key_to_string(key)
                );
                self.push(h.offset, Region::Data, what);
            }
        }
        let s = &mut self.seen;
        s.entries += 1;
        if s.first_key.is_none() {
            s.first_key = Some(key.to_vec());
        }
        s.last_key = Some(key.to_vec());
        s.min_timestamp = s.min_timestamp.min(k.timestamp);
        s.max_timestamp = s.max_timestamp.max(k.timestamp);
        s.max_seq = s.max_seq.max(k.seq);
        s.raw_key_bytes += key.len() as u64;
        s.raw_value_bytes += value_len as u64;
        self.check_bloom_key(h, k);
    }

    fn check_bloom_key(&mut self, h: BlockHandle, k: &KeyRef<'_>) {
        let Some(meta) = &self.bloom else {
            return;
        };
        let st = &mut self.bloom_state;
        meta.bloom_type.key(k.row, k.qualifier, &mut st.key_buf);
        if st.last_key.as_deref() == Some(st.key_buf.as_slice()) {
            return;
        }
        st.last_key = Some(st.key_buf.clone());
        self.report.stats.bloom_keys_checked += 1;
        let key = st.key_buf.clone();
        let Some(i) = meta.chunk_for(&key) else {
            let what = format!(
                "bloom filter has no chunk covering the key of {}",
                crate::display::key_to_string(k)
            );
            self.push(h.offset, Region::Data, what);
            return;
        };
        if let Some(n) = self.bloom_state.keys_per_chunk.get_mut(i) {
            *n += 1;
        }
        let (probes, handle) = match meta.chunks.get(i) {
            Some(c) => (meta.num_probes, c.handle),
            None => return,
        };
        if self.bloom_state.chunk.as_ref().map(|(j, _)| *j) != Some(i) {
            let bits = read_block_from(
                self.source,
                self.name,
                self.data_end,
                handle,
                &[BlockType::BloomChunk],
                true,
            )
            .map(|(b, _)| b)
            .unwrap_or_default();
            self.bloom_state.chunk = Some((i, bits));
        }
        let Some((_, bits)) = &self.bloom_state.chunk else {
            return;
        };
        if !bits.is_empty() && !chunk_may_contain(bits, probes, hash_key(&key)) {
            let what = format!(
                "bloom chunk {i} misses the key of {} (a false negative)",
                crate::display::key_to_string(k)
            );
            self.push(handle.offset, Region::BloomChunk, what);
        }
    }

    fn check_bloom_counts(&mut self) {
        let Some(meta) = self.bloom.clone() else {
            return;
        };
        let counted: u64 = self
            .bloom_state
            .keys_per_chunk
            .iter()
            .map(|&n| u64::from(n))
            .sum();
        for (i, (c, n)) in meta
            .chunks
            .iter()
            .zip(self.bloom_state.keys_per_chunk.clone())
            .enumerate()
        {
            if c.num_keys != n {
                self.push(
                    c.handle.offset,
                    Region::BloomMeta,
                    format!("chunk {i} claims {} keys, the cells give {n}", c.num_keys),
                );
            }
        }
        if meta.total_keys != counted {
            let off = self
                .regions
                .iter()
                .find(|r| r.2 == Region::BloomMeta)
                .map_or(0, |r| r.0);
            self.push(
                off,
                Region::BloomMeta,
                format!(
                    "total keys {} but the cells give {counted}",
                    meta.total_keys
                ),
            );
        }
    }

    fn check_file_info(&mut self, t: &Trailer) {
        let Some(fi) = self.info.clone() else {
            return;
        };
        let off = t.file_info.offset;
        let s = &self.seen;
        let mut checks: Vec<(&str, String, String)> = vec![
            ("entries", fi.entries.to_string(), s.entries.to_string()),
            (
                "min_timestamp",
                fi.min_timestamp.to_string(),
                s.min_timestamp.to_string(),
            ),
            (
                "max_timestamp",
                fi.max_timestamp.to_string(),
                s.max_timestamp.to_string(),
            ),
            ("max_seq", fi.max_seq.to_string(), s.max_seq.to_string()),
            (
                "raw_key_bytes",
                fi.raw_key_bytes.to_string(),
                s.raw_key_bytes.to_string(),
            ),
            (
                "raw_value_bytes",
                fi.raw_value_bytes.to_string(),
                s.raw_value_bytes.to_string(),
            ),
            (
                "data_blocks",
                fi.data_blocks.to_string(),
                s.data_blocks.to_string(),
            ),
            (
                "data_raw_bytes",
                fi.data_raw_bytes.to_string(),
                s.data_raw_bytes.to_string(),
            ),
            (
                "data_stored_bytes",
                fi.data_stored_bytes.to_string(),
                s.data_stored_bytes.to_string(),
            ),
            (
                "index_blocks",
                fi.index_blocks.to_string(),
                self.report.stats.index_blocks.to_string(),
            ),
            (
                "bloom_chunks",
                fi.bloom_chunks.to_string(),
                self.bloom
                    .as_ref()
                    .map_or(0, |m| m.chunks.len())
                    .to_string(),
            ),
            (
                "first_key",
                fi.first_key
                    .as_deref()
                    .map(encoded_key_to_string)
                    .unwrap_or_default(),
                s.first_key
                    .as_deref()
                    .map(encoded_key_to_string)
                    .unwrap_or_default(),
            ),
            (
                "last_key",
                fi.last_key
                    .as_deref()
                    .map(encoded_key_to_string)
                    .unwrap_or_default(),
                s.last_key
                    .as_deref()
                    .map(encoded_key_to_string)
                    .unwrap_or_default(),
            ),
            (
                "format_version",
                fi.format_version.to_string(),
                t.version.0.to_string(),
            ),
        ];
        for (t_, name) in CellType::ALL.iter().zip(crate::file_info::TYPE_COUNT_NAMES) {
            checks.push((
                name,
                fi.count_of(*t_).to_string(),
                s.count_of(*t_).to_string(),
            ));
        }
        let bloom_type = self
            .bloom
            .as_ref()
            .map_or(crate::bloom::BloomType::None, |m| m.bloom_type);
        checks.push(("bloom_type", fi.bloom_type.name(), bloom_type.name()));
        for (name, stored, actual) in checks {
            if stored != actual {
                self.push(
                    off,
                    Region::FileInfo,
                    format!("{name} says {stored}, the file has {actual}"),
                );
            }
        }
    }

    fn check_tiling(&mut self) {
        let mut regions = std::mem::take(&mut self.regions);
        regions.sort_by_key(|r| r.0);
        regions.dedup_by_key(|r| r.0);
        let mut pos = 0u64;
        for (off, len, region) in &regions {
            match off.cmp(&pos) {
                Ordering::Greater => self.push(
                    pos,
                    Region::File,
                    format!("{} bytes at {pos}..{off} belong to no block", off - pos),
                ),
                Ordering::Less => self.push(
                    *off,
                    *region,
                    format!("block overlaps the previous one, which ends at {pos}"),
                ),
                Ordering::Equal => {}
            }
            pos = pos.max(off.saturating_add(*len));
        }
        if pos < self.data_end {
            self.push(
                pos,
                Region::File,
                format!(
                    "{} bytes at {pos}..{} belong to no block",
                    self.data_end - pos,
                    self.data_end
                ),
            );
        }
    }
}

fn cmp(a: &[u8], b: &[u8]) -> Ordering {
    crate::cell::compare_keys(a, b)
}

impl From<Malformed> for Problem {
    fn from(m: Malformed) -> Self {
        Problem {
            offset: 0,
            region: Region::File,
            what: m.0,
        }
    }
}
