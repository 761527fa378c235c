//! `explain` beside each reproducer on the real kernel: the right process named, its bytes
//! within 5 % of the program's own figure, the remedy for its allocator and runtime; and
//! nothing reported for healthy idle processes. Plus the exit codes, the JSON schema
//! (docs/explain.schema.json, checked by Python's jsonschema), the layout in a real
//! terminal (tmux, 100 columns), and `/explain` from the running exporter.

use crate::common;

use common::explain::*;
use common::repro::Repro;
use common::*;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

#[test]
fn hoarding_is_named_measured_with_the_glibc_remedy() {
    let r = Repro::start("hoard", &["3", "1", "0"], &[]);
    let held: f64 = r.ready.split_whitespace().nth(1).unwrap().parse().unwrap();
    let (code, doc) = explain_json(r.pid());
    assert_eq!(code, 1, "findings exit 1");
    let f = finding(&doc, "hoarding", r.pid());
    within("hoarding", f["bytes"].as_f64().unwrap(), held);
    assert_eq!(f["bytes_of"], "ram");
    assert_eq!(f["certainty"], "measured");
    assert_eq!(f["process"]["comm"], "hoard");
    assert_eq!(f["process"]["allocator"], "glibc");
    assert_eq!(f["process"]["runtime"], "native");
    let remedy = f["remedy"].as_str().unwrap();
    assert!(remedy.contains("malloc_trim(0)"), "{remedy}");
    // Its freed blocks lie below the pin: no threshold reaches them.
    assert_eq!(f["next_start"], Value::Null, "{f:#}");
    // This binary's own trim, proven harmless on this host by its canary.
    let now = f["now"].as_str().unwrap();
    assert_eq!(now, format!("{} trim --pid {}", bin(), r.pid()), "{f:#}");
}

/// `--pid` in depth: each figure of `/proc/PID/status` it names equals the file's (the
/// process idles, so the file holds still), its OOM score is the kernel's, its heap's
/// readers say how they ended; the OOM order holds it alone, and the text shows it.
#[test]
fn pid_shows_the_process_in_depth_as_its_status_file_says() {
    let r = Repro::start("heap", &["below", "8", "100"], &[]);
    let _other = Repro::start("heap", &["below", "8", "50"], &[]);
    let pid = r.pid();
    let (_, doc) = explain_json(pid);
    let all = doc["processes"].as_array().unwrap();
    assert_eq!(all.len(), 1, "{doc:#}");
    let p = &all[0];
    assert_eq!(p["pid"], pid);
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kib = |key: &str| -> u64 {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or_else(|| panic!("{key} in {status}"))
    };
    for (field, key) in [
        ("rss_bytes", "VmRSS"),
        ("rss_anon_bytes", "RssAnon"),
        ("rss_file_bytes", "RssFile"),
        ("rss_shmem_bytes", "RssShmem"),
        ("swap_bytes", "VmSwap"),
        ("peak_rss_bytes", "VmHWM"),
        ("virtual_bytes", "VmSize"),
    ] {
        assert_eq!(p[field].as_u64(), Some(kib(key) * 1024), "{field} ({key})");
    }
    let file = |name: &str| std::fs::read_to_string(format!("/proc/{pid}/{name}")).unwrap();
    assert_eq!(
        p["oom_score"].as_u64(),
        file("oom_score").trim().parse().ok()
    );
    assert_eq!(
        p["oom_score_adj"].as_i64(),
        file("oom_score_adj").trim().parse().ok()
    );
    assert_eq!(p["hoard_method"], "measured");
    let glibc = p["heap_readers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["reader"] == "glibc")
        .unwrap_or_else(|| panic!("{p:#}"));
    assert_eq!(glibc["outcome"], "measured");
    assert!(p["heap_read_at_unix_seconds"].as_f64().unwrap() > 0.0);
    let order = doc["oom_order"].as_array().unwrap();
    assert!(order.iter().all(|v| v["pid"] == pid), "{order:#?}");
    let text = explain(&["--pid", &pid.to_string()]);
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains(&format!("PROCESS heap (pid {pid})")),
        "{text}"
    );
}

/// Each case of glibc hoarding, with what `explain` prints applied exactly as printed: the
/// `now` command (`trim` calls `malloc_trim(0)` in the process) gives back at least 80 % of
/// what it promises, measured by the process's own RssAnon before and after, and leaves
/// the process unharmed: applied while its main thread waits in pause, nanosleep, read
/// on a pipe or a futex (one each), the wait comes back as the program expects and its
/// live blocks hash as before; the
/// thresholds at the next start are printed only for the top of a heap, and a restart
/// with them holds at least 80 % less. Freed memory below live blocks (one free range
/// below them, blocks spread among them, large blocks below a pin) gets no threshold:
/// none would reach it.
#[test]
fn glibc_remedies_give_back_what_explain_promises() {
    let cases: [(&str, [&str; 3], bool, &str); 4] = [
        ("heap", ["below", "8", "200"], false, "pause"),
        ("heap", ["main", "100", "200"], false, "nanosleep"),
        ("hoard", ["3", "1", "0"], false, "read"),
        ("heap", ["top", "8", "48"], true, "futex"),
    ];
    for (name, args, top, wait) in cases {
        let case = format!("{name} {} waiting in {wait}", args.join(" "));
        let mut r = Repro::start(name, &args, &[("MEMBLOAT_WAIT_IN", wait)]);
        let (_, doc) = explain_json(r.pid());
        let f = finding(&doc, "hoarding", r.pid());
        assert_eq!(f["certainty"], "measured", "{case}");
        assert_eq!(f["next_start"].is_string(), top, "{case}: {f:#}");
        if let Some(next) = f["next_start"].as_str() {
            let again = Repro::start(name, &args, &[environment(next)]);
            let fell = rss_anon(r.pid()) - rss_anon(again.pid());
            let promised = f["bytes"].as_f64().unwrap();
            eprintln!(
                "{case}: started with {next}: {:.1} MiB less of {:.1} MiB",
                fell / MIB,
                promised / MIB
            );
            assert!(fell >= 0.8 * promised, "{case}: {fell} of {promised}");
        }
        let gives = f["now_gives_back_bytes"].as_f64().unwrap();
        r.until_waiting(wait);
        let before = rss_anon(r.pid());
        run_now(f["now"].as_str().unwrap(), None);
        let fell = before - rss_anon(r.pid());
        eprintln!(
            "{case}: now: {:.1} MiB given back of {:.1} MiB promised",
            fell / MIB,
            gives / MIB
        );
        assert!(gives >= 0.9 * f["bytes"].as_f64().unwrap(), "{case}: {f:#}");
        assert!(fell >= 0.8 * gives, "{case}: {fell} of {gives}");
        r.unharmed(wait, &case);
    }
}

/// `trim` applied 100 times in a row to one process, for each wait its main thread can be
/// in: every call comes back as the program expects, its live blocks are intact, and it
/// goes on waiting and answering.
#[test]
fn trim_applied_100_times_leaves_the_process_unharmed() {
    for wait in ["pause", "nanosleep", "read", "futex"] {
        let mut r = Repro::start("hoard", &["3", "1", "0"], &[("MEMBLOAT_WAIT_IN", wait)]);
        let pid = r.pid().to_string();
        for i in 0..100 {
            r.until_waiting(wait);
            let out = run(&["trim", "--pid", &pid]);
            assert!(
                out.status.success(),
                "{wait} #{i}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            let woke = r.wake(wait);
            assert_eq!(woke, format!("woke {wait} ok ok"), "{wait} #{i}: harmed");
        }
        r.unharmed(wait, &format!("hoard after 100 trims in {wait}"));
    }
}

/// A live command is printed only where its mechanism was proven harmless on this host.
/// Each gdb here (this machine's, Debian 12's 13.1; Debian 13's 16.3, unpacked by
/// `scripts/gdb-tree.sh`) is tried as an operator would type it, on a process waiting in
/// pause(): where it fails or the wait comes back wrong, `explain --explain.live-tool=gdb`
/// with that gdb prints no `now` and says why; where it works, it prints gdb's command. On
/// a CPU with AMX, 13.1 harms (pause returns 514) and 16.3 does not.
#[test]
fn a_live_tool_that_harms_a_process_gets_no_live_command() {
    let tree = Path::new(env!("CARGO_TARGET_TMPDIR")).join("gdb");
    let out = Command::new(Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/gdb-tree.sh"))
        .arg(&tree)
        .output()
        .unwrap();
    let newer = PathBuf::from(common::succeeded(out, "scripts/gdb-tree.sh").trim());
    let amx = std::fs::read_to_string("/proc/cpuinfo")
        .unwrap()
        .split_ascii_whitespace()
        .any(|f| f == "amx_tile");
    for gdb in [which("gdb"), newer] {
        let dir = gdb.parent().unwrap().to_path_buf();
        let path = format!(
            "{}:{}",
            dir.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let version = Command::new(&gdb).arg("--version").output().unwrap();
        let version = String::from_utf8_lossy(&version.stdout)
            .lines()
            .next()
            .unwrap_or("")
            .to_string();
        let mut probe = Repro::start("hoard", &["1", "1", "0"], &[("MEMBLOAT_WAIT_IN", "pause")]);
        probe.until_waiting("pause");
        let pid = probe.pid().to_string();
        let called = Command::new(&gdb)
            .args(["-p", &pid, "-batch", "-ex", "call (int) malloc_trim(0)"])
            .output()
            .unwrap();
        let woke = probe.wake("pause");
        let harms = !called.status.success() || woke != "woke pause ok ok";
        eprintln!(
            "{version} here: {}, the process then said {woke:?}",
            called.status
        );
        if amx && version.ends_with(" 13.1") {
            assert!(harms, "{version} on AMX was known to harm: {woke}");
        }
        if amx && version.ends_with(" 16.3") {
            assert!(!harms, "{version} on AMX: {woke}");
        }
        let r = Repro::start("hoard", &["3", "1", "0"], &[]);
        let pid = r.pid().to_string();
        let out = explain_env(
            &["--format", "json", "--pid", &pid, "--explain.live-tool=gdb"],
            &[("PATH", &path)],
        );
        let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
        let f = finding(&doc, "hoarding", r.pid());
        let remedy = f["remedy"].as_str().unwrap();
        if harms {
            assert_eq!(f["now"], Value::Null, "{version}: {f:#}");
            assert_eq!(f["now_gives_back_bytes"], Value::Null, "{f:#}");
            assert!(
                remedy.contains(&format!("no live command: {version}")),
                "{remedy}"
            );
            if woke != "woke pause ok ok" {
                assert!(remedy.contains("its pause() returned"), "{remedy}");
            }
        } else {
            let now = f["now"]
                .as_str()
                .unwrap_or_else(|| panic!("{version}: {f:#}"));
            assert!(now.starts_with(&format!("gdb -p {} ", r.pid())), "{now}");
        }
    }
    // And none at all where the operator says so.
    let r = Repro::start("hoard", &["3", "1", "0"], &[]);
    let out = explain(&[
        "--format",
        "json",
        "--pid",
        &r.pid().to_string(),
        "--explain.live-tool=none",
    ]);
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    let f = finding(&doc, "hoarding", r.pid());
    assert_eq!(f["now"], Value::Null, "{f:#}");
    assert!(
        f["remedy"]
            .as_str()
            .unwrap()
            .contains("live commands are off"),
        "{f:#}"
    );
}

/// Where the exporter may not ptrace (a seccomp filter, as the systemd unit's), nothing is
/// proven: `explain` prints no live command and says why and how to get one; `trim`
/// refuses in one line.
#[test]
fn without_ptrace_nothing_is_proven_and_nothing_printed() {
    let r = Repro::start("hoard", &["3", "1", "0"], &[]);
    let pid = r.pid().to_string();
    let refused = common::repro::build("noptrace");
    let out = Command::new(&refused)
        .args([
            bin(),
            "explain",
            "--explain.interval=500ms",
            "--format",
            "json",
            "--pid",
            &pid,
        ])
        .output()
        .unwrap();
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    let f = finding(&doc, "hoarding", r.pid());
    assert_eq!(f["now"], Value::Null, "{f:#}");
    let remedy = f["remedy"].as_str().unwrap();
    assert!(
        remedy.contains("could not be proven harmless") && remedy.contains("ptrace refused"),
        "{remedy}"
    );
    let out = Command::new(&refused)
        .args([bin(), "trim", "--pid", &pid])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("ptrace refused"), "{err}");
}

/// `trim` refuses what it cannot do in one line and exit 1, and bad usage with exit 2.
#[test]
fn trim_says_why_it_did_nothing() {
    let musl = Repro::start("idle_musl", &["0"], &[]);
    let out = run(&["trim", "--pid", &musl.pid().to_string()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("maps no libc.so.6"), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    let gone = {
        let mut c = Command::new("true").spawn().unwrap();
        let pid = c.id();
        c.wait().unwrap();
        pid
    };
    let out = run(&["trim", "--pid", &gone.to_string()]);
    assert_eq!(out.status.code(), Some(1));
    let out = run(&["trim"]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(String::from_utf8_lossy(&out.stderr).lines().count(), 1);
}

/// A JVM's Java heap, on every JDK here, with what `explain` prints applied as printed:
#[test]
fn cpython_hoarding_gets_the_python_remedy() {
    let mut py = Repro::python("pyheap.py", &["py_explain", "128", "256"]);
    let held: f64 = py.ready.split_whitespace().nth(1).unwrap().parse().unwrap();
    let (_, doc) = explain_json(py.pid());
    let f = finding(&doc, "hoarding", py.pid());
    within("CPython hoarding", f["bytes"].as_f64().unwrap(), held);
    assert_eq!(f["process"]["runtime"], "python");
    assert!(f["remedy"]
        .as_str()
        .unwrap()
        .contains("ctypes.CDLL('libc.so.6').malloc_trim(0)"));
    // The `now` command as printed gives back what it promises in the interpreter too.
    // Applied while the interpreter sleeps in time.sleep (where gdb's call on a CPU with
    // AMX made it raise OSError 514), it wakes as Python expects, its objects intact.
    let gives = f["now_gives_back_bytes"].as_f64().unwrap();
    py.until_waiting("nanosleep");
    let before = rss_anon(py.pid());
    run_now(f["now"].as_str().unwrap(), None);
    let fell = before - rss_anon(py.pid());
    eprintln!(
        "CPython: now: {:.1} MiB given back of {:.1} MiB promised",
        fell / MIB,
        gives / MIB
    );
    assert!(fell >= 0.8 * gives, "{fell} of {gives}");
    py.unharmed("nanosleep", "CPython in time.sleep");
    // And in the other three waits an interpreter waits in.
    for wait in ["pause", "read", "futex"] {
        let mut py = Repro::python_env(
            "pyheap.py",
            &["py_wait", "16", "64"],
            &[("MEMBLOAT_WAIT_IN", wait)],
        );
        py.until_waiting(wait);
        let out = run(&["trim", "--pid", &py.pid().to_string()]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        py.unharmed(wait, &format!("CPython in {wait}"));
    }
}

#[test]
fn arenas_at_the_ceiling_are_named_with_malloc_arena_max() {
    let cpus = std::thread::available_parallelism().unwrap().get() as f64;
    let r = Repro::start("arenas", &[], &[]);
    let (_, doc) = explain_json(r.pid());
    let f = finding(&doc, "arenas", r.pid());
    // 16 threads get min(16, 8 x CPUs - 1) arena heaps of 64 MiB each.
    let heaps = 16f64.min(8.0 * cpus - 1.0);
    within("arenas", f["bytes"].as_f64().unwrap(), heaps * 64.0 * MIB);
    assert_eq!(f["bytes_of"], "address_space");
    assert!(f["remedy"].as_str().unwrap().contains("MALLOC_ARENA_MAX=2"));
    assert!(f["cost"].as_str().unwrap().contains("contention"));
    // The same program started with the environment printed reserves at least 80 % less
    // address space (the kernel's VmSize), and explain finds no arenas in it.
    let next = f["next_start"].as_str().unwrap();
    let again = Repro::start("arenas", &[], &[environment(next)]);
    let fell = status_bytes(r.pid(), "VmSize") - status_bytes(again.pid(), "VmSize");
    let promised = f["bytes"].as_f64().unwrap();
    eprintln!(
        "arenas: started with {next}: {:.1} MiB less address space of {:.1} MiB",
        fell / MIB,
        promised / MIB
    );
    assert!(fell >= 0.8 * promised, "{fell} of {promised}");
    let (_, doc) = explain_json(again.pid());
    assert!(
        !doc["findings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["kind"] == "arenas" && f["process"]["pid"] == again.pid()),
        "{doc:#}"
    );
}

#[test]
fn untouched_commit_is_named_with_its_size() {
    let r = Repro::start("commit", &[], &[]);
    let (_, doc) = explain_json(r.pid());
    let f = finding(&doc, "untouched_commit", r.pid());
    within(
        "untouched commit",
        f["bytes"].as_f64().unwrap(),
        4096.0 * MIB,
    );
    assert!(f["evidence"]
        .as_str()
        .unwrap()
        .contains("oom_score does not count it"));
}

#[test]
fn the_oom_killers_first_victim_is_listed_first_with_what_it_frees() {
    // 256 MiB live, then made the preferred victim, as a BestEffort pod would be.
    let r = Repro::start_as("heap", "heap_victim", &["main", "256", "0"]);
    std::fs::write(format!("/proc/{}/oom_score_adj", r.pid()), "1000").unwrap();
    let (_, doc) = explain_json(r.pid());
    let first = &doc["oom_order"][0];
    assert_eq!(first["pid"], r.pid(), "{doc:#}");
    assert_eq!(first["rank"], 1);
    assert_eq!(first["oom_score_adj"], 1000);
    assert!(first["oom_score"].as_u64().unwrap() >= 900);
    within(
        "would free",
        first["frees_bytes"].as_f64().unwrap(),
        256.0 * MIB,
    );
    // Memory is not low on this machine: like MembloatProcessLikelyOOMVictim, no finding.
    assert!(!doc["findings"]
        .as_array()
        .unwrap()
        .iter()
        .any(|f| f["kind"] == "oom_victim"));
}

#[test]
fn healthy_idle_processes_give_nothing_to_act_on_and_exit_0() {
    let a = Named::spawn("idle_one");
    let b = Named::spawn("idle_two");
    let (pa, pb) = (a.pid().to_string(), b.pid().to_string());
    let out = explain(&["--pid", &pa, "--pid", &pb]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(text.contains("NO FINDINGS"), "{text}");
    let out = explain(&["--format", "json", "--pid", &pa, "--pid", &pb]);
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["findings"].as_array().unwrap().len(), 0, "{doc:#}");
    assert_eq!(doc["schema"], "membloat.explain/v1");
}

#[test]
fn bad_usage_exits_2_with_one_line() {
    // The last: a pid no process has (pid_max is at most 4194304).
    for args in [
        &["--format", "yaml"][..],
        &["--pid", "zero"],
        &["--bogus"],
        &["--pid", "4194305"],
    ] {
        let out = explain(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.trim().lines().count(), 1, "{err}");
    }
}

#[test]
fn json_output_follows_the_published_schema() {
    // A document with findings of several kinds: hoarding, arenas, untouched commit and
    // CPython's arenas, and the heap readers of each process.
    let h = Repro::start("hoard", &["2", "1", "0"], &[]);
    let a = Repro::start("arenas", &[], &[]);
    let c = Repro::start("commit", &[], &[]);
    // CPython's arenas, measured (python3 with its symbols) and not (Debian's, stripped).
    let stats = tempfile::tempdir().unwrap();
    let python = |interpreter: &str, shape, name: &str| {
        common::python::pyarenas(&which(interpreter), &[], shape, &stats.path().join(name))
    };
    let py = python("python3", (2, 600_000, 90), "measured");
    let stripped = python("/usr/bin/python3.11", (2, 10_000, 50), "stripped");
    let pids: Vec<String> = [h.pid(), a.pid(), c.pid(), py.pid(), stripped.pid()]
        .iter()
        .map(u32::to_string)
        .collect();
    let mut args = vec!["--format", "json"];
    for p in &pids {
        args.extend(["--pid", p.as_str()]);
    }
    let out = explain(&args);
    assert_eq!(out.status.code(), Some(1));
    valid_against_the_schema(&out.stdout, "host");
    let parsed: Value = serde_json::from_slice(&out.stdout).unwrap();
    let kinds: Vec<&str> = parsed["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["kind"].as_str().unwrap())
        .collect();
    for kind in [
        "hoarding",
        "arenas",
        "untouched_commit",
        "python_arenas",
        "python_arenas_unmeasured",
    ] {
        assert!(kinds.contains(&kind), "{kinds:?}");
    }
}

#[test]
fn text_layout_fits_100_columns_in_a_real_terminal() {
    let h = Repro::start("hoard", &["2", "1", "0"], &[]);
    let a = Repro::start("arenas", &[], &[]);
    let session = format!("explain-{}", std::process::id());
    let done = std::env::temp_dir().join(format!("{session}.done"));
    let script = format!(
        "{} explain --explain.interval=500ms --pid {} --pid {}; touch {}; sleep 60",
        bin(),
        h.pid(),
        a.pid(),
        done.display()
    );
    let ok = tool("tmux")
        .args([
            "new-session",
            "-d",
            "-s",
            &session,
            "-x",
            "100",
            "-y",
            "200",
            &script,
        ])
        .status()
        .unwrap();
    assert!(ok.success());
    struct Kill(String);
    impl Drop for Kill {
        fn drop(&mut self) {
            let _ = Command::new("tmux")
                .args(["kill-session", "-t", &self.0])
                .status();
        }
    }
    let _kill = Kill(session.clone());
    let start = Instant::now();
    while !done.exists() {
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "explain did not finish in 120 s"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = std::fs::remove_file(&done);
    // -J joins lines tmux wrapped: a line wider than the pane comes back whole.
    let pane = tool("tmux")
        .args(["capture-pane", "-p", "-J", "-t", &session])
        .output()
        .unwrap();
    let screen = String::from_utf8_lossy(&pane.stdout);
    eprintln!("{screen}");
    assert!(screen.contains("FINDINGS (2)"), "{screen}");
    assert!(screen.contains("hoarding") && screen.contains("arenas"));
    assert!(screen.contains("OOM KILLER ORDER"));
    for line in screen.lines() {
        assert!(
            line.chars().count() <= 100,
            "{} columns: {line}",
            line.chars().count()
        );
    }
    // On a terminal the headings are in colour; piped output has no escape codes.
    let piped = explain(&["--pid", &h.pid().to_string()]);
    assert!(!String::from_utf8_lossy(&piped.stdout).contains('\x1b'));
}

/// khugepaged's count of full passes over the processes it watches.
fn full_scans() -> u64 {
    let path = "/sys/kernel/mm/transparent_hugepage/khugepaged/full_scans";
    std::fs::read_to_string(path)
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

/// Returns once khugepaged has made two full passes since it was called: every range it
/// watches, the reproducer's included, has been looked at under the settings in force
/// (the pass running at the call may have started before them). The kernel's own counter
/// is the event; there is no wait for quiet.
fn two_full_passes() {
    let from = full_scans();
    let start = Instant::now();
    while full_scans() < from + 2 {
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "khugepaged made {} full passes in 120 s",
            full_scans() - from
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The running exporter serves the same diagnosis at /explain from its latest scan: here
/// khugepaged regrowth, which only a history of scans can see. The truth is the kernel's:
/// RssAnon after two full passes of khugepaged minus RssAnon at the trough, with
/// khugepaged paused (and `max_ptes_none` 0) until the exporter has seen the process idle
/// at its trough. Then both remedies as printed, each on the program started again under
/// it with khugepaged at full speed: the launcher of `next_start`, and the host fix in the
/// remedy's text; after two more full passes each copy holds at least 80 % less than the
/// regrown one, by the bytes the finding named.
#[test]
#[ignore = "needs root"]
fn regrowth_is_explained_by_the_running_exporter() {
    needs_root("tuning khugepaged");
    let _serial = kernel_settings_lock();
    let enabled = std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled").unwrap();
    let _thp = KernelSettings::set(if enabled.contains("[never]") {
        &[("enabled", "madvise")][..]
    } else {
        &[]
    });
    // Paused, and unable to collapse a nearly empty range even when woken: khugepaged
    // runs a pass when scan_sleep_millisecs is written, and another when the reproducer's
    // MADV_HUGEPAGE puts the first mm on its empty list. Such a pass collapsed 12 MiB
    // between the exporter's trough and the one read here, twice in CI.
    let _paused = KernelSettings::set(&[
        ("khugepaged/max_ptes_none", "0"),
        ("khugepaged/scan_sleep_millisecs", "600000"),
    ]);
    // At its trough the reproducer is small: without an unbounded top-K it is not among the
    // per-process series on a busy host, and its idle flag is never seen.
    // Every process read every scan (`rollup-refresh=1`): at 200 ms scans a quiet process
    // otherwise rests up to 10 s, and the host's memory may creep 32 MiB unseen meanwhile
    // (docs/performance.md), while the figure is read two scans after the truth.
    let d = Daemon::start(&[
        "--scan.interval=200ms",
        "--collector.processes.top-k=100000",
        "--collector.processes.rollup-refresh=1",
    ]);
    let r = Repro::start("regrowth", &[], &[]);
    let idle = r.series("membloat_process_idle", "regrowth");
    let start = Instant::now();
    while value(&d.metrics(), &idle) != Some(1.0) {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "never idle in 60 s"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let trough = rss_anon(r.pid());
    let _fast = KernelSettings::set(&[
        ("khugepaged/max_ptes_none", "511"),
        ("khugepaged/scan_sleep_millisecs", "100"),
        ("khugepaged/pages_to_scan", "65536"),
    ]);
    two_full_passes();
    let truth = rss_anon(r.pid()) - trough;
    assert!(truth > 200.0 * MIB, "khugepaged regrew only {truth} bytes");
    // The exporter's diagnosis of a moment after the truth: two scans later.
    d.wait_for_scans(2);
    let out = request(d.port, "GET", "/explain", &[("Accept", "application/json")]);
    let doc: Value = serde_json::from_str(&out.body).unwrap();
    let f = finding(&doc, "regrowth", r.pid());
    within(
        "regrowth (kernel: RssAnon growth)",
        f["bytes"].as_f64().unwrap(),
        truth,
    );
    assert_eq!(f["certainty"], "observed");
    let remedy = f["remedy"].as_str().unwrap();
    assert!(remedy.contains("PR_SET_THP_DISABLE") && remedy.contains("max_ptes_none"));
    let text = request(d.port, "GET", "/explain", &[]);
    assert!(text.body.contains("regrowth"), "{}", text.body);
    assert!(text
        .header("content-type")
        .unwrap()
        .starts_with("text/plain"));

    let promised = f["bytes"].as_f64().unwrap();
    let program = common::repro::build("regrowth");
    // The launcher, put before the program's command as printed (exec: the same pid).
    let launcher = f["next_start"].as_str().unwrap();
    let mut sh = Command::new("sh");
    sh.arg("-c")
        .arg(format!("exec {launcher} {}", program.display()));
    let launched = Repro::spawn("regrowth (launched)", sh);
    two_full_passes();
    let fell = |again: &Repro, how: &str| {
        let fell = rss_anon(r.pid()) - rss_anon(again.pid());
        eprintln!(
            "regrowth: started again with the {how}: {:.1} MiB less of {:.1} MiB",
            fell / MIB,
            promised / MIB
        );
        assert!(fell >= 0.8 * promised, "{how}: {fell} of {promised}");
    };
    fell(&launched, "launcher");
    // The host fix, run as the remedy prints it; the guard saves the value in force and
    // puts it back when dropped.
    let host = remedy
        .split("the host fix, for every process: ")
        .nth(1)
        .and_then(|t| t.split(';').next())
        .unwrap_or_else(|| panic!("{remedy}"));
    let _fixed = KernelSettings::set(&[("khugepaged/max_ptes_none", "511")]);
    run_now(host, None);
    let fixed = Repro::start("regrowth", &[], &[]);
    two_full_passes();
    fell(&fixed, "host fix");
}

/// Checks a JSON document against docs/explain.schema.json with Python's jsonschema.
fn valid_against_the_schema(json: &[u8], name: &str) {
    let doc = std::env::temp_dir().join(format!("explain-{name}-{}.json", std::process::id()));
    std::fs::write(&doc, json).unwrap();
    let schema = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/explain.schema.json");
    let check = tool("python3")
        .arg("-c")
        .arg(
            "import json, sys, jsonschema\n\
             schema = json.load(open(sys.argv[1]))\n\
             jsonschema.Draft202012Validator.check_schema(schema)\n\
             jsonschema.validate(json.load(open(sys.argv[2])), schema)\n\
             print('valid')",
        )
        .arg(&schema)
        .arg(&doc)
        .output()
        .unwrap();
    let _ = std::fs::remove_file(&doc);
    assert!(
        check.status.success(),
        "{}",
        String::from_utf8_lossy(&check.stderr)
    );
}

/// `explain --format json` of the fixture tree, checked against the schema: the tree, its
/// two path flags (for the text), and the parsed document.
fn explain_fixture() -> (std::path::PathBuf, [String; 2], Value) {
    let root = fixture();
    let procfs = format!("--path.procfs={}", root.join("proc").display());
    let sysfs = format!("--path.sysfs={}", root.join("sys").display());
    let out = explain(&["--format", "json", &procfs, &sysfs]);
    valid_against_the_schema(&out.stdout, "fixture");
    let parsed: Value = serde_json::from_slice(&out.stdout).unwrap();
    (root, [procfs, sysfs], parsed)
}

/// The fixture's kernel log holds a memory cgroup kill of its python3 (18266): `explain`
/// tells it with the kernel's figures and the scan's, in the schema, and in the text.
#[test]
fn a_kill_in_the_kernel_log_is_told_with_its_victim() {
    let (_, [procfs, sysfs], parsed) = explain_fixture();
    let kill = &parsed["oom_kills"][0];
    assert_eq!(kill["pid"], 18266);
    assert_eq!(kill["constraint"], "memory_cgroup");
    assert_eq!(kill["killed_bytes"]["anon_rss"], 72424 * 1024);
    assert_eq!(kill["measured_bytes"]["rss"], 79072 * 1024);
    assert_eq!(parsed["oom_kills"].as_array().unwrap().len(), 1);
    let text = String::from_utf8(explain(&[&procfs, &sysfs]).stdout).unwrap();
    let section = text
        .split("OOM KILLS (1), latest first")
        .nth(1)
        .unwrap_or_else(|| panic!("no kills section:\n{text}"));
    assert!(
        section.contains("python3 (pid 18266), memory_cgroup of /process_api/"),
        "{section}"
    );
    assert!(section.contains("anon_rss 70.7 MiB"), "{section}");
    assert!(section.contains("raise the memory limit"), "{section}");
}

/// The fixture's kubelet (flag thresholds, a v1 node): `explain` tells its signals as the
/// kubelet computes them from the fixture's own files, in the schema and in the text.
#[test]
fn the_kubelets_headroom_is_told_from_the_files_it_is_computed_from() {
    let (root, [procfs, sysfs], parsed) = explain_fixture();
    let file = |p: &str| std::fs::read_to_string(root.join(p)).unwrap();
    let stat = |p: &str, key: &str| -> i64 {
        file(p)
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{key} ")))
            .unwrap()
            .parse()
            .unwrap()
    };
    let mem_total: i64 = file("proc/meminfo")
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .unwrap()
        .trim()
        .trim_end_matches(" kB")
        .parse::<i64>()
        .unwrap()
        * 1024;
    let cg = "sys/fs/cgroup/memory";
    let usage: i64 = file(&format!("{cg}/memory.usage_in_bytes"))
        .trim()
        .parse()
        .unwrap();
    let ws = usage - stat(&format!("{cg}/memory.stat"), "total_inactive_file");
    let node = &parsed["eviction"][0];
    assert_eq!(node["signal"], "memory.available");
    assert_eq!(node["available_bytes"], mem_total - ws);
    assert_eq!(node["working_set_bytes"], ws);
    assert_eq!(
        node["active_file_bytes"],
        stat(&format!("{cg}/memory.stat"), "total_active_file")
    );
    // --eviction-hard memory.available<500Mi, --eviction-soft memory.available<10%.
    let hard = &node["thresholds"][0];
    assert_eq!(
        (hard["kind"].as_str(), hard["bytes"].as_i64()),
        (Some("hard"), Some(500 << 20))
    );
    assert_eq!(hard["headroom_bytes"], mem_total - ws - (500 << 20));
    let soft = &node["thresholds"][1];
    assert_eq!(
        soft["bytes"],
        (mem_total as f64 * f64::from(10f32 / 100.0)) as i64
    );
    let pods = &parsed["eviction"][1];
    assert_eq!(pods["signal"], "allocatableMemory.available");
    let limit: i64 = file(&format!("{cg}/kubepods/memory.limit_in_bytes"))
        .trim()
        .parse()
        .unwrap();
    let pods_usage: i64 = file(&format!("{cg}/kubepods/memory.usage_in_bytes"))
        .trim()
        .parse()
        .unwrap();
    let pods_ws = pods_usage - stat(&format!("{cg}/kubepods/memory.stat"), "total_inactive_file");
    assert_eq!(pods["available_bytes"], limit - pods_ws);
    assert_eq!(
        pods["thresholds"].as_array().unwrap().len(),
        1,
        "only the hard one is copied"
    );
    let text = String::from_utf8(explain(&[&procfs, &sysfs]).stdout).unwrap();
    let section = text
        .split("KUBELET EVICTION")
        .nth(1)
        .unwrap_or_else(|| panic!("no eviction section:\n{text}"));
    assert!(section.contains("hard 500.0 MiB"), "{section}");
    assert!(
        section.contains("is active page cache the kernel"),
        "{section}"
    );
}
