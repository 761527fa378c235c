//! Processes watched for their end: a pidfd each (`pidfd_open`, Linux 5.3), all in one
//! epoll set, so a scan learns which watched processes ended, however many it did not
//! read, from one `epoll_wait` that returns only those. A pidfd holds about 1 KiB of kernel
//! memory (its file, its epoll entry and, from Linux 6.9, its share of an inode), a
//! quarter of what a kept `statm` holds, and pins no pid number: a pid is free for reuse
//! once its process is reaped, and the pidfd then still reports that process's end.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::Arc;

use super::Descriptors;

/// The epoll set of the watched processes' pidfds.
#[derive(Debug)]
pub struct Exits {
    epoll: OwnedFd,
    budget: Arc<Descriptors>,
}

/// One watched process: closing its pidfd takes it out of the set and gives its place in
/// the budget back.
#[derive(Debug)]
pub struct Watch {
    _fd: OwnedFd,
    budget: Arc<Descriptors>,
}

impl Drop for Watch {
    fn drop(&mut self) {
        self.budget.release();
    }
}

impl Exits {
    /// An empty set watching at most `budget` processes; `None` when the kernel has no
    /// epoll (or the open-files limit is spent).
    pub fn new(budget: usize) -> Option<Exits> {
        // SAFETY: epoll_create1 takes a flag and returns a new descriptor or -1.
        let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if fd < 0 {
            return None;
        }
        // SAFETY: a descriptor just returned to us and owned by nothing else.
        let epoll = unsafe { OwnedFd::from_raw_fd(fd) };
        Some(Exits {
            epoll,
            budget: Descriptors::new(budget),
        })
    }

    /// Processes watched now, and at most.
    pub fn watched(&self) -> (usize, usize) {
        (self.budget.open(), self.budget.limit())
    }

    /// Watches `pid` (of the exporter's own PID namespace) for its end: `None` when the
    /// budget is spent, the kernel has no pidfds, or no such process is left. The pidfd
    /// names the process that holds the pid now: opened before the process's files are
    /// read, a process that ended in between shows as ended at the next scan.
    pub fn watch(&self, pid: u32) -> Option<Watch> {
        if !self.budget.acquire() {
            return None;
        }
        let Ok(fd) = pidfd_open(pid) else {
            self.budget.release();
            return None;
        };
        let mut event = libc::epoll_event {
            events: libc::EPOLLIN as u32,
            u64: u64::from(pid),
        };
        // SAFETY: both descriptors are open; the event is read during the call only.
        let rc = unsafe {
            libc::epoll_ctl(
                self.epoll.as_raw_fd(),
                libc::EPOLL_CTL_ADD,
                fd.as_raw_fd(),
                &mut event,
            )
        };
        if rc != 0 {
            self.budget.release();
            return None;
        }
        Some(Watch {
            _fd: fd,
            budget: self.budget.clone(),
        })
    }

    /// Whether `pid` (of the exporter's own PID namespace) names a process, running or not
    /// yet reaped: `pidfd_open` succeeds for a thread-group leader and fails for another
    /// thread's id (`ENOENT`; `EINVAL` before Linux 6.9) and for a free pid (`ESRCH`),
    /// without a path walk. `None` when it cannot tell (no pidfds, no descriptor left).
    pub(crate) fn is_process(pid: u32) -> Option<bool> {
        use nix::errno::Errno;
        match pidfd_open(pid) {
            Ok(_) => Some(true),
            Err(Errno::ESRCH | Errno::ENOENT | Errno::EINVAL) => Some(false),
            Err(_) => None,
        }
    }

    /// The pids of the watched processes that have ended, sorted: each is reported until
    /// its `Watch` is dropped (the pidfd stays readable).
    pub fn ended(&self) -> Vec<u32> {
        const AT_ONCE: usize = 256;
        let mut out = Vec::new();
        let mut events = [libc::epoll_event { events: 0, u64: 0 }; AT_ONCE];
        // Level-triggered: one call returns up to AT_ONCE ended processes; more are
        // returned by the next calls (epoll hands out ready entries round-robin), bounded
        // by the number watched.
        for _ in 0..=self.budget.open() / AT_ONCE {
            // SAFETY: the buffer holds AT_ONCE events; a zero timeout never blocks.
            let n = unsafe {
                libc::epoll_wait(
                    self.epoll.as_raw_fd(),
                    events.as_mut_ptr(),
                    AT_ONCE as libc::c_int,
                    0,
                )
            };
            let Ok(n) = usize::try_from(n) else { break };
            out.extend(events[..n].iter().map(|e| e.u64 as u32));
            if n < AT_ONCE {
                break;
            }
        }
        out.sort_unstable();
        out.dedup();
        out
    }
}

/// A pidfd for the process that holds `pid` in the exporter's PID namespace.
fn pidfd_open(pid: u32) -> Result<OwnedFd, nix::errno::Errno> {
    // SAFETY: pidfd_open takes a pid and flags and returns a new descriptor or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0) };
    if fd < 0 {
        return Err(nix::errno::Errno::last());
    }
    // SAFETY: a descriptor just returned to us and owned by nothing else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The kernel's own word, for a child this test starts and ends: watched, it is not
    /// reported while it runs, and is once it has ended, before and after it is reaped.
    #[test]
    fn a_watched_process_is_reported_when_it_ends_and_not_before() {
        let exits = Exits::new(4).expect("epoll");
        let mut child = std::process::Command::new("sleep")
            .arg("60")
            .spawn()
            .unwrap();
        let pid = child.id();
        let watch = exits.watch(pid).expect("pidfd_open on a running child");
        assert_eq!(exits.watched(), (1, 4));
        assert!(exits.ended().is_empty(), "a running process is not ended");
        child.kill().unwrap();
        // The pidfd turns readable when the process has exited (a zombie), so this waits
        // for that event, not for a time.
        let mut ended = Vec::new();
        for _ in 0..10_000 {
            ended = exits.ended();
            if !ended.is_empty() {
                break;
            }
            std::thread::yield_now();
        }
        assert_eq!(ended, vec![pid]);
        child.wait().unwrap();
        assert_eq!(
            exits.ended(),
            vec![pid],
            "reported until its watch is dropped"
        );
        drop(watch);
        assert!(exits.ended().is_empty());
        assert_eq!(exits.watched(), (0, 4));
    }

    #[test]
    fn the_budget_bounds_the_watched_and_a_missing_pid_takes_no_place() {
        let exits = Exits::new(1).expect("epoll");
        let me = std::process::id();
        let a = exits.watch(me).expect("the test itself");
        assert!(exits.watch(me).is_none(), "the budget is one");
        drop(a);
        // pid_max is at most 2^22: this pid is never handed out.
        assert!(exits.watch(u32::MAX >> 1).is_none());
        assert_eq!(exits.watched(), (0, 1));
    }
}
