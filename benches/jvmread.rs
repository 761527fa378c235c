//! The cost of reading a JVM from outside, as the deep tier does for each JVM it reads:
//! its perf data (the mapped `hsperfdata` file), its heap's reserved range (libjvm's
//! dynamic symbols and the `gHotSpotVMStructs` table), and the resident pages there.
//! Live JVMs running `tests/reproducers/JavaHeap.java` (300 MiB filled, 20 kept) with
//! Debian's JDK; one iteration is one `jvm::read`.
//!
//! - `read/<collector>/<heap>`: G1, Parallel and ZGC, each with a growable heap
//!   (`-Xms64m -Xmx512m`) and one pinned at `-Xms512m`.
//! - `parse`: the perf-data parser alone on a captured file (`tests/fixtures/hsperfdata`).
//!
//! Run: `cargo bench --bench jvmread`. Needs `java` and `javac` on PATH and ptrace access
//! to a child.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use membloat_exporter::heap::{self, jvm};
use membloat_exporter::parse::{hsperfdata, smaps};
use membloat_exporter::source::Source;

struct Jvm(Child);

impl Jvm {
    fn start(flags: &[&str]) -> Jvm {
        let classes = Path::new(env!("CARGO_TARGET_TMPDIR")).join("bench-java");
        if !classes.join("JavaHeap.class").exists() {
            let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/reproducers/JavaHeap.java");
            let ok = Command::new("javac")
                .args(["--release", "11", "-d"])
                .arg(&classes)
                .arg(src)
                .status()
                .expect("javac");
            assert!(ok.success(), "compiling JavaHeap.java");
        }
        let mut child = Command::new("java")
            .args(flags)
            .arg("-cp")
            .arg(&classes)
            .args(["JavaHeap", "300", "20"])
            .stdout(Stdio::piped())
            .spawn()
            .expect("start a JVM");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        assert!(line.starts_with("ready"), "{line:?}");
        Jvm(child)
    }
}

impl Drop for Jvm {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn bench(c: &mut Criterion) {
    let source = Source::new("/proc", "/sys");
    let mut g = c.benchmark_group("jvm");
    g.sample_size(20);
    let cases: [(&str, &str, &[&str]); 6] = [
        ("g1", "growable", &["-XX:+UseG1GC", "-Xms64m", "-Xmx512m"]),
        ("g1", "pinned", &["-XX:+UseG1GC", "-Xms512m", "-Xmx512m"]),
        (
            "parallel",
            "growable",
            &["-XX:+UseParallelGC", "-Xms64m", "-Xmx512m"],
        ),
        (
            "parallel",
            "pinned",
            &["-XX:+UseParallelGC", "-Xms512m", "-Xmx512m"],
        ),
        ("z", "growable", &["-XX:+UseZGC", "-Xms64m", "-Xmx512m"]),
        ("z", "pinned", &["-XX:+UseZGC", "-Xms512m", "-Xmx512m"]),
    ];
    for (collector, shape, flags) in cases {
        let child = Jvm::start(flags);
        let pid = child.0.id();
        let text = std::fs::read_to_string(format!("/proc/{pid}/smaps")).unwrap();
        let vmas = smaps::parse(&text).expect("smaps of a live JVM").vmas;
        let mut target =
            heap::memory::ProcessMemory::open(&source, pid).expect("ptrace access to the JVM");
        let file = || source.open_file_bytes(pid, "/memfd:java_heap (deleted)");
        let first = jvm::read(&mut target, &vmas, file).expect("the JVM is read");
        assert!(
            first.held_bytes().is_some(),
            "{collector} {shape}: no held figure"
        );
        g.bench_function(BenchmarkId::new(format!("read/{collector}"), shape), |b| {
            b.iter(|| jvm::read(&mut target, &vmas, file).map(|h| h.held_bytes()))
        });
        // As the scanner reads a JVM once another of its libjvm taught it where the heap's
        // range is kept (the table of ~2,700 rows is not read again).
        let learnt = jvm::reserved::Learnt::new(4);
        let taught = jvm::read_with(&mut target, &vmas, file, &learnt).expect("the JVM is read");
        assert_eq!(taught.reserved, first.reserved, "{collector} {shape}");
        g.bench_function(
            BenchmarkId::new(format!("read_learnt/{collector}"), shape),
            |b| {
                b.iter(|| jvm::read_with(&mut target, &vmas, file, &learnt).map(|h| h.held_bytes()))
            },
        );
        drop(child);
    }
    let captured = std::fs::read(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/hsperfdata/jdk17-g1"),
    )
    .unwrap();
    g.bench_function("parse", |b| {
        b.iter(|| hsperfdata::parse(&captured).map(|p| p.entries.len()))
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
