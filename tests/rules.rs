//! The Prometheus rules, the example Prometheus and Alertmanager configurations and the
//! runbooks, checked with the real promtool and amtool.

use crate::common;

use common::*;
use serde_yaml_ng::Value;
use std::collections::BTreeSet;
use std::path::Path;

fn alerts() -> Vec<Value> {
    rules()
        .into_iter()
        .filter(|r| r.get("alert").is_some())
        .collect()
}

#[test]
fn promtool_accepts_the_rules_with_lint_fatal() {
    let text = promtool_ok(
        &["check", "rules", "--lint=all", "--lint-fatal"],
        &rules_file(),
    );
    assert!(text.contains("SUCCESS"), "{text}");
}

#[test]
fn promtool_rule_tests_pass() {
    let out = tool("promtool")
        .args(["test", "rules", "membloat.rules.test.yml"])
        .current_dir(deploy("prometheus"))
        .output()
        .unwrap();
    succeeded(out, "promtool test rules");
}

/// Each alert has a test case where it fires and one where it does not.
#[test]
fn every_alert_has_a_firing_and_a_silent_test_case() {
    let tests = yaml(&deploy("prometheus/membloat.rules.test.yml"));
    let mut firing = BTreeSet::new();
    let mut silent = BTreeSet::new();
    for t in tests["tests"].as_sequence().unwrap() {
        for case in t["alert_rule_test"].as_sequence().into_iter().flatten() {
            let name = case["alertname"].as_str().unwrap().to_string();
            match case["exp_alerts"].as_sequence() {
                Some(a) if !a.is_empty() => firing.insert(name),
                _ => silent.insert(name),
            };
        }
    }
    for a in alerts() {
        let name = a["alert"].as_str().unwrap();
        assert!(firing.contains(name), "{name}: no case where it fires");
        assert!(
            silent.contains(name),
            "{name}: no case where it stays silent"
        );
    }
}

/// CamelCase with the common prefix, a severity Alertmanager routes, the three annotations,
/// and a runbook section that exists.
#[test]
fn every_alert_follows_the_conventions_and_has_a_runbook() {
    let runbooks =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/runbooks.md"))
            .unwrap();
    let anchors: BTreeSet<String> = runbooks
        .lines()
        .filter_map(|l| l.strip_prefix("## "))
        .map(|h| h.trim().to_lowercase())
        .collect();
    let all = alerts();
    assert!(all.len() >= 12, "only {} alerts", all.len());
    for a in all {
        let name = a["alert"].as_str().unwrap();
        assert!(
            name.starts_with("Membloat") && name.chars().all(|c| c.is_ascii_alphanumeric()),
            "{name}: not CamelCase with the Membloat prefix"
        );
        let severity = a["labels"]["severity"].as_str().unwrap_or("");
        assert!(
            ["critical", "warning", "info"].contains(&severity),
            "{name}: severity {severity:?}"
        );
        for key in ["summary", "description", "runbook_url"] {
            assert!(
                a["annotations"][key]
                    .as_str()
                    .is_some_and(|s| !s.is_empty()),
                "{name}: no {key}"
            );
        }
        let url = a["annotations"]["runbook_url"].as_str().unwrap();
        let anchor = url.rsplit_once('#').map(|(_, a)| a).unwrap_or("");
        assert!(
            url.contains("docs/runbooks.md#") && anchor == name.to_lowercase(),
            "{name}: runbook_url {url}"
        );
        assert!(anchors.contains(anchor), "{name}: no runbook section");
    }
}

#[test]
fn example_prometheus_config_is_valid() {
    let text = promtool_ok(&["check", "config"], &deploy("prometheus/prometheus.yml"));
    assert!(text.contains("1 rule files found"), "{text}");
}

#[test]
fn alertmanager_config_is_valid_and_routes_by_severity() {
    let config = deploy("alertmanager/alertmanager.yml");
    let out = tool("amtool")
        .arg("check-config")
        .arg(&config)
        .output()
        .unwrap();
    succeeded(out, "amtool check-config");
    for (severity, receiver) in [("critical", "pager"), ("warning", "team"), ("info", "info")] {
        let out = tool("amtool")
            .args(["config", "routes", "test"])
            .arg(format!("--config.file={}", config.display()))
            .args([
                "alertname=MembloatOOMKill".to_string(),
                format!("severity={severity}"),
            ])
            .output()
            .unwrap();
        assert!(out.status.success(), "amtool config routes test failed");
        // stdout is the receiver; stderr may carry a warning about --alertmanager.url.
        let got = String::from_utf8_lossy(&out.stdout);
        assert_eq!(got.trim(), receiver, "severity={severity}");
    }
}

/// explain's findings and the alerts judge the same signals by the same numbers: each
/// threshold in src/model/signals/figures.rs appears in the rule that watches it.
#[test]
fn explain_thresholds_are_the_alerts_thresholds() {
    use membloat_exporter::model::signals;
    let expr = |alert: &str| -> String {
        alerts()
            .into_iter()
            .find(|a| a["alert"].as_str() == Some(alert))
            .unwrap_or_else(|| panic!("no alert {alert}"))["expr"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let victim = expr("MembloatProcessLikelyOOMVictim");
    assert!(
        victim.contains(&format!(">= {:.2}", signals::OOM_LIKELY_VICTIM_SHARE)),
        "{victim}"
    );
    assert!(
        victim.contains(&format!(
            "membloat_process_oom_rank <= {}",
            signals::OOM_LIKELY_VICTIM_RANK
        )),
        "{victim}"
    );
    // The share is oom_score without oom_score_adj, as signals::oom_memory_share takes it.
    assert!(
        victim.contains("membloat_process_oom_score * 1.5 - 1000 - membloat_process_oom_score_adj"),
        "{victim}"
    );
    assert!((signals::oom_memory_share(1000, 0) - 0.5).abs() < 1e-9);
    assert!(
        victim.contains(&format!("< {:.2}", signals::LOW_MEMORY_RATIO)),
        "{victim}"
    );
    let commit = expr("MembloatCommitNearLimit");
    assert!(
        commit.contains(&format!("> {}", signals::COMMIT_NEAR_LIMIT_RATIO)),
        "{commit}"
    );
    let stalls = expr("MembloatMemoryStalls");
    assert!(
        stalls.contains(&format!("> {}", signals::PRESSURE_STALLED_RATIO)),
        "{stalls}"
    );
    let hidden = expr("MembloatHiddenTHPMemoryLarge");
    assert!(
        hidden.contains(&format!("> {}", signals::THP_HIDDEN_MAX_SHARE)),
        "{hidden}"
    );
}

/// The README's alert table lists every alert, with its severity and `for`.
#[test]
fn the_readme_lists_every_alert() {
    let readme =
        std::fs::read_to_string(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md"))
            .unwrap();
    let alerts = alerts();
    for a in &alerts {
        let name = a["alert"].as_str().unwrap();
        let row = readme
            .lines()
            .find(|l| l.starts_with(&format!("| `{name}` |")))
            .unwrap_or_else(|| panic!("README has no row for {name}"));
        let cells: Vec<&str> = row.split('|').map(str::trim).collect();
        assert_eq!(
            cells[2],
            a["labels"]["severity"].as_str().unwrap(),
            "{name}"
        );
        assert_eq!(cells[3], a["for"].as_str().unwrap_or(""), "{name}");
    }
    assert!(readme.contains(&format!("and {} alerts", alerts.len())));
}
