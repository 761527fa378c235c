//! End to end with a real Prometheus (Debian's package): it scrapes the exporter every
//! second and evaluates the shipped rules; then every dashboard query, every variable
//! query and every recording rule is run through its HTTP API with the dashboard
//! variables substituted, and each must parse and return at least one series.
//!
//! A hoarding and an arena reproducer and a JVM holding freed heap run meanwhile so the
//! deep-tier series exist.

use crate::common;

use common::dashboards::{self, data_panels, exprs, label_values, substitute, variables};
use common::prometheus::{encode, Prometheus};
use common::repro::Repro;
use common::*;
use std::time::Duration;

#[test]
#[allow(
    clippy::too_many_lines,
    reason = "one real Prometheus, started once, asked every query"
)]
fn every_dashboard_query_and_recording_rule_returns_data_from_a_real_prometheus() {
    let rules = rules_file();
    let _hoard = Repro::start("hoard", &["3", "1", "0"], &[]);
    let _arenas = Repro::start("arenas", &[], &[]);
    let _jvm = Repro::java("java", &["-Xms512m", "-Xmx512m"], 300, 20);
    // Owners for the panel that names them: a memfd this test holds, and a SysV segment.
    let _memfd = common::owners::memfd("panel", 8192);
    let _segment = common::owners::Segment::touched(1 << 20);
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("exporter.log");
    let exporter = Daemon::start_logged(
        &[
            "--scan.interval=1s",
            "--collector.processes.deep-interval=1s",
            "--log.level=debug",
        ],
        &log,
    );
    let instance = format!("127.0.0.1:{}", exporter.port);
    let prom = Prometheus::start(&instance, Some(&rules));
    prom.wait_until(Duration::from_secs(30), "first scrape", |p| {
        p.query(r#"up{job="membloat"} == 1"#)
            .is_ok_and(|r| !r.is_empty())
    });
    // Enough samples for every rate window below (10 s) and for the recording rules.
    prom.wait_until(Duration::from_secs(60), "deep-tier data and rules", |p| {
        let ready = |q: &str| p.query(q).is_ok_and(|r| !r.is_empty());
        ready(r#"count_over_time(membloat_scans_total{job="membloat"}[1m]) >= 8"#)
            && ready("membloat_process_hoarded_bytes > 0")
            && ready("instance:membloat_hoarded_bytes:sum > 0")
            && ready("membloat_group_runtime_held_bytes > 0")
            && ready("instance:membloat_swap_in_pages:rate5m")
    });

    // Prometheus asks for OpenMetrics and gzip on every scrape, and got them.
    let logged = std::fs::read_to_string(&log).unwrap();
    assert!(
        logged.contains("msg=scrape format=openmetrics encoding=gzip"),
        "{logged}"
    );
    // The cluster label (added by relabelling, as kube-prometheus does) selects too.
    let vars = dashboards::vars(&instance);
    let mut failures = Vec::new();
    let mut ran = 0;
    for file in dashboards::FILES {
        let d = dashboards::load(file);
        for v in variables(&d).iter().filter(|v| v["type"] == "query") {
            let (selector, label) = label_values(v["query"].as_str().unwrap()).unwrap();
            let selector = substitute(&selector, &vars);
            let got = prom.api(&format!(
                "/api/v1/label/{label}/values?match[]={}",
                encode(&selector)
            ));
            let values = got
                .as_ref()
                .and_then(|g| g["data"].as_array())
                .cloned()
                .unwrap_or_default();
            let expected = match label.as_str() {
                "cluster" => Some("test"),
                "job" => Some("membloat"),
                "instance" => Some(instance.as_str()),
                _ => None,
            };
            let found = match expected {
                Some(e) => values.iter().any(|x| x == e),
                None => !values.is_empty(),
            };
            ran += 1;
            if !found {
                failures.push(format!("{file} variable {}: {values:?}", v["name"]));
            }
        }
        for p in data_panels(&d) {
            let title = p["title"].as_str().unwrap_or("");
            // Asked where their data is made: after a real kill, beside limited cgroups.
            if dashboards::NEEDS_AN_OOM_KILL.contains(&title)
                || dashboards::NEEDS_A_LIMITED_CGROUP.contains(&title)
                || dashboards::NEEDS_CGROUP_V2.contains(&title)
                || dashboards::NEEDS_A_KUBELET.contains(&title)
            {
                continue;
            }
            if dashboards::NEEDS_ROOT.contains(&title) && !is_root() {
                skipped(&format!("{title}: slab and vmalloc owners need root"));
                continue;
            }
            for e in exprs(p) {
                let q = substitute(&e, &vars);
                ran += 1;
                match prom.query(&q) {
                    Ok(r) if !r.is_empty() => {}
                    Ok(_) => failures.push(format!("{file} {:?}: no series: {q}", p["title"])),
                    Err(err) => failures.push(format!("{file} {:?}: {err}: {q}", p["title"])),
                }
            }
        }
    }

    for rule in common::rules() {
        let expr = rule["expr"].as_str().unwrap();
        // Asked where their data is made: after a real kill, beside limited cgroups.
        if rule["record"].as_str().is_some_and(|r| {
            dashboards::RULES_NEEDING_AN_OOM_KILL.contains(&r)
                || dashboards::RULES_NEEDING_A_LIMITED_CGROUP.contains(&r)
        }) {
            continue;
        }
        ran += 1;
        let result = prom.query(expr);
        match (rule["record"].as_str(), result) {
            // A recording rule: its expression and the series Prometheus recorded.
            (Some(record), Ok(r)) if !r.is_empty() => {
                if prom.query(record).map(|r| r.is_empty()).unwrap_or(true) {
                    failures.push(format!("recording rule {record}: nothing recorded"));
                }
            }
            (Some(record), Ok(_)) => failures.push(format!("{record}: no series: {expr}")),
            // An alert: it must evaluate (it is expected not to fire here).
            (None, Ok(_)) => {}
            (_, Err(err)) => failures.push(format!("rule {expr}: {err}")),
        }
    }

    // Prometheus loaded every rule and evaluated it without error.
    let loaded = prom.api("/api/v1/rules").expect("rules API");
    let mut rules_seen = 0;
    for g in loaded["data"]["groups"].as_array().unwrap() {
        for r in g["rules"].as_array().unwrap() {
            rules_seen += 1;
            if r["health"] != "ok" {
                failures.push(format!(
                    "rule {} health {} {}",
                    r["name"], r["health"], r["lastError"]
                ));
            }
        }
    }
    eprintln!(
        "{ran} queries run against Prometheus, {rules_seen} rules loaded, {} failed",
        failures.len()
    );
    assert!(rules_seen >= 26, "only {rules_seen} rules loaded");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The Prometheus binary this test runs really scraped this exporter: a value read from
/// the exporter directly equals what Prometheus stored for the same scrape.
#[test]
fn prometheus_stores_what_the_exporter_serves() {
    let exporter = Daemon::start(&["--scan.interval=1s"]);
    let instance = format!("127.0.0.1:{}", exporter.port);
    let prom = Prometheus::start(&instance, Some(&rules_file()));
    prom.wait_until(Duration::from_secs(30), "first scrape", |p| {
        p.query("membloat_memory_total_bytes")
            .is_ok_and(|r| !r.is_empty())
    });
    let total = value(&exporter.metrics(), "membloat_memory_total_bytes").unwrap();
    let stored = prom.query("membloat_memory_total_bytes").unwrap();
    let stored: f64 = stored[0]["value"][1].as_str().unwrap().parse().unwrap();
    assert_eq!(stored, total);
    assert_eq!(
        prom.query(r#"up{job="membloat"}"#).unwrap()[0]["metric"]["instance"],
        instance.as_str()
    );
}
