//! "Where the memory went": the host's balance sheet (`model::sheet`), its rows ranked by
//! bytes, each with what it is and, where memory outside the processes' heaps can be got
//! back or must be looked into, what to do.

use serde::Serialize;

use crate::model::sheet::{Sheet, UNEXPLAINED};

/// A row is told in the text when it holds at least this share of the total (every row is
/// in the JSON); `unexplained` always is.
pub const TOLD_SHARE: f64 = 0.01;

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Row {
    /// The row's name, as `membloat_host_memory_bytes{row}` labels it.
    pub row: String,
    /// Signed: `unexplained` is negative where counters overlap.
    pub bytes: i64,
    /// Of `MemTotal`.
    pub share: f64,
    /// What it is and what to do about it.
    pub note: &'static str,
}

/// The sheet's rows, the largest first (`unexplained` by its size, whatever its sign).
pub fn rows(sheet: &Sheet) -> Vec<Row> {
    let total = sheet.total.max(1) as f64;
    let mut rows: Vec<Row> = sheet
        .rows
        .iter()
        .map(|(row, bytes)| Row {
            row: row.clone(),
            bytes: *bytes,
            share: *bytes as f64 / total,
            note: note(row),
        })
        .collect();
    rows.sort_by(|a, b| {
        b.bytes
            .unsigned_abs()
            .cmp(&a.bytes.unsigned_abs())
            .then(a.row.cmp(&b.row))
    });
    rows
}

/// Whether the text tells the row.
pub fn told(r: &Row) -> bool {
    r.row == UNEXPLAINED || r.share >= TOLD_SHARE
}

fn note(row: &str) -> &'static str {
    if row.starts_with("anon_held_") {
        return "freed heap its allocator or runtime keeps: the findings name the processes and the remedy";
    }
    match row {
        "free" | "free_percpu" => "unused",
        "anon_live" => "processes' anonymous memory in use",
        "shmem" => "tmpfs and /dev/shm files, memfds, SysV segments, shared anonymous memory: no process's RSS shows a file nobody maps; `df -t tmpfs` and `ipcs -m` list them, deleting the file or `ipcrm` a segment no process attaches frees it",
        "page_cache_active" | "page_cache_inactive" => "file pages the kernel gives back under pressure (inactive first)",
        "page_cache_other" => "file pages on no LRU list: ramfs files and mlocked files stay until removed or unlocked",
        "swap_cache" => "pages read back from swap that keep their slot",
        "slab_reclaimable" => "dentries and inodes, freed under pressure; negative dentries from lookups of missing files can grow it for ever: `slabtop -s c` names the cache",
        "slab_unreclaimable" => "kernel objects freed only by their owners; one cache that keeps growing (`slabtop -s c`) is a leak to report",
        "kernel_reclaimable_other" => "other kernel memory the shrinkers free under pressure",
        "kernel_stacks" => "16 KiB per thread: many blocked threads",
        "page_tables" | "page_tables_secondary" => "page tables: large or sparse address spaces; huge pages shrink them",
        "vmalloc" => "vmalloc areas: modules, BPF maps and programs (`/proc/vmallocinfo` names the callers)",
        "percpu" => "per-CPU allocations (a cgroup left behind holds some)",
        "hugetlb_used" => "hugetlbfs pages in use",
        "hugetlb_free" => "a reserved huge page pool not in use: no one else can have it; lower vm.nr_hugepages if it stays free",
        "zswap" => "compressed swapped-out pages in RAM",
        "balloon" => "given back to the hypervisor",
        "sockets" => "socket queues: `ss -tm` names sockets whose receiver does not read",
        _ => "memory no counter names (drivers, GPUs, per-CPU lists moving); growth that does not come back is a leak to report with /proc/vmallocinfo and /proc/slabinfo beside it",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_rank_by_size_whatever_the_sign_and_small_ones_are_not_told() {
        let sheet = Sheet {
            total: 1000,
            rows: vec![
                ("free".into(), 500),
                ("shmem".into(), 300),
                ("percpu".into(), 5),
                ("page_cache_active".into(), 395),
                (UNEXPLAINED.into(), -200),
            ],
        };
        let r = rows(&sheet);
        let names: Vec<&str> = r.iter().map(|r| r.row.as_str()).collect();
        assert_eq!(
            names,
            ["free", "page_cache_active", "shmem", UNEXPLAINED, "percpu"]
        );
        assert_eq!(r[2].share, 0.3);
        assert!(r[2].note.contains("ipcrm"));
        let told: Vec<bool> = r.iter().map(told).collect();
        assert_eq!(told, [true, true, true, true, false]);
    }
}
