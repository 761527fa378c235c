//! ProcessFiles every process: [`Processes`] hands one reader-thread task per pid to the pool
//! (`files.rs`: which files of a process need reading again this scan) and keeps one
//! record per process for the next scan (`known.rs`).

use std::sync::Arc;

use super::pool::Pool;
use super::{count, pool, ErrorCounts, Grouping, ProcessSample, ReadStats};
use crate::config::ReadConfig;
use crate::family::Collector;
use crate::source::{Buffers, Descriptors, Exits, Reason, Source};

/// Processes read in one batch of the reader pool.
const READ_CHUNK: usize = 1024;

/// Reads every process, and keeps what the next scan needs: a record of each process,
/// the kept `statm` descriptors, the reader threads and the deep tier's own.
pub(super) struct Processes {
    pub(super) source: Source,
    grouping: Arc<Grouping>,
    clk_tck: f64,
    pub(super) reading: ReadConfig,
    /// What is remembered of each process, in pid order (one record per process: the read
    /// cache and the deep-tier schedule). Rebuilt by every scan, so an exited process is
    /// forgotten by the next one.
    known: Arc<Vec<Known>>,
    /// The budget of kept `statm` descriptors: `None` when `--path.procfs` is not a proc
    /// filesystem or every file is read every scan anyway.
    descriptors: Option<Arc<Descriptors>>,
    /// The warning that the budget is spent was logged.
    descriptors_spent: bool,
    /// The processes watched for their end (with the kept descriptors, on a `/proc` of
    /// the exporter's own PID namespace, on a kernel with pidfds), so quiet ones may rest.
    exits: Option<Arc<Exits>>,
    /// Scans between two reads of a resting process (1: none rests).
    rest_every: u64,
    /// The host's memory at the last scan: when it moves, no process rests.
    host: rest::Host,
    /// The pids to read, and the listing of `/proc` kept for the next scans.
    lister: listing::Lister,
    /// The last scan's processes without memory, and their start ticks, by pid.
    memoryless: Arc<Vec<(u32, u64)>>,
    /// Processes whose files were refused when last read (a scan that reuses an
    /// unchanged process's figures does not ask again), by pid.
    denied: Vec<u32>,
    scans: u64,
    pub(super) pool: Pool,
    /// The deep tier's readers, apart from the per-process ones: whatever a deep read
    /// meets (a huge or crafted heap, a stuck smaps), every process's files are still
    /// read every scan.
    pub(super) deep_pool: Pool,
    /// CPU the deep tier's reads spent, in nanoseconds, added by each read when it ends,
    /// even one the scan stopped waiting for; each scan's deep run takes what came.
    pub(super) deep_cpu: Arc<DeepCpu>,
    /// What the heap readers learn once per binary (layouts, the allocator linked in),
    /// bounded, for as long as the exporter runs.
    pub(super) binaries: Arc<crate::heap::Binaries>,
    /// The slots of the reads that take a process's mmap lock, across scans: a reader
    /// stuck in one keeps its slot.
    locked: Arc<LockSlots>,
}

/// CPU time the deep tier's reads spent and have not been reported yet (nanoseconds).
#[derive(Debug, Default)]
pub(super) struct DeepCpu {
    pub(super) all: std::sync::atomic::AtomicU64,
    /// The heap readers' part of it.
    pub(super) heap: std::sync::atomic::AtomicU64,
}

impl Processes {
    /// `limit` is the open-files limit the descriptors kept share with everything else.
    pub(super) fn new(
        source: Source,
        grouping: Grouping,
        clk_tck: f64,
        reading: ReadConfig,
        limit: Option<u64>,
    ) -> Self {
        let (budget, watched) = descriptor_budget(limit, reading.kept_descriptors);
        let descriptors = (reading.rollup_refresh > 1 && source.is_procfs() && budget > 0)
            .then(|| Descriptors::new(budget));
        let marks = source.is_procfs() && source.pids_are_ours();
        let exits = (descriptors.is_some() && marks && watched > 0)
            .then(|| Exits::new(watched).map(Arc::new))
            .flatten();
        Processes {
            lister: listing::Lister::new(marks),
            exits,
            rest_every: rest::rest_every(reading.scan_interval),
            host: rest::Host::default(),
            memoryless: Arc::new(Vec::new()),
            denied: Vec::new(),
            source,
            grouping: Arc::new(grouping),
            clk_tck,
            reading,
            known: Arc::new(Vec::new()),
            descriptors,
            descriptors_spent: false,
            scans: 0,
            // Readers stuck in a read are replaced: up to four stuck in files that take no
            // mmap lock, and as many as there are slots for those that do.
            pool: Pool::new(reading.readers, reading.readers + 4 + LOCK_SLOTS),
            // One deep read at a time; one more thread when a read is stuck in the kernel.
            deep_pool: Pool::new(1, 2),
            deep_cpu: Arc::default(),
            binaries: Arc::default(),
            locked: Arc::default(),
        }
    }

    /// What is remembered of this process, if it is the same one (pid and start time).
    pub(super) fn known(&self, p: &ProcessSample) -> Option<&Known> {
        let i = self.known.binary_search_by_key(&p.pid, |k| k.pid).ok()?;
        Some(&self.known[i]).filter(|k| k.start_ticks == p.start_ticks)
    }

    pub(super) fn known_mut(&mut self, p: &ProcessSample) -> Option<&mut Known> {
        let i = self.known.binary_search_by_key(&p.pid, |k| k.pid).ok()?;
        // The scan that built the list holds the only reference: no copy is made.
        Some(&mut Arc::make_mut(&mut self.known)[i]).filter(|k| k.start_ticks == p.start_ticks)
    }

    pub(super) fn read(
        &mut self,
        errs: &mut ErrorCounts,
        stats: &mut ReadStats,
    ) -> Result<Vec<ProcessSample>, Reason> {
        let listing::Pids {
            mut pids,
            odd,
            fresh,
        } = self.lister.list(&self.source, self.exits.is_some())?;
        stats.listings = self.lister.listings;
        count(errs, Collector::Processes, Reason::Malformed, odd);
        let stuck = self.pool.stuck();
        let left_out = left_out(&stuck);
        pids.retain(|pid| !left_out.contains(pid));
        let ended = self.exits.as_ref().map(|e| e.ended()).unwrap_or_default();
        let resting = self.resting(&mut pids, &ended);
        stats.rested = resting.len() as u64;
        let ctx = Arc::new(ReadContext {
            source: self.source.clone(),
            grouping: self.grouping.clone(),
            clk_tck: self.clk_tck,
            rollup_refresh: self.reading.rollup_refresh.max(1),
            scan: self.scans,
            known: self.known.clone(),
            memoryless: self.memoryless.clone(),
            fresh,
            descriptors: self.descriptors.clone(),
            exits: self.exits.clone(),
            ended,
            stuck: stuck.iter().map(|&(pid, _)| pid).collect(),
            locked: self.locked.clone(),
            lock_until: std::time::Instant::now() + self.reading.timeout,
        });
        self.scans += 1;
        let work: pool::Work<ProcessRead> =
            Arc::new(move |bufs: &mut Buffers, at: &pool::Progress, pid, _| {
                read_process(&ctx, bufs, at, pid)
            });
        let mut out = Vec::with_capacity(pids.len());
        let mut known = Vec::with_capacity(pids.len());
        let (mut stalled, mut unread) = (Vec::new(), 0);
        // What the next scan reads if no process is created meanwhile.
        let mut listed = Vec::with_capacity(pids.len() + left_out.len() + resting.len());
        for (p, k) in resting {
            listed.push(k.pid);
            out.push(p);
            known.push(k);
        }
        let mut memoryless = Vec::new();
        let (mut denied, mut cleared) = (Vec::new(), Vec::new());
        // A chunk at a time: what a reader returns for a process is about a kilobyte, and
        // only one chunk's worth is held at once, not the whole population's.
        for chunk in pids.chunks(READ_CHUNK) {
            let batch = self
                .pool
                .run(chunk.to_vec(), self.reading.timeout, work.clone());
            for read in batch.results.into_iter().flatten() {
                counted(errs, stats, &read);
                if read.rollup_error == Some(Reason::Denied)
                    || matches!(read.outcome, Err(Reason::Denied))
                {
                    denied.push(read.pid);
                } else if read.rollup_read || read.outcome.is_err() {
                    // Read this time, or gone: no longer refused.
                    cleared.push(read.pid);
                }
                if !matches!(read.outcome, Err(Reason::Vanished)) {
                    listed.push(read.pid);
                }
                if let Some(start) = read.memoryless {
                    memoryless.push((read.pid, start));
                }
                match read.outcome {
                    Ok(Some((p, k))) => {
                        out.push(p);
                        known.push(k);
                    }
                    Ok(None) => {}
                    Err(reason) => count(errs, Collector::Processes, reason, 1),
                }
            }
            stalled.extend(batch.stalled);
            unread += batch.unread;
        }
        let left = stalled.len() + unread;
        stats.stalled = (left + left_out.len()) as u64;
        count(errs, Collector::Processes, Reason::Timeout, left as u64);
        // What was known of a stalled process is kept for when its reader comes back.
        let mut kept = stalled;
        kept.extend(&left_out);
        kept.sort_unstable();
        kept.dedup();
        self.still_denied(denied, cleared, &listed);
        stats.denied = self.denied[..self.denied.len().min(super::DENIED_NAMED)].to_vec();
        self.lister.remember(listed, &kept, unread);
        memoryless.sort_unstable();
        self.memoryless = Arc::new(memoryless);
        for pid in kept {
            if let Ok(i) = self.known.binary_search_by_key(&pid, |k| k.pid) {
                known.push(self.known[i].clone());
            }
        }
        known.sort_unstable_by_key(|k| k.pid);
        self.known = Arc::new(known);
        stats.threads = self.pool.threads() as u64;
        self.count_descriptors(stats);
        Ok(out)
    }

    /// The processes that rest this scan (`rest.rs`), taken out of `pids`: none when the
    /// host's memory moved since the last scan or nothing can rest.
    fn resting(&mut self, pids: &mut Vec<u32>, ended: &[u32]) -> Vec<(ProcessSample, Known)> {
        if self.rest_every <= 1 || self.exits.is_none() || self.host.moved(&self.source) {
            return Vec::new();
        }
        let (scan, every, refresh) = (self.scans, self.rest_every, self.reading.rollup_refresh);
        let mut resting = Vec::new();
        pids.retain(|&pid| {
            let Ok(i) = self.known.binary_search_by_key(&pid, |k| k.pid) else {
                return true;
            };
            let k = &self.known[i];
            if rest::rests(k, scan, every, refresh, ended) {
                let kept = (k.statm_fd.clone(), k.watch.clone());
                resting.push(known::still(self.clk_tck, k, kept, None));
                return false;
            }
            true
        });
        resting
    }

    /// The processes refused when last read: those refused now, and those refused before
    /// that this scan did not read again and still lists.
    fn still_denied(&mut self, mut now: Vec<u32>, mut cleared: Vec<u32>, listed: &[u32]) {
        let mut listed = listed.to_vec();
        listed.sort_unstable();
        cleared.sort_unstable();
        now.extend(self.denied.iter().filter(|pid| {
            cleared.binary_search(pid).is_err() && listed.binary_search(pid).is_ok()
        }));
        now.sort_unstable();
        now.dedup();
        self.denied = now;
    }

    /// The kept descriptors, and one warning when a process could not keep one.
    fn count_descriptors(&mut self, stats: &mut ReadStats) {
        stats.watched = self.exits.as_ref().map_or(0, |e| e.watched().0 as u64);
        if let Some(d) = &self.descriptors {
            stats.kept_descriptors = d.open() as u64;
            if stats.unkept > 0 && !self.descriptors_spent {
                self.descriptors_spent = true;
                crate::log!(
                    Warn,
                    if self
                        .reading
                        .kept_descriptors
                        .is_some_and(|n| n as usize == d.limit())
                    {
                        "--collector.processes.kept-descriptors reached: processes beyond it are read by opening their files each scan"
                    } else {
                        "open-files limit reached: processes beyond it are read by opening their files each scan (raise LimitNOFILE)"
                    },
                    kept = d.open(),
                    budget = d.limit(),
                    refused_by_kernel = d.refused(),
                    unkept = stats.unkept
                );
            }
        }
    }
}
/// The processes a reader is stuck on in a file that does not take the mmap lock (a
/// FIFO, a broken filesystem): it would get stuck again on the same file, so such a
/// process is left out until the reader comes back, and counted as stalled.
fn left_out(stuck: &[(u32, u8)]) -> Vec<u32> {
    stuck
        .iter()
        .filter(|&&(_, at)| {
            !progress::File::of_code(at).is_some_and(progress::File::takes_mmap_lock)
        })
        .map(|&(pid, _)| pid)
        .collect()
}

/// What one process's read adds to the scan's error counts and reading figures.
fn counted(errs: &mut ErrorCounts, stats: &mut ReadStats, read: &ProcessRead) {
    count(
        errs,
        Collector::Processes,
        Reason::Malformed,
        read.malformed,
    );
    if let Some(reason) = read.rollup_error {
        count(errs, Collector::Processes, reason, 1);
    }
    // Every lock slot held by a stuck read: that file was not read this time.
    count(
        errs,
        Collector::Processes,
        Reason::Timeout,
        read.lock_skipped,
    );
    stats.rollups_read += u64::from(read.rollup_read);
    stats.unkept += u64::from(read.unkept);
    stats.slowest_seconds = stats.slowest_seconds.max(read.seconds);
}

/// How many `statm` descriptors may be kept open, and how many processes watched for
/// their end: `--collector.processes.kept-descriptors` ([`DEFAULT_KEPT`] without it) and
/// [`WATCHED_PER_KEPT`] times as many, and never more than the open-files limit less what
/// the server's connections, the deep tier, the kept setting files (at most 512, only with
/// a limit of 4096 or more) and the reader threads need (1,024, or half of a limit under
/// 2,048). The kept descriptors come first.
fn descriptor_budget(limit: Option<u64>, cap: Option<u64>) -> (usize, usize) {
    let limit = limit.unwrap_or(1024).min(usize::MAX as u64) as usize;
    let budget = limit - (limit / 2).min(1024);
    let cap = cap.map_or(DEFAULT_KEPT, |c| c.min(usize::MAX as u64) as usize);
    let kept = budget.min(cap);
    (
        kept,
        (budget - kept).min(cap.saturating_mul(WATCHED_PER_KEPT)),
    )
}

/// Processes watched for their end per kept `statm`: a pidfd holds about 1 KiB of kernel
/// memory, a quarter of a kept `statm`, so the default 2,048 kept and 8,192 watched hold
/// about 17 MiB at most.
const WATCHED_PER_KEPT: usize = 4;

/// `statm` descriptors kept by default. Each holds a page of kernel memory (the file's
/// read buffer, `GFP_KERNEL_ACCOUNT`) until it is closed, charged to the exporter's own
/// memory cgroup though its RSS does not show it: 2,048 are about 8 MiB of a pod's limit
/// whatever the number of processes. Each kept one saves about 6 us of CPU a scan.
const DEFAULT_KEPT: usize = 2048;

mod context;
mod dir;
mod files;
mod group;
pub(super) mod known;
mod listing;
mod plan;
pub(super) mod progress;
mod rest;
mod statm;

use context::{LockSlots, ProcessRead, ReadContext, LOCK_SLOTS};
use files::read_process;
pub(super) use known::Known;

#[cfg(test)]
mod tests;
