//! `/proc/PID/status`.

use super::{key_values, kib_to_bytes, ParseError};

/// The fields of `/proc/PID/status` the exporter uses, sizes in bytes. Kernel threads have
/// no `Vm*` lines: then `vm_rss_bytes` is `None`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Status {
    /// `VmRSS`: resident set size.
    pub vm_rss_bytes: Option<u64>,
    /// `VmHWM`: peak resident set size.
    pub vm_hwm_bytes: Option<u64>,
    /// `VmSize`: virtual address space.
    pub vm_size_bytes: Option<u64>,
    /// `VmPTE`: page tables; with VmRSS and VmSwap what `oom_score` is computed from.
    pub vm_pte_bytes: Option<u64>,
    /// `VmSwap`: anonymous memory swapped out.
    pub vm_swap_bytes: Option<u64>,
    /// `RssAnon` (kernel 4.5+): resident anonymous memory.
    pub rss_anon_bytes: Option<u64>,
    /// `RssFile` (kernel 4.5+): resident file mappings.
    pub rss_file_bytes: Option<u64>,
    /// `RssShmem` (kernel 4.5+): resident shared memory.
    pub rss_shmem_bytes: Option<u64>,
    /// `Threads`.
    pub threads: Option<u64>,
    /// `THP_enabled` (kernel 6.x+): 0 when `PR_SET_THP_DISABLE` is set for the process.
    pub thp_enabled: Option<bool>,
    /// Fields present but unparseable or absurd.
    pub rejected: u32,
}

impl Status {
    pub fn parse(text: &str) -> Result<Self, ParseError> {
        // Name, 8 sizes, THP_enabled and Threads: once all are seen (line 37 of 59 on
        // kernel 6.18) the signal, capability and CPU lines that follow are skipped.
        const WANTED: u32 = 11;
        let mut s = Status::default();
        let mut seen_name = false;
        let mut seen = 0;
        for (key, value) in key_values(text) {
            if seen == WANTED {
                break;
            }
            let slot = match key {
                "Name" => {
                    seen_name = true;
                    seen += 1;
                    continue;
                }
                "VmRSS" => &mut s.vm_rss_bytes,
                "VmHWM" => &mut s.vm_hwm_bytes,
                "VmSize" => &mut s.vm_size_bytes,
                "VmSwap" => &mut s.vm_swap_bytes,
                "VmPTE" => &mut s.vm_pte_bytes,
                "RssAnon" => &mut s.rss_anon_bytes,
                "RssFile" => &mut s.rss_file_bytes,
                "RssShmem" => &mut s.rss_shmem_bytes,
                "Threads" => {
                    seen += 1;
                    match value.parse() {
                        Ok(n) => s.threads = Some(n),
                        Err(_) => s.rejected += 1,
                    }
                    continue;
                }
                "THP_enabled" => {
                    seen += 1;
                    match value {
                        "0" => s.thp_enabled = Some(false),
                        "1" => s.thp_enabled = Some(true),
                        _ => s.rejected += 1,
                    }
                    continue;
                }
                _ => continue,
            };
            seen += 1;
            match kib_to_bytes(value) {
                Some(bytes) => *slot = Some(bytes),
                None => s.rejected += 1,
            }
        }
        if !seen_name {
            return Err(ParseError::Missing("Name"));
        }
        Ok(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Excerpt captured on kernel 6.18: an idle `sleep 600`.
    const SLEEP: &str = "Name:\tsleep\nUmask:\t0022\nState:\tS (sleeping)\nUid:\t1000\t1000\t1000\t1000\nVmPeak:\t    5744 kB\nVmSize:\t    5744 kB\nVmHWM:\t    1024 kB\nVmRSS:\t    1024 kB\nRssAnon:\t       0 kB\nRssFile:\t    1024 kB\nRssShmem:\t       0 kB\nVmPTE:\t      48 kB\nVmSwap:\t       0 kB\nThreads:\t1\nTHP_enabled:\t1\n";

    #[test]
    fn parses_sizes_in_bytes() {
        let s = Status::parse(SLEEP).unwrap();
        assert_eq!(s.vm_rss_bytes, Some(1024 * 1024));
        assert_eq!(s.vm_size_bytes, Some(5744 * 1024));
        assert_eq!(s.rss_anon_bytes, Some(0));
        assert_eq!(s.vm_pte_bytes, Some(48 * 1024));
        assert_eq!(s.threads, Some(1));
        assert_eq!(s.thp_enabled, Some(true));
        assert_eq!(s.rejected, 0);
    }

    #[test]
    fn kernel_thread_has_no_memory_fields() {
        let s = Status::parse("Name:\tkthreadd\nState:\tS (sleeping)\nThreads:\t1\n").unwrap();
        assert_eq!(s.vm_rss_bytes, None);
        assert_eq!(s.thp_enabled, None);
    }

    #[test]
    fn absurd_and_bad_values_are_counted() {
        let s = Status::parse(
            "Name:\tx\nVmSwap:\t18446744073708600176 kB\nThreads:\tmany\nTHP_enabled:\t7\n",
        )
        .unwrap();
        assert_eq!(
            (s.vm_swap_bytes, s.threads, s.thp_enabled),
            (None, None, None)
        );
        assert_eq!(s.rejected, 3);
    }

    #[test]
    fn truncated_file_without_name_is_an_error() {
        assert!(Status::parse("").is_err());
    }
}
