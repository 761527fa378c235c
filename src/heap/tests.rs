//! Discovery and the free-list count on crafted processes laid out as glibc lays them
//! out (`image::Builder`): every arena found from `main_arena`, every list counted as
//! `int_mallinfo` counts it, every rule glibc checks turning a doubtful heap into no
//! number, the retry, the budget and the cross-check.

use super::arenas::{Bounds, Discovery};
use super::glibc::{Layout, PREV_INUSE};
use super::image::{self, Builder, Image, BRK, LIBC_DATA, MAIN_ARENA};
use super::target::{Fault, Target};
use super::*;

const KIB: u64 = 1024;

fn server(layout: Layout) -> (Image, Bounds, u64, u64) {
    let s = image::server(layout, 256 * KIB);
    (s.image, s.bounds, s.free_bytes, s.free_chunks)
}

fn tops(image: &mut Image, d: &Discovery) -> u64 {
    d.arenas
        .iter()
        .map(|a| image.get(a.state.top + 8) & !7)
        .sum()
}

#[test]
fn every_arena_and_heap_is_found_from_glibc_structures() {
    for minor in [31, 36, 41] {
        let layout = Layout::of(minor).unwrap();
        let (mut m, bounds, _, _) = server(layout);
        let d = arenas::discover(&mut m, &layout, &bounds).unwrap();
        assert_eq!(d.arenas.len(), 2, "2.{minor}");
        assert!(d.arenas[0].main);
        assert_eq!(d.arenas[0].state.addr, MAIN_ARENA);
        assert_eq!(
            d.arenas[1].heaps.len(),
            3,
            "2.{minor}: three heaps, two merged"
        );
        assert_eq!(d.arena_heaps(), 3);
        assert_eq!(d.heap_max, 64 << 20);
    }
}

#[test]
fn free_lists_count_what_mallinfo_counts() {
    for minor in [31, 36, 41] {
        let layout = Layout::of(minor).unwrap();
        let (mut m, bounds, free, chunks) = server(layout);
        let d = arenas::discover(&mut m, &layout, &bounds).unwrap();
        let top = tops(&mut m, &d);
        let r = measure(&mut m, &layout, &bounds, 1000, 100_000).unwrap();
        assert_eq!(r.free_bytes(), free + top, "2.{minor}");
        assert_eq!(
            r.main.free_chunks + r.arenas.free_chunks,
            chunks,
            "2.{minor}"
        );
        assert_eq!(r.main.fast_bytes, 0x20 + 0x20 + 0x40 + 0xb0);
        assert_eq!(r.arenas.fast_bytes, 3 * 0x30);
        assert_eq!((r.arena_count, r.arenas.heaps), (1, 3));
        assert_eq!(r.arena_reserved_bytes, 3 * (64 << 20));
        assert!(r.cross_checked, "the chunk walk agreed");
        // Every page resident: all free bytes are resident.
        assert_eq!(r.free_resident_bytes(), r.free_bytes());
    }
}

#[test]
fn residency_and_reclaimable_follow_pagemap() {
    let layout = Layout::of(36).unwrap();
    let mut b = Builder::new(layout, 256 * KIB);
    b.used(0, 0x290);
    let hole = b.free(0, 0x8000, false);
    b.used(0, 0x100);
    let (mut m, bounds) = b.finish();
    let r = measure(&mut m, &layout, &bounds, 1000, 100_000).unwrap();
    let before = r.reclaimable_bytes();
    // malloc_trim gave back the hole's inner pages: free stays, resident and
    // reclaimable drop by them.
    let inner: Vec<u64> = ((hole + 48).div_ceil(4096)..(hole + 0x8000) / 4096).collect();
    m.absent = inner.clone();
    let r = measure(&mut m, &layout, &bounds, 1000, 100_000).unwrap();
    let gone = inner.len() as u64 * 4096;
    assert_eq!(r.free_bytes() - r.free_resident_bytes(), gone);
    assert_eq!(before - r.reclaimable_bytes(), gone);
}

/// The first chunk of arena `a`'s first non-empty small bin.
fn first_in_small_bin(d: &Discovery, a: usize) -> u64 {
    let s = &d.arenas[a].state;
    (2..64)
        .find_map(|i| (s.bins[i].0 != s.bin_at(i)).then_some(s.bins[i].0))
        .unwrap()
}

#[test]
fn every_broken_rule_gives_no_number() {
    type Breaker = fn(&mut Image, &Discovery);
    let layout = Layout::of(41).unwrap();
    let broken: [(&str, Breaker); 12] = [
        ("a chunk's fd does not lead back", |m, d| {
            let c = d.arenas[0].state.bins[1].1;
            m.put(c + 16, c + 0x40);
        }),
        ("the footer disagrees with the size", |m, d| {
            let c = d.arenas[0].state.bins[1].0;
            let size = m.get(c + 8) & !7;
            m.put(c + size, size + 16);
        }),
        ("the next chunk says its predecessor is in use", |m, d| {
            let c = d.arenas[0].state.bins[1].0;
            let size = m.get(c + 8) & !7;
            let next = m.get(c + size + 8);
            m.put(c + size + 8, next | PREV_INUSE);
        }),
        ("a chunk in a small bin of another size", |m, d| {
            let c = first_in_small_bin(d, 0);
            let field = m.get(c + 8);
            m.put(c + 8, field + 0x10);
        }),
        ("a fastbin chunk of the wrong size", |m, d| {
            let c = d.arenas[0].state.fastbins[0];
            m.put(c + 8, 0x40 | PREV_INUSE);
        }),
        ("a fastbin pointer stored unmangled", |m, d| {
            let c = d.arenas[0].state.fastbins[0];
            let next = m.get(c + 16) ^ ((c + 16) >> 12);
            m.put(c + 16, next);
        }),
        ("a heap that names another arena", |m, d| {
            let h = d.arenas[1].heaps[1].start;
            m.put(h, MAIN_ARENA);
        }),
        ("an arena whose system_mem is not its heaps", |m, d| {
            let a = d.arenas[1].state.addr;
            let v = m.get(a + 0x888);
            m.put(a + 0x888, v + 4096);
        }),
        ("the main arena's top does not end the brk heap", |m, d| {
            let top = d.arenas[0].state.top;
            let v = m.get(top + 8);
            m.put(top + 8, v - 16);
        }),
        ("a bin that points outside its arena's heaps", |m, d| {
            let a = d.arenas[1].state.addr;
            m.put(a + 0x78, BRK + 0x1000);
        }),
        (
            "an unsorted chunk whose size carries past the address space",
            |m, d| {
                let c = d.arenas[0].state.bins[1].0;
                m.put(c + 8, !0xf_u64 | PREV_INUSE);
            },
        ),
        (
            "a heap whose size carries past the address space",
            |m, d| {
                let h = d.arenas[1].heaps.last().unwrap().start;
                m.put(h + 16, !0xf_u64);
            },
        ),
    ];
    for (what, breakit) in broken {
        let (mut m, bounds, _, _) = server(layout);
        let d = arenas::discover(&mut m, &layout, &bounds).unwrap();
        breakit(&mut m, &d);
        let r = measure(&mut m, &layout, &bounds, 1000, 100_000);
        assert!(
            matches!(r, Err(Fault::Inconsistent) | Err(Fault::NotFound)),
            "{what}: {r:?}"
        );
    }
}

#[test]
fn a_chunk_on_no_list_fails_the_cross_check() {
    let layout = Layout::of(36).unwrap();
    let mut b = Builder::new(layout, 256 * KIB);
    b.used(0, 0x290);
    b.orphan(0, 0x1000);
    b.used(0, 0x100);
    let (mut m, bounds) = b.finish();
    assert_eq!(
        measure(&mut m, &layout, &bounds, 1000, 100_000),
        Err(Fault::Inconsistent)
    );
    // Too large to cross-check: the free lists alone are the measurement.
    let r = measure(&mut m, &layout, &bounds, 1000, 2).unwrap();
    assert!(!r.cross_checked);
}

#[test]
fn the_budget_counts_free_chunks() {
    let layout = Layout::of(36).unwrap();
    let (mut m, bounds, _, chunks) = server(layout);
    assert_eq!(
        measure(&mut m, &layout, &bounds, chunks - 1, 100_000),
        Err(Fault::Budget)
    );
    assert!(measure(&mut m, &layout, &bounds, chunks, 100_000).is_ok());
}

#[test]
fn without_a_main_arena_nothing_is_measured() {
    let layout = Layout::of(36).unwrap();
    let (mut m, mut bounds, _, _) = server(layout);
    bounds.libc_data = vec![(LIBC_DATA + 0x1000, LIBC_DATA + 0x2000)];
    assert_eq!(
        measure(&mut m, &layout, &bounds, 1000, 100_000),
        Err(Fault::NotFound)
    );
}

/// Memory that changes while it is read: the first `broken_reads` reads see garbage.
struct Moving {
    image: Image,
    reads: u32,
    broken_reads: u32,
}

impl Target for Moving {
    fn read(&mut self, addr: u64, buf: &mut [u8]) -> Result<(), Fault> {
        self.reads += 1;
        self.image.read(addr, buf)?;
        if self.reads <= self.broken_reads && addr != LIBC_DATA {
            buf.fill(0xff);
        }
        Ok(())
    }

    fn page_size(&self) -> u64 {
        self.image.page_size()
    }

    fn resident_bytes(&mut self, start: u64, end: u64) -> Result<u64, Fault> {
        self.image.resident_bytes(start, end)
    }
}

#[test]
fn a_heap_that_moved_is_tried_once_more_then_given_up() {
    let layout = Layout::of(36).unwrap();
    let (image, bounds, free, _) = server(layout);
    // The first read after libc's data (the main arena's top chunk) sees garbage.
    let mut once = Moving {
        image: image.clone(),
        reads: 0,
        broken_reads: 2,
    };
    let m = measure(&mut once, &layout, &bounds, 1000, 100_000).unwrap();
    assert!(m.free_bytes() > free);
    let mut always = Moving {
        image,
        reads: 0,
        broken_reads: u32::MAX,
    };
    let r = measure(&mut always, &layout, &bounds, 1000, 100_000);
    assert_eq!(r, Err(Fault::Inconsistent));
}

/// A list that changes under the walk: the chunk at `hot` shows another `fd` to the
/// first `moving` list walks that read it, then holds still (a program that freed and
/// allocated meanwhile, then went back to work).
struct HotList {
    image: Image,
    hot: u64,
    reads: u64,
    moving: u64,
}

impl Target for HotList {
    fn read(&mut self, addr: u64, buf: &mut [u8]) -> Result<(), Fault> {
        self.image.read(addr, buf)?;
        if addr == self.hot && buf.len() == 32 {
            self.reads += 1;
            if self.reads <= self.moving {
                buf[16..24].copy_from_slice(&(self.reads * 0x10).to_le_bytes());
            }
        }
        Ok(())
    }

    fn page_size(&self) -> u64 {
        self.image.page_size()
    }

    fn resident_bytes(&mut self, start: u64, end: u64) -> Result<u64, Fault> {
        self.image.resident_bytes(start, end)
    }
}

#[test]
fn a_list_that_moved_is_walked_again_and_the_count_confirmed() {
    let layout = Layout::of(36).unwrap();
    let (image, bounds, free, chunks) = server(layout);
    let mut m = image.clone();
    let d = arenas::discover(&mut m, &layout, &bounds).unwrap();
    let top = tops(&mut m, &d);
    let hot = d.arenas[0].state.bins[1].1;
    let mut t = HotList {
        image: image.clone(),
        hot,
        reads: 0,
        moving: 2,
    };
    let r = measure(&mut t, &layout, &bounds, 1000, 100_000).unwrap();
    assert_eq!(r.free_bytes(), free + top);
    assert_eq!(r.main.free_chunks + r.arenas.free_chunks, chunks);
    assert!(r.confirmed, "a moving heap is counted twice");
    assert!(
        t.reads >= 4,
        "walked again, then counted again: {}",
        t.reads
    );
    // A list that never holds still: no number.
    let mut t = HotList {
        image,
        hot,
        reads: 0,
        moving: u64::MAX,
    };
    assert_eq!(
        measure(&mut t, &layout, &bounds, 1000, 100_000),
        Err(Fault::Inconsistent)
    );
}

fn xorshift(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

/// Random words written over glibc's structures and chunk headers: every measurement
/// ends, without a panic, and a number it gives stays inside the heaps.
#[test]
fn fuzzed_structures_never_panic_and_never_loop() {
    let layout = Layout::of(36).unwrap();
    let (image, bounds, _, _) = server(layout);
    let heap_bytes: u64 = image.regions.iter().skip(1).map(|r| r.1.len() as u64).sum();
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut outcomes = [0u32; 2];
    for _ in 0..3_000 {
        let mut m = image.clone();
        for _ in 0..1 + xorshift(&mut state) % 4 {
            let r = xorshift(&mut state);
            let region = (r % m.regions.len() as u64) as usize;
            let (base, len) = (m.regions[region].0, m.regions[region].1.len() as u64);
            let at = base + (xorshift(&mut state) % (len / 8)) * 8;
            let word = match r % 5 {
                0 => xorshift(&mut state),
                1 => 0,
                2 => (r >> 8) & 0xfff0 | 1,
                3 => base + (r >> 8) % len,
                _ => m.get(at) ^ (1 << (r % 64)),
            };
            m.put(at, word);
        }
        match measure(&mut m, &layout, &bounds, 1000, 100_000) {
            Ok(r) => {
                assert!(r.free_bytes() <= heap_bytes, "{r:?}");
                assert!(r.reclaimable_bytes() <= r.free_resident_bytes());
                outcomes[0] += 1;
            }
            Err(_) => outcomes[1] += 1,
        }
    }
    assert!(outcomes[0] > 0 && outcomes[1] > 0, "{outcomes:?}");
}

mod trust;

#[test]
fn mappings_that_grew_are_told_from_mappings_that_stayed() {
    let text = |rss: u64, end: &str| {
        format!(
            "7f0000000000-{end} rw-p 00000000 00:00 0 \nSize: 4096 kB\nRss: {rss} kB\n\
             Anonymous: {rss} kB\n"
        )
    };
    let vmas = |rss, end| crate::parse::smaps::parse(&text(rss, end)).unwrap().vmas;
    let before = vmas(1024, "7f0000400000");
    assert!(
        !grew(&before, &vmas(1024, "7f0000400000")),
        "the same mappings"
    );
    assert!(!grew(&before, &vmas(512, "7f0000400000")), "less resident");
    assert!(grew(&before, &vmas(2048, "7f0000400000")), "more resident");
    assert!(grew(&before, &vmas(1024, "7f0000800000")), "another range");
}
