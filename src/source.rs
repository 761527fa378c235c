//! The only module that reads /proc and /sys (the two configuration files, the web config
//! and the matcher file, are read once at start by their owners). Every root is a value
//! (`--path.procfs`, `--path.sysfs`), so tests run in parallel against different fixture
//! trees.

use std::path::{Path, PathBuf};

mod buffer;
mod exits;
mod kept;
mod kmsg;
pub mod own;
mod pid;
mod reason;
mod roots;
mod text;
use crate::parse::ParseError;
use buffer::START_BYTES;
pub use buffer::{Buffer, Buffers};
pub use exits::{Exits, Watch};
pub use kept::{Descriptors, Kept};
pub use kmsg::{KernelLog, LogRead};
pub use pid::PidFile;
pub use reason::{ReadError, Reason};
use roots::set_path;
pub use roots::Source;
#[cfg(test)]
use text::LINE_PIECE_BYTES;
use text::{read_lines, read_text};

/// Files larger than this are cut: no small file the exporter reads is near it, and a
/// hostile or broken file cannot make a scan allocate without bound.
const MAX_FILE_BYTES: usize = 1 << 20;

/// `/proc/PID/smaps` is about 1.2 KiB per mapping: this holds 50,000 mappings.
pub const MAX_SMAPS_BYTES: usize = 64 << 20;

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

impl Source {
    pub fn new(procfs: impl Into<PathBuf>, sysfs: impl Into<PathBuf>) -> Self {
        use nix::sys::statfs::{PROC_SUPER_MAGIC, SYSFS_MAGIC};
        let (procfs, sysfs) = (procfs.into(), sysfs.into());
        let real = roots::is_fs(&procfs, PROC_SUPER_MAGIC) && roots::is_fs(&sysfs, SYSFS_MAGIC);
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
    pub(crate) fn pids_are_ours(&self) -> bool {
        std::fs::read_link(self.procfs.join("self"))
            .ok()
            .and_then(|l| l.to_str()?.parse::<u32>().ok())
            == Some(std::process::id())
    }

    /// Reads `<procfs>/<rel>` as text into `buf` (replacing its content).
    pub(crate) fn read_proc<'b>(
        &self,
        rel: &str,
        buf: &'b mut Buffer,
    ) -> Result<&'b str, ReadError> {
        set_path(&mut buf.path, &self.procfs, None, rel);
        read_text(buf, false, MAX_FILE_BYTES)
    }

    /// Reads `<procfs>/<pid>/<file>` as text into `buf`.
    pub(crate) fn read_pid<'b>(
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
    pub(crate) fn parse_proc<T>(
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
    pub(crate) fn parse_pid<T>(
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
    pub(crate) fn read_smaps(
        &self,
        pid: u32,
        buf: &mut Buffer,
        line: impl FnMut(&str),
    ) -> Result<bool, ReadError> {
        self.read_pid_lines(pid, "smaps", buf, MAX_SMAPS_BYTES, line)
    }

    /// Reads `<procfs>/<pid>/<file>` a piece at a time, giving `line` each line in turn
    /// (a socket table of 100,000 sockets is never held whole). At most `max` bytes are
    /// read; `Ok(false)` when the file was longer.
    pub(crate) fn read_pid_lines(
        &self,
        pid: u32,
        file: &str,
        buf: &mut Buffer,
        max: usize,
        line: impl FnMut(&str),
    ) -> Result<bool, ReadError> {
        set_path(&mut buf.path, &self.procfs, Some(pid), file);
        read_lines(buf, max, line)
    }

    /// Reads an absolute path (under the sysfs root, from [`Source::sysfs`]) as text.
    pub(crate) fn read_path<'b>(
        &self,
        path: &Path,
        buf: &'b mut Buffer,
    ) -> Result<&'b str, ReadError> {
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
    pub(crate) fn subdirs(
        &self,
        dir: &Path,
        max: usize,
    ) -> Result<(Vec<PathBuf>, bool), ReadError> {
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
    pub(crate) fn dir_names(&self, dir: &Path) -> Result<Vec<String>, ReadError> {
        let entries = std::fs::read_dir(dir).map_err(|e| ReadError::new(dir, e))?;
        let mut names: Vec<String> = entries
            .filter_map(|entry| entry.ok()?.file_name().into_string().ok())
            .collect();
        names.sort();
        Ok(names)
    }
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
