//! The CPU cost of each pure stage, on text captured from kernel 6.18
//! (tests/fixtures/kernel-6.18): parsing each /proc file, deriving a snapshot of 5000
//! processes from the previous one, and encoding it in both expositions.
//!
//! Run: `cargo bench --bench pipeline`. Compare two builds with criterion's baselines:
//! `cargo bench --bench pipeline -- --save-baseline before`, change, then
//! `cargo bench --bench pipeline -- --baseline before`. The I/O cost (the kernel's share)
//! is not measured here: it belongs to the kernel and needs a real process population.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use membloat_exporter::collect::{CollectorRun, Host, ProcessFiles, ProcessSample, Sample};
use membloat_exporter::expose;
use membloat_exporter::model::derive::{derive, DeriveOptions};
use membloat_exporter::model::state::State;
use membloat_exporter::parse::{
    meminfo::Meminfo, pressure::Pressure, smaps, smaps_rollup::SmapsRollup, stat::Stat,
    status::Status, vmstat::Vmstat,
};
use membloat_exporter::units;

const PROCESSES: usize = 5000;

fn fixture(path: &str) -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/kernel-6.18/proc");
    std::fs::read_to_string(root.join(path)).unwrap()
}

fn parsers(c: &mut Criterion) {
    let mut g = c.benchmark_group("parse");
    let files: [(&str, String); 7] = [
        ("meminfo", fixture("meminfo")),
        ("vmstat", fixture("vmstat")),
        ("pressure", fixture("pressure/memory")),
        ("stat", fixture("1406/stat")),
        ("status", fixture("1406/status")),
        ("smaps_rollup", fixture("1406/smaps_rollup")),
        ("smaps", fixture("18266/smaps")),
    ];
    for (name, text) in &files {
        g.throughput(Throughput::Bytes(text.len() as u64));
        g.bench_function(*name, |b| {
            b.iter(|| match *name {
                "meminfo" => drop(Meminfo::parse(text)),
                "vmstat" => drop(Vmstat::parse(text)),
                "pressure" => drop(Pressure::parse(text)),
                "stat" => drop(Stat::parse(text)),
                "status" => drop(Status::parse(text)),
                "smaps_rollup" => drop(SmapsRollup::parse(text)),
                _ => drop(smaps::summarize(text)),
            })
        });
    }
    g.finish();
}

/// One scan's sample of 5000 processes under 250 names, built from one real process's
/// files; the second scan differs in CPU time and RSS so derivation has work to do.
fn sample(scan: u64) -> Sample {
    let stat = Stat::parse(&fixture("1406/stat")).unwrap();
    let status = Status::parse(&fixture("1406/status")).unwrap();
    let rollup = Some(SmapsRollup::parse(&fixture("1406/smaps_rollup")).unwrap());
    let processes = (0..PROCESSES)
        .map(|i| {
            let comm = format!("svc{}", i % 250);
            let mut status = status.clone();
            status.vm_rss_bytes = status.vm_rss_bytes.map(|r| r + (i as u64 + scan) * 4096);
            let reading = ProcessFiles {
                pid: 1000 + i as u32,
                start_ticks: stat.start_ticks + i as u64,
                comm: comm.clone(),
                status,
                rollup,
                oom_score: Some(666 + (i % 300) as u64),
                oom_score_adj: Some(0),
                group: Some(comm),
            };
            ProcessSample {
                start_time_seconds: Some(1.7e9),
                ..ProcessSample::new(
                    std::sync::Arc::new(reading),
                    'S',
                    Some(0.01 * scan as f64 + i as f64),
                )
            }
        })
        .collect();
    Sample {
        taken_at: Some(SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000 + 10 * scan)),
        host: Host::default()
            .with(
                units::meminfo::COLLECTOR,
                Meminfo::parse(&fixture("meminfo")).unwrap(),
            )
            .with(
                units::vmstat::COLLECTOR,
                Vmstat::parse(&fixture("vmstat")).unwrap(),
            )
            .with(
                units::pressure::COLLECTOR,
                Pressure::parse(&fixture("pressure/memory")).unwrap(),
            ),
        processes,
        collectors: vec![CollectorRun {
            name: membloat_exporter::family::Collector::Processes,
            success: true,
            duration_seconds: 0.1,
        }],
        online_cpus: 2,
        ..Sample::default()
    }
}

fn derive_and_encode(c: &mut Criterion) {
    let options = DeriveOptions {
        top_k: 5,
        max_groups: 500,
        heap_fresh_seconds: None,
    };
    let (first, _) = derive(State::default(), sample(0), options);
    let second = sample(1);
    let mut g = c.benchmark_group("snapshot_5000_processes");
    g.throughput(Throughput::Elements(PROCESSES as u64));
    g.bench_function("derive", |b| {
        b.iter_batched(
            || (first.clone(), second.clone()),
            |(state, s)| derive(state, s, options),
            criterion::BatchSize::LargeInput,
        )
    });
    let snapshot = Arc::new(derive(first.clone(), second.clone(), options).1);
    g.bench_function("encode_openmetrics", |b| {
        b.iter(|| expose::openmetrics(snapshot.clone()))
    });
    let om = expose::openmetrics(snapshot.clone());
    g.bench_function("openmetrics_to_text", |b| {
        b.iter(|| expose::text_from_openmetrics(&om))
    });
    g.finish();
}

criterion_group!(benches, parsers, derive_and_encode);
criterion_main!(benches);
