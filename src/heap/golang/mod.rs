//! A Go program's heap, read from outside: the runtime's own account of it
//! (`runtime.gcController`: heap in use, free, released, the GC goal, `GOMEMLIMIT`), and
//! which of its free pages are resident (the page allocator's bitmaps in
//! `runtime.mheap_.pages`, then `pagemap`). Where the runtime keeps them comes from the
//! binary itself: the variables by name in its symbol table, their fields' offsets from its
//! DWARF, never from a table of offsets per Go version (fields move between versions).
//!
//! [`layout`] is pure over the executable's bytes (once per binary); [`read`] is pure over
//! a [`Target`] (once per deep read). A stripped binary (`-ldflags=-s -w`), a layout that
//! lacks a field, or figures that do not hold still give a reason and no figure.

//!
//! The module holds the types both halves share and the cache of layouts by binary;
//! `layout.rs` reads a binary, `read.rs` reads a process.

#[cfg(any(test, feature = "test-support"))]
#[doc(hidden)]
pub mod image;
mod layout;
mod read;
mod said;

pub use super::elf::Binary;
pub use layout::layout;
pub use read::read;

use super::target::Target;
use crate::parse::smaps::Vma;

/// Why a Go heap has no figure: the `outcome` label of `membloat_go_reads_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Unmeasured {
    /// No symbol table (`-ldflags=-s`), or no `runtime.gcController` in it.
    Stripped,
    /// No DWARF (`-ldflags=-w`): the fields' places are unknown.
    NoDwarf,
    /// The DWARF lacks a type or field this reader needs: a Go version it does not know.
    UnknownLayout,
    /// The process's memory could not be read (no ptrace access, process gone).
    Unreadable,
    /// The figures moved under two reads, or disagree with the page allocator's bitmaps.
    Moving,
    /// The read ran out of its budget of time or pages ([`super::READER_BUDGET`]), or
    /// the DWARF a layout needs is more than its budget (`MAX_LAYOUT_BYTES`).
    Budget,
    /// The free heap it found in resident pages is more than the process has resident:
    /// not believed.
    Implausible,
}

impl From<super::elf::Fault> for Unmeasured {
    fn from(f: super::elf::Fault) -> Unmeasured {
        match f {
            super::elf::Fault::TooLarge => Unmeasured::Budget,
            super::elf::Fault::Malformed => Unmeasured::UnknownLayout,
            super::elf::Fault::Stripped => Unmeasured::Stripped,
        }
    }
}

super::shape::reasons! {
    Unmeasured {
        Stripped => "stripped",
        NoDwarf => "no_dwarf",
        UnknownLayout => "unknown_layout",
        Unreadable => "unreadable",
        Moving => "moving",
        Budget => "budget",
        Implausible => "implausible",
    }
    // Its figures moved under the read: a later one can succeed.
    transient: Moving,
}

/// The runtime's figures, as `runtime/metrics` names them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GoHeap {
    /// Bytes in spans in use (`/memory/classes/heap/objects` plus `.../unused`).
    pub in_use_bytes: u64,
    /// Free and not released to the OS (`/memory/classes/heap/free:bytes`): what the
    /// runtime keeps for later allocations.
    pub free_bytes: u64,
    /// Of the free bytes, those in resident pages: the process's measured hoarding.
    pub free_resident_bytes: u64,
    /// Released to the OS (`/memory/classes/heap/released:bytes`).
    pub released_bytes: u64,
    /// Heap objects allocated and not freed, as the GC last swept them.
    pub objects_bytes: u64,
    /// The GC's goal as `GOGC` sets it (`/gc/heap/goal:bytes` unless `GOMEMLIMIT` binds).
    pub gc_percent_goal_bytes: u64,
    /// `GOMEMLIMIT` (`/gc/gomemlimit:bytes`; `math.MaxInt64` when unset).
    pub memory_limit_bytes: u64,
}

impl GoHeap {
    /// `GOMEMLIMIT`, when one is set (the runtime keeps `math.MaxInt64` for none).
    pub(crate) fn memory_limit(&self) -> Option<u64> {
        (self.memory_limit_bytes < i64::MAX as u64).then_some(self.memory_limit_bytes)
    }
}

impl super::shape::Figure for GoHeap {
    fn held_bytes(&self) -> Option<u64> {
        Some(self.free_resident_bytes)
    }
}

/// The reader of a Go runtime's heap.
pub struct Go;

impl super::shape::HeapReader for Go {
    type Figure = Box<GoHeap>;
    type Reason = Unmeasured;
    type Cache = super::binaries::ByFile<Result<Layout, Unmeasured>>;
    const NAME: &'static str = "go";
    const SHARE: super::shape::Share = super::shape::Share::Runtime { alone: true };
    // Its held bytes are the free pages not yet scavenged; those the scavenger gave back
    // (with MADV_FREE under GODEBUG=madvdontneed=0) are released, not held.
    const HOLDS_LAZY_FREE: bool = false;

    fn applies(p: &super::shape::Process, _: &Self::Cache) -> Result<bool, Unmeasured> {
        Ok(p.identity.runtime == super::runtime::Runtime::Go)
    }

    fn read(
        p: &super::shape::Process,
        memory: &mut super::memory::ProcessMemory,
        layouts: &Self::Cache,
        _: &mut super::shape::Ceiling,
    ) -> Result<Box<GoHeap>, Unmeasured> {
        let exe = p.exe.ok_or(Unmeasured::Unreadable)?;
        read_process(memory, exe, p.vmas, layouts).map(Box::new)
    }
}

/// Where the runtime keeps what [`read`] needs, in one binary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    /// Link-time addresses of `runtime.gcController` and `runtime.mheap_`.
    gc_controller: u64,
    mheap: u64,
    /// The lowest address a loadable segment asks for: a PIE's load bias is where the
    /// kernel put it less this.
    first_vaddr: u64,
    /// Offsets in `runtime.gcControllerState`, each of an 8-byte value.
    heap_in_use: u64,
    heap_free: u64,
    heap_released: u64,
    total_alloc: u64,
    total_free: u64,
    gc_percent_heap_goal: u64,
    memory_limit: u64,
    /// `runtime.mheap.pages` + `pageAlloc.chunks`: the L1 array of pointers to L2 arrays
    /// of `pallocData`.
    chunks: u64,
    l1_entries: u64,
    l2_entries: u64,
    /// `runtime.mheap.pages` + `pageAlloc.inUse` + `addrRanges.ranges`: a slice of
    /// `addrRange`, each `base` and `limit` addresses.
    in_use_ranges: u64,
    range_bytes: u64,
    range_base: u64,
    range_limit: u64,
    /// `runtime.pallocData`: its size, and where its allocated and scavenged bitmaps are.
    palloc_bytes: u64,
    palloc_alloc: u64,
    palloc_scavenged: u64,
    /// Link-time address of `runtime.allp` (a slice of `*p`), and where a P keeps its page
    /// cache (`p.pcache`): up to 64 free pages taken from the bitmaps, which mark them
    /// allocated while the runtime still counts them free.
    allp: u64,
    pcache: u64,
    pcache_base: u64,
    pcache_free: u64,
    pcache_scav: u64,
    /// A position-independent executable, loaded wherever the kernel put it.
    pie: bool,
}

impl Layout {
    /// Where the kernel loaded a binary of this layout, given the start of its first
    /// mapping (file offset 0): the amount to add to its link-time addresses.
    pub fn bias(&self, first_mapping: u64) -> u64 {
        let load = super::elf::Load {
            first_vaddr: self.first_vaddr,
            pie: self.pie,
        };
        load.bias(first_mapping)
    }
}

/// The runtime's page: 8 KiB on every 64-bit platform Go supports.
pub(crate) const GO_PAGE: u64 = 8192;

/// A Go process's heap: its binary's layout (read once), its load address, its figures.
pub(crate) fn read_process<T: Target>(
    target: &mut T,
    exe: &crate::source::PidFile,
    vmas: &[Vma],
    layouts: &super::binaries::ByFile<Result<Layout, Unmeasured>>,
) -> Result<GoHeap, Unmeasured> {
    let id = exe.identity().map_err(|_| Unmeasured::Unreadable)?;
    // Each binary's symbols and DWARF are read once, whatever number of processes run it.
    let layout = layouts.get_or(id, || layout(exe.file()));
    let layout = layout.as_ref().as_ref().map_err(|&e| e)?;
    // Mappings that do not map the binary just opened are older than it: the process
    // exec'd between the smaps read and this one. Read again soon, as a heap that moved.
    let base = super::binaries::first_mapping(vmas, id).ok_or(Unmeasured::Moving)?;
    read(target, layout, layout.bias(base))
}
