//! A short seeded slice of the SIGKILL crash harness (`cellar_tools::crash`): the parent runs
//! here, the children are the real `crash-harness` binary. With the `kill-points` feature
//! (`.ci/run` runs `cargo test -p cellar-tools --features kill-points --test crash_harness`)
//! every named kill point is armed once and must be reached; without it only random kills run.
//! Longer runs: README.md, "Longer runs".

use std::path::Path;

use cellar_tools::crash::{run, HarnessArgs};

#[test]
fn every_kill_point_once_and_ten_random_kills() {
    let with_points = cfg!(feature = "kill-points");
    let args = HarnessArgs {
        dir: None,
        random_kills: 10,
        point_rounds: u64::from(with_points),
        seed: std::env::var("CRASH_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(1),
        min_ms: 50,
        max_ms: 800,
        child_secs: 4,
        max_secs: None,
    };
    let report = run(&args, Path::new(env!("CARGO_BIN_EXE_crash-harness"))).unwrap();
    report.print(&mut std::io::stderr()).unwrap();
    assert!(
        report.violations.is_empty(),
        "violations (seed {}): {:#?}",
        args.seed,
        report.violations
    );
    assert_eq!(report.random_kills, 10);
    assert!(report.acked_checked > 0, "nothing was acknowledged");
    assert!(
        report.snapshots_checked > 0,
        "no table snapshot was checked"
    );
    assert!(
        report.feed_batches_checked > 0,
        "no change feed batch was checked"
    );
    assert!(
        report.slot_batches_checked > 0,
        "no feed slot batch was checked"
    );
    assert!(
        report.range_deletes_acked > 0,
        "no row-range delete was acknowledged"
    );
    assert!(report.alters_acked > 0, "no schema change was acknowledged");
    if with_points {
        assert_eq!(
            report.points_never_hit(),
            Vec::<&str>::new(),
            "kill points armed but never reached"
        );
    }
}
