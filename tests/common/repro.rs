//! The reproducer programs of `tests/reproducers`: built once per test binary, run as
//! real processes that show one phenomenon each.

use super::tool;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Builds a reproducer from tests/reproducers once per test binary run.
pub fn build(name: &str) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/reproducers");
    // The file name is the process's comm, which the series are looked up by.
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("repro-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let out = dir.join(name);
    if out.exists() {
        return out;
    }
    // Built under a name of this thread's, then renamed: a test running the same
    // reproducer in parallel never sees a half-written file.
    let tmp = dir.join(format!("{name}.{:?}.tmp", std::thread::current().id()));
    let (final_out, out) = (out, tmp);
    let status = if name == "goheap" {
        let mut go = tool("go");
        go.args(["build", "-o"])
            .arg(&out)
            .arg(src.join("goheap.go"))
            .env("CGO_ENABLED", "0")
            .env("GOFLAGS", "-mod=mod");
        go.status()
    } else if name == "idle_musl" {
        // musl's libc linked in statically (musl-tools).
        super::tool("musl-gcc")
            .args(["-static", "-O1", "-o"])
            .arg(&out)
            .arg(src.join("idle.c"))
            .status()
    } else if name == "jefree" || name == "jeshare" {
        // jemalloc linked in statically, from Debian's libjemalloc-dev.
        cc(&out, &src.join(format!("{name}.c")))
            .args(["-Wl,-Bstatic", "-ljemalloc", "-Wl,-Bdynamic", "-lm", "-ldl"])
            .status()
    } else {
        cc(&out, &src.join(format!("{name}.c"))).status()
    };
    assert!(status.unwrap().success(), "building reproducer {name}");
    std::fs::rename(&out, &final_out).unwrap();
    final_out
}

/// The random Go program of tests/reproducers/gofree.go, built once per test binary run
/// with the installed Go and `flags` (`-ldflags=-s -w` strips it).
pub fn go(name: &str, flags: &[&str]) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/reproducers");
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("repro-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let out = dir.join(name);
    if !out.exists() {
        let tmp = dir.join(format!("{name}.{:?}.tmp", std::thread::current().id()));
        let status = tool("go")
            .arg("build")
            .args(flags)
            .arg("-o")
            .arg(&tmp)
            .arg(src.join("gofree.go"))
            .env("CGO_ENABLED", "0")
            .env("GOFLAGS", "-mod=mod")
            .status();
        assert!(status.unwrap().success(), "building {name}");
        std::fs::rename(&tmp, &out).unwrap();
    }
    out
}

/// The C compiler line of every reproducer: without -fno-builtin-* the optimiser deletes
/// the unused malloc/free pairs.
pub fn cc(out: &Path, src: &Path) -> Command {
    let mut cc = tool("cc");
    cc.args([
        "-O1",
        "-fno-builtin-malloc",
        "-fno-builtin-free",
        "-pthread",
        "-o",
    ])
    .arg(out)
    .arg(src);
    cc
}

/// A running reproducer; its first stdout line is "ready ...". Killed when dropped.
pub struct Repro {
    pub child: Child,
    pub ready: String,
    pub out: BufReader<std::process::ChildStdout>,
}

impl Repro {
    pub fn start(name: &str, args: &[&str], env: &[(&str, &str)]) -> Repro {
        let mut cmd = Command::new(build(name));
        cmd.args(args).envs(env.iter().copied());
        Repro::spawn(name, cmd)
    }

    /// A reproducer run under another file name, so its comm (and group) is `alias`.
    pub fn start_as(name: &str, alias: &str, args: &[&str]) -> Repro {
        Repro::run_as(&build(name), alias, args)
    }

    /// Runs the program `built` under the file name `alias` (its comm and group).
    pub fn run_as(built: &Path, alias: &str, args: &[&str]) -> Repro {
        let path = built.with_file_name(alias);
        super::copy_program(built, &path);
        let mut cmd = Command::new(path);
        cmd.args(args);
        Repro::spawn(alias, cmd)
    }

    /// Runs the program `built` with `args` and `env`.
    pub fn run_env(built: &Path, args: &[&str], env: &[(&str, &str)]) -> Repro {
        let mut cmd = Command::new(built);
        cmd.args(args).envs(env.iter().copied());
        let name = built.file_name().unwrap().to_string_lossy().into_owned();
        Repro::spawn(&name, cmd)
    }

    /// A Python reproducer from tests/reproducers, run by python3.
    /// `tests/reproducers/JavaHeap.java` (compiled once: `java::classes`) run by `java`
    /// with `jvm_args`: it fills `fill` MiB, keeps `keep`, collects, prints "ready" and its
    /// heap pools, and idles.
    pub fn java(
        java: impl AsRef<std::ffi::OsStr>,
        jvm_args: &[&str],
        fill: u32,
        keep: u32,
    ) -> Repro {
        Repro::java_with(java, jvm_args, &[&fill.to_string(), &keep.to_string()])
    }

    /// `JavaHeap` with its own arguments as given (`FILL KEEP [nogc]`).
    pub fn java_with(java: impl AsRef<std::ffi::OsStr>, jvm_args: &[&str], args: &[&str]) -> Repro {
        let mut cmd = Command::new(java);
        cmd.args(jvm_args)
            .arg("-cp")
            .arg(super::java::classes())
            .arg("JavaHeap")
            .args(args);
        Repro::spawn("JavaHeap", cmd)
    }

    pub fn python(script: &str, args: &[&str]) -> Repro {
        Repro::python_env(script, args, &[])
    }

    /// A Python reproducer with `env`.
    pub fn python_env(script: &str, args: &[&str], env: &[(&str, &str)]) -> Repro {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/reproducers");
        let mut cmd = super::tool("python3");
        cmd.arg(src.join(script))
            .args(args)
            .envs(env.iter().copied());
        Repro::spawn(script, cmd)
    }

    pub fn spawn(name: &str, mut cmd: Command) -> Repro {
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("start reproducer");
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let mut ready = String::new();
        out.read_line(&mut ready).unwrap();
        assert!(ready.starts_with("ready"), "{name}: {ready:?}");
        Repro { child, ready, out }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Waits until the process's main thread waits in the system call of `kind`
    /// (tests/reproducers/blocked.h, pyheap.py), as `/proc/PID/syscall` says: where a
    /// remedy must find it.
    pub fn until_waiting(&self, kind: &str) {
        // x86-64: pause; clock_nanosleep, or restart_syscall once a nanosleep was
        // restarted; read; futex.
        let calls: &[i64] = match kind {
            "pause" => &[34],
            "nanosleep" => &[230, 219, 35],
            "read" => &[0],
            "futex" => &[202],
            _ => panic!("no wait {kind}"),
        };
        let path = format!("/proc/{}/syscall", self.pid());
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let text = std::fs::read_to_string(&path).unwrap_or_default();
            let nr = text.split_whitespace().next().and_then(|n| n.parse().ok());
            if nr.is_some_and(|nr| calls.contains(&nr)) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "pid {} never waited in {kind}: {text:?}",
                self.pid()
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Wakes a process that waits in `kind` (SIGUSR1 for pause and nanosleep, a byte on
    /// stdin for read and futex) and returns its line `woke KIND CALL DATA`.
    pub fn wake(&mut self, kind: &str) -> String {
        if matches!(kind, "pause" | "nanosleep") {
            nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(self.pid() as i32),
                nix::sys::signal::Signal::SIGUSR1,
            )
            .unwrap();
        } else {
            self.child.stdin.as_mut().unwrap().write_all(b"x").unwrap();
            self.child.stdin.as_mut().unwrap().flush().unwrap();
        }
        let mut line = String::new();
        self.out.read_line(&mut line).unwrap();
        assert!(line.starts_with("woke "), "pid {}: {line:?}", self.pid());
        line.trim_end().to_string()
    }

    /// Wakes it after a remedy was applied while it waited in `kind`, and asserts that
    /// the wait came back as the program expects (never EINTR unasked, never the
    /// kernel's internal 512-516), that its live data is intact, and that it goes on to
    /// wait again and answers a second wake.
    pub fn unharmed(&mut self, kind: &str, what: &str) {
        let woke = self.wake(kind);
        eprintln!("{what}: {woke}");
        assert_eq!(woke, format!("woke {kind} ok ok"), "{what}: harmed");
        self.until_waiting(kind);
        let again = self.wake(kind);
        assert_eq!(
            again,
            format!("woke {kind} ok ok"),
            "{what}: the second wake"
        );
        self.until_waiting(kind);
    }

    /// Sends the program a line (`stats`, `collect`, `purge`: what it answers to) and
    /// returns the line it answers with, which starts `ready`.
    #[allow(dead_code, reason = "not every test binary asks")]
    pub fn ask(&mut self, what: &str) -> String {
        let stdin = self.child.stdin.as_mut().unwrap();
        stdin.write_all(format!("{what}\n").as_bytes()).unwrap();
        stdin.flush().unwrap();
        let mut line = String::new();
        self.out.read_line(&mut line).unwrap();
        assert!(line.starts_with("ready"), "pid {}: {line:?}", self.pid());
        line
    }

    pub fn series(&self, metric: &str, comm: &str) -> String {
        format!("{metric}{{pid=\"{}\",comm=\"{comm}\"}}", self.pid())
    }
}

impl Drop for Repro {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
