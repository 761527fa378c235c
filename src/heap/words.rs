//! What a reader says of a process beyond its figure, declared by the reader so that the
//! exposition and `explain` name none: the samples of its families ([`Samples`]), the
//! finding its held bytes make ([`Said`]), why it has no figure ([`Gap`]), and what gives
//! the memory back ([`Remedy`]). Neutral values: `expose/` writes the samples, `explain`
//! ranks and renders the words.

use std::borrow::Cow;
use std::fmt;

use crate::family::{Collector, Metric, Section, Value};

/// One sample of a reader's family of the top processes: its row, the labels after `pid`
/// and `comm` (an info's carried labels), and its value.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    pub row: &'static Metric,
    pub labels: Vec<(&'static str, String)>,
    pub value: Value,
}

/// The samples a reader's rows take from its read of one process.
#[derive(Debug, Default)]
pub struct Samples(pub Vec<Sample>);

impl Samples {
    /// A sample without labels of its own, skipped when there is no value.
    pub fn put(&mut self, row: &'static Metric, value: Option<u64>) {
        if let Some(v) = value {
            self.labelled(row, Vec::new(), v);
        }
    }

    /// A sample with labels of its own.
    pub fn labelled(&mut self, row: &'static Metric, labels: Vec<(&'static str, String)>, v: u64) {
        self.0.push(Sample {
            row,
            labels,
            value: Value::U(v),
        });
    }

    /// 1 with the `reason` a figure is not whole, when it is not.
    pub fn reason(&mut self, row: &'static Metric, reason: Option<&'static str>) {
        if let Some(r) = reason {
            self.labelled(row, vec![("reason", r.to_string())], 1);
        }
    }
}

/// What to change, what it costs, and the exact commands where the facts measured make
/// them right: none is printed for a case where it would not give the memory back.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Remedy {
    pub what: String,
    pub cost: Option<Cow<'static, str>>,
    /// A command that gives the memory back now, as it runs (the process's pid in it).
    pub now: Option<String>,
    /// What `now` gives back, in bytes of RAM, as far as the measurement tells.
    pub now_gives_back_bytes: Option<u64>,
    /// The environment or flags to start the program with, so that it does not happen
    /// again.
    pub next_start: Option<String>,
}

impl Remedy {
    /// A remedy of words alone: what to change and its cost.
    pub fn advice(what: impl Into<String>, cost: Option<&'static str>) -> Remedy {
        Remedy {
            what: what.into(),
            cost: cost.map(Cow::Borrowed),
            ..Remedy::default()
        }
    }
}

/// The process a reader speaks of: its pid (in a remedy's command) and the version of its
/// runtime as the deep read told it (empty when unknown).
#[derive(Debug, Clone, Copy)]
pub struct Subject<'a> {
    pub pid: u32,
    pub version: &'a str,
}

/// What a reader's figure says: its finding's kind (`hoarding` for an allocator's: the
/// process's hoarding finding), its evidence, and the remedy (`None`: the allocator's,
/// which `explain` gives by the allocator the deep read told, figure or not).
#[derive(Debug, Clone, PartialEq)]
pub struct Said {
    pub kind: &'static str,
    pub evidence: String,
    pub remedy: Option<Remedy>,
}

/// Why a reader has no figure (or one without its held bytes), as a finding: its kind
/// (`<finding>_unmeasured`), what happened, and what would let it be measured.
#[derive(Debug, Clone, PartialEq)]
pub struct Gap {
    pub kind: &'static str,
    pub evidence: &'static str,
    pub fix: &'static str,
}

/// Bytes as an operator reads them: `1.50 GiB`, `12.3 MiB`, `512 KiB`.
#[derive(Debug, Clone, Copy)]
pub struct Size(pub u64);

impl fmt::Display for Size {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        const MIB: f64 = 1024.0 * 1024.0;
        let b = self.0 as f64;
        if b >= 1024.0 * MIB {
            write!(f, "{:.2} GiB", b / 1024.0 / MIB)
        } else if b >= MIB {
            write!(f, "{:.1} MiB", b / MIB)
        } else {
            write!(f, "{} KiB", self.0 / 1024)
        }
    }
}

/// The exporter's own section: where a reader's reads counter is served.
pub const EXPORTER: Section = Section::Exporter;
/// The processes collector's section: where a reader's families of the top processes are.
pub const PROCESSES: Section = Section::Of(Collector::Processes);
