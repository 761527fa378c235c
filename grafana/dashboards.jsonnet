// The membloat dashboards. Render with ./grafana/render.sh (jsonnet -m grafana ...);
// the rendered JSON files are committed and provisioning-ready.
local g = import 'lib.libsonnet';
local ts = g.timeseries;
local stat = g.stat;
local table = g.table;
local row = g.row;

local mib = 1024 * 1024;
local proc = '{{comm}} ({{pid}}) {{instance}}';

local host = g.dashboard(
  'membloat-host',
  'membloat / Host memory and OOM risk',
  'Available memory, commit against the limit, swap, memory pressure, OOM kills, and the processes the OOM killer would pick first.',
  [
    row('Now'),
    stat('Memory available', 'MemAvailable: memory new work can use without swapping. The kernel estimates it from free memory plus reclaimable page cache and slab.',
         'bytes', [['membloat_memory_available_bytes{SEL}', '{{instance}}']]),
    stat('Available share of RAM', 'MemAvailable / MemTotal. Below 10 % the kernel reclaims hard; at 0 the OOM killer acts.',
         'percentunit', [['instance:membloat_memory_available:ratio{SEL}', '{{instance}}']],
         base='red', steps=[[0.1, 'orange'], [0.25, 'green']]),
    stat('Overcommit mode', 'vm.overcommit_memory. 0 heuristic and 1 always: the commit ratio is informational. 2 strict: allocations fail when committed memory reaches CommitLimit.',
         'none', [['membloat_vm_overcommit_memory{SEL}', '{{instance}}']],
         mappings=g.valueText([[0, 'heuristic', 'green'], [1, 'always', 'green'], [2, 'strict', 'orange']])),
    stat('Commit ratio', 'Committed_AS / CommitLimit. Above 100 % is normal in overcommit modes 0 and 1; in mode 2 allocations fail at 100 %. Read it beside the overcommit mode.',
         'percentunit', [['membloat_commit_ratio{SEL}', '{{instance}}']],
         steps=[[0.9, 'orange'], [1, 'red']]),
    stat('Commit headroom', 'CommitLimit - Committed_AS: what can still be committed in strict mode. Negative is normal in modes 0 and 1.',
         'bytes', [['membloat_commit_headroom_bytes{SEL}', '{{instance}}']]),
    stat('OOM kills in range', 'Processes the kernel OOM killer (host or cgroup limits) killed in the selected time range, from oom_kill in /proc/vmstat.',
         'none', [['increase(membloat_vmstat_oom_kill_total{SEL}[$__range])', '{{instance}}']],
         steps=[[1, 'red']]),

    row('Memory over time'),
    ts('Memory', 'RAM in use by kind. Available falling towards zero is what matters; free memory is normally small because the kernel uses spare RAM as cache.',
       'bytes', [
         ['membloat_memory_total_bytes{SEL}', 'total {{instance}}'],
         ['membloat_memory_available_bytes{SEL}', 'available {{instance}}'],
         ['membloat_memory_free_bytes{SEL}', 'free {{instance}}'],
         ['membloat_memory_anon_bytes{SEL}', 'anonymous {{instance}}'],
         ['membloat_memory_page_tables_bytes{SEL}', 'page tables {{instance}}'],
       ], min=0),
    ts('Available memory, one hour ahead', 'MemAvailable now and extrapolated one hour ahead from its 30-minute trend (recording rule). A prediction below zero while little is available fires MembloatMemoryExhaustionPredicted.',
       'bytes', [
         ['membloat_memory_available_bytes{SEL}', 'now {{instance}}'],
         ['instance:membloat_memory_available_bytes:predict_linear1h{SEL}', 'in 1h {{instance}}'],
       ]),
    ts('Committed memory and the limit', 'Committed_AS (address space reserved by all processes, touched or not) against CommitLimit (swap + overcommit_ratio of RAM). The limit is enforced only in overcommit mode 2.',
       'bytes', [
         ['membloat_memory_committed_bytes{SEL}', 'committed {{instance}}'],
         ['membloat_memory_commit_limit_bytes{SEL}', 'limit {{instance}}'],
       ], min=0),
    ts('Commit ratio', 'Committed_AS / CommitLimit over time, with the overcommit mode: in mode 2 allocations fail at 100 %.',
       'percentunit', [
         ['membloat_commit_ratio{SEL}', 'ratio {{instance}}'],
       ], min=0, thresholds=[[0.9, 'orange'], [1, 'red']]),
    ts('Swap in use', 'SwapTotal - SwapFree. Swap in use is not a problem by itself; swapping in and out at the same time is (next panel).',
       'bytes', [
         ['membloat_swap_total_bytes{SEL} - membloat_swap_free_bytes{SEL}', 'used {{instance}}'],
         ['membloat_swap_total_bytes{SEL}', 'total {{instance}}'],
       ], min=0),
    ts('Swap activity', 'Pages swapped in and out per second (pswpin, pswpout). Both high at once means the working set does not fit in RAM (thrashing).',
       'short', [
         ['rate(membloat_vmstat_pswpin_total{SEL}[$__rate_interval])', 'in {{instance}}'],
         ['rate(membloat_vmstat_pswpout_total{SEL}[$__rate_interval])', 'out {{instance}}'],
       ], min=0),
    ts('Memory pressure', 'Share of wall time in which tasks stalled on memory (PSI). waiting: at least one task; stalled: all non-idle tasks at once. Stalled above 5 % for 10 minutes fires MembloatMemoryStalls.',
       'percentunit', [
         ['rate(membloat_pressure_memory_waiting_seconds_total{SEL}[$__rate_interval])', 'waiting {{instance}}'],
         ['rate(membloat_pressure_memory_stalled_seconds_total{SEL}[$__rate_interval])', 'stalled {{instance}}'],
       ], min=0, thresholds=[[0.05, 'red']]),
    ts('Major faults and OOM kills', 'Major page faults per second (reads from disk or swap to satisfy a memory access; high values mean evicted memory is needed again) and OOM kills per second.',
       'short', [
         ['rate(membloat_vmstat_pgmajfault_total{SEL}[$__rate_interval])', 'major faults {{instance}}'],
         ['rate(membloat_vmstat_oom_kill_total{SEL}[$__rate_interval])', 'OOM kills {{instance}}'],
       ], min=0),

    row('Who the OOM killer would pick'),
    table('Processes the OOM killer would pick first', 'The top processes by oom_score, with their rank (1 is killed first), oom_score_adj, resident memory and untouched commit (memory they can still turn into RSS, which the score does not count). oom_score = (1000 + 1000 x share of RAM and swap + oom_score_adj) x 2/3.',
          'none', [
            ['topk(10, membloat_process_oom_score{SEL})'],
            ['membloat_process_oom_rank{SEL}'],
            ['membloat_process_oom_score_adj{SEL}'],
            ['membloat_process_resident_bytes{SEL}'],
            ['membloat_process_untouched_commit_bytes{SEL}'],
          ], overrides=[['Value #D', 'bytes'], ['Value #E', 'bytes']]),
    ts('Highest oom_score per group', 'The highest oom_score in each process group over time; a group climbing towards the top is where the OOM killer will strike.',
       'none', [['topk(10, membloat_group_oom_score_max{SEL})', '{{group}} {{instance}}']]),
    ts('Untouched commit per group', 'Commit charge minus resident and swapped anonymous memory, per group: memory already reserved that can become RSS without another allocation. Large values mean RSS can jump with no warning.',
       'bytes', [['topk(10, membloat_group_untouched_commit_bytes{SEL})', '{{group}} {{instance}}']], min=0),

    row('OOM settings and the exporter', collapsed=true),
    stat('panic_on_oom', 'vm.panic_on_oom: 0 kills a process; 1 or 2 panic the whole host instead.',
         'none', [['membloat_vm_panic_on_oom{SEL}', '{{instance}}']],
         mappings=g.valueText([[0, 'kill a process', 'green'], [1, 'panic', 'red'], [2, 'panic', 'red']])),
    stat('swappiness', 'vm.swappiness (0-200): how readily the kernel swaps anonymous memory rather than dropping page cache.',
         'none', [['membloat_vm_swappiness{SEL}', '{{instance}}']]),
    stat('overcommit_ratio', 'vm.overcommit_ratio: share of RAM counted in CommitLimit in mode 2 (unless overcommit_kbytes is set).',
         'percentunit', [['membloat_vm_overcommit_ratio{SEL}', '{{instance}}']]),
    stat('Scan duration', 'Wall time of the exporter\'s latest scan of /proc and /sys.',
         's', [['membloat_scan_duration_seconds{SEL}', '{{instance}}']], steps=[[1, 'orange']]),
    stat('Collectors failing', 'Collectors that could not read their source in the latest scan (0 is healthy). A kernel without PSI or THP fails the pressure or thp collector forever.',
         'none', [['count by (instance) (membloat_scrape_collector_success{SEL} == 0) or on (instance) (0 * count by (instance) (membloat_scrape_collector_success{SEL}))', '{{instance}}']],
         steps=[[1, 'red']]),
    stat('Values skipped', 'Values the exporter skipped per second in the range, by reason: processes that vanished mid-read, permission denied (missing CAP_SYS_PTRACE), malformed or absurd /proc values.',
         'short', [['sum by (reason) (rate(membloat_scan_errors_total{SEL}[$__rate_interval]))', '{{reason}}']]),
  ]
);

local thp = g.dashboard(
  'membloat-thp',
  'membloat / Transparent Huge Pages',
  'THP and khugepaged settings with the risky ones called out, huge page fault, collapse, split and compaction rates, hidden THP memory, and khugepaged regrowth.',
  [
    row('Settings'),
    table('THP settings', 'The selected mode of /sys/kernel/mm/transparent_hugepage/{enabled,defrag,shmem_enabled}. enabled=always gives every large anonymous mapping huge pages (more RSS per process); madvise only those that ask; never none.',
          'none', [['membloat_thp_settings_info{SEL}']], w=12, h=5),
    stat('khugepaged max_ptes_none', 'Empty 4 KiB pages khugepaged may fill to make one 2 MiB huge page. 511 (the default) lets a single touched page become 2 MiB of RSS: memory released with MADV_DONTNEED grows back. 0 is safe.',
         'none', [['membloat_khugepaged_max_ptes_none{SEL}', '{{instance}}']], w=4, h=5,
         steps=[[64, 'orange'], [256, 'red']]),
    stat('Regrowth risk', '1 when THP is enabled (always or madvise) and max_ptes_none is 511: memory released with MADV_DONTNEED can grow back while a process sleeps.',
         'none', [['membloat_thp_regrowth_risk{SEL}', '{{instance}}']], w=4, h=5,
         mappings=g.valueText([[0, 'no', 'green'], [1, 'at risk', 'red']])),
    stat('khugepaged pace', 'Pages khugepaged scans per pass; together with the sleep between passes (next panel) it sets how fast sparse ranges are collapsed.',
         'none', [['membloat_khugepaged_pages_to_scan{SEL}', '{{instance}}']], w=2, h=5),
    stat('khugepaged sleep', 'khugepaged/scan_sleep_millisecs: the pause between passes.',
         's', [['membloat_khugepaged_scan_sleep_seconds{SEL}', '{{instance}}']], w=2, h=5),
    table('Multi-size THP settings', 'hugepages-SIZE/enabled for each huge page size (kernel 6.8+). "inherit" follows the top-level enabled setting.',
          'none', [['membloat_mthp_settings_info{SEL}']], w=24, h=6),

    row('Huge pages in memory'),
    ts('Anonymous memory in huge pages', 'AnonHugePages against all anonymous memory (AnonPages), plus shmem and page cache in huge pages.',
       'bytes', [
         ['membloat_memory_anon_bytes{SEL}', 'anonymous {{instance}}'],
         ['membloat_memory_anon_huge_bytes{SEL}', 'in huge pages {{instance}}'],
         ['membloat_memory_shmem_huge_bytes{SEL}', 'shmem huge {{instance}}'],
         ['membloat_memory_file_huge_bytes{SEL}', 'file huge {{instance}}'],
       ], min=0),
    ts('Huge page share of anonymous memory', 'AnonHugePages / AnonPages (recording rule). A high share under THP always or with max_ptes_none 511 is where regrowth and bloat come from.',
       'percentunit', [['instance:membloat_memory_anon_huge:ratio{SEL}', '{{instance}}']], min=0),
    ts('Hidden THP memory', 'Memory in huge pages that lost most of their mapping but are not freed yet (nr_anon_partially_mapped x size, kernel 6.12+). It shows in no RSS, not in AnonHugePages and not in MemFree.',
       'bytes', [['membloat_thp_hidden_bytes{SEL}', '{{instance}}']], min=0),
    ts('Huge pages by size', 'Anonymous huge pages currently allocated, per multi-size THP size (nr_anon) and partially mapped (nr_anon_partially_mapped).',
       'short', [
         ['membloat_mthp_anon_folios{SEL}', '{{size}} {{instance}}'],
         ['membloat_mthp_anon_partially_mapped_folios{SEL}', '{{size}} partial {{instance}}'],
       ], min=0),

    row('Rates', collapsed=true),
    ts('Huge page faults', 'Page faults served with a huge page (thp_fault_alloc) and those that fell back to small pages (thp_fault_fallback: no free 2 MiB block, or the cgroup charge failed).',
       'short', [
         ['rate(membloat_vmstat_thp_fault_alloc_total{SEL}[$__rate_interval])', 'alloc {{instance}}'],
         ['rate(membloat_vmstat_thp_fault_fallback_total{SEL}[$__rate_interval])', 'fallback {{instance}}'],
       ], min=0),
    ts('khugepaged collapses', 'Huge pages khugepaged made by collapsing small pages, and failures. Collapses while processes sleep, with max_ptes_none 511, are regrowth.',
       'short', [
         ['rate(membloat_vmstat_thp_collapse_alloc_total{SEL}[$__rate_interval])', 'collapse {{instance}}'],
         ['rate(membloat_vmstat_thp_collapse_alloc_failed_total{SEL}[$__rate_interval])', 'failed {{instance}}'],
         ['rate(membloat_khugepaged_pages_collapsed_total{SEL}[$__rate_interval])', 'pages_collapsed {{instance}}'],
       ], min=0),
    ts('Huge page splits', 'Huge pages split back into small pages: on partial unmap (split_page), queued for later (deferred_split_page), or split because mostly empty (underused_split_page, kernel 6.12+).',
       'short', [
         ['rate(membloat_vmstat_thp_split_page_total{SEL}[$__rate_interval])', 'split {{instance}}'],
         ['rate(membloat_vmstat_thp_deferred_split_page_total{SEL}[$__rate_interval])', 'deferred {{instance}}'],
         ['rate(membloat_vmstat_thp_underused_split_page_total{SEL}[$__rate_interval])', 'underused {{instance}}'],
         ['rate(membloat_vmstat_thp_split_pmd_total{SEL}[$__rate_interval])', 'pmd {{instance}}'],
       ], min=0),
    ts('Compaction', 'Memory compaction that makes room for huge pages: stalls (a process waited for compaction), failures and successes. Many stalls under THP defrag=always cost latency.',
       'short', [
         ['rate(membloat_vmstat_compact_stall_total{SEL}[$__rate_interval])', 'stall {{instance}}'],
         ['rate(membloat_vmstat_compact_fail_total{SEL}[$__rate_interval])', 'fail {{instance}}'],
         ['rate(membloat_vmstat_compact_success_total{SEL}[$__rate_interval])', 'success {{instance}}'],
       ], min=0),
    ts('Compaction scanning', 'Pages compaction scanned per second to find movable pages (migrate) and free targets (free): the CPU cost of making huge pages.',
       'short', [
         ['rate(membloat_vmstat_compact_migrate_scanned_total{SEL}[$__rate_interval])', 'migrate scanned {{instance}}'],
         ['rate(membloat_vmstat_compact_free_scanned_total{SEL}[$__rate_interval])', 'free scanned {{instance}}'],
       ], min=0),
    ts('Multi-size THP faults', 'Anonymous faults served per huge page size (anon_fault_alloc) and fallbacks, per second.',
       'short', [
         ['sum by (instance, size) (rate(membloat_mthp_anon_fault_alloc_total{SEL}[$__rate_interval]))', 'alloc {{size}} {{instance}}'],
         ['sum by (instance, size) (rate(membloat_mthp_anon_fault_fallback_total{SEL}[$__rate_interval]))', 'fallback {{size}} {{instance}}'],
       ], min=0),

    row('Regrowth'),
    ts('Regrowth by process', 'Anonymous memory that grew back in huge pages while the process was idle and its mappings unchanged, since its lowest point: khugepaged refilling memory the program released.',
       'bytes', [['topk(10, membloat_process_regrown_since_trough_bytes{SEL})', proc]], min=0,
       thresholds=[[256 * mib, 'orange']]),
    ts('Regrowth rate by process', 'Bytes per second regrown by khugepaged, per process (rate of the regrown counter).',
       'Bps', [['topk(10, rate(membloat_process_regrown_bytes_total{SEL}[$__rate_interval]))', proc]], min=0),
    ts('Huge page share by process', 'AnonHugePages / RssAnon of the top processes: how much of each one\'s anonymous memory is in huge pages.',
       'percentunit', [['topk(10, membloat_process_thp_anon_ratio{SEL})', proc]], min=0),
    ts('Containers: anonymous memory in huge pages', 'Per memory cgroup, anonymous memory in transparent huge pages (rss_huge on v1, anon_thp on v2). The container whose working set THP inflates is at the top.',
       'bytes', [['topk(10, membloat_cgroup_anon_huge_bytes{SEL})', '{{cgroup}} {{instance}}']], min=0),
  ]
);

local groupSel = 'SEL,group=~"$group"';
local grp(metric) = 'membloat_group_%s{%s}' % [metric, groupSel];

local processes = g.dashboard(
  'membloat-processes',
  'membloat / Process bloat',
  'Per group and top processes: RSS against peak, allocator hoarding (measured from glibc\'s heap, or suspected), glibc arenas and reserved address space, huge page share, khugepaged regrowth, swap, untouched commit and oom_score.',
  [
    row('Groups'),
    stat('Hoarded memory (measured)', 'Sum over the host of freed heap memory glibc holds in resident pages and could give back, measured by the heap walk (recording rule; deep tier). Processes the walk cannot read are in the suspected series of the panels below.',
         'bytes', [['instance:membloat_hoarded_bytes:sum{SEL,method="measured"}', '{{instance}}']], w=6, steps=[[512 * mib, 'orange']]),
    stat('Regrown by khugepaged', 'Sum over the host of memory grown back in huge pages while processes slept (recording rule).',
         'bytes', [['instance:membloat_regrown_since_trough_bytes:sum{SEL}', '{{instance}}']], w=6, steps=[[256 * mib, 'orange']]),
    stat('Untouched commit', 'Sum over the host of reserved memory processes have not touched yet (recording rule; deep tier).',
         'bytes', [['instance:membloat_untouched_commit_bytes:sum{SEL}', '{{instance}}']], w=6),
    stat('Arena address space', 'Sum over the host of address space reserved by glibc arena heaps (recording rule; deep tier).',
         'bytes', [['instance:membloat_arena_reserved_bytes:sum{SEL}', '{{instance}}']], w=6),
    ts('Resident memory by group', 'RSS (VmRSS) of each group over time.',
       'bytes', [['topk(10, %s)' % grp('resident_bytes'), '{{group}} {{instance}}']], min=0),
    ts('Resident share of peak by group', 'RSS / peak RSS (VmHWM summed over the group). Near 100 % long after a burst means the memory was never given back: hoarding or regrowth, or a leak.',
       'percentunit', [['topk(10, %s / %s)' % [grp('resident_bytes'), grp('resident_peak_bytes')], '{{group}} {{instance}}']], min=0),
    ts('Hoarded memory by group', 'Freed heap memory the allocator holds, per group and method (deep tier): measured (glibc\'s free chunks in resident pages that malloc_trim would give back, read by the heap walk) or suspected (inferred from smaps where no walk was possible). See the hoarding section of the README.',
       'bytes', [['topk(10, %s)' % grp('hoarded_bytes'), '{{group}} {{method}} {{instance}}']], min=0),
    ts('Regrowth by group', 'Memory grown back in huge pages while idle, per group.',
       'bytes', [['topk(10, %s)' % grp('regrown_since_trough_bytes'), '{{group}} {{instance}}']], min=0),
    ts('Arena heaps by group', 'glibc arena heaps in the groups\' memory maps (deep tier); each reserves 64 MiB of address space.',
       'none', [['topk(10, %s)' % grp('arena_heaps'), '{{group}} {{instance}}']], min=0),
    ts('Virtual and reserved address space by group', 'Virtual size (VmSize) and the part reserved by glibc arenas. Virtual size far above RSS is address space, not memory, but counts against vm.overcommit in mode 2.',
       'bytes', [
         ['topk(10, %s)' % grp('virtual_bytes'), 'virtual {{group}} {{instance}}'],
         ['topk(10, %s)' % grp('arena_reserved_bytes'), 'arenas {{group}} {{instance}}'],
       ], min=0),
    ts('Huge page share by group', 'AnonHugePages / RssAnon per group: how much anonymous memory sits in transparent huge pages.',
       'percentunit', [['topk(10, %s / %s)' % [grp('anon_huge_bytes'), grp('resident_anon_bytes')], '{{group}} {{instance}}']], min=0),
    ts('Swap by group', 'VmSwap per group: anonymous memory pushed out to swap.',
       'bytes', [['topk(10, %s)' % grp('swap_bytes'), '{{group}} {{instance}}']], min=0),
    ts('Untouched commit by group', 'Commit charge minus RssAnon and VmSwap per group (deep tier): memory that can become RSS without another allocation.',
       'bytes', [['topk(10, %s)' % grp('untouched_commit_bytes'), '{{group}} {{instance}}']], min=0),
    ts('Highest oom_score by group', 'The highest oom_score in each group: the OOM killer picks the highest first.',
       'none', [['topk(10, %s)' % grp('oom_score_max'), '{{group}} {{instance}}']]),

    row('Top processes', collapsed=true),
    table('Top processes', 'The processes the exporter reports one by one (top-K by RSS, oom_score, hoarded and regrown bytes): RSS, peak, share of peak held, hoarded bytes (measured or suspected), arena heaps, huge page share, swap, untouched commit and oom_score.',
          'bytes', [
            ['membloat_process_resident_bytes{SEL}'],
            ['membloat_process_resident_peak_bytes{SEL}'],
            ['membloat_process_retained_peak_ratio{SEL}'],
            ['sum without (method) (membloat_process_hoarded_bytes{SEL})'],
            ['membloat_process_arena_heaps{SEL}'],
            ['membloat_process_thp_anon_ratio{SEL}'],
            ['membloat_process_swap_bytes{SEL}'],
            ['membloat_process_untouched_commit_bytes{SEL}'],
            ['membloat_process_oom_score{SEL}'],
          ],
          h=10,
          overrides=[['Value #C', 'percentunit'], ['Value #E', 'none'], ['Value #F', 'percentunit'], ['Value #I', 'none']]),
    ts('RSS and peak by process', 'VmRSS (line) and VmHWM (peak) of the top processes.',
       'bytes', [
         ['topk(10, membloat_process_resident_bytes{SEL})', 'rss ' + proc],
         ['topk(10, membloat_process_resident_peak_bytes{SEL})', 'peak ' + proc],
       ], min=0),
    ts('Hoarded memory by process', 'Freed heap memory the allocator holds (deep tier). method=measured: read from glibc\'s heap by the heap walk. method=suspected: idle process, RSS near its peak, untrimmed heap holding most anonymous memory, where no walk was possible.',
       'bytes', [['topk(10, membloat_process_hoarded_bytes{SEL})', '{{method}} ' + proc]], min=0,
       thresholds=[[512 * mib, 'orange']]),
    ts('Heap: free, resident free, reclaimable', 'From the heap walk of glibc\'s heaps (main and arenas summed): free chunk bytes, the part in resident pages (what the host loses), and what malloc_trim(0) would give back (the hoarded figure).',
       'bytes', [
         ['topk(10, sum without (heap) (membloat_process_heap_free_bytes{SEL}))', 'free ' + proc],
         ['topk(10, sum without (heap) (membloat_process_heap_free_resident_bytes{SEL}))', 'resident ' + proc],
         ['topk(10, sum without (heap) (membloat_process_heap_reclaimable_bytes{SEL}))', 'reclaimable ' + proc],
       ], min=0),
    ts('Heap resident vs size', 'Rss and Size of [heap] plus glibc arena heaps (smaps, deep tier). Size far above Rss: the heap was trimmed. Rss counts live data and free chunks alike: the heap walk panel tells them apart.',
       'bytes', [
         ['topk(10, membloat_process_heap_resident_bytes{SEL})', 'resident ' + proc],
         ['topk(10, membloat_process_heap_size_bytes{SEL})', 'size ' + proc],
       ], min=0),
    ts('Arena heaps by process', 'glibc arena heaps per process (deep tier). The ceiling is 8 per online CPU.',
       'none', [['topk(10, membloat_process_arena_heaps{SEL})', proc]], min=0),
    ts('Arena address space by process', 'Address space reserved by glibc arena heaps per process (deep tier), 64 MiB each.',
       'bytes', [['topk(10, membloat_process_arena_reserved_bytes{SEL})', proc]], min=0),
    ts('Regrowth by process', 'Anonymous memory grown back in huge pages while the process was idle, since its lowest point.',
       'bytes', [['topk(10, membloat_process_regrown_since_trough_bytes{SEL})', proc]], min=0),
    ts('Swap by process', 'VmSwap of the top processes.',
       'bytes', [['topk(10, membloat_process_swap_bytes{SEL})', proc]], min=0),
    ts('Untouched commit by process', 'Commit charge minus RssAnon and VmSwap (deep tier): what the process can still turn into RSS without allocating. oom_score does not count it.',
       'bytes', [['topk(10, membloat_process_untouched_commit_bytes{SEL})', proc]], min=0),
    ts('oom_score by process', 'oom_score of the top processes; the highest is killed first.',
       'none', [['topk(10, membloat_process_oom_score{SEL})', proc]]),

    row('Deep tier'),
    ts('Deep tier', 'Processes that met the deep-tier thresholds (candidates), those whose smaps were read in the latest scan, and those left for later by the CPU budget (deferred).',
       'none', [
         ['membloat_deep_scan_candidates{SEL}', 'candidates {{instance}}'],
         ['membloat_deep_scan_processes{SEL}', 'read {{instance}}'],
         ['membloat_deep_scan_deferred{SEL}', 'deferred {{instance}}'],
       ], min=0),
    ts('Deep tier CPU', 'CPU time the deep tier spent in the latest scan (bounded by --collector.processes.deep-budget).',
       's', [['membloat_deep_scan_cpu_seconds{SEL}', '{{instance}}']], min=0),
  ],
  extraVars=[g.labelVar('group', 'group', 'membloat_group_processes{job=~"$job",instance=~"$instance"}')],
);

{
  'membloat-host.json': host,
  'membloat-thp.json': thp,
  'membloat-processes.json': processes,
}
