//! A Go program's heap, read from outside: the runtime's own account of it
//! (`runtime.gcController`: heap in use, free, released, the GC goal, `GOMEMLIMIT`), and
//! which of its free pages are resident (the page allocator's bitmaps in
//! `runtime.mheap_.pages`, then `pagemap`). Where the runtime keeps them comes from the
//! binary itself: the variables by name in its symbol table, their fields' offsets from its
//! DWARF, never from a table of offsets per Go version (fields move between versions).
//!
//! [`layout`] is pure over the executable's bytes (once per binary); [`read`] is pure over
//! a [`Target`] (once per deep read). A stripped binary (`-ldflags=-s -w`), a layout that
//! lacks a field, or figures that do not hold still give a reason and no figure.

use std::collections::HashMap;

use super::walk::{Fault, Target};

/// Why a Go heap has no figure: the `outcome` label of `membloat_go_reads_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Unmeasured {
    /// No symbol table (`-ldflags=-s`), or no `runtime.gcController` in it.
    Stripped,
    /// No DWARF (`-ldflags=-w`): the fields' places are unknown.
    NoDwarf,
    /// The DWARF lacks a type or field this reader needs: a Go version it does not know.
    UnknownLayout,
    /// The process's memory could not be read (no ptrace access, process gone).
    Unreadable,
    /// The figures moved under two reads, or disagree with the page allocator's bitmaps.
    Moving,
}

impl Unmeasured {
    pub const ALL: [Unmeasured; 5] = [
        Unmeasured::Stripped,
        Unmeasured::NoDwarf,
        Unmeasured::UnknownLayout,
        Unmeasured::Unreadable,
        Unmeasured::Moving,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Unmeasured::Stripped => "stripped",
            Unmeasured::NoDwarf => "no_dwarf",
            Unmeasured::UnknownLayout => "unknown_layout",
            Unmeasured::Unreadable => "unreadable",
            Unmeasured::Moving => "moving",
        }
    }
}

/// Go heap reads by how they ended: `measured`, or each [`Unmeasured`] reason.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReadCounts([u64; 1 + Unmeasured::ALL.len()]);

impl ReadCounts {
    /// The `outcome` labels, in the order of [`ReadCounts::values`].
    pub const OUTCOMES: [&'static str; 1 + Unmeasured::ALL.len()] = [
        "measured",
        "stripped",
        "no_dwarf",
        "unknown_layout",
        "unreadable",
        "moving",
    ];

    pub fn count<T>(&mut self, read: &Result<T, Unmeasured>) {
        let i = match read {
            Ok(_) => 0,
            Err(e) => 1 + Unmeasured::ALL.iter().position(|u| u == e).unwrap_or(0),
        };
        self.0[i] += 1;
    }

    /// Each outcome's count, in the order of [`ReadCounts::OUTCOMES`].
    pub fn values(&self) -> [u64; 1 + Unmeasured::ALL.len()] {
        self.0
    }

    /// These counts plus `other`'s (running totals across scans).
    pub fn plus(mut self, other: &ReadCounts) -> ReadCounts {
        for (sum, n) in self.0.iter_mut().zip(other.0) {
            *sum = sum.saturating_add(n);
        }
        self
    }
}

/// The runtime's figures, as `runtime/metrics` names them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GoHeap {
    /// Bytes in spans in use (`/memory/classes/heap/objects` plus `.../unused`).
    pub in_use_bytes: u64,
    /// Free and not released to the OS (`/memory/classes/heap/free:bytes`): what the
    /// runtime keeps for later allocations.
    pub free_bytes: u64,
    /// Of the free bytes, those in resident pages: the process's measured hoarding.
    pub free_resident_bytes: u64,
    /// Released to the OS (`/memory/classes/heap/released:bytes`).
    pub released_bytes: u64,
    /// Heap objects allocated and not freed, as the GC last swept them.
    pub objects_bytes: u64,
    /// The GC's goal as `GOGC` sets it (`/gc/heap/goal:bytes` unless `GOMEMLIMIT` binds).
    pub gc_percent_goal_bytes: u64,
    /// `GOMEMLIMIT` (`/gc/gomemlimit:bytes`; `math.MaxInt64` when unset).
    pub memory_limit_bytes: u64,
}

impl GoHeap {
    /// `GOMEMLIMIT`, when one is set (the runtime keeps `math.MaxInt64` for none).
    pub fn memory_limit(&self) -> Option<u64> {
        (self.memory_limit_bytes < i64::MAX as u64).then_some(self.memory_limit_bytes)
    }
}

/// Where the runtime keeps what [`read`] needs, in one binary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    /// Link-time addresses of `runtime.gcController` and `runtime.mheap_`.
    gc_controller: u64,
    mheap: u64,
    /// The lowest address a loadable segment asks for: a PIE's load bias is where the
    /// kernel put it less this.
    first_vaddr: u64,
    /// Offsets in `runtime.gcControllerState`, each of an 8-byte value.
    heap_in_use: u64,
    heap_free: u64,
    heap_released: u64,
    total_alloc: u64,
    total_free: u64,
    gc_percent_heap_goal: u64,
    memory_limit: u64,
    /// `runtime.mheap.pages` + `pageAlloc.chunks`: the L1 array of pointers to L2 arrays
    /// of `pallocData`.
    chunks: u64,
    l1_entries: u64,
    l2_entries: u64,
    /// `runtime.mheap.pages` + `pageAlloc.inUse` + `addrRanges.ranges`: a slice of
    /// `addrRange`, each `base` and `limit` addresses.
    in_use_ranges: u64,
    range_bytes: u64,
    range_base: u64,
    range_limit: u64,
    /// `runtime.pallocData`: its size, and where its allocated and scavenged bitmaps are.
    palloc_bytes: u64,
    palloc_alloc: u64,
    palloc_scavenged: u64,
    /// Link-time address of `runtime.allp` (a slice of `*p`), and where a P keeps its page
    /// cache (`p.pcache`): up to 64 free pages taken from the bitmaps, which mark them
    /// allocated while the runtime still counts them free.
    allp: u64,
    pcache: u64,
    pcache_base: u64,
    pcache_free: u64,
    pcache_scav: u64,
    /// A position-independent executable, loaded wherever the kernel put it.
    pie: bool,
}

impl Layout {
    /// Where the kernel loaded a binary of this layout, given the start of its first
    /// mapping (file offset 0): the amount to add to its link-time addresses.
    pub fn bias(&self, first_mapping: u64) -> u64 {
        if self.pie {
            first_mapping.wrapping_sub(self.first_vaddr & !0xfff)
        } else {
            0
        }
    }
}

/// The runtime's page: 8 KiB on every 64-bit platform Go supports.
pub const GO_PAGE: u64 = 8192;
/// Pages of one page-allocator chunk (4 MiB).
const CHUNK_PAGES: u64 = 512;
/// Go's `arenaBaseOffset` for the exporter's own architecture (the processes it reads are
/// of it): on amd64 addresses are offset so that the heap's index starts at the bottom of
/// the 48-bit range; 0 elsewhere on Linux (arm64 among them).
#[cfg(target_arch = "x86_64")]
const ARENA_BASE_OFFSET: u64 = 0xffff_8000_0000_0000;
#[cfg(not(target_arch = "x86_64"))]
const ARENA_BASE_OFFSET: u64 = 0;
/// A DWARF section larger than this (inflated) is not read: a Go binary's `.debug_info` is
/// a few MiB, a kubelet's tens.
const MAX_SECTION_BYTES: usize = 256 << 20;
/// Ranges of the heap followed at most (a heap has a handful).
const MAX_RANGES: u64 = 4096;
/// Chunks of 4 MiB followed at most: 1 TiB of heap.
const MAX_CHUNKS: u64 = 1 << 18;

/// A DWARF type as far as this reader needs it.
#[derive(Debug, Clone, Default)]
struct Type {
    name: String,
    size: Option<u64>,
    /// Members: name, offset, type.
    members: Vec<(String, u64, Option<usize>)>,
    /// An array's element count, a pointer's or array's element type.
    count: Option<u64>,
    element: Option<usize>,
}

/// The executable as the ELF file says: its symbols' addresses and DWARF types. `elf` is
/// its bytes, or a cache that reads the parts asked for (`object::ReadCache`).
pub fn layout<'a, R: object::ReadRef<'a>>(elf: R) -> Result<Layout, Unmeasured> {
    use object::{Object, ObjectSegment, ObjectSymbol};
    let file = object::File::parse(elf).map_err(|_| Unmeasured::UnknownLayout)?;
    let symbol = |name: &str| {
        file.symbols()
            .find(|s| s.name() == Ok(name))
            .map(|s| s.address())
    };
    let (Some(gc_controller), Some(mheap), Some(allp)) = (
        symbol("runtime.gcController"),
        symbol("runtime.mheap_"),
        symbol("runtime.allp"),
    ) else {
        return Err(Unmeasured::Stripped);
    };
    let pie = file.kind() == object::ObjectKind::Dynamic;
    let first_vaddr = file
        .segments()
        .map(|s| s.address())
        .min()
        .ok_or(Unmeasured::UnknownLayout)?;
    let mut sections: HashMap<&'static str, Vec<u8>> = HashMap::new();
    for name in [
        ".debug_info",
        ".debug_abbrev",
        ".debug_str",
        ".debug_line",
        ".debug_line_str",
        ".debug_str_offsets",
        ".debug_addr",
        ".debug_ranges",
        ".debug_rnglists",
        ".debug_loc",
        ".debug_loclists",
    ] {
        let Some(section) = file.section_by_name(name) else {
            continue;
        };
        let data = uncompressed(&section).ok_or(Unmeasured::UnknownLayout)?;
        sections.insert(name, data);
    }
    if !sections.contains_key(".debug_info") {
        return Err(Unmeasured::NoDwarf);
    }
    let types = dwarf_types(&sections).ok_or(Unmeasured::UnknownLayout)?;
    let symbols = Symbols {
        gc_controller,
        mheap,
        allp,
        first_vaddr,
        pie,
    };
    from_types(&types, &symbols).ok_or(Unmeasured::UnknownLayout)
}

/// A section's bytes, inflated when the linker compressed it (Go does, with zlib).
fn uncompressed<'a, R: object::ReadRef<'a>>(
    section: &object::Section<'a, '_, R>,
) -> Option<Vec<u8>> {
    use object::ObjectSection;
    use std::io::Read;
    let c = section.compressed_data().ok()?;
    match c.format {
        object::CompressionFormat::None if c.data.len() > MAX_SECTION_BYTES => None,
        object::CompressionFormat::None => Some(c.data.to_vec()),
        object::CompressionFormat::Zlib => {
            let size = usize::try_from(c.uncompressed_size).ok()?;
            if size > MAX_SECTION_BYTES {
                return None;
            }
            // What the header claims is not trusted for the allocation: the data decides.
            let mut out = Vec::with_capacity(size.min(1 << 24));
            flate2::read::ZlibDecoder::new(c.data)
                .take(size as u64)
                .read_to_end(&mut out)
                .ok()?;
            (out.len() == size).then_some(out)
        }
        _ => None,
    }
}

/// Every structure, array, pointer and base type of the DWARF, by its offset in
/// `.debug_info`, with the names of those this reader looks up.
fn dwarf_types(sections: &HashMap<&'static str, Vec<u8>>) -> Option<Types> {
    use gimli::{AttributeValue, DwAt, EndianSlice, LittleEndian, SectionId};
    let load = |id: SectionId| -> Result<EndianSlice<'_, LittleEndian>, gimli::Error> {
        let data = sections.get(id.name()).map(Vec::as_slice).unwrap_or(&[]);
        Ok(EndianSlice::new(data, LittleEndian))
    };
    let dwarf = gimli::Dwarf::load(load).ok()?;
    let mut t = Types::default();
    let mut units = dwarf.units();
    while let Ok(Some(header)) = units.next() {
        let unit = dwarf.unit(header).ok()?;
        let mut entries = unit.entries();
        // The type whose members follow, by depth.
        let mut parent: Vec<(isize, usize)> = Vec::new();
        let mut depth = 0isize;
        while let Ok(Some((delta, entry))) = entries.next_dfs() {
            depth += delta;
            while parent.last().is_some_and(|&(d, _)| d >= depth) {
                parent.pop();
            }
            let Some(global) = entry.offset().to_debug_info_offset(&unit.header) else {
                continue;
            };
            let attr = |at: DwAt| entry.attr_value(at).ok().flatten();
            let name = attr(gimli::DW_AT_name)
                .and_then(|v| dwarf.attr_string(&unit, v).ok())
                .map(|s| String::from_utf8_lossy(s.slice()).into_owned());
            let type_ref = attr(gimli::DW_AT_type).and_then(|v| match v {
                AttributeValue::UnitRef(o) => o.to_debug_info_offset(&unit.header),
                AttributeValue::DebugInfoRef(o) => Some(o),
                _ => None,
            });
            let type_ref = type_ref.map(|o| t.index(o.0));
            let size = attr(gimli::DW_AT_byte_size).and_then(|v| v.udata_value());
            match entry.tag() {
                gimli::DW_TAG_structure_type
                | gimli::DW_TAG_base_type
                | gimli::DW_TAG_typedef
                | gimli::DW_TAG_pointer_type
                | gimli::DW_TAG_array_type => {
                    let i = t.index(global.0);
                    let ty = &mut t.types[i];
                    ty.name = name.clone().unwrap_or_default();
                    ty.size = size;
                    ty.element = type_ref;
                    if let Some(n) = name {
                        if entry.tag() == gimli::DW_TAG_structure_type {
                            t.by_name.entry(n).or_insert(i);
                        }
                    }
                    if entry.has_children() {
                        parent.push((depth, i));
                    }
                }
                gimli::DW_TAG_member => {
                    if let (Some(&(_, p)), Some(n)) = (parent.last(), name) {
                        let offset = attr(gimli::DW_AT_data_member_location)
                            .and_then(|v| v.udata_value())
                            .unwrap_or(0);
                        t.types[p].members.push((n, offset, type_ref));
                    }
                }
                gimli::DW_TAG_subrange_type => {
                    if let Some(&(_, p)) = parent.last() {
                        let count = attr(gimli::DW_AT_count)
                            .and_then(|v| v.udata_value())
                            .or_else(|| {
                                attr(gimli::DW_AT_upper_bound)
                                    .and_then(|v| v.udata_value())
                                    .map(|u| u + 1)
                            });
                        t.types[p].count = count;
                    }
                }
                _ => {}
            }
        }
    }
    Some(t)
}

/// The types of a DWARF, by their offset in `.debug_info`.
#[derive(Debug, Default)]
struct Types {
    types: Vec<Type>,
    at: HashMap<usize, usize>,
    by_name: HashMap<String, usize>,
}

impl Types {
    /// The slot of the type at `offset`, made when first referred to.
    fn index(&mut self, offset: usize) -> usize {
        if let Some(&i) = self.at.get(&offset) {
            return i;
        }
        self.types.push(Type::default());
        self.at.insert(offset, self.types.len() - 1);
        self.types.len() - 1
    }

    fn named(&self, name: &str) -> Option<&Type> {
        self.by_name.get(name).map(|&i| &self.types[i])
    }

    /// The type a typedef names, followed to the end.
    fn resolved(&self, mut i: usize) -> &Type {
        for _ in 0..16 {
            let ty = &self.types[i];
            match (ty.members.is_empty(), ty.count, ty.element) {
                (true, None, Some(e)) if ty.size.is_none() => i = e,
                _ => return ty,
            }
        }
        &self.types[i]
    }

    /// A member's offset and type.
    fn member<'a>(&'a self, ty: &'a Type, name: &str) -> Option<(u64, Option<usize>)> {
        ty.members
            .iter()
            .find(|(n, _, _)| n == name)
            .map(|&(_, off, t)| (off, t))
    }

    /// The offset of an 8-byte value at `path` in `ty`: through nested structures, and
    /// into an atomic wrapper (`atomic.Uint64` and kin keep it in a member of their own).
    fn value_at(&self, ty: &Type, path: &[&str]) -> Option<u64> {
        let mut offset = 0;
        let mut current = ty;
        for name in path {
            let (off, t) = self.member(current, name)?;
            offset += off;
            current = self.resolved(t?);
        }
        // An atomic wrapper: the value is its one 8-byte member.
        if !current.members.is_empty() {
            let (off, _) = ["value", "v"]
                .iter()
                .find_map(|n| self.member(current, n))?;
            offset += off;
        }
        Some(offset)
    }
}

/// What the symbol table and program headers say.
struct Symbols {
    gc_controller: u64,
    mheap: u64,
    allp: u64,
    first_vaddr: u64,
    pie: bool,
}

fn from_types(t: &Types, sym: &Symbols) -> Option<Layout> {
    let gc = t.named("runtime.gcControllerState")?;
    let heap = t.named("runtime.mheap")?;
    let (pages, pages_ty) = t.member(heap, "pages")?;
    let page_alloc = t.resolved(pages_ty?);
    let (chunks, chunks_ty) = t.member(page_alloc, "chunks")?;
    let l1 = t.resolved(chunks_ty?);
    // `*[N]pallocData`: a pointer DWARF may give a size or not.
    let pointee = t.resolved(l1.element?);
    let l2 = if pointee.count.is_some() {
        pointee
    } else {
        t.resolved(pointee.element?)
    };
    let palloc = t.resolved(l2.element?);
    let (in_use, in_use_ty) = t.member(page_alloc, "inUse")?;
    let (ranges, _) = t.member(t.resolved(in_use_ty?), "ranges")?;
    let range = t.named("runtime.addrRange")?;
    let (alloc_off, _) = t.member(palloc, "pallocBits")?;
    let (scav_off, _) = t.member(palloc, "scavenged")?;
    let (pcache, pcache_ty) = t.member(t.named("runtime.p")?, "pcache")?;
    let page_cache = t.resolved(pcache_ty?);
    // What the reads below allocate and divide by comes from the binary: bounded here, so
    // a damaged or hostile DWARF is an unknown layout, never a panic or a huge buffer.
    let sane = |v: u64, most: u64| (1..=most).contains(&v);
    if !(sane(l1.count?, 1 << 20)
        && sane(l2.count?, 1 << 20)
        && sane(palloc.size?, 4096)
        && sane(range.size?, 64))
    {
        return None;
    }
    Some(Layout {
        gc_controller: sym.gc_controller,
        mheap: sym.mheap,
        first_vaddr: sym.first_vaddr,
        allp: sym.allp,
        pcache,
        pcache_base: t.member(page_cache, "base")?.0,
        pcache_free: t.member(page_cache, "cache")?.0,
        pcache_scav: t.member(page_cache, "scav")?.0,
        pie: sym.pie,
        heap_in_use: t.value_at(gc, &["heapInUse"])?,
        heap_free: t.value_at(gc, &["heapFree"])?,
        heap_released: t.value_at(gc, &["heapReleased"])?,
        total_alloc: t.value_at(gc, &["totalAlloc"])?,
        total_free: t.value_at(gc, &["totalFree"])?,
        gc_percent_heap_goal: t.value_at(gc, &["gcPercentHeapGoal"])?,
        memory_limit: t.value_at(gc, &["memoryLimit"])?,
        chunks: pages + chunks,
        l1_entries: l1.count?,
        l2_entries: l2.count?,
        in_use_ranges: pages + in_use + ranges,
        range_bytes: range.size?,
        range_base: t.value_at(range, &["base", "a"])?,
        range_limit: t.value_at(range, &["limit", "a"])?,
        palloc_bytes: palloc.size?,
        palloc_alloc: alloc_off,
        palloc_scavenged: scav_off,
    })
}

fn word(b: &[u8], at: u64) -> u64 {
    let at = at as usize;
    b.get(at..at + 8)
        .and_then(|w| w.try_into().ok())
        .map_or(0, u64::from_le_bytes)
}

/// The runtime's figures of a process whose executable has `layout`, loaded at `bias`
/// (0 for a non-PIE binary): read twice around the page allocator's walk, which must agree
/// with them (its free, unscavenged pages are the runtime's `heapFree`). A target that
/// moves is read once more, then given up as [`Unmeasured::Moving`].
pub fn read<T: Target>(target: &mut T, layout: &Layout, bias: u64) -> Result<GoHeap, Unmeasured> {
    let fault = |f: Fault| match f {
        Fault::Unreadable => Unmeasured::Unreadable,
        _ => Unmeasured::Moving,
    };
    for _ in 0..2 {
        let before = figures(target, layout, bias).map_err(fault)?;
        let (free, resident) = free_pages(target, layout, bias).map_err(fault)?;
        let after = figures(target, layout, bias).map_err(fault)?;
        if before == after && free == before.free_bytes {
            return Ok(GoHeap {
                free_resident_bytes: resident,
                ..before
            });
        }
    }
    Err(Unmeasured::Moving)
}

/// `runtime.gcController`'s figures.
fn figures<T: Target>(target: &mut T, l: &Layout, bias: u64) -> Result<GoHeap, Fault> {
    let fields = [
        l.heap_in_use,
        l.heap_free,
        l.heap_released,
        l.total_alloc,
        l.total_free,
        l.gc_percent_heap_goal,
        l.memory_limit,
    ];
    let end = fields.iter().max().copied().unwrap_or(0) + 8;
    if end > 1 << 16 {
        return Err(Fault::NotFound);
    }
    let mut b = vec![0u8; end as usize];
    target.read(l.gc_controller.wrapping_add(bias), &mut b)?;
    Ok(GoHeap {
        in_use_bytes: word(&b, l.heap_in_use),
        free_bytes: word(&b, l.heap_free),
        free_resident_bytes: 0,
        released_bytes: word(&b, l.heap_released),
        objects_bytes: word(&b, l.total_alloc).wrapping_sub(word(&b, l.total_free)),
        gc_percent_goal_bytes: word(&b, l.gc_percent_heap_goal),
        memory_limit_bytes: word(&b, l.memory_limit),
    })
}

/// The heap's free pages the OS still backs (neither allocated nor scavenged), from the
/// page allocator's bitmaps, and how many of their bytes are resident.
fn free_pages<T: Target>(target: &mut T, l: &Layout, bias: u64) -> Result<(u64, u64), Fault> {
    let mut slice = [0u8; 16];
    target.read(
        l.mheap.wrapping_add(bias).wrapping_add(l.in_use_ranges),
        &mut slice,
    )?;
    let (array, len) = (word(&slice, 0), word(&slice, 8));
    if len > MAX_RANGES || l.range_bytes == 0 || l.range_bytes > 64 {
        return Err(Fault::Inconsistent);
    }
    let mut ranges = vec![0u8; (len * l.range_bytes) as usize];
    if len > 0 {
        target.read(array, &mut ranges)?;
    }
    let chunk_bytes = CHUNK_PAGES * GO_PAGE;
    let mut l1_cache: HashMap<u64, u64> = HashMap::new();
    let mut palloc = vec![0u8; l.palloc_bytes as usize];
    let (mut free, mut resident, mut chunks) = (0u64, 0u64, 0u64);
    for r in ranges.chunks_exact(l.range_bytes as usize) {
        let (base, limit) = (word(r, l.range_base), word(r, l.range_limit));
        if limit <= base || base % chunk_bytes != 0 || limit % chunk_bytes != 0 {
            return Err(Fault::Inconsistent);
        }
        let mut chunk = base;
        while chunk < limit {
            // The chunk's end, which the pages below stay within.
            let next = chunk.checked_add(chunk_bytes).ok_or(Fault::Inconsistent)?;
            chunks += 1;
            if chunks > MAX_CHUNKS {
                return Err(Fault::Budget);
            }
            let index = chunk.wrapping_sub(ARENA_BASE_OFFSET) / chunk_bytes;
            let (i1, i2) = (index / l.l2_entries, index % l.l2_entries);
            if i1 >= l.l1_entries {
                return Err(Fault::Inconsistent);
            }
            let l2 = match l1_cache.get(&i1) {
                Some(&p) => p,
                None => {
                    let mut p = [0u8; 8];
                    let at = l
                        .mheap
                        .wrapping_add(bias)
                        .wrapping_add(l.chunks)
                        .wrapping_add(i1 * 8);
                    target.read(at, &mut p)?;
                    let p = u64::from_le_bytes(p);
                    l1_cache.insert(i1, p);
                    p
                }
            };
            if l2 == 0 {
                return Err(Fault::Inconsistent);
            }
            target.read(l2.wrapping_add(i2 * l.palloc_bytes), &mut palloc)?;
            // A run of free, unscavenged pages at a time: one pagemap read each.
            let bit = |off: u64, page: u64| word(&palloc, off + page / 64 * 8) >> (page % 64) & 1;
            let mut page = 0;
            while page < CHUNK_PAGES {
                let backed_free =
                    |p: u64| bit(l.palloc_alloc, p) == 0 && bit(l.palloc_scavenged, p) == 0;
                if !backed_free(page) {
                    page += 1;
                    continue;
                }
                let start = page;
                while page < CHUNK_PAGES && backed_free(page) {
                    page += 1;
                }
                let (from, to) = (chunk + start * GO_PAGE, chunk + page * GO_PAGE);
                free += to - from;
                resident += target.resident_bytes(from, to)?;
            }
            chunk = next;
        }
    }
    let (cached, cached_resident) = cached_pages(target, l, bias)?;
    Ok((free + cached, resident + cached_resident))
}

/// The Ps' page caches: pages the bitmaps mark allocated that the runtime counts free
/// (up to 64 a P), and how many of their bytes are resident.
fn cached_pages<T: Target>(target: &mut T, l: &Layout, bias: u64) -> Result<(u64, u64), Fault> {
    let mut slice = [0u8; 16];
    let (mut free, mut resident) = (0u64, 0u64);
    target.read(l.allp.wrapping_add(bias), &mut slice)?;
    let (array, len) = (word(&slice, 0), word(&slice, 8));
    if len > 1 << 16 {
        return Err(Fault::Inconsistent);
    }
    let mut ps = vec![0u8; (len * 8) as usize];
    if len > 0 {
        target.read(array, &mut ps)?;
    }
    let mut cache = [0u8; 24];
    let end = [l.pcache_base, l.pcache_free, l.pcache_scav]
        .into_iter()
        .max()
        .unwrap_or(0)
        + 8;
    if end > cache.len() as u64 {
        return Err(Fault::NotFound);
    }
    for p in ps.chunks_exact(8) {
        let p = word(p, 0);
        if p == 0 {
            continue;
        }
        target.read(p.wrapping_add(l.pcache), &mut cache[..end as usize])?;
        let base = word(&cache, l.pcache_base);
        let backed_free = word(&cache, l.pcache_free) & !word(&cache, l.pcache_scav);
        for page in (0..64).filter(|i| backed_free >> i & 1 == 1) {
            let from = base
                .checked_add(page * GO_PAGE)
                .ok_or(Fault::Inconsistent)?;
            free += GO_PAGE;
            resident += target.resident_bytes(from, from.saturating_add(GO_PAGE))?;
        }
    }
    Ok((free, resident))
}
