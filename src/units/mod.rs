//! System collectors as units: each is one file that says its name (its `--collector.NAME`
//! flag and `collector` label), what it collects, its catalogue rows and how it reads its
//! families through `source`; [`ALL`] registers it. The scanner runs every enabled unit on
//! the system pool with the other system files (a stuck file costs a scan the read timeout
//! once), the snapshot carries what each read, and the exposition encodes it after the
//! built-in system collectors, in the order of [`ALL`]. Adding one is its file and a line
//! in [`ALL`].

use crate::family::{Family, Metric};
use crate::source::{Buffer, Reason, Source};

mod buddyinfo;

/// Every unit, in the order of the exposition.
pub const ALL: &[&Unit] = &[&buddyinfo::UNIT];

/// A system collector.
pub struct Unit {
    /// Its flag (`--collector.NAME`) and its `collector` label.
    pub name: &'static str,
    /// What it collects, for `--help` and the catalogue's heading.
    pub what: &'static str,
    /// The families it may serve.
    pub rows: &'static [Metric],
    /// Reads its families. A source the kernel lacks is `Err(Reason::Unsupported)`.
    pub read: fn(&mut Reader) -> Result<Vec<Family>, Reason>,
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
