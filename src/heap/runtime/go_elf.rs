//! A Go executable in miniature, for the tests of the Go version reader and the fuzzer's
//! seeds (fuzz/src/seeds.rs includes this file).

/// A minimal ELF64 with a `.go.buildinfo` section as Go 1.18+ writes it.
pub fn go_elf(version: &str, inline: bool) -> Vec<u8> {
    let names = b"\0.shstrtab\0.go.buildinfo\0";
    let mut info = b"\xff Go buildinf:".to_vec();
    info.extend([8, if inline { 2 } else { 0 }]);
    info.resize(32, 0);
    info.push(version.len() as u8);
    info.extend(version.as_bytes());
    let names_off = 64u64;
    let info_off = names_off + names.len() as u64;
    let shoff = info_off + info.len() as u64;
    let mut f = vec![0u8; 64];
    f[..6].copy_from_slice(b"\x7fELF\x02\x01");
    f[0x28..0x30].copy_from_slice(&shoff.to_le_bytes());
    f[0x3a..0x3c].copy_from_slice(&64u16.to_le_bytes());
    f[0x3c..0x3e].copy_from_slice(&3u16.to_le_bytes());
    f[0x3e..0x40].copy_from_slice(&1u16.to_le_bytes());
    f.extend(names);
    f.extend(&info);
    let sh = |name: u32, off: u64, len: u64| {
        let mut s = vec![0u8; 64];
        s[..4].copy_from_slice(&name.to_le_bytes());
        s[0x18..0x20].copy_from_slice(&off.to_le_bytes());
        s[0x20..0x28].copy_from_slice(&len.to_le_bytes());
        s
    };
    f.extend(sh(0, 0, 0));
    f.extend(sh(1, names_off, names.len() as u64));
    f.extend(sh(11, info_off, info.len() as u64));
    f
}
