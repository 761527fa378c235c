//! The families of the exporter itself: its scans, its collectors, its errors and its own
//! process.

use std::fmt;

use super::catalogue::{
    BUILD_INFO, DEEP_CPU_SECONDS_TOTAL, DEEP_SCAN_CANDIDATES, DEEP_SCAN_CPU_SECONDS,
    DEEP_SCAN_DEFERRED, DEEP_SCAN_DURATION_SECONDS, DEEP_SCAN_PROCESSES, HEAP_PENDING_PROCESSES,
    HEAP_WALK_CPU_SECONDS_TOTAL, LAST_SCAN_TIMESTAMP_SECONDS, OWN_CPU_SECONDS_TOTAL, OWN_MAX_FDS,
    OWN_OPEN_FDS, OWN_RESIDENT_MEMORY_BYTES, OWN_START_TIME_SECONDS, OWN_VIRTUAL_MEMORY_BYTES,
    PROCESSES_SCANNED, SCANS_TOTAL, SCAN_DURATION_SECONDS, SCAN_ERRORS_TOTAL,
    SCAN_KEPT_DESCRIPTORS, SCAN_PROC_LISTINGS_TOTAL, SCAN_READER_THREADS, SCAN_RESTED_PROCESSES,
    SCAN_ROLLUP_READS, SCAN_SLOWEST_PROCESS_READ_SECONDS, SCAN_STALLED_PROCESSES,
    SCAN_UNKEPT_PROCESSES, SCAN_WATCHED_PROCESSES, SCRAPE_COLLECTOR_DURATION_SECONDS,
    SCRAPE_COLLECTOR_SUCCESS,
};
use super::families::{u, Families, Labels, Num};
use crate::model::derive::Snapshot;

/// Each heap reader's counter of reads by outcome, in the readers' order (`heap::list`).
fn encode_reads(f: &mut Families, s: &Snapshot) -> fmt::Result {
    let counts = s.reads_total.each();
    for (family, (_, outcomes)) in crate::heap::list::READS.iter().zip(&counts) {
        let rows = outcomes
            .iter()
            .map(|&(o, n)| (vec![("outcome", o)], Num::U(n)))
            .collect();
        f.family(family, rows)?;
    }
    Ok(())
}

pub(super) fn encode_self(f: &mut Families, s: &Snapshot) -> fmt::Result {
    f.info(&BUILD_INFO, crate::config::build::labels())?;
    f.single(&SCANS_TOTAL, Some(Num::U(s.scans)))?;
    f.single(
        &LAST_SCAN_TIMESTAMP_SECONDS,
        s.last_scan_unix_seconds.map(Num::F),
    )?;
    f.single(&SCAN_DURATION_SECONDS, s.scan_duration_seconds.map(Num::F))?;
    f.single(&PROCESSES_SCANNED, u(s.processes_scanned))?;
    let rows = |get: fn(&crate::collect::CollectorRun) -> Num| -> Vec<(Labels, Num)> {
        s.collectors
            .iter()
            .map(|c| (vec![("collector", c.name.as_str())], get(c)))
            .collect()
    };
    f.family(
        &SCRAPE_COLLECTOR_SUCCESS,
        rows(|c| Num::U(c.success as u64)),
    )?;
    f.family(
        &SCRAPE_COLLECTOR_DURATION_SECONDS,
        rows(|c| Num::F(c.duration_seconds)),
    )?;
    if let Some(r) = &s.reads {
        f.single(&SCAN_ROLLUP_READS, Some(Num::U(r.rollups_read)))?;
        f.single(&SCAN_KEPT_DESCRIPTORS, Some(Num::U(r.kept_descriptors)))?;
        f.single(&SCAN_UNKEPT_PROCESSES, Some(Num::U(r.unkept)))?;
        f.single(&SCAN_WATCHED_PROCESSES, Some(Num::U(r.watched)))?;
        f.single(&SCAN_RESTED_PROCESSES, Some(Num::U(r.rested)))?;
        f.single(&SCAN_STALLED_PROCESSES, Some(Num::U(r.stalled)))?;
        f.single(
            &SCAN_SLOWEST_PROCESS_READ_SECONDS,
            Some(Num::F(r.slowest_seconds)),
        )?;
        f.single(&SCAN_READER_THREADS, Some(Num::U(r.threads)))?;
        f.single(&SCAN_PROC_LISTINGS_TOTAL, Some(Num::U(r.listings)))?;
    }
    if let Some(d) = &s.deep {
        f.single(&DEEP_SCAN_CANDIDATES, Some(Num::U(d.candidates)))?;
        f.single(&DEEP_SCAN_PROCESSES, Some(Num::U(d.covered)))?;
        f.single(&DEEP_SCAN_DEFERRED, Some(Num::U(d.deferred)))?;
        f.single(
            &DEEP_SCAN_DURATION_SECONDS,
            Some(Num::F(d.duration_seconds)),
        )?;
        f.single(&DEEP_SCAN_CPU_SECONDS, Some(Num::F(d.cpu_seconds)))?;
        f.single(
            &DEEP_CPU_SECONDS_TOTAL,
            Some(Num::F(s.deep_cpu_seconds_total)),
        )?;
        f.single(
            &HEAP_WALK_CPU_SECONDS_TOTAL,
            Some(Num::F(s.heap_walk_cpu_seconds_total)),
        )?;
        f.single(
            &HEAP_PENDING_PROCESSES,
            Some(Num::U(s.heap_pending_processes)),
        )?;
        encode_reads(f, s)?;
    }
    let errors: Vec<(Labels, Num)> = s
        .errors
        .iter()
        .map(|((collector, reason), n)| {
            (
                vec![
                    ("collector", collector.as_str()),
                    ("reason", reason.as_str()),
                ],
                Num::U(*n),
            )
        })
        .collect();
    f.family(&SCAN_ERRORS_TOTAL, errors)
}

/// The exporter's own process.
pub(super) fn encode_own(f: &mut Families, s: &Snapshot) -> fmt::Result {
    let Some(o) = &s.own else {
        return Ok(());
    };
    f.single(&OWN_CPU_SECONDS_TOTAL, o.cpu_seconds.map(Num::F))?;
    f.single(&OWN_RESIDENT_MEMORY_BYTES, u(o.resident_bytes))?;
    f.single(&OWN_VIRTUAL_MEMORY_BYTES, u(o.virtual_bytes))?;
    f.single(&OWN_OPEN_FDS, u(o.open_fds))?;
    f.single(&OWN_MAX_FDS, u(o.max_fds))?;
    f.single(&OWN_START_TIME_SECONDS, o.start_time_seconds.map(Num::F))
}
