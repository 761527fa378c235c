//! Where CPython keeps its small-object allocator's state, per version, and the binary's
//! own facts that find it: the interpreter's version (`Py_Version`, exported from 3.11),
//! and the addresses of the state's parts in its symbol tables.
//!
//! - 3.8 to 3.11: static variables of `Objects/obmalloc.c` (`arenas`, `maxarenas`,
//!   `narenas_currently_allocated`), in `.symtab` only: a stripped build loses them.
//! - 3.12: the main interpreter's `obmalloc` state, inside `_PyRuntime` (exported in
//!   `.dynsym`, so it survives `--strip-all`).
//! - 3.13: a pointer to that state, inside `_PyRuntime`, whose debug offsets say where
//!   the main interpreter is (its place moved between 3.13's patch releases).
//!
//! The places inside `_PyRuntime` are those of the release builds' DWARF (`gdb`'s offsets,
//! checked by `tests/python.rs` against each build here); what is read there is checked
//! against itself before it is believed (see `read.rs`).

use super::Unmeasured;
use crate::heap::elf::{Binary, Elf, Fault};

/// The sizes of one version's arenas and pools (x86-64, 64-bit).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sizes {
    /// `ARENA_SIZE`: 256 KiB to 3.9, 1 MiB from 3.10.
    pub arena: u64,
    /// `POOL_SIZE`: 4 KiB to 3.9, 16 KiB from 3.10 (with the radix tree, the default).
    pub pool: u64,
}

impl Sizes {
    /// Pools an arena holds when its address is pool-aligned (one fewer when not).
    pub fn pools(self) -> u64 {
        self.arena / self.pool
    }
}

/// Sizes before 3.10.
pub(crate) const SMALL: Sizes = Sizes {
    arena: 256 << 10,
    pool: 4 << 10,
};
/// Sizes from 3.10 (`USE_LARGE_ARENAS`, `USE_LARGE_POOLS`).
pub(crate) const LARGE: Sizes = Sizes {
    arena: 1 << 20,
    pool: 16 << 10,
};

/// `sizeof(struct pool_header)` rounded up to `ALIGNMENT`: `POOL_OVERHEAD`.
pub(crate) const POOL_OVERHEAD: u64 = 48;
/// `ALIGNMENT` on 64-bit: a size class's blocks are `(index + 1) * 16` bytes.
pub(crate) const ALIGNMENT: u64 = 16;
/// `NB_SMALL_SIZE_CLASSES`: 512 / 16.
pub(crate) const SIZE_CLASSES: u64 = 32;
/// `sizeof(struct arena_object)`.
pub(crate) const ARENA_OBJECT: u64 = 48;

/// Where the fields of `struct _obmalloc_mgmt` are (3.12 and 3.13, the same), from its
/// start; the state's `mgmt` follows its `pools` (512 bytes).
pub const MGMT_IN_STATE: u64 = 512;
pub const MGMT_ARENAS: u64 = 0;
pub const MGMT_MAXARENAS: u64 = 8;
pub const MGMT_NARENAS: u64 = 552;

/// Where the main interpreter's allocator state is, per minor version from 3.12: where
/// the main interpreter lies in `_PyRuntime` (`_main_interpreter`: 3.12's from its DWARF;
/// `None`, 3.13, whose place moved between patch releases, 0x15920 in 3.13.0 and 0x15950 in
/// 3.13.5: from `_PyRuntime`'s own debug offsets, [`DEBUG_COOKIE`]), where
/// `PyInterpreterState.obmalloc` lies in it, and whether that field is the state (3.12)
/// or a pointer to it (3.13).
pub const IN_RUNTIME: [(u32, Option<u64>, u64, bool); 2] =
    [(12, Some(0x12a68), 0xf78, false), (13, None, 0x2a30, true)];

/// `_PyRuntime` starts with `_Py_DebugOffsets` from 3.13, for debuggers outside the
/// process: its cookie, then the version, then (at [`DEBUG_INTERPRETERS_HEAD`]) where
/// `_PyRuntime.interpreters.head` is; `interpreters.main` follows `head`.
pub(crate) const DEBUG_COOKIE: &[u8; 8] = b"xdebugpy";
pub const DEBUG_INTERPRETERS_HEAD: u64 = 40;
/// The main interpreter lies inside `_PyRuntime`, within this many bytes of its start
/// (0x15950 in 3.13.5): a place further out is not believed.
pub(crate) const RUNTIME_SPAN: u64 = 1 << 20;

/// How the state is reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// 3.8-3.11's static variables, at their link-time addresses.
    Statics {
        arenas: u64,
        maxarenas: u64,
        narenas: u64,
    },
    /// 3.12 and later: inside `_PyRuntime`, at its link-time address.
    Runtime { runtime: u64 },
}

/// What is read of one binary (the executable, or `libpython3.*.so`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    /// `Py_Version`'s link-time address (3.11 and later).
    pub py_version: Option<u64>,
    pub state: State,
    /// The radix tree's root is there (`arena_map_root`, 3.10 and 3.11): large pools.
    pub radix: bool,
    /// Where its link-time addresses land.
    load: crate::heap::elf::Load,
}

impl Layout {
    /// A layout whose state is `state`, with addresses as they are in the process: a
    /// binary loaded where it was linked, or symbols read where the library is loaded.
    pub fn at(py_version: Option<u64>, state: State, radix: bool) -> Layout {
        Layout {
            py_version,
            state,
            radix,
            load: crate::heap::elf::Load::default(),
        }
    }

    /// The amount to add to link-time addresses, given where the binary's first mapping
    /// (file offset 0) starts.
    pub fn bias(&self, first_mapping: u64) -> u64 {
        self.load.bias(first_mapping)
    }
}

/// The layout of the CPython in `bin`: where its allocator's state is.
pub fn of<B: Binary + ?Sized>(bin: &B) -> Result<Layout, Unmeasured> {
    let fault = |f: Fault| match f {
        Fault::Stripped => Unmeasured::Stripped,
        Fault::TooLarge => Unmeasured::Budget,
        Fault::Malformed => Unmeasured::UnknownLayout,
    };
    let elf = Elf::parse(bin).map_err(fault)?;
    let find = |name: &'static [u8]| elf.find_named(bin, name).map_err(fault);
    let runtime = find(b"_PyRuntime")?.ok_or(Unmeasured::UnknownVersion)?;
    let py_version = find(b"Py_Version")?;
    let statics = if elf.has_symtab() {
        let arenas = find(b"arenas")?;
        let maxarenas = find(b"maxarenas")?;
        let narenas = find(b"narenas_currently_allocated")?;
        // 3.8 brought `nfp2lasta`; before it, other size classes (8-byte alignment).
        let modern = find(b"nfp2lasta")?.is_some();
        match (arenas, maxarenas, narenas) {
            (Some(arenas), Some(maxarenas), Some(narenas)) if modern => Some(State::Statics {
                arenas,
                maxarenas,
                narenas,
            }),
            (Some(_), Some(_), _) => return Err(Unmeasured::UnknownVersion),
            _ => None,
        }
    } else {
        None
    };
    let radix = elf.has_symtab() && find(b"arena_map_root")?.is_some();
    let state = match (statics, py_version) {
        (Some(s), _) => s,
        // Without the statics and without `Py_Version`: 3.10 or older, stripped.
        (None, None) => return Err(Unmeasured::Stripped),
        // 3.11 stripped is told from 3.12 and later once its version is read.
        (None, Some(_)) => State::Runtime { runtime },
    };
    Ok(Layout {
        py_version,
        state,
        radix,
        load: elf.load(),
    })
}
