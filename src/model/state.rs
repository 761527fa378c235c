//! What the model remembers between scans. The daemon owns one [`State`] and threads it
//! through the model's `derive`; a published `Snapshot` never carries
//! it, so what scrapes read and what the next scan needs are apart.

use std::collections::HashMap;

use crate::collect::ErrorCounts;
use crate::heap::ReadCounts;
use crate::model::kills::Kills;
use crate::model::signals::ProcState;
use crate::parse::pressure::Pressure;

#[derive(Debug, Clone, Default)]
pub struct State {
    /// Scans derived since start.
    pub scans: u64,
    /// When the latest scan started (Unix seconds), exported.
    pub last_scan_unix_seconds: Option<f64>,
    /// When the latest scan started on the monotonic clock: the next one's elapsed time.
    pub last_scan_started: Option<std::time::Instant>,
    /// Running totals since start.
    pub errors: ErrorCounts,
    pub deep_cpu_seconds_total: f64,
    /// Each heap reader's reads, by outcome.
    pub reads_total: ReadCounts,
    pub heap_walk_cpu_seconds_total: f64,
    /// The latest PSI totals, for the next interval's stall ratios.
    pub pressure: Option<Pressure>,
    /// The latest `oom_kill` count of /proc/vmstat, and when it was first seen rising.
    pub oom_kills: Option<u64>,
    pub last_oom_kill_unix_seconds: Option<f64>,
    /// Each live process by (pid, start ticks); an exited process is dropped by the next
    /// derive.
    pub processes: HashMap<(u32, u64), ProcState>,
    /// OOM kills from the kernel log since start, and the latest few.
    pub kills: Kills,
}
