//! The remedies `explain` prints for a Java heap, applied exactly as printed to real
//! JVMs of every JDK here (11, 17, 21, 25) and every collector: each gives back at least
//! 80 % of what it promises, measured by the process's own RssAnon (and, for ZGC, its heap
//! file's blocks), and leaves the program's waiting read and kept data as they were; every
//! flag it prints for a next start starts the JVM.

use crate::common;
use common::explain::*;
use common::repro::Repro;
use common::*;
use serde_json::Value;
use std::process::Command;
use std::time::Duration;

/// G1 above its floor gets the free ratios in an order `jcmd` accepts and a collection,
/// which give back at least 80 % of what they promise (RssAnon before and after); a heap
/// at its floor (`-Xms` = `-Xmx`) gets no command, and the `-Xms` it names for the next
/// start leaves the same program holding at least 80 % less.
#[test]
fn java_heap_remedies_give_back_what_explain_promises() {
    for jdk in common::java::jdks() {
        let bin = jdk.java.parent().unwrap();
        // Above its floor: 300 MiB filled, 20 kept, in a heap that may shrink to 64 MiB.
        let mut r = Repro::java(&jdk.java, &["-XX:+UseG1GC", "-Xms64m", "-Xmx512m"], 300, 20);
        let (_, doc) = explain_json(r.pid());
        let f = finding(&doc, "java_heap", r.pid());
        let now = f["now"]
            .as_str()
            .unwrap_or_else(|| panic!("JDK {}: {f:#}", jdk.feature));
        let gives = f["now_gives_back_bytes"].as_f64().unwrap();
        // The JVM's attach listener (which jcmd starts at its first command) is running
        // before the figure the fall is taken from.
        run_now(&format!("jcmd {} VM.version", r.pid()), Some(bin));
        let before = rss_anon(r.pid());
        run_now(now, Some(bin));
        // G1 shrinks the heap at the collection and gives the regions' memory back on its
        // service thread (JDK 17+) soon after: the truth is RssAnon having fallen so far,
        // waited for, never a wait for quiet.
        let fell = fallen(gives, || before - rss_anon(r.pid()));
        eprintln!(
            "JDK {} g1: now: {:.1} MiB given back of {:.1} MiB promised",
            jdk.feature,
            fell / MIB,
            gives / MIB
        );
        assert!(
            fell >= 0.8 * gives,
            "JDK {}: {fell} of {gives} in 30 s",
            jdk.feature
        );
        // jcmd attaches through the JVM's own listener: the program's Java thread, waiting
        // in a read all along, gets its byte, its kept arrays intact.
        assert_eq!(r.wake("read"), "woke read ok ok", "JDK {}", jdk.feature);
        // At its floor: nothing at run time; the next start's -Xms.
        let pinned = ["-XX:+UseG1GC", "-Xms512m", "-Xmx512m"];
        let r = Repro::java(&jdk.java, &pinned, 300, 20);
        let (_, doc) = explain_json(r.pid());
        let f = finding(&doc, "java_heap", r.pid());
        assert_eq!(f["now"], Value::Null, "JDK {}: {f:#}", jdk.feature);
        let next = f["next_start"].as_str().unwrap();
        assert!(next.starts_with("-Xms"), "{next}");
        let mut flags = vec!["-XX:+UseG1GC", "-Xmx512m"];
        flags.extend(next.split_ascii_whitespace());
        let again = Repro::java(&jdk.java, &flags, 300, 20);
        let promised = f["bytes"].as_f64().unwrap();
        // Its collection ran before it printed; the memory goes back on G1's service
        // thread soon after (JDK 17+), so the fall is waited for.
        let fell = fallen(promised, || rss_anon(r.pid()) - rss_anon(again.pid()));
        eprintln!(
            "JDK {} g1 pinned: started with {next}: {:.1} MiB less of {:.1} MiB",
            jdk.feature,
            fell / MIB,
            promised / MIB
        );
        assert!(
            fell >= 0.8 * promised,
            "JDK {}: {fell} of {promised}",
            jdk.feature
        );
    }
}

/// A JVM's RAM as the kernel counts it: its anonymous memory, and the pages allocated to
/// ZGC's heap files (memfds, whose pages need not be mapped to be held).
fn java_ram(pid: u32) -> f64 {
    let mut heap_files = 0.0;
    for fd in std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .flatten()
    {
        let Ok(target) = std::fs::read_link(fd.path()) else {
            continue;
        };
        if target.to_string_lossy().starts_with("/memfd:java_heap") {
            use std::os::unix::fs::MetadataExt;
            heap_files += std::fs::metadata(fd.path()).map_or(0, |m| m.blocks() * 512) as f64;
        }
    }
    rss_anon(pid) + heap_files
}

/// ZGC (JDK 13+) with what `explain` prints applied as printed: its uncommit delay at the
/// next start. The same program started with it holds at least 80 % less, by the held heap
/// the finding named, once the delay has passed (RssAnon and ZGC's heap files, whose pages
/// are RAM whether mapped or not), while the one started without it still holds it. JDK
/// 25's ZGC uncommits gradually, over several delays, so it is given five minutes. Every
/// JDK's JVMs run side by side, so the delays are waited for once.
#[test]
fn zgc_uncommit_delay_gives_back_what_explain_promises() {
    let flags = ["-XX:+UseZGC", "-Xms64m", "-Xmx512m"];
    let mut runs = Vec::new();
    for jdk in common::java::jdks().iter().filter(|j| j.feature >= 13) {
        let r = Repro::java(&jdk.java, &flags, 300, 20);
        let (_, doc) = explain_json(r.pid());
        let f = finding(&doc, "java_heap", r.pid()).clone();
        assert_eq!(f["now"], Value::Null, "JDK {}: {f:#}", jdk.feature);
        let next = f["next_start"].as_str().unwrap().to_string();
        let mut again_flags = flags.to_vec();
        again_flags.extend(next.split_ascii_whitespace());
        let again = Repro::java(&jdk.java, &again_flags, 300, 20);
        runs.push((jdk.feature, r, again, f, next));
    }
    assert!(runs.len() >= 2, "fewer than two JDKs with ZGC's uncommit");
    for (feature, r, again, f, next) in &runs {
        let promised = f["bytes"].as_f64().unwrap();
        // The delay the flag names, and a minute for the uncommit to run after it; from
        // JDK 25 on, several delays.
        let limit = Duration::from_secs(if *feature >= 25 { 300 } else { 90 });
        let fell = fallen_within(limit, promised, || {
            java_ram(r.pid()) - java_ram(again.pid())
        });
        eprintln!(
            "JDK {feature} zgc: started with {next}: {:.1} MiB less of {:.1} MiB",
            fell / MIB,
            promised / MIB
        );
        assert!(
            fell >= 0.8 * promised,
            "JDK {feature}: {fell} of {promised}"
        );
    }
}

/// A heap at its floor (`-Xms` = `-Xmx`) under every other collector, on every JDK that
/// has it, with the next start `explain` prints applied as printed: the same program
/// started with it holds at least 80 % less, by the held heap the finding named (RssAnon
/// and ZGC's heap files), within the uncommit delay it names and a minute (JDK 25's ZGC:
/// several delays). JDK 11's ZGC, which never gives back, gets no next start. Every JVM
/// runs side by side, so the delays are waited for once.
#[test]
fn pinned_heaps_of_every_collector_give_back_what_explain_promises() {
    let mut runs = Vec::new();
    for jdk in common::java::jdks() {
        for (gc, max) in [
            ("-XX:+UseParallelGC", "512m"),
            ("-XX:+UseSerialGC", "512m"),
            ("-XX:+UseZGC", "512m"),
            ("-XX:+UseShenandoahGC", "1g"),
        ] {
            let pinned = [gc, &format!("-Xms{max}"), &format!("-Xmx{max}")].map(String::from);
            let ok = Command::new(&jdk.java)
                .args(&pinned)
                .arg("-version")
                .output()
                .unwrap()
                .status
                .success();
            if !ok {
                eprintln!("JDK {}: no {gc} (without unlocking): skipped", jdk.feature);
                continue;
            }
            let flags: Vec<&str> = pinned.iter().map(String::as_str).collect();
            let r = Repro::java(&jdk.java, &flags, 300, 20);
            let (_, doc) = explain_json(r.pid());
            let f = finding(&doc, "java_heap", r.pid()).clone();
            assert_eq!(f["now"], Value::Null, "JDK {} {gc}: {f:#}", jdk.feature);
            let Some(next) = f["next_start"].as_str().map(String::from) else {
                panic!("JDK {} {gc}: no next start: {f:#}", jdk.feature);
            };
            // A collector the next start names takes the place of the one it had.
            let mut again_flags = vec![flags[2]];
            if !next.contains("-XX:+Use") {
                again_flags.insert(0, gc);
            }
            again_flags.extend(next.split_ascii_whitespace());
            let again = Repro::java(&jdk.java, &again_flags, 300, 20);
            runs.push((jdk.feature, gc, r, again, f, next));
        }
    }
    for (feature, gc, r, again, f, next) in &runs {
        let promised = f["bytes"].as_f64().unwrap();
        let limit = match (*gc, *feature) {
            ("-XX:+UseZGC", 25..) => 300,
            ("-XX:+UseZGC", _) => 90,
            _ => 30,
        };
        let fell = fallen_within(Duration::from_secs(limit), promised, || {
            java_ram(r.pid()) - java_ram(again.pid())
        });
        eprintln!(
            "JDK {feature} {gc} pinned: started with {next}: {:.1} MiB less of {:.1} MiB",
            fell / MIB,
            promised / MIB
        );
        assert!(
            fell >= 0.8 * promised,
            "JDK {feature} {gc}: {fell} of {promised}"
        );
    }
}

/// Every flag `explain` can print for a Java heap's next start, for every collector, is
/// one each JDK here starts with (`java FLAGS -version` exits 0): a flag that is
/// experimental or unknown on a JDK would stop the JVM from starting at all.
#[test]
fn every_java_flag_explain_prints_starts_the_jvm() {
    use membloat_exporter::heap::jvm::java_heap;
    use membloat_exporter::heap::jvm::{Gc, JavaHeap, Space};
    let space = |committed: u64, used: u64| Space {
        generation: "old".into(),
        name: "heap".into(),
        committed_bytes: committed << 20,
        used_bytes: used << 20,
        max_bytes: 512 << 20,
    };
    let collectors = [
        (Gc::G1, "-XX:+UseG1GC"),
        (Gc::Parallel, "-XX:+UseParallelGC"),
        (Gc::Serial, "-XX:+UseSerialGC"),
        (Gc::Z, "-XX:+UseZGC"),
        (Gc::Shenandoah, "-XX:+UseShenandoahGC"),
    ];
    for jdk in common::java::jdks() {
        for (collector, flag) in collectors {
            let starts = |extra: &[&str]| {
                Command::new(&jdk.java)
                    .arg(flag)
                    .args(extra)
                    .arg("-version")
                    .output()
                    .unwrap()
                    .status
                    .success()
            };
            if !starts(&[]) {
                eprintln!("JDK {}: no {flag}: skipped", jdk.feature);
                continue;
            }
            // A heap at its floor, and one above it.
            for floor in [512, 64] {
                let heap = JavaHeap {
                    collector,
                    spaces: vec![space(512, 20)],
                    metaspace: None,
                    reserved: None,
                    resident_bytes: Some(512 << 20),
                    floor_bytes: Some(floor << 20),
                    resident_above_floor_bytes: Some((512 - floor) << 20),
                    feature: Some(jdk.feature),
                };
                let r = java_heap(&heap, 1);
                let Some(next) = r.next_start else { continue };
                let args: Vec<&str> = next.split_ascii_whitespace().collect();
                // A collector it names takes the place of the one the JVM had.
                let started = if next.contains("-XX:+Use") {
                    Command::new(&jdk.java)
                        .args(&args)
                        .arg("-version")
                        .output()
                        .unwrap()
                        .status
                        .success()
                } else {
                    starts(&args)
                };
                assert!(started, "JDK {} {flag}: {next} does not start", jdk.feature);
                eprintln!("JDK {} {flag} floor {floor}m: {next} starts", jdk.feature);
            }
        }
    }
}
