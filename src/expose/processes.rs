//! The families of groups and of the top processes.

use std::fmt;

use super::catalogue::{
    Metric, GROUPS_FOLDED, GROUP_ANON_HUGE_BYTES, GROUP_ARENA_HEAPS, GROUP_ARENA_RESERVED_BYTES,
    GROUP_HEAP_FREE_BYTES, GROUP_HEAP_FREE_RESIDENT_BYTES, GROUP_HEAP_MEASURED_PROCESSES,
    GROUP_HEAP_RECLAIMABLE_BYTES, GROUP_HOARDED_BYTES, GROUP_OOM_SCORE_MAX, GROUP_PROCESSES,
    GROUP_PSS_BYTES, GROUP_REGROWN_SINCE_TROUGH_BYTES, GROUP_RESIDENT_ANON_BYTES,
    GROUP_RESIDENT_BYTES, GROUP_RESIDENT_FILE_BYTES, GROUP_RESIDENT_PEAK_BYTES,
    GROUP_RESIDENT_SHMEM_BYTES, GROUP_RUNTIME_HELD_BYTES, GROUP_SWAP_BYTES, GROUP_THREADS,
    GROUP_UNTOUCHED_COMMIT_BYTES, GROUP_VIRTUAL_BYTES, PROCESS_ALLOCATOR_INFO,
    PROCESS_ANON_HUGE_BYTES, PROCESS_ARENA_AT_CEILING, PROCESS_ARENA_HEAPS,
    PROCESS_ARENA_RESERVED_BYTES, PROCESS_COMMIT_BYTES, PROCESS_CPU_SECONDS_TOTAL,
    PROCESS_GO_GC_GOAL_BYTES, PROCESS_GO_HEAP_FREE_BYTES, PROCESS_GO_HEAP_FREE_RESIDENT_BYTES,
    PROCESS_GO_HEAP_IN_USE_BYTES, PROCESS_GO_HEAP_RELEASED_BYTES, PROCESS_GO_MEMORY_LIMIT_BYTES,
    PROCESS_GO_UNMEASURED, PROCESS_HEAP_FREE_BYTES, PROCESS_HEAP_FREE_CHUNKS,
    PROCESS_HEAP_FREE_RESIDENT_BYTES, PROCESS_HEAP_RECLAIMABLE_BYTES, PROCESS_HEAP_RESIDENT_BYTES,
    PROCESS_HEAP_SIZE_BYTES, PROCESS_HEAP_TOP_BYTES, PROCESS_HOARDED_BYTES, PROCESS_IDLE,
    PROCESS_JEMALLOC_ACTIVE_BYTES, PROCESS_JEMALLOC_DIRTY_BYTES,
    PROCESS_JEMALLOC_KEPT_RESIDENT_BYTES, PROCESS_JEMALLOC_MUZZY_BYTES,
    PROCESS_JEMALLOC_UNMEASURED, PROCESS_JVM_HEAP_COMMITTED_BYTES, PROCESS_JVM_HEAP_MAX_BYTES,
    PROCESS_JVM_HEAP_RESIDENT_BYTES, PROCESS_JVM_HEAP_USED_BYTES, PROCESS_JVM_INFO,
    PROCESS_JVM_METASPACE_COMMITTED_BYTES, PROCESS_JVM_METASPACE_USED_BYTES,
    PROCESS_JVM_UNMEASURED, PROCESS_OOM_RANK, PROCESS_OOM_SCORE, PROCESS_OOM_SCORE_ADJ,
    PROCESS_PSS_BYTES, PROCESS_PYTHON_ALLOCATED_BYTES, PROCESS_PYTHON_ARENAS,
    PROCESS_PYTHON_UNMEASURED, PROCESS_PYTHON_UNUSED_BYTES, PROCESS_PYTHON_UNUSED_RESIDENT_BYTES,
    PROCESS_REGROWN_BYTES_TOTAL, PROCESS_REGROWN_SINCE_TROUGH_BYTES, PROCESS_RESIDENT_ANON_BYTES,
    PROCESS_RESIDENT_BYTES, PROCESS_RESIDENT_FILE_BYTES, PROCESS_RESIDENT_PEAK_BYTES,
    PROCESS_RESIDENT_SHMEM_BYTES, PROCESS_RETAINED_PEAK_RATIO, PROCESS_RUNTIME_HELD_BYTES,
    PROCESS_START_TIME_SECONDS, PROCESS_SWAP_BYTES, PROCESS_THP_ANON_RATIO, PROCESS_THP_ENABLED,
    PROCESS_THREADS, PROCESS_UNTOUCHED_COMMIT_BYTES, PROCESS_VIRTUAL_BYTES,
};
use super::{u, Families, Labels, Num};
use crate::collect::heap::golang::Go;
use crate::collect::heap::jemalloc::Jemalloc;
use crate::collect::heap::jvm::{Jvm, Space};
use crate::collect::heap::python::Python;
use crate::collect::heap::walk::{HeapKind, HeapTotals};
use crate::model::derive::ProcessReport;
use crate::model::groups::GroupStats;
use crate::model::signals::Method;

/// A family and the field of a group it reports.
type GroupField = (&'static Metric, fn(&GroupStats) -> u64);

pub(super) fn encode_groups(
    f: &mut Families,
    groups: &[GroupStats],
    folded: Option<u64>,
) -> fmt::Result {
    f.single(&GROUPS_FOLDED, folded.map(Num::U))?;
    let rows = |get: fn(&GroupStats) -> u64| -> Vec<(Labels, Num)> {
        groups
            .iter()
            .map(|g| (vec![("group", g.name.as_str())], Num::U(get(g))))
            .collect()
    };
    let sums: [GroupField; 12] = [
        (&GROUP_PROCESSES, |g| g.processes),
        (&GROUP_RESIDENT_BYTES, |g| g.resident_bytes),
        (&GROUP_RESIDENT_PEAK_BYTES, |g| g.resident_peak_bytes),
        (&GROUP_VIRTUAL_BYTES, |g| g.virtual_bytes),
        (&GROUP_SWAP_BYTES, |g| g.swap_bytes),
        (&GROUP_RESIDENT_ANON_BYTES, |g| g.resident_anon_bytes),
        (&GROUP_RESIDENT_FILE_BYTES, |g| g.resident_file_bytes),
        (&GROUP_RESIDENT_SHMEM_BYTES, |g| g.resident_shmem_bytes),
        (&GROUP_PSS_BYTES, |g| g.pss_bytes),
        (&GROUP_ANON_HUGE_BYTES, |g| g.anon_huge_bytes),
        (&GROUP_THREADS, |g| g.threads),
        (&GROUP_OOM_SCORE_MAX, |g| g.oom_score_max),
    ];
    for (metric, get) in sums {
        f.family(metric, rows(get))?;
    }
    let hoarded: Vec<(Labels, Num)> = groups
        .iter()
        .flat_map(|g| {
            Method::ALL.map(|m| {
                let v = match m {
                    Method::Measured => g.hoarded_measured_bytes,
                    Method::Suspected => g.hoarded_suspected_bytes,
                };
                (
                    vec![("group", g.name.as_str()), ("method", m.as_str())],
                    Num::U(v),
                )
            })
        })
        .collect();
    f.family(&GROUP_HOARDED_BYTES, hoarded)?;
    let held: Vec<(Labels, Num)> = groups
        .iter()
        .flat_map(|g| {
            crate::collect::heap::readers::NAMES
                .iter()
                .copied()
                .zip(g.runtime_held)
                .filter(|(_, (n, _))| *n > 0)
                .map(|(runtime, (_, bytes))| {
                    (
                        vec![("group", g.name.as_str()), ("runtime", runtime)],
                        Num::U(bytes),
                    )
                })
        })
        .collect();
    f.family(&GROUP_RUNTIME_HELD_BYTES, held)?;
    let deep: [GroupField; 8] = [
        (&GROUP_HEAP_MEASURED_PROCESSES, |g| {
            g.heap_measured_processes
        }),
        (&GROUP_HEAP_FREE_BYTES, |g| g.heap_free_bytes),
        (&GROUP_HEAP_FREE_RESIDENT_BYTES, |g| {
            g.heap_free_resident_bytes
        }),
        (&GROUP_HEAP_RECLAIMABLE_BYTES, |g| g.heap_reclaimable_bytes),
        (&GROUP_REGROWN_SINCE_TROUGH_BYTES, |g| {
            g.regrown_since_trough_bytes
        }),
        (&GROUP_UNTOUCHED_COMMIT_BYTES, |g| g.untouched_commit_bytes),
        (&GROUP_ARENA_HEAPS, |g| g.arena_heaps),
        (&GROUP_ARENA_RESERVED_BYTES, |g| g.arena_reserved_bytes),
    ];
    for (metric, get) in deep {
        f.family(metric, rows(get))?;
    }
    Ok(())
}

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
