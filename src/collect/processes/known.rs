//! What the scanner remembers of each process between scans, how a process stands
//! against it (which decides what a scan reads again), and the sample of a process whose
//! memory did not move, made from it.

use std::sync::Arc;
use std::time::Instant;

use crate::collect::{ProcessFiles, ProcessSample};
use crate::parse::stat::Stat;
use crate::source::{Kept, Watch};

/// Everything the scanner remembers of a process for the next scan, in one record keyed
/// by (pid, start ticks): enough to tell whether its memory changed, what its files said
/// (shared with the samples while it does not change), and when the deep tier last read
/// it.
#[derive(Debug, Clone)]
pub(in crate::collect) struct Known {
    /// Also in `reading`; kept here so the scan's binary search by pid and the start-time
    /// check touch only this list, not every process's reading.
    pub(in crate::collect) pid: u32,
    pub(in crate::collect) start_ticks: u64,
    /// `statm` size, resident and shared pages: when they are unchanged, so is the memory
    /// that status, smaps_rollup and oom_score report.
    pub(super) statm: Option<[u64; 3]>,
    /// `statm` kept open, re-read with `pread` (a real `/proc` only).
    pub(super) statm_fd: Option<Arc<Kept>>,
    /// What the files said at the last read of each.
    pub(super) reading: Arc<ProcessFiles>,
    /// State, and user plus system CPU time in ticks, when `stat` was last read.
    pub(super) state: char,
    pub(super) cpu_ticks: u64,
    /// CPU time moved between the last two reads of `stat` (or the process is new): it
    /// is read again next scan even if `statm` did not move.
    pub(super) cpu_moving: bool,
    /// Its end is watched (a pidfd in the scanner's epoll set): while no end is reported,
    /// its pid is still this process, whatever pids were handed out.
    pub(super) watch: Option<Arc<Watch>>,
    /// Reads in a row that found its `statm` and CPU time unchanged (saturating): from
    /// [`QUIET_READS`] on, a watched process rests between reads (`rest.rs`).
    pub(super) quiet: u8,
    /// When the deep tier last read this process's smaps, and its memory then (boxed:
    /// only candidates have one).
    pub(in crate::collect) deep_read: Option<Box<(Instant, DeepMemory)>>,
    /// Deep reads in a row that gave no settled figure: the heap changed under the walk,
    /// or a newcomer's memory moved since its deep read before. The process is read again
    /// on the deep tier's retry schedule (`deep::retry_wait`) until one does.
    pub(in crate::collect) unsettled: u8,
    /// Appeared after the scanner's first scan and not yet settled: its first deep reads
    /// may land while it still allocates, so it is read again until its memory holds
    /// still between two of them. The processes of the first scan have run for a while.
    pub(in crate::collect) newcomer: bool,
    /// Deep reads in a row that ran out of their budget or time: the process waits the
    /// deep interval, doubled for each, before the next (`deep::backoff_wait`).
    pub(in crate::collect) over_budget: u8,
}

/// What a deep read of a process depends on: its address space and resident, anonymous
/// and swapped memory, as the deep tier last read them (`deep.rs` compares them).
pub(in crate::collect) type DeepMemory = [Option<u64>; 4];

/// How a process stands against what the last scan knew of it: what decides which of its
/// files this scan reads again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Standing {
    /// Not seen before, or its pid now belongs to another process (another start time):
    /// every file.
    New,
    /// Its `statm` moved (or could not be read): `status`, `smaps_rollup` and
    /// `oom_score` again.
    Moved,
    /// Its `statm` did not move, but it is due for the periodic refresh (every
    /// `rollup_refresh` scans, staggered by pid): the same as moved.
    Due,
    /// Its `statm` did not move and it is not due: what was known stands.
    Unchanged,
}

/// Reads in a row that found a process unchanged before it may rest between reads.
pub(super) const QUIET_READS: u8 = 3;

/// User plus system CPU time in clock ticks.
pub(super) fn cpu_ticks(s: &Stat) -> u64 {
    s.utime_ticks.saturating_add(s.stime_ticks)
}

/// A process whose `statm` (kept, or read by path while its end is watched) did not move
/// and that is not due, or that rests this scan: what the last read found, shared. With
/// `stat` (read again because its CPU time moved at the last read), its CPU time is this
/// scan's; without, there is none, and the signals keep their last verdict on idleness
/// until CPU time is read again.
pub(super) fn still(
    clk_tck: f64,
    k: &Known,
    (fd, watch): (Option<Arc<Kept>>, Option<Arc<Watch>>),
    stat: Option<Stat>,
) -> (ProcessSample, Known) {
    let mut known = Known {
        statm_fd: fd,
        watch,
        reading: Arc::clone(&k.reading),
        deep_read: k.deep_read.clone(),
        quiet: k.quiet.saturating_add(1),
        ..*k
    };
    let mut cpu_seconds = None;
    if let Some(stat) = stat {
        known.cpu_moving = cpu_ticks(&stat) != k.cpu_ticks;
        if known.cpu_moving {
            known.quiet = 0;
        }
        known.cpu_ticks = cpu_ticks(&stat);
        known.state = stat.state;
        cpu_seconds = Some(stat.cpu_seconds(clk_tck));
    }
    let sample = ProcessSample::new(Arc::clone(&known.reading), known.state, cpu_seconds);
    (sample, known)
}
