//! `cgroup`: every memory cgroup's (container's) anonymous and huge page memory, its usage
//! against its limit and its OOM counters, from `memory.stat` and the files beside it; and
//! what the model sums into each from its processes (hoarded bytes, held runtime heap).

use crate::family::{Collector, Family, Metric, Section, Value};
use crate::parse::memory_stat::MemoryStat;
use crate::parse::pressure::Pressure;
use crate::source::{ReadError, Reason};

use super::{Reader, Reading, Unit};

pub const COLLECTOR: Collector = Collector::Unit("cgroup");
const SECTION: Section = Section::Of(COLLECTOR);

pub const UNIT: Unit = Unit {
    name: "cgroup",
    what: "memory, limit, peak, events and memory pressure per memory cgroup (container)",
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
    ],
    fixes: &[],
    start: || super::stateless(read),
};

/// Memory cgroups with anonymous memory (or OOM kills), by path under the hierarchy root,
/// in path order.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Cgroups(pub Vec<(String, MemoryStat)>);

/// Cgroups walked at most: a deeper tree is counted as malformed and cut.
const MAX_CGROUPS: usize = 10_000;

/// Every memory cgroup's anonymous and huge page memory. cgroup v1 `rss`/`rss_huge` count
/// a cgroup's own processes, so every cgroup with some is reported; v2 counts are
/// hierarchical, so only leaf cgroups are, and no memory is counted twice.
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
    let mut out = Vec::new();
    let mut stack = vec![base.clone()];
    let mut seen = 0;
    while let Some(dir) = stack.pop() {
        seen += 1;
        if seen > MAX_CGROUPS {
            r.count(Reason::Malformed, 1);
            break;
        }
        // A cgroup removed while walking simply has no children and no memory.stat. The
        // listing itself stops at what the walk may still visit.
        let room = MAX_CGROUPS.saturating_sub(seen + stack.len());
        let (children, cut) = r.source.subdirs(&dir, room).unwrap_or_default();
        if cut {
            r.count(Reason::Malformed, 1);
        }
        // A cut listing has children even when none fit: never read as a leaf (v2's
        // counts are hierarchical).
        let has_children = !children.is_empty() || cut;
        stack.extend(children);
        if v2 && has_children {
            continue;
        }
        let mut stat = match r.source.read_path(&dir.join("memory.stat"), r.buf) {
            Ok(text) => match MemoryStat::parse(text) {
                Ok(stat) => stat,
                Err(_) => {
                    r.count(Reason::Malformed, 1);
                    continue;
                }
            },
            // A cgroup removed while walking, or the v2 root without memory.stat.
            Err(ReadError::Gone(_)) => continue,
            Err(e) => {
                r.count(e.system_reason(), 1);
                continue;
            }
        };
        // The OOM counters; a kernel without the file (v1 before 4.13) has none.
        let events = if v2 {
            "memory.events"
        } else {
            "memory.oom_control"
        };
        if let Ok(text) = r.source.read_path(&dir.join(events), r.buf) {
            stat.add_events(text);
        }
        // Headroom: what is charged to the cgroup against its limit.
        let (usage, limit) = if v2 {
            ("memory.current", "memory.max")
        } else {
            ("memory.usage_in_bytes", "memory.limit_in_bytes")
        };
        if let Ok(text) = r.source.read_path(&dir.join(usage), r.buf) {
            stat.add_usage(text);
        }
        if let Ok(text) = r.source.read_path(&dir.join(limit), r.buf) {
            stat.add_limit(text);
        }
        if v2 {
            // Absent before 5.19.
            if let Ok(text) = r.source.read_path(&dir.join("memory.peak"), r.buf) {
                stat.add_peak(text);
            }
            // Absent, or refused to be read, without PSI (psi=0): then no series.
            if let Ok(text) = r.source.read_path(&dir.join("memory.pressure"), r.buf) {
                if stat.add_pressure(text).is_err() {
                    r.count(Reason::Malformed, 1);
                }
            }
        }
        // An empty cgroup is left out, unless the OOM killer emptied it.
        let killed = stat.oom_kills.unwrap_or(0) + stat.limit_ooms.unwrap_or(0) > 0;
        if stat.anon_bytes == 0 && stat.anon_huge_bytes == 0 && !killed {
            continue;
        }
        let rel = dir
            .strip_prefix(&base)
            .map(|p| p.to_string_lossy().into_owned())
            .unwrap_or_default();
        out.push((format!("/{rel}"), stat));
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(Cgroups(out))
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
        ]
    }
}

pub(crate) const CGROUP_INFO: Metric = crate::family::metric!(
    membloat "cgroup",
    Info,
    None,
    ["cgroup", "pod_uid", "container_id", "runtime", "qos_class", "systemd_unit"],
    SECTION,
    "the cgroup path",
    "Who owns a cgroup, read from its path (cgroup v1 and v2, cgroupfs and systemd drivers, containerd, CRI-O and Docker): the pod UID and container ID as kube-state-metrics writes them (the container ID without its runtime:// scheme), the QoS class, or the systemd unit. Only cgroups whose path names one of them.",
);

pub(crate) const CGROUP_ANON_BYTES: Metric = crate::family::metric!(
    membloat "cgroup_anon",
    Gauge,
    Bytes,
    ["cgroup"],
    SECTION,
    "/sys/fs/cgroup/**/memory.stat",
    "Anonymous memory of a memory cgroup (container): memory.stat rss on cgroup v1 (own processes), anon on v2 (leaf cgroups).",
);

pub(crate) const CGROUP_ANON_HUGE_BYTES: Metric = crate::family::metric!(
    membloat "cgroup_anon_huge",
    Gauge,
    Bytes,
    ["cgroup"],
    SECTION,
    "/sys/fs/cgroup/**/memory.stat",
    "Anonymous memory of a memory cgroup in transparent huge pages: memory.stat rss_huge on v1, anon_thp on v2.",
);

pub(crate) const CGROUP_MEMORY_USAGE_BYTES: Metric = crate::family::metric!(
    membloat "cgroup_memory_usage",
    Gauge,
    Bytes,
    ["cgroup"],
    SECTION,
    "/sys/fs/cgroup/**/memory.current, memory.usage_in_bytes",
    "Memory charged to a memory cgroup (container): memory.current on v2, memory.usage_in_bytes on v1; page cache included.",
);

pub(crate) const CGROUP_MEMORY_LIMIT_BYTES: Metric = crate::family::metric!(
    membloat "cgroup_memory_limit",
    Gauge,
    Bytes,
    ["cgroup"],
    SECTION,
    "/sys/fs/cgroup/**/memory.max, memory.limit_in_bytes",
    "The memory cgroup's limit: memory.max on v2, memory.limit_in_bytes on v1; absent when unlimited.",
);

pub(crate) const CGROUP_WORKING_SET_BYTES: Metric = crate::family::metric!(
    membloat "cgroup_working_set",
    Gauge,
    Bytes,
    ["cgroup"],
    SECTION,
    "/sys/fs/cgroup/**/memory.stat, memory.current, memory.usage_in_bytes",
    "Usage less inactive page cache (inactive_file on v2, total_inactive_file on v1): the working set the kubelet evicts by and kubectl top shows; near the limit, the OOM killer is near.",
);

pub(crate) const CGROUP_HOARDED_BYTES: Metric = crate::family::metric!(
    membloat "cgroup_hoarded",
    Gauge,
    Bytes,
    ["cgroup"],
    SECTION,
    "/proc/PID/mem, pagemap, cgroup (the heap walk)",
    "Freed memory the glibc allocators of the cgroup's processes hold and malloc_trim would return, measured by the heap walk and summed by memory cgroup (cgroups with some only): the share of a container's usage its allocators would give back; at most that usage.",
);

pub(crate) const CGROUP_RUNTIME_HELD_BYTES: Metric = crate::family::metric!(
    membloat "cgroup_runtime_held",
    Gauge,
    Bytes,
    ["cgroup", "runtime"],
    SECTION,
    "/proc/PID/mem (hsperfdata, libjvm, Go's runtime, jemalloc's and pymalloc's arenas), pagemap, cgroup",
    "Resident memory a managed runtime or jemalloc holds unused, summed by memory cgroup (runtime=\"jvm\", \"go\", \"jemalloc\" or \"python\"): its share of membloat_cgroup_hoarded_bytes; at most the cgroup's usage. Only cgroups with such a process.",
);

pub(crate) const CGROUP_LAZY_FREE_BYTES: Metric = crate::family::metric!(
    membloat "cgroup_lazy_free",
    Gauge,
    Bytes,
    ["cgroup"],
    SECTION,
    "/proc/PID/smaps_rollup LazyFree, cgroup",
    "Memory the cgroup's processes freed with MADV_FREE (their LazyFree), summed by memory cgroup over the processes the deep tier read (cgroups with some only): charged to the cgroup and in its usage until the kernel reclaims it under pressure, without swap; at most that usage.",
);

pub(crate) const CGROUP_OOM_KILLS_TOTAL: Metric = crate::family::metric!(
    membloat "cgroup_oom_kills",
    Counter,
    None,
    ["cgroup"],
    SECTION,
    "/sys/fs/cgroup/**/memory.events, memory.oom_control",
    "Processes of the cgroup killed by the OOM killer, for the host's OOM or the cgroup's limit alike (memory.events oom_kill on v2, memory.oom_control oom_kill on v1).",
);

pub(crate) const CGROUP_LIMIT_OOMS_TOTAL: Metric = crate::family::metric!(
    membloat "cgroup_limit_ooms",
    Counter,
    None,
    ["cgroup"],
    SECTION,
    "/sys/fs/cgroup/**/memory.events",
    "Times the cgroup reached its memory limit and the OOM killer ran inside it (memory.events oom; cgroup v2 only): OOM kills of a container's own limit, not the host's.",
);

pub(crate) const CGROUP_OOM_GROUP_KILLS_TOTAL: Metric = crate::family::metric!(
    membloat "cgroup_oom_group_kills",
    Counter,
    None,
    ["cgroup"],
    SECTION,
    "/sys/fs/cgroup/**/memory.events",
    "Times the OOM killer killed the cgroup's processes all at once because memory.oom.group is set, as Kubernetes 1.28+ does for containers on cgroup v2 (memory.events oom_group_kill; kernel 5.17+): each victim still counts in membloat_cgroup_oom_kills_total.",
);

pub(crate) const CGROUP_MEMORY_PEAK_BYTES: Metric = crate::family::metric!(
    membloat "cgroup_memory_peak",
    Gauge,
    Bytes,
    ["cgroup"],
    SECTION,
    "/sys/fs/cgroup/**/memory.peak",
    "The most memory ever charged to a memory cgroup since it was made (memory.peak; cgroup v2 on kernel 5.19+, absent before): how close a container came to its limit between two scrapes.",
);

pub(crate) const CGROUP_MEMORY_HIGH_EVENTS_TOTAL: Metric = crate::family::metric!(
    membloat "cgroup_memory_high_events",
    Counter,
    None,
    ["cgroup"],
    SECTION,
    "/sys/fs/cgroup/**/memory.events",
    "Times the cgroup's usage went over memory.high and its tasks were throttled and made to reclaim (memory.events high; cgroup v2 only).",
);

pub(crate) const CGROUP_MEMORY_MAX_EVENTS_TOTAL: Metric = crate::family::metric!(
    membloat "cgroup_memory_max_events",
    Counter,
    None,
    ["cgroup"],
    SECTION,
    "/sys/fs/cgroup/**/memory.events",
    "Times the cgroup's usage was about to go over memory.max and it had to reclaim first (memory.events max; cgroup v2 only); an OOM kill inside it follows when reclaim fails.",
);

pub(crate) const CGROUP_PRESSURE_MEMORY_WAITING_SECONDS_TOTAL: Metric = crate::family::metric!(
    membloat "cgroup_pressure_memory_waiting",
    Counter,
    Seconds,
    ["cgroup"],
    SECTION,
    "/sys/fs/cgroup/**/memory.pressure some",
    "Time in which at least one task of the cgroup stalled on memory (memory.pressure some; cgroup v2 with PSI, absent when booted psi=0): a container reclaiming near its limit stalls here before it is OOM-killed.",
);

pub(crate) const CGROUP_PRESSURE_MEMORY_STALLED_SECONDS_TOTAL: Metric = crate::family::metric!(
    membloat "cgroup_pressure_memory_stalled",
    Counter,
    Seconds,
    ["cgroup"],
    SECTION,
    "/sys/fs/cgroup/**/memory.pressure full",
    "Time in which all non-idle tasks of the cgroup stalled on memory at once (memory.pressure full; cgroup v2 with PSI).",
);
