//! `cgroup`: every memory cgroup's (container's) anonymous and huge page memory, its usage
//! against its limits and its OOM counters, from `memory.stat` and the files beside it,
//! and every parent's charge of removed descendants; and what the model sums into each
//! from its processes (hoarded bytes, held runtime heap, its balance sheet).

use crate::family::{Family, Metric, Value};
use crate::parse::memory_stat::{Bounds, MemoryStat};
use crate::parse::pressure::Pressure;
use crate::source::Reason;

use super::{Reader, Reading, Unit};

mod metrics;
pub(crate) use metrics::*;


pub const UNIT: Unit = Unit {
    name: "cgroup",
    what: "usage as a balance sheet, limits, events and pressure per memory cgroup, removed cgroups' memory",
    rows: &[
        CGROUP_INFO,
        CGROUP_ANON_BYTES,
        CGROUP_ANON_HUGE_BYTES,
        CGROUP_MEMORY_USAGE_BYTES,
        CGROUP_MEMORY_LIMIT_BYTES,
        CGROUP_WORKING_SET_BYTES,
        CGROUP_MEMORY_PEAK_BYTES,
        CGROUP_HOARDED_BYTES,
        CGROUP_RUNTIME_HELD_BYTES,
        CGROUP_LAZY_FREE_BYTES,
        CGROUP_OOM_KILLS_TOTAL,
        CGROUP_LIMIT_OOMS_TOTAL,
        CGROUP_OOM_GROUP_KILLS_TOTAL,
        CGROUP_MEMORY_HIGH_EVENTS_TOTAL,
        CGROUP_MEMORY_MAX_EVENTS_TOTAL,
        CGROUP_PRESSURE_MEMORY_WAITING_SECONDS_TOTAL,
        CGROUP_PRESSURE_MEMORY_STALLED_SECONDS_TOTAL,
        CGROUP_MEMORY_BYTES,
        CGROUP_REMOVED_DESCENDANTS_BYTES,
        CGROUP_DYING_DESCENDANTS,
        CGROUP_MEMORY_HIGH_BYTES,
        CGROUP_MEMORY_MIN_BYTES,
        CGROUP_MEMORY_LOW_BYTES,
        CGROUP_SWAP_BYTES,
        CGROUP_SWAP_LIMIT_BYTES,
        CGROUP_ZSWAP_BYTES,
        CGROUP_ZSWAP_LIMIT_BYTES,
    ],
    fixes: &[],
    start: || super::stateless(read),
};

mod walk;
pub(crate) use walk::Cgroups;

/// Every memory cgroup's anonymous and huge page memory. cgroup v1 `rss`/`rss_huge` count
/// a cgroup's own processes, so every cgroup with some is reported; v2 counts are
/// hierarchical, so only leaf cgroups are, and no memory is counted twice. Every cgroup
/// the walk passes has its charge of removed descendants computed ([`walk::removed`]).
fn read(r: &mut Reader) -> Result<Cgroups, Reason> {
    let root = r.source.sysfs().join("fs/cgroup");
    r.source.feature(&root)?;
    let (base, v2) = if r.source.exists(&root.join("cgroup.controllers")) {
        (root, true)
    } else if r.source.exists(&root.join("memory")) {
        (root.join("memory"), false)
    } else {
        return Err(Reason::Unsupported);
    };
    Ok(walk::walk(r, &base, v2))
}

impl Cgroups {
    /// A family of what the walk found of every cgroup it reports or passes, in path
    /// order.
    fn bounds(&self, metric: &'static Metric, get: fn(&Bounds) -> Option<u64>) -> Family {
        let mut all: Vec<(&String, u64)> = self
            .0
            .iter()
            .filter_map(|(p, m)| Some((p, get(&m.bounds)?)))
            .chain(self.1.iter().filter_map(|(p, b)| Some((p, get(&b.bounds)?))))
            .collect();
        all.sort();
        let mut f = Family::new(metric);
        for (path, v) in all {
            f.push(vec![("cgroup", path.clone())], Value::U(v));
        }
        f
    }
}

impl super::UnitReading for Cgroups {
    const COLLECTOR: crate::family::Collector = COLLECTOR;
}

impl Reading for Cgroups {
    fn families(&self) -> Vec<Family> {
        let mut info = Family::new(&CGROUP_INFO);
        for (path, _) in &self.0 {
            let id = crate::parse::cgroup::identity(path);
            if id == Default::default() {
                continue;
            }
            // All as the info's labels, so `cgroup` comes first as in the other families.
            let labels = vec![
                ("cgroup", path.clone()),
                ("pod_uid", id.pod_uid),
                ("container_id", id.container_id),
                ("runtime", id.runtime.to_string()),
                ("qos_class", id.qos_class.to_string()),
                ("systemd_unit", id.systemd_unit),
            ];
            info.push(labels, Value::U(1));
        }
        // One row per cgroup that has the value.
        let rows = |metric: &'static Metric, get: fn(&MemoryStat) -> Option<u64>| {
            let mut f = Family::new(metric);
            for (path, m) in &self.0 {
                if let Some(v) = get(m) {
                    f.push(vec![("cgroup", path.clone())], Value::U(v));
                }
            }
            f
        };
        let seconds = |metric: &'static Metric, get: fn(&Pressure) -> Option<f64>| {
            let mut f = Family::new(metric);
            for (path, m) in &self.0 {
                if let Some(v) = m.pressure.as_ref().and_then(get) {
                    f.push(vec![("cgroup", path.clone())], Value::F(v));
                }
            }
            f
        };
        vec![
            info,
            rows(&CGROUP_ANON_BYTES, |m| Some(m.anon_bytes)),
            rows(&CGROUP_ANON_HUGE_BYTES, |m| Some(m.anon_huge_bytes)),
            rows(&CGROUP_MEMORY_USAGE_BYTES, |m| m.usage_bytes),
            rows(&CGROUP_MEMORY_LIMIT_BYTES, |m| m.limit_bytes),
            rows(&CGROUP_WORKING_SET_BYTES, |m| m.working_set_bytes()),
            rows(&CGROUP_MEMORY_PEAK_BYTES, |m| m.peak_bytes),
            rows(&CGROUP_OOM_KILLS_TOTAL, |m| m.oom_kills),
            rows(&CGROUP_LIMIT_OOMS_TOTAL, |m| m.limit_ooms),
            rows(&CGROUP_OOM_GROUP_KILLS_TOTAL, |m| m.oom_group_kills),
            rows(&CGROUP_MEMORY_HIGH_EVENTS_TOTAL, |m| m.high_events),
            rows(&CGROUP_MEMORY_MAX_EVENTS_TOTAL, |m| m.max_events),
            seconds(&CGROUP_PRESSURE_MEMORY_WAITING_SECONDS_TOTAL, |p| {
                p.some_seconds
            }),
            seconds(&CGROUP_PRESSURE_MEMORY_STALLED_SECONDS_TOTAL, |p| {
                p.full_seconds
            }),
            self.bounds(&CGROUP_REMOVED_DESCENDANTS_BYTES, |b| b.removed),
            self.bounds(&CGROUP_DYING_DESCENDANTS, |b| b.dying),
            rows(&CGROUP_MEMORY_HIGH_BYTES, |m| m.bounds.high),
            rows(&CGROUP_MEMORY_MIN_BYTES, |m| m.bounds.min),
            rows(&CGROUP_MEMORY_LOW_BYTES, |m| m.bounds.low),
            rows(&CGROUP_SWAP_BYTES, |m| m.bounds.swap),
            rows(&CGROUP_SWAP_LIMIT_BYTES, |m| m.bounds.swap_max),
            rows(&CGROUP_ZSWAP_BYTES, |m| m.bounds.zswap),
            rows(&CGROUP_ZSWAP_LIMIT_BYTES, |m| m.bounds.zswap_max),
        ]
    }
}
