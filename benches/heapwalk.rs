//! The heap measurement's cost on real glibc heaps: live child processes
//! (tests/reproducers/server.c) whose threads keep small live objects between freed
//! blocks; each iteration measures one the way the deep tier does (`heap::read`: arenas
//! found from glibc's structures, free lists followed through `process_vm_readv`, residency
//! from `/proc/PID/pagemap`).
//!
//! - `free_chunks/N`: one worker arena holding N free chunks (2 KiB holes between live
//!   objects); throughput in free chunks, so the time per element is the cost per free
//!   chunk.
//! - `arenas/K`: K worker arenas of 1 MiB with about 60 free chunks each; the time per
//!   element is the cost per arena.
//!
//! Run: `cargo bench --bench heapwalk`. Needs a C compiler and ptrace access to a child
//! (any user has it for their own children unless Yama forbids it).

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use membloat_exporter::heap;
use membloat_exporter::parse::smaps;
use membloat_exporter::source::Source;

struct Server(Child);

impl Server {
    /// `threads` workers of `mib` MiB each, `live` objects per `hole`-byte freed block.
    fn start(threads: u32, mib: u32, live: u32, hole: u32) -> Server {
        let bin = Path::new(env!("CARGO_TARGET_TMPDIR")).join("bench-server");
        if !bin.exists() {
            let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/reproducers/server.c");
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
            assert!(ok.success(), "building the server reproducer");
        }
        let mut child = Command::new(bin)
            .args([threads, mib, live, hole].map(|n| n.to_string()))
            .stdout(Stdio::piped())
            .spawn()
            .expect("start the server reproducer");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        assert!(line.starts_with("ready"), "{line:?}");
        Server(child)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn vmas(pid: u32) -> Vec<smaps::Vma> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/smaps")).unwrap();
    smaps::parse(&text).expect("smaps of a live process").vmas
}

fn bench(c: &mut Criterion) {
    let source = Source::new("/proc", "/sys");
    let mut g = c.benchmark_group("heap_measure");
    g.sample_size(10);
    let cases: [(&str, u32, u32, u32, u64); 6] = [
        // (group, threads, MiB per thread, live objects per hole, elements)
        ("free_chunks", 1, 11, 2, 4_000),
        ("free_chunks", 1, 43, 2, 16_000),
        ("free_chunks", 1, 170, 2, 64_000),
        ("arenas", 1, 1, 4, 1),
        ("arenas", 4, 1, 4, 4),
        ("arenas", 15, 1, 4, 15),
    ];
    for (group, threads, mib, live, elements) in cases {
        let hole = if group == "arenas" { 16384 } else { 2048 };
        let child = Server::start(threads, mib, live, hole);
        let pid = child.0.id();
        let v = vmas(pid);
        let first = heap::read(&source, pid, &v, true);
        let m = *first.measured().expect("the heap is measured");
        let chunks = m.main.free_chunks + m.arenas.free_chunks;
        eprintln!(
            "{group}/{elements}: {} arenas, {} heaps, {chunks} free chunks, {} MiB free",
            m.arena_count,
            m.arenas.heaps,
            m.free_bytes() >> 20
        );
        g.throughput(Throughput::Elements(elements));
        // As the exporter reads: what is learnt once per binary is kept across reads.
        let binaries = heap::Binaries::default();
        g.bench_function(BenchmarkId::new(group, elements), |b| {
            b.iter(|| {
                heap::read_with(&source, pid, &v, true, &binaries)
                    .measured()
                    .copied()
            })
        });
        drop(child);
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
