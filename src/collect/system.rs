//! The system collectors: meminfo, vmstat, pressure, sysctl, THP and khugepaged settings
//! and counters, memory cgroups, and `btime`. Each is one item of a batch on a pool of
//! its own, read while the processes are: a file that never answers (a FIFO, a hung
//! filesystem) costs a scan the read timeout once, and the collector reading it is then
//! left out, reported as `timeout`, until its reader comes back; it is never started
//! again on the stuck file, so no thread leaks.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::pool::Pool;
use super::{count, outcome, pool, CollectorRun, ErrorCounts, Sample, Sysctl, Thp};
use crate::family::Collector;
use crate::parse::{meminfo::Meminfo, memory_stat::MemoryStat, pressure::Pressure, vmstat::Vmstat};
use crate::source::{Buffer, Buffers, Reason, Source};
use crate::units::Collectors;
use crate::units::{self, Collect, Output, Reader};

/// One system collector's read, as a pool item (pool items are never 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Job {
    Meminfo,
    Vmstat,
    Sysctl,
    Thp,
    Pressure,
    Cgroup,
    /// `btime` from `/proc/stat`, until it was read once.
    BootTime,
    /// A collector unit, by its place in `units::ALL`.
    Unit(usize),
}

/// Pool items of the units start here; the built-in jobs are 1 to 7.
const FIRST_UNIT: u32 = 100;

impl Job {
    pub(super) const ALL: [Job; 7] = [
        Job::Meminfo,
        Job::Vmstat,
        Job::Sysctl,
        Job::Thp,
        Job::Pressure,
        Job::Cgroup,
        Job::BootTime,
    ];

    /// Its pool item.
    fn item(self) -> u32 {
        match self {
            Job::Unit(i) => FIRST_UNIT + i as u32,
            job => Job::ALL
                .iter()
                .position(|&j| j == job)
                .map_or(0, |i| i as u32 + 1),
        }
    }

    fn from_item(item: u32) -> Option<Job> {
        match item.checked_sub(FIRST_UNIT) {
            Some(i) => units::ALL.get(i as usize).map(|_| Job::Unit(i as usize)),
            None => Job::ALL.get((item as usize).checked_sub(1)?).copied(),
        }
    }

    /// The collector a failure of this read is counted against.
    pub(super) fn collector(self) -> Collector {
        match self {
            Job::Meminfo => Collector::Meminfo,
            Job::Vmstat => Collector::Vmstat,
            Job::Sysctl => Collector::Sysctl,
            Job::Thp => Collector::Thp,
            Job::Pressure => Collector::Pressure,
            Job::Cgroup => Collector::Cgroup,
            Job::BootTime => Collector::Processes,
            Job::Unit(i) => Collector::Unit(units::ALL[i].name),
        }
    }
}

/// What one system read produced.
pub(super) enum Read {
    Meminfo(Result<Meminfo, Reason>),
    Vmstat(Result<Vmstat, Reason>),
    Sysctl(Result<Sysctl, Reason>),
    Thp(Result<Thp, Reason>),
    Pressure(Result<Pressure, Reason>),
    Cgroup(Result<Vec<(String, MemoryStat)>, Reason>),
    BootTime(Option<f64>),
    Unit(Result<Output, Reason>),
}

/// A system read's result with the problems it counted and how long it took.
pub(super) struct Done {
    pub(super) read: Read,
    pub(super) errors: ErrorCounts,
    pub(super) seconds: f64,
}

/// The units' readers, in the order of `units::ALL`, each started once and kept; a
/// reader runs on one thread at a time (a job still stuck is not started again).
type Units = Arc<Vec<Mutex<Box<dyn Collect>>>>;

/// Runs one job on a reader thread.
pub(super) fn run(source: &Source, buf: &mut Buffer, job: Job, units: &Units) -> Done {
    let started = Instant::now();
    let mut errors = ErrorCounts::new();
    let mut f = Files { source, buf };
    let errs = &mut errors;
    let read = match job {
        Job::Meminfo => Read::Meminfo(
            f.source
                .parse_proc("meminfo", f.buf, Meminfo::parse)
                .inspect(|m| count(errs, job.collector(), Reason::Malformed, m.rejected as u64)),
        ),
        Job::Vmstat => Read::Vmstat(
            f.source
                .parse_proc("vmstat", f.buf, Vmstat::parse)
                .inspect(|v| count(errs, job.collector(), Reason::Malformed, v.rejected as u64)),
        ),
        Job::Sysctl => Read::Sysctl(f.read_sysctl(errs)),
        Job::Thp => Read::Thp(f.read_thp(errs)),
        Job::Pressure => Read::Pressure(f.source.parse_proc(
            "pressure/memory",
            f.buf,
            Pressure::parse,
        )),
        Job::Cgroup => Read::Cgroup(f.read_cgroups(errs)),
        Job::BootTime => Read::BootTime(
            f.source
                .read_proc("stat", f.buf)
                .ok()
                .and_then(crate::parse::stat::boot_time)
                .map(|v| v as f64),
        ),
        Job::Unit(i) => {
            let mut r = Reader {
                source: f.source,
                buf: f.buf,
                malformed: 0,
            };
            // A reader that panicked mid-read is used again: a unit keeps its state whole
            // between statements (the kernel log's cursor moves after a record is taken).
            let mut unit = units[i].lock().unwrap_or_else(|e| e.into_inner());
            let read = unit.read(&mut r);
            count(errs, job.collector(), Reason::Malformed, r.malformed);
            Read::Unit(read)
        }
    };
    Done {
        read,
        errors,
        seconds: started.elapsed().as_secs_f64(),
    }
}

/// The work of the system pool: item `n` is `Job` number `n`.
pub(super) fn work(source: Source, units: Units) -> pool::Work<Option<Done>> {
    Arc::new(move |bufs: &mut Buffers, _: &pool::Step, item, _| {
        Job::from_item(item).map(|job| run(&source, &mut bufs.main, job, &units))
    })
}

/// The system collectors' readers and what they keep between scans.
pub(super) struct System {
    /// One reader, with another started for each file that never answers (a stuck job is
    /// not started again), so any number of them cost a scan the timeout once.
    pool: Pool,
    work: pool::Work<Option<Done>>,
    /// The units' readers, with what they keep between scans.
    units: Units,
    /// `btime`, once read.
    pub(super) boot_time_seconds: Option<f64>,
}

impl System {
    pub(super) fn new(source: Source) -> System {
        let readers: Units = Arc::new(units::ALL.iter().map(|u| Mutex::new((u.start)())).collect());
        let jobs = Job::ALL.len() + units::ALL.len();
        System {
            pool: Pool::new(1, 2 * jobs),
            work: work(source, Arc::clone(&readers)),
            units: readers,
            boot_time_seconds: None,
        }
    }

    /// Reader threads alive, stuck ones included.
    pub(super) fn threads(&self) -> usize {
        self.pool.threads()
    }

    /// Every unit reads what its source holds from before the exporter started.
    pub(super) fn read_history(&self) {
        for unit in self.units.iter() {
            unit.lock()
                .unwrap_or_else(|e| e.into_inner())
                .read_history();
        }
    }

    /// Starts reading the enabled system collectors' files on the system pool, all at
    /// once, each job on its own reader. A job whose reader is still stuck from an earlier
    /// scan is not started again.
    pub(super) fn start(&mut self, c: Collectors) -> SystemRun {
        let mut jobs: Vec<Job> = [
            Job::Meminfo,
            Job::Vmstat,
            Job::Sysctl,
            Job::Thp,
            Job::Pressure,
        ]
        .into_iter()
        .filter(|j| c.enabled(j.collector()))
        .collect();
        if c.enabled(Collector::Processes) && self.boot_time_seconds.is_none() {
            jobs.push(Job::BootTime);
        }
        if c.enabled(Collector::Cgroup) {
            jobs.push(Job::Cgroup);
        }
        jobs.extend(
            (0..units::ALL.len())
                .map(Job::Unit)
                .filter(|j| c.enabled(j.collector())),
        );
        let stuck = self.pool.stuck_items();
        let run: Vec<u32> = jobs
            .iter()
            .map(|j| j.item())
            .filter(|j| !stuck.contains(j))
            .collect();
        let running = self.pool.submit(run.clone(), &self.work);
        SystemRun { jobs, run, running }
    }

    /// Waits for the system reads until `deadline` and records them: a job that is not
    /// back by then (or was not started, its reader still stuck) fails with `timeout`.
    /// Collectors come out in their order (`Collector::all`), whichever finished first.
    pub(super) fn finish(&mut self, started: SystemRun, deadline: Instant, s: &mut Sample) {
        // A reader stuck on one file hands the files after it to another within 20 ms.
        let nudge = Duration::from_millis(20);
        let mut results = self
            .pool
            .wait(started.running, &self.work, nudge, deadline)
            .results;
        for job in started.jobs {
            let done = started
                .run
                .iter()
                .position(|&j| j == job.item())
                .and_then(|i| results[i].take())
                .flatten();
            match job {
                Job::BootTime => {
                    if let Some(Read::BootTime(Some(boot))) = done.map(|d| d.read) {
                        self.boot_time_seconds = Some(boot);
                    }
                }
                _ => record(s, job, done),
            }
        }
        s.collectors.sort_by_key(|c| c.name.position());
        s.boot_time_seconds = self.boot_time_seconds;
    }
}

/// The system reads of a scan, under way.
pub(super) struct SystemRun {
    jobs: Vec<Job>,
    /// The jobs started, in the batch's order.
    run: Vec<u32>,
    running: pool::Running<Option<Done>>,
}

/// Records a system collector's read: its value, success and duration; a read that did
/// not come back within the timeout (`None`) as a failure with reason `timeout`.
pub(super) fn record(s: &mut Sample, job: Job, done: Option<Done>) {
    let name = job.collector();
    let (ok, seconds) = match done {
        None => {
            count(&mut s.errors, name, Reason::Timeout, 1);
            (false, 0.0)
        }
        Some(done) => {
            for (&k, &n) in &done.errors {
                *s.errors.entry(k).or_insert(0) += n;
            }
            let ok = match done.read {
                Read::Meminfo(r) => r.map(|v| s.host.meminfo = Some(v)),
                Read::Vmstat(r) => r.map(|v| s.host.vmstat = Some(v)),
                Read::Sysctl(r) => r.map(|v| s.host.sysctl = Some(v)),
                Read::Thp(r) => r.map(|v| s.host.thp = Some(v)),
                Read::Pressure(r) => r.map(|v| s.host.pressure = Some(v)),
                Read::Cgroup(r) => r.map(|v| s.host.cgroups = Some(v)),
                Read::Unit(r) => r.map(|output| match output {
                    Output::Families(v) => s.host.units.push((name, v)),
                    Output::OomKills(v) => s.oom_kills = Some(v),
                }),
                Read::BootTime(_) => Ok(()),
            };
            (outcome(&mut s.errors, name, ok), done.seconds)
        }
    };
    s.collectors.push(CollectorRun {
        name,
        success: ok,
        duration_seconds: seconds,
    });
}

mod files;
use files::Files;
