//! The side-by-side comparison script (benches/compare/compare.py), run small: it must
//! build its C programs, measure every reader, print every row with a ratio, and leave no
//! process behind. The figures of a run this small are not the ones the README quotes.

use crate::common;

use common::*;
use std::path::Path;
use std::process::Command;

#[test]
#[ignore = "needs root"]
fn comparison_runs_small_and_cleans_up() {
    needs_root("the comparison (a private PID namespace)");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/compare/compare.py");
    let json = tempfile::NamedTempFile::new().unwrap();
    let mut cmd = Command::new("python3");
    cmd.arg(&script).args([
        "--procs=60",
        "--large=1",
        "--windows=1",
        "--latency-seconds=0.5",
        "--churn-seconds=3",
        "--churn-size=20",
        &format!("--exporter={}", bin()),
        &format!("--json={}", json.path().display()),
    ]);
    let table = succeeded(cmd.output().unwrap(), "compare.py");
    for row in [
        "C floor: stat, status, smaps_rollup",
        "C floor without smaps_rollup",
        "membloat_exporter, every file every scan",
        "membloat_exporter as shipped",
        "process-exporter, one group per process",
        "process-exporter, grouped by comm",
        "node-exporter",
    ] {
        let line = table
            .lines()
            .find(|l| l.starts_with(&format!("| {row}")))
            .unwrap_or_else(|| panic!("no row {row:?} in\n{table}"));
        // | label | ms min / median / max | ratio min / **median** / max | vs ours |
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        let ms: Vec<f64> = cells[2].split(" / ").map(|v| v.parse().unwrap()).collect();
        assert!(ms[0] > 0.0 && ms[0] <= ms[1] && ms[1] <= ms[2], "{line}");
    }
    let raw: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(json.path()).unwrap()).unwrap();
    let r = &raw["results"][0];
    // 60 small processes and one large, nothing else, inside the namespace (the script
    // itself, the population's parent processes and the reader under test add a few).
    let visible = r["visible_pids"].as_f64().unwrap();
    assert!((61.0..80.0).contains(&visible), "{visible} pids visible");
    // process-exporter reads more (threads, limits, io, cmdline) and parses in Go: even
    // at 60 processes it costs more per scrape than a full scan of ours.
    let ours = r["ours_full"]["median"].as_f64().unwrap();
    let pe = r["pe_per_process"]["median"].as_f64().unwrap();
    assert!(pe > ours, "process-exporter {pe} ms, ours {ours} ms");
    assert!(raw["churn"]["scans"].as_f64().unwrap() >= 2.0);
    // Nothing it started is left: no process runs its C programs any more.
    let leftover: Vec<String> = std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| std::fs::read_link(e.path().join("exe")).ok())
        .map(|p| p.display().to_string())
        .filter(|p| p.contains("membloat-compare-"))
        .collect();
    assert!(leftover.is_empty(), "left running: {leftover:?}");
}

/// docs/node_exporter.md maps our series to node_exporter's: each pair is served by the
/// real node_exporter and by us on this machine, and the gauges that do not move agree.
#[test]
fn the_node_exporter_mapping_holds_on_this_machine() {
    let doc = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/node_exporter.md"),
    )
    .unwrap();
    let pairs: Vec<(&str, &str)> = doc
        .lines()
        .filter(|l| l.starts_with("| `membloat_"))
        .map(|l| {
            let cells: Vec<&str> = l.split('|').map(|c| c.trim().trim_matches('`')).collect();
            (cells[1], cells[2])
        })
        .collect();
    assert!(pairs.len() >= 15, "{pairs:?}");
    let port = free_port();
    let mut ne = tool("prometheus-node-exporter")
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("prometheus-node-exporter (scripts/test.sh installs it)");
    struct Kill<'a>(&'a mut std::process::Child);
    impl Drop for Kill<'_> {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let _kill = Kill(&mut ne);
    let start = std::time::Instant::now();
    // curl: node_exporter answers in chunks, which the tests' own client does not join.
    let theirs = loop {
        let out = tool("curl")
            .args(["-sf", &format!("http://127.0.0.1:{port}/metrics")])
            .output()
            .unwrap();
        if out.status.success() {
            break String::from_utf8(out.stdout).unwrap();
        }
        assert!(
            start.elapsed().as_secs() < 10,
            "node_exporter never answered"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    let ours = String::from_utf8(run(&["--once", "--once.interval=0s"]).stdout).unwrap();
    for (mine, node) in &pairs {
        let a = value(&ours, mine);
        let b = value(&theirs, node);
        // Pressure needs PSI; swap lines exist without swap. A kernel without the source
        // lacks both, never just one.
        assert_eq!(a.is_some(), b.is_some(), "{mine}: {a:?}, {node}: {b:?}");
        if [
            "membloat_memory_total_bytes",
            "membloat_swap_total_bytes",
            "membloat_memory_commit_limit_bytes",
        ]
        .contains(mine)
        {
            assert_eq!(a, b, "{mine} vs {node}");
        }
    }
}
