//! Least privilege on the real kernel: as root, as an unprivileged user holding only
//! CAP_SYS_PTRACE (full coverage), and as one without it (partial coverage, counted and
//! warned about once). And the files it must never open, checked with strace.
//!
//! Dropping to another user needs root; CI runs as root. Run as a normal user, the tests
//! that need it say so on stderr and check what they can.

use crate::common;

use common::*;
use std::process::{Child, Command, Output, Stdio};

/// The tests here run exporters under other credentials, which are not dumpable: run
/// together, one test's exporter is a process the other's cannot read, and the denial
/// counts they compare differ by it (seen once in CI). One at a time.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}

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
    once_as_with(caps, &[])
}

fn once_as_with(caps: Option<&str>, extra: &[&str]) -> Output {
    // Every process is deep-read, so the heap walk runs on the root-owned sleeper too:
    // no CPU budget, which a host's large processes (the test runner's own cargo) would
    // spend before the sleeper's turn, and no deadline of one read timeout, which a host
    // busy with the other tiers' JVMs and compilers passes before the last read starts.
    let mut args = vec![
        "--once",
        "--once.interval=0s",
        "--collector.processes.top-k=100000",
        "--collector.processes.deep-min-size=0",
        "--collector.processes.deep-budget=1h",
        "--collector.processes.read-timeout=2m",
    ];
    args.extend(extra);
    run_as(caps, &args)
}

/// The exporter with `args`, as nobody holding only `caps` (`None`: as this user).
fn run_as(caps: Option<&str>, args: &[&str]) -> Output {
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

/// Free bytes the heap walk found in the sleeper's brk heap (its top chunk at least):
/// present only when it was measured.
fn heap_free(text: &str, pid: u32) -> Option<f64> {
    value(
        text,
        &format!("membloat_process_heap_free_bytes{{pid=\"{pid}\",comm=\"sleep\",heap=\"main\"}}"),
    )
}

fn pss(text: &str, pid: u32) -> Option<f64> {
    value(
        text,
        &format!("membloat_process_pss_bytes{{pid=\"{pid}\",comm=\"sleep\"}}"),
    )
}

const UNREADABLE: &str = "membloat_heap_walks_total{outcome=\"unreadable\"}";

/// The deployments grant CAP_SYS_PTRACE (ptrace access: smaps_rollup, smaps, mem,
/// pagemap) and CAP_DAC_READ_SEARCH (mem and pagemap are 0600/0400, their owner's alone):
/// with both, nobody sees what root sees, heap walks included. With CAP_SYS_PTRACE alone,
/// smaps is read but the walk cannot open mem: counted, warned once, hoarding suspected.
#[test]
#[ignore = "needs root"]
fn nobody_with_the_two_read_capabilities_sees_what_root_sees() {
    let _serial = one_at_a_time();
    needs_root("dropping to nobody with capabilities");
    let sleeper = Sleeper::start();
    let pid = sleeper.0.id();
    // Denials come from processes even root cannot read (not dumpable); one that starts
    // or ends between the two scans shifts the count by one (seen in CI both ways). The
    // pair is taken again, up to three times, until no such process came or went.
    let pair = || {
        let root = text(&once_as(None));
        let both = text(&once_as(Some("+sys_ptrace,+dac_read_search")));
        (root, both)
    };
    let (mut root, mut both) = pair();
    for _ in 0..2 {
        if value(&both, DENIED) == value(&root, DENIED) {
            break;
        }
        (root, both) = pair();
    }
    promtool_check(&both);
    assert!(
        pss(&root, pid).unwrap() > 0.0,
        "root cannot read sleep's smaps_rollup"
    );
    assert!(
        pss(&both, pid).unwrap() > 0.0,
        "the two capabilities did not give smaps_rollup of a root process"
    );
    assert!(
        heap_free(&root, pid).unwrap() > 0.0,
        "root did not walk sleep's heap"
    );
    assert_eq!(
        heap_free(&both, pid),
        heap_free(&root, pid),
        "the two capabilities did not give the heap walk of a root process"
    );
    // Processes even root cannot read (a non-dumpable init in some sandboxes) are the only
    // denials, for both.
    assert_eq!(value(&both, DENIED), value(&root, DENIED));
    eprintln!(
        "denied reads: root {:?}, nobody with both capabilities {:?}; unreadable walks {:?}, {:?}",
        value(&root, DENIED),
        value(&both, DENIED),
        value(&root, UNREADABLE),
        value(&both, UNREADABLE),
    );

    let ptrace_only = once_as(Some("+sys_ptrace"));
    let ptrace_text = text(&ptrace_only);
    assert!(
        pss(&ptrace_text, pid).unwrap() > 0.0,
        "CAP_SYS_PTRACE alone did not give smaps_rollup of a root process"
    );
    assert_eq!(
        heap_free(&ptrace_text, pid),
        None,
        "walked without CAP_DAC_READ_SEARCH?"
    );
    assert!(value(&ptrace_text, UNREADABLE).unwrap() >= 1.0);
    let stderr = String::from_utf8_lossy(&ptrace_only.stderr);
    let warned = |what: &str| {
        stderr
            .lines()
            .filter(|l| l.contains(what) && l.contains("CAP_DAC_READ_SEARCH"))
            .count()
    };
    assert_eq!(
        warned("heap walk could not open"),
        1,
        "one warning over two scans:\n{stderr}"
    );
    // slabinfo and vmallocinfo are root's: the owners collector says so once, and serves
    // the rest (its SysV segments and dentries).
    assert_eq!(warned("collector=owners"), 1, "{stderr}");
    assert!(value(&ptrace_text, "membloat_dentries{state=\"total\"}").is_some());
}

#[test]
fn without_cap_sys_ptrace_coverage_is_partial_counted_and_warned_once() {
    let _serial = one_at_a_time();
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
        // No smaps, so no deep read and no heap walk of it; the scan goes on.
        assert_eq!(heap_free(&text, pid), None);
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
    // One warning for the processes, once over two scans; the owners collector, refused
    // slabinfo, vmallocinfo and pid 1's root, says so in its own.
    let warnings = stderr
        .lines()
        .filter(|l| l.contains("CAP_SYS_PTRACE") && !l.contains("collector=owners"))
        .count();
    assert_eq!(warnings, 1, "two scans, warnings:\n{stderr}");
    assert_eq!(
        stderr
            .lines()
            .filter(|l| l.contains("collector=owners"))
            .count(),
        1,
        "{stderr}"
    );
}

/// Without CAP_SYS_PTRACE, `explain` names the processes it was refused (the lowest 16
/// pids): each one named is another user's process (or one that has since exited), named
/// by its own `comm` where the exporter could read its `status`; the text says the same on
/// its `denied` line.
#[test]
#[ignore = "needs root"]
fn without_cap_sys_ptrace_explain_names_the_processes_it_could_not_read() {
    needs_root("running the exporter as nobody");
    let _serial = one_at_a_time();
    let _sleeper = Sleeper::start();
    let args = ["explain", "--explain.interval=200ms", "--format", "json"];
    let out = run_as(Some(""), &args);
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    let denied = doc["coverage"]["denied_processes"].as_array().unwrap();
    assert!(!denied.is_empty(), "{:#}", doc["coverage"]);
    assert!(denied.len() <= 16);
    let pids: Vec<u64> = denied.iter().map(|d| d["pid"].as_u64().unwrap()).collect();
    assert!(pids.windows(2).all(|w| w[0] < w[1]), "{pids:?}");
    let mut named = 0;
    for d in denied {
        let pid = d["pid"].as_u64().unwrap();
        let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) else {
            continue; // exited since
        };
        let uid = status
            .lines()
            .find_map(|l| l.strip_prefix("Uid:"))
            .and_then(|u| u.split_whitespace().next())
            .unwrap();
        assert_ne!(uid, "65534", "pid {pid} is nobody's own: {d}");
        if let Some(comm) = d["comm"].as_str() {
            let own = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap();
            assert_eq!(comm, own.trim_end(), "pid {pid}");
            named += 1;
        }
    }
    assert!(named > 0, "no denied process named: {denied:?}");
    let text = run_as(Some(""), &["explain", "--explain.interval=200ms"]);
    let text = String::from_utf8_lossy(&text.stdout);
    let line = text
        .lines()
        .find(|l| l.trim_start().starts_with("denied"))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(line.contains(&pids[0].to_string()), "{line}");
}

/// Runs `--once` over every process under strace and returns each `/proc` open: the path
/// and its flags.
fn traced_opens(extra: &[&str]) -> Vec<(String, String)> {
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
        .args(extra)
        .output()
        .unwrap();
    text(&out);
    let log = std::fs::read_to_string(trace.path()).unwrap();
    log.lines()
        .filter_map(|l| {
            let mut parts = l.split('"');
            parts.next()?;
            let path = parts.next()?;
            let flags = parts.next()?.trim_start_matches(", ");
            path.starts_with("/proc/")
                .then(|| (path.to_string(), flags.to_string()))
        })
        .collect()
}

fn pid_of(path: &str) -> Option<&str> {
    path.strip_prefix("/proc/")?.split('/').next()
}

/// `environ` holds secrets and `io` is not needed: never opened. `mem` and `pagemap` are
/// opened read-only for the heap walk, and only for a process whose `smaps` was read just
/// before (a deep-tier candidate); with `--no-collector.processes.heap-walk`, never.
#[test]
fn opens_mem_only_after_smaps_never_environ_or_io() {
    let _serial = one_at_a_time();
    let opened = traced_opens(&[]);
    // The trace saw the reads it should see.
    for needed in [
        "/smaps_rollup",
        "/smaps",
        "/status",
        "/oom_score",
        "/mem",
        "/pagemap",
    ] {
        assert!(
            opened.iter().any(|(p, _)| p.ends_with(needed)),
            "strace saw no {needed}"
        );
    }
    let forbidden: Vec<_> = opened
        .iter()
        .filter(|(p, _)| p.ends_with("/environ") || p.ends_with("/io"))
        .collect();
    assert!(forbidden.is_empty(), "opened {forbidden:?}");
    let mut walked = 0;
    for (i, (path, flags)) in opened.iter().enumerate() {
        if !(path.ends_with("/mem") || path.ends_with("/pagemap")) {
            continue;
        }
        walked += 1;
        assert!(flags.starts_with("O_RDONLY"), "{path} opened {flags}");
        let pid = pid_of(path).unwrap();
        let smaps = format!("/proc/{pid}/smaps");
        assert!(
            opened[..i].iter().any(|(p, _)| *p == smaps),
            "{path} opened without a deep read of {smaps} before it"
        );
    }
    eprintln!(
        "{} /proc files opened, {walked} of them mem or pagemap after smaps, none of environ, io",
        opened.len()
    );
    let off = traced_opens(&["--no-collector.processes.heap-walk"]);
    assert!(off.iter().any(|(p, _)| p.ends_with("/smaps")));
    let memory: Vec<_> = off
        .iter()
        .filter(|(p, _)| p.ends_with("/mem") || p.ends_with("/pagemap"))
        .collect();
    assert!(memory.is_empty(), "heap walk off, yet opened {memory:?}");
}

/// A proc mounted for the test, unmounted when dropped (also when the test fails).
struct ProcMount(std::path::PathBuf);

impl Drop for ProcMount {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

/// A `/proc` mounted with `hidepid=invisible` shows nobody only its own process, and an
/// unreadable `--path.sysfs` is not "unsupported": each is counted under its own reason
/// and warned once.
#[test]
#[ignore = "needs root"]
fn hidepid_and_an_unreadable_sysfs_are_told_apart_from_unsupported() {
    let _serial = one_at_a_time();
    needs_root("mounting a proc with hidepid");
    let sleeper = Sleeper::start();
    let dir = tempfile::tempdir().unwrap();
    let proc = dir.path().join("proc");
    std::fs::create_dir(&proc).unwrap();
    let mounted = Command::new("mount")
        .args(["-t", "proc", "-o", "hidepid=invisible", "proc"])
        .arg(&proc)
        .status()
        .unwrap();
    assert!(mounted.success(), "mount -t proc -o hidepid=invisible");
    let _mount = ProcMount(proc.clone());
    // A sysfs nobody may not enter: THP and cgroups are there, but unreadable.
    let sys = dir.path().join("sys");
    std::fs::create_dir_all(sys.join("kernel/mm/transparent_hugepage")).unwrap();
    std::fs::create_dir_all(sys.join("fs/cgroup/memory")).unwrap();
    nix::unistd::chown(&sys, Some(0.into()), Some(0.into())).unwrap();
    std::fs::set_permissions(&sys, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
    std::fs::set_permissions(
        dir.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let out = once_as_with(
        Some(""),
        &[
            &format!("--path.procfs={}", proc.display()),
            &format!("--path.sysfs={}", sys.display()),
        ],
    );
    let text = text(&out);
    promtool_check(&text);
    let hidden = "membloat_scan_errors_total{collector=\"processes\",reason=\"hidden\"}";
    assert!(value(&text, hidden).unwrap() >= 1.0, "{text}");
    let scanned = value(&text, "membloat_processes_scanned").unwrap();
    assert!(scanned <= 2.0, "{scanned} processes seen through hidepid");
    for collector in ["thp", "cgroup"] {
        let denied = format!(
            "membloat_scan_errors_total{{collector=\"{collector}\",reason=\"permission_denied\"}}"
        );
        let unsupported = format!(
            "membloat_scan_errors_total{{collector=\"{collector}\",reason=\"unsupported\"}}"
        );
        assert!(value(&text, &denied).unwrap() >= 1.0, "{collector}\n{text}");
        // Denied is a failure the operator can fix, so it fails the collector (and alerts);
        // unsupported does not (tests/golden.rs).
        let success = format!("membloat_scrape_collector_success{{collector=\"{collector}\"}}");
        assert_eq!(value(&text, &success), Some(0.0), "{collector}");
        assert_eq!(
            value(&text, &unsupported).unwrap_or(0.0),
            0.0,
            "{collector}"
        );
    }
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.matches("hidepid").count(), 1, "{stderr}");
    assert_eq!(
        stderr
            .matches("msg=\"collector failing\" collector=thp reason=permission_denied")
            .count(),
        1,
        "{stderr}"
    );

    // Root (CAP_SYS_PTRACE) sees through hidepid: nothing hidden. Every process with
    // memory that lived from before the run to after it (the same pid and start time in
    // the host's /proc at both moments) is served, the sleeper among them: not the one
    // hidepid leaves nobody. Processes that start or end meanwhile (a busy machine's)
    // prove nothing either way and are left out.
    let before = with_memory();
    let out = once_as_with(None, &[&format!("--path.procfs={}", proc.display())]);
    let after = with_memory();
    let as_root = self::text(&out);
    assert_eq!(value(&as_root, hidden), Some(0.0));
    let served: std::collections::BTreeSet<u32> = as_root
        .lines()
        .filter_map(|l| l.strip_prefix("membloat_process_resident_bytes{pid=\""))
        .filter_map(|l| l.split('"').next()?.parse().ok())
        .collect();
    let lived: Vec<u32> = before
        .iter()
        .filter(|(pid, start)| after.get(pid) == Some(start))
        .map(|(pid, _)| *pid)
        .collect();
    assert!(
        lived.contains(&sleeper.0.id()),
        "the sleeper lived throughout"
    );
    let missed: Vec<u32> = lived
        .iter()
        .copied()
        .filter(|p| !served.contains(p))
        .collect();
    assert!(
        missed.is_empty(),
        "root through hidepid served {} processes, missed {missed:?} of the {} that lived throughout",
        served.len(),
        lived.len()
    );
}

/// The processes with memory in the host's `/proc` (kernel threads and zombies have none),
/// each with its start time (`stat` field 22), which tells a pid used again.
fn with_memory() -> std::collections::BTreeMap<u32, String> {
    let mut out = std::collections::BTreeMap::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        let statm = std::fs::read_to_string(format!("/proc/{pid}/statm")).unwrap_or_default();
        if statm
            .split(' ')
            .next()
            .is_none_or(|size| size == "0" || size.is_empty())
        {
            continue;
        }
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        // Fields after the comm's closing parenthesis start at field 3 (state).
        let Some(start) = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(19))
        else {
            continue;
        };
        out.insert(pid, start.to_string());
    }
    out
}

/// `kernel.dmesg_restrict`, set for a test and put back when dropped.
struct DmesgRestrict(String);

impl DmesgRestrict {
    const PATH: &'static str = "/proc/sys/kernel/dmesg_restrict";

    fn set(v: &str) -> DmesgRestrict {
        let old = std::fs::read_to_string(Self::PATH).unwrap();
        std::fs::write(Self::PATH, v).unwrap();
        DmesgRestrict(old.trim().to_string())
    }
}

impl Drop for DmesgRestrict {
    fn drop(&mut self) {
        if let Err(e) = std::fs::write(Self::PATH, &self.0) {
            eprintln!("could not restore {} to {}: {e}", Self::PATH, self.0);
        }
    }
}

/// Under `kernel.dmesg_restrict=1`, the kernel log needs CAP_SYSLOG: without it the kmsg
/// collector fails with `permission_denied` each scan, warned once, and the rest of the
/// scan goes on; with it (and nothing else) the log is read.
#[test]
#[ignore = "needs root"]
fn the_kernel_log_needs_cap_syslog_and_says_so_once_without_it() {
    needs_root("setting kernel.dmesg_restrict and dropping to nobody");
    let _serial = one_at_a_time();
    let _restrict = DmesgRestrict::set("1");
    let kmsg = |text: &str, what: &str| {
        value(
            text,
            &format!(
                "membloat_{what}{{collector=\"kmsg\"{}}}",
                if what.starts_with("scan_errors") {
                    ",reason=\"permission_denied\""
                } else {
                    ""
                }
            ),
        )
    };
    let out = once_as(Some("+sys_ptrace,+dac_read_search"));
    let without = text(&out);
    assert_eq!(kmsg(&without, "scrape_collector_success"), Some(0.0));
    assert_eq!(kmsg(&without, "scan_errors_total"), Some(2.0), "two scans");
    assert!(
        value(&without, "membloat_processes_scanned").is_some_and(|n| n >= 2.0),
        "the processes are read: {without}"
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    let warned: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("collector=kmsg"))
        .collect();
    assert_eq!(warned.len(), 1, "{stderr}");
    assert!(warned[0].contains("fix=\"grant CAP_SYSLOG"), "{stderr}");

    let with = text(&once_as(Some("+syslog")));
    assert_eq!(kmsg(&with, "scrape_collector_success"), Some(1.0));
    assert_eq!(kmsg(&with, "scan_errors_total"), None, "{with}");
}

/// CPython's arenas, read as nobody with the two capabilities. Debian's 3.13 as shipped
/// (stripped) is found through the `_PyRuntime` it exports, read from the process's memory:
/// the same figures as root's. Debian's 3.11 with its symbols has its state in static
/// variables its executable names, and the executable is in reach (`/proc/PID/exe`): the
/// same figures as root's too. A libpython's file is out of reach (`/proc/PID/map_files`
/// needs CAP_CHECKPOINT_RESTORE): a 3.11 that loads one (pyenv's, where this machine has
/// it, built shared) is `unreadable` for nobody, measured for root; one built without a
/// libpython is read by both alike.
#[test]
#[ignore = "needs root"]
fn nobody_reads_cpythons_arenas_through_the_loaded_librarys_symbols() {
    let _serial = one_at_a_time();
    needs_root("dropping to nobody with capabilities");
    let dir = tempfile::tempdir().unwrap();
    let start = |python: &std::path::Path, name: &str| {
        common::python::pyarenas(python, &[], (3, 200_000, 70), &dir.path().join(name))
    };
    let new = start(&common::python::debian_of("3.13").stripped, "3.13");
    let old = start(&common::python::debian_of("3.11").symbols, "3.11");
    let shared = common::python::pyenv("3.11").map(|p| start(&p, "pyenv-3.11"));
    if shared.is_none() {
        skipped("a 3.11 that loads its libpython as nobody: no pyenv build here");
    }
    let series = |text: &str, name: &str, pid: u32| {
        value(
            text,
            &format!("membloat_process_python_{name}{{pid=\"{pid}\",comm=\"python3\"}}"),
        )
    };
    let unmeasured = |text: &str, pid: u32| {
        value(
            text,
            &format!(
                "membloat_process_python_unmeasured{{pid=\"{pid}\",comm=\"python3\",reason=\"unreadable\"}}"
            ),
        )
    };
    let root = text(&once_as(None));
    let nobody = text(&once_as(Some("+sys_ptrace,+dac_read_search")));
    for (what, r) in [("3.13 as shipped", &new), ("3.11 with symbols", &old)] {
        let unused = series(&root, "unused_bytes", r.pid());
        // A read left for a later scan says so in the failure.
        let left = |text: &str| value(text, "membloat_deep_scan_deferred");
        assert!(
            unused.is_some_and(|u| u > 0.0),
            "root read {what}: {unused:?}, deferred {:?}",
            left(&root)
        );
        assert_eq!(
            series(&nobody, "unused_bytes", r.pid()),
            unused,
            "{what} as nobody, deferred {:?}",
            left(&nobody)
        );
        assert_eq!(
            series(&nobody, "arenas", r.pid()),
            series(&root, "arenas", r.pid()),
            "{what}"
        );
    }
    if let Some(shared) = &shared {
        let pid = shared.pid();
        let root_read = series(&root, "unused_bytes", pid);
        assert!(root_read.is_some(), "root read pyenv's 3.11");
        // A pyenv built without --enable-shared has its state in its executable: in reach.
        let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap();
        if maps.contains("/libpython3.11") {
            assert_eq!(
                unmeasured(&nobody, pid),
                Some(1.0),
                "pyenv's 3.11 (its libpython loaded) as nobody"
            );
        } else {
            assert_eq!(
                series(&nobody, "unused_bytes", pid),
                root_read,
                "pyenv's 3.11 (no libpython) as nobody"
            );
        }
    }
}
