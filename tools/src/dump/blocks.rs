//! `--blocks`: the envelope of every block, found through the index, the bloom meta block and
//! the trailer, in file order. Checksums are recomputed and shown, not just trusted.

use std::collections::BTreeMap;

use cellar_format::block::{read_envelope, BLOCK_TRAILER_LEN};
use cellar_format::checksum::block_checksum;
use cellar_format::{BlockHandle, BlockType, Error, ReadAt, Region};
use serde::Serialize;

use super::{index, Ctx};
use crate::emit::Section;
use crate::text::{human_size, Align, Table};
use crate::Result;

#[derive(Debug, Serialize)]
struct BlockView {
    offset: u64,
    block_type: &'static str,
    stored_len: u64,
    raw_len: u32,
    compression: &'static str,
    checksum: String,
    status: String,
}

#[derive(Debug, Default, Serialize)]
struct Total {
    blocks: u64,
    stored_bytes: u64,
    raw_bytes: u64,
}

/// The `blocks` section.
#[derive(Debug, Serialize)]
pub struct BlockList {
    blocks: Vec<BlockView>,
    totals: BTreeMap<&'static str, Total>,
    /// Blocks whose checksum or type did not match: the dump then exits with 1.
    pub bad_checksums: u64,
}

/// Every block the file's structures point at, with the type they say it has.
pub(crate) fn all_blocks(ctx: &Ctx<'_>) -> Result<Vec<(BlockHandle, BlockType)>> {
    let r = ctx.reader;
    let idx = index::walk(ctx)?;
    let mut v: Vec<(BlockHandle, BlockType)> = idx.iter().map(|b| (b.handle, b.ty)).collect();
    v.extend(
        index::data_blocks(&idx)
            .into_iter()
            .map(|h| (h, BlockType::Data)),
    );
    if let Some(m) = r.bloom_meta() {
        v.extend(m.chunks.iter().map(|c| (c.handle, BlockType::BloomChunk)));
    }
    if let Some(h) = r.trailer().bloom_meta {
        v.push((h, BlockType::BloomMeta));
    }
    v.push((r.trailer().file_info, BlockType::FileInfo));
    v.sort_by_key(|(h, _)| h.offset);
    Ok(v)
}

/// Read a block's stored bytes (payload and envelope), refusing handles past the block region.
pub(crate) fn read_stored(ctx: &Ctx<'_>, h: BlockHandle, ty: BlockType) -> Result<Vec<u8>> {
    let r = ctx.reader;
    if h.end() > r.data_end() || h.offset > r.data_end() {
        return Err(corrupt(
            ctx,
            h,
            ty.region(),
            format!(
                "block handle {}+{} runs past the end of the block region at {}",
                h.offset,
                h.total_len(),
                r.data_end()
            ),
        ));
    }
    let mut buf = vec![0u8; h.total_len() as usize];
    ctx.source
        .read_exact_at(&mut buf, h.offset)
        .map_err(|e| Error::Io {
            file: r.name().to_owned(),
            doing: format!("reading block at {}", h.offset),
            source: e,
        })?;
    Ok(buf)
}

fn corrupt(ctx: &Ctx<'_>, h: BlockHandle, region: Region, what: String) -> crate::ToolError {
    Error::Corruption {
        file: ctx.reader.name().to_owned(),
        offset: h.offset,
        region,
        what,
    }
    .into()
}

impl BlockList {
    pub(crate) fn read(ctx: &Ctx<'_>) -> Result<Self> {
        let mut blocks = Vec::new();
        let mut totals: BTreeMap<&'static str, Total> = BTreeMap::new();
        let mut bad = 0;
        for (h, expected) in all_blocks(ctx)? {
            let stored = read_stored(ctx, h, expected)?;
            let (_, env) =
                read_envelope(&stored).map_err(|m| corrupt(ctx, h, expected.region(), m.0))?;
            let covered = stored.len().saturating_sub(4);
            let actual = block_checksum(h.offset, &[stored.get(..covered).unwrap_or_default()]);
            let mut status = Vec::new();
            if actual != env.checksum {
                status.push(format!("CHECKSUM MISMATCH (computed {actual:#010x})"));
            }
            if env.block_type != expected {
                status.push(format!("TYPE MISMATCH (expected {})", expected.name()));
            }
            if !status.is_empty() {
                bad += 1;
            }
            let t = totals.entry(env.block_type.name()).or_default();
            t.blocks += 1;
            t.stored_bytes += h.stored_len + BLOCK_TRAILER_LEN as u64;
            t.raw_bytes += u64::from(env.raw_len);
            blocks.push(BlockView {
                offset: h.offset,
                block_type: env.block_type.name(),
                stored_len: h.stored_len,
                raw_len: env.raw_len,
                compression: env.compression.name(),
                checksum: format!("{:#010x}", env.checksum),
                status: if status.is_empty() {
                    "ok".into()
                } else {
                    status.join("; ")
                },
            });
        }
        Ok(BlockList {
            blocks,
            totals,
            bad_checksums: bad,
        })
    }
}

impl Section for BlockList {
    fn name(&self) -> &'static str {
        "blocks"
    }

    fn text(&self, out: &mut String) {
        out.push_str(&format!("Blocks ({}):\n", self.blocks.len()));
        let r = Align::Right;
        let l = Align::Left;
        let mut t = Table::new(
            &[
                "offset",
                "type",
                "stored",
                "raw",
                "compression",
                "checksum",
                "status",
            ],
            &[r, l, r, r, l, l, l],
        );
        for b in &self.blocks {
            t.row(vec![
                b.offset.to_string(),
                b.block_type.to_owned(),
                b.stored_len.to_string(),
                b.raw_len.to_string(),
                b.compression.to_owned(),
                b.checksum.clone(),
                b.status.clone(),
            ]);
        }
        t.render(2, out);
        out.push_str("Totals (stored sizes include the 10-byte envelopes):\n");
        let mut tt = Table::new(&["type", "blocks", "stored", "raw"], &[l, r, r, r]);
        for (name, x) in &self.totals {
            tt.row(vec![
                (*name).to_owned(),
                x.blocks.to_string(),
                human_size(x.stored_bytes),
                human_size(x.raw_bytes),
            ]);
        }
        tt.render(2, out);
    }
}
