//! The heap walk: what glibc's allocator really holds free inside a process, measured from
//! outside through `/proc/PID/mem` (chunk headers only) and `/proc/PID/pagemap` (which
//! pages of the free chunks are resident), for deep-tier candidates.
//!
//! `walk` and `runtime` are pure; this module does the reading, through [`Source`]. The
//! target never notices: no ptrace stop, no signal, only `pread`s at header addresses.
//! Nothing read is kept or logged: the header window is wiped after each heap.

pub mod binaries;
pub mod elf;
pub mod glibc;
pub use glibc::{arenas, freelist, process, walk};
pub mod golang;
#[doc(hidden)]
pub mod image;
pub mod jemalloc;
pub mod jvm;
pub mod linked;
pub mod memory;
pub mod reader;
pub mod reads;
pub mod runtime;

use crate::parse::smaps::{Library, Vma};
use crate::source::Source;
use glibc::measure::measure_process;
pub use glibc::measure::{
    measure, HeapMeasure, Outcome, WalkCounts, CROSS_CHECK_CHUNKS, CROSS_CHECK_HEAP_BYTES,
    MAX_FREE_CHUNKS,
};
use memory::ProcessMemory;
pub use process::bounds;
use runtime::Identity;

/// What every reader learns once per binary, owned by the scanner that reads the
/// processes (its deep tier), each bounded.
pub struct Binaries {
    /// The allocator each executable links in (`linked`).
    pub linked: binaries::ByFile<Option<runtime::Allocator>>,
    /// Go binaries' layouts (their symbols and DWARF).
    pub go: binaries::ByFile<Result<golang::Layout, golang::Unmeasured>>,
    /// jemalloc binaries' layouts (their symbols and version string).
    pub jemalloc: binaries::ByFile<Result<jemalloc::Layout, jemalloc::Unmeasured>>,
}

impl Default for Binaries {
    fn default() -> Self {
        Binaries {
            linked: binaries::ByFile::new(256),
            go: binaries::ByFile::new(64),
            jemalloc: binaries::ByFile::new(64),
        }
    }
}

/// What a deep read learned about a process's allocator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeapReading {
    pub identity: Identity,
    /// The measurement, or why there is none (`None`: the walk is switched off).
    pub walk: Option<Result<HeapMeasure, Outcome>>,
    /// The process's memory cgroup (`/proc/PID/cgroup`), as the cgroup collector names
    /// it: where its hoarding counts against a container's limit.
    pub memory_cgroup: Option<String>,
    /// A JVM's own account of its Java heap (its perf data), or why there is none; `None`
    /// for other runtimes and when the walk (reading process memory) is switched off.
    pub java: Option<Result<Box<jvm::JavaHeap>, jvm::Unmeasured>>,
    /// A Go runtime's own account of its heap, or why there is none; `None` for other
    /// runtimes and when the walk is switched off.
    pub go: Option<Result<Box<golang::GoHeap>, golang::Unmeasured>>,
    /// What jemalloc keeps, or why there is no figure; `None` for other allocators and
    /// when the walk is switched off.
    pub jemalloc: Option<Result<Box<jemalloc::JemallocHeap>, jemalloc::Unmeasured>>,
}

impl HeapReading {
    pub fn measured(&self) -> Option<&HeapMeasure> {
        self.walk.as_ref().and_then(|w| w.as_ref().ok())
    }
}

/// What one reader (glibc's heaps, a JVM's, a Go runtime's) may spend on a process: 16 Mi
/// pagemap entries (64 GiB of 4 KiB pages whose presence the mappings' `Rss` cannot tell,
/// ~0.6 s here), however the process shaped its memory, beside the walks' own caps on
/// chunks; and 5 s of wall time (the read timeout's default), for reads that are slow in
/// themselves. The time is generous: a slow machine (QEMU's TCG runs a walk some 50 times
/// slower) must not lose a figure to it. A reader that runs out gives no figure
/// (`budget`), and the process is read again only after a back-off.
pub const READER_BUDGET: memory::Budget = memory::Budget {
    time: std::time::Duration::from_secs(5),
    pages: 1 << 24,
};

/// The most a process's readers together may report as resident and free: its resident
/// anonymous memory plus its resident shared memory, as the mappings say (and, for ZGC,
/// the pages committed to its heap file: see [`read`]). A figure above it cannot be true
/// and is not served.
pub fn resident_ceiling(vmas: &[Vma]) -> u64 {
    vmas.iter()
        .map(|v| {
            if v.perms[3] == b's' {
                v.rss_bytes
            } else {
                v.anonymous_bytes
            }
        })
        .fold(0u64, u64::saturating_add)
}

/// Tells the allocator and runtime of a process from its mappings and executable, and
/// measures its heaps when they are glibc's and `walk` is on.
///
/// Each reader has [`READER_BUDGET`], checked as it reads; their figures of free memory in
/// resident pages together may not exceed [`resident_ceiling`]: one that would is
/// `implausible`, never served.
pub fn read(source: &Source, pid: u32, vmas: &[Vma], walk: bool) -> HeapReading {
    read_with(source, pid, vmas, walk, &Binaries::default())
}

/// [`read`], with what is learnt once per binary kept in `binaries` (the scanner's).
pub fn read_with(
    source: &Source,
    pid: u32,
    vmas: &[Vma],
    walk: bool,
    binaries: &Binaries,
) -> HeapReading {
    let mut libs = crate::parse::smaps::Libraries::default();
    for l in vmas.iter().filter_map(|v| v.library) {
        libs.insert(l);
    }
    // No file of a FUSE or network mount is opened or faulted in: its server (any user's
    // program) could hold the read forever. A binary there is not read (not told Go).
    let remote = source.remote_mounts(pid, &mut crate::source::Buffer::default());
    let on_remote = |v: &Vma| {
        v.file_id
            .is_some_and(|(dev, _)| remote.as_ref().is_none_or(|r| r.has_device(dev)))
    };
    let exe = source
        .open_pid_local(pid, "exe", remote.as_ref())
        .ok()
        .flatten();
    let go = exe
        .as_ref()
        .and_then(|exe| runtime::go_version(|off, buf| exe.read_exact_at(off, buf).is_ok()));
    let linked = exe
        .as_ref()
        .and_then(|e| linked::allocator(e, &binaries.linked));
    let identity = runtime::identify(libs, go, linked);
    if !walk {
        return HeapReading {
            identity,
            walk: None,
            memory_cgroup: None,
            java: None,
            go: None,
            jemalloc: None,
        };
    }
    // Its memory is opened only when something is read from it: glibc's heaps, a JVM's
    // perf data, a Go runtime's figures.
    let glibc = identity.allocator == runtime::Allocator::Glibc;
    let java = identity.runtime == runtime::Runtime::Jvm;
    let golang = identity.runtime == runtime::Runtime::Go;
    let je = identity.allocator == runtime::Allocator::Jemalloc;
    let mut target = (glibc || java || golang || je)
        .then(|| ProcessMemory::open(source, pid).map(|m| m.with_mappings(vmas)))
        .flatten();
    let mut ceiling = Ceiling(resident_ceiling(vmas));
    let libc_remote = vmas
        .iter()
        .any(|v| v.library == Some(Library::Glibc) && on_remote(v));
    let outcome = match &mut target {
        _ if !glibc => Err(Outcome::NotGlibc),
        _ if libc_remote => Err(Outcome::RemoteFile),
        Some(target) => {
            target.budget(READER_BUDGET);
            let (bounds, libc) = bounds(vmas);
            match measure_process(target, &bounds, &libc) {
                // A read that failed for the budget may have been taken for another fault.
                _ if target.exhausted() => Err(Outcome::Budget),
                Ok(m) if !ceiling.take(m.free_resident_bytes()) => Err(Outcome::Implausible),
                other => other,
            }
        }
        None => Err(Outcome::Unreadable),
    };
    let jvm_remote = vmas.iter().any(|v| {
        matches!(v.library, Some(Library::JvmLibrary | Library::JvmPerfData)) && on_remote(v)
    });
    let java = java.then(|| match &mut target {
        _ if jvm_remote => Err(jvm::Unmeasured::RemoteFile),
        Some(target) => {
            target.budget(READER_BUDGET);
            let read = jvm::read(target, vmas, || {
                source.open_file_bytes(pid, "/memfd:java_heap (deleted)")
            });
            // ZGC's heap is a memfd whose committed pages are the process's RAM whether or
            // not a view maps them (fallocate commits without touching): its allocated
            // bytes join what the process holds.
            if let Ok(h) = &read {
                if vmas.iter().any(|v| v.library == Some(Library::ZgcHeap)) {
                    ceiling.0 = ceiling.0.saturating_add(h.resident_bytes.unwrap_or(0));
                }
            }
            match read {
                _ if target.exhausted() => Err(jvm::Unmeasured::Budget),
                Ok(h) if !ceiling.take(h.held_bytes().unwrap_or(0)) => {
                    Err(jvm::Unmeasured::Implausible)
                }
                other => other.map(Box::new),
            }
        }
        None => Err(jvm::Unmeasured::Unreadable),
    });
    let go = golang.then(|| read_go(target.as_mut(), exe.as_ref(), vmas, binaries, &mut ceiling));
    let jemalloc = je.then(|| {
        let library = jemalloc::library(source, pid, vmas, remote.as_ref())?;
        let binary = library.as_ref().or(exe.as_ref());
        read_jemalloc(target.as_mut(), binary, vmas, binaries, &mut ceiling)
    });
    HeapReading {
        identity,
        walk: Some(outcome),
        memory_cgroup: None,
        java,
        go,
        jemalloc,
    }
}

/// A Go runtime's figures, from its executable's layout, within the reader's budget and
/// the process's resident memory.
fn read_go(
    target: Option<&mut ProcessMemory>,
    exe: Option<&crate::source::PidFile>,
    vmas: &[Vma],
    binaries: &Binaries,
    ceiling: &mut Ceiling,
) -> Result<Box<golang::GoHeap>, golang::Unmeasured> {
    let (Some(target), Some(exe)) = (target, exe) else {
        return Err(golang::Unmeasured::Unreadable);
    };
    target.budget(READER_BUDGET);
    match golang::read_process(target, exe, vmas, &binaries.go) {
        _ if target.exhausted() => Err(golang::Unmeasured::Budget),
        Ok(h) if !ceiling.take(h.free_resident_bytes) => Err(golang::Unmeasured::Implausible),
        other => other.map(Box::new),
    }
}

/// jemalloc's kept pages, from the binary that holds its symbols, within the reader's
/// budget and the process's resident memory.
fn read_jemalloc(
    target: Option<&mut ProcessMemory>,
    binary: Option<&crate::source::PidFile>,
    vmas: &[Vma],
    binaries: &Binaries,
    ceiling: &mut Ceiling,
) -> Result<Box<jemalloc::JemallocHeap>, jemalloc::Unmeasured> {
    let (Some(target), Some(binary)) = (target, binary) else {
        return Err(jemalloc::Unmeasured::Unreadable);
    };
    target.budget(READER_BUDGET);
    match jemalloc::read_process(target, binary, vmas, &binaries.jemalloc) {
        _ if target.exhausted() => Err(jemalloc::Unmeasured::Budget),
        Ok(h) if !ceiling.take(h.held_bytes()) => Err(jemalloc::Unmeasured::Implausible),
        other => other.map(Box::new),
    }
}

/// What is left of a process's resident memory for its readers' figures.
struct Ceiling(u64);

impl Ceiling {
    /// Takes `bytes` from what is left: `false` (and nothing taken) when they do not fit.
    fn take(&mut self, bytes: u64) -> bool {
        match self.0.checked_sub(bytes) {
            Some(left) => {
                self.0 = left;
                true
            }
            None => false,
        }
    }
}

#[cfg(test)]
mod tests;
