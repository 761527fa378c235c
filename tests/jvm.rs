//! A real JVM's heap as the exporter reads it from outside (its perf data, through its
//! memory), against the JVM's own `MemoryPoolMXBean`s printed by the same JVM: every
//! collector of Debian's JDK 17 and of the JDK 25 beside it. Reading another process's
//! memory needs ptrace access: CI runs as root.

mod common;

use common::repro::Repro;
use common::*;
use membloat_exporter::collect::heap::{self, jvm};
use membloat_exporter::parse::smaps;
use membloat_exporter::source::Source;
use std::path::Path;
use std::process::Command;

/// One pool as the JVM printed it: (name, committed, used).
fn pools(ready: &str) -> Vec<(String, u64, u64)> {
    ready
        .split_whitespace()
        .skip(1)
        .filter_map(|p| {
            let f: Vec<&str> = p.split(':').collect();
            if f.len() != 5 || f[1] != "Heap_memory" {
                return None;
            }
            Some((f[0].to_string(), f[2].parse().ok()?, f[3].parse().ok()?))
        })
        .collect()
}

/// The JDKs here: Debian's (on PATH) and any other under /usr/lib/jvm.
fn jdks() -> Vec<String> {
    let mut v = vec!["java".to_string()];
    let other = "/usr/lib/jvm/temurin-25-jdk-amd64/bin/java";
    if Path::new(other).exists() {
        v.push(other.to_string());
    } else {
        skipped("tests/jvm.rs: JDK 25 (temurin-25-jdk-amd64) is not on this machine");
    }
    v
}

/// Starts `JavaHeap.java` (fill 300 MiB, keep 20) on `java` with `gc`, reads its heap
/// from outside, and compares it with the pools it printed.
fn check(java: &str, gc: &str) {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/reproducers/JavaHeap.java");
    let mut cmd = Command::new(java);
    cmd.args([&format!("-XX:+Use{gc}"), "-Xms64m", "-Xmx512m"])
        .arg(src)
        .args(["300", "20"]);
    let r = Repro::spawn("JavaHeap", cmd);
    let truth = pools(&r.ready);
    let pid = r.pid();
    let text = std::fs::read_to_string(format!("/proc/{pid}/smaps")).unwrap();
    let vmas = smaps::parse(&text).unwrap().vmas;
    let reading = heap::read(&Source::new("/proc", "/sys"), pid, &vmas, true);
    let h = match reading.java {
        Some(Ok(h)) => h,
        other => panic!("{java} {gc}: {other:?}"),
    };
    eprintln!(
        "{java} {gc}: {:?}; committed {} used {}; the JVM's pools {truth:?}",
        h.collector,
        h.committed_bytes(),
        h.used_bytes(),
    );
    // JDK 17's G1 adds the object alignment (8 bytes) to each space's committed figure;
    // JDK 25's does not: which one this is shows in an empty survivor space (0 or 8).
    let pad = match h.collector {
        jvm::Collector::G1 => {
            h.spaces
                .iter()
                .map(|s| s.committed_bytes)
                .min()
                .unwrap_or(0)
                % 4096
        }
        _ => 0,
    };
    let space = |generation: &[&str], name: &[&str]| {
        h.spaces
            .iter()
            .find(|s| {
                generation.contains(&s.generation.as_str()) && name.contains(&s.name.as_str())
            })
            .unwrap_or_else(|| panic!("{gc}: no {generation:?}/{name:?} in {:?}", h.spaces))
    };
    // Generational ZGC (JDK 21+) counts both generations in one heap: its pools' totals
    // are the counters' totals.
    if truth.iter().all(|p| p.0.starts_with("ZGC_")) {
        let committed: u64 = truth.iter().map(|p| p.1).sum();
        let used: u64 = truth.iter().map(|p| p.2).sum();
        assert_eq!(h.committed_bytes(), committed, "{gc} committed");
        assert!(
            h.used_bytes().abs_diff(used) <= 4 << 20,
            "{gc} used {}",
            h.used_bytes()
        );
        return;
    }
    for (pool, committed, used) in &truth {
        let s = if pool.contains("Eden") {
            space(&["young", "new"], &["eden"])
        } else if pool.contains("Old") || pool.contains("Tenured") || pool == "ZHeap" {
            space(&["old"], &["old", "space"])
        } else if pool.contains("Survivor") {
            // The JVM counts the survivor space in use; the counters have both.
            let from = h.spaces.iter().find(|s| {
                (s.name == "s0" || s.name == "s1") && s.committed_bytes == committed + pad
            });
            assert!(
                from.is_some(),
                "{gc}: no survivor of {committed} in {:?}",
                h.spaces
            );
            continue;
        } else {
            panic!("{gc}: pool {pool} not known");
        };
        assert_eq!(s.committed_bytes, committed + pad, "{gc} {pool} committed");
        // Nothing is collected while the JVM idles; where new objects land (eden, or ZGC's
        // one space, in 2 MiB pages) still takes the few allocations an idle JVM makes (its
        // compiler and service threads), and ZGC finishes its cycle: up to 4 MiB here.
        if pool.contains("Eden") || pool == "ZHeap" {
            assert!(
                s.used_bytes.abs_diff(*used) <= 4 << 20,
                "{gc} {pool} used {}",
                s.used_bytes
            );
        } else {
            assert_eq!(s.used_bytes, *used, "{gc} {pool} used");
        }
    }
}

#[test]
fn every_collector_of_two_jdks_reads_as_the_jvm_counts_itself() {
    for java in jdks() {
        for gc in ["G1GC", "ParallelGC", "SerialGC", "ZGC"] {
            check(&java, gc);
        }
    }
}

/// A JVM that publishes no perf data gives the reason and no figure.
#[test]
fn without_perf_data_there_is_a_reason_and_no_figure() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/reproducers/JavaHeap.java");
    let mut cmd = tool("java");
    cmd.args(["-XX:-UsePerfData", "-Xmx256m"])
        .arg(src)
        .args(["50", "10"]);
    let r = Repro::spawn("JavaHeap", cmd);
    let pid = r.pid();
    let text = std::fs::read_to_string(format!("/proc/{pid}/smaps")).unwrap();
    let vmas = smaps::parse(&text).unwrap().vmas;
    let reading = heap::read(&Source::new("/proc", "/sys"), pid, &vmas, true);
    assert!(
        matches!(reading.java, Some(Err(jvm::Unmeasured::NotPublished))),
        "{:?}",
        reading.java
    );
}
