//! `/proc/PID/limits`: the soft limit on open files, for `process_max_fds`.

use super::ParseError;

/// The soft `Max open files` limit; an error when absent, `unlimited` or not a number.
pub(crate) fn max_open_files(text: &str) -> Result<u64, ParseError> {
    let rest = text
        .lines()
        .find_map(|l| l.strip_prefix("Max open files"))
        .ok_or(ParseError::Missing("Max open files"))?;
    rest.split_whitespace()
        .next()
        .and_then(|n| n.parse().ok())
        .ok_or(ParseError::Malformed("soft limit of open files"))
}

#[cfg(test)]
mod tests {
    #[test]
    fn soft_limit_of_open_files() {
        let text = "Limit                     Soft Limit           Hard Limit           Units     \n\
                    Max processes             95863                95863                processes \n\
                    Max open files            1024                 524288               files     \n";
        assert_eq!(super::max_open_files(text), Ok(1024));
        assert!(super::max_open_files("Max open files  unlimited  unlimited  files\n").is_err());
        assert!(super::max_open_files("").is_err());
    }
}
