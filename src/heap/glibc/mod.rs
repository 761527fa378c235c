//! glibc's allocator structures as they lie in a 64-bit process, from `malloc/malloc.c` and
//! `malloc/arena.c`: the arena (`struct malloc_state`), the header of each non-main heap
//! (`struct _heap_info`) and the rules of its bins. Pure: bytes in, values out.
//!
//! `malloc_state` is byte-identical from glibc 2.27 (when `have_fastchunks` got its own
//! field) to 2.42 on x86-64 and aarch64; the next upstream release removes the fastbins and
//! moves every offset, so a version outside [`SUPPORTED`] is refused, never guessed.

pub mod arenas;
pub mod freelist;
pub mod measure;
pub mod process;
pub mod walk;

mod reading;
mod said;
pub use reading::Glibc;

/// The glibc versions (major 2, these minors) whose layout this module knows.
pub(crate) const SUPPORTED: std::ops::RangeInclusive<u32> = 27..=42;

pub(crate) const SIZE_SZ: u64 = 8;
/// `MALLOC_ALIGNMENT` on x86-64 and aarch64: chunk addresses are multiples of it.
pub(crate) const ALIGN: u64 = 16;
/// `MINSIZE`: the smallest chunk.
pub(crate) const MIN_CHUNK: u64 = 32;
pub(crate) const PREV_INUSE: u64 = 1;
pub(crate) const IS_MMAPPED: u64 = 2;
pub(crate) const NON_MAIN_ARENA: u64 = 4;
pub const FLAGS: u64 = 7;
/// `NONCONTIGUOUS_BIT` of `malloc_state.flags`: the arena's memory is not one brk range
/// (every non-main arena; the main arena once `brk` failed and it fell back to `mmap`).
pub(crate) const NONCONTIGUOUS: u32 = 2;

/// `sizeof (struct malloc_state)`.
pub(crate) const MALLOC_STATE_BYTES: u64 = 2200;
const FASTBINS_AT: usize = 0x10;
/// `NFASTBINS`: `fastbin_index (request2size (MAX_FAST_SIZE)) + 1` on 64-bit.
pub(crate) const NFASTBINS: usize = 10;
const TOP_AT: usize = 0x60;
const BINS_AT: usize = 0x70;
/// `NBINS`: bins 1 (unsorted) to 127 are walked, as `int_mallinfo` does.
pub(crate) const NBINS: usize = 128;
const NEXT_AT: usize = 0x870;
const SYSTEM_MEM_AT: usize = 0x888;
/// `HEAP_MAX_SIZE` on 64-bit (`2 * DEFAULT_MMAP_THRESHOLD_MAX`): each non-main heap is
/// aligned to it and reserves it.
pub(crate) const HEAP_MAX: u64 = 64 << 20;

/// What differs between the supported versions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    pub minor: u32,
    /// `sizeof (heap_info)`: 32 bytes, 48 from 2.35 (a `pagesize` field and padding).
    pub heap_info_bytes: u64,
    /// Safe-linking (2.32+): fastbin and tcache `fd` pointers are stored as
    /// `(address of the fd field >> 12) ^ pointer`.
    pub safe_linking: bool,
}

impl Layout {
    /// The layout of glibc 2.`minor`, or `None` for a version this module does not know.
    pub fn of(minor: u32) -> Option<Layout> {
        SUPPORTED.contains(&minor).then_some(Layout {
            minor,
            heap_info_bytes: if minor >= 35 { 48 } else { 32 },
            safe_linking: minor >= 32,
        })
    }

    /// The `fd` of a fastbin chunk at `chunk`, as stored, turned into a pointer.
    pub(crate) fn reveal(&self, chunk: u64, stored: u64) -> u64 {
        if self.safe_linking {
            ((chunk + 2 * SIZE_SZ) >> 12) ^ stored
        } else {
            stored
        }
    }
}

/// The minor version from libc's banner ("... stable release version 2.36."), found
/// anywhere in `text`.
pub(crate) fn version_in(text: &[u8]) -> Option<u32> {
    banner_in(text).map(|(_, v)| v)
}

/// Where glibc's banner starts in `text`, and the minor version it gives.
pub(crate) fn banner_in(text: &[u8]) -> Option<(usize, u32)> {
    const MARK: &[u8] = b"release version 2.";
    let start = text.windows(MARK.len()).position(|w| w == MARK)?;
    let at = start + MARK.len();
    let digits = text[at..]
        .iter()
        .take(3)
        .take_while(|b| b.is_ascii_digit())
        .count();
    let v = std::str::from_utf8(&text[at..at + digits])
        .ok()?
        .parse()
        .ok()?;
    Some((start, v))
}

/// The word at `at` of `b` (0 past its end).
fn word(b: &[u8], at: usize) -> u64 {
    super::target::u64_at(b, at).unwrap_or(0)
}

/// The fields of an arena this exporter uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Arena {
    /// The arena's own address.
    pub addr: u64,
    pub flags: u32,
    /// Heads of the fastbins (raw pointers, not mangled).
    pub fastbins: [u64; NFASTBINS],
    pub top: u64,
    /// `(fd, bk)` of bins 1 to 127; index 0 is unused.
    pub bins: Vec<(u64, u64)>,
    pub next: u64,
    pub system_mem: u64,
}

impl Arena {
    /// Reads an arena from the `MALLOC_STATE_BYTES` at `addr`.
    pub fn parse(addr: u64, b: &[u8]) -> Option<Arena> {
        if b.len() < MALLOC_STATE_BYTES as usize {
            return None;
        }
        let mut fastbins = [0; NFASTBINS];
        for (i, f) in fastbins.iter_mut().enumerate() {
            *f = word(b, FASTBINS_AT + 8 * i);
        }
        let mut bins = vec![(0, 0)];
        for i in 1..NBINS {
            let at = BINS_AT + (i - 1) * 16;
            bins.push((word(b, at), word(b, at + 8)));
        }
        Some(Arena {
            addr,
            flags: u32::from_le_bytes(b[4..8].try_into().unwrap_or([0; 4])),
            fastbins,
            top: word(b, TOP_AT),
            bins,
            next: word(b, NEXT_AT),
            system_mem: word(b, SYSTEM_MEM_AT),
        })
    }

    /// `bin_at (av, i)`: the fake chunk whose `fd`/`bk` are bin `i`'s list heads.
    pub(crate) fn bin_at(&self, i: usize) -> u64 {
        self.addr + TOP_AT as u64 + (i as u64 - 1) * 16
    }

    /// The top chunk before the arena's first `malloc`: `initial_top`, the unsorted bin.
    pub(crate) fn top_is_initial(&self) -> bool {
        self.top == self.bin_at(1)
    }

    /// Bins whose list is empty (both heads point back at the bin).
    pub(crate) fn empty_bins(&self) -> usize {
        (1..NBINS)
            .filter(|&i| self.bins[i] == (self.bin_at(i), self.bin_at(i)))
            .count()
    }

    /// Whether the bytes look like an initialised arena: every bin either empty or with
    /// both heads pointing at chunk-aligned addresses outside the arena, at least one bin
    /// empty, and `next` a non-null pointer.
    pub(crate) fn is_plausible(&self) -> bool {
        let inside = |p: u64| p >= self.addr && p < self.addr + MALLOC_STATE_BYTES;
        let bins_ok = (1..NBINS).all(|i| {
            let (fd, bk) = self.bins[i];
            let b = self.bin_at(i);
            (fd == b && bk == b)
                || (fd != 0 && bk != 0 && fd % ALIGN == 0 && bk % ALIGN == 0)
                    && !inside(fd)
                    && !inside(bk)
        });
        bins_ok && self.empty_bins() > 0 && self.next != 0 && self.next % SIZE_SZ == 0
    }
}

/// `struct _heap_info`, the header of every non-main heap.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct HeapInfo {
    /// The arena (`malloc_state`) this heap belongs to.
    pub arena: u64,
    pub prev: u64,
    /// Bytes of the heap in use by the arena: its chunks end here.
    pub size: u64,
    pub mprotect_size: u64,
}

impl HeapInfo {
    pub fn parse(b: &[u8; 32]) -> HeapInfo {
        HeapInfo {
            arena: word(b, 0),
            prev: word(b, 8),
            size: word(b, 16),
            mprotect_size: word(b, 24),
        }
    }
}

/// `smallbin_index`/`largebin_index` (64-bit): the bin a free chunk of `size` belongs in.
pub(crate) fn bin_index(size: u64) -> usize {
    if size < 1024 {
        (size >> 4) as usize
    } else {
        let i = if size >> 6 <= 48 {
            48 + (size >> 6)
        } else if size >> 9 <= 20 {
            91 + (size >> 9)
        } else if size >> 12 <= 10 {
            110 + (size >> 12)
        } else if size >> 15 <= 4 {
            119 + (size >> 15)
        } else if size >> 18 <= 2 {
            124 + (size >> 18)
        } else {
            126
        };
        i as usize
    }
}

/// `fastbin_index` (64-bit): the fastbin a chunk of `size` belongs in.
pub(crate) fn fastbin_index(size: u64) -> usize {
    ((size >> 4) as usize).wrapping_sub(2)
}

/// Where the chunks of an arena's first heap start: right after the arena, moved so that
/// the user pointer (`chunk + 16`) is aligned (`_int_new_arena`). Also the first chunk of
/// the brk heap, moved likewise from the heap's start.
pub(crate) fn first_chunk(after: u64) -> u64 {
    (after + 2 * SIZE_SZ).next_multiple_of(ALIGN) - 2 * SIZE_SZ
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_from_the_banners_of_three_debian_releases() {
        let banner = |s: &str| version_in(s.as_bytes());
        assert_eq!(
            banner(
                "\0GNU C Library (Debian GLIBC 2.31-13+deb11u11) stable release version 2.31.\n"
            ),
            Some(31)
        );
        assert_eq!(
            banner("xx GNU C Library (Debian GLIBC 2.41-12+deb13u5) stable release version 2.41."),
            Some(41)
        );
        assert_eq!(banner("release version 3.0"), None);
        assert_eq!(banner("no banner"), None);
    }

    #[test]
    fn layouts_follow_the_source() {
        assert_eq!(Layout::of(26), None, "have_fastchunks was a flag bit");
        assert_eq!(Layout::of(43), None, "fastbins removed upstream");
        let l31 = Layout::of(31).unwrap();
        assert_eq!((l31.heap_info_bytes, l31.safe_linking), (32, false));
        assert_eq!(Layout::of(32).unwrap().heap_info_bytes, 32);
        let l35 = Layout::of(35).unwrap();
        assert_eq!((l35.heap_info_bytes, l35.safe_linking), (48, true));
        // PROTECT_PTR (pos, ptr) = (pos >> 12) ^ ptr with pos = &p->fd = p + 16.
        let p = 0x5555_5555_9290;
        let next = 0x5555_5555_a2a0;
        let stored = ((p + 16) >> 12) ^ next;
        assert_eq!(l35.reveal(p, stored), next);
        assert_eq!(l31.reveal(p, next), next);
    }

    #[test]
    fn bin_indexes_match_malloc_c() {
        // Small bins: 16 bytes apart, 32..1008.
        assert_eq!(bin_index(32), 2);
        assert_eq!(bin_index(1008), 63);
        // Large bins: MIN_LARGE_SIZE is 1024 on 64-bit.
        assert_eq!(bin_index(1024), 64);
        assert_eq!(bin_index(3072), 96);
        assert_eq!(bin_index(10 * 1024), 111);
        assert_eq!(bin_index(10 * 1024 + 512), 112);
        assert_eq!(bin_index(1 << 20), 126);
        assert_eq!(fastbin_index(32), 0);
        assert_eq!(fastbin_index(176), 9);
    }

    #[test]
    fn first_chunks_where_glibc_puts_them() {
        // An arena at heap + 48 (2.35+): 48 + 2200 = 2248, user pointer aligned at 2272.
        assert_eq!(
            first_chunk(0x7f00_0000_0000 + 48 + 2200),
            0x7f00_0000_0000 + 2256
        );
        assert_eq!(first_chunk(0x5555_5555_a000), 0x5555_5555_a000);
        assert_eq!(first_chunk(0x5555_5555_a008), 0x5555_5555_a010);
    }
}
