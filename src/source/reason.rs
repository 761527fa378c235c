//! Why a read failed: the reason a caller acts on and `membloat_scan_errors_total{reason}`
//! reports, and the error of one failed read with its path.

use std::io;
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
    /// A read that did not finish within `--collector.processes.read-timeout`: a process
    /// (its memory map lock held elsewhere, or a huge process) left for later, or a system
    /// file that never answers.
    Timeout,
    /// `/proc` is mounted with `hidepid` and the exporter lacks CAP_SYS_PTRACE: other
    /// users' processes are not listed at all (counted once per scan).
    Hidden,
}

impl Reason {
    pub const ALL: [Reason; 7] = [
        Reason::Vanished,
        Reason::Denied,
        Reason::Malformed,
        Reason::Unsupported,
        Reason::Io,
        Reason::Timeout,
        Reason::Hidden,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Reason::Vanished => "vanished",
            Reason::Denied => "permission_denied",
            Reason::Malformed => "malformed",
            Reason::Unsupported => "unsupported",
            Reason::Io => "io",
            Reason::Timeout => "timeout",
            Reason::Hidden => "hidden",
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
    pub(super) fn new(path: &Path, err: io::Error) -> Self {
        const ESRCH: i32 = 3;
        // What a sysfs or cgroup file that was removed after it was opened answers (kernfs
        // deactivates its node): a cgroup removed between the walk's listing and its read.
        const ENODEV: i32 = 19;
        match err.kind() {
            io::ErrorKind::NotFound => ReadError::Gone(path.to_path_buf()),
            io::ErrorKind::PermissionDenied => ReadError::Denied(path.to_path_buf()),
            _ if matches!(err.raw_os_error(), Some(ESRCH | ENODEV)) => {
                ReadError::Gone(path.to_path_buf())
            }
            _ => ReadError::Io {
                path: path.to_path_buf(),
                source: err,
            },
        }
    }

    /// The reason for a file of a process: a missing file means the process went away.
    pub(crate) fn process_reason(&self) -> Reason {
        match self {
            ReadError::Gone(_) => Reason::Vanished,
            ReadError::Denied(_) => Reason::Denied,
            ReadError::Io { .. } => Reason::Io,
        }
    }

    /// The reason for a system-wide file: a missing file means this kernel lacks it, and
    /// so does one the kernel refuses to read with EOPNOTSUPP (`/proc/pressure/*` on
    /// kernels booted `psi=0` that still show it).
    pub(crate) fn system_reason(&self) -> Reason {
        const EOPNOTSUPP: i32 = 95;
        match self {
            ReadError::Gone(_) => Reason::Unsupported,
            ReadError::Denied(_) => Reason::Denied,
            ReadError::Io { source, .. } if source.raw_os_error() == Some(EOPNOTSUPP) => {
                Reason::Unsupported
            }
            ReadError::Io { .. } => Reason::Io,
        }
    }
}
