//! The held memory of a mimalloc 3 process: every arena of its main sub-process
//! (`subproc_main`), each an area of 64 KiB slices headed by its own metadata, its pages
//! found by its bitmap of page starts and read from its pages' metadata. Pure over a
//! [`Target`].
//!
//! What `mi_collect(true)` gives back, as mimalloc 3 does it: each page with no live block
//! is freed into its arena and purged, and every free slice scheduled for purging
//! (`slices_purge`) is purged. What stays is the pages that hold a live block and the
//! arenas' own metadata (in use), and free slices never scheduled: pages a transparent
//! huge page brought in, or memory mimalloc's own metadata takes from an arena (stranded).

use super::layout::{MEM_ARENA, SLICE, V3};
use super::resident::{add_run, committed, flush, word};
use super::MimallocHeap;
use crate::heap::target::{u16_at, u32_at, u64_at, Fault, Target};

/// Slices of one arena at most (`MI_BITMAP_MAX_BIT_COUNT`: 16 GiB of 64 KiB slices).
const MAX_SLICES: u64 = 1 << 18;
/// Pages read at most, every arena together.
const MAX_PAGES: u64 = 1 << 20;

pub(super) fn pass<T: Target>(t: &mut T, o: &V3, subproc: u64) -> Result<MimallocHeap, Fault> {
    let count = word(t, subproc.wrapping_add(o.arena_count))?;
    if count > o.max_arenas {
        return Err(Fault::NotFound);
    }
    let mut h = MimallocHeap::default();
    let mut owned = Vec::new();
    let mut pages = 0;
    for i in 0..count {
        let arena = word(t, subproc.wrapping_add(o.arenas).wrapping_add(8 * i))?;
        if arena != 0 {
            owned.push(self::arena(t, o, arena, &mut h, &mut pages)?);
            h.arenas += 1;
        }
    }
    owned.sort_unstable();
    if owned.windows(2).any(|w| w[0].1 > w[1].0) {
        return Err(Fault::Inconsistent);
    }
    h.held_bytes = h.held_bytes.saturating_add(h.pending_purge_bytes);
    h.committed_bytes = Some(committed(t, subproc.wrapping_add(o.stats_committed))?);
    for &(lo, hi) in &owned {
        h.reserved_bytes = h.reserved_bytes.saturating_add(hi - lo);
        h.resident_bytes = h.resident_bytes.saturating_add(t.resident_bytes(lo, hi)?);
    }
    if h.in_use_bytes.saturating_add(h.held_bytes) > h.resident_bytes {
        return Err(Fault::Inconsistent);
    }
    Ok(h)
}

/// A bitmap of `bits` bits (`mi_bitmap_t`), read whole: its chunk count must cover them.
fn bitmap<T: Target>(t: &mut T, o: &V3, at: u64, bits: u64) -> Result<Vec<u8>, Fault> {
    let chunks = word(t, at)?;
    if chunks == 0 || chunks > 512 || chunks * 512 < bits {
        return Err(Fault::NotFound);
    }
    let mut map = vec![0u8; bits.div_ceil(8) as usize];
    t.read(at.wrapping_add(o.bitmap_chunks), &mut map)?;
    Ok(map)
}

fn bit(map: &[u8], i: u64) -> bool {
    map.get((i / 8) as usize).is_some_and(|b| b >> (i % 8) & 1 == 1)
}

/// One arena: its metadata in use, each page in use or held, each free slice scheduled for
/// purging pending (held once the pass adds it); its range.
fn arena<T: Target>(
    t: &mut T,
    o: &V3,
    arena: u64,
    h: &mut MimallocHeap,
    pages: &mut u64,
) -> Result<(u64, u64), Fault> {
    let mut head = [0u8; 160];
    t.read(arena, &mut head)?;
    let at = |off: u64| u64_at(&head, off as usize).unwrap_or(0);
    let (slices, info) = (at(o.slice_count), at(o.info_slices));
    if slices == 0 || slices > MAX_SLICES || info == 0 || info >= slices || arena % SLICE != 0 {
        return Err(Fault::NotFound);
    }
    let end = arena.checked_add(slices * SLICE).ok_or(Fault::NotFound)?;
    if !t.private_anonymous(arena, end) {
        return Err(Fault::Outside);
    }
    let starts = bitmap(t, o, at(o.pages), slices)?;
    let purge = match at(o.slices_purge) {
        0 => Vec::new(),
        p => bitmap(t, o, p, slices)?,
    };
    let meta = at(o.pages_meta);
    let (mut kept, mut freed, mut due) = (None, None, None);
    add_run(t, &mut kept, arena, arena + info * SLICE, &mut h.in_use_bytes)?;
    let mut page = vec![0u8; o.page_bytes as usize];
    let mut s = info;
    while s < slices {
        let lo = arena + s * SLICE;
        if !bit(&starts, s) {
            if bit(&purge, s) {
                add_run(t, &mut due, lo, lo + SLICE, &mut h.pending_purge_bytes)?;
            }
            s += 1;
            continue;
        }
        *pages += 1;
        if *pages > MAX_PAGES {
            return Err(Fault::Budget);
        }
        let place = if meta == 0 { lo } else { meta.wrapping_add(s * o.page_bytes) };
        t.read(place, &mut page)?;
        let m = o.page_memid as usize;
        let owner = u64_at(&page, m).unwrap_or(0);
        let index = u64::from(u32_at(&page, m + 8).unwrap_or(u32::MAX));
        let n = u64::from(u32_at(&page, m + 12).unwrap_or(0));
        let kind = u32_at(&page, m + 16).unwrap_or(0);
        let block_size = u64_at(&page, o.page_block_size as usize).unwrap_or(0);
        // A page's metadata names its arena and its place there.
        if kind != MEM_ARENA || owner != arena || index != s || n == 0 || s + n > slices {
            return Err(Fault::Inconsistent);
        }
        let hi = lo + n * SLICE;
        if block_size == 0 {
            return Err(Fault::Inconsistent);
        }
        if u16_at(&page, o.page_used as usize).unwrap_or(0) > 0 {
            add_run(t, &mut kept, lo, hi, &mut h.in_use_bytes)?;
        } else {
            add_run(t, &mut freed, lo, hi, &mut h.held_bytes)?;
        }
        s += n;
    }
    flush(t, &mut kept, &mut h.in_use_bytes)?;
    flush(t, &mut freed, &mut h.held_bytes)?;
    flush(t, &mut due, &mut h.pending_purge_bytes)?;
    Ok((arena, end))
}
