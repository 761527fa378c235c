//! How the scan reads /proc, with the real binary: idle processes are not re-read, a
//! change in one is seen by the next scan, and a read that never returns is left behind
//! and reported while scrapes go on.

mod common;

use common::repro::Repro;
use common::*;
use std::io::{BufRead, Write};
use std::path::Path;
use std::time::{Duration, Instant};

const MIB: f64 = 1048576.0;

fn scans(d: &Daemon) -> f64 {
    value(&d.metrics(), "membloat_scans_total").unwrap()
}

/// Waits until `n` more scans completed.
fn wait_scans(d: &Daemon, n: f64) {
    let until = scans(d) + n;
    d.wait_until(Duration::from_secs(10), || scans(d) >= until);
}

#[test]
fn idle_processes_are_not_reread_and_a_burst_is_seen_by_the_next_scan() {
    let mut burst = Repro::start("burst", &["4096"], &[]);
    // A refresh so rare it never happens here: only a change can make a re-read.
    let d = Daemon::start(&[
        "--scan.interval=300ms",
        "--collector.processes.top-k=100000",
        "--collector.processes.rollup-refresh=1000000",
    ]);
    let pss = burst.series("membloat_process_pss_bytes", "burst");
    d.wait_until(Duration::from_secs(10), || {
        value(&d.metrics(), &pss).is_some()
    });
    wait_scans(&d, 2.0);
    let text = d.metrics();
    let before = value(&text, &pss).unwrap();
    let scanned = value(&text, "membloat_processes_scanned").unwrap();
    let reread = value(&text, "membloat_scan_rollup_reads").unwrap();
    // The sleeping processes of this machine (init, this test's reproducer, ...) keep
    // their values; only the ones whose memory moved (cargo, this test) are re-read.
    assert!(
        reread + 2.0 <= scanned,
        "{reread} of {scanned} processes re-read while idle"
    );
    assert!(
        (3.0 * MIB..64.0 * MIB).contains(&before),
        "Pss before the burst {before}"
    );

    writeln!(burst.child.stdin.as_mut().unwrap(), "64").unwrap();
    let mut line = String::new();
    burst.out.read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "grown");
    let grown_at = scans(&d);
    let started = Instant::now();
    d.wait_until(Duration::from_secs(10), || {
        value(&d.metrics(), &pss).unwrap_or(0.0) >= before + 63.0 * MIB
    });
    // Seen within two scans of the burst (the scan running at the time may have read the
    // process before it grew).
    let seen_at = scans(&d);
    assert!(
        seen_at - grown_at <= 2.0,
        "burst seen {} scans later ({:?})",
        seen_at - grown_at,
        started.elapsed()
    );
}

/// A fixture tree whose pid 77 has a FIFO for smaps_rollup: opening it blocks until a
/// writer comes, as a read of a process whose mmap lock is held does.
fn tree_with_a_stuck_process(dir: &Path) {
    let from = fixture().join("proc/18265");
    for pid in ["77", "78"] {
        let to = dir.join("proc").join(pid);
        std::fs::create_dir_all(&to).unwrap();
        for f in std::fs::read_dir(&from).unwrap() {
            let f = f.unwrap();
            std::fs::copy(f.path(), to.join(f.file_name())).unwrap();
        }
    }
    let fifo = dir.join("proc/77/smaps_rollup");
    std::fs::remove_file(&fifo).unwrap();
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
    for f in ["meminfo", "vmstat", "stat"] {
        std::fs::copy(fixture().join("proc").join(f), dir.join("proc").join(f)).unwrap();
    }
    std::fs::create_dir_all(dir.join("sys")).unwrap();
}

#[test]
fn a_read_that_never_returns_is_left_behind_and_reported() {
    let dir = tempfile::tempdir().unwrap();
    tree_with_a_stuck_process(dir.path());
    let procfs = format!("--path.procfs={}", dir.path().join("proc").display());
    let sysfs = format!("--path.sysfs={}", dir.path().join("sys").display());
    let started = Instant::now();
    let d = Daemon::start(&[
        &procfs,
        &sysfs,
        "--scan.interval=200ms",
        "--collector.processes.read-timeout=300ms",
        "--collector.processes.top-k=100",
    ]);
    // The first scan waited for the stuck read only the timeout, not forever.
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    let text = d.metrics();
    let timeouts = "membloat_scan_errors_total{collector=\"processes\",reason=\"timeout\"}";
    assert!(value(&text, timeouts).unwrap() >= 1.0, "{text}");
    // 78 is read whole; 77 is read from its next scan on, without its smaps_rollup.
    assert!(text.contains("membloat_process_pss_bytes{pid=\"78\""));
    wait_scans(&d, 3.0);
    let text = d.metrics();
    assert!(
        text.contains("membloat_process_resident_bytes{pid=\"77\""),
        "{text}"
    );
    assert!(!text.contains("membloat_process_pss_bytes{pid=\"77\""));
    // One reader stays stuck on 77 and is never given it again: the timeouts stop and the
    // threads stay bounded.
    let first = value(&text, timeouts).unwrap();
    wait_scans(&d, 3.0);
    let text = d.metrics();
    assert_eq!(value(&text, timeouts), Some(first));
    assert_eq!(value(&text, "membloat_scan_stalled_processes"), Some(0.0));
    let threads = value(&text, "membloat_scan_reader_threads").unwrap();
    assert!((2.0..=6.0).contains(&threads), "{threads} reader threads");
    promtool_check(&text);
}
