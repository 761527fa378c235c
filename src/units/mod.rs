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

use crate::family::{Family, Metric};
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Collector;
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
