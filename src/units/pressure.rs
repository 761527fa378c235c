//! `pressure`: memory stall time from `/proc/pressure/memory` (PSI), and the share of
//! time stalled since the scan before, which the model derives.

use crate::family::{Collector, Family, Metric, Section, Value};
use crate::parse::pressure::Pressure;
use crate::source::Reason;

use super::{Reader, Reading, Unit};

pub const COLLECTOR: Collector = Collector::Unit("pressure");
const SECTION: Section = Section::Of(COLLECTOR);

pub const UNIT: Unit = Unit {
    name: "pressure",
    what: "memory stall time from /proc/pressure/memory",
    rows: &[
        PRESSURE_MEMORY_WAITING_SECONDS_TOTAL,
        PRESSURE_MEMORY_STALLED_SECONDS_TOTAL,
        PRESSURE_MEMORY_WAITING_RATIO,
        PRESSURE_MEMORY_STALLED_RATIO,
    ],
    fixes: &[],
    start: || super::stateless(read),
};

fn read(r: &mut Reader) -> Result<Pressure, Reason> {
    r.source.parse_proc("pressure/memory", r.buf, Pressure::parse)
}

impl super::UnitReading for Pressure {
    const COLLECTOR: crate::family::Collector = COLLECTOR;
}

impl Reading for Pressure {
    fn families(&self) -> Vec<Family> {
        [
            (&PRESSURE_MEMORY_WAITING_SECONDS_TOTAL, self.some_seconds),
            (&PRESSURE_MEMORY_STALLED_SECONDS_TOTAL, self.full_seconds),
        ]
        .into_iter()
        .filter_map(|(m, v)| Family::single(m, v.map(Value::F)))
        .collect()
    }
}

pub(crate) const PRESSURE_MEMORY_WAITING_SECONDS_TOTAL: Metric = crate::family::metric!(
    membloat "pressure_memory_waiting",
    Counter,
    Seconds,
    [],
    SECTION,
    "/proc/pressure/memory some",
    "Time in which at least one task stalled on memory (/proc/pressure/memory some).",
);

pub(crate) const PRESSURE_MEMORY_STALLED_SECONDS_TOTAL: Metric = crate::family::metric!(
    membloat "pressure_memory_stalled",
    Counter,
    Seconds,
    [],
    SECTION,
    "/proc/pressure/memory full",
    "Time in which all non-idle tasks stalled on memory at once (/proc/pressure/memory full).",
);

pub(crate) const PRESSURE_MEMORY_WAITING_RATIO: Metric = crate::family::metric!(
    membloat "pressure_memory_waiting",
    Gauge,
    Ratio,
    [],
    SECTION,
    "/proc/pressure/memory",
    "Share of the last scan interval in which at least one task stalled on memory (PSI some).",
);

pub(crate) const PRESSURE_MEMORY_STALLED_RATIO: Metric = crate::family::metric!(
    membloat "pressure_memory_stalled",
    Gauge,
    Ratio,
    [],
    SECTION,
    "/proc/pressure/memory",
    "Share of the last scan interval in which all non-idle tasks stalled on memory (PSI full).",
);
