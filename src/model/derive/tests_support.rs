//! Builders the unit tests of several rooms share.

use std::sync::Arc;

use crate::collect::{ProcessFiles, ProcessSample};
use crate::parse::status::Status;

/// A one-page idle process.
pub fn process(pid: u32, comm: &str) -> ProcessSample {
    let reading = ProcessFiles {
        pid,
        start_ticks: 100,
        comm: comm.into(),
        status: Status {
            vm_rss_bytes: Some(4096),
            ..Status::default()
        },
        rollup: None,
        oom_score: Some(666),
        oom_score_adj: Some(0),
        group: Some(comm.into()),
    };
    ProcessSample::new(Arc::new(reading), 'S', Some(0.5))
}
