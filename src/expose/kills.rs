//! The kmsg collector's families: OOM kills by constraint and group, and the latest
//! victim with its memory as the kernel counted it and as the exporter had measured it.

use std::fmt;

use super::{Families, Labels, Num};
use crate::model::derive::Snapshot;
use crate::units::kmsg::{
    OOM_KILLS_TOTAL, OOM_LAST_VICTIM_INFO, OOM_LAST_VICTIM_KILLED_BYTES,
    OOM_LAST_VICTIM_MEASURED_BYTES, OOM_LAST_VICTIM_MEASURED_TIMESTAMP_SECONDS,
    OOM_LAST_VICTIM_TIMESTAMP_SECONDS,
};

pub(super) fn encode_kills(f: &mut Families, s: &Snapshot) -> fmt::Result {
    let Some(kills) = &s.kills else {
        return Ok(());
    };
    let totals: Vec<(Labels, Num)> = kills
        .total
        .iter()
        .map(|((constraint, group), n)| {
            (
                vec![("constraint", *constraint), ("group", group.as_str())],
                Num::U(*n),
            )
        })
        .collect();
    f.family(&OOM_KILLS_TOTAL, totals)?;
    let Some(v) = kills.recent.back() else {
        return Ok(());
    };
    let pid = v.kill.kill.pid.to_string();
    let identity = v.identity.as_ref();
    f.info(
        &OOM_LAST_VICTIM_INFO,
        vec![
            ("pid", pid.as_str()),
            ("comm", v.kill.kill.comm.as_str()),
            (
                "constraint",
                v.kill.constraint.map_or("unknown", |c| c.as_str()),
            ),
            ("group", v.group.as_str()),
            ("memory_cgroup", v.memory_cgroup.as_deref().unwrap_or("")),
            ("allocator", identity.map_or("", |i| i.allocator.as_str())),
            ("runtime", identity.map_or("", |i| i.runtime.as_str())),
        ],
    )?;
    f.single(
        &OOM_LAST_VICTIM_TIMESTAMP_SECONDS,
        v.unix_seconds.map(Num::F),
    )?;
    f.family(&OOM_LAST_VICTIM_KILLED_BYTES, rows(&v.killed()))?;
    f.family(&OOM_LAST_VICTIM_MEASURED_BYTES, rows(&v.measured()))?;
    f.single(
        &OOM_LAST_VICTIM_MEASURED_TIMESTAMP_SECONDS,
        v.seen_unix_seconds.filter(|_| v.seen.is_some()).map(Num::F),
    )
}

fn rows(kinds: &[(&'static str, Option<u64>)]) -> Vec<(Labels<'static>, Num)> {
    kinds
        .iter()
        .filter_map(|&(kind, v)| Some((vec![("kind", kind)], Num::U(v?))))
        .collect()
}
