//! The balance sheet: memory as rows that partition a total, each byte in one row, and
//! what no counter names in the last row, `unexplained` (signed: negative where two
//! counters hold the same pages). The host's total is `MemTotal`, its rows come from one
//! read of `/proc/meminfo` (with the per-CPU free lists of `/proc/zoneinfo` and the socket
//! buffers `/proc/net/sockstat` counts), and the
//! anonymous memory the heap readers measured as held is split out by reader
//! (docs/balance-sheet.md: each row's formula, and the overlaps per kernel).

use std::collections::BTreeMap;

use crate::parse::meminfo::Meminfo;

/// The last row: `total` less every other row.
pub(crate) const UNEXPLAINED: &str = "unexplained";

/// What a heap reader measured as held over the processes, in their anonymous memory and
/// in their shared memory.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Held {
    pub anon: u64,
    pub shmem: u64,
}

impl Held {
    pub fn add(&mut self, anon: u64, shmem: u64) {
        self.anon = self.anon.saturating_add(anon);
        self.shmem = self.shmem.saturating_add(shmem);
    }
}

/// Memory the processes gave back with `MADV_FREE` (their `LazyFree`), summed over them:
/// anonymous pages the kernel keeps on the inactive file list until it needs them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LazyFree {
    /// All of it.
    pub all: u64,
    /// What no reader counts as held (each process's LazyFree beyond its held bytes, for
    /// a reader whose held pages may be lazily freed; all of it for the others).
    pub unheld: u64,
}

impl LazyFree {
    /// Adds a process's `LazyFree`, of which the part in the held bytes of the reader
    /// that measured it (`held`: its name and bytes) is not counted again.
    pub fn add(&mut self, lazy: u64, held: Option<(&str, u64)>) {
        self.all = self.all.saturating_add(lazy);
        self.unheld = self.unheld.saturating_add(unheld(lazy, held));
    }
}

/// What of a process's `lazy` bytes of `LazyFree` its reader's held bytes (`held`) do not
/// count: those of a reader whose held pages may be lazily freed are taken as inside them
/// as far as they go (jemalloc's muzzy pages are both).
pub fn unheld(lazy: u64, held: Option<(&str, u64)>) -> u64 {
    let inside = held
        .filter(|(reader, _)| crate::heap::list::holds_lazy_free(reader))
        .map_or(0, |(_, bytes)| bytes.min(lazy));
    lazy - inside
}

/// Each reader's share of at most `pool` bytes: its `part`, scaled down in proportion
/// when the parts sum past the pool (processes that share pages count them each), and the
/// sum taken.
fn within(
    held: &BTreeMap<&'static str, Held>,
    part: fn(&Held) -> u64,
    pool: u64,
) -> (Vec<u64>, u64) {
    let sum: u128 = held.values().map(|h| u128::from(part(h))).sum();
    let scaled: Vec<u64> = held
        .values()
        .map(|h| {
            let p = u128::from(part(h));
            if sum > u128::from(pool) {
                u64::try_from(p * u128::from(pool) / sum).unwrap_or(pool)
            } else {
                part(h)
            }
        })
        .collect();
    let taken = scaled.iter().fold(0u64, |a, &b| a.saturating_add(b));
    (scaled, taken)
}

/// Rows in the order of the exposition; `unexplained` last.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Sheet {
    pub total: u64,
    pub rows: Vec<(String, i64)>,
}

impl Sheet {
    /// A row's bytes (`None`: the sheet has no such row on this kernel).
    pub fn row(&self, name: &str) -> Option<i64> {
        self.rows.iter().find(|(n, _)| n == name).map(|r| r.1)
    }

    /// Appends the `unexplained` row: what the total holds beyond the rows so far.
    fn close(mut self) -> Sheet {
        let named: i128 = self.rows.iter().map(|r| i128::from(r.1)).sum();
        let rest = i128::from(self.total) - named;
        let rest = i64::try_from(rest).unwrap_or(if rest < 0 { i64::MIN } else { i64::MAX });
        self.rows.push((UNEXPLAINED.to_string(), rest));
        self
    }

    fn push(&mut self, name: &str, bytes: u64) {
        self.rows
            .push((name.to_string(), i64::try_from(bytes).unwrap_or(i64::MAX)));
    }
}

/// Whether kernel stacks are allocated with vmalloc (`CONFIG_VMAP_STACK`): the default
/// on x86-64 and arm64 since 4.9 and 4.14, set by every distribution's kernel; `VmallocUsed`
/// then counts them too.
const VMAP_STACK: bool = cfg!(any(target_arch = "x86_64", target_arch = "aarch64"));

/// The host's sheet, from `meminfo`, what each heap reader measured as held (resident
/// bytes, summed over the processes, by reader, in anonymous and in shared memory) and
/// the processes' `LazyFree`. `None` without the fields every kernel has (`MemTotal`, `MemFree`,
/// `AnonPages`, `Buffers`, `Cached`, `Shmem`).
pub fn host(
    m: &Meminfo,
    held: &BTreeMap<&'static str, Held>,
    lazy: LazyFree,
    page: u64,
) -> Option<Sheet> {
    let f = |k: &str| m.field(k);
    let total = m.mem_total_bytes?;
    let anon = m.anon_pages_bytes?;
    let (buffers, cached, shmem) = (f("Buffers")?, f("Cached")?, f("Shmem")?);
    let mut s = Sheet {
        total,
        rows: Vec::new(),
    };
    s.push("free", m.mem_free_bytes?);
    // Free pages on the per-CPU lists: outside MemFree, inside MemTotal.
    if let Some(p) = &m.pagesets {
        s.push("free_percpu", p.free_pages.saturating_mul(page));
    }
    // Anonymous memory mapped by processes, less what their allocators and runtimes hold
    // free; and shared memory less what a runtime holds free there (a ZGC heap). Each
    // reader's figure was checked against its process's resident memory; pages shared by
    // processes count in each, so the sums are held within the kernel's counts.
    let (anon_parts, held_anon) = within(held, |h| h.anon, anon);
    let (shmem_parts, held_shmem) = within(held, |h| h.shmem, shmem);
    // Pages freed with MADV_FREE that no reader counts: still anonymous (AnonPages), the
    // kernel's to take back without swap.
    let lazy_free = lazy.unheld.min(anon - held_anon);
    s.push("anon_live", anon - held_anon - lazy_free);
    for ((reader, _), (a, sh)) in held.iter().zip(anon_parts.iter().zip(&shmem_parts)) {
        s.push(&format!("anon_held_{reader}"), a.saturating_add(*sh));
    }
    s.push("anon_lazy_free", lazy_free);
    // tmpfs, memfds, SysV segments and shared anonymous memory: `Shmem`, which `Cached`
    // also counts.
    s.push("shmem", shmem - held_shmem);
    // The page cache without shmem, buffers included; on the file LRU lists or neither
    // (ramfs, mlocked files, pages between lists). Lazily freed anonymous pages are on
    // the file lists too (4.12+: inactive, unless touched since), and not page cache.
    let cache = cached.saturating_sub(shmem).saturating_add(buffers);
    let (active_lru, inactive_lru) = (
        f("Active(file)").unwrap_or(0),
        f("Inactive(file)").unwrap_or(0),
    );
    let lazy_inactive = lazy.all.min(inactive_lru);
    let lazy_active = (lazy.all - lazy_inactive).min(active_lru);
    let active = (active_lru - lazy_active).min(cache);
    let inactive = (inactive_lru - lazy_inactive).min(cache - active);
    s.push("page_cache_active", active);
    s.push("page_cache_inactive", inactive);
    s.push("page_cache_other", cache - active - inactive);
    let optional = |s: &mut Sheet, row: &str, v: Option<u64>| {
        if let Some(v) = v {
            s.push(row, v);
        }
    };
    optional(&mut s, "swap_cache", f("SwapCached"));
    let sreclaimable = f("SReclaimable");
    optional(&mut s, "slab_reclaimable", sreclaimable);
    optional(&mut s, "slab_unreclaimable", f("SUnreclaim"));
    // KReclaimable (4.20+) is SReclaimable and other kernel memory the shrinkers free.
    optional(
        &mut s,
        "kernel_reclaimable_other",
        f("KReclaimable").map(|k| k.saturating_sub(sreclaimable.unwrap_or(0))),
    );
    let stacks = f("KernelStack");
    optional(&mut s, "kernel_stacks", stacks);
    optional(&mut s, "page_tables", m.page_tables_bytes);
    optional(&mut s, "page_tables_secondary", f("SecPageTables"));
    // VmallocUsed (real since 5.3; 0 from 4.4 to 5.2) counts vmalloc'd stacks too.
    let vmalloc = f("VmallocUsed").map(|v| {
        if VMAP_STACK {
            v.saturating_sub(stacks.unwrap_or(0))
        } else {
            v
        }
    });
    optional(&mut s, "vmalloc", vmalloc);
    optional(&mut s, "percpu", f("Percpu"));
    // hugetlbfs pages of every size (Hugetlb, 4.16+), of which the default size's free
    // pages are free (reserved or not); no other row counts them.
    let size = f("Hugepagesize").unwrap_or(0);
    let pages = |k: &str| f(k).map(|n| n.saturating_mul(size));
    let huge = m.hugetlb_bytes.or_else(|| pages("HugePages_Total"));
    if let Some(huge) = huge {
        let free = pages("HugePages_Free").unwrap_or(0).min(huge);
        s.push("hugetlb_used", huge - free);
        s.push("hugetlb_free", free);
    }
    optional(&mut s, "zswap", f("Zswap"));
    optional(&mut s, "balloon", f("Balloon"));
    // Socket buffers are page fragments no counter above names (their small heads are
    // slab): at most what the rows so far leave unexplained.
    if let Some(sockets) = &m.sockets {
        let named: i128 = s.rows.iter().map(|r| i128::from(r.1)).sum();
        let left = u64::try_from(i128::from(total) - named).unwrap_or(0);
        s.push("sockets", sockets.bytes(page).min(left));
    }
    Some(s.close())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse::sockstat::Sockstat;

    /// This machine's meminfo (kernel 6.18, 24 GiB, no swap), as read while writing this.
    const KERNEL_6_18: &str = "MemTotal:       24684092 kB\nMemFree:         7837112 kB\n\
        MemAvailable:   24016264 kB\nBuffers:          473552 kB\nCached:         15591868 kB\n\
        SwapCached:            0 kB\nActive:         10487364 kB\nInactive:        5572692 kB\n\
        Active(anon):       1552 kB\nInactive(anon):     1940 kB\nActive(file):   10485812 kB\n\
        Inactive(file):  5570752 kB\nUnevictable:        9788 kB\nMlocked:            8220 kB\n\
        SwapTotal:             0 kB\nSwapFree:              0 kB\nZswap:                 0 kB\n\
        Zswapped:              0 kB\nDirty:               208 kB\nWriteback:             0 kB\n\
        AnonPages:          4432 kB\nMapped:            10080 kB\nShmem:              8856 kB\n\
        KReclaimable:     573020 kB\nSlab:             673272 kB\nSReclaimable:     573020 kB\n\
        SUnreclaim:       100252 kB\nKernelStack:        1232 kB\nPageTables:         2092 kB\n\
        SecPageTables:         0 kB\nNFS_Unstable:          0 kB\nBounce:                0 kB\n\
        WritebackTmp:          0 kB\nCommitLimit:    12342044 kB\nCommitted_AS:      43044 kB\n\
        VmallocTotal:   34359738367 kB\nVmallocUsed:        5508 kB\nVmallocChunk:          0 kB\n\
        Percpu:             1384 kB\nAnonHugePages:         0 kB\nShmemHugePages:        0 kB\n\
        ShmemPmdMapped:        0 kB\nFileHugePages:    724992 kB\nFilePmdMapped:         0 kB\n\
        Balloon:               0 kB\nHugePages_Total:       4\nHugePages_Free:        3\n\
        HugePages_Rsvd:        1\nHugePages_Surp:        0\nHugepagesize:       2048 kB\n\
        Hugetlb:            8192 kB\nDirectMap4k:       20480 kB\n";

    fn kib(n: i64) -> i64 {
        n * 1024
    }

    #[test]
    fn the_rows_partition_memtotal_and_each_is_its_field() {
        let mut m = Meminfo::parse(KERNEL_6_18).unwrap();
        m.sockets = Some(Sockstat {
            tcp_pages: Some(10),
            udp_pages: Some(0),
            frag_bytes: Some(0),
        });
        m.pagesets = Some(crate::parse::zoneinfo::Pagesets {
            free_pages: 100,
            threshold_max: 36,
            cpus: 2,
        });
        let held = BTreeMap::from([
            (
                "glibc",
                Held {
                    anon: 1024 * 1024,
                    shmem: 0,
                },
            ),
            (
                "jvm",
                Held {
                    anon: 512 * 1024,
                    shmem: 1024 * 1024,
                },
            ),
        ]);
        let s = host(&m, &held, LazyFree::default(), 4096).unwrap();
        assert_eq!(s.row("free_percpu"), Some(409600));
        let sum: i64 = s.rows.iter().map(|r| r.1).sum();
        assert_eq!(sum, kib(24684092), "{s:?}");
        assert_eq!(s.row("free"), Some(kib(7837112)));
        assert_eq!(s.row("anon_live"), Some(kib(4432 - 1024 - 512)));
        assert_eq!(s.row("anon_held_glibc"), Some(kib(1024)));
        // The JVM's held heap: 512 KiB anonymous and 1 MiB in a memfd (ZGC).
        assert_eq!(s.row("anon_held_jvm"), Some(kib(512 + 1024)));
        assert_eq!(s.row("shmem"), Some(kib(8856 - 1024)));
        assert_eq!(s.row("page_cache_active"), Some(kib(10485812)));
        assert_eq!(s.row("page_cache_inactive"), Some(kib(5570752)));
        // Cached - Shmem + Buffers is exactly the file LRU here.
        assert_eq!(s.row("page_cache_other"), Some(0));
        assert_eq!(s.row("slab_reclaimable"), Some(kib(573020)));
        assert_eq!(s.row("kernel_reclaimable_other"), Some(0));
        assert_eq!(s.row("vmalloc"), Some(kib(5508 - 1232)));
        assert_eq!(s.row("hugetlb_used"), Some(kib(2048)));
        assert_eq!(s.row("hugetlb_free"), Some(kib(3 * 2048)));
        assert_eq!(s.row("sockets"), Some(40960));
        assert_eq!(s.rows.last().unwrap().0, UNEXPLAINED);
    }

    /// A kernel before 4.16 (no Hugetlb, KReclaimable, Percpu is there) and no sockstat:
    /// those rows are absent, the sum still exact; and where counters overlap (held more
    /// than the anonymous memory), the unexplained row goes negative rather than the sum
    /// wrong.
    #[test]
    fn older_kernels_lose_rows_never_the_sum() {
        let text = "MemTotal: 1000 kB\nMemFree: 100 kB\nBuffers: 10 kB\nCached: 300 kB\n\
                    Shmem: 50 kB\nAnonPages: 200 kB\nSlab: 90 kB\nSReclaimable: 60 kB\n\
                    SUnreclaim: 30 kB\nPageTables: 5 kB\nHugePages_Total: 2\n\
                    HugePages_Free: 2\nHugepagesize: 2048 kB\n";
        let m = Meminfo::parse(text).unwrap();
        let s = host(&m, &BTreeMap::new(), LazyFree::default(), 4096).unwrap();
        assert_eq!(s.row("kernel_reclaimable_other"), None);
        assert_eq!(s.row("sockets"), None);
        assert_eq!(s.row("free_percpu"), None);
        assert_eq!(s.row("hugetlb_free"), Some(kib(4096)));
        let sum: i64 = s.rows.iter().map(|r| r.1).sum();
        assert_eq!(sum, kib(1000));
        assert!(s.row(UNEXPLAINED).unwrap() < 0, "{s:?}");
        // Held sums past the kernel's counts (processes sharing the pages they hold) are
        // scaled to them, each reader in proportion.
        let held = BTreeMap::from([
            (
                "go",
                Held {
                    anon: 300 << 10,
                    shmem: 0,
                },
            ),
            (
                "jemalloc",
                Held {
                    anon: 100 << 10,
                    shmem: 100 << 10,
                },
            ),
        ]);
        let s = host(&m, &held, LazyFree::default(), 4096).unwrap();
        assert_eq!(s.row("anon_live"), Some(0));
        assert_eq!(s.row("anon_held_go"), Some(kib(150)));
        assert_eq!(s.row("anon_held_jemalloc"), Some(kib(50 + 50)));
        assert_eq!(s.row("shmem"), Some(0));
        assert_eq!(s.rows.iter().map(|r| r.1).sum::<i64>(), kib(1000));
    }

    /// Lazily freed pages are anonymous memory the kernel lists with the inactive file
    /// pages: their own row, out of the anonymous memory, and not page cache; those a
    /// reader counts as held stay in its row.
    #[test]
    fn lazily_freed_pages_are_anonymous_not_page_cache() {
        let text = "MemTotal: 1000 kB\nMemFree: 100 kB\nBuffers: 0 kB\nCached: 300 kB\n\
                    Shmem: 0 kB\nAnonPages: 400 kB\nActive(file): 100 kB\n\
                    Inactive(file): 260 kB\n";
        let m = Meminfo::parse(text).unwrap();
        let held = BTreeMap::from([(
            "jemalloc",
            Held {
                anon: 50 << 10,
                shmem: 0,
            },
        )]);
        let lazy = LazyFree {
            all: 80 << 10,
            unheld: 60 << 10,
        };
        let s = host(&m, &held, lazy, 4096).unwrap();
        assert_eq!(s.row("anon_lazy_free"), Some(kib(60)));
        assert_eq!(s.row("anon_held_jemalloc"), Some(kib(50)));
        assert_eq!(s.row("anon_live"), Some(kib(400 - 50 - 60)));
        assert_eq!(s.row("page_cache_active"), Some(kib(100)));
        assert_eq!(s.row("page_cache_inactive"), Some(kib(260 - 80)));
        assert_eq!(s.row("page_cache_other"), Some(kib(300 - 100 - 180)));
        assert_eq!(s.rows.iter().map(|r| r.1).sum::<i64>(), kib(1000));
        // Before: the 80 KiB were inactive page cache and anonymous memory both.
        let before = host(&m, &held, LazyFree::default(), 4096).unwrap();
        assert_eq!(before.row("page_cache_inactive"), Some(kib(200)));
        assert_eq!(before.row("page_cache_other"), Some(0));
    }

    #[test]
    fn without_the_fields_every_kernel_has_there_is_no_sheet() {
        let m = Meminfo::parse("MemTotal: 1000 kB\nMemFree: 100 kB\n").unwrap();
        assert_eq!(host(&m, &BTreeMap::new(), LazyFree::default(), 4096), None);
    }
}
