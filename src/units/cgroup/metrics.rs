//! The cgroup unit's families.

use crate::family::{Collector, Metric, Section};

pub const COLLECTOR: Collector = Collector::Unit("cgroup");

const SECTION: Section = Section::Of(COLLECTOR);

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

pub(crate) const CGROUP_MEMORY_BYTES: Metric = crate::family::metric!(
    membloat "cgroup_memory",
    Gauge,
    Bytes,
    ["cgroup", "row"],
    SECTION,
    "/sys/fs/cgroup/**/memory.stat, memory.current, memory.usage_in_bytes, memory.kmem.usage_in_bytes, the heap readers",
    "A memory cgroup's usage as a balance sheet, with the host's rows where both have them: rows that partition memory.current (v2) or memory.usage_in_bytes (v1) and sum to it. anon_live (anon, v1 total_rss, less what the heap readers measured as held in the cgroup's processes and their LazyFree); anon_held_READER; anon_lazy_free; shmem; page_cache_active, page_cache_inactive, page_cache_other (file - shmem by file LRU list); swap_cache; slab_reclaimable, slab_unreclaimable, kernel_stacks, page_tables, page_tables_secondary, vmalloc, percpu, zswap (v2: kernel memory by kind); kernel_other (v2 kernel, 5.18+, less those; v1: memory.kmem.usage_in_bytes, all of it); sockets (v2 sock); unexplained (usage less every row: within the kernel's per-CPU batching, docs/balance-sheet.md). For the cgroups membloat_cgroup_anon_bytes reports.",
);

pub(crate) const CGROUP_REMOVED_DESCENDANTS_BYTES: Metric = crate::family::metric!(
    membloat "cgroup_removed_descendants",
    Gauge,
    Bytes,
    ["cgroup"],
    SECTION,
    "/sys/fs/cgroup/**/memory.current, memory.stat",
    "Memory charged to a cgroup that no live child and no own process holds: what removed descendants (dying cgroups: finished containers, pods, units) still hold, mostly page cache, until reclaim takes it. v2: memory.current less the live children's, where the cgroup can have no process of its own (it has children, or it is an empty leaf with dying descendants). v1: total_rss + total_cache less its own rss + cache and its live children's totals. Every cgroup with children, and any other with some.",
);

pub(crate) const CGROUP_DYING_DESCENDANTS: Metric = crate::family::metric!(
    membloat "cgroup_dying_descendants",
    Gauge,
    None,
    ["cgroup"],
    SECTION,
    "/sys/fs/cgroup/**/cgroup.stat nr_dying_descendants",
    "Removed cgroups below this one that the kernel still keeps, for the memory charged to them (cgroup v2 only): thousands mean memory and kernel structures that page cache keeps alive.",
);

pub(crate) const CGROUP_MEMORY_HIGH_BYTES: Metric = crate::family::metric!(
    membloat "cgroup_memory_high",
    Gauge,
    Bytes,
    ["cgroup"],
    SECTION,
    "/sys/fs/cgroup/**/memory.high",
    "The cgroup's throttling limit: above it its tasks are slowed and made to reclaim (memory.high; cgroup v2; absent when max).",
);

pub(crate) const CGROUP_MEMORY_MIN_BYTES: Metric = crate::family::metric!(
    membloat "cgroup_memory_min",
    Gauge,
    Bytes,
    ["cgroup"],
    SECTION,
    "/sys/fs/cgroup/**/memory.min",
    "Memory the cgroup keeps whatever the pressure: reclaim never takes it below this (memory.min; cgroup v2).",
);

pub(crate) const CGROUP_MEMORY_LOW_BYTES: Metric = crate::family::metric!(
    membloat "cgroup_memory_low",
    Gauge,
    Bytes,
    ["cgroup"],
    SECTION,
    "/sys/fs/cgroup/**/memory.low",
    "Memory reclaim takes from the cgroup only when no unprotected memory is left (memory.low; cgroup v2).",
);

pub(crate) const CGROUP_SWAP_BYTES: Metric = crate::family::metric!(
    membloat "cgroup_swap",
    Gauge,
    Bytes,
    ["cgroup"],
    SECTION,
    "/sys/fs/cgroup/**/memory.swap.current, memory.stat total_swap",
    "Swap the cgroup's memory takes (memory.swap.current on v2, memory.stat total_swap on v1).",
);

pub(crate) const CGROUP_SWAP_LIMIT_BYTES: Metric = crate::family::metric!(
    membloat "cgroup_swap_limit",
    Gauge,
    Bytes,
    ["cgroup"],
    SECTION,
    "/sys/fs/cgroup/**/memory.swap.max",
    "The most swap the cgroup may take (memory.swap.max; cgroup v2; absent when max).",
);

pub(crate) const CGROUP_ZSWAP_BYTES: Metric = crate::family::metric!(
    membloat "cgroup_zswap",
    Gauge,
    Bytes,
    ["cgroup"],
    SECTION,
    "/sys/fs/cgroup/**/memory.zswap.current",
    "Memory the cgroup's compressed pages take in zswap, charged to its usage (memory.zswap.current; cgroup v2, kernel 5.19+).",
);

pub(crate) const CGROUP_ZSWAP_LIMIT_BYTES: Metric = crate::family::metric!(
    membloat "cgroup_zswap_limit",
    Gauge,
    Bytes,
    ["cgroup"],
    SECTION,
    "/sys/fs/cgroup/**/memory.zswap.max",
    "The most zswap the cgroup may take (memory.zswap.max; cgroup v2, kernel 5.19+; absent when max).",
);
