//! `/proc/zoneinfo`: the pages on the per-CPU free lists (`count` under each CPU's
//! `pagesets`), which `MemFree` leaves out, and the per-CPU counters' fold threshold
//! (`vm stats threshold`), which bounds how far meminfo's sums lag.

use super::ParseError;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Pagesets {
    /// Pages on every CPU's free lists, over every zone.
    pub free_pages: u64,
    /// The largest `vm stats threshold` of any zone and CPU.
    pub threshold_max: u64,
    /// Per-CPU entries read (zones × CPUs).
    pub cpus: u64,
}

impl Pagesets {
    pub fn parse(text: &str) -> Result<Self, ParseError> {
        let mut p = Pagesets::default();
        for line in text.lines() {
            let line = line.trim_ascii_start();
            if let Some(n) = line.strip_prefix("count:") {
                let n: u64 = n
                    .trim_ascii()
                    .parse()
                    .map_err(|_| ParseError::Malformed("count"))?;
                p.free_pages = p.free_pages.saturating_add(n);
                p.cpus += 1;
            } else if let Some(n) = line.strip_prefix("vm stats threshold:") {
                let n: u64 = n
                    .trim_ascii()
                    .parse()
                    .map_err(|_| ParseError::Malformed("vm stats threshold"))?;
                p.threshold_max = p.threshold_max.max(n);
            }
        }
        if p.cpus == 0 {
            return Err(ParseError::Missing("pagesets"));
        }
        Ok(p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_6_18_sums_every_cpus_lists() {
        let text = "Node 0, zone    DMA32\n  pages free     12\n  pagesets\n    cpu: 0\n\
                    \x20             count:    1444\n              high:     1444\n\
                    \x20 vm stats threshold: 24\n    cpu: 1\n              count:    1173\n\
                    \x20 vm stats threshold: 24\n  node_unreclaimable:  0\n\
                    Node 0, zone   Normal\n  pagesets\n    cpu: 0\n              count:    9877\n\
                    \x20 vm stats threshold: 36\n";
        let p = Pagesets::parse(text).unwrap();
        assert_eq!(
            (p.free_pages, p.threshold_max, p.cpus),
            (1444 + 1173 + 9877, 36, 3)
        );
    }

    #[test]
    fn garbage_is_an_error() {
        assert!(Pagesets::parse("").is_err());
        assert!(Pagesets::parse("  pagesets\n count: many\n").is_err());
    }
}
