//! The system collectors: meminfo, vmstat, pressure, sysctl, THP and khugepaged settings
//! and counters, memory cgroups, and `btime`. Each is one item of a batch on a pool of
//! its own, read while the processes are: a file that never answers (a FIFO, a hung
//! filesystem) costs a scan the read timeout once, and the collector reading it is then
//! left out, reported as `timeout`, until its reader comes back; it is never started
//! again on the stuck file, so no thread leaks.

use super::*;

/// One system collector's read, as a pool item (pool items are never 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub(super) enum Job {
    Meminfo = 1,
    Vmstat,
    Sysctl,
    Thp,
    Pressure,
    Cgroup,
    /// `btime` from `/proc/stat`, until it was read once.
    BootTime,
}

impl Job {
    pub(super) const ALL: [Job; 7] = [
        Job::Meminfo,
        Job::Vmstat,
        Job::Sysctl,
        Job::Thp,
        Job::Pressure,
        Job::Cgroup,
        Job::BootTime,
    ];

    fn from_item(item: u32) -> Option<Job> {
        Job::ALL.into_iter().find(|j| *j as u32 == item)
    }

    /// The collector a failure of this read is counted against.
    pub(super) fn collector(self) -> Collector {
        match self {
            Job::Meminfo => Collector::Meminfo,
            Job::Vmstat => Collector::Vmstat,
            Job::Sysctl => Collector::Sysctl,
            Job::Thp => Collector::Thp,
            Job::Pressure => Collector::Pressure,
            Job::Cgroup => Collector::Cgroup,
            Job::BootTime => Collector::Processes,
        }
    }
}

/// What one system read produced.
pub(super) enum Read {
    Meminfo(Result<Meminfo, Reason>),
    Vmstat(Result<Vmstat, Reason>),
    Sysctl(Result<Sysctl, Reason>),
    Thp(Result<Thp, Reason>),
    Pressure(Result<Pressure, Reason>),
    Cgroup(Result<Vec<(String, MemoryStat)>, Reason>),
    BootTime(Option<f64>),
}

/// A system read's result with the problems it counted and how long it took.
pub(super) struct Done {
    pub(super) read: Read,
    pub(super) errors: ErrorCounts,
    pub(super) seconds: f64,
}

/// Runs one job on a reader thread.
pub(super) fn run(source: &Source, buf: &mut Buffer, job: Job) -> Done {
    let started = Instant::now();
    let mut errors = ErrorCounts::new();
    let mut f = Files { source, buf };
    let errs = &mut errors;
    let read = match job {
        Job::Meminfo => Read::Meminfo(
            f.source
                .parse_proc("meminfo", f.buf, |t| Meminfo::parse(t).ok())
                .inspect(|m| count(errs, job.collector(), Reason::Malformed, m.rejected as u64)),
        ),
        Job::Vmstat => Read::Vmstat(
            f.source
                .parse_proc("vmstat", f.buf, |t| Vmstat::parse(t).ok())
                .inspect(|v| count(errs, job.collector(), Reason::Malformed, v.rejected as u64)),
        ),
        Job::Sysctl => Read::Sysctl(f.read_sysctl(errs)),
        Job::Thp => Read::Thp(f.read_thp(errs)),
        Job::Pressure => Read::Pressure(
            f.source
                .parse_proc("pressure/memory", f.buf, |t| Pressure::parse(t).ok()),
        ),
        Job::Cgroup => Read::Cgroup(f.read_cgroups(errs)),
        Job::BootTime => Read::BootTime(f.source.read_proc("stat", f.buf).ok().and_then(|text| {
            text.lines()
                .find_map(|l| l.strip_prefix("btime "))
                .and_then(|v| v.trim().parse::<u64>().ok())
                .map(|v| v as f64)
        })),
    };
    Done {
        read,
        errors,
        seconds: started.elapsed().as_secs_f64(),
    }
}

/// The work of the system pool: item `n` is `Job` number `n`.
pub(super) fn work(source: Source) -> pool::Work<Option<Done>> {
    Arc::new(move |bufs: &mut Buffers, _: &pool::Step, item, _| {
        Job::from_item(item).map(|job| run(&source, &mut bufs.main, job))
    })
}

struct Files<'a> {
    source: &'a Source,
    buf: &'a mut Buffer,
}

impl Files<'_> {
    /// Every memory cgroup's anonymous and huge page memory. cgroup v1 `rss`/`rss_huge` count
    /// a cgroup's own processes, so every cgroup with some is reported; v2 counts are
    /// hierarchical, so only leaf cgroups are, and no memory is counted twice.
    fn read_cgroups(
        &mut self,
        errs: &mut ErrorCounts,
    ) -> Result<Vec<(String, MemoryStat)>, Reason> {
        const MAX_CGROUPS: usize = 10_000;
        let root = self.source.sysfs().join("fs/cgroup");
        self.source.feature(&root)?;
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
                count(errs, Collector::Cgroup, Reason::Malformed, 1);
                break;
            }
            // A cgroup removed while walking simply has no children and no memory.stat.
            let children = self.source.subdirs(&dir).unwrap_or_default();
            let has_children = !children.is_empty();
            stack.extend(children);
            if v2 && has_children {
                continue;
            }
            let stat = match self.source.read_path(&dir.join("memory.stat"), self.buf) {
                Ok(text) => match MemoryStat::parse(text) {
                    Ok(stat) => stat,
                    Err(_) => {
                        count(errs, Collector::Cgroup, Reason::Malformed, 1);
                        continue;
                    }
                },
                // A cgroup removed while walking, or the v2 root without memory.stat.
                Err(ReadError::Gone(_)) => continue,
                Err(e) => {
                    count(errs, Collector::Cgroup, e.system_reason(), 1);
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

    /// One setting file: absent is `None` (an older kernel), unreadable or unparseable is
    /// counted against `collector`.
    fn setting<T>(
        &mut self,
        path: &Path,
        errs: &mut ErrorCounts,
        collector: Collector,
        parse: fn(&str) -> Result<T, parse::ParseError>,
    ) -> Option<T> {
        let reason = match self.source.read_path(path, self.buf) {
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

    fn number(&mut self, path: &Path, errs: &mut ErrorCounts, collector: Collector) -> Option<u64> {
        self.setting(path, errs, collector, parse::parse_u64)
    }

    fn choice(
        &mut self,
        path: &Path,
        errs: &mut ErrorCounts,
        collector: Collector,
    ) -> Option<String> {
        self.setting(path, errs, collector, sysfs::selected)
    }

    fn read_sysctl(&mut self, errs: &mut ErrorCounts) -> Result<Sysctl, Reason> {
        let vm = self.source.procfs().join("sys/vm");
        self.source.feature(&vm)?;
        let mut n = |file: &str| self.number(&vm.join(file), errs, Collector::Sysctl);
        Ok(Sysctl {
            overcommit_memory: n("overcommit_memory"),
            overcommit_ratio: n("overcommit_ratio").map(|pct| pct as f64 / 100.0),
            overcommit_bytes: n("overcommit_kbytes").and_then(|k| k.checked_mul(1024)),
            panic_on_oom: n("panic_on_oom"),
            swappiness: n("swappiness"),
        })
    }

    fn read_thp(&mut self, errs: &mut ErrorCounts) -> Result<Thp, Reason> {
        let root = self.source.sysfs().join("kernel/mm/transparent_hugepage");
        self.source.feature(&root)?;
        let c = Collector::Thp;
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
                scan_sleep: self
                    .number(&kh.join("scan_sleep_millisecs"), errs, c)
                    .map(Duration::from_millis),
                alloc_sleep: self
                    .number(&kh.join("alloc_sleep_millisecs"), errs, c)
                    .map(Duration::from_millis),
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
}
