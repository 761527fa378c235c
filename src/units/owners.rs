//! `owners`: who holds the host's memory outside the processes' heaps, the names behind
//! the balance sheet's rows: tmpfs mounts (with the Kubernetes pod and volume a mount
//! belongs to), memfds and removed tmpfs files held open, SysV segments (those no process
//! attaches marked), the largest slab caches and the dentry cache, and vmalloc's largest
//! callers. Read once a minute (the files list every mount, descriptor, segment, cache and
//! vmalloc area), served from the latest read between.

use std::time::{Duration, Instant};

use crate::family::{Collector, Family, Metric, Section, Value};
use crate::parse::owners::{self, Segment};
use crate::source::Reason;

use super::{Collect, Output, Reader, Reading, Unit};

mod files;
mod netns;
mod tmpfs;
pub use files::{HeldFile, DESCRIPTORS, PER_PROCESS, PROCESSES};
pub use netns::Netns;
pub use tmpfs::Mount;

pub const COLLECTOR: Collector = Collector::Unit("owners");
const SECTION: Section = Section::Of(COLLECTOR);

/// How often the files are read again.
pub(crate) const EVERY: Duration = Duration::from_secs(60);
/// Series kept of each kind, the largest first.
const TOP_MOUNTS: usize = 32;
const TOP_FILES: usize = 32;
const TOP_NAMESPACES: usize = 32;
const TOP_SEGMENTS: usize = 32;
const TOP_SLABS: usize = 16;
const TOP_VMALLOC: usize = 16;

pub const UNIT: Unit = Unit {
    name: "owners",
    what: "tmpfs, unlinked files, SysV, slab, vmalloc, socket queues",
    rows: &[
        TMPFS_USED_BYTES,
        UNLINKED_FILE_BYTES,
        SYSV_SHM_RESIDENT_BYTES,
        SLAB_CACHE_BYTES,
        DENTRIES,
        VMALLOC_CALLER_BYTES,
        NETNS_SOCKET_QUEUE_BYTES,
    ],
    fixes: &[(
        Reason::Denied,
        "grant CAP_DAC_READ_SEARCH (/proc/slabinfo and /proc/vmallocinfo are root's, mode 0400) and CAP_SYS_PTRACE (/proc/1/root, where the host's tmpfs mounts are, and other users' /proc/PID/fd)",
    )],
    start: || Box::new(Owners::default()),
};

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OwnersReading {
    pub mounts: Vec<Mount>,
    /// Memfds and removed tmpfs files held open, the largest first.
    pub files: Vec<HeldFile>,
    pub segments: Vec<Segment>,
    pub slabs: Vec<(String, u64)>,
    /// Dentries in the cache, unused, negative.
    pub dentries: Option<(u64, u64, Option<u64>)>,
    pub vmalloc: Vec<(String, u64)>,
    /// Network namespaces by their sockets' queued bytes, the largest first.
    pub namespaces: Vec<Netns>,
}

#[derive(Default)]
struct Owners {
    last: Option<(Instant, OwnersReading)>,
    files: files::Walk,
}

impl Collect for Owners {
    fn read(&mut self, r: &mut Reader) -> Result<Output, Reason> {
        if let Some((at, reading)) = &self.last {
            if at.elapsed() < EVERY {
                return Ok(Box::new(reading.clone()));
            }
        }
        let reading = read(r, &mut self.files)?;
        self.last = Some((Instant::now(), reading.clone()));
        Ok(Box::new(reading))
    }
}

fn read(r: &mut Reader, walk: &mut files::Walk) -> Result<OwnersReading, Reason> {
    let page = crate::source::own::page_size();
    let mut o = OwnersReading::default();
    let mut failed = Vec::new();
    let mut one = |r: &mut Reader, what: Result<(), Reason>| {
        if let Err(reason) = what {
            r.count(reason, 1);
            failed.push(reason);
        }
    };
    // Every process's mount namespace, descriptors and network namespace.
    let listed = r.source.pids().map_err(|e| e.system_reason());
    let pids = listed.as_ref().map(|(p, _)| p.as_slice()).unwrap_or_default();
    let mut devices = std::collections::HashSet::new();
    let (host, mounts) = tmpfs::read(r, pids, &mut devices);
    one(r, host);
    o.mounts = largest(mounts, TOP_MOUNTS, |m| m.used_bytes);
    let held = files::read(r, walk, pids, &mut devices);
    o.files = largest(held, TOP_FILES, |f| f.bytes);
    let queued = |n: &Netns| n.send_bytes.saturating_add(n.receive_bytes);
    o.namespaces = largest(netns::read(r, pids), TOP_NAMESPACES, queued);
    one(r, listed.as_ref().map(drop).map_err(|&e| e));
    let segments = r.source.parse_proc("sysvipc/shm", r.buf, owners::sysv_shm);
    one(r, segments.map(|s| o.segments = largest(s, TOP_SEGMENTS, resident)));
    let slabs = r
        .source
        .parse_proc("slabinfo", r.buf, |t| owners::slab_caches(t, page));
    one(r, slabs.map(|s| o.slabs = largest(s, TOP_SLABS, |s| s.1)));
    let dentries = r
        .source
        .parse_proc("sys/fs/dentry-state", r.buf, owners::dentry_state);
    one(r, dentries.map(|d| o.dentries = Some(d)));
    let vmalloc = r
        .source
        .parse_proc("vmallocinfo", r.buf, |t| Ok(owners::vmalloc_callers(t, page)));
    one(r, vmalloc.map(|v| o.vmalloc = largest(v, TOP_VMALLOC, |v| v.1)));
    // The unit fails only when nothing could be read: each file that could not is counted.
    if failed.len() == 6 {
        return Err(failed[0]);
    }
    Ok(o)
}

/// A segment's resident bytes (its size on kernels before 4.5, which do not say).
fn resident(s: &Segment) -> u64 {
    s.rss_bytes.unwrap_or(s.size_bytes)
}

/// The `n` largest by `key`, the largest first.
fn largest<T>(mut v: Vec<T>, n: usize, key: impl Fn(&T) -> u64) -> Vec<T> {
    v.sort_by_key(|t| std::cmp::Reverse(key(t)));
    v.truncate(n);
    v
}

impl super::UnitReading for OwnersReading {
    const COLLECTOR: crate::family::Collector = COLLECTOR;
}

impl Reading for OwnersReading {
    fn families(&self) -> Vec<Family> {
        let mut tmpfs = Family::new(&TMPFS_USED_BYTES);
        for m in &self.mounts {
            let labels = vec![
                ("mount", m.point.clone()),
                ("mntns", m.namespace.to_string()),
                ("pod", m.pod.clone()),
                ("volume", m.volume.clone()),
            ];
            tmpfs.push(labels, Value::U(m.used_bytes));
        }
        let mut held = Family::new(&UNLINKED_FILE_BYTES);
        for f in &self.files {
            let labels = vec![
                ("kind", f.kind.to_string()),
                ("pid", f.pid.to_string()),
                ("name", f.name.clone()),
            ];
            held.push(labels, Value::U(f.bytes));
        }
        let mut shm = Family::new(&SYSV_SHM_RESIDENT_BYTES);
        for s in &self.segments {
            let labels = vec![
                ("shmid", s.shmid.to_string()),
                ("key", s.key.clone()),
                ("creator_pid", s.creator.to_string()),
                ("orphaned", (s.attached == 0).to_string()),
            ];
            shm.push(labels, Value::U(resident(s)));
        }
        let mut slabs = Family::new(&SLAB_CACHE_BYTES);
        for (cache, bytes) in &self.slabs {
            slabs.push(vec![("cache", cache.clone())], Value::U(*bytes));
        }
        let mut dentries = Family::new(&DENTRIES);
        if let Some((total, unused, negative)) = self.dentries {
            dentries.push(vec![("state", "total".into())], Value::U(total));
            dentries.push(vec![("state", "unused".into())], Value::U(unused));
            if let Some(n) = negative {
                dentries.push(vec![("state", "negative".into())], Value::U(n));
            }
        }
        let mut vmalloc = Family::new(&VMALLOC_CALLER_BYTES);
        for (caller, bytes) in &self.vmalloc {
            vmalloc.push(vec![("caller", caller.clone())], Value::U(*bytes));
        }
        let mut sockets = Family::new(&NETNS_SOCKET_QUEUE_BYTES);
        for n in &self.namespaces {
            for (queue, bytes) in [("send", n.send_bytes), ("receive", n.receive_bytes)] {
                let labels = vec![
                    ("netns", n.inode.to_string()),
                    ("pid", n.pid.to_string()),
                    ("queue", queue.to_string()),
                ];
                sockets.push(labels, Value::U(bytes));
            }
        }
        vec![tmpfs, held, shm, slabs, dentries, vmalloc, sockets]
    }
}

pub(crate) const TMPFS_USED_BYTES: Metric = crate::family::metric!(
    membloat "tmpfs_used",
    Gauge,
    Bytes,
    ["mount", "mntns", "pod", "volume"],
    SECTION,
    "/proc/PID/mountinfo, statvfs",
    "Bytes used on each tmpfs mount of every mount namespace, once per superblock (the 32 largest): files no process's RSS shows, removed files still open included, in the balance sheet's shmem row. mount is its point in its namespace, mntns that namespace's inode (/proc/PID/ns/mnt; the host's first, so a mount seen in several is named by the host's path; 0 when unknown). pod and volume name a Kubernetes volume's mount (emptyDir medium: Memory, secrets, projected), empty otherwise. Read once a minute.",
);

pub(crate) const UNLINKED_FILE_BYTES: Metric = crate::family::metric!(
    membloat "unlinked_file",
    Gauge,
    Bytes,
    ["kind", "pid", "name"],
    SECTION,
    "/proc/PID/fd, statx",
    "Bytes (in RAM or swap) of each file a process holds open that no directory names, once per inode, named by the lowest pid holding it (the 32 largest): kind=\"memfd\" (name: its memfd name; in no mount's listing) or kind=\"deleted\" (name: its path on a tmpfs it was removed from; also in that mount's tmpfs_used). Freed when the last holder closes it; in the balance sheet's shmem row. Needs CAP_SYS_PTRACE for other users' processes. Read once a minute.",
);

pub(crate) const SYSV_SHM_RESIDENT_BYTES: Metric = crate::family::metric!(
    membloat "sysv_shm_resident",
    Gauge,
    Bytes,
    ["shmid", "key", "creator_pid", "orphaned"],
    SECTION,
    "/proc/sysvipc/shm",
    "Resident bytes of each SysV shared memory segment of the host's IPC namespace (its size before kernel 4.5; the 32 largest), in the balance sheet's shmem row. orphaned=\"true\": no process attaches it, and it stays until ipcrm -m SHMID. Read once a minute.",
);

pub(crate) const SLAB_CACHE_BYTES: Metric = crate::family::metric!(
    membloat "slab_cache",
    Gauge,
    Bytes,
    ["cache"],
    SECTION,
    "/proc/slabinfo",
    "Bytes of the 16 largest slab caches' slabs (num_slabs x pagesperslab pages): the names behind the balance sheet's slab rows. Needs root or CAP_DAC_READ_SEARCH. Read once a minute.",
);

pub(crate) const DENTRIES: Metric = crate::family::metric!(
    membloat "dentries",
    Gauge,
    None,
    ["state"],
    SECTION,
    "/proc/sys/fs/dentry-state",
    "Dentries in the kernel's cache: total, unused (freed first under pressure) and negative (names looked up that do not exist, kernel 5.1+; they grow with every lookup of a missing file and are freed only under pressure). Read once a minute.",
);

pub(crate) const VMALLOC_CALLER_BYTES: Metric = crate::family::metric!(
    membloat "vmalloc_caller",
    Gauge,
    Bytes,
    ["caller"],
    SECTION,
    "/proc/vmallocinfo",
    "Pages vmalloc allocated, summed by the kernel function that asked (the 16 largest): the names behind the balance sheet's vmalloc row. Needs root or CAP_DAC_READ_SEARCH. Read once a minute.",
);

pub(crate) const NETNS_SOCKET_QUEUE_BYTES: Metric = crate::family::metric!(
    membloat "netns_socket_queue",
    Gauge,
    Bytes,
    ["netns", "pid", "queue"],
    SECTION,
    "/proc/PID/net/tcp, tcp6, udp, udp6",
    "Bytes in the TCP and UDP sockets' queues of each network namespace (netns: its inode, as /proc/PID/ns/net names it; pid: the lowest pid in it; the 32 namespaces with the most): queue=\"receive\", received and not yet read by the program; queue=\"send\", written and not yet acknowledged (TCP) or sent (UDP). TCP's are payload bytes, UDP's the buffers the kernel charged. The kernel charges socket memory for the whole host (the balance sheet's sockets row); this names the namespace, a pod on Kubernetes, whose sockets hold it. Read once a minute.",
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_largest_first_and_no_more_than_asked() {
        let v = largest(vec![3u64, 9, 1, 7], 2, |&x| x);
        assert_eq!(v, [9, 7]);
    }
}
