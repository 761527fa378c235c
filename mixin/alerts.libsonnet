// The alerts, one runbook section each (docs/runbooks.md), each with a promtool case that
// fires and one that stays silent (deploy/prometheus/membloat.rules.test.yml). Thresholds
// and the job selector come from _config (config.libsonnet).
{
  prometheusAlerts+:: {
    local c = $._config,
    groups+: [
      {
        name: 'membloat.alerts',
        rules: [
          {
            alert: 'MembloatMemoryExhaustionPredicted',
            expr: |||
              predict_linear(membloat_memory_available_bytes[30m], 3600) < 0
              and membloat_memory_available_bytes / membloat_memory_total_bytes < %(exhaustionAvailableRatio)s
            ||| % c,
            'for': '15m',
            labels: {
              severity: 'warning',
            },
            annotations: {
              summary: 'Memory on {{ $labels.instance }} runs out within the hour at the current trend.',
              description: 'MemAvailable is below %d %% of RAM and has fallen steadily for 30 minutes; extrapolated, it is {{ $value | humanize1024 }}B one hour from now. When it reaches zero the OOM killer acts.' % (100 * c.exhaustionAvailableRatio),
              runbook_url: '%s#membloatmemoryexhaustionpredicted' % c.runbookURLBase,
            },
          },
          {
            alert: 'MembloatCommitNearLimit',
            expr: |||
              membloat_commit_ratio > %(commitNearLimitRatio)s
              and membloat_vm_overcommit_memory == 2
            ||| % c,
            'for': '10m',
            labels: {
              severity: 'warning',
            },
            annotations: {
              summary: 'Committed memory on {{ $labels.instance }} is {{ $value | humanizePercentage }} of CommitLimit in strict overcommit mode.',
              description: 'vm.overcommit_memory is 2, so allocations fail once Committed_AS reaches CommitLimit. {{ $value | humanizePercentage }} of the limit is committed.',
              runbook_url: '%s#membloatcommitnearlimit' % c.runbookURLBase,
            },
          },
          {
            alert: 'MembloatCommitLimitReached',
            expr: 'membloat_commit_limit_reached == 1',
            'for': '1m',
            labels: {
              severity: 'critical',
            },
            annotations: {
              summary: 'Allocations fail on {{ $labels.instance }}: Committed_AS reached CommitLimit.',
              description: 'vm.overcommit_memory is 2 and Committed_AS is at or above CommitLimit: every new allocation (malloc, fork, mmap) fails with ENOMEM although RAM may be free.',
              runbook_url: '%s#membloatcommitlimitreached' % c.runbookURLBase,
            },
          },
          {
            alert: 'MembloatMemoryStalls',
            expr: 'instance:membloat_pressure_memory_stalled:ratio_rate5m > %(pressureStalledRatio)s' % c,
            'for': '10m',
            labels: {
              severity: 'warning',
            },
            annotations: {
              summary: 'All tasks on {{ $labels.instance }} stall on memory {{ $value | humanizePercentage }} of the time.',
              description: 'Memory pressure (PSI "full") has been above %d %% for 10 minutes: during that share of wall time every runnable task waited for memory (reclaim, swap-in, refaults). The host is thrashing or close to an OOM kill.' % (100 * c.pressureStalledRatio),
              runbook_url: '%s#membloatmemorystalls' % c.runbookURLBase,
            },
          },
          // Kills for the host running out of memory. Where the kmsg collector reads the
          // kernel log, the latest victim's kill in the last 10 minutes, named, when its
          // constraint was not a memory cgroup's limit. Without it, /proc/vmstat oom_kill
          // (every kill) less the kills of containers at their own limit (memory.events
          // oom, cgroup v2); on cgroup v1 the kernel's counters do not tell them apart.
          // increase() extrapolates, hence 0.5 for "at least one".
          {
            alert: 'MembloatOOMKill',
            expr: |||
              (
                (membloat_oom_last_victim_timestamp_seconds > time() - 600)
                * on (job, instance) group_left (pid, comm, group, constraint, memory_cgroup)
                  membloat_oom_last_victim_info{constraint!="memory_cgroup"}
              )
              or on (job, instance)
              (
                (
                  (
                    increase(membloat_vmstat_oom_kill_total[10m])
                    - on (job, instance)
                      sum by (job, instance) (increase(membloat_cgroup_limit_ooms_total[10m]))
                  )
                  or
                  (
                    increase(membloat_vmstat_oom_kill_total[10m])
                    unless on (job, instance) membloat_cgroup_limit_ooms_total
                  )
                ) > 0.5
                unless on (job, instance) membloat_scrape_collector_success{collector="kmsg"} == 1
              )
            |||,
            labels: {
              severity: 'warning',
            },
            annotations: {
              summary: 'The OOM killer killed {{ if $labels.comm }}{{ $labels.comm }} (pid {{ $labels.pid }}){{ else }}a process{{ end }} on {{ $labels.instance }}.',
              description: '{{ if $labels.comm }}The host ran out of memory ({{ $labels.constraint }}) and the kernel killed {{ $labels.comm }} (pid {{ $labels.pid }}, group {{ $labels.group }}). membloat_oom_last_victim_killed_bytes has its memory at the kill, membloat_oom_last_victim_measured_bytes what was measured of it before (hoarded, regrown), and /explain the remedy.{{ else }}{{ $value | printf "%.0f" }} process(es) killed in the last 10 minutes because the host ran out of memory (kills of containers at their own memory limit are not counted where cgroup v2 tells them apart). The kernel log names the victim; the kmsg collector would too.{{ end }}',
              runbook_url: '%s#membloatoomkill' % c.runbookURLBase,
            },
          },
          // A container's kill at its own memory limit: named from the kernel log where
          // the kmsg collector reads it (cgroup v1 and v2), else memory.events (v2 only).
          {
            alert: 'MembloatContainerOOMKill',
            expr: |||
              label_replace(
                (membloat_oom_last_victim_timestamp_seconds > time() - 600)
                * on (job, instance) group_left (pid, comm, group, memory_cgroup)
                  membloat_oom_last_victim_info{constraint="memory_cgroup"},
                "cgroup", "$1", "memory_cgroup", "(.*)"
              )
              or on (job, instance)
              (
                increase(membloat_cgroup_limit_ooms_total[10m]) > 0.5
                unless on (job, instance) membloat_scrape_collector_success{collector="kmsg"} == 1
              )
            |||,
            labels: {
              severity: 'info',
            },
            annotations: {
              summary: 'A container on {{ $labels.instance }} was OOM-killed at its memory limit{{ if $labels.comm }}: {{ $labels.comm }} (pid {{ $labels.pid }}){{ end }}.',
              description: "{{ if $labels.comm }}The kernel killed {{ $labels.comm }} (pid {{ $labels.pid }}, group {{ $labels.group }}) in the cgroup {{ $labels.cgroup }} at a memory cgroup's limit. The host did not run out of memory; the container's limit is too low for it, or it leaks, or its allocator kept freed memory: membloat_oom_last_victim_measured_bytes{kind=\"hoarded\"} says how much was measured before the kill, and /explain gives the remedy. membloat_cgroup_info names its pod.{{ else }}The cgroup {{ $labels.cgroup }} reached its memory limit and the OOM killer ran inside it {{ $value | printf \"%.0f\" }} time(s) in the last 10 minutes. The host did not run out of memory; the container's limit is too low for it, or it leaks. membloat_cgroup_info names its pod.{{ end }}",
              runbook_url: '%s#membloatcontaineroomkill' % c.runbookURLBase,
            },
          },
          // A container near its own limit whose glibc allocators hold freed memory: giving
          // it back buys headroom before the limit's OOM killer picks a process. The value
          // is the share of the working set that is hoarded; a container near its limit
          // without measured hoarding is the owner's sizing, and this stays silent.
          {
            alert: 'MembloatContainerNearLimitHoarding',
            expr: |||
              membloat_cgroup_hoarded_bytes / membloat_cgroup_working_set_bytes
              and on (job, instance, cgroup)
              (membloat_cgroup_working_set_bytes / membloat_cgroup_memory_limit_bytes > %(containerNearLimitRatio).2f)
            ||| % c,
            'for': '15m',
            labels: {
              severity: 'warning',
            },
            annotations: {
              summary: 'Container {{ $labels.cgroup }} on {{ $labels.instance }} is near its memory limit, and {{ $value | humanizePercentage }} of its working set is freed heap its allocators hold.',
              description: "The working set of {{ $labels.cgroup }} is above %(containerNearLimitPercent)d %% of its memory limit, so its next growth may end in an OOM kill inside it. The heap walk measured {{ $value | humanizePercentage }} of that working set as memory glibc has freed but kept: malloc_trim, a lower M_TRIM_THRESHOLD or fewer arenas give it back without raising the limit. membloat_cgroup_info names its pod." % (c { containerNearLimitPercent: c.containerNearLimitRatio * 100 }),
              runbook_url: '%s#membloatcontainernearlimithoarding' % c.runbookURLBase,
            },
          },
          // cgroup v2's own PSI: a container reclaiming against its limit stalls before it is
          // OOM-killed. Near the limit and stalling is the kill coming, hoarding or not.
          {
            alert: 'MembloatContainerNearLimitStalling',
            expr: |||
              rate(membloat_cgroup_pressure_memory_waiting_seconds_total[5m]) > %(containerStallRatio).2f
              and on (job, instance, cgroup)
              (membloat_cgroup_working_set_bytes / membloat_cgroup_memory_limit_bytes > %(containerNearLimitRatio).2f)
            ||| % c,
            'for': '10m',
            labels: {
              severity: 'warning',
            },
            annotations: {
              summary: 'Container {{ $labels.cgroup }} on {{ $labels.instance }} is near its memory limit and its tasks stall on memory {{ $value | humanizePercentage }} of the time.',
              description: "The working set of {{ $labels.cgroup }} is above %(containerNearLimitPercent)d %% of its memory limit and, by its own memory.pressure (cgroup v2), at least one of its tasks waited on memory reclaim {{ $value | humanizePercentage }} of the last 5 minutes: it is reclaiming against its limit, slower for it, and an OOM kill inside it follows if reclaim fails. membloat_cgroup_hoarded_bytes says whether freed heap its allocators hold would give the room back; membloat_cgroup_info names its pod." % (c { containerNearLimitPercent: c.containerNearLimitRatio * 100 }),
              runbook_url: '%s#membloatcontainernearlimitstalling' % c.runbookURLBase,
            },
          },
          // The kubelet's own signal against its own threshold (docs/eviction.md): warned
          // while there is room, before the kubelet sets MemoryPressure.
          {
            alert: 'MembloatKubeletEvictionHeadroomLow',
            expr: |||
              membloat_kubelet_eviction_headroom_bytes >= 0
              and on (job, instance, signal)
              (membloat_kubelet_eviction_headroom_bytes < on (job, instance, signal) group_left %(evictionHeadroomRatio).2f * membloat_kubelet_memory_capacity_bytes)
            ||| % c,
            'for': '1m',
            labels: {
              severity: 'warning',
            },
            annotations: {
              summary: 'The kubelet on {{ $labels.instance }} is {{ $value | humanize1024 }}B from its {{ $labels.kind }} eviction threshold for {{ $labels.signal }}.',
              description: "The kubelet's {{ $labels.signal }}, as the kubelet computes it, is {{ $value | humanize1024 }}B above its {{ $labels.kind }} threshold: less than %(evictionHeadroomPercent)d %% of its capacity. Below it the kubelet sets MemoryPressure and evicts pods. membloat_kubelet_working_set_bytes{part=\"active_file\"} is page cache the kernel would drop first; what is left is the pods' and the system's memory." % (c { evictionHeadroomPercent: c.evictionHeadroomRatio * 100 }),
              runbook_url: '%s#membloatkubeletevictionheadroomlow' % c.runbookURLBase,
            },
          },
          {
            alert: 'MembloatKubeletEvictionThresholdMet',
            expr: |||
              membloat_kubelet_eviction_headroom_bytes < 0
            |||,
            labels: {
              severity: 'critical',
            },
            annotations: {
              summary: 'The kubelet on {{ $labels.instance }} has met its {{ $labels.kind }} eviction threshold for {{ $labels.signal }}.',
              description: "The kubelet's {{ $labels.signal }} less its {{ $labels.kind }} threshold is {{ $value | humanize1024 }}B: the kubelet sets MemoryPressure and evicts pods (for a soft threshold, after its grace period).",
              runbook_url: '%s#membloatkubeletevictionthresholdmet' % c.runbookURLBase,
            },
          },
          // The memory part of oom_score, without oom_score_adj: oom_score is
          // (1000 + 1000 x share of RAM and swap + oom_score_adj) x 2/3. A Kubernetes
          // BestEffort pod (adj 1000) scores high with no memory: killing it frees little, so
          // it is not what this alert is about. Keyed by comm: a restarted process (new pid)
          // keeps the alert, it does not fire again.
          {
            alert: 'MembloatProcessLikelyOOMVictim',
            expr: |||
              max by (job, instance, comm) (
                (membloat_process_oom_score * 1.5 - 1000 - membloat_process_oom_score_adj) / 1000
                and membloat_process_oom_rank <= %(oomVictimRank)d
              ) >= %(oomVictimShare).2f
              and on (job, instance) instance:membloat_memory_available:ratio < %(lowMemoryRatio).2f
            ||| % c,
            'for': '5m',
            labels: {
              severity: 'warning',
            },
            annotations: {
              summary: '{{ $labels.comm }} on {{ $labels.instance }} is among the first the OOM killer would pick, and holds a large share of memory.',
              description: "Less than %d %% of RAM is available and {{ $labels.comm }}, one of the first %d in the OOM killer's order, holds {{ $value | humanizePercentage }} of RAM and swap (its oom_score without oom_score_adj)." % [100 * c.lowMemoryRatio, c.oomVictimRank],
              runbook_url: '%s#membloatprocesslikelyoomvictim' % c.runbookURLBase,
            },
          },
          {
            alert: 'MembloatKhugepagedRegrowth',
            // The per-process alerts are keyed by comm, as the OOM-victim one: a restarted
            // process (new pid) keeps its alert instead of firing a new one. The pid is on
            // the top-process series and in explain.
            expr: 'max by (job, instance, comm) (membloat_process_regrown_since_trough_bytes) > %(regrowthMiB)d * 1024 * 1024' % c,
            'for': '15m',
            labels: {
              severity: 'warning',
            },
            annotations: {
              summary: '{{ $labels.comm }} on {{ $labels.instance }} regained {{ $value | humanize1024 }}B of released memory through khugepaged.',
              description: "The process's anonymous memory grew back in transparent huge pages while it was idle and its mappings did not change: khugepaged collapsed ranges it had released with MADV_DONTNEED (khugepaged/max_ptes_none is above 0).",
              runbook_url: '%s#membloatkhugepagedregrowth' % c.runbookURLBase,
            },
          },
          // Measured: glibc's own heap says this memory is free, resident and could be given
          // back (heap walk). A fact, so a warning.
          {
            alert: 'MembloatAllocatorHoarding',
            // A JVM's held Java heap (16 MiB or more) is part of its measured figure but
            // not glibc's: MembloatJavaHeapHeld tells it with its collector's remedy.
            expr: |||
              max by (job, instance, comm) (
                (
                  membloat_process_hoarded_bytes{method="measured"}
                  - ignoring (method, runtime) (membloat_process_runtime_held_bytes >= 16 * 1024 * 1024)
                )
                or ignoring (method) membloat_process_hoarded_bytes{method="measured"}
              ) > %(hoardedMiB)d * 1024 * 1024
            ||| % c,
            'for': '1h',
            labels: {
              severity: 'warning',
            },
            annotations: {
              summary: '{{ $labels.comm }} on {{ $labels.instance }} has held {{ $value | humanize1024 }}B of freed heap for an hour (measured).',
              description: "Measured from glibc's heap: the allocator holds this much freed memory in resident pages that malloc_trim(0) would give back to the kernel. The program does not use it.",
              runbook_url: '%s#membloatallocatorhoarding' % c.runbookURLBase,
            },
          },
          // Measured: a JVM's collector keeps committed heap resident that the program no
          // longer uses (G1 never below -Xms); the collector names the remedy.
          {
            alert: 'MembloatJavaHeapHeld',
            expr: |||
              max by (job, instance, comm, collector) (
                membloat_process_runtime_held_bytes{runtime="jvm"}
                * on (job, instance, pid, comm) group_left (collector) membloat_process_jvm_info
              ) > %(hoardedMiB)d * 1024 * 1024
            ||| % c,
            'for': '1h',
            labels: {
              severity: 'warning',
            },
            annotations: {
              summary: 'The JVM {{ $labels.comm }} on {{ $labels.instance }} has held {{ $value | humanize1024 }}B of Java heap it does not use for an hour (measured, {{ $labels.collector }}).',
              description: "Measured from the JVM's own perf data and its heap's resident pages: its {{ $labels.collector }} collector keeps this much committed heap in RAM that holds no live objects. G1: -XX:G1PeriodicGCInterval and lower heap free ratios; Parallel and Serial: lower MinHeapFreeRatio/MaxHeapFreeRatio; ZGC: a shorter ZUncommitDelay; and an -Xms below -Xmx, since no collector gives back below -Xms.",
              runbook_url: '%s#membloatjavaheapheld' % c.runbookURLBase,
            },
          },
          // Suspected: the heap walk could not read this process (another allocator, no
          // CAP_SYS_PTRACE, walk off); a large idle heap near the peak may also be live data.
          {
            alert: 'MembloatAllocatorHoardingSuspected',
            expr: 'max by (job, instance, comm) (membloat_process_hoarded_bytes{method="suspected"}) > %(hoardedMiB)d * 1024 * 1024' % c,
            'for': '1h',
            labels: {
              severity: 'info',
            },
            annotations: {
              summary: '{{ $labels.comm }} on {{ $labels.instance }} may have held {{ $value | humanize1024 }}B of freed heap for an hour (suspected).',
              description: 'Not measured: the process is idle, near its peak RSS, and most of its anonymous memory sits in an untrimmed heap. The allocator probably keeps freed memory, but a large idle heap of live objects looks the same from /proc.',
              runbook_url: '%s#membloatallocatorhoardingsuspected' % c.runbookURLBase,
            },
          },
          {
            alert: 'MembloatArenasAtCeiling',
            expr: 'max by (job, instance, comm) (membloat_process_arena_at_ceiling) == 1',
            'for': '1h',
            labels: {
              severity: 'info',
            },
            annotations: {
              summary: "{{ $labels.comm }} on {{ $labels.instance }} uses glibc's maximum number of malloc arenas.",
              description: 'The process has 8 arenas per CPU, each reserving 64 MiB of address space and keeping its own free memory. MALLOC_ARENA_MAX caps them.',
              runbook_url: '%s#membloatarenasatceiling' % c.runbookURLBase,
            },
          },
          {
            alert: 'MembloatHiddenTHPMemoryLarge',
            expr: 'membloat_thp_hidden_bytes / membloat_memory_total_bytes > %(hiddenTHPRatio)s' % c,
            'for': '30m',
            labels: {
              severity: 'warning',
            },
            annotations: {
              summary: '{{ $value | humanizePercentage }} of RAM on {{ $labels.instance }} sits in partially mapped huge pages.',
              description: "Huge pages that lost most of their mapping stay allocated until the deferred split shrinker runs; this memory shows in no process's RSS and not in MemFree.",
              runbook_url: '%s#membloathiddenthpmemorylarge' % c.runbookURLBase,
            },
          },
          {
            alert: 'MembloatUnexplainedMemoryGrowing',
            expr: |||
              membloat_host_memory_bytes{row="unexplained"} / ignoring(row) membloat_memory_total_bytes > %(unexplainedRatio)s
              and ignoring(row)
              delta(membloat_host_memory_bytes{row="unexplained"}[6h]) / ignoring(row) membloat_memory_total_bytes > %(unexplainedGrowthRatio)s
            ||| % c,
            'for': '1h',
            labels: {
              severity: 'warning',
            },
            annotations: {
              summary: '{{ $value | humanizePercentage }} of RAM on {{ $labels.instance }} is held where no kernel counter names it, and it grew.',
              description: 'The balance sheet row unexplained (MemTotal less every counter the kernel keeps) is over %d %% of RAM and grew by over %d %% of RAM in 6 hours: memory a driver, a GPU or a kernel leak holds.' % [100 * c.unexplainedRatio, 100 * c.unexplainedGrowthRatio],
              runbook_url: '%s#membloatunexplainedmemorygrowing' % c.runbookURLBase,
            },
          },
          {
            alert: 'MembloatOrphanedSharedMemory',
            expr: 'sum by (instance) (membloat_sysv_shm_resident_bytes{orphaned="true"}) > %(orphanedShmMiB)s * 1024 * 1024' % c,
            'for': '1h',
            labels: {
              severity: 'warning',
            },
            annotations: {
              summary: '{{ $value | humanize1024 }}B of SysV shared memory on {{ $labels.instance }} is attached by no process.',
              description: 'SysV segments stay in RAM (or swap) until removed, after the processes that made them are gone: no RSS shows them. membloat_sysv_shm_resident_bytes{orphaned="true"} lists them; ipcrm -m SHMID frees one.',
              runbook_url: '%s#membloatorphanedsharedmemory' % c.runbookURLBase,
            },
          },
          {
            alert: 'MembloatSlabNotShrinking',
            expr: |||
              sum without (row) (membloat_host_memory_bytes{row=~"slab_reclaimable|slab_unreclaimable"}) / membloat_memory_total_bytes > %(slabRatio)s
              and
              sum without (row) (delta(membloat_host_memory_bytes{row=~"slab_reclaimable|slab_unreclaimable"}[30m])) >= 0
              and
              rate(membloat_pressure_memory_waiting_seconds_total[30m]) > %(slabStallRatio)s
            ||| % c,
            'for': '30m',
            labels: {
              severity: 'warning',
            },
            annotations: {
              summary: 'Slab holds {{ $value | humanizePercentage }} of RAM on {{ $labels.instance }} and does not shrink while tasks wait for memory.',
              description: 'The kernel slab caches are over %d %% of RAM and did not shrink over 30 minutes in which tasks stalled on memory over %d %% of the time: a cache the shrinkers cannot free (unreclaimable slab, pinned dentries or inodes) or one that grows faster than reclaim. membloat_slab_cache_bytes names the caches.' % [100 * c.slabRatio, 100 * c.slabStallRatio],
              runbook_url: '%s#membloatslabnotshrinking' % c.runbookURLBase,
            },
          },
          {
            alert: 'MembloatSwapThrashing',
            expr: |||
              instance:membloat_swap_in_pages:rate5m > %(swapThrashPagesPerSecond)d
              and instance:membloat_swap_out_pages:rate5m > %(swapThrashPagesPerSecond)d
            ||| % c,
            'for': '10m',
            labels: {
              severity: 'warning',
            },
            annotations: {
              summary: '{{ $labels.instance }} swaps in and out at the same time ({{ $value | printf "%.0f" }} pages/s in).',
              description: 'Pages are swapped in and out at more than %d pages per second each way for 10 minutes: the working set no longer fits in RAM.' % c.swapThrashPagesPerSecond,
              runbook_url: '%s#membloatswapthrashing' % c.runbookURLBase,
            },
          },
          {
            alert: 'MembloatNotScanning',
            expr: 'time() - membloat_last_scan_timestamp_seconds > %(notScanningSeconds)d' % c,
            'for': '5m',
            labels: {
              severity: 'warning',
            },
            annotations: {
              summary: 'membloat_exporter on {{ $labels.instance }} has not completed a scan for {{ $value | humanizeDuration }}.',
              description: 'The exporter answers scrapes but its scan loop is stuck, so every value it serves is stale.',
              runbook_url: '%s#membloatnotscanning' % c.runbookURLBase,
            },
          },
          {
            alert: 'MembloatCollectorFailing',
            expr: 'membloat_scrape_collector_success == 0',
            'for': '15m',
            labels: {
              severity: 'warning',
            },
            annotations: {
              summary: 'The {{ $labels.collector }} collector of membloat_exporter on {{ $labels.instance }} fails.',
              description: 'The collector could not read its source for 15 minutes (permission denied, a read timeout or malformed content), so its metrics are missing. A kernel without the source (no PSI, no THP) is not a failure: it is counted in membloat_scan_errors_total{reason="unsupported"}.',
              runbook_url: '%s#membloatcollectorfailing' % c.runbookURLBase,
            },
          },
          {
            alert: 'MembloatExporterDown',
            expr: 'up{%(membloatSelector)s} == 0' % c,
            'for': '5m',
            labels: {
              severity: 'warning',
            },
            annotations: {
              summary: 'Prometheus cannot scrape membloat_exporter on {{ $labels.instance }}.',
              description: 'The scrape has failed for 5 minutes: no memory or OOM-risk alert can fire for this host.',
              runbook_url: '%s#membloatexporterdown' % c.runbookURLBase,
            },
          },
        ],
      },
    ],
  },
}
