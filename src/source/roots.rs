//! Where `/proc` and `/sys` are (`Source`, whose reads are in `source.rs` and its other
//! modules), and a path under them.

use std::collections::HashMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// Setting files kept open, by path.
pub(super) type KeptSettings = HashMap<PathBuf, Arc<File>>;

/// Where `/proc` and `/sys` are.
#[derive(Debug, Clone)]
pub struct Source {
    pub(super) procfs: PathBuf,
    pub(super) sysfs: PathBuf,
    /// Setting and counter files kept open between scans and re-read with `pread` (THP
    /// and khugepaged, the sysctls: some 200 files a scan on a kernel with mTHP), when
    /// both roots are the real file systems; shared by the clones.
    pub(super) settings: Option<Arc<Mutex<KeptSettings>>>,
}

/// `<root>/<pid>/<file>` or `<root>/<file>`, written into `path` without allocating once
/// it has grown to fit.
pub(super) fn set_path(path: &mut PathBuf, root: &Path, pid: Option<u32>, file: &str) {
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

/// Whether `path` is on a file system of type `magic`.
pub(super) fn is_fs(path: &Path, magic: nix::sys::statfs::FsType) -> bool {
    nix::sys::statfs::statfs(path).is_ok_and(|s| s.filesystem_type() == magic)
}
