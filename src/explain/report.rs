//! The parts of a diagnosis: the host's state, the findings and their subjects, the OOM
//! killer's order; how findings rank, and sizes for people.

use serde::Serialize;

use crate::model::derive::ProcessReport;

/// The host's state, whether or not anything is wrong with it.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct HostState {
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
    /// Processes whose walkable heap changed under every walk so far: no hoarding figure
    /// for them, measured or suspected, until one succeeds.
    pub pending_heaps: u64,
    /// Collectors that failed in the scan (`membloat_scrape_collector_success` 0): what
    /// they serve is missing from the diagnosis.
    pub failed_collectors: Vec<String>,
    /// The processes whose files the latest scan was refused, by pid (the lowest 16),
    /// with their name where their `status` could still be read.
    pub denied_processes: Vec<Denied>,
    /// Runtime heaps that could not be measured, by runtime and reason: how many
    /// processes, how much RSS, which programs. Only a process with
    /// [`UNMEASURED_FINDING_RSS_BYTES`] of RSS or more (or one asked for with `--pid`) is
    /// also a finding.
    pub unmeasured_heaps: Vec<UnmeasuredHeaps>,
}

/// The processes of one runtime whose heap could not be measured for one reason.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct UnmeasuredHeaps {
    /// `go`, `jvm`, `python`.
    pub runtime: &'static str,
    /// The reader's reason (`stripped`, `not_published`, ...), as its metric labels it.
    pub reason: &'static str,
    pub processes: u64,
    pub rss_bytes: u64,
    /// The programs' names, the largest by RSS first, at most [`UNMEASURED_NAMES`].
    pub comms: Vec<String>,
}

/// Names listed per group of unmeasured heaps.
pub(crate) const UNMEASURED_NAMES: usize = 8;

/// A process whose runtime heap could not be measured is a finding from this much RSS
/// on (or when asked for with `--pid`): below it, what it could hold back is small beside a
/// host, and its binary is often a vendor's (a node's container runtime and kubelet are
/// stripped Go), so it is told in coverage instead.
pub const UNMEASURED_FINDING_RSS_BYTES: u64 = 1 << 30;

/// A process the exporter was refused: its pid, and its name when known.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct Denied {
    pub pid: u32,
    pub comm: Option<String>,
}

/// One thing worth acting on.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Finding {
    /// `hoarding`, `arenas`, `regrowth`, `lazy_free`, `untouched_commit`, `oom_victim`, `low_memory`,
    /// `commit_limit`, `commit_overrun`, `thp_regrowth_risk`, `hidden_thp`,
    /// `memory_pressure`, `oom_kill`.
    pub kind: &'static str,
    /// The process, or `None` for the host.
    pub process: Option<Subject>,
    /// Bytes at stake (0 when the finding is a setting or an event).
    pub bytes: u64,
    /// What `bytes` are of: `ram` (resident memory; for an OOM victim, the RAM and swap
    /// its kill frees), `commit` (commit charge), `address_space` (virtual reservations,
    /// not memory), or `none` (a setting, an event, a heap that could not be measured).
    pub bytes_of: &'static str,
    /// `measured` (read from the allocator's own heap), `observed` (seen in the kernel's
    /// counters over the scans) or `suspected` (inferred; could be something else).
    pub certainty: &'static str,
    /// The evidence, in one line.
    pub evidence: String,
    /// What to change, exactly.
    pub remedy: String,
    /// What the remedy costs, where it costs something.
    pub cost: Option<String>,
    /// A command that gives the memory back now, as it runs (the process's pid in it),
    /// where the facts measured say it works.
    pub now: Option<String>,
    /// What `now` gives back, in bytes of RAM, as far as the measurement tells.
    pub now_gives_back_bytes: Option<u64>,
    /// Environment or flags to start the program with so that it does not happen again,
    /// where the facts measured say they work.
    pub next_start: Option<String>,
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
    /// Its resident memory (VmRSS) at the scan.
    pub rss_bytes: Option<u64>,
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

/// Orders findings by what they cost: RAM first, then commit charge, then address space,
/// then settings and events, each largest first; host findings before process ones at
/// equal bytes, then by pid. Bytes of different kinds are never compared: 960 MiB of
/// arenas' address space is not more than 750 MiB of a Java heap held in RAM.
pub fn rank(findings: &mut [Finding]) {
    let class = |f: &Finding| match f.bytes_of {
        "ram" => 0,
        "commit" => 1,
        "address_space" => 2,
        _ => 3,
    };
    findings.sort_by(|a, b| {
        class(a)
            .cmp(&class(b))
            .then(b.bytes.cmp(&a.bytes))
            .then(a.process.is_some().cmp(&b.process.is_some()))
            .then(
                a.process
                    .as_ref()
                    .map(|p| p.pid)
                    .cmp(&b.process.as_ref().map(|p| p.pid)),
            )
    });
}

/// A process below this RSS whose heap could not be measured has little to give back:
/// its `*_unmeasured` finding informs (the size below which hoarding is never suspected).
pub const INFORM_BELOW_RSS_BYTES: u64 = crate::model::signals::HOARD_MIN_HEAP_BYTES;

impl Finding {
    /// Whether the finding only informs: a small process's heap that could not be measured.
    pub(crate) fn informs(&self) -> bool {
        self.kind.ends_with("_unmeasured")
            && self
                .process
                .as_ref()
                .and_then(|p| p.rss_bytes)
                .is_some_and(|rss| rss < INFORM_BELOW_RSS_BYTES)
    }
}

/// Sizes for people: `512 KiB`, `12.3 MiB`, `1.50 GiB` (as the heap readers write them).
pub fn size(bytes: u64) -> String {
    crate::heap::words::Size(bytes).to_string()
}

pub(super) fn subject(p: &ProcessReport) -> Subject {
    let id = p.identity.as_ref();
    Subject {
        pid: p.sample.pid,
        comm: p.sample.comm.clone(),
        group: p.sample.group.clone(),
        allocator: id.map(|i| i.allocator.as_str()),
        runtime: id.map(|i| i.runtime.as_str()),
        runtime_version: id.map(|i| i.version.clone()).filter(|v| !v.is_empty()),
        rss_bytes: p.sample.status.vm_rss_bytes,
    }
}

pub(super) fn available_ratio(h: &HostState) -> Option<f64> {
    let total = h.memory_total_bytes.filter(|&t| t > 0)?;
    Some(h.memory_available_bytes? as f64 / total as f64)
}

pub(super) fn frees(p: &ProcessReport) -> u64 {
    let st = &p.sample.status;
    st.vm_rss_bytes
        .unwrap_or(0)
        .saturating_add(st.vm_swap_bytes.unwrap_or(0))
}
