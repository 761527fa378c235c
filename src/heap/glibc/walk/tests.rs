//! The walk on crafted heaps: each validation rule, the retry, the chunk budget, and
//! fuzzed headers.

use super::*;

use crate::heap::glibc::first_chunk;
use crate::heap::image::{Image, PAGE};

const BASE: u64 = 0x5555_0000_0000;

/// A brk heap of 64 KiB: a used chunk, a free one, a used one, then the top chunk.
pub(crate) fn main_heap() -> Image {
    let mut m = Image::default();
    m.map(BASE, 64 << 10);
    m.chunk(BASE, 0, 0x290 | PREV_INUSE); // tcache_perthread_struct
    let free = BASE + 0x290;
    m.chunk(free, 0, 0x4000 | PREV_INUSE);
    let used = free + 0x4000;
    m.chunk(used, 0x4000, 0x1000); // P clear: the chunk before is free
    let top = used + 0x1000;
    m.chunk(top, 0, ((64 << 10) - (top - BASE)) | PREV_INUSE);
    m
}

#[test]
fn main_heap_free_chunks_and_top() {
    let mut m = main_heap();
    let end = BASE + (64 << 10);
    let t = Walker::new(&mut m, 100)
        .heap(BASE, end, HeapKind::Main)
        .unwrap();
    let top = (64 << 10) - 0x290 - 0x4000 - 0x1000;
    assert_eq!(t.free_chunks, 1);
    assert_eq!(t.top_bytes, top);
    assert_eq!(t.free_bytes, 0x4000 + top);
    assert_eq!(t.free_resident_bytes, 0x4000 + top);
    // Free chunk 0x290..0x4290: whole pages 0x1000..0x4000; top 0x5290..0x10000:
    // whole pages 0x6000..0x10000.
    assert_eq!(t.reclaimable_bytes, 0x3000 + 0xa000);
    // The free chunk's inner pages were given back (malloc_trim): free stays, resident
    // drops. Pages 0x1000..0x4000 of the heap lie wholly inside the free chunk.
    m.absent = vec![BASE / PAGE + 1, BASE / PAGE + 2, BASE / PAGE + 3];
    let t = Walker::new(&mut m, 100)
        .heap(BASE, end, HeapKind::Main)
        .unwrap();
    assert_eq!(t.free_bytes, 0x4000 + top);
    assert_eq!(t.free_resident_bytes, 0x4000 + top - 3 * PAGE);
    assert_eq!(
        t.reclaimable_bytes, 0xa000,
        "what trim could give back is gone"
    );
}

#[test]
fn every_rule_turns_a_doubtful_heap_into_no_number() {
    let end = BASE + (64 << 10);
    const USED: u64 = BASE + 0x290 + 0x4000;
    type Breaker = fn(&mut Image);
    let broken: [(&str, Breaker); 6] = [
        ("footer disagrees with header", |m| m.put(USED, 0x3ff0)),
        ("in-use chunk flagged for another arena", |m| {
            m.put(BASE + 8, 0x290 | PREV_INUSE | NON_MAIN_ARENA)
        }),
        ("mmapped flag inside a heap", |m| {
            m.put(USED + 8, 0x1000 | IS_MMAPPED)
        }),
        ("misaligned size", |m| m.put(USED + 8, 0x1008)),
        ("chain runs past the end", |m| m.put(USED + 8, 0x100000)),
        ("first chunk claims a free predecessor", |m| {
            m.put(BASE + 8, 0x290)
        }),
    ];
    for (what, breakit) in broken {
        let mut m = main_heap();
        breakit(&mut m);
        let r = Walker::new(&mut m, 100).heap(BASE, end, HeapKind::Main);
        assert_eq!(r, Err(Fault::Inconsistent), "{what}");
    }
    // The walk ends exactly at the heap's end, or not at all.
    let mut m = main_heap();
    let r = Walker::new(&mut m, 100).heap(BASE, end - 16, HeapKind::Main);
    assert_eq!(r, Err(Fault::Inconsistent));
}

#[test]
fn chunk_budget_stops_the_walk() {
    let mut m = main_heap();
    let r = Walker::new(&mut m, 3).heap(BASE, BASE + (64 << 10), HeapKind::Main);
    assert_eq!(r, Err(Fault::Budget));
}

const HEAP: u64 = 0x7f00_0000_0000;

/// Two heaps of one arena: the first (holding the arena) is full and ends in fence
/// posts, the second is current and ends in the top chunk. glibc 2.35+ layout.
pub fn arena() -> (Image, Vec<Heap>) {
    let size = 1u64 << 20;
    let mut m = Image::default();
    m.map(HEAP, size);
    let arena = HEAP + 48;
    let first = first_chunk(arena + 2200);
    m.chunk(first, 0, 0x1000 | PREV_INUSE | NON_MAIN_ARENA);
    let free = first + 0x1000;
    let fence = HEAP + size - 32;
    m.chunk(free, 0, (fence - free) | PREV_INUSE);
    m.chunk(fence, fence - free, 16);
    m.chunk(fence + 16, 16, PREV_INUSE);
    let second = HEAP + (64 << 20);
    m.map(second, size);
    m.chunk(second + 48, 0, 0x2000 | PREV_INUSE | NON_MAIN_ARENA);
    m.chunk(second + 48 + 0x2000, 0, (size - 48 - 0x2000) | PREV_INUSE);
    let heaps = vec![
        Heap {
            start: HEAP,
            first_chunk: first,
            end: HEAP + size,
        },
        Heap {
            start: second,
            first_chunk: second + 48,
            end: second + size,
        },
    ];
    (m, heaps)
}

#[test]
fn a_small_old_top_is_a_fence_post_too() {
    // glibc 2.31 (seed 500165 of the differential tester): the old top was under 64
    // bytes, so it became a 32-byte in-use chunk without the arena flag, then the size-0
    // header ends the heap.
    let (mut m, mut heaps) = arena();
    let fence = HEAP + (1 << 20) - 32;
    let first = first_chunk(HEAP + 48 + 2200);
    let used = fence - 0x10;
    m.chunk(
        first + 0x1000,
        0,
        (used - first - 0x1000) | PREV_INUSE | NON_MAIN_ARENA,
    );
    m.chunk(used, 0, 0x20 | PREV_INUSE);
    m.chunk(used + 0x20, 0x20, PREV_INUSE);
    heaps.truncate(1);
    let t = super::arena(&mut Walker::new(&mut m, 100), &heaps, HeapKind::Arena).unwrap();
    assert_eq!((t.free_chunks, t.free_bytes), (0, 0));
}

#[test]
fn arena_heaps_with_fence_posts_and_a_top() {
    let (mut m, heaps) = arena();
    let first = first_chunk(HEAP + 48 + 2200);
    let t = super::arena(&mut Walker::new(&mut m, 100), &heaps, HeapKind::Arena).unwrap();
    let fence = HEAP + (1 << 20) - 32;
    let top = (1 << 20) - 48 - 0x2000;
    assert_eq!(t.heaps, 2);
    assert_eq!(t.free_chunks, 1);
    assert_eq!(t.top_bytes, top);
    assert_eq!(t.free_bytes, (fence - first - 0x1000) + top);
    // The same heaps walked as the main arena's: in-use chunks carry the wrong flag.
    let r = super::arena(&mut Walker::new(&mut m, 100), &heaps, HeapKind::Main);
    assert_eq!(r, Err(Fault::Inconsistent));
    // The counting walker (the cross-check) sees the same bytes without residency.
    let c = super::arena(&mut Walker::counting(&mut m, 100), &heaps, HeapKind::Arena).unwrap();
    assert_eq!((c.free_bytes, c.top_bytes), (t.free_bytes, t.top_bytes));
    assert_eq!(c.free_resident_bytes, 0);
}

fn xorshift(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

/// Random, truncated and self-referencing headers: every walk ends, without a panic,
/// within the chunk budget.
#[test]
fn fuzzed_headers_never_panic_and_never_loop() {
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut outcomes = [0u32; 4];
    for round in 0..20_000 {
        let (mut m, heaps, kind) = if round % 2 == 0 {
            let h = Heap {
                start: BASE,
                first_chunk: BASE,
                end: BASE + (64 << 10),
            };
            (main_heap(), vec![h], HeapKind::Main)
        } else {
            let (m, h) = arena();
            (m, h, HeapKind::Arena)
        };
        let (base, len) = (m.regions[0].0, m.regions[0].1.len());
        for _ in 0..1 + xorshift(&mut state) % 6 {
            let r = xorshift(&mut state);
            // Half the time near the headers (the heap's start and its end), else anywhere.
            let near = if r % 2 == 0 { len / 8 } else { 1024 };
            let from_end = r % 4 == 1 && len > 8192;
            let at = (r as usize % near) * 8;
            let at = if from_end {
                len - 8 - at.min(len - 8)
            } else {
                at
            };
            let word = match r % 5 {
                0 => xorshift(&mut state),
                1 => 0,                       // a chunk of size 0: would not advance
                2 => (r >> 8) & 0xfff0,       // plausible small size
                3 => 16 | PREV_INUSE,         // fence-post size anywhere
                _ => base + (r % len as u64), // a pointer into the heap itself
            };
            m.put(base + at as u64, word);
        }
        if round % 7 == 0 {
            // Truncated: the image ends before the heap does.
            m.regions[0]
                .1
                .truncate(len / 2 + (xorshift(&mut state) as usize % (len / 2)));
        }
        let r = super::arena(&mut Walker::new(&mut m, 1000), &heaps, kind);
        let i = match r {
            Ok(t) => {
                assert!(t.free_chunks <= 1000);
                assert!(t.free_bytes <= 2 << 20);
                0
            }
            Err(Fault::Inconsistent) => 1,
            Err(Fault::Budget) => 2,
            Err(_) => 3,
        };
        outcomes[i] += 1;
    }
    // Most mutations land in chunk bodies and change nothing; many break the chain.
    assert!(outcomes[0] > 0 && outcomes[1] > 0, "{outcomes:?}");
}
