//! A tenant's programs against the exporter, beside benign ones: unprivileged (run as
//! uid 64000, a user of their own) C programs that only rewrite their own memory or their own executable
//! (`tests/reproducers/hostile.c`, `godress.c`), and a glibc hoarder, a Go program and an
//! idle JVM that must still be measured right. The exporter runs at its defaults, one scan
//! a second, for `MEMBLOAT_HOSTILE_SECONDS` (100 by default), in a memory cgroup of the
//! chart's limit: it must never be OOM-killed, never go blind (every scan reads
//! processes), keep its own peak memory under a third of that limit, keep its CPU
//! within its budgets, and serve no measured figure larger than its process's resident
//! memory. Needs root: the programs are started as another user (setpriv).

use crate::common;

use common::cgroup::TestCgroup;
use common::repro::{self, Repro};
use common::*;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// The chart's memory limit, as its values give it (`resources.limits.memory`, in Mi).
fn chart_limit_bytes() -> f64 {
    let values = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("deploy/helm/membloat-exporter/values.yaml"),
    )
    .unwrap();
    let limits = values
        .split("\n  limits:\n")
        .nth(1)
        .expect("resources.limits");
    let mi = limits
        .lines()
        .find_map(|l| l.trim().strip_prefix("memory: "))
        .and_then(|m| m.strip_suffix("Mi"))
        .and_then(|m| m.parse::<f64>().ok())
        .expect("resources.limits.memory in Mi");
    mi * 1048576.0
}

/// What the exporter may hold of its own beside every hostile program at once: a third of
/// the chart's limit (32 MiB), the margin the limit was chosen with.
const OWN_PEAK_BYTES: f64 = 32.0 * 1048576.0;

/// Tests that fill the host with processes or descriptors run one at a time: the
/// `owners` collector looks at 2,048 processes' descriptors a read, and another test's
/// 10,000 idle processes would leave a memfd holder for a later read.
static CROWD: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn crowd() -> std::sync::MutexGuard<'static, ()> {
    CROWD.lock().unwrap_or_else(|e| e.into_inner())
}

/// A program started as a tenant, uid 64000 with no groups: any unprivileged user, one no
/// other test runs as (the hidepid test counts the processes nobody sees).
fn as_tenant(name: &str, program: &std::path::Path, args: &[&str]) -> Repro {
    let mut cmd = tool("setpriv");
    cmd.args(["--reuid=64000", "--regid=64000", "--clear-groups", "--"])
        .arg(program)
        .args(args);
    Repro::spawn(name, cmd)
}

/// `godress.c` with DWARF added and compressed, a few hundred KiB on disk at most:
/// - `bomb`: a `.debug_info` that inflates to 255 MiB;
/// - `pair`: a `.debug_info` and a `.debug_str` of 47 MiB each, each under the one-section
///   cap, together past the layout's budget;
/// - `types`: 1 Mi one-byte type entries (~300 MiB as types, were they all kept).
fn dressed_as_go(kind: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("hostile-{}-{kind}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/reproducers/godress.c");
    let (plain, added, out) = (dir.join("plain"), dir.join("added"), dir.join("godress"));
    assert!(repro::cc(&plain, &src).status().unwrap().success());
    let zeros = |name: &str, bytes: u64| {
        let path = dir.join(name);
        std::fs::File::create(&path)
            .unwrap()
            .set_len(bytes)
            .unwrap();
        path
    };
    let sections: Vec<(&str, PathBuf)> = match kind {
        "bomb" => vec![(".debug_info", zeros("info", 255 << 20))],
        "pair" => vec![
            (".debug_info", zeros("info", 47 << 20)),
            (".debug_str", zeros("str", 47 << 20)),
        ],
        "types" => {
            let (abbrev, info) = membloat_exporter::heap::golang::image::tiny_types(1 << 20);
            std::fs::write(dir.join("abbrev"), abbrev).unwrap();
            std::fs::write(dir.join("info"), info).unwrap();
            vec![
                (".debug_abbrev", dir.join("abbrev")),
                (".debug_info", dir.join("info")),
            ]
        }
        _ => panic!("{kind}"),
    };
    let run = |args: &[String]| {
        let ok = tool("objcopy").args(args).status().unwrap().success();
        assert!(ok, "objcopy {args:?}");
    };
    let mut args = Vec::new();
    for (name, file) in &sections {
        args.push("--add-section".to_string());
        args.push(format!("{name}={}", file.display()));
    }
    args.extend([plain.display().to_string(), added.display().to_string()]);
    run(&args);
    run(&[
        "--compress-debug-sections=zlib".into(),
        added.display().to_string(),
        out.display().to_string(),
    ]);
    for (_, file) in sections {
        std::fs::remove_file(file).unwrap();
    }
    std::fs::remove_file(&added).unwrap();
    let size = std::fs::metadata(&out).unwrap().len();
    assert!(
        size < 4 << 20,
        "the dressed binary is {size} bytes: not compressed"
    );
    out
}

/// The exporter's command line in `cg`, given the chart's memory limit: joined before it
/// starts, so all it allocates is charged there.
fn in_charts_cgroup(cg: &TestCgroup) -> std::process::Command {
    cg.set_limit(chart_limit_bytes() as u64);
    let mut cmd = std::process::Command::new("sh");
    cmd.arg("-c")
        .arg(format!("{} && exec \"$0\" \"$@\"", cg.join()))
        .arg(bin());
    cmd
}

/// Processes of `cg` the OOM killer killed.
fn oom_kills(cg: &TestCgroup) -> u64 {
    cg.read_lines("memory.oom_control")
        .find_map(|l| l.strip_prefix("oom_kill ").map(str::to_owned))
        .map_or(0, |n| n.trim().parse::<u64>().unwrap())
}

/// What a glibc reproducer's "ready FREE" line says glibc holds free (`mallinfo2`).
fn fordblks_of(r: &Repro) -> f64 {
    r.ready.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// User and system CPU seconds of a process.
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 = f[11].parse::<f64>().unwrap() + f[12].parse::<f64>().unwrap();
    ticks / 100.0
}

fn labelled(text: &str, metric: &str, label: &str) -> f64 {
    value(text, &format!("{metric}{{{label}}}")).unwrap_or(0.0)
}

/// The hostile programs, each as the tenant, with what it attempts; `dir` is the tenant's
/// own.
fn start_hostile(dir: &std::path::Path) -> Vec<(String, Repro)> {
    // The hostile: five top chunks of 1-16 TiB looked up page by page (the pages past the
    // first of each reservation), one over a whole reservation, 1,000 overlapping chunks,
    // 60,000 mappings, and three binaries dressed as Go whose DWARF would take hundreds of
    // MiB to hold.
    let hostile_bin = repro::build("hostile");
    let mut hostile: Vec<(String, Repro)> = Vec::new();
    for tib in ["1", "2", "4", "8", "16"] {
        let r = as_tenant("hostile", &hostile_bin, &["bigtop", tib, "1"]);
        hostile.push((format!("bigtop {tib} TiB"), r));
    }
    let r = as_tenant("hostile", &hostile_bin, &["bigtop", "4", "0"]);
    hostile.push(("bigtop 4 TiB, whole".into(), r));
    let r = as_tenant("hostile", &hostile_bin, &["overlap", "1000"]);
    hostile.push(("overlap 1000".into(), r));
    let r = as_tenant("hostile", &hostile_bin, &["maps", "60000"]);
    hostile.push(("maps 60000".into(), r));
    for kind in ["bomb", "pair", "types"] {
        let r = as_tenant("godress", &dressed_as_go(kind), &[]);
        hostile.push((format!("dressed as Go: {kind}"), r));
    }
    // A process whose main thread exited, a memfd named as ZGC's heap, and one shared
    // memory listed as jemalloc's by 21 processes.
    let r = as_tenant("headless", &repro::build("headless"), &["256"]);
    hostile.push(("headless".into(), r));
    let (java, perf) = zgc_dressed(dir);
    let args = [perf.to_str().unwrap(), dir.to_str().unwrap(), "1024"];
    hostile.push(("dressed as ZGC".into(), as_tenant("java", &java, &args)));
    let r = as_tenant("jeshare", &repro::build("jeshare"), &["64", "21"]);
    hostile.push(("jeshare".into(), r));
    hostile
}

/// The program dressed as a ZGC JVM, copied as `java` into `dir` (which the tenant may
/// write), and the real JVM's perf data it maps.
fn zgc_dressed(dir: &std::path::Path) -> (PathBuf, PathBuf) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o777)).unwrap();
    let java = dir.join("java");
    std::fs::copy(repro::build("zgcdress"), &java).unwrap();
    let perf = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/hsperfdata/jdk17-z");
    (java, perf)
}

/// No group's measured figures are more than its Pss (shared pages once). A group with a
/// measured figure and a Pss of 0 had no Pss read for it (its `smaps_rollup` read was
/// skipped: every slot for such reads held by other tests' processes that hold their own
/// mmap lock): nothing is capped then, and its figures are at most its resident memory.
fn no_group_figure_over_its_pss(t: &str) {
    for line in t.lines().filter(|l| {
        l.starts_with("membloat_group_hoarded_bytes{") && l.contains("method=\"measured\"")
    }) {
        let group = line
            .split("group=\"")
            .nth(1)
            .and_then(|s| s.split('"').next())
            .unwrap();
        let served: f64 = line.rsplit(' ').next().unwrap().parse().unwrap();
        let pss = value(t, &format!("membloat_group_pss_bytes{{group=\"{group}\"}}")).unwrap();
        let resident = value(
            t,
            &format!("membloat_group_resident_bytes{{group=\"{group}\"}}"),
        )
        .unwrap();
        let most = if pss > 0.0 { pss } else { resident };
        assert!(served <= most, "{line}: Pss {pss}, resident {resident}");
    }
}

/// What the scrapes showed over the run.
struct Watched {
    last: String,
    scans: f64,
    /// The longest time the scan counter did not step.
    longest_gap: Duration,
    /// When the glibc hoarder was first shown measured (and right).
    glibc_at: Option<Duration>,
}

/// Scrapes the exporter four times a second for `seconds`: every scan must have read the
/// processes, and the glibc hoarder's measured free heap must be its `fordblks`.
fn watch(d: &Daemon, seconds: u64, fordblks: f64) -> Watched {
    let started = Instant::now();
    let mut w = Watched {
        last: String::new(),
        scans: 0.0,
        longest_gap: Duration::ZERO,
        glibc_at: None,
    };
    let mut stepped = Instant::now();
    while started.elapsed() < Duration::from_secs(seconds) {
        let t = d.metrics();
        let scans = value(&t, "membloat_scans_total").unwrap_or(0.0);
        if scans > 0.0 {
            // Never blind: every scan read the processes, whatever the deep tier met.
            let scanned = value(&t, "membloat_processes_scanned").unwrap_or(0.0);
            assert!(scanned > 10.0, "scan {scans}: {scanned} processes scanned");
        }
        if scans > w.scans {
            stepped = Instant::now();
        }
        w.longest_gap = w.longest_gap.max(stepped.elapsed());
        w.scans = scans;
        let measured = "membloat_group_heap_measured_processes{group=\"hoard\"}";
        if w.glibc_at.is_none() && value(&t, measured) == Some(1.0) {
            let free = value(&t, "membloat_group_heap_free_bytes{group=\"hoard\"}").unwrap();
            assert!(
                (free - fordblks).abs() <= 0.05 * fordblks,
                "hoard: exporter {free}, fordblks {fordblks}"
            );
            w.glibc_at = Some(started.elapsed());
        }
        w.last = t;
        std::thread::sleep(Duration::from_millis(250));
    }
    w
}

/// No process's measured hoarding is more than it has resident (anonymous and shared).
/// A process of the host's that exited since the scrape has nothing left to compare.
fn no_measured_figure_over_resident(t: &str) {
    for line in t.lines().filter(|l| {
        l.starts_with("membloat_process_hoarded_bytes{") && l.contains("method=\"measured\"")
    }) {
        let pid: u32 = line
            .split("pid=\"")
            .nth(1)
            .and_then(|s| s.split('"').next())
            .and_then(|p| p.parse().ok())
            .unwrap();
        let served: f64 = line.rsplit(' ').next().unwrap().parse().unwrap();
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
        let (Some(anon), Some(shmem)) = (
            field_bytes(&status, "RssAnon"),
            field_bytes(&status, "RssShmem"),
        ) else {
            eprintln!("pid {pid} exited since the scrape: not compared");
            continue;
        };
        let resident = anon + shmem;
        assert!(served <= resident, "{line}: {resident} resident");
    }
}

#[test]
#[ignore = "needs root"]
fn a_tenants_programs_cannot_blind_crash_bloat_or_fool_the_exporter() {
    needs_root("hostile programs run as another user");
    let seconds: u64 = std::env::var("MEMBLOAT_HOSTILE_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(100);
    // The benign: glibc's freed heap (its own mallinfo2 count), a Go program, an idle JVM.
    let hoard = Repro::start("hoard", &["3", "1", "0"], &[]);
    let fordblks = fordblks_of(&hoard);
    let gofree = repro::go("gofree", &[]);
    let go = Repro::run_env(&gofree, &["7"], &[]);
    let jvm = Repro::java(
        which("java"),
        &["-Xms256m", "-Xmx256m", "-XX:+UseSerialGC"],
        200,
        20,
    );
    let tenant = tempfile::Builder::new()
        .prefix("membloat-tenant-")
        .tempdir_in("/tmp")
        .unwrap();
    let hostile = start_hostile(tenant.path());

    let cg = TestCgroup::new("hostile").expect("the v1 memory controller");
    let mut d = Daemon::start_with(in_charts_cgroup(&cg), &["--scan.interval=1s"]);
    let daemon = d.child.id();
    let (cpu_before, started) = (cpu_seconds(daemon), Instant::now());
    let w = watch(&d, seconds, fordblks);
    let (t, scans_seen, glibc_at, gap) = (w.last, w.scans, w.glibc_at, w.longest_gap);
    let elapsed = started.elapsed().as_secs_f64();
    let cpu = (cpu_seconds(daemon) - cpu_before) / elapsed;
    let peak = status_bytes(daemon, "VmHWM");
    let oom_kills = oom_kills(&cg);
    let charged = cg.read("memory.max_usage_in_bytes") as f64;
    assert!(d.child.try_wait().unwrap().is_none(), "the exporter exited");
    assert_eq!(oom_kills, 0, "the exporter was OOM-killed in its cgroup");
    let walks = |o: &str| labelled(&t, "membloat_heap_walks_total", &format!("outcome=\"{o}\""));
    let go_reads = |o: &str| labelled(&t, "membloat_go_reads_total", &format!("outcome=\"{o}\""));
    let jvm_reads = |o: &str| labelled(&t, "membloat_jvm_reads_total", &format!("outcome=\"{o}\""));
    eprintln!(
        "{elapsed:.0} s, {scans_seen} scans, at most {gap:?} between two: exporter peak RSS {:.1} MiB \
         ({:.1} MiB less its file pages; its cgroup's peak charge {:.1} MiB, page cache \
         and kernel memory included), \
         CPU {:.1} % of a core; glibc measured at {glibc_at:?}; walks budget {} inconsistent {} \
         implausible {} measured {}; Go reads budget {} measured {}; JVM reads measured {}",
        peak / 1048576.0,
        (peak - status_bytes(daemon, "RssFile")) / 1048576.0,
        charged / 1048576.0,
        cpu * 100.0,
        walks("budget"),
        walks("inconsistent"),
        walks("implausible"),
        walks("measured"),
        go_reads("budget"),
        go_reads("measured"),
        jvm_reads("measured"),
    );
    // Scans went on: none waited out more than two read timeouts (5 s each).
    assert!(gap < Duration::from_secs(12), "no scan for {gap:?}");
    // Every reader at its caps at once (the layouts' budget among them) stays under a
    // third of the chart's limit: the peak RSS less the binary's own text and other file pages
    // (the cgroup's charge also holds page cache and /proc dentries, which the kernel
    // reclaims at the limit, and other tests' processes scanned at the same time).
    let own = peak - status_bytes(daemon, "RssFile");
    assert!(
        own < OWN_PEAK_BYTES,
        "{:.1} MiB of its own at the peak: over a third of the chart's limit",
        own / 1048576.0
    );
    assert!(
        peak < chart_limit_bytes(),
        "peak RSS {peak} over the chart's limit"
    );
    // The fast tier every second plus the deep tier's 200 ms a scan, and each hostile read
    // stopped at its budget (16 Mi pagemap entries) then backed off: well under half a core.
    assert!(
        cpu < 0.5,
        "the exporter used {:.0} % of a core",
        cpu * 100.0
    );
    let glibc_at = glibc_at.expect("the glibc hoarder was never measured");
    assert!(
        glibc_at < Duration::from_secs(60),
        "glibc measured at {glibc_at:?}"
    );
    assert!(
        go_reads("measured") >= 1.0,
        "the Go program was never measured"
    );
    assert!(jvm_reads("measured") >= 1.0, "the JVM was never measured");
    each_attack_ended_as_its_bound_says(&t);
    drop((hoard, go, jvm, hostile, tenant));
    let _ = d.child.kill();
    let _ = d.child.wait();
    drop(cg);
}

/// What the scrapes of the whole run ended with: each attack stopped where its bound says.
fn each_attack_ended_as_its_bound_says(t: &str) {
    let walks = |o: &str| labelled(t, "membloat_heap_walks_total", &format!("outcome=\"{o}\""));
    let go_reads = |o: &str| labelled(t, "membloat_go_reads_total", &format!("outcome=\"{o}\""));
    // Each attack ended as its bound says.
    assert!(
        walks("budget") >= 5.0,
        "the blinders' walks: {} over budget",
        walks("budget")
    );
    assert!(
        go_reads("budget") >= 3.0,
        "the dressed binaries were not all refused for their size: {}",
        go_reads("budget")
    );
    assert!(
        walks("inconsistent") + walks("implausible") >= 1.0,
        "the overlapping chunks were believed"
    );
    no_measured_figure_over_resident(t);
    no_group_figure_over_its_pss(t);
    // The process whose main thread exited is seen, with its memory.
    let headless = value(t, "membloat_group_resident_bytes{group=\"headless\"}").unwrap_or(0.0);
    assert!(headless >= 256.0 * 1048576.0, "headless: {headless}");
}

/// The exporter in a memory cgroup of its own with the chart's limit, beside 10,000 idle
/// processes: kernel memory is charged there too (each kept `statm` descriptor's page-sized
/// buffer, unreclaimable; the dentries and inodes of the `/proc` files it opens,
/// reclaimable), and its RSS does not show it. With the default flags it is never
/// OOM-killed and keeps scanning. Keeping a descriptor for every process, as the exporter
/// once did, is run too and reported.
#[test]
#[ignore = "needs root"]
fn ten_thousand_idle_processes_keep_the_exporter_under_the_charts_limit() {
    needs_root("a memory cgroup of the test's");
    let _crowd = crowd();
    let idle = Repro::start("idle", &["10000"], &[]);
    for flags in [
        &[][..],
        &["--collector.processes.kept-descriptors=100000"][..],
    ] {
        let Some(cg) = TestCgroup::new("exporter") else {
            return;
        };
        cg.set_limit(chart_limit_bytes() as u64);
        // The exporter joins the cgroup before it starts: all it allocates is charged there.
        let mut cmd = std::process::Command::new("sh");
        cmd.arg("-c")
            .arg(format!("{} && exec \"$0\" \"$@\"", cg.join()))
            .arg(bin());
        let mut args = vec!["--scan.interval=1s"];
        args.extend_from_slice(flags);
        let mut d = Daemon::spawn(cmd, &args);
        // Twenty scans, or the exporter's end: every descriptor it keeps is open and read.
        let started = Instant::now();
        let (mut scans, mut t) = (0.0, String::new());
        while scans < 20.0 && started.elapsed() < Duration::from_secs(300) {
            if d.child.try_wait().unwrap().is_some() {
                break;
            }
            let r = d.get("/metrics");
            if r.status == 200 {
                scans = value(&r.body, "membloat_scans_total").unwrap_or(0.0);
                t = r.body;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        let alive = d.child.try_wait().unwrap().is_none();
        let oom_control = std::fs::read_to_string(cg.dir.join("memory.oom_control")).unwrap();
        let killed = oom_control
            .lines()
            .find_map(|l| l.strip_prefix("oom_kill "))
            .and_then(|n| n.trim().parse::<u64>().ok())
            .unwrap_or(0);
        let kept = value(&t, "membloat_scan_kept_descriptors").unwrap_or(0.0);
        let scanned = value(&t, "membloat_processes_scanned").unwrap_or(0.0);
        eprintln!(
            "{flags:?}: {scans} scans in {:.0?}, {scanned} processes, {kept} kept descriptors; \
             under {} MiB: peak {:.1} MiB (kernel {:.1} MiB), limit hit {} times, OOM kills \
             {killed}, alive {alive}",
            started.elapsed(),
            chart_limit_bytes() / 1048576.0,
            cg.read("memory.max_usage_in_bytes") as f64 / 1048576.0,
            cg.read("memory.kmem.max_usage_in_bytes") as f64 / 1048576.0,
            cg.read("memory.failcnt"),
        );
        if flags.is_empty() {
            assert!(alive && killed == 0, "OOM-killed under the chart's limit");
            assert!(scans >= 20.0, "{scans} scans in {:?}", started.elapsed());
            assert!(scanned >= 10_000.0 && kept == 2048.0, "{scanned} {kept}");
        }
        let _ = d.child.kill();
        let _ = d.child.wait();
    }
    drop(idle);
}

/// A FUSE mount of the test's, detached when dropped.
struct Mounted(PathBuf);

impl Drop for Mounted {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(&self.0)
            .status();
    }
}

/// A FUSE mount of the test's under `dir` serving the hoarder's binary as `prog`
/// (`tests/reproducers/fusefile.py`): the mount (detached when dropped), its mount point,
/// the file whose presence holds every request, and the server.
fn fuse_server(dir: &std::path::Path) -> (Mounted, PathBuf, PathBuf, Repro) {
    let (mnt, hold) = (dir.join("mnt"), dir.join("hold"));
    std::fs::create_dir(&mnt).unwrap();
    let mounted = Mounted(mnt.clone());
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/reproducers/fusefile.py");
    let mut cmd = std::process::Command::new("/usr/bin/python3");
    cmd.arg(script)
        .arg(repro::build("hoard"))
        .arg(&mnt)
        .arg(&hold);
    let server = Repro::spawn("fusefile", cmd);
    (mounted, mnt, hold, server)
}

/// Removes the file that holds the FUSE server's answers.
struct Answer(PathBuf);

impl Drop for Answer {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// A program whose binary a tenant serves from its own FUSE mount, which stops answering
/// once the program runs (`tests/reproducers/fusefile.py`): no file of such a mount is
/// opened or faulted in, so no reader waits on it. The program's glibc heap (anonymous
/// memory, its libc local) is measured without its binary, and so is a hoarder started
/// after it: the deep tier was never held.
#[test]
#[ignore = "needs root"]
fn a_binary_on_a_fuse_mount_that_stops_answering_holds_no_reader() {
    fuse_binary_holds_no_reader(false);
}

/// The same, with the mount detached (`umount -l`) once the program runs: no `mountinfo`
/// lists it any more, its server still answers (or not) for the program's mappings, and
/// a mount no `mountinfo` lists is not read either.
#[test]
#[ignore = "needs root"]
fn a_binary_on_a_detached_fuse_mount_holds_no_reader() {
    fuse_binary_holds_no_reader(true);
}

fn fuse_binary_holds_no_reader(detach: bool) {
    // One at a time: each measures the group of its program, named "prog" in both.
    static ONE: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
    needs_root("a FUSE mount");
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    // The mount is dropped last (declared first), also when an assertion fails.
    let (_mounted, mnt, hold, server) = fuse_server(dir.path());
    let mut cmd = std::process::Command::new(mnt.join("prog"));
    cmd.args(["3", "1", "0"]);
    let served = Repro::spawn("prog", cmd);
    let fordblks = fordblks_of(&served);
    if detach {
        let status = std::process::Command::new("umount")
            .arg("-l")
            .arg(&mnt)
            .status()
            .unwrap();
        assert!(status.success());
        let listed = std::fs::read_to_string(format!("/proc/{}/mountinfo", served.pid())).unwrap();
        let point = format!(" {} ", mnt.display());
        assert!(!listed.contains(&point), "still listed: {listed}");
        let maps = std::fs::read_to_string(format!("/proc/{}/maps", served.pid())).unwrap();
        assert!(maps.contains("/prog"), "the binary is still mapped: {maps}");
    }
    // From here on every request to the mount waits.
    std::fs::write(&hold, "").unwrap();
    let d = Daemon::start(&["--scan.interval=1s"]);
    // Dropped before the exporter, also when an assertion fails: the server answers
    // again, so a thread that waited on it returns and the exporter can be reaped.
    let _answer = Answer(hold.clone());
    // Each program's measured free heap reaches its own mallinfo2 count (a newcomer's
    // first reads may land while it still allocates).
    let measured = |g: &str, truth: f64| {
        let mut free = None;
        d.wait_until(Duration::from_secs(60), || {
            let t = d.metrics();
            free = value(
                &t,
                &format!("membloat_group_heap_free_bytes{{group=\"{g}\"}}"),
            );
            free.is_some_and(|f| (f - truth).abs() <= 0.05 * truth)
        });
    };
    measured("prog", fordblks);
    // Three more scans: a read that waited on the mount would wait still. No thread of the
    // exporter does, as the kernel tells where each sleeps (its kernel stack: a thread in
    // uninterruptible sleep behind another test's process that holds its own mmap lock
    // is not waiting on this mount).
    let scans = || value(&d.metrics(), "membloat_scans_total").unwrap_or(0.0);
    let first = scans();
    d.wait_until(Duration::from_secs(30), || scans() >= first + 3.0);
    no_thread_waits_on_fuse(d.child.id());
    let later = Repro::start_as("hoard", "later", &["2", "1", "0"]);
    let truth = fordblks_of(&later);
    measured("later", truth);
    let stalled = value(&d.metrics(), "membloat_scan_stalled_processes").unwrap_or(0.0);
    assert_eq!(stalled, 0.0, "a reader waits on the mount");
    drop((_answer, later, served, d, server));
}

/// No thread of process `pid` waits on a FUSE mount, as the kernel tells where each
/// sleeps (its kernel stack: a thread in uninterruptible sleep behind another test's
/// process that holds its own mmap lock is not waiting on a mount).
fn no_thread_waits_on_fuse(pid: u32) {
    for task in std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .flatten()
    {
        let stat = std::fs::read_to_string(task.path().join("stat")).unwrap_or_default();
        let state = stat
            .rsplit(')')
            .next()
            .unwrap_or("")
            .split_whitespace()
            .next();
        let wchan = std::fs::read_to_string(task.path().join("wchan")).unwrap_or_default();
        let stack = std::fs::read_to_string(task.path().join("stack")).unwrap_or_default();
        assert!(
            !stack.contains("fuse") && !wchan.contains("fuse") && wchan != "request_wait_answer",
            "thread {:?} waits on the mount: {state:?} in {wchan}: {stack}",
            task.file_name()
        );
    }
}

/// A tenant's glibc program that points its own arena ring (the main arena's `next`) into
/// a page of a file it maps from its FUSE mount, whose server then stops answering
/// (`tests/reproducers/fusepoint.c`): every read of process memory is checked against the
/// process's mappings first, so the walk stops at that pointer (`remote_file`, no figure)
/// and no reader waits on the server; a hoarder started beside it is measured. With the
/// check taken out, the walk waits on the server and nothing is counted within 60 s.
#[test]
#[ignore = "needs root"]
fn an_arena_ring_pointed_into_a_fuse_file_is_never_followed() {
    needs_root("a FUSE mount");
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let (_mounted, mnt, hold, server) = fuse_server(dir.path());
    let file = mnt.join("prog");
    let r = as_tenant(
        "fusepoint",
        &repro::build("fusepoint"),
        &[file.to_str().unwrap(), "96"],
    );
    // The premise: the page the list points at is in the file's mapping.
    let at = u64::from_str_radix(r.ready.split_whitespace().nth(2).unwrap(), 16).unwrap();
    let maps = std::fs::read_to_string(format!("/proc/{}/maps", r.pid())).unwrap();
    assert!(
        maps.lines().any(|l| {
            let range = l.split(' ').next().unwrap_or("");
            let (a, b) = range.split_once('-').unwrap_or(("", ""));
            let (a, b) = (u64::from_str_radix(a, 16), u64::from_str_radix(b, 16));
            l.ends_with("/prog") && a.is_ok_and(|a| a <= at) && b.is_ok_and(|b| at < b)
        }),
        "{at:x} is not in the file's mapping: {maps}"
    );
    std::fs::write(&hold, "").unwrap();
    let d = Daemon::start(&["--scan.interval=1s"]);
    let _answer = Answer(hold.clone());
    let refused = || {
        value(
            &d.metrics(),
            "membloat_heap_walks_total{outcome=\"remote_file\"}",
        )
        .unwrap_or(0.0)
    };
    d.wait_until(Duration::from_secs(60), || refused() >= 1.0);
    let t = d.metrics();
    let figure = format!("membloat_process_heap_free_bytes{{pid=\"{}\",", r.pid());
    assert!(
        !t.lines().any(|l| l.starts_with(&figure)),
        "a walk that stopped at the pointer gives no figure: {t}"
    );
    no_thread_waits_on_fuse(d.child.id());
    let later = Repro::start_as("hoard", "later", &["2", "1", "0"]);
    let truth = fordblks_of(&later);
    d.wait_until(Duration::from_secs(60), || {
        value(
            &d.metrics(),
            "membloat_group_heap_free_bytes{group=\"later\"}",
        )
        .is_some_and(|f| (f - truth).abs() <= 0.05 * truth)
    });
    no_thread_waits_on_fuse(d.child.id());
    drop((_answer, later, r, d, server));
}

/// A tenant's process whose main thread exits (`pthread_exit`) while a worker keeps
/// 256 MiB (`tests/reproducers/headless.c`): `/proc/PID` shows no memory (state Z, no
/// VmRSS, a statm of zeros), though the OOM killer can pick it. It is read through its
/// live thread: its series and its group's show what the kernel's thread files say.
#[test]
#[ignore = "needs root"]
fn a_process_whose_main_thread_exited_is_seen_through_a_live_thread() {
    needs_root("the program runs as another user");
    let r = as_tenant("headless", &repro::build("headless"), &["256"]);
    let pid = r.pid();
    let tid: u32 = r.ready.split_whitespace().nth(1).unwrap().parse().unwrap();
    // The premise: the process's own directory shows no memory, its thread's does.
    let own = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    assert!(field_bytes(&own, "VmRSS").is_none(), "{own}");
    let thread = || std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/status")).unwrap();
    let kernel = field_bytes(&thread(), "VmRSS").unwrap();
    assert!(kernel >= 256.0 * 1048576.0, "{kernel}");
    let d = Daemon::start(&["--scan.interval=1s"]);
    let series = format!("membloat_process_resident_bytes{{pid=\"{pid}\",comm=\"headless\"}}");
    let mut t = String::new();
    d.wait_until(Duration::from_secs(30), || {
        t = d.metrics();
        value(&t, &series).is_some()
    });
    let kernel = field_bytes(&thread(), "VmRSS").unwrap();
    let served = value(&t, &series).unwrap();
    assert!(
        (served - kernel).abs() <= 0.02 * kernel,
        "served {served}, the thread's VmRSS {kernel}"
    );
    let group = value(&t, "membloat_group_resident_bytes{group=\"headless\"}").unwrap();
    assert!(group >= served, "group {group}, process {served}");
    let score: f64 = std::fs::read_to_string(format!("/proc/{pid}/oom_score"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let oom = format!("membloat_process_oom_score{{pid=\"{pid}\",comm=\"headless\"}}");
    assert_eq!(value(&t, &oom), Some(score), "the kernel says {score}");
    drop((d, r));
}

/// A tenant's program dressed as a JVM running ZGC (`tests/reproducers/zgcdress.c`, run
/// as `java`): a real JVM's perf data mapped where HotSpot maps it, and a memfd named
/// `java_heap` with 1 GiB allocated of which it maps 2 MiB. Its Java heap is served as
/// resident only as far as its views map the file: 2 MiB, not the memfd's 1 GiB (a
/// "held Java heap" of 968 MiB before this bound), and no measured figure exceeds what it
/// has resident.
#[test]
#[ignore = "needs root"]
fn a_memfd_named_as_zgcs_heap_is_believed_only_as_far_as_it_is_mapped() {
    needs_root("the program runs as another user");
    let dir = tempfile::Builder::new()
        .prefix("membloat-zgc-")
        .tempdir_in("/tmp")
        .unwrap();
    let (java, perf) = zgc_dressed(dir.path());
    let dir_arg = dir.path().to_str().unwrap();
    let r = as_tenant("java", &java, &[perf.to_str().unwrap(), dir_arg, "1024"]);
    let pid = r.pid();
    // Every process served: with the default five, this small one may never be among
    // them beside other tests' programs and builds.
    let d = Daemon::start(&["--scan.interval=1s", "--collector.processes.top-k=100000"]);
    let resident =
        format!("membloat_process_jvm_heap_resident_bytes{{pid=\"{pid}\",comm=\"java\"}}");
    let mut t = String::new();
    d.wait_until(Duration::from_secs(60), || {
        t = d.metrics();
        value(&t, &resident).is_some()
    });
    let served = value(&t, &resident).unwrap();
    assert!(
        served <= 2.0 * 1048576.0,
        "{served} bytes of Java heap served as resident: its views map 2 MiB"
    );
    let held = format!(
        "membloat_process_runtime_held_bytes{{pid=\"{pid}\",comm=\"java\",runtime=\"jvm\"}}"
    );
    assert!(value(&t, &held).unwrap_or(0.0) <= 2.0 * 1048576.0, "{held}");
    no_measured_figure_over_resident(&t);
    drop((d, r, dir));
}

/// A tenant's jemalloc program (`tests/reproducers/jeshare.c`, jemalloc linked in
/// statically) whose one dirty extent it maps over with shared memory, forked into 21
/// processes: each one's jemalloc lists the same 64 MiB as its own kept pages, which every
/// process counts whole in its resident memory. An extent outside private anonymous
/// memory is not believed (`implausible`), and no group sum exceeds the group's Pss:
/// 21 x 64 MiB was served as the group's measured hoarding before these bounds.
#[test]
#[ignore = "needs root"]
fn one_shared_memory_listed_by_many_processes_is_not_multiplied() {
    needs_root("the program runs as another user");
    let r = as_tenant("jeshare", &repro::build("jeshare"), &["64", "21"]);
    let d = Daemon::start(&["--scan.interval=1s", "--collector.processes.top-k=100000"]);
    // Every process read once, whatever the outcome.
    let reads = |t: &str| -> f64 {
        t.lines()
            .filter(|l| l.starts_with("membloat_jemalloc_reads_total{"))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum()
    };
    let mut t = String::new();
    d.wait_until(Duration::from_secs(60), || {
        t = d.metrics();
        reads(&t) >= 21.0
    });
    let implausible = labelled(
        &t,
        "membloat_jemalloc_reads_total",
        "outcome=\"implausible\"",
    );
    assert!(
        implausible >= 21.0,
        "{implausible} reads found it implausible"
    );
    let measured = value(
        &t,
        "membloat_group_hoarded_bytes{group=\"jeshare\",method=\"measured\"}",
    );
    let pss = value(&t, "membloat_group_pss_bytes{group=\"jeshare\"}").unwrap();
    let held = value(
        &t,
        "membloat_group_runtime_held_bytes{group=\"jeshare\",runtime=\"jemalloc\"}",
    );
    eprintln!("group jeshare: measured {measured:?}, jemalloc held {held:?}, Pss {pss}");
    assert!(
        measured.unwrap_or(0.0) <= pss,
        "measured {measured:?} over the group's Pss {pss}"
    );
    assert!(held.is_none(), "jemalloc's held pages believed: {held:?}");
    no_measured_figure_over_resident(&t);
    drop((d, r));
}

/// Six of a tenant's processes that each hold their own mmap lock for as long as their
/// FUSE server keeps a read waiting (`tests/reproducers/lockhold.c`: a thread reads its
/// own page of the mount through /proc/self/mem, another queues to map): every read that
/// takes that lock waits behind them. They once took every reader thread (five), and no
/// process was scanned again. Now at most four readers can ever wait there, the deep tier
/// reads none of them, and every scan reads every other process: a hoarder started
/// beside them is measured.
#[test]
#[ignore = "needs root"]
fn processes_holding_their_own_mmap_lock_stop_no_scan() {
    needs_root("a FUSE mount");
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let (_mounted, mnt, hold, server) = fuse_server(dir.path());
    let prog = mnt.join("prog");
    let lockhold = repro::build("lockhold");
    let mut holders: Vec<Repro> = (0..6)
        .map(|_| as_tenant("lockhold", &lockhold, &[prog.to_str().unwrap()]))
        .collect();
    // From here on every request to the mount waits; dropped before the exporter and
    // the holders, also when an assertion fails, so that every waiting read returns.
    std::fs::write(&hold, "").unwrap();
    let _answer = Answer(hold.clone());
    for h in &mut holders {
        use std::io::{BufRead, Write};
        h.child.stdin.as_mut().unwrap().write_all(b"go\n").unwrap();
        let mut line = String::new();
        h.out.read_line(&mut line).unwrap();
        assert_eq!(line.trim(), "started");
    }
    // The premise, as the kernel tells it: each holder has a thread queued for its mmap
    // lock (state D) behind the one that waits on the server.
    for h in &holders {
        let pid = h.pid();
        let queued = || {
            std::fs::read_dir(format!("/proc/{pid}/task"))
                .unwrap()
                .flatten()
                .any(|t| {
                    let stat = std::fs::read_to_string(t.path().join("stat")).unwrap_or_default();
                    stat.rsplit_once(')')
                        .and_then(|(_, r)| r.split_whitespace().next())
                        == Some("D")
                })
        };
        let started = Instant::now();
        while !queued() {
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "{pid}: no thread queued"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }
    let d = Daemon::start(&["--scan.interval=1s"]);
    let later = Repro::start_as("hoard", "later", &["2", "1", "0"]);
    let truth = fordblks_of(&later);
    // Twenty scans: each read the other processes, and the hoarder is measured.
    let scans = |t: &str| value(t, "membloat_scans_total").unwrap_or(0.0);
    let (mut seen, mut measured_at) = (0.0, None);
    let started = Instant::now();
    let mut t = String::new();
    while seen < 20.0 {
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "{seen} scans in 120 s"
        );
        t = d.metrics();
        if scans(&t) > seen {
            seen = scans(&t);
            let scanned = value(&t, "membloat_processes_scanned").unwrap_or(0.0);
            assert!(scanned > 10.0, "scan {seen}: {scanned} processes scanned");
        }
        let free = value(&t, "membloat_group_heap_free_bytes{group=\"later\"}");
        if measured_at.is_none() && free.is_some_and(|f| (f - truth).abs() <= 0.05 * truth) {
            measured_at = Some(started.elapsed());
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    let threads = std::fs::read_dir(format!("/proc/{}/task", d.child.id()))
        .unwrap()
        .count();
    let stalled = value(&t, "membloat_scan_stalled_processes").unwrap_or(0.0);
    eprintln!(
        "{seen} scans: hoarder measured at {measured_at:?}; {stalled} processes stalled; \
         the exporter has {threads} threads"
    );
    let measured_at = measured_at.expect("the hoarder was never measured");
    assert!(measured_at < Duration::from_secs(60), "{measured_at:?}");
    // Its readers that wait behind the holders are abandoned, not joined: asked to stop
    // while they still wait, the exporter ends.
    let mut d = d;
    let pid = nix::unistd::Pid::from_raw(i32::try_from(d.child.id()).unwrap());
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
    let asked = Instant::now();
    while d.child.try_wait().unwrap().is_none() {
        assert!(
            asked.elapsed() < Duration::from_secs(10),
            "the exporter did not end"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    eprintln!(
        "ended {:?} after SIGTERM, its readers still waiting",
        asked.elapsed()
    );
    drop((_answer, later, d, holders, server));
}

/// Tenants' processes that together hold more open descriptors than the `owners`
/// collector's budget for a read (262,144), each more than its bound for one process
/// (16,384, as many as the open-files limit allows), beside another process holding a
/// memfd: each of the many is looked at up to its bound (counted as `timeout`), so the
/// budget is left for the last, whose memfd is named with its bytes. Without the bound
/// for one process the many would spend the budget and hide it.
#[test]
#[ignore = "needs root"]
fn processes_with_a_quarter_million_descriptors_hide_no_one_elses_memfd() {
    needs_root("the programs run as another user");
    let _crowd = crowd();
    let (_, hard) =
        nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE).unwrap();
    let per = usize::try_from(hard).unwrap_or(usize::MAX).min(1 << 20) - 64;
    if per <= membloat_exporter::units::owners::PER_PROCESS + 16 {
        skipped(&format!(
            "the open-files limit ({hard}) is below the per-process bound: nothing to prove"
        ));
        return;
    }
    let n = membloat_exporter::units::owners::DESCRIPTORS / per + 1;
    let python = |script: String| {
        let mut cmd = tool("prlimit");
        cmd.arg(format!("--nofile={hard}:{hard}"))
            .args([
                "--",
                "setpriv",
                "--reuid=64000",
                "--regid=64000",
                "--clear-groups",
            ])
            .args(["--", "/usr/bin/python3", "-c", &script]);
        Repro::spawn("python3", cmd)
    };
    let hold = |name: &str, bytes: usize| {
        format!("m = os.memfd_create('{name}')\nos.write(m, b'x' * {bytes})\nprint('ready', flush=True)\ntime.sleep(600)\n")
    };
    let many: Vec<Repro> = (0..n)
        .map(|_| {
            let script = format!(
                "import os, time\nfd = os.open('/dev/null', os.O_RDONLY)\nkept = [os.dup(fd) for _ in range({per})]\n{}",
                hold("late", 4096)
            );
            python(script)
        })
        .collect();
    let beside = python(format!("import os, time\n{}", hold("beside", 2 << 20)));
    assert!(
        many.iter().all(|m| beside.pid() > m.pid()),
        "the last started after the many"
    );
    let started = Instant::now();
    let out = run(&[
        "--once",
        "--once.interval=0s",
        "--no-collector.processes",
        "--no-collector.kmsg",
    ]);
    let took = started.elapsed();
    let t = String::from_utf8(out.stdout).unwrap();
    let memfd = |pid: u32, name: &str| {
        value(
            &t,
            &format!(
                "membloat_unlinked_file_bytes{{kind=\"memfd\",pid=\"{pid}\",name=\"{name}\"}}"
            ),
        )
    };
    assert_eq!(
        memfd(beside.pid(), "beside"),
        Some(f64::from(2u32 << 20)),
        "{t}"
    );
    // Past the first 16,384 of their descriptors: not looked at, and counted.
    assert!(many.iter().all(|m| memfd(m.pid(), "late").is_none()), "{t}");
    let cut = value(
        &t,
        "membloat_scan_errors_total{collector=\"owners\",reason=\"timeout\"}",
    );
    assert!(cut.is_some_and(|c| c >= n as f64), "{n} processes cut: {t}");
    assert_eq!(
        value(
            &t,
            "membloat_scrape_collector_success{collector=\"owners\"}"
        ),
        Some(1.0)
    );
    assert!(took < Duration::from_secs(60), "two scans took {took:?}");
    drop((many, beside));
}
