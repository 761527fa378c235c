//! Counts what glibc's `int_mallinfo` counts, from outside: every arena's fastbins, its
//! unsorted, small and large bins, and its top chunk. The cost follows the free chunks,
//! not the heap: a heap of eight million chunks with sixty thousand free ones costs sixty
//! thousand reads.
//!
//! Each list is followed the way glibc checks it: a chunk must be aligned, inside its
//! arena's heaps, of a size that fits its bin; in the doubly linked bins the chunk's `fd`
//! must lead back to where the walk came from, and the chunk after it must say it is free
//! (`PREV_INUSE` clear) with a `prev_size` equal to its size; the singly linked fastbins are
//! unmangled (safe-linking, 2.32+) and their chunks must carry their arena's flag. All
//! lists advance together, one batched read per step.

use super::arenas::{within, within_len, Discovery, FoundArena};
use super::walk::{count_free, HeapKind, HeapTotals};
use super::{
    bin_index, fastbin_index, Layout, ALIGN, FLAGS, IS_MMAPPED, MIN_CHUNK, NBINS, NFASTBINS,
    NON_MAIN_ARENA, PREV_INUSE,
};
use crate::heap::target::{Fault, Target};

/// One free chunk found on a list, or a top chunk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Free {
    addr: u64,
    size: u64,
    kind: HeapKind,
    role: Role,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Role {
    /// In a fastbin: still marked in use, as glibc leaves it.
    Fast,
    /// In the unsorted, a small or a large bin.
    Bin,
    Top,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum List {
    Fast(usize),
    /// A bin, and its header's address (where the walk ends).
    Bin(usize, u64),
}

/// One list of one arena, walked until it holds still.
#[derive(Debug)]
struct ListWalk {
    arena: usize,
    list: List,
    /// The bin header's `fd`, read with its `bk`: the last chunk must be it.
    head_fd: u64,
    /// Walks of this list given up because it changed under them.
    restarts: u8,
    /// What the current walk found.
    chunks: Vec<Free>,
}

/// One list being followed: where it is.
#[derive(Debug, Clone, Copy)]
struct Lane {
    list: usize,
    /// The chunk to read next.
    at: u64,
    /// Where the walk came from: a bin chunk's `fd` must point there.
    from: u64,
}

/// Times one list is walked again from its head after it changed under the walk (a busy
/// program relinks its unsorted and small bins all the time) before the count is given
/// up as inconsistent.
const MAX_RESTARTS: u8 = 3;

/// What the free lists hold, by heap kind, residency included.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Lists {
    pub main: HeapTotals,
    pub arenas: HeapTotals,
    /// Some list changed under the walk and was walked again: the program was running
    /// through its allocator meanwhile, so the count is of a moving heap.
    pub moved: bool,
}

impl Lists {
    pub fn free_bytes(&self) -> u64 {
        self.main.free_bytes.saturating_add(self.arenas.free_bytes)
    }

    pub(crate) fn of_mut(&mut self, kind: HeapKind) -> &mut HeapTotals {
        match kind {
            HeapKind::Main => &mut self.main,
            HeapKind::Arena => &mut self.arenas,
        }
    }
}

/// The `i`th word of `b` (0 past its end).
fn word(b: &[u8], i: usize) -> u64 {
    super::super::target::u64_at(b, i.saturating_mul(8)).unwrap_or(0)
}

/// A list pointer must point at a chunk header inside its arena's heaps before it is
/// read: a pointer elsewhere means the list is not what glibc keeps (or it moved).
fn inside(a: &FoundArena, p: u64) -> bool {
    p % ALIGN == 0 && within(&a.ranges, p, p.saturating_add(32))
}

fn kind(a: &FoundArena) -> HeapKind {
    if a.main {
        HeapKind::Main
    } else {
        HeapKind::Arena
    }
}

/// Follows every free list of every arena; at most `max_chunks` free chunks.
///
/// All lists advance together, one batched read a step. A list whose chunk breaks a
/// rule, or whose footer (read in the step after the chunk) does, is walked again from
/// its head, read anew; a list that never holds still makes the count inconsistent. A
/// chunk that moved from one list to another during the walk is counted once.
#[allow(
    clippy::too_many_lines,
    reason = "glibc's free lists walked in the order mallinfo2 walks them, one arena at a time; split, the order would be harder to check against malloc.c"
)]
pub fn count<T: Target>(
    t: &mut T,
    layout: &Layout,
    d: &Discovery,
    max_chunks: u64,
) -> Result<Lists, Fault> {
    let mut walks: Vec<ListWalk> = Vec::new();
    let mut lanes: Vec<Lane> = Vec::new();
    for (n, a) in d.arenas.iter().enumerate() {
        for i in 0..NFASTBINS {
            walks.push(ListWalk {
                arena: n,
                list: List::Fast(i),
                head_fd: a.state.fastbins[i],
                restarts: 0,
                chunks: Vec::new(),
            });
        }
        for i in 1..NBINS {
            let bin = a.state.bin_at(i);
            walks.push(ListWalk {
                arena: n,
                list: List::Bin(i, bin),
                head_fd: a.state.bins[i].0,
                restarts: 0,
                chunks: Vec::new(),
            });
        }
    }
    // The heads as the arenas were read; a broken one is read again like any restart.
    let mut failed: Vec<usize> = Vec::new();
    for (id, w) in walks.iter().enumerate() {
        let a = &d.arenas[w.arena];
        let head = match w.list {
            List::Fast(i) => Some((a.state.fastbins[i], 0)).filter(|&(h, _)| h != 0),
            List::Bin(i, bin) => {
                let (fd, bk) = a.state.bins[i];
                if (fd == bin) != (bk == bin) {
                    failed.push(id);
                    continue;
                }
                (bk != bin).then_some((bk, bin))
            }
        };
        if let Some((at, from)) = head {
            if inside(a, at) {
                lanes.push(Lane { list: id, at, from });
            } else {
                failed.push(id);
            }
        }
    }
    let mut footers: Vec<(usize, u64, u64)> = Vec::new();
    let mut visits = 0u64;
    let (mut addrs, mut buf) = (Vec::new(), Vec::new());
    loop {
        for id in failed.drain(..) {
            restart(t, d, &mut walks, &mut lanes, &mut footers, id)?;
        }
        if lanes.is_empty() && footers.is_empty() {
            break;
        }
        visits += lanes.len() as u64;
        let collected: u64 = walks.iter().map(|w| w.chunks.len() as u64).sum();
        if collected > max_chunks || visits > max_chunks.saturating_mul(4) {
            return Err(Fault::Budget);
        }
        // One read a step: every lane's next chunk (32 bytes: prev_size, size, fd, bk),
        // then the header after each chunk of the last step (16 bytes).
        addrs.clear();
        addrs.extend(lanes.iter().map(|l| (l.at, 32)));
        addrs.extend(footers.iter().map(|&(_, p, size)| (p + size, 16)));
        let heads = lanes.len() * 32;
        buf.resize(heads + footers.len() * 16, 0);
        t.read_many(&addrs, &mut buf)?;
        let (buf, fbuf) = buf.split_at(heads);
        // The chunk after each free bin chunk must say so: `PREV_INUSE` clear and a
        // `prev_size` equal to the chunk's size (fastbin chunks stay marked in use).
        for (k, &(id, _, size)) in footers.iter().enumerate() {
            let h = &fbuf[k * 16..k * 16 + 16];
            if word(h, 0) != size || word(h, 1) & PREV_INUSE != 0 {
                failed.push(id);
            }
        }
        footers.clear();
        let mut kept = 0;
        for k in 0..lanes.len() {
            let lane = lanes[k];
            let w = &mut walks[lane.list];
            let a = &d.arenas[w.arena];
            let h = &buf[k * 32..k * 32 + 32];
            match check_chunk(layout, a, w, lane, h) {
                Err(()) => failed.push(lane.list),
                Ok((chunk, next)) => {
                    if chunk.role == Role::Bin {
                        footers.push((lane.list, chunk.addr, chunk.size));
                    }
                    w.chunks.push(chunk);
                    match next {
                        Some((at, _)) if !inside(a, at) => failed.push(lane.list),
                        Some((at, from)) => {
                            lanes[kept] = Lane { at, from, ..lane };
                            kept += 1;
                        }
                        None => {}
                    }
                }
            }
        }
        lanes.truncate(kept);
    }
    let moved = walks.iter().any(|w| w.restarts > 0);
    let mut free: Vec<Free> = walks.into_iter().flat_map(|w| w.chunks).collect();
    free.sort_unstable();
    free.dedup_by_key(|f| f.addr);
    let mut lists = Lists {
        moved,
        ..Lists::default()
    };
    for a in &d.arenas {
        let totals = lists.of_mut(kind(a));
        totals.heaps += a.heaps.len() as u64;
        totals.top_bytes += a.top_size;
        if a.top_size > 0 {
            free.push(Free {
                addr: a.state.top,
                size: a.top_size,
                kind: kind(a),
                role: Role::Top,
            });
        }
    }
    // In address order, so each pagemap window read serves the chunks that follow. Free
    // chunks and top chunks never overlap in a heap glibc keeps: overlapping ones are a
    // heap that moved under the count, or one crafted to count its pages many times.
    free.sort_unstable();
    if free
        .windows(2)
        .any(|w| w[0].addr.saturating_add(w[0].size) > w[1].addr)
    {
        return Err(Fault::Inconsistent);
    }
    for f in &free {
        let totals = lists.of_mut(f.kind);
        match f.role {
            Role::Fast => {
                totals.free_chunks += 1;
                totals.fast_bytes += f.size;
            }
            Role::Bin => totals.free_chunks += 1,
            Role::Top => {}
        }
        let before = totals.reclaimable_bytes;
        count_free(t, totals, f.addr, f.addr + f.size, true)?;
        if f.role == Role::Top {
            let top = totals.reclaimable_bytes.saturating_sub(before);
            totals.top_reclaimable_bytes = totals.top_reclaimable_bytes.saturating_add(top);
        }
    }
    Ok(lists)
}

/// Checks the chunk a lane read (`h`: prev_size, size, fd, bk) as glibc would; returns it
/// and where its list goes next, or `Err` when it breaks a rule.
fn check_chunk(
    layout: &Layout,
    a: &FoundArena,
    w: &ListWalk,
    lane: Lane,
    h: &[u8],
) -> Result<(Free, Option<(u64, u64)>), ()> {
    let (field, fd, bk) = (word(h, 1), word(h, 2), word(h, 3));
    let size = field & !FLAGS;
    let p = lane.at;
    let fits = p % ALIGN == 0
        && size >= MIN_CHUNK
        && size % ALIGN == 0
        && p != a.state.top
        && field & IS_MMAPPED == 0;
    let (role, next) = match w.list {
        List::Fast(i) => {
            let flagged = field & NON_MAIN_ARENA != 0;
            if !fits
                || fastbin_index(size) != i
                || flagged == a.main
                || !within_len(&a.ranges, p, size)
            {
                return Err(());
            }
            let next = layout.reveal(p, fd);
            (Role::Fast, (next != 0).then_some((next, 0)))
        }
        List::Bin(i, bin) => {
            let right_bin = i == 1 || bin_index(size) == i;
            if !fits
                || !right_bin
                || fd != lane.from
                || !within_len(&a.ranges, p, size.saturating_add(16))
            {
                return Err(());
            }
            if bk == bin {
                // The list closes: the bin's `fd` must be this last chunk.
                if w.head_fd != p {
                    return Err(());
                }
                (Role::Bin, None)
            } else {
                (Role::Bin, Some((bk, p)))
            }
        }
    };
    let chunk = Free {
        addr: p,
        size,
        kind: kind(a),
        role,
    };
    Ok((chunk, next))
}

/// Walks list `id` again from its head, read anew, forgetting what its last walk found.
fn restart<T: Target>(
    t: &mut T,
    d: &Discovery,
    walks: &mut [ListWalk],
    lanes: &mut Vec<Lane>,
    footers: &mut Vec<(usize, u64, u64)>,
    id: usize,
) -> Result<(), Fault> {
    let w = &mut walks[id];
    if w.restarts >= MAX_RESTARTS {
        return Err(Fault::Inconsistent);
    }
    w.restarts += 1;
    w.chunks.clear();
    lanes.retain(|l| l.list != id);
    footers.retain(|f| f.0 != id);
    let a = &d.arenas[w.arena];
    let head = match w.list {
        List::Fast(i) => {
            let mut b = [0u8; 8];
            t.read(a.state.addr + 0x10 + 8 * i as u64, &mut b)?;
            w.head_fd = u64::from_le_bytes(b);
            (w.head_fd != 0).then_some((w.head_fd, 0))
        }
        List::Bin(_, bin) => {
            let mut b = [0u8; 16];
            t.read(bin + 16, &mut b)?;
            let (fd, bk) = (word(&b, 0), word(&b, 1));
            if (fd == bin) != (bk == bin) {
                return restart(t, d, walks, lanes, footers, id);
            }
            w.head_fd = fd;
            (bk != bin).then_some((bk, bin))
        }
    };
    if let Some((at, from)) = head {
        if !inside(a, at) {
            return restart(t, d, walks, lanes, footers, id);
        }
        lanes.push(Lane { list: id, at, from });
    }
    Ok(())
}
