//! Crafted executables: what a tenant can write into its own binary.

use super::super::{layout, Unmeasured};
use super::{Binary, Elf, MAX_DWARF_BYTES, MAX_SYMBOLS_BYTES};

/// A section to put in a crafted ELF file: its name, type, flags, bytes, and the size its
/// header claims (its bytes' length unless said).
struct Part {
    name: &'static str,
    kind: u32,
    flags: u64,
    bytes: Vec<u8>,
    claimed: Option<u64>,
    link: u32,
}

fn part(name: &'static str, kind: u32, bytes: Vec<u8>) -> Part {
    Part {
        name,
        kind,
        flags: 0,
        bytes,
        claimed: None,
        link: 0,
    }
}

/// A 64-bit little-endian executable with one loadable segment and `parts` (a null
/// section and the names' table are added first).
fn elf(parts: Vec<Part>) -> Vec<u8> {
    let mut names = vec![0u8];
    let mut name_at = vec![0u32];
    for p in [".shstrtab"].iter().chain(parts.iter().map(|p| &p.name)) {
        name_at.push(names.len() as u32);
        names.extend_from_slice(p.as_bytes());
        names.push(0);
    }
    let mut out = vec![0u8; 64 + 56];
    let mut headers = vec![[0u8; 64]];
    let mut add = |out: &mut Vec<u8>, name: u32, kind: u32, flags: u64, b: &[u8], size, link| {
        let mut h = [0u8; 64];
        h[0..4].copy_from_slice(&name.to_le_bytes());
        h[4..8].copy_from_slice(&kind.to_le_bytes());
        h[8..16].copy_from_slice(&flags.to_le_bytes());
        h[0x18..0x20].copy_from_slice(&(out.len() as u64).to_le_bytes());
        h[0x20..0x28].copy_from_slice(&u64::to_le_bytes(size));
        h[0x28..0x2c].copy_from_slice(&u32::to_le_bytes(link));
        out.extend_from_slice(b);
        headers.push(h);
    };
    add(
        &mut out,
        name_at[1],
        3,
        0,
        &names.clone(),
        names.len() as u64,
        0,
    );
    for (i, p) in parts.iter().enumerate() {
        let size = p.claimed.unwrap_or(p.bytes.len() as u64);
        add(
            &mut out,
            name_at[i + 2],
            p.kind,
            p.flags,
            &p.bytes,
            size,
            p.link,
        );
    }
    let shoff = out.len() as u64;
    for h in &headers {
        out.extend_from_slice(h);
    }
    out[..4].copy_from_slice(b"\x7fELF");
    out[4] = 2;
    out[5] = 1;
    out[6] = 1;
    out[0x10..0x12].copy_from_slice(&2u16.to_le_bytes());
    out[0x20..0x28].copy_from_slice(&64u64.to_le_bytes());
    out[0x28..0x30].copy_from_slice(&shoff.to_le_bytes());
    out[0x36..0x38].copy_from_slice(&56u16.to_le_bytes());
    out[0x38..0x3a].copy_from_slice(&1u16.to_le_bytes());
    out[0x3a..0x3c].copy_from_slice(&64u16.to_le_bytes());
    out[0x3c..0x3e].copy_from_slice(&(headers.len() as u16).to_le_bytes());
    out[0x3e..0x40].copy_from_slice(&1u16.to_le_bytes());
    // PT_LOAD at 0x400000.
    out[64..68].copy_from_slice(&1u32.to_le_bytes());
    out[64 + 0x10..64 + 0x18].copy_from_slice(&0x40_0000u64.to_le_bytes());
    out
}

/// A symbol table (section 2, its strings section 3) naming `symbols` at their addresses.
fn symbols(symbols: &[(&str, u64)]) -> Vec<Part> {
    let mut strings = vec![0u8];
    let mut table = vec![0u8; 24];
    for (name, addr) in symbols {
        let mut s = [0u8; 24];
        s[0..4].copy_from_slice(&(strings.len() as u32).to_le_bytes());
        s[8..16].copy_from_slice(&addr.to_le_bytes());
        table.extend_from_slice(&s);
        strings.extend_from_slice(name.as_bytes());
        strings.push(0);
    }
    let mut symtab = part(".symtab", 2, table);
    symtab.link = 3;
    vec![symtab, part(".strtab", 3, strings)]
}

const RUNTIME: [(&str, u64); 3] = [
    ("runtime.gcController", 0x50_0000),
    ("runtime.mheap_", 0x51_0000),
    ("runtime.allp", 0x52_0000),
];

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
    assert_eq!(found, [Some(0x51_0000), Some(0x52_0000), None]);
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

#[test]
fn a_section_that_claims_bytes_past_the_file_is_refused() {
    let mut p = symbols(&RUNTIME);
    p[1].claimed = Some(1 << 40);
    assert_eq!(
        Elf::parse(&elf(p)[..]).err(),
        Some(Unmeasured::UnknownLayout)
    );
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
        assert_eq!(e.data(&bin[..], s), Err(Unmeasured::UnknownLayout));
    }
    // 255 MiB of zeros compress to a quarter of a MiB: refused from the header, before a
    // byte is inflated.
    let bomb = vec![0u8; 255 << 20];
    let bin = elf(vec![compressed(zlib(&bomb, bomb.len() as u64))]);
    drop(bomb);
    assert!(bin.len() < 1 << 20, "{} bytes", bin.len());
    let e = Elf::parse(&bin[..]).unwrap();
    let s = e.section(".debug_info").unwrap();
    assert_eq!(e.data(&bin[..], s), Err(Unmeasured::Budget));
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
        assert_eq!(got, Err(Unmeasured::Budget), "{name}");
    }
}
