//! The fleet dashboard and its recording rules on a real Prometheus holding many nodes:
//! the short form of `scripts/fleet-bench.py` (100 synthetic nodes made from this
//! exporter's own exposition, 2 hours at a 60 s step, backfilled with promtool, the
//! shipped rules backfilled level by level). Every fleet panel's query, its variables at
//! "All", must return data and answer exactly what the same panel answers on raw series
//! (each recorded series replaced by its rule's expression) at the data's end: the rules
//! are checked against Prometheus evaluating the raw series, an oracle they do not share
//! code with. The time series panels must return data over the whole range too. The
//! latency budgets (fleet panel p99 under 1 s, range under 2 s, per-host panel under
//! 200 ms) are the script's; the full-size figures are in docs/fleet.md.

use crate::common;

use common::dashboards;
use serde_json::Value;
use std::path::Path;
use std::process::Command;

#[test]
fn the_fleet_dashboard_answers_from_rules_what_raw_series_answer_at_100_nodes() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("report.json");
    let out = Command::new("python3")
        .arg(root.join("scripts/fleet-bench.py"))
        .args(["--short", "--runs", "5", "--exporter", common::bin()])
        .arg("--work")
        .arg(dir.path().join("work"))
        .arg("--json")
        .arg(&report)
        .output()
        .expect("python3");
    let stdout = String::from_utf8_lossy(&out.stdout);
    eprintln!("{stdout}{}", String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "fleet-bench --short failed");
    let r: Value = serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();

    // Every query of the fleet dashboard was asked, none skipped.
    let fleet = dashboards::load("membloat-fleet.json");
    let targets: usize = dashboards::data_panels(&fleet)
        .iter()
        .map(|p| dashboards::exprs(p).len())
        .sum();
    let asked = r["fleet"].as_array().unwrap();
    assert_eq!(asked.len(), targets);
    for q in asked {
        assert!(q["series"].as_u64().unwrap() > 0, "no data: {q}");
        assert_eq!(q["matches_raw"], true, "rules and raw series disagree: {q}");
    }
    let range = r["range"].as_array().unwrap();
    assert!(range.len() >= 10, "{} range queries", range.len());
    for q in range {
        assert!(q["series"].as_u64().unwrap() > 0, "no data: {q}");
    }
    // The per-host panels of the other three dashboards, for one node of the hundred.
    assert!(r["host"].as_array().unwrap().len() >= 100);
    let set = &r["instant"];
    assert_eq!(set["nodes"], 100);
    // Rules reading other rules' series were backfilled after them.
    assert!(set["rule_levels"].as_u64().unwrap() >= 2, "{set}");
    let per_node = set["series_per_node"].as_f64().unwrap();
    assert!(
        (500.0..1000.0).contains(&per_node),
        "{per_node} series per node"
    );
    // The rules stay within the budget of docs/fleet.md: a few per cent more per node, and
    // per cluster and job a few series per group name, not per node.
    let recorded = set["recorded_per_node"].as_f64().unwrap();
    assert!(
        recorded > 5.0 && recorded < 0.1 * per_node,
        "{recorded} recorded series per node"
    );
    let per_job = set["recorded_per_job"].as_f64().unwrap();
    assert!(
        per_job > 10.0 && per_job < 500.0,
        "{per_job} per cluster and job"
    );
    assert!(r["failures"].as_array().unwrap().is_empty());
}
