//! Which pids a scan reads: the last scan's while no pid was handed out since; those plus
//! the few new ones, found by asking the kernel about each pid handed out since, when only
//! a few were; else a new listing of `/proc`.
//!
//! Listing `/proc` makes the kernel walk every process and fill a dentry for each: about
//! 1 µs a process, a fifth of a scan of 5,000 still processes. On a real host some
//! process starts between almost any two scans, so the listing is skipped in two ways:
//! - `/proc/loadavg` names the last pid handed out in the exporter's pid namespace (every
//!   new process, in it or in a namespace below it, takes one): while it stays put, no
//!   process can have appeared;
//! - when it moved forward by at most [`PROBE_MAX`], and the host made at most as many
//!   tasks since (`/proc/stat`'s `processes`, which counts every fork and thread of every
//!   namespace, so the pids cannot have gone round `pid_max` in between), the new
//!   processes are among the pids in between: each is asked with `pidfd_open`, which
//!   succeeds only for a process (a thread's id fails), without a path walk.
//!
//! Every [`RELIST_EVERY`] scans `/proc` is listed anyway.

use crate::parse::loadavg;
use crate::source::{Buffer, Exits, Reason, Source};

/// A listing of `/proc` is reused by at most this many scans in a row.
const RELIST_EVERY: u64 = 60;

/// Pids handed out since the last scan that are asked about one by one; more make a new
/// listing.
const PROBE_MAX: u64 = 256;

/// Below this `pid_max` the pids could go round within [`PROBE_MAX`] new tasks.
const PID_MAX_PROBED: u64 = 4096;

/// The pids the last scan read, and the last pid handed out (`/proc/loadavg`) and tasks
/// made (`/proc/stat`) when they were listed or last completed.
struct Listing {
    last_pid: u64,
    forks: Option<u64>,
    pids: Vec<u32>,
    /// Entries that looked like pids but were not, counted again by each scan.
    odd: u64,
    /// Scans that reused it.
    age: u64,
}

/// The pids a scan reads, how many odd entries the listing had, and which pids may name
/// a process the last scan did not see.
pub(super) struct Pids {
    pub(super) pids: Vec<u32>,
    pub(super) odd: u64,
    pub(super) fresh: Fresh,
}

/// Which pids may have been handed out to a new process since the last scan.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Fresh {
    /// Any: `/proc` was listed.
    All,
    /// None: no pid was handed out.
    None,
    /// Those after the first and up to the second.
    Between(u64, u64),
}

impl Fresh {
    pub(super) fn contains(self, pid: u32) -> bool {
        match self {
            Fresh::All => true,
            Fresh::None => false,
            Fresh::Between(a, b) => (a + 1..=b).contains(&u64::from(pid)),
        }
    }
}

/// Lists the pids, and keeps the listing for the next scans.
pub(super) struct Lister {
    /// `/proc/loadavg` tells when no process can have appeared: `--path.procfs` is a proc
    /// filesystem of the exporter's own pid namespace.
    marks: bool,
    listing: Option<Listing>,
    /// Scans that listed `/proc`.
    pub(super) listings: u64,
    buf: Buffer,
}

impl Lister {
    pub(super) fn new(marks: bool) -> Lister {
        Lister {
            marks,
            listing: None,
            listings: 0,
            buf: Buffer::default(),
        }
    }

    /// The pids to read. A process that ended meanwhile is found so by its read, as one
    /// that ends between a listing and its read is. `exits` is there when the kernel has
    /// pidfds (the new pids are asked with one).
    pub(super) fn list(&mut self, source: &Source, exits: bool) -> Result<Pids, Reason> {
        let last_pid = self
            .marks
            .then(|| {
                source
                    .parse_proc("loadavg", &mut self.buf, loadavg::parse)
                    .ok()
            })
            .flatten();
        let forks = last_pid.and_then(|_| forks(source, &mut self.buf));
        if let (Some(last_pid), Some(l)) = (last_pid, &mut self.listing) {
            if l.age < RELIST_EVERY && l.last_pid == last_pid {
                l.age += 1;
                l.forks = forks;
                let pids = std::mem::take(&mut l.pids);
                return Ok(Pids {
                    pids,
                    odd: l.odd,
                    fresh: Fresh::None,
                });
            }
            let few = last_pid > l.last_pid
                && last_pid - l.last_pid <= PROBE_MAX
                && forks
                    .zip(l.forks)
                    .is_some_and(|(b, a)| b.saturating_sub(a) <= PROBE_MAX)
                && pid_max(source, &mut self.buf).is_some_and(|m| m >= PID_MAX_PROBED);
            if l.age < RELIST_EVERY && few && exits {
                if let Some(new) = processes_between(l.last_pid, last_pid) {
                    let fresh = Fresh::Between(l.last_pid, last_pid);
                    let mut pids = std::mem::take(&mut l.pids);
                    pids.extend(new);
                    pids.sort_unstable();
                    pids.dedup();
                    (l.age, l.last_pid, l.forks) = (l.age + 1, last_pid, forks);
                    return Ok(Pids {
                        pids,
                        odd: l.odd,
                        fresh,
                    });
                }
            }
        }
        // The last pid is read first: a task created while `/proc` is listed moves it for
        // the next scan.
        let (pids, odd) = source.pids().map_err(|e| e.system_reason())?;
        self.listings += 1;
        self.listing = last_pid.map(|last_pid| Listing {
            last_pid,
            forks,
            pids: Vec::new(),
            odd,
            age: 0,
        });
        Ok(Pids {
            pids,
            odd,
            fresh: Fresh::All,
        })
    }

    /// What the next scan reads if no process is created meanwhile: the pids this scan
    /// read, less those that ended, and those left behind; nothing when some were not
    /// read at all.
    pub(super) fn remember(&mut self, mut listed: Vec<u32>, kept: &[u32], unread: usize) {
        match &mut self.listing {
            Some(l) if unread == 0 => {
                listed.extend(kept);
                listed.sort_unstable();
                listed.dedup();
                l.pids = listed;
            }
            _ => self.listing = None,
        }
    }
}

/// The processes among the pids after `a` up to `b`: `None` when the kernel could not
/// say for one of them.
fn processes_between(a: u64, b: u64) -> Option<Vec<u32>> {
    let mut out = Vec::new();
    for pid in a + 1..=b {
        let pid = u32::try_from(pid).ok()?;
        if Exits::is_process(pid)? {
            out.push(pid);
        }
    }
    Some(out)
}

/// Tasks the host made since boot (`/proc/stat`'s `processes`).
fn forks(source: &Source, buf: &mut Buffer) -> Option<u64> {
    let path = source.procfs().join("stat");
    loadavg::forks(source.read_setting(&path, buf).ok()?).ok()
}

/// `kernel.pid_max` as the exporter's pid namespace sees it.
fn pid_max(source: &Source, buf: &mut Buffer) -> Option<u64> {
    let path = source.procfs().join("sys/kernel/pid_max");
    crate::parse::parse_u64(source.read_setting(&path, buf).ok()?).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fresh_pids_are_those_handed_out_since() {
        assert!(Fresh::All.contains(1));
        assert!(!Fresh::None.contains(1));
        let f = Fresh::Between(100, 103);
        let fresh: Vec<u32> = (98..106).filter(|&p| f.contains(p)).collect();
        assert_eq!(fresh, vec![101, 102, 103]);
    }

    /// The kernel's word: this test's own process is one, a thread of it is not, and a
    /// pid never handed out is not.
    #[test]
    fn a_pid_is_asked_whether_it_names_a_process() {
        let me = std::process::id();
        let (tx, rx) = std::sync::mpsc::channel();
        let (stop_tx, stop_rx) = std::sync::mpsc::channel::<()>();
        let t = std::thread::spawn(move || {
            tx.send(nix::unistd::gettid().as_raw() as u32).unwrap();
            let _ = stop_rx.recv();
        });
        let tid = rx.recv().unwrap();
        assert_eq!(Exits::is_process(me), Some(true));
        assert_eq!(Exits::is_process(tid), Some(false));
        assert_eq!(
            processes_between(u64::from(me) - 1, u64::from(me)),
            Some(vec![me])
        );
        assert_eq!(Exits::is_process(u32::MAX >> 1), Some(false));
        stop_tx.send(()).unwrap();
        t.join().unwrap();
    }
}
