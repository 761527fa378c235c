//! One process as a scan gives it: what its files last said ([`ProcessFiles`], shared between
//! the scanner's record and every sample while the process's memory does not move) and
//! what this scan alone found ([`ProcessSample`]).

use std::ops::{Deref, DerefMut};
use std::sync::Arc;

use crate::heap::HeapReading;
use crate::parse::{smaps::SmapsSummary, smaps_rollup::SmapsRollup, status::Status};

/// What the files of one process said when they were last read. A scan that finds the
/// process's memory still shares the last reading instead of copying it, so a host of
/// sleeping processes costs a pointer each, not a copy of each one's figures.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ProcessFiles {
    pub pid: u32,
    pub start_ticks: u64,
    pub comm: String,
    pub status: Status,
    /// `None` when `smaps_rollup` could not be read (permission) or is empty.
    pub rollup: Option<SmapsRollup>,
    pub oom_score: Option<u64>,
    pub oom_score_adj: Option<i64>,
    /// The group the process belongs to; `None` when a matcher file matched nothing.
    pub group: Option<String>,
}

/// One process in one scan, keyed by `(pid, start_ticks)`: its [`ProcessFiles`] (fields of
/// which read through it) and what only this scan knows.
#[derive(Debug, Clone, PartialEq)]
pub struct ProcessSample {
    pub reading: Arc<ProcessFiles>,
    pub state: char,
    /// User plus system CPU time, seconds; `None` when this scan did not read `stat`
    /// (its kept `statm` had not moved).
    pub cpu_seconds: Option<f64>,
    /// Unix time the process started (needs `btime` from `/proc/stat`).
    pub start_time_seconds: Option<f64>,
    /// This scan's deep read of `/proc/PID/smaps`, when the deep tier covered it.
    pub smaps: Option<Box<SmapsSummary>>,
    /// This scan's allocator identity and heap walk, with the deep read.
    pub heap: Option<Arc<HeapReading>>,
}

impl ProcessSample {
    /// A sample of what was read, with nothing of the deep tier yet.
    pub fn new(reading: Arc<ProcessFiles>, state: char, cpu_seconds: Option<f64>) -> Self {
        ProcessSample {
            reading,
            state,
            cpu_seconds,
            start_time_seconds: None,
            smaps: None,
            heap: None,
        }
    }

    /// Identity across scans: a reused pid has another start time.
    pub fn key(&self) -> (u32, u64) {
        (self.reading.pid, self.reading.start_ticks)
    }
}

impl Deref for ProcessSample {
    type Target = ProcessFiles;
    fn deref(&self) -> &ProcessFiles {
        &self.reading
    }
}

/// Changing a figure of one sample (tests, benchmarks) copies the reading it shares.
impl DerefMut for ProcessSample {
    fn deref_mut(&mut self) -> &mut ProcessFiles {
        Arc::make_mut(&mut self.reading)
    }
}
