//! The exporter's own process, for its `process_*` metrics: always the real `/proc/self`,
//! whatever `--path.procfs` says (in a container that is the host's `/proc`, where `self`
//! is still this process, but the fixture trees have none). These files never block: no
//! other process's mmap lock is involved.

/// A positive value of `sysconf(3)`, or `fallback` when the C library has none.
fn sysconf(var: nix::unistd::SysconfVar, fallback: u64) -> u64 {
    nix::unistd::sysconf(var)
        .ok()
        .flatten()
        .and_then(|n| u64::try_from(n).ok())
        .filter(|&n| n > 0)
        .unwrap_or(fallback)
}

/// The system's page size: 4 KiB on x86-64, 4, 16 or 64 KiB on arm64.
pub(crate) fn page_size() -> u64 {
    sysconf(nix::unistd::SysconfVar::PAGE_SIZE, 4096)
}

/// `sysconf(_SC_CLK_TCK)`: the unit of CPU times in `stat` (100 on every Linux in use).
pub(crate) fn clk_tck() -> u64 {
    sysconf(nix::unistd::SysconfVar::CLK_TCK, 100)
}

/// Online CPUs: glibc allows 8 arenas per CPU.
pub fn online_cpus() -> u64 {
    sysconf(nix::unistd::SysconfVar::_NPROCESSORS_ONLN, 1)
}

/// `/proc/self/NAME` as text.
pub fn read(name: &str) -> Option<String> {
    std::fs::read_to_string(format!("/proc/self/{name}")).ok()
}

/// The real `/proc/stat` (for `btime`).
pub(crate) fn proc_stat() -> Option<String> {
    std::fs::read_to_string("/proc/stat").ok()
}

/// Open file descriptors. Since Linux 6.2 the size of `/proc/self/fd` is their count, read
/// without listing them (the exporter keeps one per process it scans); before, the
/// entries are counted, the one listing them left out.
pub(crate) fn open_fds() -> Option<u64> {
    let size = std::fs::metadata("/proc/self/fd").ok()?.len();
    if size > 0 {
        return Some(size);
    }
    let dir = std::fs::read_dir("/proc/self/fd").ok()?;
    // The directory handle itself is one of the entries while it is listed.
    Some((dir.count() as u64).saturating_sub(1))
}

/// Whether the exporter holds CAP_SYS_PTRACE (root does): it may read every process's
/// memory maps, and `hidepid` does not hide processes from it.
pub(crate) fn has_cap_sys_ptrace() -> bool {
    const CAP_SYS_PTRACE: u32 = 19;
    read("status")
        .and_then(|t| {
            let hex = t.lines().find_map(|l| l.strip_prefix("CapEff:"))?;
            u64::from_str_radix(hex.trim(), 16).ok()
        })
        .is_some_and(|caps| caps & (1 << CAP_SYS_PTRACE) != 0)
}

/// Raises the soft limit on open files to the hard limit (the kept `statm` descriptors
/// take one per process) and returns the soft limit in force; `None` when it cannot be
/// read. Raising the soft limit within the hard one needs no privilege.
pub(crate) fn raise_open_files_limit() -> Option<u64> {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE).ok()?;
    if soft < hard && setrlimit(Resource::RLIMIT_NOFILE, hard, hard).is_ok() {
        return Some(hard);
    }
    Some(soft)
}

/// The mount id of the file a descriptor of the exporter's is open on (`mnt_id` in
/// `/proc/self/fdinfo`, Linux 3.15+): which mount it is on, asked of no filesystem.
pub(crate) fn mount_id_of(fd: std::os::fd::RawFd) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/self/fdinfo/{fd}")).ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix("mnt_id:"))
        .and_then(|v| v.trim().parse().ok())
}

/// The device of the kernel's own shared memory (`major << 32 | minor`, as smaps gives
/// it), which holds every memfd, SysV segment and shared anonymous mapping and is mounted
/// nowhere: told once, from a memfd of the exporter's own. `None` where memfds are not
/// (kernels before 3.17, a seccomp filter that refuses it).
pub(crate) fn shared_memory_device() -> Option<u64> {
    static DEVICE: std::sync::OnceLock<Option<u64>> = std::sync::OnceLock::new();
    *DEVICE.get_or_init(|| {
        use nix::sys::memfd::{memfd_create, MFdFlags};
        let fd = memfd_create("membloat-probe", MFdFlags::MFD_CLOEXEC).ok()?;
        let st = nix::sys::stat::fstat(&fd).ok()?;
        let dev = st.st_dev;
        Some(u64::from(libc::major(dev)) << 32 | u64::from(libc::minor(dev)))
    })
}

/// A file's attributes as the kernel caches them ([`cached_stat`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Cached {
    /// `major << 32 | minor`, as smaps gives it.
    pub dev: u64,
    pub ino: u64,
    /// 512-byte blocks allocated: for shared memory, its pages in RAM or swap.
    pub blocks: u64,
    /// Directory entries naming it: 0 for a memfd or a deleted file.
    pub links: u32,
}

/// What the kernel holds of the file at `path` (a `/proc/PID/fd/N` link is followed
/// without a lookup), by `statx` with `AT_STATX_DONT_SYNC`, so a FUSE or network
/// filesystem answers from its cache and never asks its server, which could hold the call
/// for good.
pub(crate) fn cached_stat(path: &std::path::Path) -> Option<Cached> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes()).ok()?;
    // SAFETY: statx is plain integers, for which all zeros is a value.
    let mut st: libc::statx = unsafe { std::mem::zeroed() };
    // SAFETY: `c` is a NUL-terminated path and `st` a statx, both live through the call,
    // which writes only `st`. The system call itself, not the C library's wrapper, which
    // musl before 1.2.5 lacks.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_statx,
            libc::AT_FDCWD,
            c.as_ptr(),
            libc::AT_STATX_DONT_SYNC,
            libc::STATX_BASIC_STATS,
            &mut st as *mut libc::statx,
        )
    };
    (rc == 0).then(|| Cached {
        dev: u64::from(st.stx_dev_major) << 32 | u64::from(st.stx_dev_minor),
        ino: st.stx_ino,
        blocks: st.stx_blocks,
        links: st.stx_nlink,
    })
}

/// Opens `path` (`O_PATH`: nothing is asked of the file's filesystem) as seen from `root`
/// (a process's `/proc/PID/root`), by `openat2` with `RESOLVE_IN_ROOT`: `..` and absolute
/// links stay inside that root, and no symbolic link is followed, so a process cannot
/// swap a directory on the way for a link into a FUSE mount after its mount table was
/// read. `ENOSYS` before kernel 5.6.
pub(crate) fn open_in_root(
    root: &std::path::Path,
    path: &str,
) -> std::io::Result<std::os::fd::OwnedFd> {
    use std::os::fd::{AsRawFd, FromRawFd};
    use std::os::unix::fs::OpenOptionsExt;
    let dir = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_PATH | libc::O_DIRECTORY)
        .open(root)?;
    let c = std::ffi::CString::new(path)?;
    // SAFETY: open_how is plain integers, for which all zeros is a value.
    let mut how: libc::open_how = unsafe { std::mem::zeroed() };
    how.flags = (libc::O_PATH | libc::O_CLOEXEC) as u64;
    how.resolve = libc::RESOLVE_IN_ROOT | libc::RESOLVE_NO_SYMLINKS | libc::RESOLVE_NO_MAGICLINKS;
    // SAFETY: `dir` is an open descriptor, `c` a NUL-terminated path and `how` an open_how
    // of the size passed, all live through the call, which reads them only.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_openat2,
            dir.as_raw_fd(),
            c.as_ptr(),
            &how as *const libc::open_how,
            std::mem::size_of::<libc::open_how>(),
        )
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    let fd = i32::try_from(fd).map_err(|_| std::io::Error::from(std::io::ErrorKind::Other))?;
    // SAFETY: the kernel just gave this descriptor, owned by nothing else.
    Ok(unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) })
}
