//! Per-process signals: pure functions of (previous state, current sample, elapsed).
//!
//! The thresholds are the measured signatures of each phenomenon (docs/signals.md says
//! what each signal means); each one is named once, in `signals/figures.rs`.

use std::sync::Arc;

use crate::collect::{ProcessFiles, ProcessSample};
use crate::heap::runtime::{Allocator, Runtime};
use crate::heap::shape::NoFigure;
use crate::heap::{Glibc, HeapMeasure, HeapReading};
use crate::parse::smaps::SmapsSummary;

mod figures;
mod hoarding;
pub use figures::{
    oom_memory_share, Method, Signals, ARENAS_PER_CPU, COMMIT_NEAR_LIMIT_RATIO,
    HOARD_MIN_HEAP_BYTES, HOARD_MIN_HEAP_DENSITY, HOARD_MIN_HEAP_SHARE, HOARD_MIN_MEASURED_BYTES,
    HOARD_MIN_RETAINED, IDLE_MAX_CPU_SHARE, LOW_MEMORY_RATIO, OOM_LIKELY_VICTIM_RANK,
    OOM_LIKELY_VICTIM_SHARE, PRESSURE_STALLED_RATIO, THP_HIDDEN_MAX_SHARE,
    UNTOUCHED_COMMIT_MIN_BYTES,
};
use hoarding::{from_mappings, held_heaps, measured_heap};

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

/// `prev` without its heap reading and measurement when this scan read no heap of the
/// process and the last reading is older than `fresh_seconds` at `now`: a figure that old
/// is not served as measured (the process's deep reads kept being deferred or backed
/// off); `None` when `prev` stands as it is.
pub(crate) fn without_stale_heap(
    prev: &ProcState,
    p: &ProcessSample,
    now: Option<f64>,
    fresh_seconds: Option<f64>,
) -> Option<ProcState> {
    let (now, fresh) = now.zip(fresh_seconds)?;
    let read_at = prev.heap()?.read_at_unix_seconds;
    if p.heap.is_some() || now - read_at <= fresh {
        return None;
    }
    let mut stripped = prev.clone();
    if let Some(d) = &mut stripped.deep {
        d.heap = None;
        d.measured = None;
    }
    Some(stripped)
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
