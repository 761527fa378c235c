//! `sysctl`: the overcommit policy, `panic_on_oom` and swappiness from `/proc/sys/vm`.

use crate::family::{Collector, Family, Metric, Section, Value};
use crate::source::Reason;

use super::{Reader, Reading, Unit};

pub const COLLECTOR: Collector = Collector::Unit("sysctl");
const SECTION: Section = Section::Of(COLLECTOR);

pub const UNIT: Unit = Unit {
    name: "sysctl",
    what: "overcommit, panic_on_oom and swappiness from /proc/sys/vm",
    rows: &[
        VM_OVERCOMMIT_MEMORY,
        VM_OVERCOMMIT_RATIO,
        VM_OVERCOMMIT_BYTES,
        VM_PANIC_ON_OOM,
        VM_SWAPPINESS,
    ],
    fixes: &[],
    start: || super::stateless(read),
};

/// `/proc/sys/vm` settings, in bytes and shares.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Sysctl {
    /// `overcommit_memory`: 0 heuristic, 1 always, 2 never (strict accounting).
    pub overcommit_memory: Option<u64>,
    /// `overcommit_ratio` / 100: the share of RAM counted in CommitLimit (when
    /// `overcommit_kbytes` is 0).
    pub overcommit_ratio: Option<f64>,
    /// `overcommit_kbytes`, in bytes.
    pub overcommit_bytes: Option<u64>,
    /// `panic_on_oom`.
    pub panic_on_oom: Option<u64>,
    /// `swappiness`.
    pub swappiness: Option<u64>,
}

fn read(r: &mut Reader) -> Result<Sysctl, Reason> {
    let vm = r.source.procfs().join("sys/vm");
    r.source.feature(&vm)?;
    let mut n = |file: &str| r.number(&vm.join(file));
    Ok(Sysctl {
        overcommit_memory: n("overcommit_memory"),
        overcommit_ratio: n("overcommit_ratio").map(|pct| pct as f64 / 100.0),
        overcommit_bytes: n("overcommit_kbytes").and_then(|k| k.checked_mul(1024)),
        panic_on_oom: n("panic_on_oom"),
        swappiness: n("swappiness"),
    })
}

impl super::UnitReading for Sysctl {
    const COLLECTOR: crate::family::Collector = COLLECTOR;
}

impl Reading for Sysctl {
    fn families(&self) -> Vec<Family> {
        let u = |v: Option<u64>| v.map(Value::U);
        [
            (&VM_OVERCOMMIT_MEMORY, u(self.overcommit_memory)),
            (&VM_OVERCOMMIT_RATIO, self.overcommit_ratio.map(Value::F)),
            (&VM_OVERCOMMIT_BYTES, u(self.overcommit_bytes)),
            (&VM_PANIC_ON_OOM, u(self.panic_on_oom)),
            (&VM_SWAPPINESS, u(self.swappiness)),
        ]
        .into_iter()
        .filter_map(|(m, v)| Family::single(m, v))
        .collect()
    }
}

pub(crate) const VM_OVERCOMMIT_MEMORY: Metric = crate::family::metric!(
    membloat "vm_overcommit_memory",
    Gauge,
    None,
    [],
    SECTION,
    "/proc/sys/vm",
    "vm.overcommit_memory: 0 heuristic, 1 always overcommit, 2 strict (CommitLimit enforced).",
);

pub(crate) const VM_OVERCOMMIT_RATIO: Metric = crate::family::metric!(
    membloat "vm_overcommit",
    Gauge,
    Ratio,
    [],
    SECTION,
    "/proc/sys/vm",
    "vm.overcommit_ratio as a share of RAM counted in CommitLimit (used when vm.overcommit_kbytes is 0).",
);

pub(crate) const VM_OVERCOMMIT_BYTES: Metric = crate::family::metric!(
    membloat "vm_overcommit",
    Gauge,
    Bytes,
    [],
    SECTION,
    "/proc/sys/vm",
    "vm.overcommit_kbytes: fixed RAM counted in CommitLimit instead of the ratio when not 0.",
);

pub(crate) const VM_PANIC_ON_OOM: Metric = crate::family::metric!(
    membloat "vm_panic_on_oom",
    Gauge,
    None,
    [],
    SECTION,
    "/proc/sys/vm",
    "vm.panic_on_oom: 0 kill a process, 1 or 2 panic the kernel on out-of-memory.",
);

pub(crate) const VM_SWAPPINESS: Metric = crate::family::metric!(
    membloat "vm_swappiness",
    Gauge,
    None,
    [],
    SECTION,
    "/proc/sys/vm",
    "vm.swappiness: preference for swapping anonymous memory over dropping page cache (0-200).",
);
