//! What a process's mappings and libc's own pages say before its heaps are read: where
//! glibc's memory may lie (to bound and check reads), which file is libc, its version
//! (from its banner, read once per file) and whether it is a 64-bit object.

use std::collections::HashMap;
use std::sync::Mutex;

use super::arenas::Bounds;
use crate::heap::glibc;
use crate::heap::target::Target;
use crate::parse::smaps::{Library, Vma};

/// What the mappings tell about where glibc's memory is (see [`Bounds`]) and which file
/// is libc: its mappings' ranges in address order.
pub fn bounds(vmas: &[Vma]) -> (Bounds, Vec<&Vma>) {
    let mut b = Bounds::default();
    let mut brk_parts = 0;
    let mut libc: Vec<&Vma> = Vec::new();
    for vma in vmas {
        if vma.library == Some(Library::Glibc) {
            if libc.first().is_none_or(|f| f.file_id == vma.file_id) {
                libc.push(vma);
            }
            if &vma.perms == b"rw-p" && libc[0].file_id == vma.file_id {
                b.libc_data.push((vma.start, vma.end));
            }
        }
        let rw = vma.perms[0] == b'r' && vma.perms[1] == b'w';
        if vma.brk_heap {
            b.brk = match b.brk {
                None => Some((vma.start, vma.end)),
                Some((s, e)) if e == vma.start => Some((s, vma.end)),
                other => other,
            };
            brk_parts += 1;
        }
        if rw && (vma.anonymous || vma.brk_heap) {
            match b.anon_rw.last_mut() {
                Some((_, e)) if *e == vma.start => *e = vma.end,
                _ => b.anon_rw.push((vma.start, vma.end)),
            }
        }
    }
    if brk_parts > 0
        && !vmas
            .iter()
            .filter(|v| v.brk_heap)
            .all(|v| b.brk.is_some_and(|(s, e)| v.start >= s && v.end <= e))
    {
        // Two separate [heap] ranges: not the shape the kernel gives brk.
        b.brk = None;
    }
    (b, libc)
}

/// A libc file: its device and inode.
type FileId = (u64, u64);
/// Where the version banner lies in each libc file already read: which of its read-only
/// mappings, and the offset in it. Only a place is remembered, never a version: each
/// process's version is read from its own memory there, so a process that rewrote its own
/// copy of the banner changes no other process's reading.
static PLACES: Mutex<Option<HashMap<FileId, (usize, u64)>>> = Mutex::new(None);
/// Files remembered at most (a host has a few libc files; a churn of containers more).
const MAX_PLACES: usize = 256;
/// The banner's mark and the version digits after it.
const BANNER: usize = b"release version 2.".len() + 3;

/// glibc's version from the banner in libc's read-only data, read from the process: at
/// the place it was found in this libc file before, else found anew (up to 4 MiB of each
/// read-only mapping).
pub(in crate::heap) fn libc_version<T: Target>(t: &mut T, libc: &[&Vma]) -> Option<u32> {
    let id = libc.first()?.file_id?;
    let read_only: Vec<&Vma> = libc
        .iter()
        .copied()
        .filter(|v| &v.perms == b"r--p")
        .collect();
    let place = PLACES
        .lock()
        .ok()?
        .as_ref()
        .and_then(|m| m.get(&id).copied());
    if let Some(vma) = place.and_then(|(i, _)| read_only.get(i)) {
        let offset = place.map_or(0, |(_, o)| o);
        let mut b = [0u8; BANNER];
        if t.read(vma.start.saturating_add(offset), &mut b).is_ok() {
            if let Some(v) = glibc::version_in(&b) {
                return Some(v);
            }
        }
    }
    let mut buf = Vec::new();
    for (i, vma) in read_only.iter().enumerate() {
        let len = (vma.end - vma.start).min(4 << 20) as usize;
        buf.resize(len, 0);
        if t.read(vma.start, &mut buf).is_err() {
            continue;
        }
        let Some((offset, v)) = glibc::banner_in(&buf) else {
            continue;
        };
        if let Ok(mut places) = PLACES.lock() {
            let map = places.get_or_insert_with(HashMap::new);
            if map.len() >= MAX_PLACES {
                map.clear();
            }
            map.insert(id, (i, offset as u64));
        }
        return Some(v);
    }
    None
}

/// libc's ELF header says a 64-bit little-endian object (x86-64 or aarch64): the only
/// layout [`glibc`] describes.
pub(in crate::heap) fn is_64_bit<T: Target>(t: &mut T, libc: &[&Vma]) -> bool {
    let Some(first) = libc.first() else {
        return false;
    };
    let mut h = [0u8; 20];
    if t.read(first.start, &mut h).is_err() {
        return false;
    }
    let machine = u16::from_le_bytes([h[18], h[19]]);
    &h[..4] == b"\x7fELF" && h[4] == 2 && h[5] == 1 && (machine == 62 || machine == 183)
}
