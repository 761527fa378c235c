//! jemalloc, linked in statically (Rust services on `tikv-jemallocator`, Redis's and
//! Valkey's images), stripped, or preloaded: told apart from glibc by what the binary
//! holds, and never given glibc's measured figure. The programs are real: jemalloc 5.2.1,
//! 5.3.0 and 5.3.1 as `tikv-jemallocator` links them (`tests/common/jemalloc.rs`), and
//! Debian's `libjemalloc2` preloaded into a C program. Reading another process's memory
//! needs ptrace access: CI runs as root.

mod common;

use common::jemalloc::{program, VERSIONS};
use common::repro::Repro;
use common::*;
use membloat_exporter::collect::heap::jemalloc::JemallocHeap;
use membloat_exporter::collect::heap::{self, runtime::Allocator, Outcome};
use membloat_exporter::parse::smaps;
use membloat_exporter::source::Source;
use std::io::{BufRead, Write};
use std::path::Path;

/// What the exporter's heap readers make of process `pid`.
fn read(pid: u32) -> heap::HeapReading {
    let text = std::fs::read_to_string(format!("/proc/{pid}/smaps")).unwrap();
    let vmas = smaps::parse(&text).unwrap().vmas;
    heap::read(&Source::new("/proc", "/sys"), pid, &vmas, true)
}

/// jemalloc's own figures as the program printed them: (pactive, pdirty, pmuzzy) pages.
fn stats(line: &str) -> (u64, u64, u64) {
    let field = |name: &str| -> u64 {
        line.split_whitespace()
            .find_map(|w| w.strip_prefix(name)?.strip_prefix('='))
            .unwrap_or_else(|| panic!("{name} in {line:?}"))
            .parse()
            .unwrap()
    };
    (field("pactive"), field("pdirty"), field("pmuzzy"))
}

/// Asks the program for jemalloc's figures again (`stats`, or `purge` first).
fn ask(r: &mut Repro, what: &str) -> String {
    let stdin = r.child.stdin.as_mut().unwrap();
    stdin.write_all(format!("{what}\n").as_bytes()).unwrap();
    stdin.flush().unwrap();
    let mut line = String::new();
    r.out.read_line(&mut line).unwrap();
    assert!(line.starts_with("ready"), "{line:?}");
    line
}

/// The exporter's read of jemalloc in `r`, and jemalloc's own figures (pages) as the
/// program printed them just before and just after it, when those agree (nothing moved
/// in between; tried up to ten times).
fn read_between(r: &mut Repro) -> (JemallocHeap, (u64, u64, u64)) {
    for _ in 0..10 {
        let before = stats(&ask(r, "stats"));
        let h = read(r.pid());
        let after = stats(&ask(r, "stats"));
        if before == after {
            let h = h
                .jemalloc
                .expect("jemalloc read")
                .unwrap_or_else(|e| panic!("{e:?}"));
            return (*h, before);
        }
    }
    panic!("jemalloc's figures moved around ten reads");
}

/// A copy of `built` with its symbol table removed (`strip --strip-all`), as slim images
/// ship binaries.
fn stripped(built: &Path) -> std::path::PathBuf {
    let out = built.with_file_name("jemalloc-stripped");
    if !out.exists() {
        let tmp = built.with_file_name(format!("jemalloc-stripped.{}", std::process::id()));
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

#[test]
#[ignore = "builds jemalloc three times (the runtimes tier; ./scripts/test.sh runs it)"]
fn statically_linked_jemalloc_is_jemalloc_on_every_version_stripped_or_not() {
    for (version, _) in VERSIONS {
        let built = program(version, false);
        for exe in [built.clone(), stripped(&built)] {
            let r = Repro::run_env(&exe, &["1", "4", "64", "5"], &[]);
            assert!(
                r.ready.contains(&format!(" version={version}-")),
                "jemalloc {version}: {}",
                r.ready
            );
            let (_, dirty, _) = stats(&r.ready);
            assert!(
                dirty > 1000,
                "{version}: jemalloc keeps {dirty} dirty pages"
            );
            let h = read(r.pid());
            let name = exe.file_name().unwrap().to_string_lossy();
            assert_eq!(
                h.identity.allocator,
                Allocator::Jemalloc,
                "jemalloc {version}, {name}: it maps libc.so.6 and is not glibc's"
            );
            assert_eq!(
                h.walk,
                Some(Err(Outcome::NotGlibc)),
                "jemalloc {version}, {name}: never glibc's figure"
            );
        }
    }
}

/// Debian's `libjemalloc2`, where it is installed (./scripts/test.sh installs it).
const DEBIAN_JEMALLOC: &str = "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2";

#[test]
fn preloaded_jemalloc_is_never_given_glibcs_figure() {
    assert!(
        Path::new(DEBIAN_JEMALLOC).exists(),
        "{DEBIAN_JEMALLOC}: run ./scripts/test.sh, which installs libjemalloc2"
    );
    // The C program that hoards 256 MiB under glibc: under jemalloc the same frees are
    // jemalloc's, whatever glibc's heap holds.
    let r = Repro::start(
        "hoard",
        &["2", "1", "0"],
        &[("LD_PRELOAD", DEBIAN_JEMALLOC)],
    );
    let h = read(r.pid());
    assert_eq!(h.identity.allocator, Allocator::Jemalloc);
    assert_eq!(h.walk, Some(Err(Outcome::NotGlibc)));
    // The same program without it is glibc's, measured.
    let plain = Repro::start("hoard", &["2", "1", "0"], &[]);
    let h = read(plain.pid());
    assert_eq!(h.identity.allocator, Allocator::Glibc);
    assert!(h.measured().is_some(), "{:?}", h.walk);
}

#[test]
#[ignore = "builds jemalloc (the runtimes tier; ./scripts/test.sh runs it)"]
fn the_exporter_names_jemalloc_and_serves_no_measured_figure_for_it() {
    let built = program("5.3.0", false);
    let exe = built.with_file_name("jemalloc_rust");
    copy_program(&built, &exe);
    let r = Repro::run_env(&exe, &["2", "8", "128", "5"], &[]);
    let pid = r.pid();
    let d = Daemon::start(&["--scan.interval=1s", "--collector.processes.top-k=100000"]);
    let info = format!(
        "membloat_process_allocator_info{{allocator=\"jemalloc\",runtime=\"native\",version=\"\",pid=\"{pid}\",comm=\"jemalloc_rust\"}}"
    );
    let mut t = String::new();
    d.wait_until(std::time::Duration::from_secs(30), || {
        t = d.metrics();
        value(&t, &info) == Some(1.0)
    });
    let measured = format!(
        "membloat_process_hoarded_bytes{{pid=\"{pid}\",comm=\"jemalloc_rust\",method=\"measured\"}}"
    );
    assert_eq!(
        value(&t, &measured),
        None,
        "glibc's figure for a jemalloc process"
    );
}

/// Random programs (block sizes over jemalloc's small, large and huge classes, 1 and 8
/// long-lived threads, a random share kept) on every version, plain and with DWARF: the
/// dirty, muzzy and active pages read from outside equal jemalloc's own, page for page;
/// the resident dirty pages are at most the dirty ones, and a purge gives back what was
/// measured. `MEMBLOAT_JEMALLOC_PROGRAMS` sets the programs per version (4 by default).
#[test]
#[ignore = "builds jemalloc six times (the runtimes tier; ./scripts/test.sh runs it)"]
fn kept_pages_equal_jemallocs_own_on_every_version() {
    let programs: u64 = std::env::var("MEMBLOAT_JEMALLOC_PROGRAMS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(4);
    let mut wrong = Vec::new();
    for (version, _) in VERSIONS {
        for debug in [false, true] {
            let built = program(version, debug);
            for seed in 1..=programs {
                let threads = if seed % 2 == 0 { 8 } else { 1 };
                let mib = 32 + seed * 37 % 160;
                let keep = seed * 13 % 60;
                let args = [seed, threads, mib, keep].map(|a| a.to_string());
                let args: Vec<&str> = args.iter().map(String::as_str).collect();
                let mut r = Repro::run_env(&built, &args, &[]);
                let (h, (active, dirty, muzzy)) = read_between(&mut r);
                let page = 4096;
                let got = (
                    h.active_bytes / page,
                    h.dirty_bytes / page,
                    h.muzzy_bytes / page,
                );
                let name = format!("jemalloc {version} debug={debug} {args:?}");
                eprintln!(
                    "{name}: active {active} dirty {dirty} muzzy {muzzy} pages; read {got:?}, dirty resident {} MiB",
                    h.dirty_resident_bytes >> 20
                );
                assert_eq!(h.version, version, "{name}");
                if got != (active, dirty, muzzy) {
                    wrong.push(format!(
                        "{name}: jemalloc {:?}, read {got:?}",
                        (active, dirty, muzzy)
                    ));
                }
                assert!(h.dirty_resident_bytes <= h.dirty_bytes, "{name}");
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "{} wrong:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
}
