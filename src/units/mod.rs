//! System collectors as units: each is one file that says its name (its `--collector.NAME`
//! flag and `collector` label), what it collects, its section's catalogue rows, what to do
//! when the kernel refuses it, and how it reads through `source`; `register!` lists it in
//! [`ALL`]. The scanner starts each unit's reader once and keeps it, so a unit may carry
//! state between scans (the kernel log's cursor); it runs every enabled unit on the system
//! pool (a stuck file costs a scan the read timeout once). What a unit reads is a typed
//! [`Reading`]: the scan's `Host` holds it under its unit's name, the model takes it back
//! from that unit (its [`UnitReading::COLLECTOR`]) where it derives from it, and the
//! exposition encodes its families. Adding one is its file and
//! its name in the `register!` line, plus the model's use of its reading if it derives
//! anything from it.

use std::any::Any;
use std::collections::BTreeMap;
use std::fmt::Debug;
use std::path::Path;

use crate::family::{Collector, Family, Metric};
use crate::source::{Buffer, ReadError, Reason, Source};

/// Declares each unit's module and lists its `UNIT` in [`ALL`], in the order given, with
/// the place of the processes collector among them.
macro_rules! register {
    ($($before:ident),* ; processes ; $($after:ident),* $(,)?) => {
        $(pub mod $before;)*
        $(pub mod $after;)*
        /// Every unit, in the order of `--help`, the self metrics and the exposition.
        pub const ALL: &[&Unit] = &[$(&$before::UNIT,)* $(&$after::UNIT,)*];
        /// How many of [`ALL`] come before the processes collector.
        const BEFORE_PROCESSES: usize = [$(stringify!($before)),*].len();
    };
}

// The registration line: each unit's file name, and the processes collector's place among
// them, in the order of `--help`, the self metrics, the catalogue and the exposition. The
// cgroup collector follows the processes: its families hold sums of a cgroup's processes.
register!(meminfo, sysctl, thp, vmstat, pressure, kmsg, buddyinfo, owners; processes; cgroup, kubelet);

/// A system collector.
pub struct Unit {
    /// Its flag (`--collector.NAME`) and its `collector` label.
    pub name: &'static str,
    /// What it collects, for `--help` and the catalogue's heading.
    pub what: &'static str,
    /// Its section's catalogue rows, in the order of the exposition: the families its
    /// reading serves, and those the model derives from it (their `source` says so).
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

/// What a unit read in one scan: a typed value the model may use (`Host::get` by its
/// type), which the exposition encodes through [`Reading::families`].
pub trait Reading: AsAny + Debug + Send + Sync {
    /// The families it serves, in the order of its unit's rows (a pattern row's families
    /// in the order of their keys). Called once per scan, by the exposition.
    fn families(&self) -> Vec<Family>;
}

/// A typed reading the model takes back, of the one unit that reads it: found by that
/// unit, never by its type among every unit's (two units may read the same type).
pub trait UnitReading: Reading {
    /// The unit that reads it.
    const COLLECTOR: Collector;
}

/// A reading as `Any`, so the model can have back the type of the unit it found it under.
pub trait AsAny: Any {
    fn as_any(&self) -> &dyn Any;
}

impl<T: Any> AsAny for T {
    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// Families a unit read and nothing else uses.
impl Reading for Vec<Family> {
    fn families(&self) -> Vec<Family> {
        self.clone()
    }
}

/// What a unit contributes to a scan.
pub type Output = Box<dyn Reading>;

/// A unit without state: a function of its files, read anew each scan.
struct Stateless<T>(fn(&mut Reader) -> Result<T, Reason>);

impl<T: Reading> Collect for Stateless<T> {
    fn read(&mut self, r: &mut Reader) -> Result<Output, Reason> {
        (self.0)(r).map(|v| Box::new(v) as Output)
    }
}

/// The reader of a unit that reads its files alone each scan, into a reading of type `T`.
pub(crate) fn stateless<T: Reading>(
    read: fn(&mut Reader) -> Result<T, Reason>,
) -> Box<dyn Collect> {
    Box::new(Stateless(read))
}

/// What a unit reads with, and what it counts.
pub struct Reader<'a> {
    pub source: &'a Source,
    pub buf: &'a mut Buffer,
    /// Values skipped, by reason, counted against the unit (a line that made no sense is
    /// `malformed`; a setting file it may not read, `permission_denied`).
    pub skipped: BTreeMap<Reason, u64>,
}

impl<'a> Reader<'a> {
    pub fn new(source: &'a Source, buf: &'a mut Buffer) -> Self {
        Reader {
            source,
            buf,
            skipped: BTreeMap::new(),
        }
    }

    /// Counts `n` values skipped for `reason`.
    pub fn count(&mut self, reason: Reason, n: u64) {
        if n > 0 {
            *self.skipped.entry(reason).or_insert(0) += n;
        }
    }

    /// One setting file: absent is `None` (an older kernel), unreadable or unparseable is
    /// counted.
    pub fn setting<T>(
        &mut self,
        path: &Path,
        parse: fn(&str) -> Result<T, crate::parse::ParseError>,
    ) -> Option<T> {
        let reason = match self.source.read_setting(path, self.buf) {
            Ok(text) => match parse(text) {
                Ok(v) => return Some(v),
                Err(_) => Reason::Malformed,
            },
            Err(ReadError::Gone(_)) => return None,
            Err(e) => e.system_reason(),
        };
        self.count(reason, 1);
        None
    }

    /// A setting file holding a number.
    pub fn number(&mut self, path: &Path) -> Option<u64> {
        self.setting(path, crate::parse::parse_u64)
    }

    /// A setting file of choices, the selected one in brackets (`always [madvise] never`).
    pub fn choice(&mut self, path: &Path) -> Option<String> {
        self.setting(path, crate::parse::sysfs::selected)
    }
}

impl dyn Reading {
    /// The reading as its own type, when it is a `T`.
    pub(crate) fn downcast_ref<T: Reading>(&self) -> Option<&T> {
        AsAny::as_any(self).downcast_ref::<T>()
    }
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
            Collector::Processes => "per-process memory, grouped, plus the top-K processes",
            Collector::Unit(name) => named(name).map_or("", |u| u.what),
        }
    }

    /// Every collector, in the order of the registration line: `--help`, the self metrics,
    /// the catalogue and the exposition.
    pub fn all() -> impl Iterator<Item = Collector> {
        let (before, after) = ALL.split_at(BEFORE_PROCESSES);
        let unit = |u: &&Unit| Collector::Unit(u.name);
        before
            .iter()
            .map(unit)
            .chain([Collector::Processes])
            .chain(after.iter().map(unit))
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
                    && unit.name != Collector::Processes.as_str(),
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
