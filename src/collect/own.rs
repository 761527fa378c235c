//! The exporter's own CPU, memory and file descriptors: the `process_*` metrics every
//! Prometheus client library exports, so the exporter is watched like any other target.

use crate::parse::{limits, stat, stat::Stat, status::Status};
use crate::source::own;

/// What the exporter's process uses, read at the end of each scan.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct OwnProcess {
    pub cpu_seconds: Option<f64>,
    pub resident_bytes: Option<u64>,
    pub virtual_bytes: Option<u64>,
    pub open_fds: Option<u64>,
    pub max_fds: Option<u64>,
    /// Unix time the process started (needs `btime`).
    pub start_time_seconds: Option<f64>,
}

/// Reads it; `boot` is the real `btime` (not `--path.procfs`'s, which a fixture tree fakes),
/// read once by the caller.
pub fn read(clk_tck: f64, boot: Option<u64>) -> OwnProcess {
    let stat = own::read("stat").and_then(|t| Stat::parse(&t).ok());
    let status = own::read("status").and_then(|t| Status::parse(&t).ok());
    OwnProcess {
        cpu_seconds: stat.as_ref().map(|s| s.cpu_seconds(clk_tck)),
        resident_bytes: status.as_ref().and_then(|s| s.vm_rss_bytes),
        virtual_bytes: status.as_ref().and_then(|s| s.vm_size_bytes),
        open_fds: own::open_fds(),
        // `unlimited` has no number to give: no process_max_fds.
        max_fds: own::read("limits").and_then(|t| limits::max_open_files(&t).ok()),
        start_time_seconds: stat
            .zip(boot)
            .map(|(s, boot)| s.start_time_seconds(boot as f64, clk_tck)),
    }
}

/// The real boot time, for [`read`].
pub(crate) fn boot_time() -> Option<u64> {
    own::proc_stat().as_deref().and_then(stat::boot_time)
}

/// `sysconf(_SC_CLK_TCK)`: the unit of CPU times in `stat` (100 on every Linux
/// architecture in practice, and so when it cannot be read).
pub(crate) fn clk_tck() -> f64 {
    own::clk_tck() as f64
}
