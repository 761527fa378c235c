//! The heap walk's cost on real glibc heaps: a live child process
//! (tests/reproducers/heap.c) holds 1 GiB of heap in large chunks (1 MiB blocks) or in
//! small chunks (256-byte blocks), half of it freed among live blocks; each iteration
//! walks it the way the deep tier does, through `/proc/PID/mem` (chunk headers) and
//! `/proc/PID/pagemap` (residency of the free chunks). The throughput is heap bytes walked.
//!
//! Run: `cargo bench --bench heapwalk`. Needs a C compiler and ptrace access to a child
//! (any user has it for their own children unless Yama forbids it).

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use membloat_exporter::collect::heap;
use membloat_exporter::parse::smaps;
use membloat_exporter::source::Source;

struct HeapChild(Child);

impl HeapChild {
    /// Runs the reproducer with `MIB` live and `MIB` freed in blocks of `block` bytes.
    fn start(mib: &str, block: &str) -> HeapChild {
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR"));
        let bin = dir.join("bench-heap");
        if !bin.exists() {
            let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/reproducers/heap.c");
            let ok = Command::new("cc")
                .args([
                    "-O1",
                    "-fno-builtin-malloc",
                    "-fno-builtin-free",
                    "-pthread",
                    "-o",
                ])
                .arg(&bin)
                .arg(src)
                .status()
                .expect("cc");
            assert!(ok.success(), "building the heap reproducer");
        }
        let mut child = Command::new(bin)
            .args(["main", mib, mib, block])
            // 1 MiB blocks come from the heap only above glibc's default mmap threshold.
            .env("MALLOC_MMAP_THRESHOLD_", "33554432")
            .stdout(Stdio::piped())
            .spawn()
            .expect("start the heap reproducer");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        assert!(line.starts_with("ready"), "{line:?}");
        HeapChild(child)
    }
}

impl Drop for HeapChild {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn walk(c: &mut Criterion) {
    let source = Source::new("/proc", "/sys");
    let mut g = c.benchmark_group("heap_walk");
    g.sample_size(10);
    for (name, mib, block) in [
        ("large_chunks_1MiB", "512", "1048544"),
        ("small_chunks_256B", "128", "256"),
    ] {
        let child = HeapChild::start(mib, block);
        let pid = child.0.id();
        let text = std::fs::read_to_string(format!("/proc/{pid}/smaps")).unwrap();
        let (vmas, _) = smaps::parse(&text).expect("smaps of a live process");
        let (brk, _) = heap::heap_ranges(&vmas);
        let (start, end) = brk.expect("a brk heap");
        let first = heap::read(&source, pid, &vmas, true);
        let m = first.measured().expect("the heap is measured");
        eprintln!(
            "{name}: heap {} MiB, {} chunks, {} MiB free",
            (end - start) >> 20,
            m.main.chunks,
            m.free_bytes() >> 20
        );
        g.throughput(Throughput::Bytes(end - start));
        g.bench_function(name, |b| {
            b.iter(|| heap::read(&source, pid, &vmas, true).measured().copied())
        });
        drop(child);
    }
    g.finish();
}

criterion_group!(benches, walk);
criterion_main!(benches);
