//! A Go runtime's structures crafted in memory: the page allocator's ranges and bitmaps,
//! the Ps' page caches, and `heapFree` agreeing with them, honestly or by a program that
//! repeats a range or a P to have its pages counted twice (and writes the total it wants).

use super::super::super::image::Image;
use super::*;

const G: u64 = 0x10_0000;
const H: u64 = 0x20_0000;
const L1: u64 = 0x30_0000;
const PALLOC: u64 = 0x40_0000;
const RANGES: u64 = 0x50_0000;
const ALLP: u64 = 0x60_0000;
const PS: u64 = 0x70_0000;
/// The heap's one 4 MiB chunk.
const CHUNK: u64 = 0xc0_0000_0000;
const L2_ENTRIES: u64 = 1 << 26;

fn layout() -> Layout {
    Layout {
        gc_controller: G,
        mheap: H,
        first_vaddr: 0x40_0000,
        heap_in_use: 0,
        heap_free: 8,
        heap_released: 16,
        total_alloc: 24,
        total_free: 32,
        gc_percent_heap_goal: 40,
        memory_limit: 48,
        chunks: 0,
        l1_entries: 4,
        l2_entries: L2_ENTRIES,
        in_use_ranges: 0x100,
        range_bytes: 16,
        range_base: 0,
        range_limit: 8,
        palloc_bytes: 128,
        palloc_alloc: 0,
        palloc_scavenged: 64,
        allp: ALLP,
        pcache: 0,
        pcache_base: 0,
        pcache_free: 8,
        pcache_scav: 16,
        pie: false,
    }
}

/// A heap of one chunk whose first 10 pages are free, `ranges` copies of its range, and
/// `ps` Ps (the same P repeated when `same_p`) each caching 3 free pages; `heapFree`
/// says what the structures add up to.
fn process(ranges: u64, ps: u64, same_p: bool) -> Image {
    let mut m = Image::default();
    for base in [G, H, L1, PALLOC, RANGES, ALLP, PS] {
        m.map(base, 0x1000);
    }
    let index = CHUNK.wrapping_sub(ARENA_BASE_OFFSET) / (CHUNK_PAGES * GO_PAGE);
    let (i1, i2) = (index / L2_ENTRIES, index % L2_ENTRIES);
    m.put(H + i1 * 8, PALLOC.wrapping_sub(i2 * 128));
    // Allocated bitmap: every page but the first 10; nothing scavenged.
    m.put(PALLOC, !0x3ff);
    for w in 1..8 {
        m.put(PALLOC + w * 8, !0);
    }
    m.put(H + 0x100, RANGES);
    m.put(H + 0x108, ranges);
    for r in 0..ranges {
        m.put(RANGES + r * 16, CHUNK);
        m.put(RANGES + r * 16 + 8, CHUNK + CHUNK_PAGES * GO_PAGE);
    }
    m.put(ALLP, PS);
    m.put(ALLP + 8, ps);
    for p in 0..ps {
        let at = PS + 0x100 * if same_p { 1 } else { p + 1 };
        m.put(PS + p * 8, at);
        m.put(at, CHUNK + 64 * (p + 1) * GO_PAGE);
        m.put(at + 8, 0b111);
    }
    // The figures the structures give, as the program would have them.
    let free = (10 * ranges + 3 * ps) * GO_PAGE;
    m.put(G + 8, free);
    m
}

#[test]
fn the_free_heap_is_what_the_bitmaps_and_caches_say() {
    let mut m = process(1, 2, false);
    let h = read(&mut m, &layout(), 0).unwrap();
    assert_eq!(h.free_bytes, 16 * GO_PAGE);
    assert_eq!(h.free_resident_bytes, 16 * GO_PAGE);
}

#[test]
fn a_range_or_a_p_given_twice_is_not_counted_twice() {
    let l = layout();
    assert_eq!(
        read(&mut process(2, 1, false), &l, 0),
        Err(Unmeasured::Moving)
    );
    assert_eq!(
        read(&mut process(1, 2, true), &l, 0),
        Err(Unmeasured::Moving)
    );
}
