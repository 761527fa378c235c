//! The heap readers: what a process's allocator and runtime hold free, measured from
//! outside through `/proc/PID/mem` and `/proc/PID/pagemap` for deep-tier candidates:
//! glibc's heaps (`glibc/`), jemalloc's arenas (`jemalloc/`), a JVM's heap (`jvm/`), a
//! Go runtime's (`golang/`), CPython's arenas (`python/`) and mimalloc's segments
//! (`mimalloc/`), each in the shape `shape.rs` gives, read through the `Target` of
//! `target.rs`, and listed below, one line each (`registry.rs` makes `list` from the
//! line).
//!
//! Each reader is pure over a `Target`; this module tells the process's allocator and
//! runtime and runs the readers that apply, through [`Source`]. The target never notices:
//! no ptrace stop, no signal, only `pread`s. Nothing read is kept or logged.

pub mod binaries;
pub(crate) mod dynsym;
pub mod elf;
pub use glibc::{arenas, freelist, process, walk};
#[cfg(any(test, feature = "test-support"))]
#[doc(hidden)]
pub mod image;
pub mod linked;
pub mod memory;
mod registry;
pub mod runtime;
pub mod shape;
pub mod target;
pub mod words;

use crate::parse::smaps::Vma;
use crate::source::Source;
pub use glibc::measure::{
    measure, HeapMeasure, Unmeasured, WalkCounts, CROSS_CHECK_CHUNKS, CROSS_CHECK_HEAP_BYTES,
    MAX_FREE_CHUNKS,
};
pub use glibc::Glibc;
pub use list::{Measurement, ReadCounts, Registered};

use memory::ProcessMemory;
pub use process::bounds;
use runtime::Identity;
use shape::Ceiling;
pub use shape::{resident_ceiling, READER_BUDGET};

// The heap readers, one line each: a folder beside this file and its type, which
// implements `shape::HeapReader` and `shape::Says`. The order is the order of their series.
registry::readers! {
    glibc::Glibc,
    jvm::Jvm,
    golang::Go,
    jemalloc::Jemalloc,
    python::Python,
    mimalloc::Mimalloc,
}

/// What is learnt once per binary, owned by the scanner that reads the processes (its
/// deep tier), each bounded.
pub struct Binaries {
    /// The allocator each executable links in (`linked`).
    pub linked: binaries::ByFile<Option<runtime::Allocator>>,
    /// Each reader's (Go's and jemalloc's layouts, read from their binaries).
    pub readers: list::Caches,
}

impl Default for Binaries {
    fn default() -> Self {
        Binaries {
            linked: binaries::ByFile::new(256),
            readers: list::Caches::default(),
        }
    }
}

/// What a deep read learned about a process's allocator and runtime.
#[derive(Debug, Clone, PartialEq)]
pub struct HeapReading {
    pub identity: Identity,
    /// The process's memory cgroup (`/proc/PID/cgroup`), as the cgroup collector names
    /// it: where its hoarding counts against a container's limit.
    pub memory_cgroup: Option<String>,
    /// Each reader's measurement, or why it has none, for the readers that read the
    /// process (`list`'s order); empty when reading process memory is switched off.
    pub readings: Vec<Measurement>,
    /// When the readers read it (Unix seconds): a deep read is kept until the next one.
    pub read_at_unix_seconds: f64,
}

impl HeapReading {
    /// One reader's measurement (`None`: it did not read the process).
    pub fn get<R: Registered>(&self) -> Option<&Result<R::Figure, R::Reason>> {
        self.readings.iter().find_map(R::pick)
    }

    /// glibc's heaps, measured.
    pub fn measured(&self) -> Option<&HeapMeasure> {
        self.get::<Glibc>().and_then(|w| w.as_ref().ok())
    }
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
    let readings = if walk {
        let process = shape::Process {
            source,
            pid,
            vmas,
            identity: &identity,
            exe: exe.as_ref(),
            remote: remote.as_ref(),
        };
        // Its memory is opened only when a reader reads it.
        let open =
            || ProcessMemory::open(source, pid).map(|m| m.with_mappings(vmas, remote.as_ref()));
        let mut ceiling = Ceiling(resident_ceiling(vmas));
        list::read_all(&process, open, &binaries.readers, &mut ceiling)
    } else {
        Vec::new()
    };
    HeapReading {
        identity,
        memory_cgroup: None,
        readings,
        read_at_unix_seconds: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64()),
    }
}

/// Whether a process's mappings read again (`now`) grew from those its readers read it by
/// (`before`): other ranges, or more resident memory under the ceiling. A figure that
/// did not fit `before` may fit `now`; one that does not fit mappings that stayed is
/// implausible.
pub fn grew(before: &[Vma], now: &[Vma]) -> bool {
    let ranges = |v: &[Vma]| -> Vec<(u64, u64, [u8; 4])> {
        v.iter().map(|m| (m.start, m.end, m.perms)).collect()
    };
    ranges(before) != ranges(now) || resident_ceiling(now) > resident_ceiling(before)
}

#[cfg(test)]
mod tests;
