//! Least privilege on the real kernel: as root, as an unprivileged user holding only
//! CAP_SYS_PTRACE (full coverage), and as one without it (partial coverage, counted and
//! warned about once). And the files it must never open, checked with strace.
//!
//! Dropping to another user needs root; CI runs as root. Run as a normal user, the tests
//! that need it say so on stderr and check what they can.

mod common;

use common::*;
use std::process::{Child, Command, Output, Stdio};

/// A root-owned process: "another user's" process for the unprivileged exporter.
struct Sleeper(Child);

impl Sleeper {
    fn start() -> Sleeper {
        Sleeper(
            Command::new("sleep")
                .arg("600")
                .stdout(Stdio::null())
                .spawn()
                .unwrap(),
        )
    }
}

impl Drop for Sleeper {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `--once` (two scans) over every process, as `setpriv` makes it: nobody, no groups, and
/// exactly the capabilities in `caps` (e.g. "+sys_ptrace"), or unchanged as root.
fn once_as(caps: Option<&str>) -> Output {
    let args = [
        "--once",
        "--once.interval=0s",
        "--collector.processes.top-k=100000",
    ];
    match caps {
        None => Command::new(bin()).args(args).output().unwrap(),
        Some(caps) => {
            let set = format!(
                "-all{}",
                if caps.is_empty() {
                    String::new()
                } else {
                    format!(",{caps}")
                }
            );
            tool("setpriv")
                .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
                .arg(format!("--inh-caps={set}"))
                .arg(format!("--ambient-caps={set}"))
                .arg(format!("--bounding-set={set}"))
                .arg("--")
                .arg(bin())
                .args(args)
                .output()
                .unwrap()
        }
    }
}

fn text(out: &Output) -> String {
    assert!(
        out.status.success(),
        "exit {:?}: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout.clone()).unwrap()
}

const DENIED: &str =
    "membloat_scan_errors_total{collector=\"processes\",reason=\"permission_denied\"}";

fn pss(text: &str, pid: u32) -> Option<f64> {
    value(
        text,
        &format!("membloat_process_pss_bytes{{pid=\"{pid}\",comm=\"sleep\"}}"),
    )
}

#[test]
fn nobody_with_only_cap_sys_ptrace_sees_what_root_sees() {
    if !is_root() {
        eprintln!("SKIPPED: dropping to nobody with CAP_SYS_PTRACE needs root");
        return;
    }
    let sleeper = Sleeper::start();
    let root = text(&once_as(None));
    let ptrace = once_as(Some("+sys_ptrace"));
    let ptrace_text = text(&ptrace);
    promtool_check(&ptrace_text);
    let pid = sleeper.0.id();
    assert!(
        pss(&root, pid).unwrap() > 0.0,
        "root cannot read sleep's smaps_rollup"
    );
    assert!(
        pss(&ptrace_text, pid).unwrap() > 0.0,
        "CAP_SYS_PTRACE alone did not give smaps_rollup of a root process"
    );
    // Processes even root cannot read (a non-dumpable init in some sandboxes) are the only
    // denials, for both.
    assert_eq!(value(&ptrace_text, DENIED), value(&root, DENIED));
    eprintln!(
        "denied reads: root {:?}, nobody+CAP_SYS_PTRACE {:?}",
        value(&root, DENIED),
        value(&ptrace_text, DENIED)
    );
}

#[test]
fn without_cap_sys_ptrace_coverage_is_partial_counted_and_warned_once() {
    let sleeper = Sleeper::start();
    let out = if is_root() {
        once_as(Some(""))
    } else {
        eprintln!("not root: running as this user, whose rights are already partial");
        once_as(None)
    };
    let text = text(&out);
    promtool_check(&text);
    let denied = value(&text, DENIED).unwrap();
    assert!(denied >= 1.0, "no denial counted:\n{text}");
    let pid = sleeper.0.id();
    if is_root() {
        assert_eq!(
            pss(&text, pid),
            None,
            "read a root process without CAP_SYS_PTRACE"
        );
    }
    // Still reported from status, stat and oom_score.
    assert!(
        value(
            &text,
            &format!("membloat_process_resident_bytes{{pid=\"{pid}\",comm=\"sleep\"}}")
        )
        .unwrap()
            > 0.0
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    let warnings = stderr.matches("CAP_SYS_PTRACE").count();
    assert_eq!(warnings, 1, "two scans, warnings:\n{stderr}");
}

/// `environ` holds secrets, `mem` the process's memory, `io` is not needed: the exporter
/// never opens them, also with the deep tier reading every process's smaps.
#[test]
fn never_opens_environ_mem_or_io() {
    let trace = tempfile::NamedTempFile::new().unwrap();
    let out = tool("strace")
        .args(["-f", "-qq", "-e", "trace=open,openat,openat2", "-o"])
        .arg(trace.path())
        .arg(bin())
        .args([
            "--once",
            "--once.interval=0s",
            "--collector.processes.top-k=100000",
            "--collector.processes.deep-min-size=0",
            "--collector.processes.deep-interval=0s",
        ])
        .output()
        .unwrap();
    text(&out);
    let log = std::fs::read_to_string(trace.path()).unwrap();
    let opened: Vec<&str> = log
        .lines()
        .filter_map(|l| l.split('"').nth(1))
        .filter(|p| p.starts_with("/proc/"))
        .collect();
    // The trace saw the reads it should see.
    for needed in ["/smaps_rollup", "/smaps", "/status", "/oom_score"] {
        assert!(
            opened.iter().any(|p| p.ends_with(needed)),
            "strace saw no {needed}"
        );
    }
    let forbidden: Vec<&&str> = opened
        .iter()
        .filter(|p| p.ends_with("/environ") || p.ends_with("/mem") || p.ends_with("/io"))
        .collect();
    assert!(forbidden.is_empty(), "opened {forbidden:?}");
    eprintln!(
        "{} /proc files opened, none of environ, mem, io",
        opened.len()
    );
}
