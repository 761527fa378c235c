//! Pure derivation: (state, sample) -> (state, snapshot). The snapshot is what scrapes
//! and `explain` read; the state is what the next scan needs (`state.rs`).

use std::collections::{BTreeMap, HashMap};
use std::time::UNIX_EPOCH;

use crate::collect::{ProcessSample, Sample};
use crate::family::Collector;
use crate::heap::shape::HeapReader as _;
use crate::heap::Glibc;
use crate::model::groups::groups;
use crate::model::kills::Lookup;
use crate::model::signals::{self, Method, ProcState, Signals};
use crate::model::state::State;
use crate::parse::{meminfo::Meminfo, pressure::Pressure, vmstat::Vmstat};
use crate::source::Reason;
use crate::units::kmsg::OomKills;
use crate::units::{sysctl::Sysctl, thp::Thp};

pub use crate::model::snapshot::{ProcessReport, Snapshot, SystemSignals};

/// Options of derivation.
#[derive(Debug, Clone, Copy)]
pub struct DeriveOptions {
    pub top_k: usize,
    /// Groups kept at most; the smaller ones are summed into [`OTHER_GROUP`](crate::model::groups::OTHER_GROUP).
    pub max_groups: usize,
    /// A heap reading older than this is not served (`None`: no bound).
    pub heap_fresh_seconds: Option<f64>,
}

#[allow(
    clippy::too_many_lines,
    reason = "the whole derivation of a scan, step by step"
)]
pub fn derive(state: State, sample: Sample, opts: DeriveOptions) -> (State, Snapshot) {
    let prev = state;
    let mut errors = prev.errors;
    // Per-process reads fail routinely (processes exit, other users' files are denied), so
    // their counters start at 0: rate() and alerts then work from the first scrape.
    if sample
        .collectors
        .iter()
        .any(|c| c.name == Collector::Processes)
    {
        for reason in Reason::ALL {
            errors.entry((Collector::Processes, reason)).or_insert(0);
        }
    }
    for (key, n) in &sample.errors {
        *errors.entry(*key).or_insert(0) += n;
    }
    let processes_scanned = sample
        .collectors
        .iter()
        .any(|c| c.name == Collector::Processes && c.success)
        .then_some(sample.processes.len() as u64);
    let now = sample
        .taken_at
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map(|d| d.as_secs_f64());
    // On the monotonic clock: a step of the wall clock between two scans must not make
    // an interval look an hour long (every process idle, PSI ratios near 0) or negative.
    // Samples made without it (tests, benchmarks) fall back to the wall clock.
    let elapsed = match (
        prev.last_scan_started,
        sample.started,
        prev.last_scan_unix_seconds,
        now,
    ) {
        (Some(a), Some(b), _, _) => b.saturating_duration_since(a).as_secs_f64(),
        (_, _, Some(a), Some(b)) if b > a => b - a,
        _ => 0.0,
    };

    // Per-process state and signals, updated in place: the states of processes this scan
    // did not see stay until the kills are joined (a victim is gone by now), then go.
    let scan = prev.scans + 1;
    let mut states = prev.processes;
    let mut sigs = Vec::with_capacity(sample.processes.len());
    let mut cgroup_hoarded_bytes = BTreeMap::new();
    let mut cgroup_runtime_held_bytes = BTreeMap::new();
    // What each reader measured as held, over every process: the sheet's held rows, each
    // as (anonymous, shared memory) bytes.
    let mut host_held_bytes: BTreeMap<&'static str, crate::model::sheet::Held> = BTreeMap::new();
    let mut host_lazy_free = crate::model::sheet::LazyFree::default();
    let mut cgroup_lazy_free_bytes = BTreeMap::new();
    let mut cgroup_held: BTreeMap<String, BTreeMap<&'static str, crate::model::sheet::Held>> =
        BTreeMap::new();
    for p in &sample.processes {
        let prev_state = states.get(&p.key());
        let fresh = prev_state
            .and_then(|s| signals::without_stale_heap(s, p, now, opts.heap_fresh_seconds));
        let (mut state, sig) = signals::advance(
            fresh.as_ref().or(prev_state),
            p,
            elapsed,
            sample.online_cpus,
            sample.cpu_tick_seconds,
        );
        state.scan = scan;
        if let (Some(Method::Measured), Some(bytes), Some(cgroup)) = (
            sig.hoard_method,
            sig.hoarded_bytes.filter(|&b| b > 0),
            state.heap().and_then(|h| h.memory_cgroup.as_ref()),
        ) {
            let sum = cgroup_hoarded_bytes.entry(cgroup.clone()).or_insert(0u64);
            *sum = u64::saturating_add(*sum, bytes);
        }
        if let (Some(held), Some(runtime), Some(cgroup)) = (
            sig.runtime_held_bytes,
            sig.runtime_held_by,
            state.heap().and_then(|h| h.memory_cgroup.as_ref()),
        ) {
            let key = (cgroup.clone(), runtime);
            let sum = cgroup_runtime_held_bytes.entry(key).or_insert(0u64);
            *sum = u64::saturating_add(*sum, held);
        }
        // A process's held bytes are in its anonymous memory as far as it goes (glibc's
        // first), the rest in its shared memory (a ZGC heap is a memfd).
        let glibc = sig.heap.as_ref().map(|h| h.reclaimable_bytes());
        let runtime = sig.runtime_held_by.zip(sig.runtime_held_bytes);
        let lazy = p.rollup.and_then(|r| r.lazy_free_bytes).unwrap_or(0);
        host_lazy_free.add(lazy, runtime);
        let cgroup = state.heap().and_then(|h| h.memory_cgroup.as_ref());
        if let (true, Some(cgroup)) = (lazy > 0, cgroup) {
            let sum = cgroup_lazy_free_bytes.entry(cgroup.clone()).or_default();
            crate::model::sheet::LazyFree::add(sum, lazy, runtime);
        }
        let mut anon_left = p.status.rss_anon_bytes.unwrap_or(0);
        for (reader, bytes) in glibc.map(|b| (Glibc::NAME, b)).into_iter().chain(runtime) {
            let anon = bytes.min(anon_left);
            anon_left -= anon;
            host_held_bytes
                .entry(reader)
                .or_default()
                .add(anon, bytes - anon);
            if let Some(cgroup) = cgroup {
                let by_reader = cgroup_held.entry(cgroup.clone()).or_default();
                by_reader.entry(reader).or_default().add(anon, bytes - anon);
            }
        }
        states.insert(p.key(), state);
        sigs.push(sig);
    }

    let host = &sample.host;
    let mut system = system_signals(
        host.get::<Meminfo>(),
        host.get::<Thp>(),
        host.get::<Sysctl>(),
    );
    let pressure = host.get::<Pressure>().cloned();
    if let (Some(before), Some(now_p)) = (prev.pressure, pressure) {
        let rate = |a: Option<f64>, b: Option<f64>| match (a, b) {
            (Some(a), Some(b)) if b >= a && elapsed > 0.0 => Some(((b - a) / elapsed).min(1.0)),
            _ => None,
        };
        system.pressure_waiting_ratio = rate(before.some_seconds, now_p.some_seconds);
        system.pressure_stalled_ratio = rate(before.full_seconds, now_p.full_seconds);
    }
    let oom_kills = host.get::<Vmstat>().and_then(|v| v.get("oom_kill"));
    system.last_oom_kill_unix_seconds = match (prev.oom_kills, oom_kills) {
        (Some(a), Some(b)) if b > a => now,
        _ => prev.last_oom_kill_unix_seconds,
    };

    let mut kills = prev.kills;
    let kmsg_ran = sample
        .collectors
        .iter()
        .any(|c| c.name == crate::units::kmsg::COLLECTOR);
    if let Some(OomKills(new)) = sample.host.get::<OomKills>().cloned() {
        let known = Lookup {
            states: &states,
            scan,
            now_unix_seconds: now,
            before_unix_seconds: prev.last_scan_unix_seconds,
            tick_seconds: sample.cpu_tick_seconds,
        };
        kills.add(new, &known, sample.boot_time_seconds, opts.max_groups);
    }
    states.retain(|_, s| s.scan == scan);

    let next = State {
        scans: scan,
        last_scan_unix_seconds: now,
        last_scan_started: sample.started,
        errors,
        deep_cpu_seconds_total: prev.deep_cpu_seconds_total
            + sample.deep.map_or(0.0, |d| d.cpu_seconds),
        reads_total: prev
            .reads_total
            .plus(&sample.deep.map(|d| d.reads).unwrap_or_default()),
        heap_walk_cpu_seconds_total: prev.heap_walk_cpu_seconds_total
            + sample.deep.map_or(0.0, |d| d.heap_walk_cpu_seconds),
        pressure,
        oom_kills,
        last_oom_kill_unix_seconds: system.last_oom_kill_unix_seconds,
        processes: states,
        kills,
    };
    let (groups, groups_folded) = groups(&sample.processes, &sigs, opts.max_groups);
    let mut snapshot = Snapshot {
        scans: next.scans,
        last_scan_unix_seconds: now,
        scan_duration_seconds: Some(sample.duration_seconds),
        errors: next.errors.clone(),
        signals: system,
        groups,
        groups_folded,
        top: top_k(&sample.processes, &sigs, &next.processes, opts.top_k),
        processes_scanned,
        deep_cpu_seconds_total: next.deep_cpu_seconds_total,
        reads_total: next.reads_total,
        heap_pending_processes: sigs.iter().filter(|s| s.hoard_pending).count() as u64,
        heap_walk_cpu_seconds_total: next.heap_walk_cpu_seconds_total,
        deep: sample.deep,
        reads: sample.reads,
        own: sample.own,
        cgroup_hoarded_bytes,
        cgroup_runtime_held_bytes,
        cgroup_lazy_free_bytes,
        cgroup_held,
        sheet: host.get::<Meminfo>().and_then(|m| {
            let page = crate::source::own::page_size();
            crate::model::sheet::host(m, &host_held_bytes, host_lazy_free, page)
        }),
        kills: kmsg_ran.then(|| next.kills.clone()),
        collectors: sample.collectors,
        host: sample.host,
        derived: Vec::new(),
    };
    snapshot.derived = families::derived(&snapshot);
    (next, snapshot)
}

fn system_signals(
    m: Option<&Meminfo>,
    thp: Option<&Thp>,
    sysctl: Option<&Sysctl>,
) -> SystemSignals {
    let committed = m.and_then(|m| m.committed_as_bytes);
    let limit = m.and_then(|m| m.commit_limit_bytes);
    let (commit_ratio, commit_headroom_bytes) = match (committed, limit) {
        (Some(c), Some(l)) => (
            (l > 0).then(|| c as f64 / l as f64),
            i64::try_from(l as i128 - c as i128).ok(),
        ),
        _ => (None, None),
    };
    let thp_hidden_bytes = thp.and_then(|t| {
        let mut found = false;
        let mut total = 0u64;
        for size in &t.sizes {
            if let Some((_, n)) = size
                .stats
                .iter()
                .find(|(k, _)| k == "nr_anon_partially_mapped")
            {
                found = true;
                total = total.saturating_add(n.saturating_mul(size.size_bytes));
            }
        }
        found.then_some(total)
    });
    let mode = sysctl.and_then(|s| s.overcommit_memory);
    let commit_limit_reached = match (mode, committed, limit) {
        (Some(mode), Some(c), Some(l)) => Some(mode == 2 && c >= l),
        _ => None,
    };
    let thp_regrowth_risk = thp.and_then(|t| {
        let usable = t.enabled.as_deref()? != "never";
        Some(usable && t.khugepaged.max_ptes_none? >= t.max_ptes_none_ceiling())
    });
    SystemSignals {
        commit_ratio,
        commit_headroom_bytes,
        thp_hidden_bytes,
        commit_limit_reached,
        thp_regrowth_risk,
        ..SystemSignals::default()
    }
}

/// The union of the K largest by RSS, the K with the highest oom_score, and the K with the
/// most suspected hoarded and regrown bytes (those above zero); ties go to the lower pid so
/// the selection is stable between scans.
fn top_k(
    processes: &[ProcessSample],
    sigs: &[Signals],
    states: &HashMap<(u32, u64), ProcState>,
    k: usize,
) -> Vec<ProcessReport> {
    // The OOM killer's order: highest oom_score first, larger RSS first among equals.
    let mut order: Vec<usize> = (0..processes.len()).collect();
    let rss = |i: usize| processes[i].status.vm_rss_bytes.unwrap_or(0);
    order.sort_by(|&a, &b| {
        let score = |i: usize| processes[i].oom_score.unwrap_or(0);
        score(b)
            .cmp(&score(a))
            .then(rss(b).cmp(&rss(a)))
            .then(processes[a].pid.cmp(&processes[b].pid))
    });
    let mut rank = vec![0u64; processes.len()];
    for (r, &i) in order.iter().enumerate() {
        rank[i] = r as u64 + 1;
    }
    if k == 0 {
        return Vec::new();
    }
    let mut chosen: Vec<usize> = order.iter().take(k).copied().collect();
    let keys: [&dyn Fn(usize) -> u64; 3] = [&rss, &|i| sigs[i].hoarded_bytes.unwrap_or(0), &|i| {
        sigs[i].regrown_since_trough_bytes
    }];
    for (n, key) in keys.iter().enumerate() {
        let mut by: Vec<usize> = (0..processes.len())
            .filter(|&i| n == 0 || key(i) > 0)
            .collect();
        by.sort_by(|&a, &b| {
            key(b)
                .cmp(&key(a))
                .then(processes[a].pid.cmp(&processes[b].pid))
        });
        chosen.extend(by.into_iter().take(k));
    }
    chosen.sort_unstable_by_key(|&i| processes[i].pid);
    chosen.dedup();
    chosen
        .into_iter()
        .map(|i| ProcessReport {
            sample: processes[i].clone(),
            signals: sigs[i].clone(),
            oom_rank: rank[i],
            identity: states
                .get(&processes[i].key())
                .and_then(ProcState::heap)
                .map(|h| h.identity.clone()),
        })
        .collect()
}

mod families;

#[cfg(test)]
mod tests;
#[cfg(test)]
pub(crate) mod tests_support;
