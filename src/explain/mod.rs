//! `explain`: the diagnosis a person can act on, from the same snapshot and the same
//! signals as the metrics (one code path: a finding is a signal past the threshold its
//! metric or alert uses, never a second opinion).
//!
//! [`diagnose`] is pure; `render` prints it for a terminal or as JSON (schema
//! `membloat.explain/v1`, documented in docs/explain.md).

pub mod detail;
pub mod eviction;
mod findings;
pub mod kills;
pub mod remedy;
pub mod render;
mod report;
pub mod sheet;

use findings::{host_findings, process_findings};
use report::{available_ratio, frees, subject};
pub use report::{
    rank, size, Coverage, Denied, Finding, HostState, Subject, UnmeasuredHeaps, Victim,
    INFORM_BELOW_RSS_BYTES, UNMEASURED_FINDING_RSS_BYTES,
};

use serde::Serialize;

use crate::attach::Live;
use crate::model::derive::{ProcessReport, Snapshot};
use crate::model::signals;
use crate::parse::meminfo::Meminfo;
use crate::units::{sysctl::Sysctl, thp::Thp};

/// The JSON schema's name and version; bumped only on an incompatible change.
pub(crate) const SCHEMA: &str = "membloat.explain/v1";
/// Processes listed in the OOM killer's order.
pub(crate) const OOM_ORDER_LEN: usize = 5;

/// What explain looks at.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Only these processes' findings (empty: every process the snapshot reports).
    pub pids: Vec<u32>,
    /// Whether a live command was proven harmless on this host, and with what tool
    /// (the default proves nothing: no live command).
    pub live: Live,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Diagnosis {
    pub schema: &'static str,
    /// Unix time of the scan the diagnosis comes from.
    pub scanned_at_unix_seconds: Option<f64>,
    pub host: HostState,
    pub coverage: Coverage,
    /// RAM at stake first, then commit charge, then address space, then settings and
    /// events ([`rank`]).
    pub findings: Vec<Finding>,
    /// The processes the OOM killer would take, in order.
    pub oom_order: Vec<Victim>,
    /// The latest OOM kills the kernel logged, newest first, with what was measured of
    /// each victim before (empty without the kmsg collector). With `--pid`, only theirs.
    pub oom_kills: Vec<kills::KillReport>,
    /// The processes `--pid` names, in depth (empty without `--pid`).
    pub processes: Vec<detail::ProcessDetail>,
    /// Where the host's memory went: the balance sheet's rows, the largest first (empty
    /// without meminfo).
    pub memory: Vec<sheet::Row>,
    /// Who holds the memory outside the processes' heaps (the `owners` collector's latest
    /// read), the largest first (empty without it).
    pub owners: Vec<sheet::Owner>,
    /// The kubelet's memory eviction signals, thresholds and headroom (empty where no
    /// kubelet runs).
    pub eviction: Vec<eviction::Signal>,
}

impl Diagnosis {
    /// The exit code of `explain`: 0 nothing to act on, 1 findings. That a small process's
    /// heap could not be measured (below [`INFORM_BELOW_RSS_BYTES`] of RSS) informs: alone
    /// it does not set the code.
    pub(crate) fn exit_code(&self) -> i32 {
        i32::from(self.findings.iter().any(|f| !f.informs()))
    }
}

pub(crate) fn diagnose(s: &Snapshot, opts: &Options) -> Diagnosis {
    let m = s.host.get::<Meminfo>();
    let g = |f: fn(&crate::parse::meminfo::Meminfo) -> Option<u64>| m.and_then(f);
    let host = HostState {
        memory_total_bytes: g(|m| m.mem_total_bytes),
        memory_available_bytes: g(|m| m.mem_available_bytes),
        swap_total_bytes: g(|m| m.swap_total_bytes),
        swap_used_bytes: g(|m| Some(m.swap_total_bytes?.saturating_sub(m.swap_free_bytes?))),
        committed_bytes: g(|m| m.committed_as_bytes),
        commit_limit_bytes: g(|m| m.commit_limit_bytes),
        overcommit_mode: s.host.get::<Sysctl>().and_then(|x| x.overcommit_memory),
        pressure_stalled_ratio: s.signals.pressure_stalled_ratio,
        thp_enabled: s.host.get::<Thp>().and_then(|t| t.enabled.clone()),
        khugepaged_max_ptes_none: s.host.get::<Thp>().and_then(|t| t.khugepaged.max_ptes_none),
        thp_hidden_bytes: s.signals.thp_hidden_bytes,
        last_oom_kill_unix_seconds: s.signals.last_oom_kill_unix_seconds,
    };
    let mut findings = host_findings(&host, s);
    let low_memory = available_ratio(&host).is_some_and(|r| r < signals::LOW_MEMORY_RATIO);
    let chosen = |p: &&ProcessReport| opts.pids.is_empty() || opts.pids.contains(&p.sample.pid);
    for p in s.top.iter().filter(chosen) {
        let in_depth = opts.pids.contains(&p.sample.pid);
        process_findings(p, low_memory, in_depth, &opts.live, &mut findings);
    }
    rank(&mut findings);
    let mut order: Vec<&ProcessReport> = s.top.iter().filter(chosen).collect();
    order.sort_by_key(|p| p.oom_rank);
    let oom_order = order
        .into_iter()
        .take(OOM_ORDER_LEN)
        .map(|p| Victim {
            rank: p.oom_rank,
            pid: p.sample.pid,
            comm: p.sample.comm.clone(),
            oom_score: p.sample.oom_score,
            oom_score_adj: p.sample.oom_score_adj,
            frees_bytes: frees(p),
        })
        .collect();
    let coverage = Coverage {
        processes_scanned: s.processes_scanned,
        denied_reads: s
            .errors
            .get(&(
                crate::family::Collector::Processes,
                crate::source::Reason::Denied,
            ))
            .copied()
            .unwrap_or(0),
        unreadable_heaps: s.reads_total.glibc.get("unreadable"),
        pending_heaps: s.heap_pending_processes,
        failed_collectors: s
            .collectors
            .iter()
            .filter(|c| !c.success)
            .map(|c| c.name.as_str().to_string())
            .collect(),
        denied_processes: s
            .reads
            .as_ref()
            .map(|r| r.denied.as_slice())
            .unwrap_or_default()
            .iter()
            .map(|&pid| Denied {
                pid,
                comm: s
                    .top
                    .iter()
                    .find(|p| p.sample.pid == pid)
                    .map(|p| p.sample.comm.clone()),
            })
            .collect(),
        unmeasured_heaps: unmeasured_heaps(s.top.iter().filter(chosen)),
    };
    Diagnosis {
        schema: SCHEMA,
        scanned_at_unix_seconds: s.last_scan_unix_seconds,
        host,
        coverage,
        findings,
        oom_order,
        oom_kills: kills::reports(s)
            .into_iter()
            .filter(|k| opts.pids.is_empty() || opts.pids.contains(&k.pid))
            .collect(),
        memory: s.sheet.as_ref().map(sheet::rows).unwrap_or_default(),
        owners: owners(s),
        eviction: eviction::of(s),
        processes: if opts.pids.is_empty() {
            Vec::new()
        } else {
            s.top
                .iter()
                .filter(chosen)
                .map(|p| detail::of(p, s))
                .collect()
        },
    }
}

/// Who holds memory outside the processes' heaps: the `owners` collector's latest read
/// and the cgroups holding removed ones' memory, the largest first.
fn owners(s: &Snapshot) -> Vec<sheet::Owner> {
    let mut owners = s
        .host
        .get::<crate::units::owners::OwnersReading>()
        .map(sheet::owners)
        .unwrap_or_default();
    if let Some(c) = s.host.get::<crate::units::cgroup::Cgroups>() {
        owners.extend(sheet::removed_cgroups(c, c.2));
        sheet::rank(&mut owners);
    }
    owners
}

/// The runtime heaps of `processes` that could not be measured, grouped by runtime and
/// reason, the most RSS first.
fn unmeasured_heaps<'a>(
    processes: impl Iterator<Item = &'a ProcessReport>,
) -> Vec<UnmeasuredHeaps> {
    let mut groups: Vec<(UnmeasuredHeaps, Vec<(u64, String)>)> = Vec::new();
    for p in processes {
        let sig = &p.signals;
        let rss = p.sample.status.vm_rss_bytes.unwrap_or(0);
        // Each reader whose gap is a finding of its own, with why (its outcome).
        let readings = sig.reading.iter().flat_map(|r| &r.readings);
        let gaps = readings.filter(|r| r.gap().is_some());
        for (runtime, reason) in gaps.map(|r| (r.reader(), r.outcome())) {
            let at = match groups
                .iter()
                .position(|(g, _)| g.runtime == runtime && g.reason == reason)
            {
                Some(at) => at,
                None => {
                    groups.push((
                        UnmeasuredHeaps {
                            runtime,
                            reason,
                            ..UnmeasuredHeaps::default()
                        },
                        Vec::new(),
                    ));
                    groups.len() - 1
                }
            };
            let (g, names) = &mut groups[at];
            g.processes += 1;
            g.rss_bytes = g.rss_bytes.saturating_add(rss);
            names.push((rss, p.sample.comm.clone()));
        }
    }
    let mut out: Vec<UnmeasuredHeaps> = groups
        .into_iter()
        .map(|(mut g, mut names)| {
            names.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
            for (_, comm) in names {
                if g.comms.len() == report::UNMEASURED_NAMES {
                    break;
                }
                if !g.comms.contains(&comm) {
                    g.comms.push(comm);
                }
            }
            g
        })
        .collect();
    out.sort_by(|a, b| b.rss_bytes.cmp(&a.rss_bytes).then(a.runtime.cmp(b.runtime)));
    out
}

#[cfg(test)]
mod tests;
