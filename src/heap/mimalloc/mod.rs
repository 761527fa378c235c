//! mimalloc's held memory, read from outside: the resident bytes of its arenas and
//! segments that `mi_collect(true)` in every thread would give back (free spans, pages
//! with no live block, arena blocks no segment uses), which mimalloc otherwise purges only
//! after `purge_delay` and only when the owning thread next allocates: an idle thread's
//! heap keeps them for good. Read from the arenas (`mi_arenas`, `mi_arena_count`) and the
//! segment map (`mi_segment_map`) found by the binary's symbols, their fields by a layout
//! per mimalloc version ([`layout`], derived from DWARF builds), the version from
//! `mi_version()`'s own code.
//!
//! Everything read is checked before it is believed: each segment's cookie must be its
//! address XOR the main heap's (as mimalloc checks it), its size, slices and entries must
//! agree, its spans must tile it, it must lie in its arena's blocks in use, and no two
//! arenas or segments may overlap: a layout that does not fit, or a process that crafted
//! its segments, gives no figure (`unknown_layout`), and one that moved under two reads
//! `moving`. mimalloc 3 keeps its heap in another shape, read by `v3.rs`: its arenas
//! from `subproc_main`, each page from the arena's metadata, checked to name its arena
//! and its place.

#[cfg(any(test, feature = "test-support"))]
#[doc(hidden)]
pub mod image;
pub mod layout;
mod read;
mod resident;
mod v3;

use super::target::Target;
use crate::parse::smaps::Vma;
mod figure;
mod said;
pub use figure::{MimallocHeap, Unmeasured};
pub use layout::Symbols;
pub use read::read;

/// The reader of mimalloc's segments, whether it is a library or linked into the
/// executable.
pub struct Mimalloc;

impl super::shape::HeapReader for Mimalloc {
    type Figure = MimallocHeap;
    type Reason = Unmeasured;
    type Cache = super::binaries::ByFile<Result<Symbols, Unmeasured>>;
    const NAME: &'static str = "mimalloc";
    const SHARE: super::shape::Share = super::shape::Share::Allocator;
    // Its held pages are resident ones; what it purged with MADV_FREE (`purge_decommits`
    // off) is the process's LazyFree, not held.
    const HOLDS_LAZY_FREE: bool = false;

    fn applies(p: &super::shape::Process, _: &Self::Cache) -> Result<bool, Unmeasured> {
        use crate::parse::smaps::Library;
        Ok(p.allocator_is(super::runtime::Allocator::Mimalloc, Library::Mimalloc)?)
    }

    fn read(
        p: &super::shape::Process,
        memory: &mut super::memory::ProcessMemory,
        symbols: &Self::Cache,
        _: &mut super::shape::Ceiling,
    ) -> Result<MimallocHeap, Unmeasured> {
        let binary = p.library_or_exe(crate::parse::smaps::Library::Mimalloc)?;
        read_process(memory, &binary, p.vmas, symbols)
    }
}

/// A mimalloc process's held memory: the symbols of `binary` (the executable that links
/// mimalloc in, or the library that is it), read once (`symbols`), loaded where the lowest
/// of its mappings is.
pub(crate) fn read_process<T: Target>(
    target: &mut T,
    binary: &crate::source::PidFile,
    vmas: &[Vma],
    symbols: &super::binaries::ByFile<Result<Symbols, Unmeasured>>,
) -> Result<MimallocHeap, Unmeasured> {
    let id = binary.identity().map_err(|_| Unmeasured::Unreadable)?;
    let found = symbols.get_or(id, || layout::of(binary.file()));
    let found = found.as_ref().as_ref().map_err(|&e| e)?;
    // Mappings that do not map the binary just opened are older than it: the process
    // exec'd between the smaps read and this one. Read again soon, as a heap that moved.
    let base = super::binaries::first_mapping(vmas, id).ok_or(Unmeasured::Moving)?;
    read(target, found, found.bias(base))
}

#[cfg(test)]
mod tests;
