//! The recent OOM kills in the diagnosis: each victim with its memory as the kernel
//! counted it, what the exporter had measured of it before, and the remedy that would
//! have helped (its allocator's, where measured waste was a large part of what it held).

use std::collections::BTreeMap;

use serde::Serialize;

use super::remedy;
use super::size;
use crate::heap::runtime::Runtime;
use crate::model::derive::Snapshot;
use crate::model::kills::Victim;
use crate::model::signals::Method;

/// Waste below this share of the victim's RSS is not called the cause.
const WASTE_SHARE: f64 = 0.10;

/// One kill, for a person.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct KillReport {
    /// Unix time of the kill (`None` without the boot time).
    pub unix_seconds: Option<f64>,
    pub pid: u32,
    pub comm: String,
    /// `host`, `memory_cgroup`, `cpuset`, `mempolicy` or `unknown`.
    pub constraint: &'static str,
    /// The memory cgroup whose limit was reached, when the kernel said.
    pub limit_of: Option<String>,
    pub memory_cgroup: Option<String>,
    pub group: String,
    pub allocator: Option<&'static str>,
    pub runtime: Option<&'static str>,
    /// The kernel's account at the kill: `total_vm`, `anon_rss`, `file_rss`, ...
    pub killed_bytes: BTreeMap<&'static str, u64>,
    /// What the exporter had measured at its last scan of the process: `rss`, `hoarded`,
    /// `regrown`, ... (empty when no scan saw it).
    pub measured_bytes: BTreeMap<&'static str, u64>,
    pub measured_at_unix_seconds: Option<f64>,
    /// Why it was so big, as far as the exporter can tell.
    pub evidence: String,
    pub remedy: String,
}

/// The kills the snapshot keeps, newest first.
pub fn reports(s: &Snapshot) -> Vec<KillReport> {
    let Some(kills) = &s.kills else {
        return Vec::new();
    };
    kills.recent.iter().rev().map(|v| report(v)).collect()
}

fn report(v: &Victim) -> KillReport {
    let collect = |kinds: &[(&'static str, Option<u64>)]| -> BTreeMap<&'static str, u64> {
        kinds.iter().filter_map(|&(k, b)| Some((k, b?))).collect()
    };
    let measured_bytes = collect(&v.measured());
    let id = v.identity.as_ref();
    let runtime = id.map_or(Runtime::Native, |i| i.runtime);
    let rss = measured_bytes.get("rss").copied().unwrap_or(0);
    let hoarded = v
        .seen
        .as_ref()
        .filter(|s| s.hoard_method == Some(Method::Measured))
        .and_then(|s| s.hoarded_bytes)
        .unwrap_or(0);
    let regrown = measured_bytes.get("regrown").copied().unwrap_or(0);
    let large = |b: u64| rss > 0 && b as f64 >= WASTE_SHARE * rss as f64;
    let (evidence, remedy) = if v.seen.is_none() {
        (
            "no scan saw the process (it started and died between two scans, or the exporter was not running)".to_string(),
            limit_remedy(v, false),
        )
    } else if large(hoarded) && hoarded >= regrown {
        (
            format!(
                "{} of its {} RSS was freed memory its allocator kept (measured by the heap walk before the kill)",
                size(hoarded),
                size(rss)
            ),
            remedy::hoarding_after_kill(id.map(|i| i.allocator), runtime),
        )
    } else if large(regrown) {
        (
            format!(
                "{} of its {} RSS had grown back while it was idle (khugepaged filling released ranges)",
                size(regrown),
                size(rss)
            ),
            remedy::regrowth(runtime).what,
        )
    } else {
        (
            format!(
                "{} RSS at its last scan, with no measured waste: the memory was in use",
                size(rss)
            ),
            limit_remedy(v, true),
        )
    };
    KillReport {
        unix_seconds: v.unix_seconds,
        pid: v.kill.kill.pid,
        comm: v.kill.kill.comm.clone(),
        constraint: v.kill.constraint.map_or("unknown", |c| c.as_str()),
        limit_of: v.kill.oom_memcg.clone(),
        memory_cgroup: v.memory_cgroup.clone(),
        group: v.group.clone(),
        allocator: id.map(|i| i.allocator.as_str()),
        runtime: id.map(|i| i.runtime.as_str()),
        killed_bytes: collect(&v.killed()),
        measured_bytes,
        measured_at_unix_seconds: v.seen.as_ref().and(v.seen_unix_seconds),
        evidence,
        remedy,
    }
}

/// The limit's remedy; `measured`: a scan saw the process with no waste in it, so its
/// working set reached the limit (unmeasured, nothing is said of what the memory was).
fn limit_remedy(v: &Victim, measured: bool) -> String {
    let why = if measured {
        "its working set, not waste, reached the limit"
    } else {
        "unmeasured: whether it was waste is unknown"
    };
    match v.kill.constraint {
        Some(crate::parse::kmsg::Constraint::MemoryCgroup) => format!(
            "raise the memory limit of {} to what the workload uses, or find what grew ({why})",
            v.kill.oom_memcg.as_deref().unwrap_or("its cgroup")
        ),
        _ => "the host ran out: free memory from the findings above, add swap or RAM, or protect what must live with oom_score_adj".to_string(),
    }
}
