//! Human-readable forms of bytes and keys, shared by errors and the tools.

use std::fmt::Write as _;

use crate::cell::KeyRef;

/// HBase's `Bytes.toStringBinary`: letters, digits and `` `~!@#$%^&*()-_=+[]{}|;:'",.<>/?`` and
/// space as they are, every other byte as `\xNN` (upper-case hex). A backslash is escaped too,
/// so the output is unambiguous and [`parse_binary`] inverts it.
pub fn to_string_binary(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(bytes.len());
    for &b in bytes {
        if b.is_ascii_alphanumeric() || b" `~!@#$%^&*()-_=+[]{}|;:'\",.<>/?".contains(&b) {
            s.push(b as char);
        } else {
            let _ = write!(s, "\\x{b:02X}");
        }
    }
    s
}

/// Inverse of [`to_string_binary`]: `\xNN` (either case) becomes the byte, anything else is
/// taken as is (UTF-8 bytes of non-ASCII characters included).
pub fn parse_binary(s: &str) -> Result<Vec<u8>, String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while let Some(&c) = b.get(i) {
        if c == b'\\' && b.get(i + 1) == Some(&b'x') {
            let hex = b
                .get(i + 2..i + 4)
                .and_then(|h| std::str::from_utf8(h).ok())
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or_else(|| format!("bad \\x escape at byte {i} of {s:?}"))?;
            out.push(hex);
            i += 4;
        } else {
            out.push(c);
            i += 1;
        }
    }
    Ok(out)
}

/// `row/family:qualifier/timestamp/Type/seqid=N`, HBase's KeyValue form.
pub fn key_to_string(k: &KeyRef<'_>) -> String {
    let ty = match k.cell_type() {
        Some(t) => t.name().to_owned(),
        None if k.type_code == crate::cell::TYPE_MAXIMUM => "Maximum".to_owned(),
        None if k.type_code == crate::cell::TYPE_MINIMUM => "Minimum".to_owned(),
        None => format!("Type{}", k.type_code),
    };
    format!(
        "{}/{}:{}/{}/{}/seqid={}",
        to_string_binary(k.row),
        to_string_binary(k.family),
        to_string_binary(k.qualifier),
        k.timestamp,
        ty,
        k.seq
    )
}

/// [`key_to_string`] of an encoded key, or its escaped bytes when it does not parse.
pub fn encoded_key_to_string(key: &[u8]) -> String {
    match KeyRef::parse(key) {
        Ok(k) => key_to_string(&k),
        Err(_) => format!("<malformed key {}>", to_string_binary(key)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn string_binary_round_trips() {
        let raw = b"ab c\\\x00\xff\n{}";
        let s = to_string_binary(raw);
        assert_eq!(s, "ab c\\x5C\\x00\\xFF\\x0A{}");
        assert_eq!(parse_binary(&s).unwrap(), raw);
        assert!(parse_binary("\\xZZ").is_err());
    }
}
