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

#[doc(hidden)]
pub mod image;
pub mod layout;
mod read;

use super::reader::Target;
use crate::parse::smaps::Vma;
pub use layout::Layout;
pub use read::read;

/// Why a jemalloc process's kept pages have no figure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unmeasured {
    /// No symbol table: the arenas cannot be found (Debian's `libjemalloc2`, a binary
    /// built with `strip`).
    Stripped,
    /// A jemalloc whose version has no layout here (5.2.1, 5.3.0 and 5.3.1 have).
    UnknownVersion,
    /// The structures read do not fit the version's layout (another build configuration,
    /// or a crafted heap).
    UnknownLayout,
    /// Its memory or the binary could not be read (no ptrace access, process gone).
    Unreadable,
    /// The lists moved under two reads.
    Moving,
    /// The read ran out of its budget of time or pages ([`super::READER_BUDGET`]), or the
    /// lists are longer than a read follows.
    Budget,
    /// It found more resident kept pages than the process has resident: not believed.
    Implausible,
    /// jemalloc is a library on a FUSE or network mount, which no reader opens.
    RemoteFile,
}

super::reads::reasons! {
    Unmeasured {
        Stripped => "stripped",
        UnknownVersion => "unknown_version",
        UnknownLayout => "unknown_layout",
        Unreadable => "unreadable",
        Moving => "moving",
        Budget => "budget",
        Implausible => "implausible",
        RemoteFile => "remote_file",
    }
    // Its lists moved under the read: a later one can succeed.
    transient: Moving,
}

/// jemalloc reads counted by how they ended.
pub type ReadCounts = super::reads::Counts<Unmeasured>;

/// What jemalloc keeps, every arena together (`stats.arenas.<all>.*`), in bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct JemallocHeap {
    /// The version whose layout read it (`5.3.0`).
    pub version: &'static str,
    /// Arenas read (the automatic ones, any the program made, the huge arena).
    pub arenas: u64,
    /// Pages in active extents (`pactive`): allocated, or in thread caches and slabs.
    pub active_bytes: u64,
    /// Dirty pages (`pdirty`): freed, kept for reuse until they decay or are purged.
    pub dirty_bytes: u64,
    /// Muzzy pages (`pmuzzy`): given back with `MADV_FREE`, the kernel takes them only
    /// under pressure.
    pub muzzy_bytes: u64,
    /// Of the dirty pages, those resident.
    pub dirty_resident_bytes: u64,
    /// Of the muzzy pages, those resident (until the kernel takes them).
    pub muzzy_resident_bytes: u64,
}

impl JemallocHeap {
    /// Resident memory jemalloc keeps that an arena purge gives back: the process's
    /// measured hoarding.
    pub fn held_bytes(&self) -> u64 {
        self.dirty_resident_bytes
            .saturating_add(self.muzzy_resident_bytes)
    }
}

impl super::reads::Figure for JemallocHeap {
    fn held_bytes(&self) -> Option<u64> {
        Some(JemallocHeap::held_bytes(self))
    }
}

/// The reader of jemalloc's arenas, whether it is a library or linked into the executable.
pub struct Jemalloc;

impl super::reads::Reader for Jemalloc {
    type Figure = Box<JemallocHeap>;
    type Reason = Unmeasured;
    type Cache = super::binaries::ByFile<Result<Layout, Unmeasured>>;
    const NAME: &'static str = "jemalloc";
    const SHARE: super::reads::Share = super::reads::Share::Allocator;

    fn applies(p: &super::reads::Process) -> Result<bool, Unmeasured> {
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
        p: &super::reads::Process,
        memory: &mut super::memory::ProcessMemory,
        layouts: &Self::Cache,
        _: &mut super::reads::Ceiling,
    ) -> Result<Box<JemallocHeap>, Unmeasured> {
        let library = library(p.source, p.pid, p.vmas, p.remote)?;
        let binary = library.as_ref().or(p.exe).ok_or(Unmeasured::Unreadable)?;
        read_process(memory, binary, p.vmas, layouts).map(Box::new)
    }
}

/// A jemalloc process's kept pages: the layout of `binary` (the executable that links
/// jemalloc in, or the library that is it), read once (`layouts`), loaded where the lowest
/// of its mappings is.
pub fn read_process<T: Target>(
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
