//! `/proc/PID/mountinfo`: whether the procfs the exporter reads hides other users'
//! processes (`hidepid`, `subset=pid` aside), and which mounts of a process are served by
//! a program or a network (FUSE, NFS and kin), whose files no reader may touch.

use super::ParseError;

/// Whether the proc filesystem mounted at `mount_point` has `hidepid` set to hide or deny
/// other users' processes (`1`, `2`, `noaccess`, `invisible`). An error when no proc
/// mount is at that point (a fixture tree).
pub fn hides_processes(text: &str, mount_point: &str) -> Result<bool, ParseError> {
    let found = text.lines().find_map(|line| {
        let (mount, fs) = line.split_once(" - ")?;
        let point = mount.split(' ').nth(4)?;
        let mut fs = fs.split(' ');
        if point != mount_point || fs.next()? != "proc" {
            return None;
        }
        let options = fs.nth(1).unwrap_or("");
        Some(options.split(',').any(|o| {
            matches!(
                o.strip_prefix("hidepid="),
                Some("1" | "2" | "noaccess" | "invisible")
            )
        }))
    });
    found.ok_or(ParseError::Missing("proc mount at the point"))
}

/// The mounts of a process whose files a reader must not open or fault in: FUSE (its
/// server is any user's program, which can hold a read forever), network filesystems (a
/// read may wait on a server for minutes), and any mount no `mountinfo` read lists (a FUSE
/// mount detached with `umount -l` stays mapped and answered, or not, by its server while
/// no `mountinfo` names it). By mount id (`fdinfo`'s `mnt_id`) and by device
/// (`major << 32 | minor`, as smaps' mappings give it). [`Remote::default`] lists no
/// local mount: no file may be read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Remote {
    /// The remote mounts listed, sorted.
    pub mount_ids: Vec<u64>,
    pub devices: Vec<u64>,
    /// The other mounts listed (local), sorted: only their files may be read.
    pub local_ids: Vec<u64>,
    pub local_devices: Vec<u64>,
    /// The process's `mountinfo` could not be read (it is gone, or denied): none of its
    /// files is read, and that is for want of access, not for a mount.
    pub unreadable: bool,
}

impl Remote {
    /// Whether a file on device `dev` must not be read: a remote mount's, or one no
    /// `mountinfo` read lists.
    pub(crate) fn has_device(&self, dev: u64) -> bool {
        self.devices.binary_search(&dev).is_ok() || self.local_devices.binary_search(&dev).is_err()
    }

    /// Whether a file of mount `id` must not be read (as [`Remote::has_device`]).
    pub(crate) fn has_mount(&self, id: u64) -> bool {
        self.mount_ids.binary_search(&id).is_ok() || self.local_ids.binary_search(&id).is_err()
    }

    /// `other`'s local mounts are local here too, unless listed here as remote: the
    /// host's mounts, which a container's mappings can lie on (an overlay's lower files
    /// on kernels before 6.8) though its own `mountinfo` does not list them.
    pub(crate) fn add_local(&mut self, other: &Remote) {
        for &id in &other.local_ids {
            if self.mount_ids.binary_search(&id).is_err() {
                self.local_ids.push(id);
            }
        }
        for &dev in &other.local_devices {
            if self.devices.binary_search(&dev).is_err() {
                self.local_devices.push(dev);
            }
        }
        sort(&mut self.local_ids);
        sort(&mut self.local_devices);
    }

    /// Files on device `dev` may be read (the kernel's own shared memory, which holds
    /// every memfd, SysV segment and shared anonymous mapping and is mounted nowhere).
    pub(crate) fn add_local_device(&mut self, dev: u64) {
        if self.devices.binary_search(&dev).is_err() {
            self.local_devices.push(dev);
            sort(&mut self.local_devices);
        }
    }
}

fn sort(v: &mut Vec<u64>) {
    v.sort_unstable();
    v.dedup();
}

/// Filesystem types served by a program (FUSE: the one a user namespace lets any user
/// mount) or over a network (a read may wait on the server). 9p and virtiofs are not:
/// their server is the hypervisor (a VM guest's root, Kata, WSL), not a tenant.
fn is_remote(fs: &str) -> bool {
    fs == "fuse"
        || fs == "fuseblk"
        || fs.starts_with("fuse.")
        || matches!(
            fs,
            "nfs"
                | "nfs4"
                | "cifs"
                | "smb3"
                | "smbfs"
                | "ceph"
                | "glusterfs"
                | "afs"
                | "lustre"
                | "gfs2"
                | "ocfs2"
                | "davfs"
        )
}

/// The remote mounts of a `mountinfo` (lines that fit no known shape are skipped).
pub(crate) fn remote(text: &str) -> Remote {
    let mut r = Remote::default();
    for line in text.lines() {
        let Some((mount, fs)) = line.split_once(" - ") else {
            continue;
        };
        let mut fields = mount.split(' ');
        let (Some(id), Some(_parent), Some(dev)) = (fields.next(), fields.next(), fields.next())
        else {
            continue;
        };
        let remote = is_remote(fs.split(' ').next().unwrap_or(""));
        let device = dev.split_once(':').and_then(|(major, minor)| {
            Some(
                u64::from(major.parse::<u32>().ok()?) << 32 | u64::from(minor.parse::<u32>().ok()?),
            )
        });
        if let (Ok(id), Some(device)) = (id.parse::<u64>(), device) {
            let (ids, devices) = if remote {
                (&mut r.mount_ids, &mut r.devices)
            } else {
                (&mut r.local_ids, &mut r.local_devices)
            };
            ids.push(id);
            devices.push(device);
        }
    }
    for v in [
        &mut r.mount_ids,
        &mut r.devices,
        &mut r.local_ids,
        &mut r.local_devices,
    ] {
        sort(v);
    }
    // A device both local and remote (one superblock mounted as both cannot be; a line
    // that says so is not believed) is remote.
    let remote_devices = r.devices.clone();
    r.local_devices
        .retain(|d| remote_devices.binary_search(d).is_err());
    r
}

/// One line of a `mountinfo`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mount {
    pub id: u64,
    pub parent: u64,
    /// `major << 32 | minor`.
    pub device: u64,
    /// Its mount point, octal escapes (`\040` for a space) decoded.
    pub point: String,
    pub fs: String,
}

/// Every line of a `mountinfo` that fits its shape.
pub fn mounts(text: &str) -> Vec<Mount> {
    let mut out = Vec::new();
    for line in text.lines() {
        let Some((mount, fs)) = line.split_once(" - ") else {
            continue;
        };
        let f: Vec<&str> = mount.split(' ').collect();
        let (Some(id), Some(parent), Some(dev), Some(point)) = (
            f.first().and_then(|v| v.parse().ok()),
            f.get(1).and_then(|v| v.parse().ok()),
            f.get(2).and_then(|d| d.split_once(':')),
            f.get(4),
        ) else {
            continue;
        };
        let (Ok(major), Ok(minor)) = (dev.0.parse::<u32>(), dev.1.parse::<u32>()) else {
            continue;
        };
        out.push(Mount {
            id,
            parent,
            device: u64::from(major) << 32 | u64::from(minor),
            point: unescape(point),
            fs: fs.split(' ').next().unwrap_or("").to_string(),
        });
    }
    out
}

/// `\ooo` octal escapes (the kernel's for space, tab, newline and backslash) decoded.
fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        // Three octal digits up to \377 (one byte); anything else is taken literally.
        let octal = b
            .get(i + 1..i + 4)
            .filter(|d| d.iter().all(|c| (b'0'..=b'7').contains(c)))
            .and_then(|d| {
                let v = d.iter().fold(0u32, |v, c| v * 8 + u32::from(c - b'0'));
                u8::try_from(v).ok()
            });
        match (b[i], octal) {
            (b'\\', Some(v)) => {
                out.push(v);
                i += 4;
            }
            (c, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Whether `m` and every mount above it are local (no FUSE or network mount): a path to
/// it never asks a server. A parent missing from the list (the namespace's root's parent)
/// ends the walk; a loop is not local.
pub fn local_path(mounts: &[Mount], m: &Mount) -> bool {
    let mut at = m;
    for _ in 0..mounts.len() + 1 {
        if is_remote(&at.fs) {
            return false;
        }
        match mounts.iter().find(|p| p.id == at.parent && p.id != at.id) {
            Some(p) => at = p,
            None => return true,
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fuse_and_network_mounts_are_remote_by_id_and_device() {
        // As a container with an sshfs mount and an NFS home shows them.
        let text = "1467 1466 0:305 / / rw,relatime - overlay overlay rw,lowerdir=/a\n\
                    1470 1467 0:311 / /proc rw,nosuid - proc proc rw\n\
                    1502 1467 0:325 / /mnt/s rw,nosuid,nodev - fuse.sshfs u@h:/ rw,user_id=0\n\
                    1503 1467 0:52 /home /home rw - nfs4 srv:/home rw,vers=4.2\n\
                    1504 1467 8:1 / /data rw - ext4 /dev/sda1 rw\n\
                    1505 1467 0:326 / /f rw - fuse /dev/fuse rw\n\
                    1506 1467 0:27 / /host rw - 9p host rw,trans=virtio\n\
                    1507 1467 0:28 / /shared rw - virtiofs shared rw\n\
                    garbage\n";
        let mut r = remote(text);
        assert_eq!(r.mount_ids, [1502, 1503, 1505]);
        assert_eq!(r.devices, [52, 325, 326]);
        assert_eq!(r.local_ids, [1467, 1470, 1504, 1506, 1507]);
        assert!(r.has_device(52) && !r.has_device(8 << 32 | 1) && !r.has_device(305));
        assert!(r.has_mount(1505) && !r.has_mount(1467) && !r.has_mount(1506));
        // A mount no line lists (detached with umount -l) is not read, until another
        // namespace's mountinfo lists it as local.
        assert!(r.has_device(330) && r.has_mount(1600));
        let host =
            remote("1600 1 0:330 / /var rw - ext4 /dev/sdb rw\n2 1 0:325 / /s rw - ext4 x rw\n");
        r.add_local(&host);
        assert!(!r.has_device(330) && !r.has_mount(1600));
        // Remote here stays remote, whatever the other says.
        assert!(r.has_device(325));
        r.add_local_device(1);
        assert!(!r.has_device(1));
        r.add_local_device(52);
        assert!(r.has_device(52));
    }

    #[test]
    fn mounts_decode_their_points_and_a_path_under_fuse_is_not_local() {
        let text = "1 0 8:1 / / rw - ext4 /dev/sda1 rw\n\
                    2 1 0:40 / /dev/shm rw - tmpfs tmpfs rw\n\
                    3 1 0:41 / /mnt/my\\040disk rw - tmpfs tmpfs rw\n\
                    4 1 0:42 / /f rw - fuse.sshfs u@h rw\n\
                    5 4 0:43 / /f/t rw - tmpfs tmpfs rw\n\
                    6 6 0:44 / /loop rw - tmpfs tmpfs rw\n";
        let m = mounts(text);
        assert_eq!(m.len(), 6);
        assert_eq!(m[2].point, "/mnt/my disk");
        assert_eq!((m[1].device, m[1].fs.as_str()), (40, "tmpfs"));
        assert!(local_path(&m, &m[1]) && local_path(&m, &m[2]));
        assert!(!local_path(&m, &m[4]), "under a FUSE mount");
        assert!(local_path(&m, &m[5]), "its own parent ends the walk");
        assert_eq!(unescape("a\\134b\\0"), "a\\b\\0");
        // Above \\377 is no byte: kept as written (the fuzzer found it overflowing).
        assert_eq!(unescape("a\\777b\\377"), "a\\777b\u{fffd}");
    }

    #[test]
    fn no_mountinfo_lets_no_file_be_read() {
        let r = Remote::default();
        assert!(r.has_device(8 << 32 | 1) && r.has_mount(1));
        let r = remote("garbage\n1 2 8:1 / / rw - ext4 /dev/sda1 rw\n3 1 0:44 / /f rw - fuse /dev/fuse rw\n4 1 0:44 / /g rw - ext4 x rw\n");
        assert!(!r.has_device(8 << 32 | 1));
        assert!(r.has_device(44), "a device listed as both is remote");
    }

    #[test]
    fn hidepid_is_read_from_the_proc_mount_at_the_point() {
        let text = "22 27 0:21 / /proc rw,relatime - proc proc rw\n\
                    30 27 0:40 / /host/proc rw,relatime - proc proc rw,hidepid=invisible\n\
                    31 27 0:41 / /other rw - tmpfs tmpfs rw,hidepid=2\n\
                    32 27 0:42 / /p2 rw - proc proc rw,hidepid=ptraceable\n";
        assert_eq!(hides_processes(text, "/proc"), Ok(false));
        assert_eq!(hides_processes(text, "/host/proc"), Ok(true));
        assert!(hides_processes(text, "/other").is_err());
        assert_eq!(hides_processes(text, "/p2"), Ok(false));
        assert!(hides_processes(text, "/nowhere").is_err());
        assert!(hides_processes("garbage\n - \n", "/proc").is_err());
    }
}
