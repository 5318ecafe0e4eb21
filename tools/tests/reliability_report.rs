//! `cellar reliability-report` with a budget of a few seconds, as one JSON document: every
//! section ran at least one unit, reports its denominators, and found no violation; the exit
//! code says so. With the `kill-points` feature the crash section has a kill-point histogram,
//! without it it says it was not built with them.

use std::process::Command;

use serde_json::Value;

fn num(v: &Value, path: &str) -> f64 {
    let mut cur = v;
    for k in path.split('.') {
        cur = &cur[k];
    }
    cur.as_f64()
        .unwrap_or_else(|| panic!("{path} is not a number: {cur}"))
}

#[test]
fn tiny_budget_json_report_has_every_section_and_no_violation() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("report.json");
    let status = Command::new(env!("CARGO_BIN_EXE_cellar"))
        .args(["reliability-report", "--budget-secs", "6", "--seed", "3"])
        .args(["--format", "json", "--out"])
        .arg(&out)
        .status()
        .unwrap();
    let text = std::fs::read_to_string(&out).unwrap();
    let v: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"));
    assert_eq!(
        num(&v, "violations"),
        0.0,
        "violations: {}",
        serde_json::to_string_pretty(&[
            &v["crash"]["violation_details"],
            &v["power"]["violation_details"],
            &v["faults"]["violation_details"],
            &v["corruption"]["violation_details"],
        ])
        .unwrap()
    );
    assert_eq!(status.code(), Some(0));

    for k in ["commit", "wal_backend", "note"] {
        assert!(!v[k].as_str().unwrap_or("").is_empty(), "{k} missing");
    }
    assert!(v["note"].as_str().unwrap().contains("evidence, not proof"));
    assert!(num(&v, "machine.cores") >= 1.0);
    assert!(!v["not_exercised"].as_array().unwrap().is_empty());
    assert_eq!(num(&v, "seed"), 3.0);

    for s in ["crash", "power", "faults", "corruption"] {
        assert_eq!(num(&v, &format!("{s}.violations")), 0.0, "{s}");
        assert!(num(&v, &format!("{s}.budget_secs")) > 0.0, "{s}");
    }

    // SIGKILL cycles.
    assert!(num(&v, "crash.process_cycles") >= 1.0);
    assert!(num(&v, "crash.acked_checked") > 0.0);
    let kp = &v["crash"]["kill_points"];
    assert_eq!(kp["built"].as_bool(), Some(cfg!(feature = "kill-points")));
    assert_eq!(num(kp, "declared") as usize, cellar::kill::POINTS.len());
    if cfg!(feature = "kill-points") {
        assert_eq!(
            kp["histogram"].as_object().unwrap().len(),
            cellar::kill::POINTS.len()
        );
    } else {
        assert!(kp["note"]
            .as_str()
            .unwrap()
            .contains("not built with kill-points"));
    }

    // Power losses: every policy ran, each with its own denominators.
    let policies = v["power"]["policies"].as_object().unwrap();
    assert_eq!(policies.len(), 4, "{policies:?}");
    for (name, p) in policies {
        assert!(num(p, "seeds") >= 1.0, "{name}");
        assert!(num(p, "checks") >= 1.0, "{name}");
        assert!(num(p, "recovered") >= num(p, "required"), "{name}");
    }
    assert_eq!(
        num(&v, "power.power_cycles"),
        num(&v, "power.seeds") * num(&v, "power.cycles_per_seed")
    );

    // Fault matrix.
    let runs = num(&v, "faults.runs");
    assert!(runs >= 1.0);
    assert!(num(&v, "faults.planned_runs") >= runs);
    assert_eq!(
        num(&v, "faults.transient_runs") + num(&v, "faults.persistent_runs"),
        runs
    );
    let cells = num(&v, "faults.cells");
    assert!(cells > 0.0 && num(&v, "faults.covered") <= cells);
    assert_eq!(
        v["faults"]["by_cell"].as_object().unwrap().len() as f64,
        cells
    );

    // Corruption: every case is detected, unchanged, wrong or a panic.
    let c = &v["corruption"];
    assert!(num(c, "mutations") >= 1.0 && num(c, "bytes") > 0.0);
    assert_eq!(
        num(c, "detected") + num(c, "unchanged") + num(c, "wrong_results") + num(c, "panics"),
        num(c, "mutations")
    );
    let by_type = c["by_block_type"].as_object().unwrap();
    assert!(by_type.contains_key("hfile.data") && by_type.contains_key("wal.payload"));
    assert_eq!(
        by_type.values().map(|b| num(b, "bytes")).sum::<f64>(),
        num(c, "bytes")
    );
}

#[test]
fn bad_budget_is_a_usage_error() {
    let out = Command::new(env!("CARGO_BIN_EXE_cellar"))
        .args(["reliability-report", "--budget-secs", "0"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--budget-secs"));
}
