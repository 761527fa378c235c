//! The sample of a process known from its kept `statm` alone.

use std::sync::Arc;

use super::{Known, ReadContext};
use crate::collect::ProcessSample;
use crate::source::Kept;

/// A process whose kept `statm` did not move and that is not due: what the last read
/// found, without CPU time (the signals keep their last verdict on idleness until CPU
/// time is read again).
pub(super) fn still(ctx: &ReadContext, k: &Known, fd: Arc<Kept>) -> (ProcessSample, Known) {
    let sample = ProcessSample {
        pid: k.pid,
        start_ticks: k.start_ticks,
        start_time_seconds: ctx
            .boot_time_seconds
            .map(|boot| k.stat.start_time_seconds(boot, ctx.clk_tck)),
        cpu_seconds: None,
        comm: k.stat.comm.clone(),
        state: k.stat.state,
        status: k.status.clone(),
        rollup: k.rollup,
        oom_score: Some(k.oom_score),
        oom_score_adj: Some(k.oom_score_adj),
        group: k.group.clone(),
        smaps: None,
        heap: None,
    };
    let mut known = k.clone();
    known.statm_fd = Some(fd);
    (sample, known)
}
