//! `/proc/loadavg`: of its fields only the one that tells that no process was created
//! since an earlier read.
//!
//! `0.00 0.01 0.05 1/123 45678`: the fifth field is the last pid handed out in the reading
//! process's pid namespace. A task created anywhere in or below that namespace takes a
//! pid in it, so while the field stays put no process can have appeared in its `/proc`.

use super::ParseError;

/// The last pid handed out.
pub fn parse(text: &str) -> Result<u64, ParseError> {
    text.split_ascii_whitespace()
        .nth(4)
        .ok_or(ParseError::Missing("last pid"))?
        .parse()
        .map_err(|_| ParseError::Malformed("last pid"))
}

#[cfg(test)]
mod tests {
    use super::*;

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
