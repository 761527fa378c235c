//! `thp`: the transparent huge page and khugepaged settings and counters, and each huge
//! page size's (kernel 6.8+ multi-size THP), from `/sys/kernel/mm/transparent_hugepage`;
//! and the regrowth risk and hidden huge page memory the model derives.

use std::time::Duration;

use crate::family::{Collector, Family, Metric, Section, Value};
use crate::parse::{self, sysfs};
use crate::source::Reason;

use super::{Reader, Reading, Unit};

pub const COLLECTOR: Collector = Collector::Unit("thp");
const SECTION: Section = Section::Of(COLLECTOR);

pub const UNIT: Unit = Unit {
    name: "thp",
    what: "THP, khugepaged and per-size huge page settings and counters from /sys",
    rows: &[
        THP_SETTINGS_INFO,
        KHUGEPAGED_DEFRAG,
        KHUGEPAGED_MAX_PTES_NONE,
        KHUGEPAGED_MAX_PTES_SWAP,
        KHUGEPAGED_MAX_PTES_SHARED,
        KHUGEPAGED_PAGES_TO_SCAN,
        KHUGEPAGED_SCAN_SLEEP_SECONDS,
        KHUGEPAGED_ALLOC_SLEEP_SECONDS,
        KHUGEPAGED_PAGES_COLLAPSED_TOTAL,
        KHUGEPAGED_FULL_SCANS_TOTAL,
        MTHP_SETTINGS_INFO,
        MTHP_KEY_FOLIOS,
        MTHP_KEY_TOTAL,
        THP_REGROWTH_RISK,
        THP_HIDDEN_BYTES,
    ],
    fixes: &[],
    start: || super::stateless(read),
};

/// `/sys/kernel/mm/transparent_hugepage/khugepaged`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Khugepaged {
    pub defrag: Option<u64>,
    pub max_ptes_none: Option<u64>,
    pub max_ptes_swap: Option<u64>,
    pub max_ptes_shared: Option<u64>,
    pub pages_to_scan: Option<u64>,
    /// `scan_sleep_millisecs`: the pause between passes.
    pub scan_sleep: Option<Duration>,
    /// `alloc_sleep_millisecs`: the pause after a failed huge page allocation.
    pub alloc_sleep: Option<Duration>,
    /// Counter: huge pages khugepaged collapsed.
    pub pages_collapsed: Option<u64>,
    /// Counter: full passes over all eligible memory.
    pub full_scans: Option<u64>,
}

/// One `hugepages-<size>kB` directory (kernel 6.8+ multi-size THP).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct HugepageSize {
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
pub(crate) struct Thp {
    pub enabled: Option<String>,
    pub defrag: Option<String>,
    pub shmem_enabled: Option<String>,
    pub khugepaged: Khugepaged,
    pub sizes: Vec<HugepageSize>,
    /// The size of a PMD-mapped huge page (`hpage_pmd_size`): 2 MiB with 4 KiB pages.
    pub pmd_bytes: Option<u64>,
    /// The system's page size.
    pub page_bytes: u64,
}

impl Thp {
    /// The highest `max_ptes_none` the kernel takes (`HPAGE_PMD_NR - 1`), its default: at
    /// it khugepaged collapses a range in which one page was touched. 511 with 4 KiB pages
    /// and 2 MiB huge pages, 8191 with 64 KiB pages (arm64); 511 when the sizes are not
    /// known.
    pub(crate) fn max_ptes_none_ceiling(&self) -> u64 {
        self.pmd_bytes
            .filter(|&pmd| self.page_bytes > 0 && pmd > self.page_bytes)
            .map_or(511, |pmd| pmd / self.page_bytes - 1)
    }
}

fn read(r: &mut Reader) -> Result<Thp, Reason> {
    let root = r.source.sysfs().join("kernel/mm/transparent_hugepage");
    r.source.feature(&root)?;
    let kh = root.join("khugepaged");
    let mut thp = Thp {
        enabled: r.choice(&root.join("enabled")),
        defrag: r.choice(&root.join("defrag")),
        shmem_enabled: r.choice(&root.join("shmem_enabled")),
        khugepaged: Khugepaged {
            defrag: r.number(&kh.join("defrag")),
            max_ptes_none: r.number(&kh.join("max_ptes_none")),
            max_ptes_swap: r.number(&kh.join("max_ptes_swap")),
            max_ptes_shared: r.number(&kh.join("max_ptes_shared")),
            pages_to_scan: r.number(&kh.join("pages_to_scan")),
            scan_sleep: r
                .number(&kh.join("scan_sleep_millisecs"))
                .map(Duration::from_millis),
            alloc_sleep: r
                .number(&kh.join("alloc_sleep_millisecs"))
                .map(Duration::from_millis),
            pages_collapsed: r.number(&kh.join("pages_collapsed")),
            full_scans: r.number(&kh.join("full_scans")),
        },
        sizes: Vec::new(),
        pmd_bytes: r.number(&root.join("hpage_pmd_size")),
        page_bytes: crate::source::own::page_size(),
    };
    let names = r.source.dir_names(&root).map_err(|e| e.system_reason())?;
    for name in names {
        let Some(size_bytes) = sysfs::hugepage_dir_size_bytes(&name) else {
            continue;
        };
        let dir = root.join(&name);
        let enabled = r.choice(&dir.join("enabled"));
        let mut stats = Vec::new();
        let stats_dir = dir.join("stats");
        for stat in r.source.dir_names(&stats_dir).unwrap_or_default() {
            if !parse::is_metric_name_part(&stat) {
                r.count(Reason::Malformed, 1);
                continue;
            }
            if let Some(v) = r.number(&stats_dir.join(&stat)) {
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

impl super::UnitReading for Thp {
    const COLLECTOR: crate::family::Collector = COLLECTOR;
}

impl Reading for Thp {
    fn families(&self) -> Vec<Family> {
        let mut out = Vec::new();
        let mut info = Family::new(&THP_SETTINGS_INFO);
        let labels = [
            ("enabled", &self.enabled),
            ("defrag", &self.defrag),
            ("shmem_enabled", &self.shmem_enabled),
        ]
        .into_iter()
        .filter_map(|(key, v)| Some((key, v.clone()?)))
        .collect();
        info.push(labels, Value::U(1));
        out.push(info);
        let k = &self.khugepaged;
        let secs = |d: Option<Duration>| d.map(|d| Value::F(d.as_secs_f64()));
        let u = |v: Option<u64>| v.map(Value::U);
        out.extend(
            [
                (&KHUGEPAGED_DEFRAG, u(k.defrag)),
                (&KHUGEPAGED_MAX_PTES_NONE, u(k.max_ptes_none)),
                (&KHUGEPAGED_MAX_PTES_SWAP, u(k.max_ptes_swap)),
                (&KHUGEPAGED_MAX_PTES_SHARED, u(k.max_ptes_shared)),
                (&KHUGEPAGED_PAGES_TO_SCAN, u(k.pages_to_scan)),
                (&KHUGEPAGED_SCAN_SLEEP_SECONDS, secs(k.scan_sleep)),
                (&KHUGEPAGED_ALLOC_SLEEP_SECONDS, secs(k.alloc_sleep)),
                (&KHUGEPAGED_PAGES_COLLAPSED_TOTAL, u(k.pages_collapsed)),
                (&KHUGEPAGED_FULL_SCANS_TOTAL, u(k.full_scans)),
            ]
            .into_iter()
            .filter_map(|(m, v)| Family::single(m, v)),
        );
        let mut sizes = Family::new(&MTHP_SETTINGS_INFO);
        for z in &self.sizes {
            if let Some(enabled) = &z.enabled {
                let labels = vec![("enabled", enabled.clone()), ("size", z.label.clone())];
                sizes.push(labels, Value::U(1));
            }
        }
        out.push(sizes);
        // Every stats/ file, whatever the kernel has: nr_* are current folio counts, the
        // rest are event counters.
        let mut stat_names: Vec<&str> = self
            .sizes
            .iter()
            .flat_map(|z| z.stats.iter().map(|(k, _)| k.as_str()))
            .collect();
        stat_names.sort_unstable();
        stat_names.dedup();
        for stat in stat_names {
            let mut f = match stat.strip_prefix("nr_") {
                Some(state) => Family::keyed(&MTHP_KEY_FOLIOS, state),
                None => Family::keyed(&MTHP_KEY_TOTAL, stat),
            };
            for z in &self.sizes {
                if let Some((_, v)) = z.stats.iter().find(|(k, _)| k == stat) {
                    f.push(vec![("size", z.label.clone())], Value::U(*v));
                }
            }
            out.push(f);
        }
        out
    }
}

pub(crate) const THP_SETTINGS_INFO: Metric = crate::family::metric!(
    membloat "thp_settings",
    Info,
    None,
    ["enabled", "defrag", "shmem_enabled"],
    SECTION,
    "/sys/kernel/mm/transparent_hugepage",
    "Transparent huge page modes from /sys/kernel/mm/transparent_hugepage.",
);

pub(crate) const KHUGEPAGED_DEFRAG: Metric = crate::family::metric!(
    membloat "khugepaged_defrag",
    Gauge,
    None,
    [],
    SECTION,
    "/sys/kernel/mm/transparent_hugepage",
    "khugepaged/defrag: 1 when khugepaged may compact memory to collapse huge pages.",
);

pub(crate) const KHUGEPAGED_MAX_PTES_NONE: Metric = crate::family::metric!(
    membloat "khugepaged_max_ptes_none",
    Gauge,
    None,
    [],
    SECTION,
    "/sys/kernel/mm/transparent_hugepage",
    "khugepaged/max_ptes_none: empty pages khugepaged may fill to collapse a huge page; the default is the most (511 with 4 KiB pages), which lets one touched page become a whole huge page (2 MiB) of RSS.",
);

pub(crate) const KHUGEPAGED_MAX_PTES_SWAP: Metric = crate::family::metric!(
    membloat "khugepaged_max_ptes_swap",
    Gauge,
    None,
    [],
    SECTION,
    "/sys/kernel/mm/transparent_hugepage",
    "khugepaged/max_ptes_swap: swapped-out pages khugepaged may read back to collapse a huge page.",
);

pub(crate) const KHUGEPAGED_MAX_PTES_SHARED: Metric = crate::family::metric!(
    membloat "khugepaged_max_ptes_shared",
    Gauge,
    None,
    [],
    SECTION,
    "/sys/kernel/mm/transparent_hugepage",
    "khugepaged/max_ptes_shared: shared pages allowed in a range khugepaged collapses.",
);

pub(crate) const KHUGEPAGED_PAGES_TO_SCAN: Metric = crate::family::metric!(
    membloat "khugepaged_pages_to_scan",
    Gauge,
    None,
    [],
    SECTION,
    "/sys/kernel/mm/transparent_hugepage",
    "khugepaged/pages_to_scan: pages scanned per khugepaged pass.",
);

pub(crate) const KHUGEPAGED_SCAN_SLEEP_SECONDS: Metric = crate::family::metric!(
    membloat "khugepaged_scan_sleep",
    Gauge,
    Seconds,
    [],
    SECTION,
    "/sys/kernel/mm/transparent_hugepage",
    "khugepaged/scan_sleep_millisecs: pause between khugepaged passes.",
);

pub(crate) const KHUGEPAGED_ALLOC_SLEEP_SECONDS: Metric = crate::family::metric!(
    membloat "khugepaged_alloc_sleep",
    Gauge,
    Seconds,
    [],
    SECTION,
    "/sys/kernel/mm/transparent_hugepage",
    "khugepaged/alloc_sleep_millisecs: pause after a failed huge page allocation.",
);

pub(crate) const KHUGEPAGED_PAGES_COLLAPSED_TOTAL: Metric = crate::family::metric!(
    membloat "khugepaged_pages_collapsed",
    Counter,
    None,
    [],
    SECTION,
    "/sys/kernel/mm/transparent_hugepage",
    "khugepaged/pages_collapsed: huge pages khugepaged made by collapsing small pages.",
);

pub(crate) const KHUGEPAGED_FULL_SCANS_TOTAL: Metric = crate::family::metric!(
    membloat "khugepaged_full_scans",
    Counter,
    None,
    [],
    SECTION,
    "/sys/kernel/mm/transparent_hugepage",
    "khugepaged/full_scans: complete khugepaged passes over eligible memory.",
);

pub(crate) const MTHP_SETTINGS_INFO: Metric = crate::family::metric!(
    membloat "mthp_settings",
    Info,
    None,
    ["enabled", "size"],
    SECTION,
    "/sys/kernel/mm/transparent_hugepage/hugepages-*/enabled",
    "Per-size transparent huge page mode from hugepages-SIZE/enabled (kernel 6.8+).",
);

pub(crate) const MTHP_KEY_FOLIOS: Metric = crate::family::metric!(
    membloat "mthp_<key>_folios",
    Gauge,
    None,
    ["size"],
    SECTION,
    "/sys/kernel/mm/transparent_hugepage/hugepages-*/stats",
    "hugepages-SIZE/stats/nr_<key>: huge pages (folios) of this size currently in that state.",
);

pub(crate) const MTHP_KEY_TOTAL: Metric = crate::family::metric!(
    membloat "mthp_<key>",
    Counter,
    None,
    ["size"],
    SECTION,
    "/sys/kernel/mm/transparent_hugepage/hugepages-*/stats",
    "hugepages-SIZE/stats/<key>: events for huge pages of this size.",
);

pub(crate) const THP_REGROWTH_RISK: Metric = crate::family::metric!(
    membloat "thp_regrowth_risk",
    Gauge,
    None,
    [],
    SECTION,
    "/sys/kernel/mm/transparent_hugepage",
    "1 when THP is not `never` and khugepaged/max_ptes_none is at its most, the default (511 with 4 KiB pages): memory released with MADV_DONTNEED can grow back while a program sleeps.",
);

pub(crate) const THP_HIDDEN_BYTES: Metric = crate::family::metric!(
    membloat "thp_hidden",
    Gauge,
    Bytes,
    [],
    SECTION,
    "/sys/kernel/mm/transparent_hugepage/hugepages-*/stats",
    "Memory held in partially mapped huge pages (nr_anon_partially_mapped x size, kernel 6.12+): allocated, yet in no RSS, AnonHugePages or MemFree.",
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ceiling_of_max_ptes_none_is_one_less_than_the_pages_of_a_huge_page() {
        let thp = |pmd: Option<u64>, page: u64| Thp {
            pmd_bytes: pmd,
            page_bytes: page,
            ..Thp::default()
        };
        assert_eq!(thp(Some(2 << 20), 4096).max_ptes_none_ceiling(), 511);
        assert_eq!(thp(Some(512 << 20), 64 << 10).max_ptes_none_ceiling(), 8191);
        assert_eq!(thp(Some(32 << 20), 16 << 10).max_ptes_none_ceiling(), 2047);
        // Sizes not known, or absurd: the x86-64 value.
        assert_eq!(thp(None, 4096).max_ptes_none_ceiling(), 511);
        assert_eq!(thp(Some(4096), 4096).max_ptes_none_ceiling(), 511);
        assert_eq!(thp(Some(2 << 20), 0).max_ptes_none_ceiling(), 511);
    }
}
