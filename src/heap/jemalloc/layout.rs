//! Where jemalloc keeps what is read, per version: the places of the fields in `arena_t`
//! and in an extent (`extent_t` in 5.2, `edata_t` in 5.3), taken from the DWARF of
//! builds of each version as `tikv-jemallocator` makes them (`gdb`'s offsets of the
//! fields, checked by `tests/jemalloc.rs` against the debug builds), and the binary's own
//! facts: the version string it carries, the addresses of `je_arenas` and
//! `narenas_total` in its symbol table, where it is loaded.

use super::Unmeasured;
use crate::heap::elf::{Binary, Elf, Fault};

/// One version's places, in bytes from the start of the structure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Offsets {
    /// `arena_t`: `nactive` (5.2) or `pa_shard.nactive` (5.3), a `size_t`.
    pub nactive: u64,
    /// `arena_t`: each set of dirty extents (`extents_dirty`; 5.3: `ecache_dirty`'s `eset`
    /// and `guarded_eset`), by where its `lru` list is; its `npages` follows at +8 and its
    /// `state` at +16.
    pub dirty: &'static [u64],
    /// The same for the muzzy extents.
    pub muzzy: &'static [u64],
    /// An extent: `e_bits` (arena index in the low 12 bits, the state further up),
    /// `e_addr`, `e_size_esn` and the next extent on its list (`ql_link`, 5.3:
    /// `ql_link_inactive`).
    pub e_bits: u64,
    pub e_addr: u64,
    pub e_size: u64,
    pub e_next: u64,
    /// Where the state is in `e_bits`, and its width.
    pub state_shift: u32,
    pub state_width: u32,
}

/// The versions read, with their places (x86-64, 4 KiB pages: `LG_PAGE` 12).
pub const VERSIONS: [(&str, Offsets); 3] = [
    (
        "5.2.1",
        Offsets {
            nactive: 10344,
            dirty: &[15416],
            muzzy: &[20384],
            e_bits: 0,
            e_addr: 8,
            e_size: 16,
            e_next: 24,
            state_shift: 16,
            state_width: 2,
        },
    ),
    (
        "5.3.0",
        Offsets {
            nactive: 10656,
            dirty: &[20472, 30128],
            muzzy: &[39912, 49568],
            e_bits: 0,
            e_addr: 8,
            e_size: 16,
            e_next: 64,
            state_shift: 17,
            state_width: 3,
        },
    ),
    (
        "5.3.1",
        Offsets {
            nactive: 12296,
            dirty: &[22096, 31752],
            muzzy: &[41536, 51192],
            e_bits: 0,
            e_addr: 8,
            e_size: 16,
            e_next: 64,
            state_shift: 17,
            state_width: 3,
        },
    ),
];

/// jemalloc's page (`LG_PAGE` 12 on x86-64).
pub const PAGE: u64 = 4096;
/// `extent_state_dirty` and `extent_state_muzzy`, in every version read.
pub(crate) const STATE_DIRTY: u64 = 1;
pub(crate) const STATE_MUZZY: u64 = 2;

/// What is read of one binary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    pub version: &'static str,
    pub offsets: Offsets,
    /// Link-time addresses of `je_arenas` (an array of pointers to `arena_t`) and
    /// `narenas_total` (an `unsigned`).
    pub arenas: u64,
    pub narenas_total: u64,
    /// Where its link-time addresses land.
    load: crate::heap::elf::Load,
}

impl Layout {
    /// A layout of `version` with `offsets` whose arenas are at `arenas` and
    /// `narenas_total`, in a binary loaded where it was linked (tests, the fuzzer).
    #[doc(hidden)]
    pub fn at(version: &'static str, offsets: Offsets, arenas: u64, narenas_total: u64) -> Layout {
        Layout {
            version,
            offsets,
            arenas,
            narenas_total,
            load: crate::heap::elf::Load::default(),
        }
    }

    /// The amount to add to link-time addresses, given where the binary's first mapping
    /// (file offset 0) starts.
    pub fn bias(&self, first_mapping: u64) -> u64 {
        self.load.bias(first_mapping)
    }
}

/// The read-only data searched for the version string.
const MAX_RODATA_BYTES: u64 = 64 << 20;

/// The layout of the jemalloc in `bin`.
pub fn of<B: Binary + ?Sized>(bin: &B) -> Result<Layout, Unmeasured> {
    let fault = |f: Fault| match f {
        Fault::Stripped => Unmeasured::Stripped,
        Fault::TooLarge => Unmeasured::Budget,
        Fault::Malformed => Unmeasured::UnknownLayout,
    };
    let elf = Elf::parse(bin).map_err(fault)?;
    if !elf.has_symtab() {
        return Err(Unmeasured::Stripped);
    }
    // `je_arenas` with the prefix of the build (`_rjem_je_arenas` in tikv-jemallocator's);
    // `narenas_total` is static, under its own name.
    let arenas = elf
        .find_symbol(bin, |n| n.ends_with(b"je_arenas").then_some(()))
        .map_err(fault)?;
    let total = elf
        .find_symbol(bin, |n| (n == b"narenas_total").then_some(()))
        .map_err(fault)?;
    let (Some((_, arenas)), Some((_, narenas_total))) = (arenas, total) else {
        return Err(Unmeasured::Stripped);
    };
    let (version, offsets) = *VERSIONS
        .iter()
        .find(|(v, _)| carries_version(&elf, bin, v))
        .ok_or(Unmeasured::UnknownVersion)?;
    Ok(Layout {
        version,
        offsets,
        arenas,
        narenas_total,
        load: elf.load(),
    })
}

/// Whether `bin` carries jemalloc's version string for `version`, as `mallctl("version")`
/// gives it: `5.3.0-0-g54eaed1d8b56b1aa528be3bdd1877e59c56fa90c` (the version, commits
/// since it, and `g` and the commit's 40 hex digits).
fn carries_version<B: Binary + ?Sized>(elf: &Elf, bin: &B, version: &str) -> bool {
    let needle = format!("{version}-");
    let described = |after: &[u8]| {
        let digits = after.iter().take_while(|b| b.is_ascii_digit()).count();
        let rest = &after[digits..];
        digits > 0
            && rest.len() >= 43
            && rest.starts_with(b"-g")
            && rest[2..42].iter().all(|b| b.is_ascii_hexdigit())
            && rest[42] == 0
    };
    elf.section_holds_where(
        bin,
        ".rodata",
        needle.as_bytes(),
        48,
        MAX_RODATA_BYTES,
        described,
    )
    .unwrap_or(false)
}
