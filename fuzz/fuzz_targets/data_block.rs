//! Arbitrary bytes as a raw data block payload, decoded as each data block encoding (PREFIX,
//! DIFF and ANCHORED_DIFF): decoding, forward and backward iteration and seeks must never panic, every key yielded must parse, and a seek must never stop short of
//! its target. (Forward and backward passes are not compared: a restart array that does not
//! sit on entry boundaries is accepted by `Block::new` and legitimately decodes differently
//! from each end; the verifier, not the block decoder, reports that.)
#![no_main]

use std::sync::Arc;

use cellar_format::block::{Block, DataBlockEncoding};
use cellar_fuzz::{scan_block, seek_block, seek_targets};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    for encoding in [
        DataBlockEncoding::Prefix,
        DataBlockEncoding::Diff,
        DataBlockEncoding::AnchoredDiff,
    ] {
        let Ok(block) = Block::with_encoding(data.to_vec(), encoding) else {
            continue;
        };
        let _ = (block.num_restarts(), block.size(), block.is_empty());
        let block = Arc::new(block);
        let scan = scan_block(&block);
        seek_block(&block, &seek_targets(&scan.forward, data));
    }
});
