//! What the model derives, as families in the section of the unit each belongs to: the
//! exposition places them among the unit's own (`expose::encode_section`). A collector
//! the model derives a figure from adds its row to its unit's rows and its family here.

use super::Snapshot;
use crate::family::{Family, Value as Num};
use crate::units::kmsg::{
    OOM_KILLS_TOTAL, OOM_LAST_VICTIM_INFO, OOM_LAST_VICTIM_KILLED_BYTES,
    OOM_LAST_VICTIM_MEASURED_BYTES, OOM_LAST_VICTIM_MEASURED_TIMESTAMP_SECONDS,
    OOM_LAST_VICTIM_TIMESTAMP_SECONDS,
};
use crate::units::{cgroup, meminfo, pressure, thp, vmstat};

/// The readers whose held memory is a series of its own (every one but glibc's, whose free
/// chunks are the rest of the measured figure), in the order of their samples.
pub(crate) fn held_by() -> impl Iterator<Item = &'static str> {
    use crate::heap::shape::HeapReader;
    crate::heap::list::NAMES
        .iter()
        .copied()
        .filter(|&r| r != crate::heap::Glibc::NAME)
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
    if let Some(sheet) = &s.sheet {
        let mut f = Family::new(&meminfo::HOST_MEMORY_BYTES);
        for (row, bytes) in &sheet.rows {
            f.push(vec![("row", row.clone())], Num::I(*bytes));
        }
        out.push(("meminfo", f));
    }
    // Hoarding measured in a cgroup's processes: what their allocators would give back of
    // what counts against its limit; and the runtimes' held heap.
    if let Some(cgroups) = s.host.get::<cgroup::Cgroups>() {
        let mut hoarded = Family::new(&cgroup::CGROUP_HOARDED_BYTES);
        let mut held = Family::new(&cgroup::CGROUP_RUNTIME_HELD_BYTES);
        let mut lazy = Family::new(&cgroup::CGROUP_LAZY_FREE_BYTES);
        for (path, stat) in &cgroups.0 {
            // At most what the kernel charges the cgroup: its processes' figures are each
            // checked against their own resident memory, where shared pages count whole.
            let most = stat.usage_bytes.unwrap_or(u64::MAX);
            if let Some(bytes) = s.cgroup_hoarded_bytes.get(path) {
                hoarded.push(vec![("cgroup", path.clone())], Num::U((*bytes).min(most)));
            }
            for runtime in held_by() {
                if let Some(bytes) = s.cgroup_runtime_held_bytes.get(&(path.clone(), runtime)) {
                    let labels = vec![("cgroup", path.clone()), ("runtime", runtime.to_string())];
                    held.push(labels, Num::U((*bytes).min(most)));
                }
            }
            if let Some(l) = s.cgroup_lazy_free_bytes.get(path) {
                lazy.push(vec![("cgroup", path.clone())], Num::U(l.all.min(most)));
            }
        }
        // Each container's usage as a balance sheet, with what its processes hold.
        let mut sheets = Family::new(&cgroup::CGROUP_MEMORY_BYTES);
        let none = std::collections::BTreeMap::new();
        for (path, stat) in &cgroups.0 {
            let held = s.cgroup_held.get(path).unwrap_or(&none);
            let lazy = s
                .cgroup_lazy_free_bytes
                .get(path)
                .copied()
                .unwrap_or_default();
            for (row, bytes) in crate::model::sheet::cgroup(stat, held, lazy)
                .map(|sheet| sheet.rows)
                .unwrap_or_default()
            {
                sheets.push(vec![("cgroup", path.clone()), ("row", row)], Num::I(bytes));
            }
        }
        out.extend([
            ("cgroup", hoarded),
            ("cgroup", held),
            ("cgroup", lazy),
            ("cgroup", sheets),
        ]);
    }
    out.extend(kills(s).into_iter().map(|f| ("kmsg", f)));
    out
}

/// The kmsg collector's families, joined with what was measured: OOM kills by constraint
/// and group since start, and the latest victim with its memory as the kernel counted it
/// and as the exporter had measured it. None while the collector did not run.
fn kills(s: &Snapshot) -> Vec<Family> {
    let Some(kills) = &s.kills else {
        return Vec::new();
    };
    let mut total = Family::new(&OOM_KILLS_TOTAL);
    for ((constraint, group), n) in &kills.total {
        let labels = vec![
            ("constraint", constraint.to_string()),
            ("group", group.clone()),
        ];
        total.push(labels, Num::U(*n));
    }
    let mut out = vec![total];
    let Some(v) = kills.recent.back() else {
        return out;
    };
    let identity = v.identity.as_ref();
    let mut info = Family::new(&OOM_LAST_VICTIM_INFO);
    info.push(
        vec![
            ("pid", v.kill.kill.pid.to_string()),
            ("comm", v.kill.kill.comm.clone()),
            (
                "constraint",
                v.kill
                    .constraint
                    .map_or("unknown", |c| c.as_str())
                    .to_string(),
            ),
            ("group", v.group.clone()),
            ("memory_cgroup", v.memory_cgroup.clone().unwrap_or_default()),
            (
                "allocator",
                identity.map_or("", |i| i.allocator.as_str()).to_string(),
            ),
            (
                "runtime",
                identity.map_or("", |i| i.runtime.as_str()).to_string(),
            ),
        ],
        Num::U(1),
    );
    out.push(info);
    out.extend(Family::single(
        &OOM_LAST_VICTIM_TIMESTAMP_SECONDS,
        v.unix_seconds.map(Num::F),
    ));
    let by_kind = |metric, kinds: &[(&'static str, Option<u64>)]| {
        let mut f = Family::new(metric);
        for &(kind, value) in kinds {
            if let Some(value) = value {
                f.push(vec![("kind", kind.to_string())], Num::U(value));
            }
        }
        f
    };
    out.push(by_kind(&OOM_LAST_VICTIM_KILLED_BYTES, &v.killed()));
    out.push(by_kind(&OOM_LAST_VICTIM_MEASURED_BYTES, &v.measured()));
    out.extend(Family::single(
        &OOM_LAST_VICTIM_MEASURED_TIMESTAMP_SECONDS,
        v.seen_unix_seconds.filter(|_| v.seen.is_some()).map(Num::F),
    ));
    out
}
