//! Which directory of `/proc` a process's memory files are read from.

use super::ReadContext;
use crate::parse::stat::Stat;
use crate::source::Buffers;

/// Where a process's memory files are read: its own directory, or, once its main thread
/// has exited while others run, another thread's (`task/TID`). `/proc/PID` then shows no
/// memory (no `VmRSS`, a `statm` of zeros, an empty `smaps_rollup` and `cmdline`), though
/// the process keeps all of it and the OOM killer can pick it; a thread's files show the
/// whole process's, which the threads share.
#[derive(Debug, Clone, Copy)]
pub(super) struct Dir {
    pub(super) pid: u32,
    pub(super) tid: Option<u32>,
}

impl Dir {
    /// The process's own directory, or another thread's when `stat` shows its main
    /// thread exited (state `Z`) with threads left.
    pub(super) fn of(ctx: &ReadContext, bufs: &mut Buffers, pid: u32, stat: &Stat) -> Dir {
        let tid = (stat.state == 'Z' && stat.threads > 1)
            .then(|| ctx.source.other_thread(pid, &mut bufs.main))
            .flatten();
        Dir { pid, tid }
    }

    /// The path of `name`, under the process's directory.
    pub(super) fn file(self, name: &'static str) -> std::borrow::Cow<'static, str> {
        match self.tid {
            None => name.into(),
            Some(tid) => format!("task/{tid}/{name}").into(),
        }
    }
}
