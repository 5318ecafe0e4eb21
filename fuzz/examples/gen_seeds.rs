//! Writes the checked-in seed corpus under `fuzz/seeds/<target>/`.
//!
//! Run from `fuzz/`: `cargo run --example gen_seeds`. Deterministic (fixed creation time, fixed
//! pseudo-random stream), so regenerating only changes seeds when the format changes. Seeds are
//! kept small: libFuzzer's default `-max_len` follows the largest seed, and small inputs mutate
//! faster.

use std::fs;
use std::path::Path;

use cellar_format::block::{seal_block, BlockBuilder, DataBlockEncoding};
use cellar_format::bloom::{BloomConfig, BloomMeta, BloomType, ChunkMeta};
use cellar_format::cell::{CellKey, CellType};
use cellar_format::index::IndexValue;
use cellar_format::{BlockHandle, BlockType, CompressionType, HFileWriter, WriterOptions};
use cellar_format::{Trailer, TRAILER_LEN};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("seeds");
    let put = |target: &str, name: &str, bytes: &[u8]| -> std::io::Result<()> {
        let dir = root.join(target);
        fs::create_dir_all(&dir)?;
        fs::write(dir.join(name), bytes)
    };

    // The engine's decoders: a WAL record, a two-segment log, a version edit, a write batch.
    {
        use cellar::batch::{encode as encode_batch, Mutation};
        use cellar::manifest::VersionEdit;
        use cellar::wal::record::{encode_link, encode_seal, encode_wal as encode_record};
        let batch = encode_batch(&[
            Mutation {
                family: 1,
                row: b"row1".to_vec(),
                qualifier: b"q".to_vec(),
                timestamp: 7,
                cell_type: cellar_format::CellType::Put,
                value: b"v".to_vec(),
                tags: Vec::new(),
            },
            Mutation {
                family: 2,
                row: b"row2".to_vec(),
                qualifier: Vec::new(),
                timestamp: 9,
                cell_type: cellar_format::CellType::DeleteFamily,
                value: Vec::new(),
                tags: Vec::new(),
            },
        ]);
        put("write_batch", "two_mutations", &batch)?;
        let mut rec = Vec::new();
        encode_record(2, 5, 4096, &batch, &mut rec);
        put("wal_record", "batch_record", &rec)?;
        let mut seal = Vec::new();
        encode_seal(2, 4096, &mut seal);
        put("wal_record", "seal", &seal)?;
        let mut link = Vec::new();
        encode_link(2, 1, 4096, &mut link);
        put("wal_record", "link", &link)?;
        // The legacy layout and batch version, which replay still reads (SPEC.md §16.2.1).
        let batch_v1 = cellar::batch::encode_v1(&[Mutation {
            family: 1,
            row: b"row1".to_vec(),
            qualifier: b"q".to_vec(),
            timestamp: 7,
            cell_type: cellar_format::CellType::Put,
            value: b"v".to_vec(),
            tags: b"\x01\x00\x01t".to_vec(),
        }]);
        put("write_batch", "v1_tagged", &batch_v1)?;
        let mut rec_v1 = Vec::new();
        cellar::wal::record::encode_wal_v1(2, 5, 4096, &batch_v1, &mut rec_v1);
        put("wal_record", "batch_record_v1", &rec_v1)?;
        // wal_replay takes its first byte as segment 1's length; the rest is segment 2.
        // Segment 1: an unsynced record, a record written after an fdatasync covered the first,
        // and the seal of a clean close; segment 2: its LINK, then a record.
        let mut seg1 = Vec::new();
        encode_record(1, 1, 0, b"a", &mut seg1);
        let synced = seg1.len() as u64;
        encode_record(1, 2, synced, &batch, &mut seg1);
        let synced = seg1.len() as u64;
        encode_seal(1, synced, &mut seg1);
        let mut log = vec![u8::try_from(seg1.len())?];
        log.extend_from_slice(&seg1);
        // Segment 2 opens with its LINK to segment 1's end.
        let mut seg2 = Vec::new();
        encode_link(2, 1, seg1.len() as u64, &mut seg2);
        encode_record(2, 3, 0, b"b", &mut seg2);
        log.extend_from_slice(&seg2);
        put("wal_replay", "two_segments", &log)?;
        // One segment: a record, a torn unsynced one (a lost sector), an intact later one.
        let mut seg = Vec::new();
        encode_record(2, 1, 0, b"a", &mut seg);
        let torn_at = seg.len();
        encode_record(2, 2, 0, &[b'x'; 64], &mut seg);
        seg[torn_at + 40..torn_at + 60].fill(0);
        encode_record(2, 3, 0, b"c", &mut seg);
        let mut log = vec![0u8];
        log.extend_from_slice(&seg);
        put("wal_replay", "torn_then_unsynced", &log)?;
        let edit = VersionEdit {
            next_file_number: Some(9),
            last_seq: Some(42),
            log_number: Some(3),
            flushed_seq: vec![(1, 40)],
            create_namespaces: vec!["ns".into()],
            ..VersionEdit::default()
        };
        put("manifest_edit", "counters_and_namespace", &edit.encode())?;
    }

    // Whole files, in the shapes the reader distinguishes.
    let small = file(8, 4096, 4096, CompressionType::None, BloomType::Row, false)?;
    let multi = file(12, 64, 256, CompressionType::Lz4, BloomType::RowCol, false)?;
    let markers = file(10, 128, 4096, CompressionType::None, BloomType::None, true)?;
    let prefix = file(
        12,
        200,
        256,
        CompressionType::Lz4,
        BloomType::RowPrefix(5),
        true,
    )?;
    put("hfile_open_scan", "row_bloom", &small)?;
    put("hfile_open_scan", "multilevel_lz4_rowcol", &multi)?;
    put("hfile_open_scan", "markers_no_bloom", &markers)?;
    put("hfile_open_scan", "rowprefix_lz4", &prefix)?;
    put(
        "hfile_open_scan",
        "empty",
        &file(0, 4096, 4096, CompressionType::None, BloomType::Row, false)?,
    )?;

    // Raw keyed blocks.
    let mut b = BlockBuilder::new(4);
    for i in 0..10u64 {
        let k = CellKey::new(
            row(i),
            "cf",
            format!("q{}", i % 3),
            1000 - i,
            CellType::Put,
            i,
        );
        b.add(
            &k.encode(),
            format!("value{i}").as_bytes(),
            if i % 4 == 0 { b"tag" } else { b"" },
        );
    }
    put("data_block", "ten_cells_restart4", &b.finish())?;
    // The same cells as ANCHORED_DIFF entries (every one against the first), restart every 4.
    let mut b = BlockBuilder::with_encoding(4, DataBlockEncoding::AnchoredDiff);
    for i in 0..10u64 {
        let k = CellKey::new(
            row(i),
            "cf",
            format!("q{}", i % 3),
            1000 - i,
            CellType::Put,
            i,
        );
        b.add(
            &k.encode(),
            format!("value{i}").as_bytes(),
            if i % 4 == 0 { b"tag" } else { b"" },
        );
    }
    put("data_block", "anchored_ten_cells_restart4", &b.finish())?;
    let mut b = BlockBuilder::new(1);
    b.add(&CellKey::first_on_row(b"only").encode(), b"", b"");
    put("data_block", "one_cell", &b.finish())?;
    put("data_block", "empty", &0u32.to_le_bytes())?;

    let mut b = BlockBuilder::new(1);
    let mut buf = Vec::new();
    for i in 0..6u64 {
        let first = CellKey::new(row(i * 10), "cf", "q", 5, CellType::Put, 1).encode();
        let v = IndexValue {
            handle: BlockHandle {
                offset: i * 4096,
                stored_len: 4000,
            },
            min_ts: i,
            max_ts: i + 7,
            first_key: &first,
        };
        v.encode(&mut buf);
        b.add(
            &CellKey::first_on_row(row(i * 10 + 9).as_bytes()).encode(),
            &buf,
            b"",
        );
    }
    put("index_block", "six_entries", &b.finish())?;

    // Bloom: mode byte 0 = meta block payload; mode byte 1 = structured key set.
    let meta = BloomMeta {
        bloom_type: BloomType::RowCol,
        num_probes: 6,
        bits_per_key_milli: 10_000,
        total_keys: 3,
        chunks: vec![
            ChunkMeta {
                first_key: b"\x01\x00aq".to_vec(),
                last_key: b"\x01\x00bq".to_vec(),
                handle: BlockHandle {
                    offset: 0,
                    stored_len: 64,
                },
                num_keys: 2,
            },
            ChunkMeta {
                first_key: b"\x01\x00cq".to_vec(),
                last_key: b"\x01\x00cq".to_vec(),
                handle: BlockHandle {
                    offset: 74,
                    stored_len: 64,
                },
                num_keys: 1,
            },
        ],
    };
    let mut m = vec![0u8];
    m.extend_from_slice(&meta.encode());
    put("bloom_block", "meta_rowcol", &m)?;
    let mut s = vec![1u8];
    s.extend_from_slice(&noise(300, 7));
    put("bloom_block", "keys_noise", &s)?;

    // Trailer: a real file's tail, and a whole small file (the target also decodes its tail).
    let tail = small.get(small.len() - TRAILER_LEN..).ok_or("short file")?;
    let t = Trailer::decode(tail).map_err(|e| format!("{e:?}"))?;
    put("trailer", "real", &t.encode())?;
    put("trailer", "whole_file", &small)?;

    // Envelope: 14 bytes of parameters (offset 0, every type expected, raw_len, lz4 flag), then
    // a sealed block.
    let mut scratch = Vec::new();
    for (name, comp) in [
        ("lz4", CompressionType::Lz4),
        ("none", CompressionType::None),
    ] {
        let raw = b"abcabcabcabc hello hello hello hello ".repeat(4);
        let (sealed, _) = seal_block(&raw, BlockType::Data, comp, 0, &mut scratch);
        let mut e = vec![0u8; 8];
        e.push(0xff);
        e.extend_from_slice(&(raw.len() as u32).to_le_bytes());
        e.push(u8::from(comp == CompressionType::Lz4));
        e.extend_from_slice(&sealed);
        put("block_envelope", name, &e)?;
    }

    // Structured input: any bytes parse; a few streams of different lengths.
    for (i, len) in [64usize, 256, 1024].into_iter().enumerate() {
        put(
            "writer_roundtrip",
            &format!("noise{len}"),
            &noise(len, i as u64 + 1),
        )?;
    }
    Ok(())
}

fn row(i: u64) -> String {
    format!("user{i:010}")
}

/// A file of `n` cells spread over rows, with every shape of key the format knows when
/// `markers` is set (deletes, family markers, tags).
fn file(
    n: u64,
    block_size: usize,
    index_block_size: usize,
    compression: CompressionType,
    bloom_type: BloomType,
    markers: bool,
) -> Result<Vec<u8>, cellar_format::Error> {
    let mut opts = WriterOptions::new("cf");
    opts.block_size = block_size;
    opts.index_block_size = index_block_size;
    opts.restart_interval = 4;
    opts.compression = compression;
    opts.bloom = BloomConfig {
        bloom_type,
        bits_per_key_milli: 10_000,
        keys_per_chunk: 4,
    };
    opts.created_at_ms = 0;
    let mut w = HFileWriter::new(Vec::new(), "seed", opts)?;
    for i in 0..n {
        let r = row(i / 2);
        // A family marker sorts first in its row (empty qualifier), so it goes with the row's first cell.
        if markers && i % 2 == 0 && (i / 2) % 3 == 0 {
            let k = CellKey::new(r.clone(), "cf", "", 900, CellType::DeleteFamily, i);
            w.append(&k.as_ref(), b"")?;
        }
        let ty = if markers && i % 3 == 0 {
            CellType::Delete
        } else {
            CellType::Put
        };
        let k = CellKey::new(r, "cf", format!("q{}", i % 2), 800 - i, ty, 100 + i);
        let v = format!("v{i:03}-aaaaaaaaaaaa");
        if markers && i % 4 == 1 {
            w.append_with_tags(&k.as_ref(), v.as_bytes(), b"ttl")?;
        } else {
            w.append(&k.as_ref(), v.as_bytes())?;
        }
    }
    Ok(w.finish()?.0)
}

/// Deterministic bytes (xorshift), so the seeds do not change from run to run.
fn noise(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}
