//! System collectors as units: each is one file that says its name (its `--collector.NAME`
//! flag and `collector` label), what it collects, its catalogue rows, what to do when the
//! kernel refuses it, and how it reads through `source`; `register!` lists it in [`ALL`].
//! The scanner starts each unit's reader once and keeps it, so a unit may carry state
//! between scans (the kernel log's cursor); it runs every enabled unit on the system pool
//! with the other system files (a stuck file costs a scan the read timeout once). What a
//! unit reads is an [`Output`]: families the exposition encodes as they are, after the
//! built-in system collectors and in the order of [`ALL`], or a typed reading the model
//! joins with the rest of the scan (the OOM kills). Adding one is its file and its name in
//! the `register!` line.

use crate::family::{Collector, Family, Metric};
use crate::parse::kmsg::OomKill;
use crate::source::{Buffer, Reason, Source};

/// Declares each unit's module and lists its `UNIT` in [`ALL`], in the order given.
macro_rules! register {
    ($($unit:ident),* $(,)?) => {
        $(pub mod $unit;)*
        /// Every unit, in the order of the exposition.
        pub const ALL: &[&Unit] = &[$(&$unit::UNIT),*];
    };
}

// The registration line: a unit's file name, in the order of the exposition.
register!(kmsg, buddyinfo);

/// A system collector.
pub struct Unit {
    /// Its flag (`--collector.NAME`) and its `collector` label.
    pub name: &'static str,
    /// What it collects, for `--help` and the catalogue's heading.
    pub what: &'static str,
    /// The families it may serve.
    pub rows: &'static [Metric],
    /// What the operator can do when the unit fails for a reason, for the warning the log
    /// prints once; a reason not listed gets the general advice.
    pub fixes: &'static [(Reason, &'static str)],
    /// Makes its reader, once, when the scanner starts.
    pub start: fn() -> Box<dyn Collect>,
}

/// A unit's reader: kept for the scanner's life, read once a scan (never twice at once).
pub trait Collect: Send {
    /// Reads what the unit contributes to this scan. A source the kernel lacks is
    /// `Err(Reason::Unsupported)`.
    fn read(&mut self, r: &mut Reader) -> Result<Output, Reason>;

    /// From now on, read what the source still holds from before the exporter started,
    /// not only what is new (`explain`, which tells the past of a host it was not
    /// watching). Most sources have no past: the default does nothing.
    fn read_history(&mut self) {}
}

/// What a unit contributes to a scan's sample.
#[derive(Debug, Clone)]
pub enum Output {
    /// Families with their samples, exposed as they are.
    Families(Vec<Family>),
    /// The OOM kills logged since the last read, which the model joins with what was last
    /// measured of each victim.
    OomKills(Vec<OomKill>),
}

/// A unit without state: a function of its files, read anew each scan.
struct Stateless(fn(&mut Reader) -> Result<Vec<Family>, Reason>);

impl Collect for Stateless {
    fn read(&mut self, r: &mut Reader) -> Result<Output, Reason> {
        (self.0)(r).map(Output::Families)
    }
}

/// The reader of a unit that reads its families from files alone each scan.
pub fn stateless(read: fn(&mut Reader) -> Result<Vec<Family>, Reason>) -> Box<dyn Collect> {
    Box::new(Stateless(read))
}

/// What a unit reads with, and what it counts.
pub struct Reader<'a> {
    pub source: &'a Source,
    pub buf: &'a mut Buffer,
    /// Lines or values that made no sense, counted as `malformed` against the unit.
    pub malformed: u64,
}

/// The unit called `name`.
pub fn named(name: &str) -> Option<&'static Unit> {
    ALL.iter().copied().find(|u| u.name == name)
}

/// The collectors' list and descriptions, which the units complete.
impl Collector {
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
            Collector::Unit(name) => named(name).map_or("", |u| u.what),
        }
    }

    /// Every collector, in the order of the exposition: the built-in ones, then the units.
    pub fn all() -> impl Iterator<Item = Collector> {
        Collector::ALL
            .into_iter()
            .chain(ALL.iter().map(|u| Collector::Unit(u.name)))
    }

    /// Its place in [`Collector::all`].
    pub fn position(self) -> usize {
        Collector::all()
            .position(|c| c == self)
            .unwrap_or(usize::MAX)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::family::Section;

    #[test]
    fn every_unit_has_a_name_of_its_own_and_its_rows_in_its_section() {
        for (i, unit) in ALL.iter().enumerate() {
            assert!(
                ALL[..i].iter().all(|u| u.name != unit.name)
                    && Collector::ALL.iter().all(|c| c.as_str() != unit.name),
                "{} is registered twice",
                unit.name
            );
            assert!(!unit.rows.is_empty(), "{} serves nothing", unit.name);
            for row in unit.rows {
                assert_eq!(
                    row.section,
                    Section::Of(Collector::Unit(unit.name)),
                    "{}",
                    row.name
                );
            }
        }
    }
}
