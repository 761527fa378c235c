//! What a reader thread is given for one scan's processes, and what it returns for each.

use std::sync::Arc;

use super::Known;
use crate::collect::{Grouping, ProcessSample};
use crate::source::{Descriptors, Reason, Source};

/// Everything a reader thread needs for one scan.
pub(super) struct ReadContext {
    pub(super) source: Source,
    pub(super) grouping: Arc<Grouping>,
    pub(super) clk_tck: f64,
    pub(super) rollup_refresh: u64,
    pub(super) scan: u64,
    /// The previous scan's processes, by pid.
    pub(super) known: Arc<Vec<Known>>,
    /// The previous scan's processes without memory (kernel threads, zombies) and their
    /// start ticks, by pid.
    pub(super) memoryless: Arc<Vec<(u32, u64)>>,
    /// This scan reads the pids the previous one read and no pid was handed out since:
    /// a pid it saw is still the same process, or gone.
    pub(super) same_pids: bool,
    /// The budget of kept descriptors (a real `/proc`, `rollup_refresh` above 1).
    pub(super) descriptors: Option<Arc<Descriptors>>,
    /// Pids a reader from an earlier scan is still stuck on in a file that takes the mmap
    /// lock: their smaps_rollup and cmdline are not touched again until it comes back.
    pub(super) stuck: Vec<u32>,
}

/// One process as a reader thread saw it.
pub(super) struct ProcessRead {
    pub(super) pid: u32,
    /// `Ok(None)`: a kernel thread or a zombie.
    pub(super) outcome: Result<Option<(ProcessSample, Known)>, Reason>,
    /// Its start ticks, when it is a process without memory (a kernel thread, a zombie).
    pub(super) memoryless: Option<u64>,
    pub(super) malformed: u64,
    /// Why smaps_rollup could not be read while the rest could.
    pub(super) rollup_error: Option<Reason>,
    pub(super) rollup_read: bool,
    /// Its `statm` could not be kept open (the budget or the open-files limit is spent).
    pub(super) unkept: bool,
    pub(super) seconds: f64,
}
