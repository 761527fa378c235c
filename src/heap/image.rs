//! Crafted process memory for tests, benchmarks and the fuzzer: an [`Image`] of sparse
//! regions, and a [`Builder`] that lays out glibc's structures in it as glibc would (the
//! main arena in libc's data, a brk heap, non-main arenas with chains of 64 MiB-aligned
//! heaps, chunks with their flags and footers, bins and fastbins linked as glibc links
//! them). Not used by the exporter itself.

use std::collections::BTreeMap;

use super::arenas::Bounds;
use super::glibc::{
    self, bin_index, fastbin_index, Layout, HEAP_MAX, MALLOC_STATE_BYTES, NBINS, NFASTBINS,
    NONCONTIGUOUS, NON_MAIN_ARENA, PREV_INUSE,
};
use super::target::{Fault, Target};

/// Memory made of regions; pages listed in `absent` are not resident, ranges listed in
/// `shared` are a shared mapping's (not private anonymous memory).
#[derive(Debug, Clone, Default)]
pub struct Image {
    pub regions: Vec<(u64, Vec<u8>)>,
    pub absent: Vec<u64>,
    pub shared: Vec<(u64, u64)>,
}

pub const PAGE: u64 = 4096;

impl Image {
    /// Adds a zeroed region `[base, base + len)`.
    pub fn map(&mut self, base: u64, len: u64) {
        self.regions.push((base, vec![0; len as usize]));
    }

    fn slice(&mut self, addr: u64, len: usize) -> Option<&mut [u8]> {
        self.regions.iter_mut().find_map(|(base, bytes)| {
            let at = addr.checked_sub(*base)? as usize;
            bytes.get_mut(at..at.checked_add(len)?)
        })
    }

    pub fn put(&mut self, addr: u64, word: u64) {
        if let Some(s) = self.slice(addr, 8) {
            s.copy_from_slice(&word.to_le_bytes());
        }
    }

    pub fn get(&mut self, addr: u64) -> u64 {
        self.slice(addr, 8)
            .map_or(0, |s| u64::from_le_bytes(s.try_into().unwrap_or([0; 8])))
    }

    /// A chunk header at `addr`: prev_size and size with flags.
    pub fn chunk(&mut self, addr: u64, prev_size: u64, size_and_flags: u64) {
        self.put(addr, prev_size);
        self.put(addr + 8, size_and_flags);
    }
}

impl Target for Image {
    fn page_size(&self) -> u64 {
        PAGE
    }

    fn read(&mut self, addr: u64, buf: &mut [u8]) -> Result<(), Fault> {
        let src = self.slice(addr, buf.len()).ok_or(Fault::Unreadable)?;
        buf.copy_from_slice(src);
        Ok(())
    }

    /// The range less its absent pages: any range, up to the top of the address space,
    /// at the cost of the absent pages.
    fn resident_bytes(&mut self, start: u64, end: u64) -> Result<u64, Fault> {
        let mut absent = self.absent.clone();
        absent.sort_unstable();
        absent.dedup();
        let gone: u64 = absent
            .iter()
            .map(|&p| {
                let lo = p.saturating_mul(PAGE);
                let hi = lo.saturating_add(PAGE);
                hi.min(end).saturating_sub(lo.max(start))
            })
            .sum();
        Ok(end.saturating_sub(start).saturating_sub(gone))
    }

    fn private_anonymous(&self, start: u64, end: u64) -> bool {
        !self.shared.iter().any(|&(lo, hi)| lo < end && start < hi)
    }
}

/// Where the builder puts things.
pub(crate) const LIBC_DATA: u64 = 0x7fff_f7e0_0000;
pub(crate) const MAIN_ARENA: u64 = LIBC_DATA + 0x1c0;
pub const BRK: u64 = 0x5555_5555_a000;
pub(crate) const HEAPS: u64 = 0x7ff0_0000_0000;

#[derive(Debug, Clone)]
struct ArenaPlan {
    addr: u64,
    main: bool,
    /// `(start, end)` of each heap, oldest first; chunks go into the last.
    heaps: Vec<(u64, u64)>,
    /// Where the next chunk goes.
    cursor: u64,
    /// The chunk before `cursor` is free (in a bin) with this size.
    free_before: Option<u64>,
    bins: BTreeMap<usize, Vec<u64>>,
    fast: [Vec<u64>; NFASTBINS],
}

/// Lays out glibc's heaps chunk by chunk; [`Builder::finish`] writes the arenas.
pub struct Builder {
    pub image: Image,
    pub layout: Layout,
    arenas: Vec<ArenaPlan>,
    heap_bytes: u64,
}

impl Builder {
    /// A main arena with a brk heap of `heap_bytes`; every heap made later has that size.
    pub fn new(layout: Layout, heap_bytes: u64) -> Builder {
        let mut image = Image::default();
        image.map(LIBC_DATA, 0x2000);
        image.map(BRK, heap_bytes);
        let first = glibc::first_chunk(BRK);
        let main = ArenaPlan {
            addr: MAIN_ARENA,
            main: true,
            heaps: vec![(BRK, BRK + heap_bytes)],
            cursor: first,
            free_before: None,
            bins: BTreeMap::new(),
            fast: Default::default(),
        };
        Builder {
            image,
            layout,
            arenas: vec![main],
            heap_bytes,
        }
    }

    /// A new non-main arena in its first heap; returns its index.
    pub fn arena(&mut self) -> usize {
        let n = self.arenas.len();
        let start = HEAPS + (n as u64 * 64) * HEAP_MAX;
        self.image.map(start, self.heap_bytes);
        let addr = start + self.layout.heap_info_bytes;
        self.arenas.push(ArenaPlan {
            addr,
            main: false,
            heaps: vec![(start, start + self.heap_bytes)],
            cursor: glibc::first_chunk(addr + MALLOC_STATE_BYTES),
            free_before: None,
            bins: BTreeMap::new(),
            fast: Default::default(),
        });
        n
    }

    /// Ends arena `a`'s current heap with fence posts and starts the next, `gap` heaps
    /// further (0: right beside it, as the kernel then merges the two mappings).
    pub(crate) fn next_heap(&mut self, a: usize, gap: u64) {
        let plan = &mut self.arenas[a];
        let (_, end) = *plan.heaps.last().unwrap();
        let fence = end - 32;
        // The chunk before the fence posts fills the rest (in use).
        let rest = fence - plan.cursor;
        let p = plan.free_before.map_or(PREV_INUSE, |_| 0);
        self.image.chunk(
            plan.cursor,
            plan.free_before.unwrap_or(0),
            rest | p | NON_MAIN_ARENA,
        );
        self.image.chunk(fence, 0, 16 | PREV_INUSE);
        self.image.chunk(fence + 16, 16, PREV_INUSE);
        let start = end.next_multiple_of(HEAP_MAX) + gap * HEAP_MAX;
        self.image.map(start, self.heap_bytes);
        plan.heaps.push((start, start + self.heap_bytes));
        plan.cursor = start + self.layout.heap_info_bytes;
        plan.free_before = None;
    }

    fn flags(&self, a: usize) -> u64 {
        if self.arenas[a].main {
            0
        } else {
            NON_MAIN_ARENA
        }
    }

    fn push(&mut self, a: usize, size: u64, field_flags: u64) -> u64 {
        let plan = &mut self.arenas[a];
        let at = plan.cursor;
        let (prev_size, p) = match plan.free_before {
            Some(s) => (s, 0),
            None => (0, PREV_INUSE),
        };
        self.image.chunk(at, prev_size, size | p | field_flags);
        plan.cursor = at + size;
        at
    }

    /// An in-use chunk of `size` in arena `a`.
    pub fn used(&mut self, a: usize, size: u64) -> u64 {
        let f = self.flags(a);
        let at = self.push(a, size, f);
        self.arenas[a].free_before = None;
        at
    }

    /// A free chunk of `size` in arena `a`, in the bin its size belongs to (or the
    /// unsorted bin with `unsorted`).
    pub fn free(&mut self, a: usize, size: u64, unsorted: bool) -> u64 {
        let at = self.push(a, size, 0);
        let bin = if unsorted { 1 } else { bin_index(size) };
        let plan = &mut self.arenas[a];
        plan.bins.entry(bin).or_default().push(at);
        plan.free_before = Some(size);
        at
    }

    /// A free chunk on no list at all, as a chunk looks in the middle of a `free`: the
    /// chunk walk sees it free, the free lists do not.
    #[cfg(test)]
    pub(crate) fn orphan(&mut self, a: usize, size: u64) -> u64 {
        let at = self.push(a, size, 0);
        self.arenas[a].free_before = Some(size);
        at
    }

    /// A chunk of `size` in arena `a`'s fastbin: still marked in use.
    pub fn fast(&mut self, a: usize, size: u64) -> u64 {
        let at = self.used(a, size);
        self.arenas[a].fast[fastbin_index(size)].push(at);
        at
    }

    /// Writes chunk lists, arenas and heap headers; returns the image and its bounds.
    pub fn finish(mut self) -> (Image, Bounds) {
        let n = self.arenas.len();
        for a in 0..n {
            let plan = self.arenas[a].clone();
            let (_, end) = *plan.heaps.last().unwrap();
            let p = plan.free_before.map_or(PREV_INUSE, |_| 0);
            self.image.chunk(
                plan.cursor,
                plan.free_before.unwrap_or(0),
                (end - plan.cursor) | p,
            );
            let st = plan.addr;
            let flags = if plan.main {
                0
            } else {
                u64::from(NONCONTIGUOUS)
            };
            self.image.put(st, flags << 32);
            for (i, list) in plan.fast.iter().enumerate() {
                let mut next = 0;
                for &c in list.iter().rev() {
                    let stored = if self.layout.safe_linking {
                        ((c + 16) >> 12) ^ next
                    } else {
                        next
                    };
                    self.image.put(c + 16, stored);
                    next = c;
                }
                self.image.put(st + 0x10 + 8 * i as u64, next);
            }
            self.image.put(st + 0x60, plan.cursor);
            for i in 1..NBINS {
                let bin = st + 0x60 + (i as u64 - 1) * 16;
                let list = plan.bins.get(&i).cloned().unwrap_or_default();
                let (first, last) = (
                    list.first().copied().unwrap_or(bin),
                    list.last().copied().unwrap_or(bin),
                );
                self.image.put(bin + 16, first);
                self.image.put(bin + 24, last);
                for (k, &c) in list.iter().enumerate() {
                    let fd = list.get(k + 1).copied().unwrap_or(bin);
                    let bk = if k == 0 { bin } else { list[k - 1] };
                    self.image.put(c + 16, fd);
                    self.image.put(c + 24, bk);
                }
            }
            let next = self.arenas[(a + 1) % n].addr;
            self.image.put(st + 0x870, next);
            self.image.put(st + 0x880, 1);
            let system_mem = plan.heaps.iter().map(|(s, e)| e - s).sum::<u64>();
            self.image.put(st + 0x888, system_mem);
            if !plan.main {
                let mut prev = 0;
                for &(start, end) in &plan.heaps {
                    for (i, w) in [st, prev, end - start, end - start].into_iter().enumerate() {
                        self.image.put(start + 8 * i as u64, w);
                    }
                    prev = start;
                }
            }
        }
        let mut anon: Vec<(u64, u64)> = self
            .arenas
            .iter()
            .flat_map(|a| a.heaps.iter().copied())
            .collect();
        anon.sort_unstable();
        let bounds = Bounds {
            brk: Some((BRK, BRK + self.heap_bytes)),
            anon_rw: anon,
            libc_data: vec![(LIBC_DATA, LIBC_DATA + 0x2000)],
        };
        (self.image, bounds)
    }
}

/// A crafted server-shaped process and what glibc would say of it.
pub struct Server {
    pub image: Image,
    pub bounds: Bounds,
    /// Free bytes outside the top chunks (`fordblks` less the tops).
    pub free_bytes: u64,
    /// Free chunks (`ordblks + smblks` less one top chunk per arena).
    pub free_chunks: u64,
}

/// The main thread's heap and one worker arena of three heaps (two of them side by side,
/// as the kernel then merges their mappings), with small live objects between freed
/// blocks of every list kind: small, large and unsorted bins and fastbins. Each heap is
/// `heap_bytes` long.
pub fn server(layout: Layout, heap_bytes: u64) -> Server {
    let mut b = Builder::new(layout, heap_bytes);
    let mut free = 0;
    let mut chunks = 0;
    b.used(0, 0x290); // tcache_perthread_struct
    for (size, unsorted) in [
        (0x4000, false),
        (0x200, false),
        (0x1000, true),
        (0x8000, false),
    ] {
        b.used(0, 0x100);
        b.free(0, size, unsorted);
        free += size;
        chunks += 1;
    }
    for size in [0x20, 0x20, 0x40, 0xb0] {
        b.fast(0, size);
        free += size;
        chunks += 1;
    }
    b.used(0, 0x50);
    let w = b.arena();
    for heap in 0..3 {
        for size in [0x2000u64, 0x410, 0x30] {
            b.used(w, 0x60);
            b.free(w, size, heap == 1);
            free += size;
            chunks += 1;
        }
        b.fast(w, 0x30);
        free += 0x30;
        chunks += 1;
        b.used(w, 0x60);
        if heap < 2 {
            b.next_heap(w, if heap == 0 { 0 } else { 3 });
        }
    }
    let (image, bounds) = b.finish();
    Server {
        image,
        bounds,
        free_bytes: free,
        free_chunks: chunks,
    }
}
