//! The reproducer programs of `tests/reproducers`: built once per test binary, run as
//! real processes that show one phenomenon each.

use super::tool;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

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
    } else if name == "jefree" {
        // jemalloc linked in statically, from Debian's libjemalloc-dev.
        cc(&out, &src.join("jefree.c"))
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
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/reproducers");
        let mut cmd = super::tool("python3");
        cmd.arg(src.join(script)).args(args);
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
