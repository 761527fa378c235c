//! The families of the process groups (the top processes' are `top.rs`'s).

use std::fmt;

use super::catalogue::{
    Metric, GROUPS_FOLDED, GROUP_ANON_HUGE_BYTES, GROUP_ARENA_HEAPS, GROUP_ARENA_RESERVED_BYTES,
    GROUP_HEAP_FREE_BYTES, GROUP_HEAP_FREE_RESIDENT_BYTES, GROUP_HEAP_MEASURED_PROCESSES,
    GROUP_HEAP_RECLAIMABLE_BYTES, GROUP_HOARDED_BYTES, GROUP_LAZY_FREE_BYTES, GROUP_OOM_SCORE_MAX,
    GROUP_PROCESSES, GROUP_PSS_BYTES, GROUP_REGROWN_SINCE_TROUGH_BYTES, GROUP_RESIDENT_ANON_BYTES,
    GROUP_RESIDENT_BYTES, GROUP_RESIDENT_FILE_BYTES, GROUP_RESIDENT_PEAK_BYTES,
    GROUP_RESIDENT_SHMEM_BYTES, GROUP_RUNTIME_HELD_BYTES, GROUP_SWAP_BYTES, GROUP_THREADS,
    GROUP_UNTOUCHED_COMMIT_BYTES, GROUP_VIRTUAL_BYTES,
};
use super::families::{Families, Labels, Num};
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
    let sums: [GroupField; 13] = [
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
        (&GROUP_LAZY_FREE_BYTES, |g| g.lazy_free_bytes),
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
            crate::heap::list::NAMES
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
