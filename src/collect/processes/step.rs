//! Which file of a process a reader is in (`pool::Step`), so that a stuck read is never
//! started again on the same file.

pub const STAT: u8 = 1;
pub const STATM: u8 = 2;
pub const STATUS: u8 = 3;
pub const SMAPS_ROLLUP: u8 = 4;
pub const OOM_SCORE_ADJ: u8 = 5;
pub const OOM_SCORE: u8 = 6;
pub const CGROUP: u8 = 7;
pub const CMDLINE: u8 = 8;
/// The deep tier's smaps, mem and pagemap.
pub const DEEP: u8 = 9;

/// Files whose read takes the process's mmap lock: a process stuck in the kernel
/// holding it blocks them all, and only them (status, stat and the oom files are
/// read from counters).
pub fn takes_mmap_lock(step: u8) -> bool {
    matches!(step, SMAPS_ROLLUP | CMDLINE | DEEP)
}
