//! Which group a process is in, as `--collector.processes.group-by` says.

use super::context::{ProcessRead, ReadContext};
use super::dir::Dir;
use super::progress;
use crate::collect::matcher::Candidate;
use crate::collect::{pool, Grouping};
use crate::parse::cgroup;
use crate::source::{Buffers, Reason};

/// The group of a process, as `--collector.processes.group-by` says: its name, its memory
/// cgroup, or what the matcher file makes of its name and command line (`None` when
/// nothing matched). A reader stuck in its mmap lock does not read `cmdline` again.
pub(super) fn group_of(
    ctx: &ReadContext,
    bufs: &mut Buffers,
    at: &pool::Progress,
    dir: Dir,
    comm: &str,
    stuck: bool,
    read: &mut ProcessRead,
) -> Result<Option<String>, Reason> {
    let pid = dir.pid;
    Ok(match &*ctx.grouping {
        Grouping::Comm => Some(comm.to_string()),
        Grouping::Cgroup => {
            progress::at(at, progress::File::Cgroup);
            Some(ctx.source.parse_pid(pid, "cgroup", &mut bufs.main, |t| {
                // No memory controller line (a controller not mounted): no cgroup.
                Ok(cgroup::memory_cgroup(t).unwrap_or("").to_string())
            })?)
        }
        Grouping::Matcher(m) => {
            let slot = (m.needs_cmdline() && !stuck).then(|| ctx.lock_slot());
            read.lock_skipped += u64::from(matches!(slot, Some(None)));
            let cmdline = if let Some(Some(_slot)) = slot {
                progress::at(at, progress::File::Cmdline);
                ctx.source
                    .read_pid(pid, &dir.file("cmdline"), &mut bufs.aux)
                    .map_err(|e| e.process_reason())?
            } else {
                ""
            };
            m.group(&Candidate { comm, cmdline })
        }
    })
}
