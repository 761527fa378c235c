//! A process's own files opened for reads at offsets (`mem`, `pagemap`, `exe`, a mapped
//! library), never on a FUSE or network mount the process can see, and what the process
//! holds open.

use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};

use super::{own, set_path, Buffer, ReadError, Source};
use crate::parse::mountinfo;

impl Source {
    /// Opens `<procfs>/<pid>/<file>` for reads at offsets: `mem` and `pagemap` for the heap
    /// walk (chunk headers and page presence only), `exe` for the Go build info.
    pub(crate) fn open_pid(&self, pid: u32, file: &str) -> Result<PidFile, ReadError> {
        let mut path = PathBuf::new();
        set_path(&mut path, &self.procfs, Some(pid), file);
        match File::open(&path) {
            Ok(file) => Ok(PidFile(file)),
            Err(e) => Err(ReadError::new(&path, e)),
        }
    }

    /// A thread of process `pid` other than its main one (`None` with none): where the
    /// process's memory shows once its main thread has exited while others run
    /// (`/proc/PID` then shows none). The first the directory lists, not all of them.
    pub(crate) fn other_thread(&self, pid: u32, buf: &mut Buffer) -> Option<u32> {
        set_path(&mut buf.path, &self.procfs, Some(pid), "task");
        std::fs::read_dir(&buf.path)
            .ok()?
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
            .find(|&tid| tid != pid)
    }

    /// Whether a thread of process `pid` (of its first 1,024) waits uninterruptibly
    /// (state `D`). A thread queued for the process's mmap lock for writing (an `mmap`,
    /// `munmap` or `brk` behind a holder that waits on a server) waits so, and every read
    /// that takes the lock (`smaps`, `mem`, `pagemap`) would wait behind it for as long.
    /// Each thread's `stat` is read, which takes no lock.
    pub(crate) fn waits_uninterruptibly(&self, pid: u32, buf: &mut Buffer) -> bool {
        set_path(&mut buf.path, &self.procfs, Some(pid), "task");
        let Ok(tasks) = std::fs::read_dir(&buf.path) else {
            return false;
        };
        let tids: Vec<u32> = tasks
            .flatten()
            .take(1024)
            .filter_map(|e| e.file_name().to_str()?.parse().ok())
            .collect();
        tids.into_iter().any(|tid| {
            let file = format!("task/{tid}/stat");
            self.read_pid(pid, &file, buf).is_ok_and(|t| {
                t.rsplit_once(')')
                    .and_then(|(_, rest)| rest.split_ascii_whitespace().next())
                    == Some("D")
            })
        })
    }

    /// The mounts of process `pid` whose files no reader may touch (FUSE, network
    /// filesystems, mounts no `mountinfo` lists: `parse::mountinfo::Remote`), from its own
    /// `mountinfo` and the host's (pid 1's: a container's files can lie on the host's
    /// mounts), with the kernel's shared memory local; `None` when they cannot be told
    /// (longer than a file is read): then no file is. A `mountinfo` that cannot be read
    /// at all (denied, gone) lists no local mount: no file is read either.
    pub(crate) fn remote_mounts(&self, pid: u32, buf: &mut Buffer) -> Option<mountinfo::Remote> {
        let mut listed = |pid: u32| match self.read_pid(pid, "mountinfo", buf) {
            Err(_) => Some(mountinfo::Remote {
                unreadable: true,
                ..Default::default()
            }),
            Ok(_) => (!buf.was_cut()).then(|| mountinfo::remote(buf.text())),
        };
        let mut remote = listed(pid)?;
        if pid != 1 {
            if let Some(host) = listed(1).filter(|h| !h.unreadable) {
                remote.add_local(&host);
            }
        }
        if let Some(shm) = own::shared_memory_device() {
            remote.add_local_device(shm);
        }
        Some(remote)
    }

    /// Opens the file `<procfs>/<pid>/<link>` points at (`exe`) for reads at offsets,
    /// unless it lies on one of `remote`'s mounts: `Ok(None)` then. The link is first
    /// opened `O_PATH`, which asks nothing of the file's filesystem, and its mount told by
    /// `mnt_id`; only a file of a local mount is opened for reading. Without `remote`
    /// (the mounts cannot be told) nothing is opened.
    pub(crate) fn open_pid_local(
        &self,
        pid: u32,
        link: &str,
        remote: Option<&mountinfo::Remote>,
    ) -> Result<Option<PidFile>, ReadError> {
        use std::os::fd::AsRawFd;
        use std::os::unix::fs::OpenOptionsExt;
        let Some(remote) = remote else {
            return Ok(None);
        };
        let mut path = PathBuf::new();
        set_path(&mut path, &self.procfs, Some(pid), link);
        if remote.unreadable {
            let denied = io::Error::from(io::ErrorKind::PermissionDenied);
            return Err(ReadError::new(&path, denied));
        }
        let at = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_PATH)
            .open(&path)
            .map_err(|e| ReadError::new(&path, e))?;
        match own::mount_id_of(at.as_raw_fd()) {
            Some(id) if !remote.has_mount(id) => {}
            _ => return Ok(None),
        }
        let reopened = format!("/proc/self/fd/{}", at.as_raw_fd());
        File::open(&reopened)
            .map(|f| Some(PidFile(f)))
            .map_err(|e| ReadError::new(&path, e))
    }

    /// The bytes allocated to the file a process holds open as `target` (the name its
    /// `fd` link reads, as `/memfd:java_heap (deleted)`): its resident pages, for a memfd
    /// (the kernel's shared memory, and a link count of 0: no directory names it). Its
    /// attributes are taken from the kernel's cache, so a file of that name on a FUSE
    /// mount is never asked of its server. Looks at most 4,096 descriptors; `None` when
    /// none is it.
    pub fn open_file_bytes(&self, pid: u32, target: &str) -> Option<u64> {
        let mut dir = PathBuf::new();
        set_path(&mut dir, &self.procfs, Some(pid), "fd");
        let entries = std::fs::read_dir(&dir).ok()?;
        for entry in entries.flatten().take(4096) {
            let path = entry.path();
            if std::fs::read_link(&path).is_ok_and(|l| l.as_os_str() == target) {
                let st = own::cached_stat(&path)?;
                let memfd = st.links == 0 && Some(st.dev) == own::shared_memory_device();
                return memfd.then(|| st.blocks.saturating_mul(512));
            }
        }
        None
    }
    /// The files process `pid` holds open that no directory names (a memfd, a deleted
    /// file), each with its link's text (`/memfd:NAME (deleted)`, `/dev/shm/x (deleted)`),
    /// its attributes from the kernel's cache ([`own::cached_stat`]: nothing asks a FUSE
    /// server) and the descriptor's path. Looks at no more than `budget` descriptors,
    /// taking each it looked at from it: a process with a million open files costs what the
    /// budget allows.
    /// `Ok(false)` when the budget ran out before the last descriptor.
    pub(crate) fn unlinked_files(
        &self,
        pid: u32,
        budget: &mut usize,
        mut each: impl FnMut(&str, own::Cached, &Path),
    ) -> Result<bool, ReadError> {
        let mut dir = PathBuf::new();
        set_path(&mut dir, &self.procfs, Some(pid), "fd");
        let entries = std::fs::read_dir(&dir).map_err(|e| ReadError::new(&dir, e))?;
        for entry in entries.flatten() {
            let Some(left) = budget.checked_sub(1) else {
                return Ok(false);
            };
            *budget = left;
            let path = entry.path();
            let Ok(link) = std::fs::read_link(&path) else {
                continue;
            };
            let Some(link) = link.to_str().filter(|l| l.ends_with(" (deleted)")) else {
                continue;
            };
            if let Some(st) = own::cached_stat(&path).filter(|st| st.links == 0) {
                each(link, st, &path);
            }
        }
        Ok(true)
    }
}

/// A file of a process read at offsets (`pread`), never as a stream.
#[derive(Debug)]
pub struct PidFile(File);

impl PidFile {
    /// Fills `buf` from `offset`; a short read is an error.
    pub fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        use std::os::unix::fs::FileExt;
        self.0.read_exact_at(buf, offset)
    }

    /// Reads what there is from `offset` into `buf`, once; the count may be short.
    pub(crate) fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<usize> {
        use std::os::unix::fs::FileExt;
        self.0.read_at(buf, offset)
    }

    /// What tells this file from any other and from an earlier version of itself: its
    /// device, inode, size and modification time.
    pub fn identity(&self) -> io::Result<(u64, u64, u64, i64)> {
        use std::os::unix::fs::MetadataExt;
        let m = self.0.metadata()?;
        Ok((m.dev(), m.ino(), m.size(), m.mtime()))
    }

    /// The open file, to read in parts (an executable's sections).
    pub fn file(&self) -> &File {
        &self.0
    }
}
