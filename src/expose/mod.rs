//! The exposition. The catalogue (`catalogue.rs`) names every family of the exporter
//! itself and of the processes collector; each system collector's unit in `units/` names
//! its own in its file. Here: the exporter's own families (`system.rs`), each unit's
//! section (its reading's families, with those the model derived for it in place), the
//! groups and top processes (`processes.rs`), the OOM kills (`kills.rs`), and the text
//! format 0.0.4 rewritten from OpenMetrics (`text.rs`). Encoding reads only a
//! [`Snapshot`]; it never touches `/proc`.

pub mod catalogue;
pub mod processes;
mod system;
mod text;
mod top;

use processes::encode_groups;
use system::encode_self;
pub use text::text_from_openmetrics;
use top::encode_top;

use std::fmt;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric, MetricEncoder};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::{Registry, Unit as PromUnit};

use crate::family::Family;
use crate::model::derive::Snapshot;
use crate::units::Unit as CollectorUnit;
use catalogue::{Kind, Metric};

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

/// One family a unit read or the model derived, as its row says.
fn encode_family(f: &mut Families, family: &Family) -> fmt::Result {
    let rows: Vec<(Labels, Num)> = family
        .samples
        .iter()
        .map(|(labels, v)| (labels.iter().map(|(k, v)| (*k, v.as_str())).collect(), *v))
        .collect();
    match (family.metric.kind, &family.key) {
        // An info's labels are the information: written as they are, after its name.
        (Kind::Info, _) if rows.is_empty() => Ok(()),
        (Kind::Info, _) => {
            let mut metric = f.descriptor(family.metric)?;
            for (labels, _) in &rows {
                metric.encode_info(labels)?;
            }
            Ok(())
        }
        (_, Some(key)) => f.keyed(family.metric, key, rows),
        (_, None) => f.family(family.metric, rows),
    }
}

/// A unit's section: the families of its reading, and those the model derives for it
/// (`derived`, in their order). A derived family whose row the unit lists goes before the
/// first of the reading's families that comes after it in the rows; one it does not list
/// (a figure of another unit's reading) follows the derived family before it.
fn encode_section(
    f: &mut Families,
    s: &Snapshot,
    unit: &CollectorUnit,
    derived: &[(&str, Family)],
) -> fmt::Result {
    let me = crate::family::Collector::Unit(unit.name);
    let row = |family: &Family| unit.rows.iter().position(|r| r.name == family.metric.name);
    let mut families: Vec<Family> = s
        .host
        .readings()
        .filter(|(c, _)| *c == me)
        .flat_map(|(_, r)| r.families())
        .collect();
    let mut placed: Option<usize> = None;
    for (_, d) in derived.iter().filter(|(name, _)| *name == unit.name) {
        let at = match row(d) {
            Some(at) => families
                .iter()
                .position(|f| row(f).is_some_and(|i| i > at))
                .unwrap_or(families.len()),
            None => placed.map_or(families.len(), |p| p + 1),
        };
        families.insert(at, d.clone());
        placed = Some(at);
    }
    families
        .iter()
        .try_for_each(|family| encode_family(f, family))
}

/// Encodes one snapshot.
#[derive(Debug)]
pub struct SnapshotCollector(pub std::sync::Arc<Snapshot>);

impl Collector for SnapshotCollector {
    fn encode(&self, mut enc: DescriptorEncoder) -> fmt::Result {
        let mut f = Families { enc: &mut enc };
        let s = &*self.0;
        encode_self(&mut f, s)?;
        // Each collector's section, in the registration line's order.
        for c in crate::family::Collector::all() {
            match c {
                crate::family::Collector::Processes => {
                    let folded = s.processes_scanned.map(|_| s.groups_folded);
                    encode_groups(&mut f, &s.groups, folded)?;
                    encode_top(&mut f, &s.top)?;
                }
                crate::family::Collector::Unit(name) => {
                    if let Some(unit) = crate::units::named(name) {
                        encode_section(&mut f, s, unit, &s.derived)?;
                    }
                }
            }
        }
        Ok(())
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
