//! The exposition. The catalogue (`catalogue.rs`) names every family of the exporter
//! itself and of the processes collector; each system collector's unit in `units/` names
//! its own in its file. Here: the exporter's own families (`system.rs`), each unit's
//! section (its reading's families, with those the model derived for it in place), the
//! groups and top processes (`processes.rs`), the OOM kills (`kills.rs`), and the text
//! format 0.0.4 rewritten from OpenMetrics (`text.rs`). Encoding reads only a
//! [`Snapshot`]; it never touches `/proc`.

pub mod catalogue;
mod families;
pub mod processes;
mod system;
mod text;
mod top;

use families::{encode_family, Families};
use processes::encode_groups;
use system::encode_self;
pub use text::text_from_openmetrics;
use top::encode_top;

use std::fmt;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::DescriptorEncoder;
use prometheus_client::registry::Registry;

use crate::family::Family;
use crate::model::derive::Snapshot;
use crate::units::Unit as CollectorUnit;

/// Every family but the exporter's own `process_*` starts with this (`family::prefix!`).
pub(crate) const PREFIX: &str = crate::family::prefix!();

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
pub(crate) struct SnapshotCollector(pub std::sync::Arc<Snapshot>);

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
