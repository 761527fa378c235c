//! Where mimalloc 2 keeps what is read, per version: the places of the fields of an arena
//! (`mi_arena_t`), a segment (`mi_segment_t`), a page (`mi_page_t`, which is also a slice
//! of a segment) and the main heap's cookie, taken from the DWARF of builds of each version
//! as `libmimalloc-sys` (the `mimalloc` crate's) makes them (`gdb`'s `ptype /o`, checked by
//! `tests/mimalloc.rs` against the debug builds), and the binary's own facts: the addresses
//! of `mi_version`, `mi_arenas`, `mi_arena_count`, `mi_segment_map` and `_mi_heap_main`
//! in its symbol table, where it is loaded.

use super::Unmeasured;
use crate::heap::elf::{Binary, Elf, Fault};

/// One version's places, in bytes from the start of each structure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Offsets {
    /// `mi_arena_t`: `start`, `block_count` and `field_count` (a pointer and two
    /// `size_t`), the pointer to its bitmap of blocks to purge (`blocks_purge`), and its
    /// in-place bitmap of blocks in use, `blocks_inuse`.
    pub arena_start: u64,
    pub arena_purge: u64,
    pub arena_inuse: u64,
    /// `mi_segment_t`: `purge_expire` (0: nothing to purge), `purge_mask` (a bit a
    /// slice), `segment_size`, `cookie`, `segment_slices`, `segment_info_slices`,
    /// `slice_entries` and the array `slices` (`mi_page_t`s).
    pub purge_expire: u64,
    pub purge_mask: u64,
    pub segment_size: u64,
    pub cookie: u64,
    pub segment_slices: u64,
    pub info_slices: u64,
    pub slice_entries: u64,
    pub slices: u64,
    /// `mi_page_t`: `used` (a `uint16_t`) and `block_size` (0 on a free span); its size.
    pub page_used: u64,
    pub page_block_size: u64,
    pub page_bytes: u64,
    /// The segment map: a flat bitmap (2.1) or an array of pointers to parts of it, each
    /// with its bitmap at `part_map` (2.2 and later).
    pub map: Map,
    /// `mi_stats_t`: `committed.current`, the bytes mimalloc counts committed (what
    /// `mi_process_info` gives as its commit), in `_mi_stats_main`.
    pub stats_committed: u64,
}

/// How a version keeps its map of segments allocated outside its arenas.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Map {
    /// `uintptr_t mi_segment_map[words + 1]`, one bit per segment-sized stretch of the
    /// address space from 0.
    Flat { words: u64 },
    /// `mi_segmap_part_t* mi_segment_map[parts]`, each part's `map[words]` at `part_map`,
    /// one bit per segment-sized stretch of the part's span.
    Parts { parts: u64, part_map: u64, words: u64 },
}

/// `mi_heap_t`'s `cookie`, in every version read: a segment's cookie is its address
/// XOR the main heap's.
pub const HEAP_COOKIE: u64 = 32;
/// A slice of a segment (`MI_SEGMENT_SLICE_SIZE`) and a segment (`MI_SEGMENT_SIZE`, which
/// is also an arena's block), in every version read (x86-64).
pub const SLICE: u64 = 64 << 10;
pub const SEGMENT: u64 = 32 << 20;
/// The slices of a segment that is not huge (`MI_SLICES_PER_SEGMENT`).
pub const SLICES_PER_SEGMENT: u64 = SEGMENT / SLICE;

const V2_2: Offsets = Offsets {
    arena_start: 32,
    arena_purge: 168,
    arena_inuse: 184,
    purge_expire: 48,
    purge_mask: 56,
    segment_size: 32,
    cookie: 224,
    segment_slices: 248,
    info_slices: 256,
    slice_entries: 272,
    slices: 288,
    page_used: 32,
    page_block_size: 40,
    page_bytes: 96,
    map: Map::Parts {
        parts: 25,
        part_map: 24,
        words: 1008,
    },
    stats_committed: 72,
};

/// The versions read, with their places, by the number `mi_version()` returns (2.1.7
/// gives 217; 2.3 counts 10,000 a major version: 20302).
pub const VERSIONS: [(&str, u32, Offsets); 3] = [
    (
        "2.1.7",
        217,
        Offsets {
            arena_start: 32,
            arena_purge: 128,
            arena_inuse: 144,
            purge_expire: 40,
            purge_mask: 48,
            segment_size: 32,
            cookie: 216,
            segment_slices: 224,
            info_slices: 232,
            slice_entries: 248,
            slices: 264,
            page_used: 32,
            page_block_size: 40,
            page_bytes: 96,
            map: Map::Flat { words: 20480 },
            stats_committed: 120,
        },
    ),
    ("2.2.5", 225, V2_2),
    (
        "2.3.2",
        20302,
        Offsets {
            stats_committed: 80,
            ..V2_2
        },
    ),
];

/// The symbols of one binary that links mimalloc in (or is its library), at their
/// link-time addresses, and where those land.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Symbols {
    pub version: u64,
    pub arenas: u64,
    pub arena_count: u64,
    pub segment_map: u64,
    pub heap_main: u64,
    /// mimalloc 3's `subproc_main` (0 in mimalloc 2, which has none; the four above are 0
    /// in mimalloc 3).
    pub subproc: u64,
    /// mimalloc 2's statistics, `_mi_stats_main` (0 where absent; unused in mimalloc 3,
    /// whose count is its sub-process's statistics').
    pub stats: u64,
    load: crate::heap::elf::Load,
}

impl Symbols {
    /// Symbols at these addresses in a binary loaded where it was linked (tests, the
    /// fuzzer).
    #[doc(hidden)]
    pub fn at(version: u64, arenas: u64, arena_count: u64, segment_map: u64, heap_main: u64) -> Self {
        Symbols {
            version,
            arenas,
            arena_count,
            segment_map,
            heap_main,
            subproc: 0,
            stats: 0,
            load: crate::heap::elf::Load::default(),
        }
    }

    /// mimalloc 3's symbols at these addresses, loaded where linked (tests, the fuzzer).
    #[doc(hidden)]
    pub fn v3_at(version: u64, subproc: u64) -> Self {
        Symbols {
            subproc,
            ..Symbols::at(version, 0, 0, 0, 0)
        }
    }

    /// The amount to add to link-time addresses, given where the binary's first mapping
    /// (file offset 0) starts.
    pub fn bias(&self, first_mapping: u64) -> u64 {
        self.load.bias(first_mapping)
    }
}

/// The symbols of the mimalloc in `bin`: its static variables are local symbols, found
/// only in a symbol table (`.symtab`) a stripped binary lacks.
pub fn of<B: Binary + ?Sized>(bin: &B) -> Result<Symbols, Unmeasured> {
    let fault = |f: Fault| match f {
        Fault::Stripped => Unmeasured::Stripped,
        Fault::TooLarge => Unmeasured::Budget,
        Fault::Malformed => Unmeasured::UnknownLayout,
    };
    let elf = Elf::parse(bin).map_err(fault)?;
    if !elf.has_symtab() {
        return Err(Unmeasured::Stripped);
    }
    // mimalloc 2's statics, or mimalloc 3's one: each looked for, absent as 0.
    let names: [&[u8]; 7] = [
        b"mi_version",
        b"mi_arenas",
        b"mi_arena_count",
        b"mi_segment_map",
        b"_mi_heap_main",
        b"subproc_main",
        b"_mi_stats_main",
    ];
    let mut at = [0u64; 7];
    // By name or by the tail of a longer one: a linker that merges strings keeps
    // `subproc_main` only as the tail of `_mi_subproc_main` (a shared library's).
    for (slot, name) in at.iter_mut().zip(names) {
        *slot = elf.find_named(bin, name).map_err(fault)?.unwrap_or(0);
    }
    let [version, arenas, arena_count, segment_map, heap_main, subproc, stats] = at;
    let v2 = arenas != 0 && arena_count != 0 && segment_map != 0 && heap_main != 0;
    if version == 0 || (!v2 && subproc == 0) {
        return Err(Unmeasured::UnknownVersion);
    }
    Ok(Symbols {
        version,
        arenas,
        arena_count,
        segment_map,
        heap_main,
        subproc,
        stats,
        load: elf.load(),
    })
}

/// mimalloc 3's places, in bytes from the start of each structure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct V3 {
    /// `mi_subproc_t`: `arena_count` and the array `arenas` (of `max_arenas` pointers).
    pub arena_count: u64,
    pub arenas: u64,
    pub max_arenas: u64,
    /// `mi_arena_t` (whose memory it heads): `slice_count`, `info_slices`, the pointers to
    /// its bitmap of slices to purge, to its pages' metadata (`pages_meta`, one `mi_page_t`
    /// a slice; null where a page's lies at its start) and to its bitmap of page starts
    /// (`pages_main.pages`).
    pub slice_count: u64,
    pub info_slices: u64,
    pub slices_purge: u64,
    pub pages_meta: u64,
    pub pages: u64,
    /// `mi_page_t`: `used`, `block_size`, and its `memid` (the arena, the slice index and
    /// count as two `uint32_t`, then `memkind`); its size.
    pub page_used: u64,
    pub page_block_size: u64,
    pub page_memid: u64,
    pub page_bytes: u64,
    /// `mi_bitmap_t`: its `chunk_count`, and its chunks of 512 bits.
    pub bitmap_chunks: u64,
    /// `mi_subproc_t`: its statistics' `committed.current` (`stats.committed.current`).
    pub stats_committed: u64,
}

/// The mimalloc 3 versions read, as [`VERSIONS`] (3.3.2 gives 30302).
pub const V3_VERSIONS: [(&str, u32, V3); 1] = [(
    "3.3.2",
    30302,
    V3 {
        arena_count: 24,
        arenas: 32,
        max_arenas: 160,
        slice_count: 40,
        info_slices: 48,
        slices_purge: 128,
        pages_meta: 136,
        pages: 144,
        page_used: 16,
        page_block_size: 40,
        page_memid: 96,
        page_bytes: 120,
        bitmap_chunks: 128,
        stats_committed: 1552,
    },
)];

/// `MI_MEM_ARENA`: a page's memory is an arena's.
pub const MEM_ARENA: u32 = 7;

/// The version `mi_version()` returns, read from its code: `mov eax, imm32; ret`, after
/// an `endbr64` where the build has one.
pub fn version_of(code: &[u8; 10]) -> Option<u32> {
    let body = code.strip_prefix(&[0xf3, 0x0f, 0x1e, 0xfa]).unwrap_or(code);
    match body {
        [0xb8, a, b, c, d, 0xc3, ..] => Some(u32::from_le_bytes([*a, *b, *c, *d])),
        _ => None,
    }
}

/// The version's name and places, for the number `mi_version()` returns.
pub fn offsets(number: u32) -> Option<(&'static str, Offsets)> {
    VERSIONS
        .iter()
        .find(|v| v.1 == number)
        .map(|&(name, _, o)| (name, o))
}
