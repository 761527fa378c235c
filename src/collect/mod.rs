//! Collecting: one scan's raw values (their types are this module's; the scan is
//! `scanner`'s), the system files once and every process, read on a bounded pool of
//! threads (`pool`), grouped (`matcher`), with the heap readers (`crate::heap`) run on
//! deep-read processes (`deep`). All file access goes through `source`.

mod deep;
pub mod matcher;
pub mod own;
pub mod pool;
mod processes;
mod sample;
mod scanner;
mod system;
pub use sample::{ProcessFiles, ProcessSample};
pub use scanner::Scanner;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use crate::config::GroupBy;
use crate::family::Collector;
use crate::source::Reason;
use crate::units::{Output, Reading, UnitReading};
use matcher::Matchers;

/// What the deep tier did in one scan.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct DeepRun {
    /// Processes that met the candidate thresholds.
    pub candidates: u64,
    /// Candidates whose smaps was read in this scan.
    pub covered: u64,
    /// Candidates due for a read but left for a later scan by the CPU budget.
    pub deferred: u64,
    pub duration_seconds: f64,
    pub cpu_seconds: f64,
    /// Each heap reader's reads (glibc's walks, JVMs', Go's, jemalloc's), by how they
    /// ended.
    pub reads: crate::heap::ReadCounts,
    /// CPU time the heap walks took (part of `cpu_seconds`).
    pub heap_walk_cpu_seconds: f64,
}

/// How one collector did in a scan.
#[derive(Debug, Clone, PartialEq)]
pub struct CollectorRun {
    pub name: Collector,
    pub success: bool,
    pub duration_seconds: f64,
}

/// Error counts by (collector, reason).
pub(crate) type ErrorCounts = BTreeMap<(Collector, Reason), u64>;

/// Everything one scan read.
#[derive(Debug, Clone, Default)]
pub struct Sample {
    /// Wall-clock time the scan started: the timestamps exported.
    pub taken_at: Option<SystemTime>,
    /// Monotonic time the scan started: the time between scans that rates and idleness are
    /// judged over, which a step of the wall clock (NTP, an operator) does not move.
    pub started: Option<Instant>,
    pub duration_seconds: f64,
    /// What the system collectors read: passed whole to the snapshot.
    pub host: Host,
    pub processes: Vec<ProcessSample>,
    pub collectors: Vec<CollectorRun>,
    pub errors: ErrorCounts,
    pub deep: Option<DeepRun>,
    /// How the processes were read, when the processes collector ran.
    pub reads: Option<ReadStats>,
    /// The exporter's own process, read at the end of the scan.
    pub own: Option<own::OwnProcess>,
    /// Online CPUs: glibc allows 8 arenas per CPU.
    pub online_cpus: u64,
    /// The unit of CPU times in `stat`: 1 / `sysconf(_SC_CLK_TCK)`.
    pub cpu_tick_seconds: f64,
    /// Unix time of boot (`btime`), once read.
    pub boot_time_seconds: Option<f64>,
}

/// What the system collectors (the units) read in one scan: the sample's system part,
/// which the snapshot takes whole. A collector that is off or failed has no reading.
#[derive(Debug, Clone, Default)]
pub struct Host {
    /// Each unit's reading, in the order of `units::ALL`.
    readings: Vec<(Collector, Arc<dyn Reading>)>,
}

impl Host {
    /// Takes a unit's reading.
    pub fn accept(&mut self, collector: Collector, reading: Output) {
        self.readings.push((collector, Arc::from(reading)));
    }

    /// The reading of `T`'s unit, when it ran and succeeded.
    pub fn get<T: UnitReading>(&self) -> Option<&T> {
        self.readings
            .iter()
            .find(|(c, _)| *c == T::COLLECTOR)
            .and_then(|(_, r)| r.downcast_ref::<T>())
    }

    /// This host with `reading` in place of its collector's (tests, benchmarks).
    pub fn with<T: Reading>(mut self, collector: Collector, reading: T) -> Self {
        self.set(collector, reading);
        self
    }

    /// Puts `reading` in place of its collector's, or adds it (tests, benchmarks).
    pub fn set<T: Reading>(&mut self, collector: Collector, reading: T) {
        self.readings.retain(|(c, _)| *c != collector);
        self.accept(collector, Box::new(reading));
    }

    /// Every reading with its collector, in the order of `units::ALL`.
    pub fn readings(&self) -> impl Iterator<Item = (Collector, &dyn Reading)> {
        self.readings.iter().map(|(c, r)| (*c, &**r))
    }
}

/// How processes are put in groups, compiled.
#[derive(Debug, Clone)]
pub enum Grouping {
    Comm,
    Cgroup,
    Matcher(Matchers),
}

impl Grouping {
    pub(crate) fn from_config(g: &GroupBy) -> Result<Self, String> {
        Ok(match g {
            GroupBy::Comm => Grouping::Comm,
            GroupBy::Cgroup => Grouping::Cgroup,
            GroupBy::Matcher(path) => {
                let text = std::fs::read_to_string(path)
                    .map_err(|e| format!("{}: {e}", path.display()))?;
                Grouping::Matcher(
                    Matchers::parse(&text).map_err(|e| format!("{}: {e}", path.display()))?,
                )
            }
        })
    }
}

/// How many processes whose files were denied a scan names (`ReadStats::denied`): enough
/// to act on, bounded on a host where every process is another user's.
pub(crate) const DENIED_NAMED: usize = 16;

/// What the processes collector did in one scan beyond reading each process.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ReadStats {
    /// Processes whose files this scan was refused (no `CAP_SYS_PTRACE`, or a process the
    /// kernel refuses even so): the lowest [`DENIED_NAMED`] pids, for the diagnosis to
    /// name what it could not see; the counters count them all.
    pub denied: Vec<u32>,
    /// Processes whose `smaps_rollup` this scan read; the others were unchanged.
    pub rollups_read: u64,
    /// Processes left behind because their read outlasted the read timeout.
    pub stalled: u64,
    /// The longest time the files of one process took.
    pub slowest_seconds: f64,
    /// `statm` descriptors kept open between scans.
    pub kept_descriptors: u64,
    /// Processes read by opening their files because no descriptor could be kept.
    pub unkept: u64,
    /// Processes watched for their end (a pidfd each).
    pub watched: u64,
    /// Processes this scan did not read because they rest (quiet and watched).
    pub rested: u64,
    /// Reader threads alive, stuck ones included.
    pub threads: u64,
    /// Scans since start that listed `/proc` (the others reused the last listing: no pid
    /// had been handed out since).
    pub listings: u64,
}

/// CPU time of the calling thread.
fn thread_cpu() -> Duration {
    nix::time::clock_gettime(nix::time::ClockId::CLOCK_THREAD_CPUTIME_ID)
        .map(|t| Duration::new(t.tv_sec() as u64, t.tv_nsec() as u32))
        .unwrap_or_default()
}

/// Counts why a collector's read failed and says whether the collector succeeded. A kernel
/// without the source is not a failure: the collector did its job and found nothing to
/// report (counted as `unsupported`, never alerted on).
fn outcome(errs: &mut ErrorCounts, collector: Collector, read: Result<(), Reason>) -> bool {
    match read {
        Ok(()) => true,
        Err(reason) => {
            count(errs, collector, reason, 1);
            reason == Reason::Unsupported
        }
    }
}

fn count(errs: &mut ErrorCounts, collector: Collector, reason: Reason, n: u64) {
    if n > 0 {
        *errs.entry((collector, reason)).or_insert(0) += n;
    }
}
