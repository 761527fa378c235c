//! Each phenomenon of docs/signals.md, reproduced by a real program on the real kernel
//! and detected by the real exporter; and each detector shown silent on a program that
//! does not have it.

use crate::common;

use common::repro::{build, Repro};
use common::*;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const MIB: f64 = 1048576.0;

/// Every process is a deep-tier candidate and is deep-read every scan.
const ARGS: &[&str] = &[
    "--scan.interval=200ms",
    "--collector.processes.top-k=100000",
    "--collector.processes.deep-interval=0s",
    "--collector.processes.deep-min-size=0",
];

/// Polls the exporter until `f` gives a value, or fails with the last exposition.
fn wait_for<T>(d: &Daemon, limit: Duration, what: &str, mut f: impl FnMut(&str) -> Option<T>) -> T {
    let start = Instant::now();
    loop {
        let text = d.metrics();
        if let Some(v) = f(&text) {
            return v;
        }
        if start.elapsed() > limit {
            panic!("{what}: not seen within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The measured hoarding series of the `hoard` reproducer.
fn hoarded_series(r: &Repro) -> String {
    format!(
        "membloat_process_hoarded_bytes{{pid=\"{}\",comm=\"hoard\",method=\"measured\"}}",
        r.pid()
    )
}

/// Waits until the exporter has seen the process idle with deep data, then keeps watching
/// for ten more scans (its scan counter, not the clock) and returns the largest value
/// `series` took meanwhile.
fn settled_max(d: &Daemon, r: &Repro, comm: &str, series: &str) -> f64 {
    let idle = r.series("membloat_process_idle", comm);
    let heap = r.series("membloat_process_heap_resident_bytes", comm);
    wait_for(d, Duration::from_secs(10), "idle with deep data", |t| {
        (value(t, &idle) == Some(1.0) && value(t, &heap).is_some()).then_some(())
    });
    let scans = |t: &str| value(t, "membloat_scans_total").unwrap_or(0.0);
    let end = scans(&d.metrics()) + 10.0;
    let mut max: f64 = 0.0;
    let started = std::time::Instant::now();
    loop {
        let t = d.metrics();
        max = max.max(value(&t, series).expect(series));
        if scans(&t) >= end {
            return max;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "ten scans took over 60 s"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn hoarding_pinned_burst_is_flagged_with_what_it_holds() {
    // The exporter starts once the burst is over, so its first walk sees the final heap.
    let r = Repro::start("hoard", &["3", "1", "0"], &[]);
    let d = Daemon::start(ARGS);
    let held: f64 = r.ready.split_whitespace().nth(1).unwrap().parse().unwrap();
    assert!(
        held > 512.0 * MIB,
        "the reproducer should hold over 512 MiB, holds {held}"
    );
    let series = hoarded_series(&r);
    let hoarded = wait_for(&d, Duration::from_secs(10), "hoarded bytes", |t| {
        value(t, &series).filter(|&v| v > 0.0)
    });
    eprintln!(
        "hoarding: allocator holds {:.1} MiB free, exporter measures {:.1} MiB it could give back",
        held / MIB,
        hoarded / MIB
    );
    assert!(
        (hoarded - held).abs() <= 0.10 * held,
        "measured {hoarded} vs held {held}"
    );
    let group = value(
        &d.metrics(),
        "membloat_group_hoarded_bytes{group=\"hoard\",method=\"measured\"}",
    )
    .unwrap();
    assert!(group >= hoarded * 0.9, "group sum {group}");
}

#[test]
fn hoarding_is_not_flagged_after_trim_with_mmap_threshold_or_without_pin() {
    let d = Daemon::start(ARGS);
    type Env<'a> = &'a [(&'a str, &'a str)];
    let cases: [(&str, [&str; 3], Env); 3] = [
        ("malloc_trim(0)", ["3", "1", "1"], &[]),
        (
            "MALLOC_MMAP_THRESHOLD_=131072",
            ["3", "1", "0"],
            &[("MALLOC_MMAP_THRESHOLD_", "131072")],
        ),
        ("no pin", ["3", "0", "0"], &[]),
    ];
    for (what, args, env) in cases {
        let r = Repro::start("hoard", &args, env);
        let max = settled_max(&d, &r, "hoard", &hoarded_series(&r));
        let heap = value(
            &d.metrics(),
            &r.series("membloat_process_heap_resident_bytes", "hoard"),
        )
        .unwrap();
        let size = value(
            &d.metrics(),
            &r.series("membloat_process_heap_size_bytes", "hoard"),
        )
        .unwrap();
        eprintln!(
            "hoarding, {what}: heap Rss {:.1} MiB of Size {:.1} MiB, measured max {max}",
            heap / MIB,
            size / MIB
        );
        assert_eq!(max, 0.0, "{what}: flagged {max} bytes");
    }
}

fn online_cpus() -> u64 {
    std::thread::available_parallelism()
        .map(|n| n.get() as u64)
        .unwrap_or(1)
}

#[test]
fn arenas_16_threads_reach_the_glibc_ceiling_and_arena_max_1_has_none() {
    let d = Daemon::start(ARGS);
    let expected = 16u64.min(8 * online_cpus() - 1) as f64;
    let r = Repro::start("arenas", &[], &[]);
    let arenas = r.series("membloat_process_arena_heaps", "arenas");
    let n = wait_for(&d, Duration::from_secs(10), "arena heaps", |t| {
        value(t, &arenas)
    });
    let text = d.metrics();
    let reserved = value(
        &text,
        &r.series("membloat_process_arena_reserved_bytes", "arenas"),
    )
    .unwrap();
    eprintln!(
        "arenas: {n} heaps, {:.0} MiB reserved, expected {expected}",
        reserved / MIB
    );
    assert_eq!(n, expected);
    assert_eq!(reserved, expected * 64.0 * MIB);
    if expected < 16.0 {
        assert_eq!(
            value(
                &text,
                &r.series("membloat_process_arena_at_ceiling", "arenas")
            ),
            Some(1.0)
        );
    }

    let capped = Repro::start("arenas", &[], &[("MALLOC_ARENA_MAX", "1")]);
    let n = wait_for(&d, Duration::from_secs(10), "arena heaps", |t| {
        value(t, &capped.series("membloat_process_arena_heaps", "arenas"))
    });
    assert_eq!(n, 0.0, "MALLOC_ARENA_MAX=1");
    assert_eq!(
        value(
            &d.metrics(),
            &capped.series("membloat_process_arena_at_ceiling", "arenas")
        ),
        Some(0.0)
    );
}

#[test]
fn a_go_heap_is_not_counted_as_glibc_arenas() {
    let d = Daemon::start(ARGS);
    let r = Repro::start("goheap", &[], &[]);
    let comm = std::fs::read_to_string(format!("/proc/{}/comm", r.pid()))
        .unwrap()
        .trim()
        .to_string();
    let n = wait_for(&d, Duration::from_secs(10), "go arena heaps", |t| {
        value(t, &r.series("membloat_process_arena_heaps", &comm))
    });
    assert_eq!(n, 0.0);
    // Yet it has a real heap of its own: tens of MiB of anonymous read-write memory.
    let anon = r.series("membloat_process_resident_anon_bytes", &comm);
    wait_for(&d, Duration::from_secs(10), "Go heap of 64 MiB", |t| {
        value(t, &anon).filter(|&a| a >= 64.0 * MIB)
    });
    let n = value(
        &d.metrics(),
        &r.series("membloat_process_arena_heaps", &comm),
    );
    assert_eq!(n, Some(0.0));
}

fn vmstat(key: &str) -> f64 {
    std::fs::read_to_string("/proc/vmstat")
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{key} "))?.parse().ok())
        .unwrap()
}

#[test]
#[ignore = "needs root"]
fn khugepaged_regrowth_is_flagged_while_idle_and_not_with_max_ptes_none_0() {
    needs_root("tuning khugepaged");
    let _serial = kernel_settings_lock();
    let d = Daemon::start(ARGS);
    let mut baseline_enabled = Vec::new();
    if std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled")
        .unwrap()
        .contains("[never]")
    {
        baseline_enabled.push(("enabled", "madvise"));
    }
    let _thp = KernelSettings::set(&baseline_enabled);

    for (max_ptes_none, expect_regrowth) in [("511", true), ("0", false)] {
        let _slow = KernelSettings::set(&[("khugepaged/max_ptes_none", max_ptes_none)]);
        let r = Repro::start("regrowth", &[], &[]);
        let anon = r.series("membloat_process_resident_anon_bytes", "regrowth");
        let idle = r.series("membloat_process_idle", "regrowth");
        // Seen near the trough, idle, before khugepaged is sped up (at its default pace
        // it may already have collapsed a few ranges).
        let trough = wait_for(&d, Duration::from_secs(10), "regrowth trough", |t| {
            value(t, &anon).filter(|&a| a < 64.0 * MIB && value(t, &idle) == Some(1.0))
        });
        let cpu = r.series("membloat_process_cpu_seconds_total", "regrowth");
        let cpu_before = value(&d.metrics(), &cpu).unwrap();
        let collapsed_before = vmstat("thp_collapse_alloc");
        let full_scans_before = vmstat_khugepaged("full_scans");
        let _fast = KernelSettings::set(&[
            ("khugepaged/scan_sleep_millisecs", "100"),
            ("khugepaged/pages_to_scan", "65536"),
        ]);
        let regrown_series = r.series("membloat_process_regrown_since_trough_bytes", "regrowth");
        // The truth from khugepaged's own progress, however busy the machine: two full
        // passes over every mm since it was sped up (a pass collapses every range it may),
        // then the exporter's view two scans later. A deadline only to fail loudly.
        let start = Instant::now();
        while vmstat_khugepaged("full_scans") < full_scans_before + 2.0 {
            assert!(
                start.elapsed() < Duration::from_secs(300),
                "khugepaged made fewer than two full passes in 300 s"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        d.wait_for_scans(2);
        if expect_regrowth {
            let text = d.metrics();
            let regrown = value(&text, &regrown_series).expect("regrown bytes served");
            let cpu_after = value(&text, &cpu).unwrap();
            let collapsed = vmstat("thp_collapse_alloc") - collapsed_before;
            eprintln!("regrowth: RssAnon {:.1} -> {:.1} MiB, {:.1} MiB regrown, thp_collapse_alloc +{collapsed}, CPU {cpu_before} -> {cpu_after} s", trough / MIB, value(&text, &anon).unwrap() / MIB, regrown / MIB);
            assert!(
                (regrown - 256.0 * MIB).abs() <= 25.6 * MIB,
                "regrown {regrown}"
            );
            assert!(
                cpu_after - cpu_before <= 0.02,
                "the program ran: {cpu_before} -> {cpu_after}"
            );
            assert!(
                value(
                    &text,
                    &r.series("membloat_process_regrown_bytes_total", "regrowth")
                )
                .unwrap()
                    >= regrown
            );
            assert!(
                value(
                    &text,
                    &r.series("membloat_process_thp_anon_ratio", "regrowth")
                )
                .unwrap()
                    > 0.9
            );
            // System level: one collapse per 2 MiB regrown.
            assert!(
                collapsed >= 0.9 * regrown / (2.0 * MIB),
                "collapses {collapsed}"
            );
            assert_eq!(value(&text, "membloat_thp_regrowth_risk"), Some(1.0));
        } else {
            // After the two passes, nothing may have grown.
            let text = d.metrics();
            let regrown = value(&text, &regrown_series).unwrap();
            eprintln!(
                "regrowth with max_ptes_none=0: {regrown} bytes regrown, RssAnon {:.1} MiB",
                value(&text, &anon).unwrap() / MIB
            );
            assert_eq!(regrown, 0.0);
            assert!(value(&text, &anon).unwrap() <= trough);
            assert_eq!(value(&text, "membloat_thp_regrowth_risk"), Some(0.0));
        }
    }
}

fn vmstat_khugepaged(file: &str) -> f64 {
    std::fs::read_to_string(format!(
        "/sys/kernel/mm/transparent_hugepage/khugepaged/{file}"
    ))
    .unwrap()
    .trim()
    .parse()
    .unwrap()
}

#[test]
fn untouched_commit_is_seen_and_touching_it_moves_oom_score_and_rank() {
    let d = Daemon::start(ARGS);
    let mut r = Repro::start("commit", &[], &[]);
    let untouched = r.series("membloat_process_untouched_commit_bytes", "commit");
    let score = r.series("membloat_process_oom_score", "commit");
    let rank = r.series("membloat_process_oom_rank", "commit");
    let gib4 = 4096.0 * MIB;
    let before = wait_for(&d, Duration::from_secs(10), "untouched commit", |t| {
        value(t, &untouched).filter(|&v| v > 0.0)
    });
    let text = d.metrics();
    let score_before = value(&text, &score).unwrap();
    let rank_before = value(&text, &rank).unwrap();
    eprintln!(
        "commit: untouched {:.0} MiB, oom_score {score_before}, rank {rank_before}",
        before / MIB
    );
    assert!((before - gib4).abs() <= 0.05 * gib4, "untouched {before}");
    assert!(value(&text, &r.series("membloat_process_commit_bytes", "commit")).unwrap() >= gib4);
    // oom_score ignores commitments: an idle process scores 666-667 on this formula.
    assert!(score_before <= 668.0, "oom_score {score_before}");

    writeln!(r.child.stdin.as_mut().unwrap()).unwrap();
    let mut line = String::new();
    r.out.read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "touched");
    let after = wait_for(&d, Duration::from_secs(10), "touched", |t| {
        value(t, &untouched).filter(|&v| v < 0.05 * gib4)
    });
    let text = d.metrics();
    let score_after = value(&text, &score).unwrap();
    let rank_after = value(&text, &rank).unwrap();
    eprintln!(
        "commit touched: untouched {:.0} MiB, oom_score {score_after}, rank {rank_after}",
        after / MIB
    );
    assert!(
        score_after >= score_before + 50.0,
        "oom_score {score_before} -> {score_after}"
    );
    assert_eq!(
        rank_after, 1.0,
        "4 GiB resident should be the OOM killer's first pick"
    );
    assert!(rank_before > 1.0 || score_before < score_after);
}

/// A memory cgroup made for one test; removed when dropped (after its processes end).
struct Cgroup(PathBuf);

impl Drop for Cgroup {
    fn drop(&mut self) {
        for _ in 0..50 {
            if std::fs::remove_dir(&self.0).is_ok() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        eprintln!("could not remove {}", self.0.display());
    }
}

#[test]
#[ignore = "needs root"]
fn a_container_whose_memory_is_in_huge_pages_is_named() {
    needs_root("creating a cgroup");
    let v2 = Path::new("/sys/fs/cgroup/cgroup.controllers").exists();
    let hierarchy = if v2 {
        PathBuf::from("/sys/fs/cgroup")
    } else {
        PathBuf::from("/sys/fs/cgroup/memory")
    };
    let name = format!("membloat-test-{}", std::process::id());
    std::fs::create_dir(hierarchy.join(&name)).expect("create a memory cgroup");
    let cgroup = Cgroup(hierarchy.join(&name));

    let d = Daemon::start(ARGS);
    let mut child = Command::new(build("thp"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let child_guard = KillOnDrop(child.id());
    std::fs::write(cgroup.0.join("cgroup.procs"), child.id().to_string())
        .expect("move into the cgroup");
    writeln!(child.stdin.as_mut().unwrap()).unwrap();
    let mut ready = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut ready)
        .unwrap();
    assert_eq!(ready.trim(), "ready");

    let huge = format!("membloat_cgroup_anon_huge_bytes{{cgroup=\"/{name}\"}}");
    let anon = format!("membloat_cgroup_anon_bytes{{cgroup=\"/{name}\"}}");
    let h = wait_for(&d, Duration::from_secs(10), "cgroup huge pages", |t| {
        value(t, &huge).filter(|&v| v >= 60.0 * MIB)
    });
    let a = value(&d.metrics(), &anon).unwrap();
    eprintln!(
        "cgroup /{name}: anon {:.1} MiB, of which {:.1} MiB in huge pages",
        a / MIB,
        h / MIB
    );
    assert!(h <= 64.0 * MIB && a >= h, "anon {a}, huge {h}");
    drop(child_guard);
    let _ = child.wait();
}

/// Kills a pid when dropped, so a failing assertion never leaves the process behind.
struct KillOnDrop(u32);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .arg("-KILL")
            .arg(self.0.to_string())
            .status();
    }
}

/// A process killed at its cgroup's memory limit (cgroup v1 here) is counted in that
/// cgroup's `membloat_cgroup_oom_kills_total`, the emptied cgroup still reported, and in
/// the host's `oom_kill`.
#[test]
#[ignore = "needs root"]
fn an_oom_kill_at_a_cgroup_limit_is_counted_in_the_cgroup() {
    needs_root("making a memory cgroup with a limit");
    let Some(cg) = common::cgroup::TestCgroup::new("oom") else {
        return;
    };
    cg.set_limit(32 << 20);
    let vmstat = || -> f64 {
        let t = std::fs::read_to_string("/proc/vmstat").unwrap();
        t.lines()
            .find_map(|l| l.strip_prefix("oom_kill "))
            .unwrap()
            .parse()
            .unwrap()
    };
    let before = vmstat();
    // Joins the cgroup, then touches 128 MiB: the limit's OOM killer ends it.
    let status = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!(
            "{} && exec python3 -c 'b = bytearray(128 << 20)'",
            cg.join()
        ))
        .status()
        .unwrap();
    assert!(!status.success(), "the process outlived its 32 MiB limit");
    assert!(vmstat() >= before + 1.0);
    let out = run(&["--once", "--once.interval=0s"]);
    let text = String::from_utf8(out.stdout).unwrap();
    let series = format!(
        "membloat_cgroup_oom_kills_total{{cgroup=\"{}\"}}",
        cg.label()
    );
    assert_eq!(value(&text, &series), Some(1.0), "no {series}");
}

/// Memory a program freed with `MADV_FREE` (`tests/reproducers/lazyfree.c`) is the
/// kernel's `LazyFree`: shown to the byte per process, per group and per cgroup (v1 here),
/// named by `explain` as reclaimable and already in RSS; written again, it is the
/// program's once more and leaves the rows.
#[test]
#[ignore = "needs root"]
fn lazily_freed_memory_is_shown_per_process_group_and_cgroup() {
    needs_root("making a memory cgroup");
    let Some(cg) = common::cgroup::TestCgroup::new("lazyfree") else {
        return;
    };
    // A name of its own: the group and the cgroup hold these two processes only.
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let exe = dir.path().join("lazyfree_cg");
    std::fs::copy(build("lazyfree"), &exe).unwrap();
    let mut a = cg.spawn("lazyfree_cg", &format!("{} 96 32", exe.display()));
    let b = cg.spawn("lazyfree_cg", &format!("{} 48 0", exe.display()));
    let freed = |line: &str| -> f64 { line.split_whitespace().nth(1).unwrap().parse().unwrap() };
    assert_eq!((freed(&a.ready), freed(&b.ready)), (64.0 * MIB, 48.0 * MIB));
    let process = |text: &str, r: &Repro| {
        let series = format!(
            "membloat_process_lazy_free_bytes{{pid=\"{}\",comm=\"lazyfree_cg\"}}",
            r.pid()
        );
        value(text, &series).unwrap_or_else(|| panic!("no {series}"))
    };
    let group = |text: &str| {
        value(
            text,
            "membloat_group_lazy_free_bytes{group=\"lazyfree_cg\"}",
        )
    };
    let cgroup = |text: &str| {
        let series = format!(
            "membloat_cgroup_lazy_free_bytes{{cgroup=\"{}\"}}",
            cg.label()
        );
        value(text, &series)
    };
    let text = once_every_process();
    assert_eq!(process(&text, &a), 64.0 * MIB);
    assert_eq!(process(&text, &b), 48.0 * MIB);
    assert_eq!(group(&text), Some(112.0 * MIB));
    assert_eq!(cgroup(&text), Some(112.0 * MIB));

    let found = explained_by(Path::new(bin()), a.pid(), "lazy_free");
    assert_eq!(found["bytes"], 64 << 20, "{found:#}");
    let evidence = found["evidence"].as_str().unwrap();
    assert!(
        evidence.contains("MADV_FREE") && evidence.contains("without swap"),
        "{evidence}"
    );

    // Written again: the pages are the program's, no longer lazily freed.
    let stdin = a.child.stdin.as_mut().unwrap();
    stdin.write_all(b"write\n").unwrap();
    stdin.flush().unwrap();
    let mut line = String::new();
    a.out.read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "ready 0");
    let text = once_every_process();
    assert_eq!(process(&text, &a), 0.0);
    assert_eq!(process(&text, &b), 48.0 * MIB);
    assert_eq!(group(&text), Some(48.0 * MIB));
    assert_eq!(cgroup(&text), Some(48.0 * MIB));
}
