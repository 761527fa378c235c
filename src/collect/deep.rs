//! The deep tier: full `/proc/PID/smaps` of candidate processes, then their allocator and
//! heap walk, least recently read first, within the CPU budget of a scan.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::processes::known::{DeepMemory, Known};
use super::processes::Processes;
use super::{count, pool, thread_cpu, DeepRun, ErrorCounts, ProcessSample};
use crate::config::DeepConfig;
use crate::family::Collector;
use crate::heap::{self, HeapReading};
use crate::parse::cgroup;
use crate::parse::smaps::{self, SmapsSummary};
use crate::parse::stat::Stat;
use crate::parse::status::Status;
use crate::source::{Buffer, Buffers, Reason, Source};

/// One deep-tier read.
enum DeepRead {
    /// The summary, the heap reading and the CPU time the heap walk took.
    Done(
        Result<Box<(SmapsSummary, HeapReading, Duration)>, Reason>,
        u64,
    ),
    /// Left for a later scan by the CPU budget.
    Deferred,
}

/// A process worth a deep read: enough anonymous memory, or address space not backed by
/// RAM, or one `explain --pid` names (`DeepConfig::focus`).
fn is_candidate(deep: &DeepConfig, p: &ProcessSample) -> bool {
    let st = &p.status;
    let anon = st.rss_anon_bytes.unwrap_or(0);
    let unbacked = st
        .vm_size_bytes
        .unwrap_or(0)
        .saturating_sub(st.vm_rss_bytes.unwrap_or(0));
    anon >= deep.min_bytes
        || unbacked >= deep.min_bytes.saturating_mul(8)
        || deep.focus.contains(&p.pid)
}

/// The deep tier: full smaps of the candidates that are due, least recently read first,
/// until the CPU budget of this scan is spent, on the deep tier's own reader threads.
pub(super) fn read(
    procs: &mut Processes,
    deep: &DeepConfig,
    processes: &mut [ProcessSample],
    errs: &mut ErrorCounts,
) -> DeepRun {
    let started = Instant::now();
    let mut run = DeepRun::default();
    // A process whose files a reader is stuck in would hold a deep reader the same way.
    let mut stuck = procs.pool.stuck_items();
    stuck.extend(procs.deep_pool.stuck_items());
    let mut due: Vec<(Option<Instant>, u64, usize)> = Vec::new();
    for (i, p) in processes.iter().enumerate() {
        if !is_candidate(deep, p) {
            continue;
        }
        run.candidates += 1;
        let memory = deep_memory(&p.status);
        let known = procs.known(p);
        let last = known.and_then(|k| k.deep_read.as_deref().copied());
        let unsettled = known.map_or(0, |k| k.unsettled);
        let over_budget = known.map_or(0, |k| k.over_budget);
        // A process whose address space and memory did not move since its last deep
        // read has the same heaps, arenas and commit: it is read again only after ten
        // intervals, which catches what moves without them. A heap that changed under
        // the walk, or a newcomer's memory still moving, is read again on the retry
        // schedule: until a walk holds, the process shows no hoarding figure at all.
        let is_due = last.is_none_or(|(t, before)| {
            let age = started.duration_since(t);
            if over_budget > 0 {
                age >= backoff_wait(over_budget, deep.interval)
            } else if unsettled > 0 {
                age >= retry_wait(unsettled, deep.interval)
            } else {
                age >= deep.interval && (before != memory || age >= deep.interval * 10)
            }
        });
        if is_due && !stuck.contains(&p.pid) {
            let anon = p.status.rss_anon_bytes.unwrap_or(0);
            due.push((last.map(|l| l.0), u64::MAX - anon, i));
        }
    }
    // Never read first, then the longest unread; larger processes first among equals.
    due.sort_unstable();
    let spent = Arc::new(AtomicU64::new(0));
    let starts = due
        .iter()
        .map(|&(_, _, i)| processes[i].start_ticks)
        .collect();
    // No read starts past the batch's deadline, whatever CPU it cost: reads that each
    // take just under the stall limit (a process's mmap lock held, then let go) cannot
    // stretch the scan past the liveness probe. The batch ends within two stall limits.
    let until = started + procs.reading.timeout;
    let work = reader(procs, deep, spent.clone(), starts, until);
    let batch = procs.deep_pool.run(
        due.iter().map(|&(_, _, i)| processes[i].pid).collect(),
        procs.reading.timeout,
        work,
    );
    let now = Instant::now();
    for (&(_, _, i), read) in due.iter().zip(batch.results) {
        let p = &mut processes[i];
        match read {
            Some(DeepRead::Done(result, rejected)) => {
                count(errs, Collector::Processes, Reason::Malformed, rejected);
                match result {
                    Ok(read) => {
                        let (summary, heap, _) = *read;
                        run.count(&heap);
                        p.smaps = Some(Box::new(summary));
                        p.heap = Some(Arc::new(heap));
                    }
                    Err(reason) => count(errs, Collector::Processes, reason, 1),
                }
                let memory = deep_memory(&p.status);
                let heap = p.heap.as_deref();
                let transient = heap.is_some_and(is_transient);
                let unreadable = heap.is_some_and(is_unreadable);
                let over_budget = heap.is_some_and(is_over_budget);
                if let Some(k) = procs.known_mut(p) {
                    // A newcomer whose memory could not be read may have been read as it
                    // started (or exec'd): read again soon, twice at most.
                    let starting = k.newcomer && unreadable && k.unsettled < UNREADABLE_RETRIES;
                    settle(k, now, memory, transient || starting);
                    k.over_budget = if over_budget {
                        k.over_budget.saturating_add(1)
                    } else {
                        0
                    };
                }
                run.covered += 1;
            }
            Some(DeepRead::Deferred) => run.deferred += 1,
            None => {
                count(errs, Collector::Processes, Reason::Timeout, 1);
                // The scan stopped waiting for it: backed off like a read over budget,
                // never due again at once.
                let memory = deep_memory(&p.status);
                if let Some(k) = procs.known_mut(p) {
                    k.deep_read = Some(Box::new((now, memory)));
                    k.over_budget = k.over_budget.saturating_add(1);
                }
            }
        }
    }
    run.duration_seconds = started.elapsed().as_secs_f64();
    let taken = |n: &AtomicU64| Duration::from_nanos(n.swap(0, Ordering::AcqRel)).as_secs_f64();
    run.cpu_seconds = taken(&procs.deep_cpu.all);
    run.heap_walk_cpu_seconds = taken(&procs.deep_cpu.heap);
    run
}

/// What a deep reader does with one pid: smaps, the heap readers and the cgroup, while
/// this scan's CPU budget (`spent` so far) lasts and until the batch's deadline; every read's CPU is added to the
/// processes' running totals when it ends, even one the scan stopped waiting for. A
/// process whose start time (`starts`, by index in the batch) is not the same after the
/// read is another process that took the pid meanwhile: the read is dropped as vanished.
fn reader(
    procs: &Processes,
    deep: &DeepConfig,
    spent: Arc<AtomicU64>,
    starts: Vec<u64>,
    until: Instant,
) -> pool::Work<DeepRead> {
    let budget = deep.budget.as_nanos() as u64;
    let (source, total, walk) = (procs.source.clone(), procs.deep_cpu.clone(), deep.heap_walk);
    let binaries = procs.binaries.clone();
    Arc::new(move |bufs: &mut Buffers, at: &pool::Progress, pid, n| {
        super::processes::progress::at(at, super::processes::progress::File::Deep);
        // One process is always read; the others while the budget and the time last.
        if n > 0 && (spent.load(Ordering::Acquire) >= budget || Instant::now() >= until) {
            return DeepRead::Deferred;
        }
        let cpu = thread_cpu();
        // A thread of it waits uninterruptibly, maybe for its own mmap lock behind a
        // holder that waits on a server: smaps would wait with it. Left for its next
        // deep interval, no reader held.
        if source.waits_uninterruptibly(pid, &mut bufs.aux) {
            return DeepRead::Done(Err(Reason::Timeout), 0);
        }
        // What another process holds is untrusted: a reader that panics on it loses
        // that process's read, not the reader thread or the exporter.
        let read = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            read_smaps(&source, &binaries, &mut bufs.main, pid, walk)
        }));
        let mut read = read.unwrap_or_else(|_| {
            bufs.main.shrink();
            DeepRead::Done(Err(Reason::Malformed), 1)
        });
        let same = |bufs: &mut Buffers| {
            let stat = source.read_pid(pid, "stat", &mut bufs.aux).ok();
            stat.and_then(|t| Stat::parse(t).ok())
                .map(|s| s.start_ticks)
                == starts.get(n).copied()
        };
        if matches!(read, DeepRead::Done(Ok(_), _)) && !same(bufs) {
            read = DeepRead::Done(Err(Reason::Vanished), 0);
        }
        if let DeepRead::Done(Ok(r), _) = &mut read {
            // Unread or without a memory line: the kill's own cgroup path stands in.
            r.1.memory_cgroup = source
                .read_pid(pid, "cgroup", &mut bufs.aux)
                .ok()
                .and_then(|t| cgroup::memory_cgroup(t).ok())
                .map(str::to_string);
        }
        let used = thread_cpu().saturating_sub(cpu).as_nanos() as u64;
        spent.fetch_add(used, Ordering::AcqRel);
        // Counted even when the scan stopped waiting: the next scan reports it.
        total.all.fetch_add(used, Ordering::AcqRel);
        if let DeepRead::Done(Ok(r), _) = &read {
            total
                .heap
                .fetch_add(r.2.as_nanos() as u64, Ordering::AcqRel);
        }
        read
    })
}

/// Whether a reader of the process found its heap moving (or, for a JVM, still starting):
/// read again on the retry schedule, not a deep interval later.
fn is_transient(h: &HeapReading) -> bool {
    h.readings.iter().any(heap::Measurement::is_transient)
}

/// Whether any of a process's readers could not read its memory.
fn is_unreadable(h: &HeapReading) -> bool {
    h.readings.iter().any(heap::Measurement::is_unreadable)
}

/// Reads again, on the retry schedule, of a newcomer whose memory could not be read: a
/// process read as it starts or exec's can be read a moment later, one without ptrace
/// access never is, and costs no more than this.
const UNREADABLE_RETRIES: u8 = 2;

/// Whether any of a process's readers stopped at its budget.
fn is_over_budget(h: &HeapReading) -> bool {
    h.readings.iter().any(heap::Measurement::is_over_budget)
}

impl DeepRun {
    /// What one process's reading adds to the run's counts.
    fn count(&mut self, heap: &HeapReading) {
        for r in &heap.readings {
            self.reads.count(r);
        }
    }
}

/// Records a deep read of `k` at `now` with its `memory`: it settled, or it is read again
/// on the retry schedule (its walk found the heap moving, or a newcomer's memory moved
/// since its read before, or it is a newcomer's first read, with nothing to compare).
fn settle(k: &mut Known, now: Instant, memory: DeepMemory, transient: bool) {
    let before = k.deep_read.as_deref().map(|&(_, m)| m);
    let moving = k.newcomer && before != Some(memory);
    k.deep_read = Some(Box::new((now, memory)));
    if transient || moving {
        k.unsettled = k.unsettled.saturating_add(1);
    } else {
        k.unsettled = 0;
        k.newcomer = false;
    }
}

/// How long a process waits for its next deep read after `unsettled` reads in a row gave
/// no settled figure (the heap changed under the walk, or a newcomer's memory moved since
/// its read before): the next scan for the first eight, then a wait that doubles every
/// four reads (1.5 s, 3.5 s, 7.5 s, ...), never longer than the deep interval, when it is
/// read like any other candidate. A newcomer still allocating is measured at the first
/// scan after it settles while its first minute lasts (with 1 s scans: reads at 1-8 s,
/// then every 2 s up to 16 s, every 4 s up to 32 s), and a heap that never holds still
/// costs a read a deep interval once the schedule reaches it. Every read still counts
/// against the scan's CPU budget.
fn retry_wait(unsettled: u8, interval: Duration) -> Duration {
    if unsettled <= 8 {
        return Duration::ZERO;
    }
    let doublings = u32::from((unsettled - 1) / 4).min(16);
    let wait = Duration::from_millis(500) * ((1u32 << doublings) - 1);
    wait.min(interval)
}

/// How long a process waits for its next deep read after `over_budget` reads in a row ran
/// out of their budget or time: the deep interval, doubled for each after the first, at
/// most sixteen intervals. A process that makes every read of it expensive costs one
/// reader's budget every sixteen intervals at most, never a read every scan.
fn backoff_wait(over_budget: u8, interval: Duration) -> Duration {
    interval * (1u32 << u32::from(over_budget.saturating_sub(1)).min(4))
}

fn deep_memory(st: &Status) -> DeepMemory {
    [
        st.vm_size_bytes,
        st.vm_rss_bytes,
        st.rss_anon_bytes,
        st.vm_swap_bytes,
    ]
}

/// `smaps` (parsed as it is read), then the allocator and (when `walk`) the heap walk from
/// its mappings.
fn read_smaps(
    source: &Source,
    binaries: &heap::Binaries,
    buf: &mut Buffer,
    pid: u32,
    walk: bool,
) -> DeepRead {
    let read = match parse_smaps(source, buf, pid) {
        Ok(mut smaps) => {
            let cpu = thread_cpu();
            let mut heap = heap::read_with(source, pid, &smaps.vmas, walk, binaries);
            // A figure that did not fit the mappings read just before it, where the
            // mappings have grown since: the process was growing between the two reads
            // (its first scan, as it starts), not lying. Read once more, from the new ones.
            if heap.readings.iter().any(heap::Measurement::is_implausible) {
                if let Ok(now) = parse_smaps(source, buf, pid) {
                    if heap::grew(&smaps.vmas, &now.vmas) {
                        heap = heap::read_with(source, pid, &now.vmas, walk, binaries);
                        smaps = now;
                    }
                }
            }
            let walk_cpu = thread_cpu().saturating_sub(cpu);
            DeepRead::Done(
                Ok(Box::new((smaps.summary(), heap, walk_cpu))),
                smaps.rejected as u64,
            )
        }
        Err(e) => DeepRead::Done(Err(e), 0),
    };
    buf.shrink();
    read
}

/// A process's `smaps`, parsed as it is read.
fn parse_smaps(source: &Source, buf: &mut Buffer, pid: u32) -> Result<smaps::Smaps, Reason> {
    let mut parser = smaps::Parser::default();
    match source.read_smaps(pid, buf, |line| parser.line(line)) {
        // A process with more mappings than MAX_SMAPS_BYTES holds: a partial summary
        // would understate it.
        Ok(false) => Err(Reason::Malformed),
        Ok(true) => parser.finish().map_err(|e| {
            crate::log!(
                Debug,
                "malformed file",
                pid = pid,
                file = "smaps",
                error = e
            );
            Reason::Malformed
        }),
        Err(e) => Err(e.process_reason()),
    }
}

#[cfg(test)]
mod tests {
    use super::{backoff_wait, retry_wait};
    use std::time::Duration;

    #[test]
    fn reads_over_budget_back_off_to_sixteen_intervals() {
        let minute = Duration::from_secs(60);
        let waits: Vec<u64> = (1..=7).map(|k| backoff_wait(k, minute).as_secs()).collect();
        assert_eq!(waits, [60, 120, 240, 480, 960, 960, 960]);
        assert_eq!(backoff_wait(u8::MAX, minute), minute * 16);
    }

    #[test]
    fn retries_come_at_the_next_scan_then_back_off_to_the_deep_interval() {
        let minute = Duration::from_secs(60);
        let ms = |n| Duration::from_millis(n);
        let waits: Vec<Duration> = (1..=28).map(|k| retry_wait(k, minute)).collect();
        assert_eq!(&waits[..8], &[Duration::ZERO; 8]);
        assert_eq!(&waits[8..12], &[ms(1500); 4]);
        assert_eq!(&waits[12..16], &[ms(3500); 4]);
        assert_eq!(&waits[16..20], &[ms(7500); 4]);
        assert_eq!(&waits[20..24], &[ms(15500); 4]);
        assert_eq!(&waits[24..28], &[ms(31500); 4]);
        assert_eq!(retry_wait(29, minute), minute);
        assert_eq!(retry_wait(u8::MAX, minute), minute);
        // A deep interval shorter than the schedule caps it; 0 s walks at every scan.
        assert_eq!(
            retry_wait(20, Duration::from_secs(5)),
            Duration::from_secs(5)
        );
        assert_eq!(retry_wait(u8::MAX, Duration::ZERO), Duration::ZERO);
    }
}
