//! Text helpers shared by the tools: byte escapes, human sizes, size parsing, aligned tables.

use cellar_format::cell::{TYPE_MAXIMUM, TYPE_MINIMUM};
use cellar_format::display::{
    encoded_key_to_string, key_to_string, parse_binary, to_string_binary,
};
use cellar_format::KeyRef;

/// Bytes as HBase's `Bytes.toStringBinary` prints them.
pub fn bin(bytes: &[u8]) -> String {
    to_string_binary(bytes)
}

/// An encoded key as `row/family:qualifier/timestamp/Type/seqid=N`. Search keys (index
/// separators such as "first key on row") carry `u64::MAX` sentinels, printed by name as HBase
/// does (`LATEST_TIMESTAMP`) instead of as 20-digit numbers.
pub fn key_text(encoded: &[u8]) -> String {
    let Ok(k) = KeyRef::parse(encoded) else {
        return encoded_key_to_string(encoded);
    };
    if k.timestamp != u64::MAX && k.seq != u64::MAX {
        return key_to_string(&k);
    }
    let ty = match k.cell_type() {
        Some(t) => t.name().to_owned(),
        None if k.type_code == TYPE_MAXIMUM => "Maximum".to_owned(),
        None if k.type_code == TYPE_MINIMUM => "Minimum".to_owned(),
        None => format!("Type{}", k.type_code),
    };
    let max_or = |v: u64, name: &str| {
        if v == u64::MAX {
            name.to_owned()
        } else {
            v.to_string()
        }
    };
    format!(
        "{}/{}:{}/{}/{ty}/seqid={}",
        bin(k.row),
        bin(k.family),
        bin(k.qualifier),
        max_or(k.timestamp, "LATEST_TIMESTAMP"),
        max_or(k.seq, "MAX")
    )
}

/// `n B` below 1 KiB, else `n (1.5 KiB)`.
pub fn size_text(n: u64) -> String {
    if n < 1024 {
        format!("{n} B")
    } else {
        format!("{n} ({})", human_size(n))
    }
}

/// Parse a command-line byte string with `\xNN` escapes.
pub fn parse_bytes_arg(s: &str) -> Result<Vec<u8>, String> {
    parse_binary(s)
}

/// `1536` -> `1.5 KiB`; bytes below 1 KiB print exactly.
pub fn human_size(n: u64) -> String {
    const UNITS: [&str; 5] = ["KiB", "MiB", "GiB", "TiB", "PiB"];
    if n < 1024 {
        return format!("{n} B");
    }
    let mut v = n as f64 / 1024.0;
    let mut unit = UNITS[0];
    for u in UNITS.iter().skip(1) {
        if v < 1024.0 {
            break;
        }
        v /= 1024.0;
        unit = u;
    }
    format!("{v:.1} {unit}")
}

/// Parse `4096`, `64k`, `64KiB`, `256M`, `1g` (binary multiples, case-insensitive).
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t
        .find(|c: char| !c.is_ascii_digit() && c != '_')
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: u64 = num
        .replace('_', "")
        .parse()
        .map_err(|_| format!("bad size {s:?}: expected a number with an optional unit"))?;
    let shift = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        other => return Err(format!("bad size unit {other:?} in {s:?}")),
    };
    n.checked_mul(1u64 << shift)
        .ok_or_else(|| format!("size {s:?} overflows"))
}

/// Column alignment of a [`Table`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Align {
    /// Pad on the right.
    Left,
    /// Pad on the left (numbers).
    Right,
}

/// A text table whose columns are padded to their widest cell; the last column is never padded
/// so lines carry no trailing spaces (golden files stay clean).
#[derive(Debug, Default)]
pub struct Table {
    header: Option<Vec<String>>,
    aligns: Vec<Align>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with a header row and per-column alignments.
    pub fn new(header: &[&str], aligns: &[Align]) -> Self {
        Table {
            header: Some(header.iter().map(|s| s.to_string()).collect()),
            aligns: aligns.to_vec(),
            rows: Vec::new(),
        }
    }

    /// A two-column `name  value` table with no header.
    pub fn pairs() -> Self {
        Table {
            header: None,
            aligns: vec![Align::Left, Align::Left],
            rows: Vec::new(),
        }
    }

    /// Add a row.
    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    /// Add a `name  value` row.
    pub fn pair(&mut self, name: &str, value: impl Into<String>) {
        self.rows.push(vec![name.to_owned(), value.into()]);
    }

    /// Render with `indent` spaces before every line.
    pub fn render(&self, indent: usize, out: &mut String) {
        let all = self.header.iter().chain(self.rows.iter());
        let mut widths: Vec<usize> = Vec::new();
        for r in all.clone() {
            for (i, c) in r.iter().enumerate() {
                let w = c.chars().count();
                match widths.get_mut(i) {
                    Some(x) => *x = (*x).max(w),
                    None => widths.push(w),
                }
            }
        }
        for r in all {
            let mut line = " ".repeat(indent);
            for (i, c) in r.iter().enumerate() {
                let last = i + 1 == r.len();
                let w = widths.get(i).copied().unwrap_or(0);
                let pad = " ".repeat(w.saturating_sub(c.chars().count()));
                match self.aligns.get(i).copied().unwrap_or(Align::Left) {
                    Align::Right => {
                        line.push_str(&pad);
                        line.push_str(c);
                    }
                    Align::Left if last => line.push_str(c),
                    Align::Left => {
                        line.push_str(c);
                        line.push_str(&pad);
                    }
                }
                if !last {
                    line.push_str("  ");
                }
            }
            out.push_str(line.trim_end());
            out.push('\n');
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_print_and_parse() {
        assert_eq!(human_size(1023), "1023 B");
        assert_eq!(human_size(1536), "1.5 KiB");
        assert_eq!(human_size(3 << 20), "3.0 MiB");
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("256MiB"), Ok(256 << 20));
        assert_eq!(parse_size("64k"), Ok(64 << 10));
        assert!(parse_size("12 parsecs").is_err());
        assert!(parse_size("").is_err());
    }

    #[test]
    fn table_aligns_columns_without_trailing_space() {
        let mut t = Table::new(&["a", "bb"], &[Align::Right, Align::Left]);
        t.row(vec!["100".into(), "x".into()]);
        let mut s = String::new();
        t.render(0, &mut s);
        assert_eq!(s, "  a  bb\n100  x\n");
    }
}
