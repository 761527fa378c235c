// Everything a user of the mixin may set, with the defaults the plain files in grafana/
// and deploy/prometheus/ are rendered with. Override in your own jsonnet:
//
//   (import 'membloat-mixin/mixin.libsonnet') + { _config+:: { membloatSelector: 'job="node-agents"' } }
{
  _config+:: {
    // Selects the exporter's scrape job where a query needs one (`up`, which every
    // exporter shares); the membloat_* series are the exporter's alone.
    membloatSelector: 'job="membloat"',
    // The label that tells clusters apart on a fleet (kube-prometheus: `cluster`). Fleet
    // recording rules keep it, and the dashboards filter on it.
    clusterLabel: 'cluster',
    // Where the runbooks live; each alert links to `<base>#<alertname in lower case>`.
    runbookURLBase: 'https://github.com/membloat/membloat_exporter/blob/main/docs/runbooks.md',

    // Thresholds. The ones explain shares are constants in src/model/signals.rs; a test
    // checks that the defaults here are the same.
    exhaustionAvailableRatio: 0.25,  // MembloatMemoryExhaustionPredicted: below this share
    commitNearLimitRatio: 0.9,  // MembloatCommitNearLimit (overcommit mode 2)
    pressureStalledRatio: 0.05,  // MembloatMemoryStalls: PSI full share of time
    lowMemoryRatio: 0.10,  // MembloatProcessLikelyOOMVictim: MemAvailable / MemTotal below
    oomVictimRank: 3,  // ...one of the first N in the OOM killer's order
    oomVictimShare: 0.30,  // ...holding this share of RAM and swap
    regrowthMiB: 256,  // MembloatKhugepagedRegrowth
    hoardedMiB: 512,  // MembloatAllocatorHoarding, MembloatAllocatorHoardingSuspected, MembloatJavaHeapHeld
    containerNearLimitRatio: 0.9,  // MembloatContainerNearLimitHoarding, MembloatContainerNearLimitStalling: working set / limit
    evictionHeadroomRatio: 0.05,  // MembloatKubeletEvictionHeadroomLow: headroom to a kubelet threshold, share of the signal's capacity
    containerStallRatio: 0.10,  // MembloatContainerNearLimitStalling: share of time a task stalled (cgroup PSI some)
    hiddenTHPRatio: 0.05,  // MembloatHiddenTHPMemoryLarge: share of RAM
    unexplainedRatio: 0.10,  // MembloatUnexplainedMemoryGrowing: the sheet's unexplained row, share of RAM
    unexplainedGrowthRatio: 0.05,  // ...that grew by this share of RAM in 6 hours
    orphanedShmMiB: 256,  // MembloatOrphanedSharedMemory: SysV segments no process attaches
    slabRatio: 0.15,  // MembloatSlabNotShrinking: slab's share of RAM
    slabStallRatio: 0.05,  // MembloatSlabNotShrinking: PSI some share of time (pressure)
    swapThrashPagesPerSecond: 256,  // MembloatSwapThrashing, each way
    notScanningSeconds: 300,  // MembloatNotScanning

    // Dashboards.
    dashboardTags: ['membloat'],
    dashboardRefresh: '30s',
  },
}
