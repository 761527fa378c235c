//! The diagnosis on constructed snapshots: the host findings and thresholds the
//! reproducers cannot reach on a healthy test machine.

use super::*;
use crate::collect::Host;
use crate::model::derive::tests_support::process;
use crate::model::signals::Method;
use crate::model::signals::Signals;
use crate::parse::meminfo::Meminfo;
use crate::units::{meminfo, sysctl, sysctl::Sysctl, thp, thp::Thp};

const GIB: u64 = 1 << 30;

fn report(pid: u32, rank: u64, rss: u64, score: u64, signals: Signals) -> ProcessReport {
    let mut sample = process(pid, "app");
    sample.status.vm_rss_bytes = Some(rss);
    sample.oom_score = Some(score);
    sample.oom_score_adj = Some(0);
    ProcessReport {
        sample,
        signals,
        oom_rank: rank,
        identity: None,
    }
}

fn host(total: u64, available: u64) -> Snapshot {
    Snapshot {
        host: Host::default()
            .with(
                meminfo::COLLECTOR,
                Meminfo {
                    mem_total_bytes: Some(total),
                    mem_available_bytes: Some(available),
                    committed_as_bytes: Some(10 * GIB),
                    commit_limit_bytes: Some(12 * GIB),
                    ..Meminfo::default()
                },
            )
            .with(
                sysctl::COLLECTOR,
                Sysctl {
                    overcommit_memory: Some(0),
                    ..Sysctl::default()
                },
            ),
        ..Snapshot::default()
    }
}

fn kinds(d: &Diagnosis) -> Vec<&'static str> {
    d.findings.iter().map(|f| f.kind).collect()
}

#[test]
fn a_healthy_host_has_no_findings() {
    let mut s = host(24 * GIB, 20 * GIB);
    s.top = vec![report(7, 1, GIB, 700, Signals::default())];
    let d = diagnose(&s, &Options::default());
    assert!(d.findings.is_empty(), "{:?}", kinds(&d));
    assert_eq!(d.exit_code(), 0);
    assert_eq!(d.oom_order[0].pid, 7);
    assert_eq!(d.oom_order[0].frees_bytes, GIB);
}

#[test]
fn the_oom_victim_is_a_finding_only_when_memory_is_low_as_in_the_alert() {
    // Available just under 10 %, and a process among the first three victims whose
    // oom_score 867 means 30 % of RAM and swap: the thresholds of
    // MembloatProcessLikelyOOMVictim. A BestEffort pod (oom_score_adj 1000) ranks first
    // with a higher score and little memory: not a finding.
    let mut s = host(100 * GIB, 9 * GIB);
    let mut pod = report(8, 1, GIB / 10, 1333, Signals::default());
    pod.sample.oom_score_adj = Some(1000);
    s.top = vec![report(7, 2, 30 * GIB, 867, Signals::default()), pod];
    let d = diagnose(&s, &Options::default());
    assert_eq!(kinds(&d), ["low_memory", "oom_victim"]);
    assert_eq!(
        d.findings[1].process.as_ref().unwrap().pid,
        7,
        "the large process, not the pod Kubernetes put first"
    );
    assert_eq!(d.exit_code(), 1);
    let mut s = host(100 * GIB, 11 * GIB);
    s.top = vec![report(7, 1, 30 * GIB, 867, Signals::default())];
    assert!(diagnose(&s, &Options::default()).findings.is_empty());
    let mut s = host(100 * GIB, 9 * GIB);
    s.top = vec![report(7, 1, 30 * GIB, 866, Signals::default())];
    assert_eq!(kinds(&diagnose(&s, &Options::default())), ["low_memory"]);
    let mut s = host(100 * GIB, 9 * GIB);
    s.top = vec![report(7, 4, 30 * GIB, 900, Signals::default())];
    assert_eq!(
        kinds(&diagnose(&s, &Options::default())),
        ["low_memory"],
        "fourth in line"
    );
}

#[test]
fn commit_is_read_against_the_overcommit_mode() {
    let mut s = host(24 * GIB, 20 * GIB);
    let mut m = s.host.get::<Meminfo>().unwrap().clone();
    m.committed_as_bytes = Some(11 * GIB);
    m.commit_limit_bytes = Some(12 * GIB);
    s.host.set(meminfo::COLLECTOR, m.clone());
    let mode = |s: &mut Snapshot, mode: u64| {
        let sysctl = Sysctl {
            overcommit_memory: Some(mode),
            ..Sysctl::default()
        };
        s.host.set(sysctl::COLLECTOR, sysctl);
    };
    // Mode 0: 11 of 12 is nothing; mode 2: past 0.9 of the limit, allocations are near
    // failing.
    assert!(diagnose(&s, &Options::default()).findings.is_empty());
    mode(&mut s, 2);
    assert_eq!(kinds(&diagnose(&s, &Options::default())), ["commit_limit"]);
    // Mode 0 past the limit: normal, but a switch to mode 2 would break the host.
    mode(&mut s, 0);
    m.committed_as_bytes = Some(20 * GIB);
    s.host.set(meminfo::COLLECTOR, m);
    let d = diagnose(&s, &Options::default());
    assert_eq!(kinds(&d), ["commit_overrun"]);
    assert_eq!(d.findings[0].bytes, 8 * GIB);
}

#[test]
fn thp_always_with_max_ptes_none_511_is_a_risk_madvise_is_not() {
    let mut s = host(24 * GIB, 20 * GIB);
    let mut thp = Thp {
        enabled: Some("madvise".into()),
        ..Thp::default()
    };
    thp.khugepaged.max_ptes_none = Some(511);
    s.host.set(thp::COLLECTOR, thp.clone());
    // As derive signals it for both modes: THP usable and max_ptes_none 511.
    s.signals.thp_regrowth_risk = Some(true);
    assert!(diagnose(&s, &Options::default()).findings.is_empty());
    thp.enabled = Some("always".into());
    s.host.set(thp::COLLECTOR, thp);
    let d = diagnose(&s, &Options::default());
    assert_eq!(kinds(&d), ["thp_regrowth_risk"]);
    assert!(d.findings[0].remedy.contains("max_ptes_none"));
}

#[test]
fn findings_are_ranked_by_bytes_and_filtered_by_pid() {
    let mut s = host(24 * GIB, 20 * GIB);
    let hoarder = Signals {
        hoarded_bytes: Some(GIB),
        hoard_method: Some(Method::Suspected),
        ..Signals::default()
    };
    let regrower = Signals {
        regrown_since_trough_bytes: 3 * GIB,
        ..Signals::default()
    };
    s.top = vec![
        report(7, 2, GIB, 700, hoarder),
        report(8, 1, 4 * GIB, 710, regrower),
    ];
    let d = diagnose(&s, &Options::default());
    assert_eq!(kinds(&d), ["regrowth", "hoarding"]);
    assert_eq!(d.findings[1].certainty, "suspected");
    assert!(d.findings[1].evidence.contains("not walked"));
    let d = diagnose(
        &s,
        &Options {
            pids: vec![7],
            ..Options::default()
        },
    );
    assert_eq!(kinds(&d), ["hoarding"]);
    // The OOM order holds the process asked about alone, at its place in the host's.
    assert_eq!(d.oom_order.len(), 1);
    assert_eq!((d.oom_order[0].pid, d.oom_order[0].rank), (7, 2));
    assert_eq!(d.processes.len(), 1);
    assert_eq!((d.processes[0].pid, d.processes[0].oom_rank), (7, 2));
    assert_eq!(
        d.processes[0].rss_bytes,
        s.top[0].sample.status.vm_rss_bytes
    );
}

#[test]
fn ram_at_stake_ranks_above_a_larger_address_space() {
    const MIB: u64 = 1 << 20;
    let mut s = host(24 * GIB, 20 * GIB);
    // A JVM's arenas: 960 MiB of address space; a process holding 750 MiB of RAM.
    let arenas = Signals {
        arena_at_ceiling: Some(true),
        arena_heaps: Some(15),
        arena_reserved_bytes: Some(960 * MIB),
        ..Signals::default()
    };
    let hoarder = Signals {
        hoarded_bytes: Some(750 * MIB),
        hoard_method: Some(Method::Suspected),
        ..Signals::default()
    };
    s.top = vec![
        report(7, 2, GIB, 700, arenas),
        report(8, 1, GIB, 710, hoarder),
    ];
    let d = diagnose(&s, &Options::default());
    assert_eq!(kinds(&d), ["hoarding", "arenas"]);
    let of: Vec<_> = d.findings.iter().map(|f| (f.bytes, f.bytes_of)).collect();
    assert_eq!(of, [(750 * MIB, "ram"), (960 * MIB, "address_space")]);
    let text = render::text(&d, false);
    assert!(text.contains("most RAM at stake first"), "{text}");
    assert!(text.contains("[observed, address space]"), "{text}");
    // Commit charge between them; settings and events (no bytes) last.
    let finding = |kind, bytes| bare(kind, bytes, None);
    let mut all = vec![
        finding("memory_pressure", 0),
        finding("arenas", 4 * GIB),
        finding("commit_overrun", 2 * GIB),
        finding("java_heap", 750 * MIB),
        finding("hidden_thp", GIB),
    ];
    rank(&mut all);
    let order: Vec<_> = all.iter().map(|f| f.kind).collect();
    assert_eq!(
        order,
        [
            "hidden_thp",
            "java_heap",
            "commit_overrun",
            "arenas",
            "memory_pressure"
        ]
    );
}

/// A small process whose heap could not be measured informs; alone it exits 0. A large
/// one, or any other finding, sets the exit code.
#[test]
fn a_small_unmeasured_heap_informs_only() {
    let of = |kind, rss: u64| {
        let process = Subject {
            pid: 7,
            comm: "svc".into(),
            group: None,
            allocator: Some("go"),
            runtime: Some("go"),
            runtime_version: None,
            rss_bytes: Some(rss),
        };
        bare(kind, 0, Some(process))
    };
    assert!(of("go_heap_unmeasured", 18 << 20).informs());
    assert!(!of("go_heap_unmeasured", 640 << 20).informs());
    assert!(!of("hoarding", 18 << 20).informs());
}

/// A finding of `kind` with only its bytes (and process) set.
fn bare(kind: &'static str, bytes: u64, process: Option<Subject>) -> Finding {
    Finding {
        kind,
        process,
        bytes,
        bytes_of: findings::bytes_of(kind, bytes),
        certainty: "observed",
        evidence: String::new(),
        remedy: String::new(),
        cost: None,
        now: None,
        now_gives_back_bytes: None,
        next_start: None,
    }
}

/// A stripped Go program (a node's container runtime, its kubelet) below 1 GiB of RSS is
/// told in coverage, with how many, how much RSS and which programs; it is a finding only
/// from 1 GiB, or when asked for with --pid, and its remedy then fits a vendor's build.
#[test]
fn small_unmeasured_heaps_are_coverage_and_large_ones_findings() {
    use crate::heap::golang::Unmeasured as GoUnmeasured;
    use crate::heap::list::Measurement;
    use crate::heap::runtime::{Allocator, Identity, Runtime};
    use crate::heap::HeapReading;
    use std::sync::Arc;
    let stripped = |pid: u32, comm: &str, rss: u64| {
        let signals = Signals {
            reading: Some(Arc::new(HeapReading {
                identity: Identity {
                    allocator: Allocator::Go,
                    runtime: Runtime::Go,
                    version: String::new(),
                },
                memory_cgroup: None,
                readings: vec![Measurement::Go(Err(GoUnmeasured::Stripped))],
                read_at_unix_seconds: 0.0,
            })),
            ..Signals::default()
        };
        let mut r = report(pid, u64::from(pid), rss, 666, signals);
        r.sample.comm = comm.into();
        r
    };
    let mut s = host(24 * GIB, 20 * GIB);
    s.top = vec![
        stripped(1, "containerd", 271 << 20),
        stripped(2, "kubelet", 120 << 20),
        stripped(3, "ctr", 47 << 20),
    ];
    let d = diagnose(&s, &Options::default());
    assert!(kinds(&d).is_empty(), "{:?}", kinds(&d));
    assert_eq!(
        d.coverage.unmeasured_heaps,
        [UnmeasuredHeaps {
            runtime: "go",
            reason: "stripped",
            processes: 3,
            rss_bytes: (271 + 120 + 47) << 20,
            comms: vec!["containerd".into(), "kubelet".into(), "ctr".into()],
        }]
    );
    assert_eq!(d.exit_code(), 0);
    let text = render::text(&d, false);
    assert!(
        text.contains(
            "3 Go heaps not measured (stripped), 438.0 MiB of RSS: containerd, kubelet, ctr"
        ),
        "{text}"
    );
    // Asked for, it is a finding, whatever its size.
    let d = diagnose(
        &s,
        &Options {
            pids: vec![2],
            ..Options::default()
        },
    );
    assert_eq!(kinds(&d), ["go_heap_unmeasured"]);
    assert_eq!(d.coverage.unmeasured_heaps[0].comms, ["kubelet"]);
    // From 1 GiB of RSS it is a finding, with advice for a vendor's build too.
    s.top
        .push(stripped(4, "dockerd", UNMEASURED_FINDING_RSS_BYTES));
    let d = diagnose(&s, &Options::default());
    assert_eq!(kinds(&d), ["go_heap_unmeasured"]);
    let f = &d.findings[0];
    assert_eq!(f.process.as_ref().unwrap().pid, 4);
    assert!(
        f.remedy.contains("go_memstats_heap_idle_bytes"),
        "{}",
        f.remedy
    );
    assert_eq!(d.coverage.unmeasured_heaps[0].processes, 4);
    assert_eq!(d.coverage.unmeasured_heaps[0].comms[0], "dockerd");
}

/// A process that names itself with terminal escapes (`ESC[2J ESC[3J ESC[H` clears an
/// operator's screen), a line break or a direction override has them shown as text in
/// every place the text form names it; only the form's own emphasis reaches a terminal.
#[test]
fn control_characters_in_names_never_reach_a_terminal() {
    let mut s = host(24 * GIB, 1 << 30);
    let mut p = report(7, 1, 20 * GIB, 900, Signals::default());
    p.sample.comm = "\u{1b}[2J\u{1b}[3J\u{1b}[H\nFAKE\u{202e}x".into();
    s.top = vec![p];
    // A memfd's name is its holder's choice too.
    let owners = crate::units::owners::OwnersReading {
        files: vec![crate::units::owners::HeldFile {
            kind: "memfd",
            pid: 8,
            name: "\u{1b}[2J\nFAKE".into(),
            bytes: 1 << 30,
        }],
        ..Default::default()
    };
    s.host.set(crate::units::owners::COLLECTOR, owners);
    let d = diagnose(
        &s,
        &Options {
            pids: vec![7],
            ..Options::default()
        },
    );
    assert!(!d.oom_order.is_empty() && !d.processes.is_empty());
    let own = regex::Regex::new("\u{1b}\\[[0-9;]*m").unwrap();
    for colour in [false, true] {
        let text = render::text(&d, colour);
        assert!(
            text.contains("\\x1b[2J\\x1b[3J\\x1b[H\\x0aFAKE\\u{202e}x"),
            "{text}"
        );
        assert!(!text.contains('\u{202e}'), "{text}");
        assert!(!text.lines().any(|l| l.starts_with("FAKE")), "{text}");
        assert!(text.contains("\\x1b[2J\\x0aFAKE (pid 8)"), "{text}");
        // What escapes remain are the form's own emphasis (SGR).
        let rest = own.replace_all(&text, "");
        assert!(!rest.contains('\u{1b}'), "{rest}");
        assert_eq!(text.contains('\u{1b}'), colour);
    }
    // The JSON keeps the name as it is, escaped by JSON itself.
    let json = render::json(&d);
    assert!(json.contains("\\u001b[2J"), "{json}");
    assert!(!json.contains('\u{1b}'));
}
