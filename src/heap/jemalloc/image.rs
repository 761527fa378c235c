//! A crafted jemalloc process for tests and the fuzzer: one arena of jemalloc 5.3.0's
//! layout, its active page count, and a ring of dirty extents of given sizes, laid one
//! after the other. Not used by the exporter itself.

use super::layout::{Layout, VERSIONS};
use crate::heap::image::{Image, PAGE};

pub(crate) const ARENAS: u64 = 0x10_0000;
pub(crate) const TOTAL: u64 = 0x10_8000;
pub(crate) const ARENA: u64 = 0x20_0000;
pub(crate) const EXTENTS: u64 = 0x40_0000;
pub(crate) const MEMORY: u64 = 0x100_0000;

/// The layout of jemalloc 5.3.0 with its arenas where [`image`] puts them.
pub fn layout() -> Layout {
    Layout::at(VERSIONS[1].0, VERSIONS[1].1, ARENAS, TOTAL)
}

/// One arena (index 0) with `active` pages and, on its dirty list, extents of `dirty`
/// pages each, laid one after the other from MEMORY; `absent` pages of them not resident.
pub fn image(active: u64, dirty: &[u64]) -> Image {
    let o = VERSIONS[1].1;
    let mut m = Image::default();
    m.map(ARENAS, 0x1000);
    m.map(TOTAL, 0x1000);
    m.map(ARENA, 0x1_0000);
    m.map(EXTENTS, 0x1_0000);
    m.put(TOTAL, 1);
    m.put(ARENAS, ARENA);
    m.put(ARENA + o.nactive, active);
    let states = [(o.dirty, 1u64), (o.muzzy, 2)];
    for (sets, state) in states {
        for &lru in sets {
            m.put(ARENA + lru + 16, state);
        }
    }
    let mut addr = MEMORY;
    let n = dirty.len() as u64;
    for (i, &pages) in dirty.iter().enumerate() {
        let e = EXTENTS + i as u64 * 128;
        let next = EXTENTS + (i as u64 + 1) % n * 128;
        m.put(e + o.e_bits, 1 << o.state_shift);
        m.put(e + o.e_addr, addr);
        m.put(e + o.e_size, pages * PAGE);
        m.put(e + o.e_next, next);
        m.map(addr, pages * PAGE);
        addr += pages * PAGE;
    }
    if n > 0 {
        m.put(ARENA + o.dirty[0], EXTENTS);
        m.put(ARENA + o.dirty[0] + 8, dirty.iter().sum());
    }
    m
}
