//! Helpers shared by the integration tests: run the real binary, talk HTTP to it, run the
//! real external checkers (promtool, the Python OpenMetrics parser).
#![allow(dead_code)]

pub mod catalogue;
pub mod cgroup;
pub mod dashboards;
pub mod explain;
pub mod glibc;
pub mod java;
pub mod jemalloc;
pub mod kmsg;
pub mod mimalloc;
pub mod owners;
pub mod prometheus;
pub mod python;
pub mod repro;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_membloat_exporter")
}

pub fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/kernel-6.18")
}

/// A temporary copy of these folders of the repository, to run a render script in and
/// compare what it writes with what is committed.
#[allow(dead_code)]
pub fn repository_copy(folders: &[&str]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for d in folders {
        assert!(Command::new("cp")
            .arg("-a")
            .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join(d))
            .arg(dir.path())
            .status()
            .unwrap()
            .success());
    }
    dir
}

/// A copy of the fixture tree under `dir`, to change; its root.
pub fn fixture_copy(dir: &Path) -> PathBuf {
    let root = dir.join("tree");
    assert!(Command::new("cp")
        .arg("-a")
        .arg(fixture())
        .arg(&root)
        .status()
        .unwrap()
        .success());
    root
}

/// The container of `v2_fixture`, a kubelet path of the systemd cgroup driver.
pub const V2_CONTAINER: &str = "kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod0d5b3b24_5f6a_4c1e_9a0b_3c2d1e0f9a8b.slice/cri-containerd-a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1.scope";

/// A copy of the fixture tree whose cgroup hierarchy is v2 alone, with one container
/// showing every file a 6.1+ kernel gives a memory cgroup (the shapes of Debian 12's
/// 6.1): memory.stat, current, max, peak, events and pressure. Its root.
pub fn v2_fixture(dir: &Path) -> PathBuf {
    let root = fixture_copy(dir);
    let cg = root.join("sys/fs/cgroup");
    std::fs::remove_dir_all(&cg).unwrap();
    let ctr = cg.join(V2_CONTAINER);
    std::fs::create_dir_all(&ctr).unwrap();
    let write = |dir: &Path, name: &str, text: &str| std::fs::write(dir.join(name), text).unwrap();
    write(
        &cg,
        "cgroup.controllers",
        "cpuset cpu io memory hugetlb pids rdma misc\n",
    );
    write(
        &ctr,
        "memory.stat",
        "anon 104857600\nfile 8388608\nkernel 1048576\nanon_thp 0\nfile_thp 0\ninactive_file 4194304\n",
    );
    write(&ctr, "memory.current", "115343360\n");
    write(&ctr, "memory.max", "134217728\n");
    write(&ctr, "memory.peak", "130023424\n");
    write(
        &ctr,
        "memory.events",
        "low 0\nhigh 17\nmax 42\noom 1\noom_kill 2\noom_group_kill 1\n",
    );
    write(
        &ctr,
        "memory.pressure",
        "some avg10=1.50 avg60=0.40 avg300=0.10 total=2750000\nfull avg10=0.50 avg60=0.10 avg300=0.02 total=1250000\n",
    );
    // Its bounds and protections, swap and zswap; and its pod, which holds 8 MiB more
    // than its one live container: the charge of 3 removed ones.
    for (file, text) in [
        ("memory.high", "125829120\n"),
        ("memory.min", "0\n"),
        ("memory.low", "16777216\n"),
        ("memory.swap.current", "4096\n"),
        ("memory.swap.max", "268435456\n"),
        ("memory.zswap.current", "0\n"),
        ("memory.zswap.max", "67108864\n"),
        ("cgroup.stat", "nr_descendants 0\nnr_dying_descendants 0\n"),
    ] {
        write(&ctr, file, text);
    }
    let pod = ctr.parent().unwrap();
    write(pod, "memory.current", "123731968\n");
    write(
        pod,
        "cgroup.stat",
        "nr_descendants 1\nnr_dying_descendants 3\n",
    );
    root
}

/// Replaces the file at `path` by a FIFO: opening it blocks until a writer comes, as a
/// read on a hung filesystem or of a process stuck in the kernel does.
pub fn make_fifo(path: &Path) {
    std::fs::remove_file(path).unwrap();
    nix::unistd::mkfifo(path, nix::sys::stat::Mode::S_IRWXU).unwrap();
}

/// Runs the binary to completion with `args`.
pub fn run(args: &[&str]) -> Output {
    Command::new(bin())
        .args(args)
        .output()
        .expect("run membloat_exporter")
}

/// `--once` against a fixture tree; returns stdout, failing the test on a non-zero exit.
pub fn once(root: &Path, extra: &[&str]) -> String {
    let procfs = format!("--path.procfs={}", root.join("proc").display());
    let sysfs = format!("--path.sysfs={}", root.join("sys").display());
    let mut args = vec!["--once", "--once.interval=0s", &procfs, &sysfs];
    args.extend_from_slice(extra);
    let out = run(&args);
    assert!(
        out.status.success(),
        "--once failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8 exposition")
}

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A running exporter daemon, killed when dropped.
pub struct Daemon {
    pub child: Child,
    pub port: u16,
}

impl Daemon {
    pub fn start(args: &[&str]) -> Daemon {
        Self::start_with(Command::new(bin()), args)
    }

    /// Starts `cmd` (the binary, or a wrapper such as setpriv around it) and waits until
    /// the first scan completed (`/healthz` is 200).
    pub fn start_with(cmd: Command, args: &[&str]) -> Daemon {
        let d = Self::spawn(cmd, args);
        // A deadline for the event, not a budget: a first scan on a busy machine is slow.
        d.wait_until(Duration::from_secs(60), || d.get("/healthz").status == 200);
        d
    }

    /// Starts the binary with its log (stderr) written to `log`, and waits for a scan.
    pub fn start_logged(args: &[&str], log: &Path) -> Daemon {
        let mut cmd = Command::new(bin());
        cmd.stderr(std::fs::File::create(log).unwrap());
        let d = Self::spawn_with_stderr(cmd, args);
        d.wait_until(Duration::from_secs(60), || d.get("/healthz").status == 200);
        d
    }

    /// Starts `cmd` and waits only until it answers HTTP.
    pub fn spawn(mut cmd: Command, args: &[&str]) -> Daemon {
        cmd.stderr(Stdio::null());
        Self::spawn_with_stderr(cmd, args)
    }

    fn spawn_with_stderr(mut cmd: Command, args: &[&str]) -> Daemon {
        let port = free_port();
        cmd.args(args)
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdout(Stdio::null());
        let child = cmd.spawn().expect("start membloat_exporter");
        let d = Daemon { child, port };
        d.wait_until(Duration::from_secs(60), || d.get("/").status == 200);
        d
    }

    pub fn get(&self, path: &str) -> Response {
        get(self.port, path, &[])
    }

    pub fn metrics(&self) -> String {
        let r = self.get("/metrics");
        assert_eq!(r.status, 200, "{} (the exporter: {})", r.body, self.state());
        r.body
    }

    /// What the kernel says of the exporter's process, for a failed scrape's message: its
    /// state and CPU time, or that it is gone.
    fn state(&self) -> String {
        let pid = self.child.id();
        match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
            Ok(stat) => {
                let after = stat.rsplit_once(") ").map_or("", |(_, rest)| rest);
                let f: Vec<&str> = after.split_whitespace().collect();
                format!(
                    "pid {pid} state {}, utime+stime {} + {} ticks",
                    f.first().unwrap_or(&"?"),
                    f.get(11).unwrap_or(&"?"),
                    f.get(12).unwrap_or(&"?")
                )
            }
            Err(e) => format!("pid {pid} gone: {e}"),
        }
    }

    pub fn wait_until(&self, limit: Duration, mut ok: impl FnMut() -> bool) {
        let start = Instant::now();
        while start.elapsed() < limit {
            if ok() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("condition not met within {limit:?}");
    }

    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    /// Returns once `n` more scans have completed (`membloat_scans_total` stepped): what
    /// it serves then is of a moment after the call.
    pub fn wait_for_scans(&self, n: u32) {
        let scans = || value(&self.metrics(), "membloat_scans_total").unwrap_or(0.0);
        let seen = scans();
        self.wait_until(Duration::from_secs(60), || scans() >= seen + f64::from(n));
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub struct Response {
    pub status: u16,
    pub head: String,
    pub body: String,
}

impl Response {
    pub fn header(&self, name: &str) -> Option<String> {
        self.head.lines().find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case(name).then(|| v.trim().to_string())
        })
    }
}

/// A plain HTTP/1.1 GET with `Connection: close`; status 0 when nothing answered.
pub fn get(port: u16, path: &str, headers: &[(&str, &str)]) -> Response {
    request(port, "GET", path, headers)
}

pub fn request(port: u16, method: &str, path: &str, headers: &[(&str, &str)]) -> Response {
    let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) else {
        return Response {
            status: 0,
            head: String::new(),
            body: String::new(),
        };
    };
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut req = format!("{method} {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n");
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    if s.write_all(req.as_bytes()).is_err() {
        return Response {
            status: 0,
            head: String::new(),
            body: String::new(),
        };
    }
    let mut raw = Vec::new();
    let _ = s.read_to_end(&mut raw);
    let raw = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = raw.split_once("\r\n\r\n").unwrap_or((&raw, ""));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    Response {
        status,
        head: head.to_string(),
        body: body.to_string(),
    }
}

/// The external checkers are installed by `scripts/test.sh`; a missing one is a failure
/// with the reason, not a silent skip.
/// The path of `name` on PATH (it must be there).
pub fn which(name: &str) -> std::path::PathBuf {
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!("command -v {name}"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{name} is not installed: run ./scripts/test.sh, which installs it"
    );
    std::path::PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
}

/// Copies a program to run it under another name. `cp` writes the copy, not this
/// process: a descriptor open for writing here would be inherited by every child another
/// test's thread forks before it execs, and meanwhile the kernel refuses to run the copy
/// (ETXTBSY, seen in CI). Written under a temporary name and renamed, so a test running the
/// same copy in parallel never runs a half-written file.
pub fn copy_program(from: &Path, to: &Path) {
    if to.exists() {
        return;
    }
    let tmp = to.with_extension(format!("{:?}.tmp", std::thread::current().id()));
    let status = Command::new("cp").arg(from).arg(&tmp).status();
    assert!(
        status.map(|s| s.success()).unwrap_or(false),
        "cp {} {}",
        from.display(),
        tmp.display()
    );
    std::fs::rename(&tmp, to).unwrap();
}

pub fn tool(name: &str) -> Command {
    let found = Command::new("sh")
        .arg("-c")
        .arg(format!("command -v {name}"))
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    assert!(
        found,
        "{name} is not installed: run ./scripts/test.sh, which installs it"
    );
    Command::new(name)
}

/// A file under `deploy/`.
pub fn deploy(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("deploy")
        .join(path)
}

pub fn yaml(path: &Path) -> serde_yaml_ng::Value {
    serde_yaml_ng::from_str(&std::fs::read_to_string(path).unwrap())
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The shipped rules file.
pub fn rules_file() -> PathBuf {
    deploy("prometheus/membloat.rules.yml")
}

/// Every rule of the shipped rules file, recording and alerting, in file order.
pub fn rules() -> Vec<serde_yaml_ng::Value> {
    yaml(&rules_file())["groups"]
        .as_sequence()
        .unwrap()
        .iter()
        .flat_map(|g| g["rules"].as_sequence().unwrap().clone())
        .collect()
}

/// `promtool ARGS PATH`, asserted to succeed; returns what it printed.
pub fn promtool_ok(args: &[&str], path: &Path) -> String {
    let out = tool("promtool").args(args).arg(path).output().unwrap();
    succeeded(out, &format!("promtool {}", args.join(" ")))
}

/// Asserts a checker succeeded; returns its stdout and stderr for further checks.
pub fn succeeded(out: Output, what: &str) -> String {
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{what} failed:\n{text}");
    text
}

/// Pipes `input` to a command and returns its output.
pub fn pipe(mut cmd: Command, input: &str) -> Output {
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn checker");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

/// `promtool check metrics` on a text exposition: asserts it parses and lints clean.
pub fn promtool_check(text: &str) {
    let mut cmd = tool("promtool");
    cmd.args(["check", "metrics"]);
    let out = pipe(cmd, text);
    assert!(
        out.status.success(),
        "promtool check metrics failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The strict OpenMetrics parser of the Python prometheus-client; returns the label values
/// of `label` on samples of `metric`, one per line, as that parser decoded them.
pub fn openmetrics_parse(text: &str, metric: &str, label: &str) -> String {
    let script = format!(
        "import sys, json\nfrom prometheus_client.openmetrics.parser import text_string_to_metric_families\n\
         for fam in text_string_to_metric_families(sys.stdin.read()):\n\
         \x20   for s in fam.samples:\n\
         \x20       if s.name == {metric:?} and {label:?} in s.labels:\n\
         \x20           print(json.dumps(s.labels[{label:?}]))\n"
    );
    let mut cmd = tool("python3");
    cmd.args(["-c", &script]);
    let out = pipe(cmd, text);
    assert!(
        out.status.success(),
        "the OpenMetrics parser rejected the exposition:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The value of the first sample line that starts with `prefix` (name plus labels).
pub fn value(text: &str, prefix: &str) -> Option<f64> {
    text.lines()
        .find(|l| l.starts_with(prefix) && l[prefix.len()..].starts_with(' '))
        .and_then(|l| l.rsplit(' ').next()?.parse().ok())
}

/// A real process that names itself `comm` (through /proc/self/comm, as prctl
/// PR_SET_NAME does) and sleeps; killed when dropped.
pub struct Named(pub Child);

impl Named {
    pub fn spawn(comm: &str) -> Named {
        let script = format!(
            "import sys, time\nopen('/proc/self/comm', 'w').write({comm:?})\nsys.stdout.write('ready\\n')\nsys.stdout.flush()\ntime.sleep(600)\n"
        );
        let mut child = tool("python3")
            .args(["-c", &script])
            .stdout(Stdio::piped())
            .spawn()
            .expect("spawn python3");
        let mut ready = [0u8; 6];
        child
            .stdout
            .take()
            .unwrap()
            .read_exact(&mut ready)
            .expect("child ready");
        Named(child)
    }

    pub fn pid(&self) -> u32 {
        self.0.id()
    }
}

impl Drop for Named {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

pub fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

/// For the tests marked `#[ignore = "needs root"]`: scripts/test.sh runs them when it runs
/// as root (CI does); run by hand without root, they fail saying why, never pass unrun.
/// A check this machine cannot make, said loudly: on stderr, and in the file
/// `MEMBLOAT_SKIP_LOG` names, which `scripts/test.sh` counts and lists in its summary (a
/// passing test's stderr is not shown).
#[allow(dead_code)]
pub fn skipped(what: &str) {
    eprintln!("SKIPPED: {what}");
    if let Some(log) = std::env::var_os("MEMBLOAT_SKIP_LOG") {
        use std::io::Write;
        if let Ok(mut f) = std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .open(log)
        {
            let test = std::thread::current().name().unwrap_or("?").to_string();
            let _ = writeln!(f, "{test}: {what}");
        }
    }
}

pub fn needs_root(what: &str) {
    assert!(
        is_root(),
        "{what} needs root: run as root (scripts/test.sh runs the ignored tests when it is root)"
    );
}

/// Sets khugepaged and THP files and puts the old values back when dropped, also when a
/// test fails.
pub struct KernelSettings(Vec<(PathBuf, String)>);

/// Held by a test that changes THP or khugepaged settings for as long as it runs: the
/// tests of a tier run in one process, so two such tests never overlap.
pub fn kernel_settings_lock() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

impl KernelSettings {
    pub fn set(pairs: &[(&str, &str)]) -> KernelSettings {
        let mut saved = KernelSettings(Vec::new());
        let root = Path::new("/sys/kernel/mm/transparent_hugepage");
        for (file, v) in pairs {
            let path = root.join(file);
            let old = std::fs::read_to_string(&path).unwrap();
            let old = match (old.find('['), old.find(']')) {
                (Some(a), Some(b)) => old[a + 1..b].to_string(),
                _ => old.trim().to_string(),
            };
            std::fs::write(&path, v).unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
            saved.0.push((path, old));
        }
        saved
    }
}

impl Drop for KernelSettings {
    fn drop(&mut self) {
        for (path, old) in self.0.iter().rev() {
            if let Err(e) = std::fs::write(path, old) {
                eprintln!("could not restore {} to {old}: {e}", path.display());
            }
        }
    }
}

/// `explain --format json --pid PID`'s finding of `kind`.
pub fn explained(pid: u32, kind: &str) -> serde_json::Value {
    explained_by(Path::new(bin()), pid, kind)
}

/// [`explained`], by the exporter binary at `exporter` (a build of a planted tree).
pub fn explained_by(exporter: &Path, pid: u32, kind: &str) -> serde_json::Value {
    let doc = explain_doc(exporter, pid);
    let found = doc["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["kind"] == kind)
        .cloned();
    found.unwrap_or_else(|| panic!("no {kind} finding: {doc:#}"))
}

/// The kinds of `explain`'s findings about process `pid`.
#[allow(dead_code, reason = "not every test binary asks")]
pub fn explained_kinds(pid: u32) -> Vec<String> {
    let doc = explain_doc(Path::new(bin()), pid);
    let findings = doc["findings"].as_array().unwrap().iter();
    findings
        .filter(|f| f["process"]["pid"] == pid)
        .map(|f| f["kind"].as_str().unwrap().to_string())
        .collect()
}

/// `explain --format json --pid PID`'s document, by the exporter binary at `exporter`.
fn explain_doc(exporter: &Path, pid: u32) -> serde_json::Value {
    let out = std::process::Command::new(exporter)
        .args([
            "explain",
            "--explain.interval=500ms",
            "--format",
            "json",
            "--pid",
        ])
        .arg(pid.to_string())
        .output()
        .unwrap();
    serde_json::from_slice(&out.stdout).unwrap()
}

/// `--once` on this host with every process read in depth, whatever else runs beside the
/// test (no CPU budget, a read deadline past any busy host's batch), and none left out of
/// the top processes; the exposition, failing the test on a non-zero exit.
#[allow(dead_code, reason = "not every test binary scrapes so")]
pub fn once_every_process() -> String {
    let out = run(&[
        "--once",
        "--once.interval=0s",
        "--no-collector.kmsg",
        "--collector.processes.top-k=100000",
        "--collector.processes.deep-min-size=0",
        "--collector.processes.deep-budget=1h",
        "--collector.processes.read-timeout=2m",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// A copy of `built` named `name` beside it, with its symbol table removed (`strip
/// --strip-all`), as slim images ship binaries; made once.
#[allow(dead_code, reason = "not every test binary strips")]
pub fn stripped(built: &Path, name: &str) -> PathBuf {
    let out = built.with_file_name(name);
    if !out.exists() {
        let tmp = built.with_file_name(format!("{name}.{}", std::process::id()));
        let status = tool("strip")
            .arg("--strip-all")
            .arg(built)
            .arg("-o")
            .arg(&tmp)
            .status()
            .unwrap();
        assert!(status.success());
        std::fs::rename(&tmp, &out).unwrap();
    }
    out
}

/// `built` (a release build with DWARF) without its DWARF, as a plain release build is
/// (cargo strips debug info where `debug` is off, keeping the symbol table): the same
/// code, so one build per allocator version serves both; kept in `plain/` beside it, under
/// the same name (the process's name), and made again when `built` is newer.
#[allow(dead_code, reason = "not every test binary builds one")]
pub fn without_dwarf(built: &Path) -> PathBuf {
    let out = built
        .parent()
        .unwrap()
        .join("plain")
        .join(built.file_name().unwrap());
    let modified = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    if modified(&out).is_none() || modified(&out) < modified(built) {
        std::fs::create_dir_all(out.parent().unwrap()).unwrap();
        let tmp = out.with_extension(format!("{}", std::process::id()));
        let status = tool("strip")
            .arg("--strip-debug")
            .arg(built)
            .arg("-o")
            .arg(&tmp)
            .status()
            .unwrap();
        assert!(status.success(), "strip --strip-debug {}", built.display());
        std::fs::rename(&tmp, &out).unwrap();
    }
    out
}

/// Builds the Rust program `src` (a `main.rs`) as the cargo project `dir` with `manifest`,
/// in release; returns the binary `bin`. Files are written only when changed, so cargo
/// rebuilds only what changed.
#[allow(dead_code, reason = "not every test binary builds one")]
pub fn cargo_program(dir: &Path, manifest: &str, src: &Path, bin: &str) -> PathBuf {
    std::fs::create_dir_all(dir.join("src")).unwrap();
    let write = |path: PathBuf, text: &[u8]| {
        if std::fs::read(&path).ok().as_deref() != Some(text) {
            std::fs::write(&path, text).unwrap();
        }
    };
    write(dir.join("Cargo.toml"), manifest.as_bytes());
    write(dir.join("src/main.rs"), &std::fs::read(src).unwrap());
    let out = Command::new(env!("CARGO"))
        .args(["build", "--release", "--quiet", "--manifest-path"])
        .arg(dir.join("Cargo.toml"))
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_TARGET_DIR")
        .output()
        .expect("cargo");
    assert!(
        out.status.success(),
        "building {}: {}",
        dir.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    dir.join("target/release").join(bin)
}

/// A `field: N kB` figure of `/proc/PID/status` (`field` without its colon), in bytes.
pub fn status_bytes(pid: u32, field: &str) -> f64 {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    field_bytes(&text, field).unwrap_or_else(|| panic!("no {field} for {pid}"))
}

/// A `field: N kB` line of a status file's `text`, in bytes (`None` when it has none: a
/// process that is exiting has no memory lines).
pub fn field_bytes(text: &str, field: &str) -> Option<f64> {
    let line = text.lines().find(|l| l.starts_with(&format!("{field}:")))?;
    let kib: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024.0)
}

/// `RssAnon` of a process, in bytes.
pub fn rss_anon(pid: u32) -> f64 {
    status_bytes(pid, "RssAnon")
}

/// What `gdb` prints for each C expression of `asked` on `built` (its DWARF), as numbers,
/// asserted equal to each one's second half: a layout's places against the build they
/// were taken from.
#[allow(dead_code, reason = "not every test binary asks")]
pub fn assert_dwarf(built: &Path, what: &str, asked: &[(String, u64)]) {
    let mut gdb = tool("gdb");
    gdb.args(["-batch", "-nx", "-ex", "set language c"]);
    for (expr, _) in asked {
        gdb.args(["-ex", &format!("print (unsigned long){expr}")]);
    }
    let out = gdb.arg(built).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let got: Vec<u64> = text
        .lines()
        .filter_map(|l| l.split_once(" = ")?.1.trim().parse().ok())
        .collect();
    let want: Vec<u64> = asked.iter().map(|a| a.1).collect();
    assert_eq!(
        got,
        want,
        "{what}: {:?}\n{}",
        asked.iter().map(|a| &a.0).collect::<Vec<_>>(),
        String::from_utf8_lossy(&out.stderr)
    );
}
