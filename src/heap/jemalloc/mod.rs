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
        if p.identity.allocator != super::runtime::Allocator::Jemalloc {
            return Ok(false);
        }
        let remote = p
            .vmas
            .iter()
            .any(|v| v.library == Some(Library::Jemalloc) && p.on_remote(v));
        if remote {
            return Err(Unmeasured::RemoteFile);
        }
        Ok(true)
    }

    fn read(
        p: &super::shape::Process,
        memory: &mut super::memory::ProcessMemory,
        layouts: &Self::Cache,
        _: &mut super::shape::Ceiling,
    ) -> Result<Box<JemallocHeap>, Unmeasured> {
        let library = library(p.source, p.pid, p.vmas, p.remote)?;
        let binary = library.as_ref().or(p.exe).ok_or(Unmeasured::Unreadable)?;
        read_process(memory, binary, p.vmas, layouts).map(Box::new)
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
    let base = super::binaries::first_mapping(vmas, id).ok_or(Unmeasured::Unreadable)?;
    read(target, layout, layout.bias(base))
}

/// The library mapped for jemalloc (`libjemalloc.so*`), opened as the process maps it,
/// never on a FUSE or network mount; `None` when there is none: then the executable links
/// it in.
pub fn library(
    source: &crate::source::Source,
    pid: u32,
    vmas: &[Vma],
    remote: Option<&crate::parse::mountinfo::Remote>,
) -> Result<Option<crate::source::PidFile>, Unmeasured> {
    use super::binaries::{open_library, NotOpened};
    open_library(
        source,
        pid,
        vmas,
        remote,
        crate::parse::smaps::Library::Jemalloc,
    )
    .map_err(|e| match e {
        NotOpened::Remote => Unmeasured::RemoteFile,
        NotOpened::Unreadable => Unmeasured::Unreadable,
    })
}

#[cfg(test)]
mod tests;
