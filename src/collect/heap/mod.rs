//! The heap walk: what glibc's allocator really holds free inside a process, measured from
//! outside through `/proc/PID/mem` (chunk headers only) and `/proc/PID/pagemap` (which
//! pages of the free chunks are resident), for deep-tier candidates.
//!
//! `walk` and `runtime` are pure; this module does the reading, through [`Source`]. The
//! target never notices: no ptrace stop, no signal, only `pread`s at header addresses.
//! Nothing read is kept or logged: the header window is wiped after each heap.

pub mod runtime;
pub mod walk;

use crate::parse::smaps::{is_arena_heap, Vma};
use crate::source::{PidFile, Source};
use runtime::Identity;
use walk::{ArenaHeap, Fault, HeapKind, HeapTotals, Target, Walker};

/// Chunks one walk of one process may visit (both tries count apart); above this the
/// process is "not measured (budget)". A heap of small chunks costs what reading its
/// pages costs (the kernel copies them through `/proc/PID/mem`): about 130 ns a chunk on
/// the test machine, so 2 Mi chunks (a 512 MiB heap of 256-byte chunks) is ~0.3 s of CPU,
/// at most once per `--collector.processes.deep-interval` for one process.
pub const MAX_CHUNKS: u64 = 2 << 20;

/// What the walk measured of one process, by heap kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HeapMeasure {
    pub main: HeapTotals,
    pub arenas: HeapTotals,
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
    /// The heap has more chunks than [`MAX_CHUNKS`].
    Budget,
    /// `/proc/PID/mem` or `pagemap` could not be read (no CAP_SYS_PTRACE, process gone).
    Unreadable,
}

impl Outcome {
    pub const ALL: [Outcome; 5] = [
        Outcome::Measured,
        Outcome::NotGlibc,
        Outcome::Inconsistent,
        Outcome::Budget,
        Outcome::Unreadable,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Measured => "measured",
            Outcome::NotGlibc => "not_glibc",
            Outcome::Inconsistent => "inconsistent",
            Outcome::Budget => "budget",
            Outcome::Unreadable => "unreadable",
        }
    }

    fn of(fault: Fault) -> Outcome {
        match fault {
            Fault::Inconsistent => Outcome::Inconsistent,
            Fault::Budget => Outcome::Budget,
            Fault::Unreadable => Outcome::Unreadable,
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
}

impl HeapReading {
    pub fn measured(&self) -> Option<&HeapMeasure> {
        self.walk.as_ref().and_then(|w| w.as_ref().ok())
    }
}

/// Where glibc's heaps are: the `[heap]` range (the brk heap, possibly split into several
/// adjacent mappings) and each arena heap's start and read-write end.
pub fn heap_ranges(vmas: &[Vma]) -> (Option<(u64, u64)>, Vec<ArenaHeap>) {
    let mut brk: Option<(u64, u64)> = None;
    let mut arenas = Vec::new();
    for (i, vma) in vmas.iter().enumerate() {
        if vma.brk_heap {
            brk = match brk {
                None => Some((vma.start, vma.end)),
                Some((s, e)) if e == vma.start => Some((s, vma.end)),
                // Two separate [heap] ranges: not the shape glibc makes; not walked.
                Some(_) => Some((0, 0)),
            };
        } else if is_arena_heap(vma, vmas.get(i + 1)) {
            arenas.push(ArenaHeap {
                start: vma.start,
                rw_end: vma.end,
            });
        }
    }
    (brk, arenas)
}

/// Walks every glibc heap of a target; a walk that meets an inconsistency is tried once
/// more (the target runs meanwhile), then given up.
pub fn measure<T: Target>(
    target: &mut T,
    brk: Option<(u64, u64)>,
    arenas: &[ArenaHeap],
    max_chunks: u64,
) -> Result<HeapMeasure, Fault> {
    let mut tries = 0;
    loop {
        tries += 1;
        let mut w = Walker::new(target, max_chunks);
        let result = (|| {
            let main = match brk {
                Some((start, end)) => w.heap(walk::brk_first_chunk(start), end, HeapKind::Main)?,
                None => HeapTotals::default(),
            };
            let arenas = walk::arena_heaps(&mut w, arenas)?;
            Ok(HeapMeasure { main, arenas })
        })();
        match result {
            Err(Fault::Inconsistent) if tries < 2 => continue,
            other => return other,
        }
    }
}

/// The memory of a live process, read through `/proc/PID/mem` and `/proc/PID/pagemap`.
struct ProcessMemory {
    mem: PidFile,
    pagemap: PidFile,
    /// A window of pagemap entries: `entries[i]` is page `first_page + i`.
    entries: Vec<u64>,
    first_page: u64,
    raw: Vec<u8>,
}

const PAGE: u64 = 4096;
/// Pagemap entries read at once: 64 KiB of entries cover 32 MiB of memory.
const PAGEMAP_WINDOW: usize = 8192;
/// The fewest entries read at once (4 KiB, 2 MiB of memory): free chunks follow each
/// other, so the next one's pages are usually in the same read.
const PAGEMAP_READ_AHEAD: usize = 512;
const PRESENT: u64 = 1 << 63;

impl Target for ProcessMemory {
    fn read(&mut self, addr: u64, buf: &mut [u8]) -> Result<(), Fault> {
        self.mem
            .read_exact_at(addr, buf)
            .map_err(|_| Fault::Unreadable)
    }

    fn resident_bytes(&mut self, start: u64, end: u64) -> Result<u64, Fault> {
        let mut total = 0u64;
        let mut page = start / PAGE;
        while page * PAGE < end {
            let cached =
                page >= self.first_page && page < self.first_page + self.entries.len() as u64;
            if !cached {
                let last = end.div_ceil(PAGE);
                let n = ((last - page) as usize).clamp(PAGEMAP_READ_AHEAD, PAGEMAP_WINDOW);
                self.raw.resize(n * 8, 0);
                self.pagemap
                    .read_exact_at(page * 8, &mut self.raw)
                    .map_err(|_| Fault::Unreadable)?;
                self.entries.clear();
                self.entries.extend(
                    self.raw
                        .chunks_exact(8)
                        .map(|c| u64::from_le_bytes(c.try_into().unwrap_or([0; 8]))),
                );
                self.first_page = page;
            }
            if self.entries[(page - self.first_page) as usize] & PRESENT != 0 {
                let lo = start.max(page * PAGE);
                let hi = end.min((page + 1) * PAGE);
                total += hi - lo;
            }
            page += 1;
        }
        Ok(total)
    }
}

/// Tells the allocator and runtime of a process from its mappings and executable, and
/// walks its heaps when they are glibc's and `walk` is on.
pub fn read(source: &Source, pid: u32, vmas: &[Vma], walk: bool) -> HeapReading {
    let mut libs = crate::parse::smaps::Libraries::default();
    for l in vmas.iter().filter_map(|v| v.library) {
        libs.insert(l);
    }
    let go = source
        .open_pid(pid, "exe")
        .ok()
        .and_then(|exe| runtime::go_version(|off, buf| exe.read_exact_at(off, buf).is_ok()));
    let identity = runtime::identify(libs, go);
    if !walk {
        return HeapReading {
            identity,
            walk: None,
        };
    }
    let outcome = if identity.allocator != runtime::Allocator::Glibc {
        Err(Outcome::NotGlibc)
    } else {
        let (brk, arenas) = heap_ranges(vmas);
        match (source.open_pid(pid, "mem"), source.open_pid(pid, "pagemap")) {
            (Ok(mem), Ok(pagemap)) => {
                let mut target = ProcessMemory {
                    mem,
                    pagemap,
                    entries: Vec::new(),
                    first_page: 0,
                    raw: Vec::new(),
                };
                measure(&mut target, brk, &arenas, MAX_CHUNKS).map_err(Outcome::of)
            }
            _ => Err(Outcome::Unreadable),
        }
    };
    HeapReading {
        identity,
        walk: Some(outcome),
    }
}
