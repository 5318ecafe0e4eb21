//! How get and scan print bytes: the HBase shell's converters.
//!
//! HBase prints every row, qualifier and value with `Bytes.toStringBinary` unless told
//! otherwise: per column, by a third part of the column name (`'cf:q:toLong'`, or the long
//! form `'cf:q:c(org.apache.hadoop.hbase.util.Bytes).toLong'`), or for the whole command by
//! `FORMATTER => 'toString'` (with `FORMATTER_CLASS`, which here can only be HBase's `Bytes`).
//! The converters are `Bytes`'s static methods of the same names, with Java's number layout
//! (big-endian, two's complement, IEEE 754) and Java's way of printing floats.
//!
//! Where this differs from HBase, on purpose:
//! - A value of the wrong length for a number converter is an error (`BadValue`) naming the
//!   cell. HBase reads the first 4 or 8 bytes of a longer value (and fails on a shorter one),
//!   which shows a number the cell does not hold.
//! - A number converter given as FORMATTER applies to values only. HBase applies FORMATTER to
//!   rows, families and qualifiers as well, so a number FORMATTER fails there on every family
//!   name that is not exactly 4 or 8 bytes; text converters (`toString`, `toStringBinary`,
//!   `toHex`) apply to all four here, as in HBase.
//! - Only a known converter is taken from a column name's third part: `'cf:a:b'` stays the
//!   qualifier `a:b` (qualifiers may hold `:`), where HBase would look for a method `b`.

use std::collections::HashMap;

use cellar::format::CellType;
use cellar::Cell;

use super::{kind, ShellError};
use crate::text::bin;

/// A `Bytes` method that turns stored bytes into text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Converter {
    /// `toStringBinary`: printable ASCII as is, other bytes `\xNN` (the default).
    #[default]
    StringBinary,
    /// `toString`: the bytes as UTF-8, invalid sequences replaced.
    String,
    /// `toHex`: two lowercase hex digits per byte.
    Hex,
    /// `toShort`: 2 bytes, big-endian, signed.
    Short,
    /// `toInt`: 4 bytes, big-endian, signed.
    Int,
    /// `toLong`: 8 bytes, big-endian, signed (how `incr` stores counters).
    Long,
    /// `toFloat`: 4 bytes, IEEE 754.
    Float,
    /// `toDouble`: 8 bytes, IEEE 754.
    Double,
    /// `toBoolean`: 1 byte, false when zero.
    Boolean,
}

/// The class HBase's converters belong to; the only one this build has.
const BYTES_CLASS: &str = "org.apache.hadoop.hbase.util.Bytes";

/// Converter names, for error messages.
pub const NAMES: &str =
    "toStringBinary, toString, toHex, toShort, toInt, toLong, toFloat, toDouble, toBoolean";

impl Converter {
    /// The converter a method name (`toLong`) names.
    pub fn by_name(name: &str) -> Option<Converter> {
        Some(match name {
            "toStringBinary" => Converter::StringBinary,
            "toString" => Converter::String,
            "toHex" => Converter::Hex,
            "toShort" => Converter::Short,
            "toInt" => Converter::Int,
            "toLong" => Converter::Long,
            "toFloat" => Converter::Float,
            "toDouble" => Converter::Double,
            "toBoolean" => Converter::Boolean,
            _ => return None,
        })
    }

    /// The converter a column name's third part names: `toLong` or
    /// `c(org.apache.hadoop.hbase.util.Bytes).toLong`. `Ok(None)`: not a converter (the text
    /// belongs to the qualifier); `Err`: the `c(Class).method` form with a class or method
    /// this build does not have.
    pub fn from_column_suffix(s: &[u8]) -> Result<Option<Converter>, String> {
        let Ok(s) = std::str::from_utf8(s) else {
            return Ok(None);
        };
        if let Some(rest) = s.strip_prefix("c(") {
            let Some((class, method)) = rest.split_once(").") else {
                return Ok(None);
            };
            check_class(class)?;
            return Converter::by_name(method)
                .map(Some)
                .ok_or_else(|| format!("unknown converter {method} (known: {NAMES})"));
        }
        Ok(Converter::by_name(s))
    }

    /// Whether the converter prints any bytes (rather than a number of a fixed width).
    pub fn is_text(self) -> bool {
        matches!(
            self,
            Converter::StringBinary | Converter::String | Converter::Hex
        )
    }

    fn name(self) -> &'static str {
        match self {
            Converter::StringBinary => "toStringBinary",
            Converter::String => "toString",
            Converter::Hex => "toHex",
            Converter::Short => "toShort",
            Converter::Int => "toInt",
            Converter::Long => "toLong",
            Converter::Float => "toFloat",
            Converter::Double => "toDouble",
            Converter::Boolean => "toBoolean",
        }
    }

    /// The text of `b`, or why it cannot be (a length the converter does not take).
    pub fn show(self, b: &[u8]) -> Result<String, String> {
        fn fixed<const N: usize>(c: Converter, b: &[u8]) -> Result<[u8; N], String> {
            b.try_into().map_err(|_| {
                format!(
                    "{} needs {N} byte{}, the value has {}",
                    c.name(),
                    if N == 1 { "" } else { "s" },
                    b.len()
                )
            })
        }
        Ok(match self {
            Converter::StringBinary => bin(b),
            Converter::String => String::from_utf8_lossy(b).into_owned(),
            Converter::Hex => b.iter().map(|x| format!("{x:02x}")).collect(),
            Converter::Short => i16::from_be_bytes(fixed(self, b)?).to_string(),
            Converter::Int => i32::from_be_bytes(fixed(self, b)?).to_string(),
            Converter::Long => i64::from_be_bytes(fixed(self, b)?).to_string(),
            Converter::Float => java_float(f32::from_be_bytes(fixed(self, b)?)),
            Converter::Double => java_float(f64::from_be_bytes(fixed(self, b)?)),
            Converter::Boolean => (fixed::<1>(self, b)?[0] != 0).to_string(),
        })
    }
}

/// `FORMATTER_CLASS`, or the class of a `c(Class).method` converter.
pub fn check_class(class: &str) -> Result<(), String> {
    if class == BYTES_CLASS || class == "Bytes" {
        Ok(())
    } else {
        Err(format!(
            "converter class {class} is not supported by this build (only {BYTES_CLASS})"
        ))
    }
}

/// Java's `Float.toString`/`Double.toString`: plain decimals with at least one fraction digit
/// from 10^-3 up to 10^7, `d.dddE±n` outside, `NaN`, `Infinity`.
fn java_float<T>(v: T) -> String
where
    T: Into<f64> + Copy + std::fmt::Debug + std::fmt::LowerExp,
{
    let x: f64 = v.into();
    if x.is_nan() {
        return "NaN".into();
    }
    if x.is_infinite() {
        return if x > 0.0 { "Infinity" } else { "-Infinity" }.into();
    }
    if x == 0.0 || (1e-3..1e7).contains(&x.abs()) {
        // Rust's Debug keeps the shortest round-trip digits and a `.0`, as Java does, in this
        // range.
        return format!("{v:?}");
    }
    let s = format!("{v:e}");
    let (mantissa, exp) = s.split_once('e').unwrap_or((&s, "0"));
    if mantissa.contains('.') {
        format!("{mantissa}E{exp}")
    } else {
        format!("{mantissa}.0E{exp}")
    }
}

/// How a get or scan prints its cells: the FORMATTER, per-column converters, MAXLENGTH.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Show {
    /// `FORMATTER`: values without a converter of their own; rows, families and qualifiers
    /// too when it is a text converter.
    pub formatter: Converter,
    /// `'cf:q:toLong'`: the converter of one column's values.
    pub columns: HashMap<(String, Vec<u8>), Converter>,
    /// `MAXLENGTH`: text mode cuts each cell's `timestamp=..., value=...` to this many
    /// characters, as HBase does; JSON keeps whole values.
    pub max_length: Option<usize>,
}

/// A cell ready to print: every byte string already text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shown {
    /// Row key.
    pub row: String,
    /// `family:qualifier` (`family:` for a family marker).
    pub column: String,
    /// Timestamp.
    pub timestamp: u64,
    /// Put or one of the delete markers.
    pub cell_type: CellType,
    /// The value (empty for markers, which have none to convert).
    pub value: String,
}

impl Show {
    /// The cell as text, or `BadValue` when a converter does not take its value.
    pub fn cell(&self, c: &Cell) -> Result<Shown, ShellError> {
        let names = if self.formatter.is_text() {
            self.formatter
        } else {
            Converter::StringBinary
        };
        let text = |b: &[u8]| names.show(b).unwrap_or_else(|_| bin(b));
        let row = text(&c.row);
        let column = format!("{}:{}", text(c.family.as_bytes()), text(&c.qualifier));
        let value = if c.cell_type == CellType::Put {
            // A few columns at most: a walk, no key to build for every cell.
            let conv = self
                .columns
                .iter()
                .find(|((f, q), _)| *f == c.family && *q == c.qualifier)
                .map_or(self.formatter, |(_, conv)| *conv);
            conv.show(&c.value).map_err(|e| {
                ShellError::new(
                    kind::BAD_VALUE,
                    format!(
                        "cannot show the value of row {} column {}:{} at timestamp {}: {e}",
                        bin(&c.row),
                        bin(c.family.as_bytes()),
                        bin(&c.qualifier),
                        c.timestamp
                    ),
                )
            })?
        } else {
            String::new()
        };
        Ok(Shown {
            row,
            column,
            timestamp: c.timestamp,
            cell_type: c.cell_type,
            value,
        })
    }

    /// Every cell, in order.
    pub fn cells(&self, cells: &[Cell]) -> Result<Vec<Shown>, ShellError> {
        cells.iter().map(|c| self.cell(c)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_read_as_java_writes_them() {
        assert_eq!(Converter::Long.show(&42i64.to_be_bytes()).unwrap(), "42");
        assert_eq!(Converter::Long.show(&(-7i64).to_be_bytes()).unwrap(), "-7");
        assert_eq!(
            Converter::Int.show(&i32::MIN.to_be_bytes()).unwrap(),
            "-2147483648"
        );
        assert_eq!(Converter::Short.show(&[0x01, 0x00]).unwrap(), "256");
        assert_eq!(Converter::Boolean.show(&[0]).unwrap(), "false");
        assert_eq!(Converter::Boolean.show(&[2]).unwrap(), "true");
        assert_eq!(Converter::Hex.show(&[0, 0xab, 0x10]).unwrap(), "00ab10");
        assert_eq!(Converter::String.show("é\n".as_bytes()).unwrap(), "é\n");
        assert_eq!(Converter::StringBinary.show(b"a\n").unwrap(), "a\\x0A");
    }

    #[test]
    fn floats_print_as_java_prints_them() {
        let f = |x: f32| Converter::Float.show(&x.to_be_bytes()).unwrap();
        let d = |x: f64| Converter::Double.show(&x.to_be_bytes()).unwrap();
        assert_eq!(f(1.0), "1.0");
        assert_eq!(f(0.1), "0.1");
        assert_eq!(d(1234567.5), "1234567.5");
        assert_eq!(d(1e7), "1.0E7");
        assert_eq!(d(1.5e-5), "1.5E-5");
        assert_eq!(d(0.001), "0.001");
        assert_eq!(d(-0.0), "-0.0");
        assert_eq!(d(f64::NEG_INFINITY), "-Infinity");
        assert_eq!(f(f32::NAN), "NaN");
    }

    #[test]
    fn a_number_of_the_wrong_width_is_refused() {
        let e = Converter::Long.show(b"abc").unwrap_err();
        assert_eq!(e, "toLong needs 8 bytes, the value has 3");
        assert!(Converter::Int.show(&[0; 8]).is_err());
        assert!(Converter::Boolean.show(&[]).is_err());
    }

    #[test]
    fn column_suffixes_name_converters_or_stay_qualifier_text() {
        assert_eq!(
            Converter::from_column_suffix(b"toLong"),
            Ok(Some(Converter::Long))
        );
        assert_eq!(
            Converter::from_column_suffix(b"c(org.apache.hadoop.hbase.util.Bytes).toInt"),
            Ok(Some(Converter::Int))
        );
        assert_eq!(Converter::from_column_suffix(b"b"), Ok(None));
        assert_eq!(Converter::from_column_suffix(b"\xff"), Ok(None));
        assert!(Converter::from_column_suffix(b"c(com.example.Money).toLong").is_err());
        assert!(Converter::from_column_suffix(b"c(Bytes).toMoney").is_err());
    }

    #[test]
    fn markers_have_no_value_to_convert() {
        let mut show = Show {
            formatter: Converter::Long,
            ..Show::default()
        };
        let marker = Cell::new("r", "cf", "", 5, CellType::DeleteFamily, "");
        let s = show.cell(&marker).unwrap();
        assert_eq!((s.column.as_str(), s.value.as_str()), ("cf:", ""));
        let put = Cell::new("r", "cf", "q", 5, CellType::Put, "xy");
        let e = show.cell(&put).unwrap_err();
        assert_eq!(e.kind, kind::BAD_VALUE);
        assert!(e.msg.contains("row r column cf:q"), "{}", e.msg);
        show.columns
            .insert(("cf".into(), b"q".to_vec()), Converter::String);
        assert_eq!(show.cell(&put).unwrap().value, "xy");
    }
}
