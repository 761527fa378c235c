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
pub fn page_size() -> u64 {
    sysconf(nix::unistd::SysconfVar::PAGE_SIZE, 4096)
}

/// `sysconf(_SC_CLK_TCK)`: the unit of CPU times in `stat` (100 on every Linux in use).
pub fn clk_tck() -> u64 {
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
pub fn proc_stat() -> Option<String> {
    std::fs::read_to_string("/proc/stat").ok()
}

/// Open file descriptors. Since Linux 6.2 the size of `/proc/self/fd` is their count, read
/// without listing them (the exporter keeps one per process it scans); before, the
/// entries are counted, the one listing them left out.
pub fn open_fds() -> Option<u64> {
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
pub fn has_cap_sys_ptrace() -> bool {
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
pub fn raise_open_files_limit() -> Option<u64> {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE).ok()?;
    if soft < hard && setrlimit(Resource::RLIMIT_NOFILE, hard, hard).is_ok() {
        return Some(hard);
    }
    Some(soft)
}

/// The mount id of the file a descriptor of the exporter's is open on (`mnt_id` in
/// `/proc/self/fdinfo`, Linux 3.15+): which mount it is on, asked of no filesystem.
pub fn mount_id_of(fd: std::os::fd::RawFd) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/self/fdinfo/{fd}")).ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix("mnt_id:"))
        .and_then(|v| v.trim().parse().ok())
}
