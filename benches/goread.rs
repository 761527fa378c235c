//! The cost of reading a Go program's heap from outside, as the deep tier does:
//!
//! - `layout/<heap>`: once per binary, its symbol table and DWARF read through the open
//!   executable (`/proc/PID/exe`) and the runtime's fields found in them;
//! - `read/<heap>`: once per deep read of a process, the runtime's figures, the page
//!   allocator's bitmaps over the whole heap and `pagemap` over its free pages.
//!
//! Live programs running `tests/reproducers/gofree.go` built with the installed Go: a small
//! heap (seed 1: tens of MiB) and a large one (seed 4: a few hundred MiB).
//!
//! Run: `cargo bench --bench goread`. Needs `go` on PATH and ptrace access to a child.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use membloat_exporter::heap::{golang, memory::ProcessMemory};
use membloat_exporter::source::Source;

struct Program(Child);

impl Drop for Program {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start(bin: &Path, seed: &str) -> Program {
    let mut child = Command::new(bin)
        .arg(seed)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("start the Go program");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert!(line.starts_with("ready"), "{line:?}");
    Program(child)
}

fn bench(c: &mut Criterion) {
    let bin = Path::new(env!("CARGO_TARGET_TMPDIR")).join("bench-gofree");
    if !bin.exists() {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/reproducers/gofree.go");
        let ok = Command::new("go")
            .args(["build", "-o"])
            .arg(&bin)
            .arg(src)
            .env("CGO_ENABLED", "0")
            .status()
            .expect("go");
        assert!(ok.success(), "building gofree.go");
    }
    let source = Source::new("/proc", "/sys");
    let mut g = c.benchmark_group("go");
    g.sample_size(20);
    for (heap, seed) in [("small", "1"), ("large", "4")] {
        let p = start(&bin, seed);
        let pid = p.0.id();
        let exe = std::fs::File::open(format!("/proc/{pid}/exe")).unwrap();
        g.bench_function(BenchmarkId::new("layout", heap), |b| {
            b.iter(|| golang::layout(&exe).is_ok())
        });
        let layout = golang::layout(&exe).expect("a Go binary");
        let mut target = ProcessMemory::open(&source, pid).expect("ptrace access to the child");
        let first = golang::read(&mut target, &layout, 0).expect("the heap is read");
        eprintln!("{heap}: {first:?}");
        g.bench_function(BenchmarkId::new("read", heap), |b| {
            b.iter(|| golang::read(&mut target, &layout, 0).map(|h| h.free_resident_bytes))
        });
        drop(p);
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
