//! `/proc/PID/statm`: sizes in pages, cheap for the kernel to produce.

/// `size resident shared` pages, the first three fields: when they are unchanged between
/// two scans, so is the memory `status`, `smaps_rollup` and `oom_score` report. `None` when
/// any of them is missing or not a number.
pub fn parse(text: &str) -> Option<[u64; 3]> {
    let mut fields = text.split_ascii_whitespace().map(|f| f.parse::<u64>().ok());
    Some([fields.next()??, fields.next()??, fields.next()??])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_three_fields_in_pages() {
        // Captured on kernel 6.18: `cat /proc/self/statm`.
        assert_eq!(parse("765 445 417 5 0 123 0\n"), Some([765, 445, 417]));
        assert_eq!(parse("765 445\n"), None);
        assert_eq!(parse("765 x 417 5 0 123 0\n"), None);
        assert_eq!(parse(""), None);
    }
}
