//! A HotSpot JVM's own account of its Java heap, read from outside: the perf data it
//! publishes for `jstat` (`parse::hsperfdata`), committed and used per heap space and for
//! metaspace, and its collector; and what of the heap is in RAM (its reserved range's
//! present pages, found by `reserved`, or ZGC's heap file), so the resident heap it does
//! not use: the held heap, measured.
//!
//! The data is read from the JVM's own mapping of its perf-data file (`rw-s`, named
//! `/tmp/hsperfdata_<user>/<pid>` in its mount namespace), through its memory like the heap
//! walk. That finds a container's JVM whatever its /tmp, user name or namespace pid, and
//! only the file that JVM publishes: a JVM that shares /tmp and a namespace pid with
//! another and lost the file's lock maps none (it publishes nothing), so another JVM's
//! counters are never taken for its own. `-XX:-UsePerfData` and `-XX:+PerfDisableSharedMem`
//! publish nothing either.

mod args;
mod interpret;
pub mod reserved;
mod said;

use args::feature;
pub use args::heap_floor;
pub use interpret::interpret;
pub use said::java_heap;

use super::memory::ProcessMemory;
use super::shape::{Ceiling, Figure, Process, HeapReader};
use super::target::Target;
use crate::parse::hsperfdata::{self, PerfData};
use crate::parse::smaps::{Library, Vma};
use crate::parse::ParseError;

/// The JVM's collector, as its perf data names it (`sun.gc.policy.name`, or the collector
/// names where there is no policy, as with ZGC).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gc {
    G1,
    Parallel,
    Serial,
    Z,
    Shenandoah,
    /// Named, but by none of the above.
    Other,
}

impl Gc {
    pub fn as_str(self) -> &'static str {
        match self {
            Gc::G1 => "g1",
            Gc::Parallel => "parallel",
            Gc::Serial => "serial",
            Gc::Z => "z",
            Gc::Shenandoah => "shenandoah",
            Gc::Other => "other",
        }
    }

    fn of(p: &PerfData) -> Gc {
        match p.text("sun.gc.policy.name") {
            Some("GarbageFirst") => return Gc::G1,
            Some("ParScav:MSC") => return Gc::Parallel,
            Some("Copy:MSC") => return Gc::Serial,
            Some(n) if n.starts_with("Shenandoah") => return Gc::Shenandoah,
            _ => {}
        }
        let names =
            (0..MAX_COLLECTORS).filter_map(|i| p.text(&format!("sun.gc.collector.{i}.name")));
        for n in names {
            if n.starts_with("Z ") || n.starts_with("ZGC") {
                return Gc::Z;
            }
            if n.starts_with("Shenandoah") {
                return Gc::Shenandoah;
            }
        }
        Gc::Other
    }
}

/// One space of the Java heap (`sun.gc.generation.G.space.S.*`): its generation's and its
/// own name as the JVM gives them (`young`/`eden`, `s0`, `s1`; `old`/`old` or `space`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Space {
    pub generation: String,
    pub name: String,
    /// Memory the JVM committed to the space. JDK 17's G1 adds the object alignment
    /// (8 bytes) to each space's figure so that none reads 0
    /// (`G1MonitoringSupport::pad_capacity`); JDK 25's does not.
    pub committed_bytes: u64,
    pub used_bytes: u64,
    /// The space's own maximum; spaces of one generation may share theirs (G1 gives
    /// each the whole heap's), so these do not add up to `-Xmx`.
    pub max_bytes: u64,
}

/// What the JVM says of its memory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JavaHeap {
    pub collector: Gc,
    pub spaces: Vec<Space>,
    /// Metaspace committed and used (`sun.gc.metaspace.*`: jstat's MC and MU).
    pub metaspace: Option<(u64, u64)>,
    /// The heap's reserved range (`reserved`), when found.
    pub reserved: Option<reserved::Reserved>,
    /// The heap's own memory in RAM: its pages present in the reserved range, or the
    /// bytes allocated to ZGC's heap file (mapped at several addresses, counted once).
    /// `None` when neither could be read: then there is no held figure.
    pub resident_bytes: Option<u64>,
    /// The least the heap shrinks to, as the JVM was started (`-XX:MinHeapSize=`, else
    /// `-Xms` or `-XX:InitialHeapSize=`, the last one given, from its arguments in the perf
    /// data); `None` when none was given (the JVM's default, 1/64 of RAM, applies).
    pub floor_bytes: Option<u64>,
    /// Of `resident_bytes`, the part between the floor and the committed size from the
    /// start of the reserved range: what a shrink to the floor gives back, as G1 commits
    /// the lowest regions and uncommits the highest first. `None` without a range or a
    /// floor, or with nothing committed above the floor.
    pub resident_above_floor_bytes: Option<u64>,
    /// The JDK's feature release (`17` for 17.0.15; `8` for 1.8.0), from
    /// `java.property.java.version`.
    pub feature: Option<u32>,
}

impl JavaHeap {
    pub fn committed_bytes(&self) -> u64 {
        self.spaces
            .iter()
            .fold(0u64, |sum, s| sum.saturating_add(s.committed_bytes))
    }

    pub fn used_bytes(&self) -> u64 {
        self.spaces
            .iter()
            .fold(0u64, |sum, s| sum.saturating_add(s.used_bytes))
    }

    /// The most the heap may grow to (`-Xmx`): its reserved range, or for ZGC (no range
    /// to find; one space, or one per generation, each as large as the heap) the largest
    /// space maximum. The spaces' maxima do not add up to it (G1 gives each the whole
    /// heap's; Parallel's survivors overlap eden).
    pub fn max_bytes(&self) -> Option<u64> {
        match self.reserved {
            Some(r) => Some(r.end - r.start),
            None if self.collector == Gc::Z => self.spaces.iter().map(|s| s.max_bytes).max(),
            None => None,
        }
    }

    /// Resident heap the JVM does not use: its collector keeps it until it uncommits, and
    /// no other program can have it. The used bytes are taken as resident.
    pub fn held_bytes(&self) -> Option<u64> {
        Some(self.resident_bytes?.saturating_sub(self.used_bytes()))
    }
}

/// Why a JVM's heap has no figures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unmeasured {
    /// It maps no perf-data file: `-XX:-UsePerfData`, `-XX:+PerfDisableSharedMem`, or
    /// another JVM holds the file of its /tmp and namespace pid.
    NotPublished,
    /// Its memory could not be read (no ptrace access, or it exited).
    Unreadable,
    /// The JVM is still writing the file's header (it is starting).
    NotReady,
    /// The file breaks HotSpot's format, or its figures are absurd.
    Malformed,
    /// The read ran out of its budget of time or pages ([`super::READER_BUDGET`]).
    Budget,
    /// The held heap it found is more than the process has resident: not believed.
    Implausible,
    /// libjvm or the perf-data file is a file of a FUSE or network mount, which no reader
    /// touches.
    RemoteFile,
}

super::shape::reasons! {
    Unmeasured {
        NotPublished => "not_published",
        Unreadable => "unreadable",
        NotReady => "not_ready",
        Malformed => "malformed",
        Budget => "budget",
        Implausible => "implausible",
        RemoteFile => "remote_file",
    }
    // The JVM is starting: its file will be ready soon.
    transient: NotReady,
    // Its figures without the held heap: its heap's range or file could not be found.
    partial: "no_resident",
}

impl Figure for JavaHeap {
    fn held_bytes(&self) -> Option<u64> {
        JavaHeap::held_bytes(self)
    }
}

/// The reader of a JVM's perf data and heap.
pub struct Jvm;

impl HeapReader for Jvm {
    type Figure = Box<JavaHeap>;
    type Reason = Unmeasured;
    type Cache = reserved::Learnt;
    const NAME: &'static str = "jvm";
    const SHARE: super::shape::Share = super::shape::Share::Runtime { alone: false };
    // The JVM uncommits by mapping over.
    const HOLDS_LAZY_FREE: bool = false;

    fn applies(p: &Process, _: &reserved::Learnt) -> Result<bool, Unmeasured> {
        if p.identity.runtime != super::runtime::Runtime::Jvm {
            return Ok(false);
        }
        let remote = p.vmas.iter().any(|v| {
            matches!(v.library, Some(Library::JvmLibrary | Library::JvmPerfData)) && p.on_remote(v)
        });
        if remote {
            return Err(Unmeasured::RemoteFile);
        }
        Ok(true)
    }

    fn read(
        p: &Process,
        memory: &mut ProcessMemory,
        learnt: &reserved::Learnt,
        ceiling: &mut Ceiling,
    ) -> Result<Box<JavaHeap>, Unmeasured> {
        let file = || {
            p.source
                .open_file_bytes(p.pid, "/memfd:java_heap (deleted)")
        };
        let heap = read_with(memory, p.vmas, file, learnt)?;
        // ZGC's heap is a memfd whose committed pages are the process's RAM whether or not
        // a view maps them (fallocate commits without touching): its allocated bytes join
        // what the process holds.
        if p.vmas.iter().any(|v| v.library == Some(Library::ZgcHeap)) {
            ceiling.raise(heap.resident_bytes.unwrap_or(0));
        }
        Ok(Box::new(heap))
    }
}

const MAX_GENERATIONS: usize = 4;
const MAX_SPACES: usize = 8;
const MAX_COLLECTORS: usize = 4;

/// Reads the perf data of the JVM whose mappings are `vmas`, through `target` (its memory),
/// and what of its heap is resident: pages present in its reserved range, or for ZGC's
/// heap file `heap_file_bytes()` (its allocated bytes), at most what its views map and
/// the perf data says is committed.
pub fn read<T: Target>(
    target: &mut T,
    vmas: &[Vma],
    heap_file_bytes: impl FnOnce() -> Option<u64>,
) -> Result<JavaHeap, Unmeasured> {
    read_with(target, vmas, heap_file_bytes, &reserved::Learnt::new(1))
}

/// [`read`], with where HotSpot keeps the heap's range taken from what `learnt` holds for
/// its `libjvm.so` (checked: see [`reserved::find_with`]).
pub fn read_with<T: Target>(
    target: &mut T,
    vmas: &[Vma],
    heap_file_bytes: impl FnOnce() -> Option<u64>,
    learnt: &reserved::Learnt,
) -> Result<JavaHeap, Unmeasured> {
    let file = vmas
        .iter()
        .find(|v| v.library == Some(Library::JvmPerfData))
        .ok_or(Unmeasured::NotPublished)?;
    let len = usize::try_from(file.end.saturating_sub(file.start))
        .ok()
        .filter(|&l| l <= hsperfdata::MAX_BYTES)
        .ok_or(Unmeasured::Malformed)?;
    let mut bytes = vec![0u8; len];
    target
        .read(file.start, &mut bytes)
        .map_err(|_| Unmeasured::Unreadable)?;
    let mut heap = match hsperfdata::parse(&bytes) {
        Ok(p) => interpret(&p)?,
        Err(ParseError::NotReady(_)) => return Err(Unmeasured::NotReady),
        Err(_) => return Err(Unmeasured::Malformed),
    };
    if vmas.iter().any(|v| v.library == Some(Library::ZgcHeap)) {
        // Only ZGC maps its heap from a file; JDK 11's names its collectors otherwise.
        heap.collector = Gc::Z;
        // The heap file's pages, as the kernel counts them, are believed only as far as
        // the heap's views map that file and the perf data says is committed: a memfd of
        // that name held open, and never mapped, is its owner's RAM but no Java heap.
        let views = vmas
            .iter()
            .filter(|v| v.library == Some(Library::ZgcHeap))
            .fold(0u64, |sum, v| sum.saturating_add(v.size_bytes));
        let committed = heap.committed_bytes();
        heap.resident_bytes = heap_file_bytes().map(|b| b.min(views).min(committed));
    } else {
        heap.reserved = reserved::find_with(target, vmas, learnt);
        heap.resident_bytes = heap.reserved.and_then(|r| resident_in(target, vmas, r));
        // G1 commits its lowest regions and shrinks from the highest: after a full
        // collection the committed heap is its range's first `committed` bytes. Pages
        // above them are being uncommitted (on G1's service thread): not the shrink's.
        let committed = heap.committed_bytes();
        let above_floor = heap.reserved.zip(heap.floor_bytes).and_then(|(r, f)| {
            let start = r.start.checked_add(f)?;
            let end = r.start.checked_add(committed)?.min(r.end);
            (start < end).then_some(reserved::Reserved { start, end })
        });
        heap.resident_above_floor_bytes = above_floor.and_then(|r| resident_in(target, vmas, r));
    }
    Ok(heap)
}

/// Resident bytes of the mappings in `r`: a mapping wholly inside counts its `Rss`; one the
/// kernel merged with a neighbour outside is counted from pagemap over the part inside.
fn resident_in<T: Target>(t: &mut T, vmas: &[Vma], r: reserved::Reserved) -> Option<u64> {
    let mut sum = 0u64;
    for v in vmas.iter().filter(|v| v.end > r.start && v.start < r.end) {
        sum += if v.start >= r.start && v.end <= r.end {
            v.rss_bytes
        } else {
            t.resident_bytes(v.start.max(r.start), v.end.min(r.end))
                .ok()?
        };
    }
    Some(sum)
}

#[cfg(test)]
mod tests;
