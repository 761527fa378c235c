//! How a family is written with prometheus-client: from its catalogue row, a sample per
//! row of labels, skipped when it has none.

use std::fmt;

use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric, MetricEncoder};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Unit as PromUnit;

use super::catalogue::{self, Kind, Metric};
use crate::family::Family;

/// A sample value (the one `family` defines for units too); integers stay integers.
pub(super) use crate::family::Value as Num;

pub(super) type Labels<'a> = Vec<(&'static str, &'a str)>;

/// Writes metric families from their catalogue rows, skipping a family that has no sample.
pub(super) struct Families<'a, 'b> {
    pub(super) enc: &'a mut DescriptorEncoder<'b>,
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
        catalogue::MetricUnit::None => None,
        catalogue::MetricUnit::Bytes => Some(PromUnit::Bytes),
        catalogue::MetricUnit::Seconds => Some(PromUnit::Seconds),
        catalogue::MetricUnit::Ratio => Some(PromUnit::Other("ratio".into())),
    }
}

impl<'b> Families<'_, 'b> {
    pub(super) fn family(&mut self, m: &Metric, rows: Vec<(Labels, Num)>) -> fmt::Result {
        self.named(m, m.base, m.help, rows)
    }

    /// A family of a pattern row (`<key>` in its name), one per key the kernel prints.
    pub(super) fn keyed(&mut self, m: &Metric, key: &str, rows: Vec<(Labels, Num)>) -> fmt::Result {
        let name = m.base.replace("<key>", key);
        let help = m.help.replace("<key>", key);
        self.named(m, &name, &help, rows)
    }

    pub(super) fn named(
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
    pub(super) fn single(&mut self, m: &Metric, value: Option<Num>) -> fmt::Result {
        let rows: Vec<(Labels, Num)> = value.map(|v| (Vec::new(), v)).into_iter().collect();
        self.family(m, rows)
    }

    /// The descriptor of an info family whose samples carry labels of their own.
    pub(super) fn descriptor(&mut self, m: &Metric) -> Result<MetricEncoder<'_>, fmt::Error> {
        self.enc
            .encode_descriptor(m.base, m.help, None, MetricType::Info)
    }

    pub(super) fn info(&mut self, m: &Metric, labels: Labels) -> fmt::Result {
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

pub(super) fn u(v: Option<u64>) -> Option<Num> {
    v.map(Num::U)
}

/// One family a unit read or the model derived, as its row says.
pub(super) fn encode_family(f: &mut Families, family: &Family) -> fmt::Result {
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
