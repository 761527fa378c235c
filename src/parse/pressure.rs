//! `/proc/pressure/memory` (kernel 4.20+ with `CONFIG_PSI`).

use super::ParseError;

/// Cumulative memory stall time, in seconds.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Pressure {
    /// `some total=`: time in which at least one task stalled on memory.
    pub some_seconds: Option<f64>,
    /// `full total=`: time in which all non-idle tasks stalled on memory at once.
    pub full_seconds: Option<f64>,
}

impl Pressure {
    pub fn parse(text: &str) -> Result<Self, ParseError> {
        let mut p = Pressure::default();
        for line in text.lines() {
            let mut words = line.split_ascii_whitespace();
            let slot = match words.next() {
                Some("some") => &mut p.some_seconds,
                Some("full") => &mut p.full_seconds,
                _ => continue,
            };
            let total = words
                .find_map(|w| w.strip_prefix("total="))
                .ok_or(ParseError::Missing("total"))?;
            let micros: u64 = total.parse().map_err(|_| ParseError::Malformed("total"))?;
            *slot = Some(micros as f64 / 1e6);
        }
        if p.some_seconds.is_none() {
            return Err(ParseError::Missing("some"));
        }
        Ok(p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn totals_in_seconds() {
        // Shape as on kernel 6.18.
        let p = Pressure::parse("some avg10=0.00 avg60=0.00 avg300=0.00 total=1500000\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=250\n").unwrap();
        assert_eq!(p.some_seconds, Some(1.5));
        assert_eq!(p.full_seconds, Some(0.00025));
    }

    #[test]
    fn bad_total_is_an_error() {
        assert!(Pressure::parse("some avg10=0.00 total=x\n").is_err());
        assert!(Pressure::parse("").is_err());
    }
}
