//! The files processes hold open that no directory names: memfds and files removed from a
//! tmpfs while open. Their pages are shared memory (the balance sheet's `shmem` row) that
//! no mount's listing and, while no one maps them, no process's RSS shows. Found by
//! looking at every process's descriptors, within a budget, once a minute.

use std::collections::HashSet;

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

/// Every process's unlinked shared-memory files. `tmpfs` holds the devices of the tmpfs
/// mounts already listed; a device it lacks is looked for in the holder's own mount table,
/// at most [`MOUNT_TABLES`] times.
pub fn read(r: &mut Reader, pids: &[u32], tmpfs: &mut HashSet<u64>) -> Vec<HeldFile> {
    let shared = own::shared_memory_device();
    let mut budget = DESCRIPTORS;
    let mut tables = MOUNT_TABLES;
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    let mut unread = 0;
    for &pid in pids {
        if budget == 0 {
            unread += 1;
            continue;
        }
        let mut found = Vec::new();
        let mut mine = PER_PROCESS.min(budget);
        let listed = r.source.unlinked_files(pid, &mut mine, |link, st| {
            if let Some(what) = unlinked(link) {
                found.push((what, st));
            }
        });
        budget -= PER_PROCESS.min(budget) - mine;
        match listed {
            Ok(true) => {}
            Ok(false) => unread += 1,
            Err(e) => {
                match e.process_reason() {
                    Reason::Vanished => {}
                    reason => r.count(reason, 1),
                }
                continue;
            }
        }
        for (what, st) in found {
            let (kind, name) = match what {
                Unlinked::Memfd(name) if Some(st.dev) == shared => ("memfd", name),
                Unlinked::Deleted(path) if is_tmpfs(r, pid, st.dev, tmpfs, &mut tables) => {
                    ("deleted", path)
                }
                _ => continue,
            };
            if seen.insert((st.dev, st.ino)) {
                out.push(HeldFile {
                    kind,
                    pid,
                    name,
                    bytes: st.blocks.saturating_mul(512),
                });
            }
        }
    }
    r.count(Reason::Timeout, unread);
    out
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
