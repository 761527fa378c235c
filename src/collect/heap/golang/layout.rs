//! A Go binary's [`Layout`]: its runtime variables' addresses from the symbol table, their
//! fields' offsets from the DWARF. Pure over the executable's bytes; run once per binary.

use std::collections::HashMap;

use super::{Layout, Unmeasured};

/// A DWARF section larger than this (inflated) is not read: a Go binary's `.debug_info` is
/// a few MiB, a kubelet's tens.
const MAX_SECTION_BYTES: usize = 256 << 20;

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
