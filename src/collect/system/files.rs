//! What each system job reads: the sysctls, the THP and khugepaged files, the memory
//! cgroups. Absent files are an older kernel; unreadable or unparseable ones are counted.

use std::path::Path;
use std::time::Duration;

use crate::collect::{count, ErrorCounts, HugepageSize, Khugepaged, Sysctl, Thp};
use crate::family::Collector;
use crate::parse::{self, memory_stat::MemoryStat, sysfs};
use crate::source::{Buffer, ReadError, Reason, Source};

pub(super) struct Files<'a> {
    pub(super) source: &'a Source,
    pub(super) buf: &'a mut Buffer,
}

impl Files<'_> {
    /// Every memory cgroup's anonymous and huge page memory. cgroup v1 `rss`/`rss_huge` count
    /// a cgroup's own processes, so every cgroup with some is reported; v2 counts are
    /// hierarchical, so only leaf cgroups are, and no memory is counted twice.
    pub(super) fn read_cgroups(
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
            let mut stat = match self.source.read_path(&dir.join("memory.stat"), self.buf) {
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
            // The OOM counters; a kernel without the file (v1 before 4.13) has none.
            let events = if v2 {
                "memory.events"
            } else {
                "memory.oom_control"
            };
            if let Ok(text) = self.source.read_path(&dir.join(events), self.buf) {
                stat.add_events(text);
            }
            // Headroom: what is charged to the cgroup against its limit.
            let (usage, limit) = if v2 {
                ("memory.current", "memory.max")
            } else {
                ("memory.usage_in_bytes", "memory.limit_in_bytes")
            };
            if let Ok(text) = self.source.read_path(&dir.join(usage), self.buf) {
                stat.add_usage(text);
            }
            if let Ok(text) = self.source.read_path(&dir.join(limit), self.buf) {
                stat.add_limit(text);
            }
            // An empty cgroup is left out, unless the OOM killer emptied it.
            let killed = stat.oom_kills.unwrap_or(0) + stat.limit_ooms.unwrap_or(0) > 0;
            if stat.anon_bytes == 0 && stat.anon_huge_bytes == 0 && !killed {
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
        let reason = match self.source.read_setting(path, self.buf) {
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

    pub(super) fn read_sysctl(&mut self, errs: &mut ErrorCounts) -> Result<Sysctl, Reason> {
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

    pub(super) fn read_thp(&mut self, errs: &mut ErrorCounts) -> Result<Thp, Reason> {
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
