//! cgroup `memory.stat`: anonymous and huge-page memory of one cgroup, and with it the
//! cgroup's usage and limit (`memory.current`/`memory.max` on v2,
//! `memory.usage_in_bytes`/`memory.limit_in_bytes` on v1), and on v2 its peak
//! (`memory.peak`), its `memory.events` and its own memory pressure (`memory.pressure`).

use super::pressure::Pressure;
use super::ParseError;

/// Anonymous memory of a cgroup, bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct MemoryStat {
    /// v2 `anon` (hierarchical); v1 `rss` (this cgroup's own processes only).
    pub anon_bytes: u64,
    /// v2 `anon_thp`; v1 `rss_huge`.
    pub anon_huge_bytes: u64,
    /// Processes of the cgroup the OOM killer killed, whichever OOM it was (the whole
    /// host's or the cgroup's limit): v2 `memory.events` `oom_kill`, v1
    /// `memory.oom_control` `oom_kill` (kernel 4.13+).
    pub oom_kills: Option<u64>,
    /// Times the cgroup reached its limit and the OOM killer ran inside it: v2
    /// `memory.events` `oom`. v1 has no such counter.
    pub limit_ooms: Option<u64>,
    /// Inactive page cache, which the kernel reclaims first: v2 `inactive_file`, v1
    /// `total_inactive_file` (hierarchical, as the kubelet reads it).
    pub inactive_file_bytes: Option<u64>,
    /// Memory charged to the cgroup: v2 `memory.current`, v1 `memory.usage_in_bytes`.
    pub usage_bytes: Option<u64>,
    /// Its limit: v2 `memory.max`, v1 `memory.limit_in_bytes`; `None` when unlimited.
    pub limit_bytes: Option<u64>,
    /// The most ever charged to it: v2 `memory.peak` (kernel 5.19+).
    pub peak_bytes: Option<u64>,
    /// Times its usage went over `memory.high` and its tasks were throttled and made to
    /// reclaim: v2 `memory.events` `high`.
    pub high_events: Option<u64>,
    /// Times its usage was about to go over `memory.max`, so it reclaimed directly (an OOM
    /// follows when that fails): v2 `memory.events` `max`.
    pub max_events: Option<u64>,
    /// Times the OOM killer killed the whole cgroup at once (`memory.oom.group` set):
    /// v2 `memory.events` `oom_group_kill` (kernel 5.17+).
    pub oom_group_kills: Option<u64>,
    /// Its own memory stall time: v2 `memory.pressure` (kernel 4.20+ with PSI on).
    pub pressure: Option<Pressure>,
    /// The balance sheet's counters ([`SHEET_FIELDS`], by v2's names; v1's hierarchical
    /// `total_` fields under them), where the kernel has them.
    pub sheet: [Option<u64>; SHEET_FIELDS.len()],
    /// The files beside `memory.stat` that bound or protect it ([`Bounds`]).
    pub bounds: Bounds,
}

/// What else the kernel keeps of a cgroup beside its usage and limit, each where it has
/// it: v2's throttling limit and protections, its swap and zswap and their limits, and
/// its count of removed descendants still holding memory.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Bounds {
    /// `memory.high` (`None` when `max`).
    pub high: Option<u64>,
    /// `memory.min`, `memory.low`.
    pub min: Option<u64>,
    pub low: Option<u64>,
    /// `memory.swap.current` on v2, `memory.stat` `total_swap` on v1; `memory.swap.max`.
    pub swap: Option<u64>,
    pub swap_max: Option<u64>,
    /// `memory.zswap.current`, `memory.zswap.max` (5.19+).
    pub zswap: Option<u64>,
    pub zswap_max: Option<u64>,
    /// `cgroup.stat` `nr_dying_descendants`: removed cgroups below it the kernel still
    /// keeps, for the memory charged to them.
    pub dying: Option<u64>,
    /// What is charged to it that no live child and no own process holds: the memory of
    /// removed descendants (computed by the walk: see `units::cgroup`).
    pub removed: Option<u64>,
}

/// The counters of `memory.stat` the balance sheet reads, by v2's names.
pub(crate) const SHEET_FIELDS: [&str; 18] = [
    "anon",
    "file",
    "shmem",
    "active_file",
    "inactive_file",
    "swapcached",
    "kernel",
    "kernel_stack",
    "pagetables",
    "sec_pagetables",
    "percpu",
    "sock",
    "vmalloc",
    "slab_reclaimable",
    "slab_unreclaimable",
    "zswap",
    // v1 only: its own (not hierarchical) anonymous and page cache pages.
    "own_rss",
    "own_cache",
];

/// v1's names of the sheet's counters, in [`SHEET_FIELDS`]'s order (`""`: none).
const V1_FIELDS: [&str; 18] = [
    "total_rss",
    "total_cache",
    "total_shmem",
    "total_active_file",
    "total_inactive_file",
    "total_swapcached",
    "",
    "",
    "",
    "",
    "",
    "",
    "",
    "",
    "",
    "",
    "rss",
    "cache",
];

/// At or above this, a v1 limit is the kernel's "unlimited" (PAGE_COUNTER_MAX pages,
/// 9223372036854771712 with 4 KiB pages).
const UNLIMITED: u64 = 1 << 62;

impl MemoryStat {
    /// Parses either version: v2 files have `anon`, v1 files `rss`.
    pub fn parse(text: &str) -> Result<Self, ParseError> {
        let (mut anon, mut huge, mut rss, mut rss_huge) = (None, None, None, None);
        let (mut inactive_v2, mut inactive_v1) = (None, None);
        let (mut v1, mut v2) = ([None; SHEET_FIELDS.len()], [None; SHEET_FIELDS.len()]);
        let mut swap = None;
        for line in text.lines() {
            let Some((key, value)) = line.split_once(' ') else {
                continue;
            };
            // The sheet's counters: one that is not a number is left out.
            if let Some(i) = SHEET_FIELDS.iter().position(|&k| k == key) {
                v2[i] = value.trim().parse().ok();
            }
            if let Some(i) = V1_FIELDS.iter().position(|&k| k == key) {
                v1[i] = value.trim().parse().ok();
            }
            if key == "total_swap" {
                swap = value.trim().parse().ok();
            }
            let slot = match key {
                "anon" => &mut anon,
                "anon_thp" => &mut huge,
                "rss" => &mut rss,
                "rss_huge" => &mut rss_huge,
                "inactive_file" => &mut inactive_v2,
                "total_inactive_file" => &mut inactive_v1,
                _ => continue,
            };
            *slot = Some(
                value
                    .trim()
                    .parse::<u64>()
                    .map_err(|_| ParseError::Malformed("memory.stat value"))?,
            );
        }
        let (anon_bytes, huge, inactive, sheet, swap) = match (anon, rss) {
            (Some(a), _) => (a, huge, inactive_v2, v2, None),
            (None, Some(r)) => (r, rss_huge, inactive_v1, v1, swap),
            _ => return Err(ParseError::Missing("anon or rss")),
        };
        Ok(MemoryStat {
            anon_bytes,
            anon_huge_bytes: huge.unwrap_or(0),
            inactive_file_bytes: inactive,
            sheet,
            bounds: Bounds {
                swap,
                ..Bounds::default()
            },
            ..MemoryStat::default()
        })
    }

    /// A counter of [`SHEET_FIELDS`] (`None`: the kernel has none, or it was no number).
    pub fn field(&self, key: &str) -> Option<u64> {
        let i = SHEET_FIELDS.iter().position(|&k| k == key)?;
        self.sheet[i]
    }

    /// Sets a counter of [`SHEET_FIELDS`] read from a file of its own (v1's kernel memory,
    /// `memory.kmem.usage_in_bytes`, as `kernel`).
    pub(crate) fn set_field(&mut self, key: &str, text: &str) {
        if let Some(i) = SHEET_FIELDS.iter().position(|&k| k == key) {
            self.sheet[i] = text.trim().parse().ok();
        }
    }

    /// Adds the usage, from `memory.current` or `memory.usage_in_bytes`.
    pub(crate) fn add_usage(&mut self, text: &str) {
        self.usage_bytes = text.trim().parse().ok();
    }

    /// Adds the limit, from `memory.max` (`max`: none) or `memory.limit_in_bytes`
    /// (unlimited is a number near 2^63).
    pub(crate) fn add_limit(&mut self, text: &str) {
        self.limit_bytes = text.trim().parse::<u64>().ok().filter(|&l| l < UNLIMITED);
    }

    /// What the kubelet calls the working set, and evicts and reports (`kubectl top`) by:
    /// usage minus inactive page cache, never below 0.
    pub(crate) fn working_set_bytes(&self) -> Option<u64> {
        let usage = self.usage_bytes?;
        Some(usage.saturating_sub(self.inactive_file_bytes.unwrap_or(0)))
    }

    /// Adds one of v2's bounds from its file (`memory.high`, `memory.min`, `memory.low`,
    /// `memory.swap.current`, `memory.swap.max`, `memory.zswap.current`, `memory.zswap.max`;
    /// `max` and what is not a number: none), or `cgroup.stat`'s `nr_dying_descendants`.
    pub(crate) fn add_bound(&mut self, file: &str, text: &str) {
        let b = &mut self.bounds;
        let slot = match file {
            "memory.high" => &mut b.high,
            "memory.min" => &mut b.min,
            "memory.low" => &mut b.low,
            "memory.swap.current" => &mut b.swap,
            "memory.swap.max" => &mut b.swap_max,
            "memory.zswap.current" => &mut b.zswap,
            "memory.zswap.max" => &mut b.zswap_max,
            "cgroup.stat" => {
                b.dying = dying_descendants(text);
                return;
            }
            _ => return,
        };
        *slot = text.trim().parse().ok();
    }

    /// Adds the peak, from `memory.peak`; not a number leaves it out.
    pub(crate) fn add_peak(&mut self, text: &str) {
        self.peak_bytes = text.trim().parse().ok();
    }

    /// Adds the cgroup's own memory pressure, from `memory.pressure`.
    pub(crate) fn add_pressure(&mut self, text: &str) -> Result<(), ParseError> {
        self.pressure = Some(Pressure::parse(text)?);
        Ok(())
    }

    /// Adds the counters of v2 `memory.events` (`high`, `max`, `oom`, `oom_kill`,
    /// `oom_group_kill`) or v1
    /// `memory.oom_control` (`oom_kill`); a value that is not a number is left out.
    pub(crate) fn add_events(&mut self, text: &str) {
        for line in text.lines() {
            let Some((key, value)) = line.split_once(' ') else {
                continue;
            };
            let slot = match key {
                "high" => &mut self.high_events,
                "max" => &mut self.max_events,
                "oom" => &mut self.limit_ooms,
                "oom_kill" => &mut self.oom_kills,
                "oom_group_kill" => &mut self.oom_group_kills,
                _ => continue,
            };
            *slot = value.trim().parse().ok();
        }
    }
}

/// `cgroup.stat`'s `nr_dying_descendants` (cgroup v2).
pub(crate) fn dying_descendants(text: &str) -> Option<u64> {
    text.lines()
        .find_map(|l| l.strip_prefix("nr_dying_descendants "))
        .and_then(|v| v.trim().parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn v1_and_v2() {
        // cgroup v1 (this build machine, kernel 6.18) and v2 shapes, trimmed.
        let v1 = "cache 4096\nrss 69206016\nrss_huge 67108864\nshmem 0\ntotal_rss 69206016\n\
                  total_cache 8192\ntotal_shmem 4096\ntotal_swap 12288\ntotal_active_file x\n";
        let m = MemoryStat::parse(v1).unwrap();
        assert_eq!((m.anon_bytes, m.anon_huge_bytes), (69206016, 67108864));
        // The sheet reads v1's hierarchical totals under v2's names, its own pages apart.
        assert_eq!(
            (m.field("anon"), m.field("file")),
            (Some(69206016), Some(8192))
        );
        assert_eq!(
            (m.field("shmem"), m.field("own_cache")),
            (Some(4096), Some(4096))
        );
        assert_eq!(
            (m.field("own_rss"), m.bounds.swap),
            (Some(69206016), Some(12288))
        );
        assert_eq!(m.field("active_file"), None, "not a number: left out");
        assert_eq!(m.field("kernel"), None);
        let v2 = "anon 1048576\nfile 4096\nanon_thp 0\nfile_thp 0\nkernel 8192\nsock 0\n\
                  rss 5\ncache 6\n";
        let mut m = MemoryStat::parse(v2).unwrap();
        assert_eq!((m.anon_bytes, m.anon_huge_bytes), (1048576, 0));
        assert_eq!(
            (m.field("file"), m.field("kernel")),
            (Some(4096), Some(8192))
        );
        assert_eq!((m.field("sock"), m.field("vmalloc")), (Some(0), None));
        assert_eq!(
            (m.field("own_rss"), m.bounds.swap),
            (None, None),
            "v1's only"
        );
        m.add_bound("memory.high", "max\n");
        m.add_bound("memory.min", "1048576\n");
        m.add_bound("memory.swap.max", "2097152\n");
        m.add_bound(
            "cgroup.stat",
            "nr_descendants 2\nnr_dying_descendants 300\n",
        );
        let b = m.bounds;
        assert_eq!(
            (b.high, b.min, b.swap_max),
            (None, Some(1 << 20), Some(2 << 20))
        );
        assert_eq!((b.dying, b.low), (Some(300), None));
        let mut m = MemoryStat::default();
        m.add_events("low 0\nhigh 4\nmax 7\noom 2\noom_kill 3\noom_group_kill 1\n");
        assert_eq!((m.limit_ooms, m.oom_kills), (Some(2), Some(3)));
        assert_eq!(m.oom_group_kills, Some(1));
        assert_eq!((m.high_events, m.max_events), (Some(4), Some(7)));
        m.add_peak("8392704\n");
        assert_eq!(m.peak_bytes, Some(8392704));
        // 5.10's cgroup pressure has no full line for cpu, but memory's always has both.
        m.add_pressure("some avg10=0.00 avg60=0.00 avg300=0.00 total=2500000\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=1000000\n").unwrap();
        let p = m.pressure.unwrap();
        assert_eq!((p.some_seconds, p.full_seconds), (Some(2.5), Some(1.0)));
        assert!(m.add_pressure("some total=x\n").is_err());
        let mut m = MemoryStat::default();
        m.add_events("oom_kill_disable 0\nunder_oom 0\noom_kill 5\n");
        assert_eq!((m.limit_ooms, m.oom_kills), (None, Some(5)));
        assert_eq!(
            (m.high_events, m.max_events, m.peak_bytes),
            (None, None, None)
        );
        m.add_events("oom_kill x\n");
        assert_eq!(m.oom_kills, None);
        assert!(MemoryStat::parse("cache 1\n").is_err());
        assert!(MemoryStat::parse("rss x\n").is_err());
    }

    /// Usage, limit and the kubelet's working set; v1 reads the hierarchical
    /// `total_inactive_file` (its `inactive_file` is the cgroup's own), v2 `inactive_file`.
    #[test]
    fn working_set_is_usage_less_inactive_file() {
        let mut v1 = MemoryStat::parse(
            "rss 1048576\ninactive_file 4096\ntotal_rss 1048576\ntotal_inactive_file 2097152\n",
        )
        .unwrap();
        assert_eq!(v1.inactive_file_bytes, Some(2097152));
        assert_eq!(v1.working_set_bytes(), None, "no usage read yet");
        v1.add_usage("10485760\n");
        v1.add_limit("9223372036854771712\n");
        assert_eq!(v1.limit_bytes, None, "v1's unlimited");
        assert_eq!(v1.working_set_bytes(), Some(10485760 - 2097152));
        v1.add_limit("67108864\n");
        assert_eq!(v1.limit_bytes, Some(64 << 20));
        let mut v2 = MemoryStat::parse("anon 1048576\ninactive_file 8192\n").unwrap();
        v2.add_usage("4096\n");
        v2.add_limit("max\n");
        assert_eq!(v2.limit_bytes, None, "v2's unlimited");
        assert_eq!(v2.working_set_bytes(), Some(0), "never below 0");
        v2.add_usage("x");
        assert_eq!(v2.usage_bytes, None);
    }
}
