//! Per-process signals: pure functions of (previous state, current sample, elapsed).
//!
//! The thresholds are the measured signatures of each phenomenon (docs/signals.md says
//! what each signal means); each one is named here once.

use std::sync::Arc;

use crate::collect::heap::reads::{Reader, Reason};
use crate::collect::heap::runtime::{Allocator, Runtime};
use crate::collect::heap::{Glibc, HeapMeasure, HeapReading, Registered};
use crate::collect::{ProcessFiles, ProcessSample};
use crate::parse::smaps::SmapsSummary;

mod hoarding;
use hoarding::{from_mappings, held_heaps, measured_heap};

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
/// What the exporter last knew of a process beyond its state's own figures (RssAnon and
/// the regrown bytes): made from the state of the victim, so a kill can say what it was.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Seen {
    pub group: Option<Arc<str>>,
    pub rss_bytes: Option<u64>,
    pub swap_bytes: Option<u64>,
    pub hoarded_bytes: Option<u64>,
    pub hoard_method: Option<Method>,
    pub arena_reserved_bytes: Option<u64>,
    pub untouched_commit_bytes: Option<u64>,
}

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

/// What is remembered of a process between scans: a hundred bytes or so, the deep
/// tier's findings boxed apart (only its candidates have any).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ProcState {
    /// CPU time when `stat` was last read, and the seconds since.
    pub cpu_seconds: f64,
    pub cpu_age_seconds: f64,
    /// The last verdict on idleness, kept while CPU time is not read.
    pub idle: Option<bool>,
    /// What the process's files said in the scan that last saw it (shared with the
    /// scanner's record while it does not change).
    pub reading: Arc<ProcessFiles>,
    /// RssAnon when the current idle stretch began (or its lowest since).
    pub trough_rss_anon_bytes: u64,
    /// Bytes regrown while idle since the trough.
    pub regrown_since_trough_bytes: u64,
    /// Bytes regrown while idle since the exporter first saw the process.
    pub regrown_total_bytes: u64,
    pub deep: Option<Box<DeepState>>,
    /// The derivation (`State::scans`) that last saw the process.
    pub scan: u64,
}

/// The deep tier's latest findings of a process, carried between deep reads.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DeepState {
    pub smaps: Option<SmapsSummary>,
    /// The latest allocator identity and heap walk.
    pub heap: Option<Arc<HeapReading>>,
    /// The latest successful heap measurement: still shown while a later walk of the same
    /// process found its heap changing under the read and is retried.
    pub measured: Option<HeapMeasure>,
    /// What the signals made of them in the scan that last saw the process, for the
    /// post-mortem of its kill.
    pub hoarded_bytes: Option<u64>,
    pub hoard_method: Option<Method>,
    pub arena_reserved_bytes: Option<u64>,
    pub untouched_commit_bytes: Option<u64>,
}

impl ProcState {
    /// RssAnon when the process was last seen (0 when `status` did not say).
    pub fn rss_anon(&self) -> u64 {
        self.reading.status.rss_anon_bytes.unwrap_or(0)
    }

    pub fn smaps(&self) -> Option<&SmapsSummary> {
        self.deep.as_ref().and_then(|d| d.smaps.as_ref())
    }

    pub fn heap(&self) -> Option<&Arc<HeapReading>> {
        self.deep.as_ref().and_then(|d| d.heap.as_ref())
    }

    /// What the exporter knew of the process when it last saw it, for the post-mortem.
    pub fn seen(&self) -> Seen {
        let r = &self.reading;
        let d = self.deep.as_deref();
        Seen {
            group: r.group.as_deref().map(Arc::from),
            rss_bytes: r.status.vm_rss_bytes,
            swap_bytes: r.status.vm_swap_bytes,
            hoarded_bytes: d.and_then(|d| d.hoarded_bytes),
            hoard_method: d.and_then(|d| d.hoard_method),
            arena_reserved_bytes: d.and_then(|d| d.arena_reserved_bytes),
            untouched_commit_bytes: d.and_then(|d| d.untouched_commit_bytes),
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

    /// The `reason` a reader's figure is not whole: why it has none, or the label of a
    /// figure without its held bytes (a JVM's `no_resident`).
    pub fn unmeasured_label<R: Registered>(&self) -> Option<&'static str> {
        match self.reading.as_ref()?.get::<R>()? {
            Err(why) => Some(why.as_str()),
            Ok(f) => {
                use crate::collect::heap::reads::Figure;
                f.held_bytes()
                    .is_none()
                    .then_some(<R as Reader>::Reason::PARTIAL)
                    .flatten()
            }
        }
    }
}

/// Advances a process's state by one scan and computes its signals: idleness, khugepaged
/// regrowth, what the mappings say (arenas, commit, suspected hoarding), glibc's measured
/// heap, and a runtime's held heap, each in a function of its own below.
///
/// `cpu_tick_seconds` is the unit of the CPU times in `stat` (1 / `CLK_TCK`): a process
/// is still idle when its CPU time moved by one tick more than the idle share allows,
/// since a tick is the least the kernel can count.
pub fn advance(
    prev: Option<&ProcState>,
    p: &ProcessSample,
    elapsed_seconds: f64,
    online_cpus: u64,
    cpu_tick_seconds: f64,
) -> (ProcState, Signals) {
    let st = &p.status;
    let rss = st.vm_rss_bytes.unwrap_or(0);
    let rss_anon = st.rss_anon_bytes.unwrap_or(0);
    let anon_huge = p.rollup.and_then(|r| r.anon_huge_pages_bytes);
    let smaps = p
        .smaps
        .as_deref()
        .or(prev.and_then(ProcState::smaps))
        .copied();
    let heap = p.heap.as_ref().or(prev.and_then(ProcState::heap));
    let latest = heap.and_then(|h| h.get::<Glibc>());
    let retrying = matches!(latest, Some(Err(o)) if o.is_transient());
    let measured = match latest {
        Some(Ok(m)) => Some(*m),
        _ if retrying => prev.and_then(|s| s.deep.as_ref().and_then(|d| d.measured)),
        _ => None,
    };

    let cpu = cpu_idleness(prev, p, elapsed_seconds, cpu_tick_seconds);
    let mut next = ProcState {
        cpu_seconds: cpu.seconds,
        cpu_age_seconds: cpu.age_seconds,
        idle: cpu.idle,
        reading: Arc::clone(&p.reading),
        trough_rss_anon_bytes: rss_anon,
        regrown_since_trough_bytes: 0,
        regrown_total_bytes: prev.map_or(0, |s| s.regrown_total_bytes),
        deep: (smaps.is_some() || heap.is_some() || measured.is_some()).then(|| {
            Box::new(DeepState {
                smaps,
                heap: heap.cloned(),
                measured,
                ..DeepState::default()
            })
        }),
        scan: 0,
    };
    if let (Some(s), Some(true)) = (prev, cpu.idle) {
        regrowth(s, p, &mut next);
    }

    let retained = st
        .vm_hwm_bytes
        .filter(|&hwm| hwm > 0)
        .map(|hwm| rss as f64 / hwm as f64);
    let mut sig = Signals {
        retained_peak_ratio: retained,
        idle: cpu.idle,
        cpu_seconds: cpu.seconds,
        regrown_since_trough_bytes: next.regrown_since_trough_bytes,
        regrown_total_bytes: next.regrown_total_bytes,
        thp_anon_ratio: anon_huge
            .filter(|_| rss_anon > 0)
            .map(|h| (h as f64 / rss_anon as f64).min(1.0)),
        ..Signals::default()
    };
    if let Some(m) = &smaps {
        // Arenas are glibc's: a Go or JVM heap, or another allocator's mappings, can look
        // alike.
        let glibc_arenas = heap.is_none_or(|h| {
            h.identity.allocator == Allocator::Glibc
                && !matches!(h.identity.runtime, Runtime::Go | Runtime::Jvm)
        });
        from_mappings(&mut sig, m, p, glibc_arenas, online_cpus);
        if retrying && measured.is_none() {
            sig.hoard_pending = true;
            sig.hoarded_bytes = None;
            sig.hoard_method = None;
        }
    }
    if let Some(m) = measured {
        measured_heap(&mut sig, m, online_cpus);
    }
    if let Some(h) = heap {
        held_heaps(&mut sig, h);
        sig.reading = Some(Arc::clone(h));
    }
    if let Some(d) = &mut next.deep {
        d.hoarded_bytes = sig.hoarded_bytes;
        d.hoard_method = sig.hoard_method;
        d.arena_reserved_bytes = sig.arena_reserved_bytes;
        d.untouched_commit_bytes = sig.untouched_commit_bytes;
    }
    (next, sig)
}

/// A process's CPU time and whether it is idle.
struct Cpu {
    /// Its CPU time, this scan's or the last read's.
    seconds: f64,
    /// Time since its CPU time was last read (0 when this scan read it).
    age_seconds: f64,
    idle: Option<bool>,
}

/// Idle over the time since CPU time was last read: a process whose memory did not move is
/// not read again until it does or is due, and keeps its last verdict.
fn cpu_idleness(
    prev: Option<&ProcState>,
    p: &ProcessSample,
    elapsed_seconds: f64,
    cpu_tick_seconds: f64,
) -> Cpu {
    let window = prev.map(|s| s.cpu_age_seconds + elapsed_seconds);
    let idle = match (prev, p.cpu_seconds) {
        (Some(s), None) => s.idle,
        (Some(s), Some(cpu)) => window.filter(|&w| w > 0.0).map(|w| {
            let used = cpu - s.cpu_seconds;
            used <= IDLE_MAX_CPU_SHARE * w + cpu_tick_seconds
        }),
        (None, _) => None,
    };
    Cpu {
        seconds: p.cpu_seconds.or(prev.map(|s| s.cpu_seconds)).unwrap_or(0.0),
        age_seconds: match p.cpu_seconds {
            Some(_) => 0.0,
            None => window.unwrap_or(0.0),
        },
        idle,
    }
}

/// khugepaged regrowth of an idle process: anonymous RSS and AnonHugePages rise together
/// while the process neither runs nor maps anything (its address space did not change).
fn regrowth(s: &ProcState, p: &ProcessSample, next: &mut ProcState) {
    let Some(huge) = p.rollup.and_then(|r| r.anon_huge_pages_bytes) else {
        return;
    };
    let before = &s.reading;
    if p.status.vm_size_bytes.unwrap_or(0) != before.status.vm_size_bytes.unwrap_or(0) {
        return;
    }
    let rss_anon = p.status.rss_anon_bytes.unwrap_or(0);
    let grown_anon = rss_anon.saturating_sub(s.rss_anon());
    let before_huge = before.rollup.and_then(|r| r.anon_huge_pages_bytes);
    let grown_huge = huge.saturating_sub(before_huge.unwrap_or(0));
    let regrown = grown_anon.min(grown_huge);
    next.trough_rss_anon_bytes = s.trough_rss_anon_bytes.min(rss_anon);
    next.regrown_since_trough_bytes = s.regrown_since_trough_bytes + regrown;
    next.regrown_total_bytes = s.regrown_total_bytes + regrown;
    if rss_anon < s.trough_rss_anon_bytes {
        // A new low: the stretch starts again from here.
        next.regrown_since_trough_bytes = 0;
    }
}

#[cfg(test)]
mod tests;
