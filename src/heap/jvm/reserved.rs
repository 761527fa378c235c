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

use super::super::target::Target;
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

use super::super::target::{u32_at, u64_at};

use super::super::dynsym::Symbols;
pub use super::super::dynsym::{gnu_hash, sysv_hash};

use super::super::dynsym::read_vec;

fn read_u64<T: Target>(t: &mut T, at: u64) -> Option<u64> {
    u64_at(&read_vec(t, at, 8)?, 0)
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
pub(crate) fn find_with<T: Target>(t: &mut T, vmas: &[Vma], learnt: &Learnt) -> Option<Reserved> {
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
mod tests;
