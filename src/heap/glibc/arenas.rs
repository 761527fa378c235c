//! Finds every glibc arena and heap of a process the way glibc itself does: the main arena
//! (`main_arena`, in libc's data), the ring of arenas its `next` starts, and each non-main
//! arena's heaps through `heap_info` (the current heap holds the top chunk; `prev` leads to
//! the older ones; the oldest holds the arena). The mappings only bound and check reads:
//! the kernel merges neighbouring heaps into one mapping, and glibc 2.41 maps heaps without
//! `MAP_NORESERVE`, so their shape proves nothing.
//!
//! Everything read is checked against what glibc guarantees; any doubt is
//! [`Fault::Inconsistent`] (the process changed under the read: tried again) or
//! [`Fault::NotFound`] (no arena that fits: not measured).

use std::collections::HashSet;

use super::walk::Heap;
use super::{Arena, HeapInfo, Layout, FLAGS, HEAP_MAX, MALLOC_STATE_BYTES, NONCONTIGUOUS};
use crate::heap::glibc;
use crate::heap::target::{Fault, Target};

/// What the mappings say, sorted by address: used only to bound and check reads.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Bounds {
    /// `[heap]`: the brk heap (adjacent parts joined).
    pub brk: Option<(u64, u64)>,
    /// Anonymous read-write ranges (adjacent mappings joined), `[heap]` included: where a
    /// main arena that fell back to `mmap` keeps its memory.
    pub anon_rw: Vec<(u64, u64)>,
    /// libc's read-write data, where `main_arena` lives.
    pub libc_data: Vec<(u64, u64)>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FoundArena {
    pub state: Arena,
    pub main: bool,
    /// The heaps, oldest first; empty for a main arena whose memory is not one brk range
    /// (its pieces are not recorded anywhere a reader can find them).
    pub heaps: Vec<Heap>,
    /// Where the arena's chunks may lie, sorted: its heaps, or every anonymous read-write
    /// range for a main arena whose memory is not contiguous.
    pub ranges: Vec<(u64, u64)>,
    /// Size of the top chunk (0 before the arena's first `malloc`).
    pub top_size: u64,
}

/// Every arena of a process, the main one first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Discovery {
    pub arenas: Vec<FoundArena>,
    /// The alignment and reservation of each non-main heap: 64 MiB, or four huge pages
    /// with `glibc.malloc.hugetlb=2` (2.35+).
    pub heap_max: u64,
}

impl Discovery {
    /// Heaps of the non-main arenas.
    pub(crate) fn arena_heaps(&self) -> u64 {
        self.arenas
            .iter()
            .filter(|a| !a.main)
            .map(|a| a.heaps.len() as u64)
            .sum()
    }
}

/// Arenas followed around the ring before it is called broken: glibc's default ceiling is
/// 8 per CPU; `M_ARENA_MAX` can raise it.
const MAX_ARENAS: usize = 4096;
/// Heaps of one arena (4 TiB of 64 MiB heaps).
const MAX_HEAPS: usize = 65536;
/// libc's data is a few pages; more than this is not libc's.
const MAX_DATA_BYTES: u64 = 1 << 20;
/// The lowest address a pointer can hold (the zero page is never mapped).
const MIN_POINTER: u64 = 4096;

/// Finds the main arena in libc's data and every arena of its ring.
pub(crate) fn discover<T: Target>(t: &mut T, layout: &Layout, b: &Bounds) -> Result<Discovery, Fault> {
    let mut found: Option<Discovery> = None;
    // An arena-shaped candidate whose ring did not hold: the process may have changed
    // under the read.
    let mut broken = false;
    let mut tried = 0u64;
    for &(start, end) in &b.libc_data {
        let len = end.saturating_sub(start);
        tried += len;
        if tried > MAX_DATA_BYTES {
            return Err(Fault::NotFound);
        }
        let mut data = vec![0u8; len as usize];
        t.read(start, &mut data)?;
        let state = MALLOC_STATE_BYTES as usize;
        let mut off = 0usize;
        while off + state <= data.len() {
            let addr = start + off as u64;
            if !may_be_arena(addr, &data[off..off + state]) {
                off += 8;
                continue;
            }
            if let Some(main) = Arena::parse(addr, &data[off..off + state])
                .filter(|a| a.next >= MIN_POINTER && a.is_plausible())
            {
                match ring(t, layout, b, main) {
                    Ok(_) if found.is_some() => {
                        // Two arenas that each close a ring: not a shape glibc makes.
                        return Err(Fault::Inconsistent);
                    }
                    Ok(d) => found = Some(d),
                    Err(Fault::Remote) => return Err(Fault::Remote),
                    Err(_) => broken = true,
                }
            }
            off += 8;
        }
    }
    match found {
        Some(d) => Ok(d),
        None if broken => Err(Fault::Inconsistent),
        None => Err(Fault::NotFound),
    }
}

/// Two words rule out almost every offset before an arena is parsed: `next` must be a
/// pointer, and the unsorted bin either empty (both heads at the bin) or two chunk
/// pointers.
fn may_be_arena(addr: u64, b: &[u8]) -> bool {
    let w = |at: usize| u64::from_le_bytes(b[at..at + 8].try_into().unwrap_or([0; 8]));
    let (next, fd, bk) = (w(0x870), w(0x70), w(0x78));
    let bin = addr + 0x60;
    next >= MIN_POINTER
        && next % glibc::SIZE_SZ == 0
        && ((fd == bin && bk == bin)
            || (fd != 0 && bk != 0 && fd % glibc::ALIGN == 0 && bk % glibc::ALIGN == 0))
}

/// Checks `main` as the main arena and follows its ring back to it.
fn ring<T: Target>(
    t: &mut T,
    layout: &Layout,
    b: &Bounds,
    main: Arena,
) -> Result<Discovery, Fault> {
    let main_arena = main_arena(t, b, main)?;
    let mut seen = HashSet::from([main_arena.state.addr]);
    let mut arenas = vec![main_arena];
    let mut heap_max = HEAP_MAX;
    let mut next = arenas[0].state.next;
    while next != arenas[0].state.addr {
        if arenas.len() >= MAX_ARENAS || !seen.insert(next) {
            return Err(Fault::Inconsistent);
        }
        let (arena, max) = arena(t, layout, next)?;
        heap_max = max;
        next = arena.state.next;
        arenas.push(arena);
    }
    Ok(Discovery { arenas, heap_max })
}

/// A pointer of the ring that could not be followed: the ring moved under the read, or it
/// points into a file of a FUSE or network mount (never read, and said so).
fn moved(f: Fault) -> Fault {
    match f {
        Fault::Remote => Fault::Remote,
        _ => Fault::Inconsistent,
    }
}

fn read_arena<T: Target>(t: &mut T, addr: u64) -> Result<Arena, Fault> {
    if addr % glibc::SIZE_SZ != 0 || addr < MIN_POINTER {
        return Err(Fault::Inconsistent);
    }
    let mut b = vec![0u8; MALLOC_STATE_BYTES as usize];
    t.read(addr, &mut b).map_err(moved)?;
    let a = Arena::parse(addr, &b).ok_or(Fault::Inconsistent)?;
    if a.is_plausible() {
        Ok(a)
    } else {
        Err(Fault::Inconsistent)
    }
}

/// The size of the chunk at `addr` (its flags cleared).
fn chunk_size<T: Target>(t: &mut T, addr: u64) -> Result<u64, Fault> {
    let mut h = [0u8; 16];
    t.read(addr, &mut h).map_err(moved)?;
    Ok(u64::from_le_bytes(h[8..].try_into().unwrap_or([0; 8])) & !FLAGS)
}

fn containing(ranges: &[(u64, u64)], addr: u64) -> Option<(u64, u64)> {
    let i = ranges.partition_point(|&(_, end)| end <= addr);
    ranges.get(i).copied().filter(|&(start, _)| start <= addr)
}

/// The main arena: its top chunk must end exactly where its memory ends (the brk heap's
/// end while it is contiguous) and what it says it got from the system must fit.
fn main_arena<T: Target>(t: &mut T, b: &Bounds, state: Arena) -> Result<FoundArena, Fault> {
    if state.top_is_initial() {
        // No malloc has reached the main arena yet.
        if state.system_mem != 0 {
            return Err(Fault::Inconsistent);
        }
        return Ok(FoundArena {
            state,
            main: true,
            heaps: Vec::new(),
            ranges: Vec::new(),
            top_size: 0,
        });
    }
    if state.top % glibc::ALIGN != 0 || state.top < MIN_POINTER {
        return Err(Fault::Inconsistent);
    }
    if state.flags & NONCONTIGUOUS == 0 {
        let (start, end) = b.brk.ok_or(Fault::Inconsistent)?;
        if state.top < start || state.top >= end {
            return Err(Fault::Inconsistent);
        }
        let top_size = chunk_size(t, state.top)?;
        if state.top.checked_add(top_size) != Some(end) || state.system_mem != end - start {
            return Err(Fault::Inconsistent);
        }
        let heap = Heap {
            start,
            first_chunk: glibc::first_chunk(start),
            end,
        };
        return Ok(FoundArena {
            state,
            main: true,
            heaps: vec![heap],
            ranges: vec![(start, end)],
            top_size,
        });
    }
    // `brk` failed and the arena went on in `mmap`ped pieces: its chunks lie in anonymous
    // memory, and its top chunk ends inside one range.
    let (_, range_end) = containing(&b.anon_rw, state.top).ok_or(Fault::Inconsistent)?;
    let top_size = chunk_size(t, state.top)?;
    // What it got from the system lies in that anonymous memory.
    let anon: u64 = b.anon_rw.iter().map(|(s, e)| e - s).sum();
    if state.top.saturating_add(top_size) > range_end
        || state.system_mem < top_size
        || state.system_mem > anon
    {
        return Err(Fault::Inconsistent);
    }
    Ok(FoundArena {
        state,
        main: true,
        heaps: Vec::new(),
        ranges: b.anon_rw.clone(),
        top_size,
    })
}

/// A non-main arena and its heaps: the heap holding the top chunk, then each `prev` back
/// to the oldest, which holds the arena itself right after its `heap_info`.
fn arena<T: Target>(t: &mut T, layout: &Layout, addr: u64) -> Result<(FoundArena, u64), Fault> {
    let state = read_arena(t, addr)?;
    if addr % glibc::ALIGN != 0 || state.flags & NONCONTIGUOUS == 0 || state.top_is_initial() {
        return Err(Fault::Inconsistent);
    }
    let top_size = chunk_size(t, state.top)?;
    // 64 MiB heaps, or four huge pages (2 MiB or 1 GiB) with glibc.malloc.hugetlb=2.
    let mut current = None;
    for max in [HEAP_MAX, 4 << 21, 4 << 30] {
        let h = state.top & !(max - 1);
        if let Ok(info) = heap_info(t, h) {
            if info.arena == addr {
                current = Some((h, info, max));
                break;
            }
        }
    }
    let (mut h, mut info, max) = current.ok_or(Fault::Inconsistent)?;
    if state.top.checked_add(top_size) != h.checked_add(info.size) {
        return Err(Fault::Inconsistent);
    }
    let mut heaps = Vec::new();
    let mut system_mem = 0u64;
    loop {
        if info.arena != addr
            || info.size > max
            || info.mprotect_size > max
            || info.size < layout.heap_info_bytes
            || heaps.len() >= MAX_HEAPS
        {
            return Err(Fault::Inconsistent);
        }
        let end = h.checked_add(info.size).ok_or(Fault::Inconsistent)?;
        system_mem += info.size;
        heaps.push(Heap {
            start: h,
            first_chunk: h + layout.heap_info_bytes,
            end,
        });
        if info.prev == 0 {
            break;
        }
        if info.prev % max != 0 {
            return Err(Fault::Inconsistent);
        }
        h = info.prev;
        info = heap_info(t, h)?;
    }
    heaps.reverse();
    let oldest = &mut heaps[0];
    if addr != oldest.start + layout.heap_info_bytes || system_mem != state.system_mem {
        return Err(Fault::Inconsistent);
    }
    oldest.first_chunk = glibc::first_chunk(addr.saturating_add(MALLOC_STATE_BYTES));
    if oldest.first_chunk >= oldest.end {
        return Err(Fault::Inconsistent);
    }
    let mut ranges: Vec<(u64, u64)> = heaps.iter().map(|h| (h.first_chunk, h.end)).collect();
    ranges.sort_unstable();
    let found = FoundArena {
        state,
        main: false,
        heaps,
        ranges,
        top_size,
    };
    Ok((found, max))
}

fn heap_info<T: Target>(t: &mut T, h: u64) -> Result<HeapInfo, Fault> {
    let mut b = [0u8; 32];
    t.read(h, &mut b).map_err(moved)?;
    Ok(HeapInfo::parse(&b))
}

/// Whether `[start, end)` lies inside one of the sorted `ranges`.
pub fn within(ranges: &[(u64, u64)], start: u64, end: u64) -> bool {
    containing(ranges, start).is_some_and(|(_, e)| end <= e && start <= end)
}

/// Whether `len` bytes from `start` lie inside one of `ranges`; a length that would carry
/// the end past the address space (a corrupt size word) does not.
pub(crate) fn within_len(ranges: &[(u64, u64)], start: u64, len: u64) -> bool {
    start
        .checked_add(len)
        .is_some_and(|end| within(ranges, start, end))
}
