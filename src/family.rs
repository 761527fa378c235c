//! What a metric family is, apart from any encoder: its catalogue row (name, type, unit,
//! labels, section, source and help) and, for a collector unit (`units`), its samples.

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Gauge,
    Counter,
    /// A gauge of value 1 whose labels carry the information (`_info`).
    Info,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Gauge => "gauge",
            Kind::Counter => "counter",
            Kind::Info => "info",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetricUnit {
    None,
    Bytes,
    Seconds,
    Ratio,
}

impl MetricUnit {
    /// The suffix the unit gives a name (`bytes`), empty for none.
    pub fn as_str(self) -> &'static str {
        match self {
            MetricUnit::None => "",
            MetricUnit::Bytes => "bytes",
            MetricUnit::Seconds => "seconds",
            MetricUnit::Ratio => "ratio",
        }
    }
}

/// A collector, switched by `--collector.NAME` / `--no-collector.NAME`; its name is the
/// `collector` label of the self metrics and the key of the error counts (ordered by name,
/// so series come out in the same order as always). The processes collector is the
/// scanner's own; every system collector is a unit (`units`), `Unit(its name)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Collector {
    Processes,
    /// A collector unit, by its name (`units::ALL`).
    Unit(&'static str),
}

impl Collector {
    pub fn as_str(self) -> &'static str {
        match self {
            Collector::Processes => "processes",
            Collector::Unit(name) => name,
        }
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

/// Where a family belongs: the collector whose flag turns it on, or the exporter itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Section {
    Exporter,
    Of(Collector),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Metric {
    /// The full name as served: a counter's ends in `_total`, an info's in `_info`. Made by
    /// `metric!` from the base name, the type and the unit.
    pub name: &'static str,
    /// The name without the prefix and the suffixes of its type and unit: what
    /// prometheus-client's descriptor takes (it adds them back).
    pub base: &'static str,
    pub kind: Kind,
    pub unit: MetricUnit,
    /// The labels of its samples, in order (an info's carried labels included).
    pub labels: &'static [&'static str],
    pub section: Section,
    /// The kernel files the value is read or derived from.
    pub source: &'static str,
    /// The `# HELP` text.
    pub help: &'static str,
}

/// The prefix of every family but the exporter's own `process_*` ones, written here once.
macro_rules! prefix {
    () => {
        "membloat"
    };
}

macro_rules! unit_suffix {
    (None) => {
        ""
    };
    (Bytes) => {
        "_bytes"
    };
    (Seconds) => {
        "_seconds"
    };
    (Ratio) => {
        "_ratio"
    };
}

macro_rules! kind_suffix {
    (Counter) => {
        "_total"
    };
    (Gauge) => {
        ""
    };
    (Info) => {
        "_info"
    };
}

/// A catalogue row from its base name, type and unit, which make the name as served:
/// `metric!(membloat "scans", Counter, None, [labels], section, source, help)` serves
/// `membloat_scans_total`; `process "cpu"` (the exporter's own, standard names) serves
/// `process_cpu_seconds_total` without the prefix.
macro_rules! metric {
    (membloat $base:literal, $kind:ident, $unit:ident, $($row:tt)*) => {
        $crate::family::metric!(@row concat!(
            $crate::family::prefix!(), "_", $base, $crate::family::unit_suffix!($unit), $crate::family::kind_suffix!($kind)
        ), $base, $kind, $unit, $($row)*)
    };
    (process $base:literal, $kind:ident, $unit:ident, $($row:tt)*) => {
        $crate::family::metric!(@row concat!(
            "process_", $base, $crate::family::unit_suffix!($unit), $crate::family::kind_suffix!($kind)
        ), concat!("process_", $base), $kind, $unit, $($row)*)
    };
    (@row $name:expr, $base:expr, $kind:ident, $unit:ident, [$($label:literal),*],
        $section:expr, $source:literal, $help:literal $(,)?) => {
        $crate::family::Metric {
            name: $name,
            base: $base,
            kind: $crate::family::Kind::$kind,
            unit: $crate::family::MetricUnit::$unit,
            labels: &[$($label),*],
            section: $section,
            source: $source,
            help: $help,
        }
    };
}

// The macros by path (`crate::family::metric!`), like any other item of this room.
pub(crate) use {kind_suffix, metric, prefix, unit_suffix};

impl Metric {
    /// Whether the name is a pattern with a `<key>` placeholder.
    pub fn is_pattern(&self) -> bool {
        self.name.contains("<key>")
    }
}

/// A sample value; integers stay integers in the exposition.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Value {
    U(u64),
    I(i64),
    F(f64),
}

/// The labels of one sample, by name, in the row's order.
pub(crate) type Labels = Vec<(&'static str, String)>;

/// One family as a unit's reading (or the model, for its derived rows) gives it: its row,
/// the key of a pattern row, and its samples. A family without samples is not served.
#[derive(Debug, Clone, PartialEq)]
pub struct Family {
    pub metric: &'static Metric,
    /// For a pattern row (`<key>` in its name), the key that names this family.
    pub key: Option<String>,
    pub samples: Vec<(Labels, Value)>,
}

impl Family {
    /// A family of `metric` with no samples yet.
    pub fn new(metric: &'static Metric) -> Self {
        Family {
            metric,
            key: None,
            samples: Vec::new(),
        }
    }

    /// The family `key` names of the pattern row `metric`.
    pub(crate) fn keyed(metric: &'static Metric, key: &str) -> Self {
        Family {
            key: Some(key.to_string()),
            ..Family::new(metric)
        }
    }

    /// A family of one unlabelled sample; none without a value.
    pub fn single(metric: &'static Metric, value: Option<Value>) -> Option<Self> {
        let mut f = Family::new(metric);
        f.samples.push((Vec::new(), value?));
        Some(f)
    }

    /// Adds a sample.
    pub fn push(&mut self, labels: Labels, value: Value) {
        self.samples.push((labels, value));
    }
}
