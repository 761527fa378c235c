//! CPython's small-object allocator (pymalloc), read from outside: the arenas it keeps
//! (256 KiB to 3.9, 1 MiB from 3.10), the pools in them that no object uses, and the free
//! blocks in the pools that some do. An arena is given back only when its last object
//! goes, so a worker that built many small objects and dropped most keeps the arenas
//! that still hold one: RSS stays at its peak, and glibc's `malloc_trim` never sees them.
//!
//! The figures are those `sys._debugmallocstats()` prints from inside ("# arenas
//! allocated current", "bytes in available blocks", "unused pools"), read from the state
//! the binary's symbols lead to ([`layout`]) and checked against themselves ([`read`]).
//! A free-threaded build (mimalloc) has no arenas and says so; an interpreter started
//! with `PYTHONMALLOC=malloc` has none either, and its objects are glibc's, measured there.

#[doc(hidden)]
pub mod image;
pub mod layout;
pub mod read;

use super::reader::Target;
use crate::parse::smaps::{Library, Vma};
pub use layout::Layout;

/// Why a CPython process's arenas have no figure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unmeasured {
    /// The state is in static variables a stripped build lost (3.11 and older: Debian's
    /// `python3.11`).
    Stripped,
    /// A CPython whose version has no layout here (3.8 to 3.13 have).
    UnknownVersion,
    /// A free-threaded build (`python3.13t`): objects are mimalloc's, not read.
    FreeThreaded,
    /// What was read does not fit the version's layout (another build configuration, or
    /// a crafted table).
    UnknownLayout,
    /// Its memory or the binary could not be read (no ptrace access, process gone).
    Unreadable,
    /// The arenas moved under two reads.
    Moving,
    /// The read ran out of its budget of time or pages ([`super::READER_BUDGET`]).
    Budget,
    /// It found more resident unused memory than the process has resident: not believed.
    Implausible,
    /// The interpreter is a file on a FUSE or network mount, which no reader opens.
    RemoteFile,
}

super::reads::reasons! {
    Unmeasured {
        Stripped => "stripped",
        UnknownVersion => "unknown_version",
        FreeThreaded => "free_threaded",
        UnknownLayout => "unknown_layout",
        Unreadable => "unreadable",
        Moving => "moving",
        Budget => "budget",
        Implausible => "implausible",
        RemoteFile => "remote_file",
    }
    // Its arenas moved under the read: a later one can succeed.
    transient: Moving,
}

/// What pymalloc keeps, in bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PythonHeap {
    /// The layout's version (`3.12`; `3.8-3.9` share one).
    pub version: &'static str,
    /// Arenas allocated ("# arenas allocated current").
    pub arenas: u64,
    /// One arena's size and one pool's.
    pub arena_bytes: u64,
    pub pool_bytes: u64,
    /// Pools with blocks in use, and pools with none ("unused pools": emptied, or never
    /// carved).
    pub used_pools: u64,
    pub unused_pools: u64,
    /// Blocks in use, and blocks free in the pools in use ("bytes in available blocks").
    pub allocated_bytes: u64,
    pub available_bytes: u64,
    /// Of the unused bytes, those in resident pages.
    pub unused_resident_bytes: u64,
}

impl PythonHeap {
    /// What pymalloc holds unused: free blocks in its pools, and pools with no block in
    /// use.
    pub fn unused_bytes(&self) -> u64 {
        self.available_bytes
            .saturating_add(self.unused_pools.saturating_mul(self.pool_bytes))
    }

    /// The arenas' memory.
    pub fn arenas_bytes(&self) -> u64 {
        self.arenas.saturating_mul(self.arena_bytes)
    }
}

impl super::reads::Figure for PythonHeap {
    fn held_bytes(&self) -> Option<u64> {
        Some(self.unused_resident_bytes)
    }
}

/// The reader of CPython's arenas, whether the interpreter is a library or the
/// executable.
pub struct Python;

impl super::reads::Reader for Python {
    type Figure = Box<PythonHeap>;
    type Reason = Unmeasured;
    type Cache = super::binaries::ByFile<Result<Layout, Unmeasured>>;
    const NAME: &'static str = "python";
    // Beside glibc's heap, which holds Python's large blocks.
    const SHARE: super::reads::Share = super::reads::Share::Runtime { alone: false };

    fn applies(p: &super::reads::Process) -> Result<bool, Unmeasured> {
        if p.identity.runtime != super::runtime::Runtime::Python {
            return Ok(false);
        }
        if p.vmas
            .iter()
            .any(|v| v.library == Some(Library::PythonFreeThreaded))
        {
            return Err(Unmeasured::FreeThreaded);
        }
        let remote = p.vmas.iter().any(|v| {
            matches!(v.library, Some(Library::Python | Library::PythonLibrary)) && p.on_remote(v)
        });
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
    ) -> Result<Box<PythonHeap>, Unmeasured> {
        let heap = match library(p.source, p.pid, p.vmas, p.remote) {
            Ok(Some(lib)) => read_process(memory, &lib, p.vmas, layouts),
            Ok(None) => {
                let exe = p.exe.ok_or(Unmeasured::Unreadable)?;
                read_process(memory, exe, p.vmas, layouts)
            }
            // The library's file is reachable only through map_files, which needs
            // CAP_CHECKPOINT_RESTORE: from 3.12 its exported symbols, read where it is
            // loaded, are enough.
            Err(Unmeasured::Unreadable) => loaded(memory, p.vmas),
            Err(e) => Err(e),
        };
        heap.map(Box::new)
    }
}

/// A CPython process's arenas: the layout of `binary` (the executable, or the
/// `libpython3.*.so` it loads), read once (`layouts`), loaded where the lowest of its
/// mappings is.
pub fn read_process<T: Target>(
    target: &mut T,
    binary: &crate::source::PidFile,
    vmas: &[Vma],
    layouts: &super::binaries::ByFile<Result<Layout, Unmeasured>>,
) -> Result<PythonHeap, Unmeasured> {
    let id = binary.identity().map_err(|_| Unmeasured::Unreadable)?;
    let layout = layouts.get_or(id, || layout::of(binary.file()));
    let layout = layout.as_ref().as_ref().map_err(|&e| e)?;
    let base = super::binaries::first_mapping(vmas, id).ok_or(Unmeasured::Unreadable)?;
    read::read(target, layout, layout.bias(base))
}

/// A CPython process's arenas, its state found through the dynamic symbols of the
/// `libpython3.*.so` it has loaded (`_PyRuntime`, `Py_Version`), read from its memory:
/// 3.12 and later; before, the state is in static variables only the file names.
pub fn loaded<T: Target>(target: &mut T, vmas: &[Vma]) -> Result<PythonHeap, Unmeasured> {
    let base = vmas
        .iter()
        .filter(|v| v.library == Some(Library::PythonLibrary))
        .map(|v| v.start)
        .min()
        .ok_or(Unmeasured::Unreadable)?;
    // Memory that cannot be read (the process went) is not a layout that does not fit.
    target
        .read(base, &mut [0u8; 4])
        .map_err(|_| Unmeasured::Unreadable)?;
    let symbols = super::dynsym::Symbols::of(target, base).ok_or(Unmeasured::UnknownLayout)?;
    let runtime = symbols.find(target, "_PyRuntime");
    let version = symbols.find(target, "Py_Version");
    let (Some(runtime), Some(version)) = (runtime, version) else {
        return Err(Unmeasured::Unreadable);
    };
    let layout = Layout::at(Some(version), layout::State::Runtime { runtime }, false);
    match read::read(target, &layout, 0) {
        // 3.11's statics are in the file, not reached without it.
        Err(Unmeasured::Stripped) => Err(Unmeasured::Unreadable),
        other => other,
    }
}

/// The `libpython3.*.so` the process maps, opened as the process maps it, never on a
/// FUSE or network mount; `None` when there is none: then the executable is the
/// interpreter.
pub fn library(
    source: &crate::source::Source,
    pid: u32,
    vmas: &[Vma],
    remote: Option<&crate::parse::mountinfo::Remote>,
) -> Result<Option<crate::source::PidFile>, Unmeasured> {
    use super::binaries::{open_library, NotOpened};
    open_library(source, pid, vmas, remote, Library::PythonLibrary).map_err(|e| match e {
        NotOpened::Remote => Unmeasured::RemoteFile,
        NotOpened::Unreadable => Unmeasured::Unreadable,
    })
}

#[cfg(test)]
mod tests;
