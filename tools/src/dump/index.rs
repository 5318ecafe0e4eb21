//! `--index`: every index level from the root, and the index walk the other sections share.

use std::sync::Arc;

use cellar_format::block::{Block, BlockIter};
use cellar_format::index::IndexEntry;
use cellar_format::{BlockHandle, BlockType};
use serde::Serialize;

use super::meta::HandleView;
use super::Ctx;
use crate::emit::Section;
use crate::text::{key_text, Align, Table};
use crate::Result;

/// One index block and its decoded entries.
#[derive(Debug)]
pub(crate) struct IndexBlock {
    pub level: usize,
    pub ty: BlockType,
    pub handle: BlockHandle,
    pub entries: Vec<IndexEntry>,
}

/// Read the whole index breadth-first, root first. The last level's entries point at the data
/// blocks. Memory is one entry per block of the file, small even for very large files.
pub(crate) fn walk(ctx: &Ctx<'_>) -> Result<Vec<IndexBlock>> {
    let r = ctx.reader;
    let mut out = Vec::new();
    let mut level: Vec<(BlockHandle, BlockType, Arc<Block>)> = vec![(
        r.trailer().root_index,
        BlockType::RootIndex,
        r.root().clone(),
    )];
    for depth in 0.. {
        let child_ty = r.child_type(depth);
        let mut next = Vec::new();
        for (h, ty, block) in level {
            let entries = entries_of(ctx, h, ty, block)?;
            if child_ty != BlockType::Data {
                for e in &entries {
                    next.push((e.handle, child_ty, r.read_keyed(e.handle, child_ty)?));
                }
            }
            out.push(IndexBlock {
                level: depth,
                ty,
                handle: h,
                entries,
            });
        }
        if next.is_empty() {
            break;
        }
        level = next;
    }
    Ok(out)
}

fn entries_of(
    ctx: &Ctx<'_>,
    h: BlockHandle,
    ty: BlockType,
    block: Arc<Block>,
) -> Result<Vec<IndexEntry>> {
    let r = ctx.reader;
    let corrupt = |m: cellar_format::error::Malformed| m.at(r.name(), h.offset, ty.region());
    let mut it = BlockIter::new(block);
    it.seek_to_first().map_err(corrupt)?;
    let mut entries = Vec::new();
    while it.valid() {
        let v = r.decode_index_value(it.value(), h, ty)?;
        entries.push(IndexEntry {
            separator: it.key().to_vec(),
            handle: v.handle,
            min_ts: v.min_ts,
            max_ts: v.max_ts,
            first_key: v.first_key.to_vec(),
        });
        it.next().map_err(corrupt)?;
    }
    Ok(entries)
}

/// Handles of the data blocks, in key order.
pub(crate) fn data_blocks(index: &[IndexBlock]) -> Vec<BlockHandle> {
    let Some(deepest) = index.iter().map(|b| b.level).max() else {
        return Vec::new();
    };
    index
        .iter()
        .filter(|b| b.level == deepest)
        .flat_map(|b| b.entries.iter().map(|e| e.handle))
        .collect()
}

#[derive(Debug, Serialize)]
struct EntryView {
    separator: String,
    child: HandleView,
    min_ts: u64,
    max_ts: u64,
    first_key: String,
}

#[derive(Debug, Serialize)]
struct BlockView {
    level: usize,
    block_type: &'static str,
    offset: u64,
    stored_len: u64,
    entries: Vec<EntryView>,
}

/// The `index` section.
#[derive(Debug, Serialize)]
pub struct IndexDump {
    levels: u8,
    blocks: Vec<BlockView>,
}

impl IndexDump {
    pub(crate) fn read(ctx: &Ctx<'_>) -> Result<Self> {
        let blocks = walk(ctx)?
            .into_iter()
            .map(|b| BlockView {
                level: b.level,
                block_type: b.ty.name(),
                offset: b.handle.offset,
                stored_len: b.handle.stored_len,
                entries: b
                    .entries
                    .iter()
                    .map(|e| EntryView {
                        separator: key_text(&e.separator),
                        child: e.handle.into(),
                        min_ts: e.min_ts,
                        max_ts: e.max_ts,
                        first_key: key_text(&e.first_key),
                    })
                    .collect(),
            })
            .collect();
        Ok(IndexDump {
            levels: ctx.reader.trailer().index_levels,
            blocks,
        })
    }
}

impl Section for IndexDump {
    fn name(&self) -> &'static str {
        "index"
    }

    fn text(&self, out: &mut String) {
        out.push_str(&format!("Index ({} levels):\n", self.levels));
        for b in &self.blocks {
            out.push_str(&format!(
                "  level {} {} at {} ({} bytes, {} entries):\n",
                b.level,
                b.block_type,
                b.offset,
                b.stored_len,
                b.entries.len()
            ));
            let mut t = Table::new(
                &["#", "child", "time range", "separator", "first key"],
                &[
                    Align::Right,
                    Align::Left,
                    Align::Left,
                    Align::Left,
                    Align::Left,
                ],
            );
            for (i, e) in b.entries.iter().enumerate() {
                t.row(vec![
                    i.to_string(),
                    format!("{}+{}", e.child.offset, e.child.stored_len),
                    format!("{}..={}", e.min_ts, e.max_ts),
                    e.separator.clone(),
                    e.first_key.clone(),
                ]);
            }
            t.render(4, out);
        }
    }
}
