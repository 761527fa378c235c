//! The monitoring mixin (mixin/): the plain rule and dashboard files are the mixin rendered
//! with its defaults, the defaults are the thresholds explain uses, and a user's _config
//! reaches every place it names.

use crate::common;

use common::*;
use serde_json::Value;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).to_path_buf()
}

/// Evaluates a jsonnet expression with the repository root as the working directory.
fn jsonnet(expr: &str) -> Value {
    let out = tool("jsonnet")
        .current_dir(root())
        .args(["-e", expr])
        .output()
        .unwrap();
    let text = succeeded(out, "jsonnet");
    serde_json::from_str(&text).unwrap()
}

#[test]
fn the_plain_files_are_the_mixin_rendered() {
    let dir = repository_copy(&["mixin", "grafana", "deploy", "scripts"]);
    succeeded(
        std::process::Command::new("bash")
            .arg(dir.path().join("mixin/render.sh"))
            .output()
            .unwrap(),
        "mixin/render.sh",
    );
    for f in [
        "deploy/prometheus/membloat.rules.yml",
        "deploy/kubernetes/prometheusrule.yaml",
        "grafana/membloat-fleet.json",
        "grafana/membloat-host.json",
        "grafana/membloat-thp.json",
        "grafana/membloat-processes.json",
    ] {
        let rendered = std::fs::read(dir.path().join(f)).unwrap();
        let committed = std::fs::read(root().join(f)).unwrap();
        assert!(rendered == committed, "{f} is stale: run ./mixin/render.sh");
    }
}

#[test]
fn the_default_thresholds_are_explains() {
    use membloat_exporter::model::signals;
    let c = jsonnet("(import 'mixin/config.libsonnet')._config");
    let f = |k: &str| c[k].as_f64().unwrap_or_else(|| panic!("no {k}"));
    assert_eq!(f("lowMemoryRatio"), signals::LOW_MEMORY_RATIO);
    assert_eq!(f("oomVictimShare"), signals::OOM_LIKELY_VICTIM_SHARE);
    assert_eq!(f("oomVictimRank"), signals::OOM_LIKELY_VICTIM_RANK as f64);
    assert_eq!(f("commitNearLimitRatio"), signals::COMMIT_NEAR_LIMIT_RATIO);
    assert_eq!(f("pressureStalledRatio"), signals::PRESSURE_STALLED_RATIO);
    assert_eq!(f("hiddenTHPRatio"), signals::THP_HIDDEN_MAX_SHARE);
}

/// A kube-prometheus user's overrides: another job name, a `region` label for clusters,
/// their own runbook host and a stricter threshold. Each lands where it belongs, and
/// promtool accepts the result.
#[test]
fn a_users_config_reaches_rules_and_dashboards() {
    let m = jsonnet(
        "(import 'mixin/mixin.libsonnet') + { _config+:: { membloatSelector: 'job=\"node-agents\"', \
         clusterLabel: 'region', runbookURLBase: 'https://runbooks.example/membloat', \
         lowMemoryRatio: 0.2, regrowthMiB: 128 } } + \
         { out: { rules: $.prometheusRules, alerts: $.prometheusAlerts, dash: $.grafanaDashboards } }",
    );
    let m = &m["out"];
    let alerts: Vec<&Value> = m["alerts"]["groups"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|g| g["rules"].as_array().unwrap())
        .collect();
    let alert = |name: &str| {
        *alerts
            .iter()
            .find(|a| a["alert"] == name)
            .unwrap_or_else(|| panic!("no {name}"))
    };
    assert_eq!(
        alert("MembloatExporterDown")["expr"],
        "up{job=\"node-agents\"} == 0"
    );
    let victim = alert("MembloatProcessLikelyOOMVictim")["expr"]
        .as_str()
        .unwrap();
    assert!(
        victim.contains("instance:membloat_memory_available:ratio < 0.20"),
        "{victim}"
    );
    let regrowth = alert("MembloatKhugepagedRegrowth")["expr"]
        .as_str()
        .unwrap();
    assert!(regrowth.contains("> 128 * 1024 * 1024"), "{regrowth}");
    for a in &alerts {
        let url = a["annotations"]["runbook_url"].as_str().unwrap();
        let want = format!(
            "https://runbooks.example/membloat#{}",
            a["alert"].as_str().unwrap().to_lowercase()
        );
        assert_eq!(url, want);
    }
    let fleet = m["rules"]["groups"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["name"] == "membloat.fleet.rules")
        .unwrap();
    for r in fleet["rules"].as_array().unwrap() {
        let e = r["expr"].as_str().unwrap();
        assert!(e.contains("by (region, job"), "{e}");
    }
    let host = &m["dash"]["membloat-host.json"];
    let text = host.to_string();
    assert!(text.contains(r#"region=~\"$cluster\""#));
    assert!(!text.contains(r#"cluster=~\"$cluster\""#));
    // promtool accepts the overridden rules.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("rules.yml");
    let groups: Vec<Value> = m["rules"]["groups"]
        .as_array()
        .unwrap()
        .iter()
        .chain(m["alerts"]["groups"].as_array().unwrap())
        .cloned()
        .collect();
    std::fs::write(&file, serde_json::json!({ "groups": groups }).to_string()).unwrap();
    promtool_ok(&["check", "rules"], &file);
}
