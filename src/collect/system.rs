//! The system collectors (the units of `units::ALL`) and `btime`. Each is one item of a
//! batch on a pool of its own, read while the processes are: a file that never answers (a
//! FIFO, a hung filesystem) costs a scan the read timeout once, and the collector reading
//! it is then left out, reported as `timeout`, until its reader comes back; it is never
//! started again on the stuck file, so no thread leaks.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::pool::Pool;
use super::{count, outcome, pool, CollectorRun, ErrorCounts, Sample};
use crate::family::Collector;
use crate::source::{Buffer, Buffers, Reason, Source};
use crate::units::{self, Collect, Collectors, Output, Reader};

/// The pool's items: unit `i` of `units::ALL` is item `i + 1` (pool items are never 0),
/// and the item after the last unit reads `btime`.
fn unit_item(i: usize) -> u32 {
    i as u32 + 1
}

fn boot_time_item() -> u32 {
    unit_item(units::ALL.len())
}

/// What one item of the system pool read, with the values it skipped and how long it took.
pub(super) struct Done {
    /// A unit's reading, or (the `btime` item) nothing.
    read: Result<Output, Reason>,
    /// `btime`, from its item.
    boot_time_seconds: Option<f64>,
    errors: ErrorCounts,
    seconds: f64,
}

/// The units' readers, in the order of `units::ALL`, each started once and kept; a
/// reader runs on one thread at a time (a unit still stuck is not started again).
type Units = Arc<Vec<Mutex<Box<dyn Collect>>>>;

/// Runs one item on a reader thread.
fn run(source: &Source, buf: &mut Buffer, item: u32, units: &Units) -> Option<Done> {
    let started = Instant::now();
    let mut errors = ErrorCounts::new();
    let i = item.checked_sub(1)? as usize;
    let (read, boot_time_seconds) = if item == boot_time_item() {
        let boot = source
            .read_proc("stat", buf)
            .ok()
            .and_then(crate::parse::stat::boot_time)
            .map(|v| v as f64);
        (Err(Reason::Unsupported), boot)
    } else {
        let unit = units.get(i)?;
        let mut r = Reader::new(source, buf);
        // A reader that panicked mid-read is used again: a unit keeps its state whole
        // between statements (the kernel log's cursor moves after a record is taken).
        let read = unit.lock().unwrap_or_else(|e| e.into_inner()).read(&mut r);
        let collector = Collector::Unit(units::ALL[i].name);
        for (&reason, &n) in &r.skipped {
            count(&mut errors, collector, reason, n);
        }
        (read, None)
    };
    Some(Done {
        read,
        boot_time_seconds,
        errors,
        seconds: started.elapsed().as_secs_f64(),
    })
}

/// The work of the system pool.
fn work(source: Source, units: Units) -> pool::Work<Option<Done>> {
    Arc::new(move |bufs: &mut Buffers, _: &pool::Progress, item, _| {
        run(&source, &mut bufs.main, item, &units)
    })
}

/// The system collectors' readers and what they keep between scans.
pub(super) struct System {
    /// One reader, with another started for each file that never answers (a stuck item is
    /// not started again), so any number of them cost a scan the timeout once.
    pool: Pool,
    work: pool::Work<Option<Done>>,
    /// The units' readers, with what they keep between scans.
    units: Units,
    /// `btime`, once read.
    pub(super) boot_time_seconds: Option<f64>,
}

impl System {
    pub(super) fn new(source: Source) -> System {
        let readers: Units = Arc::new(units::ALL.iter().map(|u| Mutex::new((u.start)())).collect());
        let items = units::ALL.len() + 1;
        System {
            pool: Pool::new(1, 2 * items),
            work: work(source, Arc::clone(&readers)),
            units: readers,
            boot_time_seconds: None,
        }
    }

    /// Reader threads alive, stuck ones included.
    pub(super) fn threads(&self) -> usize {
        self.pool.threads()
    }

    /// Every unit reads what its source holds from before the exporter started.
    pub(super) fn read_history(&self) {
        for unit in self.units.iter() {
            unit.lock()
                .unwrap_or_else(|e| e.into_inner())
                .read_history();
        }
    }

    /// Starts reading the enabled units' files on the system pool, all at once, each on
    /// its own reader, and `btime` until it was read once. A unit whose reader is still
    /// stuck from an earlier scan is not started again.
    pub(super) fn start(&mut self, c: Collectors) -> SystemRun {
        let mut items: Vec<u32> = (0..units::ALL.len())
            .filter(|&i| c.enabled(Collector::Unit(units::ALL[i].name)))
            .map(unit_item)
            .collect();
        if c.enabled(Collector::Processes) && self.boot_time_seconds.is_none() {
            items.push(boot_time_item());
        }
        let stuck = self.pool.stuck_items();
        let run: Vec<u32> = items
            .iter()
            .copied()
            .filter(|j| !stuck.contains(j))
            .collect();
        let running = self.pool.submit(run.clone(), &self.work);
        SystemRun {
            items,
            run,
            running,
        }
    }

    /// Waits for the system reads until `deadline` and records them: a unit that is not
    /// back by then (or was not started, its reader still stuck) fails with `timeout`.
    /// Collectors come out in their order (`Collector::all`), whichever finished first.
    pub(super) fn finish(&mut self, started: SystemRun, deadline: Instant, s: &mut Sample) {
        // A reader stuck on one file hands the files after it to another within 20 ms.
        let nudge = Duration::from_millis(20);
        let mut results = self
            .pool
            .wait(started.running, &self.work, nudge, deadline)
            .results;
        for item in started.items {
            let done = started
                .run
                .iter()
                .position(|&j| j == item)
                .and_then(|i| results[i].take())
                .flatten();
            if item == boot_time_item() {
                if let Some(boot) = done.and_then(|d| d.boot_time_seconds) {
                    self.boot_time_seconds = Some(boot);
                }
            } else {
                let unit = units::ALL[item as usize - 1];
                record(s, Collector::Unit(unit.name), done);
            }
        }
        s.collectors.sort_by_key(|c| c.name.position());
        s.boot_time_seconds = self.boot_time_seconds;
    }
}

/// The system reads of a scan, under way.
pub(super) struct SystemRun {
    items: Vec<u32>,
    /// The items started, in the batch's order.
    run: Vec<u32>,
    running: pool::Running<Option<Done>>,
}

/// Records a unit's read: its reading, success and duration; a read that did not come
/// back within the timeout (`None`) as a failure with reason `timeout`.
fn record(s: &mut Sample, name: Collector, done: Option<Done>) {
    let (ok, seconds) = match done {
        None => {
            count(&mut s.errors, name, Reason::Timeout, 1);
            (false, 0.0)
        }
        Some(done) => {
            for (&k, &n) in &done.errors {
                *s.errors.entry(k).or_insert(0) += n;
            }
            let ok = done.read.map(|reading| s.host.accept(name, reading));
            (outcome(&mut s.errors, name, ok), done.seconds)
        }
    };
    s.collectors.push(CollectorRun {
        name,
        success: ok,
        duration_seconds: seconds,
    });
}
