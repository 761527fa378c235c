//! A Go process's heap figures, given its binary's [`Layout`]: the runtime's own account
//! (`runtime.gcController`) and the page allocator's bitmaps it must agree with. Pure over
//! a [`Target`]; run once per deep read.

use std::collections::HashMap;

use super::super::target::{Fault, Target};
use super::{GoHeap, Layout, Unmeasured, GO_PAGE};

/// Pages of one page-allocator chunk (4 MiB).
pub(super) const CHUNK_PAGES: u64 = 512;
/// Go's `arenaBaseOffset` for the exporter's own architecture (the processes it reads are
/// of it): on amd64 addresses are offset so that the heap's index starts at the bottom of
/// the 48-bit range; 0 elsewhere on Linux (arm64 among them).
#[cfg(target_arch = "x86_64")]
pub(super) const ARENA_BASE_OFFSET: u64 = 0xffff_8000_0000_0000;
#[cfg(not(target_arch = "x86_64"))]
pub(super) const ARENA_BASE_OFFSET: u64 = 0;
/// Ranges of the heap followed at most (a heap has a handful).
const MAX_RANGES: u64 = 4096;
/// Chunks of 4 MiB followed at most: 1 TiB of heap.
const MAX_CHUNKS: u64 = 1 << 18;

fn word(b: &[u8], at: u64) -> u64 {
    usize::try_from(at)
        .ok()
        .and_then(|at| crate::heap::target::u64_at(b, at))
        .unwrap_or(0)
}

/// The runtime's figures of a process whose executable has `layout`, loaded at `bias`
/// (0 for a non-PIE binary): read twice around the page allocator's walk, which must agree
/// with them (its free, unscavenged pages are the runtime's `heapFree`). A target that
/// moves is read once more, then given up as [`Unmeasured::Moving`].
pub fn read<T: Target>(target: &mut T, layout: &Layout, bias: u64) -> Result<GoHeap, Unmeasured> {
    let fault = |f: Fault| match f {
        Fault::Unreadable => Unmeasured::Unreadable,
        Fault::Budget => Unmeasured::Budget,
        Fault::Remote => Unmeasured::Unreadable,
        Fault::Outside => Unmeasured::Implausible,
        Fault::Inconsistent | Fault::NotFound => Unmeasured::Moving,
    };
    for _ in 0..2 {
        let before = figures(target, layout, bias).map_err(fault)?;
        let (free, resident) = free_pages(target, layout, bias).map_err(fault)?;
        let after = figures(target, layout, bias).map_err(fault)?;
        if before == after && free == before.free_bytes {
            return Ok(GoHeap {
                free_resident_bytes: resident,
                ..before
            });
        }
    }
    Err(Unmeasured::Moving)
}

/// `runtime.gcController`'s figures.
fn figures<T: Target>(target: &mut T, l: &Layout, bias: u64) -> Result<GoHeap, Fault> {
    let fields = [
        l.heap_in_use,
        l.heap_free,
        l.heap_released,
        l.total_alloc,
        l.total_free,
        l.gc_percent_heap_goal,
        l.memory_limit,
    ];
    let end = fields.iter().max().copied().unwrap_or(0) + 8;
    if end > 1 << 16 {
        return Err(Fault::NotFound);
    }
    let mut b = vec![0u8; end as usize];
    target.read(l.gc_controller.wrapping_add(bias), &mut b)?;
    Ok(GoHeap {
        in_use_bytes: word(&b, l.heap_in_use),
        free_bytes: word(&b, l.heap_free),
        free_resident_bytes: 0,
        released_bytes: word(&b, l.heap_released),
        objects_bytes: word(&b, l.total_alloc).wrapping_sub(word(&b, l.total_free)),
        gc_percent_goal_bytes: word(&b, l.gc_percent_heap_goal),
        memory_limit_bytes: word(&b, l.memory_limit),
    })
}

/// The heap's free pages the OS still backs (neither allocated nor scavenged), from the
/// page allocator's bitmaps, and how many of their bytes are resident.
fn free_pages<T: Target>(target: &mut T, l: &Layout, bias: u64) -> Result<(u64, u64), Fault> {
    let mut slice = [0u8; 16];
    target.read(
        l.mheap.wrapping_add(bias).wrapping_add(l.in_use_ranges),
        &mut slice,
    )?;
    let (array, len) = (word(&slice, 0), word(&slice, 8));
    if len > MAX_RANGES || l.range_bytes == 0 || l.range_bytes > 64 {
        return Err(Fault::Inconsistent);
    }
    let mut ranges = vec![0u8; (len * l.range_bytes) as usize];
    if len > 0 {
        target.read(array, &mut ranges)?;
    }
    let chunk_bytes = CHUNK_PAGES * GO_PAGE;
    let mut l1_cache: HashMap<u64, u64> = HashMap::new();
    let mut palloc = vec![0u8; l.palloc_bytes as usize];
    let (mut free, mut resident, mut chunks) = (0u64, 0u64, 0u64);
    // The runtime keeps its ranges sorted and disjoint (`addrRanges.add` merges
    // neighbours): a range repeated or overlapping would count its pages again.
    let mut last_limit = 0u64;
    for r in ranges.chunks_exact(l.range_bytes as usize) {
        let (base, limit) = (word(r, l.range_base), word(r, l.range_limit));
        if limit <= base || base % chunk_bytes != 0 || limit % chunk_bytes != 0 || base < last_limit
        {
            return Err(Fault::Inconsistent);
        }
        last_limit = limit;
        let mut chunk = base;
        while chunk < limit {
            // The chunk's end, which the pages below stay within.
            let next = chunk.checked_add(chunk_bytes).ok_or(Fault::Inconsistent)?;
            chunks += 1;
            if chunks > MAX_CHUNKS {
                return Err(Fault::Budget);
            }
            let index = chunk.wrapping_sub(ARENA_BASE_OFFSET) / chunk_bytes;
            let (i1, i2) = (index / l.l2_entries, index % l.l2_entries);
            if i1 >= l.l1_entries {
                return Err(Fault::Inconsistent);
            }
            let l2 = match l1_cache.get(&i1) {
                Some(&p) => p,
                None => {
                    let mut p = [0u8; 8];
                    let at = l
                        .mheap
                        .wrapping_add(bias)
                        .wrapping_add(l.chunks)
                        .wrapping_add(i1 * 8);
                    target.read(at, &mut p)?;
                    let p = u64::from_le_bytes(p);
                    l1_cache.insert(i1, p);
                    p
                }
            };
            if l2 == 0 {
                return Err(Fault::Inconsistent);
            }
            target.read(l2.wrapping_add(i2 * l.palloc_bytes), &mut palloc)?;
            // A run of free, unscavenged pages at a time: one pagemap read each.
            let bit = |off: u64, page: u64| word(&palloc, off + page / 64 * 8) >> (page % 64) & 1;
            let mut page = 0;
            while page < CHUNK_PAGES {
                let backed_free =
                    |p: u64| bit(l.palloc_alloc, p) == 0 && bit(l.palloc_scavenged, p) == 0;
                if !backed_free(page) {
                    page += 1;
                    continue;
                }
                let start = page;
                while page < CHUNK_PAGES && backed_free(page) {
                    page += 1;
                }
                let (from, to) = (chunk + start * GO_PAGE, chunk + page * GO_PAGE);
                free += to - from;
                resident += target.resident_bytes(from, to)?;
            }
            chunk = next;
        }
    }
    let (cached, cached_resident) = cached_pages(target, l, bias)?;
    Ok((free + cached, resident + cached_resident))
}

/// The Ps' page caches: pages the bitmaps mark allocated that the runtime counts free
/// (up to 64 a P), and how many of their bytes are resident.
fn cached_pages<T: Target>(target: &mut T, l: &Layout, bias: u64) -> Result<(u64, u64), Fault> {
    let mut slice = [0u8; 16];
    let (mut free, mut resident) = (0u64, 0u64);
    target.read(l.allp.wrapping_add(bias), &mut slice)?;
    let (array, len) = (word(&slice, 0), word(&slice, 8));
    if len > 1 << 16 {
        return Err(Fault::Inconsistent);
    }
    let mut ps = vec![0u8; (len * 8) as usize];
    if len > 0 {
        target.read(array, &mut ps)?;
    }
    let mut cache = [0u8; 24];
    let end = [l.pcache_base, l.pcache_free, l.pcache_scav]
        .into_iter()
        .max()
        .unwrap_or(0)
        + 8;
    if end > cache.len() as u64 {
        return Err(Fault::NotFound);
    }
    // Each P is its own, and so is each cached page: `allp` repeating a P, or two caches
    // holding the same page, would count it again. (Two Ps may cache different pages of
    // one 64-page block: each took the block's free pages of its moment.)
    let mut seen: Vec<u64> = ps
        .chunks_exact(8)
        .map(|p| word(p, 0))
        .filter(|&p| p != 0)
        .collect();
    seen.sort_unstable();
    if seen.windows(2).any(|w| w[0] == w[1]) {
        return Err(Fault::Inconsistent);
    }
    let mut bases: Vec<(u64, u64)> = Vec::new();
    for p in ps.chunks_exact(8) {
        let p = word(p, 0);
        if p == 0 {
            continue;
        }
        target.read(p.wrapping_add(l.pcache), &mut cache[..end as usize])?;
        let base = word(&cache, l.pcache_base);
        let backed_free = word(&cache, l.pcache_free) & !word(&cache, l.pcache_scav);
        if backed_free != 0 {
            bases.push((base, word(&cache, l.pcache_free)));
        }
        for page in (0..64).filter(|i| backed_free >> i & 1 == 1) {
            let from = base
                .checked_add(page * GO_PAGE)
                .ok_or(Fault::Inconsistent)?;
            free += GO_PAGE;
            resident += target.resident_bytes(from, from.saturating_add(GO_PAGE))?;
        }
    }
    bases.sort_unstable();
    let mut taken = (u64::MAX, 0u64);
    for &(base, pages) in &bases {
        if base != taken.0 {
            taken = (base, 0);
        }
        if taken.1 & pages != 0 {
            return Err(Fault::Inconsistent);
        }
        taken.1 |= pages;
    }
    Ok((free, resident))
}

#[cfg(test)]
mod tests;
