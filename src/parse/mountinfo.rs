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
/// server is any user's program, which can hold a read forever) and network filesystems
/// (a read may wait on a server for minutes). By mount id (`fdinfo`'s `mnt_id`) and by
/// device (`major << 32 | minor`, as smaps' mappings give it).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Remote {
    pub mount_ids: Vec<u64>,
    pub devices: Vec<u64>,
}

impl Remote {
    pub fn has_device(&self, dev: u64) -> bool {
        self.devices.contains(&dev)
    }

    pub fn has_mount(&self, id: u64) -> bool {
        self.mount_ids.contains(&id)
    }
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
pub fn remote(text: &str) -> Remote {
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
        if !is_remote(fs.split(' ').next().unwrap_or("")) {
            continue;
        }
        let device = dev.split_once(':').and_then(|(major, minor)| {
            Some(
                u64::from(major.parse::<u32>().ok()?) << 32 | u64::from(minor.parse::<u32>().ok()?),
            )
        });
        if let (Ok(id), Some(device)) = (id.parse::<u64>(), device) {
            r.mount_ids.push(id);
            r.devices.push(device);
        }
    }
    r
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
        let r = remote(text);
        assert_eq!(r.mount_ids, [1502, 1503, 1505]);
        assert_eq!(r.devices, [325, 52, 326]);
        assert!(r.has_device(52) && !r.has_device(8 << 32 | 1));
        assert!(r.has_mount(1505) && !r.has_mount(1467));
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
