//! `explain`: the diagnosis a person can act on, from the same snapshot and the same
//! signals as the metrics (one code path: a finding is a signal past the threshold its
//! metric or alert uses, never a second opinion).
//!
//! [`diagnose`] is pure; `render` prints it for a terminal or as JSON (schema
//! `membloat.explain/v1`, documented in docs/explain.md).

pub mod remedy;
pub mod render;

use serde::Serialize;

use crate::collect::heap::runtime::Runtime;
use crate::model::derive::{ProcessReport, Snapshot};
use crate::model::signals::{self, Method};

/// The JSON schema's name and version; bumped only on an incompatible change.
pub const SCHEMA: &str = "membloat.explain/v1";
/// Processes listed in the OOM killer's order.
pub const OOM_ORDER_LEN: usize = 5;

/// What explain looks at.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Only these processes' findings (empty: every process the snapshot reports).
    pub pids: Vec<u32>,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Diagnosis {
    pub schema: &'static str,
    /// Unix time of the scan the diagnosis comes from.
    pub scanned_at_unix_seconds: Option<f64>,
    pub host: Host,
    pub coverage: Coverage,
    /// Largest bytes at stake first; host findings before process ones at equal bytes.
    pub findings: Vec<Finding>,
    /// The processes the OOM killer would take, in order.
    pub oom_order: Vec<Victim>,
}

/// The host's state, whether or not anything is wrong with it.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct Host {
    pub memory_total_bytes: Option<u64>,
    pub memory_available_bytes: Option<u64>,
    pub swap_total_bytes: Option<u64>,
    pub swap_used_bytes: Option<u64>,
    pub committed_bytes: Option<u64>,
    pub commit_limit_bytes: Option<u64>,
    /// `vm.overcommit_memory`: 0 heuristic, 1 always, 2 never (limit enforced).
    pub overcommit_mode: Option<u64>,
    /// Share of the last interval in which all tasks stalled on memory (PSI full).
    pub pressure_stalled_ratio: Option<f64>,
    pub thp_enabled: Option<String>,
    pub khugepaged_max_ptes_none: Option<u64>,
    pub thp_hidden_bytes: Option<u64>,
    pub last_oom_kill_unix_seconds: Option<f64>,
}

/// How much of the host the diagnosis saw: processes whose files were denied or whose
/// heap could not be read are left out of (or only suspected in) the findings.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct Coverage {
    pub processes_scanned: Option<u64>,
    /// Reads of processes' files refused since the exporter started (no CAP_SYS_PTRACE).
    pub denied_reads: u64,
    /// Heap walks that could not open `/proc/PID/mem` (CAP_SYS_PTRACE and
    /// CAP_DAC_READ_SEARCH needed for other users' processes), since start.
    pub unreadable_heaps: u64,
}

/// One thing worth acting on.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Finding {
    /// `hoarding`, `arenas`, `regrowth`, `untouched_commit`, `oom_victim`, `low_memory`,
    /// `commit_limit`, `commit_overrun`, `thp_regrowth_risk`, `hidden_thp`,
    /// `memory_pressure`, `oom_kill`.
    pub kind: &'static str,
    /// The process, or `None` for the host.
    pub process: Option<Subject>,
    /// Bytes at stake (0 when the finding is a setting or an event).
    pub bytes: u64,
    /// `measured` (read from the allocator's own heap), `observed` (seen in the kernel's
    /// counters over the scans) or `suspected` (inferred; could be something else).
    pub certainty: &'static str,
    /// The evidence, in one line.
    pub evidence: String,
    /// What to change, exactly.
    pub remedy: String,
    /// What the remedy costs, where it costs something.
    pub cost: Option<String>,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Subject {
    pub pid: u32,
    pub comm: String,
    pub group: Option<String>,
    /// `glibc`, `jemalloc`, ... (`None` before a deep read told it).
    pub allocator: Option<&'static str>,
    pub runtime: Option<&'static str>,
    pub runtime_version: Option<String>,
}

/// A process in the OOM killer's order.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Victim {
    pub rank: u64,
    pub pid: u32,
    pub comm: String,
    pub oom_score: Option<u64>,
    pub oom_score_adj: Option<i64>,
    /// RSS plus swap: what killing it would free.
    pub frees_bytes: u64,
}

impl Diagnosis {
    /// The exit code of `explain`: 0 nothing found, 1 findings.
    pub fn exit_code(&self) -> i32 {
        i32::from(!self.findings.is_empty())
    }
}

const MIB: f64 = 1048576.0;

/// Sizes for people: `512 KiB`, `12.3 MiB`, `1.50 GiB`.
pub fn size(bytes: u64) -> String {
    let b = bytes as f64;
    if b >= 1024.0 * MIB {
        format!("{:.2} GiB", b / 1024.0 / MIB)
    } else if b >= MIB {
        format!("{:.1} MiB", b / MIB)
    } else {
        format!("{} KiB", bytes / 1024)
    }
}

fn subject(p: &ProcessReport) -> Subject {
    let id = p.identity.as_ref();
    Subject {
        pid: p.sample.pid,
        comm: p.sample.comm.clone(),
        group: p.sample.group.clone(),
        allocator: id.map(|i| i.allocator.as_str()),
        runtime: id.map(|i| i.runtime.as_str()),
        runtime_version: id.map(|i| i.version.clone()).filter(|v| !v.is_empty()),
    }
}

pub fn diagnose(s: &Snapshot, opts: &Options) -> Diagnosis {
    let m = s.meminfo.as_ref();
    let g = |f: fn(&crate::parse::meminfo::Meminfo) -> Option<u64>| m.and_then(f);
    let host = Host {
        memory_total_bytes: g(|m| m.mem_total_bytes),
        memory_available_bytes: g(|m| m.mem_available_bytes),
        swap_total_bytes: g(|m| m.swap_total_bytes),
        swap_used_bytes: g(|m| Some(m.swap_total_bytes?.saturating_sub(m.swap_free_bytes?))),
        committed_bytes: g(|m| m.committed_as_bytes),
        commit_limit_bytes: g(|m| m.commit_limit_bytes),
        overcommit_mode: s.sysctl.as_ref().and_then(|x| x.overcommit_memory),
        pressure_stalled_ratio: s.signals.pressure_stalled_ratio,
        thp_enabled: s.thp.as_ref().and_then(|t| t.enabled.clone()),
        khugepaged_max_ptes_none: s.thp.as_ref().and_then(|t| t.khugepaged.max_ptes_none),
        thp_hidden_bytes: s.signals.thp_hidden_bytes,
        last_oom_kill_unix_seconds: s.signals.last_oom_kill_unix_seconds,
    };
    let mut findings = host_findings(&host, s);
    let low_memory = available_ratio(&host).is_some_and(|r| r < signals::LOW_MEMORY_RATIO);
    let chosen = |p: &&ProcessReport| opts.pids.is_empty() || opts.pids.contains(&p.sample.pid);
    for p in s.top.iter().filter(chosen) {
        process_findings(p, low_memory, &mut findings);
    }
    // Largest first; a stable order among equals (host first, then by pid).
    findings.sort_by(|a, b| {
        b.bytes
            .cmp(&a.bytes)
            .then(a.process.is_some().cmp(&b.process.is_some()))
            .then(
                a.process
                    .as_ref()
                    .map(|p| p.pid)
                    .cmp(&b.process.as_ref().map(|p| p.pid)),
            )
    });
    let mut order: Vec<&ProcessReport> = s.top.iter().collect();
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
                crate::config::Collector::Processes,
                crate::source::Reason::Denied,
            ))
            .copied()
            .unwrap_or(0),
        unreadable_heaps: s
            .heap_walks_total
            .get(crate::collect::heap::Outcome::Unreadable),
    };
    Diagnosis {
        schema: SCHEMA,
        scanned_at_unix_seconds: s.last_scan_unix_seconds,
        host,
        coverage,
        findings,
        oom_order,
    }
}

fn available_ratio(h: &Host) -> Option<f64> {
    let total = h.memory_total_bytes.filter(|&t| t > 0)?;
    Some(h.memory_available_bytes? as f64 / total as f64)
}

fn frees(p: &ProcessReport) -> u64 {
    let st = &p.sample.status;
    st.vm_rss_bytes
        .unwrap_or(0)
        .saturating_add(st.vm_swap_bytes.unwrap_or(0))
}

fn host_finding(kind: &'static str, bytes: u64, evidence: String, remedy: &str) -> Finding {
    Finding {
        kind,
        process: None,
        bytes,
        certainty: "observed",
        evidence,
        remedy: remedy.into(),
        cost: None,
    }
}

fn host_findings(h: &Host, s: &Snapshot) -> Vec<Finding> {
    let mut out = Vec::new();
    if let (Some(ratio), Some(avail), Some(total)) = (
        available_ratio(h),
        h.memory_available_bytes,
        h.memory_total_bytes,
    ) {
        if ratio < signals::LOW_MEMORY_RATIO {
            out.push(host_finding(
                "low_memory",
                total - avail.min(total),
                format!("{} available of {} ({:.0} %)", size(avail), size(total), ratio * 100.0),
                "free memory from the findings below, or add memory or swap; the OOM killer takes the first process of the OOM order when it runs out",
            ));
        }
    }
    if let (Some(c), Some(l), Some(mode)) =
        (h.committed_bytes, h.commit_limit_bytes, h.overcommit_mode)
    {
        if mode == 2 && c as f64 > signals::COMMIT_NEAR_LIMIT_RATIO * l as f64 {
            out.push(host_finding(
                "commit_limit",
                c.saturating_sub(l),
                format!("Committed_AS {} of CommitLimit {} in overcommit mode 2: allocations fail at the limit", size(c), size(l)),
                "raise vm.overcommit_ratio or vm.overcommit_kbytes, add swap, or release the untouched commit listed below",
            ));
        } else if mode != 2 && c > l {
            out.push(host_finding(
                "commit_overrun",
                c - l,
                format!("Committed_AS {} exceeds CommitLimit {} (overcommit mode {mode}: not enforced)", size(c), size(l)),
                "nothing now; do not switch this host to vm.overcommit_memory=2 without raising vm.overcommit_ratio first: every new allocation would fail",
            ));
        }
    }
    let always = h.thp_enabled.as_deref() == Some("always");
    if always && h.khugepaged_max_ptes_none.is_some_and(|n| n >= 511) {
        out.push(host_finding(
            "thp_regrowth_risk",
            0,
            "THP enabled=always with khugepaged/max_ptes_none=511: memory any process releases with MADV_DONTNEED can be collapsed back into huge pages".into(),
            "echo 0 > /sys/kernel/mm/transparent_hugepage/khugepaged/max_ptes_none (or 64), or echo madvise > /sys/kernel/mm/transparent_hugepage/enabled",
        ));
    }
    let total = h.memory_total_bytes.unwrap_or(u64::MAX) as f64;
    if let Some(hidden) = h
        .thp_hidden_bytes
        .filter(|&b| b as f64 > signals::THP_HIDDEN_MAX_SHARE * total)
    {
        out.push(host_finding(
            "hidden_thp",
            hidden,
            format!("{} in partially mapped huge pages (nr_anon_partially_mapped): in no RSS and not in MemFree", size(hidden)),
            "it returns when the deferred split shrinker runs under memory pressure; khugepaged/max_ptes_none=0 avoids creating more",
        ));
    }
    if let Some(w) = h
        .pressure_stalled_ratio
        .filter(|&w| w > signals::PRESSURE_STALLED_RATIO)
    {
        out.push(host_finding(
            "memory_pressure",
            0,
            format!("every task stalled on memory {:.0} % of the time over the last interval (PSI full)", w * 100.0),
            "free memory from the findings below; systemd-oomd and oomd act on this signal",
        ));
    }
    if let Some(t) = s.signals.last_oom_kill_unix_seconds {
        out.push(host_finding(
            "oom_kill",
            0,
            format!(
                "the kernel killed a process for memory (vmstat oom_kill rose) at Unix time {t:.0}"
            ),
            "journalctl -k | grep -i 'out of memory' names it; then the findings below",
        ));
    }
    out
}

fn process_findings(p: &ProcessReport, low_memory: bool, out: &mut Vec<Finding>) {
    let sig = &p.signals;
    let id = p.identity.as_ref();
    let allocator = id.map(|i| i.allocator);
    let runtime = id.map_or(Runtime::Native, |i| i.runtime);
    let mut push =
        |kind, bytes, certainty, evidence: String, (remedy, cost): (String, Option<&str>)| {
            out.push(Finding {
                kind,
                process: Some(subject(p)),
                bytes,
                certainty,
                evidence,
                remedy,
                cost: cost.map(str::to_string),
            })
        };
    if let Some(hoarded) = sig.hoarded_bytes.filter(|&b| b > 0) {
        let (certainty, evidence) = match (sig.hoard_method, sig.heap) {
            (Some(Method::Measured), Some(h)) => (
                "measured",
                format!(
                    "glibc heaps hold {} free ({} resident, {} malloc_trim could return) in {} chunks",
                    size(h.free_bytes()),
                    size(h.free_resident_bytes()),
                    size(h.reclaimable_bytes()),
                    h.main.chunks + h.arenas.chunks
                ),
            ),
            _ => (
                "suspected",
                format!(
                    "idle, RSS at {:.0} % of its peak, heap Rss {} mostly of its anonymous memory; not walked, so live data looks the same",
                    sig.retained_peak_ratio.unwrap_or(0.0) * 100.0,
                    size(sig.heap_resident_bytes.unwrap_or(0))
                ),
            ),
        };
        push(
            "hoarding",
            hoarded,
            certainty,
            evidence,
            remedy::hoarding(allocator, runtime),
        );
    }
    if sig.arena_at_ceiling == Some(true) {
        let reserved = sig.arena_reserved_bytes.unwrap_or(0);
        let evidence = format!(
            "{} glibc arena heaps reserve {} of address space, at glibc's ceiling of 8 arenas per CPU{}",
            sig.arena_heaps.unwrap_or(0),
            size(reserved),
            sig.heap.map_or(String::new(), |h| format!("; {} free in them", size(h.arenas.free_bytes)))
        );
        push(
            "arenas",
            reserved,
            "observed",
            evidence,
            remedy::arenas(runtime),
        );
    }
    if sig.regrown_since_trough_bytes > 0 {
        let evidence = format!(
            "{} of anonymous memory grew back in huge pages while the process was idle and its mappings unchanged (khugepaged collapse)",
            size(sig.regrown_since_trough_bytes)
        );
        push(
            "regrowth",
            sig.regrown_since_trough_bytes,
            "observed",
            evidence,
            remedy::regrowth(runtime),
        );
    }
    if let Some(untouched) = sig
        .untouched_commit_bytes
        .filter(|&b| b >= signals::UNTOUCHED_COMMIT_MIN_BYTES)
    {
        let evidence = format!(
            "{} of commit charge not yet in RAM or swap: it can become RSS without another allocation, and oom_score does not count it",
            size(untouched)
        );
        push(
            "untouched_commit",
            untouched,
            "observed",
            evidence,
            remedy::untouched_commit(runtime),
        );
    }
    let score = p.sample.oom_score.unwrap_or(0);
    if p.oom_rank == 1 && low_memory && score >= signals::OOM_LIKELY_VICTIM_SCORE {
        let evidence = format!(
            "first in the OOM killer's order (oom_score {score}, oom_score_adj {}) while memory is low; killing it frees {}",
            p.sample.oom_score_adj.unwrap_or(0),
            size(frees(p))
        );
        push("oom_victim", frees(p), "observed", evidence, ("protect it with a lower oom_score_adj (systemd OOMScoreAdjust=) if it must live, or free memory from the findings above".into(), None));
    }
}

#[cfg(test)]
mod tests;
