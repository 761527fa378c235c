//! membloat-fuzz: a coverage-guided fuzzer for the exporter's parsers, its heap walk and the
//! whole scan-to-exposition path, on the stable toolchain (docs/fuzzing.md).
//!
//! ```text
//! membloat-fuzz list
//! membloat-fuzz seed                      # fixtures and this host's /proc into fuzz/corpus
//! membloat-fuzz run [--seconds N] [--runs N] [--seed S] [--merge] [TARGET...]
//! membloat-fuzz replay TARGET FILE...
//! membloat-fuzz cmin [TARGET...]          # keep only corpus inputs that add coverage
//! ```
//!
//! `run` replays the target's corpus and past findings, then mutates for the time given.
//! Without `scripts/fuzz.sh`'s instrumentation it still runs, blind (no coverage), and says
//! so. A panic anywhere (a reader thread included) or an input slower than `--timeout` is
//! a finding: written to fuzz/artifacts/TARGET/, and the exit code is 1.

mod check;
mod coverage;
// The exporter's own Go executable in miniature, shared with its unit tests.
#[path = "../../src/heap/runtime/go_elf.rs"]
mod go_elf;
mod mutate;
mod seeds;
mod targets;
mod tree;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use targets::{FuzzTarget, TARGETS};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// FNV-1a.
fn fnv(data: &[u8]) -> u64 {
    data.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ b as u64).wrapping_mul(0x0100_0000_01b3)
    })
}

/// Names a file by its content.
fn digest(data: &[u8]) -> String {
    format!("{:016x}", fnv(data))
}

fn read_dir_files(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    tree::files(dir)
        .into_iter()
        .filter_map(|p| std::fs::read(&p).ok().map(|d| (p, d)))
        .collect()
}

/// The panic of the execution in progress, from whichever thread it happened on.
static PANICKED: Mutex<Option<String>> = Mutex::new(None);
static PANICS: AtomicBool = AtomicBool::new(false);

fn install_panic_hook() {
    std::panic::set_hook(Box::new(|info| {
        let msg = format!("{info}");
        PANICS.store(true, Ordering::SeqCst);
        if let Ok(mut p) = PANICKED.lock() {
            p.get_or_insert(msg);
        }
    }));
}

/// Runs one input; `Some(message)` when it panicked.
fn execute(t: &FuzzTarget, data: &[u8]) -> Option<String> {
    let _ = std::panic::catch_unwind(|| (t.run)(data));
    if PANICS.swap(false, Ordering::SeqCst) {
        let msg = PANICKED.lock().ok().and_then(|mut p| p.take());
        return Some(msg.unwrap_or_else(|| "panic".into()));
    }
    None
}

struct Finding {
    target: &'static str,
    kind: &'static str,
    message: String,
    file: PathBuf,
}

fn save_finding(t: &FuzzTarget, kind: &'static str, data: &[u8], message: String) -> Finding {
    let dir = root().join("fuzz/artifacts").join(t.name);
    let _ = std::fs::create_dir_all(&dir);
    let file = dir.join(format!("{kind}-{}", digest(data)));
    let _ = std::fs::write(&file, data);
    Finding {
        target: t.name,
        kind,
        message,
        file,
    }
}

struct Options {
    seconds: f64,
    runs: Option<u64>,
    seed: u64,
    merge: bool,
    timeout: Duration,
}

struct Outcome {
    runs: u64,
    corpus: usize,
    added: usize,
    edges: usize,
    findings: Vec<Finding>,
}

/// The input being run now, for the watchdog.
struct Current {
    target: &'static FuzzTarget,
    data: Vec<u8>,
    since: Instant,
}

static EXECS: AtomicU64 = AtomicU64::new(0);

fn fuzz(t: &'static FuzzTarget, o: &Options, current: &Arc<Mutex<Option<Current>>>) -> Outcome {
    let corpus_dir = root().join("fuzz/corpus").join(t.name);
    let mut corpus: Vec<Vec<u8>> = read_dir_files(&corpus_dir)
        .into_iter()
        .map(|(_, d)| d)
        .chain(
            read_dir_files(&root().join("fuzz/regressions").join(t.name))
                .into_iter()
                .map(|(_, d)| d),
        )
        .collect();
    if corpus.is_empty() {
        corpus.push(Vec::new());
    }
    let mut seen = coverage::Seen::new();
    let mut findings = Vec::new();
    let base = EXECS.load(Ordering::Relaxed);
    let runs = || EXECS.load(Ordering::Relaxed) - base;
    let run_one = |data: &[u8], seen: &mut coverage::Seen, findings: &mut Vec<Finding>| {
        if let Ok(mut c) = current.lock() {
            *c = Some(Current {
                target: t,
                data: data.to_vec(),
                since: Instant::now(),
            });
        }
        coverage::Seen::discard();
        let panic = execute(t, data);
        EXECS.fetch_add(1, Ordering::Relaxed);
        let new = seen.absorb();
        if let Some(msg) = panic {
            if !findings.iter().any(|f: &Finding| f.message == msg) {
                findings.push(save_finding(t, "crash", data, msg));
            }
            return false;
        }
        new
    };
    for input in corpus.clone() {
        run_one(&input, &mut seen, &mut findings);
    }
    let mut mutator = mutate::Mutator::new(o.seed ^ fnv(t.name.as_bytes()), &corpus);
    let start = Instant::now();
    let mut added = Vec::new();
    let limit = Duration::from_secs_f64(o.seconds);
    while start.elapsed() < limit && o.runs.is_none_or(|n| runs() < n) && findings.len() < 5 {
        let pick = mutator.rng.below(corpus.len());
        let other = corpus[mutator.rng.below(corpus.len())].clone();
        let mut data = corpus[pick].clone();
        mutator.mutate(&mut data, &other, t.max_len, t.binary);
        if run_one(&data, &mut seen, &mut findings) {
            added.push(data.clone());
            corpus.push(data);
        }
    }
    if o.merge && !added.is_empty() {
        let _ = std::fs::create_dir_all(&corpus_dir);
        // The newest inputs cover the most; at most 50 a run keeps the repository small.
        for d in added.iter().rev().take(50) {
            let _ = std::fs::write(corpus_dir.join(digest(d)), d);
        }
    }
    Outcome {
        runs: runs(),
        corpus: corpus.len(),
        added: added.len(),
        edges: seen.edges,
        findings,
    }
}

fn watchdog(current: Arc<Mutex<Option<Current>>>, timeout: Duration) {
    std::thread::spawn(move || loop {
        std::thread::sleep(Duration::from_millis(200));
        let slow = current.lock().ok().and_then(|c| {
            c.as_ref()
                .filter(|c| c.since.elapsed() > timeout)
                .map(|c| (c.target, c.data.clone(), c.since.elapsed()))
        });
        if let Some((t, data, took)) = slow {
            let f = save_finding(t, "timeout", &data, format!("one input ran {took:.1?}"));
            eprintln!(
                "FINDING {} {}: {} (saved to {})",
                f.target,
                f.kind,
                f.message,
                f.file.display()
            );
            std::process::exit(1);
        }
    });
}

/// Shrinks each target's corpus to the inputs that reach an edge no smaller input reached
/// (hit counts aside, so the repository keeps few files); the others are deleted. At
/// most `MAX_KEPT` stay.
fn cmin(names: &[String]) -> ExitCode {
    const MAX_KEPT: usize = 60;
    if !coverage::instrumented() {
        eprintln!("membloat-fuzz cmin: needs coverage (use scripts/fuzz.sh)");
        return ExitCode::from(2);
    }
    install_panic_hook();
    for t in TARGETS {
        if !names.is_empty() && !names.iter().any(|n| n == t.name) {
            continue;
        }
        let dir = root().join("fuzz/corpus").join(t.name);
        let mut files = read_dir_files(&dir);
        files.sort_by_key(|(p, d)| (d.len(), p.clone()));
        let mut seen = coverage::Seen::new();
        let (mut kept, mut dropped) = (0, 0);
        for (path, data) in &files {
            coverage::Seen::discard();
            let _ = execute(t, data);
            let new = seen.absorb_edges();
            if (new || kept == 0) && kept < MAX_KEPT {
                kept += 1;
            } else {
                let _ = std::fs::remove_file(path);
                dropped += 1;
            }
        }
        println!(
            "{:<13} kept {kept}, dropped {dropped}, edges {}",
            t.name, seen.edges
        );
    }
    ExitCode::SUCCESS
}

fn usage() -> ExitCode {
    eprintln!("usage: membloat-fuzz list | seed | run [--seconds N] [--runs N] [--seed S] [--merge] [--timeout S] [TARGET...] | replay TARGET FILE... | cmin [TARGET...]");
    ExitCode::from(2)
}

fn main() -> ExitCode {
    // The pipeline target warns about every tree it is handed; only errors matter here.
    membloat_exporter::log::set_level(membloat_exporter::log::LogLevel::Error);
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(cmd) = args.first() else {
        return usage();
    };
    match cmd.as_str() {
        "list" => {
            for t in TARGETS {
                println!("{}", t.name);
            }
            ExitCode::SUCCESS
        }
        "seed" => seeds::write_all(&root()),
        "cmin" => cmin(&args[1..]),
        "replay" => {
            let Some(t) = args.get(1).and_then(|n| targets::find(n)) else {
                return usage();
            };
            install_panic_hook();
            let mut bad = 0;
            for f in &args[2..] {
                let data = std::fs::read(f).unwrap_or_default();
                match execute(t, &data) {
                    Some(msg) => {
                        bad += 1;
                        println!("{f}: {msg}");
                    }
                    None => println!("{f}: ok"),
                }
            }
            if bad > 0 {
                ExitCode::FAILURE
            } else {
                ExitCode::SUCCESS
            }
        }
        "run" => run(&args[1..]),
        _ => usage(),
    }
}

fn run(args: &[String]) -> ExitCode {
    let mut o = Options {
        seconds: 10.0,
        runs: None,
        seed: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64),
        merge: false,
        timeout: Duration::from_secs(10),
    };
    let mut names = Vec::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut num = |what: &str| -> Option<f64> {
            let v = it
                .next()
                .and_then(|v| v.parse::<f64>().ok())
                .filter(|v| *v >= 0.0);
            if v.is_none() {
                eprintln!("membloat-fuzz: {what} needs a number");
            }
            v
        };
        match a.as_str() {
            "--seconds" => match num("--seconds") {
                Some(v) => o.seconds = v,
                None => return ExitCode::from(2),
            },
            "--runs" => match num("--runs") {
                Some(v) => o.runs = Some(v as u64),
                None => return ExitCode::from(2),
            },
            "--seed" => match num("--seed") {
                Some(v) => o.seed = v as u64,
                None => return ExitCode::from(2),
            },
            "--timeout" => match num("--timeout") {
                Some(v) => o.timeout = Duration::from_secs_f64(v),
                None => return ExitCode::from(2),
            },
            "--merge" => o.merge = true,
            n if targets::find(n).is_some() => names.push(n.to_string()),
            n => {
                eprintln!("membloat-fuzz: unknown target or flag {n:?} (membloat-fuzz list)");
                return ExitCode::from(2);
            }
        }
    }
    let chosen: Vec<&'static FuzzTarget> = if names.is_empty() {
        TARGETS.iter().collect()
    } else {
        names.iter().filter_map(|n| targets::find(n)).collect()
    };
    if !coverage::instrumented() {
        eprintln!("membloat-fuzz: not built with coverage (use scripts/fuzz.sh): mutating blind");
    }
    install_panic_hook();
    let current = Arc::new(Mutex::new(None));
    watchdog(current.clone(), o.timeout);
    println!("seed {}", o.seed);
    let mut findings = Vec::new();
    let started = Instant::now();
    for t in chosen {
        let begun = Instant::now();
        let out = fuzz(t, &o, &current);
        let secs = begun.elapsed().as_secs_f64();
        println!(
            "{:<13} {:>9} runs {:>7.0}/s  corpus {:>5} (+{:<4})  edges {:>5}  findings {}",
            t.name,
            out.runs,
            out.runs as f64 / secs.max(1e-9),
            out.corpus,
            out.added,
            out.edges,
            out.findings.len()
        );
        findings.extend(out.findings);
    }
    if let Ok(mut c) = current.lock() {
        *c = None;
    }
    println!(
        "total: {} runs in {:.0} s, {} findings",
        EXECS.load(Ordering::Relaxed),
        started.elapsed().as_secs_f64(),
        findings.len()
    );
    for f in &findings {
        println!(
            "FINDING {} {}: {}\n  saved to {} (membloat-fuzz replay {} {})",
            f.target,
            f.kind,
            f.message,
            f.file.display(),
            f.target,
            f.file.display()
        );
    }
    if findings.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
