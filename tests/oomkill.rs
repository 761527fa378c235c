//! The OOM-kill post-mortem on a real kill. A process that hoards (glibc keeps about a
//! gigabyte it freed, tests/reproducers/hoard.c) lives in a memory cgroup (v1 here); the
//! exporter measures its hoarding; then the cgroup's limit is set just above what it holds
//! and another process allocates past it (the hoarder first in the
//! killer's order), so the kernel's OOM
//! killer takes the hoarder. The exporter names it from the kernel log, with the
//! kernel's own figures (compared with the kill line read here from /dev/kmsg on a cursor
//! of the test's) and the hoarding it had measured before; a real Prometheus fires
//! MembloatContainerOOMKill naming it and the dashboards' kill panels show it; `/explain`
//! tells it with the allocator's remedy; a restarted exporter does not count it again; and
//! `explain` on the host, with no exporter watching, tells it from the kernel's ring.

use crate::common;

use common::cgroup::TestCgroup;
use common::dashboards;
use common::prometheus::Prometheus;
use common::repro::build;
use common::*;
use membloat_exporter::parse::kmsg::{self, OomLine};
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

/// The kernel's kill line for `pid` among `records` (read from the test's own cursor).
fn kernel_kill(records: &[String], pid: u32) -> Option<kmsg::Kill> {
    records.iter().find_map(
        |text| match kmsg::oom_line(kmsg::record(text).ok()?.message)? {
            OomLine::Kill(k) if k.pid == pid => Some(k),
            _ => None,
        },
    )
}

#[test]
#[ignore = "needs root"]
#[allow(
    clippy::too_many_lines,
    reason = "one real kill, told by every part of the exporter in turn"
)]
fn a_real_kill_is_named_with_what_was_measured_of_its_victim() {
    needs_root("making a memory cgroup with a limit and reading /dev/kmsg");
    let Some(cg) = TestCgroup::new("oomkill") else {
        return;
    };
    let hoard = cg.spawn("hoard", &format!("{} 3 1 0", build("hoard").display()));
    let pid = hoard.pid();

    let exporter = Daemon::start(&[
        "--scan.interval=1s",
        "--collector.processes.deep-interval=1s",
    ]);
    let rules = rules_file();
    let instance = format!("127.0.0.1:{}", exporter.port);
    let prom = Prometheus::start(&instance, Some(&rules));
    let measured = format!(
        "membloat_process_hoarded_bytes{{pid=\"{pid}\",comm=\"hoard\",method=\"measured\"}}"
    );
    exporter.wait_until(Duration::from_secs(60), || {
        value(&exporter.metrics(), &measured).is_some_and(|v| v > 0.0)
    });
    let text = exporter.metrics();
    let hoarded = value(&text, &measured).unwrap();
    let rss = value(
        &text,
        &format!("membloat_process_resident_bytes{{pid=\"{pid}\",comm=\"hoard\"}}"),
    )
    .unwrap();
    assert!(hoarded > 0.3 * rss, "hoarded {hoarded} of {rss}");
    assert_eq!(
        value(
            &text,
            "membloat_scrape_collector_success{collector=\"kmsg\"}"
        ),
        Some(1.0)
    );

    // The test's own cursor at the end of the kernel log: only this kill from now on.
    let mut log = common::kmsg::at_end();
    // A kill forged by a process that can write to /dev/kmsg (root, here), in the kernel's
    // own words and at its level, before the real one: the kernel files it under LOG_USER,
    // and the exporter, which reads the real kill after it, counts none of it.
    let forged = std::process::id();
    for line in [
        format!("<3>oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=/,mems_allowed=0,oom_memcg=/x,task_memcg=/x,task=postgres,pid={forged},uid=0"),
        format!("<3>Memory cgroup out of memory: Killed process {forged} (postgres) total-vm:1024kB, anon-rss:512kB, file-rss:0kB, shmem-rss:0kB, UID:0 pgtables:4kB oom_score_adj:0"),
    ] {
        std::fs::write("/dev/kmsg", line).unwrap();
    }

    // The limit 16 MiB above what the cgroup holds; another process allocates 64 MiB, and
    // the hoarder is the OOM killer's first choice (oom_score_adj 1000; lowering the other's
    // would need CAP_SYS_RESOURCE, which a container may not have).
    std::fs::write(format!("/proc/{pid}/oom_score_adj"), "1000").unwrap();
    let usage = cg.read("memory.usage_in_bytes");
    cg.set_limit((usage + (16 << 20)).div_ceil(4096) * 4096);
    let mut pusher = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "{} && exec python3 -c 'b = bytearray(64 << 20)\nfor i in range(0, len(b), 4096): b[i] = 1\nprint(\"done\", flush=True)'",
            cg.join()
        ))
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(pusher.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let pushed = pusher.wait().unwrap();

    // The kernel's account, read by the test: every record from its cursor, so that a
    // failure below says what the kernel did (which process it killed, and how many).
    let mut seen = Vec::new();
    let mut kernel = None;
    for _ in 0..50 {
        seen.extend(common::kmsg::records(&mut log));
        kernel = kernel_kill(&seen, pid);
        if kernel.is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let told = || {
        seen.iter()
            .filter(|t| t.contains("Killed process") || t.contains("oom-kill:"))
            .cloned()
            .collect::<String>()
    };
    assert!(
        pushed.success() && line.trim() == "done",
        "the other process did not finish ({pushed}, said {line:?}); the kernel's kills:\n{}",
        told()
    );
    let kernel = kernel.unwrap_or_else(|| {
        panic!(
            "no kill line for the hoarder in /dev/kmsg; the kernel's kills:\n{}",
            told()
        )
    });
    let mut hoard = hoard;
    let status = hoard.child.wait().unwrap();
    assert!(!status.success(), "the hoarder outlived its cgroup's limit");

    // The exporter's.
    let info = format!("membloat_oom_last_victim_info{{pid=\"{pid}\",comm=\"hoard\",constraint=\"memory_cgroup\",group=\"hoard\",memory_cgroup=\"{}\",allocator=\"glibc\",runtime=\"native\"}}", cg.label());
    exporter.wait_until(Duration::from_secs(10), || {
        value(&exporter.metrics(), &info) == Some(1.0)
    });
    let text = exporter.metrics();
    assert_eq!(
        value(
            &text,
            "membloat_oom_kills_total{constraint=\"memory_cgroup\",group=\"hoard\"}"
        ),
        Some(1.0)
    );
    let counted: f64 = text
        .lines()
        .filter(|l| l.starts_with("membloat_oom_kills_total{"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum();
    assert_eq!(counted, 1.0, "the forged kill was counted");
    assert!(!text.contains("postgres"), "the forged victim is named");
    let killed = |kind: &str| {
        value(
            &text,
            &format!("membloat_oom_last_victim_killed_bytes{{kind=\"{kind}\"}}"),
        )
    };
    assert_eq!(killed("anon_rss"), kernel.anon_rss_bytes.map(|b| b as f64));
    assert_eq!(killed("total_vm"), kernel.total_vm_bytes.map(|b| b as f64));
    // What it had measured at its last scan: the hoarder did not change after "ready".
    let before = value(
        &text,
        "membloat_oom_last_victim_measured_bytes{kind=\"hoarded\"}",
    )
    .expect("the measured hoarding of the victim");
    assert!(
        (before - hoarded).abs() <= 0.02 * hoarded,
        "measured before the kill {before}, seen by the test {hoarded}"
    );
    let measured_rss = value(
        &text,
        "membloat_oom_last_victim_measured_bytes{kind=\"rss\"}",
    )
    .unwrap();
    assert!(
        (measured_rss - rss).abs() <= 0.02 * rss,
        "{measured_rss} vs {rss}"
    );
    // The kernel's anon-rss at the kill holds what the scans saw in anonymous memory.
    let anon = value(
        &text,
        "membloat_oom_last_victim_measured_bytes{kind=\"rss_anon\"}",
    )
    .unwrap();
    let at_kill = kernel.anon_rss_bytes.unwrap() as f64;
    assert!(
        (at_kill - anon).abs() <= 0.05 * anon,
        "anon-rss {at_kill} at the kill, RssAnon {anon} before"
    );

    // /explain: the victim, the hoarding as the cause, glibc's remedy.
    let explained = exporter.get("/explain").body;
    let section = explained
        .split("OOM KILLS (1), latest first")
        .nth(1)
        .unwrap_or_else(|| panic!("no kills in /explain:\n{explained}"));
    assert!(
        section.contains(&format!(
            "hoard (pid {pid}), memory_cgroup of {}",
            cg.label()
        )),
        "{section}"
    );
    assert!(
        section.contains("RSS was freed memory its allocator kept (measured by the"),
        "{section}"
    );
    assert!(section.contains("malloc_trim(0)"), "{section}");

    // The alert, from a real Prometheus, names the victim.
    prom.wait_until(
        Duration::from_secs(30),
        "MembloatContainerOOMKill naming the hoarder",
        |p| {
            p.query(&format!(
                "ALERTS{{alertname=\"MembloatContainerOOMKill\",alertstate=\"firing\",comm=\"hoard\",pid=\"{pid}\",cgroup=\"{}\"}}",
                cg.label()
            ))
            .is_ok_and(|r| !r.is_empty())
        },
    );
    assert!(
        prom.query("ALERTS{alertname=\"MembloatOOMKill\"}")
            .unwrap()
            .is_empty(),
        "a container's kill at its own limit is not the host running out"
    );
    // The recording groups run on their own ticks, apart from the alerts' group: wait for
    // the kill rules to have recorded before the panels that read them are asked.
    prom.wait_until(Duration::from_secs(30), "the kill rules recorded", |p| {
        dashboards::RULES_NEEDING_AN_OOM_KILL
            .iter()
            .all(|rule| p.query(rule).is_ok_and(|r| !r.is_empty()))
    });
    // Every query of the dashboards' kill panels returns the kill.
    let queries = dashboards::queries_of(&dashboards::NEEDS_AN_OOM_KILL, &instance);
    for (title, q) in &queries {
        let r = prom.query(q).unwrap_or_else(|e| panic!("{q}: {e}"));
        assert!(!r.is_empty(), "{title}: {q}");
        // The victim's own series name it; its memory's rows are the latest victim's.
        if q.contains("info") {
            assert_eq!(r[0]["metric"]["pid"], pid.to_string(), "{title}: {r:?}");
        }
    }
    assert_eq!(queries.len(), 7, "{queries:?}");
    // The fleet's kill rules record the kill: the container's and the group's.
    for rule in dashboards::RULES_NEEDING_AN_OOM_KILL {
        let r = prom.query(rule).unwrap_or_else(|e| panic!("{rule}: {e}"));
        let kills: f64 = r
            .first()
            .and_then(|s| s["value"][1].as_str())
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("{rule}: nothing recorded: {r:?}"));
        assert!(kills >= 1.0, "{rule}: {r:?}");
    }
    let container = prom
        .query(&format!(
            "instance_cgroup:membloat_cgroup_oom_kills:increase1h{{cgroup=\"{}\"}}",
            cg.label()
        ))
        .unwrap();
    assert_eq!(container.len(), 1, "{container:?}");
    drop(prom);
    drop(exporter);

    // A restarted exporter starts its cursor at the end: the kill is not counted again.
    let again = Daemon::start(&["--scan.interval=1s"]);
    std::thread::sleep(Duration::from_secs(3));
    let text = again.metrics();
    assert_eq!(
        value(
            &text,
            "membloat_scrape_collector_success{collector=\"kmsg\"}"
        ),
        Some(1.0)
    );
    assert!(!text.contains("membloat_oom_kills_total{"), "{text}");
    assert!(!text.contains("membloat_oom_last_victim_info{"), "{text}");
    // `explain` on the host, with no exporter watching: the kill from the kernel's ring,
    // with the kernel's figures and nothing measured (no scan of its saw the victim).
    let out = Command::new(bin())
        .args(["explain", "--format", "json", "--explain.interval=200ms"])
        .output()
        .unwrap();
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let told = doc["oom_kills"]
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["pid"] == pid)
        .unwrap_or_else(|| panic!("explain does not tell the kill: {doc}"));
    assert_eq!(told["constraint"], "memory_cgroup");
    assert_eq!(told["memory_cgroup"], cg.label());
    assert_eq!(
        told["killed_bytes"]["anon_rss"].as_u64(),
        kernel.anon_rss_bytes
    );
    assert_eq!(told["measured_bytes"], serde_json::json!({}));
    assert_eq!(told["group"], "unknown");

    // The kernel's own count for the cgroup agrees: one kill.
    let control = std::fs::read_to_string(cg.dir.join("memory.oom_control")).unwrap();
    assert!(control.lines().any(|l| l == "oom_kill 1"), "{control}");
}
