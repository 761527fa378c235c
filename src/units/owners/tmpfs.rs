//! tmpfs mounts in every mount namespace, once per superblock: the host's first (pid 1's,
//! then the exporter's own where `/proc/1/root` is out of reach), so a kubelet volume is
//! named by its host path, then each other namespace a process is in (a container's own
//! `/tmp` or `/dev/shm`), through that process's root.

use std::collections::HashSet;
use std::path::Path;

use crate::parse::mountinfo;
use crate::source::{own, Reason};

use super::super::Reader;

/// Mount namespaces besides the host's and the exporter's read in one read; the rest are
/// counted as `timeout`.
pub(crate) const NAMESPACES: usize = 256;

/// One tmpfs mount, deduplicated by superblock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mount {
    /// Its mount point in its namespace.
    pub point: String,
    /// The inode of its mount namespace (`/proc/PID/ns/mnt`), 0 when unknown.
    pub namespace: u64,
    pub used_bytes: u64,
    /// The Kubernetes pod (its uid) and volume, for a kubelet volume's mount.
    pub pod: String,
    pub volume: String,
}

/// Every tmpfs mount of the host's namespace and of each namespace `pids` are in, with
/// the devices of every tmpfs listed added to `devices`. The host's mount table is the one
/// whose failure is the caller's.
pub fn read(
    r: &mut Reader,
    pids: &[u32],
    devices: &mut HashSet<u64>,
) -> (Result<(), Reason>, Vec<Mount>) {
    let mut seen = HashSet::new();
    let mut namespaces = HashSet::new();
    let mut out = Vec::new();
    let mut host = Ok(());
    let mut left = NAMESPACES;
    let whos = ["1".to_string(), "self".to_string()];
    for who in whos.into_iter().chain(pids.iter().map(u32::to_string)) {
        let namespace = namespace(r, &who);
        let ours = who == "1" || who == "self";
        if namespace.is_some_and(|n| !namespaces.insert(n)) || !ours && namespace.is_none() {
            continue;
        }
        if !ours {
            let Some(l) = left.checked_sub(1) else {
                r.count(Reason::Timeout, 1);
                continue;
            };
            left = l;
        }
        let listed = r.source.parse_proc(&format!("{who}/mountinfo"), r.buf, |t| {
            Ok(mountinfo::mounts(t))
        });
        let root = r.source.procfs().join(&who).join("root");
        match listed {
            Ok(m) => {
                devices.extend(m.iter().filter(|m| m.fs == "tmpfs").map(|m| m.device));
                let found = used(&root, &m, &mut seen, ours);
                let ns = namespace.unwrap_or(0);
                out.extend(found.into_iter().map(|m| Mount { namespace: ns, ..m }));
            }
            Err(reason) if who == "1" => host = Err(reason),
            Err(_) => {}
        }
    }
    (host, out)
}

/// The inode of `who`'s mount namespace.
fn namespace(r: &Reader, who: &str) -> Option<u64> {
    let link = std::fs::read_link(r.source.procfs().join(who).join("ns/mnt")).ok()?;
    link.to_str()?
        .strip_prefix("mnt:[")?
        .strip_suffix(']')?
        .parse()
        .ok()
}

/// The used bytes of each tmpfs mount of `mounts` (not yet `seen`) by `fstatvfs`, opened
/// through `root` without following a link ([`own::open_in_root`]). A mount is asked only
/// when every mount above it is local: the path to it never crosses a FUSE or network
/// mount, whose server could hold the lookup. Where the kernel lacks `openat2` (before
/// 5.6), only the host's and the exporter's own namespaces (`trusted`) are asked, by path.
fn used(root: &Path, mounts: &[mountinfo::Mount], seen: &mut HashSet<u64>, trusted: bool) -> Vec<Mount> {
    let mut out = Vec::new();
    for m in mounts.iter().filter(|m| m.fs == "tmpfs") {
        if seen.contains(&m.device) || !mountinfo::local_path(mounts, m) {
            continue;
        }
        let stat = match own::open_in_root(root, &m.point) {
            Ok(fd) => nix::sys::stat::fstat(&fd).ok().zip(nix::sys::statvfs::fstatvfs(&fd).ok()),
            Err(e) if trusted && e.raw_os_error() == Some(libc::ENOSYS) => {
                let path = root.join(m.point.trim_start_matches('/'));
                nix::sys::stat::stat(&path).ok().zip(nix::sys::statvfs::statvfs(&path).ok())
            }
            Err(_) => None,
        };
        let Some((st, vfs)) = stat else {
            continue;
        };
        // The path reaches this mount, not one mounted over it.
        let dev = u64::from(libc::major(st.st_dev)) << 32 | u64::from(libc::minor(st.st_dev));
        if dev != m.device {
            continue;
        }
        seen.insert(m.device);
        let used = vfs
            .blocks()
            .saturating_sub(vfs.blocks_free())
            .saturating_mul(vfs.fragment_size());
        let (pod, volume) = kubelet_volume(&m.point);
        out.push(Mount {
            point: m.point.clone(),
            namespace: 0,
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
}
