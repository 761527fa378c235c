//! The exporter's own process, for its `process_*` metrics: always the real `/proc/self`,
//! whatever `--path.procfs` says (in a container that is the host's `/proc`, where `self`
//! is still this process, but the fixture trees have none). These files never block: no
//! other process's mmap lock is involved.

/// `/proc/self/NAME` as text.
pub fn read(name: &str) -> Option<String> {
    std::fs::read_to_string(format!("/proc/self/{name}")).ok()
}

/// The real `/proc/stat` (for `btime`).
pub fn proc_stat() -> Option<String> {
    std::fs::read_to_string("/proc/stat").ok()
}

/// Open file descriptors (the entries of `/proc/self/fd`, the one listing it included).
pub fn open_fds() -> Option<u64> {
    let dir = std::fs::read_dir("/proc/self/fd").ok()?;
    // The directory handle itself is one of the entries while it is listed.
    Some((dir.count() as u64).saturating_sub(1))
}
