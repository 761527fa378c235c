//! Crafted Go executables and processes for tests and the fuzzer: an ELF file with the
//! runtime's symbols and a DWARF that describes its structures the way Go's linker does
//! (structures, members, pointers, arrays, base types), and a process whose page allocator
//! and page caches hold a known free heap. Not used by the exporter itself.

use super::super::image::Image;
use super::read::CHUNK_PAGES;
use super::{Layout, GO_PAGE};

/// A section to put in a crafted ELF file: its name, type, flags, bytes, the size its
/// header claims (its bytes' length unless said) and its link.
pub struct Part {
    pub name: &'static str,
    pub kind: u32,
    pub flags: u64,
    pub bytes: Vec<u8>,
    pub claimed: Option<u64>,
    pub link: u32,
}

pub fn part(name: &'static str, kind: u32, bytes: Vec<u8>) -> Part {
    Part {
        name,
        kind,
        flags: 0,
        bytes,
        claimed: None,
        link: 0,
    }
}

/// A 64-bit little-endian executable with one loadable segment at 0x400000 and `parts`
/// (a null section and the names' table come first: `parts[i]` is section `i + 2`).
pub fn elf(parts: Vec<Part>) -> Vec<u8> {
    let mut names = vec![0u8];
    let mut name_at = vec![0u32];
    for p in [".shstrtab"].iter().chain(parts.iter().map(|p| &p.name)) {
        name_at.push(names.len() as u32);
        names.extend_from_slice(p.as_bytes());
        names.push(0);
    }
    let mut out = vec![0u8; 64 + 56];
    let mut headers = vec![[0u8; 64]];
    let mut add = |out: &mut Vec<u8>, name: u32, p: &Part| {
        let mut h = [0u8; 64];
        h[0..4].copy_from_slice(&name.to_le_bytes());
        h[4..8].copy_from_slice(&p.kind.to_le_bytes());
        h[8..16].copy_from_slice(&p.flags.to_le_bytes());
        h[0x18..0x20].copy_from_slice(&(out.len() as u64).to_le_bytes());
        let size = p.claimed.unwrap_or(p.bytes.len() as u64);
        h[0x20..0x28].copy_from_slice(&size.to_le_bytes());
        h[0x28..0x2c].copy_from_slice(&p.link.to_le_bytes());
        out.extend_from_slice(&p.bytes);
        headers.push(h);
    };
    add(&mut out, name_at[1], &part(".shstrtab", 3, names.clone()));
    for (i, p) in parts.iter().enumerate() {
        add(&mut out, name_at[i + 2], p);
    }
    let shoff = out.len() as u64;
    for h in &headers {
        out.extend_from_slice(h);
    }
    out[..4].copy_from_slice(b"\x7fELF");
    out[4] = 2;
    out[5] = 1;
    out[6] = 1;
    out[0x10..0x12].copy_from_slice(&2u16.to_le_bytes());
    out[0x20..0x28].copy_from_slice(&64u64.to_le_bytes());
    out[0x28..0x30].copy_from_slice(&shoff.to_le_bytes());
    out[0x36..0x38].copy_from_slice(&56u16.to_le_bytes());
    out[0x38..0x3a].copy_from_slice(&1u16.to_le_bytes());
    out[0x3a..0x3c].copy_from_slice(&64u16.to_le_bytes());
    out[0x3c..0x3e].copy_from_slice(&(headers.len() as u16).to_le_bytes());
    out[0x3e..0x40].copy_from_slice(&1u16.to_le_bytes());
    out[64..68].copy_from_slice(&1u32.to_le_bytes());
    out[64 + 0x10..64 + 0x18].copy_from_slice(&0x40_0000u64.to_le_bytes());
    out
}

/// A symbol table and its strings (two parts: the table links to the section after it,
/// so put them at `parts[i]`, `parts[i + 1]` with `link` set by [`elf_with`]).
pub fn symbols(symbols: &[(&str, u64)]) -> [Part; 2] {
    let mut strings = vec![0u8];
    let mut table = vec![0u8; 24];
    for (name, addr) in symbols {
        let mut s = [0u8; 24];
        s[0..4].copy_from_slice(&(strings.len() as u32).to_le_bytes());
        // Defined in section 1 (a symbol of section 0 is one the file imports).
        s[6..8].copy_from_slice(&1u16.to_le_bytes());
        s[8..16].copy_from_slice(&addr.to_le_bytes());
        table.extend_from_slice(&s);
        strings.extend_from_slice(name.as_bytes());
        strings.push(0);
    }
    [part(".symtab", 2, table), part(".strtab", 3, strings)]
}

/// The runtime's three variables, at addresses of the crafted process below.
pub(crate) const RUNTIME: [(&str, u64); 3] = [
    ("runtime.gcController", G),
    ("runtime.mheap_", H),
    ("runtime.allp", ALLP),
];

/// An executable with the symbol table first (sections 2 and 3) and then `more`.
pub(crate) fn elf_with(syms: &[(&str, u64)], more: Vec<Part>) -> Vec<u8> {
    let [mut table, strings] = symbols(syms);
    table.link = 3;
    let mut parts = vec![table, strings];
    parts.extend(more);
    elf(parts)
}

/// A DWARF type as the writer below lays it out; references are indexes in the list.
enum Die {
    Struct(&'static str, u64, Vec<(&'static str, u64, usize)>),
    Base(&'static str, u64),
    Pointer(usize),
    Array(usize, u64),
}

fn uleb(out: &mut Vec<u8>, mut v: u64) {
    loop {
        let b = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out.push(b);
            return;
        }
        out.push(b | 0x80);
    }
}

/// The runtime's structures as [`layout`] has them, in the order they are written.
fn types() -> Vec<Die> {
    use Die::*;
    let u64_ = 0;
    vec![
        Base("uint64", 8),                               // 0
        Base("uintptr", 8),                              // 1
        Struct("runtime.offAddr", 8, vec![("a", 0, 1)]), // 2
        Struct(
            "runtime.addrRange",
            16,
            vec![("base", 0, 2), ("limit", 8, 2)],
        ), // 3
        Struct(
            "runtime.pallocData",
            128,
            vec![("pallocBits", 0, 0), ("scavenged", 64, 0)],
        ), // 4
        Array(4, 8192),                                  // 5: [L2]pallocData
        Pointer(5),                                      // 6
        Array(6, 8192),                                  // 7: [L1]*[L2]pallocData
        Struct("runtime.addrRanges", 24, vec![("ranges", 0, 0)]), // 8
        Struct(
            "runtime.pageAlloc",
            0x10100,
            vec![("chunks", 0, 7), ("inUse", 0x10000, 8)],
        ), // 9
        Struct("runtime.mheap", 0x10200, vec![("pages", 0, 9)]), // 10
        Struct(
            "runtime.gcControllerState",
            64,
            vec![
                ("heapInUse", 0, u64_),
                ("heapFree", 8, u64_),
                ("heapReleased", 16, u64_),
                ("totalAlloc", 24, u64_),
                ("totalFree", 32, u64_),
                ("gcPercentHeapGoal", 40, u64_),
                ("memoryLimit", 48, u64_),
            ],
        ), // 11
        Struct(
            "runtime.pageCache",
            24,
            vec![("base", 0, 1), ("cache", 8, 0), ("scav", 16, 0)],
        ), // 12
        Struct("runtime.p", 0x100, vec![("pcache", 0, 12)]), // 13
    ]
}

/// `.debug_abbrev` and `.debug_info` (DWARF 4, one unit) describing the structures of
/// [`layout`]: what Go's linker writes for them, less everything this reader skips.
pub(crate) fn dwarf() -> (Vec<u8>, Vec<u8>) {
    use Die::*;
    let dies = types();
    // Abbreviations: 1 unit, 2 structure, 3 member, 4 base, 5 pointer, 6 array, 7 subrange.
    let abbrev: Vec<u8> = vec![
        1, 0x11, 1, 0, 0, //
        2, 0x13, 1, 0x03, 0x08, 0x0b, 0x0f, 0, 0, //
        3, 0x0d, 0, 0x03, 0x08, 0x38, 0x0f, 0x49, 0x13, 0, 0, //
        4, 0x24, 0, 0x03, 0x08, 0x0b, 0x0f, 0, 0, //
        5, 0x0f, 0, 0x49, 0x13, 0x0b, 0x0f, 0, 0, //
        6, 0x01, 1, 0x49, 0x13, 0, 0, //
        7, 0x21, 0, 0x37, 0x0f, 0, 0, //
        0,
    ];
    let mut info = vec![0u8; 11];
    info[4..6].copy_from_slice(&4u16.to_le_bytes());
    info[10] = 8;
    info.push(1);
    let (mut at, mut fixups) = (Vec::new(), Vec::new());
    let string = |out: &mut Vec<u8>, s: &str| {
        out.extend_from_slice(s.as_bytes());
        out.push(0);
    };
    for d in &dies {
        at.push(info.len() as u32);
        match d {
            Struct(name, size, members) => {
                info.push(2);
                string(&mut info, name);
                uleb(&mut info, *size);
                for (m, off, ty) in members {
                    info.push(3);
                    string(&mut info, m);
                    uleb(&mut info, *off);
                    fixups.push((info.len(), *ty));
                    info.extend_from_slice(&[0; 4]);
                }
                info.push(0);
            }
            Base(name, size) => {
                info.push(4);
                string(&mut info, name);
                uleb(&mut info, *size);
            }
            Pointer(ty) => {
                info.push(5);
                fixups.push((info.len(), *ty));
                info.extend_from_slice(&[0; 4]);
                uleb(&mut info, 8);
            }
            Array(ty, count) => {
                info.push(6);
                fixups.push((info.len(), *ty));
                info.extend_from_slice(&[0; 4]);
                info.push(7);
                uleb(&mut info, *count);
                info.push(0);
            }
        }
    }
    info.push(0);
    for (pos, ty) in fixups {
        info[pos..pos + 4].copy_from_slice(&at[ty].to_le_bytes());
    }
    let len = (info.len() - 4) as u32;
    info[..4].copy_from_slice(&len.to_le_bytes());
    (abbrev, info)
}

/// A DWARF unit of `n` one-byte type entries (a base type with no attributes), and its
/// abbreviation table: a few KiB compressed, about 300 MiB as types were all kept.
pub fn tiny_types(n: usize) -> (Vec<u8>, Vec<u8>) {
    let abbrev = vec![1, 0x11, 1, 0, 0, 2, 0x24, 0, 0, 0, 0];
    let mut info = vec![0u8; 11];
    info[4..6].copy_from_slice(&4u16.to_le_bytes());
    info[10] = 8;
    info.push(1);
    info.resize(info.len() + n, 2);
    info.push(0);
    let len = u32::try_from(info.len() - 4).unwrap_or(u32::MAX);
    info[..4].copy_from_slice(&len.to_le_bytes());
    (abbrev, info)
}

/// A Go executable in miniature: the runtime's symbols and the DWARF of [`dwarf`], from
/// which [`super::layout`] reads [`layout`].
pub fn go_binary() -> Vec<u8> {
    let (abbrev, info) = dwarf();
    elf_with(
        &RUNTIME,
        vec![
            part(".debug_abbrev", 1, abbrev),
            part(".debug_info", 1, info),
        ],
    )
}

pub const G: u64 = 0x10_0000;
pub const H: u64 = 0x20_0000;
const PALLOC: u64 = 0x40_0000;
const RANGES: u64 = 0x50_0000;
pub(crate) const ALLP: u64 = 0x60_0000;
const PS: u64 = 0x70_0000;
/// The crafted heap's one 4 MiB chunk.
pub(crate) const CHUNK: u64 = 0xc0_0000_0000;
/// Go's own on 64-bit platforms: 2^13 L1 entries of 2^13 chunks each.
const L2_ENTRIES: u64 = 1 << 13;

/// The layout [`go_binary`]'s DWARF describes, where the process below keeps its figures.
pub fn layout() -> Layout {
    Layout {
        gc_controller: G,
        mheap: H,
        first_vaddr: 0x40_0000,
        heap_in_use: 0,
        heap_free: 8,
        heap_released: 16,
        total_alloc: 24,
        total_free: 32,
        gc_percent_heap_goal: 40,
        memory_limit: 48,
        chunks: 0,
        l1_entries: 1 << 13,
        l2_entries: L2_ENTRIES,
        in_use_ranges: 0x10000,
        range_bytes: 16,
        range_base: 0,
        range_limit: 8,
        palloc_bytes: 128,
        palloc_alloc: 0,
        palloc_scavenged: 64,
        allp: ALLP,
        pcache: 0,
        pcache_base: 0,
        pcache_free: 8,
        pcache_scav: 16,
        pie: false,
    }
}

/// How the Ps' page caches of [`process`] lie.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Caches {
    /// Each P caches 3 pages of a block of its own.
    Apart,
    /// Each P caches 3 other pages of one block (Ps take a block's free pages of their
    /// moment, so two may hold parts of one block).
    OneBlock,
    /// `allp` names the same P each time.
    SameP,
    /// Each P caches the same 3 pages of one block.
    SamePages,
}

/// A Go process of [`layout`]: a heap of one chunk whose first 10 pages are free,
/// `ranges` copies of its range, and `ps` Ps each caching 3 free pages as `caches` says;
/// `heapFree` says what the structures add up to, as a program that wants them counted
/// would write it.
pub fn process(ranges: u64, ps: u64, caches: Caches) -> Image {
    let mut m = Image::default();
    for base in [G, PALLOC, RANGES, ALLP, PS] {
        m.map(base, 0x1000);
    }
    m.map(H, 0x11000);
    let index = CHUNK.wrapping_sub(super::read::ARENA_BASE_OFFSET) / (CHUNK_PAGES * GO_PAGE);
    let (i1, i2) = (index / L2_ENTRIES, index % L2_ENTRIES);
    m.put(H + i1 * 8, PALLOC.wrapping_sub(i2 * 128));
    // Allocated bitmap: every page but the first 10; nothing scavenged.
    m.put(PALLOC, !0x3ff);
    for w in 1..8 {
        m.put(PALLOC + w * 8, !0);
    }
    m.put(H + 0x10000, RANGES);
    m.put(H + 0x10008, ranges);
    for r in 0..ranges {
        m.put(RANGES + r * 16, CHUNK);
        m.put(RANGES + r * 16 + 8, CHUNK + CHUNK_PAGES * GO_PAGE);
    }
    m.put(ALLP, PS);
    m.put(ALLP + 8, ps);
    for p in 0..ps {
        let at = PS + 0x100 * if caches == Caches::SameP { 1 } else { p + 1 };
        m.put(PS + p * 8, at);
        let (block, pages) = match caches {
            Caches::Apart | Caches::SameP => (p + 1, 0b111),
            Caches::OneBlock => (1, 0b111 << (3 * p)),
            Caches::SamePages => (1, 0b111),
        };
        m.put(at, CHUNK + 64 * block * GO_PAGE);
        m.put(at + 8, pages);
    }
    m.put(G + 8, (10 * ranges + 3 * ps) * GO_PAGE);
    m
}
