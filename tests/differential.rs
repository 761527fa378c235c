//! The differential tester: random allocation programs (tests/reproducers/mallocfuzz.c,
//! one program per seed) run on glibc 2.31, 2.36 and 2.41; each prints glibc's own
//! `mallinfo2` (`mallinfo` on 2.31) at a quiet point, and the exporter's heap measurement
//! of the same process, the code path of the deep tier, must agree with it: the free bytes
//! (`fordblks`) and the free chunk count (`ordblks + smblks`). A measurement that differs
//! is a wrong number labelled measured, the one thing this exporter must never print.
//!
//! The slice in the test suite runs MEMBLOAT_DIFF_PROGRAMS programs per version (default
//! 12) from a seed that changes every run (printed; MEMBLOAT_DIFF_SEED repeats one). The
//! long run:
//!
//!   MEMBLOAT_DIFF_PROGRAMS=1000 cargo test --release --test runtimes differential -- --nocapture
//!
//! Reading a child's memory needs no privilege beyond being its parent.

use crate::common;

use common::glibc::{self, Glibc};
use membloat_exporter::heap::shape::NoFigure;
use membloat_exporter::heap::{self, HeapMeasure};
use membloat_exporter::parse::smaps;
use membloat_exporter::source::Source;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

/// What glibc said of itself.
#[derive(Debug, Clone, Copy)]
struct Truth {
    fordblks: u64,
    ordblks: u64,
    smblks: u64,
    threads: u64,
}

#[derive(Debug, Default)]
struct Tally {
    programs: u64,
    exact: u64,
    within_1pct: u64,
    wrong: Vec<String>,
    not_measured: Vec<String>,
    cross_checked: u64,
    max_arenas: u64,
    max_walk_cpu: Duration,
    total_walk_cpu: Duration,
    max_free_chunks: u64,
}

fn thread_cpu() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the timespec it is given.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// Runs one program and measures it; `Err` says why it could not run.
fn one(
    bin: &std::path::Path,
    seed: u64,
) -> Result<(Truth, Result<HeapMeasure, heap::Unmeasured>, Duration), String> {
    let mut child = Command::new(bin)
        .arg(seed.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| e.to_string())?;
    let pid = child.id();
    let mut line = String::new();
    let read = BufReader::new(child.stdout.take().unwrap()).read_line(&mut line);
    let result = (|| {
        read.map_err(|e| e.to_string())?;
        let f: Vec<u64> = line
            .split_whitespace()
            .skip(1)
            .map(|w| w.parse().unwrap_or(u64::MAX))
            .collect();
        if !line.starts_with("ready") || f.len() != 6 {
            return Err(format!("seed {seed}: no ready line: {line:?}"));
        }
        let truth = Truth {
            fordblks: f[0],
            ordblks: f[2],
            smblks: f[3],
            threads: f[5],
        };
        let text =
            std::fs::read_to_string(format!("/proc/{pid}/smaps")).map_err(|e| e.to_string())?;
        let vmas = smaps::parse(&text).map_err(|e| format!("{e:?}"))?.vmas;
        let cpu = thread_cpu();
        let reading = heap::read(&Source::new("/proc", "/sys"), pid, &vmas, true);
        let used = thread_cpu().saturating_sub(cpu);
        let walk = reading.get::<heap::Glibc>().cloned().ok_or("walk off")?;
        Ok((truth, walk, used))
    })();
    let _ = child.kill();
    let _ = child.wait();
    result
}

fn run_version(g: &Glibc, base: u64, programs: u64) -> Tally {
    let bin = g.build("mallocfuzz");
    let tally = Mutex::new(Tally::default());
    let next = AtomicU64::new(0);
    // Two at a time: the machine has two cores.
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| loop {
                let n = next.fetch_add(1, Ordering::Relaxed);
                if n >= programs {
                    return;
                }
                let seed = base + n;
                let r = one(&bin, seed);
                let mut t = tally.lock().unwrap();
                t.programs += 1;
                let (truth, walk, cpu) = match r {
                    Ok(x) => x,
                    Err(e) => {
                        t.not_measured.push(format!("seed {seed}: did not run: {e}"));
                        continue;
                    }
                };
                t.max_walk_cpu = t.max_walk_cpu.max(cpu);
                t.total_walk_cpu += cpu;
                let m = match walk {
                    Ok(m) => m,
                    Err(o) => {
                        t.not_measured
                            .push(format!("seed {seed} ({} threads): {}", truth.threads, o.as_str()));
                        continue;
                    }
                };
                // mallinfo's int fields (2.31) hold the figures modulo 2^32.
                let modulo = |v: u64| if g.version.as_str() < "2.33" { v & 0xffff_ffff } else { v };
                let free = modulo(m.free_bytes());
                let chunks = m.main.free_chunks + m.arenas.free_chunks;
                // ordblks counts each arena's top chunk; smblks the fastbin chunks.
                let truth_chunks = truth.ordblks + truth.smblks;
                let our_chunks = modulo(chunks + m.arena_count + 1);
                t.cross_checked += m.cross_checked as u64;
                t.max_arenas = t.max_arenas.max(m.arena_count);
                t.max_free_chunks = t.max_free_chunks.max(chunks);
                if free == truth.fordblks && our_chunks == truth_chunks {
                    t.exact += 1;
                } else if (free as f64 - truth.fordblks as f64).abs() <= 0.01 * truth.fordblks as f64 {
                    t.within_1pct += 1;
                } else {
                    t.wrong.push(format!(
                        "seed {seed} ({} threads): fordblks {} chunks {}, measured {} chunks {} ({} arenas)",
                        truth.threads, truth.fordblks, truth_chunks, free, our_chunks, m.arena_count
                    ));
                }
            });
        }
    });
    tally.into_inner().unwrap()
}

#[test]
fn random_programs_agree_with_mallinfo_on_three_glibc_versions() {
    let programs: u64 = std::env::var("MEMBLOAT_DIFF_PROGRAMS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(12);
    let base: u64 = std::env::var("MEMBLOAT_DIFF_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| {
            SystemTime::now()
                .duration_since(SystemTime::UNIX_EPOCH)
                .unwrap()
                .as_secs()
                % 1_000_000
                * 1000
        });
    eprintln!("differential: {programs} programs per glibc from seed {base} (MEMBLOAT_DIFF_SEED={base} repeats them)");
    let versions = glibc::all();
    assert_eq!(versions.len(), 3, "{versions:?}");
    let mut failures = Vec::new();
    eprintln!("| glibc | programs | exact | within 1 % | wrong | not measured | cross-checked | most arenas | most free chunks | CPU per walk (mean / max) |");
    eprintln!("|---|---|---|---|---|---|---|---|---|---|");
    for g in versions {
        let t = run_version(g, base, programs);
        eprintln!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {:.2} ms / {:.2} ms |",
            g.version,
            t.programs,
            t.exact,
            t.within_1pct,
            t.wrong.len(),
            t.not_measured.len(),
            t.cross_checked,
            t.max_arenas,
            t.max_free_chunks,
            t.total_walk_cpu.as_secs_f64() * 1e3 / t.programs.max(1) as f64,
            t.max_walk_cpu.as_secs_f64() * 1e3
        );
        for w in &t.wrong {
            failures.push(format!("glibc {}: WRONG {w}", g.version));
        }
        for n in &t.not_measured {
            failures.push(format!("glibc {}: not measured {n}", g.version));
        }
        assert_eq!(t.programs, programs);
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
