//! The only module that reads /proc and /sys (the two configuration files, the web config
//! and the matcher file, are read once at start by their owners). Every root is a value
//! (`--path.procfs`, `--path.sysfs`), so tests run in parallel against different fixture
//! trees.

use std::collections::HashMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

mod kept;
mod kmsg;
pub mod own;
mod pid;
mod reason;
mod text;
use crate::parse::ParseError;
pub use kept::{Descriptors, Kept};
pub use kmsg::{KernelLog, LogRead};
pub use pid::PidFile;
pub use reason::{ReadError, Reason};
#[cfg(test)]
use text::LINE_PIECE_BYTES;
use text::{read_lines, read_text};

/// Setting files kept open, by path.
type KeptSettings = HashMap<PathBuf, Arc<File>>;

/// Where `/proc` and `/sys` are.
#[derive(Debug, Clone)]
pub struct Source {
    procfs: PathBuf,
    sysfs: PathBuf,
    /// Setting and counter files kept open between scans and re-read with `pread` (THP
    /// and khugepaged, the sysctls: some 200 files a scan on a kernel with mTHP), when
    /// both roots are the real file systems; shared by the clones.
    settings: Option<Arc<Mutex<KeptSettings>>>,
}

/// Files larger than this are cut: no small file the exporter reads is near it, and a
/// hostile or broken file cannot make a scan allocate without bound.
const MAX_FILE_BYTES: usize = 1 << 20;

/// `/proc/PID/smaps` is about 1.2 KiB per mapping: this holds 50,000 mappings.
pub const MAX_SMAPS_BYTES: usize = 64 << 20;

/// Setting files kept open at most (a kernel with mTHP has some 200 worth keeping).
const MAX_KEPT_SETTINGS: usize = 512;

/// What a buffer starts with and shrinks back to: every small file fits.
const START_BYTES: usize = 16 << 10;

/// Files of a process that the kernel produces whole, in one `seq_file` show (or one
/// `simple_read_from_buffer`): a read shorter than the space offered has returned the
/// whole file, so the read that would return 0 is saved. `smaps`, `maps` and `cmdline` are
/// produced in parts and are read until a read returns 0.
const WHOLE_IN_ONE_READ: [&str; 7] = [
    "stat",
    "statm",
    "status",
    "smaps_rollup",
    "oom_score",
    "oom_score_adj",
    "cgroup",
];

/// A reusable read buffer and path: a scan allocates nothing per file once warm.
#[derive(Debug, Default)]
pub struct Buffer {
    /// Always zero-filled up to its length; `len` bytes of it are the file.
    data: Vec<u8>,
    len: usize,
    path: PathBuf,
    /// The last file was longer than the limit and was cut.
    cut: bool,
}

impl Buffer {
    /// True when the last file read was cut at the size limit.
    pub fn was_cut(&self) -> bool {
        self.cut
    }

    /// The text of the last file read.
    pub fn text(&self) -> &str {
        std::str::from_utf8(&self.data[..self.len]).unwrap_or_default()
    }

    /// Gives back memory a large file (a deep-tier smaps) made the buffer take.
    pub fn shrink(&mut self) {
        if self.data.len() > START_BYTES {
            self.data.truncate(START_BYTES);
            self.data.shrink_to_fit();
            self.len = self.len.min(START_BYTES);
        }
    }
}

/// The buffers of one reader thread.
#[derive(Debug, Default)]
pub struct Buffers {
    pub main: Buffer,
    /// For a second file while the first is still in use (`cmdline` beside `stat`).
    pub aux: Buffer,
}

impl Source {
    pub fn new(procfs: impl Into<PathBuf>, sysfs: impl Into<PathBuf>) -> Self {
        use nix::sys::statfs::{PROC_SUPER_MAGIC, SYSFS_MAGIC};
        let (procfs, sysfs) = (procfs.into(), sysfs.into());
        let real = kept::is_fs(&procfs, PROC_SUPER_MAGIC) && kept::is_fs(&sysfs, SYSFS_MAGIC);
        Source {
            procfs,
            sysfs,
            settings: real.then(Default::default),
        }
    }

    pub fn procfs(&self) -> &Path {
        &self.procfs
    }

    pub fn sysfs(&self) -> &Path {
        &self.sysfs
    }

    /// Whether the pids of `--path.procfs` are the exporter's own (its `self` link names
    /// the exporter): then a pid there can be passed to system calls such as
    /// `process_vm_readv`. A host `/proc` seen from a container without the host's PID
    /// namespace names other processes by the same numbers.
    pub fn pids_are_ours(&self) -> bool {
        std::fs::read_link(self.procfs.join("self"))
            .ok()
            .and_then(|l| l.to_str()?.parse::<u32>().ok())
            == Some(std::process::id())
    }

    /// Reads `<procfs>/<rel>` as text into `buf` (replacing its content).
    pub fn read_proc<'b>(&self, rel: &str, buf: &'b mut Buffer) -> Result<&'b str, ReadError> {
        set_path(&mut buf.path, &self.procfs, None, rel);
        read_text(buf, false, MAX_FILE_BYTES)
    }

    /// Reads `<procfs>/<pid>/<file>` as text into `buf`.
    pub fn read_pid<'b>(
        &self,
        pid: u32,
        file: &str,
        buf: &'b mut Buffer,
    ) -> Result<&'b str, ReadError> {
        set_path(&mut buf.path, &self.procfs, Some(pid), file);
        read_text(buf, WHOLE_IN_ONE_READ.contains(&file), MAX_FILE_BYTES)
    }

    /// Reads `<procfs>/<rel>`, a system file, and parses it: a read error becomes its
    /// [`ReadError::system_reason`] (a missing file is a kernel without it), a failed
    /// parse [`Reason::Malformed`].
    pub fn parse_proc<T>(
        &self,
        rel: &str,
        buf: &mut Buffer,
        parse: impl FnOnce(&str) -> Result<T, ParseError>,
    ) -> Result<T, Reason> {
        let text = self.read_proc(rel, buf).map_err(|e| e.system_reason())?;
        parse(text).map_err(|e| malformed(&buf.path, &e))
    }

    /// Reads `<procfs>/<pid>/<file>` and parses it: a read error becomes its
    /// [`ReadError::process_reason`], a parse error [`Reason::Malformed`], with what was
    /// wrong in the debug log. The one place that says how a process file is read.
    pub fn parse_pid<T>(
        &self,
        pid: u32,
        file: &str,
        buf: &mut Buffer,
        parse: impl FnOnce(&str) -> Result<T, ParseError>,
    ) -> Result<T, Reason> {
        let text = self
            .read_pid(pid, file, buf)
            .map_err(|e| e.process_reason())?;
        parse(text).map_err(|e| malformed(&buf.path, &e))
    }

    /// Reads `<procfs>/<pid>/smaps` a piece at a time, giving `line` each line in turn:
    /// the file is never held whole, so 60,000 mappings cost what the caller keeps of
    /// them. At most [`MAX_SMAPS_BYTES`] are read; `Ok(false)` when the file was longer.
    pub fn read_smaps(
        &self,
        pid: u32,
        buf: &mut Buffer,
        line: impl FnMut(&str),
    ) -> Result<bool, ReadError> {
        set_path(&mut buf.path, &self.procfs, Some(pid), "smaps");
        read_lines(buf, MAX_SMAPS_BYTES, line)
    }

    /// Reads an absolute path (under the sysfs root, from [`Source::sysfs`]) as text.
    pub fn read_path<'b>(&self, path: &Path, buf: &'b mut Buffer) -> Result<&'b str, ReadError> {
        buf.path.clear();
        buf.path.push(path);
        read_text(buf, false, MAX_FILE_BYTES)
    }

    /// The process directories of `<procfs>`, sorted, and how many entries looked numeric
    /// but were not a pid as the kernel writes one (`018266`, `+90003`, out of range):
    /// read as pids they would report one process twice.
    pub fn pids(&self) -> Result<(Vec<u32>, u64), ReadError> {
        let entries =
            std::fs::read_dir(&self.procfs).map_err(|e| ReadError::new(&self.procfs, e))?;
        let mut pids = Vec::new();
        let mut odd = 0;
        for entry in entries.flatten() {
            let name = entry.file_name();
            let Some(name) = name.to_str() else { continue };
            match canonical_pid(name) {
                Some(pid) => pids.push(pid),
                None if name.starts_with(|c: char| c.is_ascii_digit() || c == '+') => odd += 1,
                None => {}
            }
        }
        pids.sort_unstable();
        pids.dedup();
        Ok((pids, odd))
    }

    /// True when `path` exists: a kernel feature (a sysfs directory) is there.
    pub fn exists(&self, path: &Path) -> bool {
        path.exists()
    }

    /// Whether `--path.procfs` is a proc mount with `hidepid` that hides other users'
    /// processes from this exporter: it lacks CAP_SYS_PTRACE, which `hidepid` exempts.
    /// Read from the exporter's own mount table and capabilities (`/proc/self`); a
    /// `gid=` exemption is not detected.
    pub fn hides_processes(&self) -> bool {
        let point = std::fs::canonicalize(&self.procfs).unwrap_or_else(|_| self.procfs.clone());
        let Some(point) = point.to_str() else {
            return false;
        };
        let hides = std::fs::read_to_string("/proc/self/mountinfo")
            .ok()
            // No proc mount at the point: a fixture tree, which hides nothing.
            .and_then(|t| crate::parse::mountinfo::hides_processes(&t, point).ok())
            .unwrap_or(false);
        hides && !own::has_cap_sys_ptrace()
    }

    /// Whether a kernel feature's directory can be used: `Unsupported` when it does not
    /// exist, `Denied` when the exporter may not look (an unreadable `--path.sysfs`).
    pub fn feature(&self, path: &Path) -> Result<(), Reason> {
        std::fs::metadata(path)
            .map(drop)
            .map_err(|e| ReadError::new(path, e).system_reason())
    }

    /// The subdirectories of `dir`, for walking the cgroup tree.
    ///
    /// At most `max` are listed: a directory with more (a delegated cgroup subtree is
    /// anyone's to fill) gives the first `max` and `true`, never the rest in memory.
    pub fn subdirs(&self, dir: &Path, max: usize) -> Result<(Vec<PathBuf>, bool), ReadError> {
        let entries = std::fs::read_dir(dir).map_err(|e| ReadError::new(dir, e))?;
        let mut dirs = Vec::new();
        for e in entries.flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                if dirs.len() == max {
                    return Ok((dirs, true));
                }
                dirs.push(e.path());
            }
        }
        Ok((dirs, false))
    }

    /// Names of the entries of a directory, sorted; used for `hugepages-*kB`.
    pub fn dir_names(&self, dir: &Path) -> Result<Vec<String>, ReadError> {
        let entries = std::fs::read_dir(dir).map_err(|e| ReadError::new(dir, e))?;
        let mut names: Vec<String> = entries
            .filter_map(|entry| entry.ok()?.file_name().into_string().ok())
            .collect();
        names.sort();
        Ok(names)
    }
}

/// `<root>/<pid>/<file>` or `<root>/<file>`, written into `path` without allocating once
/// it has grown to fit.
fn set_path(path: &mut PathBuf, root: &Path, pid: Option<u32>, file: &str) {
    let s = path.as_mut_os_string();
    s.clear();
    s.push(root.as_os_str());
    s.push("/");
    if let Some(pid) = pid {
        let mut digits = [0u8; 10];
        let mut i = digits.len();
        let mut n = pid;
        loop {
            i -= 1;
            digits[i] = b'0' + (n % 10) as u8;
            n /= 10;
            if n == 0 {
                break;
            }
        }
        // ASCII digits are valid UTF-8.
        s.push(std::str::from_utf8(&digits[i..]).unwrap_or("0"));
        s.push("/");
    }
    s.push(file);
}

/// A pid written as the kernel writes it: decimal digits, no sign, no leading zero.
fn canonical_pid(name: &str) -> Option<u32> {
    let digits = !name.is_empty() && name.bytes().all(|b| b.is_ascii_digit());
    if !digits || name.starts_with('0') {
        return None;
    }
    name.parse().ok().filter(|&pid| pid > 0)
}

/// A file that was read but did not parse: the caller counts it as malformed, and the
/// debug log says which file and what was wrong (a kernel whose format changed shows here
/// first).
fn malformed(path: &Path, e: &ParseError) -> Reason {
    crate::log!(Debug, "malformed file", path = path.display(), error = e);
    Reason::Malformed
}

#[cfg(test)]
mod tests;
