//! What the model derives, as families in the section of the unit each belongs to: the
//! exposition places them among the unit's own (`expose::encode_section`). A collector
//! the model derives a figure from adds its row to its unit's rows and its family here.

use super::Snapshot;
use crate::family::{Family, Value as Num};
use crate::units::{cgroup, meminfo, pressure, thp, vmstat};

/// The readers whose held memory is a series of its own (every one but glibc's, whose free
/// chunks are the rest of the measured figure), in the order of their samples.
pub(crate) fn held_by() -> impl Iterator<Item = &'static str> {
    use crate::collect::heap::reads::Reader;
    crate::collect::heap::readers::NAMES
        .iter()
        .copied()
        .filter(|&r| r != crate::collect::heap::Glibc::NAME)
}

fn u(v: Option<u64>) -> Option<Num> {
    v.map(Num::U)
}

/// The families the model derives, with the unit whose section they are exposed in: the
/// commit ratio and headroom and the latest OOM kill (meminfo's, though the kill is dated
/// by vmstat's counter), THP regrowth (thp), the share of time stalled (pressure), and
/// what each cgroup's processes hoard and hold (cgroup).
pub(super) fn derived(s: &Snapshot) -> Vec<(&'static str, Family)> {
    let sig = &s.signals;
    let flag = |b: Option<bool>| b.map(|b| Num::U(b as u64));
    let mut out: Vec<(&'static str, Family)> = [
        (
            "meminfo",
            &meminfo::COMMIT_RATIO,
            sig.commit_ratio.map(Num::F),
        ),
        (
            "meminfo",
            &meminfo::COMMIT_LIMIT_REACHED,
            flag(sig.commit_limit_reached),
        ),
        (
            "meminfo",
            &vmstat::LAST_OOM_KILL_TIMESTAMP_SECONDS,
            sig.last_oom_kill_unix_seconds.map(Num::F),
        ),
        (
            "meminfo",
            &meminfo::COMMIT_HEADROOM_BYTES,
            sig.commit_headroom_bytes.map(Num::I),
        ),
        ("thp", &thp::THP_REGROWTH_RISK, flag(sig.thp_regrowth_risk)),
        ("thp", &thp::THP_HIDDEN_BYTES, u(sig.thp_hidden_bytes)),
        (
            "pressure",
            &pressure::PRESSURE_MEMORY_WAITING_RATIO,
            sig.pressure_waiting_ratio.map(Num::F),
        ),
        (
            "pressure",
            &pressure::PRESSURE_MEMORY_STALLED_RATIO,
            sig.pressure_stalled_ratio.map(Num::F),
        ),
    ]
    .into_iter()
    .filter_map(|(unit, m, v)| Some((unit, Family::single(m, v)?)))
    .collect();
    // Hoarding measured in a cgroup's processes: what their allocators would give back of
    // what counts against its limit; and the runtimes' held heap.
    if let Some(cgroups) = s.host.get::<cgroup::Cgroups>() {
        let mut hoarded = Family::new(&cgroup::CGROUP_HOARDED_BYTES);
        let mut held = Family::new(&cgroup::CGROUP_RUNTIME_HELD_BYTES);
        for (path, _) in &cgroups.0 {
            if let Some(bytes) = s.cgroup_hoarded_bytes.get(path) {
                hoarded.push(vec![("cgroup", path.clone())], Num::U(*bytes));
            }
            for runtime in held_by() {
                if let Some(bytes) = s.cgroup_runtime_held_bytes.get(&(path.clone(), runtime)) {
                    let labels = vec![("cgroup", path.clone()), ("runtime", runtime.to_string())];
                    held.push(labels, Num::U(*bytes));
                }
            }
        }
        out.extend([("cgroup", hoarded), ("cgroup", held)]);
    }
    out
}
