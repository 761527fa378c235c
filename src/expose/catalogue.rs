//! The metric catalogue: one row per family the exporter itself and the processes
//! collector serve (each system collector's rows are in its unit, `units/`, and each heap
//! reader's in its folder, `heap/`), with its base name (what
//! prometheus-client takes; the name as served is made from it, its type and its unit),
//! type, unit, labels, the file it comes from and its help text. The encoder
//! (`system.rs`, `processes.rs`) writes families only through these rows; docs/metrics.md
//! and the README's summary are generated from them, and tests/catalogue.rs proves that
//! both are current and that every family a real scrape returns has a row.
//!
//! A name holding `<key>` is a pattern: one family per key the kernel prints
//! (`/proc/vmstat`, `hugepages-SIZE/stats/`).

pub use crate::family::{Kind, Metric, MetricUnit, Section};

mod s {
    use crate::family::Collector;
    use crate::family::Section::{self, Exporter, Of};
    pub const EXPORTER: Section = Exporter;
    pub const PROCESSES: Section = Of(Collector::Processes);
}

/// The rows in three runs, between which the heap readers' rows are served: their reads
/// counters after the first, their families of the top processes after the second.
macro_rules! catalogue {
    ($($run:ident {$($id:ident = $scope:ident $base:literal, $kind:ident, $unit:ident,
        [$($label:literal),*], $section:ident, $source:literal, $help:literal;)*})*) => {
        $($(pub const $id: Metric = crate::family::metric!(
            $scope $base, $kind, $unit, [$($label),*], s::$section, $source, $help
        );)*
        const $run: &[Metric] = &[$($id),*];)*
    };
}

catalogue! {
BEFORE_READS {
    // The exporter's own process, named as every Prometheus client library names them.
    OWN_CPU_SECONDS_TOTAL = process "cpu", Counter, Seconds, [], EXPORTER, "/proc/self/stat",
        "Total user and system CPU time the exporter has spent.";
    OWN_RESIDENT_MEMORY_BYTES = process "resident_memory", Gauge, Bytes, [], EXPORTER, "/proc/self/status",
        "Resident memory of the exporter (VmRSS).";
    OWN_VIRTUAL_MEMORY_BYTES = process "virtual_memory", Gauge, Bytes, [], EXPORTER, "/proc/self/status",
        "Virtual memory of the exporter (VmSize).";
    OWN_OPEN_FDS = process "open_fds", Gauge, None, [], EXPORTER, "/proc/self/fd",
        "Open file descriptors of the exporter.";
    OWN_MAX_FDS = process "max_fds", Gauge, None, [], EXPORTER, "/proc/self/limits",
        "Soft limit on the exporter's open file descriptors.";
    OWN_START_TIME_SECONDS = process "start_time", Gauge, Seconds, [], EXPORTER, "/proc/self/stat",
        "Unix time the exporter started.";
    BUILD_INFO = membloat "build", Info, None, ["version", "revision", "branch", "builddate", "rustversion", "target"], EXPORTER, "the exporter",
        "Version of membloat_exporter, the git revision and branch it was built from, the build date (UTC), the rustc version and the target triple, as --version prints them.";
    SCANS_TOTAL = membloat "scans", Counter, None, [], EXPORTER, "the exporter",
        "Scans of /proc completed since the exporter started.";
    LAST_SCAN_TIMESTAMP_SECONDS = membloat "last_scan_timestamp", Gauge, Seconds, [], EXPORTER, "the exporter",
        "Unix time the latest completed scan started.";
    SCAN_DURATION_SECONDS = membloat "scan_duration", Gauge, Seconds, [], EXPORTER, "the exporter",
        "Wall time the latest scan took.";
    PROCESSES_SCANNED = membloat "processes_scanned", Gauge, None, [], EXPORTER, "the exporter",
        "Processes with memory (kernel threads excluded) read by the latest scan.";
    SCRAPE_COLLECTOR_SUCCESS = membloat "scrape_collector_success", Gauge, None, ["collector"], EXPORTER, "the exporter",
        "1 when the collector read its source in the latest scan or the kernel lacks the source (counted as unsupported in membloat_scan_errors_total), 0 when it failed.";
    SCRAPE_COLLECTOR_DURATION_SECONDS = membloat "scrape_collector_duration", Gauge, Seconds, ["collector"], EXPORTER, "the exporter",
        "Time the collector took in the latest scan.";
    SCAN_ROLLUP_READS = membloat "scan_rollup_reads", Gauge, None, [], EXPORTER, "the exporter",
        "Processes whose files the latest scan read again (stat, status, smaps_rollup, oom_score): new, their statm moved, or due by --collector.processes.rollup-refresh; the others were known from one read of statm.";
    SCAN_KEPT_DESCRIPTORS = membloat "scan_kept_descriptors", Gauge, None, [], EXPORTER, "the exporter",
        "statm files of processes kept open between scans and re-read with one pread, which tells that a process did not change and is still the same process.";
    SCAN_UNKEPT_PROCESSES = membloat "scan_unkept_processes", Gauge, None, [], EXPORTER, "the exporter",
        "Processes the latest scan read by opening their files because no statm descriptor could be kept (the open-files limit is spent): each costs about four times as much. Raise LimitNOFILE.";
    SCAN_WATCHED_PROCESSES = membloat "scan_watched_processes", Gauge, None, [], EXPORTER, "the exporter",
        "Processes whose end is watched with a pidfd (about 1 KiB of kernel memory each, at most four per kept descriptor), so a quiet one may rest between reads without its end being missed.";
    SCAN_RESTED_PROCESSES = membloat "scan_rested_processes", Gauge, None, [], EXPORTER, "the exporter",
        "Processes the latest scan did not read because they rest: watched, their statm and CPU time unchanged for three reads; each is read at least every 10 s, and every process is read when the host's memory moved by more than 32 MiB since every process was last read.";
    SCAN_STALLED_PROCESSES = membloat "scan_stalled_processes", Gauge, None, [], EXPORTER, "the exporter",
        "Processes the latest scan left behind because their read outlasted --collector.processes.read-timeout, or left out while a reader is still stuck in one of their files.";
    SCAN_SLOWEST_PROCESS_READ_SECONDS = membloat "scan_slowest_process_read", Gauge, Seconds, [], EXPORTER, "the exporter",
        "Longest time the files of one process took to read in the latest scan.";
    SCAN_PROC_LISTINGS_TOTAL = membloat "scan_proc_listings", Counter, None, [], EXPORTER, "/proc, /proc/loadavg",
        "Scans that listed /proc. The others read the processes the scan before them read: /proc/loadavg said no pid had been handed out since, so no process can have appeared; at most 60 scans in a row.";
    SCAN_READER_THREADS = membloat "scan_reader_threads", Gauge, None, [], EXPORTER, "the exporter",
        "Threads reading /proc and /sys files, stuck ones included: --collector.processes.readers (up to 4 more) for processes, one for system files (and one more per system file stuck).";
    DEEP_SCAN_CANDIDATES = membloat "deep_scan_candidates", Gauge, None, [], EXPORTER, "the exporter",
        "Processes that met the deep-tier thresholds (--collector.processes.deep-min-size) in the latest scan.";
    DEEP_SCAN_PROCESSES = membloat "deep_scan_processes", Gauge, None, [], EXPORTER, "the exporter",
        "Processes whose /proc/PID/smaps the deep tier read in the latest scan.";
    DEEP_SCAN_DEFERRED = membloat "deep_scan_deferred", Gauge, None, [], EXPORTER, "the exporter",
        "Candidates due for a deep read but left for a later scan by --collector.processes.deep-budget (its CPU time, or the deep reads' deadline of one read timeout).";
    DEEP_SCAN_DURATION_SECONDS = membloat "deep_scan_duration", Gauge, Seconds, [], EXPORTER, "the exporter",
        "Wall time of the deep tier in the latest scan.";
    DEEP_SCAN_CPU_SECONDS = membloat "deep_scan_cpu", Gauge, Seconds, [], EXPORTER, "the exporter",
        "CPU time of the deep tier in the latest scan.";
    DEEP_CPU_SECONDS_TOTAL = membloat "deep_cpu", Counter, Seconds, [], EXPORTER, "the exporter",
        "CPU time of the deep tier since the exporter started.";
    HEAP_WALK_CPU_SECONDS_TOTAL = membloat "heap_walk_cpu", Counter, Seconds, [], EXPORTER, "the exporter",
        "CPU time of the heap walks (glibc's arenas and free lists read from process memory, and pagemap) since the exporter started; part of membloat_deep_cpu_seconds_total.";
    HEAP_PENDING_PROCESSES = membloat "heap_pending_processes", Gauge, None, [], EXPORTER, "the exporter",
        "Processes whose glibc heap can be measured but whose walks so far found it changing under the read: they show no hoarding figure (neither measured nor suspected) until a walk succeeds.";
}
BEFORE_READERS_ROWS {
    SCAN_ERRORS_TOTAL = membloat "scan_errors", Counter, None, ["collector", "reason"], EXPORTER, "the exporter",
        "Values skipped by reason: vanished (the process exited while being read), permission_denied (the exporter may not read it), malformed (unparseable or absurd), unsupported (the kernel lacks the file), io, hidden (/proc has hidepid and the exporter lacks CAP_SYS_PTRACE: other users' processes are not listed; once per scan), timeout (a read that outlasted --collector.processes.read-timeout: a process once, when it is left behind; a system collector every scan its reader is still stuck; a process's smaps_rollup or cmdline not read because four readers are stuck in such reads or the scan has spent one read timeout on them, or its deep read left because a thread of it waits uninterruptibly; for owners, the processes whose descriptors were past its budget).";
    GROUPS_FOLDED = membloat "groups_folded", Gauge, None, [], PROCESSES, "the exporter",
        "Groups summed into group=\"other\" by --collector.processes.max-groups in the latest scan; above 0, raise the cap or group with a matcher file.";
    GROUP_PROCESSES = membloat "group_processes", Gauge, None, ["group"], PROCESSES, "/proc/PID",
        "Processes in the group.";
    GROUP_RESIDENT_BYTES = membloat "group_resident", Gauge, Bytes, ["group"], PROCESSES, "/proc/PID/status",
        "Sum of VmRSS over the group (/proc/PID/status).";
    GROUP_RESIDENT_PEAK_BYTES = membloat "group_resident_peak", Gauge, Bytes, ["group"], PROCESSES, "/proc/PID/status",
        "Sum of VmHWM, each process's peak RSS, over the group (/proc/PID/status).";
    GROUP_VIRTUAL_BYTES = membloat "group_virtual", Gauge, Bytes, ["group"], PROCESSES, "/proc/PID/status",
        "Sum of VmSize over the group (/proc/PID/status).";
    GROUP_SWAP_BYTES = membloat "group_swap", Gauge, Bytes, ["group"], PROCESSES, "/proc/PID/status",
        "Sum of VmSwap over the group (/proc/PID/status).";
    GROUP_RESIDENT_ANON_BYTES = membloat "group_resident_anon", Gauge, Bytes, ["group"], PROCESSES, "/proc/PID/status",
        "Sum of RssAnon over the group (/proc/PID/status).";
    GROUP_RESIDENT_FILE_BYTES = membloat "group_resident_file", Gauge, Bytes, ["group"], PROCESSES, "/proc/PID/status",
        "Sum of RssFile over the group (/proc/PID/status).";
    GROUP_RESIDENT_SHMEM_BYTES = membloat "group_resident_shmem", Gauge, Bytes, ["group"], PROCESSES, "/proc/PID/status",
        "Sum of RssShmem over the group (/proc/PID/status).";
    GROUP_PSS_BYTES = membloat "group_pss", Gauge, Bytes, ["group"], PROCESSES, "/proc/PID/smaps_rollup",
        "Sum of Pss over the group (/proc/PID/smaps_rollup).";
    GROUP_ANON_HUGE_BYTES = membloat "group_anon_huge", Gauge, Bytes, ["group"], PROCESSES, "/proc/PID/smaps_rollup",
        "Sum of AnonHugePages over the group (/proc/PID/smaps_rollup).";
    GROUP_LAZY_FREE_BYTES = membloat "group_lazy_free", Gauge, Bytes, ["group"], PROCESSES, "/proc/PID/smaps_rollup LazyFree, kernel 4.12+",
        "Sum of LazyFree over the group (/proc/PID/smaps_rollup): memory freed with MADV_FREE, in RSS until the kernel reclaims it under pressure.";
    GROUP_THREADS = membloat "group_threads", Gauge, None, ["group"], PROCESSES, "/proc/PID/status",
        "Sum of threads over the group (/proc/PID/status).";
    GROUP_OOM_SCORE_MAX = membloat "group_oom_score_max", Gauge, None, ["group"], PROCESSES, "/proc/PID/oom_score",
        "Highest oom_score in the group: the OOM killer picks the highest score first (/proc/PID/oom_score).";
    GROUP_HOARDED_BYTES = membloat "group_hoarded", Gauge, Bytes, ["group", "method"], PROCESSES, "/proc/PID/mem, pagemap, smaps",
        "Sum over the group of heap memory the allocator holds free, by method: measured (resident free pages of glibc's heaps that malloc_trim(0) would give back, read by the heap walk, 0 below 16 MiB) or suspected (inferred from smaps where no walk was possible). The measured sum is at most the group's Pss, which counts a page its processes share once, where every measured process's Pss was read (else each process's figure is at most its own resident memory). See membloat_process_hoarded_bytes.";
    GROUP_RUNTIME_HELD_BYTES = membloat "group_runtime_held", Gauge, Bytes, ["group", "runtime"], PROCESSES, "/proc/PID/mem (hsperfdata, libjvm, Go's runtime, jemalloc's, pymalloc's and mimalloc's arenas), pagemap",
        "Sum over the group's measured processes of resident memory their runtime or jemalloc holds unused (runtime=\"jvm\": the Java heap's resident pages less what the JVM says is used; runtime=\"go\": free Go heap in resident pages; runtime=\"jemalloc\": jemalloc's resident dirty and muzzy pages; runtime=\"python\": resident unused memory in CPython's arenas; runtime=\"mimalloc\": mimalloc's resident free pages that mi_collect(true) would give back); part of membloat_group_hoarded_bytes{method=\"measured\"}; at most the group's Pss where every measured process's Pss was read. Only groups with such a process.";
    GROUP_HEAP_MEASURED_PROCESSES = membloat "group_heap_measured_processes", Gauge, None, ["group"], PROCESSES, "/proc/PID/mem",
        "Processes of the group whose glibc heaps the latest heap walk measured (deep tier).";
    GROUP_HEAP_FREE_BYTES = membloat "group_heap_free", Gauge, Bytes, ["group"], PROCESSES, "/proc/PID/mem",
        "Sum over the measured processes of the group of free chunk bytes in glibc heaps, the top chunks included (heap walk).";
    GROUP_HEAP_FREE_RESIDENT_BYTES = membloat "group_heap_free_resident", Gauge, Bytes, ["group"], PROCESSES, "/proc/PID/mem, pagemap",
        "Sum over the measured processes of the group of free glibc heap bytes in resident pages (heap walk, /proc/PID/pagemap).";
    GROUP_HEAP_RECLAIMABLE_BYTES = membloat "group_heap_reclaimable", Gauge, Bytes, ["group"], PROCESSES, "/proc/PID/mem, pagemap",
        "Sum over the measured processes of the group of resident free heap pages malloc_trim(0) would give back (heap walk).";
    GROUP_REGROWN_SINCE_TROUGH_BYTES = membloat "group_regrown_since_trough", Gauge, Bytes, ["group"], PROCESSES, "/proc/PID/smaps_rollup, stat",
        "Sum over the group of anonymous memory that grew back in huge pages while the process was idle (khugepaged regrowth).";
    GROUP_UNTOUCHED_COMMIT_BYTES = membloat "group_untouched_commit", Gauge, Bytes, ["group"], PROCESSES, "/proc/PID/smaps, status",
        "Sum over the group of commit charge not yet backed by RAM or swap (deep tier).";
    GROUP_ARENA_HEAPS = membloat "group_arena_heaps", Gauge, None, ["group"], PROCESSES, "/proc/PID/mem, smaps",
        "Heaps of glibc's non-main arenas in the group's processes (see membloat_process_arena_heaps; deep tier).";
    GROUP_ARENA_RESERVED_BYTES = membloat "group_arena_reserved", Gauge, Bytes, ["group"], PROCESSES, "/proc/PID/smaps",
        "Address space the group's glibc arena heaps reserve, 64 MiB each (deep tier).";
    PROCESS_RESIDENT_BYTES = membloat "process_resident", Gauge, Bytes, ["pid", "comm"], PROCESSES, "/proc/PID/status",
        "VmRSS of a top process (/proc/PID/status).";
    PROCESS_RESIDENT_PEAK_BYTES = membloat "process_resident_peak", Gauge, Bytes, ["pid", "comm"], PROCESSES, "/proc/PID/status",
        "VmHWM, the peak RSS, of a top process (/proc/PID/status).";
    PROCESS_VIRTUAL_BYTES = membloat "process_virtual", Gauge, Bytes, ["pid", "comm"], PROCESSES, "/proc/PID/status",
        "VmSize of a top process (/proc/PID/status).";
    PROCESS_SWAP_BYTES = membloat "process_swap", Gauge, Bytes, ["pid", "comm"], PROCESSES, "/proc/PID/status",
        "VmSwap of a top process (/proc/PID/status).";
    PROCESS_RESIDENT_ANON_BYTES = membloat "process_resident_anon", Gauge, Bytes, ["pid", "comm"], PROCESSES, "/proc/PID/status",
        "RssAnon of a top process (/proc/PID/status).";
    PROCESS_RESIDENT_FILE_BYTES = membloat "process_resident_file", Gauge, Bytes, ["pid", "comm"], PROCESSES, "/proc/PID/status",
        "RssFile of a top process (/proc/PID/status).";
    PROCESS_RESIDENT_SHMEM_BYTES = membloat "process_resident_shmem", Gauge, Bytes, ["pid", "comm"], PROCESSES, "/proc/PID/status",
        "RssShmem of a top process (/proc/PID/status).";
    PROCESS_PSS_BYTES = membloat "process_pss", Gauge, Bytes, ["pid", "comm"], PROCESSES, "/proc/PID/smaps_rollup",
        "Pss of a top process (/proc/PID/smaps_rollup).";
    PROCESS_ANON_HUGE_BYTES = membloat "process_anon_huge", Gauge, Bytes, ["pid", "comm"], PROCESSES, "/proc/PID/smaps_rollup",
        "AnonHugePages of a top process (/proc/PID/smaps_rollup).";
    PROCESS_LAZY_FREE_BYTES = membloat "process_lazy_free", Gauge, Bytes, ["pid", "comm"], PROCESSES, "/proc/PID/smaps_rollup LazyFree, kernel 4.12+",
        "LazyFree of a top process (/proc/PID/smaps_rollup): anonymous memory it freed with MADV_FREE (jemalloc's muzzy pages, mimalloc's purges, Go 1.12-1.15), still counted in its RSS until the kernel reclaims it under memory pressure, without writing it to swap.";
    PROCESS_THREADS = membloat "process_threads", Gauge, None, ["pid", "comm"], PROCESSES, "/proc/PID/status",
        "Threads of a top process (/proc/PID/status).";
    PROCESS_THP_ENABLED = membloat "process_thp_enabled", Gauge, None, ["pid", "comm"], PROCESSES, "/proc/PID/status THP_enabled, kernel 6.x",
        "0 when the process disabled THP with PR_SET_THP_DISABLE, else 1 (/proc/PID/status THP_enabled, kernel 6.x).";
    PROCESS_OOM_SCORE = membloat "process_oom_score", Gauge, None, ["pid", "comm"], PROCESSES, "/proc/PID/oom_score",
        "oom_score of a top process: the OOM killer picks the highest first (/proc/PID/oom_score).";
    PROCESS_OOM_SCORE_ADJ = membloat "process_oom_score_adj", Gauge, None, ["pid", "comm"], PROCESSES, "/proc/PID/oom_score_adj",
        "oom_score_adj of a top process, -1000 (never killed) to 1000 (/proc/PID/oom_score_adj).";
    PROCESS_OOM_RANK = membloat "process_oom_rank", Gauge, None, ["pid", "comm"], PROCESSES, "/proc/PID/oom_score",
        "Place in the OOM killer's order among all processes: 1 is killed first (highest oom_score).";
    PROCESS_START_TIME_SECONDS = membloat "process_start_time", Gauge, Seconds, ["pid", "comm"], PROCESSES, "/proc/PID/stat, /proc/stat",
        "Unix time a top process started (/proc/PID/stat and btime).";
    PROCESS_CPU_SECONDS_TOTAL = membloat "process_cpu", Counter, Seconds, ["pid", "comm"], PROCESSES, "/proc/PID/stat",
        "User plus system CPU time of a top process (/proc/PID/stat).";
    PROCESS_IDLE = membloat "process_idle", Gauge, None, ["pid", "comm"], PROCESSES, "/proc/PID/stat",
        "1 when the process used no CPU over the last scan interval (under 1 %).";
    PROCESS_RETAINED_PEAK_RATIO = membloat "process_retained_peak", Gauge, Ratio, ["pid", "comm"], PROCESSES, "/proc/PID/status",
        "VmRSS / VmHWM: how much of its peak the process still holds.";
    PROCESS_HEAP_RESIDENT_BYTES = membloat "process_heap_resident", Gauge, Bytes, ["pid", "comm"], PROCESSES, "/proc/PID/smaps",
        "Rss of the brk heap plus glibc arena heaps (deep tier, /proc/PID/smaps).";
    PROCESS_HEAP_SIZE_BYTES = membloat "process_heap_size", Gauge, Bytes, ["pid", "comm"], PROCESSES, "/proc/PID/smaps",
        "Size of the brk heap plus glibc arena heaps; Size far above Rss means the heap was trimmed (deep tier).";
    PROCESS_HOARDED_BYTES = membloat "process_hoarded", Gauge, Bytes, ["pid", "comm", "method"], PROCESSES, "/proc/PID/mem, pagemap, smaps",
        "Heap memory the allocator and runtime hold free. method=\"measured\": resident pages of glibc's free chunks that malloc_trim(0) would give back, counted from glibc's free lists, or jemalloc's resident dirty and muzzy pages, plus a JVM's or Go runtime's held heap (membloat_process_runtime_held_bytes), each 0 below 16 MiB; absent while a walkable heap is not yet measured (membloat_heap_pending_processes). method=\"suspected\" (no walk possible: other allocator, walk off, no privilege, unsupported glibc): the heap's Rss when it is >= 64 MiB and >= half of RssAnon, RSS >= 0.8 x peak, heap not trimmed and the process idle; /proc alone cannot tell free chunks from live data.";
    PROCESS_RUNTIME_HELD_BYTES = membloat "process_runtime_held", Gauge, Bytes, ["pid", "comm", "runtime"], PROCESSES, "/proc/PID/mem (hsperfdata, libjvm, Go's runtime, jemalloc's, pymalloc's and mimalloc's arenas), pagemap",
        "Resident memory the process's managed runtime, or jemalloc, holds unused (runtime=\"jvm\": pages present in the Java heap's reserved range, or ZGC's heap file, less the used bytes of its spaces, kept until the collector uncommits; runtime=\"go\": free Go heap in resident pages, kept until the scavenger returns it; runtime=\"jemalloc\": its resident dirty and muzzy pages, kept until they decay or an arena is purged; runtime=\"python\": resident free pools and blocks in CPython's arenas, kept until an arena's last object is freed; runtime=\"mimalloc\": mimalloc's resident free pages and free spans, given back by mi_collect(true) or its purge; a JVM with jemalloc preloaded shows the JVM's). Part of membloat_process_hoarded_bytes{method=\"measured\"} (0 there below 16 MiB).";
    PROCESS_HEAP_FREE_BYTES = membloat "process_heap_free", Gauge, Bytes, ["pid", "comm", "heap"], PROCESSES, "/proc/PID/mem",
        "Free chunk bytes in the process's glibc heaps, the top chunk included, by heap (main: the brk heap; arena: other threads' heaps). Heap walk of /proc/PID/mem.";
    PROCESS_HEAP_FREE_RESIDENT_BYTES = membloat "process_heap_free_resident", Gauge, Bytes, ["pid", "comm", "heap"], PROCESSES, "/proc/PID/mem, pagemap",
        "The part of membloat_process_heap_free_bytes in resident pages: what the host loses (/proc/PID/pagemap).";
    PROCESS_HEAP_RECLAIMABLE_BYTES = membloat "process_heap_reclaimable", Gauge, Bytes, ["pid", "comm", "heap"], PROCESSES, "/proc/PID/mem, pagemap",
        "Resident pages wholly inside free chunks (past each chunk's header): what malloc_trim(0) would give back to the kernel. The hoarding figure when measured.";
    PROCESS_HEAP_TOP_BYTES = membloat "process_heap_top", Gauge, Bytes, ["pid", "comm", "heap"], PROCESSES, "/proc/PID/mem",
        "The top chunks: free space at the end of the arenas' current heaps (heap walk).";
    PROCESS_HEAP_FREE_CHUNKS = membloat "process_heap_free_chunks", Gauge, None, ["pid", "comm", "heap"], PROCESSES, "/proc/PID/mem",
        "Free chunks on glibc's free lists (fastbins, unsorted, small and large bins; mallinfo2's ordblks + smblks less the top chunks), by heap.";
    PROCESS_ALLOCATOR_INFO = membloat "process_allocator", Info, None, ["allocator", "runtime", "version", "pid", "comm"], PROCESSES, "/proc/PID/smaps, exe",
        "The process's allocator (glibc, jemalloc, tcmalloc, mimalloc, musl, go, static) and runtime (native, go, jvm, python, node; version: Go's from the binary's build info), from its mappings and executable (deep tier): a malloc preloaded, or linked into the binary (the symbols it defines; a stripped one's own messages), is that allocator's, never glibc's.";
}
AFTER_READERS_ROWS {
    PROCESS_ARENA_HEAPS = membloat "process_arena_heaps", Gauge, None, ["pid", "comm"], PROCESSES, "/proc/PID/mem, smaps",
        "Heaps of glibc's non-main arenas: from glibc's ring of arenas and heap_info headers when the heap walk measured the process, else from the maps' shape (64 MiB-aligned anonymous heaps, merged neighbours counted; deep tier).";
    PROCESS_ARENA_RESERVED_BYTES = membloat "process_arena_reserved", Gauge, Bytes, ["pid", "comm"], PROCESSES, "/proc/PID/smaps",
        "Address space the glibc arena heaps reserve, 64 MiB each (deep tier).";
    PROCESS_ARENA_AT_CEILING = membloat "process_arena_at_ceiling", Gauge, None, ["pid", "comm"], PROCESSES, "/proc/PID/mem, smaps",
        "1 when the process has glibc's most arenas: 8 arenas per online CPU, the main one included (counted from glibc's ring of arenas when measured, else estimated from its heaps; deep tier).";
    PROCESS_COMMIT_BYTES = membloat "process_commit", Gauge, Bytes, ["pid", "comm"], PROCESSES, "/proc/PID/smaps",
        "Commit charge: Size of the mappings charged to the commit limit (VmFlags ac), touched or not (deep tier).";
    PROCESS_UNTOUCHED_COMMIT_BYTES = membloat "process_untouched_commit", Gauge, Bytes, ["pid", "comm"], PROCESSES, "/proc/PID/smaps, status",
        "Commit charge minus RssAnon and VmSwap: memory that can still become RSS and that oom_score does not count (deep tier).";
    PROCESS_REGROWN_SINCE_TROUGH_BYTES = membloat "process_regrown_since_trough", Gauge, Bytes, ["pid", "comm"], PROCESSES, "/proc/PID/smaps_rollup, stat",
        "Anonymous memory that grew back in huge pages while the process was idle and its mappings unchanged, since its lowest point (khugepaged regrowth).";
    PROCESS_REGROWN_BYTES_TOTAL = membloat "process_regrown", Counter, Bytes, ["pid", "comm"], PROCESSES, "/proc/PID/smaps_rollup, stat",
        "All anonymous memory that grew back in huge pages while the process was idle, since the exporter first saw it.";
    PROCESS_THP_ANON_RATIO = membloat "process_thp_anon", Gauge, Ratio, ["pid", "comm"], PROCESSES, "/proc/PID/smaps_rollup, status",
        "AnonHugePages / RssAnon: the share of anonymous memory in transparent huge pages.";
}
}

#[cfg(test)]
mod tests;

/// Every row, in the order of the exposition: the exporter's and the processes
/// collector's, with each heap reader's (`heap::list`) among them, then the collector
/// units' (`units::ALL`).
pub fn all() -> Vec<&'static Metric> {
    BEFORE_READS
        .iter()
        .chain(crate::heap::list::READS.iter().copied())
        .chain(BEFORE_READERS_ROWS)
        .chain(crate::heap::list::ROWS.iter().flat_map(|r| r.iter()))
        .chain(AFTER_READERS_ROWS)
        .chain(crate::units::ALL.iter().flat_map(|u| u.rows))
        .collect()
}
