//! Crafted executables: what a tenant can write into its own binary.

use super::super::golang::image::{self, elf, elf_with, part, Part, RUNTIME};
use super::super::golang::{layout, Unmeasured};
use super::{Binary, Elf, Fault, MAX_DWARF_BYTES, MAX_SYMBOLS_BYTES};

/// The symbol table (sections 2 and 3) naming `syms`.
fn symbols(syms: &[(&str, u64)]) -> Vec<Part> {
    let [mut table, strings] = image::symbols(syms);
    table.link = 3;
    vec![table, strings]
}

#[test]
fn symbols_are_found_by_their_whole_name_and_headers_are_read() {
    let bin = elf(symbols(&RUNTIME));
    let e = Elf::parse(&bin[..]).unwrap();
    assert_eq!(e.first_vaddr, 0x40_0000);
    assert!(!e.pie);
    let found = e
        .symbols(
            &bin[..],
            ["runtime.mheap_", "runtime.allp", "runtime.nothing"],
        )
        .unwrap();
    assert_eq!(found, [Some(image::H), Some(image::ALLP), None]);
    // A name that only begins like the one asked for is another name.
    let near = elf(symbols(&[
        ("runtime.gcControllerX", 1),
        ("runtime.mheap", 2),
    ]));
    let e = Elf::parse(&near[..]).unwrap();
    let found = e
        .symbols(&near[..], ["runtime.gcController", "runtime.mheap_"])
        .unwrap();
    assert_eq!(found, [None, None]);
    // Symbols without DWARF: the layout says so.
    assert_eq!(layout(&bin[..]).unwrap_err(), Unmeasured::NoDwarf);
    assert_eq!(
        layout(&elf(Vec::new())[..]).unwrap_err(),
        Unmeasured::Stripped
    );
}

/// Debian's CPython is built with GCC's LTO, which renames the statics it reads
/// (`arenas.lto_priv.0`, as its -dbg symbols have them); a longer or other name is not one.
#[test]
fn a_static_renamed_by_lto_is_found_by_its_name() {
    let bin = elf(symbols(&[
        ("usable_arenas.lto_priv.0", 1),
        ("arenas.lto_priv.0", 2),
        ("maxarenas.lto_priv.3", 3),
        ("narenas.lto_priv.", 4),
        ("nfp2lasta.lto_privy.5", 5),
    ]));
    let e = Elf::parse(&bin[..]).unwrap();
    let find = |n: &[u8]| e.find_named(&bin[..], n).unwrap();
    assert_eq!(find(b"arenas"), Some(2));
    assert_eq!(find(b"maxarenas"), Some(3));
    assert_eq!(find(b"narenas"), None);
    assert_eq!(find(b"nfp2lasta"), None);
    assert_eq!(find(b"usable_arenas"), Some(1));
}

#[test]
fn a_section_that_claims_bytes_past_the_file_is_refused() {
    let mut p = symbols(&RUNTIME);
    p[1].claimed = Some(1 << 40);
    assert_eq!(Elf::parse(&elf(p)[..]).err(), Some(Fault::Malformed));
}

#[test]
fn a_string_table_without_an_end_is_not_read_past_itself() {
    let mut p = symbols(&RUNTIME);
    p[1].bytes.retain(|&b| b != 0);
    let bin = elf(p);
    let e = Elf::parse(&bin[..]).unwrap();
    let found = e.symbols(&bin[..], ["runtime.allp"]).unwrap();
    assert_eq!(found, [None]);
}

#[test]
fn a_compressed_section_is_inflated_within_its_cap_and_refused_past_it() {
    use std::io::Write;
    let info = b"what the section holds".repeat(100);
    let zlib = |data: &[u8], claimed: u64| {
        let mut e = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::best());
        e.write_all(data).unwrap();
        let mut out = vec![0u8; 24];
        out[0..4].copy_from_slice(&1u32.to_le_bytes());
        out[8..16].copy_from_slice(&claimed.to_le_bytes());
        out.extend(e.finish().unwrap());
        out
    };
    let compressed = |bytes| Part {
        flags: 1 << 11,
        ..part(".debug_info", 1, bytes)
    };
    let bin = elf(vec![compressed(zlib(&info, info.len() as u64))]);
    let e = Elf::parse(&bin[..]).unwrap();
    let s = e.section(".debug_info").unwrap();
    assert_eq!(e.data(&bin[..], s).unwrap(), info);
    // A header that claims more than the data holds, or less, is not believed.
    for claimed in [info.len() as u64 + 1, info.len() as u64 - 1] {
        let bin = elf(vec![compressed(zlib(&info, claimed))]);
        let e = Elf::parse(&bin[..]).unwrap();
        let s = e.section(".debug_info").unwrap();
        assert_eq!(e.data(&bin[..], s), Err(Fault::Malformed));
    }
    // 255 MiB of zeros compress to a quarter of a MiB: refused from the header, before a
    // byte is inflated.
    let bomb = vec![0u8; 255 << 20];
    let bin = elf(vec![compressed(zlib(&bomb, bomb.len() as u64))]);
    drop(bomb);
    assert!(bin.len() < 1 << 20, "{} bytes", bin.len());
    let e = Elf::parse(&bin[..]).unwrap();
    let s = e.section(".debug_info").unwrap();
    assert_eq!(e.data(&bin[..], s), Err(Fault::TooLarge));
}

/// A sparse file: a section of hundreds of MiB that costs its owner no disk, refused from
/// its header (through the file, as the exporter reads `/proc/PID/exe`).
#[test]
fn a_sparse_section_larger_than_its_cap_is_refused_from_its_header() {
    let dir = tempfile::tempdir().unwrap();
    for (name, kind, cap) in [
        (".debug_info", 1, MAX_DWARF_BYTES),
        (".symtab", 2, MAX_SYMBOLS_BYTES),
    ] {
        let mut parts = symbols(&RUNTIME);
        if kind == 2 {
            parts[0].claimed = Some(cap + 24);
        } else {
            let mut p = part(name, kind, Vec::new());
            p.claimed = Some(768 << 20);
            parts.push(p);
        }
        let bin = elf(parts);
        let path = dir.path().join(name);
        std::fs::write(&path, &bin).unwrap();
        let file = std::fs::File::options()
            .read(true)
            .write(true)
            .open(&path)
            .unwrap();
        // The headers sit at the end: move them past the hole the section claims.
        let grown = bin.len() as u64 + (768 << 20);
        file.set_len(grown).unwrap();
        assert_eq!(Binary::size(&file), grown);
        let e = Elf::parse(&file).unwrap_or_else(|u| panic!("{name}: {u:?}"));
        let got = if kind == 2 {
            e.symbols(&file, ["runtime.allp"]).map(|_| ())
        } else {
            e.data(&file, e.section(name).unwrap()).map(|_| ())
        };
        assert_eq!(got, Err(Fault::TooLarge), "{name}");
    }
}

/// The miniature Go binary's DWARF, written as Go's linker writes it, gives the layout of
/// the miniature process: every offset the reader takes from a structure, a member, a
/// pointer or an array's count.
#[test]
fn the_layout_is_read_from_the_dwarf_of_a_binary() {
    assert_eq!(layout(&image::go_binary()[..]), Ok(image::layout()));
}

/// A binary's bytes, counting what is read of them.
struct Counted<'a>(&'a [u8], std::cell::Cell<u64>);

impl Binary for Counted<'_> {
    fn size(&self) -> u64 {
        self.0.size()
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> bool {
        self.1.set(self.1.get() + buf.len() as u64);
        self.0.read_at(offset, buf)
    }
}

/// `bytes` zlib-compressed in an ELF compression header, as a section flagged so.
fn compressed(name: &'static str, bytes: &[u8]) -> Part {
    use std::io::Write;
    let mut e = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::best());
    e.write_all(bytes).unwrap();
    let mut out = vec![0u8; 24];
    out[0..4].copy_from_slice(&1u32.to_le_bytes());
    out[8..16].copy_from_slice(&(bytes.len() as u64).to_le_bytes());
    out.extend(e.finish().unwrap());
    Part {
        flags: 1 << 11,
        ..part(name, 1, out)
    }
}

/// Two DWARF sections of 47 MiB each, each under the one-section cap, together past the
/// layout's budget: refused from their headers, before a byte of either is inflated (the
/// compressed data, 47 KiB a section, is never read).
#[test]
fn the_sections_claims_are_summed_before_any_is_inflated() {
    let zeros = vec![0u8; 47 << 20];
    let bin = elf_with(
        &RUNTIME,
        vec![
            compressed(".debug_info", &zeros),
            compressed(".debug_str", &zeros),
        ],
    );
    drop(zeros);
    let counted = Counted(&bin, std::cell::Cell::new(0));
    assert_eq!(layout(&counted), Err(Unmeasured::Budget));
    assert!(counted.1.get() < 16 << 10, "{} bytes read", counted.1.get());
    // One of them alone fits, and is read (it holds no types: an unknown layout).
    let bin = elf_with(&RUNTIME, vec![compressed(".debug_info", &[0u8; 4096])]);
    assert_eq!(layout(&bin[..]), Err(Unmeasured::UnknownLayout));
}

/// A million one-byte type entries (a few KiB compressed) would be ~300 MiB of types: each
/// is charged to the layout's budget as it is made, and the layout is refused there. A
/// thousand fit, and are an unknown layout (none is the runtime's).
#[test]
fn a_million_tiny_types_are_refused_within_the_layout_budget() {
    for (n, want) in [
        (1usize << 20, Unmeasured::Budget),
        (1000, Unmeasured::UnknownLayout),
    ] {
        let (abbrev, info) = image::tiny_types(n);
        let bin = elf_with(
            &RUNTIME,
            vec![
                part(".debug_abbrev", 1, abbrev),
                compressed(".debug_info", &info),
            ],
        );
        assert!(bin.len() < 8 << 10, "{} bytes", bin.len());
        assert_eq!(layout(&bin[..]), Err(want), "{n} types");
    }
}

/// Go's linker writes an abbreviation table of under 1 KiB; one of 1 MiB (parsed, many
/// times that) is refused before it is parsed.
#[test]
fn a_large_abbreviation_table_is_refused_before_it_is_parsed() {
    let (mut abbrev, info) = image::dwarf();
    abbrev.resize(1 << 20, 0);
    let bin = elf_with(
        &RUNTIME,
        vec![
            compressed(".debug_abbrev", &abbrev),
            part(".debug_info", 1, info),
        ],
    );
    assert_eq!(layout(&bin[..]), Err(Unmeasured::Budget));
}
