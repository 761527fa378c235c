//! CPython's arenas, given its binary's [`Layout`]: the arena table, each arena's record
//! (its pools carved, free and in all), and each carved pool's header (blocks in use, its
//! size class, the arena it says it is in), the figures `sys._debugmallocstats()` prints.
//! Pure over a [`Target`].
//!
//! Everything is checked before it is believed: a pool must name its own arena and a size
//! class, hold no more blocks than fit; an arena's free pools (empty ones carved, and the
//! ones never carved) must add up to the count it keeps; the arenas with memory must be as
//! many as the allocator counts. A pass that fails is taken again once: the process runs.

use super::layout::{
    Layout, Sizes, State, ALIGNMENT, ARENA_OBJECT, DEBUG_COOKIE, DEBUG_INTERPRETERS_HEAD,
    IN_RUNTIME, LARGE, MGMT_ARENAS, MGMT_IN_STATE, MGMT_MAXARENAS, MGMT_NARENAS, POOL_OVERHEAD,
    RUNTIME_SPAN, SIZE_CLASSES, SMALL,
};
use super::{PythonHeap, Unmeasured};
use crate::heap::target::{u32_at, u64_at, Fault, Target};

/// The most arena records read: pymalloc doubles its table from 16, so 2^24 records hold
/// 16 TiB of 1 MiB arenas.
pub(crate) const MAX_ARENA_RECORDS: u64 = 1 << 24;
/// Arena records read at once.
const RECORDS_AT_ONCE: u64 = 1024;
/// `pool_header`'s fields read: `ref.count` at 0, `arenaindex` at 32, `szidx` at 36.
const HEADER: usize = 40;

fn word(t: &mut impl Target, addr: u64) -> Result<u64, Fault> {
    let mut b = [0u8; 8];
    t.read(addr, &mut b)?;
    Ok(u64::from_le_bytes(b))
}

/// Where one process's allocator state is: the addresses of `arenas`, `maxarenas` and
/// `narenas_currently_allocated`, the version's label and sizes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Place {
    pub version: &'static str,
    pub sizes: Sizes,
    arenas: u64,
    maxarenas: u64,
    narenas: u64,
}

const MINORS: [&str; 6] = ["3.8", "3.9", "3.10", "3.11", "3.12", "3.13"];

/// Finds the state in a process whose binary is loaded `bias` from where it was linked.
pub fn place<T: Target>(t: &mut T, layout: &Layout, bias: u64) -> Result<Place, Unmeasured> {
    let fault = |f: Fault| match f {
        Fault::Budget => Unmeasured::Budget,
        _ => Unmeasured::Unreadable,
    };
    let minor = match layout.py_version {
        Some(at) => {
            let mut b = [0u8; 4];
            t.read(at.wrapping_add(bias), &mut b).map_err(fault)?;
            // PY_VERSION_HEX: 0x030C01F0 is 3.12.1 final.
            let v = u32::from_le_bytes(b);
            if v >> 24 != 3 {
                return Err(Unmeasured::UnknownVersion);
            }
            Some((v >> 16) & 0xff)
        }
        None => None,
    };
    let label = |m: u32| {
        MINORS
            .iter()
            .find(|l| l.strip_prefix("3.") == Some(&m.to_string()))
            .copied()
    };
    match (layout.state, minor) {
        (
            State::Statics {
                arenas,
                maxarenas,
                narenas,
            },
            minor,
        ) => {
            let (version, sizes) = match minor {
                // Py_Version came in 3.11.
                Some(11) => ("3.11", large_or_not(layout.radix)),
                Some(_) => return Err(Unmeasured::UnknownVersion),
                None if layout.radix => ("3.10", LARGE),
                // 3.8 and 3.9 (3.10 built without the radix tree is taken for them and
                // fails the arenas' checks).
                None => ("3.8-3.9", SMALL),
            };
            Ok(Place {
                version,
                sizes,
                arenas: arenas.wrapping_add(bias),
                maxarenas: maxarenas.wrapping_add(bias),
                narenas: narenas.wrapping_add(bias),
            })
        }
        (State::Runtime { runtime }, Some(m)) => {
            if m == 11 {
                // 3.11's state is in static variables, which `strip` removed.
                return Err(Unmeasured::Stripped);
            }
            let &(_, main, obmalloc, pointer) = IN_RUNTIME
                .iter()
                .find(|(minor, ..)| *minor == m)
                .ok_or(Unmeasured::UnknownVersion)?;
            let runtime = runtime.wrapping_add(bias);
            let main = match main {
                Some(at) => runtime.wrapping_add(at),
                None => main_interpreter(t, runtime).map_err(|e| e.unwrap_or_else(fault))?,
            };
            let mut state = main.wrapping_add(obmalloc);
            if pointer {
                state = word(t, state).map_err(fault)?;
            }
            let mgmt = state.wrapping_add(MGMT_IN_STATE);
            Ok(Place {
                version: label(m).ok_or(Unmeasured::UnknownVersion)?,
                sizes: LARGE,
                arenas: mgmt.wrapping_add(MGMT_ARENAS),
                maxarenas: mgmt.wrapping_add(MGMT_MAXARENAS),
                narenas: mgmt.wrapping_add(MGMT_NARENAS),
            })
        }
        (State::Runtime { .. }, None) => Err(Unmeasured::Stripped),
    }
}

/// Where the main interpreter is, from `_PyRuntime`'s debug offsets (3.13): the cookie
/// must be there, and the interpreter inside `_PyRuntime`, or nothing is believed
/// (`Ok(Err)`: a layout not known; `Err`: a failed read).
fn main_interpreter<T: Target>(t: &mut T, runtime: u64) -> Result<u64, Result<Unmeasured, Fault>> {
    let unknown = Err(Ok(Unmeasured::UnknownLayout));
    let mut cookie = [0u8; 8];
    t.read(runtime, &mut cookie).map_err(Err)?;
    if &cookie != DEBUG_COOKIE {
        return unknown;
    }
    let head = word(t, runtime.wrapping_add(DEBUG_INTERPRETERS_HEAD)).map_err(Err)?;
    if head >= RUNTIME_SPAN {
        return unknown;
    }
    // `interpreters.main` follows `interpreters.head`.
    let main = word(t, runtime.wrapping_add(head).wrapping_add(8)).map_err(Err)?;
    if main <= runtime || main - runtime >= RUNTIME_SPAN {
        return unknown;
    }
    Ok(main)
}

/// 3.10 and 3.11 have large pools with the radix tree (the default), 4 KiB pools in 1 MiB
/// arenas without it.
fn large_or_not(radix: bool) -> Sizes {
    if radix {
        LARGE
    } else {
        Sizes {
            arena: LARGE.arena,
            pool: SMALL.pool,
        }
    }
}

/// The arenas' figures, read twice: a pass that breaks a check, or whose figures differ
/// from the next pass's, is taken again, once; then given up as [`Unmeasured::Moving`],
/// or [`Unmeasured::UnknownLayout`] when the table itself held still.
pub fn read<T: Target>(t: &mut T, layout: &Layout, bias: u64) -> Result<PythonHeap, Unmeasured> {
    let place = place(t, layout, bias)?;
    let fault = Unmeasured::from;
    let mut last = None;
    for _ in 0..2 {
        let before = table(t, &place).map_err(fault)?;
        let first = pass(t, &place, before);
        let after = table(t, &place).map_err(fault)?;
        match first {
            Ok(first) if before == after => {
                let second = pass(t, &place, after);
                if second.as_ref() == Ok(&first) {
                    return Ok(first);
                }
            }
            Err(Fault::Inconsistent) if before == after => last = Some(Unmeasured::UnknownLayout),
            Err(Fault::Inconsistent) => last = Some(Unmeasured::Moving),
            Err(f) => return Err(fault(f)),
            Ok(_) => last = Some(Unmeasured::Moving),
        }
    }
    Err(last.unwrap_or(Unmeasured::Moving))
}

/// The table's address, its records and the arenas counted as allocated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Table {
    arenas: u64,
    max: u64,
    allocated: u64,
}

fn table<T: Target>(t: &mut T, p: &Place) -> Result<Table, Fault> {
    let arenas = word(t, p.arenas)?;
    let mut b = [0u8; 4];
    t.read(p.maxarenas, &mut b)?;
    let max = u64::from(u32::from_le_bytes(b));
    let allocated = word(t, p.narenas)?;
    if max > MAX_ARENA_RECORDS || allocated > max || (max > 0 && arenas == 0) {
        return Err(Fault::NotFound);
    }
    Ok(Table {
        arenas,
        max,
        allocated,
    })
}

/// One pass over every arena record of `table`. The table's own words were read, so an
/// address in it that cannot be read is the table's fault (a layout that does not fit, a
/// crafted table, an arena given back under the pass), not the process's.
fn pass<T: Target>(t: &mut T, p: &Place, table: Table) -> Result<PythonHeap, Fault> {
    walk(t, p, table).map_err(|f| match f {
        Fault::Unreadable => Fault::Inconsistent,
        other => other,
    })
}

fn walk<T: Target>(t: &mut T, p: &Place, table: Table) -> Result<PythonHeap, Fault> {
    let s = p.sizes;
    let mut h = PythonHeap {
        version: p.version,
        pool_bytes: s.pool,
        arena_bytes: s.arena,
        ..PythonHeap::default()
    };
    let mut records = vec![0u8; (RECORDS_AT_ONCE * ARENA_OBJECT) as usize];
    let mut headers = vec![0u8; s.pools() as usize * HEADER];
    let mut at = Vec::with_capacity(s.pools() as usize);
    let mut first = 0;
    while first < table.max {
        let n = (table.max - first).min(RECORDS_AT_ONCE);
        let bytes = &mut records[..(n * ARENA_OBJECT) as usize];
        t.read(table.arenas.wrapping_add(first * ARENA_OBJECT), bytes)?;
        for (i, r) in bytes.chunks_exact(ARENA_OBJECT as usize).enumerate() {
            let index = first + i as u64;
            let address = u64_at(r, 0).unwrap_or(0);
            if address == 0 {
                continue;
            }
            h.arenas += 1;
            arena(t, s, index, r, &mut at, &mut headers, &mut h)?;
        }
        first += n;
    }
    if h.arenas != table.allocated {
        return Err(Fault::Inconsistent);
    }
    Ok(h)
}

/// One arena: its record `r` checked, its carved pools' headers read and counted into `h`.
fn arena<T: Target>(
    t: &mut T,
    s: Sizes,
    index: u64,
    r: &[u8],
    at: &mut Vec<(u64, usize)>,
    headers: &mut [u8],
    h: &mut PythonHeap,
) -> Result<(), Fault> {
    let bad = Fault::Inconsistent;
    let address = u64_at(r, 0).ok_or(bad)?;
    let pool_address = u64_at(r, 8).ok_or(bad)?;
    let nfree = u64::from(u32_at(r, 16).ok_or(bad)?);
    let ntotal = u64::from(u32_at(r, 20).ok_or(bad)?);
    let misaligned = address & (s.pool - 1) != 0;
    let base = address.checked_add(s.pool - 1).ok_or(bad)? & !(s.pool - 1);
    let end = base.checked_add(ntotal * s.pool).ok_or(bad)?;
    let carved_end = pool_address;
    if ntotal != s.pools() - u64::from(misaligned)
        || carved_end < base
        || carved_end > end
        || (carved_end - base) % s.pool != 0
        || nfree > ntotal
    {
        return Err(bad);
    }
    let carved = (carved_end - base) / s.pool;
    at.clear();
    at.extend((0..carved).map(|k| (base + k * s.pool, HEADER)));
    let headers = &mut headers[..carved as usize * HEADER];
    t.read_many(at, headers)?;
    let mut free_pools = ntotal - carved;
    let mut unused_resident = t.resident_bytes(carved_end, end)?;
    for (k, hd) in headers.chunks_exact(HEADER).enumerate() {
        let pool = base + k as u64 * s.pool;
        let count = u64::from(u32_at(hd, 0).ok_or(bad)?);
        let arenaindex = u64::from(u32_at(hd, 32).ok_or(bad)?);
        if arenaindex != index {
            return Err(bad);
        }
        let resident = t.resident_bytes(pool, pool + s.pool)?;
        if count == 0 {
            free_pools += 1;
            unused_resident += resident;
            continue;
        }
        let class = u64::from(u32_at(hd, 36).ok_or(bad)?);
        if class >= SIZE_CLASSES {
            return Err(bad);
        }
        let size = (class + 1) * ALIGNMENT;
        let blocks = (s.pool - POOL_OVERHEAD) / size;
        if count > blocks {
            return Err(bad);
        }
        let available = (blocks - count) * size;
        let used = count * size;
        h.used_pools += 1;
        h.allocated_bytes += used;
        h.available_bytes += available;
        // The pool's resident bytes beyond its header and its blocks in use, as far as
        // its free blocks go.
        unused_resident += resident.saturating_sub(used + POOL_OVERHEAD).min(available);
    }
    if free_pools != nfree {
        return Err(bad);
    }
    h.unused_pools += free_pools;
    h.unused_resident_bytes += unused_resident;
    Ok(())
}
