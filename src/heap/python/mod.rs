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

#[cfg(any(test, feature = "test-support"))]
#[doc(hidden)]
pub mod image;
pub mod layout;
pub mod read;

use super::target::Target;
use crate::parse::smaps::{Library, Vma};
mod figure;
mod said;
pub use figure::{PythonHeap, Unmeasured};
pub use layout::Layout;

/// The reader of CPython's arenas, whether the interpreter is a library or the
/// executable.
pub struct Python;

impl super::shape::HeapReader for Python {
    type Figure = Box<PythonHeap>;
    type Reason = Unmeasured;
    type Cache = super::binaries::ByFile<Result<Layout, Unmeasured>>;
    const NAME: &'static str = "python";
    // Beside glibc's heap, which holds Python's large blocks.
    const SHARE: super::shape::Share = super::shape::Share::Runtime { alone: false };
    // Pymalloc frees whole arenas with munmap.
    const HOLDS_LAZY_FREE: bool = false;

    fn applies(p: &super::shape::Process, _: &Self::Cache) -> Result<bool, Unmeasured> {
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
        p: &super::shape::Process,
        memory: &mut super::memory::ProcessMemory,
        layouts: &Self::Cache,
        _: &mut super::shape::Ceiling,
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
pub(crate) fn read_process<T: Target>(
    target: &mut T,
    binary: &crate::source::PidFile,
    vmas: &[Vma],
    layouts: &super::binaries::ByFile<Result<Layout, Unmeasured>>,
) -> Result<PythonHeap, Unmeasured> {
    let id = binary.identity().map_err(|_| Unmeasured::Unreadable)?;
    let layout = layouts.get_or(id, || layout::of(binary.file()));
    let layout = layout.as_ref().as_ref().map_err(|&e| e)?;
    // Mappings that do not map the binary just opened are older than it: the process
    // exec'd between the smaps read and this one. Read again soon, as a heap that moved.
    let base = super::binaries::first_mapping(vmas, id).ok_or(Unmeasured::Moving)?;
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
