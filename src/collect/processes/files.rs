//! What one reader thread does for one process: the re-read plan, which files of the
//! process need reading again this scan, cheapest first.

use std::sync::Arc;
use std::time::Instant;

use super::dir::Dir;
use super::group::group_of;
use super::known::{cpu_ticks, still, Standing};
use super::plan::{plan, Prior};
use super::statm::{parsed, read_statm, vouched_statm};
use super::{progress, Known, ProcessRead, ReadContext};
use crate::collect::{pool, Grouping, ProcessFiles, ProcessSample};
use crate::parse::{self, smaps_rollup::SmapsRollup, stat::Stat, status::Status, ParseError};
use crate::source::{Buffers, Kept, ReadError, Reason, Watch};

/// One process, on a reader thread.
pub(super) fn read_process(
    ctx: &ReadContext,
    bufs: &mut Buffers,
    at: &pool::Progress,
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
        lock_skipped: 0,
        unkept: false,
        seconds: 0.0,
    };
    read.outcome = read_process_files(ctx, bufs, at, pid, &mut read);
    read.seconds = started.elapsed().as_secs_f64();
    read
}

/// What a scan reads of one process, cheapest first: `plan.rs` decides which files, from
/// what the last scan knew; this carries the plan out.
///
/// With a `statm` descriptor kept from an earlier scan (a real `/proc`), one `pread` of it
/// tells both that this is still the process that scan saw (a process that ended fails with
/// `ESRCH`, even when a new one has taken its pid) and whether its memory moved: any page
/// mapped, faulted in, reclaimed, swapped or collapsed into a huge page by khugepaged moves
/// it; for a process watched for its end whose `statm` is not kept, `statm` read by path
/// says the second and the watch the first (`statm.rs`). When it did not, and it is not due
/// for its refresh (every `rollup_refresh` scans, staggered by pid, for what moves without
/// it: Pss as sharers come and go, CPU time, `oom_score_adj`, the name), the sample is what
/// was known; only `stat` is read, while the process's CPU time keeps moving (so a process
/// that runs without touching memory shows its CPU time, and one that stops is seen idle at
/// once), else nothing.
///
/// Otherwise `stat` (identity, CPU time) and `oom_score_adj`, and `status`, `smaps_rollup`
/// and `oom_score` when `statm` moved, the process is new or due. Without a kept descriptor
/// or a watch (a fixture tree, or the open-files limit spent) `stat`, `statm` and
/// `oom_score_adj` are read every scan and compared the same way. `cgroup` and `cmdline`
/// for grouping when the process is new, its name changed, or on the refresh. With
/// `rollup_refresh` 1 every file is read every scan and `statm` is not needed.
fn read_process_files(
    ctx: &ReadContext,
    bufs: &mut Buffers,
    at: &pool::Progress,
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
    let (watch, mut kept) = vouched_statm(ctx, bufs, at, prior, pid, read)?;
    if let (Some(k), Some((fd, m))) = (prior, &kept) {
        let prior = Prior::of(k, &k.reading.comm);
        if plan(Some(prior), *m, due, stuck).standing == Standing::Unchanged {
            if !k.cpu_moving {
                return Ok(Some(still(ctx.clk_tck, k, (fd.clone(), watch), None)));
            }
            // Its CPU time moved at the last read: `stat` alone is read again until it
            // stops, so a process that has just gone to sleep is seen idle at once.
            progress::at(at, progress::File::Stat);
            let stat = source.parse_pid(pid, "stat", &mut bufs.main, Stat::parse)?;
            if stat.start_ticks == k.start_ticks {
                return Ok(Some(still(ctx.clk_tck, k, (fd.clone(), watch), Some(stat))));
            }
        }
    }
    progress::at(at, progress::File::Stat);
    let stat = source.parse_pid(pid, "stat", &mut bufs.main, Stat::parse)?;
    let known = prior.filter(|k| k.start_ticks == stat.start_ticks);
    let dir = Dir::of(ctx, bufs, pid, &stat);
    if known.is_none() || dir.tid.is_some() {
        // The process that statm was read from ended between the two reads, or the
        // statm kept is its main thread's, which has exited.
        kept = None;
    }
    let (statm, mut fd) = match kept {
        Some((f, m)) => (m, f),
        None => (read_statm(ctx, bufs, at, dir, read), None),
    };
    // No memory at all: a kernel thread, or a process that exited and is not reaped yet
    // (`status` would show no VmRSS either).
    if statm.is_some_and(|[size, _, _]| size == 0) {
        read.memoryless = Some(stat.start_ticks);
        return Ok(None);
    }
    let plan = plan(known.map(|k| Prior::of(k, &stat.comm)), statm, due, stuck);
    let status = match known {
        Some(k) if !plan.status => k.reading.status.clone(),
        _ => {
            progress::at(at, progress::File::Status);
            let status =
                source.parse_pid(pid, &dir.file("status"), &mut bufs.main, Status::parse)?;
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
    // (A process read through another thread keeps none: that thread may end first.)
    let keep = ctx.rollup_refresh > 1 && dir.tid.is_none();
    if let (None, Some(budget), true) = (&fd, &ctx.descriptors, keep) {
        match source.keep_pid(pid, "statm", budget, &mut bufs.main) {
            Ok(Some(f)) => fd = Some(Arc::new(f)),
            Ok(None) => read.unkept = true,
            Err(_) => {}
        }
    }
    let rollup = if plan.rollup {
        match ctx.lock_slot() {
            Some(_slot) => read_rollup(ctx, bufs, at, dir, read)?,
            None => {
                read.lock_skipped += 1;
                known.and_then(|k| k.reading.rollup)
            }
        }
    } else {
        known.and_then(|k| k.reading.rollup)
    };
    if let Some(r) = &rollup {
        read.malformed += r.rejected as u64;
    }
    let (oom_score, oom_score_adj) = read_oom(ctx, bufs, at, pid, known, plan.oom_score)?;
    let group = match known {
        Some(k) if !plan.regroup && !matches!(*ctx.grouping, Grouping::Comm) => {
            k.reading.group.clone()
        }
        _ => group_of(ctx, bufs, at, dir, &stat.comm, stuck, read)?,
    };
    let files = ProcessFiles {
        pid,
        start_ticks: stat.start_ticks,
        comm: stat.comm.clone(),
        status,
        rollup,
        oom_score: Some(oom_score),
        oom_score_adj: Some(oom_score_adj),
        group,
    };
    Ok(Some(remember(ctx, known, files, &stat, (statm, fd), watch)))
}

/// The sample of a process read this scan, and what the next scan keeps of it. What did
/// not change is shared with the last scan's sample and the model's state.
fn remember(
    ctx: &ReadContext,
    known: Option<&Known>,
    files: ProcessFiles,
    stat: &Stat,
    (statm, fd): (Option<[u64; 3]>, Option<Arc<Kept>>),
    watch: Option<Arc<Watch>>,
) -> (ProcessSample, Known) {
    let ticks = cpu_ticks(stat);
    let reading = match known {
        Some(k) if *k.reading == files => Arc::clone(&k.reading),
        _ => Arc::new(files),
    };
    let sample = ProcessSample::new(
        Arc::clone(&reading),
        stat.state,
        Some(ticks as f64 / ctx.clk_tck),
    );
    let remembered = Known {
        pid: reading.pid,
        start_ticks: stat.start_ticks,
        statm,
        statm_fd: fd,
        reading,
        state: stat.state,
        cpu_ticks: ticks,
        cpu_moving: known.is_none_or(|k| k.cpu_ticks != ticks),
        watch,
        quiet: match known {
            Some(k) if k.statm == statm && k.cpu_ticks == ticks => k.quiet.saturating_add(1),
            _ => 0,
        },
        deep_read: known.and_then(|k| k.deep_read.clone()),
        unsettled: known.map_or(0, |k| k.unsettled),
        newcomer: known.map_or(ctx.scan > 0, |k| k.newcomer),
        over_budget: known.map_or(0, |k| k.over_budget),
    };
    (sample, remembered)
}

/// `oom_score_adj`, and `oom_score` when the plan says or `oom_score_adj` changed:
/// `oom_score` is a function of RSS, swap, page tables and `oom_score_adj` (and of RAM and
/// swap size, which the refresh catches).
fn read_oom(
    ctx: &ReadContext,
    bufs: &mut Buffers,
    at: &pool::Progress,
    pid: u32,
    known: Option<&Known>,
    planned: bool,
) -> Result<(u64, i64), Reason> {
    progress::at(at, progress::File::OomScoreAdj);
    let adj = ctx
        .source
        .parse_pid(pid, "oom_score_adj", &mut bufs.main, |t| {
            parse::parse_i64(t).and_then(|adj| {
                (-1000..=1000)
                    .contains(&adj)
                    .then_some(adj)
                    .ok_or(ParseError::Malformed("oom_score_adj out of -1000..=1000"))
            })
        })?;
    let score = match known {
        Some(k) if !planned && k.reading.oom_score_adj == Some(adj) => {
            k.reading.oom_score.unwrap_or(0)
        }
        _ => {
            progress::at(at, progress::File::OomScore);
            ctx.source
                .parse_pid(pid, "oom_score", &mut bufs.main, parse::parse_u64)?
        }
    };
    Ok((score, adj))
}

/// `smaps_rollup`, read again: `None` when it is empty, malformed (counted) or denied
/// (another user's process without `CAP_SYS_PTRACE`: what `status` showed stands).
fn read_rollup(
    ctx: &ReadContext,
    bufs: &mut Buffers,
    at: &pool::Progress,
    dir: Dir,
    read: &mut ProcessRead,
) -> Result<Option<SmapsRollup>, Reason> {
    read.rollup_read = true;
    progress::at(at, progress::File::SmapsRollup);
    match ctx
        .source
        .read_pid(dir.pid, &dir.file("smaps_rollup"), &mut bufs.main)
    {
        Ok(text) => Ok(parsed(
            read,
            dir.pid,
            "smaps_rollup",
            SmapsRollup::parse(text),
        )),
        Err(ReadError::Gone(_)) => Err(Reason::Vanished),
        Err(e) => {
            read.rollup_error = Some(e.process_reason());
            Ok(None)
        }
    }
}

/// A process the last scan found without memory (a kernel thread, a zombie) that is still
/// the same one: its start ticks. Unless its pid may have been handed out since that scan
/// nothing is read (the pid cannot belong to another process); else `stat` alone tells,
/// where `stat` and `statm` were read before. Neither ever gains memory.
fn still_memoryless(
    ctx: &ReadContext,
    bufs: &mut Buffers,
    at: &pool::Progress,
    pid: u32,
) -> Result<Option<u64>, Reason> {
    let Ok(i) = ctx.memoryless.binary_search_by_key(&pid, |&(p, _)| p) else {
        return Ok(None);
    };
    let start = ctx.memoryless[i].1;
    if !ctx.fresh.contains(pid) {
        return Ok(Some(start));
    }
    progress::at(at, progress::File::Stat);
    let stat = ctx
        .source
        .parse_pid(pid, "stat", &mut bufs.main, Stat::parse)?;
    Ok((stat.start_ticks == start).then_some(start))
}
