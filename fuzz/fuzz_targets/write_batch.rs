//! Write batches, the WAL payload (SPEC.md §18): arbitrary bytes → `batch::decode` never panics,
//! and an accepted batch re-encodes to one that decodes to the same mutations.
#![no_main]

use cellar::batch::{decode, encode, Mutation};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(muts) = decode(data) else {
        return;
    };
    let owned: Vec<Mutation> = muts
        .iter()
        .map(|m| Mutation {
            family: m.family,
            row: m.row.to_vec(),
            qualifier: m.qualifier.to_vec(),
            timestamp: m.timestamp,
            cell_type: m.cell_type,
            value: m.value.to_vec(),
            tags: m.tags.to_vec(),
        })
        .collect();
    let enc = encode(&owned);
    let again = decode(&enc).expect("a re-encoded batch must decode");
    assert_eq!(again, muts);
});
