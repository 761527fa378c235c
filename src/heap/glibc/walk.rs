//! The chunk walk: glibc's heaps read header by header from outside, validated at every
//! step. It costs a read per 64 KiB of small chunks, so it runs where heaps are small, as an
//! independent check of the free-list count (`freelist`): two methods that disagree mean
//! "not measured", never a number.
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

use super::{ALIGN, FLAGS, IS_MMAPPED, MIN_CHUNK, NON_MAIN_ARENA, PREV_INUSE, SIZE_SZ};

/// One heap of an arena: where its chunks start and end (the top chunk or the fence posts
/// end it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Heap {
    /// The heap's start: its `heap_info`, or the brk heap's first byte.
    pub start: u64,
    pub first_chunk: u64,
    pub end: u64,
}

use crate::heap::target::{Fault, Target};

/// Which arena a heap belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum HeapKind {
    /// `[heap]`: the brk heap of the main arena (the main thread's allocations).
    Main,
    /// The heaps of the non-main arenas (other threads' allocations).
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

/// What the heaps of one kind hold free, in bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HeapTotals {
    pub heaps: u64,
    /// Free chunks, the top chunks not included.
    pub free_chunks: u64,
    /// Free chunks plus the top chunks: what glibc holds and the program does not use
    /// (`mallinfo2().fordblks`).
    pub free_bytes: u64,
    /// The part of `free_bytes` in resident pages: what the host loses.
    pub free_resident_bytes: u64,
    /// Resident pages wholly inside free chunks, past each chunk's header and list links:
    /// what `malloc_trim(0)` would give back to the kernel. The page holding a free
    /// chunk's header stays resident whatever the program does.
    pub reclaimable_bytes: u64,
    /// The top chunks (the free end of each arena's current heap).
    pub top_bytes: u64,
    /// The part of `reclaimable_bytes` in the top chunks: what glibc trims by itself at a
    /// free once the top is above its trim threshold. The rest lies below live chunks,
    /// where only `malloc_trim` reaches it.
    pub top_reclaimable_bytes: u64,
    /// The part of `free_bytes` in fastbins (`mallinfo2().fsmblks`): the chunk walk sees
    /// these as in use, as glibc marks them.
    pub fast_bytes: u64,
}

impl HeapTotals {
    pub fn add(&mut self, o: &HeapTotals) {
        self.heaps += o.heaps;
        self.free_chunks += o.free_chunks;
        self.free_bytes = self.free_bytes.saturating_add(o.free_bytes);
        self.free_resident_bytes = self
            .free_resident_bytes
            .saturating_add(o.free_resident_bytes);
        self.reclaimable_bytes = self.reclaimable_bytes.saturating_add(o.reclaimable_bytes);
        self.top_bytes = self.top_bytes.saturating_add(o.top_bytes);
        self.top_reclaimable_bytes = self
            .top_reclaimable_bytes
            .saturating_add(o.top_reclaimable_bytes);
        self.fast_bytes = self.fast_bytes.saturating_add(o.fast_bytes);
    }
}

/// Counts a free chunk `[start, end)`: its size and, with `residency`, its resident bytes
/// and the resident pages `malloc_trim` could release (whole pages past the chunk's header
/// and list links).
pub(crate) fn count_free<T: Target>(
    target: &mut T,
    t: &mut HeapTotals,
    start: u64,
    end: u64,
    residency: bool,
) -> Result<(), Fault> {
    t.free_bytes = t.free_bytes.saturating_add(end - start);
    if !residency {
        return Ok(());
    }
    let page = target.page_size();
    let resident = target.resident_bytes(start, end)?;
    t.free_resident_bytes = t.free_resident_bytes.saturating_add(resident);
    // The edges are at most a page each, so they are subtracted rather than the middle
    // read twice.
    let inner_start = (start + CHUNK_STRUCT).next_multiple_of(page);
    let inner_end = end - end % page;
    if inner_end > inner_start {
        let head = target.resident_bytes(start, inner_start)?;
        let tail = target.resident_bytes(inner_end, end)?;
        let inner = resident.saturating_sub(head).saturating_sub(tail);
        t.reclaimable_bytes = t.reclaimable_bytes.saturating_add(inner);
    }
    Ok(())
}

/// Headers are read in windows of this size; the window is wiped after each heap.
const WINDOW: usize = 64 << 10;
/// After a chunk this large the next header is read alone, to the end of its page.
const SPARSE_READ: u64 = 4096;
/// `sizeof (struct malloc_chunk)`: header, list links and the large-bin links that
/// `malloc_trim` keeps in place (`mtrim` starts releasing at the first page after them).
const CHUNK_STRUCT: u64 = 48;

/// Reads headers through a window, so a run of small chunks costs one read per 64 KiB.
pub struct Walker<'t, T: Target> {
    target: &'t mut T,
    window: Vec<u8>,
    window_start: u64,
    window_len: usize,
    /// Chunks this walker may still visit.
    chunks_left: u64,
    /// Count resident and reclaimable bytes too (not only free bytes).
    residency: bool,
}

impl<'t, T: Target> Walker<'t, T> {
    pub fn new(target: &'t mut T, max_chunks: u64) -> Self {
        Walker {
            target,
            window: vec![0; WINDOW],
            window_start: 0,
            window_len: 0,
            chunks_left: max_chunks,
            residency: true,
        }
    }

    /// A walker that counts free chunks and bytes only: the cross-check.
    pub(crate) fn counting(target: &'t mut T, max_chunks: u64) -> Self {
        Walker {
            residency: false,
            ..Walker::new(target, max_chunks)
        }
    }

    /// Two words at `addr`; `sparse` reads only to the end of the page (after a large
    /// chunk the next header is far from the last window).
    fn words(&mut self, addr: u64, limit: u64, sparse: bool) -> Result<(u64, u64), Fault> {
        let inside = addr >= self.window_start
            && addr.saturating_add(16) <= self.window_start + self.window_len as u64;
        if !inside {
            let want = if sparse {
                (SPARSE_READ - addr % SPARSE_READ).max(16)
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

    fn free_chunk(&mut self, t: &mut HeapTotals, start: u64, end: u64) -> Result<(), Fault> {
        count_free(self.target, t, start, end, self.residency)
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
                    t.free_chunks += 1;
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
            let fence = size == 2 * SIZE_SZ || size == MIN_CHUNK;
            if kind == HeapKind::Arena && fence && next + 2 * SIZE_SZ == end {
                // Fence posts (sysmalloc, when the arena moves to a new heap): a chunk of
                // one header, then a header of size 0 at the end. When the old top chunk
                // was smaller than two MINSIZE, the old top itself, 16 or 32 bytes marked
                // in use without the arena flag, stands before the final header.
                let (_, last) = self.words(next, end, false)?;
                if last & !FLAGS == 0 && last & PREV_INUSE != 0 {
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

/// Walks every heap of `heaps` (one arena's, oldest first; `kind` fixes the arena flag).
pub fn arena<T: Target>(
    w: &mut Walker<'_, T>,
    heaps: &[Heap],
    kind: HeapKind,
) -> Result<HeapTotals, Fault> {
    let mut total = HeapTotals::default();
    for h in heaps {
        total.add(&w.heap(h.first_chunk, h.end, kind)?);
    }
    Ok(total)
}

#[cfg(test)]
pub(crate) mod tests;
