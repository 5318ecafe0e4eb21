//! Checkpoints under SIGKILL, with real files and the real WAL. The test binary re-executes
//! itself as a child (`checkpoint_crash_child`) that writes two-family rows from two threads,
//! printing `ACK <row>` after each write returned, while its main thread makes checkpoint after
//! checkpoint, printing `BEGIN <i>` before each call and `END <i>` after it returned. The parent
//! SIGKILLs the child at a varied time, so the kill often lands inside a checkpoint, and checks:
//!
//! 1. the source database holds every acknowledged row, whole;
//! 2. a checkpoint whose `END` was printed opens and holds every row acknowledged before its
//!    `BEGIN`, and every row in it is whole (both families, the values its key determines);
//! 3. a checkpoint cut short is absent, refused at open (its `CHECKPOINT-INCOMPLETE` marker),
//!    a directory with nothing in it, or complete as in 2.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use cellar::{Db, FamilyDescriptor, Options, Put, Scan, TableDescriptor};

const ENV_DIR: &str = "CELLAR_CP_CRASH_DIR";
const TABLE: &str = "t";

fn value(key: &str, family: &str) -> String {
    format!("{key}/{family}/{}", "v".repeat(key.len() % 13))
}

/// Child mode only (does nothing in a normal test run).
#[test]
fn checkpoint_crash_child() {
    let Ok(dir) = std::env::var(ENV_DIR) else {
        return;
    };
    let dir = Path::new(&dir);
    let db = Db::open(
        dir.join("db"),
        Options::default().write_buffer_size(128 << 10),
    )
    .unwrap();
    db.create_table(
        TableDescriptor::new(TABLE)
            .family(FamilyDescriptor::new("a"))
            .family(FamilyDescriptor::new("b")),
    )
    .unwrap();
    // Bounded so an orphaned child cannot run forever.
    let deadline = Instant::now() + Duration::from_secs(30);
    for t in 0..2 {
        let table = db.table(TABLE).unwrap();
        std::thread::spawn(move || {
            let mut i = 0u64;
            while Instant::now() < deadline {
                let key = format!("t{t}-{i:07}");
                table
                    .put(Put::new(key.as_str()).add("a", "q", value(&key, "a")).add(
                        "b",
                        "q",
                        value(&key, "b"),
                    ))
                    .unwrap();
                writeln!(std::io::stdout().lock(), "ACK {key}").unwrap();
                i += 1;
            }
        });
    }
    // Leading newline: libtest has already printed "test ... " on this line.
    writeln!(std::io::stdout().lock(), "\nSTART").unwrap();
    let mut i = 0;
    while Instant::now() < deadline {
        writeln!(std::io::stdout().lock(), "BEGIN {i}").unwrap();
        db.checkpoint(dir.join(format!("cp-{i}"))).unwrap();
        writeln!(std::io::stdout().lock(), "END {i}").unwrap();
        i += 1;
    }
}

/// Every row of `dir`'s table, checked whole; `None` if the directory holds no table (an empty
/// database made by the open).
fn rows_of(dir: &Path, what: &str) -> Result<Option<BTreeSet<String>>, cellar::Error> {
    let db = Db::open(dir, Options::default())?;
    if !db.table_exists(TABLE)? {
        return Ok(None);
    }
    let mut out = BTreeSet::new();
    for r in db.table(TABLE)?.scan(Scan::new())? {
        let r = r?;
        let key = String::from_utf8(r.key.clone()).unwrap();
        for f in ["a", "b"] {
            assert_eq!(
                r.value(f, "q"),
                Some(value(&key, f).as_bytes()),
                "{what}: row {key} family {f}"
            );
        }
        out.insert(key);
    }
    Ok(Some(out))
}

#[test]
fn checkpoints_survive_sigkill_whole_or_refused() {
    let exe = std::env::current_exe().unwrap();
    let mut finished = 0;
    let mut cut = 0;
    // Cut-short checkpoints by what was left: absent, refused, empty, complete.
    let mut left = [0u32; 4];
    for (cycle, kill_ms) in [150u64, 230, 310, 390, 470, 550].into_iter().enumerate() {
        let d = tempfile::tempdir().unwrap();
        let mut child = Command::new(&exe)
            .args([
                "--exact",
                "checkpoint_crash_child",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(ENV_DIR, d.path())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let out = child.stdout.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(out).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut acked = BTreeSet::new();
        // For each checkpoint begun: the rows acknowledged before it, and whether it ended.
        let mut cps: BTreeMap<u32, (BTreeSet<String>, bool)> = BTreeMap::new();
        let mut kill_at = None;
        loop {
            if kill_at.is_some_and(|t| Instant::now() >= t) {
                break;
            }
            let Ok(line) = rx.recv_timeout(Duration::from_millis(5)) else {
                continue;
            };
            if line == "START" {
                kill_at = Some(Instant::now() + Duration::from_millis(kill_ms));
            } else if let Some(k) = line.strip_prefix("ACK ") {
                acked.insert(k.to_string());
            } else if let Some(i) = line.strip_prefix("BEGIN ") {
                cps.insert(i.parse().unwrap(), (acked.clone(), false));
            } else if let Some(i) = line.strip_prefix("END ") {
                cps.get_mut(&i.parse().unwrap()).unwrap().1 = true;
            }
        }
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        // Lines written before the kill: more acknowledgements and ends (the reader stops at
        // the pipe's end, so every one is in the channel once it is joined).
        reader.join().unwrap();
        for line in rx.try_iter() {
            if let Some(k) = line.strip_prefix("ACK ") {
                acked.insert(k.to_string());
            } else if let Some(i) = line.strip_prefix("END ") {
                if let Some(c) = cps.get_mut(&i.parse().unwrap()) {
                    c.1 = true;
                }
            }
        }
        assert!(!cps.is_empty(), "cycle {cycle}: no checkpoint began");

        let what = format!("cycle {cycle} (kill after {kill_ms} ms)");
        let src = rows_of(&d.path().join("db"), &what).unwrap().unwrap();
        let lost: Vec<_> = acked.difference(&src).take(3).collect();
        assert!(
            lost.is_empty(),
            "{what}: source lost acknowledged rows {lost:?}"
        );
        for (i, (before, ended)) in &cps {
            let dir = d.path().join(format!("cp-{i}"));
            let what = format!("{what}, checkpoint {i}, ended {ended}");
            if !dir.exists() {
                assert!(!ended, "{what}: gone");
                cut += 1;
                left[0] += 1;
                continue;
            }
            // Without a power loss a directory is never left holding files but neither its
            // marker nor CURRENT (that is what an open would take for a new database).
            let names: BTreeSet<String> = std::fs::read_dir(&dir)
                .unwrap()
                .map(|e| e.unwrap().file_name().into_string().unwrap())
                .collect();
            let bare = names.is_empty();
            assert!(
                bare || names.contains("CURRENT") || names.contains("CHECKPOINT-INCOMPLETE"),
                "{what}: {names:?}"
            );
            match rows_of(&dir, &what) {
                Ok(Some(rows)) => {
                    let lost: Vec<_> = before.difference(&rows).take(3).collect();
                    assert!(
                        lost.is_empty(),
                        "{what}: lost rows acknowledged before it {lost:?}"
                    );
                    if *ended {
                        finished += 1;
                    } else {
                        cut += 1;
                        left[3] += 1;
                    }
                }
                Ok(None) => {
                    assert!(!ended && bare, "{what}: opened empty");
                    cut += 1;
                    left[2] += 1;
                }
                Err(e) => {
                    assert!(!ended, "{what}: a finished checkpoint is refused: {e}");
                    assert!(
                        e.to_string().contains("CHECKPOINT-INCOMPLETE"),
                        "{what}: {e}"
                    );
                    cut += 1;
                    left[1] += 1;
                }
            }
        }
    }
    eprintln!(
        "{finished} finished and {cut} cut-short checkpoints checked (cut short: absent, \
         refused, empty, complete: {left:?})"
    );
    assert!(
        finished > 0 && cut > 0,
        "{finished} finished, {cut} cut short"
    );
}
