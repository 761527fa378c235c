//! What the `sysctl` and `thp` collectors read: the `/proc/sys/vm` settings, and the THP,
//! khugepaged and per-size huge page settings and counters under `/sys`.

use std::time::Duration;

/// `/proc/sys/vm` settings, in bytes and shares.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Sysctl {
    /// `overcommit_memory`: 0 heuristic, 1 always, 2 never (strict accounting).
    pub overcommit_memory: Option<u64>,
    /// `overcommit_ratio` / 100: the share of RAM counted in CommitLimit (when
    /// `overcommit_kbytes` is 0).
    pub overcommit_ratio: Option<f64>,
    /// `overcommit_kbytes`, in bytes.
    pub overcommit_bytes: Option<u64>,
    /// `panic_on_oom`.
    pub panic_on_oom: Option<u64>,
    /// `swappiness`.
    pub swappiness: Option<u64>,
}

/// `/sys/kernel/mm/transparent_hugepage/khugepaged`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Khugepaged {
    pub defrag: Option<u64>,
    pub max_ptes_none: Option<u64>,
    pub max_ptes_swap: Option<u64>,
    pub max_ptes_shared: Option<u64>,
    pub pages_to_scan: Option<u64>,
    /// `scan_sleep_millisecs`: the pause between passes.
    pub scan_sleep: Option<Duration>,
    /// `alloc_sleep_millisecs`: the pause after a failed huge page allocation.
    pub alloc_sleep: Option<Duration>,
    /// Counter: huge pages khugepaged collapsed.
    pub pages_collapsed: Option<u64>,
    /// Counter: full passes over all eligible memory.
    pub full_scans: Option<u64>,
}

/// One `hugepages-<size>kB` directory (kernel 6.8+ multi-size THP).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HugepageSize {
    /// The directory name, e.g. `hugepages-2048kB`, exported as the `size` label (`2048kB`).
    pub label: String,
    pub size_bytes: u64,
    /// `enabled`: always, inherit, madvise or never.
    pub enabled: Option<String>,
    /// Every file under `stats/`, in name order.
    pub stats: Vec<(String, u64)>,
}

/// The THP settings and counters.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Thp {
    pub enabled: Option<String>,
    pub defrag: Option<String>,
    pub shmem_enabled: Option<String>,
    pub khugepaged: Khugepaged,
    pub sizes: Vec<HugepageSize>,
}
