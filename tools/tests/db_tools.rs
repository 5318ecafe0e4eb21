//! The database tools (`cellar levels`, `manifest-dump`, `wal-dump`, `verify`, `compact`,
//! `checkpoint`) run as the real binary on databases built through the engine API.

mod common;

use std::path::Path;

use cellar::{Db, Delete, DeleteRows, FamilyDescriptor, Options, Put, TableDescriptor};
use common::{run, Run, CELLAR};
use serde_json::Value;

/// A database with two tables: `t` (families `cf`, `meta`) with two flushed files and
/// unflushed writes (a binary row, a delete) left in the WAL, and `ns:u` with one flushed file.
/// Dropped, not closed, so the WAL keeps its records.
fn build(dir: &Path) {
    let db = Db::open(dir, Options::default()).unwrap();
    db.create_table(
        TableDescriptor::new("t")
            .family(FamilyDescriptor::new("cf"))
            .family(FamilyDescriptor::new("meta")),
    )
    .unwrap();
    db.create_namespace("ns").unwrap();
    db.create_table(TableDescriptor::new("ns:u").family(FamilyDescriptor::new("f")))
        .unwrap();
    let t = db.table("t").unwrap();
    for i in 0..20u64 {
        t.put(Put::new(format!("row{i:03}")).add_at("cf", "q", 100 + i, "value"))
            .unwrap();
    }
    db.flush().unwrap();
    for i in 10..30u64 {
        t.put(Put::new(format!("row{i:03}")).add_at("cf", "q", 200 + i, "newer"))
            .unwrap();
    }
    db.table("ns:u")
        .unwrap()
        .put(Put::new("u1").add_at("f", "a", 5, "x"))
        .unwrap();
    db.flush().unwrap();
    t.put(Put::new(&b"\x00bin\xff"[..]).add_at("meta", "k", 7, "v\x01"))
        .unwrap();
    t.delete(Delete::new("row005").column_at("cf", "q", 105))
        .unwrap();
    drop(t);
    drop(db);
}

fn db() -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    build(&d.path().join("db"));
    d
}

fn cellar(args: &[&str], cwd: &Path) -> Run {
    run(CELLAR, args, cwd)
}

fn json(r: &Run) -> Value {
    serde_json::from_str(&r.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}\nstderr: {}", r.stdout, r.stderr))
}

/// Every file under `dir` with its size and contents' length, to show a tool wrote nothing.
fn listing(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push((p.display().to_string(), std::fs::read(&p).unwrap()));
            }
        }
    }
    out.sort();
    out
}

fn hfiles(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for fam in std::fs::read_dir(dir.join("data")).unwrap() {
        for f in std::fs::read_dir(fam.unwrap().path()).unwrap() {
            out.push(f.unwrap().path());
        }
    }
    out.sort();
    out
}

#[test]
fn levels_shows_files_per_table_family_and_level() {
    let d = db();
    let r = cellar(&["levels", "db"], d.path());
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.contains("Table t (id "), "{}", r.stdout);
    assert!(r.stdout.contains("Table ns:u (id "), "{}", r.stdout);
    assert!(r.stdout.contains("Family cf"), "{}", r.stdout);
    assert!(r.stdout.contains("L0: 2 files"), "{}", r.stdout);
    assert!(r.stdout.contains("'row010' .. 'row029'"), "{}", r.stdout);

    let v = json(&cellar(&["levels", "db", "--format", "json"], d.path()));
    assert_eq!(v["num_files"], 3);
    let tables = v["tables"].as_array().unwrap();
    let names: Vec<&str> = tables
        .iter()
        .map(|t| t["table"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["ns:u", "t"]);
    let cf = &tables[1]["families"][0];
    assert_eq!(cf["family"], "cf");
    assert_eq!(cf["num_files"], 2);
    let l0 = &cf["levels"][0];
    assert_eq!(l0["level"], 0);
    assert_eq!(l0["entries"], 40);
    // L0 lists newest first.
    let f = &l0["files"][0];
    assert_eq!(f["smallest_row"], "row010");
    assert_eq!(f["largest_row"], "row029");
    assert_eq!(
        (f["min_ts"].as_u64(), f["max_ts"].as_u64()),
        (Some(210), Some(229))
    );
    assert!(f["min_seq"].as_u64() <= f["max_seq"].as_u64());
    assert!(f["size"].as_u64().unwrap() > 0);
    assert_eq!(
        tables[1]["families"][1]["num_files"], 0,
        "meta is unflushed"
    );
}

#[test]
fn read_only_tools_write_nothing() {
    let d = db();
    let before = listing(&d.path().join("db"));
    for args in [
        &["levels", "db"][..],
        &["manifest-dump", "db", "--format", "json"],
        &["wal-dump", "db", "--values"],
        &["verify", "db", "--format", "json"],
    ] {
        let r = cellar(args, d.path());
        assert_eq!(r.code, 0, "{args:?}: {}{}", r.stdout, r.stderr);
        assert_eq!(
            listing(&d.path().join("db")),
            before,
            "{args:?} changed the directory"
        );
    }
}

#[test]
fn manifest_dump_lists_every_edit() {
    let d = db();
    let r = cellar(&["manifest-dump", "db"], d.path());
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.contains("#1 @0 (snapshot)"), "{}", r.stdout);
    assert!(r.stdout.contains("put_table ns:u"), "{}", r.stdout);
    assert!(r.stdout.contains("add_file"), "{}", r.stdout);
    assert!(r.stdout.contains("replay: OK (2 table(s), 3 live file(s))"));

    let v = json(&cellar(
        &["manifest-dump", "db", "--format", "json"],
        d.path(),
    ));
    let edits = v["edits"].as_array().unwrap();
    assert_eq!(edits[0]["snapshot"], true);
    assert_eq!(edits[0]["offset"], 0);
    let added: usize = edits
        .iter()
        .filter_map(|e| e["added_files"].as_array())
        .map(|a| a.len())
        .sum();
    assert_eq!(added, 3);
    assert!(edits.iter().any(|e| e["create_namespaces"][0] == "ns"));
    assert_eq!(v["replay_error"], Value::Null);
    assert_eq!(v["live_files"], 3);
    assert_eq!(v["records"].as_u64(), Some(edits.len() as u64));
}

/// Row-range deletes live in the manifest: `manifest-dump` shows each one added (per family)
/// and each one a major compaction removed, in text and JSON.
#[test]
fn manifest_dump_shows_range_deletes_and_their_removal() {
    let d = tempfile::tempdir().unwrap();
    // No compaction thread: the close's flush takes every cell the deletes mask, after which
    // a thread would let them go at once.
    let mut o = Options::default();
    o.compaction.threads = 0;
    let db = Db::open(d.path().join("db"), o).unwrap();
    db.create_table(
        TableDescriptor::new("t")
            .family(FamilyDescriptor::new("cf"))
            .family(FamilyDescriptor::new("meta")),
    )
    .unwrap();
    let t = db.table("t").unwrap();
    for r in ["a", "b", "c"] {
        t.put(
            Put::new(r)
                .add_at("cf", "q", 10, "v")
                .add_at("meta", "m", 10, "m"),
        )
        .unwrap();
    }
    let s1 = t
        .delete_rows_with(DeleteRows::new("a", "c").timestamp(50).family("cf"))
        .unwrap();
    let s2 = t.delete_rows(b"\x00x", b"").unwrap();
    drop(t);
    db.close().unwrap();

    let r = cellar(&["manifest-dump", "db"], d.path());
    assert_eq!(r.code, 0, "{}", r.stderr);
    for line in [
        format!("  range_delete t/cf seq {s1}: rows ['a', 'c'), ts <= 50\n"),
        format!("  range_delete t/meta seq {s2}: rows ['\\x00x', end), ts <= "),
    ] {
        assert!(r.stdout.contains(&line), "{line:?} in\n{}", r.stdout);
    }
    let v = json(&cellar(
        &["manifest-dump", "db", "--format", "json"],
        d.path(),
    ));
    let edits = v["edits"].as_array().unwrap();
    let family = |name: &str| -> Value {
        let table = edits.iter().find_map(|e| e["put_tables"].get(0));
        let families = table.unwrap()["families"].as_array().unwrap();
        families.iter().find(|f| f["name"] == name).unwrap()["id"].clone()
    };
    let (cf, meta) = (family("cf"), family("meta"));
    let added: Vec<&Value> = edits
        .iter()
        .filter_map(|e| e["range_deletes"].as_array())
        .flatten()
        .collect();
    assert_eq!(added.len(), 3, "{v}");
    assert_eq!(
        *added[0],
        serde_json::json!({"family_id": cf, "start": "a", "stop": "c", "ts": 50, "seq": s1})
    );
    let whole: Vec<&&Value> = added.iter().filter(|d| d["seq"] == s2).collect();
    assert_eq!(whole.len(), 2);
    assert_eq!(
        (&whole[0]["start"], &whole[0]["stop"]),
        (&"\\x00x".into(), &"".into())
    );
    assert!(whole.iter().any(|d| d["family_id"] == meta));
    assert!(edits.iter().all(|e| e.get("range_deletes_gone").is_none()));

    // A major compaction drops the masked cells, then the deletes.
    let db = Db::open(d.path().join("db"), Options::default()).unwrap();
    db.major_compact("t", None).unwrap();
    assert_eq!(db.range_deletes("t").unwrap(), []);
    db.close().unwrap();
    let r = cellar(&["manifest-dump", "db"], d.path());
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stdout
            .contains(&format!("  range_delete_gone t/cf seq {s1}\n")),
        "{}",
        r.stdout
    );
    let v = json(&cellar(
        &["manifest-dump", "db", "--format", "json"],
        d.path(),
    ));
    let mut gone: Vec<Value> = v["edits"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["range_deletes_gone"].as_array())
        .flatten()
        .cloned()
        .collect();
    gone.sort_by_key(|g| (g["seq"].as_u64(), g["family_id"].as_u64()));
    assert_eq!(
        gone,
        [
            serde_json::json!({"family_id": cf, "seq": s1}),
            serde_json::json!({"family_id": cf, "seq": s2}),
            serde_json::json!({"family_id": meta, "seq": s2}),
        ],
        "{v}"
    );
}

#[test]
fn wal_dump_shows_records_and_mutations() {
    let d = db();
    let r = cellar(&["wal-dump", "db", "--values"], d.path());
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stdout
            .contains("Put t row=\\x00bin\\xFF column=meta:k timestamp=7 value=v\\x01"),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout
            .contains("Delete t row=row005 column=cf:q timestamp=105"),
        "{}",
        r.stdout
    );
    assert!(r.stdout.contains("recovery from segment"), "{}", r.stdout);

    let v = json(&cellar(&["wal-dump", "db", "--format", "json"], d.path()));
    let live: Vec<&Value> = v["records"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["live"] == true && r["kind"] == "BATCH")
        .collect();
    assert_eq!(live.len(), 2, "{v}");
    let m = &live[0]["mutations"][0];
    assert_eq!(m["table"], "t");
    assert_eq!(m["column"], "meta:k");
    assert_eq!(m["row"], "\\x00bin\\xFF");
    assert_eq!(m["type"], "Put");
    assert_eq!(m["value_len"], 2);
    assert!(m.get("value").is_none(), "values only with --values");
    assert!(live[0]["seq"].as_u64() < live[1]["seq"].as_u64());
    assert_eq!(v["recovery"]["status"], "ok");
    assert_eq!(v["recovery"]["records"], 2);
    assert_eq!(v["exit_code"], 0);
}

#[test]
fn verify_clean_database() {
    let d = db();
    let r = cellar(&["verify", "db"], d.path());
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert!(r.stdout.ends_with("verify db: OK\n"), "{}", r.stdout);
    let v = json(&cellar(&["verify", "db", "--format", "json"], d.path()));
    assert_eq!(v["exit_code"], 0);
    assert_eq!(v["files"].as_array().unwrap().len(), 3);
    assert_eq!(v["files"][0]["status"], "ok");
    assert_eq!(v["wal"]["status"], "ok");
    assert_eq!(v["wal"]["records"], 2);
}

/// A schema change whose change-feed record never reached the log (the append failed after
/// the manifest edit, as a crash there would leave it): a warning, exit 0, until an open
/// appends the record.
#[test]
fn verify_warns_of_a_schema_record_the_next_open_appends() {
    use cellar::fs::{Fault, FaultFs, OpKind, RealFs, Rule};
    use std::sync::Arc;
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("db");
    let fs = FaultFs::new(RealFs);
    let db = Db::open(
        &dir,
        Options {
            fs: Arc::new(fs.clone()),
            ..Options::default()
        },
    )
    .unwrap();
    db.create_table(TableDescriptor::new("t").family(FamilyDescriptor::new("cf")))
        .unwrap();
    fs.add_rule(
        Rule::on(OpKind::Write, Fault::Eio)
            .path("/wal/")
            .persistent(),
    );
    db.alter_table(TableDescriptor::new("t").family(FamilyDescriptor::new("cf").max_versions(5)))
        .unwrap();
    assert!(db.poisoned().is_some(), "the failed append poisons");
    drop(db);
    let r = cellar(&["verify", "db"], d.path());
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert!(
        r.stdout
            .contains("warning: the last schema change's change-feed record is not in the log"),
        "{}",
        r.stdout
    );
    let db = Db::open(&dir, Options::default()).unwrap();
    assert!(db.stats().recovery.schema_record_relogged);
    drop(db);
    let r = cellar(&["verify", "db"], d.path());
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert!(r.stdout.ends_with("verify db: OK\n"), "{}", r.stdout);
}

#[test]
fn verify_finds_a_damaged_hfile() {
    let d = db();
    let f = &hfiles(&d.path().join("db"))[0];
    let mut bytes = std::fs::read(f).unwrap();
    bytes[20] ^= 0x55;
    std::fs::write(f, bytes).unwrap();
    let r = cellar(&["verify", "db"], d.path());
    assert_eq!(r.code, 1, "{}{}", r.stdout, r.stderr);
    assert!(
        r.stdout.contains(":0: data block: checksum mismatch"),
        "{}",
        r.stdout
    );
    assert!(r.stdout.contains("verify db: CORRUPT"), "{}", r.stdout);
}

#[test]
fn verify_finds_missing_and_resized_files_and_orphans() {
    let d = db();
    let files = hfiles(&d.path().join("db"));
    std::fs::remove_file(&files[0]).unwrap();
    let mut bytes = std::fs::read(&files[1]).unwrap();
    bytes.extend_from_slice(&[0; 7]);
    std::fs::write(&files[1], bytes).unwrap();
    let orphan = files[2].with_file_name("999999.hfile");
    std::fs::copy(&files[2], &orphan).unwrap();
    let r = cellar(&["verify", "db", "--format", "json"], d.path());
    assert_eq!(r.code, 1, "{}{}", r.stdout, r.stderr);
    let v = json(&r);
    let problems: Vec<&str> = v["problems"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["what"].as_str().unwrap())
        .collect();
    assert!(
        problems.iter().any(|p| p.contains("but missing")),
        "{problems:?}"
    );
    assert!(
        problems
            .iter()
            .any(|p| p.contains("but the manifest recorded")),
        "{problems:?}"
    );
    let warnings = v["warnings"].to_string();
    assert!(warnings.contains("999999.hfile"), "{warnings}");
}

#[test]
fn verify_reports_wal_and_manifest_damage() {
    // A flipped byte in the first of two WAL records: damage followed by a record is not a
    // torn tail once a later record attests a sync past it... or it is, when nothing was
    // synced; either way verify says what recovery would do and never panics.
    let d = db();
    let v = json(&cellar(&["wal-dump", "db", "--format", "json"], d.path()));
    let first = v["records"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["live"] == true && r["kind"] == "BATCH")
        .unwrap()
        .clone();
    let seg = d
        .path()
        .join("db")
        .join("wal")
        .join(format!("{:020}.wal2", first["segment"].as_u64().unwrap()));
    assert_eq!(first["format"], "v2");
    let mut bytes = std::fs::read(&seg).unwrap();
    // The last byte of its payload.
    let at = (first["offset"].as_u64().unwrap() + first["len"].as_u64().unwrap()) as usize - 1;
    bytes[at] ^= 0xff;
    std::fs::write(&seg, bytes).unwrap();
    let r = cellar(&["verify", "db", "--format", "json"], d.path());
    let v = json(&r);
    let status = v["wal"]["status"].as_str().unwrap();
    assert!(status == "corrupt" || status == "torn_tail", "{v}");
    assert_eq!(r.code, if status == "corrupt" { 1 } else { 0 });
    let r = cellar(&["wal-dump", "db"], d.path());
    assert!(r.stdout.contains("damage:"), "{}", r.stdout);

    // The manifest: a damaged first record (valid ones follow) is corruption.
    let d = db();
    let m = std::fs::read_to_string(d.path().join("db/CURRENT")).unwrap();
    let mpath = d.path().join("db").join(m.trim());
    let mut bytes = std::fs::read(&mpath).unwrap();
    bytes[30] ^= 0xff;
    std::fs::write(&mpath, bytes).unwrap();
    for tool in ["verify", "manifest-dump", "levels"] {
        let r = cellar(&[tool, "db"], d.path());
        assert_eq!(r.code, 1, "{tool}: {}{}", r.stdout, r.stderr);
    }
}

#[test]
fn usage_and_io_errors_exit_2() {
    let d = tempfile::tempdir().unwrap();
    std::fs::create_dir(d.path().join("empty")).unwrap();
    for args in [
        &["verify", "missing"][..],
        &["verify", "empty"],
        &["levels", "empty"],
        &["manifest-dump", "empty"],
        &["wal-dump", "missing"],
        &["compact", "missing"],
        &["compact", "empty", "--table", "t"],
    ] {
        let r = cellar(args, d.path());
        assert_eq!(r.code, 2, "{args:?}: {}{}", r.stdout, r.stderr);
        assert!(!r.stderr.contains("panicked"), "{}", r.stderr);
    }
}

#[test]
fn compact_major_moves_everything_to_the_last_level() {
    let d = db();
    let r = cellar(&["compact", "db", "--major", "--format", "json"], d.path());
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    let v = json(&r);
    assert_eq!(v["ok"], true);
    assert_eq!(v["mode"], "major");
    assert_eq!(v["tables"].as_array().unwrap().len(), 2);
    let after = v["after"].as_array().unwrap();
    let last = after.last().unwrap();
    assert!(last["files"].as_u64().unwrap() >= 3, "{v}");
    assert!(
        after[..after.len() - 1].iter().all(|l| l["files"] == 0),
        "{v}"
    );
    let lv = json(&cellar(&["levels", "db", "--format", "json"], d.path()));
    let t = lv["tables"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["table"] == "t")
        .unwrap()
        .clone();
    assert_eq!(t["families"][0]["levels"][0]["level"], 6);
    // 40 versions (rows 10..19 have two; VERSIONS is 3); the Delete masked row005's
    // only version, and major compaction dropped both.
    assert_eq!(t["families"][0]["entries"], 39, "{t}");
    assert_eq!(cellar(&["verify", "db"], d.path()).code, 0);

    // One table, one family; then the picker's due compactions.
    let r = cellar(
        &[
            "compact", "db", "--major", "--table", "t", "--family", "meta",
        ],
        d.path(),
    );
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert!(r.stdout.contains("Compacted db (major: t)"), "{}", r.stdout);
    let r = cellar(&["compact", "db"], d.path());
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
}

#[test]
fn compact_of_a_database_in_use_is_refused() {
    let d = db();
    let db = Db::open(d.path().join("db"), Options::default()).unwrap();
    let r = cellar(&["compact", "db"], d.path());
    assert_eq!(r.code, 2, "{}{}", r.stdout, r.stderr);
    assert!(r.stderr.contains("locked"), "{}", r.stderr);
    // The read-only tools work beside it.
    assert_eq!(cellar(&["levels", "db"], d.path()).code, 0);
    drop(db);
}

#[test]
fn checkpoint_makes_a_database_that_verifies_and_reads_the_same() {
    let d = db();
    let r = cellar(&["checkpoint", "db", "cp", "--format", "json"], d.path());
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    let v = json(&r);
    assert_eq!(v["ok"], true);
    assert!(v["linked_files"].as_u64().unwrap() >= 3, "{v}");
    assert_eq!(v["copied_files"], 0, "{v}");
    assert_eq!(cellar(&["verify", "cp"], d.path()).code, 0);
    assert_eq!(cellar(&["verify", "db"], d.path()).code, 0);
    // The same rows through the engine, the unflushed ones (binary row, delete) included.
    let rows = |dir: &str| {
        let db = Db::open(d.path().join(dir), Options::default()).unwrap();
        let out: Vec<_> = ["t", "ns:u"]
            .iter()
            .map(|t| {
                db.table(t)
                    .unwrap()
                    .scan(cellar::Scan::new().raw())
                    .unwrap()
                    .collect::<Result<Vec<_>, _>>()
                    .unwrap()
            })
            .collect();
        db.close().unwrap();
        out
    };
    let cp = rows("cp");
    assert_eq!(cp, rows("db"));
    assert!(cp[0].iter().any(|r| r.key == b"\x00bin\xff"), "{cp:?}");
    // A second checkpoint into the same place is refused.
    let r = cellar(&["checkpoint", "db", "cp"], d.path());
    assert_eq!(r.code, 2, "{}{}", r.stdout, r.stderr);
    assert!(r.stderr.contains("already exists"), "{}", r.stderr);
}

#[test]
fn backup_create_list_verify_restore_and_purge() {
    let d = db();
    for _ in 0..2 {
        let r = cellar(&["backup", "create", "db", "bk"], d.path());
        assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    }
    let v = json(&cellar(
        &["backup", "list", "bk", "--format", "json"],
        d.path(),
    ));
    let list = v["backups"].as_array().unwrap();
    assert_eq!(list.len(), 2, "{v}");
    assert!(list[0]["files"].as_u64().unwrap() >= 5, "{v}");
    assert_eq!(cellar(&["backup", "verify", "bk"], d.path()).code, 0);

    // A flipped byte in a shared HFile: verify and restore exit 1.
    let shared = d.path().join("bk/shared");
    let f = std::fs::read_dir(&shared)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let good = std::fs::read(&f).unwrap();
    let mut bad = good.clone();
    bad[10] ^= 1;
    std::fs::write(&f, &bad).unwrap();
    let r = cellar(&["backup", "verify", "bk", "--id", "1"], d.path());
    assert_eq!(r.code, 1, "{}{}", r.stdout, r.stderr);
    let r = cellar(&["backup", "restore", "bk", "bad"], d.path());
    assert_eq!(r.code, 1, "{}{}", r.stdout, r.stderr);
    std::fs::write(&f, &good).unwrap();

    let r = cellar(
        &["backup", "restore", "bk", "restored", "--id", "2"],
        d.path(),
    );
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert_eq!(cellar(&["verify", "restored"], d.path()).code, 0);
    let count = |dir: &str| {
        let db = Db::open(d.path().join(dir), Options::default()).unwrap();
        let n = db
            .table("t")
            .unwrap()
            .scan(cellar::Scan::new().raw())
            .unwrap()
            .count();
        db.close().unwrap();
        n
    };
    assert_eq!(count("restored"), count("db"));

    let v = json(&cellar(
        &["backup", "purge", "bk", "--keep", "1", "--format", "json"],
        d.path(),
    ));
    assert_eq!(v["removed_backups"], serde_json::json!([1]), "{v}");
    assert_eq!(v["backups"].as_array().unwrap().len(), 1, "{v}");
    assert_eq!(cellar(&["backup", "verify", "bk"], d.path()).code, 0);
}

#[test]
fn verify_checks_each_file_against_its_recorded_checksum() {
    // Two builds of the same database: their files hold the same cells but differ in their
    // creation time, so a file of one put in the other passes every format check, has the
    // recorded size and cell count, and only its checksum tells.
    let d = db();
    std::thread::sleep(std::time::Duration::from_millis(5));
    let other = db();
    assert_eq!(cellar(&["verify", "db"], d.path()).code, 0);
    let mine = hfiles(&d.path().join("db"));
    let theirs = hfiles(&other.path().join("db"));
    let (a, b) = mine
        .iter()
        .zip(&theirs)
        .find(|(a, b)| {
            a.file_name() == b.file_name()
                && std::fs::metadata(a).unwrap().len() == std::fs::metadata(b).unwrap().len()
                && std::fs::read(a).unwrap() != std::fs::read(b).unwrap()
        })
        .expect("a file of the same name and size, with other bytes");
    std::fs::copy(b, a).unwrap();
    let r = cellar(&["verify", "db"], d.path());
    assert_eq!(r.code, 1, "{}{}", r.stdout, r.stderr);
    assert!(
        r.stdout.contains("but the manifest recorded"),
        "{}",
        r.stdout
    );
    assert!(r.stdout.contains("CRC-32C"), "{}", r.stdout);
}

/// `find` lists a row's cells in each file whose key range holds it (with sequence numbers and
/// the bloom filter's word) and in each WAL record that writes it; `--table` narrows it; the
/// directory is not changed.
#[test]
fn find_shows_a_rows_cells_in_files_and_the_wal() {
    let d = db();
    let before = listing(&d.path().join("db"));
    let r = cellar(&["find", "db", "row005"], d.path());
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.contains("t/cf L0 data/"), "{}", r.stdout);
    assert!(
        r.stdout.contains("row005/cf:q/105/Put/seqid="),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout.contains("bloom filter says maybe present"),
        "{}",
        r.stdout
    );
    assert!(r.stdout.contains("cf:q/105/Delete"), "{}", r.stdout);

    let v = json(&cellar(
        &["find", "db", "row005", "--format", "json"],
        d.path(),
    ));
    let files = v["files"].as_array().unwrap();
    // The first flush (row000..row019) holds row005; the second (row010..) does not.
    assert_eq!(files.len(), 1, "{v}");
    assert_eq!(files[0]["table"], "t");
    assert_eq!(files[0]["family"], "cf");
    assert_eq!(files[0]["cells"][0]["value"], "value");
    assert_eq!(files[0]["cells"][0]["timestamp"], 105);
    let wal = v["wal"].as_array().unwrap();
    assert_eq!(wal.len(), 1, "{v}");
    assert_eq!(wal[0]["live"], true);
    assert_eq!(wal[0]["cells"][0]["type"], "Delete");
    assert!(wal[0]["seq"].as_u64().unwrap() > files[0]["cells"][0]["seq"].as_u64().unwrap());

    // In both flushed files, newest first; a binary row by its escapes, from the WAL only.
    let v = json(&cellar(
        &["find", "db", "row015", "--format", "json"],
        d.path(),
    ));
    let values: Vec<&str> = v["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["cells"][0]["value"].as_str().unwrap())
        .collect();
    assert_eq!(values, ["newer", "value"], "{v}");
    let v = json(&cellar(
        &["find", "db", "\\x00bin\\xFF", "--format", "json"],
        d.path(),
    ));
    assert_eq!(v["files"].as_array().unwrap().len(), 0, "{v}");
    assert_eq!(v["wal"][0]["cells"][0]["column"], "meta:k", "{v}");
    // Another table's files and records only.
    let v = json(&cellar(
        &[
            "find", "db", "row005", "--table", "ns:u", "--format", "json",
        ],
        d.path(),
    ));
    assert_eq!(v["files"].as_array().unwrap().len(), 0, "{v}");
    assert_eq!(v["wal"].as_array().unwrap().len(), 0, "{v}");
    assert_eq!(listing(&d.path().join("db")), before);
}

/// `cellar hfile build --family cf` of the TSV text `tsv` into `out` in `dir`, which must work.
fn build_from_tsv(dir: &Path, tsv: &str, out: &str, extra: &[&str]) -> Run {
    let input = format!("{out}.tsv");
    std::fs::write(dir.join(&input), tsv).unwrap();
    let mut args = vec!["hfile", "build", "--family", "cf", "--out", out];
    args.extend_from_slice(extra);
    args.push(&input);
    let r = cellar(&args, dir);
    assert_eq!(r.code, 0, "{}", r.stderr);
    r
}

/// The JSON lines of `cellar shell --db db --format json -e COMMANDS` run in `dir`.
fn shell_json(dir: &Path, commands: &str) -> Vec<Value> {
    let sh = cellar(
        &["shell", "--db", "db", "--format", "json", "-e", commands],
        dir,
    );
    assert_eq!(sh.code, 0, "{}", sh.stderr);
    sh.stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn ingest_loads_a_built_hfile_that_the_shell_then_reads() {
    let d = db();
    let dir = d.path().join("db");
    let tsv = "row011\tcf:q\t500\tPut\tloaded\nrow011\tcf:q\t500\tPut\tloaded-again\n\
               zz1\tcf:r\t7\tPut\tfresh\nrow012\tcf:\t900\tDeleteFamily\t\n";
    build_from_tsv(d.path(), tsv, "load.hfile", &[]);

    let r = cellar(
        &["ingest", "db", "t", "cf", "load.hfile", "--format", "json"],
        d.path(),
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    let doc = json(&r);
    assert_eq!(doc["ok"], true);
    let f = &doc["loaded"][0];
    assert_eq!(
        (f["cells"].as_u64(), f["duplicates"].as_u64()),
        (Some(4), Some(1))
    );
    assert_eq!(f["as_is"], false, "rows holding data: rewritten");
    // The database's files hold rows 000..029: the load goes above them.
    assert!(f["level"].as_u64().unwrap() < 6, "{doc}");
    assert!(d.path().join("load.hfile").exists(), "the source is left");

    let lines = shell_json(
        d.path(),
        "get 't', 'row011'; get 't', 'row012'; get 't', 'zz1'",
    );
    assert_eq!(
        lines[0]["cells"][0]["value"], "loaded-again",
        "the later line wins"
    );
    assert_eq!(lines[0]["cells"][0]["timestamp"], 500);
    assert_eq!(lines[1]["rows"], 0, "the loaded DeleteFamily masks the row");
    assert_eq!(lines[2]["cells"][0]["value"], "fresh");

    let text = cellar(&["ingest", "db", "t", "cf", "load.hfile"], d.path());
    assert_eq!(text.code, 0, "{}", text.stderr);
    assert!(
        text.stdout.starts_with("Ingested 1 file(s) into t:cf"),
        "{}",
        text.stdout
    );
    assert!(text.stdout.contains("SOURCE"), "{}", text.stdout);
    // Built at seq 0 into rows holding nothing: loaded as it is, the last duplicate line kept.
    let fresh = "new1\tcf:q\t5\tPut\tfirst\nnew1\tcf:q\t5\tPut\tlast\nnew2\tcf:q\t5\tPut\tx\n";
    let built = build_from_tsv(d.path(), fresh, "fresh.hfile", &["--seq-zero"]);
    assert!(built.stdout.contains("2 (Put 2)"), "{}", built.stdout);
    let r = cellar(
        &["ingest", "db", "t", "cf", "fresh.hfile", "--format", "json"],
        d.path(),
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    let doc = json(&r);
    assert_eq!(doc["loaded"][0]["as_is"], true, "{doc}");
    assert_eq!(doc["loaded"][0]["level"], 6, "{doc}");
    let lines = shell_json(d.path(), "get 't', 'new1'");
    assert_eq!(lines[0]["cells"][0]["value"], "last");
    std::fs::copy(d.path().join("load.hfile"), d.path().join("given.hfile")).unwrap();
    let r = cellar(
        &["ingest", "db", "t", "cf", "given.hfile", "--move"],
        d.path(),
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        !d.path().join("given.hfile").exists(),
        "--move takes the file over"
    );

    // Refusals: another family (exit 2), a damaged file (exit 1); nothing changes.
    let before = listing(&dir);
    let r = cellar(&["ingest", "db", "t", "meta", "load.hfile"], d.path());
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("not \"meta\""), "{}", r.stderr);
    let mut bytes = std::fs::read(d.path().join("load.hfile")).unwrap();
    bytes[40] ^= 0x01;
    std::fs::write(d.path().join("bad.hfile"), bytes).unwrap();
    let r = cellar(&["ingest", "db", "t", "cf", "bad.hfile"], d.path());
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(
        r.stderr.contains("refusing to ingest a damaged HFile"),
        "{}",
        r.stderr
    );
    assert!(
        r.stderr.contains("hfile-verify lists them"),
        "the verifier's pass: {}",
        r.stderr
    );
    let r = cellar(
        &["ingest", "db", "t", "cf", "bad.hfile", "--no-verify"],
        d.path(),
    );
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(
        r.stderr.contains("refusing to ingest a damaged HFile"),
        "{}",
        r.stderr
    );
    let r = cellar(&["ingest", "db", "t", "cf"], d.path());
    assert_eq!(r.code, 2, "no files: {}", r.stderr);
    let after = listing(&dir);
    let data = |l: &[(String, Vec<u8>)]| -> Vec<String> {
        l.iter()
            .filter(|(n, _)| n.ends_with(".hfile"))
            .map(|(n, _)| n.clone())
            .collect()
    };
    assert_eq!(data(&after), data(&before));
    assert_eq!(cellar(&["verify", "db"], d.path()).code, 0);
}

/// `cellar verify` checks every table snapshot: its descriptor, and each file against the
/// size and CRC-32C the descriptor recorded; a snapshot cut short is only a warning.
#[test]
fn verify_checks_table_snapshots() {
    let d = db();
    let dir = d.path().join("db");
    {
        let db = Db::open(&dir, Options::default()).unwrap();
        db.snapshot_table("t", "s1").unwrap();
        // Replaced by the compaction, the table's files live on only in the snapshot.
        db.major_compact("t", None).unwrap();
    }
    let r = cellar(&["verify", "db"], d.path());
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert!(
        r.stdout.contains("table snapshot s1 of t: ok ("),
        "{}",
        r.stdout
    );
    // `cellar levels` lists it, and the bytes only it keeps: all of them, after the
    // compaction replaced the table's files.
    let v = json(&cellar(&["levels", "db", "--format", "json"], d.path()));
    let snap = &v["snapshots"][0];
    assert_eq!(snap["name"], "s1");
    assert_eq!(snap["table"], "t");
    assert!(snap["bytes"].as_u64().unwrap() > 0);
    assert_eq!(snap["exclusive_bytes"], snap["bytes"]);
    let r = cellar(&["levels", "db"], d.path());
    assert!(r.stdout.contains("Table snapshots: 1\n"), "{}", r.stdout);
    assert!(r.stdout.contains("ONLY IN SNAPSHOT"), "{}", r.stdout);
    // A snapshot cut short: a warning.
    std::fs::create_dir_all(dir.join("snapshots/half/data")).unwrap();
    let r = cellar(&["levels", "db"], d.path());
    assert!(
        r.stdout
            .contains("warning: table snapshot half was cut short"),
        "{}",
        r.stdout
    );
    let v = json(&cellar(&["verify", "db", "--format", "json"], d.path()));
    assert_eq!(v["exit_code"], 0, "{v}");
    assert_eq!(v["snapshots"][0]["name"], "half");
    assert_eq!(v["snapshots"][0]["status"], "incomplete");
    assert_eq!(v["snapshots"][1]["status"], "ok");
    std::fs::remove_dir_all(dir.join("snapshots/half")).unwrap();

    // A damaged byte in one of the snapshot's files (no longer the table's).
    let files: Vec<_> = std::fs::read_dir(dir.join("snapshots/s1/data"))
        .unwrap()
        .flat_map(|f| std::fs::read_dir(f.unwrap().path()).unwrap())
        .map(|f| f.unwrap().path())
        .collect();
    assert!(!files.is_empty());
    let mut bytes = std::fs::read(&files[0]).unwrap();
    let keep = bytes.clone();
    bytes[30] ^= 0x01;
    std::fs::write(&files[0], &bytes).unwrap();
    let r = cellar(&["verify", "db"], d.path());
    assert_eq!(r.code, 1, "{}{}", r.stdout, r.stderr);
    assert!(
        r.stdout.contains("table snapshot s1: CRC-32C "),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout.contains("table snapshot s1 of t: corrupt"),
        "{}",
        r.stdout
    );
    std::fs::write(&files[0], &keep).unwrap();

    // A damaged descriptor.
    let desc = dir.join("snapshots/s1/SNAPSHOT");
    let mut bytes = std::fs::read(&desc).unwrap();
    bytes[40] ^= 0x01;
    std::fs::write(&desc, &bytes).unwrap();
    let v = json(&cellar(&["verify", "db", "--format", "json"], d.path()));
    assert_eq!(v["exit_code"], 1, "{v}");
    assert_eq!(v["snapshots"][0]["status"], "corrupt");
    assert_eq!(v["problems"][0]["file"], "snapshots/s1/SNAPSHOT");
}

/// Segments kept for change feeds (`WalOptions::retain_bytes`): `wal-dump --since` shows what a
/// feed would hand out, `verify` reads them as one chain with the live log and reports damage
/// in them.
/// `cellar verify` reads the feed slots: each with its position and what it holds; a slot
/// whose segment is gone and a damaged `FEED_SLOTS` are problems (exit 1).
#[test]
fn feed_slots_are_verified() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("db");
    let mut opts = Options::default();
    opts.wal.segment_size = 16 << 10;
    let db = Db::open(&dir, opts).unwrap();
    db.create_table(TableDescriptor::new("t").family(FamilyDescriptor::new("cf")))
        .unwrap();
    db.create_feed_slot("early", db.flushed_seq()).unwrap();
    let t = db.table("t").unwrap();
    for i in 0..300u64 {
        t.put(Put::new(format!("row{i:04}")).add_at("cf", "q", i, "v".repeat(100)))
            .unwrap();
    }
    db.flush().unwrap();
    db.create_feed_slot("late", db.flushed_seq()).unwrap();
    let slots = db.feed_slots().unwrap();
    drop(t);
    db.close().unwrap();

    let v = json(&cellar(&["verify", "db", "--format", "json"], d.path()));
    assert_eq!(v["exit_code"], 0, "{v}");
    let got = v["feed_slots"].as_array().unwrap();
    assert_eq!(got.len(), 2, "{v}");
    for (g, s) in got.iter().zip(&slots) {
        assert_eq!(g["name"], s.name.as_str());
        assert_eq!(g["status"], "ok");
        assert_eq!(g["acked"], s.acked);
        assert_eq!(g["segment"], s.segment);
    }
    assert!(
        got[0]["held_bytes"].as_u64().unwrap() >= 3 * (16 << 10),
        "{v}"
    );
    assert_eq!(
        v["retained_wal"]["status"], "ok",
        "the held segments are read: {v}"
    );

    let early = slots[0].segment;
    let seg = dir.join("wal").join(cellar::wal::segment_file_name(early));
    std::fs::remove_file(seg).unwrap();
    let r = cellar(&["verify", "db", "--format", "json"], d.path());
    let v = json(&r);
    assert_eq!(r.code, 1, "{v}");
    assert_eq!(v["feed_slots"][0]["status"], "missing_segment", "{v}");
    assert_eq!(v["feed_slots"][1]["status"], "ok", "{v}");

    let file = dir.join(cellar::FEED_SLOTS);
    let mut bytes = std::fs::read(&file).unwrap();
    bytes[10] ^= 1;
    std::fs::write(&file, bytes).unwrap();
    let r = cellar(&["verify", "db"], d.path());
    assert_eq!(r.code, 1);
    assert!(
        r.stdout.contains("FEED_SLOTS:0: corruption"),
        "{}",
        r.stdout
    );
}

#[test]
fn retained_wal_segments_are_dumped_since_a_seq_and_verified() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("db");
    let mut opts = Options::default();
    opts.wal.segment_size = 16 << 10;
    opts.wal.retain_bytes = u64::MAX;
    let db = Db::open(&dir, opts).unwrap();
    db.create_table(TableDescriptor::new("t").family(FamilyDescriptor::new("cf")))
        .unwrap();
    let t = db.table("t").unwrap();
    let seqs: Vec<u64> = (0..300u64)
        .map(|i| {
            t.put(Put::new(format!("row{i:04}")).add_at("cf", "q", i, "v".repeat(100)))
                .unwrap()
        })
        .collect();
    db.flush().unwrap();
    drop(t);
    db.close().unwrap();

    let v = json(&cellar(&["verify", "db", "--format", "json"], d.path()));
    assert_eq!(v["exit_code"], 0, "{v}");
    assert_eq!(v["retained_wal"]["status"], "ok", "{v}");
    // The puts and the table's creation (a schema record, SPEC.md §16.10).
    assert_eq!(v["retained_wal"]["records"], 301, "{v}");
    let v = json(&cellar(&["wal-dump", "db", "--format", "json"], d.path()));
    let first = v["records"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["kind"] == "BATCH")
        .unwrap();
    assert_eq!(first["mutations"][0]["column"], "schema:table", "{first}");
    assert_eq!(first["mutations"][0]["row"], "t", "{first}");
    let since = seqs[249];
    let v = json(&cellar(
        &[
            "wal-dump",
            "db",
            "--format",
            "json",
            "--since",
            &since.to_string(),
        ],
        d.path(),
    ));
    let got: Vec<u64> = v["records"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["seq"].as_u64().unwrap())
        .collect();
    assert_eq!(got, seqs[250..], "{v}");

    // A byte of a record in the oldest retained segment.
    let oldest = std::fs::read_dir(dir.join("wal"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "wal2"))
        .min()
        .unwrap();
    let mut bytes = std::fs::read(&oldest).unwrap();
    bytes[100] ^= 0x40;
    std::fs::write(&oldest, bytes).unwrap();
    let r = cellar(&["verify", "db", "--format", "json"], d.path());
    let v = json(&r);
    assert_eq!(r.code, 1, "{v}");
    assert_eq!(v["retained_wal"]["status"], "corrupt", "{v}");
    assert_eq!(v["wal"]["status"], "ok", "the live log is whole: {v}");
    let r = cellar(&["verify", "db"], d.path());
    assert!(r.stdout.contains("retained WAL"), "{}", r.stdout);
}

/// `cellar export` writes a row range as one HFile per family; `cellar ingest` loads them into
/// another database, whose shell then reads the range (and only it) as the source's does.
#[test]
fn export_writes_a_range_that_ingest_loads_elsewhere() {
    let d = db();
    let r = cellar(
        &[
            "export", "db", "t", "out", "--start", "row012", "--stop", "row025", "--format", "json",
        ],
        d.path(),
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    let v = json(&r);
    assert_eq!(v["ok"], true);
    assert!(v["seq"].as_u64().unwrap() > 0);
    let files = v["files"].as_array().unwrap();
    assert_eq!(files.len(), 1, "only family cf has rows in the range: {v}");
    assert_eq!(files[0]["family"], "cf");
    let path = files[0]["path"].as_str().unwrap().to_owned();

    // Another database with the same table.
    let other = d.path().join("other");
    let db = Db::open(&other, Options::default()).unwrap();
    db.create_table(
        TableDescriptor::new("t")
            .family(FamilyDescriptor::new("cf"))
            .family(FamilyDescriptor::new("meta")),
    )
    .unwrap();
    drop(db);
    let r = cellar(&["ingest", "other", "t", "cf", &path], d.path());
    assert_eq!(r.code, 0, "{}", r.stderr);
    let scan = "scan 't', {VERSIONS => 5}";
    let range = "scan 't', {STARTROW => 'row012', STOPROW => 'row025', VERSIONS => 5}";
    let src = shell_json(d.path(), range);
    let sh = cellar(
        &["shell", "--db", "other", "--format", "json", "-e", scan],
        d.path(),
    );
    assert_eq!(sh.code, 0, "{}", sh.stderr);
    let dst: Value = serde_json::from_str(sh.stdout.lines().next().unwrap()).unwrap();
    assert_eq!(dst["rows"], 13);
    assert_eq!(dst, src[0]);

    // The output directory exists now: refused, exit 2.
    let r = cellar(&["export", "db", "t", "out"], d.path());
    assert_eq!(r.code, 2, "{}{}", r.stdout, r.stderr);
}
