//! `/proc/PID/smaps_rollup` (kernel 4.14+).

use super::{key_values, kib_to_bytes, ParseError};

/// The fields of `/proc/PID/smaps_rollup` the exporter uses, in bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SmapsRollup {
    /// `Rss`.
    pub rss_bytes: Option<u64>,
    /// `Pss`: proportional set size (shared pages divided among sharers).
    pub pss_bytes: Option<u64>,
    /// `Anonymous`.
    pub anonymous_bytes: Option<u64>,
    /// `AnonHugePages`: anonymous memory in transparent huge pages.
    pub anon_huge_pages_bytes: Option<u64>,
    /// `Swap`.
    pub swap_bytes: Option<u64>,
    /// `LazyFree` (4.12+): anonymous pages the process freed with `MADV_FREE`, still
    /// resident until the kernel needs them (or the process writes them again).
    pub lazy_free_bytes: Option<u64>,
    /// Fields present but unparseable or absurd.
    pub rejected: u32,
}

impl SmapsRollup {
    /// An empty file (a zombie or a process that just dropped its memory) is
    /// [`ParseError::Empty`]: the process has no memory map to report.
    pub fn parse(text: &str) -> Result<Self, ParseError> {
        if text.trim().is_empty() {
            return Err(ParseError::Empty);
        }
        let mut r = SmapsRollup::default();
        let mut seen = 0;
        for (key, value) in key_values(text) {
            let slot = match key {
                "Rss" => &mut r.rss_bytes,
                "Pss" => &mut r.pss_bytes,
                "Anonymous" => &mut r.anonymous_bytes,
                "AnonHugePages" => &mut r.anon_huge_pages_bytes,
                "Swap" => &mut r.swap_bytes,
                "LazyFree" => &mut r.lazy_free_bytes,
                _ => continue,
            };
            seen += 1;
            match kib_to_bytes(value) {
                Some(bytes) => *slot = Some(bytes),
                None => r.rejected += 1,
            }
        }
        if seen == 0 {
            return Err(ParseError::Missing("Rss"));
        }
        Ok(r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Captured on kernel 6.18 (lines trimmed): a process with 6 MiB of huge pages.
    const KERNEL_6_18: &str = "55d0c0a4d000-7ffd3d5f6000 ---p 00000000 00:00 0                          [rollup]\nRss:                9604 kB\nPss:                6187 kB\nPss_Anon:           7312 kB\nAnonymous:          7312 kB\nAnonHugePages:      6144 kB\nLazyFree:            512 kB\nSwap:                  0 kB\n";

    #[test]
    fn parses_rollup_in_bytes() {
        let r = SmapsRollup::parse(KERNEL_6_18).unwrap();
        assert_eq!(r.rss_bytes, Some(9604 * 1024));
        assert_eq!(r.pss_bytes, Some(6187 * 1024));
        assert_eq!(r.anonymous_bytes, Some(7312 * 1024));
        assert_eq!(r.anon_huge_pages_bytes, Some(6144 * 1024));
        assert_eq!(r.swap_bytes, Some(0));
        assert_eq!(r.lazy_free_bytes, Some(512 * 1024));
    }

    #[test]
    fn empty_means_no_memory_map() {
        assert_eq!(SmapsRollup::parse(""), Err(ParseError::Empty));
    }

    #[test]
    fn garbage_is_an_error() {
        assert!(SmapsRollup::parse("not a rollup").is_err());
    }
}
