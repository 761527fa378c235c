//! Groups: the sums over the processes of one group, and the cap on how many are
//! exported.

use std::collections::BTreeMap;

use crate::collect::ProcessSample;
use crate::model::signals::{Method, Signals};

/// The group that holds the processes of the groups past `--collector.processes.max-groups`.
pub(crate) const OTHER_GROUP: &str = "other";

/// Sums over the processes of one group. Sizes in bytes.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GroupStats {
    pub name: String,
    pub processes: u64,
    pub resident_bytes: u64,
    pub resident_peak_bytes: u64,
    pub virtual_bytes: u64,
    pub swap_bytes: u64,
    pub resident_anon_bytes: u64,
    pub resident_file_bytes: u64,
    pub resident_shmem_bytes: u64,
    pub pss_bytes: u64,
    pub anon_huge_bytes: u64,
    pub lazy_free_bytes: u64,
    pub threads: u64,
    pub oom_score_max: u64,
    /// Sums of the per-process signals over the processes that have them; hoarded bytes
    /// by how they were reached (see [`Method`]).
    pub hoarded_measured_bytes: u64,
    pub hoarded_suspected_bytes: u64,
    /// Free and resident free bytes in glibc heaps, over the processes the walk measured.
    pub heap_free_bytes: u64,
    pub heap_free_resident_bytes: u64,
    pub heap_reclaimable_bytes: u64,
    /// Processes whose heap the walk measured.
    pub heap_measured_processes: u64,
    pub regrown_since_trough_bytes: u64,
    pub untouched_commit_bytes: u64,
    pub arena_heaps: u64,
    pub arena_reserved_bytes: u64,
    /// Processes whose runtime's (or jemalloc's) held memory was measured, and its sum
    /// (part of the measured hoarded bytes), by reader in the order of `list::NAMES`.
    pub runtime_held: [(u64, u64); crate::heap::list::COUNT],
    /// A process with a measured figure whose Pss is not known: the sums are not capped.
    pub pss_unknown: bool,
    /// What the group is ranked by for `--collector.processes.max-groups`: each process's
    /// Pss (shared pages once), its RSS where its Pss is not known.
    pub rank_bytes: u64,
}

impl GroupStats {
    fn add(&mut self, p: &ProcessSample, sig: &Signals) {
        let hoarded = sig.hoarded_bytes.unwrap_or(0);
        let by_method = match sig.hoard_method {
            Some(Method::Measured) => &mut self.hoarded_measured_bytes,
            _ => &mut self.hoarded_suspected_bytes,
        };
        *by_method = by_method.saturating_add(hoarded);
        if let (Some(held), Some(by)) = (sig.runtime_held_bytes, sig.runtime_held_by) {
            let i = crate::heap::list::NAMES
                .iter()
                .position(|h| *h == by)
                .unwrap_or(0);
            let (n, bytes) = &mut self.runtime_held[i];
            *n += 1;
            *bytes = bytes.saturating_add(held);
        }
        if let Some(h) = &sig.heap {
            self.heap_measured_processes += 1;
            self.heap_free_bytes = self.heap_free_bytes.saturating_add(h.free_bytes());
            self.heap_free_resident_bytes = self
                .heap_free_resident_bytes
                .saturating_add(h.free_resident_bytes());
            self.heap_reclaimable_bytes = self
                .heap_reclaimable_bytes
                .saturating_add(h.reclaimable_bytes());
        }
        let s = &p.status;
        if sig.hoard_method == Some(Method::Measured)
            && p.rollup.and_then(|r| r.pss_bytes).is_none()
        {
            self.pss_unknown = true;
        }
        let r = p.rollup.unwrap_or_default();
        self.processes += 1;
        let rank = r.pss_bytes.or(s.vm_rss_bytes).unwrap_or(0);
        self.rank_bytes = self.rank_bytes.saturating_add(rank);
        for (sum, v) in [
            (
                &mut self.regrown_since_trough_bytes,
                Some(sig.regrown_since_trough_bytes),
            ),
            (&mut self.untouched_commit_bytes, sig.untouched_commit_bytes),
            (&mut self.arena_heaps, sig.arena_heaps),
            (&mut self.arena_reserved_bytes, sig.arena_reserved_bytes),
            (&mut self.resident_bytes, s.vm_rss_bytes),
            (&mut self.resident_peak_bytes, s.vm_hwm_bytes),
            (&mut self.virtual_bytes, s.vm_size_bytes),
            (&mut self.swap_bytes, s.vm_swap_bytes),
            (&mut self.resident_anon_bytes, s.rss_anon_bytes),
            (&mut self.resident_file_bytes, s.rss_file_bytes),
            (&mut self.resident_shmem_bytes, s.rss_shmem_bytes),
            (&mut self.pss_bytes, r.pss_bytes),
            (&mut self.anon_huge_bytes, r.anon_huge_pages_bytes),
            (&mut self.lazy_free_bytes, r.lazy_free_bytes),
            (&mut self.threads, s.threads),
        ] {
            *sum = sum.saturating_add(v.unwrap_or(0));
        }
        self.oom_score_max = self.oom_score_max.max(p.oom_score.unwrap_or(0));
    }

    /// The measured sums, at most the group's memory as the kernel counts it with shared
    /// pages once (its Pss): each process's figure is checked against its own resident
    /// memory, where a page it shares counts whole, so processes that share one memory
    /// could otherwise add it up once each.
    fn capped(mut self) -> GroupStats {
        if !self.pss_unknown {
            let most = self.pss_bytes;
            self.hoarded_measured_bytes = self.hoarded_measured_bytes.min(most);
            for (_, bytes) in &mut self.runtime_held {
                *bytes = (*bytes).min(most);
            }
        }
        self
    }
}

/// The groups in name order, at most `max` of them plus [`OTHER_GROUP`]: past the cap,
/// the largest by Pss are kept (ties to the lower name) and the others summed into it.
/// By Pss, not RSS: processes that share one memory (forked, or mapping one region) each
/// count it whole in their RSS, and so could push every real group out.
/// Returns how many were folded.
pub fn groups(processes: &[ProcessSample], sigs: &[Signals], max: usize) -> (Vec<GroupStats>, u64) {
    let all = sum_groups(processes, sigs, |name| name);
    if all.len() <= max {
        return (all.into_values().map(GroupStats::capped).collect(), 0);
    }
    let mut ranked: Vec<(&str, u64)> = all.iter().map(|(n, g)| (*n, g.rank_bytes)).collect();
    ranked.sort_unstable_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    let kept: std::collections::HashSet<&str> = ranked.iter().take(max).map(|r| r.0).collect();
    let folded = (all.len() - max) as u64;
    let capped = sum_groups(processes, sigs, |name| {
        if kept.contains(name) {
            name
        } else {
            OTHER_GROUP
        }
    });
    (
        capped.into_values().map(GroupStats::capped).collect(),
        folded,
    )
}

fn sum_groups<'a>(
    processes: &'a [ProcessSample],
    sigs: &[Signals],
    name_of: impl Fn(&'a str) -> &'a str,
) -> BTreeMap<&'a str, GroupStats> {
    let mut by_name: BTreeMap<&str, GroupStats> = BTreeMap::new();
    for (p, sig) in processes.iter().zip(sigs) {
        let Some(name) = p.group.as_deref() else {
            continue;
        };
        let name = name_of(name);
        by_name
            .entry(name)
            .or_insert_with(|| GroupStats {
                name: name.to_string(),
                ..GroupStats::default()
            })
            .add(p, sig);
    }
    by_name
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::groups;
    use crate::collect::ProcessSample;
    use crate::model::derive::tests_support::process;
    use crate::model::signals::{Method, Signals};
    use crate::parse::smaps_rollup::SmapsRollup;

    /// A process of group "postgres" whose measured hoarding is `hoarded` and Pss `pss`.
    fn shared(pid: u32, hoarded: u64, pss: Option<u64>) -> (ProcessSample, Signals) {
        let mut p = process(pid, "postgres");
        let mut reading = (*p.reading).clone();
        reading.rollup = Some(SmapsRollup {
            pss_bytes: pss,
            ..SmapsRollup::default()
        });
        p = ProcessSample::new(Arc::new(reading), 'S', Some(0.5));
        let sig = Signals {
            hoarded_bytes: Some(hoarded),
            hoard_method: Some(Method::Measured),
            runtime_held_bytes: Some(hoarded),
            runtime_held_by: Some(crate::heap::list::NAMES[1]),
            ..Signals::default()
        };
        (p, sig)
    }

    /// Groups of processes that share one large memory (each counts it whole in its RSS,
    /// its Pss a share) do not push a real group out of the ones kept.
    #[test]
    fn groups_past_the_cap_are_ranked_by_pss_not_rss() {
        let mib = 1u64 << 20;
        let mut ps = Vec::new();
        for (pid, name, rss, pss) in [
            (1, "postgres", 900, 900),
            (2, "java", 700, 700),
            (3, "sharer-a", 4000, 8),
            (4, "sharer-b", 4000, 8),
            (5, "sharer-c", 4000, 8),
        ] {
            let mut reading = (*process(pid, name).reading).clone();
            reading.status.vm_rss_bytes = Some(rss * mib);
            reading.rollup = Some(SmapsRollup {
                pss_bytes: Some(pss * mib),
                ..SmapsRollup::default()
            });
            ps.push(ProcessSample::new(Arc::new(reading), 'S', Some(0.5)));
        }
        let sigs = vec![Signals::default(); ps.len()];
        let (g, folded) = groups(&ps, &sigs, 2);
        let names: Vec<&str> = g.iter().map(|g| g.name.as_str()).collect();
        assert_eq!(names, ["java", "other", "postgres"]);
        assert_eq!(folded, 3);
    }

    /// 21 processes that each measure the same 256 MiB (one shared memory, whose pages
    /// each counts whole in its own resident memory) sum to at most their Pss, which
    /// counts those pages once: not 21x the memory.
    #[test]
    fn a_groups_measured_sums_never_exceed_its_pss() {
        let mib = 1u64 << 20;
        let (ps, sigs): (Vec<_>, Vec<_>) = (1..=21)
            .map(|pid| shared(pid, 256 * mib, Some(256 * mib / 21 + mib)))
            .unzip();
        let (g, _) = groups(&ps, &sigs, 10);
        let pss = g[0].pss_bytes;
        assert!(pss < 300 * mib, "{pss}");
        assert_eq!(g[0].hoarded_measured_bytes, pss);
        assert_eq!(g[0].runtime_held[1], (21, pss));
        // Figures under the Pss stand; with a Pss unknown nothing is capped.
        let (ps, sigs): (Vec<_>, Vec<_>) = [shared(1, mib, Some(8 * mib)), shared(2, mib, None)]
            .into_iter()
            .unzip();
        let (g, _) = groups(&ps, &sigs, 10);
        assert_eq!(g[0].hoarded_measured_bytes, 2 * mib);
        let (ps, sigs): (Vec<_>, Vec<_>) =
            [shared(1, 9 * mib, Some(8 * mib)), shared(2, mib, None)]
                .into_iter()
                .unzip();
        assert_eq!(groups(&ps, &sigs, 10).0[0].hoarded_measured_bytes, 10 * mib);
    }
}
