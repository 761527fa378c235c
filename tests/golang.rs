//! A Go program's heap read from outside, against the runtime's own figures
//! (`runtime/metrics`) on random programs built by several Go toolchains, PIE and not, cgo
//! and pure Go. Each program allocates objects of random sizes from random goroutines,
//! touches every page, drops a random share and runs `runtime.GC()`; then, at each line
//! on its stdin, prints its figures. The reader's figures must equal the runtime's, read
//! on both sides of it; a stripped binary must give its reason and no figure; and
//! `debug.FreeOSMemory()` must move the free heap to released.
//!
//! The toolchains come from the Go module proxy (`GOTOOLCHAIN=go1.N.P go build`):
//! `MEMBLOAT_GO_VERSIONS` (comma separated) replaces the default list, and
//! `MEMBLOAT_GO_PROGRAMS` sets the random programs per version and build (default 4: a
//! dozen per version).
//! Reading another process's memory needs ptrace access: the test's own children are
//! readable by it.

use crate::common;

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use membloat_exporter::heap::golang::{GoHeap, Unmeasured};
use membloat_exporter::heap::{self, golang};
use membloat_exporter::parse::smaps;
use membloat_exporter::source::Source;

/// The Go versions the differential covers by default: every release this reader
/// supports, their latest patch on the module proxy.
const VERSIONS: &[&str] = &[
    "go1.21.13",
    "go1.22.12",
    "go1.23.12",
    "go1.24.13",
    "go1.25.7",
    "local",
];

/// How a program is built.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Build {
    Plain,
    Pie,
    Cgo,
    Stripped,
    NoDwarf,
}

impl Build {
    fn flags(self) -> (&'static [&'static str], &'static str) {
        match self {
            Build::Plain => (&[], "0"),
            Build::Pie => (&["-buildmode=pie"], "0"),
            Build::Cgo => (&["-tags", "withcgo"], "1"),
            Build::Stripped => (&["-ldflags=-s -w"], "0"),
            Build::NoDwarf => (&["-ldflags=-w"], "0"),
        }
    }
}

/// Builds the random program with `version` ("local": the installed toolchain).
fn build(version: &str, how: Build) -> Result<PathBuf, String> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/reproducers");
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("gofree");
    std::fs::create_dir_all(&dir).unwrap();
    // Named by the sources' contents: a changed program is built again.
    let mut hash = std::collections::hash_map::DefaultHasher::new();
    for f in ["gofree.go", "gofree_cgo.go"] {
        std::hash::Hash::hash(&std::fs::read(src.join(f)).unwrap(), &mut hash);
    }
    let digest = std::hash::Hasher::finish(&hash);
    let out = dir.join(format!("gofree-{version}-{how:?}-{digest:016x}"));
    if out.exists() {
        return Ok(out);
    }
    let (flags, cgo) = how.flags();
    // Built under a name of this thread's, then renamed: tests building the same program in
    // parallel never see each other's half-written file.
    let tmp = out.with_extension(format!("{:?}.tmp", std::thread::current().id()));
    let mut go = common::tool("go");
    go.arg("build")
        .args(flags)
        .arg("-o")
        .arg(&tmp)
        .arg(src.join("gofree.go"))
        .arg(src.join("gofree_cgo.go"))
        .env("CGO_ENABLED", cgo)
        .env("GOFLAGS", "-mod=mod");
    if version != "local" {
        go.env("GOTOOLCHAIN", version);
    }
    let done = go.output().map_err(|e| e.to_string())?;
    if !done.status.success() {
        return Err(format!(
            "go build with {version}: {}",
            String::from_utf8_lossy(&done.stderr)
        ));
    }
    // The binary says which Go built it: a `go` older than 1.21 ignores GOTOOLCHAIN and
    // would build every "version" with itself.
    let file = std::fs::File::open(&tmp).unwrap();
    let built = heap::runtime::go_version(|off, buf| {
        std::os::unix::fs::FileExt::read_exact_at(&file, buf, off).is_ok()
    });
    if version != "local" && built.as_deref() != Some(version) {
        return Err(format!(
            "asked for {version}, the binary says {built:?}: the installed go cannot fetch \
             toolchains (GOTOOLCHAIN needs Go 1.21 or newer)"
        ));
    }
    std::fs::rename(&tmp, &out).unwrap();
    Ok(out)
}

/// A running random program.
struct Program {
    child: Child,
    input: ChildStdin,
    output: BufReader<ChildStdout>,
}

impl Program {
    fn start(bin: &Path, seed: u64) -> Program {
        let mut child = Command::new(bin)
            .arg(seed.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let input = child.stdin.take().unwrap();
        let mut output = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        output.read_line(&mut line).unwrap();
        assert!(line.starts_with("ready"), "{line}");
        Program {
            child,
            input,
            output,
        }
    }

    /// The runtime's figures now ("free": after `debug.FreeOSMemory()`).
    fn figures(&mut self, ask: &str) -> serde_json::Value {
        writeln!(self.input, "{ask}").unwrap();
        let mut line = String::new();
        self.output.read_line(&mut line).unwrap();
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}"))
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Program {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What the deep tier makes of a live process: its mappings from `smaps`, then its heap
/// reading (the binary's layout read once and kept, its load address, its figures).
fn read(pid: u32) -> Result<GoHeap, Unmeasured> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/smaps")).unwrap();
    let vmas = smaps::parse(&text).unwrap().vmas;
    let reading = heap::read(&Source::new("/proc", "/sys"), pid, &vmas, true);
    reading
        .get::<heap::golang::Go>()
        .cloned()
        .expect("a Go process")
        .map(|g| *g)
}

fn metric(v: &serde_json::Value, name: &str) -> u64 {
    v[name].as_u64().unwrap_or_else(|| panic!("{name} in {v}"))
}

/// The reader's figures against the runtime's, read before and after it; a program that
/// moved between the two is asked again (a few times).
fn agrees(p: &mut Program) -> Result<(GoHeap, serde_json::Value), String> {
    let mut last = String::new();
    for _ in 0..5 {
        let before = p.figures("");
        let ours = match read(p.pid()) {
            // The background scavenger returned pages under both tries: a later read
            // (the next deep read, in the daemon) finds it still.
            Err(Unmeasured::Moving) => {
                last = "moving under every read".into();
                std::thread::sleep(std::time::Duration::from_millis(300));
                continue;
            }
            other => other.map_err(|e| format!("{e:?}"))?,
        };
        let after = p.figures("");
        if before != after {
            last = format!("the program moved: {before} then {after}");
            continue;
        }
        let theirs = [
            (ours.free_bytes, "/memory/classes/heap/free:bytes"),
            (ours.released_bytes, "/memory/classes/heap/released:bytes"),
        ];
        for (mine, name) in theirs {
            if mine != metric(&before, name) {
                return Err(format!(
                    "{name}: runtime {}, read {mine}: {ours:?}",
                    before[name]
                ));
            }
        }
        let in_use = metric(&before, "/memory/classes/heap/objects:bytes")
            + metric(&before, "/memory/classes/heap/unused:bytes");
        if ours.in_use_bytes != in_use {
            return Err(format!(
                "in use: runtime {in_use}, read {}: {ours:?}",
                ours.in_use_bytes
            ));
        }
        if ours.memory_limit_bytes != metric(&before, "/gc/gomemlimit:bytes") {
            return Err(format!("GOMEMLIMIT: {before}, read {ours:?}"));
        }
        // Without GOMEMLIMIT the goal is GOGC's.
        if ours.gc_percent_goal_bytes != metric(&before, "/gc/heap/goal:bytes") {
            return Err(format!("the GC goal: {before}, read {ours:?}"));
        }
        if ours.free_resident_bytes > ours.free_bytes {
            return Err(format!("more resident than free: {ours:?}"));
        }
        return Ok((ours, before));
    }
    Err(last)
}

fn versions() -> Vec<String> {
    match std::env::var("MEMBLOAT_GO_VERSIONS") {
        Ok(v) => v.split(',').map(str::to_string).collect(),
        Err(_) => VERSIONS.iter().map(|v| v.to_string()).collect(),
    }
}

#[test]
fn the_go_heap_read_from_outside_equals_the_runtimes_own_figures() {
    let programs: u64 = std::env::var("MEMBLOAT_GO_PROGRAMS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(4);
    let seed0: u64 = std::env::var("MEMBLOAT_GO_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_126_000);
    let mut wrong = Vec::new();
    let mut measured = 0;
    for version in versions() {
        for how in [Build::Plain, Build::Pie, Build::Cgo] {
            let bin = build(&version, how).unwrap_or_else(|e| panic!("{e}"));
            for i in 0..programs {
                let seed = seed0 + i;
                let mut p = Program::start(&bin, seed);
                match agrees(&mut p) {
                    Ok((ours, theirs)) => {
                        measured += 1;
                        eprintln!(
                            "{version} {how:?} seed {seed}: free {} (resident {}), released {}, in use {}, goal {}",
                            ours.free_bytes,
                            ours.free_resident_bytes,
                            ours.released_bytes,
                            ours.in_use_bytes,
                            theirs["/gc/heap/goal:bytes"]
                        );
                        // The remedy: the free heap goes back to the OS, and the figure
                        // falls with it.
                        if i == 0 {
                            p.figures("free");
                            match agrees(&mut p) {
                                Ok((after, _)) => assert!(
                                    after.free_resident_bytes < ours.free_resident_bytes.max(1),
                                    "{version} {how:?}: resident free {} before, {} after",
                                    ours.free_resident_bytes,
                                    after.free_resident_bytes
                                ),
                                Err(e) => wrong.push(format!(
                                    "{version} {how:?} seed {seed} after FreeOSMemory: {e}"
                                )),
                            }
                        }
                    }
                    Err(e) => wrong.push(format!("{version} {how:?} seed {seed}: {e}")),
                }
            }
        }
        // A stripped binary, and one without DWARF: the reason, never a figure.
        for (how, why) in [
            (Build::Stripped, Unmeasured::Stripped),
            (Build::NoDwarf, Unmeasured::NoDwarf),
        ] {
            let bin = build(&version, how).unwrap_or_else(|e| panic!("{e}"));
            let p = Program::start(&bin, seed0);
            assert_eq!(read(p.pid()), Err(why), "{version} {how:?}");
        }
    }
    assert!(
        wrong.is_empty(),
        "{} wrong:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
    assert!(measured > 0);
}

/// Through the daemon: a Go program's free heap is its measured hoarding, held by the
/// runtime `go`, with its runtime's own figures beside it; `explain` names the Go remedy;
/// a stripped binary shows its reason and no hoarding figure at all.
#[test]
fn the_daemon_serves_a_go_programs_held_heap_and_explains_it() {
    let bin = build("local", Build::Plain).unwrap_or_else(|e| panic!("{e}"));
    let stripped = build("local", Build::Stripped).unwrap_or_else(|e| panic!("{e}"));
    // A large budget, nearly all dropped: well past the 16 MiB a process needs to count.
    let mut p = Program::start(&bin, 4);
    let s = Program::start(&stripped, 4);
    let d = common::Daemon::start(&[
        "--scan.interval=1s",
        "--collector.processes.top-k=100000",
        "--collector.processes.deep-min-size=0",
        "--collector.processes.deep-interval=1s",
    ]);
    let comm = bin.file_name().unwrap().to_string_lossy()[..15].to_string();
    let (pid, spid) = (p.pid(), s.pid());
    let free = format!("membloat_process_go_heap_free_bytes{{pid=\"{pid}\",comm=\"{comm}\"}}");
    let mut t = String::new();
    d.wait_until(std::time::Duration::from_secs(30), || {
        t = d.metrics();
        common::value(&t, &free).is_some()
    });
    // The served figure is the runtime's: the program is asked, left alone for two deep
    // reads, scraped, and asked again; what it says then is what those reads saw.
    let mut agreed = false;
    for _ in 0..10 {
        p.figures("");
        std::thread::sleep(std::time::Duration::from_millis(2500));
        t = d.metrics();
        let now = p.figures("");
        let served = common::value(&t, &free).unwrap() as u64;
        if served == metric(&now, "/memory/classes/heap/free:bytes") {
            agreed = true;
            break;
        }
    }
    assert!(
        agreed,
        "the served free heap never equalled the runtime's:\n{t}"
    );
    let resident = common::value(
        &t,
        &format!("membloat_process_go_heap_free_resident_bytes{{pid=\"{pid}\",comm=\"{comm}\"}}"),
    )
    .unwrap();
    let held = common::value(
        &t,
        &format!(
            "membloat_process_runtime_held_bytes{{pid=\"{pid}\",comm=\"{comm}\",runtime=\"go\"}}"
        ),
    );
    assert_eq!(held, Some(resident), "{t}");
    let hoarded = common::value(
        &t,
        &format!(
            "membloat_process_hoarded_bytes{{pid=\"{pid}\",comm=\"{comm}\",method=\"measured\"}}"
        ),
    );
    let want = if resident >= 16.0 * 1048576.0 {
        resident
    } else {
        0.0
    };
    assert_eq!(hoarded, Some(want), "{t}");
    assert!(common::value(&t, "membloat_go_reads_total{outcome=\"measured\"}").unwrap() >= 1.0);
    // The stripped binary: its reason, no figure of any method.
    let scomm = stripped.file_name().unwrap().to_string_lossy()[..15].to_string();
    let reason = format!(
        "membloat_process_go_unmeasured{{pid=\"{spid}\",comm=\"{scomm}\",reason=\"stripped\"}}"
    );
    d.wait_until(std::time::Duration::from_secs(30), || {
        t = d.metrics();
        common::value(&t, &reason) == Some(1.0)
    });
    assert!(
        !t.contains(&format!("membloat_process_hoarded_bytes{{pid=\"{spid}\"")),
        "a figure for a Go heap that was not read:\n{t}"
    );
    drop(d);
    assert!(want > 0.0, "seed 4 held less than 16 MiB:\n{t}");
    let f = common::explained(pid, "go_heap");
    let remedy = f["remedy"].as_str().unwrap();
    assert!(remedy.contains("GOMEMLIMIT"), "{f}");
    assert_eq!(f["certainty"], "measured", "{f}");
    // The remedy applied as printed, in the program: debug.FreeOSMemory() gives back at
    // least 80 % of what the finding named (the process's RssAnon before and after).
    assert!(remedy.contains("debug.FreeOSMemory()"), "{f}");
    let promised = f["bytes"].as_f64().unwrap();
    let before = common::rss_anon(pid);
    p.figures("free");
    let fell = before - common::rss_anon(pid);
    eprintln!(
        "go_heap: debug.FreeOSMemory() gave back {:.1} MiB of {:.1} MiB",
        fell / 1048576.0,
        promised / 1048576.0
    );
    assert!(fell >= 0.8 * promised, "{fell} of {promised}");
    let f = common::explained(spid, "go_heap_unmeasured");
    assert!(f["remedy"].as_str().unwrap().contains("-s"), "{f}");
}

/// A damaged binary (bytes overwritten at random places, or cut short) gives a layout or a
/// reason, never a panic or an absurd allocation: the symbol table and DWARF of a process
/// are input the exporter does not control.
#[test]
fn a_damaged_go_binary_gives_a_reason_never_a_panic() {
    let bin = build("local", Build::Plain).unwrap_or_else(|e| panic!("{e}"));
    let good = std::fs::read(&bin).unwrap();
    assert!(golang::layout(&good[..]).is_ok());
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let (mut laid, mut refused) = (0, 0);
    for round in 0..200 {
        let mut bad = good.clone();
        if round % 10 == 0 {
            let keep = (next() % bad.len() as u64) as usize;
            bad.truncate(keep);
        } else {
            for _ in 0..(1 + next() % 64) {
                let at = (next() % bad.len() as u64) as usize;
                bad[at] = next() as u8;
            }
        }
        match golang::layout(&bad[..]) {
            Ok(_) => laid += 1,
            Err(_) => refused += 1,
        }
    }
    eprintln!("damaged binaries: {laid} still laid out, {refused} refused");
    // Damage where the reader looks is seen (a panic above would fail the test first).
    assert!(
        refused > 0,
        "{laid} damaged binaries laid out, none refused"
    );
}
