//! "Where the memory went": the host's balance sheet (`model::sheet`), its rows ranked by
//! bytes, each with what it is and, where memory outside the processes' heaps can be got
//! back or must be looked into, what to do; and the owners behind the rows (the `owners`
//! collector's latest read), the largest first, each with what frees it.

use serde::Serialize;

use crate::model::sheet::{Sheet, UNEXPLAINED};
use crate::units::cgroup::Cgroups;
use crate::units::owners::OwnersReading;

/// A row is told in the text when it holds at least this share of the total (every row is
/// in the JSON); `unexplained` always is.
pub(crate) const TOLD_SHARE: f64 = 0.01;

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

/// Owners the text tells at most; the JSON has every one the collector kept.
pub(crate) const OWNERS_TOLD: usize = 8;

/// One holder of memory outside the processes' heaps.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Owner {
    /// `tmpfs`, `memfd`, `deleted`, `sysv`, `slab`, `vmalloc`, `sockets` or
    /// `removed_cgroups`.
    pub kind: &'static str,
    /// The mount point, the memfd's or removed file's name, the segment id, the cache, the
    /// kernel function, the cgroup (another process's choice for files: shown escaped in
    /// the text).
    pub name: String,
    /// The process holding it (a memfd or removed file), its creator (a SysV segment).
    pub pid: Option<u32>,
    pub bytes: u64,
    /// What frees it.
    pub remedy: String,
}

/// The owners of `o`, the largest first.
pub fn owners(o: &OwnersReading) -> Vec<Owner> {
    let mut out = Vec::new();
    for m in &o.mounts {
        let volume = if m.pod.is_empty() {
            String::new()
        } else {
            format!(
                " (pod {} volume {}: counts against the pod's memory limit)",
                m.pod, m.volume
            )
        };
        out.push(Owner {
            kind: "tmpfs",
            name: m.point.clone(),
            pid: None,
            bytes: m.used_bytes,
            remedy: format!("files in RAM{volume}: `du -sh` on the mount names them; deleting what no one needs frees it"),
        });
    }
    for f in &o.files {
        let remedy = match f.kind {
            "memfd" => "a memfd no directory names: freed when its last holder closes it or exits",
            _ => "removed while open, still in RAM: freed when its last holder closes it (`ls -l /proc/PID/fd | grep deleted`)",
        };
        out.push(Owner {
            kind: f.kind,
            name: f.name.clone(),
            pid: Some(f.pid),
            bytes: f.bytes,
            remedy: remedy.into(),
        });
    }
    for s in &o.segments {
        let remedy = if s.attached == 0 {
            format!("no process attaches it: `ipcrm -m {}` frees it", s.shmid)
        } else {
            format!(
                "{} processes attach it: freed when it is removed and the last detaches",
                s.attached
            )
        };
        let bytes = s.rss_bytes.unwrap_or(s.size_bytes);
        out.push(Owner {
            kind: "sysv",
            name: s.shmid.to_string(),
            pid: u32::try_from(s.creator).ok(),
            bytes,
            remedy,
        });
    }
    for (cache, bytes) in &o.slabs {
        let remedy = match (cache.as_str(), o.dentries) {
            ("dentry", Some((_, _, Some(negative)))) => format!("{negative} negative dentries (lookups of missing names), freed under pressure; a count that only grows is a program looking up missing files"),
            _ => "a kernel cache (`slabtop -s c`): the reclaimable ones (inodes, dentries) shrink under pressure; one that grows for ever and does not is a leak to report".into(),
        };
        out.push(Owner {
            kind: "slab",
            name: cache.clone(),
            pid: None,
            bytes: *bytes,
            remedy,
        });
    }
    for (caller, bytes) in &o.vmalloc {
        out.push(Owner {
            kind: "vmalloc",
            name: caller.clone(),
            pid: None,
            bytes: *bytes,
            remedy: "vmalloc'd by this kernel function (`/proc/vmallocinfo`)".into(),
        });
    }
    for n in o
        .namespaces
        .iter()
        .filter(|n| n.send_bytes.saturating_add(n.receive_bytes) > 0)
    {
        out.push(Owner {
            kind: "sockets",
            name: format!("netns {}", n.inode),
            pid: Some(n.pid),
            bytes: n.send_bytes.saturating_add(n.receive_bytes),
            remedy: format!("bytes in the namespace's TCP and UDP queues: `nsenter -t {} -n ss -tm` names the sockets, a receive queue that stays full is a program that does not read", n.pid),
        });
    }
    rank(&mut out);
    out
}

/// Removed cgroups' memory at `MIN_REMOVED` or more, by the parent that holds it: each a
/// holder ranked with the others ([`owners`]).
pub(crate) fn removed_cgroups(c: &Cgroups, v2: bool) -> Vec<Owner> {
    let parents = c.1.iter().map(|(p, b)| (p, &b.bounds));
    let containers = c.0.iter().map(|(p, m)| (p, &m.bounds));
    let reclaim = if v2 {
        "`echo 1G > memory.reclaim` in it (5.19+) reclaims it now"
    } else {
        "`echo 0 > memory.force_empty` in it (no process of its own) reclaims it now"
    };
    containers
        .chain(parents)
        .filter_map(|(path, b)| {
            let bytes = b.removed.filter(|&r| r >= MIN_REMOVED)?;
            let dying = b
                .dying
                .map_or(String::new(), |d| format!(" ({d} dying cgroups below it)"));
            Some(Owner {
                kind: "removed_cgroups",
                name: path.clone(),
                pid: None,
                bytes,
                remedy: format!("charged to cgroups removed below it{dying}, no live child or process holds it (mostly page cache): it counts in this cgroup's usage and the kubelet's working set until reclaim takes it, under pressure or at its limit; {reclaim}"),
            })
        })
        .collect()
}

/// The least removed cgroups' memory named as a holder: less is the kernel's charge
/// batching and pages in flight.
const MIN_REMOVED: u64 = 8 << 20;

/// Owners, the largest first.
pub fn rank(owners: &mut [Owner]) {
    owners.sort_by(|a, b| {
        b.bytes
            .cmp(&a.bytes)
            .then(a.kind.cmp(b.kind))
            .then(a.name.cmp(&b.name))
    });
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

    #[test]
    fn owners_rank_by_bytes_each_with_what_frees_it() {
        use crate::parse::owners::Segment;
        use crate::units::owners::{HeldFile, Mount};
        let segment = |shmid, attached| Segment {
            shmid,
            key: "0".into(),
            size_bytes: 64 << 20,
            creator: 42,
            attached,
            rss_bytes: Some(shmid << 20),
        };
        let o = OwnersReading {
            mounts: vec![Mount {
                point: "/v".into(),
                namespace: 1,
                used_bytes: 5 << 20,
                pod: "uid".into(),
                volume: "cache".into(),
            }],
            files: vec![HeldFile {
                kind: "memfd",
                pid: 9,
                name: "heap".into(),
                bytes: 9 << 20,
            }],
            segments: vec![segment(7, 0), segment(3, 2)],
            slabs: vec![("dentry".into(), 4 << 20)],
            dentries: Some((10, 5, Some(1234))),
            vmalloc: vec![("bpf_prog_alloc".into(), 1 << 20)],
            namespaces: vec![
                crate::units::owners::Netns {
                    inode: 40,
                    pid: 5,
                    send_bytes: 1 << 19,
                    receive_bytes: 1 << 19,
                },
                crate::units::owners::Netns {
                    inode: 41,
                    pid: 6,
                    send_bytes: 0,
                    receive_bytes: 0,
                },
            ],
        };
        let r = owners(&o);
        let order: Vec<(&str, &str)> = r.iter().map(|o| (o.kind, o.name.as_str())).collect();
        assert_eq!(
            order,
            [
                ("memfd", "heap"),
                ("sysv", "7"),
                ("tmpfs", "/v"),
                ("slab", "dentry"),
                ("sysv", "3"),
                ("sockets", "netns 40"),
                ("vmalloc", "bpf_prog_alloc")
            ]
        );
        assert_eq!((r[0].pid, r[0].bytes), (Some(9), 9 << 20));
        assert!(r[1].remedy.contains("ipcrm -m 7"), "{:?}", r[1]);
        assert!(!r[4].remedy.contains("ipcrm"), "{:?}", r[4]);
        assert!(r[2].remedy.contains("pod uid volume cache"), "{:?}", r[2]);
        assert!(r[3].remedy.contains("1234 negative"), "{:?}", r[3]);
        assert!(r[5].remedy.contains("nsenter -t 5 -n"), "{:?}", r[5]);
    }
}
