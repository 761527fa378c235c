//! The held memory of a mimalloc 2 process, given its binary's [`Symbols`]: every arena
//! (`mi_arenas`), the segments in each (its bitmap of blocks in use) and the segments
//! outside them (`mi_segment_map`), each segment's spans walked. Pure over a [`Target`].
//!
//! What `mi_collect(true)` gives back, as mimalloc 2 does it: each page with no live block
//! is freed into its segment, coalesced with the free spans beside it, and the whole
//! span purged; a segment left with no page in use is freed into its arena, and every
//! arena block scheduled for purging (`blocks_purge`) is purged; a free span no page
//! joins is purged only where it was scheduled (its segment's `purge_mask`). The held
//! figure is the resident bytes of exactly those. What stays is the pages that hold a
//! live block and each segment's header (in use), and resident free memory mimalloc does
//! not know it has: a free span's pages faulted in with a transparent huge page that a
//! live page beside them touched, never purged because never used (stranded).

use super::layout::{self, Map, Offsets, Symbols, HEAP_COOKIE, SEGMENT, SLICE, SLICES_PER_SEGMENT};
use super::resident::{add_run, committed, flush, word};
use super::{MimallocHeap, Unmeasured};
use crate::heap::target::{u16_at, u32_at, u64_at, Fault, Target};

/// `MI_MAX_ARENAS` (132 since 2.2; 112 in 2.1).
const MAX_ARENAS: u64 = 132;
/// Blocks of one arena at most (32 TiB of 32 MiB blocks): its bitmap is read whole.
const MAX_ARENA_BLOCKS: u64 = 1 << 20;
/// Segments read at most, every arena and the map together (512 GiB of them); each
/// header read is 49 KiB.
pub(crate) const MAX_SEGMENTS: u64 = 1 << 14;

/// The figures of every arena and segment, read twice around nothing else: the process
/// runs, so a read that differs from a second read is taken again, once, then given up
/// as [`Unmeasured::Moving`].
pub fn read<T: Target>(t: &mut T, s: &Symbols, bias: u64) -> Result<MimallocHeap, Unmeasured> {
    let mut code = [0u8; 10];
    t.read(s.version.wrapping_add(bias), &mut code)
        .map_err(Unmeasured::from)?;
    let number = layout::version_of(&code).ok_or(Unmeasured::UnknownVersion)?;
    if let Some(&(version, _, o)) = layout::V3_VERSIONS.iter().find(|v| v.1 == number) {
        if s.subproc == 0 {
            return Err(Unmeasured::UnknownLayout);
        }
        let subproc = s.subproc.wrapping_add(bias);
        return twice(|| super::v3::pass(t, &o, subproc).map_err(Unmeasured::from))
            .map(|h| MimallocHeap { version, ..h });
    }
    let (version, o) = layout::offsets(number).ok_or(Unmeasured::UnknownVersion)?;
    if s.arenas == 0 {
        return Err(Unmeasured::UnknownLayout);
    }
    twice(|| pass(t, s, bias, &o).map_err(Unmeasured::from)).map(|h| MimallocHeap { version, ..h })
}

/// A read taken twice around nothing else: the process runs, so a read that differs from
/// a second read is taken again, once, then given up as [`Unmeasured::Moving`].
fn twice(
    mut once: impl FnMut() -> Result<MimallocHeap, Unmeasured>,
) -> Result<MimallocHeap, Unmeasured> {
    for _ in 0..2 {
        let first = once()?;
        if once()? == first {
            return Ok(first);
        }
    }
    Err(Unmeasured::Moving)
}

/// One pass: what is mimalloc's (its arenas, the segments outside them), and of it what
/// is in use and what held.
struct Pass {
    owned: Vec<(u64, u64)>,
    in_use: u64,
    /// Held, not scheduled for purging.
    held: u64,
    /// Held, scheduled for purging.
    due: u64,
    segments: u64,
    cookie: u64,
}

fn pass<T: Target>(t: &mut T, s: &Symbols, bias: u64, o: &Offsets) -> Result<MimallocHeap, Fault> {
    let mut p = Pass {
        owned: Vec::new(),
        in_use: 0,
        held: 0,
        due: 0,
        segments: 0,
        cookie: word(t, s.heap_main.wrapping_add(bias).wrapping_add(HEAP_COOKIE))?,
    };
    let count = word(t, s.arena_count.wrapping_add(bias))?;
    if count > MAX_ARENAS {
        return Err(Fault::NotFound);
    }
    let mut arenas = 0;
    for i in 0..count {
        let arena = word(t, s.arenas.wrapping_add(bias).wrapping_add(8 * i))?;
        if arena != 0 {
            self::arena(t, o, arena, &mut p)?;
            arenas += 1;
        }
    }
    let arena_ranges = p.owned.len();
    outside(t, o, s.segment_map.wrapping_add(bias), &mut p, arena_ranges)?;
    // No two arenas or segments share a page: one memory listed twice is not believed.
    p.owned.sort_unstable();
    if p.owned.windows(2).any(|w| w[0].1 > w[1].0) {
        return Err(Fault::Inconsistent);
    }
    let mut h = MimallocHeap {
        arenas,
        segments: p.segments,
        in_use_bytes: p.in_use,
        held_bytes: p.held.saturating_add(p.due),
        pending_purge_bytes: p.due,
        committed_bytes: match s.stats {
            0 => None,
            at => Some(committed(t, at.wrapping_add(bias).wrapping_add(o.stats_committed))?),
        },
        ..MimallocHeap::default()
    };
    for &(lo, hi) in &p.owned {
        h.reserved_bytes = h.reserved_bytes.saturating_add(hi - lo);
        h.resident_bytes = h.resident_bytes.saturating_add(t.resident_bytes(lo, hi)?);
    }
    // Parts of what is owned, each counted once: they cannot add up to more.
    if h.in_use_bytes.saturating_add(h.held_bytes) > h.resident_bytes {
        return Err(Fault::Inconsistent);
    }
    Ok(h)
}

/// One arena: its range, and each segment its bitmap of blocks in use starts.
fn arena<T: Target>(t: &mut T, o: &Offsets, arena: u64, p: &mut Pass) -> Result<(), Fault> {
    let mut head = [0u8; 24];
    t.read(arena.wrapping_add(o.arena_start), &mut head)?;
    let start = u64_at(&head, 0).unwrap_or(0);
    let blocks = u64_at(&head, 8).unwrap_or(0);
    let fields = u64_at(&head, 16).unwrap_or(0);
    if blocks == 0 || blocks > MAX_ARENA_BLOCKS || fields != blocks.div_ceil(64) {
        return Err(Fault::NotFound);
    }
    let end = start
        .checked_add(blocks * SEGMENT)
        .filter(|_| start % SEGMENT == 0)
        .ok_or(Fault::NotFound)?;
    if !t.private_anonymous(start, end) {
        return Err(Fault::Outside);
    }
    p.owned.push((start, end));
    let mut bitmap = vec![0u8; fields as usize * 8];
    t.read(arena.wrapping_add(o.arena_inuse), &mut bitmap)?;
    // The blocks to purge: none where the arena's memory cannot be purged (a null pointer).
    let mut purge = vec![0u8; fields as usize * 8];
    match word(t, arena.wrapping_add(o.arena_purge))? {
        0 => {}
        at => t.read(at, &mut purge)?,
    }
    let bit = |map: &[u8], i: u64| map[(i / 8) as usize] >> (i % 8) & 1 == 1;
    let in_use = |i: u64| bit(&bitmap, i);
    let mut run = None;
    let mut i = 0;
    while i < blocks {
        if !in_use(i) {
            // A free block scheduled for purging: a forced purge gives it back.
            if bit(&purge, i) {
                let lo = start + i * SEGMENT;
                add_run(t, &mut run, lo, lo + SEGMENT, &mut p.due)?;
            }
            i += 1;
            continue;
        }
        let size = segment(t, o, start + i * SEGMENT, p)?;
        // A segment lies wholly in its arena's blocks in use.
        let n = size.div_ceil(SEGMENT);
        if i + n > blocks || !(i..i + n).all(in_use) {
            return Err(Fault::Inconsistent);
        }
        i += n;
    }
    flush(t, &mut run, &mut p.due)
}

/// The segments the map lists outside every arena (those allocated from the OS: a huge
/// block with a large alignment, or an arena that could not be reserved). 2.1 lists every
/// segment there, those in arenas (the first `arenas` ranges of `owned`) too.
fn outside<T: Target>(
    t: &mut T,
    o: &Offsets,
    map: u64,
    p: &mut Pass,
    arenas: usize,
) -> Result<(), Fault> {
    let (parts, words, part_map) = match o.map {
        Map::Flat { words } => (1, words, None),
        Map::Parts {
            parts,
            part_map,
            words,
        } => (parts, words, Some(part_map)),
    };
    let span = words * 64 * SEGMENT;
    let mut bits = vec![0u8; words as usize * 8];
    for part in 0..parts {
        let at = match part_map {
            None => map,
            Some(off) => match word(t, map.wrapping_add(8 * part))? {
                0 => continue,
                ptr => ptr.wrapping_add(off),
            },
        };
        t.read(at, &mut bits)?;
        for (w, chunk) in bits.chunks_exact(8).enumerate() {
            let mut set = u64_at(chunk, 0).unwrap_or(0);
            while set != 0 {
                let bit = u64::from(set.trailing_zeros());
                set &= set - 1;
                let seg = part * span + (w as u64 * 64 + bit) * SEGMENT;
                if p.owned[..arenas].iter().any(|&(lo, hi)| lo <= seg && seg < hi) {
                    continue;
                }
                let size = segment(t, o, seg, p)?;
                if !t.private_anonymous(seg, seg + size) {
                    return Err(Fault::Outside);
                }
                p.owned.push((seg, seg + size));
            }
        }
    }
    Ok(())
}

/// One segment at `seg`: checked by its cookie, its spans walked, the resident bytes of
/// its header and of its pages that hold a live block added to the pass's; its size.
fn segment<T: Target>(t: &mut T, o: &Offsets, seg: u64, p: &mut Pass) -> Result<u64, Fault> {
    if p.segments >= MAX_SEGMENTS {
        return Err(Fault::Budget);
    }
    p.segments += 1;
    let mut head = vec![0u8; (o.slices + (SLICES_PER_SEGMENT + 1) * o.page_bytes) as usize];
    t.read(seg, &mut head)?;
    let at = |off: u64| u64_at(&head, off as usize).unwrap_or(0);
    if at(o.cookie) != seg ^ p.cookie {
        return Err(Fault::Inconsistent);
    }
    let size = at(o.segment_size);
    let (slices, info, entries) = (at(o.segment_slices), at(o.info_slices), at(o.slice_entries));
    // A huge block's segment is sized to it (smaller or larger than a normal one).
    let fits = size >= 2 * SLICE
        && size % SLICE == 0
        && size.checked_add(seg).is_some()
        && slices.checked_mul(SLICE) == Some(size)
        && info >= 1
        && info < entries
        && entries == SLICES_PER_SEGMENT.min(slices);
    if !fits {
        return Err(Fault::NotFound);
    }
    let end = seg + size;
    let mut spans = Vec::new();
    let mut i = 0;
    while i < entries {
        let page = (o.slices + i * o.page_bytes) as usize;
        let count = u64::from(u32_at(&head, page).unwrap_or(0));
        if count == 0 {
            return Err(Fault::Inconsistent);
        }
        let block_size = u64_at(&head, page + o.page_block_size as usize).unwrap_or(0);
        let used = u16_at(&head, page + o.page_used as usize).unwrap_or(0);
        // The first span is the segment's header; a span with a block size is a page, in
        // use while it holds a block; one without is free.
        let kind = match (i, block_size, used) {
            (0, ..) => Span::Kept,
            (_, 0, _) => Span::Free,
            (_, _, 0) => Span::Empty,
            _ => Span::Kept,
        };
        let hi = seg.saturating_add((i + count).saturating_mul(SLICE)).min(end);
        spans.push((kind, i, seg + i * SLICE, hi));
        i += count;
    }
    let scheduled = at(o.purge_expire) != 0;
    let mask = |slice: u64| {
        let byte = (o.purge_mask + slice / 8) as usize;
        scheduled && slice < SLICES_PER_SEGMENT && head.get(byte).is_some_and(|b| b >> (slice % 8) & 1 == 1)
    };
    // A segment with no page in use is freed into its arena and purged whole.
    let unused = !spans[1..].iter().any(|s| s.0 == Span::Kept);
    if unused && !scheduled {
        p.held = p.held.saturating_add(t.resident_bytes(seg, end)?);
        return Ok(size);
    }
    let (mut kept, mut freed, mut due) = (None, None, None);
    let mut k = 0;
    while k < spans.len() {
        let (kind, _, lo, hi) = spans[k];
        if kind == Span::Kept && !unused {
            add_run(t, &mut kept, lo, hi, &mut p.in_use)?;
            k += 1;
            continue;
        }
        // Free spans and empty pages side by side coalesce as the pages are freed: with a
        // page among them the whole is purged, else only what was scheduled.
        let next_kept = spans[k..].iter().position(|s| s.0 == Span::Kept);
        let last = match next_kept {
            Some(n) if !unused => k + n,
            _ => spans.len(),
        };
        let joined = unused || spans[k..last].iter().any(|s| s.0 == Span::Empty);
        for &(kind, first, lo, hi) in &spans[k..last] {
            if kind != Span::Free {
                add_run(t, &mut freed, lo, hi, &mut p.held)?;
                continue;
            }
            for slice in first..first + (hi - lo).div_ceil(SLICE) {
                let a = seg + slice * SLICE;
                let b = (a + SLICE).min(hi);
                if mask(slice) {
                    add_run(t, &mut due, a, b, &mut p.due)?;
                } else if joined {
                    add_run(t, &mut freed, a, b, &mut p.held)?;
                }
            }
        }
        k = last;
    }
    // An unused segment's slices beyond its entries (a huge one's) go with it.
    let tail = spans.last().map_or(seg, |s| s.3);
    if unused && tail < end {
        add_run(t, &mut freed, tail, end, &mut p.held)?;
    }
    flush(t, &mut due, &mut p.due)?;
    flush(t, &mut kept, &mut p.in_use)?;
    flush(t, &mut freed, &mut p.held)?;
    Ok(size)
}

/// What `mi_collect(true)` does with a span of a segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Span {
    /// Kept: the segment's header, or a page that holds a live block.
    Kept,
    /// A page with no live block: freed, and purged with the free spans beside it.
    Empty,
    /// A free span: purged where scheduled, or with an empty page beside it.
    Free,
}
