//! Derivation on constructed samples: top-K, groups, counters across scans.

use super::*;
use crate::collect::CollectorRun;
use crate::model::state::State;

fn process(pid: u32, comm: &str, rss_mib: u64, oom_score: u64) -> ProcessSample {
    let mut p = tests_support::process(pid, comm);
    p.status.vm_rss_bytes = Some(rss_mib << 20);
    p.status.threads = Some(2);
    p.oom_score = Some(oom_score);
    p
}

fn opts(top_k: usize) -> DeriveOptions {
    DeriveOptions {
        top_k,
        max_groups: 500,
        heap_fresh_seconds: None,
    }
}

fn sample(processes: Vec<ProcessSample>) -> Sample {
    Sample {
        processes,
        collectors: vec![CollectorRun {
            name: Collector::Processes,
            success: true,
            duration_seconds: 0.1,
        }],
        ..Sample::default()
    }
}

#[test]
fn top_k_unites_largest_and_most_likely_oom_victims() {
    let s = sample(vec![
        process(1, "a", 100, 600),
        process(2, "b", 10, 900),
        process(3, "c", 50, 700),
        process(4, "d", 1, 1),
    ]);
    let (_, snap) = derive(State::default(), s, opts(1));
    let pids: Vec<u32> = snap.top.iter().map(|p| p.sample.pid).collect();
    assert_eq!(pids, [1, 2]);
    let ranks: Vec<u64> = snap.top.iter().map(|p| p.oom_rank).collect();
    assert_eq!(ranks, [3, 1]);
}

#[test]
fn groups_sum_and_count() {
    let s = sample(vec![
        process(1, "web", 100, 700),
        process(2, "web", 20, 650),
        process(3, "db", 5, 600),
    ]);
    let (_, snap) = derive(State::default(), s, opts(0));
    assert_eq!(snap.groups.len(), 2);
    let web = &snap.groups[1];
    assert_eq!((web.name.as_str(), web.processes), ("web", 2));
    assert_eq!(web.resident_bytes, 120 << 20);
    assert_eq!(web.threads, 4);
    assert_eq!(web.oom_score_max, 700);
    assert!(snap.top.is_empty());
    assert_eq!(snap.processes_scanned, Some(3));
}

/// A user who starts processes of many names cannot grow the group count past the cap:
/// the largest groups by RSS stay, the rest are summed into `other` and counted.
#[test]
fn groups_past_the_cap_are_summed_into_other() {
    let mut procs: Vec<ProcessSample> = (1..=6)
        .map(|i| process(i, &format!("spam{i}"), 1, 1))
        .collect();
    procs.push(process(10, "db", 500, 1));
    procs.push(process(11, "web", 300, 1));
    procs.push(process(12, "web", 1, 1));
    let s = sample(procs);
    let capped = DeriveOptions {
        top_k: 0,
        max_groups: 2,
        heap_fresh_seconds: None,
    };
    let (_, snap) = derive(State::default(), s.clone(), capped);
    let names: Vec<&str> = snap.groups.iter().map(|g| g.name.as_str()).collect();
    assert_eq!(names, ["db", "other", "web"]);
    assert_eq!(snap.groups_folded, 6);
    let other = &snap.groups[1];
    assert_eq!((other.processes, other.resident_bytes), (6, 6 << 20));
    assert_eq!(
        snap.groups[2].processes, 2,
        "a kept group keeps all its processes"
    );
    let total: u64 = snap.groups.iter().map(|g| g.processes).sum();
    assert_eq!(total, 9, "no process lost");
    let (_, uncapped) = derive(State::default(), s, opts(0));
    assert_eq!((uncapped.groups.len(), uncapped.groups_folded), (8, 0));
}

#[test]
fn errors_accumulate_across_scans() {
    let mut s1 = sample(vec![]);
    s1.errors
        .insert((Collector::Processes, Reason::Vanished), 2);
    let (state, first) = derive(State::default(), s1, opts(1));
    assert_eq!(first.scans, 1);
    let mut s2 = sample(vec![]);
    s2.errors
        .insert((Collector::Processes, Reason::Vanished), 1);
    s2.errors
        .insert((crate::units::meminfo::COLLECTOR, Reason::Malformed), 1);
    let (_, second) = derive(state, s2, opts(1));
    assert_eq!(second.scans, 2);
    assert_eq!(second.errors[&(Collector::Processes, Reason::Vanished)], 3);
    assert_eq!(
        second.errors[&(crate::units::meminfo::COLLECTOR, Reason::Malformed)],
        1
    );
    // Counters of the processes collector exist from the start, at 0.
    assert_eq!(second.errors[&(Collector::Processes, Reason::Denied)], 0);
    assert_eq!(second.errors.len(), Reason::ALL.len() + 1);
    let (_, without) = derive(State::default(), Sample::default(), opts(1));
    assert!(without.errors.is_empty(), "{:?}", without.errors);
}

#[test]
fn commit_ratio_headroom_and_hidden_thp() {
    let m = Meminfo {
        committed_as_bytes: Some(30 << 30),
        commit_limit_bytes: Some(12 << 30),
        ..Meminfo::default()
    };
    let thp = Thp {
        sizes: vec![
            crate::units::thp::HugepageSize {
                label: "64kB".into(),
                size_bytes: 64 << 10,
                enabled: None,
                stats: vec![("nr_anon_partially_mapped".into(), 2)],
            },
            crate::units::thp::HugepageSize {
                label: "2048kB".into(),
                size_bytes: 2 << 20,
                enabled: None,
                stats: vec![("nr_anon_partially_mapped".into(), 3)],
            },
        ],
        ..Thp::default()
    };
    let s = system_signals(Some(&m), Some(&thp), None);
    assert_eq!(s.commit_ratio, Some(2.5));
    assert_eq!(s.commit_headroom_bytes, Some(-(18i64 << 30)));
    assert_eq!(s.thp_hidden_bytes, Some((2 << 16) + (3 << 21)));
    assert_eq!(
        system_signals(None, Some(&Thp::default()), None).thp_hidden_bytes,
        None
    );
    assert_eq!(s.commit_limit_reached, None);
    let strict = Sysctl {
        overcommit_memory: Some(2),
        ..Sysctl::default()
    };
    assert_eq!(
        system_signals(Some(&m), None, Some(&strict)).commit_limit_reached,
        Some(true)
    );
    let heuristic = Sysctl {
        overcommit_memory: Some(0),
        ..Sysctl::default()
    };
    assert_eq!(
        system_signals(Some(&m), None, Some(&heuristic)).commit_limit_reached,
        Some(false)
    );
}

/// The interval between scans is measured on the monotonic clock: a wall clock stepped an
/// hour back between two scans 10 s apart still gives PSI ratios over 10 s.
#[test]
fn a_wall_clock_step_does_not_change_the_interval() {
    use crate::parse::pressure::Pressure;
    use std::time::{Duration, Instant, SystemTime};
    let t0 = Instant::now();
    let wall = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
    let at = |mono: u64, wall: SystemTime, some: f64| Sample {
        taken_at: Some(wall),
        started: Some(t0 + Duration::from_secs(mono)),
        host: crate::collect::Host::default().with(
            crate::units::pressure::COLLECTOR,
            Pressure {
                some_seconds: Some(some),
                full_seconds: Some(some / 2.0),
            },
        ),
        ..sample(vec![])
    };
    let (state, _) = derive(State::default(), at(0, wall, 1.0), opts(5));
    // 10 s later by the monotonic clock, an hour earlier by the wall clock; 2 s stalled.
    let stepped = wall - Duration::from_secs(3600);
    let (_, snap) = derive(state, at(10, stepped, 3.0), opts(5));
    assert_eq!(snap.signals.pressure_waiting_ratio, Some(0.2));
    assert_eq!(snap.signals.pressure_stalled_ratio, Some(0.1));
}

/// khugepaged regrowth is signalled at max_ptes_none's ceiling, which the page size sets:
/// 511 on x86-64 is far below it on an arm64 kernel with 64 KiB pages.
#[test]
fn the_regrowth_risk_is_max_ptes_none_at_the_ceiling_of_its_page_size() {
    let risk = |page: u64, pmd: u64, max_ptes_none: u64, enabled: &str| {
        let mut thp = Thp {
            enabled: Some(enabled.into()),
            pmd_bytes: Some(pmd),
            page_bytes: page,
            ..Thp::default()
        };
        thp.khugepaged.max_ptes_none = Some(max_ptes_none);
        system_signals(None, Some(&thp), None).thp_regrowth_risk
    };
    assert_eq!(risk(4096, 2 << 20, 511, "always"), Some(true));
    assert_eq!(risk(4096, 2 << 20, 511, "madvise"), Some(true));
    assert_eq!(risk(4096, 2 << 20, 511, "never"), Some(false));
    assert_eq!(risk(4096, 2 << 20, 64, "always"), Some(false));
    assert_eq!(risk(64 << 10, 512 << 20, 511, "always"), Some(false));
    assert_eq!(risk(64 << 10, 512 << 20, 8191, "always"), Some(true));
}
