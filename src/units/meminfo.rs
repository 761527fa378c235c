//! `meminfo`: memory, commit and swap from `/proc/meminfo`, and what the model derives
//! from them (the commit ratio and headroom, and the time of the latest OOM kill, which
//! `/proc/vmstat`'s counter dates).

use crate::family::{Collector, Family, Metric, Section, Value};
use crate::parse::meminfo::Meminfo;
use crate::parse::sockstat::Sockstat;
use crate::parse::zoneinfo::Pagesets;
use crate::source::Reason;

use super::{Reader, Reading, Unit};

pub const COLLECTOR: Collector = Collector::Unit("meminfo");
const SECTION: Section = Section::Of(COLLECTOR);

pub const UNIT: Unit = Unit {
    name: "meminfo",
    what: "memory, commit and swap from /proc/meminfo, and the host's balance sheet",
    rows: &[
        MEMORY_TOTAL_BYTES,
        MEMORY_FREE_BYTES,
        MEMORY_AVAILABLE_BYTES,
        MEMORY_COMMITTED_BYTES,
        MEMORY_COMMIT_LIMIT_BYTES,
        SWAP_TOTAL_BYTES,
        SWAP_FREE_BYTES,
        MEMORY_ANON_BYTES,
        MEMORY_ANON_HUGE_BYTES,
        MEMORY_SHMEM_HUGE_BYTES,
        MEMORY_FILE_HUGE_BYTES,
        MEMORY_HUGETLB_BYTES,
        MEMORY_PAGE_TABLES_BYTES,
        COMMIT_RATIO,
        COMMIT_LIMIT_REACHED,
        COMMIT_HEADROOM_BYTES,
        HOST_MEMORY_BYTES,
    ],
    fixes: &[],
    start: || super::stateless(read),
};

fn read(r: &mut Reader) -> Result<Meminfo, Reason> {
    let mut m = r.source.parse_proc("meminfo", r.buf, Meminfo::parse)?;
    r.count(Reason::Malformed, m.rejected as u64);
    // Socket buffers for the balance sheet: TCP's and UDP's pages are the kernel's
    // whole count in any network namespace; the host's (pid 1's) for the fragments. A
    // kernel or namespace without the file has no sockets row.
    m.sockets = r
        .source
        .parse_proc("1/net/sockstat", r.buf, Sockstat::parse)
        .or_else(|_| r.source.parse_proc("net/sockstat", r.buf, Sockstat::parse))
        .ok();
    // The per-CPU free lists, which MemFree leaves out.
    m.pagesets = r
        .source
        .parse_proc("zoneinfo", r.buf, Pagesets::parse)
        .ok();
    Ok(m)
}

impl super::UnitReading for Meminfo {
    const COLLECTOR: crate::family::Collector = COLLECTOR;
}

impl Reading for Meminfo {
    fn families(&self) -> Vec<Family> {
        [
            (&MEMORY_TOTAL_BYTES, self.mem_total_bytes),
            (&MEMORY_FREE_BYTES, self.mem_free_bytes),
            (&MEMORY_AVAILABLE_BYTES, self.mem_available_bytes),
            (&MEMORY_COMMITTED_BYTES, self.committed_as_bytes),
            (&MEMORY_COMMIT_LIMIT_BYTES, self.commit_limit_bytes),
            (&SWAP_TOTAL_BYTES, self.swap_total_bytes),
            (&SWAP_FREE_BYTES, self.swap_free_bytes),
            (&MEMORY_ANON_BYTES, self.anon_pages_bytes),
            (&MEMORY_ANON_HUGE_BYTES, self.anon_huge_pages_bytes),
            (&MEMORY_SHMEM_HUGE_BYTES, self.shmem_huge_pages_bytes),
            (&MEMORY_FILE_HUGE_BYTES, self.file_huge_pages_bytes),
            (&MEMORY_HUGETLB_BYTES, self.hugetlb_bytes),
            (&MEMORY_PAGE_TABLES_BYTES, self.page_tables_bytes),
        ]
        .into_iter()
        .filter_map(|(m, v)| Family::single(m, v.map(Value::U)))
        .collect()
    }
}

pub(crate) const MEMORY_TOTAL_BYTES: Metric = crate::family::metric!(
    membloat "memory_total",
    Gauge,
    Bytes,
    [],
    SECTION,
    "/proc/meminfo",
    "MemTotal: usable RAM (/proc/meminfo).",
);

pub(crate) const MEMORY_FREE_BYTES: Metric = crate::family::metric!(
    membloat "memory_free",
    Gauge,
    Bytes,
    [],
    SECTION,
    "/proc/meminfo",
    "MemFree: unused RAM (/proc/meminfo).",
);

pub(crate) const MEMORY_AVAILABLE_BYTES: Metric = crate::family::metric!(
    membloat "memory_available",
    Gauge,
    Bytes,
    [],
    SECTION,
    "/proc/meminfo",
    "MemAvailable: memory available to new work without swapping (/proc/meminfo).",
);

pub(crate) const MEMORY_COMMITTED_BYTES: Metric = crate::family::metric!(
    membloat "memory_committed",
    Gauge,
    Bytes,
    [],
    SECTION,
    "/proc/meminfo",
    "Committed_AS: address space committed by all processes, touched or not (/proc/meminfo).",
);

pub(crate) const MEMORY_COMMIT_LIMIT_BYTES: Metric = crate::family::metric!(
    membloat "memory_commit_limit",
    Gauge,
    Bytes,
    [],
    SECTION,
    "/proc/meminfo",
    "CommitLimit: the commit limit, enforced only when vm.overcommit_memory is 2 (/proc/meminfo).",
);

pub(crate) const SWAP_TOTAL_BYTES: Metric = crate::family::metric!(
    membloat "swap_total",
    Gauge,
    Bytes,
    [],
    SECTION,
    "/proc/meminfo",
    "SwapTotal (/proc/meminfo).",
);

pub(crate) const SWAP_FREE_BYTES: Metric = crate::family::metric!(
    membloat "swap_free",
    Gauge,
    Bytes,
    [],
    SECTION,
    "/proc/meminfo",
    "SwapFree (/proc/meminfo).",
);

pub(crate) const MEMORY_ANON_BYTES: Metric = crate::family::metric!(
    membloat "memory_anon",
    Gauge,
    Bytes,
    [],
    SECTION,
    "/proc/meminfo",
    "AnonPages: anonymous memory mapped by processes (/proc/meminfo).",
);

pub(crate) const MEMORY_ANON_HUGE_BYTES: Metric = crate::family::metric!(
    membloat "memory_anon_huge",
    Gauge,
    Bytes,
    [],
    SECTION,
    "/proc/meminfo",
    "AnonHugePages: anonymous memory in transparent huge pages (/proc/meminfo).",
);

pub(crate) const MEMORY_SHMEM_HUGE_BYTES: Metric = crate::family::metric!(
    membloat "memory_shmem_huge",
    Gauge,
    Bytes,
    [],
    SECTION,
    "/proc/meminfo",
    "ShmemHugePages: shared memory and tmpfs in huge pages (/proc/meminfo).",
);

pub(crate) const MEMORY_FILE_HUGE_BYTES: Metric = crate::family::metric!(
    membloat "memory_file_huge",
    Gauge,
    Bytes,
    [],
    SECTION,
    "/proc/meminfo",
    "FileHugePages: page cache in huge pages (/proc/meminfo).",
);

pub(crate) const MEMORY_HUGETLB_BYTES: Metric = crate::family::metric!(
    membloat "memory_hugetlb",
    Gauge,
    Bytes,
    [],
    SECTION,
    "/proc/meminfo",
    "Hugetlb: memory reserved for hugetlbfs pages (/proc/meminfo).",
);

pub(crate) const MEMORY_PAGE_TABLES_BYTES: Metric = crate::family::metric!(
    membloat "memory_page_tables",
    Gauge,
    Bytes,
    [],
    SECTION,
    "/proc/meminfo",
    "PageTables: memory used by page tables (/proc/meminfo).",
);

pub(crate) const COMMIT_RATIO: Metric = crate::family::metric!(
    membloat "commit",
    Gauge,
    Ratio,
    [],
    SECTION,
    "/proc/meminfo",
    "Committed_AS / CommitLimit. Above 1 is normal unless vm.overcommit_memory is 2, where allocations fail at 1; read it beside membloat_vm_overcommit_memory.",
);

pub(crate) const COMMIT_LIMIT_REACHED: Metric = crate::family::metric!(
    membloat "commit_limit_reached",
    Gauge,
    None,
    [],
    SECTION,
    "/proc/meminfo, /proc/sys/vm",
    "1 when vm.overcommit_memory is 2 and Committed_AS >= CommitLimit: new allocations fail.",
);

pub(crate) const COMMIT_HEADROOM_BYTES: Metric = crate::family::metric!(
    membloat "commit_headroom",
    Gauge,
    Bytes,
    [],
    SECTION,
    "/proc/meminfo",
    "CommitLimit - Committed_AS: memory that can still be committed in overcommit mode 2; negative is normal in modes 0 and 1.",
);

pub(crate) const HOST_MEMORY_BYTES: Metric = crate::family::metric!(
    membloat "host_memory",
    Gauge,
    Bytes,
    ["row"],
    SECTION,
    "/proc/meminfo, /proc/zoneinfo, /proc/net/sockstat, the heap readers",
    "The host's memory as a balance sheet: rows that partition MemTotal and sum to it, from one read of /proc/meminfo. free; free_percpu (the per-CPU free lists MemFree leaves out, /proc/zoneinfo); anon_live (AnonPages less what the heap readers measured as held in it); anon_held_READER (each reader's measured held resident bytes: glibc, jvm, go, jemalloc, python, mimalloc); anon_lazy_free (LazyFree no reader counts as held: freed with MADV_FREE, taken back without swap); shmem (tmpfs, memfds, SysV, shared anonymous, less held bytes in it: a ZGC heap); page_cache_active, page_cache_inactive, page_cache_other (Cached - Shmem + Buffers: on the file LRU lists, or neither: ramfs, mlocked files); swap_cache; slab_reclaimable, slab_unreclaimable; kernel_reclaimable_other (KReclaimable - SReclaimable); kernel_stacks; page_tables, page_tables_secondary; vmalloc (VmallocUsed less vmalloc'd stacks); percpu; hugetlb_used, hugetlb_free; zswap; balloon; sockets (socket buffers from /proc/net/sockstat, at most what the rows before leave); unexplained (MemTotal less every row: memory no counter names, drivers' pages among it; negative where counters overlap). A row whose field the kernel lacks is absent (docs/balance-sheet.md).",
);
