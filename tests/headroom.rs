//! A container's headroom on the real kernel: a memory cgroup (v1 here) with a 64 MiB limit
//! and a process holding 40 MiB of anonymous memory in it. The exporter reports the limit,
//! the usage and the working set of that cgroup, and they agree with what the process
//! itself holds (its `RssAnon`, a counter of its own) and with the limit. And the alert: a
//! real Prometheus on the real exporter holds MembloatContainerNearLimitHoarding pending
//! for a cgroup at 95 % of its limit whose processes hoard (glibc, and a JVM's held Java
//! heap), with the hoarded share, and nothing for one at 95 % that does not.

use crate::common;

use common::cgroup::TestCgroup;
use common::dashboards;
use common::prometheus::Prometheus;
use common::repro::{build, Repro};
use common::*;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

const LIMIT: u64 = 64 << 20;

#[test]
#[ignore = "needs root"]
fn a_cgroup_near_its_limit_shows_its_headroom() {
    needs_root("making a memory cgroup with a limit");
    let Some(cg) = TestCgroup::new("headroom") else {
        return;
    };
    cg.set_limit(LIMIT);
    // Joins the cgroup, touches 40 MiB, says so, and waits to be killed.
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "{} && exec python3 -c 'import sys, time\nb = bytearray(40 << 20)\nfor i in range(0, len(b), 4096): b[i] = 1\nprint(\"ready\", flush=True)\ntime.sleep(600)'",
            cg.join()
        ))
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    struct Kill(std::process::Child);
    impl Drop for Kill {
        fn drop(&mut self) {
            self.0.kill().ok();
            self.0.wait().ok();
        }
    }
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line.trim(), "ready");
    let pid = child.id();
    // Declared after the cgroup: dropped (killed) before it is removed.
    let _child = Kill(child);

    let text = String::from_utf8(run(&["--once", "--once.interval=0s"]).stdout).unwrap();
    let series = |family: &str| {
        value(&text, &format!("{family}{{cgroup=\"{}\"}}", cg.label()))
            .unwrap_or_else(|| panic!("no {family} for {}", cg.label()))
    };
    let limit = series("membloat_cgroup_memory_limit_bytes");
    let usage = series("membloat_cgroup_memory_usage_bytes");
    let working_set = series("membloat_cgroup_working_set_bytes");
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let rss_anon = status
        .lines()
        .find_map(|l| l.strip_prefix("RssAnon:"))
        .map(|v| {
            v.trim()
                .trim_end_matches(" kB")
                .trim()
                .parse::<f64>()
                .unwrap()
                * 1024.0
        })
        .unwrap();
    assert_eq!(limit, LIMIT as f64);
    assert!(rss_anon >= (40 << 20) as f64, "RssAnon {rss_anon}");
    // The process's anonymous memory is charged to the cgroup, and none of it is
    // inactive page cache: the working set holds it, and the limit bounds both.
    assert!(
        working_set >= rss_anon && working_set <= usage && usage <= limit,
        "RssAnon {rss_anon}, working set {working_set}, usage {usage}, limit {limit}"
    );
    // An unlimited cgroup (the root) has no limit series.
    assert_eq!(
        value(&text, "membloat_cgroup_memory_limit_bytes{cgroup=\"/\"}"),
        None
    );
}

/// Sets the cgroup's limit so that its current usage is 95 % of it.
fn limit_at_95_percent(cg: &TestCgroup) {
    let usage = cg.read("memory.usage_in_bytes");
    cg.set_limit((usage * 100 / 95).div_ceil(4096) * 4096);
}

#[test]
#[ignore = "needs root"]
fn a_container_near_its_limit_that_hoards_holds_the_alert_and_one_that_does_not_stays_silent() {
    needs_root("making memory cgroups with limits");
    let (Some(a), Some(b)) = (TestCgroup::new("hoarding"), TestCgroup::new("sized")) else {
        return;
    };
    let (hoarding, sized) = (a.label(), b.label());
    // a: glibc keeps about a gigabyte of freed heap (tests/reproducers/hoard.c).
    let hoard = a.spawn("hoard", &format!("{} 3 1 0", build("hoard").display()));
    // And a JVM pinned at -Xms512m that dropped 280 MiB: its held Java heap is the
    // runtimes' share of the container's hoarding.
    let jvm = a.spawn(
        "JavaHeap",
        &format!(
            "{} -XX:+UseG1GC -Xms512m -Xmx512m -cp {} JavaHeap 300 20",
            common::java::jdks()[0].java.display(),
            common::java::classes().display()
        ),
    );
    // b: 200 MiB of live data, nothing freed, and no runtime holding memory of its own (a
    // CPython here would be measured: its arenas keep a little unused).
    let mut cmd = Command::new("sh");
    cmd.arg("-c").arg(format!(
        "{} && exec {} 204800",
        b.join(),
        build("burst").display()
    ));
    let live = Repro::spawn("burst", cmd);
    limit_at_95_percent(&a);
    limit_at_95_percent(&b);

    let exporter = Daemon::start(&[
        "--scan.interval=1s",
        "--collector.processes.deep-interval=1s",
    ]);
    let rules = rules_file();
    let instance = format!("127.0.0.1:{}", exporter.port);
    let prom = Prometheus::start(&instance, Some(&rules));
    let pending = |p: &Prometheus, cgroup: &str| {
        p.query(&format!(
            "ALERTS{{alertname=\"MembloatContainerNearLimitHoarding\",alertstate=\"pending\",cgroup=\"{cgroup}\"}}"
        ))
        .is_ok_and(|r| !r.is_empty())
    };
    prom.wait_until(
        Duration::from_secs(90),
        "the alert pending for the hoarding cgroup",
        |p| pending(p, &hoarding),
    );
    assert!(
        !pending(&prom, &sized),
        "a container without hoarding is the owner's sizing"
    );
    // The share the alert states is the exporter's hoarded bytes over the working set.
    let text = exporter.metrics();
    let of = |family: &str| {
        value(&text, &format!("{family}{{cgroup=\"{hoarding}\"}}"))
            .unwrap_or_else(|| panic!("no {family}"))
    };
    let share = of("membloat_cgroup_hoarded_bytes") / of("membloat_cgroup_working_set_bytes");
    assert!(share > 0.2 && share < 1.0, "hoarded share {share}");
    let alerts = prom.api("/api/v1/alerts").unwrap();
    let alert = alerts["data"]["alerts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["labels"]["cgroup"] == hoarding.as_str())
        .expect("the alert in /api/v1/alerts");
    let summary = alert["annotations"]["summary"].as_str().unwrap();
    let stated: f64 = summary
        .split("and ")
        .nth(1)
        .and_then(|s| s.split('%').next())
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or_else(|| panic!("no share in: {summary}"));
    assert!(
        (stated / 100.0 - share).abs() < 0.05,
        "stated {stated} %, measured {share}: {summary}"
    );
    let own_share = of("membloat_cgroup_hoarded_bytes") / of("membloat_cgroup_memory_usage_bytes");
    container_panels_and_rules(&prom, &instance, &hoarding, &sized, own_share);
    drop((hoard, jvm, live));
}

/// The dashboards' container panels and the fleet's per-container rules, beside a
/// hoarding and a sized cgroup with limits; `own_share` is the hoarding one's hoarded
/// bytes over its usage as the exporter serves them.
fn container_panels_and_rules(
    prom: &Prometheus,
    instance: &str,
    hoarding: &str,
    sized: &str,
    own_share: f64,
) {
    prom.wait_until(
        Duration::from_secs(30),
        "the per-container rules recorded",
        |p| {
            ["instance_cgroup:membloat_hoarded_usage:ratio"]
                .iter()
                .chain(&dashboards::RULES_NEEDING_A_LIMITED_CGROUP)
                .all(|rule| {
                    p.query(&format!("{rule}{{cgroup=\"{hoarding}\"}}"))
                        .is_ok_and(|r| !r.is_empty())
                })
        },
    );
    // Every query of the panels returns the hoarding cgroup. The limit, the working set
    // and its share of the limit are the sized one's too; hoarded bytes, their share of
    // usage and the runtimes' share are the hoarding cgroup's alone.
    let queries = dashboards::queries_of(&dashboards::NEEDS_A_LIMITED_CGROUP, instance);
    let mut nth = std::collections::BTreeMap::<&str, usize>::new();
    for (title, q) in &queries {
        let i = nth.entry(title.as_str()).or_default();
        let r = prom.query(q).unwrap_or_else(|e| panic!("{q}: {e}"));
        let cgroups: Vec<&str> = r
            .iter()
            .filter_map(|s| s["metric"]["cgroup"].as_str())
            .collect();
        assert!(cgroups.contains(&hoarding), "{q}: {cgroups:?}");
        let both = match title.as_str() {
            "Containers by headroom" => *i < 2,
            "Containers nearest their limits" => *i != 1,
            _ => false,
        };
        assert_eq!(
            cgroups.contains(&sized),
            both,
            "{title} #{i}: {q}: {cgroups:?}"
        );
        *i += 1;
    }
    assert_eq!(queries.len(), 10, "{queries:?}");
    // The fleet's per-container rules: the working set's share of the limit for both, and
    // the hoarded share of usage as the exporter's own figures give it.
    let recorded = |rule: &str, cgroup: &str| -> Option<f64> {
        prom.query(&format!("{rule}{{cgroup=\"{cgroup}\"}}"))
            .ok()?
            .first()?["value"][1]
            .as_str()?
            .parse()
            .ok()
    };
    for rule in dashboards::RULES_NEEDING_A_LIMITED_CGROUP {
        for cgroup in [hoarding, sized] {
            let share = recorded(rule, cgroup).unwrap_or_else(|| panic!("{rule} {cgroup}"));
            assert!(share > 0.5 && share <= 1.0, "{rule} {cgroup}: {share}");
        }
    }
    let share = recorded("instance_cgroup:membloat_hoarded_usage:ratio", hoarding).unwrap();
    assert!(
        (share - own_share).abs() < 0.1,
        "recorded {share}, exporter {own_share}"
    );
}
