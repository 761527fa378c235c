//! What the scanner remembers of each process between scans, how a process stands
//! against it (which decides what a scan reads again), and the sample of a process whose
//! memory did not move, made from it.

use std::sync::Arc;
use std::time::Instant;

use super::ReadContext;
use crate::collect::deep::DeepMemory;
use crate::collect::ProcessSample;
use crate::parse::smaps_rollup::SmapsRollup;
use crate::parse::stat::Stat;
use crate::parse::status::Status;
use crate::source::Kept;

/// Everything the scanner remembers of a process for the next scan, in one record keyed
/// by (pid, start ticks): enough to tell whether its memory changed, the values it kept
/// when it did not re-read them, and when the deep tier last read it.
#[derive(Debug, Clone)]
pub(in crate::collect) struct Known {
    pub(in crate::collect) pid: u32,
    pub(in crate::collect) start_ticks: u64,
    /// `statm` size, resident and shared pages: when they are unchanged, so is the memory
    /// that status, smaps_rollup and oom_score report.
    pub(super) statm: Option<[u64; 3]>,
    /// `statm` kept open, re-read with `pread` (a real `/proc` only).
    pub(super) statm_fd: Option<Arc<Kept>>,
    pub(super) status: Status,
    /// Name, state, CPU time and start time when `stat` was last read.
    pub(super) stat: Stat,
    /// CPU time moved between the last two reads of `stat` (or the process is new): it
    /// is read again next scan even if `statm` did not move.
    pub(super) cpu_moving: bool,
    pub(super) oom_score_adj: i64,
    pub(super) oom_score: u64,
    pub(super) rollup: Option<SmapsRollup>,
    pub(super) group: Option<String>,
    /// When the deep tier last read this process's smaps, and its memory then.
    pub(in crate::collect) deep_read: Option<(Instant, DeepMemory)>,
    /// Heap walks in a row that found the heap changing under the read: the process is
    /// read again at the next scan, up to `MAX_WALK_RETRIES` times.
    pub(in crate::collect) walk_retries: u8,
}

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

impl Standing {
    pub(super) fn of(known: Option<&Known>, statm: Option<[u64; 3]>, due: bool) -> Standing {
        match known {
            None => Standing::New,
            Some(k) if statm.is_none() || k.statm != statm => Standing::Moved,
            Some(_) if due => Standing::Due,
            Some(_) => Standing::Unchanged,
        }
    }
}

/// User plus system CPU time in clock ticks.
pub(super) fn cpu_ticks(s: &Stat) -> u64 {
    s.utime_ticks.saturating_add(s.stime_ticks)
}

/// A process whose kept `statm` did not move and that is not due: what the last read
/// found. With `stat` (read again because its CPU time moved at the last read), its CPU
/// time is this scan's; without, there is none, and the signals keep their last verdict on
/// idleness until CPU time is read again.
pub(super) fn still(
    ctx: &ReadContext,
    k: &Known,
    fd: Arc<Kept>,
    stat: Option<Stat>,
) -> (ProcessSample, Known) {
    let mut known = k.clone();
    known.statm_fd = Some(fd);
    let fresh = stat.is_some();
    if let Some(stat) = stat {
        known.cpu_moving = cpu_ticks(&stat) != cpu_ticks(&k.stat);
        known.stat = stat;
    }
    let sample = ProcessSample {
        pid: k.pid,
        start_ticks: k.start_ticks,
        // Set once the scan has btime (`Scanner::scan`).
        start_time_seconds: None,
        cpu_seconds: fresh.then(|| known.stat.cpu_seconds(ctx.clk_tck)),
        comm: known.stat.comm.clone(),
        state: known.stat.state,
        status: k.status.clone(),
        rollup: k.rollup,
        oom_score: Some(k.oom_score),
        oom_score_adj: Some(k.oom_score_adj),
        group: k.group.clone(),
        smaps: None,
        heap: None,
    };
    (sample, known)
}
