//! The walk on crafted heaps: each validation rule, the retry, the chunk budget, and
//! fuzzed headers.

use super::*;

/// A target's memory as one byte image at `base`; pages listed in `absent` are not
/// resident.
pub struct Image {
    pub base: u64,
    pub bytes: Vec<u8>,
    pub absent: Vec<u64>,
}

impl Image {
    pub fn new(base: u64, len: usize) -> Image {
        Image {
            base,
            bytes: vec![0; len],
            absent: Vec::new(),
        }
    }

    pub fn put(&mut self, addr: u64, word: u64) {
        let at = (addr - self.base) as usize;
        self.bytes[at..at + 8].copy_from_slice(&word.to_le_bytes());
    }

    /// A chunk header at `addr`: prev_size and size with flags.
    pub fn chunk(&mut self, addr: u64, prev_size: u64, size_and_flags: u64) {
        self.put(addr, prev_size);
        self.put(addr + 8, size_and_flags);
    }
}

impl Target for Image {
    fn read(&mut self, addr: u64, buf: &mut [u8]) -> Result<(), Fault> {
        let at = addr.checked_sub(self.base).ok_or(Fault::Unreadable)? as usize;
        let src = self
            .bytes
            .get(at..at + buf.len())
            .ok_or(Fault::Unreadable)?;
        buf.copy_from_slice(src);
        Ok(())
    }

    fn resident_bytes(&mut self, start: u64, end: u64) -> Result<u64, Fault> {
        let mut total = 0;
        let mut page = start / PAGE;
        while page * PAGE < end {
            if !self.absent.contains(&page) {
                total += end.min((page + 1) * PAGE) - start.max(page * PAGE);
            }
            page += 1;
        }
        Ok(total)
    }
}

const BASE: u64 = 0x5555_0000_0000;

/// A brk heap of 64 KiB: a used chunk, a free one, a used one, then the top chunk.
pub fn main_heap() -> Image {
    let mut m = Image::new(BASE, 64 << 10);
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
    assert_eq!(t.chunks, 4);
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
pub fn arena() -> (Image, Vec<ArenaHeap>) {
    let size = 1u64 << 20;
    let mut m = Image::new(HEAP, (64 << 20) + size as usize);
    let arena = HEAP + 48;
    // heap_info: ar_ptr, prev, size, mprotect_size.
    for (i, w) in [arena, 0, size, size].into_iter().enumerate() {
        m.put(HEAP + 8 * i as u64, w);
    }
    let first = brk_first_chunk(arena + MALLOC_STATE_BYTES);
    m.chunk(first, 0, 0x1000 | PREV_INUSE | NON_MAIN_ARENA);
    let free = first + 0x1000;
    let fence = HEAP + size - 32;
    m.chunk(free, 0, (fence - free) | PREV_INUSE);
    m.chunk(fence, fence - free, 16);
    m.chunk(fence + 16, 16, PREV_INUSE);
    let second = HEAP + (64 << 20);
    for (i, w) in [arena, HEAP, size, size].into_iter().enumerate() {
        m.put(second + 8 * i as u64, w);
    }
    m.chunk(second + 48, 0, 0x2000 | PREV_INUSE | NON_MAIN_ARENA);
    m.chunk(second + 48 + 0x2000, 0, (size - 48 - 0x2000) | PREV_INUSE);
    let heaps = vec![
        ArenaHeap {
            start: HEAP,
            rw_end: HEAP + size,
        },
        ArenaHeap {
            start: second,
            rw_end: second + size,
        },
    ];
    (m, heaps)
}

#[test]
fn arena_heaps_with_fence_posts_and_a_top() {
    let (mut m, heaps) = arena();
    let first = brk_first_chunk(HEAP + 48 + MALLOC_STATE_BYTES);
    let t = arena_heaps(&mut Walker::new(&mut m, 100), &heaps).unwrap();
    let fence = HEAP + (1 << 20) - 32;
    let top = (1 << 20) - 48 - 0x2000;
    assert_eq!(t.heaps, 2);
    assert_eq!(t.top_bytes, top);
    assert_eq!(t.free_bytes, (fence - first - 0x1000) + top);
    // A heap whose arena is none of the first heaps seen is not glibc's.
    let (mut m, heaps) = arena();
    m.put(HEAP + (64 << 20), HEAP + 0x1234_0000);
    assert!(arena_heaps(&mut Walker::new(&mut m, 100), &heaps).is_err());
    // heap_info claiming more than the mapping.
    let (mut m, heaps) = arena();
    m.put(HEAP + 16, 2 << 20);
    assert!(arena_heaps(&mut Walker::new(&mut m, 100), &heaps).is_err());
}

/// Headers that change while they are read: inconsistent on the first try only.
struct Moving {
    image: Image,
    reads: u32,
    broken_reads: u32,
}

impl Target for Moving {
    fn read(&mut self, addr: u64, buf: &mut [u8]) -> Result<(), Fault> {
        self.reads += 1;
        self.image.read(addr, buf)?;
        if self.reads <= self.broken_reads {
            buf.fill(0xff);
        }
        Ok(())
    }

    fn resident_bytes(&mut self, start: u64, end: u64) -> Result<u64, Fault> {
        self.image.resident_bytes(start, end)
    }
}

#[test]
fn a_heap_that_moved_is_tried_once_more_then_given_up() {
    let end = BASE + (64 << 10);
    let mut once = Moving {
        image: main_heap(),
        reads: 0,
        broken_reads: 1,
    };
    let m = crate::collect::heap::measure(&mut once, Some((BASE, end)), &[], 100).unwrap();
    assert_eq!(m.main.chunks, 4);
    let mut always = Moving {
        image: main_heap(),
        reads: 0,
        broken_reads: u32::MAX,
    };
    let r = crate::collect::heap::measure(&mut always, Some((BASE, end)), &[], 100);
    assert_eq!(r, Err(Fault::Inconsistent));
    assert_eq!(always.reads, 2, "two tries, one read each");
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
        let (mut m, heaps) = if round % 2 == 0 {
            (main_heap(), Vec::new())
        } else {
            arena()
        };
        let len = m.bytes.len();
        for _ in 0..1 + xorshift(&mut state) % 6 {
            let r = xorshift(&mut state);
            // Half the time near the headers (the heap's start and its end), else anywhere.
            let near = if r % 2 == 0 { len / 8 } else { 1024 };
            let from_end = r % 4 == 1 && len > 8192 && heaps.is_empty();
            let at = (r as usize % near) * 8;
            let at = if from_end {
                len - 8 - at.min(len - 8)
            } else {
                at
            };
            let word = match r % 5 {
                0 => xorshift(&mut state),
                1 => 0,                         // a chunk of size 0: would not advance
                2 => (r >> 8) & 0xfff0,         // plausible small size
                3 => 16 | PREV_INUSE,           // fence-post size anywhere
                _ => m.base + (r % len as u64), // a pointer into the heap itself
            };
            m.put(m.base + at as u64, word);
        }
        if round % 7 == 0 {
            // Truncated: the image ends before the heap does.
            m.bytes
                .truncate(len / 2 + (xorshift(&mut state) as usize % (len / 2)));
        }
        let r = if heaps.is_empty() {
            crate::collect::heap::measure(&mut m, Some((BASE, BASE + (64 << 10))), &[], 1000)
        } else {
            crate::collect::heap::measure(&mut m, None, &heaps, 1000)
        };
        let i = match r {
            Ok(t) => {
                assert!(t.main.chunks + t.arenas.chunks <= 1000);
                0
            }
            Err(Fault::Inconsistent) => 1,
            Err(Fault::Budget) => 2,
            Err(Fault::Unreadable) => 3,
        };
        outcomes[i] += 1;
    }
    // Most mutations land in chunk bodies and change nothing; many break the chain.
    assert!(outcomes[0] > 0 && outcomes[1] > 0, "{outcomes:?}");
}
