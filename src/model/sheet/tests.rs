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

/// A v2 cgroup's rows are its memory.stat's counters; kernel memory beyond its named
/// parts is `kernel_other`, vmalloc'd stacks are not counted twice, and the rows sum to
/// memory.current.
#[test]
fn a_v2_cgroups_rows_partition_its_usage() {
    let text = "anon 104857600\nfile 73400320\nkernel 9437184\nkernel_stack 327680\n\
                pagetables 1048576\nsec_pagetables 0\npercpu 262144\nsock 4096\n\
                vmalloc 655360\nshmem 16777216\nzswap 0\nfile_mapped 0\nswapcached 0\n\
                inactive_anon 0\nactive_anon 0\ninactive_file 50331648\n\
                active_file 6291456\nslab_reclaimable 5242880\n\
                slab_unreclaimable 1572864\n";
    let mut m = MemoryStat::parse(text).unwrap();
    m.add_usage("188743680\n");
    let held = BTreeMap::from([(
        "go",
        Held {
            anon: 8 << 20,
            shmem: 0,
        },
    )]);
    let s = cgroup(&m, &held, LazyFree::default()).unwrap();
    assert_eq!(s.total, 188743680);
    assert_eq!(s.row("anon_live"), Some(92 << 20));
    assert_eq!(s.row("anon_held_go"), Some(8 << 20));
    assert_eq!(s.row("shmem"), Some(16 << 20));
    assert_eq!(s.row("page_cache_active"), Some(6 << 20));
    assert_eq!(s.row("page_cache_inactive"), Some(48 << 20));
    assert_eq!(s.row("page_cache_other"), Some(0));
    let stacks_outside = if VMAP_STACK { 655360 - 327680 } else { 655360 };
    assert_eq!(s.row("vmalloc"), Some(stacks_outside));
    let kernel_parts = 5242880 + 1572864 + 327680 + 1048576 + stacks_outside + 262144;
    assert_eq!(s.row("kernel_other"), Some(9437184 - kernel_parts));
    assert_eq!(s.row("sockets"), Some(4096));
    assert_eq!(s.row("hugetlb_used"), None, "no cgroup row");
    let named: i64 = 104857600 + 73400320 + 9437184 + 4096;
    assert_eq!(s.row(UNEXPLAINED), Some(188743680 - named));
    assert_eq!(s.rows.iter().map(|r| r.1).sum::<i64>(), 188743680);
}

/// v1's sheet reads the hierarchical `total_` counters and its kernel memory whole; no
/// usage, no sheet.
#[test]
fn a_v1_cgroups_sheet_is_its_totals_and_its_kernel_memory() {
    let text = "cache 0\nrss 0\ntotal_cache 3763679232\ntotal_rss 164487168\n\
                total_shmem 9166848\ntotal_swapcached 0\ntotal_inactive_file 2244157440\n\
                total_active_file 1510359040\n";
    let mut m = MemoryStat::parse(text).unwrap();
    assert_eq!(cgroup(&m, &BTreeMap::new(), LazyFree::default()), None);
    m.add_usage("4000000000\n");
    m.set_field("kernel", "70000000\n");
    let s = cgroup(&m, &BTreeMap::new(), LazyFree::default()).unwrap();
    assert_eq!(s.row("anon_live"), Some(164487168));
    assert_eq!(s.row("shmem"), Some(9166848));
    assert_eq!(s.row("page_cache_active"), Some(1510359040));
    // The file LRU lists counted a page more than the page cache: clamped to it.
    let cache = 3763679232 - 9166848;
    assert_eq!(s.row("page_cache_inactive"), Some(cache - 1510359040));
    assert_eq!(s.row("page_cache_other"), Some(0));
    assert_eq!(s.row("kernel_other"), Some(70000000));
    assert_eq!((s.row("sockets"), s.row("slab_reclaimable")), (None, None));
    assert_eq!(
        s.row(UNEXPLAINED),
        Some(4000000000 - 164487168 - 3763679232 - 70000000)
    );
}
