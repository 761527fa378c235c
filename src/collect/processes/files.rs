//! What one reader thread does for one process: the re-read plan, which files of the
//! process need reading again this scan, cheapest first.

use std::sync::Arc;
use std::time::Instant;

use super::known::{cpu_ticks, still, Standing};
use super::{step, Known, ProcessRead, ReadContext};
use crate::collect::matcher::Candidate;
use crate::collect::{pool, Grouping, ProcessFiles, ProcessSample};
use crate::parse::{
    self, cgroup, smaps_rollup::SmapsRollup, stat::Stat, statm, status::Status, ParseError,
};
use crate::source::{Buffers, Kept, ReadError, Reason};

/// One process, on a reader thread.
pub(super) fn read_process(
    ctx: &ReadContext,
    bufs: &mut Buffers,
    at: &pool::Step,
    pid: u32,
) -> ProcessRead {
    let started = Instant::now();
    let mut read = ProcessRead {
        pid,
        outcome: Ok(None),
        memoryless: None,
        malformed: 0,
        rollup_error: None,
        rollup_read: false,
        unkept: false,
        seconds: 0.0,
    };
    read.outcome = read_process_files(ctx, bufs, at, pid, &mut read);
    read.seconds = started.elapsed().as_secs_f64();
    read
}

/// What a scan reads of one process, cheapest first.
///
/// With a `statm` descriptor kept from an earlier scan (a real `/proc`), one `pread` of it
/// tells both that this is still the process that scan saw (a process that ended fails
/// with `ESRCH`, even when a new one has taken its pid) and whether its memory moved: any
/// page mapped, faulted in, reclaimed, swapped or collapsed into a huge page by
/// khugepaged moves it. When it did not, and the process is not due for its refresh
/// (every `rollup_refresh` scans, staggered by pid, for what moves without it: Pss as
/// sharers come and go, CPU time, `oom_score_adj`, the name), the sample is what was
/// known; only `stat` is read, while the process's CPU time keeps moving (so a process
/// that runs without touching memory shows its CPU time, and one that stops is seen idle
/// at once), else nothing.
///
/// Otherwise `stat` (identity, CPU time) and `oom_score_adj`, and `status`,
/// `smaps_rollup` and `oom_score` when `statm` moved, the process is new or due. Without
/// a kept descriptor (a fixture tree, or the open-files limit spent) `stat`, `statm` and
/// `oom_score_adj` are read every scan and compared the same way. `cgroup` and `cmdline`
/// for grouping when the process is new, its name changed, or on the refresh. With
/// `rollup_refresh` 1 every file is read every scan and `statm` is not needed.
#[allow(
    clippy::too_many_lines,
    reason = "the cheapest-first read plan of one process, in the order the files are read"
)]
fn read_process_files(
    ctx: &ReadContext,
    bufs: &mut Buffers,
    at: &pool::Step,
    pid: u32,
    read: &mut ProcessRead,
) -> Result<Option<(ProcessSample, Known)>, Reason> {
    let source = &ctx.source;
    let prior = ctx
        .known
        .binary_search_by_key(&pid, |k| k.pid)
        .ok()
        .map(|i| &ctx.known[i]);
    if prior.is_none() {
        if let Some(start) = still_memoryless(ctx, bufs, at, pid)? {
            read.memoryless = Some(start);
            return Ok(None);
        }
    }
    let stuck = ctx.stuck.contains(&pid);
    let due = (ctx.scan + pid as u64) % ctx.rollup_refresh == 0;
    // The kept descriptor: the same process as `prior` while it reads.
    let mut kept: Option<(Arc<Kept>, Option<[u64; 3]>)> = None;
    if let Some(fd) = prior.and_then(|k| k.statm_fd.as_ref()) {
        step::at(at, step::File::Statm);
        match source.read_kept(fd, &mut bufs.main) {
            Ok(text) => {
                let m = parsed(read, pid, "statm", statm::parse(text));
                kept = Some((fd.clone(), m));
            }
            // It ended; the pid may already be another process's.
            Err(ReadError::Gone(_)) => {}
            Err(e) => return Err(e.process_reason()),
        }
    }
    // The kept statm vouches that this is the process `prior` knew (a reused pid fails the
    // pread), so an unchanged one needs no `stat` to say so.
    if let (Some(k), Some((fd, m))) = (prior, &kept) {
        if Standing::of(Some(k), *m, due) == Standing::Unchanged {
            if !k.cpu_moving {
                return Ok(Some(still(ctx, k, fd.clone(), None)));
            }
            // Its CPU time moved at the last read: `stat` alone is read again until it
            // stops, so a process that has just gone to sleep is seen idle at once.
            step::at(at, step::File::Stat);
            let stat = source.parse_pid(pid, "stat", &mut bufs.main, Stat::parse)?;
            if stat.start_ticks == k.start_ticks {
                return Ok(Some(still(ctx, k, fd.clone(), Some(stat))));
            }
        }
    }
    step::at(at, step::File::Stat);
    let stat = source.parse_pid(pid, "stat", &mut bufs.main, Stat::parse)?;
    let known = prior.filter(|k| k.start_ticks == stat.start_ticks);
    if known.is_none() {
        // The process that statm was read from ended between the two reads.
        kept = None;
    }
    // The baseline the next scan compares with: read before anything it vouches for, so
    // a change between two reads shows as a change next time, never as stillness.
    let (statm, mut fd) = match kept {
        Some((f, m)) => (m, Some(f)),
        None if ctx.rollup_refresh > 1 => {
            step::at(at, step::File::Statm);
            let m = match source.read_pid(pid, "statm", &mut bufs.main) {
                Ok(text) => parsed(read, pid, "statm", statm::parse(text)),
                // Without a baseline the next scan reads the process again.
                Err(_) => None,
            };
            (m, None)
        }
        None => (None, None),
    };
    // No memory at all: a kernel thread, or a process that exited and is not reaped yet
    // (`status` would show no VmRSS either).
    if statm.is_some_and(|[size, _, _]| size == 0) {
        read.memoryless = Some(stat.start_ticks);
        return Ok(None);
    }
    let standing = Standing::of(known, statm, due);
    let status = match known {
        Some(k) if standing == Standing::Unchanged => k.reading.status.clone(),
        _ => {
            step::at(at, step::File::Status);
            let status = source.parse_pid(pid, "status", &mut bufs.main, Status::parse)?;
            if status.vm_rss_bytes.is_none() {
                read.memoryless = Some(stat.start_ticks);
                return Ok(None);
            }
            read.malformed += status.rejected as u64;
            status
        }
    };
    // A process with memory and no descriptor kept yet (new, or the budget was spent):
    // keep one now when the budget allows, for the next scan's pread.
    if let (None, Some(budget), true) = (&fd, &ctx.descriptors, ctx.rollup_refresh > 1) {
        match source.keep_pid(pid, "statm", budget, &mut bufs.main) {
            Ok(Some(f)) => fd = Some(Arc::new(f)),
            Ok(None) => read.unkept = true,
            Err(_) => {}
        }
    }
    // A reader stuck in this process's smaps_rollup (the mmap lock) is not sent back in.
    let reread = !stuck
        && (standing != Standing::Unchanged || known.is_some_and(|k| k.reading.rollup.is_none()));
    let rollup = if reread {
        read_rollup(ctx, bufs, at, pid, read)?
    } else {
        known.and_then(|k| k.reading.rollup)
    };
    if let Some(r) = &rollup {
        read.malformed += r.rejected as u64;
    }
    step::at(at, step::File::OomScoreAdj);
    let oom_score_adj = source.parse_pid(pid, "oom_score_adj", &mut bufs.main, |t| {
        parse::parse_i64(t).and_then(|adj| {
            (-1000..=1000)
                .contains(&adj)
                .then_some(adj)
                .ok_or(ParseError::Malformed("oom_score_adj out of -1000..=1000"))
        })
    })?;
    // oom_score is a function of RSS, swap, page tables and oom_score_adj (and of RAM and
    // swap size, which the refresh catches).
    let oom_score = match known {
        Some(k)
            if standing == Standing::Unchanged
                && k.reading.oom_score_adj == Some(oom_score_adj) =>
        {
            k.reading.oom_score.unwrap_or(0)
        }
        _ => {
            step::at(at, step::File::OomScore);
            source.parse_pid(pid, "oom_score", &mut bufs.main, parse::parse_u64)?
        }
    };
    let regroup = standing == Standing::New
        || (due && !stuck)
        || known.is_some_and(|k| k.reading.comm != stat.comm);
    let group = match known {
        Some(k) if !regroup && !matches!(*ctx.grouping, Grouping::Comm) => k.reading.group.clone(),
        _ => group_of(ctx, bufs, at, pid, &stat.comm, stuck)?,
    };
    let ticks = cpu_ticks(&stat);
    let reading = ProcessFiles {
        pid,
        start_ticks: stat.start_ticks,
        comm: stat.comm,
        status,
        rollup,
        oom_score: Some(oom_score),
        oom_score_adj: Some(oom_score_adj),
        group,
    };
    // What did not change is shared with the last scan's sample and the model's state.
    let reading = match known {
        Some(k) if *k.reading == reading => Arc::clone(&k.reading),
        _ => Arc::new(reading),
    };
    let sample = ProcessSample::new(
        Arc::clone(&reading),
        stat.state,
        Some(ticks as f64 / ctx.clk_tck),
    );
    let remembered = Known {
        pid,
        start_ticks: stat.start_ticks,
        statm,
        statm_fd: fd,
        reading,
        state: stat.state,
        cpu_ticks: ticks,
        cpu_moving: known.is_none_or(|k| k.cpu_ticks != ticks),
        deep_read: known.and_then(|k| k.deep_read.clone()),
        unsettled: known.map_or(0, |k| k.unsettled),
        newcomer: known.map_or(ctx.scan > 0, |k| k.newcomer),
    };
    Ok(Some((sample, remembered)))
}

/// A file a reader read but could not parse: counted as malformed, and the debug log names
/// the process, the file and what was wrong (a kernel whose format changed shows here
/// first). An empty file is not malformed: it has nothing to say.
fn parsed<T>(read: &mut ProcessRead, pid: u32, file: &str, r: Result<T, ParseError>) -> Option<T> {
    match r {
        Ok(v) => Some(v),
        Err(ParseError::Empty) => None,
        Err(e) => {
            read.malformed += 1;
            crate::log!(Debug, "malformed file", pid = pid, file = file, error = e);
            None
        }
    }
}

/// `smaps_rollup`, read again: `None` when it is empty, malformed (counted) or denied
/// (another user's process without `CAP_SYS_PTRACE`: what `status` showed stands).
fn read_rollup(
    ctx: &ReadContext,
    bufs: &mut Buffers,
    at: &pool::Step,
    pid: u32,
    read: &mut ProcessRead,
) -> Result<Option<SmapsRollup>, Reason> {
    read.rollup_read = true;
    step::at(at, step::File::SmapsRollup);
    match ctx.source.read_pid(pid, "smaps_rollup", &mut bufs.main) {
        Ok(text) => Ok(parsed(read, pid, "smaps_rollup", SmapsRollup::parse(text))),
        Err(ReadError::Gone(_)) => Err(Reason::Vanished),
        Err(e) => {
            read.rollup_error = Some(e.process_reason());
            Ok(None)
        }
    }
}

/// The group of a process, as `--collector.processes.group-by` says: its name, its memory
/// cgroup, or what the matcher file makes of its name and command line (`None` when
/// nothing matched). A reader stuck in its mmap lock does not read `cmdline` again.
fn group_of(
    ctx: &ReadContext,
    bufs: &mut Buffers,
    at: &pool::Step,
    pid: u32,
    comm: &str,
    stuck: bool,
) -> Result<Option<String>, Reason> {
    Ok(match &*ctx.grouping {
        Grouping::Comm => Some(comm.to_string()),
        Grouping::Cgroup => {
            step::at(at, step::File::Cgroup);
            Some(ctx.source.parse_pid(pid, "cgroup", &mut bufs.main, |t| {
                // No memory controller line (a controller not mounted): no cgroup.
                Ok(cgroup::memory_cgroup(t).unwrap_or("").to_string())
            })?)
        }
        Grouping::Matcher(m) => {
            let cmdline = if m.needs_cmdline() && !stuck {
                step::at(at, step::File::Cmdline);
                ctx.source
                    .read_pid(pid, "cmdline", &mut bufs.aux)
                    .map_err(|e| e.process_reason())?
            } else {
                ""
            };
            m.group(&Candidate { comm, cmdline })
        }
    })
}

/// A process the last scan found without memory (a kernel thread, a zombie) that is still
/// the same one: its start ticks. Without a pid handed out since that scan nothing is read
/// (the pid cannot belong to another process); else `stat` alone tells, where `stat` and
/// `statm` were read before. Neither ever gains memory.
fn still_memoryless(
    ctx: &ReadContext,
    bufs: &mut Buffers,
    at: &pool::Step,
    pid: u32,
) -> Result<Option<u64>, Reason> {
    let Ok(i) = ctx.memoryless.binary_search_by_key(&pid, |&(p, _)| p) else {
        return Ok(None);
    };
    let start = ctx.memoryless[i].1;
    if ctx.same_pids {
        return Ok(Some(start));
    }
    step::at(at, step::File::Stat);
    let stat = ctx
        .source
        .parse_pid(pid, "stat", &mut bufs.main, Stat::parse)?;
    Ok((stat.start_ticks == start).then_some(start))
}
