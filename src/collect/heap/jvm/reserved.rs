//! Where a HotSpot JVM's Java heap lies, read from the running JVM the way HotSpot's
//! Serviceability Agent reads it, without attaching.
//!
//! `libjvm.so` exports in its dynamic symbol table `gHotSpotVMStructs`, a table of rows
//! (type name, field name, type string, static or not, offset, static address), and the
//! layout of a row (`gHotSpotVMStructEntry*Offset`, `gHotSpotVMStructEntryArrayStride`);
//! HotSpot fills these at start (they live in `.bss`), so they are read from the JVM's
//! memory, not its file. The symbols are found through the loaded library's own
//! `PT_DYNAMIC` and GNU hash table. The rows lead from the static `Universe::_collectedHeap`
//! to the heap object, and its `CollectedHeap::_reserved` region (`MemRegion`: `_start`,
//! `_word_size`): the range `jcmd PID GC.heap_info` prints. Every read is bounded and every
//! count capped; anything that does not fit gives no range, never a guessed one.

use std::collections::HashMap;

use super::super::reader::Target;
use crate::parse::smaps::{Library, Vma};

/// The Java heap's reserved address range: `[start, end)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reserved {
    pub start: u64,
    pub end: u64,
}

/// Rows read at most: JDK 17's table has about 2,700.
const MAX_ROWS: usize = 20_000;
/// Rows read at once.
const ROWS_AT_ONCE: usize = 512;
/// Bytes of a name read: every name looked for is shorter.
const NAME_BYTES: usize = 32;

use super::super::reader::{u16_at, u32_at, u64_at};

fn read_vec<T: Target>(t: &mut T, at: u64, len: usize) -> Option<Vec<u8>> {
    let mut b = vec![0u8; len];
    t.read(at, &mut b).ok()?;
    Some(b)
}

fn read_u64<T: Target>(t: &mut T, at: u64) -> Option<u64> {
    u64_at(&read_vec(t, at, 8)?, 0)
}

/// The System V ELF symbol hash (`DT_HASH`), which older builds carry alone.
pub fn sysv_hash(name: &[u8]) -> u32 {
    name.iter().fold(0u32, |h, &c| {
        let h = (h << 4).wrapping_add(c as u32);
        let g = h & 0xf000_0000;
        (h ^ (g >> 24)) & !g
    })
}

/// glibc's GNU symbol hash (`dl_new_hash`).
pub fn gnu_hash(name: &[u8]) -> u32 {
    name.iter()
        .fold(5381u32, |h, &c| h.wrapping_mul(33).wrapping_add(c as u32))
}

/// The loaded `libjvm.so`'s dynamic symbols, as its own dynamic section lays them out.
struct Symbols {
    base: u64,
    symtab: u64,
    strtab: u64,
    strsz: u64,
    hash: Hash,
}

/// How the symbols are found by name: the GNU hash table (`DT_GNU_HASH`, what current
/// toolchains emit), else the System V one (`DT_HASH`: JDK 11's builds carry only that).
enum Hash {
    Gnu {
        nbuckets: u32,
        symoffset: u32,
        buckets: Vec<u8>,
        chains: u64,
    },
    Sysv {
        nbuckets: u32,
        buckets: Vec<u8>,
        chains: u64,
    },
}

impl Symbols {
    fn of<T: Target>(t: &mut T, base: u64) -> Option<Symbols> {
        let eh = read_vec(t, base, 64)?;
        // ELF64, little-endian, a shared object.
        if &eh[..4] != b"\x7fELF" || eh[4] != 2 || eh[5] != 1 || eh[16] != 3 {
            return None;
        }
        let phoff = u64_at(&eh, 0x20)?;
        let phentsize = usize::from(u16_at(&eh, 0x36)?);
        let phnum = usize::from(u16_at(&eh, 0x38)?);
        if phentsize != 56 || phnum > 64 {
            return None;
        }
        let ph = read_vec(t, base.checked_add(phoff)?, phentsize * phnum)?;
        let dynamic = ph
            .chunks(56)
            .find(|p| u32_at(p, 0) == Some(2))
            .and_then(|p| Some((u64_at(p, 0x10)?, u64_at(p, 0x28)?)))?;
        let len = usize::try_from(dynamic.1).ok()?.min(64 << 10) / 16 * 16;
        let dyns = read_vec(t, base.checked_add(dynamic.0)?, len)?;
        let mut tags: HashMap<u64, u64> = HashMap::new();
        for d in dyns.chunks(16) {
            let (tag, val) = (u64_at(d, 0)?, u64_at(d, 8)?);
            if tag == 0 {
                break;
            }
            tags.entry(tag).or_insert(val);
        }
        // glibc's loader turns these into addresses in place; other loaders leave them
        // relative to the base.
        let addr = |tag| {
            let v = *tags.get(&tag)?;
            Some(if v < base { base.checked_add(v)? } else { v })
        };
        let (symtab, strtab) = (addr(6)?, addr(5)?);
        let strsz = *tags.get(&10)?;
        let hash = match (addr(0x6fff_fef5), addr(4)) {
            (Some(gnu), _) => {
                let head = read_vec(t, gnu, 16)?;
                let (nbuckets, symoffset, bloom) =
                    (u32_at(&head, 0)?, u32_at(&head, 4)?, u32_at(&head, 8)?);
                if nbuckets == 0 || nbuckets > 1 << 20 || bloom > 1 << 20 {
                    return None;
                }
                let buckets_at = gnu + 16 + u64::from(bloom) * 8;
                Hash::Gnu {
                    nbuckets,
                    symoffset,
                    buckets: read_vec(t, buckets_at, nbuckets as usize * 4)?,
                    chains: buckets_at + u64::from(nbuckets) * 4,
                }
            }
            (None, Some(sysv)) => {
                let head = read_vec(t, sysv, 8)?;
                let nbuckets = u32_at(&head, 0)?;
                if nbuckets == 0 || nbuckets > 1 << 20 {
                    return None;
                }
                Hash::Sysv {
                    nbuckets,
                    buckets: read_vec(t, sysv + 8, nbuckets as usize * 4)?,
                    chains: sysv + 8 + u64::from(nbuckets) * 4,
                }
            }
            (None, None) => return None,
        };
        Some(Symbols {
            base,
            symtab,
            strtab,
            strsz,
            hash,
        })
    }

    /// The address of symbol `i` when it is the defined symbol `name`.
    fn is<T: Target>(&self, t: &mut T, i: u32, name: &str) -> Option<u64> {
        let sym = read_vec(t, self.symtab + u64::from(i) * 24, 24)?;
        let st_name = u64::from(u32_at(&sym, 0)?);
        let value = u64_at(&sym, 8)?;
        if st_name >= self.strsz || value == 0 {
            return None;
        }
        let got = read_vec(t, self.strtab + st_name, name.len() + 1)?;
        (got.strip_suffix(b"\0") == Some(name.as_bytes()))
            .then(|| self.base.checked_add(value))
            .flatten()
    }

    fn u32_of<T: Target>(t: &mut T, at: u64) -> Option<u32> {
        u32::from_le_bytes(read_vec(t, at, 4)?.try_into().ok()?).into()
    }

    /// The address of the defined symbol `name`. A chain is followed for 4,096 entries
    /// at most.
    fn find<T: Target>(&self, t: &mut T, name: &str) -> Option<u64> {
        match &self.hash {
            Hash::Gnu {
                nbuckets,
                symoffset,
                buckets,
                chains,
            } => {
                let h = gnu_hash(name.as_bytes());
                let first = u32_at(buckets, (h % nbuckets) as usize * 4)?;
                if first < *symoffset {
                    return None;
                }
                // A chain ends at its entry with the low bit set.
                for i in (first..).take(4096) {
                    let chain = Symbols::u32_of(t, chains + u64::from(i - symoffset) * 4)?;
                    if chain | 1 == h | 1 {
                        if let Some(at) = self.is(t, i, name) {
                            return Some(at);
                        }
                    }
                    if chain & 1 == 1 {
                        return None;
                    }
                }
                None
            }
            Hash::Sysv {
                nbuckets,
                buckets,
                chains,
            } => {
                let h = sysv_hash(name.as_bytes());
                let mut i = u32_at(buckets, (h % nbuckets) as usize * 4)?;
                for _ in 0..4096 {
                    if i == 0 {
                        return None;
                    }
                    if let Some(at) = self.is(t, i, name) {
                        return Some(at);
                    }
                    i = Symbols::u32_of(t, chains + u64::from(i) * 4)?;
                }
                None
            }
        }
    }
}

/// One row of `gHotSpotVMStructs`.
struct Row {
    type_name: u64,
    field_name: u64,
    is_static: bool,
    offset: u64,
    address: u64,
}

/// Where HotSpot keeps the heap's range, in one `libjvm.so`, from its VMStructs:
/// `Universe::_collectedHeap` (from the library's load address), and the offsets of
/// `CollectedHeap::_reserved`, `MemRegion::_start` and `MemRegion::_word_size`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Places {
    heap_static: u64,
    reserved: u64,
    start_at: u64,
    words_at: u64,
}

/// The places learnt from one JVM of each `libjvm.so` (its device and inode): a hint for
/// the next one, checked by what it leads to (a range the process's mappings tile, else
/// the table is read again).
pub type Learnt = super::super::binaries::ByFile<Places>;

/// The heap's reserved range of the JVM whose mappings are `vmas`, through `t` (its
/// memory); `None` when `libjvm.so` is not mapped or anything read does not fit.
pub fn find<T: Target>(t: &mut T, vmas: &[Vma]) -> Option<Reserved> {
    find_with(t, vmas, &Learnt::new(1))
}

/// [`find`], through the places `learnt` from a JVM of the same `libjvm.so` when they lead
/// to a range the process's mappings tile (an address-space reservation the JVM made);
/// otherwise through its own VMStructs, whose places are learnt when their range passes
/// the same check. Another process's memory taught the hint: it is never believed
/// without that check, and a range it gives that fails it costs one full read.
pub fn find_with<T: Target>(t: &mut T, vmas: &[Vma], learnt: &Learnt) -> Option<Reserved> {
    let lib = vmas
        .iter()
        .find(|v| v.library == Some(Library::JvmLibrary))?
        .file_id?;
    let base = vmas
        .iter()
        .filter(|v| v.file_id == Some(lib))
        .map(|v| v.start)
        .min()?;
    let id = (lib.0, lib.1, 0, 0);
    if let Some(p) = learnt.get(id) {
        if let Some(r) = range(t, base, &p).filter(|r| tiled(vmas, r)) {
            return Some(r);
        }
    }
    let p = places(t, base)?;
    let r = range(t, base, &p)?;
    if tiled(vmas, &r) {
        learnt.put(id, p);
    }
    Some(r)
}

/// Whether the mappings cover `r` without a gap: the heap is one reservation, committed
/// or not, so its range is mapped end to end.
fn tiled(vmas: &[Vma], r: &Reserved) -> bool {
    let mut at = r.start;
    for v in vmas.iter().filter(|v| v.end > r.start && v.start < r.end) {
        if v.start > at {
            return false;
        }
        at = at.max(v.end);
    }
    at >= r.end
}

/// The heap's range, from the places in a `libjvm.so` loaded at `base`.
fn range<T: Target>(t: &mut T, base: u64, p: &Places) -> Option<Reserved> {
    let heap = read_u64(t, base.wrapping_add(p.heap_static)).filter(|&h| h != 0)?;
    let region = heap.checked_add(p.reserved)?;
    let start = read_u64(t, region.checked_add(p.start_at)?)?;
    let words = read_u64(t, region.checked_add(p.words_at)?)?;
    let end = start.checked_add(words.checked_mul(8)?)?;
    (start != 0 && end > start).then_some(Reserved { start, end })
}

/// The places, from the VMStructs of the `libjvm.so` loaded at `base`.
fn places<T: Target>(t: &mut T, base: u64) -> Option<Places> {
    let syms = Symbols::of(t, base)?;
    let mut value = |name: &str| {
        let at = syms.find(t, name)?;
        read_u64(t, at)
    };
    let table = value("gHotSpotVMStructs")?;
    let stride = value("gHotSpotVMStructEntryArrayStride")?;
    let at = [
        "gHotSpotVMStructEntryTypeNameOffset",
        "gHotSpotVMStructEntryFieldNameOffset",
        "gHotSpotVMStructEntryIsStaticOffset",
        "gHotSpotVMStructEntryOffsetOffset",
        "gHotSpotVMStructEntryAddressOffset",
    ]
    .map(|n| value(n).and_then(|v| usize::try_from(v).ok()));
    let [Some(type_at), Some(field_at), Some(static_at), Some(offset_at), Some(address_at)] = at
    else {
        return None;
    };
    let stride = usize::try_from(stride)
        .ok()
        .filter(|&s| (8..=256).contains(&s))?;
    if [type_at, field_at, offset_at, address_at]
        .iter()
        .any(|&o| o + 8 > stride)
        || static_at + 4 > stride
    {
        return None;
    }
    let mut rows = Vec::new();
    'table: while rows.len() < MAX_ROWS {
        let chunk = read_vec(
            t,
            table + (rows.len() * stride) as u64,
            ROWS_AT_ONCE * stride,
        )?;
        for r in chunk.chunks(stride) {
            let row = Row {
                type_name: u64_at(r, type_at)?,
                field_name: u64_at(r, field_at)?,
                is_static: u32_at(r, static_at)? != 0,
                offset: u64_at(r, offset_at)?,
                address: u64_at(r, address_at)?,
            };
            if row.type_name == 0 {
                break 'table;
            }
            rows.push(row);
        }
    }
    // Names are string literals, shared between the rows of one type: each read once.
    let mut names: HashMap<u64, Vec<u8>> = HashMap::new();
    let mut wanted: Vec<u64> = rows.iter().map(|r| r.type_name).collect();
    wanted.sort_unstable();
    wanted.dedup();
    read_names(t, &wanted, &mut names)?;
    let types = ["Universe", "CollectedHeap", "MemRegion"];
    let ours: Vec<&Row> = rows
        .iter()
        .filter(|r| types.iter().any(|ty| is(&names, r.type_name, ty)))
        .collect();
    let mut fields: Vec<u64> = ours.iter().map(|r| r.field_name).collect();
    fields.sort_unstable();
    fields.dedup();
    read_names(t, &fields, &mut names)?;
    let row = |ty: &str, field: &str| {
        ours.iter()
            .find(|r| is(&names, r.type_name, ty) && is(&names, r.field_name, field))
    };
    let heap_static = row("Universe", "_collectedHeap")
        .filter(|r| r.is_static)?
        .address;
    let reserved = row("CollectedHeap", "_reserved")
        .filter(|r| !r.is_static)?
        .offset;
    let start_at = row("MemRegion", "_start")?.offset;
    let words_at = row("MemRegion", "_word_size")?.offset;
    Some(Places {
        heap_static: heap_static.wrapping_sub(base),
        reserved,
        start_at,
        words_at,
    })
}

/// Reads the first `NAME_BYTES` of each name at `ptrs` not read yet, in batches.
fn read_names<T: Target>(t: &mut T, ptrs: &[u64], names: &mut HashMap<u64, Vec<u8>>) -> Option<()> {
    let todo: Vec<u64> = ptrs
        .iter()
        .copied()
        .filter(|p| !names.contains_key(p) && *p != 0)
        .collect();
    for batch in todo.chunks(512) {
        let at: Vec<(u64, usize)> = batch.iter().map(|&p| (p, NAME_BYTES)).collect();
        let mut out = vec![0u8; batch.len() * NAME_BYTES];
        if t.read_many(&at, &mut out).is_err() {
            // A name near the end of a mapping: read those one by one, to their NUL.
            for &p in batch {
                let mut b = vec![0u8; NAME_BYTES];
                let n = (1..=NAME_BYTES)
                    .rev()
                    .find(|&n| t.read(p, &mut b[..n]).is_ok())?;
                b.truncate(n);
                names.insert(p, b);
            }
            continue;
        }
        for (i, &p) in batch.iter().enumerate() {
            names.insert(p, out[i * NAME_BYTES..(i + 1) * NAME_BYTES].to_vec());
        }
    }
    Some(())
}

/// Whether the name at `ptr` is `want` (its bytes, then a NUL).
fn is(names: &HashMap<u64, Vec<u8>>, ptr: u64, want: &str) -> bool {
    names.get(&ptr).is_some_and(|b| {
        b.len() > want.len() && b.starts_with(want.as_bytes()) && b[want.len()] == 0
    })
}

#[cfg(test)]
mod tests {
    use super::{find_with, gnu_hash, Learnt, Places, Reserved};
    use crate::collect::heap::image::Image;
    use crate::parse::smaps::{Library, Vma};

    const LIB: u64 = 0x7f00_0000_0000;
    const HEAP: u64 = 0x8_0000_0000;

    /// A JVM whose libjvm (no symbols: its table cannot be read) is loaded at `LIB`, whose
    /// collected heap object at `LIB + 0x1000` says its range starts at `HEAP` and is
    /// `words` long, and whose mappings reserve `[HEAP, HEAP + mapped)`.
    fn jvm(words: u64, mapped: u64) -> (Image, Vec<Vma>) {
        let mut t = Image::default();
        t.map(LIB, 0x3000);
        t.put(LIB + 0x1000, LIB + 0x2000); // Universe::_collectedHeap
        t.put(LIB + 0x2000 + 0x10, HEAP); // _reserved._start
        t.put(LIB + 0x2000 + 0x18, words); // _reserved._word_size
        let lib = Vma {
            start: LIB,
            end: LIB + 0x3000,
            file_id: Some((8, 42)),
            library: Some(Library::JvmLibrary),
            ..Vma::default()
        };
        let half = |start, end| Vma {
            start,
            end,
            anonymous: true,
            ..Vma::default()
        };
        let mid = HEAP + mapped / 2;
        (t, vec![half(HEAP, mid), half(mid, HEAP + mapped), lib])
    }

    fn places() -> Places {
        Places {
            heap_static: 0x1000,
            reserved: 0x10,
            start_at: 0,
            words_at: 8,
        }
    }

    #[test]
    fn learnt_places_are_believed_only_where_the_mappings_tile_their_range() {
        let learnt = Learnt::new(4);
        learnt.put((8, 42, 0, 0), places());
        // The range the hint leads to is mapped end to end: believed.
        let (mut t, vmas) = jvm(1 << 20, 8 << 20);
        let want = Reserved {
            start: HEAP,
            end: HEAP + (8 << 20),
        };
        assert_eq!(find_with(&mut t, &vmas, &learnt), Some(want));
        // A hint (taught by another process of the same libjvm) that leads past the
        // mappings is not believed; the table read in its place finds nothing here.
        let (mut t, vmas) = jvm(1 << 30, 8 << 20);
        assert_eq!(find_with(&mut t, &vmas, &learnt), None);
        // A gap inside the range fails it as well.
        let (mut t, mut vmas) = jvm(1 << 20, 8 << 20);
        vmas[1].start += 0x1000;
        assert_eq!(find_with(&mut t, &vmas, &learnt), None);
        // Without a hint, nothing is taken on trust either.
        let (mut t, vmas) = jvm(1 << 20, 8 << 20);
        assert_eq!(find_with(&mut t, &vmas, &Learnt::new(4)), None);
    }

    #[test]
    fn sysv_hash_is_the_gabis() {
        // The gABI algorithm; that it finds real symbols is tests/jvm.rs (JDK 11 has only
        // this table).
        assert_eq!(super::sysv_hash(b""), 0);
        assert_eq!(super::sysv_hash(b"printf"), 0x0779_05a6);
        assert_eq!(super::sysv_hash(b"exit"), 0x0006_cf04);
        assert_eq!(super::sysv_hash(b"syscall"), 0x0b09_985c);
    }

    #[test]
    fn gnu_hash_is_glibcs() {
        // Values from the ELF gABI's GNU hash examples (dl_new_hash).
        assert_eq!(gnu_hash(b""), 0x0000_1505);
        assert_eq!(gnu_hash(b"printf"), 0x156b_2bb8);
        assert_eq!(gnu_hash(b"exit"), 0x7c96_7e3f);
        assert_eq!(gnu_hash(b"syscall"), 0xbac2_12a0);
    }
}
