//! jemalloc's kept pages, read from outside: the dirty pages its arenas keep after the
//! program freed them (given back only as they decay, `dirty_decay_ms`, or on a purge),
//! the muzzy ones (given back lazily with `MADV_FREE`), how much of each is resident, and
//! its active pages: the figures `mallctl("stats.arenas.<all>.pdirty")`, `pmuzzy` and
//! `pactive` give from inside, read from the arenas (`je_arenas`, `narenas_total`) found
//! by the binary's symbols, their fields by a layout per jemalloc version
//! ([`layout`], derived from DWARF builds), and each kept extent walked from the arenas'
//! lists of them.
//!
//! Everything read is checked before it is believed: each list of extents must say it is
//! of the state it should hold (dirty, muzzy), every extent on it must be of its arena and
//! of that state, and the pages of a list's extents must add up to the page count the
//! arena keeps for it: a layout that does not fit, or a process that crafted its lists,
//! gives no figure (`unknown_layout`), and one that moved under two reads `moving`.

#[cfg(any(test, feature = "test-support"))]
#[doc(hidden)]
pub mod image;
pub mod layout;
mod read;

use super::target::Target;
use crate::parse::smaps::Vma;
mod figure;
mod said;
pub use figure::{JemallocHeap, Unmeasured};
pub use layout::Layout;
pub use read::read;

/// The reader of jemalloc's arenas, whether it is a library or linked into the executable.
pub struct Jemalloc;

impl super::shape::HeapReader for Jemalloc {
    type Figure = Box<JemallocHeap>;
    type Reason = Unmeasured;
    type Cache = super::binaries::ByFile<Result<Layout, Unmeasured>>;
    const NAME: &'static str = "jemalloc";
    const SHARE: super::shape::Share = super::shape::Share::Allocator;
    // Its muzzy pages are purged with MADV_FREE, and counted while resident.
    const HOLDS_LAZY_FREE: bool = true;

    fn applies(p: &super::shape::Process, _: &Self::Cache) -> Result<bool, Unmeasured> {
        use crate::parse::smaps::Library;
        Ok(p.allocator_is(super::runtime::Allocator::Jemalloc, Library::Jemalloc)?)
    }

    fn read(
        p: &super::shape::Process,
        memory: &mut super::memory::ProcessMemory,
        layouts: &Self::Cache,
        _: &mut super::shape::Ceiling,
    ) -> Result<Box<JemallocHeap>, Unmeasured> {
        let binary = p.library_or_exe(crate::parse::smaps::Library::Jemalloc)?;
        read_process(memory, &binary, p.vmas, layouts).map(Box::new)
    }
}

/// A jemalloc process's kept pages: the layout of `binary` (the executable that links
/// jemalloc in, or the library that is it), read once (`layouts`), loaded where the lowest
/// of its mappings is.
pub(crate) fn read_process<T: Target>(
    target: &mut T,
    binary: &crate::source::PidFile,
    vmas: &[Vma],
    layouts: &super::binaries::ByFile<Result<Layout, Unmeasured>>,
) -> Result<JemallocHeap, Unmeasured> {
    let id = binary.identity().map_err(|_| Unmeasured::Unreadable)?;
    let layout = layouts.get_or(id, || layout::of(binary.file()));
    let layout = layout.as_ref().as_ref().map_err(|&e| e)?;
    // Mappings that do not map the binary just opened are older than it: the process
    // exec'd between the smaps read and this one. Read again soon, as a heap that moved.
    let base = super::binaries::first_mapping(vmas, id).ok_or(Unmeasured::Moving)?;
    read(target, layout, layout.bias(base))
}

#[cfg(test)]
mod tests;
