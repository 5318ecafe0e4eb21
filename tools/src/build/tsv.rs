//! The TSV input of `cellar hfile build`, one cell per line (HBase's ImportTsv in spirit):
//!
//! ```text
//! row <TAB> family:qualifier <TAB> timestamp <TAB> type <TAB> value
//! ```
//! Fields take `\xNN` escapes (so tabs and newlines inside fields are written `\x09`, `\x0A`);
//! `type` is a cell type name (`Put`, `Delete`, `DeleteColumn`, `DeleteFamily`,
//! `DeleteFamilyVersion`, any case); blank lines and lines starting with `#` are skipped.

use cellar_format::cell::validate_key;
use cellar_format::display::{parse_binary, to_string_binary};
use cellar_format::{CellKey, CellType};

/// One parsed line: the encoded key and the value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// Encoded cell key.
    pub key: Vec<u8>,
    /// Value bytes.
    pub value: Vec<u8>,
}

/// Parse one line (without its newline). `seq` becomes the cell's sequence number, so a later
/// line with the same coordinates sorts first and wins. `Ok(None)` for blank and comment lines;
/// `Err` says what is wrong, without the line number (the caller adds it).
pub fn parse_line(line: &str, seq: u64, family: &[u8]) -> Result<Option<Record>, String> {
    let line = line.strip_suffix('\r').unwrap_or(line);
    if line.trim().is_empty() || line.starts_with('#') {
        return Ok(None);
    }
    let fields: Vec<&str> = line.split('\t').collect();
    let [row, column, ts, ty, value] = fields.as_slice() else {
        return Err(format!(
            "expected 5 tab-separated fields (row, family:qualifier, timestamp, type, value), found {}",
            fields.len()
        ));
    };
    let field = |name: &str, s: &str| parse_binary(s).map_err(|e| format!("{name}: {e}"));
    let row = field("row", row)?;
    let Some((fam, qual)) = column.split_once(':') else {
        return Err(format!("column {column:?} is not family:qualifier"));
    };
    let fam = field("family", fam)?;
    if fam != family {
        return Err(format!(
            "family {:?} is not the --family {:?}",
            to_string_binary(&fam),
            to_string_binary(family)
        ));
    }
    let qual = field("qualifier", qual)?;
    let ts: u64 = ts
        .trim()
        .parse()
        .map_err(|_| format!("timestamp {ts:?} is not an unsigned integer"))?;
    let ty = CellType::from_name(ty.trim()).ok_or_else(|| {
        format!("type {ty:?} is not Put, Delete, DeleteColumn, DeleteFamily or DeleteFamilyVersion")
    })?;
    let value = field("value", value)?;
    if value.len() > cellar_format::cell::MAX_VALUE_LEN {
        return Err(format!("value of {} bytes is too long", value.len()));
    }
    let key = CellKey::new(row, fam, qual, ts, ty, seq);
    validate_key(&key.as_ref())?;
    Ok(Some(Record {
        key: key.encode(),
        value,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_escapes_markers_and_skips_comments() {
        assert_eq!(parse_line("# hi", 1, b"cf"), Ok(None));
        assert_eq!(parse_line("  ", 2, b"cf"), Ok(None));
        let r = parse_line("r\\x00\tcf:q\t5\tput\tv\\x09", 3, b"cf")
            .ok()
            .flatten();
        let want = CellKey::new(b"r\0".to_vec(), "cf", "q", 5, CellType::Put, 3).encode();
        assert_eq!(r.map(|r| (r.key, r.value)), Some((want, b"v\t".to_vec())));
        assert!(parse_line("r\tcf:\t5\tDeleteFamily\t", 4, b"cf")
            .ok()
            .flatten()
            .is_some());
    }

    #[test]
    fn rejects_bad_lines_with_a_reason() {
        for bad in [
            "r\tcf:q\t5\tPut",
            "r\tother:q\t5\tPut\tv",
            "r\tcfq\t5\tPut\tv",
            "r\tcf:q\t-1\tPut\tv",
            "r\tcf:q\t5\tUpsert\tv",
            "r\tcf:q\t5\tDeleteFamily\tv",
            "r\\xZZ\tcf:q\t5\tPut\tv",
        ] {
            assert!(parse_line(bad, 1, b"cf").is_err(), "{bad:?} accepted");
        }
    }
}
