//! A bounded pool of reader threads, so one process whose files are slow to read cannot
//! hold up the reading of the others.
//!
//! Reading `/proc/PID/smaps_rollup`, `smaps` or `cmdline` takes the process's mmap lock.
//! It costs time in proportion to the memory mapped (about 8.5 us per resident MiB in
//! 4 KiB pages), and it waits when a writer holds the lock, which on a process stuck in
//! the kernel can last minutes. The read cannot be interrupted. So a batch of pids is
//! shared by `size` workers that take the next pid from an atomic counter, and the caller
//! waits for results only while some arrive: once none has come for `stall`, the workers
//! still busy are left to finish in the background and their pids are reported as
//! stalled. While a worker is stuck the pool starts a replacement, never holding more
//! than `cap` threads, and the pid a stuck worker is reading can be excluded from the
//! next batches ([`Pool::stuck_items`]).

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::mpsc::{self, Sender};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::source::Buffers;

/// What one worker is doing, seen by the pool.
#[derive(Default)]
struct WorkerState {
    /// Set by the pool when it hands over a batch, cleared by the worker when done.
    busy: AtomicBool,
    /// The pid being read, 0 between reads.
    pid: AtomicU32,
    /// The batch it was last given.
    batch: AtomicU64,
    /// What the work said it is reading of `pid` (its own codes), 0 between reads.
    step: AtomicU8,
}

/// Lets the work say which of an item's files it is reading, so that a stuck read names
/// the file ([`Pool::stuck`]).
pub struct Progress<'a>(&'a AtomicU8);

impl Progress<'_> {
    pub fn at(&self, step: u8) {
        self.0.store(step, Ordering::Release);
    }
}

type Task = Box<dyn FnOnce(&mut Buffers, &WorkerState) + Send>;

/// What a batch does with one pid: `work(buffers, progress, pid, index in the batch)`.
pub(crate) type Work<T> = Arc<dyn Fn(&mut Buffers, &Progress, u32, usize) -> T + Send + Sync>;

struct Worker {
    tx: Sender<Task>,
    state: Arc<WorkerState>,
}

/// The result of one batch.
#[derive(Debug)]
pub struct Batch<T> {
    /// One slot per item, in the order given; `None` when the item was not read.
    pub results: Vec<Option<T>>,
    /// Pids whose read was still running when the batch gave up on them.
    pub stalled: Vec<u32>,
    /// Items no worker reached (every worker was stuck and no thread could be added).
    pub unread: usize,
}

pub struct Pool {
    size: usize,
    cap: usize,
    workers: Vec<Worker>,
    /// Batches run so far: the id of the current one.
    batches: u64,
}

struct Shared<T> {
    pids: Vec<u32>,
    next: AtomicUsize,
    cancelled: AtomicBool,
    tx: Sender<(usize, T)>,
    /// Items whose result was sent.
    finished: AtomicUsize,
    /// The thread that waits for the batch: woken by the worker that sends its last result.
    waiter: std::thread::Thread,
}

impl Pool {
    /// `size` workers per batch; at most `cap` threads alive counting stuck ones.
    pub fn new(size: usize, cap: usize) -> Self {
        let size = size.max(1);
        Pool {
            size,
            cap: cap.max(size),
            workers: Vec::new(),
            batches: 0,
        }
    }

    /// Threads alive (idle, working or stuck).
    pub fn threads(&self) -> usize {
        self.workers.len()
    }

    /// Items (pids, or the system pool's jobs) that a worker has been reading since an
    /// earlier batch gave up on it.
    pub(crate) fn stuck_items(&self) -> Vec<u32> {
        self.stuck().into_iter().map(|(pid, _)| pid).collect()
    }

    /// Each stuck read: the pid, and the file the work said it was in.
    pub fn stuck(&self) -> Vec<(u32, u8)> {
        self.workers
            .iter()
            .filter(|w| w.state.busy.load(Ordering::Acquire))
            .map(|w| {
                (
                    w.state.pid.load(Ordering::Acquire),
                    w.state.step.load(Ordering::Acquire),
                )
            })
            .filter(|&(pid, _)| pid != 0)
            .collect()
    }

    fn spawn(&mut self) -> Option<usize> {
        if self.workers.len() >= self.cap {
            return None;
        }
        let (tx, rx) = mpsc::channel::<Task>();
        let state = Arc::new(WorkerState::default());
        let mine = state.clone();
        std::thread::Builder::new()
            .name("membloat-reader".into())
            .spawn(move || {
                let mut bufs = Buffers::default();
                for task in rx {
                    task(&mut bufs, &mine);
                    mine.pid.store(0, Ordering::Release);
                    mine.step.store(0, Ordering::Release);
                    mine.busy.store(false, Ordering::Release);
                }
            })
            .ok()?;
        self.workers.push(Worker { tx, state });
        Some(self.workers.len() - 1)
    }

    /// An idle worker, marked busy; a new thread when none is idle and the cap allows.
    fn take_idle(&mut self) -> Option<usize> {
        // A worker of an earlier batch may still be on its way out of it (busy, but
        // between reads): wait the moment that takes rather than start a thread for nothing.
        let current = self.batches;
        for _ in 0..10_000 {
            let idle = self.workers.iter().position(|w| {
                w.state
                    .busy
                    .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
                    .is_ok()
            });
            if idle.is_some() {
                return idle;
            }
            let leaving = self.workers.iter().any(|w| {
                w.state.busy.load(Ordering::Acquire)
                    && w.state.pid.load(Ordering::Acquire) == 0
                    && w.state.batch.load(Ordering::Acquire) != current
            });
            if !leaving {
                break;
            }
            std::thread::yield_now();
        }
        let i = self.spawn()?;
        self.workers[i].state.busy.store(true, Ordering::Release);
        Some(i)
    }

    fn start<T: Send + 'static>(&mut self, shared: &Arc<Shared<T>>, work: &Work<T>) -> bool {
        let Some(i) = self.take_idle() else {
            return false;
        };
        self.workers[i]
            .state
            .batch
            .store(self.batches, Ordering::Release);
        let (shared, work) = (shared.clone(), work.clone());
        let task: Task = Box::new(move |bufs, state| drain(&shared, &*work, bufs, state));
        if self.workers[i].tx.send(task).is_err() {
            // The thread is gone (it cannot panic out of a read, but be safe).
            self.workers.remove(i);
            return false;
        }
        true
    }

    /// Reads every pid with `work(buffers, progress, pid, index)` on up to `size` workers.
    /// Returns once every item is done, or once no item finished for `stall`.
    pub fn run<T: Send + 'static>(
        &mut self,
        pids: Vec<u32>,
        stall: Duration,
        work: Work<T>,
    ) -> Batch<T> {
        let mut running = self.submit(pids, &work);
        let n = running.results.len();
        let mut last_progress = Instant::now();
        // Items given up on: each was in a read for `stall` when another worker was
        // started for the rest. The batch does not wait for them a second time.
        let mut given_up: Vec<usize> = Vec::new();
        // The caller does not wait on the channel: a waiting receiver would be woken (a
        // context switch) by every single result. It sleeps until the worker that sends
        // the last result wakes it, looking in every eighth of `stall` for a batch that
        // stopped moving; once it has given up on an item, which will never send its
        // result, every millisecond.
        let look = (stall / 8).clamp(Duration::from_millis(1), Duration::from_millis(50));
        loop {
            let before = running.done;
            running.receive();
            let pending = given_up
                .iter()
                .filter(|&&i| running.results[i].is_none())
                .count();
            if running.done + pending == n {
                break;
            }
            if running.done > before {
                last_progress = Instant::now();
            } else if last_progress.elapsed() >= stall {
                // Every worker on this batch is inside one read for `stall` (a worker
                // takes its next item as soon as it sends a result, so each item in a
                // read now has been for that long), or none could be started: add one for
                // the items nobody has taken yet.
                let taken = running.shared.next.load(Ordering::Acquire).min(n);
                given_up.extend((0..taken).filter(|&i| running.results[i].is_none()));
                given_up.sort_unstable();
                given_up.dedup();
                if taken < n && self.start(&running.shared, &work) {
                    last_progress = Instant::now();
                    continue;
                }
                break;
            }
            let nap = if given_up.is_empty() {
                look
            } else {
                Duration::from_millis(1)
            };
            std::thread::park_timeout(nap.min(stall.saturating_sub(last_progress.elapsed())));
        }
        running.finish()
    }

    /// Starts a batch on `min(size, items)` workers and returns without waiting for it
    /// ([`Pool::wait`]).
    pub(crate) fn submit<T: Send + 'static>(
        &mut self,
        pids: Vec<u32>,
        work: &Work<T>,
    ) -> Running<T> {
        self.batches += 1;
        let n = pids.len();
        let (tx, rx) = mpsc::channel();
        let shared = Arc::new(Shared {
            pids,
            next: AtomicUsize::new(0),
            cancelled: AtomicBool::new(false),
            tx,
            finished: AtomicUsize::new(0),
            waiter: std::thread::current(),
        });
        let mut started = 0;
        while started < self.size.min(n) && self.start(&shared, work) {
            started += 1;
        }
        Running {
            results: (0..n).map(|_| None).collect(),
            done: 0,
            shared,
            rx,
        }
    }
}

impl Pool {
    /// Waits for a submitted batch until every item is done or `deadline` passes. Once
    /// no item finished for `nudge` while some are not taken yet, another worker takes
    /// them: a stuck read costs the others `nudge`, and all of them are bounded by the one
    /// deadline however many get stuck.
    pub fn wait<T: Send + 'static>(
        &mut self,
        mut running: Running<T>,
        work: &Work<T>,
        nudge: Duration,
        deadline: Instant,
    ) -> Batch<T> {
        let n = running.results.len();
        let mut last_progress = Instant::now();
        loop {
            let before = running.done;
            running.receive();
            let now = Instant::now();
            if running.done == n || now >= deadline {
                break;
            }
            let nudged = running.done == before
                && now.duration_since(last_progress) >= nudge
                && running.shared.next.load(Ordering::Acquire) < n
                && self.start(&running.shared, work);
            if running.done > before || nudged {
                last_progress = now;
            }
            // Woken by the last result; else it looks for a stuck reader at a quarter of
            // `nudge`.
            let look = (nudge / 4).max(Duration::from_millis(1));
            std::thread::park_timeout((deadline - now).min(look));
        }
        running.finish()
    }
}

/// A batch under way ([`Pool::submit`]).
pub struct Running<T> {
    results: Vec<Option<T>>,
    done: usize,
    shared: Arc<Shared<T>>,
    rx: mpsc::Receiver<(usize, T)>,
}

impl<T> Running<T> {
    fn receive(&mut self) {
        while let Ok((i, r)) = self.rx.try_recv() {
            if self.results[i].is_none() {
                self.results[i] = Some(r);
                self.done += 1;
            }
        }
    }

    /// Gives up on what is still being read.
    fn finish(mut self) -> Batch<T> {
        self.shared.cancelled.store(true, Ordering::Release);
        // Late results that arrived between the last wait and the cancel.
        self.receive();
        let n = self.results.len();
        let taken = self.shared.next.load(Ordering::Acquire).min(n);
        let stalled = (0..taken)
            .filter(|&i| self.results[i].is_none())
            .map(|i| self.shared.pids[i])
            .collect();
        Batch {
            results: self.results,
            stalled,
            unread: n - taken,
        }
    }
}

fn drain<T>(
    shared: &Shared<T>,
    work: &(dyn Fn(&mut Buffers, &Progress, u32, usize) -> T + Send + Sync),
    bufs: &mut Buffers,
    state: &WorkerState,
) {
    while !shared.cancelled.load(Ordering::Acquire) {
        let i = shared.next.fetch_add(1, Ordering::AcqRel);
        let Some(&pid) = shared.pids.get(i) else {
            return;
        };
        state.step.store(0, Ordering::Release);
        state.pid.store(pid, Ordering::Release);
        let r = work(bufs, &Progress(&state.step), pid, i);
        state.pid.store(0, Ordering::Release);
        if shared.tx.send((i, r)).is_err() {
            return;
        }
        if shared.finished.fetch_add(1, Ordering::AcqRel) + 1 == shared.pids.len() {
            shared.waiter.unpark();
        }
    }
}

#[cfg(test)]
mod tests;
