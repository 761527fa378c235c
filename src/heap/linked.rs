//! The allocator linked into an executable, told from what the binary holds rather than
//! from a mapped library's name: Redis's and Valkey's images, Rust services on
//! `tikv-jemallocator` or `mimalloc` and ClickHouse link theirs statically, map
//! `libc.so.6` beside it, and would otherwise be taken for glibc's.
//!
//! The symbols a binary defines name its allocator (jemalloc's `mallctl` with or without
//! a prefix: `mallctl`, `je_mallctl`, `_rjem_mallctl`; tcmalloc's `tc_malloc` or its
//! namespace; mimalloc's `mi_malloc` or `mi_free`; musl's `__init_libc`, static). A stripped binary (no `.symtab`) is searched for
//! the prefix each allocator puts on its own messages, in the first
//! [`MAX_RODATA_BYTES`] of its read-only data. The binary is its owner's: everything is
//! read through [`super::elf`], within its caps. Each binary is read once (the scanner's
//! `Binaries`).

use super::binaries::ByFile;
use super::elf::{Binary, Elf};
use super::runtime::Allocator;

/// The read-only data a stripped binary is searched: ClickHouse's is about 40 MiB.
pub(crate) const MAX_RODATA_BYTES: u64 = 64 << 20;

/// The allocator linked into the executable `exe`, read once per binary (`kept`).
pub fn allocator(
    exe: &crate::source::PidFile,
    kept: &ByFile<Option<Allocator>>,
) -> Option<Allocator> {
    match exe.identity() {
        Ok(id) => *kept.get_or(id, || linked(exe.file())),
        Err(_) => None,
    }
}

/// The allocator `bin` defines, if it defines one this can tell: `None` for a binary
/// that holds none of them (its malloc is its C library's), or one too large to read.
pub fn linked<B: Binary + ?Sized>(bin: &B) -> Option<Allocator> {
    let elf = Elf::parse(bin).ok()?;
    let found = elf
        .find_symbol_bound(bin, |n| by_symbol(n, true).is_some(), by_symbol)
        .ok()
        .flatten()
        .map(|(a, _)| a);
    if found.is_some() || elf.has_symtab() {
        return found;
    }
    MESSAGES.iter().find_map(|&(allocator, hidden)| {
        let needle = unhide(hidden);
        elf.section_holds(bin, ".rodata", &needle, MAX_RODATA_BYTES)
            .ok()?
            .then_some(allocator)
    })
}

/// The allocator a defined symbol belongs to; `global`: the symbol is not local to its
/// object.
fn by_symbol(name: &[u8], global: bool) -> Option<Allocator> {
    if name.ends_with(b"mallctl") || name.ends_with(b"mallctlnametomib") {
        Some(Allocator::Jemalloc)
    } else if name.starts_with(b"tc_malloc") || name.windows(9).any(|w| w == b"8tcmalloc") {
        Some(Allocator::Tcmalloc)
    } else if global && (MIMALLOC.contains(&name) || name.starts_with(b"mi_heap_malloc")) {
        Some(Allocator::Mimalloc)
    } else if name == b"__init_libc" {
        // musl's start-up, linked into a static musl binary (a dynamic one maps ld-musl).
        Some(Allocator::Musl)
    } else {
        None
    }
}

/// Names only mimalloc defines, as global symbols: a program links the functions it calls,
/// and a Rust program on the `mimalloc` crate calls `mi_malloc_aligned` and `mi_free` (its
/// 3.x build keeps no `mi_malloc`). CPython 3.13 bundles mimalloc for `PYTHONMALLOC=mimalloc`
/// and free-threading, its names local: its objects are pymalloc's, on glibc's malloc.
const MIMALLOC: [&[u8]; 3] = [b"mi_malloc", b"mi_malloc_aligned", b"mi_free"];

/// The prefix of each allocator's own messages, as in a stripped binary's read-only data
/// (`<jemalloc>: `, `tcmalloc: `, `mimalloc: `: the settings' names, `TCMALLOC_...`,
/// are in any program's remedy text, this one's too),
/// stored with each byte's bits flipped: the exporter's own binary must not hold them, or
/// it would take itself for each allocator.
const MESSAGES: [(Allocator, &[u8]); 3] = [
    (Allocator::Jemalloc, &hide(*b"<jemalloc>: ")),
    (Allocator::Tcmalloc, &hide(*b"tcmalloc: ")),
    (Allocator::Mimalloc, &hide(*b"mimalloc: ")),
];

const fn hide<const N: usize>(mut b: [u8; N]) -> [u8; N] {
    let mut i = 0;
    while i < N {
        b[i] = !b[i];
        i += 1;
    }
    b
}

fn unhide(hidden: &[u8]) -> Vec<u8> {
    hidden.iter().map(|b| !std::hint::black_box(*b)).collect()
}

#[cfg(test)]
mod tests;
