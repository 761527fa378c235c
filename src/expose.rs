//! Every metric name the exporter serves lives in this file, so the catalogue can be read
//! in one place. Encoding reads only a [`Snapshot`]; it never touches `/proc`.

use std::fmt::{self, Write};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric, MetricEncoder};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::{Registry, Unit};

use crate::collect::heap::walk::{HeapKind, HeapTotals};
use crate::collect::heap::Outcome;
use crate::model::derive::{GroupStats, ProcessReport, Snapshot};
use crate::model::signals::Method;

/// Every metric starts with this.
pub const PREFIX: &str = "membloat";

/// Content type of the OpenMetrics exposition.
pub const OPENMETRICS_CONTENT_TYPE: &str =
    "application/openmetrics-text; version=1.0.0; charset=utf-8";
/// Content type of the Prometheus text exposition 0.0.4.
pub const TEXT_CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// A sample value; integers stay integers in the exposition.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Num {
    U(u64),
    I(i64),
    F(f64),
}

type Labels<'a> = Vec<(&'static str, &'a str)>;

fn bytes() -> Option<Unit> {
    Some(Unit::Bytes)
}
fn seconds() -> Option<Unit> {
    Some(Unit::Seconds)
}
fn ratio() -> Option<Unit> {
    Some(Unit::Other("ratio".into()))
}

/// Writes metric families, skipping a family that has no sample.
struct Families<'a, 'b> {
    enc: &'a mut DescriptorEncoder<'b>,
}

impl Families<'_, '_> {
    fn family(
        &mut self,
        name: &str,
        help: &str,
        unit: Option<Unit>,
        kind: MetricType,
        rows: Vec<(Labels, Num)>,
    ) -> fmt::Result {
        if rows.is_empty() {
            return Ok(());
        }
        let mut metric = self
            .enc
            .encode_descriptor(name, help, unit.as_ref(), kind)?;
        if let [(labels, value)] = rows.as_slice() {
            if labels.is_empty() {
                // An unlabelled sample: no `{}` after the name.
                return encode_value(metric, kind, *value);
            }
        }
        for (labels, value) in rows {
            encode_value(metric.encode_family(&labels)?, kind, value)?;
        }
        Ok(())
    }

    fn gauge(
        &mut self,
        name: &str,
        help: &str,
        unit: Option<Unit>,
        value: Option<Num>,
    ) -> fmt::Result {
        let rows: Vec<(Labels, Num)> = value.map(|v| (Vec::new(), v)).into_iter().collect();
        self.family(name, help, unit, MetricType::Gauge, rows)
    }

    fn counter(
        &mut self,
        name: &str,
        help: &str,
        unit: Option<Unit>,
        value: Option<Num>,
    ) -> fmt::Result {
        let rows: Vec<(Labels, Num)> = value.map(|v| (Vec::new(), v)).into_iter().collect();
        self.family(name, help, unit, MetricType::Counter, rows)
    }

    fn info(&mut self, name: &str, help: &str, labels: Labels) -> fmt::Result {
        let mut metric = self
            .enc
            .encode_descriptor(name, help, None, MetricType::Info)?;
        metric.encode_info(&labels)
    }
}

fn encode_value(sample: MetricEncoder, kind: MetricType, value: Num) -> fmt::Result {
    match (kind, value) {
        (MetricType::Counter, Num::U(v)) => ConstCounter::new(v).encode(sample),
        (MetricType::Counter, Num::F(v)) => ConstCounter::new(v).encode(sample),
        (_, Num::U(v)) => ConstGauge::new(v).encode(sample),
        (_, Num::I(v)) => ConstGauge::new(v).encode(sample),
        (_, Num::F(v)) => ConstGauge::new(v).encode(sample),
    }
}

fn u(v: Option<u64>) -> Option<Num> {
    v.map(Num::U)
}

/// Encodes one snapshot.
#[derive(Debug)]
pub struct SnapshotCollector(pub std::sync::Arc<Snapshot>);

impl Collector for SnapshotCollector {
    fn encode(&self, mut enc: DescriptorEncoder) -> fmt::Result {
        let mut f = Families { enc: &mut enc };
        let s = &*self.0;
        encode_self(&mut f, s)?;
        encode_meminfo(&mut f, s)?;
        encode_sysctl(&mut f, s)?;
        encode_thp(&mut f, s)?;
        encode_vmstat(&mut f, s)?;
        encode_pressure(&mut f, s)?;
        encode_groups(&mut f, &s.groups)?;
        encode_cgroups(&mut f, s)?;
        encode_top(&mut f, &s.top)
    }
}

fn encode_self(f: &mut Families, s: &Snapshot) -> fmt::Result {
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

fn encode_meminfo(f: &mut Families, s: &Snapshot) -> fmt::Result {
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

fn encode_sysctl(f: &mut Families, s: &Snapshot) -> fmt::Result {
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

fn encode_thp(f: &mut Families, s: &Snapshot) -> fmt::Result {
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

fn encode_vmstat(f: &mut Families, s: &Snapshot) -> fmt::Result {
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

fn encode_pressure(f: &mut Families, s: &Snapshot) -> fmt::Result {
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

fn encode_cgroups(f: &mut Families, s: &Snapshot) -> fmt::Result {
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

fn encode_groups(f: &mut Families, groups: &[GroupStats]) -> fmt::Result {
    let rows = |get: fn(&GroupStats) -> u64| -> Vec<(Labels, Num)> {
        groups
            .iter()
            .map(|g| (vec![("group", g.name.as_str())], Num::U(get(g))))
            .collect()
    };
    let g = MetricType::Gauge;
    f.family(
        "group_processes",
        "Processes in the group.",
        None,
        g,
        rows(|g| g.processes),
    )?;
    f.family(
        "group_resident",
        "Sum of VmRSS over the group (/proc/PID/status).",
        bytes(),
        g,
        rows(|g| g.resident_bytes),
    )?;
    f.family(
        "group_resident_peak",
        "Sum of VmHWM, each process's peak RSS, over the group (/proc/PID/status).",
        bytes(),
        g,
        rows(|g| g.resident_peak_bytes),
    )?;
    f.family(
        "group_virtual",
        "Sum of VmSize over the group (/proc/PID/status).",
        bytes(),
        g,
        rows(|g| g.virtual_bytes),
    )?;
    f.family(
        "group_swap",
        "Sum of VmSwap over the group (/proc/PID/status).",
        bytes(),
        g,
        rows(|g| g.swap_bytes),
    )?;
    f.family(
        "group_resident_anon",
        "Sum of RssAnon over the group (/proc/PID/status).",
        bytes(),
        g,
        rows(|g| g.resident_anon_bytes),
    )?;
    f.family(
        "group_resident_file",
        "Sum of RssFile over the group (/proc/PID/status).",
        bytes(),
        g,
        rows(|g| g.resident_file_bytes),
    )?;
    f.family(
        "group_resident_shmem",
        "Sum of RssShmem over the group (/proc/PID/status).",
        bytes(),
        g,
        rows(|g| g.resident_shmem_bytes),
    )?;
    f.family(
        "group_pss",
        "Sum of Pss over the group (/proc/PID/smaps_rollup).",
        bytes(),
        g,
        rows(|g| g.pss_bytes),
    )?;
    f.family(
        "group_anon_huge",
        "Sum of AnonHugePages over the group (/proc/PID/smaps_rollup).",
        bytes(),
        g,
        rows(|g| g.anon_huge_bytes),
    )?;
    f.family(
        "group_threads",
        "Sum of threads over the group (/proc/PID/status).",
        None,
        g,
        rows(|g| g.threads),
    )?;
    f.family("group_oom_score_max", "Highest oom_score in the group: the OOM killer picks the highest score first (/proc/PID/oom_score).", None, g, rows(|g| g.oom_score_max))?;
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
    f.family("group_hoarded", "Sum over the group of heap memory the allocator holds free, by method: measured (resident free pages of glibc's heaps that malloc_trim(0) would give back, read by the heap walk) or suspected (inferred from smaps where no walk was possible). See membloat_process_hoarded_bytes.", bytes(), g, hoarded)?;
    f.family(
        "group_heap_measured_processes",
        "Processes of the group whose glibc heaps the latest heap walk measured (deep tier).",
        None,
        g,
        rows(|g| g.heap_measured_processes),
    )?;
    f.family("group_heap_free", "Sum over the measured processes of the group of free chunk bytes in glibc heaps, the top chunks included (heap walk).", bytes(), g, rows(|g| g.heap_free_bytes))?;
    f.family("group_heap_free_resident", "Sum over the measured processes of the group of free glibc heap bytes in resident pages (heap walk, /proc/PID/pagemap).", bytes(), g, rows(|g| g.heap_free_resident_bytes))?;
    f.family("group_heap_reclaimable", "Sum over the measured processes of the group of resident free heap pages malloc_trim(0) would give back (heap walk).", bytes(), g, rows(|g| g.heap_reclaimable_bytes))?;
    f.family("group_regrown_since_trough", "Sum over the group of anonymous memory that grew back in huge pages while the process was idle (khugepaged regrowth).", bytes(), g, rows(|g| g.regrown_since_trough_bytes))?;
    f.family(
        "group_untouched_commit",
        "Sum over the group of commit charge not yet backed by RAM or swap (deep tier).",
        bytes(),
        g,
        rows(|g| g.untouched_commit_bytes),
    )?;
    f.family(
        "group_arena_heaps",
        "glibc arena heaps found in the group's memory maps (deep tier).",
        None,
        g,
        rows(|g| g.arena_heaps),
    )?;
    f.family(
        "group_arena_reserved",
        "Address space the group's glibc arena heaps reserve, 64 MiB each (deep tier).",
        bytes(),
        g,
        rows(|g| g.arena_reserved_bytes),
    )
}

fn encode_top(f: &mut Families, top: &[ProcessReport]) -> fmt::Result {
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
    let g = MetricType::Gauge;
    f.family(
        "process_resident",
        "VmRSS of a top process (/proc/PID/status).",
        bytes(),
        g,
        rows(&|p| u(p.sample.status.vm_rss_bytes)),
    )?;
    f.family(
        "process_resident_peak",
        "VmHWM, the peak RSS, of a top process (/proc/PID/status).",
        bytes(),
        g,
        rows(&|p| u(p.sample.status.vm_hwm_bytes)),
    )?;
    f.family(
        "process_virtual",
        "VmSize of a top process (/proc/PID/status).",
        bytes(),
        g,
        rows(&|p| u(p.sample.status.vm_size_bytes)),
    )?;
    f.family(
        "process_swap",
        "VmSwap of a top process (/proc/PID/status).",
        bytes(),
        g,
        rows(&|p| u(p.sample.status.vm_swap_bytes)),
    )?;
    f.family(
        "process_resident_anon",
        "RssAnon of a top process (/proc/PID/status).",
        bytes(),
        g,
        rows(&|p| u(p.sample.status.rss_anon_bytes)),
    )?;
    f.family(
        "process_resident_file",
        "RssFile of a top process (/proc/PID/status).",
        bytes(),
        g,
        rows(&|p| u(p.sample.status.rss_file_bytes)),
    )?;
    f.family(
        "process_resident_shmem",
        "RssShmem of a top process (/proc/PID/status).",
        bytes(),
        g,
        rows(&|p| u(p.sample.status.rss_shmem_bytes)),
    )?;
    f.family(
        "process_pss",
        "Pss of a top process (/proc/PID/smaps_rollup).",
        bytes(),
        g,
        rows(&|p| p.sample.rollup.and_then(|r| u(r.pss_bytes))),
    )?;
    f.family(
        "process_anon_huge",
        "AnonHugePages of a top process (/proc/PID/smaps_rollup).",
        bytes(),
        g,
        rows(&|p| p.sample.rollup.and_then(|r| u(r.anon_huge_pages_bytes))),
    )?;
    f.family(
        "process_threads",
        "Threads of a top process (/proc/PID/status).",
        None,
        g,
        rows(&|p| u(p.sample.status.threads)),
    )?;
    f.family("process_thp_enabled", "0 when the process disabled THP with PR_SET_THP_DISABLE, else 1 (/proc/PID/status THP_enabled, kernel 6.x).", None, g, rows(&|p| flag(p.sample.status.thp_enabled)))?;
    f.family(
        "process_oom_score",
        "oom_score of a top process: the OOM killer picks the highest first (/proc/PID/oom_score).",
        None,
        g,
        rows(&|p| u(p.sample.oom_score)),
    )?;
    f.family(
        "process_oom_score_adj",
        "oom_score_adj of a top process, -1000 (never killed) to 1000 (/proc/PID/oom_score_adj).",
        None,
        g,
        rows(&|p| p.sample.oom_score_adj.map(Num::I)),
    )?;
    f.family("process_oom_rank", "Place in the OOM killer's order among all processes: 1 is killed first (highest oom_score).", None, g, rows(&|p| Some(Num::U(p.oom_rank))))?;
    f.family(
        "process_start_time",
        "Unix time a top process started (/proc/PID/stat and btime).",
        seconds(),
        g,
        rows(&|p| p.sample.start_time_seconds.map(Num::F)),
    )?;
    f.family(
        "process_cpu",
        "User plus system CPU time of a top process (/proc/PID/stat).",
        seconds(),
        MetricType::Counter,
        rows(&|p| Some(Num::F(p.sample.cpu_seconds))),
    )?;
    f.family(
        "process_idle",
        "1 when the process used no CPU over the last scan interval (under 1 %).",
        None,
        g,
        rows(&|p| flag(p.signals.idle)),
    )?;
    f.family(
        "process_retained_peak",
        "VmRSS / VmHWM: how much of its peak the process still holds.",
        ratio(),
        g,
        rows(&|p| p.signals.retained_peak_ratio.map(Num::F)),
    )?;
    f.family(
        "process_heap_resident",
        "Rss of the brk heap plus glibc arena heaps (deep tier, /proc/PID/smaps).",
        bytes(),
        g,
        rows(&|p| u(p.signals.heap_resident_bytes)),
    )?;
    f.family("process_heap_size", "Size of the brk heap plus glibc arena heaps; Size far above Rss means the heap was trimmed (deep tier).", bytes(), g, rows(&|p| u(p.signals.heap_size_bytes)))?;
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
    f.family("process_hoarded", "Heap memory the allocator holds free. method=\"measured\": resident pages of glibc's free chunks that malloc_trim(0) would give back, read by the heap walk (0 below 16 MiB). method=\"suspected\" (no walk possible: other allocator, walk off or failed): the heap's Rss when it is >= 64 MiB and >= half of RssAnon, RSS >= 0.8 x peak, heap not trimmed and the process idle; /proc alone cannot tell free chunks from live data.", bytes(), g, hoarded)?;
    let per_heap = |get: fn(&HeapTotals) -> u64| -> Vec<(Labels, Num)> {
        top.iter()
            .enumerate()
            .filter_map(|(i, p)| p.signals.heap.map(|h| (i, h)))
            .flat_map(|(i, h)| {
                HeapKind::ALL.map(|k| {
                    let mut l = labels(i);
                    l.push(("heap", k.as_str()));
                    (l, Num::U(get(h.of(k))))
                })
            })
            .collect()
    };
    f.family("process_heap_free", "Free chunk bytes in the process's glibc heaps, the top chunk included, by heap (main: the brk heap; arena: other threads' heaps). Heap walk of /proc/PID/mem.", bytes(), g, per_heap(|t| t.free_bytes))?;
    f.family("process_heap_free_resident", "The part of membloat_process_heap_free_bytes in resident pages: what the host loses (/proc/PID/pagemap).", bytes(), g, per_heap(|t| t.free_resident_bytes))?;
    f.family("process_heap_reclaimable", "Resident pages wholly inside free chunks (past each chunk's header): what malloc_trim(0) would give back to the kernel. The hoarding figure when measured.", bytes(), g, per_heap(|t| t.reclaimable_bytes))?;
    f.family(
        "process_heap_top",
        "The top chunks: free space at the end of the arenas' current heaps (heap walk).",
        bytes(),
        g,
        per_heap(|t| t.top_bytes),
    )?;
    f.family(
        "process_heap_chunks",
        "Chunks the heap walk found, by heap.",
        None,
        g,
        per_heap(|t| t.chunks),
    )?;
    if top.iter().any(|p| p.identity.is_some()) {
        let mut metric = f.enc.encode_descriptor(
            "process_allocator",
            "The process's allocator (glibc, jemalloc, tcmalloc, mimalloc, musl, go, static) and runtime (native, go, jvm, python, node; version: Go's from the binary's build info), from its mappings and executable (deep tier).",
            None,
            MetricType::Info,
        )?;
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
    f.family("process_arena_heaps", "glibc arena heaps in the process's maps (64 MiB-aligned anonymous MAP_NORESERVE heaps, deep tier).", None, g, rows(&|p| u(p.signals.arena_heaps)))?;
    f.family(
        "process_arena_reserved",
        "Address space the glibc arena heaps reserve, 64 MiB each (deep tier).",
        bytes(),
        g,
        rows(&|p| u(p.signals.arena_reserved_bytes)),
    )?;
    f.family(
        "process_arena_at_ceiling",
        "1 when the arena heaps reached glibc's ceiling of 8 arenas per online CPU (deep tier).",
        None,
        g,
        rows(&|p| flag(p.signals.arena_at_ceiling)),
    )?;
    f.family("process_commit", "Commit charge: Size of the mappings charged to the commit limit (VmFlags ac), touched or not (deep tier).", bytes(), g, rows(&|p| u(p.signals.commit_bytes)))?;
    f.family("process_untouched_commit", "Commit charge minus RssAnon and VmSwap: memory that can still become RSS and that oom_score does not count (deep tier).", bytes(), g, rows(&|p| u(p.signals.untouched_commit_bytes)))?;
    f.family("process_regrown_since_trough", "Anonymous memory that grew back in huge pages while the process was idle and its mappings unchanged, since its lowest point (khugepaged regrowth).", bytes(), g, rows(&|p| Some(Num::U(p.signals.regrown_since_trough_bytes))))?;
    f.family("process_regrown", "All anonymous memory that grew back in huge pages while the process was idle, since the exporter first saw it.", bytes(), MetricType::Counter, rows(&|p| Some(Num::U(p.signals.regrown_total_bytes))))?;
    f.family(
        "process_thp_anon",
        "AnonHugePages / RssAnon: the share of anonymous memory in transparent huge pages.",
        ratio(),
        g,
        rows(&|p| p.signals.thp_anon_ratio.map(Num::F)),
    )
}

/// The OpenMetrics exposition of a snapshot, ending in `# EOF`.
pub fn openmetrics(snapshot: std::sync::Arc<Snapshot>) -> String {
    let mut registry = Registry::with_prefix(PREFIX);
    registry.register_collector(Box::new(SnapshotCollector(snapshot)));
    let mut out = String::with_capacity(64 * 1024);
    // Writing to a String cannot fail; a failing encoder would be a bug in a help text.
    if prometheus_client::encoding::text::encode(&mut out, &registry).is_err() {
        out.clear();
        out.push_str("# EOF\n");
    }
    out
}

/// Rewrites an OpenMetrics exposition as Prometheus text format 0.0.4, which is what
/// promtool and scrapers that do not ask for OpenMetrics parse. Sample lines and label
/// escaping are the same in both; only the metadata differs: counters are named with
/// `_total` in `# HELP`/`# TYPE`, info families become `_info` gauges, `# UNIT` and `# EOF`
/// do not exist.
pub fn text_from_openmetrics(om: &str) -> String {
    let mut out = String::with_capacity(om.len());
    let mut pending_help: Option<(&str, &str)> = None;
    for line in om.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            pending_help = rest.split_once(' ');
            continue;
        }
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap_or((rest, "untyped"));
            let (suffix, kind) = match kind {
                "counter" => ("_total", "counter"),
                "info" => ("_info", "gauge"),
                "gauge" => ("", "gauge"),
                _ => ("", "untyped"),
            };
            if let Some((help_name, help)) = pending_help.take().filter(|(n, _)| *n == name) {
                let _ = writeln!(out, "# HELP {help_name}{suffix} {help}");
            }
            let _ = writeln!(out, "# TYPE {name}{suffix} {kind}");
            continue;
        }
        if line.starts_with("# UNIT ") || line == "# EOF" {
            continue;
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// True when an `Accept` header asks for OpenMetrics with a non-zero weight.
pub fn wants_openmetrics(accept: &str) -> bool {
    accept.split(',').any(|range| {
        let mut parts = range.split(';').map(str::trim);
        let media = parts.next().unwrap_or("");
        media.eq_ignore_ascii_case("application/openmetrics-text")
            && !parts.any(|p| {
                p.strip_prefix("q=")
                    .and_then(|q| q.parse::<f64>().ok())
                    .is_some_and(|q| q <= 0.0)
            })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collect::CollectorRun;
    use crate::source::Reason;
    use std::sync::Arc;

    #[test]
    fn text_format_renames_counter_and_info_families() {
        let om = "# HELP membloat_scans Scans.\n# TYPE membloat_scans counter\nmembloat_scans_total 3\n# HELP membloat_build Version.\n# TYPE membloat_build info\nmembloat_build_info{version=\"0.1.0\"} 1\n# HELP membloat_x_bytes X.\n# TYPE membloat_x_bytes gauge\n# UNIT membloat_x_bytes bytes\nmembloat_x_bytes 5\n# EOF\n";
        assert_eq!(
            text_from_openmetrics(om),
            "# HELP membloat_scans_total Scans.\n# TYPE membloat_scans_total counter\nmembloat_scans_total 3\n# HELP membloat_build_info Version.\n# TYPE membloat_build_info gauge\nmembloat_build_info{version=\"0.1.0\"} 1\n# HELP membloat_x_bytes X.\n# TYPE membloat_x_bytes gauge\nmembloat_x_bytes 5\n"
        );
    }

    #[test]
    fn accept_negotiation() {
        // What Prometheus 2.x/3.x sends.
        assert!(wants_openmetrics("application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1"));
        assert!(!wants_openmetrics("text/plain;version=0.0.4"));
        assert!(!wants_openmetrics("*/*"));
        assert!(!wants_openmetrics("application/openmetrics-text;q=0"));
    }

    #[test]
    fn empty_snapshot_encodes_self_metrics_only() {
        let om = openmetrics(Arc::new(Snapshot::default()));
        assert!(om.contains("membloat_scans_total 0\n"), "{om}");
        assert!(om.contains("membloat_build_info{version=\""));
        assert!(!om.contains("membloat_memory_total_bytes"));
        assert!(om.ends_with("# EOF\n"));
    }

    #[test]
    fn hostile_process_name_cannot_inject_a_series() {
        let evil = "x\"} 1\nevil 9\n#";
        let mut p = crate::model::derive::tests_support::process(7, evil);
        p.group = Some(evil.into());
        let p = ProcessReport {
            sample: p,
            signals: Default::default(),
            oom_rank: 1,
            identity: Some(crate::collect::heap::runtime::identify(
                Default::default(),
                None,
            )),
        };
        let snap = Snapshot {
            groups: vec![GroupStats {
                name: evil.into(),
                processes: 1,
                ..GroupStats::default()
            }],
            top: vec![p],
            collectors: vec![CollectorRun {
                name: crate::config::Collector::Processes,
                success: true,
                duration_seconds: 0.0,
            }],
            errors: [((crate::config::Collector::Processes, Reason::Denied), 2)]
                .into_iter()
                .collect(),
            ..Snapshot::default()
        };
        let text = text_from_openmetrics(&openmetrics(Arc::new(snap)));
        assert!(
            text.contains("membloat_group_processes{group=\"x\\\"} 1\\nevil 9\\n#\"} 1\n"),
            "{text}"
        );
        assert!(
            text.contains(
                "membloat_process_resident_bytes{pid=\"7\",comm=\"x\\\"} 1\\nevil 9\\n#\"} 4096\n"
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "membloat_process_allocator_info{allocator=\"static\",runtime=\"native\",version=\"\",pid=\"7\",comm=\"x\\\"} 1\\nevil 9\\n#\"} 1\n"
            ),
            "{text}"
        );
        assert!(!text.lines().any(|l| l.starts_with("evil")));
        assert!(text.contains(
            "membloat_scan_errors_total{collector=\"processes\",reason=\"permission_denied\"} 2\n"
        ));
    }
}
