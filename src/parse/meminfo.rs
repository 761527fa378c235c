//! `/proc/meminfo`.

use super::{key_values, kib_to_bytes, ParseError};

/// The `/proc/meminfo` fields the exporter uses, in bytes. `None` when the kernel does not
/// have the field or its value was rejected.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Meminfo {
    /// `MemTotal`: usable RAM.
    pub mem_total_bytes: Option<u64>,
    /// `MemFree`.
    pub mem_free_bytes: Option<u64>,
    /// `MemAvailable` (kernel 3.14+): estimate of memory available without swapping.
    pub mem_available_bytes: Option<u64>,
    /// `Committed_AS`: address space committed by all processes, touched or not.
    pub committed_as_bytes: Option<u64>,
    /// `CommitLimit`: the limit on `Committed_AS`, enforced only in overcommit mode 2.
    pub commit_limit_bytes: Option<u64>,
    /// `SwapTotal`.
    pub swap_total_bytes: Option<u64>,
    /// `SwapFree`.
    pub swap_free_bytes: Option<u64>,
    /// `AnonPages`: anonymous memory mapped into page tables.
    pub anon_pages_bytes: Option<u64>,
    /// `AnonHugePages`: anonymous memory backed by transparent huge pages.
    pub anon_huge_pages_bytes: Option<u64>,
    /// `ShmemHugePages`.
    pub shmem_huge_pages_bytes: Option<u64>,
    /// `FileHugePages` (kernel 5.4+).
    pub file_huge_pages_bytes: Option<u64>,
    /// `Hugetlb` (kernel 4.16+): memory reserved for hugetlbfs pages of all sizes.
    pub hugetlb_bytes: Option<u64>,
    /// `PageTables`.
    pub page_tables_bytes: Option<u64>,
    /// The balance sheet's other fields ([`SHEET_FIELDS`], in its order): bytes, or a
    /// page count for `HugePages_*`.
    pub sheet: [Option<u64>; SHEET_FIELDS.len()],
    /// Socket buffers, from `/proc/net/sockstat` (read beside `meminfo` by its unit).
    pub sockets: Option<super::sockstat::Sockstat>,
    /// The per-CPU free lists, from `/proc/zoneinfo` (read beside `meminfo` by its unit).
    pub pagesets: Option<super::zoneinfo::Pagesets>,
    /// Fields present but unparseable or absurd.
    pub rejected: u32,
}

/// The fields the balance sheet reads besides those above, each once in `meminfo`.
/// `HugePages_Total` and `HugePages_Free` are page counts; the others kB.
pub(crate) const SHEET_FIELDS: [&str; 21] = [
    "Buffers",
    "Cached",
    "SwapCached",
    "Active(file)",
    "Inactive(file)",
    "Shmem",
    "KReclaimable",
    "SReclaimable",
    "SUnreclaim",
    "KernelStack",
    "SecPageTables",
    "VmallocUsed",
    "Percpu",
    "HugePages_Total",
    "HugePages_Free",
    "Hugepagesize",
    "Zswap",
    "Balloon",
    "Unevictable",
    "Active(anon)",
    "Inactive(anon)",
];

impl Meminfo {
    /// A field of [`SHEET_FIELDS`] (`None`: the kernel has no such line, or its value was
    /// rejected).
    pub fn field(&self, key: &str) -> Option<u64> {
        let i = SHEET_FIELDS.iter().position(|&k| k == key)?;
        self.sheet[i]
    }
}

/// `AnonPages + Shmem + Mapped` in bytes: the memory that moves when a process's `statm`
/// does (pages faulted in, reclaimed, swapped, collapsed), whichever process it is. An
/// error when a field is missing or malformed.
pub fn moving_bytes(text: &str) -> Result<u64, ParseError> {
    const KEYS: [&str; 3] = ["AnonPages", "Shmem", "Mapped"];
    let mut sum = 0u64;
    let mut seen = [false; KEYS.len()];
    for (key, value) in key_values(text) {
        let Some(i) = KEYS.iter().position(|&k| k == key) else {
            continue;
        };
        let v = kib_to_bytes(value).ok_or(ParseError::Malformed("meminfo value"))?;
        if std::mem::replace(&mut seen[i], true) {
            return Err(ParseError::Malformed("a field twice"));
        }
        sum = sum
            .checked_add(v)
            .ok_or(ParseError::Malformed("AnonPages + Shmem + Mapped"))?;
    }
    match seen {
        [true, true, true] => Ok(sum),
        _ => Err(ParseError::Missing("AnonPages, Shmem or Mapped")),
    }
}

impl Meminfo {
    pub fn parse(text: &str) -> Result<Self, ParseError> {
        let mut m = Meminfo::default();
        let mut seen = 0;
        for (key, value) in key_values(text) {
            let slot = match key {
                "MemTotal" => &mut m.mem_total_bytes,
                "MemFree" => &mut m.mem_free_bytes,
                "MemAvailable" => &mut m.mem_available_bytes,
                "Committed_AS" => &mut m.committed_as_bytes,
                "CommitLimit" => &mut m.commit_limit_bytes,
                "SwapTotal" => &mut m.swap_total_bytes,
                "SwapFree" => &mut m.swap_free_bytes,
                "AnonPages" => &mut m.anon_pages_bytes,
                "AnonHugePages" => &mut m.anon_huge_pages_bytes,
                "ShmemHugePages" => &mut m.shmem_huge_pages_bytes,
                "FileHugePages" => &mut m.file_huge_pages_bytes,
                "Hugetlb" => &mut m.hugetlb_bytes,
                "PageTables" => &mut m.page_tables_bytes,
                _ => match SHEET_FIELDS.iter().position(|&k| k == key) {
                    Some(i) if key.starts_with("HugePages_") => {
                        seen += 1;
                        match value.parse::<u64>() {
                            Ok(n) => m.sheet[i] = Some(n),
                            Err(_) => m.rejected += 1,
                        }
                        continue;
                    }
                    Some(i) => &mut m.sheet[i],
                    None => continue,
                },
            };
            seen += 1;
            match kib_to_bytes(value) {
                Some(bytes) => *slot = Some(bytes),
                None => m.rejected += 1,
            }
        }
        if seen == 0 {
            return Err(ParseError::Missing("MemTotal"));
        }
        Ok(m)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_moving_memory_needs_all_three_fields() {
        let m = "MemTotal: 100 kB\nAnonPages:  10 kB\nMapped: 2 kB\nShmem: 1 kB\n";
        assert_eq!(moving_bytes(m), Ok(13 * 1024));
        assert!(moving_bytes("AnonPages: 10 kB\nMapped: 2 kB\n").is_err());
        assert!(moving_bytes("AnonPages: x kB\nMapped: 2 kB\nShmem: 1 kB\n").is_err());
        assert!(moving_bytes("AnonPages: 1 kB\nAnonPages: 1 kB\nShmem: 1 kB\n").is_err());
        let huge = "AnonPages: 18014398509481983 kB\nMapped: 18014398509481983 kB\nShmem: 0 kB\n";
        assert!(moving_bytes(huge).is_err(), "a sum past 64 bits");
    }

    // Captured on kernel 6.18, 24 GiB, no swap, THP madvise (lines trimmed).
    const KERNEL_6_18: &str = "MemTotal:       24608252 kB\nMemFree:        23138508 kB\nMemAvailable:   24005756 kB\nSwapTotal:             0 kB\nSwapFree:              0 kB\nAnonPages:        310244 kB\nPageTables:         6316 kB\nCommitLimit:    12304124 kB\nCommitted_AS:    1072352 kB\nAnonHugePages:      6144 kB\nShmemHugePages:        0 kB\nFileHugePages:         0 kB\nHugetlb:               0 kB\n";

    #[test]
    fn parses_kernel_6_18_in_bytes() {
        let m = Meminfo::parse(KERNEL_6_18).unwrap();
        assert_eq!(m.mem_total_bytes, Some(24608252 * 1024));
        assert_eq!(m.committed_as_bytes, Some(1072352 * 1024));
        assert_eq!(m.commit_limit_bytes, Some(12304124 * 1024));
        assert_eq!(m.anon_huge_pages_bytes, Some(6144 * 1024));
        assert_eq!(m.rejected, 0);
    }

    #[test]
    fn absurd_swap_free_is_dropped_and_counted() {
        let m = Meminfo::parse("MemTotal: 1024 kB\nSwapFree: 18446744073708600176 kB\n").unwrap();
        assert_eq!(m.swap_free_bytes, None);
        assert_eq!(m.mem_total_bytes, Some(1024 * 1024));
        assert_eq!(m.rejected, 1);
    }

    #[test]
    fn old_kernel_without_new_fields_is_none_not_error() {
        let m = Meminfo::parse("MemTotal: 1024 kB\nMemFree: 512 kB\n").unwrap();
        assert_eq!(m.file_huge_pages_bytes, None);
        assert_eq!(m.mem_available_bytes, None);
    }

    #[test]
    fn garbage_is_an_error() {
        assert!(Meminfo::parse("").is_err());
        assert!(Meminfo::parse("\u{0}\u{1}garbage").is_err());
    }
}
