//! The only module that reads the filesystem. Every root is a value (`--path.procfs`,
//! `--path.sysfs`), so tests run in parallel against different fixture trees.

use std::fs::File;
use std::io::{self, Read};
use std::path::{Path, PathBuf};

/// Why a read failed, in the terms a caller acts on. The label value of each reason is
/// what `membloat_scan_errors_total{reason}` reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Reason {
    /// The process exited between listing and reading (ENOENT, ESRCH).
    Vanished,
    /// EACCES/EPERM: another user's process without CAP_SYS_PTRACE.
    Denied,
    /// The file was read but its content made no sense.
    Malformed,
    /// The file or directory does not exist on this kernel (no THP, no PSI).
    Unsupported,
    /// Any other I/O error.
    Io,
}

impl Reason {
    pub const ALL: [Reason; 5] = [
        Reason::Vanished,
        Reason::Denied,
        Reason::Malformed,
        Reason::Unsupported,
        Reason::Io,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Reason::Vanished => "vanished",
            Reason::Denied => "permission_denied",
            Reason::Malformed => "malformed",
            Reason::Unsupported => "unsupported",
            Reason::Io => "io",
        }
    }
}

/// A failed read of one file, carrying its path.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("{}: no such file or process", .0.display())]
    Gone(PathBuf),
    #[error("{}: permission denied", .0.display())]
    Denied(PathBuf),
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

impl ReadError {
    fn new(path: &Path, err: io::Error) -> Self {
        const ESRCH: i32 = 3;
        match err.kind() {
            io::ErrorKind::NotFound => ReadError::Gone(path.to_path_buf()),
            io::ErrorKind::PermissionDenied => ReadError::Denied(path.to_path_buf()),
            _ if err.raw_os_error() == Some(ESRCH) => ReadError::Gone(path.to_path_buf()),
            _ => ReadError::Io {
                path: path.to_path_buf(),
                source: err,
            },
        }
    }

    /// The reason for a file of a process: a missing file means the process went away.
    pub fn process_reason(&self) -> Reason {
        match self {
            ReadError::Gone(_) => Reason::Vanished,
            ReadError::Denied(_) => Reason::Denied,
            ReadError::Io { .. } => Reason::Io,
        }
    }

    /// The reason for a system-wide file: a missing file means this kernel lacks it.
    pub fn system_reason(&self) -> Reason {
        match self {
            ReadError::Gone(_) => Reason::Unsupported,
            ReadError::Denied(_) => Reason::Denied,
            ReadError::Io { .. } => Reason::Io,
        }
    }
}

/// Where `/proc` and `/sys` are.
#[derive(Debug, Clone)]
pub struct Source {
    procfs: PathBuf,
    sysfs: PathBuf,
}

/// Files under `/proc` larger than this are cut: no file the exporter reads is near it,
/// and a hostile or broken file cannot make a scan allocate without bound.
const MAX_FILE_BYTES: u64 = 1 << 20;

impl Source {
    pub fn new(procfs: impl Into<PathBuf>, sysfs: impl Into<PathBuf>) -> Self {
        Source {
            procfs: procfs.into(),
            sysfs: sysfs.into(),
        }
    }

    pub fn procfs(&self) -> &Path {
        &self.procfs
    }

    pub fn sysfs(&self) -> &Path {
        &self.sysfs
    }

    /// Reads `<procfs>/<rel>` as text into `buf` (replacing its content).
    pub fn read_proc<'b>(&self, rel: &str, buf: &'b mut Vec<u8>) -> Result<&'b str, ReadError> {
        read_text(&self.procfs.join(rel), buf)
    }

    /// Reads `<procfs>/<pid>/<file>` as text into `buf`.
    pub fn read_pid<'b>(
        &self,
        pid: u32,
        file: &str,
        buf: &'b mut Vec<u8>,
    ) -> Result<&'b str, ReadError> {
        let mut path = self.procfs.join(pid.to_string());
        path.push(file);
        read_text(&path, buf)
    }

    /// Reads an absolute path (under the sysfs root, from [`Source::sysfs`]) as text.
    pub fn read_path<'b>(&self, path: &Path, buf: &'b mut Vec<u8>) -> Result<&'b str, ReadError> {
        read_text(path, buf)
    }

    /// The numeric entries of `<procfs>`, unsorted.
    pub fn pids(&self) -> Result<Vec<u32>, ReadError> {
        let entries =
            std::fs::read_dir(&self.procfs).map_err(|e| ReadError::new(&self.procfs, e))?;
        Ok(entries
            .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse().ok())
            .collect())
    }

    /// True when `path` exists: a kernel feature (a sysfs directory) is there.
    pub fn exists(&self, path: &Path) -> bool {
        path.exists()
    }

    /// The subdirectories of `dir`, for walking the cgroup tree.
    pub fn subdirs(&self, dir: &Path) -> Result<Vec<PathBuf>, ReadError> {
        let entries = std::fs::read_dir(dir).map_err(|e| ReadError::new(dir, e))?;
        Ok(entries
            .flatten()
            .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
            .map(|e| e.path())
            .collect())
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

fn read_text<'b>(path: &Path, buf: &'b mut Vec<u8>) -> Result<&'b str, ReadError> {
    buf.clear();
    File::open(path)
        .and_then(|f| f.take(MAX_FILE_BYTES).read_to_end(buf))
        .map_err(|e| ReadError::new(path, e))?;
    // /proc text is ASCII except for names a process gives itself; invalid UTF-8 there is
    // replaced rather than failing the whole file.
    if std::str::from_utf8(buf).is_err() {
        let lossy = String::from_utf8_lossy(buf).into_owned();
        *buf = lossy.into_bytes();
    }
    Ok(std::str::from_utf8(buf).unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_file_is_gone_and_its_reason_depends_on_the_caller() {
        let dir = tempfile::tempdir().unwrap();
        let source = Source::new(dir.path(), dir.path());
        let err = source.read_pid(1, "status", &mut Vec::new()).unwrap_err();
        assert!(matches!(err, ReadError::Gone(_)));
        assert_eq!(err.process_reason(), Reason::Vanished);
        assert_eq!(err.system_reason(), Reason::Unsupported);
    }

    #[test]
    fn invalid_utf8_is_replaced_not_fatal() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("comm"), b"a\xffb\n").unwrap();
        let source = Source::new(dir.path(), dir.path());
        let mut buf = Vec::new();
        assert_eq!(source.read_proc("comm", &mut buf).unwrap(), "a\u{fffd}b\n");
    }

    #[test]
    fn pids_lists_numeric_entries_only() {
        let dir = tempfile::tempdir().unwrap();
        for name in ["1", "42", "self", "sys"] {
            std::fs::create_dir(dir.path().join(name)).unwrap();
        }
        let mut pids = Source::new(dir.path(), dir.path()).pids().unwrap();
        pids.sort();
        assert_eq!(pids, [1, 42]);
    }
}
