//! The heap walk: what glibc's allocator really holds free inside a process, measured from
//! outside through `/proc/PID/mem` (chunk headers only) and `/proc/PID/pagemap` (which
//! pages of the free chunks are resident), for deep-tier candidates.
//!
//! `walk` and `runtime` are pure; this module does the reading, through [`Source`]. The
//! target never notices: no ptrace stop, no signal, only `pread`s at header addresses.
//! Nothing read is kept or logged: the header window is wiped after each heap.

pub mod arenas;
pub mod binaries;
pub mod elf;
pub mod freelist;
pub mod glibc;
pub mod golang;
#[doc(hidden)]
pub mod image;
pub mod jemalloc;
pub mod jvm;
pub mod linked;
pub mod memory;
pub mod process;
pub mod reader;
pub mod reads;
pub mod runtime;
pub mod walk;

use crate::parse::smaps::{Library, Vma};
use crate::source::Source;
use arenas::{Bounds, Discovery};
use glibc::Layout;
use memory::ProcessMemory;
pub use process::bounds;
use process::{is_64_bit, libc_version};
use reader::{Fault, Target};
use runtime::Identity;
use walk::{HeapKind, HeapTotals, Walker};

/// Free chunks one count may follow; above this the process is "not measured (budget)".
/// Each costs two small reads of the target's memory (its header, then the header after
/// it), batched: about 1.5 us a chunk on the test machine, so 1 Mi free chunks is ~1.5 s of
/// CPU, at most once per `--collector.processes.deep-interval` for one process.
pub const MAX_FREE_CHUNKS: u64 = 1 << 20;
/// Chunks the cross-checking chunk walk may visit (~130 ns each: ~70 ms at most); a heap
/// with more is measured by the free lists alone.
pub const CROSS_CHECK_CHUNKS: u64 = 512 << 10;
/// Heaps larger than this in all are not walked chunk by chunk at all.
pub const CROSS_CHECK_HEAP_BYTES: u64 = 256 << 20;

/// What the walk measured of one process, by heap kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HeapMeasure {
    pub main: HeapTotals,
    pub arenas: HeapTotals,
    /// Arenas besides the main one, from glibc's ring of arenas.
    pub arena_count: u64,
    /// Address space the non-main heaps reserve (64 MiB each by default).
    pub arena_reserved_bytes: u64,
    /// The chunk walk ran too and agreed (heaps small enough to walk header by header).
    pub cross_checked: bool,
    /// The heap moved under the count (some list was walked again), and a second count
    /// agreed with the first.
    pub confirmed: bool,
}

impl HeapMeasure {
    pub fn of(&self, kind: HeapKind) -> &HeapTotals {
        match kind {
            HeapKind::Main => &self.main,
            HeapKind::Arena => &self.arenas,
        }
    }

    /// Free bytes glibc holds in resident pages, every heap.
    pub fn free_resident_bytes(&self) -> u64 {
        self.main
            .free_resident_bytes
            .saturating_add(self.arenas.free_resident_bytes)
    }

    /// Resident free pages `malloc_trim(0)` would give back, every heap.
    pub fn reclaimable_bytes(&self) -> u64 {
        self.main
            .reclaimable_bytes
            .saturating_add(self.arenas.reclaimable_bytes)
    }

    pub fn free_bytes(&self) -> u64 {
        self.main.free_bytes.saturating_add(self.arenas.free_bytes)
    }
}

/// How a walk ended: the `outcome` label of `membloat_heap_walks_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Outcome {
    Measured,
    /// The allocator is not glibc's (or cannot be told): nothing to walk.
    NotGlibc,
    /// A header broke a rule twice: the heap changed under both tries, or is not glibc's.
    Inconsistent,
    /// The heap has more free chunks than [`MAX_FREE_CHUNKS`].
    Budget,
    /// `/proc/PID/mem` or `pagemap` could not be read (no CAP_SYS_PTRACE, process gone).
    Unreadable,
    /// glibc, but not one whose structures this exporter knows: a version outside
    /// 2.27-2.42, a 32-bit process, or no arena that fits.
    Unsupported,
    /// The heaps say they hold more free memory in resident pages than the process has
    /// resident at all: not believed (a crafted heap, or one that grew under the read).
    Implausible,
    /// Its libc is a file of a FUSE or network mount, which no reader touches.
    RemoteFile,
}

impl Outcome {
    pub const ALL: [Outcome; 8] = [
        Outcome::Measured,
        Outcome::NotGlibc,
        Outcome::Inconsistent,
        Outcome::Budget,
        Outcome::Unreadable,
        Outcome::Unsupported,
        Outcome::Implausible,
        Outcome::RemoteFile,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Measured => "measured",
            Outcome::NotGlibc => "not_glibc",
            Outcome::Inconsistent => "inconsistent",
            Outcome::Budget => "budget",
            Outcome::Unreadable => "unreadable",
            Outcome::Unsupported => "unsupported",
            Outcome::Implausible => "implausible",
            Outcome::RemoteFile => "remote_file",
        }
    }

    /// Whether a later walk can succeed where this one did not (the heap moved under
    /// it), as opposed to one that cannot be walked at all.
    pub fn is_transient(self) -> bool {
        self == Outcome::Inconsistent
    }

    /// Whether the walk stopped at its budget: the process is read again only after a
    /// back-off, never at once.
    pub fn is_over_budget(self) -> bool {
        self == Outcome::Budget
    }

    fn of(fault: Fault) -> Outcome {
        match fault {
            Fault::Inconsistent => Outcome::Inconsistent,
            Fault::Budget => Outcome::Budget,
            Fault::Unreadable => Outcome::Unreadable,
            Fault::NotFound => Outcome::Unsupported,
        }
    }
}

/// Heap walks counted by how they ended.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WalkCounts([u64; Outcome::ALL.len()]);

impl WalkCounts {
    pub fn count(&mut self, outcome: Outcome) {
        self.0[outcome as usize] += 1;
    }

    pub fn get(&self, outcome: Outcome) -> u64 {
        self.0[outcome as usize]
    }

    /// These counts plus `other`'s (running totals across scans).
    pub fn plus(mut self, other: &WalkCounts) -> WalkCounts {
        for (sum, n) in self.0.iter_mut().zip(other.0) {
            *sum = sum.saturating_add(n);
        }
        self
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

/// Measures every glibc heap of a target: the arenas found from glibc's own structures,
/// their free lists counted as `mallinfo2` counts them and, where the heaps are small
/// enough, checked against a chunk-by-chunk walk. A try that meets an inconsistency (the
/// target runs meanwhile) is tried once more, then given up.
pub fn measure<T: Target>(
    target: &mut T,
    layout: &Layout,
    bounds: &Bounds,
    max_free_chunks: u64,
    cross_check_chunks: u64,
) -> Result<HeapMeasure, Fault> {
    let mut tries = 0;
    loop {
        tries += 1;
        let result = arenas::discover(target, layout, bounds).and_then(|d| {
            let (lists, cross_checked) =
                count(target, layout, &d, max_free_chunks, cross_check_chunks)?;
            if lists.moved {
                // The heap moved while it was counted: a second count must agree, or the
                // figure may be of no moment the program was ever in.
                let (again, _) = count(target, layout, &d, max_free_chunks, cross_check_chunks)?;
                let (a, b) = (lists.free_bytes(), again.free_bytes());
                if a.abs_diff(b) as f64 > MOVING_AGREEMENT * a.max(b) as f64 {
                    return Err(Fault::Inconsistent);
                }
            }
            Ok(HeapMeasure {
                main: lists.main,
                arenas: lists.arenas,
                arena_count: d.arenas.iter().filter(|a| !a.main).count() as u64,
                arena_reserved_bytes: d.arena_heaps().saturating_mul(d.heap_max),
                cross_checked,
                confirmed: lists.moved,
            })
        });
        match result {
            Err(Fault::Inconsistent) if tries < 2 => continue,
            other => return other,
        }
    }
}

/// Two counts of a heap that moved under them must agree within this share.
const MOVING_AGREEMENT: f64 = 0.01;

/// One count: the free lists, cross-checked by the chunk walk where the heaps are small.
/// Returns the count and whether the cross-check ran.
fn count<T: Target>(
    target: &mut T,
    layout: &Layout,
    d: &Discovery,
    max_free_chunks: u64,
    cross_check_chunks: u64,
) -> Result<(freelist::Lists, bool), Fault> {
    let lists = freelist::count(target, layout, d, max_free_chunks)?;
    let checked = cross_check(target, d, &lists, cross_check_chunks)?;
    Ok((lists, checked))
}

/// Walks every heap chunk by chunk, within `max_chunks`: the free chunks outside fastbins
/// and the top chunks must be exactly what the free lists hold. `Ok(false)` when the heaps
/// are too large to walk (or their pieces are unknown); a disagreement is inconsistent.
fn cross_check<T: Target>(
    target: &mut T,
    d: &Discovery,
    lists: &freelist::Lists,
    max_chunks: u64,
) -> Result<bool, Fault> {
    if d.arenas
        .iter()
        .any(|a| a.heaps.is_empty() && a.top_size > 0)
    {
        return Ok(false);
    }
    // Larger heaps are measured by the free lists alone: walking them header by header
    // would cost what the lists save.
    let heap_bytes: u64 = d
        .arenas
        .iter()
        .flat_map(|a| &a.heaps)
        .map(|h| h.end - h.first_chunk)
        .sum();
    if heap_bytes > CROSS_CHECK_HEAP_BYTES {
        return Ok(false);
    }
    let mut w = Walker::counting(target, max_chunks);
    let mut walked = [HeapTotals::default(), HeapTotals::default()];
    for a in &d.arenas {
        let kind = if a.main {
            HeapKind::Main
        } else {
            HeapKind::Arena
        };
        match walk::arena(&mut w, &a.heaps, kind) {
            Ok(t) => walked[kind as usize].add(&t),
            Err(Fault::Budget) => return Ok(false),
            Err(e) => return Err(e),
        }
    }
    for (kind, by_walk) in HeapKind::ALL.into_iter().zip(walked) {
        let by_lists = match kind {
            HeapKind::Main => &lists.main,
            HeapKind::Arena => &lists.arenas,
        };
        let outside_fastbins = by_lists.free_bytes - by_lists.fast_bytes;
        if by_walk.free_bytes != outside_fastbins || by_walk.top_bytes != by_lists.top_bytes {
            return Err(Fault::Inconsistent);
        }
    }
    Ok(true)
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
    let linked = exe.as_ref().and_then(linked::allocator);
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
    let go = golang.then(|| read_go(target.as_mut(), exe.as_ref(), vmas, &mut ceiling));
    let jemalloc = je.then(|| {
        let library = jemalloc::library(source, pid, vmas, remote.as_ref())?;
        let binary = library.as_ref().or(exe.as_ref());
        read_jemalloc(target.as_mut(), binary, vmas, &mut ceiling)
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
    ceiling: &mut Ceiling,
) -> Result<Box<golang::GoHeap>, golang::Unmeasured> {
    let (Some(target), Some(exe)) = (target, exe) else {
        return Err(golang::Unmeasured::Unreadable);
    };
    target.budget(READER_BUDGET);
    match golang::read_process(target, exe, vmas) {
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
    ceiling: &mut Ceiling,
) -> Result<Box<jemalloc::JemallocHeap>, jemalloc::Unmeasured> {
    let (Some(target), Some(binary)) = (target, binary) else {
        return Err(jemalloc::Unmeasured::Unreadable);
    };
    target.budget(READER_BUDGET);
    match jemalloc::read_process(target, binary, vmas) {
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

fn measure_process<T: Target>(
    target: &mut T,
    bounds: &Bounds,
    libc: &[&Vma],
) -> Result<HeapMeasure, Outcome> {
    // A first read tells a process we may not read from one we cannot measure.
    let mut probe = [0u8; 4];
    let first = libc.first().ok_or(Outcome::Unsupported)?;
    target
        .read(first.start, &mut probe)
        .map_err(|_| Outcome::Unreadable)?;
    if !is_64_bit(target, libc) {
        return Err(Outcome::Unsupported);
    }
    let layout = libc_version(target, libc)
        .and_then(Layout::of)
        .ok_or(Outcome::Unsupported)?;
    measure(target, &layout, bounds, MAX_FREE_CHUNKS, CROSS_CHECK_CHUNKS).map_err(Outcome::of)
}

#[cfg(test)]
mod tests;
