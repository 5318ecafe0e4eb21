//! DIFF data blocks (SPEC.md §4.4) under damage: every field of an entry made to lie is a typed
//! corruption naming the data block (or a key-order problem `verify` names), never a panic or
//! a wrong cell; and the file info's encoding name is checked as §7 says.

mod common;

use cellar_format::block::DataBlockEncoding;
use cellar_format::error::Region;
use cellar_format::{verify, BlockType, CompressionType, Error, ErrorKind, FileInfo, HFileReader};
use common::{
    encode_info_entries, options, rebuild_tail, reseal_in_place, sample_cells, sample_file_diff,
    scan_backward, scan_forward, write_file, Layout,
};

/// Where the fields of one DIFF entry lie in a raw payload.
#[derive(Debug, Clone, Copy)]
struct DiffEntry {
    offset: usize,
    shared: u32,
    unshared_at: usize,
    value_len_at: usize,
    flags_at: usize,
    coords_at: usize,
    /// Offset of the timestamp delta, if present.
    ts_at: Option<usize>,
}

fn varint(raw: &[u8], pos: &mut usize) -> u64 {
    let mut v = 0u64;
    for i in 0..10 {
        let b = raw[*pos];
        *pos += 1;
        v |= u64::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            break;
        }
    }
    v
}

/// The entries of a sound DIFF payload.
fn diff_entries(raw: &[u8]) -> Vec<DiffEntry> {
    let n = u32::from_le_bytes(raw[raw.len() - 4..].try_into().unwrap()) as usize;
    let end = raw.len() - 4 - 4 * n;
    let mut out = Vec::new();
    let mut pos = 0;
    while pos < end {
        let offset = pos;
        let shared = varint(raw, &mut pos) as u32;
        let unshared_at = pos;
        let unshared = varint(raw, &mut pos) as usize;
        let value_len_at = pos;
        let value_len = varint(raw, &mut pos) as usize;
        let flags_at = pos;
        let flags = raw[pos];
        pos += 1;
        let tags_len = if flags & 0x80 != 0 {
            varint(raw, &mut pos) as usize
        } else {
            0
        };
        let coords_at = pos;
        pos += unshared;
        let ts_at = (flags & 0x40 == 0).then_some(pos);
        if flags & 0x40 == 0 {
            varint(raw, &mut pos);
        }
        if flags & 0x20 == 0 {
            varint(raw, &mut pos);
        }
        pos += value_len + tags_len;
        out.push(DiffEntry {
            offset,
            shared,
            unshared_at,
            value_len_at,
            flags_at,
            coords_at,
            ts_at,
        });
    }
    out
}

fn sample() -> (Vec<u8>, Layout) {
    let (_, bytes) = sample_file_diff();
    let l = Layout::of(&bytes);
    let r = HFileReader::open(bytes.as_slice(), "s").unwrap();
    assert_eq!(r.data_block_encoding(), DataBlockEncoding::Diff);
    (bytes, l)
}

/// Damage the first uncompressed data block's payload with `f` and reseal it (so only the
/// decoders stand between the damage and a reader). Reading must not panic, `verify` must name
/// the damage, and with `reads_fail` a scan in each direction must fail with corruption there.
#[track_caller]
fn damaged_block(reads_fail: bool, f: impl Fn(&mut Vec<u8>, &[DiffEntry])) {
    let (mut bytes, l) = sample();
    let d = l.data_with(CompressionType::None);
    let mut raw = d.raw.clone();
    let entries = diff_entries(&raw);
    assert!(entries.len() >= 3);
    f(&mut raw, &entries);
    reseal_in_place(&mut bytes, d, &raw);
    let at = Some((d.handle.offset, Region::Data));
    let r = HFileReader::open(bytes.as_slice(), "damaged").unwrap();
    for (dir, res) in [
        ("forward", scan_forward(&r)),
        ("backward", scan_backward(&r)),
    ] {
        if reads_fail {
            let e = res.expect_err(dir);
            assert_eq!(e.kind(), ErrorKind::Corruption, "{dir}: {e}");
            assert_eq!(e.location(), at, "{dir}: {e}");
        }
    }
    let rep = verify(bytes.as_slice(), "damaged").unwrap();
    // A block that decodes into wrong keys can be caught at its index entry or at the next
    // block instead of at itself; a block that does not decode is named.
    let named = rep
        .problems
        .iter()
        .any(|p| p.region == Region::Data && p.offset == d.handle.offset);
    assert!(
        named || (!reads_fail && !rep.is_clean()),
        "{:#?}",
        rep.problems
    );
}

#[track_caller]
fn damaged_block_is_corruption(f: impl Fn(&mut Vec<u8>, &[DiffEntry])) {
    damaged_block(true, f);
}

#[test]
fn shared_longer_than_the_previous_coordinates() {
    damaged_block_is_corruption(|raw, e| {
        let second = e[1];
        assert!(second.shared > 0 && second.shared < 0x7f);
        raw[second.offset] = 0x7f;
    });
}

#[test]
fn restart_entry_that_shares_bytes() {
    damaged_block_is_corruption(|raw, e| {
        assert_eq!(e[0].shared, 0);
        raw[e[0].offset] = 1;
    });
}

/// A longer coordinate delta that still lies inside the block swallows the bytes after it: the
/// entries decode into wrong keys (which only the checksum, here resealed, would have caught),
/// and `verify` finds them out of order or malformed.
#[test]
fn unshared_length_that_swallows_the_next_fields() {
    damaged_block(false, |raw, e| {
        raw[e[1].unshared_at] = 0x7f;
    });
}

#[test]
fn value_length_past_the_block() {
    damaged_block_is_corruption(|raw, e| {
        // A two-byte varint the one-byte field cannot hold: grow it in place by making the
        // value length huge but keep the byte count (0x7f = 127 bytes, past a 400-byte block's
        // last entry).
        let last = e[e.len() - 1];
        raw[last.value_len_at] = 0x7f;
    });
}

#[test]
fn tags_flag_that_shifts_the_entry() {
    damaged_block(false, |raw, e| {
        // Setting bit 7 makes the next byte (the first coordinate byte) a tags length, and
        // the rest of the entry shifts: something must run past the block or fail to decode.
        let last = e[e.len() - 1];
        raw[last.flags_at] |= 0x80;
        raw[last.coords_at] = 0x7f;
    });
}

#[test]
fn timestamp_delta_that_never_ends() {
    damaged_block_is_corruption(|raw, e| {
        let last = e[e.len() - 1];
        let ts = last.ts_at.expect("the last entry has a timestamp delta");
        // Continuation bits to the end of the entries region: the varint runs past the block
        // or past 10 bytes.
        let restarts = raw.len()
            - 4
            - 4 * u32::from_le_bytes(raw[raw.len() - 4..].try_into().unwrap()) as usize;
        for b in &mut raw[ts..restarts] {
            *b |= 0x80;
        }
    });
}

/// A flags bit flipped between "equal to the base" and "a delta follows" changes the key
/// without failing to decode: the block still decodes into some cells, and the verifier catches
/// the broken order or the broken entry.
#[test]
fn flipped_same_timestamp_bit_is_found_by_verify() {
    let (mut bytes, l) = sample();
    let d = l.data_with(CompressionType::None);
    let mut raw = d.raw.clone();
    let e = diff_entries(&raw);
    raw[e[1].flags_at] ^= 0x40;
    reseal_in_place(&mut bytes, d, &raw);
    // Reading may fail or return cells; it must not panic.
    if let Ok(r) = HFileReader::open(bytes.as_slice(), "flip") {
        let _ = scan_forward(&r);
        let _ = scan_backward(&r);
    }
    let rep = verify(bytes.as_slice(), "flip").unwrap();
    assert!(
        rep.problems
            .iter()
            .any(|p| p.region == Region::Data && p.offset == d.handle.offset),
        "{:#?}",
        rep.problems
    );
}

fn info_entries(l: &Layout) -> Vec<(String, Vec<u8>)> {
    FileInfo::decode_entries(&l.nth(BlockType::FileInfo, 0).raw)
        .unwrap()
        .into_iter()
        .collect()
}

fn with_encoding_name(bytes: &[u8], l: &Layout, name: &[u8]) -> Vec<u8> {
    let mut entries = info_entries(l);
    entries
        .iter_mut()
        .find(|(k, _)| k == "data_block_encoding")
        .unwrap()
        .1 = name.to_vec();
    rebuild_tail(bytes, None, Some(&encode_info_entries(&entries)))
}

#[test]
fn unknown_encoding_name_in_a_version_2_file_is_corruption() {
    let (bytes, l) = sample();
    let fi = l.nth(BlockType::FileInfo, 0).handle.offset;
    let b = with_encoding_name(&bytes, &l, b"FAST_DIFF");
    let e = HFileReader::open(b.as_slice(), "x").expect_err("an unknown encoding was read");
    assert_eq!(e.kind(), ErrorKind::Corruption, "{e}");
    assert_eq!(e.location(), Some((fi, Region::FileInfo)), "{e}");
    assert!(e.to_string().contains("FAST_DIFF"), "{e}");
    let rep = verify(b.as_slice(), "x").unwrap();
    assert!(rep
        .problems
        .iter()
        .any(|p| p.region == Region::FileInfo && p.what.contains("FAST_DIFF")));
}

/// Version 1 readers never read the name: a version 1 file is PREFIX whatever it says.
#[test]
fn a_version_1_file_is_prefix_whatever_its_file_info_says() {
    let cells = sample_cells(20, 8);
    let mut o = options(
        400,
        1024,
        2,
        CompressionType::None,
        cellar_format::BloomType::Row,
        16,
    );
    o.format_version = cellar_format::FormatVersion::V1;
    o.data_block_encoding = DataBlockEncoding::Prefix;
    let bytes = write_file(&cells, o);
    let l = Layout::of(&bytes);
    let b = with_encoding_name(&bytes, &l, b"DIFF");
    let r = HFileReader::open(b.as_slice(), "v1").unwrap();
    assert_eq!(r.data_block_encoding(), DataBlockEncoding::Prefix);
    assert_eq!(scan_forward(&r).unwrap().len(), cells.len());
    assert!(verify(b.as_slice(), "v1").unwrap().is_clean());
}

/// The writer refuses DIFF in a version that lacks it, and versions it cannot write.
#[test]
fn writer_refuses_an_encoding_its_version_lacks() {
    let mut o = cellar_format::WriterOptions::new("cf");
    o.format_version = cellar_format::FormatVersion::V1;
    o.data_block_encoding = DataBlockEncoding::Diff;
    let e = cellar_format::HFileWriter::new(Vec::new(), "w", o).unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
    let mut o = cellar_format::WriterOptions::new("cf");
    o.format_version = cellar_format::FormatVersion(99);
    assert!(cellar_format::HFileWriter::new(Vec::new(), "w", o).is_err());
}

/// DIFF files are smaller than PREFIX files of the same cells, and read back identically.
#[test]
fn diff_is_smaller_and_reads_the_same() {
    let cells = sample_cells(200, 24);
    let mut sizes = Vec::new();
    let mut scans = Vec::new();
    for enc in [DataBlockEncoding::Prefix, DataBlockEncoding::Diff] {
        let mut o = options(
            4096,
            4096,
            16,
            CompressionType::None,
            cellar_format::BloomType::Row,
            1 << 17,
        );
        o.data_block_encoding = enc;
        let bytes = write_file(&cells, o);
        let r = HFileReader::open(bytes.as_slice(), "x").unwrap();
        scans.push((scan_forward(&r).unwrap(), scan_backward(&r).unwrap()));
        sizes.push(r.info().data_raw_bytes);
        assert!(verify(bytes.as_slice(), "x").unwrap().is_clean());
    }
    assert_eq!(scans[0], scans[1]);
    assert!(
        sizes[1] < sizes[0],
        "DIFF {} vs PREFIX {} bytes",
        sizes[1],
        sizes[0]
    );
}
