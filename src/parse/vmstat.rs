//! `/proc/vmstat`.

use super::{is_metric_name_part, ParseError};

/// Exact `/proc/vmstat` keys exported besides every `thp_*` and `compact_*` key.
pub(crate) const EXTRA_KEYS: [&str; 4] = ["pswpin", "pswpout", "oom_kill", "pgmajfault"];

/// True for the vmstat counters the exporter keeps.
pub(crate) fn wanted(key: &str) -> bool {
    key.starts_with("thp_") || key.starts_with("compact_") || EXTRA_KEYS.contains(&key)
}

/// The kept `/proc/vmstat` event counters, in file order, whatever subset the running kernel
/// has. Values are event counts (not pages or bytes).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Vmstat {
    pub counters: Vec<(String, u64)>,
    /// Wanted lines whose value or name was unusable.
    pub rejected: u32,
}

impl Vmstat {
    pub fn parse(text: &str) -> Result<Self, ParseError> {
        let mut v = Vmstat::default();
        let mut lines = 0;
        for line in text.lines() {
            let Some((key, value)) = line.split_once(' ') else {
                continue;
            };
            lines += 1;
            if !wanted(key) {
                continue;
            }
            // A key the kernel printed twice would be a second family of the same name,
            // which invalidates the whole exposition: the first one is kept.
            match value.trim().parse::<u64>() {
                Ok(n) if is_metric_name_part(key) && v.get(key).is_none() => {
                    v.counters.push((key.to_string(), n))
                }
                _ => v.rejected += 1,
            }
        }
        if lines == 0 {
            return Err(ParseError::Missing("vmstat counters"));
        }
        Ok(v)
    }

    pub fn get(&self, key: &str) -> Option<u64> {
        self.counters
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| *v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Excerpt captured on kernel 6.18.
    const KERNEL_6_18: &str = "nr_free_pages 5784627\npgmajfault 1097\npswpin 0\npswpout 0\noom_kill 0\ncompact_stall 0\ncompact_success 0\nthp_fault_alloc 12\nthp_collapse_alloc 3\nthp_underused_split_page 0\nnr_unstable 0\n";

    #[test]
    fn keeps_thp_compact_and_named_counters_only() {
        let v = Vmstat::parse(KERNEL_6_18).unwrap();
        let keys: Vec<&str> = v.counters.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(
            keys,
            [
                "pgmajfault",
                "pswpin",
                "pswpout",
                "oom_kill",
                "compact_stall",
                "compact_success",
                "thp_fault_alloc",
                "thp_collapse_alloc",
                "thp_underused_split_page"
            ]
        );
        assert_eq!(v.get("thp_collapse_alloc"), Some(3));
        assert_eq!(v.get("nr_free_pages"), None);
    }

    #[test]
    fn bad_value_and_bad_name_are_rejected() {
        let v = Vmstat::parse("thp_fault_alloc -5\nthp_Evil{x} 3\noom_kill 2\n").unwrap();
        assert_eq!(v.counters, vec![("oom_kill".to_string(), 2)]);
        assert_eq!(v.rejected, 2);
    }

    #[test]
    fn empty_is_an_error() {
        assert!(Vmstat::parse("").is_err());
    }

    #[test]
    fn a_duplicated_key_keeps_the_first_and_is_counted() {
        let v = Vmstat::parse("thp_fault_alloc 12\noom_kill 1\nthp_fault_alloc 99\n").unwrap();
        assert_eq!(v.counters.len(), 2);
        assert_eq!(v.get("thp_fault_alloc"), Some(12));
        assert_eq!(v.rejected, 1);
    }
}
