//! The sample of a process whose memory did not move, known from its kept `statm`.

use std::sync::Arc;

use super::{cpu_ticks, Known, ReadContext};
use crate::collect::ProcessSample;
use crate::parse::stat::Stat;
use crate::source::Kept;

/// A process whose kept `statm` did not move and that is not due: what the last read
/// found. With `stat` (read again because its CPU time moved at the last read), its CPU
/// time is this scan's; without, there is none, and the signals keep their last verdict on
/// idleness until CPU time is read again.
pub(super) fn still(
    ctx: &ReadContext,
    k: &Known,
    fd: Arc<Kept>,
    stat: Option<Stat>,
) -> (ProcessSample, Known) {
    let mut known = k.clone();
    known.statm_fd = Some(fd);
    let fresh = stat.is_some();
    if let Some(stat) = stat {
        known.cpu_moving = cpu_ticks(&stat) != cpu_ticks(&k.stat);
        known.stat = stat;
    }
    let sample = ProcessSample {
        pid: k.pid,
        start_ticks: k.start_ticks,
        start_time_seconds: ctx
            .boot_time_seconds
            .map(|boot| k.stat.start_time_seconds(boot, ctx.clk_tck)),
        cpu_seconds: fresh.then(|| known.stat.cpu_seconds(ctx.clk_tck)),
        comm: known.stat.comm.clone(),
        state: known.stat.state,
        status: k.status.clone(),
        rollup: k.rollup,
        oom_score: Some(k.oom_score),
        oom_score_adj: Some(k.oom_score_adj),
        group: k.group.clone(),
        smaps: None,
        heap: None,
    };
    (sample, known)
}
