//! The kubelet unit's families.

use crate::family::{Collector, Metric, Section};

pub const COLLECTOR: Collector = Collector::Unit("kubelet");

const SECTION: Section = Section::Of(COLLECTOR);

pub(crate) const KUBELET_INFO: Metric = crate::family::metric!(
    membloat "kubelet",
    Info,
    None,
    ["pid", "thresholds_from", "pods_cgroup"],
    SECTION,
    "/proc/PID/cmdline, the kubelet's --config file and --config-dir drop-ins",
    "The node's kubelet (a process named kubelet outside every pod's cgroup): where its eviction thresholds came from (config: its configuration file and drop-ins, with the kubelet's default memory.available<100Mi where the file sets no evictionHard; flags: --eviction-hard or --eviction-soft; none: neither, so no hard threshold) and the pods' cgroup it evicts on. Read again when the kubelet restarts.",
);

pub(crate) const KUBELET_MEMORY_AVAILABLE_BYTES: Metric = crate::family::metric!(
    membloat "kubelet_memory_available",
    Gauge,
    Bytes,
    ["signal"],
    SECTION,
    "/proc/meminfo, /sys/fs/cgroup/memory.stat, memory.usage_in_bytes; the pods' cgroup's memory.max, memory.limit_in_bytes, memory.current",
    "The kubelet's eviction signal, by its formula (docs/eviction.md): memory.available = MemTotal less the root cgroup's working set; allocatableMemory.available = the pods' cgroup's limit less its working set. A working set is usage less inactive file pages; the root's usage is memory.usage_in_bytes on cgroup v1 and anon + file of its memory.stat on v2 (as runc computes it: no kernel memory). Negative when the working set is above the capacity.",
);

pub(crate) const KUBELET_MEMORY_CAPACITY_BYTES: Metric = crate::family::metric!(
    membloat "kubelet_memory_capacity",
    Gauge,
    Bytes,
    ["signal"],
    SECTION,
    "/proc/meminfo, the pods' cgroup's memory.max, memory.limit_in_bytes",
    "What the signal's percentages are of: MemTotal for memory.available, the pods' cgroup's limit for allocatableMemory.available.",
);

pub(crate) const KUBELET_WORKING_SET_BYTES: Metric = crate::family::metric!(
    membloat "kubelet_working_set",
    Gauge,
    Bytes,
    ["signal", "part"],
    SECTION,
    "/sys/fs/cgroup/**/memory.stat",
    "The working set the kubelet subtracts, in parts that sum to it: active_file (page cache on the active list, which the kernel reclaims under pressure before the kubelet would evict: kubernetes/kubernetes#43916), slab_reclaimable (where the usage counts slab: a v2 pods' cgroup), and other (anonymous memory, shmem, kernel memory: what eviction or an OOM kill would have to free).",
);

pub(crate) const KUBELET_EVICTION_THRESHOLD_BYTES: Metric = crate::family::metric!(
    membloat "kubelet_eviction_threshold",
    Gauge,
    Bytes,
    ["signal", "kind"],
    SECTION,
    "the kubelet's evictionHard, evictionSoft (--eviction-hard, --eviction-soft)",
    "The kubelet's memory eviction threshold (kind hard or soft), in bytes (a percentage resolved against the capacity as the kubelet does). allocatableMemory.available has the hard memory.available threshold where enforceNodeAllocatable has pods, as the kubelet copies it.",
);

pub(crate) const KUBELET_EVICTION_HEADROOM_BYTES: Metric = crate::family::metric!(
    membloat "kubelet_eviction_headroom",
    Gauge,
    Bytes,
    ["signal", "kind"],
    SECTION,
    "membloat_kubelet_memory_available_bytes less membloat_kubelet_eviction_threshold_bytes",
    "How far the signal is above its threshold: below 0 the kubelet has met it (it sets MemoryPressure at its next housekeeping, every 10 s, and evicts at once for hard, after the grace period for soft).",
);
