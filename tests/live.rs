//! The real binary against this machine's real /proc, with real child processes.

use crate::common;

use common::*;
use std::process::Command;
use std::time::{Duration, Instant};

const FAST: &[&str] = &[
    "--scan.interval=200ms",
    "--collector.processes.top-k=100000",
];

#[test]
fn a_child_process_appears_and_its_series_vanish_when_it_dies() {
    let comm = format!("mbt-live-{}", std::process::id() % 100000);
    let mut child = Named::spawn(&comm);
    let pid = child.pid();
    let d = Daemon::start(FAST);
    let group = format!("membloat_group_processes{{group=\"{comm}\"}}");
    let process = format!("membloat_process_resident_bytes{{pid=\"{pid}\",comm=\"{comm}\"}}");
    d.wait_until(Duration::from_secs(5), || {
        value(&d.metrics(), &group) == Some(1.0)
    });
    let text = d.metrics();
    let rss = value(&text, &process).expect("the child's own series");
    // A sleeping python3 is a few MiB resident, never zero and never a GiB.
    assert!((1e6..1e9).contains(&rss), "rss {rss}");
    assert!(
        value(
            &text,
            &format!("membloat_process_oom_score{{pid=\"{pid}\",comm=\"{comm}\"}}")
        )
        .unwrap()
            > 0.0
    );

    child.0.kill().unwrap();
    child.0.wait().unwrap();
    d.wait_until(Duration::from_secs(5), || !d.metrics().contains(&comm));
    let text = d.metrics();
    assert!(
        !text.contains(&format!("pid=\"{pid}\"")),
        "dead pid still exported"
    );
}

#[test]
fn hostile_process_name_on_the_real_kernel_cannot_inject_a_series() {
    let evil = "x\"} 1\nevil 9\n#";
    let child = Named::spawn(evil);
    let d = Daemon::start(FAST);
    let label = format!("pid=\"{}\",comm=\"x\\\"}} 1\\nevil 9\\n#\"", child.pid());
    d.wait_until(Duration::from_secs(5), || d.metrics().contains(&label));
    let text = d.metrics();
    assert!(
        !text.lines().any(|l| l.starts_with("evil")),
        "injected line"
    );
    promtool_check(&text);
    let om = get(
        d.port,
        "/metrics",
        &[("Accept", "application/openmetrics-text;version=1.0.0")],
    )
    .body;
    let comms = openmetrics_parse(&om, "membloat_process_resident_bytes", "comm");
    // The strict parser decodes the label back to exactly the name the process gave itself.
    assert!(
        comms.lines().any(|l| l == "\"x\\\"} 1\\nevil 9\\n#\""),
        "{comms}"
    );
}

#[test]
fn metrics_negotiate_openmetrics_and_text_and_both_parse_strictly() {
    let d = Daemon::start(FAST);
    let text = get(d.port, "/metrics", &[]);
    assert_eq!(
        text.header("content-type").as_deref(),
        Some("text/plain; version=0.0.4; charset=utf-8")
    );
    promtool_check(&text.body);
    assert!(!text.body.contains("# EOF"));

    let prometheus_accept = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";
    let om = get(d.port, "/metrics", &[("Accept", prometheus_accept)]);
    assert_eq!(
        om.header("content-type").as_deref(),
        Some("application/openmetrics-text; version=1.0.0; charset=utf-8")
    );
    assert!(om.body.ends_with("# EOF\n"));
    let collectors = openmetrics_parse(&om.body, "membloat_scrape_collector_success", "collector");
    assert_eq!(
        collectors.lines().count(),
        membloat_exporter::family::Collector::all().count(),
        "{collectors}"
    );

    // The live machine: real memory, a real commit limit, real processes.
    assert!(value(&text.body, "membloat_memory_total_bytes").unwrap() > 1e8);
    assert!(value(&text.body, "membloat_processes_scanned").unwrap() >= 2.0);
    assert_eq!(
        value(
            &text.body,
            "membloat_scrape_collector_success{collector=\"processes\"}"
        ),
        Some(1.0)
    );
}

#[test]
fn landing_page_health_and_unknown_paths() {
    let d = Daemon::start(FAST);
    let landing = d.get("/");
    assert_eq!(landing.status, 200);
    assert!(landing.body.contains("href=\"/metrics\""));
    assert!(landing.body.contains("href=\"/explain\""));
    // Daemon::start returns once a scan completed: its age and health are on the page,
    // as /healthz judges them (200 below).
    assert!(
        landing.body.contains("latest scan completed") && landing.body.contains("; healthy."),
        "{}",
        landing.body
    );
    let explained = d.get("/explain");
    assert!(explained.body.contains("scanned at "), "{}", explained.body);
    assert_eq!(d.get("/healthz").status, 200);
    assert_eq!(d.get("/nope").status, 404);
    assert_eq!(request(d.port, "POST", "/metrics", &[]).status, 405);
}

#[test]
fn scrapes_are_served_while_a_scan_is_stuck_in_a_slow_read() {
    // A smaps_rollup that blocks until written: a read as slow as we like.
    let dir = tempfile::tempdir().unwrap();
    let root = fixture_copy(dir.path());
    let slow = root.join("proc/18265/smaps_rollup");
    let real = std::fs::read(&slow).unwrap();
    make_fifo(&slow);
    let procfs = format!("--path.procfs={}", root.join("proc").display());
    let sysfs = format!("--path.sysfs={}", root.join("sys").display());
    let d = Daemon::spawn(
        Command::new(bin()),
        &["--scan.interval=200ms", &procfs, &sysfs],
    );

    // Answered (not the client's 10 s timeout, status 0) while the scan still waits on the
    // FIFO, which is written only below: the scrape did not wait for the scan.
    let r = d.get("/metrics");
    assert_eq!(r.status, 200, "scrape waited for the scan");
    assert_eq!(value(&r.body, "membloat_scans_total"), Some(0.0));
    let health = d.get("/healthz");
    assert_eq!(
        (health.status, health.body.as_str()),
        (503, "no scan completed yet\n")
    );
    // No diagnosis before a scan: not an empty document that breaks the schema.
    assert_eq!(d.get("/explain").status, 503);

    // Release the read: the scan completes and is published.
    std::fs::write(&slow, &real).unwrap();
    d.wait_until(Duration::from_secs(5), || d.get("/healthz").status == 200);
    assert_eq!(d.get("/explain").status, 200);
    assert_eq!(value(&d.metrics(), "membloat_scans_total"), Some(1.0));

    // The next scan blocks again on the FIFO; SIGTERM still ends the process promptly.
    std::thread::sleep(Duration::from_millis(400));
    let mut d = d;
    assert!(Command::new("kill")
        .args(["-TERM", &d.pid().to_string()])
        .status()
        .unwrap()
        .success());
    // A deadline, not a budget: an exporter that waited for the stuck read would wait forever.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(status) = d.child.try_wait().unwrap() {
            assert_eq!(status.code(), Some(0));
            break;
        }
        assert!(
            Instant::now() < deadline,
            "SIGTERM did not stop the exporter within 10 s"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn bad_flags_exit_2_with_one_line_naming_the_flag() {
    for (flag, named) in [
        ("--web.listen-adress=:1", "--web.listen-adress"),
        ("--scan.interval=0s", "--scan.interval"),
        ("--collector.bogus", "--collector.bogus"),
        ("--log.level=loud", "--log.level"),
    ] {
        let out = run(&[flag]);
        assert_eq!(out.status.code(), Some(2), "{flag}");
        let err = String::from_utf8(out.stderr).unwrap();
        assert_eq!(err.lines().count(), 1, "{flag}: {err:?}");
        assert!(err.contains(named), "{flag}: {err:?}");
    }
    assert_eq!(run(&["--version"]).status.code(), Some(0));
    let help = run(&["--help"]);
    assert_eq!(help.status.code(), Some(0));
    assert!(String::from_utf8(help.stdout)
        .unwrap()
        .contains("--no-collector.processes"));
}

#[test]
fn unreadable_procfs_and_busy_port_exit_1_with_a_message() {
    let out = run(&["--path.procfs=/nonexistent/proc"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr)
        .contains("cannot read --path.procfs /nonexistent/proc"));

    let busy = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = format!("--web.listen-address={}", busy.local_addr().unwrap());
    let out = run(&[&addr]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("msg=\"cannot listen\" address=127.0.0.1:")
    );

    let out = run(&["--collector.processes.matcher-file=/nonexistent/m.yml"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--collector.processes.matcher-file"));
}

#[test]
fn once_on_the_live_machine_prints_a_valid_exposition() {
    let out = run(&["--once", "--once.interval=100ms"]);
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    promtool_check(&text);
    assert_eq!(value(&text, "membloat_scans_total"), Some(2.0));
    // The process-wide THP mode here is one of the kernel's three.
    assert!(text.contains("membloat_thp_settings_info{enabled=\""));
}

/// `--version` says what the binary was built from, as the Prometheus exporters do, and
/// `membloat_build_info` carries the same facts as labels.
#[test]
fn version_and_build_info_name_the_revision_toolchain_and_target() {
    let out = run(&["--version"]);
    assert_eq!(out.status.code(), Some(0));
    let version = String::from_utf8(out.stdout).unwrap();
    let rustc = tool("rustc").arg("--version").output().unwrap();
    let rustc = String::from_utf8(rustc.stdout).unwrap();
    let rust_version = rustc.split_whitespace().nth(1).unwrap();
    assert!(
        version.contains(&format!("rust version:     {rust_version}\n")),
        "{version}"
    );
    let head = std::process::Command::new("git")
        .args(["rev-parse", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8(o.stdout).unwrap().trim().to_string());
    if let Some(head) = &head {
        assert!(version.contains(&format!("revision: {head})")), "{version}");
    } else {
        eprintln!("not a git checkout: the revision is not checked");
    }
    let field = |name: &str| {
        version
            .lines()
            .find_map(|l| l.trim().strip_prefix(name))
            .map(|v| v.trim().to_string())
            .unwrap_or_else(|| panic!("{name} in {version}"))
    };
    let date = field("build date:");
    assert!(
        date.len() == 20 && date.ends_with('Z') && date.as_bytes()[10] == b'T',
        "{date}"
    );
    let platform = field("platform:");
    assert!(platform.contains("linux"), "{platform}");

    let out = run(&["--once", "--once.interval=10ms"]);
    let text = String::from_utf8(out.stdout).unwrap();
    let revision = head.as_deref().unwrap_or("unknown");
    let want = format!(
        "membloat_build_info{{version=\"{}\",revision=\"{revision}\",branch=\"",
        env!("CARGO_PKG_VERSION")
    );
    let line = text
        .lines()
        .find(|l| l.starts_with(&want))
        .unwrap_or_else(|| panic!("no {want} in the exposition"));
    assert!(line.contains(&format!("builddate=\"{date}\"")), "{line}");
    assert!(
        line.contains(&format!("rustversion=\"{rust_version}\"")),
        "{line}"
    );
    assert!(line.contains(&format!("target=\"{platform}\"")), "{line}");
}

/// The exporter's own `process_*` series agree with what the kernel says of its pid.
#[test]
fn own_process_metrics_match_the_kernel() {
    let before = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    let d = Daemon::start(FAST);
    let pid = d.pid();
    std::thread::sleep(Duration::from_millis(500));
    let text = d.metrics();
    let got = |name: &str| value(&text, name).unwrap_or_else(|| panic!("no {name}"));
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kib = |key: &str| -> f64 {
        let line = status.lines().find(|l| l.starts_with(key)).unwrap();
        line.split_whitespace()
            .nth(1)
            .unwrap()
            .parse::<f64>()
            .unwrap()
            * 1024.0
    };
    let rss = got("process_resident_memory_bytes");
    assert!(
        (rss - kib("VmRSS:")).abs() < 0.5 * kib("VmRSS:"),
        "{rss} vs {}",
        kib("VmRSS:")
    );
    let vsz = got("process_virtual_memory_bytes");
    assert!(
        (vsz - kib("VmSize:")).abs() < 0.5 * kib("VmSize:"),
        "{vsz} vs {}",
        kib("VmSize:")
    );
    let limits = std::fs::read_to_string(format!("/proc/{pid}/limits")).unwrap();
    let soft: f64 = limits
        .lines()
        .find_map(|l| l.strip_prefix("Max open files"))
        .and_then(|r| r.split_whitespace().next()?.parse().ok())
        .unwrap();
    assert_eq!(got("process_max_fds"), soft);
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .count() as f64;
    let open = got("process_open_fds");
    // A scrape's socket and a reader's file come and go between the two counts.
    assert!(open >= 3.0 && (open - fds).abs() <= 4.0, "{open} vs {fds}");
    // The start time is btime (whole seconds, truncated) plus the start's clock ticks: it
    // can read up to a second and a tick early.
    let started = got("process_start_time_seconds");
    assert!(
        started >= before - 1.5 && started <= before + 10.0,
        "started {started}, test began {before}"
    );
    let cpu = got("process_cpu_seconds_total");
    assert!((0.0..5.0).contains(&cpu), "{cpu}");
}

/// The buddyinfo collector on the real kernel: the free memory it sums per zone from
/// /proc/buddyinfo's blocks is the kernel's own count of the zone's free pages
/// (/proc/zoneinfo `nr_free_pages`), read just before and just after the run: on a busy
/// machine pages come and go meanwhile, so the truth is the range the two counts span.
/// What a huge page can take is part of it.
#[test]
fn buddy_free_memory_is_the_kernels_count_of_free_pages() {
    let before = free_pages_by_zone();
    let text = String::from_utf8(
        run(&[
            "--once",
            "--once.interval=0s",
            "--no-collector.processes",
            "--no-collector.cgroup",
        ])
        .stdout,
    )
    .unwrap();
    let after = free_pages_by_zone();
    let page = 4096.0;
    let mut checked = 0;
    for ((node, name), pages) in &after {
        let labels = format!("{{node=\"{node}\",zone=\"{name}\"}}");
        let Some(buddy) = value(&text, &format!("membloat_buddyinfo_free_bytes{labels}")) else {
            continue;
        };
        let huge = value(
            &text,
            &format!("membloat_buddyinfo_free_huge_capable_bytes{labels}"),
        )
        .unwrap();
        assert!(huge <= buddy, "{labels}: huge-capable {huge} of {buddy}");
        let then = before[&(node.clone(), name.clone())];
        let (low, high) = (then.min(*pages) * page, then.max(*pages) * page);
        // buddyinfo and zoneinfo are two files read a moment apart within the run.
        let slack = 0.02 * high + (4 << 20) as f64;
        assert!(
            buddy >= low - slack && buddy <= high + slack,
            "{labels}: buddyinfo {buddy}, zoneinfo {low}..{high}"
        );
        checked += 1;
    }
    assert!(checked >= 2, "{checked} zones compared");
}

/// `nr_free_pages` of each zone in /proc/zoneinfo, by (node, zone).
fn free_pages_by_zone() -> std::collections::BTreeMap<(String, String), f64> {
    let zoneinfo = std::fs::read_to_string("/proc/zoneinfo").unwrap();
    let mut out = std::collections::BTreeMap::new();
    let mut zone = None;
    for line in zoneinfo.lines() {
        if let Some(rest) = line.strip_prefix("Node ") {
            let (node, name) = rest.split_once(", zone").unwrap();
            zone = Some((node.trim().to_string(), name.trim().to_string()));
        } else if let Some(n) = line.trim().strip_prefix("nr_free_pages ") {
            out.insert(zone.take().unwrap(), n.trim().parse::<f64>().unwrap());
        }
    }
    out
}
