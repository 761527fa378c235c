//! `vmstat`: every counter of `/proc/vmstat` (THP, compaction, swap, OOM kills), one
//! family per key the kernel prints.

use crate::family::{Collector, Family, Metric, Section, Value};
use crate::parse::vmstat::Vmstat;
use crate::source::Reason;

use super::{Reader, Reading, Unit};

pub const COLLECTOR: Collector = Collector::Unit("vmstat");
const SECTION: Section = Section::Of(COLLECTOR);

pub const UNIT: Unit = Unit {
    name: "vmstat",
    what: "THP, compaction, swap and OOM-kill counters from /proc/vmstat",
    rows: &[
        LAST_OOM_KILL_TIMESTAMP_SECONDS,
        VMSTAT_KEY_TOTAL,
    ],
    fixes: &[],
    start: || super::stateless(read),
};

fn read(r: &mut Reader) -> Result<Vmstat, Reason> {
    let v = r.source.parse_proc("vmstat", r.buf, Vmstat::parse)?;
    r.count(Reason::Malformed, v.rejected as u64);
    Ok(v)
}

impl super::UnitReading for Vmstat {
    const COLLECTOR: crate::family::Collector = COLLECTOR;
}

impl Reading for Vmstat {
    fn families(&self) -> Vec<Family> {
        self.counters
            .iter()
            .map(|(key, value)| {
                let mut f = Family::keyed(&VMSTAT_KEY_TOTAL, key);
                f.push(Vec::new(), Value::U(*value));
                f
            })
            .collect()
    }
}

pub(crate) const LAST_OOM_KILL_TIMESTAMP_SECONDS: Metric = crate::family::metric!(
    membloat "last_oom_kill_timestamp",
    Gauge,
    Seconds,
    [],
    SECTION,
    "/proc/vmstat",
    "Unix time of the scan that first saw /proc/vmstat oom_kill rise since the exporter started; absent until then.",
);

pub(crate) const VMSTAT_KEY_TOTAL: Metric = crate::family::metric!(
    membloat "vmstat_<key>",
    Counter,
    None,
    [],
    SECTION,
    "/proc/vmstat",
    "/proc/vmstat <key>.",
);
