//! The few parts of an executable the heap readers read, by hand within bounds: the ELF
//! header, the section and program headers, the symbol tables, a data section and the
//! DWARF sections (Go's layout, the allocator linked in). The binary is its owner's to write, so every size comes from a header and is
//! checked before anything it sizes is read: a section must lie inside the file, a symbol
//! table or a DWARF section (inflated) may not pass its cap, and a compressed section is
//! inflated from the file as it is read, never copied whole first. Names are compared in
//! place. What is larger than the caps is [`Fault::TooLarge`]; what breaks the format is
//! [`Fault::Malformed`].

use std::io::Read;

/// Why an executable's parts could not be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// A part is larger than its cap.
    TooLarge,
    /// The file breaks the format (a section outside the file, a bad header).
    Malformed,
    /// It has no symbol table.
    Stripped,
}

/// Sections a binary may have (a Go binary has about 40).
const MAX_SECTIONS: u64 = 1 << 12;
/// Program headers a binary may have (a Go binary has about 10).
const MAX_SEGMENTS: u64 = 1 << 8;
/// The section names' table.
const MAX_NAMES_BYTES: u64 = 1 << 20;
/// The symbol table and its strings, each: a kubelet's are a few MiB.
pub(crate) const MAX_SYMBOLS_BYTES: u64 = 32 << 20;
/// One DWARF section, inflated: a kubelet's `.debug_info` is tens of MiB less than this.
pub(crate) const MAX_DWARF_BYTES: u64 = 48 << 20;
/// Inflated from the file this much at a time.
const CHUNK: usize = 64 << 10;

const SHT_SYMTAB: u32 = 2;
const SHT_DYNSYM: u32 = 11;
const SHT_NOBITS: u32 = 8;
const SHF_COMPRESSED: u64 = 1 << 11;
const ELFCOMPRESS_ZLIB: u32 = 1;
const PT_LOAD: u32 = 1;
const ET_DYN: u16 = 3;

/// What an executable's bytes are read from: its file, or bytes in memory (tests).
pub trait Binary {
    /// The file's length in bytes.
    fn size(&self) -> u64;
    /// Fills `buf` from `offset`; `false` on a short or failed read.
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> bool;
}

impl Binary for [u8] {
    fn size(&self) -> u64 {
        self.len() as u64
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> bool {
        let Ok(at) = usize::try_from(offset) else {
            return false;
        };
        match self.get(at..at.saturating_add(buf.len())) {
            Some(b) if b.len() == buf.len() => {
                buf.copy_from_slice(b);
                true
            }
            _ => false,
        }
    }
}

impl Binary for std::fs::File {
    fn size(&self) -> u64 {
        self.metadata().map_or(0, |m| m.len())
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> bool {
        std::os::unix::fs::FileExt::read_exact_at(self, buf, offset).is_ok()
    }
}

/// A section header, as far as this reader needs it.
#[derive(Debug, Clone, Copy)]
pub struct Section {
    name: u32,
    kind: u32,
    flags: u64,
    offset: u64,
    size: u64,
    link: u32,
}

/// A 64-bit little-endian ELF file's headers.
pub struct Elf {
    sections: Vec<Section>,
    names: Vec<u8>,
    /// A position-independent executable (`ET_DYN`).
    pub pie: bool,
    /// The lowest address a loadable segment asks for.
    pub first_vaddr: u64,
}

/// Where a binary's link-time addresses land in a process.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Load {
    /// The lowest address a loadable segment asks for.
    pub first_vaddr: u64,
    /// A position-independent binary (`ET_DYN`), loaded wherever the loader puts it.
    pub pie: bool,
}

impl Load {
    /// The amount to add to link-time addresses, given where the binary's first mapping
    /// (file offset 0) starts.
    pub fn bias(self, first_mapping: u64) -> u64 {
        if self.pie {
            first_mapping.wrapping_sub(self.first_vaddr & !0xfff)
        } else {
            0
        }
    }
}

fn u16_at(b: &[u8], at: usize) -> u16 {
    super::target::u16_at(b, at).unwrap_or(0)
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    super::target::u32_at(b, at).unwrap_or(0)
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    super::target::u64_at(b, at).unwrap_or(0)
}

/// Reads `len` bytes at `offset`, once `len` is known to be at most `cap` and inside the
/// file.
fn read_bounded<B: Binary + ?Sized>(
    bin: &B,
    offset: u64,
    len: u64,
    cap: u64,
) -> Result<Vec<u8>, Fault> {
    if len > cap {
        return Err(Fault::TooLarge);
    }
    if offset.checked_add(len).is_none_or(|end| end > bin.size()) {
        return Err(Fault::Malformed);
    }
    let mut buf = vec![0u8; len as usize];
    if !bin.read_at(offset, &mut buf) {
        return Err(Fault::Malformed);
    }
    Ok(buf)
}

impl Elf {
    /// The headers of `bin`: each section inside the file, their counts bounded.
    pub fn parse<B: Binary + ?Sized>(bin: &B) -> Result<Elf, Fault> {
        let bad = Fault::Malformed;
        let h = read_bounded(bin, 0, 64, 64)?;
        // 64-bit, little-endian, version 1: the processes this exporter reads are of its
        // own architecture.
        if &h[..4] != b"\x7fELF" || h[4] != 2 || h[5] != 1 {
            return Err(bad);
        }
        let (phoff, shoff) = (u64_at(&h, 0x20), u64_at(&h, 0x28));
        let (phentsize, phnum) = (u64::from(u16_at(&h, 0x36)), u64::from(u16_at(&h, 0x38)));
        let (shentsize, shnum) = (u64::from(u16_at(&h, 0x3a)), u64::from(u16_at(&h, 0x3c)));
        let shstrndx = usize::from(u16_at(&h, 0x3e));
        if phentsize != 56 || shentsize != 64 || phnum > MAX_SEGMENTS || shnum > MAX_SECTIONS {
            return Err(bad);
        }
        let table = read_bounded(bin, shoff, shnum * 64, MAX_SECTIONS * 64)?;
        let mut sections = Vec::with_capacity(shnum as usize);
        for s in table.chunks_exact(64) {
            let section = Section {
                name: u32_at(s, 0),
                kind: u32_at(s, 4),
                flags: u64_at(s, 8),
                offset: u64_at(s, 0x18),
                size: u64_at(s, 0x20),
                link: u32_at(s, 0x28),
            };
            let inside = section
                .offset
                .checked_add(section.size)
                .is_some_and(|end| end <= bin.size());
            if section.kind != SHT_NOBITS && !inside {
                return Err(bad);
            }
            sections.push(section);
        }
        let names = sections.get(shstrndx).ok_or(bad)?;
        let names = read_bounded(bin, names.offset, names.size, MAX_NAMES_BYTES)?;
        let segments = read_bounded(bin, phoff, phnum * 56, MAX_SEGMENTS * 56)?;
        let first_vaddr = segments
            .chunks_exact(56)
            .filter(|p| u32_at(p, 0) == PT_LOAD)
            .map(|p| u64_at(p, 0x10))
            .min()
            .ok_or(bad)?;
        Ok(Elf {
            sections,
            names,
            pie: u16_at(&h, 0x10) == ET_DYN,
            first_vaddr,
        })
    }

    /// Where its link-time addresses land in a process.
    pub fn load(&self) -> Load {
        Load {
            first_vaddr: self.first_vaddr,
            pie: self.pie,
        }
    }

    /// Whether the name at `at` in a string table is `want`, compared in place.
    fn is_named(table: &[u8], at: usize, want: &[u8]) -> bool {
        table
            .get(at..)
            .is_some_and(|s| s.starts_with(want) && s.get(want.len()) == Some(&0))
    }

    /// The section named `name`, or its GNU-compressed `.zdebug_` form.
    pub fn section(&self, name: &str) -> Option<&Section> {
        let gnu = name.strip_prefix(".debug_").map(|n| format!(".zdebug_{n}"));
        self.sections.iter().find(|s| {
            let at = s.name as usize;
            Self::is_named(&self.names, at, name.as_bytes())
                || gnu
                    .as_ref()
                    .is_some_and(|g| Self::is_named(&self.names, at, g.as_bytes()))
        })
    }

    /// The addresses of the symbols named exactly as in `wanted`, in their order;
    /// `Stripped` without a symbol table (`.symtab`). The tables are read in pieces, once a
    /// name ([`Elf::find_symbol`]): never held whole.
    pub fn symbols<B: Binary + ?Sized, const N: usize>(
        &self,
        bin: &B,
        wanted: [&str; N],
    ) -> Result<[Option<u64>; N], Fault> {
        if !self.has_symtab() {
            return Err(Fault::Stripped);
        }
        let mut found = [None; N];
        for (i, want) in wanted.iter().enumerate() {
            let want = want.as_bytes();
            found[i] = self
                .find_symbol(bin, |n| (n == want).then_some(()))?
                .map(|((), at)| at);
        }
        Ok(found)
    }

    /// Where a compressed section's data starts and the size its header claims once
    /// inflated; `None` for a section stored as it is.
    fn packing<B: Binary + ?Sized>(
        &self,
        bin: &B,
        s: &Section,
    ) -> Result<Option<(u64, u64)>, Fault> {
        let gnu = self
            .names
            .get(s.name as usize..)
            .is_some_and(|n| n.starts_with(b".zdebug_"));
        if s.flags & SHF_COMPRESSED != 0 {
            let h = read_bounded(bin, s.offset, 24, 24)?;
            if u32_at(&h, 0) != ELFCOMPRESS_ZLIB {
                return Err(Fault::Malformed);
            }
            Ok(Some((24, u64_at(&h, 8))))
        } else if gnu {
            // Before the ELF compression header: "ZLIB" and the size, big-endian.
            let h = read_bounded(bin, s.offset, 12, 12)?;
            if &h[..4] != b"ZLIB" {
                return Err(Fault::Malformed);
            }
            Ok(Some((
                12,
                h[4..12].iter().fold(0u64, |v, &b| v << 8 | u64::from(b)),
            )))
        } else {
            Ok(None)
        }
    }

    /// The bytes a section holds once inflated, as its header claims: what a reader sums
    /// over the sections it needs before it inflates any ([`Elf::data`] refuses data
    /// that holds more or less).
    pub(crate) fn claimed<B: Binary + ?Sized>(&self, bin: &B, s: &Section) -> Result<u64, Fault> {
        Ok(self.packing(bin, s)?.map_or(s.size, |(_, size)| size))
    }

    /// A section's bytes, inflated when the linker compressed it (Go does, with zlib),
    /// at most [`MAX_DWARF_BYTES`] of them. The buffer is the claimed size, reserved
    /// once (the caller has charged that claim to its budget): inflating never grows it.
    pub fn data<B: Binary + ?Sized>(&self, bin: &B, s: &Section) -> Result<Vec<u8>, Fault> {
        let Some((start, size)) = self.packing(bin, s)? else {
            return read_bounded(bin, s.offset, s.size, MAX_DWARF_BYTES);
        };
        if size > MAX_DWARF_BYTES {
            return Err(Fault::TooLarge);
        }
        if s.size < start {
            return Err(Fault::Malformed);
        }
        let compressed = Chunks {
            bin,
            at: s.offset + start,
            left: s.size - start,
        };
        let mut out = Vec::new();
        out.try_reserve_exact(size as usize)
            .map_err(|_| Fault::TooLarge)?;
        let mut inflater = flate2::read::ZlibDecoder::new(compressed);
        (&mut inflater)
            .take(size)
            .read_to_end(&mut out)
            .map_err(|_| Fault::Malformed)?;
        // Data that holds more than claimed is refused too: one more byte is asked for,
        // into the stack, never by growing the buffer.
        let mut more = [0u8; 1];
        let past = inflater.read(&mut more).map_err(|_| Fault::Malformed)?;
        if out.len() as u64 != size || past != 0 {
            return Err(Fault::Malformed);
        }
        Ok(out)
    }
}

/// A section's compressed bytes, read from the file as the inflater asks for them.
struct Chunks<'b, B: Binary + ?Sized> {
    bin: &'b B,
    at: u64,
    left: u64,
}

impl<B: Binary + ?Sized> Read for Chunks<'_, B> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = (buf.len() as u64).min(self.left).min(CHUNK as u64) as usize;
        if n == 0 {
            return Ok(0);
        }
        if !self.bin.read_at(self.at, &mut buf[..n]) {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        self.at += n as u64;
        self.left -= n as u64;
        Ok(n)
    }
}

mod search;

#[cfg(test)]
mod tests;
