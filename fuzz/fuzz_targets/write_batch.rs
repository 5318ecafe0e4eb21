//! Write batches, the WAL payload (SPEC.md §18), both versions: arbitrary bytes →
//! `batch::decode` never panics, and an accepted batch re-encodes (as the WAL writes batches now)
//! to one that decodes to the same mutations.
#![no_main]

use cellar::batch::{decode, encode, Mutation, MutationRef, WalFormat};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    for format in [WalFormat::V2, WalFormat::V1] {
        // A version-1 batch may be empty (count 0); version 2 has no way to say that, and no
        // writer logs an empty batch.
        let Ok(muts) = decode(data, format) else {
            continue;
        };
        if muts.is_empty() {
            continue;
        }
        let owned: Vec<Mutation> = muts.iter().map(MutationRef::to_mutation).collect();
        let enc = encode(&owned);
        let again = decode(&enc, WalFormat::V2).expect("a re-encoded batch must decode");
        assert_eq!(again, muts);
    }
});
