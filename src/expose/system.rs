//! The families of the exporter itself and of the system collectors: meminfo, sysctl, THP
//! and khugepaged, vmstat, pressure, cgroups.

use super::*;

pub(super) fn encode_self(f: &mut Families, s: &Snapshot) -> fmt::Result {
    f.info(
        "build",
        "Version of membloat_exporter.",
        vec![("version", env!("CARGO_PKG_VERSION"))],
    )?;
    f.counter(
        "scans",
        "Scans of /proc completed since the exporter started.",
        None,
        Some(Num::U(s.scans)),
    )?;
    f.gauge(
        "last_scan_timestamp",
        "Unix time the latest completed scan started.",
        seconds(),
        s.last_scan_unix_seconds.map(Num::F),
    )?;
    f.gauge(
        "scan_duration",
        "Wall time the latest scan took.",
        seconds(),
        s.scan_duration_seconds.map(Num::F),
    )?;
    f.gauge(
        "processes_scanned",
        "Processes with memory (kernel threads excluded) read by the latest scan.",
        None,
        u(s.processes_scanned),
    )?;
    let rows = |get: fn(&crate::collect::CollectorRun) -> Num| -> Vec<(Labels, Num)> {
        s.collectors
            .iter()
            .map(|c| (vec![("collector", c.name.as_str())], get(c)))
            .collect()
    };
    f.family("scrape_collector_success", "1 when the collector read its source in the latest scan, 0 when it failed or the kernel lacks it.", None, MetricType::Gauge, rows(|c| Num::U(c.success as u64)))?;
    f.family(
        "scrape_collector_duration",
        "Time the collector took in the latest scan.",
        seconds(),
        MetricType::Gauge,
        rows(|c| Num::F(c.duration_seconds)),
    )?;
    if let Some(r) = &s.reads {
        f.gauge("scan_rollup_reads", "Processes whose smaps_rollup the latest scan read; the others had the same statm as in the scan before and are re-read every --collector.processes.rollup-refresh scans.", None, Some(Num::U(r.rollups_read)))?;
        f.gauge("scan_stalled_processes", "Processes the latest scan left behind because their read outlasted --collector.processes.read-timeout.", None, Some(Num::U(r.stalled)))?;
        f.gauge(
            "scan_slowest_process_read",
            "Longest time the files of one process took to read in the latest scan.",
            seconds(),
            Some(Num::F(r.slowest_seconds)),
        )?;
        f.gauge("scan_reader_threads", "Threads reading /proc/PID files, stuck ones included (--collector.processes.readers, up to 4 more).", None, Some(Num::U(r.threads)))?;
    }
    if let Some(d) = &s.deep {
        f.gauge("deep_scan_candidates", "Processes that met the deep-tier thresholds (--collector.processes.deep-min-size) in the latest scan.", None, Some(Num::U(d.candidates)))?;
        f.gauge(
            "deep_scan_processes",
            "Processes whose /proc/PID/smaps the deep tier read in the latest scan.",
            None,
            Some(Num::U(d.covered)),
        )?;
        f.gauge("deep_scan_deferred", "Candidates due for a deep read but left for a later scan by --collector.processes.deep-budget.", None, Some(Num::U(d.deferred)))?;
        f.gauge(
            "deep_scan_duration",
            "Wall time of the deep tier in the latest scan.",
            seconds(),
            Some(Num::F(d.duration_seconds)),
        )?;
        f.gauge(
            "deep_scan_cpu",
            "CPU time of the deep tier in the latest scan.",
            seconds(),
            Some(Num::F(d.cpu_seconds)),
        )?;
        f.counter(
            "deep_cpu",
            "CPU time of the deep tier since the exporter started.",
            seconds(),
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
        f.counter(
            "heap_walk_cpu",
            "CPU time of the heap walks (reading /proc/PID/mem and pagemap) since the exporter started; part of membloat_deep_cpu_seconds_total.",
            seconds(),
            Some(Num::F(s.heap_walk_cpu_seconds_total)),
        )?;
        f.family("heap_walks", "Heap walks of deep-read processes by outcome: measured; not_glibc (another allocator: hoarding stays suspected); inconsistent (the heap changed under two tries, or is not glibc's); budget (more chunks than a walk may visit); unreadable (/proc/PID/mem or pagemap denied or gone).", None, MetricType::Counter, walks)?;
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
    f.family("scan_errors", "Values skipped by reason: vanished (process exited), permission_denied, malformed (unparseable or absurd), unsupported (kernel lacks the file), io.", None, MetricType::Counter, errors)
}

pub(super) fn encode_meminfo(f: &mut Families, s: &Snapshot) -> fmt::Result {
    if let Some(m) = &s.meminfo {
        for (name, help, v) in [
            ("memory_total", "MemTotal: usable RAM (/proc/meminfo).", m.mem_total_bytes),
            ("memory_free", "MemFree: unused RAM (/proc/meminfo).", m.mem_free_bytes),
            ("memory_available", "MemAvailable: memory available to new work without swapping (/proc/meminfo).", m.mem_available_bytes),
            ("memory_committed", "Committed_AS: address space committed by all processes, touched or not (/proc/meminfo).", m.committed_as_bytes),
            ("memory_commit_limit", "CommitLimit: the commit limit, enforced only when vm.overcommit_memory is 2 (/proc/meminfo).", m.commit_limit_bytes),
            ("swap_total", "SwapTotal (/proc/meminfo).", m.swap_total_bytes),
            ("swap_free", "SwapFree (/proc/meminfo).", m.swap_free_bytes),
            ("memory_anon", "AnonPages: anonymous memory mapped by processes (/proc/meminfo).", m.anon_pages_bytes),
            ("memory_anon_huge", "AnonHugePages: anonymous memory in transparent huge pages (/proc/meminfo).", m.anon_huge_pages_bytes),
            ("memory_shmem_huge", "ShmemHugePages: shared memory and tmpfs in huge pages (/proc/meminfo).", m.shmem_huge_pages_bytes),
            ("memory_file_huge", "FileHugePages: page cache in huge pages (/proc/meminfo).", m.file_huge_pages_bytes),
            ("memory_hugetlb", "Hugetlb: memory reserved for hugetlbfs pages (/proc/meminfo).", m.hugetlb_bytes),
            ("memory_page_tables", "PageTables: memory used by page tables (/proc/meminfo).", m.page_tables_bytes),
        ] {
            f.gauge(name, help, bytes(), u(v))?;
        }
    }
    f.gauge("commit", "Committed_AS / CommitLimit. Above 1 is normal unless vm.overcommit_memory is 2, where allocations fail at 1.", ratio(), s.signals.commit_ratio.map(Num::F))?;
    let flag = |b: Option<bool>| b.map(|b| Num::U(b as u64));
    f.gauge(
        "commit_limit_reached",
        "1 when vm.overcommit_memory is 2 and Committed_AS >= CommitLimit: new allocations fail.",
        None,
        flag(s.signals.commit_limit_reached),
    )?;
    f.gauge("last_oom_kill_timestamp", "Unix time of the scan that first saw /proc/vmstat oom_kill rise since the exporter started.", seconds(), s.signals.last_oom_kill_unix_seconds.map(Num::F))?;
    f.gauge("commit_headroom", "CommitLimit - Committed_AS: memory that can still be committed in overcommit mode 2; negative is normal in modes 0 and 1.", bytes(), s.signals.commit_headroom_bytes.map(Num::I))
}

pub(super) fn encode_sysctl(f: &mut Families, s: &Snapshot) -> fmt::Result {
    let Some(v) = &s.sysctl else { return Ok(()) };
    f.gauge(
        "vm_overcommit_memory",
        "vm.overcommit_memory: 0 heuristic, 1 always overcommit, 2 strict (CommitLimit enforced).",
        None,
        u(v.overcommit_memory),
    )?;
    f.gauge("vm_overcommit", "vm.overcommit_ratio as a share of RAM counted in CommitLimit (used when vm.overcommit_kbytes is 0).", ratio(), v.overcommit_ratio_percent.map(|p| Num::F(p as f64 / 100.0)))?;
    f.gauge(
        "vm_overcommit",
        "vm.overcommit_kbytes: fixed RAM counted in CommitLimit instead of the ratio when not 0.",
        bytes(),
        u(v.overcommit_bytes),
    )?;
    f.gauge(
        "vm_panic_on_oom",
        "vm.panic_on_oom: 0 kill a process, 1 or 2 panic the kernel on out-of-memory.",
        None,
        u(v.panic_on_oom),
    )?;
    f.gauge(
        "vm_swappiness",
        "vm.swappiness: preference for swapping anonymous memory over dropping page cache (0-200).",
        None,
        u(v.swappiness),
    )
}

pub(super) fn encode_thp(f: &mut Families, s: &Snapshot) -> fmt::Result {
    if let Some(t) = &s.thp {
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
        f.info(
            "thp_settings",
            "Transparent huge page modes from /sys/kernel/mm/transparent_hugepage.",
            labels,
        )?;
        let k = &t.khugepaged;
        f.gauge(
            "khugepaged_defrag",
            "khugepaged/defrag: 1 when khugepaged may compact memory to collapse huge pages.",
            None,
            u(k.defrag),
        )?;
        f.gauge("khugepaged_max_ptes_none", "khugepaged/max_ptes_none: empty 4 KiB pages khugepaged may fill to collapse a huge page; 511 (default) lets one touched page become 2 MiB of RSS.", None, u(k.max_ptes_none))?;
        f.gauge("khugepaged_max_ptes_swap", "khugepaged/max_ptes_swap: swapped-out pages khugepaged may read back to collapse a huge page.", None, u(k.max_ptes_swap))?;
        f.gauge(
            "khugepaged_max_ptes_shared",
            "khugepaged/max_ptes_shared: shared pages allowed in a range khugepaged collapses.",
            None,
            u(k.max_ptes_shared),
        )?;
        f.gauge(
            "khugepaged_pages_to_scan",
            "khugepaged/pages_to_scan: pages scanned per khugepaged pass.",
            None,
            u(k.pages_to_scan),
        )?;
        f.gauge(
            "khugepaged_scan_sleep",
            "khugepaged/scan_sleep_millisecs: pause between khugepaged passes.",
            seconds(),
            k.scan_sleep_millisecs.map(|ms| Num::F(ms as f64 / 1000.0)),
        )?;
        f.gauge(
            "khugepaged_alloc_sleep",
            "khugepaged/alloc_sleep_millisecs: pause after a failed huge page allocation.",
            seconds(),
            k.alloc_sleep_millisecs.map(|ms| Num::F(ms as f64 / 1000.0)),
        )?;
        f.counter(
            "khugepaged_pages_collapsed",
            "khugepaged/pages_collapsed: huge pages khugepaged made by collapsing small pages.",
            None,
            u(k.pages_collapsed),
        )?;
        f.counter(
            "khugepaged_full_scans",
            "khugepaged/full_scans: complete khugepaged passes over eligible memory.",
            None,
            u(k.full_scans),
        )?;

        let size_info: Vec<_> = t
            .sizes
            .iter()
            .filter_map(|z| z.enabled.as_deref().map(|e| (z.label.as_str(), e)))
            .collect();
        if !size_info.is_empty() {
            let mut metric = f.enc.encode_descriptor(
                "mthp_settings",
                "Per-size transparent huge page mode from hugepages-SIZE/enabled (kernel 6.8+).",
                None,
                MetricType::Info,
            )?;
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
                Some(rest) => f.family(&format!("mthp_{rest}_folios"), &format!("hugepages-SIZE/stats/{stat}: huge pages (folios) of this size currently in that state."), None, MetricType::Gauge, rows)?,
                None => f.family(&format!("mthp_{stat}"), &format!("hugepages-SIZE/stats/{stat}: events for huge pages of this size."), None, MetricType::Counter, rows)?,
            }
        }
    }
    f.gauge("thp_regrowth_risk", "1 when THP is not `never` and khugepaged/max_ptes_none is 511: memory released with MADV_DONTNEED can grow back while a program sleeps.", None, s.signals.thp_regrowth_risk.map(|b| Num::U(b as u64)))?;
    f.gauge("thp_hidden", "Memory held in partially mapped huge pages (nr_anon_partially_mapped x size, kernel 6.12+): allocated, yet in no RSS, AnonHugePages or MemFree.", bytes(), u(s.signals.thp_hidden_bytes))
}

pub(super) fn encode_vmstat(f: &mut Families, s: &Snapshot) -> fmt::Result {
    let Some(v) = &s.vmstat else { return Ok(()) };
    for (key, value) in &v.counters {
        f.counter(
            &format!("vmstat_{key}"),
            &format!("/proc/vmstat {key}."),
            None,
            Some(Num::U(*value)),
        )?;
    }
    Ok(())
}

pub(super) fn encode_pressure(f: &mut Families, s: &Snapshot) -> fmt::Result {
    let Some(p) = &s.pressure else { return Ok(()) };
    f.counter(
        "pressure_memory_waiting",
        "Time in which at least one task stalled on memory (/proc/pressure/memory some).",
        seconds(),
        p.some_seconds.map(Num::F),
    )?;
    f.counter(
        "pressure_memory_stalled",
        "Time in which all non-idle tasks stalled on memory at once (/proc/pressure/memory full).",
        seconds(),
        p.full_seconds.map(Num::F),
    )?;
    f.gauge(
        "pressure_memory_waiting",
        "Share of the last scan interval in which at least one task stalled on memory (PSI some).",
        ratio(),
        s.signals.pressure_waiting_ratio.map(Num::F),
    )?;
    f.gauge(
        "pressure_memory_stalled",
        "Share of the last scan interval in which all non-idle tasks stalled on memory (PSI full).",
        ratio(),
        s.signals.pressure_stalled_ratio.map(Num::F),
    )
}

pub(super) fn encode_cgroups(f: &mut Families, s: &Snapshot) -> fmt::Result {
    let Some(cgroups) = &s.cgroups else {
        return Ok(());
    };
    let rows = |get: fn(&crate::parse::memory_stat::MemoryStat) -> u64| -> Vec<(Labels, Num)> {
        cgroups
            .iter()
            .map(|(path, m)| (vec![("cgroup", path.as_str())], Num::U(get(m))))
            .collect()
    };
    f.family("cgroup_anon", "Anonymous memory of a memory cgroup (container): memory.stat rss on cgroup v1 (own processes), anon on v2 (leaf cgroups).", bytes(), MetricType::Gauge, rows(|m| m.anon_bytes))?;
    f.family("cgroup_anon_huge", "Anonymous memory of a memory cgroup in transparent huge pages: memory.stat rss_huge on v1, anon_thp on v2.", bytes(), MetricType::Gauge, rows(|m| m.anon_huge_bytes))
}
