//! glibc's heaps measured: the arenas found from glibc's own structures, their free lists
//! counted as `mallinfo2` counts them, cross-checked by the chunk walk where the heaps are
//! small, and how a walk ended.

use super::arenas::{self, Bounds, Discovery};
use super::process::{is_64_bit, libc_version};
use super::walk::{self, HeapKind, HeapTotals, Walker};
use super::{freelist, Layout};
use crate::heap::shape::{Counts, Figure};
use crate::heap::target::{Fault, Target};
use crate::parse::smaps::Vma;

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

    /// Of the reclaimable pages, those in the top chunks (see
    /// [`HeapTotals::top_reclaimable_bytes`]).
    pub(crate) fn top_reclaimable_bytes(&self) -> u64 {
        self.main
            .top_reclaimable_bytes
            .saturating_add(self.arenas.top_reclaimable_bytes)
    }

    pub fn free_bytes(&self) -> u64 {
        self.main.free_bytes.saturating_add(self.arenas.free_bytes)
    }
}

/// Why a glibc heap has no figure: the `outcome` label of `membloat_heap_walks_total`
/// (beside `measured`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Unmeasured {
    /// The allocator is not glibc's (or cannot be told): nothing to walk.
    NotGlibc,
    /// A header broke a rule twice: the heap changed under both tries, or is not glibc's.
    Inconsistent,
    /// The heap has more free chunks than [`MAX_FREE_CHUNKS`], or the walk ran out of
    /// [`super::super::READER_BUDGET`].
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

crate::heap::shape::reasons! {
    Unmeasured {
        NotGlibc => "not_glibc",
        Inconsistent => "inconsistent",
        Budget => "budget",
        Unreadable => "unreadable",
        Unsupported => "unsupported",
        Implausible => "implausible",
        RemoteFile => "remote_file",
    }
    // The heap moved under the walk: a later one can succeed.
    transient: Inconsistent,
}

impl Unmeasured {
    fn of(fault: Fault) -> Unmeasured {
        match fault {
            Fault::Inconsistent => Unmeasured::Inconsistent,
            Fault::Budget => Unmeasured::Budget,
            Fault::Unreadable => Unmeasured::Unreadable,
            Fault::NotFound => Unmeasured::Unsupported,
            Fault::Outside => Unmeasured::Implausible,
            Fault::Remote => Unmeasured::RemoteFile,
        }
    }
}

/// What glibc's heaps hold free is what a `malloc_trim` (or the tunables) could give back.
impl Figure for HeapMeasure {
    fn held_bytes(&self) -> Option<u64> {
        Some(self.reclaimable_bytes())
    }
    fn free_resident_bytes(&self) -> u64 {
        HeapMeasure::free_resident_bytes(self)
    }
}

/// Heap walks counted by how they ended.
pub type WalkCounts = Counts<Unmeasured>;

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

pub(in crate::heap) fn measure_process<T: Target>(
    target: &mut T,
    bounds: &Bounds,
    libc: &[&Vma],
) -> Result<HeapMeasure, Unmeasured> {
    // A first read tells a process we may not read from one we cannot measure.
    let mut probe = [0u8; 4];
    let first = libc.first().ok_or(Unmeasured::Unsupported)?;
    target
        .read(first.start, &mut probe)
        .map_err(|_| Unmeasured::Unreadable)?;
    if !is_64_bit(target, libc) {
        return Err(Unmeasured::Unsupported);
    }
    let layout = libc_version(target, libc)
        .and_then(Layout::of)
        .ok_or(Unmeasured::Unsupported)?;
    measure(target, &layout, bounds, MAX_FREE_CHUNKS, CROSS_CHECK_CHUNKS).map_err(Unmeasured::of)
}
