//! A crafted mimalloc 2.3.2 process for tests and the fuzzer: `mi_version`'s code, the main
//! heap's cookie, its statistics' committed count, one arena of two blocks whose first
//! holds a segment of given spans, and an empty segment map. Not used by the exporter
//! itself.

use super::layout::{Map, Symbols, SEGMENT, SLICE, VERSIONS};
use crate::heap::image::Image;

pub(crate) const VERSION: u64 = 0x10_0000;
pub(crate) const HEAP_MAIN: u64 = 0x10_1000;
pub(crate) const ARENAS: u64 = 0x10_2000;
pub(crate) const COUNT: u64 = 0x10_3000;
pub(crate) const MAP: u64 = 0x10_4000;
pub(crate) const STATS: u64 = 0x10_8000;
pub(crate) const ARENA: u64 = 0x20_0000;
pub const START: u64 = 0x4000_0000;
pub const COOKIE: u64 = 0x5eed_c0de;

/// The symbols of [`image`].
pub fn symbols() -> Symbols {
    let mut s = Symbols::at(VERSION, ARENAS, COUNT, MAP, HEAP_MAIN);
    s.stats = STATS;
    s
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
    // Its statistics count the arena committed whole, as mimalloc 2 commits it on Linux.
    m.map(STATS, 0x100);
    m.put(STATS + o.stats_committed, 2 * SEGMENT);
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

pub(crate) const SUBPROC: u64 = 0x10_5000;
pub const V3_ARENA: u64 = 0x5000_0000;
pub(crate) const PAGES: u64 = 0x10_6000;
pub(crate) const PURGE: u64 = 0x10_7000;
pub(crate) const META: u64 = 0x11_0000;
/// The slices of [`image_v3`]'s arena (4 MiB), the first its metadata.
pub const V3_SLICES: u64 = 64;

/// The symbols of [`image_v3`].
pub fn symbols_v3() -> Symbols {
    Symbols::v3_at(VERSION, SUBPROC)
}

/// mimalloc 3.3.2 with one arena of [`V3_SLICES`] slices at [`V3_ARENA`], its first slice
/// its metadata, then `spans` laid one after the other (a span with a block size is a page
/// of that many blocks in use, one without is free slices), `purge` the slices scheduled
/// for purging.
pub fn image_v3(spans: &[Span], purge: &[u64]) -> Image {
    let o = super::layout::V3_VERSIONS[0].2;
    let mut m = Image::default();
    m.map(VERSION, 16);
    m.regions[0].1[..6].copy_from_slice(&[0xb8, 0x5e, 0x76, 0, 0, 0xc3]);
    m.map(SUBPROC, 0x1000);
    m.put(SUBPROC + o.arena_count, 1);
    m.put(SUBPROC + o.arenas, V3_ARENA);
    m.map(V3_ARENA, 0x1000);
    m.put(V3_ARENA + o.slice_count, V3_SLICES);
    m.put(V3_ARENA + o.info_slices, 1);
    m.put(V3_ARENA + o.pages, PAGES);
    m.put(V3_ARENA + o.slices_purge, PURGE);
    m.put(V3_ARENA + o.pages_meta, META);
    for map in [PAGES, PURGE] {
        m.map(map, o.bitmap_chunks + 64);
        m.put(map, 1);
    }
    m.map(META, V3_SLICES * o.page_bytes);
    let mut starts = 0u64;
    let mut s = 1u64;
    for span in spans {
        if span.block_size != 0 {
            starts |= 1 << s;
            let page = META + s * o.page_bytes;
            m.put(page + o.page_used, u64::from(span.used));
            m.put(page + o.page_block_size, span.block_size);
            m.put(page + o.page_memid, V3_ARENA);
            m.put(page + o.page_memid + 8, s | u64::from(span.slices) << 32);
            m.put(page + o.page_memid + 16, u64::from(super::layout::MEM_ARENA));
        }
        s += u64::from(span.slices);
    }
    m.put(PAGES + o.bitmap_chunks, starts);
    m.put(PURGE + o.bitmap_chunks, purge.iter().fold(0, |b, &p| b | 1 << p));
    m
}
