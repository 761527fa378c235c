//! `/proc/PID/statm`: sizes in pages, cheap for the kernel to produce.

use super::ParseError;

/// `size resident shared` pages, the first three fields: when they are unchanged between
/// two scans, so is the memory `status`, `smaps_rollup` and `oom_score` report. An error
/// when any of them is missing or not a number.
pub fn parse(text: &str) -> Result<[u64; 3], ParseError> {
    let mut fields = text.split_ascii_whitespace().map(|f| f.parse::<u64>().ok());
    let mut next = || {
        fields
            .next()
            .flatten()
            .ok_or(ParseError::Malformed("statm size, resident or shared"))
    };
    Ok([next()?, next()?, next()?])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_three_fields_in_pages() {
        // Captured on kernel 6.18: `cat /proc/self/statm`.
        assert_eq!(parse("765 445 417 5 0 123 0\n"), Ok([765, 445, 417]));
        assert!(parse("765 445\n").is_err());
        assert!(parse("765 x 417 5 0 123 0\n").is_err());
        assert!(parse("").is_err());
    }
}
