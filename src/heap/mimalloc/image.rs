//! A crafted mimalloc 2.3.2 process for tests and the fuzzer: `mi_version`'s code, the main
//! heap's cookie, one arena of two blocks whose first holds a segment of given spans, and
//! an empty segment map. Not used by the exporter itself.

use super::layout::{Map, Symbols, SEGMENT, SLICE, VERSIONS};
use crate::heap::image::Image;

pub(crate) const VERSION: u64 = 0x10_0000;
pub(crate) const HEAP_MAIN: u64 = 0x10_1000;
pub(crate) const ARENAS: u64 = 0x10_2000;
pub(crate) const COUNT: u64 = 0x10_3000;
pub(crate) const MAP: u64 = 0x10_4000;
pub(crate) const ARENA: u64 = 0x20_0000;
pub const START: u64 = 0x4000_0000;
pub const COOKIE: u64 = 0x5eed_c0de;

/// The symbols of [`image`].
pub fn symbols() -> Symbols {
    Symbols::at(VERSION, ARENAS, COUNT, MAP, HEAP_MAIN)
}

/// A span of a segment: its slices, its block size (0: a free span) and blocks in use.
#[derive(Debug, Clone, Copy)]
pub struct Span {
    pub slices: u32,
    pub block_size: u64,
    pub used: u16,
}

/// mimalloc 2.3.2 with one arena of two blocks at [`START`], the first a segment whose
/// first span (its header, one slice) is followed by `spans`, the rest of its 512 slices a
/// free span.
pub fn image(spans: &[Span]) -> Image {
    let o = VERSIONS[2].2;
    let mut m = Image::default();
    m.map(VERSION, 16);
    m.regions[0].1[..6].copy_from_slice(&[0xb8, 0x4e, 0x4f, 0, 0, 0xc3]);
    m.map(HEAP_MAIN, 0x100);
    m.put(HEAP_MAIN + 32, COOKIE);
    m.map(ARENAS, 0x1000);
    m.map(COUNT, 8);
    m.put(COUNT, 1);
    m.put(ARENAS, ARENA);
    let Map::Parts { parts, .. } = o.map else {
        unreachable!("2.3.2's map is in parts")
    };
    m.map(MAP, parts * 8);
    m.map(ARENA, 0x1000);
    m.put(ARENA + o.arena_start, START);
    m.put(ARENA + o.arena_start + 8, 2);
    m.put(ARENA + o.arena_start + 16, 1);
    m.put(ARENA + o.arena_inuse, 1);
    let header = o.slices + 513 * o.page_bytes;
    m.map(START, header);
    m.put(START + o.cookie, START ^ COOKIE);
    m.put(START + o.segment_size, SEGMENT);
    m.put(START + o.segment_slices, SEGMENT / SLICE);
    m.put(START + o.info_slices, 1);
    m.put(START + o.slice_entries, SEGMENT / SLICE);
    let mut i = 0u64;
    let first = Span {
        slices: 1,
        block_size: 1,
        used: 0,
    };
    let taken: u64 = spans.iter().map(|s| u64::from(s.slices)).sum::<u64>() + 1;
    let rest = Span {
        slices: (SEGMENT / SLICE - taken) as u32,
        block_size: 0,
        used: 0,
    };
    for s in std::iter::once(&first).chain(spans).chain(std::iter::once(&rest)) {
        if s.slices == 0 {
            break;
        }
        let page = START + o.slices + i * o.page_bytes;
        m.put(page, u64::from(s.slices));
        m.put(page + o.page_used, u64::from(s.used));
        m.put(page + o.page_block_size, s.block_size);
        i += u64::from(s.slices);
    }
    m
}
