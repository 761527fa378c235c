//! What a reader thread is given for one scan's processes, and what it returns for each.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use super::Known;
use crate::collect::{Grouping, ProcessSample};
use crate::source::{Descriptors, Exits, Reason, Source};

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
    /// The pids that may have been handed out to a process the previous scan did not see;
    /// any other it saw is still the same process, or gone.
    pub(super) fresh: super::listing::Fresh,
    /// The budget of kept descriptors (a real `/proc`, `rollup_refresh` above 1).
    pub(super) descriptors: Option<Arc<Descriptors>>,
    /// The set that watches processes for their end (with the kept descriptors, on a
    /// `/proc` of the exporter's own PID namespace).
    pub(super) exits: Option<Arc<Exits>>,
    /// The watched processes that had ended when the scan began, by pid.
    pub(super) ended: Vec<u32>,
    /// Pids a reader from an earlier scan is still stuck on in a file that takes the mmap
    /// lock: their smaps_rollup and cmdline are not touched again until it comes back.
    pub(super) stuck: Vec<u32>,
    /// The slots the reads that take a process's mmap lock hold while they run.
    pub(super) locked: Arc<LockSlots>,
    /// No read that takes a process's mmap lock starts after this (one read timeout into
    /// the scan): reads each answered just under the stall limit cannot stretch a scan.
    pub(super) lock_until: std::time::Instant,
}

impl ReadContext {
    /// A lock slot, while the scan's time for such reads lasts and one is free.
    pub(super) fn lock_slot(&self) -> Option<LockSlot<'_>> {
        if std::time::Instant::now() >= self.lock_until {
            return None;
        }
        self.locked.enter()
    }
}

/// The reads that take a process's mmap lock (`smaps_rollup`, `cmdline`) each hold one of
/// [`LOCK_SLOTS`] slots while they run. A process that holds its own lock for good (a
/// thread of it reading its own page of a FUSE file that never answers, another queued to
/// map) keeps the reader that met it, and that reader's slot, until it lets go: so at
/// most `LOCK_SLOTS` readers are ever stuck there. With every slot held (or the scan's
/// time for such reads spent) those reads are skipped, their figures kept from the last
/// read, and every other file of every process is still read on the readers left.
#[derive(Debug, Default)]
pub(super) struct LockSlots {
    held: AtomicUsize,
}

/// Readers that may be inside a read that takes a process's mmap lock at once.
pub(super) const LOCK_SLOTS: usize = 4;

impl LockSlots {
    /// A slot, held until the guard is dropped; `None` when all are held.
    pub(super) fn enter(&self) -> Option<LockSlot<'_>> {
        self.held
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < LOCK_SLOTS).then_some(n + 1)
            })
            .ok()
            .map(|_| LockSlot(self))
    }
}

/// A held slot of [`LockSlots`].
pub(super) struct LockSlot<'a>(&'a LockSlots);

impl Drop for LockSlot<'_> {
    fn drop(&mut self) {
        self.0.held.fetch_sub(1, Ordering::AcqRel);
    }
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
    /// Reads that take the mmap lock skipped: every slot was held.
    pub(super) lock_skipped: u64,
    /// Its `statm` could not be kept open (the budget or the open-files limit is spent).
    pub(super) unkept: bool,
    pub(super) seconds: f64,
}

#[cfg(test)]
mod tests {
    use super::{LockSlots, LOCK_SLOTS};

    /// A slot is held while its guard lives; with all held none is given, and a guard
    /// never dropped (a reader stuck for good) keeps its slot.
    #[test]
    fn lock_slots_are_bounded_and_given_back_when_a_read_ends() {
        let slots = LockSlots::default();
        let held: Vec<_> = (0..LOCK_SLOTS).map(|_| slots.enter().unwrap()).collect();
        assert!(slots.enter().is_none());
        let mut held = held.into_iter();
        drop(held.next());
        let again = slots.enter();
        assert!(again.is_some());
        assert!(slots.enter().is_none());
        std::mem::forget(again);
        drop(held);
        let n = std::iter::from_fn(|| slots.enter().map(std::mem::forget)).count();
        assert_eq!(n, LOCK_SLOTS - 1);
    }
}
