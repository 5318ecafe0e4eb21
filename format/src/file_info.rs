//! The file-info block (SPEC.md §7): named, extensible key/value entries.
//!
//! ```text
//! payload := count u32 LE | entry*      (entries sorted by name, names unique)
//! entry   := name_len u16 LE | name (ASCII) | value_len u32 LE | value
//! ```
//! Names a reader does not know are kept in [`FileInfo::extra`], so adding a field needs no
//! new format version. Integer values are u64 LE unless SPEC.md says otherwise.

use std::collections::BTreeMap;

use crate::block::DataBlockEncoding;
use crate::bloom::BloomType;
use crate::cell::CellType;
use crate::coding::Cursor;
use crate::compression::CompressionType;
use crate::error::{malformed, Malformed};
use crate::version::FormatVersion;

/// Everything the file-info block records.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FileInfo {
    /// Cells in the file.
    pub entries: u64,
    /// Cells of each type, indexed like [`CellType::ALL`].
    pub type_counts: [u64; 5],
    /// First cell key (encoded), absent in an empty file.
    pub first_key: Option<Vec<u8>>,
    /// Last cell key (encoded), absent in an empty file.
    pub last_key: Option<Vec<u8>>,
    /// Smallest cell timestamp (`u64::MAX` when empty).
    pub min_timestamp: u64,
    /// Largest cell timestamp (0 when empty).
    pub max_timestamp: u64,
    /// Largest sequence number.
    pub max_seq: u64,
    /// Sum of encoded key lengths.
    pub raw_key_bytes: u64,
    /// Sum of value lengths.
    pub raw_value_bytes: u64,
    /// Sum of raw (uncompressed) data block payloads.
    pub data_raw_bytes: u64,
    /// Sum of stored data block sizes, envelopes included.
    pub data_stored_bytes: u64,
    /// Data blocks.
    pub data_blocks: u64,
    /// Index blocks, root included.
    pub index_blocks: u64,
    /// Bloom chunks.
    pub bloom_chunks: u64,
    /// Compression setting (blocks that don't compress well are stored raw regardless).
    pub compression: Option<CompressionType>,
    /// Target data block size.
    pub block_size: u32,
    /// Restart interval of data blocks.
    pub restart_interval: u32,
    /// Bloom type.
    pub bloom_type: BloomType,
    /// Bloom bits per key × 1000.
    pub bloom_bits_per_key_milli: u32,
    /// Data block encoding name (`PREFIX`, or `DIFF` since version 2); see
    /// [`FileInfo::data_encoding`].
    pub data_block_encoding: String,
    /// Column family of every cell.
    pub family: Vec<u8>,
    /// Creation time, milliseconds since the Unix epoch.
    pub created_at_ms: u64,
    /// Whether the file is the output of a major compaction.
    pub major_compaction: bool,
    /// Format version written.
    pub format_version: u32,
    /// Entries under names this build does not interpret (engine or future fields).
    pub extra: BTreeMap<String, Vec<u8>>,
}

/// Name of each type count entry, in [`CellType::ALL`] order.
pub const TYPE_COUNT_NAMES: [&str; 5] = [
    "count.put",
    "count.delete",
    "count.delete_family_version",
    "count.delete_column",
    "count.delete_family",
];

impl FileInfo {
    /// The encoding of the file's data blocks: PREFIX in a file of a version before encodings
    /// were introduced (whose readers never looked at the name, so neither does this one),
    /// else a name this build knows.
    pub fn data_encoding(&self) -> Result<DataBlockEncoding, Malformed> {
        if !FormatVersion(self.format_version).has_data_block_encodings() {
            return Ok(DataBlockEncoding::Prefix);
        }
        let version = FormatVersion(self.format_version);
        match DataBlockEncoding::from_name(&self.data_block_encoding) {
            Some(e) if e.since() <= version => Ok(e),
            Some(e) => Err(Malformed(format!(
                "file-info data_block_encoding {e} needs format version {} or later, the file \
                 is version {}",
                e.since().0,
                version.0
            ))),
            None => Err(Malformed(format!(
                "file-info data_block_encoding {:?} is not one this build reads",
                self.data_block_encoding
            ))),
        }
    }

    /// Delete markers among the cells (every type but Put).
    pub fn deletes(&self) -> u64 {
        self.entries.saturating_sub(self.count_of(CellType::Put))
    }

    /// Count of cells of type `t`.
    pub fn count_of(&self, t: CellType) -> u64 {
        let i = CellType::ALL.iter().position(|x| *x == t).unwrap_or(0);
        self.type_counts.get(i).copied().unwrap_or(0)
    }

    /// Add one cell of type `t` to the counts.
    pub fn count(&mut self, t: CellType) {
        let i = CellType::ALL.iter().position(|x| *x == t).unwrap_or(0);
        if let Some(c) = self.type_counts.get_mut(i) {
            *c += 1;
        }
    }

    /// The entries as named byte strings, sorted by name.
    pub fn to_entries(&self) -> BTreeMap<String, Vec<u8>> {
        let mut m = self.extra.clone();
        let mut u = |k: &str, v: u64| {
            m.insert(k.to_owned(), v.to_le_bytes().to_vec());
        };
        u("entries", self.entries);
        for (name, v) in TYPE_COUNT_NAMES.iter().zip(self.type_counts) {
            u(name, v);
        }
        u("min_timestamp", self.min_timestamp);
        u("max_timestamp", self.max_timestamp);
        u("max_seq", self.max_seq);
        u("raw_key_bytes", self.raw_key_bytes);
        u("raw_value_bytes", self.raw_value_bytes);
        u("data_raw_bytes", self.data_raw_bytes);
        u("data_stored_bytes", self.data_stored_bytes);
        u("data_blocks", self.data_blocks);
        u("index_blocks", self.index_blocks);
        u("bloom_chunks", self.bloom_chunks);
        u("block_size", u64::from(self.block_size));
        u("restart_interval", u64::from(self.restart_interval));
        u(
            "bloom_bits_per_key_milli",
            u64::from(self.bloom_bits_per_key_milli),
        );
        u("created_at_ms", self.created_at_ms);
        u("major_compaction", u64::from(self.major_compaction));
        u("format_version", u64::from(self.format_version));
        if let Some(k) = &self.first_key {
            m.insert("first_key".into(), k.clone());
        }
        if let Some(k) = &self.last_key {
            m.insert("last_key".into(), k.clone());
        }
        if let Some(c) = self.compression {
            m.insert("compression".into(), c.name().as_bytes().to_vec());
        }
        m.insert("bloom_type".into(), self.bloom_type.name().into_bytes());
        m.insert(
            "data_block_encoding".into(),
            self.data_block_encoding.clone().into_bytes(),
        );
        m.insert("family".into(), self.family.clone());
        m
    }

    /// Encode the block payload.
    pub fn encode(&self) -> Vec<u8> {
        let entries = self.to_entries();
        let mut out = Vec::new();
        out.extend_from_slice(&(entries.len() as u32).to_le_bytes());
        for (k, v) in &entries {
            out.extend_from_slice(&(k.len() as u16).to_le_bytes());
            out.extend_from_slice(k.as_bytes());
            out.extend_from_slice(&(v.len() as u32).to_le_bytes());
            out.extend_from_slice(v);
        }
        out
    }

    /// Decode the raw entries of a block payload (sorted, unique names checked).
    pub fn decode_entries(buf: &[u8]) -> Result<BTreeMap<String, Vec<u8>>, Malformed> {
        let mut c = Cursor::new(buf);
        let count = c.u32("file-info entry count")? as usize;
        if count > c.remaining() / 6 {
            return malformed(format!(
                "file-info entry count {count} does not fit the block"
            ));
        }
        let mut m = BTreeMap::new();
        let mut last: Option<String> = None;
        for _ in 0..count {
            let n = c.u16("file-info name length")? as usize;
            let name = c.take(n, "file-info name")?;
            let name = std::str::from_utf8(name)
                .ok()
                .filter(|s| s.is_ascii())
                .ok_or_else(|| Malformed("file-info name is not ASCII".into()))?
                .to_owned();
            let vlen = c.u32("file-info value length")? as usize;
            let v = c.take(vlen, "file-info value")?.to_vec();
            if last.as_ref().is_some_and(|l| *l >= name) {
                return malformed(format!("file-info name {name:?} out of order or repeated"));
            }
            last = Some(name.clone());
            m.insert(name, v);
        }
        if !c.is_empty() {
            return malformed(format!(
                "file-info block has {} trailing bytes",
                c.remaining()
            ));
        }
        Ok(m)
    }

    /// Decode a block payload into typed fields; unknown names go to `extra`.
    pub fn decode(buf: &[u8]) -> Result<Self, Malformed> {
        let mut m = Self::decode_entries(buf)?;
        let mut u = |k: &str| -> Result<u64, Malformed> {
            match m.remove(k) {
                None => malformed(format!("file-info entry {k:?} missing")),
                Some(v) => v
                    .as_slice()
                    .try_into()
                    .map(u64::from_le_bytes)
                    .map_err(|_| Malformed(format!("file-info entry {k:?} is not 8 bytes"))),
            }
        };
        let mut fi = FileInfo {
            entries: u("entries")?,
            ..FileInfo::default()
        };
        for (slot, name) in fi.type_counts.iter_mut().zip(TYPE_COUNT_NAMES) {
            *slot = u(name)?;
        }
        fi.min_timestamp = u("min_timestamp")?;
        fi.max_timestamp = u("max_timestamp")?;
        fi.max_seq = u("max_seq")?;
        fi.raw_key_bytes = u("raw_key_bytes")?;
        fi.raw_value_bytes = u("raw_value_bytes")?;
        fi.data_raw_bytes = u("data_raw_bytes")?;
        fi.data_stored_bytes = u("data_stored_bytes")?;
        fi.data_blocks = u("data_blocks")?;
        fi.index_blocks = u("index_blocks")?;
        fi.bloom_chunks = u("bloom_chunks")?;
        fi.block_size = narrow(u("block_size")?, "block_size")?;
        fi.restart_interval = narrow(u("restart_interval")?, "restart_interval")?;
        fi.bloom_bits_per_key_milli =
            narrow(u("bloom_bits_per_key_milli")?, "bloom_bits_per_key_milli")?;
        fi.created_at_ms = u("created_at_ms")?;
        fi.major_compaction = match u("major_compaction")? {
            0 => false,
            1 => true,
            v => return malformed(format!("file-info major_compaction is {v}, not 0 or 1")),
        };
        fi.format_version = narrow(u("format_version")?, "format_version")?;
        fi.first_key = m.remove("first_key");
        fi.last_key = m.remove("last_key");
        fi.compression = match m.remove("compression") {
            None => None,
            Some(v) => Some(
                std::str::from_utf8(&v)
                    .ok()
                    .and_then(CompressionType::from_name)
                    .ok_or_else(|| Malformed("file-info compression unknown".into()))?,
            ),
        };
        fi.bloom_type = m
            .remove("bloom_type")
            .and_then(|v| String::from_utf8(v).ok())
            .and_then(|s| BloomType::from_name(&s))
            .ok_or_else(|| Malformed("file-info bloom_type missing or unknown".into()))?;
        fi.data_block_encoding = m
            .remove("data_block_encoding")
            .and_then(|v| String::from_utf8(v).ok())
            .ok_or_else(|| Malformed("file-info data_block_encoding missing".into()))?;
        fi.family = m
            .remove("family")
            .ok_or_else(|| Malformed("file-info family missing".into()))?;
        fi.extra = m;
        Ok(fi)
    }
}

fn narrow(v: u64, name: &str) -> Result<u32, Malformed> {
    u32::try_from(v).map_err(|_| Malformed(format!("file-info {name} {v} exceeds 32 bits")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_keeps_unknown_entries() {
        let mut fi = FileInfo {
            entries: 3,
            first_key: Some(vec![1, 2]),
            compression: Some(CompressionType::Lz4),
            bloom_type: BloomType::RowPrefix(4),
            data_block_encoding: "PREFIX".into(),
            family: b"cf".to_vec(),
            major_compaction: true,
            format_version: 1,
            ..FileInfo::default()
        };
        fi.count(CellType::DeleteColumn);
        fi.extra.insert("engine.region".into(), b"r1".to_vec());
        let back = FileInfo::decode(&fi.encode()).unwrap();
        assert_eq!(back, fi);
        assert_eq!(back.count_of(CellType::DeleteColumn), 1);
    }

    #[test]
    fn missing_and_misordered_entries_are_malformed() {
        let mut buf = 1u32.to_le_bytes().to_vec();
        buf.extend_from_slice(&1u16.to_le_bytes());
        buf.push(b'x');
        buf.extend_from_slice(&0u32.to_le_bytes());
        assert!(FileInfo::decode(&buf).is_err());
        assert!(FileInfo::decode_entries(&[9, 0, 0, 0]).is_err());
    }
}
