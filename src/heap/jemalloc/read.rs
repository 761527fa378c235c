//! The kept pages of a jemalloc process, given its binary's [`Layout`]: each arena's
//! active page count and each of its lists of dirty and muzzy extents, walked and checked
//! against the arena's own page counts. Pure over a [`Target`].

use super::layout::{Layout, Offsets, PAGE, STATE_DIRTY, STATE_MUZZY};
use super::{JemallocHeap, Unmeasured};
use crate::heap::target::{u32_at, u64_at, Fault, Target};

/// `MALLOCX_ARENA_LIMIT`: the most arenas jemalloc 5 has.
const MAX_ARENAS: u64 = 4095;
/// Extents followed at most, every list of every arena together: each is kept (16 bytes)
/// until all are known distinct, 4 MiB at most.
pub(crate) const MAX_EXTENTS: u64 = 1 << 18;
/// The low bits of `e_bits` that hold an extent's arena (`MALLOCX_ARENA_BITS`).
const ARENA_BITS: u64 = 12;

fn word(t: &mut impl Target, addr: u64) -> Result<u64, Fault> {
    let mut b = [0u8; 8];
    t.read(addr, &mut b)?;
    Ok(u64::from_le_bytes(b))
}

/// The figures of every arena, read twice around nothing else: the process runs, so a
/// read whose page counts differ from a second read's is taken again, once, then given up
/// as [`Unmeasured::Moving`].
pub fn read<T: Target>(
    target: &mut T,
    layout: &Layout,
    bias: u64,
) -> Result<JemallocHeap, Unmeasured> {
    let fault = Unmeasured::from;
    for _ in 0..2 {
        let first = arenas(target, layout, bias).map_err(fault)?;
        let second = arenas(target, layout, bias).map_err(fault)?;
        if first == second {
            return Ok(first);
        }
    }
    Err(Unmeasured::Moving)
}

/// One pass over every arena.
fn arenas<T: Target>(t: &mut T, layout: &Layout, bias: u64) -> Result<JemallocHeap, Fault> {
    let mut total = [0u8; 4];
    t.read(layout.narenas_total.wrapping_add(bias), &mut total)?;
    let n = u64::from(u32::from_le_bytes(total));
    if n == 0 || n > MAX_ARENAS {
        return Err(Fault::NotFound);
    }
    let mut h = JemallocHeap {
        version: layout.version,
        ..JemallocHeap::default()
    };
    let mut seen = Seen {
        left: MAX_EXTENTS,
        ranges: Vec::new(),
    };
    let o = &layout.offsets;
    for i in 0..n {
        let arena = word(t, layout.arenas.wrapping_add(bias).wrapping_add(8 * i))?;
        if arena == 0 {
            continue;
        }
        h.arenas += 1;
        h.active_bytes = add(
            h.active_bytes,
            pages(word(t, arena.wrapping_add(o.nactive))?)?,
        )?;
        for (sets, state) in [(o.dirty, STATE_DIRTY), (o.muzzy, STATE_MUZZY)] {
            for &lru in sets {
                let (bytes, resident) = kept(t, o, arena.wrapping_add(lru), i, state, &mut seen)?;
                let (all, res) = if state == STATE_DIRTY {
                    (&mut h.dirty_bytes, &mut h.dirty_resident_bytes)
                } else {
                    (&mut h.muzzy_bytes, &mut h.muzzy_resident_bytes)
                };
                *all = add(*all, bytes)?;
                *res = add(*res, resident)?;
            }
        }
    }
    // No two extents of any list of any arena share a page: one memory listed twice (or
    // in every process that maps it) is counted once, or not believed.
    seen.ranges.sort_unstable();
    if seen.ranges.windows(2).any(|w| w[0].1 > w[1].0) {
        return Err(Fault::Inconsistent);
    }
    Ok(h)
}

/// The extents a pass has followed: how many more it may, and their ranges.
struct Seen {
    left: u64,
    ranges: Vec<(u64, u64)>,
}

fn pages(n: u64) -> Result<u64, Fault> {
    n.checked_mul(PAGE).ok_or(Fault::NotFound)
}

fn add(a: u64, b: u64) -> Result<u64, Fault> {
    a.checked_add(b).ok_or(Fault::NotFound)
}

/// One list of kept extents (at `set`, the list's `lru`, with `npages` and `state` after
/// it) of arena `index`: its bytes and their resident bytes. The set must say it holds
/// `state`, each extent must be of the arena and of that state, and their pages must add
/// up to the set's count.
fn kept<T: Target>(
    t: &mut T,
    o: &Offsets,
    set: u64,
    index: u64,
    state: u64,
    seen: &mut Seen,
) -> Result<(u64, u64), Fault> {
    let mut head = [0u8; 24];
    t.read(set, &mut head)?;
    let first = u64_at(&head, 0).unwrap_or(0);
    let npages = u64_at(&head, 8).unwrap_or(0);
    let set_state = u32_at(&head, 16).unwrap_or(0);
    if u64::from(set_state) != state {
        return Err(Fault::NotFound);
    }
    let mask = (1u64 << o.state_width) - 1;
    let (mut bytes, mut resident, mut e) = (0u64, 0u64, first);
    while e != 0 {
        // A list longer than its pages (each extent is a page at least) is not one.
        if seen.left == 0 || bytes / PAGE >= npages {
            return Err(if seen.left == 0 {
                Fault::Budget
            } else {
                Fault::Inconsistent
            });
        }
        seen.left -= 1;
        let bits = word(t, e.wrapping_add(o.e_bits))?;
        let addr = word(t, e.wrapping_add(o.e_addr))?;
        let size = word(t, e.wrapping_add(o.e_size))? & !(PAGE - 1);
        if bits & ((1 << ARENA_BITS) - 1) != index || (bits >> o.state_shift) & mask != state {
            return Err(Fault::Inconsistent);
        }
        let end = addr.checked_add(size).ok_or(Fault::NotFound)?;
        if size == 0 || addr % PAGE != 0 {
            return Err(Fault::Inconsistent);
        }
        // An extent is jemalloc's own anonymous private memory (its `pages_map`): one in
        // a shared or file mapping, counted in every process that maps it, is no heap.
        if !t.private_anonymous(addr, end) {
            return Err(Fault::Outside);
        }
        seen.ranges.push((addr, end));
        bytes = add(bytes, size)?;
        resident = add(resident, t.resident_bytes(addr, end)?)?;
        e = word(t, e.wrapping_add(o.e_next))?;
        if e == first {
            break;
        }
    }
    if bytes / PAGE != npages {
        return Err(Fault::Inconsistent);
    }
    Ok((bytes, resident))
}
