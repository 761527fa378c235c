//! The balance sheet: memory as rows that partition a total, each byte in one row, and
//! what no counter names in the last row, `unexplained` (signed: negative where two
//! counters hold the same pages). The host's total is `MemTotal`, its rows come from one
//! read of `/proc/meminfo` (with the per-CPU free lists of `/proc/zoneinfo` and the socket
//! buffers `/proc/net/sockstat` counts), and the
//! anonymous memory the heap readers measured as held is split out by reader. A memory
//! cgroup's total is its usage, its rows from its `memory.stat` ([`cgroup`]), the same
//! rows where both have them (docs/balance-sheet.md: each row's formula, and the
//! overlaps per kernel).

use std::collections::BTreeMap;

use crate::parse::meminfo::Meminfo;
use crate::parse::memory_stat::MemoryStat;

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

    fn optional(&mut self, name: &str, bytes: Option<u64>) {
        if let Some(b) = bytes {
            self.push(name, b);
        }
    }

    /// The rows every sheet has, the host's and a cgroup's alike: `anon` bytes of
    /// anonymous memory less what each reader holds of it and what was lazily freed,
    /// `shmem` less what a runtime holds in it, and the page cache (`cache` bytes, not
    /// shmem) by the file LRU list it is on (`lru`: active and inactive).
    fn core(
        &mut self,
        anon: u64,
        shmem: u64,
        (cache, lru): (u64, (Option<u64>, Option<u64>)),
        held: &BTreeMap<&'static str, Held>,
        lazy: LazyFree,
    ) {
        // Anonymous memory mapped by processes, less what their allocators and runtimes
        // hold free; and shared memory less what a runtime holds free there (a ZGC heap).
        // Each reader's figure was checked against its process's resident memory; pages
        // shared by processes count in each, so the sums are held within the kernel's.
        let (anon_parts, held_anon) = within(held, |h| h.anon, anon);
        let (shmem_parts, held_shmem) = within(held, |h| h.shmem, shmem);
        // Pages freed with MADV_FREE that no reader counts: still anonymous, the kernel's
        // to take back without swap.
        let lazy_free = lazy.unheld.min(anon - held_anon);
        self.push("anon_live", anon - held_anon - lazy_free);
        for ((reader, _), (a, sh)) in held.iter().zip(anon_parts.iter().zip(&shmem_parts)) {
            self.push(&format!("anon_held_{reader}"), a.saturating_add(*sh));
        }
        self.push("anon_lazy_free", lazy_free);
        // tmpfs, memfds, SysV segments and shared anonymous memory, which the page cache
        // counts too.
        self.push("shmem", shmem - held_shmem);
        // The page cache without shmem; on the file LRU lists or neither (ramfs, mlocked
        // files, pages between lists). Lazily freed anonymous pages are on the file lists
        // too (4.12+: inactive, unless touched since), and not page cache.
        let (active_lru, inactive_lru) = (lru.0.unwrap_or(0), lru.1.unwrap_or(0));
        let lazy_inactive = lazy.all.min(inactive_lru);
        let lazy_active = (lazy.all - lazy_inactive).min(active_lru);
        let active = (active_lru - lazy_active).min(cache);
        let inactive = (inactive_lru - lazy_inactive).min(cache - active);
        self.push("page_cache_active", active);
        self.push("page_cache_inactive", inactive);
        self.push("page_cache_other", cache - active - inactive);
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
    let cache = cached.saturating_sub(shmem).saturating_add(buffers);
    let lru = (f("Active(file)"), f("Inactive(file)"));
    s.core(anon, shmem, (cache, lru), held, lazy);
    s.optional("swap_cache", f("SwapCached"));
    let sreclaimable = f("SReclaimable");
    s.optional("slab_reclaimable", sreclaimable);
    s.optional("slab_unreclaimable", f("SUnreclaim"));
    // KReclaimable (4.20+) is SReclaimable and other kernel memory the shrinkers free.
    s.optional(
        "kernel_reclaimable_other",
        f("KReclaimable").map(|k| k.saturating_sub(sreclaimable.unwrap_or(0))),
    );
    let stacks = f("KernelStack");
    s.optional("kernel_stacks", stacks);
    s.optional("page_tables", m.page_tables_bytes);
    s.optional("page_tables_secondary", f("SecPageTables"));
    // VmallocUsed (real since 5.3; 0 from 4.4 to 5.2) counts vmalloc'd stacks too.
    let vmalloc = f("VmallocUsed").map(|v| {
        if VMAP_STACK {
            v.saturating_sub(stacks.unwrap_or(0))
        } else {
            v
        }
    });
    s.optional("vmalloc", vmalloc);
    s.optional("percpu", f("Percpu"));
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
    s.optional("zswap", f("Zswap"));
    s.optional("balloon", f("Balloon"));
    // Socket buffers are page fragments no counter above names (their small heads are
    // slab): at most what the rows so far leave unexplained.
    if let Some(sockets) = &m.sockets {
        let named: i128 = s.rows.iter().map(|r| i128::from(r.1)).sum();
        let left = u64::try_from(i128::from(total) - named).unwrap_or(0);
        s.push("sockets", sockets.bytes(page).min(left));
    }
    Some(s.close())
}

/// A memory cgroup's sheet: its usage (`memory.current`, `memory.usage_in_bytes`) in
/// rows from its `memory.stat` (v2's counters, hierarchical; v1's `total_` counters and its
/// `memory.kmem.usage_in_bytes`), what the heap readers measured as held in its processes
/// and their `LazyFree`. `None` without usage, `anon` and `file`. Kernel memory v2 names
/// (5.18+: `kernel`) beyond its parts is `kernel_other`; on v1 all of it is. The
/// `unexplained` row is bounded by the kernel's per-CPU batching
/// (docs/balance-sheet.md).
pub fn cgroup(
    m: &MemoryStat,
    held: &BTreeMap<&'static str, Held>,
    lazy: LazyFree,
) -> Option<Sheet> {
    let f = |k: &str| m.field(k);
    let mut s = Sheet {
        total: m.usage_bytes?,
        rows: Vec::new(),
    };
    let (anon, file) = (f("anon")?, f("file")?);
    let shmem = f("shmem").unwrap_or(0).min(file);
    let lru = (f("active_file"), f("inactive_file"));
    s.core(anon, shmem, (file - shmem, lru), held, lazy);
    s.optional("swap_cache", f("swapcached"));
    let stacks = f("kernel_stack");
    // Kernel stacks allocated with vmalloc count in both.
    let vmalloc = f("vmalloc").map(|v| {
        if VMAP_STACK {
            v.saturating_sub(stacks.unwrap_or(0))
        } else {
            v
        }
    });
    // The parts of `kernel`, in the order served; zswap's compressed pages are charged
    // as kernel memory.
    let parts = [
        ("slab_reclaimable", f("slab_reclaimable")),
        ("slab_unreclaimable", f("slab_unreclaimable")),
        ("kernel_stacks", stacks),
        ("page_tables", f("pagetables")),
        ("page_tables_secondary", f("sec_pagetables")),
        ("vmalloc", vmalloc),
        ("percpu", f("percpu")),
        ("zswap", f("zswap")),
    ];
    let mut named = 0u64;
    for (row, bytes) in parts {
        s.optional(row, bytes);
        named = named.saturating_add(bytes.unwrap_or(0));
    }
    s.optional("kernel_other", f("kernel").map(|k| k.saturating_sub(named)));
    // Socket buffers: charged to v2's usage, not v1's (its own kmem.tcp counter).
    s.optional("sockets", f("sock"));
    Some(s.close())
}

#[cfg(test)]
mod tests;
