//! One scan's raw values: the system files once, and every process.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;
use std::time::{Duration, Instant, SystemTime};

use crate::config::{Collectors, DeepConfig, GroupBy};
use crate::matcher::{Candidate, Matchers};
use crate::parse::memory_stat::MemoryStat;
use crate::parse::{
    self, cgroup, meminfo::Meminfo, pressure::Pressure, smaps, smaps::SmapsSummary,
    smaps_rollup::SmapsRollup, stat::Stat, status::Status, sysfs, vmstat::Vmstat,
};
use crate::source::{ReadError, Reason, Source};

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

/// Reads samples; owns the reusable buffers and the values fixed at boot.
pub struct Scanner {
    source: Source,
    collectors: Collectors,
    grouping: Grouping,
    clk_tck: f64,
    boot_time_seconds: Option<f64>,
    deep: DeepConfig,
    /// When each process's smaps was last read, by (pid, start ticks).
    deep_read_at: HashMap<(u32, u64), Instant>,
    buf: Vec<u8>,
    aux: Vec<u8>,
}

impl Scanner {
    pub fn new(
        source: Source,
        collectors: Collectors,
        grouping: Grouping,
        deep: DeepConfig,
    ) -> Self {
        let mut buf = Vec::with_capacity(8192);
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
            grouping,
            clk_tck,
            boot_time_seconds,
            deep,
            deep_read_at: HashMap::new(),
            buf,
            aux: Vec::with_capacity(4096),
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
                let text = me
                    .source
                    .read_proc("meminfo", &mut me.buf)
                    .map_err(|e| e.system_reason())?;
                let m = Meminfo::parse(text).map_err(|_| Reason::Malformed)?;
                count(errs, "meminfo", Reason::Malformed, m.rejected as u64);
                Ok(m)
            });
        }
        if c.vmstat {
            s.vmstat = self.timed(&mut s, "vmstat", |me, errs| {
                let text = me
                    .source
                    .read_proc("vmstat", &mut me.buf)
                    .map_err(|e| e.system_reason())?;
                let v = Vmstat::parse(text).map_err(|_| Reason::Malformed)?;
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
                let text = me
                    .source
                    .read_proc("pressure/memory", &mut me.buf)
                    .map_err(|e| e.system_reason())?;
                Pressure::parse(text).map_err(|_| Reason::Malformed)
            });
        }
        if c.processes {
            if let Some(list) = self.timed(&mut s, "processes", |me, errs| me.read_processes(errs))
            {
                s.processes = list;
                s.deep = Some(self.read_deep(&mut s.processes, &mut s.errors));
            }
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

    fn read_processes(&mut self, errs: &mut ErrorCounts) -> Result<Vec<ProcessSample>, Reason> {
        let mut pids = self.source.pids().map_err(|e| e.system_reason())?;
        pids.sort_unstable();
        let mut out = Vec::with_capacity(pids.len());
        for pid in pids {
            match self.read_process(pid, errs) {
                Ok(Some(p)) => out.push(p),
                Ok(None) => {}
                Err(reason) => count(errs, "processes", reason, 1),
            }
        }
        Ok(out)
    }

    /// One process. `Ok(None)` for a kernel thread (no memory of its own).
    fn read_process(
        &mut self,
        pid: u32,
        errs: &mut ErrorCounts,
    ) -> Result<Option<ProcessSample>, Reason> {
        let reason = |e: ReadError| e.process_reason();
        let stat = Stat::parse(
            self.source
                .read_pid(pid, "stat", &mut self.buf)
                .map_err(reason)?,
        )
        .map_err(|_| Reason::Malformed)?;
        let status = Status::parse(
            self.source
                .read_pid(pid, "status", &mut self.buf)
                .map_err(reason)?,
        )
        .map_err(|_| Reason::Malformed)?;
        if status.vm_rss_bytes.is_none() {
            return Ok(None);
        }
        count(errs, "processes", Reason::Malformed, status.rejected as u64);
        let rollup = match self.source.read_pid(pid, "smaps_rollup", &mut self.buf) {
            Ok(text) => match SmapsRollup::parse(text) {
                Ok(r) => r,
                Err(_) => {
                    count(errs, "processes", Reason::Malformed, 1);
                    None
                }
            },
            Err(ReadError::Gone(_)) => return Err(Reason::Vanished),
            // Another user's process without CAP_SYS_PTRACE: keep what status showed.
            Err(e) => {
                count(errs, "processes", e.process_reason(), 1);
                None
            }
        };
        if let Some(r) = &rollup {
            count(errs, "processes", Reason::Malformed, r.rejected as u64);
        }
        let oom_score = parse::parse_u64(
            self.source
                .read_pid(pid, "oom_score", &mut self.buf)
                .map_err(reason)?,
        )
        .map_err(|_| Reason::Malformed)?;
        let oom_score_adj = parse::parse_i64(
            self.source
                .read_pid(pid, "oom_score_adj", &mut self.buf)
                .map_err(reason)?,
        )
        .ok()
        .filter(|adj| (-1000..=1000).contains(adj))
        .ok_or(Reason::Malformed)?;
        let group = match &self.grouping {
            Grouping::Comm => Some(stat.comm.clone()),
            Grouping::Cgroup => {
                let text = self
                    .source
                    .read_pid(pid, "cgroup", &mut self.buf)
                    .map_err(reason)?;
                Some(cgroup::memory_cgroup(text).unwrap_or("").to_string())
            }
            Grouping::Matcher(m) => {
                let cmdline = if m.needs_cmdline() {
                    self.source
                        .read_pid(pid, "cmdline", &mut self.aux)
                        .map_err(reason)?
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
        Ok(Some(ProcessSample {
            pid,
            start_ticks: stat.start_ticks,
            start_time_seconds: self
                .boot_time_seconds
                .map(|boot| boot + stat.start_ticks as f64 / self.clk_tck),
            cpu_seconds: ticks / self.clk_tck,
            comm: stat.comm,
            state: stat.state,
            status,
            rollup,
            oom_score: Some(oom_score),
            oom_score_adj: Some(oom_score_adj),
            group,
            smaps: None,
        }))
    }
}

impl Scanner {
    fn is_candidate(&self, p: &ProcessSample) -> bool {
        let st = &p.status;
        let anon = st.rss_anon_bytes.unwrap_or(0);
        let unbacked = st
            .vm_size_bytes
            .unwrap_or(0)
            .saturating_sub(st.vm_rss_bytes.unwrap_or(0));
        anon >= self.deep.min_bytes || unbacked >= self.deep.min_bytes.saturating_mul(8)
    }

    /// The deep tier: full smaps of the candidates that are due, least recently read
    /// first, until the CPU budget of this scan is spent.
    fn read_deep(&mut self, processes: &mut [ProcessSample], errs: &mut ErrorCounts) -> DeepRun {
        let started = Instant::now();
        let cpu_start = thread_cpu();
        let mut run = DeepRun::default();
        let mut due: Vec<(Option<Instant>, u64, usize)> = Vec::new();
        for (i, p) in processes.iter().enumerate() {
            if !self.is_candidate(p) {
                continue;
            }
            run.candidates += 1;
            let last = self.deep_read_at.get(&p.key()).copied();
            if last.is_none_or(|t| started.duration_since(t) >= self.deep.interval) {
                due.push((last, u64::MAX - p.status.rss_anon_bytes.unwrap_or(0), i));
            }
        }
        // Never read first, then the longest unread; larger processes first among equals.
        due.sort_unstable();
        for (n, &(_, _, i)) in due.iter().enumerate() {
            if n > 0 && thread_cpu().saturating_sub(cpu_start) >= self.deep.budget {
                run.deferred = (due.len() - n) as u64;
                break;
            }
            let p = &mut processes[i];
            match self.source.read_pid(p.pid, "smaps", &mut self.buf) {
                Ok(text) => match smaps::summarize(text) {
                    Ok((summary, rejected)) => {
                        count(errs, "processes", Reason::Malformed, rejected as u64);
                        p.smaps = Some(summary);
                    }
                    Err(_) => count(errs, "processes", Reason::Malformed, 1),
                },
                Err(e) => count(errs, "processes", e.process_reason(), 1),
            }
            self.deep_read_at.insert(p.key(), Instant::now());
            run.covered += 1;
        }
        // Forget processes that are gone, so the map stays as large as the process table.
        let live: HashSet<(u32, u64)> = processes.iter().map(|p| p.key()).collect();
        self.deep_read_at.retain(|k, _| live.contains(k));
        run.duration_seconds = started.elapsed().as_secs_f64();
        run.cpu_seconds = thread_cpu().saturating_sub(cpu_start).as_secs_f64();
        run
    }
}

/// CPU time of the calling thread (the scan runs on one thread).
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
