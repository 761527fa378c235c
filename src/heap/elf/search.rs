//! Searching a binary without holding it whole: its symbol tables for a name, a section
//! for a string, each read in pieces of [`CHUNK`] bytes within the caps.

use super::{
    u16_at, u32_at, u64_at, Binary, Elf, Fault, Section, CHUNK, MAX_SYMBOLS_BYTES, SHT_DYNSYM,
    SHT_NOBITS, SHT_SYMTAB,
};

impl Elf {
    /// Whether it has a symbol table (`.symtab`): not stripped.
    pub(crate) fn has_symtab(&self) -> bool {
        self.sections.iter().any(|s| s.kind == SHT_SYMTAB)
    }

    /// The first of `wanted`'s answers for the name of a symbol the file defines (not one
    /// it imports), with the symbol's value (its address), in its symbol tables (`.symtab` and the dynamic one). Read in pieces of
    /// 64 KiB, never a table whole, each table and its strings within
    /// [`MAX_SYMBOLS_BYTES`]: a name `wanted` answers is looked for in the strings first
    /// (at most [`MAX_CANDIDATES`] of them, names up to [`MAX_NAME_BYTES`]), then the
    /// symbols are read for one defined by it.
    pub(crate) fn find_symbol<B: Binary + ?Sized, T: Copy>(
        &self,
        bin: &B,
        wanted: impl Fn(&[u8]) -> Option<T>,
    ) -> Result<Option<(T, u64)>, Fault> {
        self.find_symbol_in(bin, |n| wanted(n).is_some(), |n, _| wanted(n))
    }

    /// [`Elf::find_symbol`], with `wanted` told whether each symbol is global (or weak)
    /// rather than local to its object: a program that bundles a library's code for its
    /// own use keeps that code's names local (CPython 3.13's mimalloc).
    pub(crate) fn find_symbol_bound<B: Binary + ?Sized, T: Copy>(
        &self,
        bin: &B,
        candidate: impl Fn(&[u8]) -> bool,
        wanted: impl Fn(&[u8], bool) -> Option<T>,
    ) -> Result<Option<(T, u64)>, Fault> {
        self.find_symbol_in(bin, candidate, wanted)
    }

    /// The address of the symbol named exactly `name`, also when the linker kept its name
    /// only as the tail of a longer one (`arenas` in `usable_arenas`), or when link-time
    /// optimisation renamed a static one `name.lto_priv.N` (GCC's LTO, as Debian's CPython
    /// is built).
    pub(crate) fn find_named<B: Binary + ?Sized>(
        &self,
        bin: &B,
        name: &[u8],
    ) -> Result<Option<u64>, Fault> {
        let found = self.find_symbol_in(
            bin,
            |n| unrenamed(n).ends_with(name),
            |n, _| (unrenamed(n) == name).then_some(()),
        )?;
        Ok(found.map(|(_, at)| at))
    }

    /// [`Elf::find_symbol`], with the strings that may hold a wanted name (whole or as
    /// their tail) told by `candidate`.
    fn find_symbol_in<B: Binary + ?Sized, T: Copy>(
        &self,
        bin: &B,
        candidate: impl Fn(&[u8]) -> bool,
        wanted: impl Fn(&[u8], bool) -> Option<T>,
    ) -> Result<Option<(T, u64)>, Fault> {
        let tables = self
            .sections
            .iter()
            .filter(|s| s.kind == SHT_SYMTAB || s.kind == SHT_DYNSYM);
        for table in tables {
            let strings = self
                .sections
                .get(table.link as usize)
                .ok_or(Fault::Malformed)?;
            if table.size > MAX_SYMBOLS_BYTES || strings.size > MAX_SYMBOLS_BYTES {
                return Err(Fault::TooLarge);
            }
            // Each string that answers, where it starts, and the string: a linker that
            // merges strings names `mallctl` by the tail of `je_mallctl`, so a symbol may
            // point inside one (a name kept only as the tail of a string that does not
            // answer itself is not found).
            let mut candidates: Vec<(u64, Vec<u8>)> = Vec::new();
            let mut name = Vec::new();
            let mut start = 0u64;
            pieces(bin, strings, |at, piece| {
                for (i, &b) in piece.iter().enumerate() {
                    if b != 0 {
                        if name.len() < MAX_NAME_BYTES {
                            name.push(b);
                        }
                        continue;
                    }
                    if candidate(&name) && candidates.len() < MAX_CANDIDATES {
                        candidates.push((start, name.clone()));
                    }
                    name.clear();
                    start = at + i as u64 + 1;
                }
                true
            })?;
            if candidates.is_empty() {
                continue;
            }
            // An imported symbol's section is SHN_UNDEF (0): a weak `mallctl` that a
            // program declares to find jemalloc if present is not jemalloc.
            let mut found = None;
            pieces(bin, table, |_, piece| {
                found = piece
                    .chunks_exact(24)
                    .filter(|sym| u16_at(sym, 6) != 0)
                    .find_map(|sym| {
                        let at = u64::from(u32_at(sym, 0));
                        // st_info's binding: STB_LOCAL is 0.
                        let global = sym[4] >> 4 != 0;
                        candidates.iter().find_map(|(start, name)| {
                            let tail =
                                name.get(usize::try_from(at.checked_sub(*start)?).ok()?..)?;
                            Some((wanted(tail, global)?, u64_at(sym, 8)))
                        })
                    });
                found.is_none()
            })?;
            if found.is_some() {
                return Ok(found);
            }
        }
        Ok(None)
    }

    /// Whether the section `name` holds `needle`, read from the file in pieces, its first
    /// `cap` bytes at most (`Ok(false)` without the section).
    pub(crate) fn section_holds<B: Binary + ?Sized>(
        &self,
        bin: &B,
        name: &str,
        needle: &[u8],
        cap: u64,
    ) -> Result<bool, Fault> {
        self.section_holds_where(bin, name, needle, 0, cap, |_| true)
    }

    /// Whether the section `name` holds `needle` followed by `following` bytes that
    /// `accept` takes, read from the file in pieces, its first `cap` bytes at most
    /// (`Ok(false)` without the section).
    pub(crate) fn section_holds_where<B: Binary + ?Sized>(
        &self,
        bin: &B,
        name: &str,
        needle: &[u8],
        following: usize,
        cap: u64,
        accept: impl Fn(&[u8]) -> bool,
    ) -> Result<bool, Fault> {
        let Some(s) = self.section(name).filter(|s| s.kind != SHT_NOBITS) else {
            return Ok(false);
        };
        let whole = needle.len() + following;
        if needle.is_empty() || whole > CHUNK / 2 {
            return Ok(needle.is_empty());
        }
        let len = s.size.min(cap);
        // Each piece starts where the last one's final `whole - 1` bytes did, so a needle
        // and what follows it across two pieces are seen.
        let mut piece = vec![0u8; CHUNK];
        let mut at = 0u64;
        while at < len {
            let n = (len - at).min(CHUNK as u64) as usize;
            if !bin.read_at(s.offset + at, &mut piece[..n]) {
                return Err(Fault::Malformed);
            }
            let found = piece[..n]
                .windows(whole)
                .any(|w| w.starts_with(needle) && accept(&w[needle.len()..]));
            if found {
                return Ok(true);
            }
            if at + n as u64 >= len {
                break;
            }
            at += (n - (whole - 1)) as u64;
        }
        Ok(false)
    }
}

/// Symbols whose names may answer a [`Elf::find_symbol`] in one table.
pub(crate) const MAX_CANDIDATES: usize = 64;
/// The longest name [`Elf::find_symbol`] reads whole (C++ names run to a few KiB).
pub(crate) const MAX_NAME_BYTES: usize = 4096;

/// Hands `s`'s bytes to `each(offset in the section, piece)` in pieces of [`CHUNK`]
/// bytes (whole symbols: a multiple of 24) until it returns `false`.
fn pieces<B: Binary + ?Sized>(
    bin: &B,
    s: &Section,
    mut each: impl FnMut(u64, &[u8]) -> bool,
) -> Result<(), Fault> {
    if s.offset
        .checked_add(s.size)
        .is_none_or(|end| end > bin.size())
    {
        return Err(Fault::Malformed);
    }
    let step = (CHUNK / 24 * 24) as u64;
    let mut piece = vec![0u8; step as usize];
    let mut at = 0;
    while at < s.size {
        let n = (s.size - at).min(step) as usize;
        if !bin.read_at(s.offset + at, &mut piece[..n]) {
            return Err(Fault::Malformed);
        }
        if !each(at, &piece[..n]) {
            break;
        }
        at += n as u64;
    }
    Ok(())
}

/// A symbol's name without the suffix GCC's link-time optimisation gives a static it
/// renames (`arenas.lto_priv.0` -> `arenas`).
fn unrenamed(n: &[u8]) -> &[u8] {
    let digits = n.iter().rev().take_while(|b| b.is_ascii_digit()).count();
    match n[..n.len() - digits].strip_suffix(b".lto_priv.") {
        Some(name) if digits > 0 => name,
        _ => n,
    }
}
