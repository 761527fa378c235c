//! A container's headroom on the real kernel: a memory cgroup (v1 here) with a 64 MiB limit
//! and a process holding 40 MiB of anonymous memory in it. The exporter reports the limit,
//! the usage and the working set of that cgroup, and they agree with what the process
//! itself holds (its `RssAnon`, a counter of its own) and with the limit.

mod common;

use common::*;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

const LIMIT: u64 = 64 << 20;

#[test]
#[ignore = "needs root"]
fn a_cgroup_near_its_limit_shows_its_headroom() {
    needs_root("making a memory cgroup with a limit");
    let base = std::path::Path::new("/sys/fs/cgroup/memory");
    if !base.join("memory.limit_in_bytes").exists() {
        skipped(&format!(
            "no cgroup v1 memory controller at {}",
            base.display()
        ));
        return;
    }
    let name = format!("membloat-test-headroom-{}", std::process::id());
    let dir = base.join(&name);
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(dir.join("memory.limit_in_bytes"), LIMIT.to_string()).unwrap();
    // Joins the cgroup, touches 40 MiB, says so, and waits to be killed.
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "echo $$ > {} && exec python3 -c 'import sys, time\nb = bytearray(40 << 20)\nfor i in range(0, len(b), 4096): b[i] = 1\nprint(\"ready\", flush=True)\ntime.sleep(600)'",
            dir.join("cgroup.procs").display()
        ))
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    struct Cleanup(std::process::Child, std::path::PathBuf);
    impl Drop for Cleanup {
        fn drop(&mut self) {
            self.0.kill().ok();
            self.0.wait().ok();
            for _ in 0..50 {
                if std::fs::remove_dir(&self.1).is_ok() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    }
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line.trim(), "ready");
    let pid = child.id();
    let _cleanup = Cleanup(child, dir.clone());

    let text = String::from_utf8(run(&["--once", "--once.interval=0s"]).stdout).unwrap();
    let series = |family: &str| {
        value(&text, &format!("{family}{{cgroup=\"/{name}\"}}"))
            .unwrap_or_else(|| panic!("no {family} for /{name}"))
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
