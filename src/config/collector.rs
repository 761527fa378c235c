//! The collectors: which there are (the built-in ones and the units), and which are on.

/// A collector, switched by `--collector.NAME` / `--no-collector.NAME`; its name is the
/// `collector` label of the self metrics and the key of the error counts (ordered by name,
/// so series come out in the same order as always). The built-in ones are variants; a
/// collector unit (`units`) is `Unit(its name)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Collector {
    Meminfo,
    Vmstat,
    Sysctl,
    Thp,
    Pressure,
    Processes,
    Cgroup,
    /// A collector unit, by its name (`units::ALL`).
    Unit(&'static str),
}

impl Collector {
    pub const ALL: [Collector; 7] = [
        Collector::Meminfo,
        Collector::Vmstat,
        Collector::Sysctl,
        Collector::Thp,
        Collector::Pressure,
        Collector::Processes,
        Collector::Cgroup,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Collector::Meminfo => "meminfo",
            Collector::Vmstat => "vmstat",
            Collector::Sysctl => "sysctl",
            Collector::Thp => "thp",
            Collector::Pressure => "pressure",
            Collector::Processes => "processes",
            Collector::Cgroup => "cgroup",
            Collector::Unit(name) => name,
        }
    }

    /// What it collects, for `--help`.
    pub fn what(self) -> &'static str {
        match self {
            Collector::Meminfo => "memory, commit and swap from /proc/meminfo",
            Collector::Vmstat => "THP, compaction, swap and OOM-kill counters from /proc/vmstat",
            Collector::Sysctl => "overcommit, panic_on_oom and swappiness from /proc/sys/vm",
            Collector::Thp => {
                "THP, khugepaged and per-size huge page settings and counters from /sys"
            }
            Collector::Pressure => "memory stall time from /proc/pressure/memory",
            Collector::Processes => "per-process memory, grouped, plus the top-K processes",
            Collector::Cgroup => {
                "anonymous and huge page memory per memory cgroup (container) from memory.stat"
            }
            Collector::Unit(name) => crate::units::named(name).map_or("", |u| u.what),
        }
    }

    /// Every collector, in the order of the exposition: the built-in ones, then the units.
    pub fn all() -> impl Iterator<Item = Collector> {
        Collector::ALL
            .into_iter()
            .chain(crate::units::ALL.iter().map(|u| Collector::Unit(u.name)))
    }

    /// Its place in [`Collector::all`].
    pub fn position(self) -> usize {
        Collector::all()
            .position(|c| c == self)
            .unwrap_or(usize::MAX)
    }
}

impl Ord for Collector {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.as_str().cmp(other.as_str())
    }
}

impl PartialOrd for Collector {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

/// The enabled collectors, by their place in [`Collector::all`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Collectors(u64);

impl Collectors {
    pub fn none() -> Self {
        Collectors(0)
    }

    pub fn only(list: &[Collector]) -> Self {
        let mut c = Collectors::none();
        for &one in list {
            c.set(one, true);
        }
        c
    }

    pub fn set(&mut self, c: Collector, on: bool) {
        let Some(bit) = Self::bit(c) else { return };
        if on {
            self.0 |= bit;
        } else {
            self.0 &= !bit;
        }
    }

    pub fn enabled(self, c: Collector) -> bool {
        Self::bit(c).is_some_and(|bit| self.0 & bit != 0)
    }

    fn bit(c: Collector) -> Option<u64> {
        1u64.checked_shl(u32::try_from(c.position()).ok()?)
    }
}
