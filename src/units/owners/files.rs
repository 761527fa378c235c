//! The files processes hold open that no directory names: memfds and files removed from a
//! tmpfs while open. Their pages are shared memory (the balance sheet's `shmem` row) that
//! no mount's listing and, while no one maps them, no process's RSS shows. Found by
//! looking at the processes' descriptors, within a budget, once a minute: at most
//! [`PROCESSES`] processes a read, in turn, each one's files kept until it is looked at
//! again.

use std::collections::{BTreeMap, HashSet};
use std::path::PathBuf;

use crate::parse::mountinfo;
use crate::parse::owners::{unlinked, Unlinked};
use crate::source::{own, Reason};

use super::super::Reader;

/// Descriptors looked at in one read, over every process: a link read and, for a file no
/// directory names, a `statx` from the kernel's cache, about 2 µs each. A host with more
/// open files has the rest looked at by no read, counted as `timeout`.
pub const DESCRIPTORS: usize = 1 << 18;
/// Descriptors looked at of one process, so that one with a million open files (a tenant's
/// choice) leaves the budget to the others; one with more is counted as `timeout`.
pub const PER_PROCESS: usize = 1 << 14;
/// Processes whose descriptors one read looks at; the others wait for the next reads, in
/// turn (pid order, from where the last read stopped). Listing a process's descriptors
/// makes the kernel build a dentry and an inode for each (about 1 KiB, charged to the
/// exporter's memory cgroup, reclaimable only once its limit is hit): 10,000 idle
/// processes listed in one read took an exporter's kernel memory from 80 to 164 MiB, and
/// under a 64 Mi limit it was OOM-killed in its first scan. 2,048 a read looks at every
/// process each minute on most hosts, and at 10,000 every five minutes.
pub const PROCESSES: usize = 2048;
/// Mount tables read in one read to tell a file's tmpfs outside the host's and the
/// exporter's namespaces (a container's own tmpfs).
const MOUNT_TABLES: usize = 64;

/// One file held open, deduplicated by inode: the lowest pid holding it names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeldFile {
    /// `memfd` or `deleted` (a tmpfs file removed while open).
    pub kind: &'static str,
    pub pid: u32,
    /// The memfd's name, or the removed file's path in its holder's mount namespace.
    pub name: String,
    /// Its pages, in RAM or swap (512-byte blocks as `statx` gives them).
    pub bytes: u64,
}

/// What the reads found, kept between them: where the next one starts, and each looked-at
/// process's files (its pid's entry), until it is looked at again or ends.
#[derive(Debug, Default)]
pub struct Walk {
    after: u32,
    held: BTreeMap<u32, Vec<Found>>,
}

/// A file found held: its identity, its descriptor (where its size is read again by the
/// reads that do not look at its process), and what is served.
#[derive(Debug)]
struct Found {
    dev: u64,
    ino: u64,
    fd: PathBuf,
    file: HeldFile,
}

/// The processes' unlinked shared-memory files: [`PROCESSES`] of `pids` looked at, the
/// others' as last found, their sizes read again. `tmpfs` holds the devices of the tmpfs
/// mounts already listed; a device it lacks is looked for in the holder's own mount table,
/// at most [`MOUNT_TABLES`] times.
pub fn read(
    r: &mut Reader,
    walk: &mut Walk,
    pids: &[u32],
    tmpfs: &mut HashSet<u64>,
) -> Vec<HeldFile> {
    let mut sorted = pids.to_vec();
    sorted.sort_unstable();
    walk.held.retain(|pid, _| sorted.binary_search(pid).is_ok());
    let turn = turn(&sorted, walk.after, PROCESSES);
    walk.after = turn.last().copied().unwrap_or(0);
    // The others' files, their sizes as the kernel has them now.
    for (pid, files) in &mut walk.held {
        if turn.contains(pid) {
            continue;
        }
        files.retain_mut(|f| match own::cached_stat(&f.fd) {
            Some(st) if (st.dev, st.ino) == (f.dev, f.ino) => {
                f.file.bytes = st.blocks.saturating_mul(512);
                true
            }
            _ => false,
        });
    }
    look(r, walk, &turn, tmpfs);
    let mut seen = HashSet::new();
    walk.held
        .values()
        .flatten()
        .filter(|f| seen.insert((f.dev, f.ino)))
        .map(|f| f.file.clone())
        .collect()
}

/// The `n` processes of `sorted` (ascending) whose turn it is: those after `after`, then
/// from the lowest again.
fn turn(sorted: &[u32], after: u32, n: usize) -> Vec<u32> {
    let first = sorted.partition_point(|&p| p <= after);
    sorted[first..]
        .iter()
        .chain(&sorted[..first])
        .take(n)
        .copied()
        .collect()
}

/// Looks at the descriptors of `turn`, within [`DESCRIPTORS`], and keeps what each holds.
fn look(r: &mut Reader, walk: &mut Walk, turn: &[u32], tmpfs: &mut HashSet<u64>) {
    let shared = own::shared_memory_device();
    let mut budget = DESCRIPTORS;
    let mut tables = MOUNT_TABLES;
    let mut unread = 0;
    for &pid in turn {
        if budget == 0 {
            unread += 1;
            continue;
        }
        let mut found = Vec::new();
        let mut mine = PER_PROCESS.min(budget);
        let listed = r.source.unlinked_files(pid, &mut mine, |link, st, fd| {
            if let Some(what) = unlinked(link) {
                found.push((what, st, fd.to_path_buf()));
            }
        });
        budget -= PER_PROCESS.min(budget) - mine;
        match listed {
            Ok(true) => {}
            Ok(false) => unread += 1,
            Err(e) => {
                walk.held.remove(&pid);
                match e.process_reason() {
                    Reason::Vanished => {}
                    reason => r.count(reason, 1),
                }
                continue;
            }
        }
        let mut files = Vec::new();
        for (what, st, fd) in found {
            let (kind, name) = match what {
                Unlinked::Memfd(name) if Some(st.dev) == shared => ("memfd", name),
                Unlinked::Deleted(path) if is_tmpfs(r, pid, st.dev, tmpfs, &mut tables) => {
                    ("deleted", path)
                }
                _ => continue,
            };
            let bytes = st.blocks.saturating_mul(512);
            let file = HeldFile {
                kind,
                pid,
                name,
                bytes,
            };
            files.push(Found {
                dev: st.dev,
                ino: st.ino,
                fd,
                file,
            });
        }
        if files.is_empty() {
            walk.held.remove(&pid);
        } else {
            walk.held.insert(pid, files);
        }
    }
    r.count(Reason::Timeout, unread);
}

/// Whether `dev` is a tmpfs: one already listed, or one in `pid`'s mount table (whose
/// tmpfs mounts are all remembered, so a namespace is read once).
fn is_tmpfs(
    r: &mut Reader,
    pid: u32,
    dev: u64,
    tmpfs: &mut HashSet<u64>,
    tables: &mut usize,
) -> bool {
    if tmpfs.contains(&dev) {
        return true;
    }
    let Some(left) = tables.checked_sub(1) else {
        return false;
    };
    *tables = left;
    if let Ok(mounts) = r
        .source
        .parse_pid(pid, "mountinfo", r.buf, |t| Ok(mountinfo::mounts(t)))
    {
        tmpfs.extend(mounts.iter().filter(|m| m.fs == "tmpfs").map(|m| m.device));
    }
    tmpfs.contains(&dev)
}

#[cfg(test)]
mod tests {
    use super::turn;

    #[test]
    fn each_process_has_its_turn_and_the_turns_wrap() {
        let pids = [3, 5, 8, 13, 21];
        assert_eq!(turn(&pids, 0, 2), [3, 5]);
        assert_eq!(turn(&pids, 5, 2), [8, 13]);
        assert_eq!(turn(&pids, 13, 2), [21, 3]);
        // A process that ended between the reads: the next after it.
        assert_eq!(turn(&pids, 9, 2), [13, 21]);
        assert_eq!(turn(&pids, 21, 9), [3, 5, 8, 13, 21]);
        assert_eq!(turn(&[], 7, 2), Vec::<u32>::new());
    }
}
