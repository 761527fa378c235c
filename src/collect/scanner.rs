//! The scanner: what it owns across scans (the reader threads, the processes' record, the
//! system collectors' readers, the values fixed at boot) and one scan, start to end.

use std::time::{Instant, SystemTime};

use super::processes::Processes;
use super::{
    count, deep, outcome, own, system, CollectorRun, ErrorCounts, Grouping, ReadStats, Sample,
};
use crate::config::{DeepConfig, ReadConfig};
use crate::family::Collector;
use crate::source::{Reason, Source};
use crate::units::Collectors;

/// Reads samples; owns the reusable buffers, the reader threads and the values fixed at
/// boot.
pub struct Scanner {
    collectors: Collectors,
    clk_tck: f64,
    /// The real `btime`, for the exporter's own start time: read by the first scan.
    own_boot: Option<Option<u64>>,
    deep: DeepConfig,
    /// Every process's read, its record for the next scan and the reader threads
    /// (`processes.rs`); the deep tier reads with them (`deep.rs`).
    processes: Processes,
    /// `/proc` hides other users' processes from this exporter (`hidepid`).
    hidden: bool,
    /// The system collectors' readers, the kernel log's cursor and `btime` (`system.rs`).
    system: system::System,
}

impl Scanner {
    pub fn new(
        source: Source,
        collectors: Collectors,
        grouping: Grouping,
        deep: DeepConfig,
        reading: ReadConfig,
    ) -> Self {
        let clk_tck = own::clk_tck();
        let hidden = collectors.enabled(Collector::Processes) && source.hides_processes();
        let limit = crate::source::own::raise_open_files_limit();
        // Setting files are kept open only where the limit leaves room for them beside
        // the server's sockets.
        let source = if limit.is_some_and(|l| l >= 4096) {
            source
        } else {
            source.without_kept_settings()
        };
        Scanner {
            system: system::System::new(source.clone()),
            processes: Processes::new(source, grouping, clk_tck, reading, limit),
            hidden,
            collectors,
            clk_tck,
            own_boot: None,
            deep,
        }
    }

    /// Reads everything the enabled collectors need. Never fails: what could not be read
    /// is counted in `errors` and marked in `collectors`.
    pub fn scan(&mut self) -> Sample {
        let started = Instant::now();
        let mut s = Sample {
            taken_at: Some(SystemTime::now()),
            started: Some(started),
            cpu_tick_seconds: 1.0 / self.clk_tck,
            online_cpus: crate::source::own::online_cpus(),
            ..Sample::default()
        };
        let c = self.collectors;
        // The system files are read while the processes are: a stuck file costs the scan
        // the read timeout once, whichever kind it is.
        let system = self.system.start(c);
        if c.enabled(Collector::Processes) {
            let mut stats = ReadStats::default();
            if self.hidden {
                count(&mut s.errors, Collector::Processes, Reason::Hidden, 1);
            }
            if let Some(list) = self.timed(&mut s, Collector::Processes, |me, errs| {
                me.processes.read(errs, &mut stats)
            }) {
                s.processes = list;
                s.deep = Some(deep::read(
                    &mut self.processes,
                    &self.deep,
                    &mut s.processes,
                    &mut s.errors,
                ));
            }
            stats.threads += self.system.threads() as u64;
            s.reads = Some(stats);
        }
        let timeout = self.processes.reading.timeout;
        self.system.finish(system, started + timeout, &mut s);
        // btime comes with the system files, after the first scan's processes were read.
        if let Some(boot) = s.boot_time_seconds {
            for p in &mut s.processes {
                p.start_time_seconds = Some(crate::parse::stat::start_time_seconds(
                    boot,
                    p.start_ticks,
                    self.clk_tck,
                ));
            }
        }
        let boot = *self.own_boot.get_or_insert_with(own::boot_time);
        s.own = Some(own::read(self.clk_tck, boot));
        s.duration_seconds = started.elapsed().as_secs_f64();
        s
    }

    /// Every collector unit reads what its source holds from before the exporter started,
    /// not only what is new: the kernel log from its oldest record, not its end (for
    /// `explain`, which tells the kills of a host it was not watching).
    pub(crate) fn read_history(&mut self) {
        self.system.read_history();
    }

    /// Runs one collector, recording its success, duration and the reason it failed.
    fn timed<T>(
        &mut self,
        s: &mut Sample,
        name: Collector,
        f: impl FnOnce(&mut Self, &mut ErrorCounts) -> Result<T, Reason>,
    ) -> Option<T> {
        let started = Instant::now();
        let result = f(self, &mut s.errors);
        let success = outcome(
            &mut s.errors,
            name,
            result.as_ref().map(drop).map_err(|&r| r),
        );
        s.collectors.push(CollectorRun {
            name,
            success,
            duration_seconds: started.elapsed().as_secs_f64(),
        });
        result.ok()
    }
}
