//! Real crash test: this test binary re-executes itself as a child process that appends
//! records from 4 threads and prints every acknowledged seq; the parent SIGKILLs it
//! mid-stream, then replays the directory. Every acknowledged seq must be present and the
//! recovered seqs must be a gap-free prefix 1..=R. Run for both devices, with `FsyncWal`
//! records, and with `SyncWal` records (copied into the segment through a memory map) among
//! which every 50th is `FsyncWal` (written by the device).
//!
//! SIGKILL leaves the page cache intact, so this checks the process-crash half of the contract
//! (and that the WAL never acknowledges before its write completed); power loss needs the
//! simulated file system.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use cellar::fs::RealFs;
use cellar::wal::{replay, BackendKind, Durability, RecoveryMode, Wal, WalOptions};

const CHILD_DIR: &str = "CELLAR_WAL_CRASH_CHILD_DIR";
const CHILD_BACKEND: &str = "CELLAR_WAL_CRASH_CHILD_BACKEND";
/// `fsync` (every record `FsyncWal`) or `mixed` (`SyncWal`, every 50th `FsyncWal`).
const CHILD_DURABILITY: &str = "CELLAR_WAL_CRASH_CHILD_DURABILITY";

/// Child mode only (does nothing in a normal test run).
#[test]
fn crash_child() {
    let Ok(dir) = std::env::var(CHILD_DIR) else {
        return;
    };
    let backend = match std::env::var(CHILD_BACKEND).as_deref() {
        Ok("io_uring") => BackendKind::IoUring,
        _ => BackendKind::Sync,
    };
    let mixed = std::env::var(CHILD_DURABILITY).as_deref() == Ok("mixed");
    let opts = WalOptions {
        // Small segments so the kill also lands around rolls.
        segment_size: 64 << 10,
        backend,
        mapped_writes: true,
        ..WalOptions::default()
    };
    let wal = Arc::new(Wal::open(Arc::new(RealFs), Path::new(&dir), opts, 1).unwrap());
    // Leading newline: libtest has already printed "test crash_child ... " on this line.
    writeln!(
        std::io::stdout().lock(),
        "\nBACKEND {}",
        wal.stats().backend
    )
    .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let threads: Vec<_> = (0..4u32)
        .map(|t| {
            let wal = wal.clone();
            std::thread::spawn(move || {
                let mut i = 0u64;
                // Bounded so an orphaned child cannot run forever.
                while Instant::now() < deadline {
                    let payload = format!("t{t}-i{i}-{}", "x".repeat((i % 200) as usize));
                    let d = if mixed && i % 50 != 0 {
                        Durability::SyncWal
                    } else {
                        Durability::FsyncWal
                    };
                    let seq = wal.append(payload.as_bytes(), d).unwrap();
                    // Bypasses libtest's output capture; one write per line.
                    let mut out = std::io::stdout().lock();
                    writeln!(out, "ACK {seq} {t} {i}").unwrap();
                    if i % 20 == 19 {
                        writeln!(out, "MAPPED {}", wal.stats().mapped_groups).unwrap();
                    }
                    i += 1;
                }
            })
        })
        .collect();
    for t in threads {
        let _ = t.join();
    }
}

fn crash_once(backend: &str, durability: &str, kill_after: usize) {
    let dir = tempfile::tempdir().unwrap();
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "crash_child",
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .env(CHILD_DIR, dir.path())
        .env(CHILD_BACKEND, backend)
        .env(CHILD_DURABILITY, durability)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut acked: BTreeMap<u64, (u32, u64)> = BTreeMap::new();
    let mut ran = String::new();
    let mut mapped = 0u64;
    let t0 = Instant::now();
    let mut parse = |line: &str, acked: &mut BTreeMap<u64, (u32, u64)>, ran: &mut String| {
        let f: Vec<&str> = line.split_whitespace().collect();
        match f.as_slice() {
            ["ACK", seq, t, i] => {
                let prev = acked.insert(
                    seq.parse().unwrap(),
                    (t.parse().unwrap(), i.parse().unwrap()),
                );
                assert!(prev.is_none(), "seq {seq} acknowledged twice");
            }
            ["BACKEND", b] => *ran = b.to_string(),
            ["MAPPED", n] => mapped = mapped.max(n.parse().unwrap()),
            _ => {}
        }
    };
    for line in lines.by_ref() {
        parse(&line.unwrap(), &mut acked, &mut ran);
        if acked.len() >= kill_after {
            break;
        }
        assert!(t0.elapsed() < Duration::from_secs(20), "child too slow");
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    // Acks printed before the kill are acknowledgements too.
    for line in lines.map_while(Result::ok) {
        parse(&line, &mut acked, &mut ran);
    }
    assert_eq!(ran, backend, "the child ran another backend");
    assert!(acked.len() >= kill_after, "child exited early");
    if durability == "mixed" {
        assert!(mapped > 0, "no group was copied through a map");
    }

    let mut recovered = Vec::new();
    let summary = replay(
        &RealFs,
        dir.path(),
        0,
        RecoveryMode::TolerateTornTail,
        |seq, p, _| {
            recovered.push((seq, String::from_utf8(p.to_vec()).unwrap()));
            Ok(())
        },
    )
    .unwrap();
    let r = recovered.len() as u64;
    assert!(
        recovered
            .iter()
            .enumerate()
            .all(|(i, (s, _))| *s == i as u64 + 1),
        "recovered seqs are not a gap-free prefix"
    );
    for (seq, (t, i)) in &acked {
        assert!(*seq <= r, "acknowledged seq {seq} lost (recovered 1..={r})");
        let (_, payload) = &recovered[*seq as usize - 1];
        assert!(
            payload.starts_with(&format!("t{t}-i{i}-")),
            "seq {seq} has the wrong payload"
        );
    }
    eprintln!(
        "{backend} {durability}: {} acked ({mapped} groups mapped), {r} recovered over {} segments, torn tail: {:?}",
        acked.len(),
        summary.segments.len(),
        summary.torn_tail
    );

    // The log stays usable: reopen (cuts any torn tail), append, and replay strictly.
    let w = Wal::open(Arc::new(RealFs), dir.path(), WalOptions::default(), r + 1).unwrap();
    assert_eq!(
        w.append(b"after crash", Durability::FsyncWal).unwrap(),
        r + 1
    );
    w.close().unwrap();
    let mut n = 0;
    replay(&RealFs, dir.path(), 0, RecoveryMode::Strict, |_, _, _| {
        n += 1;
        Ok(())
    })
    .unwrap();
    assert_eq!(n, r + 1);
}

#[test]
fn sigkill_loses_no_acknowledged_record_sync_backend() {
    for kill_after in [200, 500, 1200] {
        crash_once("sync", "fsync", kill_after);
    }
}

/// SIGKILL leaves the page cache, so `SyncWal` acknowledgements survive it too, whether the
/// group was copied through a map or written by the device.
#[test]
fn sigkill_loses_no_acknowledged_sync_wal_record() {
    for kill_after in [500, 5_000, 30_000] {
        crash_once("sync", "mixed", kill_after);
    }
}

#[test]
fn sigkill_loses_no_acknowledged_record_io_uring() {
    #[cfg(target_os = "linux")]
    if cellar::wal::UringDevice::new().is_err() {
        eprintln!("io_uring unavailable here; skipped");
        return;
    }
    #[cfg(not(target_os = "linux"))]
    return;
    #[allow(unreachable_code)]
    for kill_after in [200, 500, 1200] {
        crash_once("io_uring", "fsync", kill_after);
    }
    for kill_after in [500, 30_000] {
        crash_once("io_uring", "mixed", kill_after);
    }
}
