//! The seeds' examples as tests: the webtable (seed 001, after HBase's reference guide), the
//! follower table in its three designs (seeds 000 and 002), the news feed with reversed
//! timestamps (seed 004, `uid + Long.MAX_VALUE - timestamp`), and trade records
//! `sellerId + timestamp + orderId`, plain and salted (seeds 003 and 004).

mod conformance_common;

use std::num::{NonZeroU32, NonZeroU8};

use cellar::keys::{
    composite, from_reversed_ts, merge_salted, pad_u64, reverse_domain, reversed_ts, salt,
    salt_decimal, salted_decimal_prefixes, salted_prefixes, split_composite,
};
use cellar::{Delete, FamilyDescriptor, Get, Put, Row, Scan, WriteBatch, WriteOptions};
use conformance_common::{env, env_named, get, scan, scan_keys, scan_rows, text, v};

// ---------------------------------------------------------------------------------------
// The webtable
// ---------------------------------------------------------------------------------------

const T3: u64 = 3;
const T5: u64 = 5;
const T6: u64 = 6;
const T8: u64 = 8;
const T9: u64 = 9;

fn webtable() -> conformance_common::Env {
    let e = env_named(
        "webtable",
        vec![
            FamilyDescriptor::new("contents").max_versions(3),
            FamilyDescriptor::new("anchor").max_versions(3),
        ],
    );
    let row = reverse_domain("www.cnn.com");
    assert_eq!(row, "com.cnn.www");
    e.t.put(Put::new(row.clone()).add_at("contents", "html", T3, "<html>t3"))
        .unwrap();
    e.t.put(Put::new(row.clone()).add_at("contents", "html", T5, "<html>t5"))
        .unwrap();
    e.db.flush().unwrap();
    e.t.put(Put::new(row.clone()).add_at("contents", "html", T6, "<html>t6"))
        .unwrap();
    e.t.put(
        Put::new(row.clone())
            .add_at("anchor", "my.look.ca", T8, "CNN.com")
            .add_at("anchor", "cnnsi.com", T9, "CNN"),
    )
    .unwrap();
    e
}

#[test]
fn webtable_row_read_returns_the_newest_of_each_column() {
    let e = webtable();
    assert_eq!(
        get(&e.t, &Get::new("com.cnn.www")),
        v(&[
            "com.cnn.www/anchor:cnnsi.com@9=CNN",
            "com.cnn.www/anchor:my.look.ca@8=CNN.com",
            "com.cnn.www/contents:html@6=<html>t6",
        ])
    );
}

#[test]
fn webtable_contents_html_versions() {
    let e = webtable();
    assert_eq!(
        get(&e.t, &Get::new("com.cnn.www").column("contents", "html")),
        v(&["com.cnn.www/contents:html@6=<html>t6"])
    );
    assert_eq!(
        get(
            &e.t,
            &Get::new("com.cnn.www")
                .column("contents", "html")
                .all_versions()
        ),
        v(&[
            "com.cnn.www/contents:html@6=<html>t6",
            "com.cnn.www/contents:html@5=<html>t5",
            "com.cnn.www/contents:html@3=<html>t3",
        ])
    );
    assert_eq!(
        get(
            &e.t,
            &Get::new("com.cnn.www")
                .column("contents", "html")
                .timestamp(T5)
        ),
        v(&["com.cnn.www/contents:html@5=<html>t5"])
    );
}

#[test]
fn webtable_reads_at_timestamps_with_no_cell_return_nothing() {
    // Reference guide: contents:html at t8 has no value, nor anchor:my.look.ca at t9.
    let e = webtable();
    assert_eq!(
        get(
            &e.t,
            &Get::new("com.cnn.www")
                .column("contents", "html")
                .timestamp(T8)
        ),
        v(&[])
    );
    assert_eq!(
        get(
            &e.t,
            &Get::new("com.cnn.www")
                .column("anchor", "my.look.ca")
                .timestamp(T9)
        ),
        v(&[])
    );
    // The whole row as of before t6: the newest version below t6 of each column.
    assert_eq!(
        get(&e.t, &Get::new("com.cnn.www").time_range(0, T6)),
        v(&["com.cnn.www/contents:html@5=<html>t5"])
    );
}

#[test]
fn webtable_anchor_family_and_seed_version_deletion() {
    let e = webtable();
    assert_eq!(
        scan(&e.t, Scan::new().family("anchor")),
        v(&[
            "com.cnn.www/anchor:cnnsi.com@9=CNN",
            "com.cnn.www/anchor:my.look.ca@8=CNN.com",
        ])
    );
    // Seed 001: two versions read t6, t5; with t5 deleted they read t6, t3.
    let two = Get::new("com.cnn.www")
        .column("contents", "html")
        .max_versions(2);
    assert_eq!(
        get(&e.t, &two),
        v(&[
            "com.cnn.www/contents:html@6=<html>t6",
            "com.cnn.www/contents:html@5=<html>t5",
        ])
    );
    e.t.delete(Delete::new("com.cnn.www").column_at("contents", "html", T5))
        .unwrap();
    assert_eq!(
        get(&e.t, &two),
        v(&[
            "com.cnn.www/contents:html@6=<html>t6",
            "com.cnn.www/contents:html@3=<html>t3",
        ])
    );
}

// ---------------------------------------------------------------------------------------
// Follower table, design 1: a row per user, the followed ids as qualifiers
// ---------------------------------------------------------------------------------------

#[test]
fn follower_design_wide_row_per_user() {
    let e = env_named(
        "follows",
        vec![FamilyDescriptor::new("follows").max_versions(1)],
    );
    for (who, whom) in [
        ("jame", "emma"),
        ("jame", "bob"),
        ("jame", "zoe"),
        ("emma", "jame"),
    ] {
        e.t.put(Put::new(who).add_at("follows", whom, 1, format!("name:{whom}")))
            .unwrap();
    }
    e.db.flush().unwrap();
    // Whom does jame follow: one row, qualifiers in order.
    assert_eq!(
        get(&e.t, &Get::new("jame")),
        v(&[
            "jame/follows:bob@1=name:bob",
            "jame/follows:emma@1=name:emma",
            "jame/follows:zoe@1=name:zoe",
        ])
    );
    // Does jame follow emma / alice: a Get of one column.
    assert_eq!(
        get(&e.t, &Get::new("jame").column("follows", "emma")),
        v(&["jame/follows:emma@1=name:emma"])
    );
    assert_eq!(
        get(&e.t, &Get::new("jame").column("follows", "alice")),
        v(&[])
    );
    // Unfollow: delete the column.
    e.t.delete(Delete::new("jame").columns_at("follows", "emma", 1))
        .unwrap();
    assert_eq!(
        get(&e.t, &Get::new("jame")),
        v(&["jame/follows:bob@1=name:bob", "jame/follows:zoe@1=name:zoe"])
    );
    // Who follows jame: only a full scan can tell in this design.
    let followers: Vec<String> = scan_rows(&e.t, Scan::new().column("follows", "jame"))
        .iter()
        .map(|r| text(&r.key))
        .collect();
    assert_eq!(followers, v(&["emma"]));
}

// ---------------------------------------------------------------------------------------
// Follower table, designs 2 and 3: `followerId+followedId` rows, family `f`, and the reverse
// index `followedId+followerId` for "who follows A"
// ---------------------------------------------------------------------------------------

fn follow_tables() -> (conformance_common::Env, Vec<(&'static str, &'static str)>) {
    let e = env_named(
        "following",
        vec![FamilyDescriptor::new("f").max_versions(1)],
    );
    e.db.create_table(
        cellar::TableDescriptor::new("followed_by")
            .family(FamilyDescriptor::new("f").max_versions(1)),
    )
    .unwrap();
    // "Jam" is a prefix of "Jame": composite keys keep them apart.
    let edges = vec![
        ("Jame", "Emma"),
        ("Jame", "Bob"),
        ("Jam", "Zed"),
        ("Emma", "Jame"),
        ("Bob", "Emma"),
        ("Jame", "Zed"),
    ];
    for (i, (a, b)) in edges.iter().enumerate() {
        // Both directions in one atomic batch.
        let wb = WriteBatch::new()
            .put(
                "following",
                Put::new(composite(&[a.as_bytes(), b.as_bytes()])).add_at("f", *b, 1, *b),
            )
            .put(
                "followed_by",
                Put::new(composite(&[b.as_bytes(), a.as_bytes()])).add_at("f", *a, 1, *a),
            );
        e.db.write(wb, WriteOptions::default()).unwrap();
        if i == 2 {
            e.db.flush().unwrap();
        }
    }
    (e, edges)
}

fn second_parts(rows: &[Row]) -> Vec<String> {
    rows.iter()
        .map(|r| {
            let parts = split_composite(&r.key).expect("composite key");
            assert_eq!(parts.len(), 2);
            text(&parts[1])
        })
        .collect()
}

#[test]
fn follower_design_tall_table_whom_does_a_follow() {
    let (e, _) = follow_tables();
    let rows = scan_rows(&e.t, Scan::new().prefix(composite(&[b"Jame"])));
    assert_eq!(second_parts(&rows), v(&["Bob", "Emma", "Zed"]));
    // The qualifier is the followed user's name, the single-letter family `f`.
    let cells: Vec<String> = rows
        .iter()
        .flat_map(|r| r.cells.iter())
        .map(|c| {
            format!(
                "{}:{}@{}={}",
                c.family,
                text(&c.qualifier),
                c.timestamp,
                text(&c.value)
            )
        })
        .collect();
    assert_eq!(cells, v(&["f:Bob@1=Bob", "f:Emma@1=Emma", "f:Zed@1=Zed"]));
    let jam = scan_rows(&e.t, Scan::new().prefix(composite(&[b"Jam"])));
    assert_eq!(second_parts(&jam), v(&["Zed"]));
    // Does Jame follow Emma: a point Get.
    let key = composite(&[b"Jame", b"Emma"]);
    assert!(e.t.get(&Get::new(key.clone())).unwrap().is_some());
    assert!(e
        .t
        .get(&Get::new(composite(&[b"Emma", b"Bob"])))
        .unwrap()
        .is_none());
    // Jame unfollows Emma: delete the row.
    e.t.delete(Delete::new(key)).unwrap();
    let rows = scan_rows(&e.t, Scan::new().prefix(composite(&[b"Jame"])));
    assert_eq!(second_parts(&rows), v(&["Bob", "Zed"]));
}

#[test]
fn follower_design_reverse_index_who_follows_a() {
    let (e, edges) = follow_tables();
    let rev = e.db.table("followed_by").unwrap();
    let rows = scan_rows(&rev, Scan::new().prefix(composite(&[b"Emma"])));
    assert_eq!(second_parts(&rows), v(&["Bob", "Jame"]));
    let rows = scan_rows(&rev, Scan::new().prefix(composite(&[b"Zed"])));
    assert_eq!(second_parts(&rows), v(&["Jam", "Jame"]));
    let rows = scan_rows(&rev, Scan::new().prefix(composite(&[b"Jam"])));
    assert!(rows.is_empty());
    // The two tables hold the same relation.
    assert_eq!(scan_rows(&rev, Scan::new()).len(), edges.len());
    assert_eq!(scan_rows(&e.t, Scan::new()).len(), edges.len());
}

// ---------------------------------------------------------------------------------------
// News feed: `user_id + reversed timestamp`, newest first
// ---------------------------------------------------------------------------------------

fn feed_key(user: u64, ts: u64) -> Vec<u8> {
    let mut k = pad_u64(user, 10);
    k.extend_from_slice(&reversed_ts(ts));
    k
}

fn feed_items(rows: &[Row]) -> Vec<String> {
    rows.iter()
        .map(|r| {
            let ts = from_reversed_ts(&r.key[10..]).unwrap();
            format!(
                "{}@{}={}",
                text(&r.key[..10]),
                ts,
                text(r.value("f", "item").unwrap())
            )
        })
        .collect()
}

#[test]
fn news_feed_newest_items_first() {
    let e = env_named("feed", vec![FamilyDescriptor::new("f").max_versions(1)]);
    let base = 1_700_000_000_000u64;
    // Written oldest first, for two users, with a flush in the middle.
    for (i, d) in [0u64, 10, 20, 30, 40].iter().enumerate() {
        for user in [7u64, 42] {
            e.t.put(Put::new(feed_key(user, base + d)).add_at(
                "f",
                "item",
                base + d,
                format!("u{user} post {i}"),
            ))
            .unwrap();
        }
        if i == 2 {
            e.db.flush().unwrap();
        }
    }
    let user42 = pad_u64(42, 10);
    // The three newest items of user 42.
    let rows = scan_rows(&e.t, Scan::new().prefix(user42.clone()).limit(3));
    assert_eq!(
        feed_items(&rows),
        vec![
            format!("0000000042@{}=u42 post 4", base + 40),
            format!("0000000042@{}=u42 post 3", base + 30),
            format!("0000000042@{}=u42 post 2", base + 20),
        ]
    );
    // Items of user 42 in the window [base+10, base+30], newest first: the newest bound is
    // the start row, the oldest the (inclusive) stop row.
    let rows = scan_rows(
        &e.t,
        Scan::new()
            .range(feed_key(42, base + 30), feed_key(42, base + 10))
            .inclusive_stop(true),
    );
    assert_eq!(
        feed_items(&rows),
        vec![
            format!("0000000042@{}=u42 post 3", base + 30),
            format!("0000000042@{}=u42 post 2", base + 20),
            format!("0000000042@{}=u42 post 1", base + 10),
        ]
    );
    // A new post goes to the top.
    e.t.put(Put::new(feed_key(42, base + 50)).add_at("f", "item", base + 50, "u42 post 5"))
        .unwrap();
    let rows = scan_rows(&e.t, Scan::new().prefix(user42).limit(1));
    assert_eq!(
        feed_items(&rows),
        vec![format!("0000000042@{}=u42 post 5", base + 50)]
    );
    // User 7's feed is untouched.
    let rows = scan_rows(&e.t, Scan::new().prefix(pad_u64(7, 10)));
    assert_eq!(rows.len(), 5);
    assert_eq!(
        feed_items(&rows[..1]),
        vec![format!("0000000007@{}=u7 post 4", base + 40)]
    );
}

// ---------------------------------------------------------------------------------------
// Trade records: `sellerId + timestamp + orderId`, plain and salted
// ---------------------------------------------------------------------------------------

fn trade_key(seller: &str, ts: u64, order: u64) -> Vec<u8> {
    let mut k = seller.as_bytes().to_vec();
    k.extend_from_slice(&pad_u64(ts, 13));
    k.extend_from_slice(&pad_u64(order, 6));
    k
}

fn trades() -> Vec<(&'static str, u64, u64)> {
    let mut out = Vec::new();
    for (i, seller) in ["s001", "s002", "s003"].iter().enumerate() {
        for j in 0..8u64 {
            out.push((
                *seller,
                1_600_000_000_000 + j * 1000 + i as u64,
                j * 10 + i as u64,
            ));
        }
    }
    out
}

#[test]
fn trade_records_by_seller_and_time() {
    let e = env_named("trades", vec![FamilyDescriptor::new("t").max_versions(1)]);
    for (n, (s, ts, o)) in trades().into_iter().enumerate() {
        e.t.put(Put::new(trade_key(s, ts, o)).add_at("t", "amount", ts, format!("{o}")))
            .unwrap();
        if n % 7 == 0 {
            e.db.flush().unwrap();
        }
    }
    // All of a seller's orders, in time order.
    let keys = scan_keys(&e.t, Scan::new().prefix("s002"));
    let want: Vec<String> = trades()
        .into_iter()
        .filter(|t| t.0 == "s002")
        .map(|(s, ts, o)| text(&trade_key(s, ts, o)))
        .collect();
    assert_eq!(keys, want);
    // A seller's orders in a time window [t2, t5).
    let lo = 1_600_000_000_000 + 2000;
    let hi = 1_600_000_000_000 + 5000;
    let mut start = b"s002".to_vec();
    start.extend_from_slice(&pad_u64(lo, 13));
    let mut stop = b"s002".to_vec();
    stop.extend_from_slice(&pad_u64(hi, 13));
    let got = scan(&e.t, Scan::new().range(start, stop));
    assert_eq!(
        got,
        v(&[
            "s0021600000002001000021/t:amount@1600000002001=21",
            "s0021600000003001000031/t:amount@1600000003001=31",
            "s0021600000004001000041/t:amount@1600000004001=41",
        ])
    );
}

/// The `[start, stop)` rows of one salt bucket, from its prefix.
type BoundsOf = dyn Fn(&[u8]) -> (Vec<u8>, Vec<u8>);

#[test]
fn trade_records_salted_and_merged_back_in_order() {
    let four = NonZeroU8::new(4).unwrap();
    let e = env_named("trades", vec![FamilyDescriptor::new("t").max_versions(1)]);
    let mut buckets_used = std::collections::BTreeSet::new();
    for (n, (s, ts, o)) in trades().into_iter().enumerate() {
        let k = salt(&trade_key(s, ts, o), four);
        buckets_used.insert(k[0]);
        e.t.put(Put::new(k).add_at("t", "amount", ts, format!("{o}")))
            .unwrap();
        if n == 11 {
            e.db.flush().unwrap();
        }
    }
    assert!(buckets_used.len() > 1, "salting should spread the keys");
    // A range read becomes one scan per salt, merged back into unsalted order.
    let scans = |prefix_of: &BoundsOf| {
        salted_prefixes(four)
            .into_iter()
            .map(|p| {
                let (start, stop) = prefix_of(&p);
                e.t.scan(Scan::new().range(start, stop)).unwrap()
            })
            .collect::<Vec<_>>()
    };
    // The whole seller s001.
    let merged: Vec<Row> = merge_salted(
        scans(&|p| {
            let mut start = p.to_vec();
            start.extend_from_slice(b"s001");
            let mut stop = p.to_vec();
            stop.extend_from_slice(b"s002");
            (start, stop)
        }),
        1,
    )
    .collect::<cellar::Result<_>>()
    .unwrap();
    let got: Vec<String> = merged.iter().map(|r| text(&r.key[1..])).collect();
    let want: Vec<String> = trades()
        .into_iter()
        .filter(|t| t.0 == "s001")
        .map(|(s, ts, o)| text(&trade_key(s, ts, o)))
        .collect();
    assert_eq!(got, want);
    // Each returned key is still salted and readable by a point Get.
    for r in &merged {
        assert_eq!(r.key, salt(&r.key[1..], four));
        assert!(e.t.get(&Get::new(r.key.clone())).unwrap().is_some());
    }
    // Everything, merged: the unsalted keys in order.
    let all: Vec<String> = merge_salted(scans(&|p| (p.to_vec(), vec![p[0] + 1])), 1)
        .map(|r| text(&r.unwrap().key[1..]))
        .collect();
    let mut want: Vec<String> = trades()
        .into_iter()
        .map(|(s, ts, o)| text(&trade_key(s, ts, o)))
        .collect();
    want.sort();
    assert_eq!(all, want);
}

#[test]
fn decimal_salt_spreads_and_merges() {
    // Seed 003: a salt of "0 to 9" in front of the key.
    let ten = NonZeroU32::new(10).unwrap();
    let e = env(vec![FamilyDescriptor::new("t").max_versions(1)]);
    let keys: Vec<Vec<u8>> = (0..30u64)
        .map(|i| {
            let mut k = b"123+".to_vec();
            k.extend_from_slice(&pad_u64(i, 4));
            k
        })
        .collect();
    for k in &keys {
        e.t.put(Put::new(salt_decimal(k, ten)).add_at("t", "v", 1, k.clone()))
            .unwrap();
    }
    let scans: Vec<_> = salted_decimal_prefixes(ten)
        .into_iter()
        .map(|p| e.t.scan(Scan::new().prefix(p)).unwrap())
        .collect();
    let got: Vec<Vec<u8>> = merge_salted(scans, 1)
        .map(|r| r.unwrap().key[1..].to_vec())
        .collect();
    assert_eq!(got, keys);
}
