//! The OOM-kill post-mortem: each kill the kernel logged, joined with what the exporter
//! had measured of the victim (by pid, and a start before the kill, so a reused pid is
//! never taken for the victim), counted by constraint and group, and the latest few kept.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::sync::Arc;

use crate::collect::heap::runtime::Identity;
use crate::model::groups::OTHER_GROUP;
use crate::model::signals::{Method, ProcState, Signals};
use crate::parse::kmsg::OomKill;

/// Kills kept for `/explain` and `explain`.
pub const RECENT_KILLS: usize = 10;

/// The group of a victim the exporter never saw (it started and died between two scans,
/// or `explain` read a kill from before it ran).
pub const UNKNOWN_GROUP: &str = "unknown";

/// What the exporter last knew of a process beyond its state (`ProcState` keeps RssAnon
/// and the regrown bytes): kept between scans so a kill can say what the victim was.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Seen {
    pub group: Option<Arc<str>>,
    pub rss_bytes: Option<u64>,
    pub swap_bytes: Option<u64>,
    pub hoarded_bytes: Option<u64>,
    pub hoard_method: Option<Method>,
    pub arena_reserved_bytes: Option<u64>,
    pub untouched_commit_bytes: Option<u64>,
}

impl Seen {
    pub fn of(group: Option<Arc<str>>, st: &crate::parse::status::Status, sig: &Signals) -> Seen {
        Seen {
            group,
            rss_bytes: st.vm_rss_bytes,
            swap_bytes: st.vm_swap_bytes,
            hoarded_bytes: sig.hoarded_bytes,
            hoard_method: sig.hoard_method,
            arena_reserved_bytes: sig.arena_reserved_bytes,
            untouched_commit_bytes: sig.untouched_commit_bytes,
        }
    }
}

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

/// Where a victim may be found: this scan's states (read before it died) and the last
/// scan's, with the Unix time each was read.
pub struct Known<'a> {
    pub now: &'a HashMap<(u32, u64), ProcState>,
    pub now_unix_seconds: Option<f64>,
    pub before: &'a HashMap<(u32, u64), ProcState>,
    pub before_unix_seconds: Option<f64>,
    pub tick_seconds: f64,
}

impl Known<'_> {
    /// The process the kill names: that pid, started before the kill; the latest such.
    fn find(&self, kill: &OomKill) -> Option<(&ProcState, Option<f64>)> {
        let killed_at = kill.micros as f64 / 1e6;
        let pick = |m| started_before(m, kill.kill.pid, killed_at, self.tick_seconds);
        pick(self.now)
            .map(|s| (s, self.now_unix_seconds))
            .or_else(|| pick(self.before).map(|s| (s, self.before_unix_seconds)))
    }
}

/// The process `pid` that started by `killed_at` (seconds since boot). Kills are rare: a
/// pass over the processes per kill costs nothing that counts.
fn started_before(
    m: &HashMap<(u32, u64), ProcState>,
    pid: u32,
    killed_at: f64,
    tick_seconds: f64,
) -> Option<&ProcState> {
    m.iter()
        .filter(|((p, start), _)| *p == pid && (*start as f64) * tick_seconds <= killed_at)
        .max_by_key(|((_, start), _)| *start)
        .map(|(_, s)| s)
}

impl Kills {
    /// Counts the kills of one scan and keeps them, newest last.
    pub fn add(
        &mut self,
        kills: Vec<OomKill>,
        known: &Known,
        boot_unix_seconds: Option<f64>,
        max_groups: usize,
    ) {
        for kill in kills {
            let found = known.find(&kill);
            let seen = found.map(|(s, _)| s.seen.clone());
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
            let heap = found.and_then(|(s, _)| s.heap.as_ref());
            let victim = Victim {
                unix_seconds: boot_unix_seconds.map(|b| b + kill.micros as f64 / 1e6),
                group,
                seen,
                rss_anon_bytes: found.map(|(s, _)| s.rss_anon_bytes),
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

    fn state(group: &str, rss: u64) -> ProcState {
        let mut s = ProcState::default();
        s.seen.group = Some(Arc::from(group));
        s.seen.rss_bytes = Some(rss);
        s
    }

    #[test]
    fn a_kill_joins_the_process_that_held_the_pid_when_it_was_killed() {
        // At 100 ticks a second: pid 7 was "old" from 1 s and is now "new", started at
        // 50 s; the kill at 20 s was the old one's, whichever map holds what.
        let before = HashMap::from([((7, 100), state("old", 1))]);
        let now = HashMap::from([((7, 5000), state("new", 2))]);
        let known = Known {
            now: &now,
            now_unix_seconds: Some(2000.0),
            before: &before,
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
        let empty = HashMap::new();
        let before: HashMap<_, _> = (1..=30)
            .map(|pid| ((pid, 0), state(&format!("g{pid}"), 1)))
            .collect();
        let known = Known {
            now: &empty,
            now_unix_seconds: None,
            before: &before,
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
