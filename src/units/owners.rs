//! `owners`: who holds the host's memory outside the processes' heaps, the names behind
//! the balance sheet's rows: tmpfs mounts (with the Kubernetes pod and volume a mount
//! belongs to), memfds and removed tmpfs files held open, SysV segments (those no process
//! attaches marked), the largest slab caches and the dentry cache, and vmalloc's largest
//! callers. Read once a minute (the files list every mount, descriptor, segment, cache and
//! vmalloc area), served from the latest read between.

use std::time::{Duration, Instant};

use crate::family::{Collector, Family, Metric, Section, Value};
use crate::parse::mountinfo;
use crate::parse::owners::{self, Segment};
use crate::source::Reason;

use super::{Collect, Output, Reader, Reading, Unit};

mod files;
mod netns;
pub use files::{HeldFile, DESCRIPTORS};
pub use netns::Netns;

pub const COLLECTOR: Collector = Collector::Unit("owners");
const SECTION: Section = Section::Of(COLLECTOR);

/// How often the files are read again.
pub const EVERY: Duration = Duration::from_secs(60);
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

/// One tmpfs mount of the host's mount namespace, deduplicated by superblock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mount {
    pub point: String,
    pub used_bytes: u64,
    /// The Kubernetes pod (its uid) and volume, for a kubelet volume's mount.
    pub pod: String,
    pub volume: String,
}

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
}

impl Collect for Owners {
    fn read(&mut self, r: &mut Reader) -> Result<Output, Reason> {
        if let Some((at, reading)) = &self.last {
            if at.elapsed() < EVERY {
                return Ok(Box::new(reading.clone()));
            }
        }
        let reading = read(r)?;
        self.last = Some((Instant::now(), reading.clone()));
        Ok(Box::new(reading))
    }
}

fn read(r: &mut Reader) -> Result<OwnersReading, Reason> {
    let page = crate::source::own::page_size();
    let mut o = OwnersReading::default();
    let mut failed = Vec::new();
    let mut one = |r: &mut Reader, what: Result<(), Reason>| {
        if let Err(reason) = what {
            r.count(reason, 1);
            failed.push(reason);
        }
    };
    // The host's mounts (pid 1's), then the exporter's own for those /proc/1/root does
    // not reach (a sandbox that hides pid 1's root even from root).
    let mut seen = std::collections::HashSet::new();
    let mut tmpfs = std::collections::HashSet::new();
    for who in ["1", "self"] {
        let listed = r.source.parse_proc(&format!("{who}/mountinfo"), r.buf, |t| {
            Ok(mountinfo::mounts(t))
        });
        let root = r.source.procfs().join(who).join("root");
        let used = listed.map(|m| {
            tmpfs.extend(m.iter().filter(|m| m.fs == "tmpfs").map(|m| m.device));
            o.mounts.extend(tmpfs_used(&root, &m, &mut seen));
        });
        if who == "1" {
            one(r, used);
        }
    }
    o.mounts = largest(std::mem::take(&mut o.mounts), TOP_MOUNTS, |m| m.used_bytes);
    // Every process's descriptors and network namespace.
    let listed = r.source.pids().map_err(|e| e.system_reason());
    if let Ok((pids, _)) = &listed {
        o.files = largest(files::read(r, pids, &mut tmpfs), TOP_FILES, |f| f.bytes);
        let queued = |n: &Netns| n.send_bytes.saturating_add(n.receive_bytes);
        o.namespaces = largest(netns::read(r, pids), TOP_NAMESPACES, queued);
    }
    one(r, listed.map(drop));
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

/// The used bytes of each tmpfs mount of `mounts` by `statvfs` through `root` (a
/// process's `/proc/PID/root`), once per superblock (`seen`). A mount is asked only when
/// every mount above it is local: the path to it never crosses a FUSE or network mount,
/// whose server could hold the lookup.
fn tmpfs_used(
    root: &std::path::Path,
    mounts: &[mountinfo::Mount],
    seen: &mut std::collections::HashSet<u64>,
) -> Vec<Mount> {
    let mut out = Vec::new();
    for m in mounts.iter().filter(|m| m.fs == "tmpfs") {
        if seen.contains(&m.device) || !mountinfo::local_path(mounts, m) {
            continue;
        }
        let path = root.join(m.point.trim_start_matches('/'));
        // The path reaches this mount, not one mounted over it.
        let at = nix::sys::stat::stat(&path).ok().map(|st| {
            u64::from(libc::major(st.st_dev)) << 32 | u64::from(libc::minor(st.st_dev))
        });
        if at != Some(m.device) {
            continue;
        }
        let Ok(st) = nix::sys::statvfs::statvfs(&path) else {
            continue;
        };
        seen.insert(m.device);
        let used = st
            .blocks()
            .saturating_sub(st.blocks_free())
            .saturating_mul(st.fragment_size());
        let (pod, volume) = kubelet_volume(&m.point);
        out.push(Mount {
            point: m.point.clone(),
            used_bytes: used,
            pod: pod.to_string(),
            volume: volume.to_string(),
        });
    }
    out
}

/// The pod uid and volume name of a kubelet volume's mount point
/// (`.../pods/UID/volumes/PLUGIN/NAME`), or empty strings.
fn kubelet_volume(point: &str) -> (&str, &str) {
    let Some((_, rest)) = point.rsplit_once("/pods/") else {
        return ("", "");
    };
    let parts: Vec<&str> = rest.split('/').collect();
    match parts.as_slice() {
        [uid, "volumes", _plugin, name, ..] => (uid, name),
        _ => ("", ""),
    }
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

pub const TMPFS_USED_BYTES: Metric = crate::family::metric!(
    membloat "tmpfs_used",
    Gauge,
    Bytes,
    ["mount", "pod", "volume"],
    SECTION,
    "/proc/1/mountinfo, statvfs",
    "Bytes used on each tmpfs mount of the host's mount namespace (once per superblock; the 32 largest): files no process's RSS shows, in the balance sheet's shmem row. pod and volume name a Kubernetes volume's mount (emptyDir medium: Memory, secrets, projected), empty otherwise. Read once a minute.",
);

pub const UNLINKED_FILE_BYTES: Metric = crate::family::metric!(
    membloat "unlinked_file",
    Gauge,
    Bytes,
    ["kind", "pid", "name"],
    SECTION,
    "/proc/PID/fd, statx",
    "Bytes (in RAM or swap) of each file a process holds open that no directory names, once per inode, named by the lowest pid holding it (the 32 largest): kind=\"memfd\" (name: its memfd name; in no mount's listing) or kind=\"deleted\" (name: its path on a tmpfs it was removed from; also in that mount's tmpfs_used). Freed when the last holder closes it; in the balance sheet's shmem row. Needs CAP_SYS_PTRACE for other users' processes. Read once a minute.",
);

pub const SYSV_SHM_RESIDENT_BYTES: Metric = crate::family::metric!(
    membloat "sysv_shm_resident",
    Gauge,
    Bytes,
    ["shmid", "key", "creator_pid", "orphaned"],
    SECTION,
    "/proc/sysvipc/shm",
    "Resident bytes of each SysV shared memory segment of the host's IPC namespace (its size before kernel 4.5; the 32 largest), in the balance sheet's shmem row. orphaned=\"true\": no process attaches it, and it stays until ipcrm -m SHMID. Read once a minute.",
);

pub const SLAB_CACHE_BYTES: Metric = crate::family::metric!(
    membloat "slab_cache",
    Gauge,
    Bytes,
    ["cache"],
    SECTION,
    "/proc/slabinfo",
    "Bytes of the 16 largest slab caches' slabs (num_slabs x pagesperslab pages): the names behind the balance sheet's slab rows. Needs root or CAP_DAC_READ_SEARCH. Read once a minute.",
);

pub const DENTRIES: Metric = crate::family::metric!(
    membloat "dentries",
    Gauge,
    None,
    ["state"],
    SECTION,
    "/proc/sys/fs/dentry-state",
    "Dentries in the kernel's cache: total, unused (freed first under pressure) and negative (names looked up that do not exist, kernel 5.1+; they grow with every lookup of a missing file and are freed only under pressure). Read once a minute.",
);

pub const VMALLOC_CALLER_BYTES: Metric = crate::family::metric!(
    membloat "vmalloc_caller",
    Gauge,
    Bytes,
    ["caller"],
    SECTION,
    "/proc/vmallocinfo",
    "Pages vmalloc allocated, summed by the kernel function that asked (the 16 largest): the names behind the balance sheet's vmalloc row. Needs root or CAP_DAC_READ_SEARCH. Read once a minute.",
);

pub const NETNS_SOCKET_QUEUE_BYTES: Metric = crate::family::metric!(
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
    fn a_kubelet_volume_names_its_pod_and_volume() {
        assert_eq!(
            kubelet_volume("/var/lib/kubelet/pods/6c1a-22/volumes/kubernetes.io~empty-dir/cache"),
            ("6c1a-22", "cache")
        );
        assert_eq!(kubelet_volume("/dev/shm"), ("", ""));
        assert_eq!(kubelet_volume("/x/pods/uid/other"), ("", ""));
    }

    #[test]
    fn the_largest_first_and_no_more_than_asked() {
        let v = largest(vec![3u64, 9, 1, 7], 2, |&x| x);
        assert_eq!(v, [9, 7]);
    }
}
