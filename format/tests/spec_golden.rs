//! SPEC.md's worked example (§12) is the byte-exact output of the writer: this test extracts
//! the hex dump from SPEC.md and compares it with what `HFileWriter` produces for the cells
//! the example lists. A format change must update SPEC.md in the same commit.

use cellar_format::bloom::BloomConfig;
use cellar_format::{BloomType, CellKey, CellType, HFileReader, HFileWriter, WriterOptions};

/// The example's file: two cells of family `cf`, no compression, no bloom, created at 0.
fn example_file() -> Vec<u8> {
    let mut o = WriterOptions::new("cf");
    o.bloom = BloomConfig {
        bloom_type: BloomType::None,
        ..BloomConfig::default()
    };
    o.created_at_ms = 0;
    let mut w = HFileWriter::new(Vec::new(), "example", o).unwrap();
    w.append(
        &CellKey::new("r1", "cf", "q", 7, CellType::Put, 1).as_ref(),
        b"v1",
    )
    .unwrap();
    w.append(
        &CellKey::new("r1", "cf", "q", 5, CellType::Put, 2).as_ref(),
        b"v0",
    )
    .unwrap();
    w.finish().unwrap().0
}

fn hex_dump(bytes: &[u8]) -> String {
    let mut s = String::new();
    for (i, chunk) in bytes.chunks(16).enumerate() {
        let hex: Vec<String> = chunk.iter().map(|b| format!("{b:02x}")).collect();
        s.push_str(&format!("{:04x}: {}\n", i * 16, hex.join(" ")));
    }
    s
}

fn spec_bytes() -> Vec<u8> {
    let spec = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../SPEC.md")).unwrap();
    let begin = spec
        .find("<!-- example-hex-begin -->")
        .expect("begin marker in SPEC.md");
    let end = spec
        .find("<!-- example-hex-end -->")
        .expect("end marker in SPEC.md");
    let mut out = Vec::new();
    for line in spec[begin..end].lines() {
        let Some((addr, rest)) = line.split_once(": ") else {
            continue;
        };
        if usize::from_str_radix(addr.trim(), 16).ok() != Some(out.len()) {
            continue;
        }
        for h in rest.split_whitespace() {
            out.push(u8::from_str_radix(h, 16).unwrap());
        }
    }
    out
}

#[test]
fn spec_worked_example_matches_writer_output() {
    let file = example_file();
    let spec = spec_bytes();
    assert!(
        spec == file,
        "SPEC.md §12 hex dump differs from the writer's output; the writer now produces:\n{}",
        hex_dump(&file)
    );
    let r = HFileReader::open(file, "example").unwrap();
    assert_eq!(r.info().entries, 2);
    assert!(cellar_format::verify(&spec, "spec").unwrap().is_clean());
}
