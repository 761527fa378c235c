//! A Go binary's [`Layout`]: its runtime variables' addresses from the symbol table, their
//! fields' offsets from the DWARF. Pure over the executable's bytes; run once per binary.
//!
//! The binary is untrusted: `elf.rs` checks every size before it reads, the DWARF
//! sections types are read from are the only ones loaded (not the line tables, locations or
//! ranges, which are as large again), names are compared where they lie in those
//! sections, never copied, and all a layout holds is charged to one budget before it is
//! held: the sections' claimed sizes, summed before any is inflated, then each type and
//! member kept. One binary is learnt at a time, so the budget is the most any number of
//! reader threads hold for layouts together.

use std::collections::HashMap;
use std::sync::Mutex;

use super::{Layout, Unmeasured};
use crate::heap::elf::{Binary, Elf};

/// The DWARF sections a type's name, size and members may need.
const SECTIONS: [&str; 5] = [
    ".debug_info",
    ".debug_abbrev",
    ".debug_str",
    ".debug_str_offsets",
    ".debug_line_str",
];
/// What learning one binary's layout may hold at once: its DWARF sections and the types
/// and members kept. The go command (a 20 MB binary with its DWARF: 5.3 MB of it
/// inflated, 15,461 types) takes 9.6 MiB of it.
pub(crate) const MAX_LAYOUT_BYTES: u64 = 20 << 20;
/// Go's linker writes one abbreviation table of under 1 KiB; a parsed table is many
/// times the size of its bytes, so a larger one is refused before it is parsed.
const MAX_ABBREV_BYTES: u64 = 64 << 10;
/// What one type costs: its slot, with room for the vector's doubling, and its entries
/// in the two indexes.
const TYPE_BYTES: u64 = 2 * std::mem::size_of::<Type>() as u64 + 2 * 48;
/// What one kept member costs, with room for its vector's doubling.
const MEMBER_BYTES: u64 = 2 * std::mem::size_of::<(&[u8], u64, Option<usize>)>() as u64;
/// One binary's DWARF in memory at a time, whichever reader thread learns it.
static LEARNING: Mutex<()> = Mutex::new(());
/// Structures whose members are kept: the runtime's, and its atomic wrappers'.
const KEPT: [&[u8]; 4] = [
    b"runtime.",
    b"runtime/internal/",
    b"internal/runtime/",
    b"sync/atomic.",
];

/// A DWARF type as far as this reader needs it; names lie in the DWARF sections.
#[derive(Debug, Clone, Default)]
struct Type<'a> {
    name: &'a [u8],
    size: Option<u64>,
    /// Members: name, offset, type.
    members: Vec<(&'a [u8], u64, Option<usize>)>,
    /// An array's element count, a pointer's or array's element type.
    count: Option<u64>,
    element: Option<usize>,
}

/// The executable as its ELF file says: its symbols' addresses and DWARF types.
pub fn layout<B: Binary + ?Sized>(bin: &B) -> Result<Layout, Unmeasured> {
    let elf = Elf::parse(bin)?;
    let [gc_controller, mheap, allp] = elf.symbols(
        bin,
        ["runtime.gcController", "runtime.mheap_", "runtime.allp"],
    )?;
    let (Some(gc_controller), Some(mheap), Some(allp)) = (gc_controller, mheap, allp) else {
        return Err(Unmeasured::Stripped);
    };
    let _one = LEARNING.lock().unwrap_or_else(|e| e.into_inner());
    // Every section's claim is charged before any is inflated: a claim that does not fit
    // costs nothing.
    let mut left = MAX_LAYOUT_BYTES;
    let mut wanted = Vec::new();
    for name in SECTIONS {
        let Some(section) = elf.section(name) else {
            continue;
        };
        let claimed = elf.claimed(bin, section)?;
        if name == ".debug_abbrev" && claimed > MAX_ABBREV_BYTES {
            return Err(Unmeasured::Budget);
        }
        left = left.checked_sub(claimed).ok_or(Unmeasured::Budget)?;
        wanted.push((name, section));
    }
    let mut sections: HashMap<&'static str, Vec<u8>> = HashMap::new();
    for (name, section) in wanted {
        sections.insert(name, elf.data(bin, section)?);
    }
    if !sections.contains_key(".debug_info") {
        return Err(Unmeasured::NoDwarf);
    }
    let types = dwarf_types(&sections, left)?;
    let symbols = Symbols {
        gc_controller,
        mheap,
        allp,
        first_vaddr: elf.first_vaddr,
        pie: elf.pie,
    };
    from_types(&types, &symbols).ok_or(Unmeasured::UnknownLayout)
}

type Slice<'a> = gimli::EndianSlice<'a, gimli::LittleEndian>;

/// A name's bytes, wherever the DWARF keeps them (in the entry, `.debug_str`,
/// `.debug_line_str`, or through `.debug_str_offsets`), without copying them.
fn name_of<'a>(
    dwarf: &gimli::Dwarf<Slice<'a>>,
    header: &gimli::UnitHeader<Slice<'a>>,
    str_offsets_base: gimli::DebugStrOffsetsBase<usize>,
    v: gimli::AttributeValue<Slice<'a>>,
) -> Option<&'a [u8]> {
    use gimli::AttributeValue;
    let s = match v {
        AttributeValue::String(s) => s,
        AttributeValue::DebugStrRef(o) => dwarf.debug_str.get_str(o).ok()?,
        AttributeValue::DebugLineStrRef(o) => dwarf.debug_line_str.get_str(o).ok()?,
        AttributeValue::DebugStrOffsetsIndex(i) => {
            let o = dwarf
                .debug_str_offsets
                .get_str_offset(header.format(), str_offsets_base, i)
                .ok()?;
            dwarf.debug_str.get_str(o).ok()?
        }
        _ => return None,
    };
    Some(s.slice())
}

/// Every structure, array, pointer and base type of the DWARF, by its offset in
/// `.debug_info`, with the members of the runtime's structures, within `left` bytes.
fn dwarf_types<'a>(
    sections: &'a HashMap<&'static str, Vec<u8>>,
    left: u64,
) -> Result<Types<'a>, Unmeasured> {
    use gimli::{AttributeValue, DwAt, LittleEndian, SectionId};
    let bad = Unmeasured::UnknownLayout;
    let load = |id: SectionId| -> Result<Slice<'_>, gimli::Error> {
        let data = sections.get(id.name()).map(Vec::as_slice).unwrap_or(&[]);
        Ok(gimli::EndianSlice::new(data, LittleEndian))
    };
    let dwarf = gimli::Dwarf::load(load).map_err(|_| bad)?;
    let mut t = Types {
        left,
        ..Types::default()
    };
    let mut units = dwarf.units();
    while let Ok(Some(header)) = units.next() {
        let abbrevs = dwarf.abbreviations(&header).map_err(|_| bad)?;
        let mut entries = header.entries(&abbrevs);
        // The unit's own entry says where its strings' offsets start (DWARF 5).
        let mut str_offsets_base = gimli::DebugStrOffsetsBase(0);
        // The type whose members follow, by depth, and whether they are kept.
        let mut parent: Vec<(isize, usize, bool)> = Vec::new();
        let mut depth = 0isize;
        while let Ok(Some((delta, entry))) = entries.next_dfs() {
            depth += delta;
            while parent.last().is_some_and(|&(d, _, _)| d >= depth) {
                parent.pop();
            }
            let attr = |at: DwAt| entry.attr_value(at).ok().flatten();
            if entry.tag() == gimli::DW_TAG_compile_unit {
                if let Some(AttributeValue::DebugStrOffsetsBase(b)) =
                    attr(gimli::DW_AT_str_offsets_base)
                {
                    str_offsets_base = b;
                }
                continue;
            }
            let Some(global) = entry.offset().to_debug_info_offset(&header) else {
                continue;
            };
            let name =
                attr(gimli::DW_AT_name).and_then(|v| name_of(&dwarf, &header, str_offsets_base, v));
            let type_ref = attr(gimli::DW_AT_type).and_then(|v| match v {
                AttributeValue::UnitRef(o) => o.to_debug_info_offset(&header),
                AttributeValue::DebugInfoRef(o) => Some(o),
                _ => None,
            });
            let type_ref = match type_ref {
                Some(o) => Some(t.index(o.0)?),
                None => None,
            };
            let size = attr(gimli::DW_AT_byte_size).and_then(|v| v.udata_value());
            match entry.tag() {
                gimli::DW_TAG_structure_type
                | gimli::DW_TAG_base_type
                | gimli::DW_TAG_typedef
                | gimli::DW_TAG_pointer_type
                | gimli::DW_TAG_array_type => {
                    let i = t.index(global.0)?;
                    let is_struct = entry.tag() == gimli::DW_TAG_structure_type;
                    let name = name.unwrap_or_default();
                    let ty = &mut t.types[i];
                    ty.name = name;
                    ty.size = size;
                    ty.element = type_ref;
                    if is_struct && !name.is_empty() {
                        t.by_name.entry(name).or_insert(i);
                    }
                    if entry.has_children() {
                        let kept = !is_struct || KEPT.iter().any(|k| name.starts_with(k));
                        parent.push((depth, i, kept));
                    }
                }
                gimli::DW_TAG_member => {
                    if let (Some(&(_, p, true)), Some(n)) = (parent.last(), name) {
                        t.charge(MEMBER_BYTES)?;
                        let offset = attr(gimli::DW_AT_data_member_location)
                            .and_then(|v| v.udata_value())
                            .unwrap_or(0);
                        t.types[p].members.push((n, offset, type_ref));
                    }
                }
                gimli::DW_TAG_subrange_type => {
                    if let Some(&(_, p, _)) = parent.last() {
                        let count = attr(gimli::DW_AT_count)
                            .and_then(|v| v.udata_value())
                            .or_else(|| {
                                attr(gimli::DW_AT_upper_bound)
                                    .and_then(|v| v.udata_value())
                                    .map(|u| u.saturating_add(1))
                            });
                        t.types[p].count = count;
                    }
                }
                _ => {}
            }
        }
    }
    Ok(t)
}

/// The types of a DWARF, by their offset in `.debug_info`.
#[derive(Debug, Default)]
struct Types<'a> {
    types: Vec<Type<'a>>,
    at: HashMap<usize, usize>,
    by_name: HashMap<&'a [u8], usize>,
    /// What is left of the layout's budget.
    left: u64,
}

impl<'a> Types<'a> {
    /// Takes `bytes` from the budget; `Budget` when they are not left.
    fn charge(&mut self, bytes: u64) -> Result<(), Unmeasured> {
        self.left = self.left.checked_sub(bytes).ok_or(Unmeasured::Budget)?;
        Ok(())
    }

    /// The slot of the type at `offset`, made when first referred to and charged.
    fn index(&mut self, offset: usize) -> Result<usize, Unmeasured> {
        if let Some(&i) = self.at.get(&offset) {
            return Ok(i);
        }
        self.charge(TYPE_BYTES)?;
        self.types.push(Type::default());
        self.at.insert(offset, self.types.len() - 1);
        Ok(self.types.len() - 1)
    }

    fn named(&self, name: &str) -> Option<&Type<'a>> {
        self.by_name.get(name.as_bytes()).map(|&i| &self.types[i])
    }

    /// The type a typedef names, followed to the end.
    fn resolved(&self, mut i: usize) -> &Type<'a> {
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
    fn member(&self, ty: &Type<'a>, name: &str) -> Option<(u64, Option<usize>)> {
        ty.members
            .iter()
            .find(|(n, _, _)| *n == name.as_bytes())
            .map(|&(_, off, t)| (off, t))
    }

    /// The offset of an 8-byte value at `path` in `ty`: through nested structures, and
    /// into an atomic wrapper (`atomic.Uint64` and kin keep it in a member of their own).
    fn value_at(&self, ty: &Type<'a>, path: &[&str]) -> Option<u64> {
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
