//! `--meta`: the trailer, every file-info entry (extra ones included) and derived figures.

use std::collections::BTreeMap;

use cellar_format::BlockHandle;
use serde::Serialize;
use serde_json::Value;

use super::Ctx;
use crate::emit::Section;
use crate::text::{bin, key_text, size_text, Table};

/// A block handle as printed.
#[derive(Debug, Serialize)]
pub struct HandleView {
    pub offset: u64,
    pub stored_len: u64,
}

impl From<BlockHandle> for HandleView {
    fn from(h: BlockHandle) -> Self {
        HandleView {
            offset: h.offset,
            stored_len: h.stored_len,
        }
    }
}

fn handle_text(h: &HandleView) -> String {
    format!("offset {}, {} bytes", h.offset, h.stored_len)
}

#[derive(Debug, Serialize)]
struct TrailerView {
    root_index: HandleView,
    file_info: HandleView,
    bloom_meta: Option<HandleView>,
    index_levels: u8,
    checksum_type: String,
    format_version: u32,
}

/// The `meta` section.
#[derive(Debug, Serialize)]
pub struct Meta {
    file_len: u64,
    trailer: TrailerView,
    file_info: BTreeMap<String, Value>,
    extra_file_info: BTreeMap<String, String>,
    avg_key_len: f64,
    avg_value_len: f64,
    data_compression_ratio: f64,
    #[serde(skip)]
    info_rows: Vec<(String, String)>,
}

/// File-info entries whose value is text or a key rather than a u64.
const NON_NUMERIC: [&str; 6] = [
    "first_key",
    "last_key",
    "compression",
    "bloom_type",
    "data_block_encoding",
    "family",
];

fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 {
        0.0
    } else {
        (a as f64 / b as f64 * 1000.0).round() / 1000.0
    }
}

impl Meta {
    pub(crate) fn read(ctx: &Ctx<'_>) -> Self {
        let r = ctx.reader;
        let t = r.trailer();
        let info = r.info();
        let mut file_info = BTreeMap::new();
        let mut info_rows = Vec::new();
        for (name, v) in info.to_entries() {
            if info.extra.contains_key(&name) {
                continue;
            }
            let (json, text) = if name == "first_key" || name == "last_key" {
                let s = key_text(&v);
                (Value::String(s.clone()), s)
            } else if NON_NUMERIC.contains(&name.as_str()) {
                let s = bin(&v);
                (Value::String(s.clone()), s)
            } else {
                let n = <[u8; 8]>::try_from(v.as_slice()).map(u64::from_le_bytes);
                match n {
                    Ok(n) if name.ends_with("_bytes") || name == "block_size" => {
                        (Value::from(n), size_text(n))
                    }
                    Ok(n) => (Value::from(n), n.to_string()),
                    Err(_) => (Value::String(bin(&v)), bin(&v)),
                }
            };
            file_info.insert(name.clone(), json);
            info_rows.push((name, text));
        }
        let extra_file_info = info
            .extra
            .iter()
            .map(|(k, v)| (k.clone(), bin(v)))
            .collect();
        Meta {
            file_len: r.file_len(),
            trailer: TrailerView {
                root_index: t.root_index.into(),
                file_info: t.file_info.into(),
                bloom_meta: t.bloom_meta.map(Into::into),
                index_levels: t.index_levels,
                checksum_type: format!("{:?}", t.checksum_type).to_uppercase(),
                format_version: t.version.0,
            },
            file_info,
            extra_file_info,
            avg_key_len: ratio(info.raw_key_bytes, info.entries),
            avg_value_len: ratio(info.raw_value_bytes, info.entries),
            data_compression_ratio: ratio(info.data_raw_bytes, info.data_stored_bytes),
            info_rows,
        }
    }
}

impl Section for Meta {
    fn name(&self) -> &'static str {
        "meta"
    }

    fn text(&self, out: &mut String) {
        let t = &self.trailer;
        out.push_str("Trailer:\n");
        let mut tt = Table::pairs();
        tt.pair("root index", handle_text(&t.root_index));
        tt.pair("file info", handle_text(&t.file_info));
        tt.pair(
            "bloom meta",
            t.bloom_meta.as_ref().map_or("none".into(), handle_text),
        );
        tt.pair("index levels", t.index_levels.to_string());
        tt.pair("checksum", t.checksum_type.clone());
        tt.pair("format version", t.format_version.to_string());
        tt.pair("file size", size_text(self.file_len));
        tt.render(2, out);
        out.push_str("File info:\n");
        let mut ft = Table::pairs();
        for (k, v) in &self.info_rows {
            ft.pair(k, v.clone());
        }
        ft.render(2, out);
        if !self.extra_file_info.is_empty() {
            out.push_str("Extra file info:\n");
            let mut et = Table::pairs();
            for (k, v) in &self.extra_file_info {
                et.pair(k, v.clone());
            }
            et.render(2, out);
        }
        out.push_str("Derived:\n");
        let mut dt = Table::pairs();
        dt.pair("avg key length", format!("{:.1}", self.avg_key_len));
        dt.pair("avg value length", format!("{:.1}", self.avg_value_len));
        dt.pair(
            "data compression ratio",
            format!("{:.3}", self.data_compression_ratio),
        );
        dt.render(2, out);
    }
}
