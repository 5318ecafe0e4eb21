//! One named test per malformed input (STYLE.md practices 7, 8 and 13).
//!
//! Each test writes a sound file with `HFileWriter` (many small data blocks, some LZ4 and some
//! stored raw; a two-level index; a ROW bloom in several chunks), locates one structure through
//! the reader, and damages exactly that. Where the case is about a *lying field* rather than a
//! flipped bit, the block is re-sealed (or the trailer re-encoded) with a valid checksum, so the
//! field itself is what must be caught. Each test then checks:
//!
//! * open, a scan or a lookup fails with the right [`ErrorKind`], and [`Error::location`] names
//!   the damaged region and its offset;
//! * `verify` reports at least one problem in that region (at that offset where it applies);
//! * nothing panics.
//!
//! Some lies are invisible to a reader by design (a wrong first key or time range in an index
//! entry, a wrong count in the file info, keys out of order across blocks, a bloom chunk with
//! bits missing): only `verify` is required to catch those, and the tests say so.

mod common;

use cellar_format::error::Region;
use cellar_format::{
    verify, BlockHandle, BlockType, CellType, CompressionType, Error, ErrorKind, FileInfo,
    FormatVersion, HFileReader, KeyRef, VerifyReport,
};
use common::{
    block_entries, build_block, craft_file, edit_index_entries, encode_info_entries,
    finish_crafted, flip_bit, out_of_order_blocks, parse_block, put, put_key, raw_data_block,
    rebuild_tail, refresh_trailer_checksum, reseal_in_place, rewrite_trailer, sample_file,
    scan_backward, scan_forward, seal, seal_fields, BlockInfo, CraftBlock, Layout, Placed, Rows,
};

fn sample() -> (Vec<u8>, Layout) {
    let (_, bytes) = sample_file();
    let layout = Layout::of(&bytes);
    assert_eq!(layout.trailer.index_levels, 2);
    assert!(layout.of_type(BlockType::LeafIndex).len() >= 2);
    assert!(layout.bloom.as_ref().unwrap().chunks.len() >= 3);
    (bytes, layout)
}

fn open(bytes: &[u8]) -> Result<HFileReader<&[u8]>, Error> {
    HFileReader::open(bytes, "damaged")
}

#[track_caller]
fn assert_error(e: &Error, kind: ErrorKind, loc: Option<(u64, Region)>) {
    assert_eq!(e.kind(), kind, "wrong category: {e}");
    assert_eq!(e.location(), loc, "wrong location: {e}");
}

/// Open must fail as described.
#[track_caller]
fn open_fails(bytes: &[u8], kind: ErrorKind, loc: Option<(u64, Region)>) -> Error {
    let e = open(bytes).expect_err("open accepted a damaged file");
    assert_error(&e, kind, loc);
    e
}

/// Open must succeed and a full forward scan fail at `loc`.
#[track_caller]
fn forward_fails(bytes: &[u8], loc: (u64, Region)) -> Error {
    let r = open(bytes).unwrap();
    let e = scan_forward(&r).expect_err("forward scan read through the damage");
    assert_error(&e, ErrorKind::Corruption, Some(loc));
    e
}

/// Open must succeed and a full backward scan fail at `loc`.
#[track_caller]
fn backward_fails(bytes: &[u8], loc: (u64, Region)) -> Error {
    let r = open(bytes).unwrap();
    let e = scan_backward(&r).expect_err("backward scan read through the damage");
    assert_error(&e, ErrorKind::Corruption, Some(loc));
    e
}

/// Both scan directions must fail at `loc`.
#[track_caller]
fn scans_fail(bytes: &[u8], loc: (u64, Region)) -> Error {
    backward_fails(bytes, loc);
    forward_fails(bytes, loc)
}

/// `verify` must report a problem in `region` (at `offset`, when given).
#[track_caller]
fn verify_reports(bytes: &[u8], region: Region, offset: Option<u64>) -> VerifyReport {
    let report = verify(bytes, "damaged").unwrap();
    assert!(
        report
            .problems
            .iter()
            .any(|p| p.region == region && offset.is_none_or(|o| p.offset == o)),
        "verify did not report {region} at {offset:?}: {:#?}",
        report.problems
    );
    report
}

/// Open and scan must succeed and see exactly `want` (the lie is invisible to a reader).
#[track_caller]
fn reads_like(bytes: &[u8], want: &Rows) {
    let r = open(bytes).unwrap();
    assert_eq!(&scan_forward(&r).unwrap(), want);
    let mut back = scan_backward(&r).unwrap();
    back.reverse();
    assert_eq!(&back, want);
}

fn original_rows(bytes: &[u8]) -> Rows {
    scan_forward(&open(bytes).unwrap()).unwrap()
}

/// Row and qualifier of the first cell of a data block.
fn first_column(b: &BlockInfo) -> (Vec<u8>, Vec<u8>) {
    let e = block_entries(&b.raw);
    let k = KeyRef::parse(&e[0].0).unwrap();
    (k.row.to_vec(), k.qualifier.to_vec())
}

/// The stored payload bytes of a block (before its envelope).
fn stored_payload(bytes: &[u8], b: &BlockInfo) -> Vec<u8> {
    let off = b.handle.offset as usize;
    bytes[off..off + b.handle.stored_len as usize].to_vec()
}

// ---------------------------------------------------------------------------------------------
// Trailer

#[test]
fn bad_magic() {
    let (mut bytes, l) = sample();
    let last = bytes.len() - 1;
    bytes[last] ^= 0x20; // "CellarHF" -> "CellarHf"
    let e = open_fails(
        &bytes,
        ErrorKind::Corruption,
        Some((l.trailer_at(), Region::Trailer)),
    );
    assert!(e.to_string().contains("magic"), "{e}");
    verify_reports(&bytes, Region::Trailer, Some(l.trailer_at()));
}

#[test]
fn unknown_version() {
    for v in [0, FormatVersion::CURRENT.0 + 1, 77, u32::MAX] {
        let (mut bytes, _) = sample();
        rewrite_trailer(&mut bytes, |t| t.version = FormatVersion(v));
        let e = open_fails(&bytes, ErrorKind::Unsupported, None);
        assert!(
            matches!(e, Error::Unsupported { version, .. } if version == v),
            "{e}"
        );
        // A sound trailer of another version cannot be checked at all: verify says so.
        let e = verify(bytes.as_slice(), "v").expect_err("verify checked an unknown version");
        assert_eq!(e.kind(), ErrorKind::Unsupported, "{e}");
    }
}

#[test]
fn flipped_version_byte() {
    let (mut bytes, l) = sample();
    let at = l.trailer_at();
    flip_bit(&mut bytes, at + 56, 1); // version 1 -> 3, checksum not refreshed
    let e = open_fails(&bytes, ErrorKind::Corruption, Some((at, Region::Trailer)));
    assert!(matches!(e, Error::ChecksumMismatch { .. }), "{e}");
    verify_reports(&bytes, Region::Trailer, Some(at));
}

#[test]
fn truncated_trailer() {
    let (bytes, _) = sample();
    for cut in 1..=72 {
        let b = &bytes[..bytes.len() - cut];
        let at = (b.len() - 72) as u64;
        open_fails(b, ErrorKind::Corruption, Some((at, Region::Trailer)));
        verify_reports(b, Region::Trailer, Some(at));
    }
    // Files shorter than a trailer: a prefix, and the trailer's own tail.
    for n in 0..72 {
        for b in [&bytes[..n], &bytes[bytes.len() - n..]] {
            let e = open_fails(b, ErrorKind::Corruption, Some((0, Region::Trailer)));
            assert!(e.to_string().contains("shorter"), "{e}");
            verify_reports(b, Region::Trailer, Some(0));
        }
    }
}

#[test]
fn trailer_handle_past_eof() {
    type Edit = fn(&mut cellar_format::Trailer, u64);
    let edits: [(&str, Edit); 5] = [
        ("root offset", |t, end| t.root_index.offset = end),
        ("root length", |t, end| t.root_index.stored_len = end),
        ("file-info offset", |t, end| t.file_info.offset = end - 5),
        ("bloom meta offset", |t, end| {
            t.bloom_meta = Some(BlockHandle {
                offset: end + 100,
                stored_len: 1,
            })
        }),
        ("file-info far away", |t, _| t.file_info.offset = 1 << 62),
    ];
    for (what, edit) in edits {
        let (mut bytes, l) = sample();
        let end = l.data_end();
        rewrite_trailer(&mut bytes, |t| edit(t, end));
        let e = open_fails(
            &bytes,
            ErrorKind::Corruption,
            Some((l.trailer_at(), Region::Trailer)),
        );
        assert!(e.to_string().contains("past"), "{what}: {e}");
        verify_reports(&bytes, Region::Trailer, Some(l.trailer_at()));
    }
}

/// A handle length near `u64::MAX` must not overflow `offset + length + envelope`.
#[test]
fn trailer_handle_length_overflow() {
    for len in [u64::MAX, u64::MAX - 9, u64::MAX - 10] {
        let (mut bytes, l) = sample();
        rewrite_trailer(&mut bytes, |t| t.file_info.stored_len = len);
        open_fails(
            &bytes,
            ErrorKind::Corruption,
            Some((l.trailer_at(), Region::Trailer)),
        );
        verify_reports(&bytes, Region::Trailer, Some(l.trailer_at()));
    }
}

#[test]
fn index_levels_zero_and_too_many() {
    for levels in [0u8, 17, 200, 255] {
        let (mut bytes, l) = sample();
        rewrite_trailer(&mut bytes, |t| t.index_levels = levels);
        let e = open_fails(
            &bytes,
            ErrorKind::Corruption,
            Some((l.trailer_at(), Region::Trailer)),
        );
        assert!(e.to_string().contains("index levels"), "{e}");
        verify_reports(&bytes, Region::Trailer, Some(l.trailer_at()));
    }
}

/// Index levels in range but not the file's: the root's children are not of the type the
/// claimed depth implies.
#[test]
fn index_levels_mismatch() {
    let (mut bytes, l) = sample();
    let leaves = l.of_type(BlockType::LeafIndex);
    let (first, last) = (
        leaves[0].handle.offset,
        leaves[leaves.len() - 1].handle.offset,
    );
    rewrite_trailer(&mut bytes, |t| t.index_levels = 1);
    forward_fails(&bytes, (first, Region::Data));
    backward_fails(&bytes, (last, Region::Data));
    verify_reports(&bytes, Region::Data, Some(first));

    let (mut bytes, _) = sample();
    rewrite_trailer(&mut bytes, |t| t.index_levels = 3);
    forward_fails(&bytes, (first, Region::IntermediateIndex));
    verify_reports(&bytes, Region::IntermediateIndex, Some(first));
}

#[test]
fn reserved_trailer_bytes_nonzero() {
    for i in 0..6 {
        let (mut bytes, l) = sample();
        let at = l.trailer_at();
        bytes[(at + 50 + i) as usize] = 0x80;
        refresh_trailer_checksum(&mut bytes);
        let e = open_fails(&bytes, ErrorKind::Corruption, Some((at, Region::Trailer)));
        assert!(e.to_string().contains("reserved"), "{e}");
        verify_reports(&bytes, Region::Trailer, Some(at));
    }
}

#[test]
fn unknown_checksum_type() {
    for ty in [0u8, 2, 255] {
        let (mut bytes, l) = sample();
        let at = l.trailer_at();
        bytes[(at + 49) as usize] = ty;
        refresh_trailer_checksum(&mut bytes);
        let e = open_fails(&bytes, ErrorKind::Corruption, Some((at, Region::Trailer)));
        assert!(e.to_string().contains("checksum type"), "{e}");
        verify_reports(&bytes, Region::Trailer, Some(at));
    }
}

#[test]
fn trailer_checksum_mismatch() {
    for byte in [0u64, 20, 48, 60, 63] {
        let (mut bytes, l) = sample();
        let at = l.trailer_at();
        flip_bit(&mut bytes, at + byte, 0);
        let e = open_fails(&bytes, ErrorKind::Corruption, Some((at, Region::Trailer)));
        assert!(matches!(e, Error::ChecksumMismatch { .. }), "{e}");
        verify_reports(&bytes, Region::Trailer, Some(at));
    }
}

// ---------------------------------------------------------------------------------------------
// Block envelopes and checksums

#[test]
fn bad_block_type() {
    let (bytes, l) = sample();
    for code in [0u8, 8, 99, 255] {
        let mut bytes = bytes.clone();
        let d = l.nth(BlockType::Data, 1);
        let stored = seal_fields(
            &stored_payload(&bytes, d),
            code,
            d.env.compression as u8,
            d.env.raw_len,
            d.handle.offset,
        );
        put(&mut bytes, d.handle.offset, &stored);
        let loc = (d.handle.offset, Region::Data);
        let e = scans_fail(&bytes, loc);
        assert!(e.to_string().contains("unknown block type"), "{e}");
        let (row, q) = first_column(d);
        let e = open(&bytes).unwrap().get_column(&row, &q).unwrap_err();
        assert_error(&e, ErrorKind::Corruption, Some(loc));
        verify_reports(&bytes, Region::Data, Some(d.handle.offset));
    }
    // The same on the root: open fails.
    let mut bytes = bytes.clone();
    let root = l.nth(BlockType::RootIndex, 0);
    let stored = seal_fields(&root.raw, 42, 0, root.env.raw_len, root.handle.offset);
    put(&mut bytes, root.handle.offset, &stored);
    open_fails(
        &bytes,
        ErrorKind::Corruption,
        Some((root.handle.offset, Region::RootIndex)),
    );
    verify_reports(&bytes, Region::RootIndex, Some(root.handle.offset));
}

#[test]
fn unknown_compression() {
    let (mut bytes, l) = sample();
    let d = l.data_with(CompressionType::None);
    let stored = seal_fields(
        &d.raw,
        BlockType::Data as u8,
        7,
        d.env.raw_len,
        d.handle.offset,
    );
    put(&mut bytes, d.handle.offset, &stored);
    let e = scans_fail(&bytes, (d.handle.offset, Region::Data));
    assert!(e.to_string().contains("compression"), "{e}");
    verify_reports(&bytes, Region::Data, Some(d.handle.offset));
}

/// The root handle points at a sound block of another type.
#[test]
fn wrong_block_type() {
    let (mut bytes, l) = sample();
    let d = l.nth(BlockType::Data, 0);
    rewrite_trailer(&mut bytes, |t| t.root_index = d.handle);
    let e = open_fails(
        &bytes,
        ErrorKind::Corruption,
        Some((d.handle.offset, Region::RootIndex)),
    );
    assert!(e.to_string().contains("DATA where ROOT_INDEX"), "{e}");
    verify_reports(&bytes, Region::RootIndex, Some(d.handle.offset));

    // A leaf entry pointing at a bloom chunk instead of a data block.
    let (mut bytes, l) = sample();
    let leaf = l.nth(BlockType::LeafIndex, 0);
    let chunk = l.nth(BlockType::BloomChunk, 0).handle;
    let raw = edit_index_entries(&leaf.raw, |i, _, e| {
        if i == 0 {
            e.handle = chunk;
        }
    });
    reseal_in_place(&mut bytes, leaf, &raw);
    let e = forward_fails(&bytes, (chunk.offset, Region::Data));
    assert!(e.to_string().contains("BLOOM_CHUNK where DATA"), "{e}");
    verify_reports(&bytes, Region::Data, Some(chunk.offset));
}

#[test]
fn data_block_checksum_mismatch() {
    let (bytes, l) = sample();
    let d = l.nth(BlockType::Data, 2);
    let other = l.nth(BlockType::Data, 0);
    let env = d.envelope_at();
    // payload, compression byte, raw length, stored checksum
    for at in [d.handle.offset + 5, env + 1, env + 3, env + 7] {
        let mut bytes = bytes.clone();
        flip_bit(&mut bytes, at, 0);
        let loc = (d.handle.offset, Region::Data);
        let e = scans_fail(&bytes, loc);
        assert!(matches!(e, Error::ChecksumMismatch { .. }), "{e}");
        let r = open(&bytes).unwrap();
        let (row, q) = first_column(d);
        assert_error(
            &r.get_column(&row, &q).unwrap_err(),
            ErrorKind::Corruption,
            Some(loc),
        );
        // Damage stays local: a column in another block still reads.
        let (row, q) = first_column(other);
        assert!(!r.get_column(&row, &q).unwrap().is_empty());
        verify_reports(&bytes, Region::Data, Some(d.handle.offset));
    }
}

/// A sound block copied to another offset fails its checksum (the offset is mixed in).
#[test]
fn misplaced_block() {
    let (mut bytes, l) = sample();
    let data = l.of_type(BlockType::Data);
    let (a, b) = data
        .iter()
        .flat_map(|a| data.iter().map(move |b| (*a, *b)))
        .find(|(a, b)| {
            a.handle.offset != b.handle.offset && a.handle.stored_len == b.handle.stored_len
        })
        .expect("two data blocks of equal size");
    let src = bytes[a.handle.offset as usize..a.handle.end() as usize].to_vec();
    put(&mut bytes, b.handle.offset, &src);
    let loc = (b.handle.offset, Region::Data);
    let r = open(&bytes).unwrap();
    let e = scan_forward(&r).unwrap_err();
    assert!(matches!(e, Error::ChecksumMismatch { .. }), "{e}");
    assert_error(&e, ErrorKind::Corruption, Some(loc));
    verify_reports(&bytes, Region::Data, Some(b.handle.offset));
}

#[test]
fn index_block_checksum_mismatch() {
    let (bytes, l) = sample();
    let leaf = l.nth(BlockType::LeafIndex, 1);
    let mut b = bytes.clone();
    flip_bit(&mut b, leaf.handle.offset + 3, 4);
    let e = scans_fail(&b, (leaf.handle.offset, Region::LeafIndex));
    assert!(matches!(e, Error::ChecksumMismatch { .. }), "{e}");
    verify_reports(&b, Region::LeafIndex, Some(leaf.handle.offset));

    let root = l.nth(BlockType::RootIndex, 0);
    let mut b = bytes.clone();
    flip_bit(&mut b, root.handle.offset + 1, 7);
    let e = open_fails(
        &b,
        ErrorKind::Corruption,
        Some((root.handle.offset, Region::RootIndex)),
    );
    assert!(matches!(e, Error::ChecksumMismatch { .. }), "{e}");
    verify_reports(&b, Region::RootIndex, Some(root.handle.offset));
}

#[test]
fn file_info_checksum_mismatch() {
    let (mut bytes, l) = sample();
    let fi = l.nth(BlockType::FileInfo, 0);
    flip_bit(&mut bytes, fi.handle.offset + 40, 2);
    let e = open_fails(
        &bytes,
        ErrorKind::Corruption,
        Some((fi.handle.offset, Region::FileInfo)),
    );
    assert!(matches!(e, Error::ChecksumMismatch { .. }), "{e}");
    verify_reports(&bytes, Region::FileInfo, Some(fi.handle.offset));
}

#[test]
fn bloom_meta_checksum_mismatch() {
    let (mut bytes, l) = sample();
    let m = l.nth(BlockType::BloomMeta, 0);
    flip_bit(&mut bytes, m.handle.offset + 30, 5);
    let e = open_fails(
        &bytes,
        ErrorKind::Corruption,
        Some((m.handle.offset, Region::BloomMeta)),
    );
    assert!(matches!(e, Error::ChecksumMismatch { .. }), "{e}");
    verify_reports(&bytes, Region::BloomMeta, Some(m.handle.offset));
}

#[test]
fn bloom_chunk_checksum_mismatch() {
    let (mut bytes, l) = sample();
    let meta = l.bloom.clone().unwrap();
    let chunk = &meta.chunks[1];
    flip_bit(&mut bytes, chunk.handle.offset + 10, 3);
    let r = open(&bytes).unwrap();
    let loc = Some((chunk.handle.offset, Region::BloomChunk));
    // ROW bloom: the chunk's bloom keys are rows.
    let e = r.may_contain_row(&chunk.first_key).unwrap_err();
    assert!(matches!(e, Error::ChecksumMismatch { .. }), "{e}");
    assert_error(&e, ErrorKind::Corruption, loc);
    let e = r.get_column(&chunk.last_key, b"q0").unwrap_err();
    assert_error(&e, ErrorKind::Corruption, loc);
    // Rows of other chunks, and scans (which do not consult the filter), are unaffected.
    assert!(r.may_contain_row(&meta.chunks[0].first_key).unwrap());
    assert_eq!(
        scan_forward(&r).unwrap().len(),
        original_rows(&sample().0).len()
    );
    verify_reports(&bytes, Region::BloomChunk, Some(chunk.handle.offset));
}

#[test]
fn index_pointing_past_eof() {
    let (bytes, l) = sample();
    let root = l.nth(BlockType::RootIndex, 0);
    let bogus = l.file_len + 1000;
    let raw = edit_index_entries(&root.raw, |i, _, e| {
        if i == 0 {
            e.handle.offset = bogus;
        }
    });
    let bytes = rebuild_tail(&bytes, Some(&raw), None);
    let e = scans_fail(&bytes, (bogus, Region::LeafIndex));
    assert!(e.to_string().contains("past the end"), "{e}");
    verify_reports(&bytes, Region::LeafIndex, Some(bogus));
}

/// An index entry whose length is near `u64::MAX` must not overflow.
#[test]
fn index_handle_length_overflow() {
    for len in [u64::MAX, u64::MAX - 10] {
        let (bytes, l) = sample();
        let root = l.nth(BlockType::RootIndex, 0);
        let raw = edit_index_entries(&root.raw, |i, _, e| {
            if i == 0 {
                e.handle.stored_len = len;
            }
        });
        let bytes = rebuild_tail(&bytes, Some(&raw), None);
        let off = l.nth(BlockType::LeafIndex, 0).handle.offset;
        scans_fail(&bytes, (off, Region::LeafIndex));
        verify_reports(&bytes, Region::LeafIndex, Some(off));
    }
}

#[test]
fn lying_raw_length() {
    let (bytes, l) = sample();
    for c in [CompressionType::None, CompressionType::Lz4] {
        let d = l.data_with(c);
        let raw_len = d.env.raw_len;
        for lie in [raw_len + 1, raw_len - 1, 0, raw_len * 2, u32::MAX] {
            let mut b = bytes.clone();
            let stored = seal_fields(
                &stored_payload(&bytes, d),
                BlockType::Data as u8,
                c as u8,
                lie,
                d.handle.offset,
            );
            put(&mut b, d.handle.offset, &stored);
            let e = scans_fail(&b, (d.handle.offset, Region::Data));
            assert!(!matches!(e, Error::ChecksumMismatch { .. }), "{e}");
            verify_reports(&b, Region::Data, Some(d.handle.offset));
        }
    }
}

#[test]
fn lying_lz4_payload() {
    let (bytes, l) = sample();
    let d = l.data_with(CompressionType::Lz4);
    let len = d.handle.stored_len as usize;
    // Garbage; and a match whose offset reaches before the start of the output.
    let mut back_ref = vec![0x10, b'x', 0xff, 0xff];
    back_ref.resize(len, 0);
    for payload in [vec![0xff; len], back_ref] {
        let mut b = bytes.clone();
        let stored = seal_fields(
            &payload,
            BlockType::Data as u8,
            CompressionType::Lz4 as u8,
            d.env.raw_len,
            d.handle.offset,
        );
        put(&mut b, d.handle.offset, &stored);
        let e = scans_fail(&b, (d.handle.offset, Region::Data));
        assert!(e.to_string().contains("LZ4"), "{e}");
        verify_reports(&b, Region::Data, Some(d.handle.offset));
    }
}

// ---------------------------------------------------------------------------------------------
// Keyed block payloads (re-sealed with valid checksums)

/// Apply `edit` to the raw payload of the fullest uncompressed data block, re-seal it, and
/// expect both scans and verify to report that block.
#[track_caller]
fn damage_raw_data_block(edit: impl FnOnce(&mut Vec<u8>, &common::RawBlock)) -> Error {
    let (mut bytes, l) = sample();
    let sound = bytes.clone();
    let d = l.richest_raw_data();
    let mut raw = d.raw.clone();
    let parsed = parse_block(&raw);
    assert!(parsed.restarts.len() >= 3 && parsed.entries.len() >= 5);
    edit(&mut raw, &parsed);
    reseal_in_place(&mut bytes, d, &raw);
    let loc = (d.handle.offset, Region::Data);
    let e = scans_fail(&bytes, loc);
    // A lookup fails at the block, or — when it never decodes the damaged entry — answers
    // what the sound file answers.
    for (row, q) in block_entries(&d.raw).iter().map(|(k, _, _)| {
        let k = KeyRef::parse(k).unwrap();
        (k.row.to_vec(), k.qualifier.to_vec())
    }) {
        match open(&bytes).unwrap().get_column(&row, &q) {
            Ok(got) => assert_eq!(got, open(&sound).unwrap().get_column(&row, &q).unwrap()),
            Err(e) => assert_error(&e, ErrorKind::Corruption, Some(loc)),
        }
    }
    verify_reports(&bytes, Region::Data, Some(d.handle.offset));
    e
}

/// An entry that is not a restart point but shares less than it has in common with the entry
/// before it — here 8 bytes of a key whose row (7 bytes after a 2-byte length) it shares
/// whole — decodes to the same key, so scans read the file as before; but a Get stops a
/// row's cells where the next entry's `shared` says the row changed (SPEC.md §4.3), so the
/// writer never writes one and the verifier reports it.
#[test]
fn entry_sharing_less_than_it_has_in_common() {
    let (mut bytes, l) = sample();
    let sound = bytes.clone();
    let d = l.richest_raw_data();
    let mut raw = d.raw.clone();
    let parsed = parse_block(&raw);
    let (i, e) = parsed
        .entries
        .iter()
        .enumerate()
        .skip(1)
        .find(|(i, e)| {
            let prev = KeyRef::parse(&parsed.entries[i - 1].key).unwrap();
            let k = KeyRef::parse(&e.key).unwrap();
            !parsed.restarts.contains(&(e.offset as u32)) && k.row == prev.row && e.tags_len == 0
        })
        .expect("an entry inside a restart interval in its row");
    let row_len = KeyRef::parse(&e.key).unwrap().row.len();
    let shared = row_len + 1;
    let grow = e.shared as usize - shared;
    assert!(e.value_len as usize > grow);
    // The same key with fewer bytes shared, and a value shorter by as many bytes: the entry
    // keeps its length, and so does the block.
    let end = e.value_at + e.value_len as usize;
    let mut entry = Vec::new();
    for v in [
        shared,
        e.unshared as usize + grow,
        e.value_len as usize - grow,
        0,
    ] {
        cellar_format::coding::put_varint32(&mut entry, v as u32);
    }
    entry.extend_from_slice(&e.key[shared..]);
    entry.extend_from_slice(&raw[e.value_at..end - grow]);
    assert_eq!(entry.len(), end - e.offset, "the varints kept their sizes");
    raw[e.offset..end].copy_from_slice(&entry);
    assert_eq!(parse_block(&raw).entries[i].key, e.key);
    reseal_in_place(&mut bytes, d, &raw);
    // Scans read every cell, the one whose value was cut short included.
    let (got, want) = (original_rows(&bytes), original_rows(&sound));
    assert_eq!(got.len(), want.len());
    assert_eq!(got.iter().zip(&want).filter(|(a, b)| a != b).count(), 1);
    let report = verify_reports(&bytes, Region::Data, Some(d.handle.offset));
    assert!(
        report.problems.iter().any(|p| p
            .what
            .contains(&format!("entry at {} shares less", e.offset))),
        "{:#?}",
        report.problems
    );
    assert!(verify(&sound, "sound").unwrap().is_clean());
}

#[test]
fn lying_restart_count() {
    for lie in [u32::MAX, 1 << 20, 0] {
        damage_raw_data_block(|raw, p| {
            raw[p.count_at..].copy_from_slice(&lie.to_le_bytes());
        });
    }
    // One more or one fewer than stored: the restart array is read from the wrong place.
    for delta in [1i64, -1] {
        damage_raw_data_block(|raw, p| {
            let n = (p.restarts.len() as i64 + delta) as u32;
            raw[p.count_at..].copy_from_slice(&n.to_le_bytes());
        });
    }
}

#[test]
fn restart_point_out_of_range() {
    let e = damage_raw_data_block(|raw, p| {
        let at = p.restarts_at + 4;
        raw[at..at + 4].copy_from_slice(&(p.restarts_at as u32).to_le_bytes());
    });
    assert!(e.to_string().contains("restart point"), "{e}");
    // Not starting at 0; and out of order.
    damage_raw_data_block(|raw, p| {
        raw[p.restarts_at..p.restarts_at + 4].copy_from_slice(&1u32.to_le_bytes());
    });
    damage_raw_data_block(|raw, p| {
        let at = p.restarts_at + 8;
        raw[at..at + 4].copy_from_slice(&p.restarts[1].to_le_bytes());
    });
}

#[test]
fn entry_shared_longer_than_previous_key() {
    // A non-restart entry sharing more than the whole previous key.
    let e = damage_raw_data_block(|raw, p| {
        let e = &p.entries[1];
        assert!(e.shared > 0 && e.shared < 128 && e.key.len() < 127);
        raw[e.field_at[0]] = 127;
    });
    assert!(e.to_string().contains("shares 127 bytes"), "{e}");
    // The first entry of the block shares with nothing.
    damage_raw_data_block(|raw, p| {
        assert_eq!(p.entries[0].shared, 0);
        raw[p.entries[0].field_at[0]] = 1;
    });
}

#[test]
fn entry_value_length_past_block() {
    let e = damage_raw_data_block(|raw, p| {
        let e = p.entries.last().unwrap();
        assert!(e.value_len < 128 && p.restarts_at - e.value_at < 127);
        raw[e.field_at[2]] = 127;
    });
    assert!(e.to_string().contains("entry value truncated"), "{e}");
    // Tags and key deltas running past the entries are caught the same way.
    damage_raw_data_block(|raw, p| {
        let e = p.entries.last().unwrap();
        raw[e.field_at[3]] = 127;
    });
    damage_raw_data_block(|raw, p| {
        let e = p.entries.last().unwrap();
        assert!(e.unshared < 128);
        raw[e.field_at[1]] = 127;
    });
}

#[test]
fn malformed_key_in_block() {
    // Row length past the key.
    let e = damage_raw_data_block(|raw, p| {
        let e = &p.entries[0];
        raw[e.key_at..e.key_at + 2].copy_from_slice(&u16::MAX.to_le_bytes());
    });
    assert!(e.to_string().contains("row length"), "{e}");
    // Family length past the key.
    damage_raw_data_block(|raw, p| {
        let e = &p.entries[0];
        let row_len = u16::from_le_bytes([raw[e.key_at], raw[e.key_at + 1]]) as usize;
        raw[e.key_at + 2 + row_len] = 0xff;
    });
}

/// A key that parses but is not a stored cell (type code 9): readers pass it through, the
/// verifier reports it.
#[test]
fn invalid_cell_type_in_block() {
    let (mut bytes, l) = sample();
    let d = l.data_with(CompressionType::None);
    let mut raw = d.raw.clone();
    let p = parse_block(&raw);
    let e = &p.entries[0];
    let type_at = e.key_at + e.unshared as usize - 9;
    assert_eq!(raw[type_at], CellType::Put as u8);
    raw[type_at] = 9;
    reseal_in_place(&mut bytes, d, &raw);
    let r = open(&bytes).unwrap();
    let rows = scan_forward(&r).unwrap();
    assert!(rows.iter().any(|(k, _, _)| k[k.len() - 9] == 9));
    let rep = verify_reports(&bytes, Region::Data, Some(d.handle.offset));
    assert!(
        rep.problems.iter().any(|p| p.what.contains("type code 9")),
        "{:#?}",
        rep.problems
    );
}

// ---------------------------------------------------------------------------------------------
// File info and bloom meta

fn info_entries(l: &Layout) -> Vec<(String, Vec<u8>)> {
    FileInfo::decode_entries(&l.nth(BlockType::FileInfo, 0).raw)
        .unwrap()
        .into_iter()
        .collect()
}

#[test]
fn file_info_missing_field() {
    for name in [
        "entries",
        "family",
        "bloom_type",
        "format_version",
        "count.delete",
    ] {
        let (bytes, l) = sample();
        let mut entries = info_entries(&l);
        entries.retain(|(k, _)| k != name);
        let bytes = rebuild_tail(&bytes, None, Some(&encode_info_entries(&entries)));
        let fi = l.nth(BlockType::FileInfo, 0).handle.offset;
        let e = open_fails(&bytes, ErrorKind::Corruption, Some((fi, Region::FileInfo)));
        assert!(e.to_string().contains(name), "{name}: {e}");
        verify_reports(&bytes, Region::FileInfo, Some(fi));
    }
}

#[test]
fn file_info_out_of_order_names() {
    let (bytes, l) = sample();
    let fi = l.nth(BlockType::FileInfo, 0).handle.offset;
    let sound = info_entries(&l);
    let mut swapped = sound.clone();
    swapped.swap(0, 1);
    let mut repeated = sound.clone();
    repeated.insert(1, sound[0].clone());
    for entries in [swapped, repeated] {
        let b = rebuild_tail(&bytes, None, Some(&encode_info_entries(&entries)));
        let e = open_fails(&b, ErrorKind::Corruption, Some((fi, Region::FileInfo)));
        assert!(e.to_string().contains("out of order or repeated"), "{e}");
        verify_reports(&b, Region::FileInfo, Some(fi));
    }
}

#[test]
fn file_info_malformed_entries() {
    let (bytes, l) = sample();
    let fi = l.nth(BlockType::FileInfo, 0).handle.offset;
    let sound = encode_info_entries(&info_entries(&l));
    let mut count_lie = sound.clone();
    count_lie[0] += 1;
    let mut count_huge = sound.clone();
    count_huge[..4].copy_from_slice(&u32::MAX.to_le_bytes());
    let mut trailing = sound.clone();
    trailing.push(0);
    let mut short_int = info_entries(&l);
    short_int
        .iter_mut()
        .find(|(k, _)| k == "entries")
        .unwrap()
        .1
        .pop();
    let mut version = info_entries(&l);
    version
        .iter_mut()
        .find(|(k, _)| k == "format_version")
        .unwrap()
        .1[0] += 1;
    for payload in [
        count_lie,
        count_huge,
        trailing,
        encode_info_entries(&short_int),
        encode_info_entries(&version),
        Vec::new(),
    ] {
        let b = rebuild_tail(&bytes, None, Some(&payload));
        open_fails(&b, ErrorKind::Corruption, Some((fi, Region::FileInfo)));
        verify_reports(&b, Region::FileInfo, Some(fi));
    }
}

/// The file info lies about how many cells there are: a reader believes it, `verify` does not.
#[test]
fn file_info_entry_count_lie() {
    let (bytes, l) = sample();
    let rows = original_rows(&bytes);
    let mut info = FileInfo::decode(&l.nth(BlockType::FileInfo, 0).raw).unwrap();
    info.entries += 1;
    let b = rebuild_tail(&bytes, None, Some(&info.encode()));
    reads_like(&b, &rows);
    assert_eq!(open(&b).unwrap().info().entries, rows.len() as u64 + 1);
    let fi = l.nth(BlockType::FileInfo, 0).handle.offset;
    let rep = verify_reports(&b, Region::FileInfo, Some(fi));
    assert_eq!(rep.problems.len(), 1, "{:#?}", rep.problems);
    assert!(
        rep.problems[0].what.contains("entries says"),
        "{:#?}",
        rep.problems
    );
}

#[test]
fn bloom_meta_chunk_count_lie() {
    let (bytes, l) = sample();
    let m = l.nth(BlockType::BloomMeta, 0);
    let count = u32::from_le_bytes(m.raw[20..24].try_into().unwrap());
    assert_eq!(count as usize, l.bloom.as_ref().unwrap().chunks.len());
    for lie in [count + 1, count - 1, 0, u32::MAX] {
        let mut b = bytes.clone();
        let mut raw = m.raw.clone();
        raw[20..24].copy_from_slice(&lie.to_le_bytes());
        reseal_in_place(&mut b, m, &raw);
        open_fails(
            &b,
            ErrorKind::Corruption,
            Some((m.handle.offset, Region::BloomMeta)),
        );
        verify_reports(&b, Region::BloomMeta, Some(m.handle.offset));
    }
}

#[test]
fn bloom_meta_bad_parameters() {
    let (bytes, l) = sample();
    let m = l.nth(BlockType::BloomMeta, 0);
    // filter kind, hash kind, bloom type, probe count (0 and 31)
    for (at, v) in [(0usize, 2u8), (1, 9), (2, 0), (2, 77), (3, 0), (3, 31)] {
        let mut b = bytes.clone();
        let mut raw = m.raw.clone();
        raw[at] = v;
        reseal_in_place(&mut b, m, &raw);
        open_fails(
            &b,
            ErrorKind::Corruption,
            Some((m.handle.offset, Region::BloomMeta)),
        );
        verify_reports(&b, Region::BloomMeta, Some(m.handle.offset));
    }
}

/// A chunk whose bits were zeroed (and re-sealed): the reader trusts it and answers "certainly
/// not" for rows the file holds — only `verify` can tell.
#[test]
fn bloom_false_negative() {
    let (mut bytes, l) = sample();
    let chunk = l.nth(BlockType::BloomChunk, 0);
    let row = l.bloom.as_ref().unwrap().chunks[0].first_key.clone();
    reseal_in_place(&mut bytes, chunk, &vec![0; chunk.raw.len()]);
    let r = open(&bytes).unwrap();
    assert!(!r.may_contain_row(&row).unwrap());
    assert!(r.get_column(&row, b"q0").unwrap().is_empty());
    let rep = verify_reports(&bytes, Region::BloomChunk, Some(chunk.handle.offset));
    assert!(
        rep.problems
            .iter()
            .all(|p| p.what.contains("false negative")),
        "{:#?}",
        rep.problems
    );
}

// ---------------------------------------------------------------------------------------------
// Index entries that lie (re-sealed)

#[test]
fn index_first_key_lie() {
    let (mut bytes, l) = sample();
    let rows = original_rows(&bytes);
    let leaf = l.nth(BlockType::LeafIndex, 0);
    let child = l.nth(BlockType::Data, 1).handle.offset;
    let raw = edit_index_entries(&leaf.raw, |i, _, e| {
        if i == 1 {
            *e.first_key.last_mut().unwrap() ^= 1; // the sequence number
        }
    });
    reseal_in_place(&mut bytes, leaf, &raw);
    reads_like(&bytes, &rows);
    let rep = verify_reports(&bytes, Region::LeafIndex, Some(leaf.handle.offset));
    assert_eq!(rep.problems.len(), 1, "{:#?}", rep.problems);
    assert!(
        rep.problems[0]
            .what
            .contains(&format!("block at {child}: first key")),
        "{:#?}",
        rep.problems
    );
}

#[test]
fn index_time_range_lie() {
    let (mut bytes, l) = sample();
    let rows = original_rows(&bytes);
    let leaf = l.nth(BlockType::LeafIndex, 1);
    let raw = edit_index_entries(&leaf.raw, |i, _, e| {
        if i == 2 {
            e.min_ts -= 1;
        }
    });
    reseal_in_place(&mut bytes, leaf, &raw);
    reads_like(&bytes, &rows);
    let rep = verify_reports(&bytes, Region::LeafIndex, Some(leaf.handle.offset));
    assert_eq!(rep.problems.len(), 1, "{:#?}", rep.problems);
    assert!(
        rep.problems[0].what.contains("time range"),
        "{:#?}",
        rep.problems
    );
}

/// An inverted time range does not decode: readers reject it.
#[test]
fn index_time_range_inverted() {
    let (mut bytes, l) = sample();
    let leaf = l.nth(BlockType::LeafIndex, 0);
    let raw = edit_index_entries(&leaf.raw, |i, _, e| {
        if i == 0 {
            e.max_ts = e.min_ts - 1;
        }
    });
    reseal_in_place(&mut bytes, leaf, &raw);
    let e = forward_fails(&bytes, (leaf.handle.offset, Region::LeafIndex));
    assert!(e.to_string().contains("inverted"), "{e}");
    verify_reports(&bytes, Region::LeafIndex, Some(leaf.handle.offset));
}

/// A separator that sorts before the last key of its block: lookups of the block's tail miss.
#[test]
fn index_separator_too_small() {
    let (mut bytes, l) = sample();
    let leaf = l.nth(BlockType::LeafIndex, 0);
    let last_key = block_entries(&l.nth(BlockType::Data, 0).raw)
        .pop()
        .unwrap()
        .0;
    let raw = edit_index_entries(&leaf.raw, |i, sep, _| {
        if i == 0 {
            // The separator is the block's last key; a newer timestamp sorts before it.
            assert_eq!(*sep, last_key);
            let ts_at = sep.len() - 17;
            assert!(sep[ts_at] < 0xff);
            sep[ts_at] += 1;
        }
    });
    reseal_in_place(&mut bytes, leaf, &raw);
    assert!(open(&bytes).is_ok());
    let rep = verify_reports(&bytes, Region::LeafIndex, Some(leaf.handle.offset));
    assert!(
        rep.problems
            .iter()
            .any(|p| p.what.contains("sorts before the block's last key")),
        "{:#?}",
        rep.problems
    );
}

// ---------------------------------------------------------------------------------------------
// Crafted files: every checksum and every index/file-info field true, the blocks wrong

fn in_order_blocks() -> Vec<CraftBlock> {
    let block = |rows: std::ops::Range<u32>| -> CraftBlock {
        rows.map(|r| (put_key(&format!("row{r:02}"), "q", 10), vec![b'v'; 3]))
            .collect()
    };
    vec![block(10..16), block(16..20), block(20..25)]
}

/// The crafting helper itself produces sound files: any problem in the tests below is the
/// one they plant.
#[test]
fn crafted_file_in_order_verifies_clean() {
    let bytes = craft_file(&in_order_blocks(), &[]);
    let rep = verify(bytes.as_slice(), "crafted").unwrap();
    assert!(rep.is_clean(), "{:#?}", rep.problems);
    assert_eq!(rep.stats.cells, 15);
    assert_eq!(original_rows(&bytes).len(), 15);
}

#[test]
fn out_of_order_keys_across_blocks() {
    let blocks = out_of_order_blocks();
    let bytes = craft_file(&blocks, &[]);
    let l = Layout::of(&bytes);
    let second = l.nth(BlockType::Data, 1).handle.offset;
    // A reader does not compare keys across blocks: a scan returns them as stored (or fails).
    let stored: Vec<Vec<u8>> = blocks.iter().flatten().map(|(k, _)| k.encode()).collect();
    match scan_forward(&open(&bytes).unwrap()) {
        Ok(rows) => assert_eq!(rows.into_iter().map(|r| r.0).collect::<Vec<_>>(), stored),
        Err(e) => assert_error(&e, ErrorKind::Corruption, Some((second, Region::Data))),
    }
    let rep = verify_reports(&bytes, Region::Data, Some(second));
    assert_eq!(rep.problems.len(), 1, "{:#?}", rep.problems);
    assert!(
        rep.problems[0].what.contains("does not sort after"),
        "{:#?}",
        rep.problems
    );
}

#[test]
fn out_of_order_keys_within_block() {
    let mut blocks = in_order_blocks();
    blocks[1].swap(1, 2);
    let bytes = craft_file(&blocks, &[]);
    let second = Layout::of(&bytes).nth(BlockType::Data, 1).handle.offset;
    assert!(open(&bytes).is_ok());
    let rep = verify_reports(&bytes, Region::Data, Some(second));
    assert!(rep
        .problems
        .iter()
        .any(|p| p.what.contains("does not sort after")));
}

#[test]
fn gap_between_blocks() {
    let blocks = in_order_blocks();
    let sound = craft_file(&blocks, &[]);
    let end_of_first = Layout::of(&sound).nth(BlockType::Data, 0).handle.end();
    for (padding, gap_at) in [(vec![0, 16], end_of_first), (vec![8], 0)] {
        let bytes = craft_file(&blocks, &padding);
        // Readers never look at bytes no block owns.
        assert_eq!(original_rows(&bytes), original_rows(&sound));
        let rep = verify_reports(&bytes, Region::File, Some(gap_at));
        assert_eq!(rep.problems.len(), 1, "{:#?}", rep.problems);
        assert!(
            rep.problems[0].what.contains("belong to no block"),
            "{:#?}",
            rep.problems
        );
    }
}

/// Block B lies inside a value of block A: each block is sound where its handle says it is,
/// but the two overlap.
#[test]
fn overlapping_blocks() {
    let b_cells: CraftBlock = vec![(put_key("row30", "q", 10), b"inner".to_vec())];
    let b_raw = raw_data_block(&b_cells);
    let b_len = b_raw.len() + 10;
    let mut a_cells: CraftBlock = vec![
        (put_key("row10", "q", 10), b"outer".to_vec()),
        (put_key("row20", "q", 10), vec![0; b_len]),
    ];
    let b_at = parse_block(&raw_data_block(&a_cells)).entries[1].value_at as u64;
    a_cells[1].1 = seal(&b_raw, BlockType::Data, CompressionType::None, b_at);
    let a_raw = raw_data_block(&a_cells);
    let a = seal(&a_raw, BlockType::Data, CompressionType::None, 0);
    let placed = [
        Placed {
            handle: BlockHandle {
                offset: 0,
                stored_len: a_raw.len() as u64,
            },
            raw_len: a_raw.len(),
            cells: a_cells,
        },
        Placed {
            handle: BlockHandle {
                offset: b_at,
                stored_len: b_raw.len() as u64,
            },
            raw_len: b_raw.len(),
            cells: b_cells,
        },
    ];
    let bytes = finish_crafted(a, &placed);
    let r = open(&bytes).unwrap();
    assert_eq!(scan_forward(&r).unwrap().len(), 3);
    assert_eq!(r.get_column(b"row30", b"q").unwrap()[0].1, b"inner");
    let rep = verify_reports(&bytes, Region::Data, Some(b_at));
    assert_eq!(rep.problems.len(), 1, "{:#?}", rep.problems);
    assert!(
        rep.problems[0].what.contains("overlaps"),
        "{:#?}",
        rep.problems
    );
}

/// Two index entries naming the same block: the index revisits a block it already passed
/// (SPEC.md §5's layout rule), and the block the second entry should name is owned by nobody.
/// A scan stops with corruption instead of returning the block's cells twice.
#[test]
fn duplicate_index_entry() {
    let (mut bytes, l) = sample();
    let leaf = l.nth(BlockType::LeafIndex, 0);
    let entries = block_entries(&leaf.raw);
    // Entry 2 repeats entry 1's value; separators kept, so the index itself stays sorted.
    let mut dup = entries.clone();
    dup[2].1 = entries[1].1.clone();
    let raw = build_block(&dup, 1);
    reseal_in_place(&mut bytes, leaf, &raw);
    let third = l.nth(BlockType::Data, 2);
    let rep = verify_reports(&bytes, Region::LeafIndex, Some(leaf.handle.offset));
    assert!(rep
        .problems
        .iter()
        .any(|p| p.what.contains("not past the previous block of its level")));
    let e = scan_forward(&open(&bytes).unwrap()).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Corruption, "{e}");
    let rep = verify_reports(&bytes, Region::File, Some(third.handle.offset));
    assert!(rep
        .problems
        .iter()
        .any(|p| p.what.contains("belong to no block")));
}
