//! The chunk walk: glibc's heaps read from outside, validated at every step.
//!
//! Layout (glibc 2.27+, 64-bit; `malloc/malloc.c`, `malloc/arena.c`): a heap is a chain of
//! chunks. The second word of each chunk header is its size with three flag bits (bit 0
//! `PREV_INUSE`, bit 1 `IS_MMAPPED`, bit 2 `NON_MAIN_ARENA`); the first word is the size of
//! the chunk before it, valid only when that chunk is free. A chunk is free when the next
//! chunk's `PREV_INUSE` is clear. The last chunk of an arena's current heap is the top
//! chunk. Chunks in tcache and fastbins stay marked in use (glibc's `mallinfo2` counts the
//! fastbin ones as free: the gap is at most a few KiB per arena).
//!
//! The target runs while it is read, so nothing it holds is trusted: each header must be
//! aligned, at least the minimum size, inside the heap, carry the right arena flag; a free
//! chunk's size must equal the next chunk's `prev_size`; and the chain must end exactly at
//! the heap's end. Any doubt makes the heap "inconsistent", never a number.

/// What the walker reads: the target's memory and which of its pages are resident.
pub trait Target {
    /// Fills `buf` from the target's address `addr`; any short or failed read is an error.
    fn read(&mut self, addr: u64, buf: &mut [u8]) -> Result<(), Fault>;
    /// Bytes of `[start, end)` in pages present in RAM.
    fn resident_bytes(&mut self, start: u64, end: u64) -> Result<u64, Fault>;
}

/// Why a walk gave no number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// A header broke a rule: the heap moved under the walk, or it is not glibc's.
    Inconsistent,
    /// More chunks than the walk may visit.
    Budget,
    /// The target's memory or pagemap could not be read (denied, gone, I/O).
    Unreadable,
}

/// Which arena a heap belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum HeapKind {
    /// `[heap]`: the brk heap of the main arena (the main thread's allocations).
    Main,
    /// A 64 MiB-aligned heap of a non-main arena (other threads' allocations).
    Arena,
}

impl HeapKind {
    pub const ALL: [HeapKind; 2] = [HeapKind::Main, HeapKind::Arena];

    pub fn as_str(self) -> &'static str {
        match self {
            HeapKind::Main => "main",
            HeapKind::Arena => "arena",
        }
    }
}

/// What one heap holds, in bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HeapTotals {
    pub heaps: u64,
    /// Chunks walked, the top chunk included.
    pub chunks: u64,
    /// Free chunks plus the top chunk: what glibc holds and the program does not use.
    pub free_bytes: u64,
    /// The part of `free_bytes` in resident pages: what the host loses.
    pub free_resident_bytes: u64,
    /// Resident pages wholly inside free chunks, past each chunk's header and list links:
    /// what `malloc_trim(0)` would give back to the kernel. The page holding a free
    /// chunk's header stays resident whatever the program does.
    pub reclaimable_bytes: u64,
    /// The top chunk (the free end of the arena's current heap).
    pub top_bytes: u64,
}

impl HeapTotals {
    pub fn add(&mut self, o: &HeapTotals) {
        self.heaps += o.heaps;
        self.chunks += o.chunks;
        self.free_bytes = self.free_bytes.saturating_add(o.free_bytes);
        self.free_resident_bytes = self
            .free_resident_bytes
            .saturating_add(o.free_resident_bytes);
        self.reclaimable_bytes = self.reclaimable_bytes.saturating_add(o.reclaimable_bytes);
        self.top_bytes = self.top_bytes.saturating_add(o.top_bytes);
    }
}

const SIZE_SZ: u64 = 8;
/// `MALLOC_ALIGNMENT` on x86-64 and aarch64.
const ALIGN: u64 = 16;
/// `MINSIZE`: the smallest chunk.
const MIN_CHUNK: u64 = 32;
const PREV_INUSE: u64 = 1;
const IS_MMAPPED: u64 = 2;
const NON_MAIN_ARENA: u64 = 4;
const FLAGS: u64 = 7;
/// Headers are read in windows of this size; the window is wiped after each heap.
const WINDOW: usize = 64 << 10;
const PAGE: u64 = 4096;
/// `sizeof (struct malloc_chunk)`: header, list links and the large-bin links that
/// `malloc_trim` keeps in place (`mtrim` starts releasing at the first page after them).
const CHUNK_STRUCT: u64 = 48;
/// `sizeof (struct malloc_state)`, unchanged since glibc 2.27 on 64-bit: the first heap of
/// an arena holds it between `heap_info` and the first chunk.
pub const MALLOC_STATE_BYTES: u64 = 2200;

/// Reads headers through a window, so a run of small chunks costs one read per 64 KiB.
pub struct Walker<'t, T: Target> {
    target: &'t mut T,
    window: Vec<u8>,
    window_start: u64,
    window_len: usize,
    /// Chunks this walker may still visit.
    chunks_left: u64,
}

impl<'t, T: Target> Walker<'t, T> {
    pub fn new(target: &'t mut T, max_chunks: u64) -> Self {
        Walker {
            target,
            window: vec![0; WINDOW],
            window_start: 0,
            window_len: 0,
            chunks_left: max_chunks,
        }
    }

    /// Two words at `addr`; `sparse` reads only to the end of the page (after a large
    /// chunk the next header is far from the last window).
    fn words(&mut self, addr: u64, limit: u64, sparse: bool) -> Result<(u64, u64), Fault> {
        let inside = addr >= self.window_start
            && addr.saturating_add(16) <= self.window_start + self.window_len as u64;
        if !inside {
            let want = if sparse {
                (PAGE - addr % PAGE).max(16)
            } else {
                WINDOW as u64
            };
            let len = want.min(limit.saturating_sub(addr)).min(WINDOW as u64) as usize;
            if len < 16 {
                return Err(Fault::Inconsistent);
            }
            self.target.read(addr, &mut self.window[..len])?;
            self.window_start = addr;
            self.window_len = len;
        }
        let at = (addr - self.window_start) as usize;
        let w = |i: usize| {
            let b: [u8; 8] = self.window[i..i + 8].try_into().unwrap_or([0; 8]);
            u64::from_le_bytes(b)
        };
        Ok((w(at), w(at + 8)))
    }

    fn forget(&mut self) {
        self.window.fill(0);
        self.window_len = 0;
    }

    /// Walks the chunks of `[first, end)`; `kind` fixes the arena flag in-use chunks carry.
    /// An arena heap that is not its arena's current one ends in two fence posts instead
    /// of a top chunk.
    pub fn heap(&mut self, first: u64, end: u64, kind: HeapKind) -> Result<HeapTotals, Fault> {
        let r = self.chain(first, end, kind);
        self.forget();
        r
    }

    /// Counts a free chunk `[start, end)`: its size, its resident bytes, and the resident
    /// pages `malloc_trim` could release.
    fn free_chunk(&mut self, t: &mut HeapTotals, start: u64, end: u64) -> Result<(), Fault> {
        t.free_bytes = t.free_bytes.saturating_add(end - start);
        let resident = self.target.resident_bytes(start, end)?;
        t.free_resident_bytes = t.free_resident_bytes.saturating_add(resident);
        // The whole pages past the chunk's header: the edges are at most a page each, so
        // they are subtracted rather than the middle read twice.
        let inner_start = (start + CHUNK_STRUCT).next_multiple_of(PAGE);
        let inner_end = end - end % PAGE;
        if inner_end > inner_start {
            let head = self.target.resident_bytes(start, inner_start)?;
            let tail = self.target.resident_bytes(inner_end, end)?;
            let inner = resident.saturating_sub(head).saturating_sub(tail);
            t.reclaimable_bytes = t.reclaimable_bytes.saturating_add(inner);
        }
        Ok(())
    }

    fn chain(&mut self, first: u64, end: u64, kind: HeapKind) -> Result<HeapTotals, Fault> {
        if first % ALIGN != 0 || end % ALIGN != 0 || first >= end {
            return Err(Fault::Inconsistent);
        }
        let mut t = HeapTotals {
            heaps: 1,
            ..HeapTotals::default()
        };
        let mut addr = first;
        // The chunk before `addr`: (address, size, flags), its state unknown until now.
        let mut prev: Option<(u64, u64, u64)> = None;
        let mut last_size = 0u64;
        loop {
            if self.chunks_left == 0 {
                return Err(Fault::Budget);
            }
            self.chunks_left -= 1;
            let (prev_size, field) = self.words(addr, end, last_size >= WINDOW as u64 / 4)?;
            let size = field & !FLAGS;
            if let Some((p_addr, p_size, p_flags)) = prev {
                if field & PREV_INUSE == 0 {
                    // The chunk before is free: its footer must agree with its header.
                    if prev_size != p_size {
                        return Err(Fault::Inconsistent);
                    }
                    self.free_chunk(&mut t, p_addr, p_addr + p_size)?;
                } else {
                    let foreign = p_flags & NON_MAIN_ARENA != 0;
                    if foreign != (kind == HeapKind::Arena) {
                        return Err(Fault::Inconsistent);
                    }
                }
            } else if field & PREV_INUSE == 0 {
                // Nothing precedes the first chunk, so glibc marks it as following a used one.
                return Err(Fault::Inconsistent);
            }
            t.chunks += 1;
            if field & IS_MMAPPED != 0 || size % ALIGN != 0 {
                return Err(Fault::Inconsistent);
            }
            let next = addr.checked_add(size).ok_or(Fault::Inconsistent)?;
            if next == end && size >= MIN_CHUNK {
                // The top chunk: free by definition, it ends the arena's current heap.
                t.top_bytes = size;
                self.free_chunk(&mut t, addr, end)?;
                return Ok(t);
            }
            if kind == HeapKind::Arena && size == 2 * SIZE_SZ && next + 2 * SIZE_SZ == end {
                // Fence posts: a chunk of one header, then a header of size 0 at the end.
                let (_, last) = self.words(next, end, false)?;
                if last & !FLAGS == 0 && last & PREV_INUSE != 0 {
                    t.chunks += 1;
                    return Ok(t);
                }
                return Err(Fault::Inconsistent);
            }
            if size < MIN_CHUNK || next >= end {
                return Err(Fault::Inconsistent);
            }
            prev = Some((addr, size, field & FLAGS));
            last_size = size;
            addr = next;
        }
    }
}

/// Where the first chunk of the main arena's brk heap starts: glibc moves the start so that
/// the user pointer (`chunk + 16`) is aligned.
pub fn brk_first_chunk(heap_start: u64) -> u64 {
    let misalign = (heap_start + 2 * SIZE_SZ) % ALIGN;
    if misalign == 0 {
        heap_start
    } else {
        heap_start + ALIGN - misalign
    }
}

/// `struct _heap_info`, the header of every non-main arena heap.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeapInfo {
    /// The arena (`malloc_state`) this heap belongs to.
    pub arena: u64,
    pub prev: u64,
    /// Bytes of the heap in use by the arena: the chain of chunks ends here.
    pub size: u64,
    pub mprotect_size: u64,
}

impl HeapInfo {
    pub fn parse(b: &[u8; 32]) -> HeapInfo {
        let w = |i: usize| {
            let a: [u8; 8] = b[i * 8..i * 8 + 8].try_into().unwrap_or([0; 8]);
            u64::from_le_bytes(a)
        };
        HeapInfo {
            arena: w(0),
            prev: w(1),
            size: w(2),
            mprotect_size: w(3),
        }
    }
}

/// One non-main arena heap as the maps show it: its 64 MiB-aligned start and the end of
/// its read-write part.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ArenaHeap {
    pub start: u64,
    pub rw_end: u64,
}

/// Walks every arena heap. The first heap of an arena holds the arena itself right after
/// its `heap_info` (48 bytes since glibc 2.35, 32 before), which tells the header's size;
/// every other heap of the arena must point at an arena found that way.
pub fn arena_heaps<T: Target>(
    w: &mut Walker<'_, T>,
    heaps: &[ArenaHeap],
) -> Result<HeapTotals, Fault> {
    let mut infos = Vec::with_capacity(heaps.len());
    for h in heaps {
        let mut b = [0u8; 32];
        w.target.read(h.start, &mut b)?;
        let info = HeapInfo::parse(&b);
        let fits = info.size > 0
            && info.size <= h.rw_end.saturating_sub(h.start)
            && info.size <= info.mprotect_size
            && info.prev % (64 << 20) == 0;
        if !fits {
            return Err(Fault::Inconsistent);
        }
        infos.push(info);
    }
    // Arenas whose first heap is here, and the header size they show.
    let mut header = None;
    for (h, info) in heaps.iter().zip(&infos) {
        let offset = info.arena.wrapping_sub(h.start);
        if (offset == 32 || offset == 48) && info.prev == 0 {
            if header.is_some_and(|size| size != offset) {
                return Err(Fault::Inconsistent);
            }
            header = Some(offset);
        }
    }
    let mut total = HeapTotals::default();
    let Some(header) = header else {
        return if heaps.is_empty() {
            Ok(total)
        } else {
            Err(Fault::Inconsistent)
        };
    };
    for (h, info) in heaps.iter().zip(&infos) {
        let first = if info.arena == h.start + header {
            brk_first_chunk(info.arena + MALLOC_STATE_BYTES)
        } else if infos
            .iter()
            .zip(heaps)
            .any(|(i, o)| i.arena == o.start + header && i.arena == info.arena)
        {
            h.start + header
        } else {
            return Err(Fault::Inconsistent);
        };
        total.add(&w.heap(first, h.start + info.size, HeapKind::Arena)?);
    }
    Ok(total)
}

#[cfg(test)]
pub(crate) mod tests {
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
}
