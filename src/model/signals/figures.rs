//! What the signals of one process are (`Signals`, and `Method`: how a hoarding figure
//! was reached), and the thresholds they and the host's signals are judged by: the
//! measured signatures of each phenomenon, each named here once.

use std::sync::Arc;

use crate::heap::runtime::Allocator;
use crate::heap::shape::{Says, Share};
use crate::heap::words::{Said, Subject};
use crate::heap::{Glibc, HeapMeasure, HeapReading, Registered};

/// Heap memory below this is never suspected of hoarding (no heap walk).
pub const HOARD_MIN_HEAP_BYTES: u64 = 64 << 20;
/// Measured reclaimable heap memory below this is not called hoarding: small free lists
/// come and go with a program's work, and glibc keeps its trim threshold's worth (128 KiB
/// by default) on purpose.
pub const HOARD_MIN_MEASURED_BYTES: u64 = 16 << 20;
/// The heap must hold at least this share of the process's anonymous memory.
pub const HOARD_MIN_HEAP_SHARE: f64 = 0.5;
/// RSS must still be at least this share of the peak (VmHWM).
pub const HOARD_MIN_RETAINED: f64 = 0.8;
/// A heap whose Rss is below this share of its Size was trimmed: not hoarding.
pub const HOARD_MIN_HEAP_DENSITY: f64 = 0.5;
/// Idle: CPU time grew by less than this share of the elapsed time (plus one tick).
pub const IDLE_MAX_CPU_SHARE: f64 = 0.01;
/// Host thresholds that `explain` and the alert rules share (deploy/prometheus/
/// membloat.rules.yml uses the same numbers; tests/rules.rs checks they agree).
/// Memory is low below this share of MemTotal available (MembloatProcessLikelyOOMVictim).
pub const LOW_MEMORY_RATIO: f64 = 0.10;
/// A process among the first this many in the OOM killer's order...
pub const OOM_LIKELY_VICTIM_RANK: u64 = 3;
/// ...holding at least this share of RAM and swap is a likely victim worth a warning
/// (MembloatProcessLikelyOOMVictim). The share is taken from oom_score without
/// oom_score_adj, so a pod that Kubernetes put first while it holds little is not one.
pub const OOM_LIKELY_VICTIM_SHARE: f64 = 0.30;

/// The share of RAM and swap behind an oom_score: the kernel shows
/// `(1000 + 1000 x share + oom_score_adj) x 2/3`.
pub fn oom_memory_share(oom_score: u64, oom_score_adj: i64) -> f64 {
    (oom_score as f64 * 1.5 - 1000.0 - oom_score_adj as f64) / 1000.0
}
/// Committed_AS / CommitLimit above this in overcommit mode 2 (MembloatCommitNearLimit).
pub const COMMIT_NEAR_LIMIT_RATIO: f64 = 0.9;
/// Share of time all tasks stalled on memory (PSI full) above this (MembloatMemoryStalls).
pub const PRESSURE_STALLED_RATIO: f64 = 0.05;
/// Hidden THP memory above this share of MemTotal (MembloatHiddenTHPMemoryLarge).
pub const THP_HIDDEN_MAX_SHARE: f64 = 0.05;
/// Untouched commit charge of one process worth naming (no alert: a gauge to watch).
pub const UNTOUCHED_COMMIT_MIN_BYTES: u64 = 1 << 30;
/// glibc creates at most this many arenas per online CPU (64-bit).
pub const ARENAS_PER_CPU: u64 = 8;

/// How a hoarding figure was reached: the `method` label.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Method {
    /// Free chunks read from glibc's heap: what the allocator really holds.
    Measured,
    /// Inferred from smaps and status (no heap walk possible): a suspicion.
    Suspected,
}

impl Method {
    pub const ALL: [Method; 2] = [Method::Measured, Method::Suspected];

    pub fn as_str(self) -> &'static str {
        match self {
            Method::Measured => "measured",
            Method::Suspected => "suspected",
        }
    }
}

/// The signals of one process in one scan.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Signals {
    /// VmRSS / VmHWM.
    pub retained_peak_ratio: Option<f64>,
    /// CPU time did not move over the last interval (`None` on first sight).
    pub idle: Option<bool>,
    /// User plus system CPU time when `stat` was last read.
    pub cpu_seconds: f64,
    /// Rss of the brk heap plus glibc arena heaps (deep tier).
    pub heap_resident_bytes: Option<u64>,
    pub heap_size_bytes: Option<u64>,
    pub arena_heaps: Option<u64>,
    pub arena_reserved_bytes: Option<u64>,
    /// The arena count reached glibc's ceiling (8 x CPUs arenas, the main one not a heap).
    pub arena_at_ceiling: Option<bool>,
    /// Freed-but-kept heap memory; `Some(0)` when deep data says no.
    pub hoarded_bytes: Option<u64>,
    /// Whether `hoarded_bytes` was measured by the heap walk or suspected.
    pub hoard_method: Option<Method>,
    /// The heap can be measured but no walk has succeeded yet (it changed under each
    /// try): no hoarding figure until one does, never a guess.
    pub hoard_pending: bool,
    /// The latest successful heap walk (boxed: only measured processes have one).
    pub heap: Option<Box<HeapMeasure>>,
    /// What the heap readers read of the process: each one's figure, or why it has none
    /// (`figure`, `outcome`).
    pub reading: Option<Arc<HeapReading>>,
    /// Resident heap a managed runtime holds unused (a JVM's collector keeps it until it
    /// uncommits, Go's until its scavenger releases it): part of `hoarded_bytes` when
    /// measured.
    pub runtime_held_bytes: Option<u64>,
    /// The reader (a runtime, or an allocator other than glibc) whose figure
    /// `runtime_held_bytes` is: the `runtime` label of the held series.
    pub runtime_held_by: Option<&'static str>,
    /// Commit charge: Size of mappings charged to the commit limit (deep tier).
    pub commit_bytes: Option<u64>,
    /// Commit charge not backed by RAM or swap: can still become RSS, oom_score omits it.
    pub untouched_commit_bytes: Option<u64>,
    pub regrown_since_trough_bytes: u64,
    pub regrown_total_bytes: u64,
    /// AnonHugePages / RssAnon.
    pub thp_anon_ratio: Option<f64>,
}

impl Signals {
    /// A reader's figure for the process (`None`: it did not read it, or has no figure).
    pub fn figure<R: Registered>(&self) -> Option<&R::Figure> {
        self.reading.as_ref()?.get::<R>()?.as_ref().ok()
    }

    /// Why a reader has no figure for the process.
    pub fn unmeasured<R: Registered>(&self) -> Option<R::Reason> {
        self.reading.as_ref()?.get::<R>()?.as_ref().err().copied()
    }

    /// What the allocator's reader says of the process's measured hoarding (`held`
    /// bytes): the reader of its allocator (`allocator`, as the deep read told it) before
    /// any other allocator's, else glibc's last walk where a walk being retried keeps it.
    pub(crate) fn allocator_said(
        &self,
        allocator: Option<Allocator>,
        held: u64,
        process: Subject,
    ) -> Option<Said> {
        let readings = self.reading.as_deref().map_or(&[][..], |r| &r.readings[..]);
        let name = allocator.map(Allocator::as_str);
        readings
            .iter()
            .filter(|r| r.share() == Share::Allocator)
            .filter_map(|r| Some((Some(r.reader()) == name, r.said(held, process)?)))
            .max_by_key(|(theirs, _)| *theirs)
            .map(|(_, said)| said)
            .or_else(|| Some(<Glibc as Says>::said(self.heap.as_deref()?, held, process)))
    }
}
