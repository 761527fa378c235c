// Recording rules: per host (instance:membloat_*), for the dashboards and alerts, and per
// job for a fleet (job:membloat_*), what a central Prometheus federates
// (match[]={__name__=~"job:membloat_.*"}) or a Thanos/Mimir ruler keeps long term. The
// fleet rules keep the cluster label (_config.clusterLabel) when the series carry it.
{
  prometheusRules+:: {
    local c = $._config,
    groups+: [
      {
        name: 'membloat.rules',
        rules: [
          // Share of RAM available to new work without swapping (0-1).
          {
            record: 'instance:membloat_memory_available:ratio',
            expr: 'membloat_memory_available_bytes / membloat_memory_total_bytes',
          },
          // MemAvailable one hour ahead, extrapolated from the last 30 minutes.
          {
            record: 'instance:membloat_memory_available_bytes:predict_linear1h',
            expr: 'predict_linear(membloat_memory_available_bytes[30m], 3600)',
          },
          // Pages swapped in and out per second.
          {
            record: 'instance:membloat_swap_in_pages:rate5m',
            expr: 'rate(membloat_vmstat_pswpin_total[5m])',
          },
          {
            record: 'instance:membloat_swap_out_pages:rate5m',
            expr: 'rate(membloat_vmstat_pswpout_total[5m])',
          },
          // Share of wall time in which all non-idle tasks stalled on memory (PSI "full").
          {
            record: 'instance:membloat_pressure_memory_stalled:ratio_rate5m',
            expr: 'rate(membloat_pressure_memory_stalled_seconds_total[5m])',
          },
          // Share of wall time in which at least one task stalled on memory (PSI "some").
          {
            record: 'instance:membloat_pressure_memory_waiting:ratio_rate5m',
            expr: 'rate(membloat_pressure_memory_waiting_seconds_total[5m])',
          },
          // Huge pages khugepaged allocated per second by collapsing small pages.
          {
            record: 'instance:membloat_thp_collapse_alloc:rate5m',
            expr: 'rate(membloat_vmstat_thp_collapse_alloc_total[5m])',
          },
          // Share of anonymous memory in transparent huge pages (0-1).
          {
            record: 'instance:membloat_memory_anon_huge:ratio',
            expr: 'membloat_memory_anon_huge_bytes / membloat_memory_anon_bytes',
          },
          // Per host sums of the per-group bloat signals (hoarded bytes kept apart by method:
          // measured or suspected).
          {
            record: 'instance:membloat_hoarded_bytes:sum',
            expr: 'sum without (group) (membloat_group_hoarded_bytes)',
          },
          {
            record: 'instance:membloat_regrown_since_trough_bytes:sum',
            expr: 'sum without (group) (membloat_group_regrown_since_trough_bytes)',
          },
          {
            record: 'instance:membloat_untouched_commit_bytes:sum',
            expr: 'sum without (group) (membloat_group_untouched_commit_bytes)',
          },
          {
            record: 'instance:membloat_arena_reserved_bytes:sum',
            expr: 'sum without (group) (membloat_group_arena_reserved_bytes)',
          },
          // Per host and runtime (runtime="jvm", "go"): the part of the measured hoarded bytes a
          // managed runtime's heap holds.
          {
            record: 'instance:membloat_runtime_held_bytes:sum',
            expr: 'sum without (group) (membloat_group_runtime_held_bytes)',
          },
          // Per container with a limit: its working set as a share of the limit (0-1;
          // the kubelet evicts and the OOM killer strikes near 1).
          {
            record: 'instance_cgroup:membloat_working_set_limit:ratio',
            expr: 'membloat_cgroup_working_set_bytes / membloat_cgroup_memory_limit_bytes',
          },
          // Per container: the share of its memory usage that its processes' allocators
          // and runtimes hold free (measured), which a trim or a tunable gives back.
          {
            record: 'instance_cgroup:membloat_hoarded_usage:ratio',
            expr: 'membloat_cgroup_hoarded_bytes / membloat_cgroup_memory_usage_bytes',
          },
          // Containers whose processes the OOM killer killed in the last hour (only those:
          // a node's other containers record nothing). A counter first seen within the hour
          // counts whole: increase() cannot see the kills of a series born after them.
          {
            record: 'instance_cgroup:membloat_cgroup_oom_kills:increase1h',
            expr: |||
              (
                (membloat_cgroup_oom_kills_total unless membloat_cgroup_oom_kills_total offset 1h)
                or increase(membloat_cgroup_oom_kills_total[1h])
              ) > 0
            |||,
          },
        ],
      },
      {
        name: 'membloat.fleet.rules',
        rules: [
          {
            record: 'job:membloat_hoarded_bytes:sum',
            expr: 'sum by (%(clusterLabel)s, job, method) (instance:membloat_hoarded_bytes:sum)' % c,
          },
          {
            record: 'job:membloat_regrown_since_trough_bytes:sum',
            expr: 'sum by (%(clusterLabel)s, job) (instance:membloat_regrown_since_trough_bytes:sum)' % c,
          },
          {
            record: 'job:membloat_untouched_commit_bytes:sum',
            expr: 'sum by (%(clusterLabel)s, job) (instance:membloat_untouched_commit_bytes:sum)' % c,
          },
          {
            record: 'job:membloat_arena_reserved_bytes:sum',
            expr: 'sum by (%(clusterLabel)s, job) (instance:membloat_arena_reserved_bytes:sum)' % c,
          },
          // The fleet's balance sheet: each row of the nodes' sheets summed.
          {
            record: 'job_row:membloat_host_memory_bytes:sum',
            expr: 'sum by (%(clusterLabel)s, job, row) (membloat_host_memory_bytes)' % c,
          },
          // Where the fleet's freed memory is held: per group (and method), per group and
          // runtime, and per runtime. runtime="glibc" is the measured hoarding that no
          // managed runtime holds: glibc's free heap pages, which malloc_trim gives back.
          {
            record: 'job_group:membloat_hoarded_bytes:sum',
            expr: 'sum by (%(clusterLabel)s, job, group, method) (membloat_group_hoarded_bytes)' % c,
          },
          {
            record: 'job_group:membloat_runtime_held_bytes:sum',
            expr: 'sum by (%(clusterLabel)s, job, group, runtime) (membloat_group_runtime_held_bytes)' % c,
          },
          {
            record: 'job_runtime:membloat_hoarded_bytes:sum',
            expr: |||
              sum by (%(clusterLabel)s, job, runtime) (instance:membloat_runtime_held_bytes:sum)
              or
              label_replace(
                sum by (%(clusterLabel)s, job) (instance:membloat_hoarded_bytes:sum{method="measured"})
                - on (%(clusterLabel)s, job) (
                  sum by (%(clusterLabel)s, job) (instance:membloat_runtime_held_bytes:sum)
                  or 0 * sum by (%(clusterLabel)s, job) (instance:membloat_hoarded_bytes:sum{method="measured"})
                ),
                "runtime", "glibc", "", ""
              )
            ||| % c,
          },
          // OOM kills in the last hour by group, from the kernel log (the kmsg collector).
          // Its counters are born at a group's first kill, at 1: a series first seen within
          // the hour counts whole, which increase() alone would miss.
          {
            record: 'job_group:membloat_oom_kills:increase1h',
            expr: |||
              sum by (%(clusterLabel)s, job, group) (
                (membloat_oom_kills_total unless membloat_oom_kills_total offset 1h)
                or increase(membloat_oom_kills_total[1h])
              )
            ||| % c,
          },
          // Hosts that could lose released memory to khugepaged, and hosts refusing allocations.
          {
            record: 'job:membloat_thp_regrowth_risk:sum',
            expr: 'sum by (%(clusterLabel)s, job) (membloat_thp_regrowth_risk)' % c,
          },
          {
            record: 'job:membloat_commit_limit_reached:sum',
            expr: 'sum by (%(clusterLabel)s, job) (membloat_commit_limit_reached)' % c,
          },
          // OOM kills in the last hour across the job.
          {
            record: 'job:membloat_vmstat_oom_kill:increase1h',
            expr: 'sum by (%(clusterLabel)s, job) (increase(membloat_vmstat_oom_kill_total[1h]))' % c,
          },
          // The tightest host: lowest available share and highest memory stall share.
          {
            record: 'job:membloat_memory_available:ratio_min',
            expr: 'min by (%(clusterLabel)s, job) (instance:membloat_memory_available:ratio)' % c,
          },
          {
            record: 'job:membloat_pressure_memory_stalled:ratio_rate5m_max',
            expr: 'max by (%(clusterLabel)s, job) (instance:membloat_pressure_memory_stalled:ratio_rate5m)' % c,
          },
        ],
      },
    ],
  },
}
