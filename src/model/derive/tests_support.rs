//! Builders the unit tests of several rooms share.

use crate::collect::ProcessSample;
use crate::parse::status::Status;

/// A one-page idle process.
pub fn process(pid: u32, comm: &str) -> ProcessSample {
    ProcessSample {
        pid,
        start_ticks: 100,
        comm: comm.into(),
        state: 'S',
        cpu_seconds: Some(0.5),
        start_time_seconds: None,
        status: Status {
            vm_rss_bytes: Some(4096),
            ..Status::default()
        },
        rollup: None,
        oom_score: Some(666),
        oom_score_adj: Some(0),
        group: Some(comm.into()),
        smaps: None,
        heap: None,
    }
}
