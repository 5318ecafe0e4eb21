//! `--bloom`: filter parameters and each chunk's key range and key count.

use cellar_format::BloomType;
use serde::Serialize;

use super::Ctx;
use crate::emit::Section;
use crate::text::{bin, human_size, Align, Table};

#[derive(Debug, Serialize)]
struct ChunkView {
    offset: u64,
    stored_len: u64,
    num_keys: u32,
    first_key: String,
    last_key: String,
}

/// The `bloom` section.
#[derive(Debug, Serialize)]
pub struct BloomDump {
    bloom_type: String,
    num_probes: Option<u8>,
    bits_per_key: Option<f64>,
    total_keys: Option<u64>,
    chunks: Vec<ChunkView>,
}

/// A bloom key as text: ROWCOL keys are `row_len u16 LE ‖ row ‖ qualifier`, shown `row/qualifier`.
fn key_text(ty: BloomType, key: &[u8]) -> String {
    if ty == BloomType::RowCol {
        if let Some((len, rest)) = key.split_first_chunk::<2>() {
            let n = usize::from(u16::from_le_bytes(*len));
            if let (Some(row), Some(q)) = (rest.get(..n), rest.get(n..)) {
                return format!("{}/{}", bin(row), bin(q));
            }
        }
    }
    bin(key)
}

impl BloomDump {
    pub(crate) fn read(ctx: &Ctx<'_>) -> Self {
        let Some(m) = ctx.reader.bloom_meta() else {
            return BloomDump {
                bloom_type: ctx.reader.info().bloom_type.name(),
                num_probes: None,
                bits_per_key: None,
                total_keys: None,
                chunks: Vec::new(),
            };
        };
        BloomDump {
            bloom_type: m.bloom_type.name(),
            num_probes: Some(m.num_probes),
            bits_per_key: Some(f64::from(m.bits_per_key_milli) / 1000.0),
            total_keys: Some(m.total_keys),
            chunks: m
                .chunks
                .iter()
                .map(|c| ChunkView {
                    offset: c.handle.offset,
                    stored_len: c.handle.stored_len,
                    num_keys: c.num_keys,
                    first_key: key_text(m.bloom_type, &c.first_key),
                    last_key: key_text(m.bloom_type, &c.last_key),
                })
                .collect(),
        }
    }
}

impl Section for BloomDump {
    fn name(&self) -> &'static str {
        "bloom"
    }

    fn text(&self, out: &mut String) {
        out.push_str("Bloom filter:\n");
        let mut t = Table::pairs();
        t.pair("type", self.bloom_type.clone());
        let (Some(p), Some(b), Some(k)) = (self.num_probes, self.bits_per_key, self.total_keys)
        else {
            t.pair("chunks", "none (the file has no filter)");
            t.render(2, out);
            return;
        };
        t.pair("probes", p.to_string());
        t.pair("bits per key", format!("{b:.3}"));
        t.pair("keys", k.to_string());
        let bytes: u64 = self.chunks.iter().map(|c| c.stored_len).sum();
        t.pair(
            "chunks",
            format!("{} ({} of bits)", self.chunks.len(), human_size(bytes)),
        );
        t.render(2, out);
        let r = Align::Right;
        let l = Align::Left;
        let mut ct = Table::new(
            &["#", "offset", "bytes", "keys", "first key", "last key"],
            &[r, r, r, r, l, l],
        );
        for (i, c) in self.chunks.iter().enumerate() {
            ct.row(vec![
                i.to_string(),
                c.offset.to_string(),
                c.stored_len.to_string(),
                c.num_keys.to_string(),
                c.first_key.clone(),
                c.last_key.clone(),
            ]);
        }
        ct.render(2, out);
    }
}
