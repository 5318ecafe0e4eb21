//! Golden fixtures of every format version (STYLE.md practice 18), one set per version in
//! `tests/testdata/v<N>/`: version 1 (PREFIX data blocks), version 2 (DIFF data blocks) and
//! version 3 (ANCHORED_DIFF data blocks, the writer's default).
//!
//! * `tiny.hfile` pins each format: the writer, asked for that version, must still produce it
//!   byte for byte, and it must read back to the cells it was written from.
//! * The broken files must be rejected with the right error category by open or a scan, and
//!   `verify` must name the right region.
//!
//! `REWRITE=1 cargo test -p cellar-format --test fixtures` regenerates every file (do that only
//! for an intended format change, which also needs a new format version). Without it, each
//! test also checks that the checked-in file is still what the generator below produces.
//! `testdata/v<N>/README.md` says what is wrong with each file.

mod common;

use std::path::PathBuf;

use cellar_format::block::DataBlockEncoding;
use cellar_format::error::Region;
use cellar_format::index::IndexValue;
use cellar_format::{
    verify, BlockType, BloomType, CellKey, CellType, CompressionType, Error, ErrorKind,
    FormatVersion, HFileReader, KeyRef, TRAILER_LEN,
};
use common::{
    craft_file_as, edit_index_entries, flip_bit, options, out_of_order_blocks, put, rebuild_tail,
    rewrite_trailer, scan_backward, scan_forward, seal_fields, write_file, Cell, Layout,
};

/// One version's fixture set.
#[derive(Debug, Clone, Copy)]
struct Set {
    version: FormatVersion,
    encoding: DataBlockEncoding,
}

const V1: Set = Set {
    version: FormatVersion::V1,
    encoding: DataBlockEncoding::Prefix,
};
const V2: Set = Set {
    version: FormatVersion::V2,
    encoding: DataBlockEncoding::Diff,
};
const V3: Set = Set {
    version: FormatVersion::V3,
    encoding: DataBlockEncoding::AnchoredDiff,
};

impl Set {
    fn dir(self) -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join(format!("tests/testdata/v{}", self.version.0))
    }
}

fn rewriting() -> bool {
    std::env::var_os("REWRITE").is_some_and(|v| v == "1")
}

/// With `REWRITE=1`, store `generated` as `name`. Then read the stored file back, check that
/// it is still what the code generates, and return it.
#[track_caller]
fn fixture(set: Set, name: &str, generated: &[u8]) -> Vec<u8> {
    let path = set.dir().join(name);
    if rewriting() {
        // Tests run in parallel and several regenerate tiny.hfile: write, then rename.
        std::fs::create_dir_all(set.dir()).unwrap();
        let tmp = path.with_extension(format!("tmp-{:?}", std::thread::current().id()));
        std::fs::write(&tmp, generated).unwrap();
        std::fs::rename(&tmp, &path).unwrap();
    }
    let stored = std::fs::read(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e} (generate it with REWRITE=1 cargo test -p cellar-format --test fixtures)",
            path.display()
        )
    });
    assert!(
        stored == generated,
        "v{} {name}: the code no longer produces the checked-in bytes ({} stored, {} \
         generated). A released format must not change; if this change is intended, it needs \
         a new format version and fixtures regenerated with REWRITE=1",
        set.version.0,
        stored.len(),
        generated.len()
    );
    stored
}

/// The cells of `tiny.hfile`: every cell type, one with tags, an empty value.
fn tiny_cells() -> Vec<Cell> {
    let c = |row: &str, q: &str, ts, ty, seq, v: &str, tags: &str| {
        (
            CellKey::new(row, "cf", q, ts, ty, seq),
            v.as_bytes().to_vec(),
            tags.as_bytes().to_vec(),
        )
    };
    let mut cells = vec![
        c("r1", "", 5, CellType::DeleteFamily, 9, "", ""),
        c("r1", "a", 7, CellType::Put, 10, "v1", ""),
        c("r1", "a", 6, CellType::Delete, 8, "", ""),
        c("r1", "b", 3, CellType::Put, 4, "v2", "t1"),
        c("r2", "", 4, CellType::DeleteFamilyVersion, 5, "", ""),
        c("r2", "c", 9, CellType::DeleteColumn, 6, "", ""),
        c("r2", "c", 2, CellType::Put, 3, "", ""),
        c("r3", "d", 1, CellType::Put, 1, "v3", ""),
    ];
    cells.sort_by(|a, b| a.0.cmp(&b.0));
    cells
}

/// `tiny.hfile`: tiny blocks (several data blocks), no compression, ROW bloom, created at 0.
fn gen_tiny(set: Set) -> Vec<u8> {
    // DIFF entries are smaller: smaller blocks keep three or more of them.
    let block_size = if set.encoding != DataBlockEncoding::Prefix {
        40
    } else {
        64
    };
    let mut o = options(
        block_size,
        256,
        2,
        CompressionType::None,
        BloomType::Row,
        1024,
    );
    o.format_version = set.version;
    o.data_block_encoding = set.encoding;
    write_file(&tiny_cells(), o)
}

fn tiny(set: Set) -> (Vec<u8>, Layout) {
    let bytes = fixture(set, "tiny.hfile", &gen_tiny(set));
    let l = Layout::of(&bytes);
    (bytes, l)
}

fn open(bytes: &[u8]) -> Result<HFileReader<&[u8]>, Error> {
    HFileReader::open(bytes, "fixture")
}

/// Open, then scan forward and backward; the first error of the three.
fn open_and_scan(bytes: &[u8]) -> Result<(), Error> {
    let r = open(bytes)?;
    scan_forward(&r)?;
    scan_backward(&r)?;
    Ok(())
}

#[track_caller]
fn rejected(bytes: &[u8], kind: ErrorKind, loc: Option<(u64, Region)>) -> Error {
    let e = open_and_scan(bytes).expect_err("a broken fixture was read without error");
    assert_eq!(e.kind(), kind, "{e}");
    assert_eq!(e.location(), loc, "{e}");
    e
}

#[track_caller]
fn verify_names(bytes: &[u8], region: Region, offset: u64) {
    let rep = verify(bytes, "fixture").unwrap();
    assert!(
        rep.problems
            .iter()
            .any(|p| p.region == region && p.offset == offset),
        "verify did not report {region} at {offset}: {:#?}",
        rep.problems
    );
}

fn tiny_is_written_byte_for_byte(set: Set) {
    let (bytes, l) = tiny(set);
    // What the file is made of, so an accidental change of the sample is noticed too.
    assert!(l.of_type(BlockType::Data).len() >= 3);
    assert_eq!(l.trailer.index_levels, 1);
    assert_eq!(l.trailer.version, set.version);
    assert!(l
        .blocks
        .iter()
        .all(|b| b.env.compression == CompressionType::None));
    assert_eq!(&bytes[bytes.len() - 8..], b"CellarHF");
}

fn tiny_reads_back(set: Set) {
    let (bytes, _) = tiny(set);
    let cells = tiny_cells();
    let r = open(&bytes).unwrap();
    let got = scan_forward(&r).unwrap();
    let want: Vec<_> = cells
        .iter()
        .map(|(k, v, t)| (k.encode(), v.clone(), t.clone()))
        .collect();
    assert_eq!(got, want);
    let info = r.info();
    assert_eq!(info.entries, cells.len() as u64);
    for t in CellType::ALL {
        assert!(info.count_of(t) >= 1, "no {t:?} in tiny.hfile");
    }
    assert_eq!(info.created_at_ms, 0);
    assert_eq!(info.family, b"cf");
    assert_eq!(info.bloom_type, BloomType::Row);
    assert_eq!(info.compression, Some(CompressionType::None));
    assert_eq!(info.data_encoding().unwrap(), set.encoding);
    assert_eq!(r.data_block_encoding(), set.encoding);
    for row in [&b"r1"[..], b"r2", b"r3"] {
        assert!(r.may_contain_row(row).unwrap());
    }
    let got = r.get_column(b"r1", b"a").unwrap();
    assert_eq!(got.len(), 2);
    assert_eq!(got[0].1, b"v1");
    let rep = verify(bytes.as_slice(), "tiny").unwrap();
    assert!(rep.is_clean(), "{:#?}", rep.problems);
    assert_eq!(rep.stats.cells, cells.len() as u64);
}

fn bad_magic_is_rejected(set: Set) {
    let (tiny, l) = tiny(set);
    let mut g = tiny.clone();
    let last = g.len() - 1;
    g[last] ^= 0x20;
    let bytes = fixture(set, "bad-magic.hfile", &g);
    let e = rejected(
        &bytes,
        ErrorKind::Corruption,
        Some((l.trailer_at(), Region::Trailer)),
    );
    assert!(e.to_string().contains("magic"), "{e}");
    verify_names(&bytes, Region::Trailer, l.trailer_at());
}

fn unknown_version_is_unsupported(set: Set) {
    let (mut g, _) = tiny(set);
    // One past what this build reads: the fixture is regenerated when a version is added.
    let next = FormatVersion::CURRENT.0 + 1;
    rewrite_trailer(&mut g, |t| t.version = FormatVersion(next));
    let bytes = fixture(set, "unknown-version.hfile", &g);
    let e = rejected(&bytes, ErrorKind::Unsupported, None);
    assert!(
        matches!(e, Error::Unsupported { version, .. } if version == next),
        "{e}"
    );
    let e = verify(bytes.as_slice(), "fixture").unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Unsupported);
}

fn data_block_checksum_is_rejected(set: Set) {
    let (mut g, l) = tiny(set);
    let d = l.nth(BlockType::Data, 0).handle.offset;
    flip_bit(&mut g, d + 2, 0);
    let bytes = fixture(set, "checksum-data-block.hfile", &g);
    let e = rejected(&bytes, ErrorKind::Corruption, Some((d, Region::Data)));
    assert!(matches!(e, Error::ChecksumMismatch { .. }), "{e}");
    verify_names(&bytes, Region::Data, d);
}

fn truncated_trailer_is_rejected(set: Set) {
    let (g, _) = tiny(set);
    let bytes = fixture(set, "truncated-trailer.hfile", &g[..g.len() - 20]);
    let at = (bytes.len() - TRAILER_LEN) as u64;
    rejected(&bytes, ErrorKind::Corruption, Some((at, Region::Trailer)));
    verify_names(&bytes, Region::Trailer, at);
}

fn index_past_eof_is_rejected(set: Set) {
    let (g, l) = tiny(set);
    let bogus = g.len() as u64 + 1000;
    let root = l.nth(BlockType::RootIndex, 0);
    let raw = edit_index_entries(&root.raw, |i, _, e| {
        if i == 0 {
            e.handle.offset = bogus;
        }
    });
    let bytes = fixture(
        set,
        "index-past-eof.hfile",
        &rebuild_tail(&g, Some(&raw), None),
    );
    // The root is sound (open succeeds); its first entry names a block past the end.
    let r = open(&bytes).unwrap();
    let mut it = cellar_format::block::BlockIter::new(r.root().clone());
    it.seek_to_first().unwrap();
    assert_eq!(IndexValue::decode(it.value()).unwrap().handle.offset, bogus);
    rejected(&bytes, ErrorKind::Corruption, Some((bogus, Region::Data)));
    verify_names(&bytes, Region::Data, bogus);
}

fn out_of_order_is_caught_by_verify(set: Set) {
    let bytes = fixture(
        set,
        "out-of-order.hfile",
        &craft_file_as(&out_of_order_blocks(), &[], set.version),
    );
    let l = Layout::of(&bytes);
    let second = l.nth(BlockType::Data, 1).handle.offset;
    // Every checksum is valid: readers return the cells as stored, out of order.
    let r = open(&bytes).unwrap();
    let rows: Vec<Vec<u8>> = scan_forward(&r).unwrap().into_iter().map(|c| c.0).collect();
    assert!(rows
        .windows(2)
        .any(|w| KeyRef::parse(&w[0]).unwrap() > KeyRef::parse(&w[1]).unwrap()));
    let rep = verify(bytes.as_slice(), "fixture").unwrap();
    assert_eq!(rep.problems.len(), 1, "{:#?}", rep.problems);
    let p = &rep.problems[0];
    assert_eq!((p.region, p.offset), (Region::Data, second));
    assert!(p.what.contains("does not sort after"), "{}", p.what);
}

fn bad_block_type_is_rejected(set: Set) {
    let (mut g, l) = tiny(set);
    let d = l.nth(BlockType::Data, 1);
    let off = d.handle.offset;
    let stored = seal_fields(&d.raw, 99, CompressionType::None as u8, d.env.raw_len, off);
    put(&mut g, off, &stored);
    let bytes = fixture(set, "bad-block-type.hfile", &g);
    let e = rejected(&bytes, ErrorKind::Corruption, Some((off, Region::Data)));
    assert!(e.to_string().contains("unknown block type 99"), "{e}");
    verify_names(&bytes, Region::Data, off);
}

/// Every check, for each version's set.
macro_rules! for_each_set {
    ($($name:ident),* $(,)?) => {
        mod v1 {
            $(#[test]
            fn $name() {
                super::$name(super::V1);
            })*
        }
        mod v2 {
            $(#[test]
            fn $name() {
                super::$name(super::V2);
            })*
        }
        mod v3 {
            $(#[test]
            fn $name() {
                super::$name(super::V3);
            })*
        }
    };
}

for_each_set!(
    tiny_is_written_byte_for_byte,
    tiny_reads_back,
    bad_magic_is_rejected,
    unknown_version_is_unsupported,
    data_block_checksum_is_rejected,
    truncated_trailer_is_rejected,
    index_past_eof_is_rejected,
    out_of_order_is_caught_by_verify,
    bad_block_type_is_rejected,
);
