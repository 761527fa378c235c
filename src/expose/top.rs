//! The families of the top processes: one row per family in [`TOP`], each with how it
//! gets its samples from a process.

use std::fmt;

use super::catalogue::*;
use super::families::{u, Families, Labels, Num};
use crate::family::Kind;
use crate::heap::walk::{HeapKind, HeapTotals};
use crate::heap::words::Samples;
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
}

fn flag(b: Option<bool>) -> Option<Num> {
    b.map(|b| Num::U(b as u64))
}

/// The families of the top processes before the heap readers' (theirs are said by each
/// reader, `heap::words`), in the order of the exposition, each with how it gets its value.
const BEFORE_READERS: &[(&Metric, Get)] = &[
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
    (
        &PROCESS_LAZY_FREE_BYTES,
        Get::One(|p| p.sample.rollup.and_then(|r| u(r.lazy_free_bytes))),
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
];

/// The families of the top processes after the heap readers'.
const AFTER_READERS: &[(&Metric, Get)] = &[
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

/// Every family of the top processes: the rows before the heap readers', theirs, and the
/// rows after.
pub(super) fn encode_top(f: &mut Families, top: &[ProcessReport]) -> fmt::Result {
    let pids: Vec<String> = top.iter().map(|p| p.sample.pid.to_string()).collect();
    let labels = |i: usize| -> Labels {
        vec![
            ("pid", pids[i].as_str()),
            ("comm", top[i].sample.comm.as_str()),
        ]
    };
    encode_rows(f, top, &labels, BEFORE_READERS)?;
    encode_readers(f, top, &labels)?;
    encode_rows(f, top, &labels, AFTER_READERS)
}

/// The heap readers' families of the top processes: the samples each reader's rows take
/// from its read of each process, row by row in the readers' order.
fn encode_readers<'a>(
    f: &mut Families,
    top: &[ProcessReport],
    labels: &dyn Fn(usize) -> Labels<'a>,
) -> fmt::Result {
    let said: Vec<Samples> = top
        .iter()
        .map(|p| {
            let mut out = Samples::default();
            let readings = p.signals.reading.iter().flat_map(|r| &r.readings);
            for reading in readings {
                reading.samples(&mut out);
            }
            out
        })
        .collect();
    for row in crate::heap::list::ROWS.iter().flat_map(|r| r.iter()) {
        let of_row = |i: usize| said[i].0.iter().filter(move |s| s.row.name == row.name);
        if row.kind == Kind::Info {
            // An info's labels are the information: written after the process's.
            if (0..top.len()).any(|i| of_row(i).next().is_some()) {
                let mut family = f.descriptor(row)?;
                for i in 0..top.len() {
                    for s in of_row(i) {
                        let carried: Labels =
                            s.labels.iter().map(|(k, v)| (*k, v.as_str())).collect();
                        family.encode_family(&labels(i))?.encode_info(&carried)?;
                    }
                }
            }
            continue;
        }
        let samples: Vec<(Labels, Num)> = (0..top.len())
            .flat_map(|i| {
                of_row(i).map(move |s| {
                    let mut l = labels(i);
                    l.extend(s.labels.iter().map(|(k, v)| (*k, v.as_str())));
                    (l, s.value)
                })
            })
            .collect();
        f.family(row, samples)?;
    }
    Ok(())
}

/// Families of the top processes, each as its row in `rows` says.
fn encode_rows<'a>(
    f: &mut Families,
    top: &[ProcessReport],
    labels: &dyn Fn(usize) -> Labels<'a>,
    rows: &[(&Metric, Get)],
) -> fmt::Result {
    for (metric, get) in rows {
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
