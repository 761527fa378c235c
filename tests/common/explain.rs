//! `explain` as the tests run it, and the waits and checks of the remedies it prints
//! applied to real processes (tests/explain.rs, tests/explain_jvm.rs).

use super::bin;
use serde_json::Value;
use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

pub const MIB: f64 = 1048576.0;

pub fn explain(args: &[&str]) -> Output {
    explain_env(args, &[])
}

/// `explain` with `env` set (a PATH that puts another tool first).
pub fn explain_env(args: &[&str], env: &[(&str, &str)]) -> Output {
    Command::new(bin())
        .arg("explain")
        .arg("--explain.interval=500ms")
        .args(args)
        .envs(env.iter().copied())
        .output()
        .unwrap()
}

/// `explain --format json --pid PID`: the exit code and the document.
pub fn explain_json(pid: u32) -> (i32, Value) {
    let out = explain(&["--format", "json", "--pid", &pid.to_string()]);
    let doc = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)));
    (out.status.code().unwrap(), doc)
}

/// The one finding of `kind` about `pid`.
pub fn finding<'a>(doc: &'a Value, kind: &str, pid: u32) -> &'a Value {
    doc["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["kind"] == kind && f["process"]["pid"] == pid)
        .unwrap_or_else(|| panic!("no {kind} finding for pid {pid}: {doc:#}"))
}

pub fn within(what: &str, got: f64, truth: f64) {
    eprintln!(
        "{what}: program {:.1} MiB, explain {:.1} MiB",
        truth / MIB,
        got / MIB
    );
    assert!(
        (got - truth).abs() <= 0.05 * truth,
        "{what}: {got} vs {truth}"
    );
}

/// Runs a `now` command as `explain` printed it, with `path` first on PATH (a JDK's bin).
pub fn run_now(now: &str, path: Option<&Path>) {
    let mut sh = Command::new("sh");
    sh.arg("-c").arg(now);
    if let Some(dir) = path {
        let old = std::env::var("PATH").unwrap_or_default();
        sh.env("PATH", format!("{}:{old}", dir.display()));
    }
    let out = sh.output().unwrap();
    assert!(
        out.status.success(),
        "{now}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// What `fell()` says once it reaches 80 % of `promised`, or after 30 s: memory a
/// collector gives back on a thread of its own goes soon after the command returns.
pub fn fallen(promised: f64, fell: impl Fn() -> f64) -> f64 {
    fallen_within(Duration::from_secs(30), promised, fell)
}

/// What `fell()` says once it reaches 80 % of `promised`, or after `limit`.
pub fn fallen_within(limit: Duration, promised: f64, fell: impl Fn() -> f64) -> f64 {
    let deadline = Instant::now() + limit;
    loop {
        let f = fell();
        if f >= 0.8 * promised || Instant::now() > deadline {
            return f;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A `next_start` of glibc's as the environment it names (`NAME=VALUE`).
pub fn environment(next: &str) -> (&str, &str) {
    next.split_once('=').unwrap_or_else(|| panic!("{next:?}"))
}
