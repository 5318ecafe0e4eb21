//! The row-key helpers used the way the seeds use them.

use std::num::{NonZeroU32, NonZeroU8};

use cellar::keys::{
    be_u64, composite, hash_prefixed, join, merge_salted, pad_u64, reverse_bytes, reverse_domain,
    reversed_ts, salt, salt_decimal, salted_decimal_prefixes, salted_prefixes,
};
use cellar::read::{Row, Scan};

/// Salted writes spread over the buckets; a range read scans every salt prefix and merges,
/// giving back the unsalted order (seed 003: "需要枚举所有可能的盐作为前缀分别查询").
#[test]
fn salted_range_read_scans_each_prefix_and_merges() {
    let buckets = NonZeroU32::new(10).unwrap_or(NonZeroU32::MIN);
    let mut table: Vec<Vec<u8>> = (0..100u64)
        .map(|i| salt_decimal(&pad_u64(i, 10), buckets))
        .collect();
    table.sort();
    let scans: Vec<_> = salted_decimal_prefixes(buckets)
        .into_iter()
        .map(|p| {
            let scan = Scan::new().prefix(p);
            table
                .iter()
                .filter(|k| scan.contains_row(k))
                .map(|k| Ok(Row::new(k.clone(), vec![])))
                .collect::<Vec<_>>()
                .into_iter()
        })
        .collect();
    let back: Vec<Vec<u8>> = merge_salted(scans, 1)
        .filter_map(|r| r.ok())
        .map(|r| r.key[1..].to_vec())
        .collect();
    let want: Vec<Vec<u8>> = (0..100u64).map(|i| pad_u64(i, 10)).collect();
    assert_eq!(back, want);
}

#[test]
fn byte_salt_prefixes_cover_every_bucket() {
    let b = NonZeroU8::new(4).unwrap_or(NonZeroU8::MIN);
    let prefixes = salted_prefixes(b);
    for i in 0..100 {
        let k = salt(format!("_2019_01_10_10_34_{i:02}").as_bytes(), b);
        assert!(prefixes.iter().any(|p| k.starts_with(p)));
    }
}

/// Seed 004's hashing: `substr(md5(uid), 0, 6) + uid`, fixed-length prefix and same key back.
#[test]
fn hashed_keys_keep_the_original_after_a_fixed_prefix() {
    for uid in ["u1", "u2", "a-much-longer-user-id"] {
        let k = hash_prefixed(uid.as_bytes(), 6);
        assert_eq!(k.len(), 6 + uid.len());
        assert!(k.ends_with(uid.as_bytes()));
    }
}

/// The webtable: reversed host names keep a site's pages together.
#[test]
fn reversed_domains_group_a_site() {
    let mut rows: Vec<String> = [
        "www.cnn.com",
        "money.cnn.com",
        "www.bbc.co.uk",
        "edition.cnn.com",
    ]
    .iter()
    .map(|h| reverse_domain(h))
    .collect();
    rows.sort();
    let scan = Scan::new().prefix("com.cnn.");
    let cnn: Vec<&String> = rows
        .iter()
        .filter(|r| scan.contains_row(r.as_bytes()))
        .collect();
    assert_eq!(cnn, ["com.cnn.edition", "com.cnn.money", "com.cnn.www"]);
    assert_eq!(reverse_bytes(b"123"), b"321");
}

/// Seed 004 §3.4: `uid + Long.Max_Value - timestamp`, newest record first in a uid scan.
#[test]
fn reversed_timestamps_put_the_newest_first() {
    let mut rows: Vec<Vec<u8>> = [1_000u64, 3_000, 2_000]
        .iter()
        .map(|&ts| [b"uid42".as_slice(), &reversed_ts(ts)].concat())
        .collect();
    rows.sort();
    let ts: Vec<u64> = rows
        .iter()
        .filter_map(|r| cellar::keys::from_reversed_ts(&r[5..]))
        .collect();
    assert_eq!(ts, [3_000, 2_000, 1_000]);
}

/// Seed 003: zero-padding makes 23 sort before 123; big-endian does too.
#[test]
fn padded_and_big_endian_numbers_sort_numerically() {
    assert!(pad_u64(23, 10) < pad_u64(123, 10));
    assert!(b"23".as_slice() > b"123".as_slice()); // the problem being solved
    assert!(be_u64(23) < be_u64(123));
}

/// The follower table: one row per (follower, followed); "whom does Jame follow" is a prefix
/// scan, "does Jame follow Emma" a point read.
#[test]
fn follower_table_rows() {
    let mut rows = [
        composite(&[b"Jame", b"Emma"]),
        composite(&[b"Jame", b"Bob"]),
        composite(&[b"Jamal", b"Emma"]),
        composite(&[b"Jameson", b"Ann"]),
    ];
    rows.sort();
    let scan = Scan::new().prefix(composite(&[b"Jame"]));
    let followed: Vec<Vec<Vec<u8>>> = rows
        .iter()
        .filter(|r| scan.contains_row(r))
        .filter_map(|r| cellar::keys::split_composite(r))
        .collect();
    assert_eq!(
        followed,
        vec![
            vec![b"Jame".to_vec(), b"Bob".to_vec()],
            vec![b"Jame".to_vec(), b"Emma".to_vec()],
        ]
    );
    assert_eq!(join(&[b"Jame", b"Emma"], b'+'), Some(b"Jame+Emma".to_vec()));
}
