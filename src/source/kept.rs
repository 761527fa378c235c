//! Files kept open between scans and re-read with `pread`: each process's `statm`, within
//! a budget of the open-files limit, and the setting files on the real file systems.

use std::fs::File;
use std::io;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use super::roots::is_fs;
use super::{set_path, Buffer, ReadError, Source, START_BYTES};

/// Setting files kept open at most (a kernel with mTHP has some 200 worth keeping).
const MAX_KEPT_SETTINGS: usize = 512;

impl Source {
    /// Whether `--path.procfs` is a proc filesystem. Only there does a kept descriptor
    /// tell that its process ended (`ESRCH`, even once the pid is reused); a file of a
    /// fixture tree stays readable as it was.
    pub(crate) fn is_procfs(&self) -> bool {
        is_fs(&self.procfs, nix::sys::statfs::PROC_SUPER_MAGIC)
    }

    /// The same roots, every setting file opened each time it is read: when the open-files
    /// limit is too low to keep them.
    pub(crate) fn without_kept_settings(mut self) -> Self {
        self.settings = None;
        self
    }

    /// Opens `<procfs>/<pid>/<file>` to keep it between scans, within `budget`: `None`
    /// when the budget or the open-files limit is spent (the caller then opens the file
    /// each time, as for a fixture tree).
    pub(crate) fn keep_pid(
        &self,
        pid: u32,
        file: &'static str,
        budget: &Arc<Descriptors>,
        buf: &mut Buffer,
    ) -> Result<Option<Kept>, ReadError> {
        if !budget.acquire() {
            return Ok(None);
        }
        set_path(&mut buf.path, &self.procfs, Some(pid), file);
        match File::open(&buf.path) {
            Ok(f) => Ok(Some(Kept {
                file: f,
                pid,
                name: file,
                budget: budget.clone(),
            })),
            Err(e) => {
                budget.release();
                if matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE)) {
                    budget.refused.store(true, Ordering::Relaxed);
                    return Ok(None);
                }
                Err(ReadError::new(&buf.path, e))
            }
        }
    }

    /// Reads a kept file again from its start, with one `pread`: the whole of a small
    /// file the kernel produces in one show (`statm`). `ReadError::Gone` once the process
    /// has ended.
    pub(crate) fn read_kept<'b>(
        &self,
        kept: &Kept,
        buf: &'b mut Buffer,
    ) -> Result<&'b str, ReadError> {
        read_again(&kept.file, buf).map_err(|e| {
            let path = self.procfs.join(kept.pid.to_string()).join(kept.name);
            ReadError::new(&path, e)
        })
    }

    /// Reads a setting or counter file (`path` under either root), kept open between scans
    /// on the real file systems: a `pread` from its start makes the kernel show it anew.
    /// A file of a fixture tree is opened each time, so a test may replace it.
    pub(crate) fn read_setting<'b>(
        &self,
        path: &Path,
        buf: &'b mut Buffer,
    ) -> Result<&'b str, ReadError> {
        let Some(cache) = &self.settings else {
            return self.read_path(path, buf);
        };
        let lock = || cache.lock().unwrap_or_else(|p| p.into_inner());
        let kept = lock().get(path).cloned();
        let file = match kept {
            Some(f) => f,
            None => {
                let f = Arc::new(File::open(path).map_err(|e| ReadError::new(path, e))?);
                let mut cache = lock();
                if cache.len() < MAX_KEPT_SETTINGS {
                    cache.insert(path.to_path_buf(), f.clone());
                }
                f
            }
        };
        read_again(&file, buf).map_err(|e| {
            // Gone (a module unloaded, an mTHP size removed): opened anew next time.
            lock().remove(path);
            ReadError::new(path, e)
        })
    }
}

/// Reads a kept file from its start with one `pread`: the kernel shows a `/proc` or
/// `/sys` file anew for a read at offset 0, whole when it is as small as these.
fn read_again<'b>(file: &File, buf: &'b mut Buffer) -> io::Result<&'b str> {
    use std::os::unix::fs::FileExt;
    buf.len = 0;
    buf.cut = false;
    if buf.data.len() < START_BYTES {
        buf.data.resize(START_BYTES, 0);
    }
    let n = loop {
        match file.read_at(&mut buf.data, 0) {
            Ok(n) => break n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    };
    buf.len = n;
    Ok(std::str::from_utf8(&buf.data[..n]).unwrap_or_default())
}

/// How many files of processes may be kept open between scans: the open-files limit less
/// what the server, the deep tier and the system files need.
#[derive(Debug)]
pub struct Descriptors {
    open: AtomicUsize,
    limit: usize,
    /// An open failed with `EMFILE` or `ENFILE` before the budget was spent.
    refused: AtomicBool,
}

impl Descriptors {
    pub fn new(limit: usize) -> Arc<Descriptors> {
        Arc::new(Descriptors {
            open: AtomicUsize::new(0),
            limit,
            refused: AtomicBool::new(false),
        })
    }

    /// Kept files open now.
    pub fn open(&self) -> usize {
        self.open.load(Ordering::Relaxed)
    }

    pub fn limit(&self) -> usize {
        self.limit
    }

    /// Whether the kernel refused an open (the limit was lower than the budget assumed).
    pub fn refused(&self) -> bool {
        self.refused.load(Ordering::Relaxed)
    }

    pub(super) fn acquire(&self) -> bool {
        self.open
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
                (n < self.limit).then_some(n + 1)
            })
            .is_ok()
    }

    pub(super) fn release(&self) {
        self.open.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A file of a process kept open between scans and re-read with `pread`: the cheapest
/// way to learn whether the process changed (`statm`: 2 µs against 8 µs for open, read
/// and close). Closing it gives its place in the budget back.
#[derive(Debug)]
pub struct Kept {
    file: File,
    /// The process and file, for the path an error names (not kept: a few thousand of
    /// them would be a few hundred kilobytes).
    pid: u32,
    name: &'static str,
    budget: Arc<Descriptors>,
}

impl Drop for Kept {
    fn drop(&mut self) {
        self.budget.release();
    }
}
