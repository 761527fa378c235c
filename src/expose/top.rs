//! The families of the top processes: one row per family in [`TOP`], each with how it
//! gets its samples from a process.

use std::fmt;

use super::catalogue::*;
use super::families::{u, Families, Labels, Num};
use crate::heap::golang::Go;
use crate::heap::jemalloc::Jemalloc;
use crate::heap::jvm::{Jvm, Space};
use crate::heap::python::Python;
use crate::heap::walk::{HeapKind, HeapTotals};
use crate::model::derive::ProcessReport;

/// How a family of the top processes gets its samples from one of them (labelled `pid`
/// and `comm`).
enum Get {
    /// One sample.
    One(fn(&ProcessReport) -> Option<Num>),
    /// One sample per heap (`heap`), from the latest heap walk's totals.
    PerHeap(fn(&HeapTotals) -> u64),
    /// The hoarded bytes, labelled with how they were reached (`method`).
    Hoarded,
    /// The allocator, runtime and version (an info family).
    Allocator,
    /// The held heap of the process's runtime, labelled with the runtime (`runtime`).
    RuntimeHeld,
    /// A JVM's collector (an info family).
    JvmInfo,
    /// One sample per space of a JVM's heap (`generation`, `space`).
    PerJvmSpace(fn(&Space) -> u64),
    /// 1 with why a runtime's heap was not measured (`reason`): a JVM's, a Go program's.
    Unmeasured(fn(&ProcessReport) -> Option<&'static str>),
}

fn flag(b: Option<bool>) -> Option<Num> {
    b.map(|b| Num::U(b as u64))
}

/// The families of the top processes, in the order of the exposition, each with how it
/// gets its value.
const TOP: &[(&Metric, Get)] = &[
    (
        &PROCESS_RESIDENT_BYTES,
        Get::One(|p| u(p.sample.status.vm_rss_bytes)),
    ),
    (
        &PROCESS_RESIDENT_PEAK_BYTES,
        Get::One(|p| u(p.sample.status.vm_hwm_bytes)),
    ),
    (
        &PROCESS_VIRTUAL_BYTES,
        Get::One(|p| u(p.sample.status.vm_size_bytes)),
    ),
    (
        &PROCESS_SWAP_BYTES,
        Get::One(|p| u(p.sample.status.vm_swap_bytes)),
    ),
    (
        &PROCESS_RESIDENT_ANON_BYTES,
        Get::One(|p| u(p.sample.status.rss_anon_bytes)),
    ),
    (
        &PROCESS_RESIDENT_FILE_BYTES,
        Get::One(|p| u(p.sample.status.rss_file_bytes)),
    ),
    (
        &PROCESS_RESIDENT_SHMEM_BYTES,
        Get::One(|p| u(p.sample.status.rss_shmem_bytes)),
    ),
    (
        &PROCESS_PSS_BYTES,
        Get::One(|p| p.sample.rollup.and_then(|r| u(r.pss_bytes))),
    ),
    (
        &PROCESS_ANON_HUGE_BYTES,
        Get::One(|p| p.sample.rollup.and_then(|r| u(r.anon_huge_pages_bytes))),
    ),
    (&PROCESS_THREADS, Get::One(|p| u(p.sample.status.threads))),
    (
        &PROCESS_THP_ENABLED,
        Get::One(|p| flag(p.sample.status.thp_enabled)),
    ),
    (&PROCESS_OOM_SCORE, Get::One(|p| u(p.sample.oom_score))),
    (
        &PROCESS_OOM_SCORE_ADJ,
        Get::One(|p| p.sample.oom_score_adj.map(Num::I)),
    ),
    (&PROCESS_OOM_RANK, Get::One(|p| Some(Num::U(p.oom_rank)))),
    (
        &PROCESS_START_TIME_SECONDS,
        Get::One(|p| p.sample.start_time_seconds.map(Num::F)),
    ),
    (
        &PROCESS_CPU_SECONDS_TOTAL,
        Get::One(|p| Some(Num::F(p.signals.cpu_seconds))),
    ),
    (&PROCESS_IDLE, Get::One(|p| flag(p.signals.idle))),
    (
        &PROCESS_RETAINED_PEAK_RATIO,
        Get::One(|p| p.signals.retained_peak_ratio.map(Num::F)),
    ),
    (
        &PROCESS_HEAP_RESIDENT_BYTES,
        Get::One(|p| u(p.signals.heap_resident_bytes)),
    ),
    (
        &PROCESS_HEAP_SIZE_BYTES,
        Get::One(|p| u(p.signals.heap_size_bytes)),
    ),
    (&PROCESS_HOARDED_BYTES, Get::Hoarded),
    (&PROCESS_RUNTIME_HELD_BYTES, Get::RuntimeHeld),
    (&PROCESS_HEAP_FREE_BYTES, Get::PerHeap(|t| t.free_bytes)),
    (
        &PROCESS_HEAP_FREE_RESIDENT_BYTES,
        Get::PerHeap(|t| t.free_resident_bytes),
    ),
    (
        &PROCESS_HEAP_RECLAIMABLE_BYTES,
        Get::PerHeap(|t| t.reclaimable_bytes),
    ),
    (&PROCESS_HEAP_TOP_BYTES, Get::PerHeap(|t| t.top_bytes)),
    (&PROCESS_HEAP_FREE_CHUNKS, Get::PerHeap(|t| t.free_chunks)),
    (&PROCESS_ALLOCATOR_INFO, Get::Allocator),
    (&PROCESS_JVM_INFO, Get::JvmInfo),
    (
        &PROCESS_JVM_HEAP_COMMITTED_BYTES,
        Get::PerJvmSpace(|s| s.committed_bytes),
    ),
    (
        &PROCESS_JVM_HEAP_USED_BYTES,
        Get::PerJvmSpace(|s| s.used_bytes),
    ),
    (
        &PROCESS_JVM_HEAP_MAX_BYTES,
        Get::One(|p| u(p.signals.figure::<Jvm>()?.max_bytes())),
    ),
    (
        &PROCESS_JVM_HEAP_RESIDENT_BYTES,
        Get::One(|p| u(p.signals.figure::<Jvm>()?.resident_bytes)),
    ),
    (
        &PROCESS_JVM_METASPACE_COMMITTED_BYTES,
        Get::One(|p| Some(Num::U(p.signals.figure::<Jvm>()?.metaspace?.0))),
    ),
    (
        &PROCESS_JVM_METASPACE_USED_BYTES,
        Get::One(|p| Some(Num::U(p.signals.figure::<Jvm>()?.metaspace?.1))),
    ),
    (
        &PROCESS_JVM_UNMEASURED,
        Get::Unmeasured(|p| p.signals.unmeasured_label::<Jvm>()),
    ),
    (
        &PROCESS_GO_HEAP_IN_USE_BYTES,
        Get::One(|p| u(Some(p.signals.figure::<Go>()?.in_use_bytes))),
    ),
    (
        &PROCESS_GO_HEAP_FREE_BYTES,
        Get::One(|p| u(Some(p.signals.figure::<Go>()?.free_bytes))),
    ),
    (
        &PROCESS_GO_HEAP_FREE_RESIDENT_BYTES,
        Get::One(|p| u(Some(p.signals.figure::<Go>()?.free_resident_bytes))),
    ),
    (
        &PROCESS_GO_HEAP_RELEASED_BYTES,
        Get::One(|p| u(Some(p.signals.figure::<Go>()?.released_bytes))),
    ),
    (
        &PROCESS_GO_GC_GOAL_BYTES,
        Get::One(|p| u(Some(p.signals.figure::<Go>()?.gc_percent_goal_bytes))),
    ),
    (
        &PROCESS_GO_MEMORY_LIMIT_BYTES,
        Get::One(|p| u(p.signals.figure::<Go>()?.memory_limit())),
    ),
    (
        &PROCESS_GO_UNMEASURED,
        Get::Unmeasured(|p| p.signals.unmeasured_label::<Go>()),
    ),
    (
        &PROCESS_JEMALLOC_ACTIVE_BYTES,
        Get::One(|p| u(Some(p.signals.figure::<Jemalloc>()?.active_bytes))),
    ),
    (
        &PROCESS_JEMALLOC_DIRTY_BYTES,
        Get::One(|p| u(Some(p.signals.figure::<Jemalloc>()?.dirty_bytes))),
    ),
    (
        &PROCESS_JEMALLOC_MUZZY_BYTES,
        Get::One(|p| u(Some(p.signals.figure::<Jemalloc>()?.muzzy_bytes))),
    ),
    (
        &PROCESS_JEMALLOC_KEPT_RESIDENT_BYTES,
        Get::One(|p| u(Some(p.signals.figure::<Jemalloc>()?.held_bytes()))),
    ),
    (
        &PROCESS_JEMALLOC_UNMEASURED,
        Get::Unmeasured(|p| p.signals.unmeasured_label::<Jemalloc>()),
    ),
    (
        &PROCESS_PYTHON_ARENAS,
        Get::One(|p| u(Some(p.signals.figure::<Python>()?.arenas))),
    ),
    (
        &PROCESS_PYTHON_ALLOCATED_BYTES,
        Get::One(|p| u(Some(p.signals.figure::<Python>()?.allocated_bytes))),
    ),
    (
        &PROCESS_PYTHON_UNUSED_BYTES,
        Get::One(|p| u(Some(p.signals.figure::<Python>()?.unused_bytes()))),
    ),
    (
        &PROCESS_PYTHON_UNUSED_RESIDENT_BYTES,
        Get::One(|p| u(Some(p.signals.figure::<Python>()?.unused_resident_bytes))),
    ),
    (
        &PROCESS_PYTHON_UNMEASURED,
        Get::Unmeasured(|p| p.signals.unmeasured_label::<Python>()),
    ),
    (&PROCESS_ARENA_HEAPS, Get::One(|p| u(p.signals.arena_heaps))),
    (
        &PROCESS_ARENA_RESERVED_BYTES,
        Get::One(|p| u(p.signals.arena_reserved_bytes)),
    ),
    (
        &PROCESS_ARENA_AT_CEILING,
        Get::One(|p| flag(p.signals.arena_at_ceiling)),
    ),
    (
        &PROCESS_COMMIT_BYTES,
        Get::One(|p| u(p.signals.commit_bytes)),
    ),
    (
        &PROCESS_UNTOUCHED_COMMIT_BYTES,
        Get::One(|p| u(p.signals.untouched_commit_bytes)),
    ),
    (
        &PROCESS_REGROWN_SINCE_TROUGH_BYTES,
        Get::One(|p| Some(Num::U(p.signals.regrown_since_trough_bytes))),
    ),
    (
        &PROCESS_REGROWN_BYTES_TOTAL,
        Get::One(|p| Some(Num::U(p.signals.regrown_total_bytes))),
    ),
    (
        &PROCESS_THP_ANON_RATIO,
        Get::One(|p| p.signals.thp_anon_ratio.map(Num::F)),
    ),
];

/// `labels` with one more.
fn with<'a>(mut labels: Labels<'a>, key: &'static str, value: &'a str) -> Labels<'a> {
    labels.push((key, value));
    labels
}

/// Every family of the top processes: a loop over [`TOP`].
pub(super) fn encode_top(f: &mut Families, top: &[ProcessReport]) -> fmt::Result {
    let pids: Vec<String> = top.iter().map(|p| p.sample.pid.to_string()).collect();
    let labels = |i: usize| -> Labels {
        vec![
            ("pid", pids[i].as_str()),
            ("comm", top[i].sample.comm.as_str()),
        ]
    };
    for (metric, get) in TOP {
        let samples: Vec<(Labels, Num)> = match get {
            Get::One(get) => top
                .iter()
                .enumerate()
                .filter_map(|(i, p)| get(p).map(|v| (labels(i), v)))
                .collect(),
            Get::Hoarded => top
                .iter()
                .enumerate()
                .filter_map(|(i, p)| {
                    let method = p.signals.hoard_method?.as_str();
                    Some((
                        with(labels(i), "method", method),
                        Num::U(p.signals.hoarded_bytes?),
                    ))
                })
                .collect(),
            Get::PerHeap(get) => top
                .iter()
                .enumerate()
                .filter_map(|(i, p)| p.signals.heap.as_deref().map(|h| (i, h)))
                .flat_map(|(i, h)| {
                    HeapKind::ALL
                        .map(|k| (with(labels(i), "heap", k.as_str()), Num::U(get(h.of(k)))))
                })
                .collect(),
            Get::RuntimeHeld => top
                .iter()
                .enumerate()
                .filter_map(|(i, p)| {
                    let held = p.signals.runtime_held_bytes?;
                    let by = p.signals.runtime_held_by?;
                    Some((with(labels(i), "runtime", by), Num::U(held)))
                })
                .collect(),
            Get::PerJvmSpace(get) => top
                .iter()
                .enumerate()
                .filter_map(|(i, p)| p.signals.figure::<Jvm>().map(Box::as_ref).map(|j| (i, j)))
                .flat_map(|(i, j)| j.spaces.iter().map(move |s| (i, s)))
                .map(|(i, s)| {
                    let l = with(labels(i), "generation", s.generation.as_str());
                    (with(l, "space", s.name.as_str()), Num::U(get(s)))
                })
                .collect(),
            Get::Unmeasured(why) => top
                .iter()
                .enumerate()
                .filter_map(|(i, p)| Some((with(labels(i), "reason", why(p)?), Num::U(1))))
                .collect(),
            Get::JvmInfo => {
                if top.iter().any(|p| p.signals.figure::<Jvm>().is_some()) {
                    let mut family = f.descriptor(metric)?;
                    for (i, p) in top.iter().enumerate() {
                        if let Some(j) = p.signals.figure::<Jvm>() {
                            family
                                .encode_family(&labels(i))?
                                .encode_info(&vec![("collector", j.collector.as_str())])?;
                        }
                    }
                }
                continue;
            }
            Get::Allocator => {
                // An info family, written only once a deep read has told one.
                if top.iter().any(|p| p.identity.is_some()) {
                    let mut family = f.descriptor(metric)?;
                    for (i, p) in top.iter().enumerate() {
                        if let Some(id) = &p.identity {
                            family.encode_family(&labels(i))?.encode_info(&vec![
                                ("allocator", id.allocator.as_str()),
                                ("runtime", id.runtime.as_str()),
                                ("version", id.version.as_str()),
                            ])?;
                        }
                    }
                }
                continue;
            }
        };
        f.family(metric, samples)?;
    }
    Ok(())
}
