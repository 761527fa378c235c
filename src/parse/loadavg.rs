//! `/proc/loadavg` and `/proc/stat`: of their fields only those that tell whether a
//! process was created since an earlier read.
//!
//! `0.00 0.01 0.05 1/123 45678`: the fifth field of `loadavg` is the last pid handed out
//! in the reading process's pid namespace. A task created anywhere in or below that
//! namespace takes a pid in it, so while the field stays put no process can have appeared
//! in its `/proc`. `/proc/stat`'s `processes` line counts every task the host made since
//! boot, in every namespace.

use super::ParseError;

/// The last pid handed out.
pub fn parse(text: &str) -> Result<u64, ParseError> {
    text.split_ascii_whitespace()
        .nth(4)
        .ok_or(ParseError::Missing("last pid"))?
        .parse()
        .map_err(|_| ParseError::Malformed("last pid"))
}

/// The tasks made since boot: `/proc/stat`'s `processes` line.
pub fn forks(text: &str) -> Result<u64, ParseError> {
    let line = text
        .lines()
        .find_map(|l| l.strip_prefix("processes "))
        .ok_or(ParseError::Missing("processes"))?;
    line.trim()
        .parse()
        .map_err(|_| ParseError::Malformed("processes"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tasks_made_since_boot() {
        let stat = "cpu  1 2 3\nintr 5 0 0\nctxt 99\nbtime 1\nprocesses 1162137\nprocs_running 1\n";
        assert_eq!(forks(stat), Ok(1162137));
        assert_eq!(forks("cpu 1\n"), Err(ParseError::Missing("processes")));
        assert_eq!(
            forks("processes -1\n"),
            Err(ParseError::Malformed("processes"))
        );
    }

    #[test]
    fn the_last_pid() {
        assert_eq!(parse("0.08 0.03 0.01 2/187 123456\n"), Ok(123456));
    }

    #[test]
    fn a_file_without_it_is_an_error() {
        assert_eq!(parse(""), Err(ParseError::Missing("last pid")));
        assert_eq!(
            parse("0.08 0.03 0.01 2/187"),
            Err(ParseError::Missing("last pid"))
        );
        assert_eq!(
            parse("0.08 0.03 0.01 2/187 -5"),
            Err(ParseError::Malformed("last pid"))
        );
    }
}
