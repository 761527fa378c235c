//! `kubelet`: the kubelet's memory eviction signals as the kubelet computes them, its
//! thresholds from its own command line and configuration, and the headroom between them
//! (docs/eviction.md). On a host without a kubelet it reads nothing but, once a minute,
//! the names of the processes, and serves nothing: not an error.

use std::time::{Duration, Instant};

use crate::family::{Family, Value};
use crate::source::Reason;

use super::{Collect, Output, Reader, Reading, Unit};

mod find;
mod metrics;
pub(crate) use find::Plan;
#[cfg(test)]
use find::pods_cgroup;
pub(crate) use metrics::*;

pub const UNIT: Unit = Unit {
    name: "kubelet",
    what: "the kubelet's memory eviction signals, thresholds and headroom",
    rows: &[
        KUBELET_INFO,
        KUBELET_MEMORY_AVAILABLE_BYTES,
        KUBELET_MEMORY_CAPACITY_BYTES,
        KUBELET_WORKING_SET_BYTES,
        KUBELET_EVICTION_THRESHOLD_BYTES,
        KUBELET_EVICTION_HEADROOM_BYTES,
    ],
    fixes: &[(
        Reason::Denied,
        "the kubelet's configuration file is read through /proc/PID/root: give the exporter CAP_SYS_PTRACE and CAP_DAC_READ_SEARCH (the chart does)",
    )],
    start: || Box::new(Watch::default()),
};

/// How long a host without a kubelet waits before its processes are looked through again.
const SEARCH_EVERY: Duration = Duration::from_secs(60);

/// The kubelet found, and when to look for one again.
#[derive(Default)]
struct Watch {
    found: Option<Found>,
    next_search: Option<Instant>,
}

struct Found {
    pid: u32,
    start: u64,
    /// Its plan, or why it could not be read (its signals are still served).
    plan: Result<Plan, Reason>,
    /// MemTotal when it was found (the node's capacity, as cAdvisor reads it once).
    capacity: u64,
}

impl Collect for Watch {
    fn read(&mut self, r: &mut Reader) -> Result<Output, Reason> {
        if let Some(f) = &self.found {
            if find::start_time(r, f.pid) != Some(f.start) {
                self.found = None;
            }
        }
        if self.found.is_none() && self.next_search.is_none_or(|t| Instant::now() >= t) {
            self.next_search = Some(Instant::now() + SEARCH_EVERY);
            if let Some((pid, start)) = find::search(r) {
                let capacity = r
                    .source
                    .parse_proc("meminfo", r.buf, crate::parse::meminfo::Meminfo::parse)?
                    .mem_total_bytes
                    .ok_or(Reason::Malformed)?;
                let plan = find::plan(r, pid);
                self.found = Some(Found {
                    pid,
                    start,
                    plan,
                    capacity,
                });
            }
        }
        // No kubelet: nothing to serve, and nothing wrong (most hosts run none).
        let Some(f) = &self.found else {
            return Ok(Box::new(Kubelet::default()));
        };
        if let Err(reason) = f.plan {
            r.count(reason, 1);
        }
        Ok(Box::new(observe(r, f)))
    }
}

/// One signal as the kubelet observes it.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Signal {
    /// `memory.available` or `allocatableMemory.available`.
    pub name: &'static str,
    pub capacity: u64,
    pub usage: u64,
    pub inactive_file: u64,
    pub active_file: u64,
    /// Where the usage counts slab.
    pub slab_reclaimable: Option<u64>,
    /// Its thresholds in bytes: `hard`, `soft`.
    pub thresholds: Vec<(&'static str, u64)>,
}

impl Signal {
    /// The kubelet's working set: usage less inactive file pages, never below 0.
    pub fn working_set(&self) -> u64 {
        self.usage.saturating_sub(self.inactive_file)
    }

    /// Capacity less the working set.
    pub fn available(&self) -> i64 {
        self.capacity as i64 - self.working_set() as i64
    }
}

/// What the unit read: the kubelet and its signals.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Kubelet {
    pub pid: u32,
    pub from: &'static str,
    pub pods: String,
    pub signals: Vec<Signal>,
}

/// The kubelet's signals now, from the root cgroup and the pods' cgroup.
fn observe(r: &mut Reader, f: &Found) -> Kubelet {
    let root = r.source.sysfs().join("fs/cgroup");
    let v2 = r.source.exists(&root.join("cgroup.controllers"));
    let base = if v2 { root } else { root.join("memory") };
    let plan = f.plan.clone().unwrap_or_default();
    let mut out = Kubelet {
        pid: f.pid,
        from: if f.plan.is_ok() { plan.from } else { "unread" },
        pods: plan.pods.clone().unwrap_or_default(),
        signals: Vec::new(),
    };
    let threshold = |v: Option<crate::parse::kubelet::Value>, capacity: u64| v.map(|v| v.bytes(capacity));
    // The node: cAdvisor's root container, whose limit is MemTotal.
    let stat = |r: &mut Reader, dir: &std::path::Path| -> Option<String> {
        r.source
            .read_path(&dir.join("memory.stat"), r.buf)
            .ok()
            .map(str::to_string)
    };
    if let Some(text) = stat(r, &base) {
        let get = |k: &str| field(&text, k);
        let (prefix, usage) = if v2 {
            ("", get("anon").zip(get("file")).map(|(a, b)| a + b))
        } else {
            ("total_", number(r, &base.join("memory.usage_in_bytes")))
        };
        if let Some(usage) = usage {
            let mut s = Signal {
                name: "memory.available",
                capacity: f.capacity,
                usage,
                inactive_file: get(&format!("{prefix}inactive_file")).unwrap_or(0),
                active_file: get(&format!("{prefix}active_file")).unwrap_or(0),
                ..Signal::default()
            };
            for (kind, v) in [("hard", plan.hard), ("soft", plan.soft)] {
                if let Some(t) = threshold(v, s.capacity) {
                    s.thresholds.push((kind, t));
                }
            }
            out.signals.push(s);
        } else {
            r.count(Reason::Malformed, 1);
        }
    }
    // The pods: their cgroup's limit less its working set, where it has a limit.
    if let Some(pods) = &plan.pods {
        let dir = base.join(pods.trim_start_matches('/'));
        let (limit, current) = if v2 {
            ("memory.max", "memory.current")
        } else {
            ("memory.limit_in_bytes", "memory.usage_in_bytes")
        };
        // cAdvisor's "unlimited": past 2^62 (v1 writes a page-rounded i64::MAX).
        let limit = number(r, &dir.join(limit)).filter(|&l| l <= 1 << 62);
        let usage = number(r, &dir.join(current));
        if let (Some(capacity), Some(usage), Some(text)) = (limit, usage, stat(r, &dir)) {
            let prefix = if v2 { "" } else { "total_" };
            let get = |k: &str| field(&text, &format!("{prefix}{k}"));
            let mut s = Signal {
                name: "allocatableMemory.available",
                capacity,
                usage,
                inactive_file: get("inactive_file").unwrap_or(0),
                active_file: get("active_file").unwrap_or(0),
                slab_reclaimable: if v2 { get("slab_reclaimable") } else { None },
                ..Signal::default()
            };
            if plan.allocatable {
                if let Some(t) = threshold(plan.hard, capacity) {
                    s.thresholds.push(("hard", t));
                }
            }
            out.signals.push(s);
        }
    }
    out
}

/// A key's value in a `memory.stat`.
fn field(text: &str, key: &str) -> Option<u64> {
    text.lines().find_map(|l| {
        let (k, v) = l.split_once(' ')?;
        (k == key).then(|| v.trim().parse().ok())?
    })
}

/// A file holding a number (`max` is none).
fn number(r: &mut Reader, path: &std::path::Path) -> Option<u64> {
    let text = r.source.read_path(path, r.buf).ok()?;
    text.trim().parse().ok()
}

impl super::UnitReading for Kubelet {
    const COLLECTOR: crate::family::Collector = COLLECTOR;
}

impl Reading for Kubelet {
    fn families(&self) -> Vec<Family> {
        if self.pid == 0 {
            return Vec::new();
        }
        let mut info = Family::new(&KUBELET_INFO);
        info.push(
            vec![
                ("pid", self.pid.to_string()),
                ("thresholds_from", self.from.to_string()),
                ("pods_cgroup", self.pods.clone()),
            ],
            Value::U(1),
        );
        let mut available = Family::new(&KUBELET_MEMORY_AVAILABLE_BYTES);
        let mut capacity = Family::new(&KUBELET_MEMORY_CAPACITY_BYTES);
        let mut ws = Family::new(&KUBELET_WORKING_SET_BYTES);
        let mut threshold = Family::new(&KUBELET_EVICTION_THRESHOLD_BYTES);
        let mut headroom = Family::new(&KUBELET_EVICTION_HEADROOM_BYTES);
        for s in &self.signals {
            let sig = || vec![("signal", s.name.to_string())];
            available.push(sig(), Value::I(s.available()));
            capacity.push(sig(), Value::U(s.capacity));
            let total = s.working_set();
            let active = s.active_file.min(total);
            let slab = s.slab_reclaimable.unwrap_or(0).min(total - active);
            let mut parts = vec![("active_file", active)];
            if s.slab_reclaimable.is_some() {
                parts.push(("slab_reclaimable", slab));
            }
            parts.push(("other", total - active - slab));
            for (part, v) in parts {
                let mut l = sig();
                l.push(("part", part.to_string()));
                ws.push(l, Value::U(v));
            }
            for &(kind, t) in &s.thresholds {
                let mut l = sig();
                l.push(("kind", kind.to_string()));
                threshold.push(l.clone(), Value::U(t));
                headroom.push(l, Value::I(s.available() - t as i64));
            }
        }
        vec![info, available, capacity, ws, threshold, headroom]
    }
}

#[cfg(test)]
mod tests;
