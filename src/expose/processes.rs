//! The families of groups and of the top processes.

use super::*;

pub(super) fn encode_groups(f: &mut Families, groups: &[GroupStats]) -> fmt::Result {
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
