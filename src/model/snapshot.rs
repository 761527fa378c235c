//! What a scan leaves for scrapes and `explain`: the snapshot `derive` makes, with its
//! system signals and top processes.

use std::collections::BTreeMap;

use crate::collect::{CollectorRun, DeepRun, ErrorCounts, Host, ProcessSample, ReadStats};
use crate::family::Family;
use crate::heap::runtime::Identity;
use crate::model::groups::GroupStats;
use crate::model::kills::Kills;
use crate::model::signals::Signals;

/// System signals that need no history.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SystemSignals {
    /// `Committed_AS / CommitLimit`; binding only in overcommit mode 2.
    pub commit_ratio: Option<f64>,
    /// `CommitLimit - Committed_AS`; negative is normal in modes 0 and 1.
    pub commit_headroom_bytes: Option<i64>,
    /// Memory in partially mapped huge pages that no RSS shows:
    /// sum over sizes of `nr_anon_partially_mapped` x size (kernel 6.12+).
    pub thp_hidden_bytes: Option<u64>,
    /// Overcommit mode 2 and `Committed_AS >= CommitLimit`: new allocations fail.
    pub commit_limit_reached: Option<bool>,
    /// THP can be used (`enabled` not `never`) and khugepaged fills nearly empty ranges
    /// (`max_ptes_none` at its ceiling, 511 with 4 KiB pages): memory released with
    /// MADV_DONTNEED can grow back.
    pub thp_regrowth_risk: Option<bool>,
    /// Share of the last interval in which some / all tasks stalled on memory.
    pub pressure_waiting_ratio: Option<f64>,
    pub pressure_stalled_ratio: Option<f64>,
    /// Unix time of the scan that first saw `oom_kill` rise, since the exporter started.
    pub last_oom_kill_unix_seconds: Option<f64>,
}

/// A top process with its signals and its place in the OOM killer's order.
#[derive(Debug, Clone, PartialEq)]
pub struct ProcessReport {
    pub sample: ProcessSample,
    pub signals: Signals,
    /// 1 for the process the OOM killer would pick first (highest oom_score).
    pub oom_rank: u64,
    /// Allocator and runtime, once a deep read has told them.
    pub identity: Option<Identity>,
}

/// What a scrape encodes: the latest scan plus the running totals.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    /// Scans completed since start.
    pub scans: u64,
    pub last_scan_unix_seconds: Option<f64>,
    pub scan_duration_seconds: Option<f64>,
    pub collectors: Vec<CollectorRun>,
    /// Cumulative errors since start, by (collector, reason).
    pub errors: ErrorCounts,
    /// What the system collectors read, as the scan gave it.
    pub host: Host,
    /// The families the model derives, each with the unit whose section it joins.
    pub derived: Vec<(&'static str, Family)>,
    pub signals: SystemSignals,
    /// Processes with memory seen by the scan (kernel threads excluded).
    pub processes_scanned: Option<u64>,
    /// Groups in name order.
    pub groups: Vec<GroupStats>,
    /// Groups summed into [`OTHER_GROUP`](crate::model::groups::OTHER_GROUP) by the cap, in the latest scan.
    pub groups_folded: u64,
    /// Top-K by RSS, by oom_score, by hoarded and by regrown bytes, united, in pid order.
    pub top: Vec<ProcessReport>,
    pub deep: Option<DeepRun>,
    /// CPU time of the deep tier since start.
    pub deep_cpu_seconds_total: f64,
    /// Each heap reader's reads since start (glibc's walks, JVMs', Go's, jemalloc's), by
    /// how they ended.
    pub reads_total: crate::heap::ReadCounts,
    /// Processes whose heap is walkable but not yet measured (see `Signals::hoard_pending`).
    pub heap_pending_processes: u64,
    /// CPU time of the heap walks since start.
    pub heap_walk_cpu_seconds_total: f64,
    pub reads: Option<ReadStats>,
    /// The exporter's own process (`process_*`).
    pub own: Option<crate::collect::own::OwnProcess>,
    /// Measured hoarded bytes summed by the processes' memory cgroup (those the deep tier
    /// read and whose heap it measured).
    pub cgroup_hoarded_bytes: BTreeMap<String, u64>,
    /// Heap the measured runtimes hold (a JVM's Java heap, a Go program's free heap)
    /// summed by memory cgroup and runtime (part of `cgroup_hoarded_bytes` where it is
    /// 16 MiB or more a process).
    pub cgroup_runtime_held_bytes: BTreeMap<(String, &'static str), u64>,
    /// `LazyFree` summed by memory cgroup, over the processes the deep tier read.
    pub cgroup_lazy_free_bytes: BTreeMap<String, crate::model::sheet::LazyFree>,
    /// What each reader measured as held in each memory cgroup's processes, for its
    /// balance sheet (as the host's).
    pub cgroup_held: BTreeMap<String, BTreeMap<&'static str, crate::model::sheet::Held>>,
    /// The host's memory as a balance sheet (`None` without meminfo).
    pub sheet: Option<crate::model::sheet::Sheet>,
    /// OOM kills from the kernel log since start, and the latest few with their victims;
    /// `None` when the kmsg collector is off.
    pub kills: Option<Kills>,
}
