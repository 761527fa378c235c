//! cgroup `memory.stat`: anonymous and huge-page memory of one cgroup.

use super::ParseError;

/// Anonymous memory of a cgroup, bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MemoryStat {
    /// v2 `anon` (hierarchical); v1 `rss` (this cgroup's own processes only).
    pub anon_bytes: u64,
    /// v2 `anon_thp`; v1 `rss_huge`.
    pub anon_huge_bytes: u64,
    /// Processes of the cgroup the OOM killer killed, whichever OOM it was (the whole
    /// host's or the cgroup's limit): v2 `memory.events` `oom_kill`, v1
    /// `memory.oom_control` `oom_kill` (kernel 4.13+).
    pub oom_kills: Option<u64>,
    /// Times the cgroup reached its limit and the OOM killer ran inside it: v2
    /// `memory.events` `oom`. v1 has no such counter.
    pub limit_ooms: Option<u64>,
}

impl MemoryStat {
    /// Parses either version: v2 files have `anon`, v1 files `rss`.
    pub fn parse(text: &str) -> Result<Self, ParseError> {
        let (mut anon, mut huge, mut rss, mut rss_huge) = (None, None, None, None);
        for line in text.lines() {
            let Some((key, value)) = line.split_once(' ') else {
                continue;
            };
            let slot = match key {
                "anon" => &mut anon,
                "anon_thp" => &mut huge,
                "rss" => &mut rss,
                "rss_huge" => &mut rss_huge,
                _ => continue,
            };
            *slot = Some(
                value
                    .trim()
                    .parse::<u64>()
                    .map_err(|_| ParseError::Malformed("memory.stat value"))?,
            );
        }
        let (anon_bytes, huge) = match (anon, rss) {
            (Some(a), _) => (a, huge),
            (None, Some(r)) => (r, rss_huge),
            _ => return Err(ParseError::Missing("anon or rss")),
        };
        Ok(MemoryStat {
            anon_bytes,
            anon_huge_bytes: huge.unwrap_or(0),
            ..MemoryStat::default()
        })
    }

    /// Adds the OOM counters of v2 `memory.events` or v1 `memory.oom_control`; a value
    /// that is not a number is left out.
    pub fn add_events(&mut self, text: &str) {
        for line in text.lines() {
            let Some((key, value)) = line.split_once(' ') else {
                continue;
            };
            let slot = match key {
                "oom" => &mut self.limit_ooms,
                "oom_kill" => &mut self.oom_kills,
                _ => continue,
            };
            *slot = value.trim().parse().ok();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn v1_and_v2() {
        // cgroup v1 (this build machine, kernel 6.18) and v2 shapes, trimmed.
        let v1 = "cache 4096\nrss 69206016\nrss_huge 67108864\nshmem 0\ntotal_rss 69206016\n";
        assert_eq!(
            MemoryStat::parse(v1),
            Ok(MemoryStat {
                anon_bytes: 69206016,
                anon_huge_bytes: 67108864,
                ..MemoryStat::default()
            })
        );
        let v2 = "anon 1048576\nfile 4096\nanon_thp 0\nfile_thp 0\n";
        assert_eq!(
            MemoryStat::parse(v2),
            Ok(MemoryStat {
                anon_bytes: 1048576,
                anon_huge_bytes: 0,
                ..MemoryStat::default()
            })
        );
        let mut m = MemoryStat::default();
        m.add_events("low 0\nhigh 0\nmax 7\noom 2\noom_kill 3\noom_group_kill 0\n");
        assert_eq!((m.limit_ooms, m.oom_kills), (Some(2), Some(3)));
        let mut m = MemoryStat::default();
        m.add_events("oom_kill_disable 0\nunder_oom 0\noom_kill 5\n");
        assert_eq!((m.limit_ooms, m.oom_kills), (None, Some(5)));
        m.add_events("oom_kill x\n");
        assert_eq!(m.oom_kills, None);
        assert!(MemoryStat::parse("cache 1\n").is_err());
        assert!(MemoryStat::parse("rss x\n").is_err());
    }
}
