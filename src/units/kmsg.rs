//! `kmsg`: the OOM killer's account of each kill, from `/dev/kmsg` read on a cursor of its
//! own. The cursor starts at the end of the log, so a restarted exporter does not count the
//! kills it had counted before (`explain` starts at the oldest record, to tell the kills of
//! a host it was not watching). Without the right to read the log
//! (`kernel.dmesg_restrict=1` and no `CAP_SYSLOG`) the collector fails with `denied` (the
//! scan's report warns once, with the fix) and tries again each scan; everything else goes
//! on. What it reads is the kills themselves: the model joins each with what the last scans
//! measured of its victim, and the exposition encodes the join with these rows.

use crate::family::Collector;
use crate::family::{Family, Metric, Section};
use crate::parse::kmsg::{Assembler, OomKill};
use crate::source::{KernelLog, ReadError, Reason};

use super::{Collect, Output, Reader, Reading, Unit};

pub const UNIT: Unit = Unit {
    name: NAME,
    what: "each OOM kill from the kernel log (/dev/kmsg), with what was measured of the victim",
    rows: &ROWS,
    fixes: &[(
        Reason::Denied,
        "grant CAP_SYSLOG: reading /dev/kmsg needs it under kernel.dmesg_restrict=1; until then OOM kills are counted (vmstat oom_kill, the cgroups' counters) but their victims are not named",
    )],
    start: || Box::<Cursor>::default(),
};

const NAME: &str = "kmsg";

/// The collector, as the model finds its run among a scan's collectors.
pub const COLLECTOR: Collector = Collector::Unit(NAME);

const SECTION: Section = Section::Of(COLLECTOR);

const ROWS: [Metric; 6] = [
    OOM_KILLS_TOTAL,
    OOM_LAST_VICTIM_INFO,
    OOM_LAST_VICTIM_TIMESTAMP_SECONDS,
    OOM_LAST_VICTIM_KILLED_BYTES,
    OOM_LAST_VICTIM_MEASURED_BYTES,
    OOM_LAST_VICTIM_MEASURED_TIMESTAMP_SECONDS,
];

pub(crate) const OOM_KILLS_TOTAL: Metric = crate::family::metric!(
    membloat "oom_kills",
    Counter,
    None,
    ["constraint", "group"],
    SECTION,
    "/dev/kmsg",
    "OOM kills the kernel logged since the exporter started, one per process (a memory.oom.group kill counts each member once), by what limited the allocation (host, memory_cgroup, cpuset, mempolicy; unknown on kernels that do not say) and the victim's group (unknown when no scan saw it; other past --collector.processes.max-groups groups). Kills before the exporter started are not counted.",
);

pub(crate) const OOM_LAST_VICTIM_INFO: Metric = crate::family::metric!(
    membloat "oom_last_victim",
    Info,
    None,
    ["pid", "comm", "constraint", "group", "memory_cgroup", "allocator", "runtime"],
    SECTION,
    "/dev/kmsg, and the victim's last scan",
    "The latest process the OOM killer killed: its pid and name as the kernel logged them, the constraint, its group, memory cgroup (pod, container), allocator and runtime as the exporter knew them (empty when unknown). One series: it is replaced by the next kill.",
);

pub(crate) const OOM_LAST_VICTIM_TIMESTAMP_SECONDS: Metric = crate::family::metric!(
    membloat "oom_last_victim_timestamp",
    Gauge,
    Seconds,
    [],
    SECTION,
    "/dev/kmsg, /proc/stat btime",
    "Unix time of the latest OOM kill the kernel logged (boot time plus the record's time).",
);

pub(crate) const OOM_LAST_VICTIM_KILLED_BYTES: Metric = crate::family::metric!(
    membloat "oom_last_victim_killed",
    Gauge,
    Bytes,
    ["kind"],
    SECTION,
    "/dev/kmsg",
    "The latest victim's memory as the kernel counted it when it killed it: total_vm, anon_rss, file_rss, shmem_rss, pgtables (the kinds its kernel prints).",
);

pub(crate) const OOM_LAST_VICTIM_MEASURED_BYTES: Metric = crate::family::metric!(
    membloat "oom_last_victim_measured",
    Gauge,
    Bytes,
    ["kind"],
    SECTION,
    "the victim's last scan",
    "What the exporter had measured of the latest victim at its last scan before the kill: rss, rss_anon, swap, hoarded (measured by the heap walk), hoarded_suspected, arena_reserved, regrown, untouched_commit (the kinds it knew); absent when no scan saw it.",
);

pub(crate) const OOM_LAST_VICTIM_MEASURED_TIMESTAMP_SECONDS: Metric = crate::family::metric!(
    membloat "oom_last_victim_measured_timestamp",
    Gauge,
    Seconds,
    [],
    SECTION,
    "the victim's last scan",
    "Unix time of the scan that last read the latest victim; absent when no scan saw it.",
);

/// The OOM kills logged since the last read: the model joins them with what was last
/// measured of each victim, and the exposition encodes the join with this unit's rows.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct OomKills(pub Vec<OomKill>);

impl super::UnitReading for OomKills {
    const COLLECTOR: crate::family::Collector = COLLECTOR;
}

impl Reading for OomKills {
    fn families(&self) -> Vec<Family> {
        Vec::new()
    }
}

/// The open log, its cursor and the lines of a kill not yet complete.
#[derive(Debug, Default)]
struct Cursor {
    log: Option<KernelLog>,
    assembler: Assembler,
    /// Start at the oldest record instead of the end (once).
    from_start: bool,
}

impl Collect for Cursor {
    /// The kills written to the log since the last read.
    fn read(&mut self, r: &mut Reader) -> Result<Output, Reason> {
        let log = match &mut self.log {
            Some(log) => log,
            None => {
                // No /dev/kmsg at all is a kernel (or container) without it, not a failure.
                let log = r
                    .source
                    .open_kernel_log(self.from_start)
                    .map_err(|e| match e {
                        ReadError::Gone(_) => Reason::Unsupported,
                        e => e.system_reason(),
                    })?;
                self.from_start = false;
                self.log.insert(log)
            }
        };
        let mut kills = Vec::new();
        let before = self.assembler.malformed;
        let assembler = &mut self.assembler;
        let read = log.read(|record| kills.extend(assembler.push(record)));
        r.count(Reason::Malformed, self.assembler.malformed - before);
        match read {
            Ok(done) => {
                if done.overwritten > 0 {
                    crate::log!(
                        Warn,
                        "the kernel log overwrote records before they were read; a kill among them is counted by vmstat only",
                        times = done.overwritten
                    );
                }
                Ok(Box::new(OomKills(kills)))
            }
            Err(e) => {
                // Opened again (at the end) by the next scan.
                self.log = None;
                Err(e.system_reason())
            }
        }
    }

    fn read_history(&mut self) {
        self.from_start = true;
    }
}
