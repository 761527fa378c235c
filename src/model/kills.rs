//! The OOM-kill post-mortem: each kill the kernel logged, joined with what the exporter
//! had measured of the victim (by pid, and a start before the kill, so a reused pid is
//! never taken for the victim), counted by constraint and group, and the latest few kept.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::sync::Arc;

use crate::heap::runtime::Identity;
use crate::model::groups::OTHER_GROUP;
use crate::model::signals::{Method, ProcState, Seen};
use crate::parse::kmsg::OomKill;

/// Kills kept for `/explain` and `explain`.
pub(crate) const RECENT_KILLS: usize = 10;

/// The group of a victim the exporter never saw (it started and died between two scans,
/// or `explain` read a kill from before it ran).
pub(crate) const UNKNOWN_GROUP: &str = "unknown";

/// One kill and what was known of its victim.
#[derive(Debug, Clone, PartialEq)]
pub struct Victim {
    /// The kernel's account: constraint, cgroups, pid, name, its memory at the kill.
    pub kill: OomKill,
    /// Unix time of the kill (boot time plus the record's time since boot).
    pub unix_seconds: Option<f64>,
    /// The group counted: the victim's, [`UNKNOWN_GROUP`], or [`OTHER_GROUP`] past the cap.
    pub group: String,
    /// What the exporter had measured, and the Unix time of that scan; `None` when it
    /// never saw the process.
    pub seen: Option<Seen>,
    /// RssAnon and the bytes regrown while idle, from the same scan's state.
    pub rss_anon_bytes: Option<u64>,
    pub regrown_bytes: Option<u64>,
    pub seen_unix_seconds: Option<f64>,
    pub identity: Option<Identity>,
    pub memory_cgroup: Option<String>,
}

/// Kill counts by (constraint, group) and the latest kills, since the exporter started.
#[derive(Debug, Clone, Default)]
pub struct Kills {
    pub total: BTreeMap<(&'static str, String), u64>,
    pub recent: VecDeque<Arc<Victim>>,
}

/// Where a victim may be found: the states of this scan's processes (read before it
/// died) and of the last scan's that this one did not see, with the Unix time of each.
pub struct Lookup<'a> {
    pub states: &'a HashMap<(u32, u64), ProcState>,
    /// The derivation of this scan: a state it did not update is the last scan's.
    pub scan: u64,
    pub now_unix_seconds: Option<f64>,
    pub before_unix_seconds: Option<f64>,
    pub tick_seconds: f64,
}

impl Lookup<'_> {
    /// The process the kill names: that pid, started before the kill; the latest such.
    /// Kills are rare: a pass over the processes per kill costs nothing that counts.
    fn find(&self, kill: &OomKill) -> Option<(&ProcState, Option<f64>)> {
        let killed_at = kill.micros as f64 / 1e6;
        let pid = kill.kill.pid;
        self.states
            .iter()
            .filter(|((p, start), _)| *p == pid && (*start as f64) * self.tick_seconds <= killed_at)
            .max_by_key(|((_, start), _)| *start)
            .map(|(_, s)| {
                let at = if s.scan == self.scan {
                    self.now_unix_seconds
                } else {
                    self.before_unix_seconds
                };
                (s, at)
            })
    }
}

impl Kills {
    /// Counts the kills of one scan and keeps them, newest last.
    pub fn add(
        &mut self,
        kills: Vec<OomKill>,
        known: &Lookup,
        boot_unix_seconds: Option<f64>,
        max_groups: usize,
    ) {
        for kill in kills {
            let found = known.find(&kill);
            let seen = found.map(|(s, _)| s.seen());
            let mut group = seen
                .as_ref()
                .and_then(|s| s.group.as_deref())
                .unwrap_or(UNKNOWN_GROUP)
                .to_string();
            let constraint = kill.constraint.map_or("unknown", |c| c.as_str());
            let counted: BTreeSet<&str> = self.total.keys().map(|(_, g)| g.as_str()).collect();
            if !counted.contains(group.as_str()) && counted.len() >= max_groups.max(1) {
                group = OTHER_GROUP.to_string();
            }
            *self.total.entry((constraint, group.clone())).or_insert(0) += 1;
            let heap = found.and_then(|(s, _)| s.heap());
            let victim = Victim {
                unix_seconds: boot_unix_seconds.map(|b| b + kill.micros as f64 / 1e6),
                group,
                seen,
                rss_anon_bytes: found.map(|(s, _)| s.rss_anon()),
                regrown_bytes: found.map(|(s, _)| s.regrown_total_bytes),
                seen_unix_seconds: found.and_then(|(_, t)| t),
                identity: heap.map(|h| h.identity.clone()),
                // The kernel's path is from the root of the hierarchy whatever cgroup
                // namespace the exporter runs in; /proc/PID/cgroup's is from its own.
                memory_cgroup: kill
                    .task_memcg
                    .clone()
                    .or_else(|| heap.and_then(|h| h.memory_cgroup.clone())),
                kill,
            };
            if self.recent.len() == RECENT_KILLS {
                self.recent.pop_front();
            }
            self.recent.push_back(Arc::new(victim));
        }
    }
}

impl Victim {
    /// The victim's memory as the kernel's kill line gives it.
    pub fn killed(&self) -> [(&'static str, Option<u64>); 5] {
        let k = &self.kill.kill;
        [
            ("total_vm", k.total_vm_bytes),
            ("anon_rss", k.anon_rss_bytes),
            ("file_rss", k.file_rss_bytes),
            ("shmem_rss", k.shmem_rss_bytes),
            ("pgtables", k.pgtables_bytes),
        ]
    }

    /// What the exporter had measured of the victim at its last scan.
    pub fn measured(&self) -> [(&'static str, Option<u64>); 8] {
        let Some(m) = &self.seen else {
            return [("", None); 8];
        };
        let hoarded = |method| m.hoarded_bytes.filter(|_| m.hoard_method == Some(method));
        [
            ("rss", m.rss_bytes),
            ("rss_anon", self.rss_anon_bytes),
            ("swap", m.swap_bytes),
            ("hoarded", hoarded(Method::Measured)),
            ("hoarded_suspected", hoarded(Method::Suspected)),
            ("arena_reserved", m.arena_reserved_bytes),
            ("regrown", self.regrown_bytes),
            ("untouched_commit", m.untouched_commit_bytes),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse::kmsg::{self, Assembler};

    fn kill(pid: u32, seconds: u64) -> OomKill {
        let line = format!(
            "3,1,{},-;Memory cgroup out of memory: Killed process {pid} (app) total-vm:10kB, anon-rss:8kB, file-rss:0kB, shmem-rss:0kB, UID:0 pgtables:4kB oom_score_adj:0\n",
            seconds * 1_000_000
        );
        Assembler::default().push(&line).unwrap()
    }

    fn state(group: &str, rss: u64, scan: u64) -> ProcState {
        let mut r = crate::collect::ProcessFiles {
            group: Some(group.to_string()),
            ..Default::default()
        };
        r.status.vm_rss_bytes = Some(rss);
        ProcState {
            reading: Arc::new(r),
            scan,
            ..ProcState::default()
        }
    }

    #[test]
    fn a_kill_joins_the_process_that_held_the_pid_when_it_was_killed() {
        // At 100 ticks a second: pid 7 was "old" from 1 s and is now "new", started at
        // 50 s, seen by this scan (2); the kill at 20 s was the old one's, seen by the last.
        let states = HashMap::from([
            ((7, 100), state("old", 1, 1)),
            ((7, 5000), state("new", 2, 2)),
        ]);
        let known = Lookup {
            states: &states,
            scan: 2,
            now_unix_seconds: Some(2000.0),
            before_unix_seconds: Some(1000.0),
            tick_seconds: 0.01,
        };
        let mut k = Kills::default();
        k.add(vec![kill(7, 20)], &known, Some(10_000.0), 10);
        let v = k.recent.back().unwrap();
        assert_eq!(v.group, "old");
        assert_eq!(v.seen.as_ref().and_then(|s| s.rss_bytes), Some(1));
        assert_eq!(v.seen_unix_seconds, Some(1000.0));
        assert_eq!(v.unix_seconds, Some(10_020.0));
        assert_eq!(v.kill.constraint, Some(kmsg::Constraint::MemoryCgroup));
        // A kill at 60 s is the new one's, read in this scan.
        k.add(vec![kill(7, 60)], &known, None, 10);
        assert_eq!(k.recent.back().unwrap().group, "new");
        // A pid no scan saw before the kill: unknown, nothing measured.
        k.add(vec![kill(8, 60)], &known, None, 10);
        let v = k.recent.back().unwrap();
        assert_eq!((v.group.as_str(), v.seen.is_none()), (UNKNOWN_GROUP, true));
        assert_eq!(v.measured().iter().filter(|(_, b)| b.is_some()).count(), 0);
        assert_eq!(k.total.get(&("memory_cgroup", "old".to_string())), Some(&1));
    }

    #[test]
    fn groups_past_the_cap_are_counted_as_other_and_the_history_is_bounded() {
        let before: HashMap<_, _> = (1..=30)
            .map(|pid| ((pid, 0), state(&format!("g{pid}"), 1, 1)))
            .collect();
        let known = Lookup {
            states: &before,
            scan: 2,
            now_unix_seconds: None,
            before_unix_seconds: None,
            tick_seconds: 0.01,
        };
        let mut k = Kills::default();
        k.add((1..=30).map(|pid| kill(pid, 5)).collect(), &known, None, 3);
        let groups: Vec<&str> = k.total.keys().map(|(_, g)| g.as_str()).collect();
        assert_eq!(groups, ["g1", "g2", "g3", OTHER_GROUP]);
        assert_eq!(k.total.values().sum::<u64>(), 30);
        assert_eq!(k.recent.len(), RECENT_KILLS);
        assert_eq!(k.recent.back().unwrap().kill.kill.pid, 30);
    }
}
