//! The findings: what is worth acting on, read from the signals with the thresholds the
//! metrics and alerts use (`model::signals`), each with its evidence and remedy.

use super::remedy::{self, Remedy};
use super::{available_ratio, frees, size, subject, Finding, HostState};
use crate::attach::Live;
use crate::heap::list::{self, Measurement};
use crate::heap::runtime::Runtime;
use crate::heap::shape::Share;
use crate::heap::words;
use crate::model::derive::{ProcessReport, Snapshot};
use crate::model::signals::{self, Method};

/// What a finding's bytes are of (see [`Finding::bytes_of`]), by its kind.
pub(super) fn bytes_of(kind: &str, bytes: u64) -> &'static str {
    match kind {
        _ if bytes == 0 => "none",
        "commit_limit" | "commit_overrun" | "untouched_commit" => "commit",
        "arenas" => "address_space",
        _ => "ram",
    }
}

fn host_finding(kind: &'static str, bytes: u64, evidence: String, remedy: &str) -> Finding {
    Finding {
        kind,
        process: None,
        bytes,
        bytes_of: bytes_of(kind, bytes),
        certainty: "observed",
        evidence,
        remedy: remedy.into(),
        cost: None,
        now: None,
        now_gives_back_bytes: None,
        next_start: None,
    }
}

pub(super) fn host_findings(h: &HostState, s: &Snapshot) -> Vec<Finding> {
    let mut out = Vec::new();
    if let (Some(ratio), Some(avail), Some(total)) = (
        available_ratio(h),
        h.memory_available_bytes,
        h.memory_total_bytes,
    ) {
        if ratio < signals::LOW_MEMORY_RATIO {
            out.push(host_finding(
                "low_memory",
                total - avail.min(total),
                format!("{} available of {} ({:.0} %)", size(avail), size(total), ratio * 100.0),
                "free memory from the findings below, or add memory or swap; the OOM killer takes the first process of the OOM order when it runs out",
            ));
        }
    }
    if let (Some(c), Some(l), Some(mode)) =
        (h.committed_bytes, h.commit_limit_bytes, h.overcommit_mode)
    {
        if mode == 2 && c as f64 > signals::COMMIT_NEAR_LIMIT_RATIO * l as f64 {
            out.push(host_finding(
                "commit_limit",
                c.saturating_sub(l),
                format!("Committed_AS {} of CommitLimit {} in overcommit mode 2: allocations fail at the limit", size(c), size(l)),
                "raise vm.overcommit_ratio or vm.overcommit_kbytes, add swap, or release the untouched commit listed below",
            ));
        } else if mode != 2 && c > l {
            out.push(host_finding(
                "commit_overrun",
                c - l,
                format!("Committed_AS {} exceeds CommitLimit {} (overcommit mode {mode}: not enforced)", size(c), size(l)),
                "nothing now; do not switch this host to vm.overcommit_memory=2 without raising vm.overcommit_ratio first: every new allocation would fail",
            ));
        }
    }
    // The host-wide finding only when THP is `always`: in `madvise` mode only programs
    // that asked for huge pages regrow, and their own regrowth findings name them.
    let always = h.thp_enabled.as_deref() == Some("always");
    if always && s.signals.thp_regrowth_risk == Some(true) {
        out.push(host_finding(
            "thp_regrowth_risk",
            0,
            format!(
                "THP enabled=always with khugepaged/max_ptes_none={} (its most): memory any process releases with MADV_DONTNEED can be collapsed back into huge pages",
                h.khugepaged_max_ptes_none.unwrap_or(511)
            ),
            "echo 0 > /sys/kernel/mm/transparent_hugepage/khugepaged/max_ptes_none (or 64), or echo madvise > /sys/kernel/mm/transparent_hugepage/enabled",
        ));
    }
    let total = h.memory_total_bytes.unwrap_or(u64::MAX) as f64;
    if let Some(hidden) = h
        .thp_hidden_bytes
        .filter(|&b| b as f64 > signals::THP_HIDDEN_MAX_SHARE * total)
    {
        out.push(host_finding(
            "hidden_thp",
            hidden,
            format!("{} in partially mapped huge pages (nr_anon_partially_mapped): in no RSS and not in MemFree", size(hidden)),
            "it returns when the deferred split shrinker runs under memory pressure; khugepaged/max_ptes_none=0 avoids creating more",
        ));
    }
    if let Some(w) = h
        .pressure_stalled_ratio
        .filter(|&w| w > signals::PRESSURE_STALLED_RATIO)
    {
        out.push(host_finding(
            "memory_pressure",
            0,
            format!("every task stalled on memory {:.0} % of the time over the last interval (PSI full)", w * 100.0),
            "free memory from the findings below; systemd-oomd and oomd act on this signal",
        ));
    }
    if let Some(t) = s.signals.last_oom_kill_unix_seconds {
        out.push(host_finding(
            "oom_kill",
            0,
            format!(
                "the kernel killed a process for memory (vmstat oom_kill rose) at Unix time {t:.0}"
            ),
            "journalctl -k | grep -i 'out of memory' names it; then the findings below",
        ));
    }
    out
}

#[allow(
    clippy::too_many_lines,
    reason = "one finding per signal, each a few lines, in the order they are shown"
)]
pub(super) fn process_findings(
    p: &ProcessReport,
    low_memory: bool,
    in_depth: bool,
    live: &Live,
    out: &mut Vec<Finding>,
) {
    let sig = &p.signals;
    let id = p.identity.as_ref();
    let allocator = id.map(|i| i.allocator);
    let runtime = id.map_or(Runtime::Native, |i| i.runtime);
    let pid = p.sample.pid;
    // A heap that could not be measured is a finding where it could hold much back, or
    // where it was asked about; else coverage tells it.
    let tell_unmeasured = in_depth
        || p.sample.status.vm_rss_bytes.unwrap_or(0) >= super::report::UNMEASURED_FINDING_RSS_BYTES;
    let mut push = |kind, bytes, certainty, evidence: String, remedy: Remedy| {
        out.push(Finding {
            kind,
            process: Some(subject(p)),
            bytes,
            bytes_of: bytes_of(kind, bytes),
            certainty,
            evidence,
            remedy: remedy.what,
            cost: remedy.cost.map(|c| c.into_owned()),
            now: remedy.now,
            now_gives_back_bytes: remedy.now_gives_back_bytes,
            next_start: remedy.next_start,
        })
    };
    // The held heap of a runtime beside the allocator (a JVM's Java heap, a Go program's
    // free heap, CPython's arenas) is a finding of its own, in its reader's words; the
    // rest of the measured figure is the allocator's. Which it is, the reader declares
    // (its `Share`).
    let readings = sig.reading.as_deref().map_or(&[][..], |r| &r.readings[..]);
    let subject = words::Subject {
        pid,
        version: id.map_or("", |i| i.version.as_str()),
    };
    let runtime_held = sig
        .runtime_held_bytes
        .filter(|_| {
            let share = sig.runtime_held_by.and_then(list::share_of);
            matches!(share, Some(Share::Runtime { .. }))
        })
        .filter(|&b| b >= signals::HOARD_MIN_MEASURED_BYTES && !sig.hoard_pending);
    if let Some(held) = runtime_held {
        let said = readings
            .iter()
            .filter(|r| Some(r.reader()) == sig.runtime_held_by)
            .find_map(|r| r.said(held, subject));
        if let Some(said) = said {
            let remedy = said.remedy.unwrap_or_default();
            push(said.kind, held, "measured", said.evidence, remedy);
        }
    }
    // A reader that could not measure the process says why, where that is a finding.
    for gap in readings.iter().filter_map(Measurement::gap) {
        if tell_unmeasured {
            let fix = Remedy::advice(gap.fix, None);
            push(gap.kind, 0, "observed", gap.evidence.to_string(), fix);
        }
    }
    let native = sig
        .hoarded_bytes
        .map(|h| h.saturating_sub(runtime_held.unwrap_or(0)));
    if let Some(hoarded) = native.filter(|&b| b > 0) {
        let measured_glibc = sig
            .heap
            .as_deref()
            .filter(|_| sig.hoard_method == Some(Method::Measured));
        let said = sig.allocator_said(allocator, hoarded, subject);
        let (certainty, evidence) = match (sig.hoard_method, said) {
            (Some(Method::Measured), Some(said)) => ("measured", said.evidence),
            _ => (
                "suspected",
                format!(
                    "idle, RSS at {:.0} % of its peak, heap Rss {} mostly of its anonymous memory; not walked, so live data looks the same",
                    sig.retained_peak_ratio.unwrap_or(0.0) * 100.0,
                    size(sig.heap_resident_bytes.unwrap_or(0))
                ),
            ),
        };
        push(
            "hoarding",
            hoarded,
            certainty,
            evidence,
            remedy::hoarding(allocator, runtime, measured_glibc, pid, live),
        );
    }
    if sig.arena_at_ceiling == Some(true) {
        let reserved = sig.arena_reserved_bytes.unwrap_or(0);
        let evidence = format!(
            "{} glibc arena heaps reserve {} of address space, at glibc's ceiling of 8 arenas per CPU{}",
            sig.arena_heaps.unwrap_or(0),
            size(reserved),
            sig.heap.as_ref().map_or(String::new(), |h| format!("; {} free in them", size(h.arenas.free_bytes)))
        );
        push(
            "arenas",
            reserved,
            "observed",
            evidence,
            remedy::arenas(runtime),
        );
    }
    if sig.regrown_since_trough_bytes > 0 {
        let evidence = format!(
            "{} of anonymous memory grew back in huge pages while the process was idle and its mappings unchanged (khugepaged collapse)",
            size(sig.regrown_since_trough_bytes)
        );
        push(
            "regrowth",
            sig.regrown_since_trough_bytes,
            "observed",
            evidence,
            remedy::regrowth(runtime),
        );
    }
    // Pages given back with MADV_FREE that no reader's held figure above counts.
    let lazy = p.sample.rollup.and_then(|r| r.lazy_free_bytes).unwrap_or(0);
    let lazy = crate::model::sheet::unheld(lazy, sig.runtime_held_by.zip(sig.runtime_held_bytes));
    if lazy >= signals::HOARD_MIN_MEASURED_BYTES {
        let evidence = format!(
            "{} of its RSS was freed with MADV_FREE (LazyFree in smaps_rollup): counted in RSS and in its cgroup's usage, yet the kernel takes it back without swap as soon as memory is short",
            size(lazy)
        );
        push(
            "lazy_free",
            lazy,
            "observed",
            evidence,
            remedy::lazy_free().into(),
        );
    }
    if let Some(untouched) = sig
        .untouched_commit_bytes
        .filter(|&b| b >= signals::UNTOUCHED_COMMIT_MIN_BYTES)
    {
        let evidence = format!(
            "{} of commit charge not yet in RAM or swap: it can become RSS without another allocation, and oom_score does not count it",
            size(untouched)
        );
        push(
            "untouched_commit",
            untouched,
            "observed",
            evidence,
            remedy::untouched_commit(runtime).into(),
        );
    }
    let score = p.sample.oom_score.unwrap_or(0);
    let adj = p.sample.oom_score_adj.unwrap_or(0);
    let share = signals::oom_memory_share(score, adj);
    if p.oom_rank <= signals::OOM_LIKELY_VICTIM_RANK
        && low_memory
        && share >= signals::OOM_LIKELY_VICTIM_SHARE
    {
        let evidence = format!(
            "number {} in the OOM killer's order (oom_score {score}, oom_score_adj {adj}: {:.0} % of RAM and swap) while memory is low; killing it frees {}",
            p.oom_rank,
            share * 100.0,
            size(frees(p))
        );
        push("oom_victim", frees(p), "observed", evidence, ("protect it with a lower oom_score_adj (systemd OOMScoreAdjust=) if it must live, or free memory from the findings above".to_string(), None).into());
    }
}
