//! cgroup `memory.stat`: anonymous and huge-page memory of one cgroup.

use super::ParseError;

/// Anonymous memory of a cgroup, bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MemoryStat {
    /// v2 `anon` (hierarchical); v1 `rss` (this cgroup's own processes only).
    pub anon_bytes: u64,
    /// v2 `anon_thp`; v1 `rss_huge`.
    pub anon_huge_bytes: u64,
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
        })
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
                anon_huge_bytes: 67108864
            })
        );
        let v2 = "anon 1048576\nfile 4096\nanon_thp 0\nfile_thp 0\n";
        assert_eq!(
            MemoryStat::parse(v2),
            Ok(MemoryStat {
                anon_bytes: 1048576,
                anon_huge_bytes: 0
            })
        );
        assert!(MemoryStat::parse("cache 1\n").is_err());
        assert!(MemoryStat::parse("rss x\n").is_err());
    }
}
