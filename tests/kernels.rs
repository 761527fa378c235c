//! The kernels fleets run, booted for real: Debian's 5.10 (bullseye), 6.1 (bookworm) and
//! 6.12 (trixie), generic -amd64 builds from Debian's archive (scripts/vm-kernels.sh), in
//! QEMU's TCG with cgroup v2 as the only hierarchy and THP `always` (scripts/vm.sh). This
//! machine's root is the guest's, read-only over 9p, so the exporter and the reproducers
//! built here run there unchanged. tests/vm/guest.py runs the checks inside and writes
//! what it found; each kernel is one test here, which asserts that every check of its
//! mode ran and passed, and prints the kernel's facts and timings.
//!
//! Each kernel boots twice: once with PSI on for every check (collectors, the kernel's own
//! files, absent series for what it lacks, six random glibc programs measured exactly,
//! container headroom at both kubelet cgroup paths, per-container pressure, peak and
//! events, an OOM kill at memory.max, a memory.oom.group kill, khugepaged regrowth), and
//! once booted `psi=0`, where PSI's series are absent and nothing fails.
//!
//! MEMBLOAT_VM_SEED repeats a run's random programs; MEMBLOAT_VM_PROGRAMS sets how many
//! (default 6, two batches of three: the check's short form, the longest of a boot under
//! TCG at about 8 s a program; `MEMBLOAT_VM_PROGRAMS=30` is the long one).

use crate::common;

use common::repro;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

/// Modes and the checks each must report.
const FULL: &[&str] = &[
    "kernel",
    "cgroup_v2_only",
    "collectors",
    "absent_not_error",
    "kernel_files",
    "sheet",
    "cgroup_sheet",
    "watch",
    "overlay",
    "hoarding",
    "headroom",
    "pressure",
    "oom_kill",
    "group_kill",
    "regrowth",
    "collectors_after",
];
const PSI_OFF: &[&str] = &["kernel", "cgroup_v2_only", "collectors", "absent_not_error"];

/// The kernels, fetched once per test binary: name -> tree, and busybox.
fn kernels() -> &'static (Vec<(String, PathBuf)>, PathBuf) {
    static K: OnceLock<(Vec<(String, PathBuf)>, PathBuf)> = OnceLock::new();
    K.get_or_init(|| {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let out = Command::new(root.join("scripts/vm-kernels.sh"))
            .arg(root.join("target/vm-kernels"))
            .output()
            .expect("scripts/vm-kernels.sh");
        assert!(
            out.status.success(),
            "vm-kernels.sh: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let mut trees = Vec::new();
        let mut busybox = PathBuf::new();
        for line in String::from_utf8(out.stdout).unwrap().lines() {
            let w: Vec<&str> = line.split_whitespace().collect();
            match w.as_slice() {
                ["busybox", path] => busybox = PathBuf::from(path),
                [name, _release, tree] => trees.push((name.to_string(), PathBuf::from(tree))),
                _ => panic!("vm-kernels.sh said {line:?}"),
            }
        }
        (trees, busybox)
    })
}

/// One VM at a time: TCG uses every CPU it is given.
static ONE_VM: Mutex<()> = Mutex::new(());

struct Boot {
    results: serde_json::Value,
    boot_and_run: Duration,
}

fn boot(kernel: &str, mode: &str, extra: &[&str]) -> Boot {
    let _vm = ONE_VM.lock().unwrap_or_else(|e| e.into_inner());
    common::tool("qemu-system-x86_64");
    common::tool("prometheus");
    let (trees, busybox) = kernels();
    let tree = &trees.iter().find(|(n, _)| n == kernel).unwrap().1;
    let repros = [
        "heap",
        "burst",
        "regrowth",
        "mallocfuzz",
        "arenas",
        "goheap",
        "jefree",
    ]
    .map(repro::build);
    // CPython 3.13 with its symbols and a Rust program on mimalloc 2.3.2, run from an
    // overlay in the guest.
    let python = &common::python::debian_of("3.13").symbols;
    let mimalloc = common::mimalloc::program("2.3.2", false);
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("vm-{kernel}-{mode}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let seed: u64 = std::env::var("MEMBLOAT_VM_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_secs()
                % 1_000_000_007
        });
    let programs = std::env::var("MEMBLOAT_VM_PROGRAMS").unwrap_or_else(|_| "6".into());
    guest_files(&dir);
    let only = std::env::var("MEMBLOAT_VM_ONLY")
        .map(|o| format!(" --only {o}"))
        .unwrap_or_default();
    let guest = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/vm/guest.py");
    std::fs::write(
        dir.join("run.sh"),
        format!(
            "exec python3 {} --exporter {} --repro {} --out /run/vm-out --mode {mode} --seed {seed} --programs {programs} --rules {} --python {} --mimalloc {} --cache-dir {}{only}\n",
            guest.display(),
            common::bin(),
            repros[0].parent().unwrap().display(),
            common::rules_file().display(),
            python.display(),
            mimalloc.display(),
            dir.display(),
        ),
    )
    .unwrap();
    eprintln!("{kernel} {mode}: booting (seed {seed})");
    let start = Instant::now();
    let vm = || {
        Command::new(Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/vm.sh"))
            .arg(tree)
            .arg(busybox)
            .arg(&dir)
            .args(extra)
            .env("MEMBLOAT_VM_TIMEOUT", "420")
            .status()
            .unwrap()
    };
    let mut status = vm();
    // A kernel that died before the guest ran a line of ours (an oops in early boot: QEMU's
    // multi-threaded TCG once hit one patching 6.12's code, in int3 in sched_clock_cpu) is
    // booted once more, saying so. A check that failed is never tried again.
    let ran = std::fs::metadata(dir.join("guest.log")).is_ok_and(|m| m.len() > 0);
    if !status.success() && !ran {
        eprintln!(
            "{kernel} {mode}: the kernel died before the guest ran; booting again. Console (kept as console-first.log):\n{}",
            std::fs::read_to_string(dir.join("console.log")).unwrap_or_default()
        );
        let _ = std::fs::rename(dir.join("console.log"), dir.join("console-first.log"));
        status = vm();
    }
    let boot_and_run = start.elapsed();
    let log = std::fs::read_to_string(dir.join("guest.log")).unwrap_or_default();
    eprintln!("{kernel} {mode} guest:\n{log}");
    assert!(
        status.success(),
        "{kernel} {mode}: the VM failed ({status}); console:\n{}",
        std::fs::read_to_string(dir.join("console.log")).unwrap_or_default()
    );
    let results: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.join("results.json")).expect("results.json"),
    )
    .unwrap();
    Boot {
        results,
        boot_and_run,
    }
}

/// What the guest reads beside its programs: the dashboard panels only cgroup v2 has data
/// for, and files it reads into its page cache through the host's 9p mount (sparse:
/// nothing on the host's disk).
fn guest_files(dir: &Path) {
    // The panels, as Grafana would ask them of the guest's Prometheus.
    let panels: Vec<serde_json::Value> =
        common::dashboards::queries_of(&common::dashboards::NEEDS_CGROUP_V2, "127.0.0.1:10293")
            .into_iter()
            .map(|(title, query)| serde_json::json!({"title": title, "query": query}))
            .collect();
    assert!(
        !panels.is_empty(),
        "no cgroup v2 panel found in the dashboards"
    );
    std::fs::write(
        dir.join("panels.json"),
        serde_json::to_string(&panels).unwrap(),
    )
    .unwrap();
    for (name, mib) in [("cache-32m", 32u64), ("cache-300m", 300)] {
        let f = std::fs::File::create(dir.join(name)).unwrap();
        f.set_len(mib << 20).unwrap();
    }
}

fn assert_checks(kernel: &str, mode: &str, b: &Boot, want: &[&str]) {
    let checks = b.results["checks"].as_array().unwrap();
    let failed: Vec<String> = checks
        .iter()
        .filter(|c| c["ok"] != true)
        .map(|c| format!("{}: {}", c["name"], c["detail"].as_str().unwrap_or("")))
        .collect();
    assert!(
        failed.is_empty(),
        "{kernel} {mode}: failed:\n{}",
        failed.join("\n")
    );
    let names: Vec<&str> = checks.iter().map(|c| c["name"].as_str().unwrap()).collect();
    assert_eq!(names, want, "{kernel} {mode}: the checks that ran");
    eprintln!(
        "{kernel} {mode}: {} checks passed in {:.0} s (guest {} s); facts {}",
        names.len(),
        b.boot_and_run.as_secs_f64(),
        b.results["facts"]["guest_seconds"],
        b.results["facts"]
    );
}

fn kernel(name: &str) {
    let full = boot(name, "full", &[]);
    // MEMBLOAT_VM_ONLY=CHECK,...: only those of the full mode (and the first four), to
    // work on one check; the psi=0 boot is left out.
    if let Ok(only) = std::env::var("MEMBLOAT_VM_ONLY") {
        let mut want = PSI_OFF.to_vec();
        want.extend(FULL.iter().filter(|c| only.split(',').any(|o| o == **c)));
        assert_checks(name, "full", &full, &want);
        return;
    }
    assert_checks(name, "full", &full, FULL);
    let facts = &full.results["facts"];
    assert_eq!(facts["thp_enabled"], "always", "{name}: THP mode");
    assert_eq!(facts["cgroup_v1_mounted"], false);
    let off = boot(name, "psi0", &["psi=0"]);
    assert_checks(name, "psi0", &off, PSI_OFF);
    assert_eq!(off.results["facts"]["psi_readable"], false, "{name}: psi=0");
}

#[test]
fn debian_11_bullseye_5_10() {
    kernel("5.10");
}

#[test]
fn debian_12_bookworm_6_1() {
    kernel("6.1");
}

#[test]
fn debian_13_trixie_6_12() {
    kernel("6.12");
}
