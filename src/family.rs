//! What a metric family is, apart from any encoder: its catalogue row (name, type, unit,
//! labels, section, source and help) and, for a collector unit (`units`), its samples.

use crate::config::Collector;

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
pub enum Unit {
    None,
    Bytes,
    Seconds,
    Ratio,
}

impl Unit {
    /// The suffix the unit gives a name (`bytes`), empty for none.
    pub fn as_str(self) -> &'static str {
        match self {
            Unit::None => "",
            Unit::Bytes => "bytes",
            Unit::Seconds => "seconds",
            Unit::Ratio => "ratio",
        }
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
    /// The full name as served: a counter's ends in `_total`, an info's in `_info`.
    pub name: &'static str,
    pub kind: Kind,
    pub unit: Unit,
    /// The labels of its samples, in order (an info's carried labels included).
    pub labels: &'static [&'static str],
    pub section: Section,
    /// The kernel files the value is read or derived from.
    pub source: &'static str,
    /// The `# HELP` text.
    pub help: &'static str,
}

impl Metric {
    /// The name without the `membloat_` prefix and the suffixes the encoder adds (type and
    /// unit): what prometheus-client's descriptor takes.
    pub fn base(&self) -> &'static str {
        let mut n = self.name.strip_prefix("membloat_").unwrap_or(self.name);
        n = match self.kind {
            Kind::Counter => n.strip_suffix("_total").unwrap_or(n),
            Kind::Info => n.strip_suffix("_info").unwrap_or(n),
            Kind::Gauge => n,
        };
        match self.unit {
            Unit::None => n,
            u => n
                .strip_suffix(u.as_str())
                .and_then(|n| n.strip_suffix('_'))
                .unwrap_or(n),
        }
    }

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

/// One family as a collector unit read it: its row and its samples (labels in the row's
/// order, then the value). A family without samples is not served.
#[derive(Debug, Clone, PartialEq)]
pub struct Family {
    pub metric: &'static Metric,
    pub samples: Vec<(Vec<String>, Value)>,
}
