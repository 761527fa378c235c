//! The log as an operator's tools read it: every line the exporter prints parses as logfmt
//! (or as JSON with `--log.format=json`) with an RFC 3339 time, variables are fields, a
//! collector that starts failing is warned about once and its recovery said once, and
//! debug adds a line per scan and per scrape.

use crate::common;

use common::*;
use std::collections::BTreeMap;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A strict logfmt parser: `key=value` pairs separated by one space; a value is bare (no
/// space, `"` or `=`) or quoted with `\"`, `\\`, `\n`, `\t` escapes.
fn logfmt(line: &str) -> Result<BTreeMap<String, String>, String> {
    let mut out = BTreeMap::new();
    let mut rest = line;
    while !rest.is_empty() {
        let eq = rest.find('=').ok_or_else(|| format!("no = in {rest:?}"))?;
        let key = &rest[..eq];
        if key.is_empty() || !key.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
            return Err(format!("bad key {key:?}"));
        }
        rest = &rest[eq + 1..];
        let value;
        if let Some(q) = rest.strip_prefix('"') {
            let mut v = String::new();
            let mut chars = q.char_indices();
            let end = loop {
                match chars.next() {
                    None => return Err(format!("unclosed quote in {line:?}")),
                    Some((i, '"')) => break i,
                    Some((_, '\\')) => match chars.next() {
                        Some((_, '"')) => v.push('"'),
                        Some((_, '\\')) => v.push('\\'),
                        Some((_, 'n')) => v.push('\n'),
                        Some((_, 't')) => v.push('\t'),
                        other => return Err(format!("bad escape {other:?} in {line:?}")),
                    },
                    Some((_, c)) => v.push(c),
                }
            };
            value = v;
            rest = &q[end + 1..];
        } else {
            let end = rest.find(' ').unwrap_or(rest.len());
            value = rest[..end].to_string();
            if value.is_empty() || value.contains(['"', '=']) {
                return Err(format!("bad bare value {value:?} in {line:?}"));
            }
            rest = &rest[end..];
        }
        if out.insert(key.to_string(), value).is_some() {
            return Err(format!("{key} twice in {line:?}"));
        }
        if let Some(r) = rest.strip_prefix(' ') {
            rest = r;
            if rest.is_empty() {
                return Err(format!("trailing space in {line:?}"));
            }
        } else if !rest.is_empty() {
            return Err(format!("no space after a value in {line:?}"));
        }
    }
    Ok(out)
}

/// `2026-11-23T03:04:05.678Z`.
fn rfc3339_millis(ts: &str) -> bool {
    let b = ts.as_bytes();
    let digits = |r: std::ops::Range<usize>| {
        r.into_iter()
            .all(|i| b.get(i).is_some_and(u8::is_ascii_digit))
    };
    b.len() == 24
        && digits(0..4)
        && b[4] == b'-'
        && digits(5..7)
        && b[7] == b'-'
        && digits(8..10)
        && b[10] == b'T'
        && digits(11..13)
        && b[13] == b':'
        && digits(14..16)
        && b[16] == b':'
        && digits(17..19)
        && b[19] == b'.'
        && digits(20..23)
        && b[23] == b'Z'
}

/// Runs the exporter on `root` with `args` while `during` runs, then stops it (SIGTERM)
/// and returns what it printed on stderr.
fn stderr_of(root: &std::path::Path, args: &[&str], during: impl FnOnce(u16)) -> String {
    let port = free_port();
    let log = root.join("stderr.log");
    let mut child = Command::new(bin())
        .arg(format!("--path.procfs={}", root.join("proc").display()))
        .arg(format!("--path.sysfs={}", root.join("sys").display()))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .args(args)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while get(port, "/", &[]).status != 200 {
        assert!(start.elapsed() < Duration::from_secs(10), "never listened");
        std::thread::sleep(Duration::from_millis(50));
    }
    during(port);
    assert!(Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap()
        .success());
    assert!(child.wait().unwrap().success());
    std::fs::read_to_string(&log).unwrap()
}

fn meminfo_success(port: u16) -> Option<f64> {
    value(
        &get(port, "/metrics", &[]).body,
        "membloat_scrape_collector_success{collector=\"meminfo\"}",
    )
}

fn wait(what: &str, mut ok: impl FnMut() -> bool) {
    let start = Instant::now();
    while !ok() {
        assert!(start.elapsed() < Duration::from_secs(10), "{what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn every_line_is_logfmt_and_a_failing_collector_is_warned_once_and_recovers_once() {
    let dir = tempfile::tempdir().unwrap();
    let root = fixture_copy(dir.path());
    let fifo = root.join("proc/meminfo");
    make_fifo(&fifo);
    // The kubelet collector reads MemTotal from the same file when it finds the fixture's
    // kubelet: off, so that one collector fails here.
    let args = [
        "--scan.interval=100ms",
        "--collector.processes.read-timeout=200ms",
        "--no-collector.kubelet",
    ];
    let stderr = stderr_of(&root, &args, |port| {
        wait("meminfo never failed", || {
            meminfo_success(port) == Some(0.0)
        });
        // Several failing scans: still one warning.
        std::thread::sleep(Duration::from_millis(800));
        let writer = std::fs::OpenOptions::new().write(true).open(&fifo).unwrap();
        std::fs::copy(fixture().join("proc/meminfo"), root.join("meminfo.new")).unwrap();
        std::fs::rename(root.join("meminfo.new"), &fifo).unwrap();
        drop(writer);
        wait("meminfo never recovered", || {
            meminfo_success(port) == Some(1.0)
        });
        std::thread::sleep(Duration::from_millis(500));
    });
    eprintln!("{stderr}");
    let mut events = Vec::new();
    for line in stderr.lines() {
        let f = logfmt(line).unwrap_or_else(|e| panic!("not logfmt: {e}"));
        let keys: Vec<&str> = f.keys().map(String::as_str).collect();
        assert!(line.starts_with("ts=") && keys.contains(&"level") && keys.contains(&"msg"));
        assert!(rfc3339_millis(&f["ts"]), "ts {:?}", f["ts"]);
        assert!(["error", "warn", "info", "debug"].contains(&f["level"].as_str()));
        events.push(f);
    }
    let count = |msg: &str, collector: &str| {
        events
            .iter()
            .filter(|f| {
                f["msg"] == msg && f.get("collector").map(String::as_str) == Some(collector)
            })
            .count()
    };
    assert_eq!(count("collector failing", "meminfo"), 1, "{stderr}");
    let failing = events
        .iter()
        .find(|f| f["msg"] == "collector failing")
        .unwrap();
    assert_eq!(failing["level"], "warn");
    assert_eq!(failing["reason"], "timeout");
    assert_eq!(count("collector recovered", "meminfo"), 1, "{stderr}");
    // Variables are fields: the listen line carries the address, not a sentence.
    let listening = events.iter().find(|f| f["msg"] == "listening").unwrap();
    assert!(listening["address"].starts_with("127.0.0.1:"));
    // Nothing per scan at the default level: some 20 scans ran.
    assert!(events.len() <= 8, "{} lines:\n{stderr}", events.len());
    assert!(!events.iter().any(|f| f["level"] == "debug"));
}

#[test]
fn json_lines_and_debug_say_what_each_scan_and_scrape_did() {
    let dir = tempfile::tempdir().unwrap();
    let root = fixture_copy(dir.path());
    let args = [
        "--scan.interval=100ms",
        "--log.format=json",
        "--log.level=debug",
    ];
    let stderr = stderr_of(&root, &args, |port| {
        std::thread::sleep(Duration::from_millis(400));
        let r = get(port, "/metrics", &[("Accept-Encoding", "gzip")]);
        assert_eq!(r.status, 200);
    });
    let mut msgs = Vec::new();
    for line in stderr.lines() {
        let v: serde_json::Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
        assert!(rfc3339_millis(v["ts"].as_str().unwrap()), "{line}");
        assert!(line.starts_with("{\"ts\":"), "ts first: {line}");
        msgs.push(v);
    }
    let scans: Vec<_> = msgs.iter().filter(|v| v["msg"] == "scan").collect();
    assert!(scans.len() >= 3, "{stderr}");
    // The fixture tree holds 5 processes with memory.
    assert!(scans.iter().all(|v| v["processes"] == "5"), "{stderr}");
    let scrape = msgs.iter().find(|v| v["msg"] == "scrape").unwrap();
    assert_eq!(scrape["encoding"], "gzip");
    assert_eq!(scrape["format"], "text");
}

/// A file that reads but does not parse is counted as malformed, and the debug log says
/// which file and what was wrong with it (the first thing to look at when a new kernel
/// changes a format).
#[test]
fn a_malformed_file_is_named_with_its_fault_in_the_debug_log() {
    let dir = tempfile::tempdir().unwrap();
    let root = fixture_copy(dir.path());
    let pid = std::fs::read_dir(root.join("proc"))
        .unwrap()
        .filter_map(|e| e.unwrap().file_name().to_str()?.parse::<u32>().ok())
        .find(|p| *p < 90000 && root.join(format!("proc/{p}/stat")).exists())
        .unwrap();
    let stat = root.join(format!("proc/{pid}/stat"));
    std::fs::write(&stat, format!("{pid} (truncated")).unwrap();
    let procfs = format!("--path.procfs={}", root.join("proc").display());
    let sysfs = format!("--path.sysfs={}", root.join("sys").display());
    let out = run(&[
        "--once",
        "--once.interval=0s",
        "--log.level=debug",
        &procfs,
        &sysfs,
    ]);
    assert!(out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    // (The fixture holds malformed files of its own: find ours.)
    let path = stat.display().to_string();
    let line = stderr
        .lines()
        .filter(|l| l.contains("msg=\"malformed file\""))
        .find(|l| logfmt(l).unwrap()["path"] == path)
        .unwrap_or_else(|| panic!("no malformed-file line for {path}: {stderr}"));
    let fields = logfmt(line).unwrap();
    assert_eq!(fields["level"], "debug");
    assert!(fields["error"].starts_with("missing "), "{line}");
    let text = String::from_utf8_lossy(&out.stdout);
    let malformed = "membloat_scan_errors_total{collector=\"processes\",reason=\"malformed\"}";
    assert!(
        value(&text, malformed).unwrap() >= 1.0,
        "counted as malformed"
    );
}
