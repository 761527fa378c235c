//! Collecting: one scan's raw values, the system files once and every process (this
//! module), read on a bounded pool of threads (`pool`), grouped (`matcher`), with the
//! heap walk of deep-read processes (`heap`). All file access goes through `source`.

pub mod heap;
pub mod matcher;
pub mod pool;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;
use std::time::{Duration, Instant, SystemTime};

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::config::{Collectors, DeepConfig, GroupBy, ReadConfig};
use crate::parse::memory_stat::MemoryStat;
use crate::parse::{
    self, cgroup, meminfo::Meminfo, pressure::Pressure, smaps, smaps::SmapsSummary,
    smaps_rollup::SmapsRollup, stat::Stat, statm, status::Status, sysfs, vmstat::Vmstat,
};
use crate::source::{Buffer, Buffers, ReadError, Reason, Source};
use heap::HeapReading;
use matcher::{Candidate, Matchers};
use pool::Pool;

/// `/proc/sys/vm` settings.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Sysctl {
    /// `overcommit_memory`: 0 heuristic, 1 always, 2 never (strict accounting).
    pub overcommit_memory: Option<u64>,
    /// `overcommit_ratio`, in percent of RAM (used in mode 2 when `overcommit_kbytes` is 0).
    pub overcommit_ratio_percent: Option<u64>,
    /// `overcommit_kbytes`, in bytes.
    pub overcommit_bytes: Option<u64>,
    /// `panic_on_oom`.
    pub panic_on_oom: Option<u64>,
    /// `swappiness`.
    pub swappiness: Option<u64>,
}

/// `/sys/kernel/mm/transparent_hugepage/khugepaged`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Khugepaged {
    pub defrag: Option<u64>,
    pub max_ptes_none: Option<u64>,
    pub max_ptes_swap: Option<u64>,
    pub max_ptes_shared: Option<u64>,
    pub pages_to_scan: Option<u64>,
    pub scan_sleep_millisecs: Option<u64>,
    pub alloc_sleep_millisecs: Option<u64>,
    /// Counter: huge pages khugepaged collapsed.
    pub pages_collapsed: Option<u64>,
    /// Counter: full passes over all eligible memory.
    pub full_scans: Option<u64>,
}

/// One `hugepages-<size>kB` directory (kernel 6.8+ multi-size THP).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HugepageSize {
    /// The directory name, e.g. `hugepages-2048kB`, exported as the `size` label (`2048kB`).
    pub label: String,
    pub size_bytes: u64,
    /// `enabled`: always, inherit, madvise or never.
    pub enabled: Option<String>,
    /// Every file under `stats/`, in name order.
    pub stats: Vec<(String, u64)>,
}

/// The THP settings and counters.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Thp {
    pub enabled: Option<String>,
    pub defrag: Option<String>,
    pub shmem_enabled: Option<String>,
    pub khugepaged: Khugepaged,
    pub sizes: Vec<HugepageSize>,
}

/// One process, keyed by `(pid, start_ticks)`.
#[derive(Debug, Clone, PartialEq)]
pub struct ProcessSample {
    pub pid: u32,
    pub start_ticks: u64,
    pub comm: String,
    pub state: char,
    /// User plus system CPU time, seconds.
    pub cpu_seconds: f64,
    /// Unix time the process started (needs `btime` from `/proc/stat`).
    pub start_time_seconds: Option<f64>,
    pub status: Status,
    /// `None` when `smaps_rollup` could not be read (permission) or is empty.
    pub rollup: Option<SmapsRollup>,
    pub oom_score: Option<u64>,
    pub oom_score_adj: Option<i64>,
    /// The group the process belongs to; `None` when a matcher file matched nothing.
    pub group: Option<String>,
    /// This scan's deep read of `/proc/PID/smaps`, when the deep tier covered it.
    pub smaps: Option<SmapsSummary>,
    /// This scan's allocator identity and heap walk, with the deep read.
    pub heap: Option<Arc<HeapReading>>,
}

impl ProcessSample {
    /// Identity across scans: a reused pid has another start time.
    pub fn key(&self) -> (u32, u64) {
        (self.pid, self.start_ticks)
    }
}

/// What the deep tier did in one scan.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct DeepRun {
    /// Processes that met the candidate thresholds.
    pub candidates: u64,
    /// Candidates whose smaps was read in this scan.
    pub covered: u64,
    /// Candidates due for a read but left for a later scan by the CPU budget.
    pub deferred: u64,
    pub duration_seconds: f64,
    pub cpu_seconds: f64,
    /// Heap walks by how they ended, indexed by [`heap::Outcome`].
    pub heap_walks: [u64; heap::Outcome::ALL.len()],
    /// CPU time the heap walks took (part of `cpu_seconds`).
    pub heap_walk_cpu_seconds: f64,
}

/// How one collector did in a scan.
#[derive(Debug, Clone, PartialEq)]
pub struct CollectorRun {
    pub name: &'static str,
    pub success: bool,
    pub duration_seconds: f64,
}

/// Error counts by (collector, reason).
pub type ErrorCounts = BTreeMap<(&'static str, Reason), u64>;

/// Everything one scan read.
#[derive(Debug, Clone, Default)]
pub struct Sample {
    pub taken_at: Option<SystemTime>,
    pub duration_seconds: f64,
    pub meminfo: Option<Meminfo>,
    pub vmstat: Option<Vmstat>,
    pub sysctl: Option<Sysctl>,
    pub thp: Option<Thp>,
    pub pressure: Option<Pressure>,
    pub processes: Vec<ProcessSample>,
    pub collectors: Vec<CollectorRun>,
    pub errors: ErrorCounts,
    pub deep: Option<DeepRun>,
    /// How the processes were read, when the processes collector ran.
    pub reads: Option<ReadStats>,
    /// Memory cgroups with anonymous memory, by path under the hierarchy root.
    pub cgroups: Option<Vec<(String, MemoryStat)>>,
    /// Online CPUs: glibc allows 8 arenas per CPU.
    pub online_cpus: u64,
}

/// How processes are put in groups, compiled.
#[derive(Debug, Clone)]
pub enum Grouping {
    Comm,
    Cgroup,
    Matcher(Matchers),
}

impl Grouping {
    pub fn from_config(g: &GroupBy) -> Result<Self, String> {
        Ok(match g {
            GroupBy::Comm => Grouping::Comm,
            GroupBy::Cgroup => Grouping::Cgroup,
            GroupBy::Matcher(path) => {
                let text = std::fs::read_to_string(path)
                    .map_err(|e| format!("{}: {e}", path.display()))?;
                Grouping::Matcher(
                    Matchers::parse(&text).map_err(|e| format!("{}: {e}", path.display()))?,
                )
            }
        })
    }
}

/// What the processes collector did in one scan beyond reading each process.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ReadStats {
    /// Processes whose `smaps_rollup` this scan read; the others were unchanged.
    pub rollups_read: u64,
    /// Processes left behind because their read outlasted the read timeout.
    pub stalled: u64,
    /// The longest time the files of one process took.
    pub slowest_seconds: f64,
    /// Reader threads alive, stuck ones included.
    pub threads: u64,
}

/// What a scan remembers of a process for the next one: enough to tell whether its memory
/// changed, and the values it kept when it did not re-read them.
#[derive(Debug, Clone)]
struct Known {
    pid: u32,
    start_ticks: u64,
    /// `statm` size, resident and shared pages: when they are unchanged, so is the memory
    /// that status, smaps_rollup and oom_score report.
    statm: Option<[u64; 3]>,
    status: Status,
    comm: String,
    oom_score_adj: i64,
    oom_score: u64,
    rollup: Option<SmapsRollup>,
    group: Option<String>,
}

/// Everything a reader thread needs for one scan.
struct ReadContext {
    source: Source,
    grouping: Arc<Grouping>,
    clk_tck: f64,
    boot_time_seconds: Option<f64>,
    rollup_refresh: u64,
    scan: u64,
    /// The previous scan's processes, by pid.
    known: Arc<Vec<Known>>,
    /// Pids a reader from an earlier scan is still stuck on: their smaps_rollup and
    /// cmdline are not touched again until it comes back.
    stuck: Vec<u32>,
}

/// One process as a reader thread saw it.
struct ProcessRead {
    /// `Ok(None)`: a kernel thread.
    outcome: Result<Option<(ProcessSample, Known)>, Reason>,
    malformed: u64,
    /// Why smaps_rollup could not be read while the rest could.
    rollup_error: Option<Reason>,
    rollup_read: bool,
    seconds: f64,
}

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

/// Reads samples; owns the reusable buffers, the reader threads and the values fixed at
/// boot.
pub struct Scanner {
    source: Source,
    collectors: Collectors,
    grouping: Arc<Grouping>,
    clk_tck: f64,
    boot_time_seconds: Option<f64>,
    deep: DeepConfig,
    reading: ReadConfig,
    /// When each process's smaps was last read, and its memory then, by (pid, start ticks).
    deep_read_at: HashMap<(u32, u64), (Instant, DeepMemory)>,
    known: Arc<Vec<Known>>,
    scans: u64,
    pool: Pool,
    buf: Buffer,
}

impl Scanner {
    pub fn new(
        source: Source,
        collectors: Collectors,
        grouping: Grouping,
        deep: DeepConfig,
        reading: ReadConfig,
    ) -> Self {
        let mut buf = Buffer::default();
        let boot_time_seconds = source.read_proc("stat", &mut buf).ok().and_then(|text| {
            text.lines()
                .find_map(|l| l.strip_prefix("btime "))
                .and_then(|v| v.trim().parse::<u64>().ok())
                .map(|v| v as f64)
        });
        // sysconf(_SC_CLK_TCK) is 100 on every Linux architecture in practice.
        let clk_tck = nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
            .ok()
            .flatten()
            .filter(|&t| t > 0)
            .unwrap_or(100) as f64;
        Scanner {
            source,
            collectors,
            grouping: Arc::new(grouping),
            clk_tck,
            boot_time_seconds,
            deep,
            reading,
            deep_read_at: HashMap::new(),
            known: Arc::new(Vec::new()),
            scans: 0,
            // Readers stuck in a read are replaced, up to four of them.
            pool: Pool::new(reading.readers, reading.readers + 4),
            buf,
        }
    }

    /// Reads everything the enabled collectors need. Never fails: what could not be read
    /// is counted in `errors` and marked in `collectors`.
    pub fn scan(&mut self) -> Sample {
        let started = Instant::now();
        let mut s = Sample {
            taken_at: Some(SystemTime::now()),
            online_cpus: nix::unistd::sysconf(nix::unistd::SysconfVar::_NPROCESSORS_ONLN)
                .ok()
                .flatten()
                .filter(|&n| n > 0)
                .unwrap_or(1) as u64,
            ..Sample::default()
        };
        let c = self.collectors;
        if c.meminfo {
            s.meminfo = self.timed(&mut s, "meminfo", |me, errs| {
                let m = me
                    .source
                    .parse_proc("meminfo", &mut me.buf, |t| Meminfo::parse(t).ok())?;
                count(errs, "meminfo", Reason::Malformed, m.rejected as u64);
                Ok(m)
            });
        }
        if c.vmstat {
            s.vmstat = self.timed(&mut s, "vmstat", |me, errs| {
                let v = me
                    .source
                    .parse_proc("vmstat", &mut me.buf, |t| Vmstat::parse(t).ok())?;
                count(errs, "vmstat", Reason::Malformed, v.rejected as u64);
                Ok(v)
            });
        }
        if c.sysctl {
            s.sysctl = self.timed(&mut s, "sysctl", |me, errs| me.read_sysctl(errs));
        }
        if c.thp {
            s.thp = self.timed(&mut s, "thp", |me, errs| me.read_thp(errs));
        }
        if c.pressure {
            s.pressure = self.timed(&mut s, "pressure", |me, _| {
                me.source
                    .parse_proc("pressure/memory", &mut me.buf, |t| Pressure::parse(t).ok())
            });
        }
        if c.processes {
            let mut stats = ReadStats::default();
            if let Some(list) = self.timed(&mut s, "processes", |me, errs| {
                me.read_processes(errs, &mut stats)
            }) {
                s.processes = list;
                s.deep = Some(self.read_deep(&mut s.processes, &mut s.errors));
            }
            s.reads = Some(stats);
        }
        if c.cgroup {
            s.cgroups = self.timed(&mut s, "cgroup", |me, errs| me.read_cgroups(errs));
        }
        s.duration_seconds = started.elapsed().as_secs_f64();
        s
    }

    /// Every memory cgroup's anonymous and huge page memory. cgroup v1 `rss`/`rss_huge` count
    /// a cgroup's own processes, so every cgroup with some is reported; v2 counts are
    /// hierarchical, so only leaf cgroups are, and no memory is counted twice.
    fn read_cgroups(
        &mut self,
        errs: &mut ErrorCounts,
    ) -> Result<Vec<(String, MemoryStat)>, Reason> {
        const MAX_CGROUPS: usize = 10_000;
        let root = self.source.sysfs().join("fs/cgroup");
        let (base, v2) = if self.source.exists(&root.join("cgroup.controllers")) {
            (root, true)
        } else if self.source.exists(&root.join("memory")) {
            (root.join("memory"), false)
        } else {
            return Err(Reason::Unsupported);
        };
        let mut out = Vec::new();
        let mut stack = vec![base.clone()];
        let mut seen = 0;
        while let Some(dir) = stack.pop() {
            seen += 1;
            if seen > MAX_CGROUPS {
                count(errs, "cgroup", Reason::Malformed, 1);
                break;
            }
            // A cgroup removed while walking simply has no children and no memory.stat.
            let children = self.source.subdirs(&dir).unwrap_or_default();
            let has_children = !children.is_empty();
            stack.extend(children);
            if v2 && has_children {
                continue;
            }
            let stat = match self
                .source
                .read_path(&dir.join("memory.stat"), &mut self.buf)
            {
                Ok(text) => match MemoryStat::parse(text) {
                    Ok(stat) => stat,
                    Err(_) => {
                        count(errs, "cgroup", Reason::Malformed, 1);
                        continue;
                    }
                },
                // A cgroup removed while walking, or the v2 root without memory.stat.
                Err(ReadError::Gone(_)) => continue,
                Err(e) => {
                    count(errs, "cgroup", e.system_reason(), 1);
                    continue;
                }
            };
            if stat.anon_bytes == 0 && stat.anon_huge_bytes == 0 {
                continue;
            }
            let rel = dir
                .strip_prefix(&base)
                .map(|p| p.to_string_lossy().into_owned())
                .unwrap_or_default();
            out.push((format!("/{rel}"), stat));
        }
        out.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(out)
    }

    /// Runs one collector, recording its success, duration and the reason it failed.
    fn timed<T>(
        &mut self,
        s: &mut Sample,
        name: &'static str,
        f: impl FnOnce(&mut Self, &mut ErrorCounts) -> Result<T, Reason>,
    ) -> Option<T> {
        let started = Instant::now();
        let result = f(self, &mut s.errors);
        if let Err(reason) = result {
            count(&mut s.errors, name, reason, 1);
        }
        s.collectors.push(CollectorRun {
            name,
            success: result.is_ok(),
            duration_seconds: started.elapsed().as_secs_f64(),
        });
        result.ok()
    }

    /// One number from a settings file: absent is `None` (older kernel), bad is counted.
    /// One setting file: absent is `None` (an older kernel), unreadable or unparseable is
    /// counted against `collector`.
    fn setting<T>(
        &mut self,
        path: &Path,
        errs: &mut ErrorCounts,
        collector: &'static str,
        parse: fn(&str) -> Result<T, parse::ParseError>,
    ) -> Option<T> {
        let reason = match self.source.read_path(path, &mut self.buf) {
            Ok(text) => match parse(text) {
                Ok(v) => return Some(v),
                Err(_) => Reason::Malformed,
            },
            Err(ReadError::Gone(_)) => return None,
            Err(e) => e.system_reason(),
        };
        count(errs, collector, reason, 1);
        None
    }

    fn number(
        &mut self,
        path: &Path,
        errs: &mut ErrorCounts,
        collector: &'static str,
    ) -> Option<u64> {
        self.setting(path, errs, collector, parse::parse_u64)
    }

    fn choice(
        &mut self,
        path: &Path,
        errs: &mut ErrorCounts,
        collector: &'static str,
    ) -> Option<String> {
        self.setting(path, errs, collector, sysfs::selected)
    }

    fn read_sysctl(&mut self, errs: &mut ErrorCounts) -> Result<Sysctl, Reason> {
        let vm = self.source.procfs().join("sys/vm");
        if !self.source.exists(&vm) {
            return Err(Reason::Unsupported);
        }
        let mut n = |file: &str| self.number(&vm.join(file), errs, "sysctl");
        Ok(Sysctl {
            overcommit_memory: n("overcommit_memory"),
            overcommit_ratio_percent: n("overcommit_ratio"),
            overcommit_bytes: n("overcommit_kbytes").and_then(|k| k.checked_mul(1024)),
            panic_on_oom: n("panic_on_oom"),
            swappiness: n("swappiness"),
        })
    }

    fn read_thp(&mut self, errs: &mut ErrorCounts) -> Result<Thp, Reason> {
        let root = self.source.sysfs().join("kernel/mm/transparent_hugepage");
        if !self.source.exists(&root) {
            return Err(Reason::Unsupported);
        }
        let c = "thp";
        let kh = root.join("khugepaged");
        let mut thp = Thp {
            enabled: self.choice(&root.join("enabled"), errs, c),
            defrag: self.choice(&root.join("defrag"), errs, c),
            shmem_enabled: self.choice(&root.join("shmem_enabled"), errs, c),
            khugepaged: Khugepaged {
                defrag: self.number(&kh.join("defrag"), errs, c),
                max_ptes_none: self.number(&kh.join("max_ptes_none"), errs, c),
                max_ptes_swap: self.number(&kh.join("max_ptes_swap"), errs, c),
                max_ptes_shared: self.number(&kh.join("max_ptes_shared"), errs, c),
                pages_to_scan: self.number(&kh.join("pages_to_scan"), errs, c),
                scan_sleep_millisecs: self.number(&kh.join("scan_sleep_millisecs"), errs, c),
                alloc_sleep_millisecs: self.number(&kh.join("alloc_sleep_millisecs"), errs, c),
                pages_collapsed: self.number(&kh.join("pages_collapsed"), errs, c),
                full_scans: self.number(&kh.join("full_scans"), errs, c),
            },
            sizes: Vec::new(),
        };
        let names = self
            .source
            .dir_names(&root)
            .map_err(|e| e.system_reason())?;
        for name in names {
            let Some(size_bytes) = sysfs::hugepage_dir_size_bytes(&name) else {
                continue;
            };
            let dir = root.join(&name);
            let enabled = self.choice(&dir.join("enabled"), errs, c);
            let mut stats = Vec::new();
            let stats_dir = dir.join("stats");
            for stat in self.source.dir_names(&stats_dir).unwrap_or_default() {
                if !parse::is_metric_name_part(&stat) {
                    count(errs, c, Reason::Malformed, 1);
                    continue;
                }
                if let Some(v) = self.number(&stats_dir.join(&stat), errs, c) {
                    stats.push((stat, v));
                }
            }
            thp.sizes.push(HugepageSize {
                label: name.trim_start_matches("hugepages-").to_string(),
                size_bytes,
                enabled,
                stats,
            });
        }
        thp.sizes.sort_by_key(|s| s.size_bytes);
        Ok(thp)
    }

    fn read_processes(
        &mut self,
        errs: &mut ErrorCounts,
        stats: &mut ReadStats,
    ) -> Result<Vec<ProcessSample>, Reason> {
        let mut pids = self.source.pids().map_err(|e| e.system_reason())?;
        pids.sort_unstable();
        let ctx = Arc::new(ReadContext {
            source: self.source.clone(),
            grouping: self.grouping.clone(),
            clk_tck: self.clk_tck,
            boot_time_seconds: self.boot_time_seconds,
            rollup_refresh: self.reading.rollup_refresh.max(1),
            scan: self.scans,
            known: self.known.clone(),
            stuck: self.pool.stuck_pids(),
        });
        self.scans += 1;
        let batch = self.pool.run(
            pids,
            self.reading.timeout,
            Arc::new(move |bufs: &mut Buffers, pid, _| read_process(&ctx, bufs, pid)),
        );
        let mut out = Vec::with_capacity(batch.results.len());
        let mut known = Vec::with_capacity(batch.results.len());
        for read in batch.results.into_iter().flatten() {
            count(errs, "processes", Reason::Malformed, read.malformed);
            if let Some(reason) = read.rollup_error {
                count(errs, "processes", reason, 1);
            }
            stats.rollups_read += read.rollup_read as u64;
            stats.slowest_seconds = stats.slowest_seconds.max(read.seconds);
            match read.outcome {
                Ok(Some((p, k))) => {
                    out.push(p);
                    known.push(k);
                }
                Ok(None) => {}
                Err(reason) => count(errs, "processes", reason, 1),
            }
        }
        let left = batch.stalled.len() + batch.unread;
        stats.stalled = left as u64;
        count(errs, "processes", Reason::Timeout, left as u64);
        // What was known of a stalled process is kept for when its reader comes back.
        for pid in batch.stalled {
            if let Ok(i) = self.known.binary_search_by_key(&pid, |k| k.pid) {
                known.push(self.known[i].clone());
            }
        }
        known.sort_unstable_by_key(|k| k.pid);
        self.known = Arc::new(known);
        stats.threads = self.pool.threads() as u64;
        Ok(out)
    }

    fn is_candidate(&self, p: &ProcessSample) -> bool {
        let st = &p.status;
        let anon = st.rss_anon_bytes.unwrap_or(0);
        let unbacked = st
            .vm_size_bytes
            .unwrap_or(0)
            .saturating_sub(st.vm_rss_bytes.unwrap_or(0));
        anon >= self.deep.min_bytes
            || unbacked >= self.deep.min_bytes.saturating_mul(8)
            || self.deep.focus.contains(&p.pid)
    }

    /// The deep tier: full smaps of the candidates that are due, least recently read
    /// first, until the CPU budget of this scan is spent.
    fn read_deep(&mut self, processes: &mut [ProcessSample], errs: &mut ErrorCounts) -> DeepRun {
        let started = Instant::now();
        let mut run = DeepRun::default();
        let stuck = self.pool.stuck_pids();
        let mut due: Vec<(Option<Instant>, u64, usize)> = Vec::new();
        for (i, p) in processes.iter().enumerate() {
            if !self.is_candidate(p) {
                continue;
            }
            run.candidates += 1;
            let memory = deep_memory(&p.status);
            let last = self.deep_read_at.get(&p.key()).copied();
            // A process whose address space and memory did not move since its last deep
            // read has the same heaps, arenas and commit: it is read again only after ten
            // intervals, which catches what moves without them.
            let is_due = last.is_none_or(|(t, before)| {
                let age = started.duration_since(t);
                age >= self.deep.interval && (before != memory || age >= self.deep.interval * 10)
            });
            if is_due && !stuck.contains(&p.pid) {
                let anon = p.status.rss_anon_bytes.unwrap_or(0);
                due.push((last.map(|l| l.0), u64::MAX - anon, i));
            }
        }
        // Never read first, then the longest unread; larger processes first among equals.
        due.sort_unstable();
        let spent = Arc::new(AtomicU64::new(0));
        let budget = self.deep.budget.as_nanos() as u64;
        let (source, counter) = (self.source.clone(), spent.clone());
        let walk = self.deep.heap_walk;
        let batch = self.pool.run(
            due.iter().map(|&(_, _, i)| processes[i].pid).collect(),
            self.reading.timeout,
            Arc::new(move |bufs: &mut Buffers, pid, n| {
                // One process is always read; the others while the budget lasts.
                if n > 0 && counter.load(Ordering::Acquire) >= budget {
                    return DeepRead::Deferred;
                }
                let cpu = thread_cpu();
                let read = read_smaps(&source, &mut bufs.main, pid, walk);
                let used = thread_cpu().saturating_sub(cpu).as_nanos() as u64;
                counter.fetch_add(used, Ordering::AcqRel);
                read
            }),
        );
        let now = Instant::now();
        for (&(_, _, i), read) in due.iter().zip(batch.results) {
            let p = &mut processes[i];
            match read {
                Some(DeepRead::Done(result, rejected)) => {
                    count(errs, "processes", Reason::Malformed, rejected);
                    match result {
                        Ok(read) => {
                            let (summary, heap, walk_cpu) = *read;
                            run.heap_walk_cpu_seconds += walk_cpu.as_secs_f64();
                            if let Some(walk) = &heap.walk {
                                let outcome = walk.as_ref().err().copied();
                                run.heap_walks
                                    [outcome.unwrap_or(heap::Outcome::Measured) as usize] += 1;
                            }
                            p.smaps = Some(summary);
                            p.heap = Some(Arc::new(heap));
                        }
                        Err(reason) => count(errs, "processes", reason, 1),
                    }
                    self.deep_read_at
                        .insert(p.key(), (now, deep_memory(&p.status)));
                    run.covered += 1;
                }
                Some(DeepRead::Deferred) => run.deferred += 1,
                None => count(errs, "processes", Reason::Timeout, 1),
            }
        }
        // Forget processes that are gone, so the map stays as large as the process table.
        let live: HashSet<(u32, u64)> = processes.iter().map(|p| p.key()).collect();
        self.deep_read_at.retain(|k, _| live.contains(k));
        run.duration_seconds = started.elapsed().as_secs_f64();
        run.cpu_seconds = Duration::from_nanos(spent.load(Ordering::Acquire)).as_secs_f64();
        run
    }
}

/// What a deep read depends on: address space and resident, anonymous and swapped memory.
type DeepMemory = [Option<u64>; 4];

fn deep_memory(st: &Status) -> DeepMemory {
    [
        st.vm_size_bytes,
        st.vm_rss_bytes,
        st.rss_anon_bytes,
        st.vm_swap_bytes,
    ]
}

/// `smaps`, then the allocator and (when `walk`) the heap walk from its mappings.
fn read_smaps(source: &Source, buf: &mut Buffer, pid: u32, walk: bool) -> DeepRead {
    let read = match source.read_smaps(pid, buf).map(|_| ()) {
        // A process with more mappings than MAX_SMAPS_BYTES holds: a partial summary
        // would understate it.
        Ok(()) if buf.was_cut() => DeepRead::Done(Err(Reason::Malformed), 0),
        Ok(()) => {
            let text = buf.text();
            let (vmas, rejected) = smaps::parse(text);
            if vmas.is_empty() && !text.trim().is_empty() {
                DeepRead::Done(Err(Reason::Malformed), 0)
            } else {
                let summary = SmapsSummary::from_vmas(&vmas);
                let cpu = thread_cpu();
                let heap = heap::read(source, pid, &vmas, walk);
                let walk_cpu = thread_cpu().saturating_sub(cpu);
                DeepRead::Done(Ok(Box::new((summary, heap, walk_cpu))), rejected as u64)
            }
        }
        Err(e) => DeepRead::Done(Err(e.process_reason()), 0),
    };
    buf.shrink();
    read
}

/// One process, on a reader thread.
fn read_process(ctx: &ReadContext, bufs: &mut Buffers, pid: u32) -> ProcessRead {
    let started = Instant::now();
    let mut read = ProcessRead {
        outcome: Ok(None),
        malformed: 0,
        rollup_error: None,
        rollup_read: false,
        seconds: 0.0,
    };
    read.outcome = read_process_files(ctx, bufs, pid, &mut read);
    read.seconds = started.elapsed().as_secs_f64();
    read
}

/// `stat` (CPU time, identity), `statm` and `oom_score_adj` every scan. `status`,
/// `smaps_rollup` and `oom_score` only when `statm` changed since the last scan (any page
/// mapped, faulted in, reclaimed, swapped or collapsed into a huge page by khugepaged
/// moves it), when the process is new, and every `rollup_refresh` scans, staggered by pid,
/// for what moves without it (Pss as sharers come and go, a collapse in place, a swap-out
/// matched by a fault). `cgroup` and `cmdline` for grouping when the process is new, its
/// name changed, or on that same refresh. With `rollup_refresh` 1 every file is read every
/// scan and `statm` is not needed.
fn read_process_files(
    ctx: &ReadContext,
    bufs: &mut Buffers,
    pid: u32,
    read: &mut ProcessRead,
) -> Result<Option<(ProcessSample, Known)>, Reason> {
    let source = &ctx.source;
    let stat = source.parse_pid(pid, "stat", &mut bufs.main, |t| Stat::parse(t).ok())?;
    let known = ctx
        .known
        .binary_search_by_key(&pid, |k| k.pid)
        .ok()
        .map(|i| &ctx.known[i])
        .filter(|k| k.start_ticks == stat.start_ticks);
    let stuck = ctx.stuck.contains(&pid);
    let refresh = (ctx.scan + pid as u64) % ctx.rollup_refresh == 0;
    let statm = if ctx.rollup_refresh > 1 && known.is_some() {
        Some(source.parse_pid(pid, "statm", &mut bufs.main, statm::parse)?)
    } else {
        None
    };
    let unchanged = match known {
        Some(k) => !refresh && statm.is_some() && k.statm == statm,
        None => false,
    };
    let status = match known {
        Some(k) if unchanged => k.status.clone(),
        _ => {
            let status =
                source.parse_pid(pid, "status", &mut bufs.main, |t| Status::parse(t).ok())?;
            if status.vm_rss_bytes.is_none() {
                return Ok(None);
            }
            read.malformed += status.rejected as u64;
            status
        }
    };
    // A new process has no statm yet: read it after status, so the next scan compares
    // with what this one saw.
    let statm = match statm {
        Some(m) => Some(m),
        None if ctx.rollup_refresh > 1 => source
            .read_pid(pid, "statm", &mut bufs.main)
            .ok()
            .and_then(statm::parse),
        None => None,
    };
    let reread = !stuck && (!unchanged || known.is_some_and(|k| k.rollup.is_none()));
    let rollup = if reread {
        read.rollup_read = true;
        match source.read_pid(pid, "smaps_rollup", &mut bufs.main) {
            Ok(text) => match SmapsRollup::parse(text) {
                Ok(r) => r,
                Err(_) => {
                    read.malformed += 1;
                    None
                }
            },
            Err(ReadError::Gone(_)) => return Err(Reason::Vanished),
            // Another user's process without CAP_SYS_PTRACE: keep what status showed.
            Err(e) => {
                read.rollup_error = Some(e.process_reason());
                None
            }
        }
    } else {
        known.and_then(|k| k.rollup)
    };
    if let Some(r) = &rollup {
        read.malformed += r.rejected as u64;
    }
    let oom_score_adj = source.parse_pid(pid, "oom_score_adj", &mut bufs.main, |t| {
        parse::parse_i64(t)
            .ok()
            .filter(|adj| (-1000..=1000).contains(adj))
    })?;
    // oom_score is a function of RSS, swap, page tables and oom_score_adj (and of RAM and
    // swap size, which the refresh catches).
    let oom_score = match known {
        Some(k) if unchanged && k.oom_score_adj == oom_score_adj => k.oom_score,
        _ => source.parse_pid(pid, "oom_score", &mut bufs.main, |t| {
            parse::parse_u64(t).ok()
        })?,
    };
    let regroup = known.is_none_or(|k| (refresh && !stuck) || k.comm != stat.comm);
    let group = match (&*ctx.grouping, known) {
        (Grouping::Comm, _) => Some(stat.comm.clone()),
        (_, Some(k)) if !regroup => k.group.clone(),
        (Grouping::Cgroup, _) => {
            let group = source.parse_pid(pid, "cgroup", &mut bufs.main, |t| {
                Some(cgroup::memory_cgroup(t).unwrap_or("").to_string())
            })?;
            Some(group)
        }
        (Grouping::Matcher(m), _) => {
            let cmdline = if m.needs_cmdline() && !stuck {
                source
                    .read_pid(pid, "cmdline", &mut bufs.aux)
                    .map_err(|e| e.process_reason())?
            } else {
                ""
            };
            m.group(&Candidate {
                comm: &stat.comm,
                cmdline,
            })
        }
    };
    let ticks = (stat.utime_ticks + stat.stime_ticks) as f64;
    let remembered = Known {
        pid,
        start_ticks: stat.start_ticks,
        statm,
        status: status.clone(),
        comm: stat.comm.clone(),
        oom_score_adj,
        oom_score,
        rollup,
        group: group.clone(),
    };
    let sample = ProcessSample {
        pid,
        start_ticks: stat.start_ticks,
        start_time_seconds: ctx
            .boot_time_seconds
            .map(|boot| boot + stat.start_ticks as f64 / ctx.clk_tck),
        cpu_seconds: ticks / ctx.clk_tck,
        comm: stat.comm,
        state: stat.state,
        status,
        rollup,
        oom_score: Some(oom_score),
        oom_score_adj: Some(oom_score_adj),
        group,
        smaps: None,
        heap: None,
    };
    Ok(Some((sample, remembered)))
}

/// CPU time of the calling thread.
fn thread_cpu() -> Duration {
    nix::time::clock_gettime(nix::time::ClockId::CLOCK_THREAD_CPUTIME_ID)
        .map(|t| Duration::new(t.tv_sec() as u64, t.tv_nsec() as u32))
        .unwrap_or_default()
}

fn count(errs: &mut ErrorCounts, collector: &'static str, reason: Reason, n: u64) {
    if n > 0 {
        *errs.entry((collector, reason)).or_insert(0) += n;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    const STATUS: &str = "Name:\tidle\nVmSize:\t    5744 kB\nVmHWM:\t    3000 kB\nVmRSS:\t    3000 kB\nRssAnon:\t    2000 kB\nRssFile:\t    1000 kB\nRssShmem:\t       0 kB\nVmSwap:\t       0 kB\nThreads:\t1\n";

    fn rollup(pss_kib: u64) -> String {
        format!("00-ff ---p 00000000 00:00 0 [rollup]\nRss: 3000 kB\nPss: {pss_kib} kB\nAnonymous: 2000 kB\nAnonHugePages: 0 kB\nSwap: 0 kB\n")
    }

    /// One process, pid 78, in a tree of its own.
    fn tree() -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("78");
        std::fs::create_dir_all(&p).unwrap();
        let stat = "78 (idle) S 1 78 78 0 -1 4194560 100 0 0 0 5 3 0 0 20 0 1 0 4242 5881856 750 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n";
        for (f, text) in [
            ("stat", stat.to_string()),
            ("status", STATUS.to_string()),
            ("statm", "1436 750 250 1 0 600 0\n".to_string()),
            ("smaps_rollup", rollup(2500)),
            ("oom_score", "666\n".to_string()),
            ("oom_score_adj", "0\n".to_string()),
        ] {
            std::fs::write(p.join(f), text).unwrap();
        }
        (dir, p)
    }

    fn scanner(root: &Path, refresh: u64) -> Scanner {
        let collectors = Collectors {
            meminfo: false,
            vmstat: false,
            sysctl: false,
            thp: false,
            pressure: false,
            processes: true,
            cgroup: false,
        };
        let deep = DeepConfig {
            interval: Duration::from_secs(3600),
            budget: Duration::from_millis(200),
            min_bytes: u64::MAX,
            heap_walk: true,
            focus: Vec::new(),
        };
        let reading = ReadConfig {
            rollup_refresh: refresh,
            ..ReadConfig::default()
        };
        Scanner::new(
            Source::new(root, root),
            collectors,
            Grouping::Comm,
            deep,
            reading,
        )
    }

    fn pss_and_reads(s: &mut Scanner) -> (Option<u64>, u64) {
        let sample = s.scan();
        let p = &sample.processes[0];
        (
            p.rollup.and_then(|r| r.pss_bytes.map(|b| b >> 10)),
            sample.reads.unwrap().rollups_read,
        )
    }

    #[test]
    fn unchanged_statm_keeps_the_last_rollup_until_the_staggered_refresh() {
        let (dir, p) = tree();
        // pid 78 with a refresh of 3: scans 0 and 3 are its refresh scans.
        let mut s = scanner(dir.path(), 3);
        assert_eq!(pss_and_reads(&mut s), (Some(2500), 1), "new: read");
        std::fs::write(p.join("smaps_rollup"), rollup(2600)).unwrap();
        std::fs::write(p.join("oom_score"), "700\n").unwrap();
        assert_eq!(
            pss_and_reads(&mut s),
            (Some(2500), 0),
            "statm unchanged: kept"
        );
        assert_eq!(s.scan().processes[0].oom_score, Some(666));
        // Scan 3 is the refresh.
        assert_eq!(pss_and_reads(&mut s), (Some(2600), 1), "refreshed");
        std::fs::write(p.join("smaps_rollup"), rollup(2700)).unwrap();
        assert_eq!(pss_and_reads(&mut s), (Some(2600), 0));
        // One more resident page: everything is read again at once.
        std::fs::write(p.join("statm"), "1436 751 250 1 0 600 0\n").unwrap();
        let sample = s.scan();
        assert_eq!(sample.reads.unwrap().rollups_read, 1);
        assert_eq!(sample.processes[0].oom_score, Some(700));
        let pss = sample.processes[0].rollup.unwrap().pss_bytes;
        assert_eq!(pss, Some(2700 << 10));
        // A changed oom_score_adj alone makes oom_score be read again.
        std::fs::write(p.join("oom_score_adj"), "500\n").unwrap();
        std::fs::write(p.join("oom_score"), "1200\n").unwrap();
        assert_eq!(s.scan().processes[0].oom_score, Some(1200));
    }

    #[test]
    fn a_reused_pid_is_a_new_process() {
        let (dir, p) = tree();
        let mut s = scanner(dir.path(), 1000);
        assert_eq!(pss_and_reads(&mut s).1, 1);
        // Same pid, same statm, another start time: nothing is carried over.
        let stat = std::fs::read_to_string(p.join("stat")).unwrap();
        std::fs::write(p.join("stat"), stat.replace(" 4242 ", " 9999 ")).unwrap();
        std::fs::write(p.join("smaps_rollup"), rollup(100)).unwrap();
        assert_eq!(pss_and_reads(&mut s), (Some(100), 1));
    }

    #[test]
    fn refresh_of_one_reads_every_file_every_scan_without_statm() {
        let (dir, p) = tree();
        std::fs::remove_file(p.join("statm")).unwrap();
        let mut s = scanner(dir.path(), 1);
        assert_eq!(pss_and_reads(&mut s), (Some(2500), 1));
        std::fs::write(p.join("smaps_rollup"), rollup(2600)).unwrap();
        assert_eq!(pss_and_reads(&mut s), (Some(2600), 1));
    }
}
