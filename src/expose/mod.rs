//! The exposition. The catalogue (`catalogue.rs`) names every family of the built-in
//! collectors and the exporter itself; a unit in `units/` names its own in its file. Here:
//! the families of the system collectors and the exporter itself (`system.rs`), of groups
//! and top processes (`processes.rs`); the text format 0.0.4 rewritten from OpenMetrics
//! (`text.rs`). Encoding reads only a [`Snapshot`]; it never
//! touches `/proc`.

pub mod catalogue;
pub mod kills;
mod processes;
mod system;
mod text;

use processes::{encode_groups, encode_top};
use system::{
    encode_cgroups, encode_meminfo, encode_pressure, encode_self, encode_sysctl, encode_thp,
    encode_vmstat,
};
pub use text::text_from_openmetrics;

use std::fmt;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric, MetricEncoder};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::{Registry, Unit as PromUnit};

use crate::model::derive::Snapshot;
use catalogue::*;

/// Every family but the exporter's own `process_*` starts with this (`family::prefix!`).
pub const PREFIX: &str = crate::family::prefix!();

/// A sample value (the one `family` defines for units too); integers stay integers.
use crate::family::Value as Num;

type Labels<'a> = Vec<(&'static str, &'a str)>;

/// Writes metric families from their catalogue rows, skipping a family that has no sample.
struct Families<'a, 'b> {
    enc: &'a mut DescriptorEncoder<'b>,
}

fn kind(m: &Metric) -> MetricType {
    match m.kind {
        Kind::Gauge => MetricType::Gauge,
        Kind::Counter => MetricType::Counter,
        Kind::Info => MetricType::Info,
    }
}

fn unit(m: &Metric) -> Option<PromUnit> {
    match m.unit {
        catalogue::Unit::None => None,
        catalogue::Unit::Bytes => Some(PromUnit::Bytes),
        catalogue::Unit::Seconds => Some(PromUnit::Seconds),
        catalogue::Unit::Ratio => Some(PromUnit::Other("ratio".into())),
    }
}

impl<'b> Families<'_, 'b> {
    fn family(&mut self, m: &Metric, rows: Vec<(Labels, Num)>) -> fmt::Result {
        self.named(m, m.base, m.help, rows)
    }

    /// A family of a pattern row (`<key>` in its name), one per key the kernel prints.
    fn keyed(&mut self, m: &Metric, key: &str, rows: Vec<(Labels, Num)>) -> fmt::Result {
        let name = m.base.replace("<key>", key);
        let help = m.help.replace("<key>", key);
        self.named(m, &name, &help, rows)
    }

    fn named(
        &mut self,
        m: &Metric,
        name: &str,
        help: &str,
        rows: Vec<(Labels, Num)>,
    ) -> fmt::Result {
        if rows.is_empty() {
            return Ok(());
        }
        let kind = kind(m);
        let unit = unit(m);
        let mut metric = self
            .enc
            .encode_descriptor(name, help, unit.as_ref(), kind)?;
        if let [(labels, value)] = rows.as_slice() {
            if labels.is_empty() {
                // An unlabelled sample: no `{}` after the name.
                return encode_value(metric, kind, *value);
            }
        }
        for (labels, value) in rows {
            encode_value(metric.encode_family(&labels)?, kind, value)?;
        }
        Ok(())
    }

    /// A family of one unlabelled sample, skipped when there is no value.
    fn single(&mut self, m: &Metric, value: Option<Num>) -> fmt::Result {
        let rows: Vec<(Labels, Num)> = value.map(|v| (Vec::new(), v)).into_iter().collect();
        self.family(m, rows)
    }

    /// The descriptor of an info family whose samples carry labels of their own.
    fn descriptor(&mut self, m: &Metric) -> Result<MetricEncoder<'_>, fmt::Error> {
        self.enc
            .encode_descriptor(m.base, m.help, None, MetricType::Info)
    }

    fn info(&mut self, m: &Metric, labels: Labels) -> fmt::Result {
        self.descriptor(m)?.encode_info(&labels)
    }
}

fn encode_value(sample: MetricEncoder, kind: MetricType, value: Num) -> fmt::Result {
    match (kind, value) {
        (MetricType::Counter, Num::U(v)) => ConstCounter::new(v).encode(sample),
        (MetricType::Counter, Num::F(v)) => ConstCounter::new(v).encode(sample),
        (_, Num::U(v)) => ConstGauge::new(v).encode(sample),
        (_, Num::I(v)) => ConstGauge::new(v).encode(sample),
        (_, Num::F(v)) => ConstGauge::new(v).encode(sample),
    }
}

fn u(v: Option<u64>) -> Option<Num> {
    v.map(Num::U)
}

/// The families of the collector units, each as its unit read it, in the units' order.
fn encode_units(f: &mut Families, s: &Snapshot) -> fmt::Result {
    for family in s.host.units.iter().flat_map(|(_, families)| families) {
        let rows = family
            .samples
            .iter()
            .map(|(values, v)| {
                let labels: Labels = family
                    .metric
                    .labels
                    .iter()
                    .copied()
                    .zip(values.iter().map(String::as_str))
                    .collect();
                (labels, *v)
            })
            .collect();
        f.family(family.metric, rows)?;
    }
    Ok(())
}

/// Encodes one snapshot.
#[derive(Debug)]
pub struct SnapshotCollector(pub std::sync::Arc<Snapshot>);

impl Collector for SnapshotCollector {
    fn encode(&self, mut enc: DescriptorEncoder) -> fmt::Result {
        let mut f = Families { enc: &mut enc };
        let s = &*self.0;
        encode_self(&mut f, s)?;
        encode_meminfo(&mut f, s)?;
        encode_sysctl(&mut f, s)?;
        encode_thp(&mut f, s)?;
        encode_vmstat(&mut f, s)?;
        encode_pressure(&mut f, s)?;
        encode_units(&mut f, s)?;
        let folded = s.processes_scanned.map(|_| s.groups_folded);
        encode_groups(&mut f, &s.groups, folded)?;
        encode_cgroups(&mut f, s)?;
        kills::encode_kills(&mut f, s)?;
        encode_top(&mut f, &s.top)
    }
}

/// Encodes the exporter's own `process_*` families (no prefix).
#[derive(Debug)]
struct OwnCollector(std::sync::Arc<Snapshot>);

impl Collector for OwnCollector {
    fn encode(&self, mut enc: DescriptorEncoder) -> fmt::Result {
        system::encode_own(&mut Families { enc: &mut enc }, &self.0)
    }
}

/// The OpenMetrics exposition of a snapshot, ending in `# EOF`.
pub fn openmetrics(snapshot: std::sync::Arc<Snapshot>) -> String {
    let mut registry = Registry::default();
    registry.register_collector(Box::new(OwnCollector(snapshot.clone())));
    registry
        .sub_registry_with_prefix(PREFIX)
        .register_collector(Box::new(SnapshotCollector(snapshot)));
    let mut out = String::with_capacity(64 * 1024);
    // Writing to a String cannot fail; a failing encoder would be a bug in a help text.
    if prometheus_client::encoding::text::encode(&mut out, &registry).is_err() {
        out.clear();
        out.push_str("# EOF\n");
    }
    out
}

#[cfg(test)]
mod tests;
