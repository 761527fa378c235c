//! A process `--pid` names, in depth: what its status file says, where the OOM killer
//! ranks it, its memory cgroup and that cgroup's limit, and what each heap reader
//! measured of it and when.

use serde::Serialize;

use crate::model::derive::{ProcessReport, Snapshot};
use crate::units::cgroup::Cgroups;

/// One process in depth.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ProcessDetail {
    pub pid: u32,
    pub comm: String,
    pub group: Option<String>,
    /// `/proc/PID/status` at the scan: VmRSS, RssAnon, RssFile, RssShmem, VmSwap, VmHWM
    /// and VmSize.
    pub rss_bytes: Option<u64>,
    pub rss_anon_bytes: Option<u64>,
    pub rss_file_bytes: Option<u64>,
    pub rss_shmem_bytes: Option<u64>,
    pub swap_bytes: Option<u64>,
    pub peak_rss_bytes: Option<u64>,
    pub virtual_bytes: Option<u64>,
    /// `/proc/PID/oom_score` and `oom_score_adj`, and its place in the OOM killer's order
    /// among the processes scanned (1: killed first).
    pub oom_score: Option<u64>,
    pub oom_score_adj: Option<i64>,
    pub oom_rank: u64,
    /// Its memory cgroup (its container), and that cgroup's limit when it has one.
    pub memory_cgroup: Option<String>,
    pub memory_limit_bytes: Option<u64>,
    pub allocator: Option<&'static str>,
    pub runtime: Option<&'static str>,
    pub runtime_version: Option<String>,
    /// Freed memory its allocator or runtime holds, and how it is known (`measured`,
    /// `suspected`).
    pub hoarded_bytes: Option<u64>,
    pub hoard_method: Option<&'static str>,
    /// Each heap reader that read it: how the read ended and the resident memory it found
    /// held unused.
    pub heap_readers: Vec<ReaderOutcome>,
    /// When the heap readers read it (a deep read is kept until the next one), and when
    /// the scan whose figures these are read its files.
    pub heap_read_at_unix_seconds: Option<f64>,
    pub scanned_at_unix_seconds: Option<f64>,
}

/// How one heap reader's read of the process ended.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ReaderOutcome {
    /// `glibc`, `jvm`, `go`, `jemalloc`, `python`.
    pub reader: &'static str,
    /// `measured`, or why there is no figure (the reader's `outcome` label).
    pub outcome: &'static str,
    pub held_bytes: Option<u64>,
}

/// The detail of process `p` in snapshot `s`.
pub fn of(p: &ProcessReport, s: &Snapshot) -> ProcessDetail {
    let st = &p.sample.status;
    let sig = &p.signals;
    let heap = sig.reading.as_deref();
    let id = p.identity.as_ref();
    let memory_cgroup = heap.and_then(|h| h.memory_cgroup.clone());
    let memory_limit_bytes = memory_cgroup.as_ref().and_then(|path| {
        let cgroups = s.host.get::<Cgroups>()?;
        cgroups.0.iter().find(|(c, _)| c == path)?.1.limit_bytes
    });
    ProcessDetail {
        pid: p.sample.pid,
        comm: p.sample.comm.clone(),
        group: p.sample.group.clone(),
        rss_bytes: st.vm_rss_bytes,
        rss_anon_bytes: st.rss_anon_bytes,
        rss_file_bytes: st.rss_file_bytes,
        rss_shmem_bytes: st.rss_shmem_bytes,
        swap_bytes: st.vm_swap_bytes,
        peak_rss_bytes: st.vm_hwm_bytes,
        virtual_bytes: st.vm_size_bytes,
        oom_score: p.sample.oom_score,
        oom_score_adj: p.sample.oom_score_adj,
        oom_rank: p.oom_rank,
        memory_cgroup,
        memory_limit_bytes,
        allocator: id.map(|i| i.allocator.as_str()),
        runtime: id.map(|i| i.runtime.as_str()),
        runtime_version: id.map(|i| i.version.clone()).filter(|v| !v.is_empty()),
        hoarded_bytes: sig.hoarded_bytes,
        hoard_method: sig.hoard_method.map(|m| m.as_str()),
        heap_readers: heap.map_or_else(Vec::new, |h| {
            h.readings
                .iter()
                .map(|r| ReaderOutcome {
                    reader: r.reader(),
                    outcome: r.outcome(),
                    held_bytes: r.held_bytes(),
                })
                .collect()
        }),
        heap_read_at_unix_seconds: heap.map(|h| h.read_at_unix_seconds),
        scanned_at_unix_seconds: s.last_scan_unix_seconds,
    }
}
