//! Which processes rest this scan: a process whose memory and CPU time have not moved for
//! [`QUIET_READS`] reads in a row, and whose end is watched, is not read again until its
//! turn comes (at least every [`REST_AT_MOST`]), unless the host's memory moves.
//!
//! What a still process's memory can do between two reads without the host's showing it
//! is slow: khugepaged collapsing a range into a huge page (at most its `pages_to_scan`
//! per `scan_sleep_millisecs`, 16 MiB per 10 s by default, across the host), page cache
//! evicted under its mappings, another process writing shared memory it maps. So a
//! resting process is read at least once per [`REST_AT_MOST`], which is the default scan
//! interval (with it, nothing rests); and when the host's anonymous, shared and mapped
//! memory moved by more than [`HOST_MOVED_BYTES`] since the last scan, every process is
//! read, so a sleeper that wakes and allocates is seen by the scan it allocated before.
//! Its end is never missed: the watch reports it to the next scan (`source/exits.rs`).

use std::time::Duration;

use super::known::QUIET_READS;
use super::Known;
use crate::parse::meminfo;
use crate::source::{Buffer, Source};

/// A resting process is read at least this often.
const REST_AT_MOST: Duration = Duration::from_secs(10);

/// Host memory (`AnonPages + Shmem + Mapped`) that moved more than this since every
/// process was last read wakes every process. The kernel's per-CPU counter drift is far below it (at most
/// 125 pages per CPU and zone: 3 MiB on a 2-CPU host, 190 MiB only past 128 CPUs, whose
/// hosts move that much anyway).
pub(super) const HOST_MOVED_BYTES: u64 = 32 << 20;

/// Scans between two reads of a resting process: as many as fit in [`REST_AT_MOST`], so 1
/// (nothing rests) for an interval of 10 s or more.
pub(super) fn rest_every(scan_interval: Duration) -> u64 {
    let every = REST_AT_MOST.as_millis() / scan_interval.as_millis().max(1);
    u64::try_from(every).unwrap_or(u64::MAX).max(1)
}

/// Whether `k` rests this scan: quiet, watched and not ended, its CPU time still, and due
/// neither for its read (every `every` scans) nor for its refresh (every `refresh` scans,
/// both staggered by pid).
pub(super) fn rests(k: &Known, scan: u64, every: u64, refresh: u64, ended: &[u32]) -> bool {
    let turn = scan.wrapping_add(u64::from(k.pid));
    every > 1
        && k.watch.is_some()
        && k.quiet >= QUIET_READS
        && !k.cpu_moving
        && turn % every != 0
        && turn % refresh.max(1) != 0
        && ended.binary_search(&k.pid).is_err()
}

/// The host's memory as far as resting goes, from `/proc/meminfo` (kept open): whether it
/// moved by more than [`HOST_MOVED_BYTES`] since the last call that said so (when every
/// process was read), so that movement below the bound in each scan still adds up. A
/// file that cannot be read counts as moved: every process is read. Read here, before the processes, not taken
/// from the `meminfo` unit: that unit reads the file beside the processes, so its figure
/// comes too late for this scan's choice.
#[derive(Debug, Default)]
pub(super) struct Host {
    last: Option<u64>,
    buf: Buffer,
}

impl Host {
    pub(super) fn moved(&mut self, source: &Source) -> bool {
        let path = source.procfs().join("meminfo");
        let now = source
            .read_setting(&path, &mut self.buf)
            .ok()
            .and_then(|t| meminfo::moving_bytes(t).ok());
        let moved = match (self.last, now) {
            (Some(a), Some(b)) => a.abs_diff(b) > HOST_MOVED_BYTES,
            _ => true,
        };
        if moved {
            self.last = now;
        }
        moved
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::Exits;
    use std::sync::Arc;

    fn known(
        pid: u32,
        quiet: u8,
        cpu_moving: bool,
        watch: Option<Arc<crate::source::Watch>>,
    ) -> Known {
        Known {
            pid,
            start_ticks: 1,
            statm: Some([1, 1, 1]),
            statm_fd: None,
            reading: Arc::default(),
            state: 'S',
            cpu_ticks: 0,
            cpu_moving,
            watch,
            quiet,
            deep_read: None,
            unsettled: 0,
            newcomer: false,
            over_budget: 0,
        }
    }

    /// Every condition, one at a time, against a process that rests (pid 7 at scan 0,
    /// every 10 scans, refresh every 60).
    #[test]
    fn a_process_rests_only_when_quiet_watched_and_neither_due_nor_ended() {
        let exits = Exits::new(1).unwrap();
        let w = Arc::new(exits.watch(std::process::id()).unwrap());
        let k = |quiet, moving, watched: bool| known(7, quiet, moving, watched.then(|| w.clone()));
        let rests_k = |k: &Known, scan: u64, ended: &[u32]| rests(k, scan, 10, 60, ended);
        let quiet = k(3, false, true);
        assert!(rests_k(&quiet, 0, &[]));
        assert!(rests_k(&k(255, false, true), 0, &[1, 9]));
        assert!(!rests_k(&k(2, false, true), 0, &[]), "not quiet yet");
        assert!(!rests_k(&k(3, true, true), 0, &[]), "CPU time moving");
        assert!(!rests_k(&k(3, false, false), 0, &[]), "not watched");
        assert!(!rests_k(&quiet, 0, &[7]), "ended");
        assert!(!rests_k(&quiet, 3, &[]), "its turn: (3 + 7) % 10");
        assert!(!rests_k(&quiet, 53, &[]), "its refresh: (53 + 7) % 60");
        assert!(!rests(&quiet, 0, 1, 60, &[]), "nothing rests at 1");
        // Read once per `every` scans, at a pid's own turn.
        let turns: Vec<u64> = (0..100).filter(|&s| !rests_k(&quiet, s, &[])).collect();
        assert_eq!(turns, vec![3, 13, 23, 33, 43, 53, 63, 73, 83, 93]);
    }

    #[test]
    fn host_memory_that_creeps_below_the_bound_each_scan_still_wakes_every_process() {
        let dir = tempfile::tempdir().unwrap();
        let source = Source::new(dir.path(), dir.path());
        let at = |mib: u64| {
            let kib = mib << 10;
            let text = format!("AnonPages: {kib} kB\nShmem: 0 kB\nMapped: 0 kB\n");
            std::fs::write(dir.path().join("meminfo"), text).unwrap();
        };
        let mut host = Host::default();
        at(1000);
        assert!(host.moved(&source), "the first read has nothing to compare");
        // 20 MiB a scan: below the bound each time, past it by the second.
        at(1020);
        assert!(!host.moved(&source));
        at(1040);
        assert!(host.moved(&source), "40 MiB since every process was read");
        at(1060);
        assert!(
            !host.moved(&source),
            "counted again from the last full read"
        );
        // Back and forth around the last full read is no movement.
        at(1020);
        assert!(!host.moved(&source));
        at(1072);
        assert!(!host.moved(&source), "32 MiB exactly is the bound");
        at(1073);
        assert!(host.moved(&source), "33 MiB past the last full read");
        std::fs::remove_file(dir.path().join("meminfo")).unwrap();
        assert!(host.moved(&source), "unreadable counts as moved");
    }

    #[test]
    fn a_resting_process_is_read_at_least_every_ten_seconds() {
        assert_eq!(rest_every(Duration::from_secs(1)), 10);
        assert_eq!(rest_every(Duration::from_secs(3)), 3);
        assert_eq!(rest_every(Duration::from_millis(200)), 50);
        assert_eq!(rest_every(Duration::from_secs(10)), 1);
        assert_eq!(rest_every(Duration::from_secs(60)), 1);
        assert_eq!(rest_every(Duration::ZERO), 10_000);
    }
}
