//! The families of groups and of the top processes.

use std::fmt;

use super::catalogue::*;
use super::{u, Families, Labels, Num};
use crate::collect::heap::walk::{HeapKind, HeapTotals};
use crate::model::derive::ProcessReport;
use crate::model::groups::GroupStats;
use crate::model::signals::Method;
use crate::parse::status::Status;

/// A family and the field of a group it reports.
type GroupField = (&'static Metric, fn(&GroupStats) -> u64);
/// A family and the `/proc/PID/status` field of a top process it reports.
type StatusField = (&'static Metric, fn(&Status) -> Option<u64>);

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

#[allow(
    clippy::too_many_lines,
    reason = "one family per per-process metric, each a few lines"
)]
pub(super) fn encode_top(f: &mut Families, top: &[ProcessReport]) -> fmt::Result {
    let pids: Vec<String> = top.iter().map(|p| p.sample.pid.to_string()).collect();
    let labels = |i: usize| -> Labels {
        vec![
            ("pid", pids[i].as_str()),
            ("comm", top[i].sample.comm.as_str()),
        ]
    };
    let rows = |get: &dyn Fn(&ProcessReport) -> Option<Num>| -> Vec<(Labels, Num)> {
        top.iter()
            .enumerate()
            .filter_map(|(i, p)| get(p).map(|v| (labels(i), v)))
            .collect()
    };
    let flag = |b: Option<bool>| b.map(|b| Num::U(b as u64));
    let status: [StatusField; 7] = [
        (&PROCESS_RESIDENT_BYTES, |s| s.vm_rss_bytes),
        (&PROCESS_RESIDENT_PEAK_BYTES, |s| s.vm_hwm_bytes),
        (&PROCESS_VIRTUAL_BYTES, |s| s.vm_size_bytes),
        (&PROCESS_SWAP_BYTES, |s| s.vm_swap_bytes),
        (&PROCESS_RESIDENT_ANON_BYTES, |s| s.rss_anon_bytes),
        (&PROCESS_RESIDENT_FILE_BYTES, |s| s.rss_file_bytes),
        (&PROCESS_RESIDENT_SHMEM_BYTES, |s| s.rss_shmem_bytes),
    ];
    for (metric, get) in status {
        f.family(metric, rows(&|p| u(get(&p.sample.status))))?;
    }
    f.family(
        &PROCESS_PSS_BYTES,
        rows(&|p| p.sample.rollup.and_then(|r| u(r.pss_bytes))),
    )?;
    f.family(
        &PROCESS_ANON_HUGE_BYTES,
        rows(&|p| p.sample.rollup.and_then(|r| u(r.anon_huge_pages_bytes))),
    )?;
    f.family(&PROCESS_THREADS, rows(&|p| u(p.sample.status.threads)))?;
    f.family(
        &PROCESS_THP_ENABLED,
        rows(&|p| flag(p.sample.status.thp_enabled)),
    )?;
    f.family(&PROCESS_OOM_SCORE, rows(&|p| u(p.sample.oom_score)))?;
    f.family(
        &PROCESS_OOM_SCORE_ADJ,
        rows(&|p| p.sample.oom_score_adj.map(Num::I)),
    )?;
    f.family(&PROCESS_OOM_RANK, rows(&|p| Some(Num::U(p.oom_rank))))?;
    f.family(
        &PROCESS_START_TIME_SECONDS,
        rows(&|p| p.sample.start_time_seconds.map(Num::F)),
    )?;
    f.family(
        &PROCESS_CPU_SECONDS_TOTAL,
        rows(&|p| Some(Num::F(p.signals.cpu_seconds))),
    )?;
    f.family(&PROCESS_IDLE, rows(&|p| flag(p.signals.idle)))?;
    f.family(
        &PROCESS_RETAINED_PEAK_RATIO,
        rows(&|p| p.signals.retained_peak_ratio.map(Num::F)),
    )?;
    f.family(
        &PROCESS_HEAP_RESIDENT_BYTES,
        rows(&|p| u(p.signals.heap_resident_bytes)),
    )?;
    f.family(
        &PROCESS_HEAP_SIZE_BYTES,
        rows(&|p| u(p.signals.heap_size_bytes)),
    )?;
    let hoarded: Vec<(Labels, Num)> = top
        .iter()
        .enumerate()
        .filter_map(|(i, p)| {
            let method = p.signals.hoard_method?.as_str();
            let mut l = labels(i);
            l.push(("method", method));
            Some((l, Num::U(p.signals.hoarded_bytes?)))
        })
        .collect();
    f.family(&PROCESS_HOARDED_BYTES, hoarded)?;
    let per_heap = |get: fn(&HeapTotals) -> u64| -> Vec<(Labels, Num)> {
        top.iter()
            .enumerate()
            .filter_map(|(i, p)| p.signals.heap.as_deref().map(|h| (i, h)))
            .flat_map(|(i, h)| {
                HeapKind::ALL.map(|k| {
                    let mut l = labels(i);
                    l.push(("heap", k.as_str()));
                    (l, Num::U(get(h.of(k))))
                })
            })
            .collect()
    };
    f.family(&PROCESS_HEAP_FREE_BYTES, per_heap(|t| t.free_bytes))?;
    f.family(
        &PROCESS_HEAP_FREE_RESIDENT_BYTES,
        per_heap(|t| t.free_resident_bytes),
    )?;
    f.family(
        &PROCESS_HEAP_RECLAIMABLE_BYTES,
        per_heap(|t| t.reclaimable_bytes),
    )?;
    f.family(&PROCESS_HEAP_TOP_BYTES, per_heap(|t| t.top_bytes))?;
    f.family(&PROCESS_HEAP_FREE_CHUNKS, per_heap(|t| t.free_chunks))?;
    if top.iter().any(|p| p.identity.is_some()) {
        let mut metric = f.descriptor(&PROCESS_ALLOCATOR_INFO)?;
        for (i, p) in top.iter().enumerate() {
            if let Some(id) = &p.identity {
                metric.encode_family(&labels(i))?.encode_info(&vec![
                    ("allocator", id.allocator.as_str()),
                    ("runtime", id.runtime.as_str()),
                    ("version", id.version.as_str()),
                ])?;
            }
        }
    }
    f.family(&PROCESS_ARENA_HEAPS, rows(&|p| u(p.signals.arena_heaps)))?;
    f.family(
        &PROCESS_ARENA_RESERVED_BYTES,
        rows(&|p| u(p.signals.arena_reserved_bytes)),
    )?;
    f.family(
        &PROCESS_ARENA_AT_CEILING,
        rows(&|p| flag(p.signals.arena_at_ceiling)),
    )?;
    f.family(&PROCESS_COMMIT_BYTES, rows(&|p| u(p.signals.commit_bytes)))?;
    f.family(
        &PROCESS_UNTOUCHED_COMMIT_BYTES,
        rows(&|p| u(p.signals.untouched_commit_bytes)),
    )?;
    f.family(
        &PROCESS_REGROWN_SINCE_TROUGH_BYTES,
        rows(&|p| Some(Num::U(p.signals.regrown_since_trough_bytes))),
    )?;
    f.family(
        &PROCESS_REGROWN_BYTES_TOTAL,
        rows(&|p| Some(Num::U(p.signals.regrown_total_bytes))),
    )?;
    f.family(
        &PROCESS_THP_ANON_RATIO,
        rows(&|p| p.signals.thp_anon_ratio.map(Num::F)),
    )
}
