//! The families of the exporter itself and of the system collectors: meminfo, sysctl, THP
//! and khugepaged, vmstat, pressure, cgroups.

use std::fmt;

use super::catalogue::*;
use super::{u, Families, Labels, Num};
use crate::collect::heap::{jvm, Outcome};
use crate::model::derive::Snapshot;

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
        let walks: Vec<(Labels, Num)> = Outcome::ALL
            .iter()
            .map(|o| {
                (
                    vec![("outcome", o.as_str())],
                    Num::U(s.heap_walks_total.get(*o)),
                )
            })
            .collect();
        f.single(
            &HEAP_WALK_CPU_SECONDS_TOTAL,
            Some(Num::F(s.heap_walk_cpu_seconds_total)),
        )?;
        f.family(&HEAP_WALKS_TOTAL, walks)?;
        f.single(
            &HEAP_PENDING_PROCESSES,
            Some(Num::U(s.heap_pending_processes)),
        )?;
        let jvm_reads: Vec<(Labels, Num)> = jvm::Outcome::ALL
            .iter()
            .map(|o| {
                (
                    vec![("outcome", o.as_str())],
                    Num::U(s.jvm_reads_total.get(*o)),
                )
            })
            .collect();
        f.family(&JVM_READS_TOTAL, jvm_reads)?;
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

pub(super) fn encode_meminfo(f: &mut Families, s: &Snapshot) -> fmt::Result {
    if let Some(m) = &s.host.meminfo {
        for (metric, v) in [
            (&MEMORY_TOTAL_BYTES, m.mem_total_bytes),
            (&MEMORY_FREE_BYTES, m.mem_free_bytes),
            (&MEMORY_AVAILABLE_BYTES, m.mem_available_bytes),
            (&MEMORY_COMMITTED_BYTES, m.committed_as_bytes),
            (&MEMORY_COMMIT_LIMIT_BYTES, m.commit_limit_bytes),
            (&SWAP_TOTAL_BYTES, m.swap_total_bytes),
            (&SWAP_FREE_BYTES, m.swap_free_bytes),
            (&MEMORY_ANON_BYTES, m.anon_pages_bytes),
            (&MEMORY_ANON_HUGE_BYTES, m.anon_huge_pages_bytes),
            (&MEMORY_SHMEM_HUGE_BYTES, m.shmem_huge_pages_bytes),
            (&MEMORY_FILE_HUGE_BYTES, m.file_huge_pages_bytes),
            (&MEMORY_HUGETLB_BYTES, m.hugetlb_bytes),
            (&MEMORY_PAGE_TABLES_BYTES, m.page_tables_bytes),
        ] {
            f.single(metric, u(v))?;
        }
    }
    f.single(&COMMIT_RATIO, s.signals.commit_ratio.map(Num::F))?;
    let flag = |b: Option<bool>| b.map(|b| Num::U(b as u64));
    f.single(&COMMIT_LIMIT_REACHED, flag(s.signals.commit_limit_reached))?;
    f.single(
        &LAST_OOM_KILL_TIMESTAMP_SECONDS,
        s.signals.last_oom_kill_unix_seconds.map(Num::F),
    )?;
    f.single(
        &COMMIT_HEADROOM_BYTES,
        s.signals.commit_headroom_bytes.map(Num::I),
    )
}

pub(super) fn encode_sysctl(f: &mut Families, s: &Snapshot) -> fmt::Result {
    let Some(v) = &s.host.sysctl else {
        return Ok(());
    };
    f.single(&VM_OVERCOMMIT_MEMORY, u(v.overcommit_memory))?;
    f.single(&VM_OVERCOMMIT_RATIO, v.overcommit_ratio.map(Num::F))?;
    f.single(&VM_OVERCOMMIT_BYTES, u(v.overcommit_bytes))?;
    f.single(&VM_PANIC_ON_OOM, u(v.panic_on_oom))?;
    f.single(&VM_SWAPPINESS, u(v.swappiness))
}

pub(super) fn encode_thp(f: &mut Families, s: &Snapshot) -> fmt::Result {
    if let Some(t) = &s.host.thp {
        let mut labels: Labels = Vec::new();
        for (key, v) in [
            ("enabled", &t.enabled),
            ("defrag", &t.defrag),
            ("shmem_enabled", &t.shmem_enabled),
        ] {
            if let Some(v) = v {
                labels.push((key, v.as_str()));
            }
        }
        f.info(&THP_SETTINGS_INFO, labels)?;
        let k = &t.khugepaged;
        f.single(&KHUGEPAGED_DEFRAG, u(k.defrag))?;
        f.single(&KHUGEPAGED_MAX_PTES_NONE, u(k.max_ptes_none))?;
        f.single(&KHUGEPAGED_MAX_PTES_SWAP, u(k.max_ptes_swap))?;
        f.single(&KHUGEPAGED_MAX_PTES_SHARED, u(k.max_ptes_shared))?;
        f.single(&KHUGEPAGED_PAGES_TO_SCAN, u(k.pages_to_scan))?;
        f.single(
            &KHUGEPAGED_SCAN_SLEEP_SECONDS,
            k.scan_sleep.map(|d| Num::F(d.as_secs_f64())),
        )?;
        f.single(
            &KHUGEPAGED_ALLOC_SLEEP_SECONDS,
            k.alloc_sleep.map(|d| Num::F(d.as_secs_f64())),
        )?;
        f.single(&KHUGEPAGED_PAGES_COLLAPSED_TOTAL, u(k.pages_collapsed))?;
        f.single(&KHUGEPAGED_FULL_SCANS_TOTAL, u(k.full_scans))?;

        let size_info: Vec<_> = t
            .sizes
            .iter()
            .filter_map(|z| z.enabled.as_deref().map(|e| (z.label.as_str(), e)))
            .collect();
        if !size_info.is_empty() {
            let mut metric = f.descriptor(&MTHP_SETTINGS_INFO)?;
            for (size, enabled) in size_info {
                metric
                    .encode_family(&vec![("size", size)])?
                    .encode_info(&vec![("enabled", enabled)])?;
            }
        }
        // Every stats/ file, whatever the kernel has: nr_* are current folio counts, the
        // rest are event counters.
        let mut stat_names: Vec<&str> = t
            .sizes
            .iter()
            .flat_map(|z| z.stats.iter().map(|(k, _)| k.as_str()))
            .collect();
        stat_names.sort_unstable();
        stat_names.dedup();
        for stat in stat_names {
            let rows: Vec<(Labels, Num)> = t
                .sizes
                .iter()
                .filter_map(|z| {
                    z.stats
                        .iter()
                        .find(|(k, _)| k == stat)
                        .map(|(_, v)| (vec![("size", z.label.as_str())], Num::U(*v)))
                })
                .collect();
            match stat.strip_prefix("nr_") {
                Some(state) => f.keyed(&MTHP_KEY_FOLIOS, state, rows)?,
                None => f.keyed(&MTHP_KEY_TOTAL, stat, rows)?,
            }
        }
    }
    f.single(
        &THP_REGROWTH_RISK,
        s.signals.thp_regrowth_risk.map(|b| Num::U(b as u64)),
    )?;
    f.single(&THP_HIDDEN_BYTES, u(s.signals.thp_hidden_bytes))
}

pub(super) fn encode_vmstat(f: &mut Families, s: &Snapshot) -> fmt::Result {
    let Some(v) = &s.host.vmstat else {
        return Ok(());
    };
    for (key, value) in &v.counters {
        f.keyed(&VMSTAT_KEY_TOTAL, key, vec![(Vec::new(), Num::U(*value))])?;
    }
    Ok(())
}

pub(super) fn encode_pressure(f: &mut Families, s: &Snapshot) -> fmt::Result {
    let Some(p) = &s.host.pressure else {
        return Ok(());
    };
    f.single(
        &PRESSURE_MEMORY_WAITING_SECONDS_TOTAL,
        p.some_seconds.map(Num::F),
    )?;
    f.single(
        &PRESSURE_MEMORY_STALLED_SECONDS_TOTAL,
        p.full_seconds.map(Num::F),
    )?;
    f.single(
        &PRESSURE_MEMORY_WAITING_RATIO,
        s.signals.pressure_waiting_ratio.map(Num::F),
    )?;
    f.single(
        &PRESSURE_MEMORY_STALLED_RATIO,
        s.signals.pressure_stalled_ratio.map(Num::F),
    )
}

pub(super) fn encode_cgroups(f: &mut Families, s: &Snapshot) -> fmt::Result {
    let Some(cgroups) = &s.host.cgroups else {
        return Ok(());
    };
    // One row per cgroup that has the value.
    let rows = |get: fn(&crate::parse::memory_stat::MemoryStat) -> Option<u64>| {
        cgroups
            .iter()
            .filter_map(|(path, m)| Some((vec![("cgroup", path.as_str())], Num::U(get(m)?))))
            .collect::<Vec<(Labels, Num)>>()
    };
    let owners: Vec<_> = cgroups
        .iter()
        .map(|(path, _)| (path.as_str(), crate::parse::cgroup::identity(path)))
        .filter(|(_, id)| *id != Default::default())
        .collect();
    if !owners.is_empty() {
        let mut metric = f.descriptor(&CGROUP_INFO)?;
        for (path, id) in &owners {
            // All as the info's labels, so `cgroup` comes first as in the other families.
            let labels = vec![
                ("cgroup", *path),
                ("pod_uid", id.pod_uid.as_str()),
                ("container_id", id.container_id.as_str()),
                ("runtime", id.runtime),
                ("qos_class", id.qos_class),
                ("systemd_unit", id.systemd_unit.as_str()),
            ];
            metric.encode_info(&labels)?;
        }
    }
    f.family(&CGROUP_ANON_BYTES, rows(|m| Some(m.anon_bytes)))?;
    f.family(&CGROUP_ANON_HUGE_BYTES, rows(|m| Some(m.anon_huge_bytes)))?;
    f.family(&CGROUP_MEMORY_USAGE_BYTES, rows(|m| m.usage_bytes))?;
    f.family(&CGROUP_MEMORY_LIMIT_BYTES, rows(|m| m.limit_bytes))?;
    f.family(&CGROUP_WORKING_SET_BYTES, rows(|m| m.working_set_bytes()))?;
    // Hoarding measured in a cgroup's processes: what their allocators would give back
    // of what counts against its limit.
    let hoarded: Vec<(Labels, Num)> = cgroups
        .iter()
        .filter_map(|(path, _)| {
            let bytes = s.cgroup_hoarded_bytes.get(path)?;
            Some((vec![("cgroup", path.as_str())], Num::U(*bytes)))
        })
        .collect();
    f.family(&CGROUP_HOARDED_BYTES, hoarded)?;
    let held: Vec<(Labels, Num)> = cgroups
        .iter()
        .filter_map(|(path, _)| {
            let bytes = s.cgroup_jvm_held_bytes.get(path)?;
            Some((
                vec![("cgroup", path.as_str()), ("runtime", "jvm")],
                Num::U(*bytes),
            ))
        })
        .collect();
    f.family(&CGROUP_RUNTIME_HELD_BYTES, held)?;
    f.family(&CGROUP_OOM_KILLS_TOTAL, rows(|m| m.oom_kills))?;
    f.family(&CGROUP_LIMIT_OOMS_TOTAL, rows(|m| m.limit_ooms))
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
