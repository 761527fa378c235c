//! `/proc/PID/stat`.

use super::ParseError;

/// The fields of `/proc/PID/stat` the exporter uses. Times are in clock ticks
/// (`sysconf(_SC_CLK_TCK)`); the sampler converts them to seconds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stat {
    /// Field 2, `comm`: between the first `(` and the **last** `)`, since a process may
    /// put parentheses, spaces and newlines in its own name.
    pub comm: String,
    /// Field 3, the state letter (`R`, `S`, `D`, `Z`, ...).
    pub state: char,
    /// Field 14, user CPU time in ticks.
    pub utime_ticks: u64,
    /// Field 15, system CPU time in ticks.
    pub stime_ticks: u64,
    /// Field 20, its threads. A process whose main thread exited while others run shows
    /// state `Z` and more than one.
    pub threads: u64,
    /// Field 22, start time in ticks after boot; with the pid it identifies a process.
    pub start_ticks: u64,
}

/// Unix time a process started: boot time plus its start in clock ticks since boot.
pub fn start_time_seconds(boot_time_seconds: f64, start_ticks: u64, clk_tck: f64) -> f64 {
    boot_time_seconds + start_ticks as f64 / clk_tck
}

impl Stat {
    /// User plus system CPU time, in seconds.
    pub fn cpu_seconds(&self, clk_tck: f64) -> f64 {
        self.utime_ticks.saturating_add(self.stime_ticks) as f64 / clk_tck
    }

    /// Unix time the process started, from the system's boot time.
    pub fn start_time_seconds(&self, boot_time_seconds: f64, clk_tck: f64) -> f64 {
        start_time_seconds(boot_time_seconds, self.start_ticks, clk_tck)
    }

    pub fn parse(text: &str) -> Result<Self, ParseError> {
        let open = text.find('(').ok_or(ParseError::Missing("comm"))?;
        let close = text.rfind(')').ok_or(ParseError::Missing("comm"))?;
        if close < open {
            return Err(ParseError::Malformed("comm"));
        }
        let comm = text[open + 1..close].to_string();
        // Field 3 is the first token after ")"; field N is token N - 3.
        let mut fields = text[close + 1..].split_ascii_whitespace();
        let number = |field: Option<&str>, what: &'static str| -> Result<u64, ParseError> {
            field
                .ok_or(ParseError::Missing(what))?
                .parse()
                .map_err(|_| ParseError::Malformed(what))
        };
        let mut chars = fields.next().ok_or(ParseError::Missing("state"))?.chars();
        let state = match (chars.next(), chars.next()) {
            (Some(c), None) if c.is_ascii_alphabetic() => c,
            _ => return Err(ParseError::Malformed("state")),
        };
        let utime_ticks = number(fields.nth(10), "utime")?; // field 14
        let stime_ticks = number(fields.next(), "stime")?; // field 15
        let threads = number(fields.nth(4), "num_threads")?; // field 20
        let start_ticks = number(fields.nth(1), "starttime")?; // field 22
        Ok(Stat {
            comm,
            state,
            utime_ticks,
            stime_ticks,
            threads,
            start_ticks,
        })
    }
}

/// `btime` of `/proc/stat`: the Unix time the system booted.
pub(crate) fn boot_time(proc_stat: &str) -> Option<u64> {
    proc_stat
        .lines()
        .find_map(|l| l.strip_prefix("btime "))
        .and_then(|v| v.trim().parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    // Captured on kernel 6.18: `sleep 600`.
    const SLEEP: &str = "4242 (sleep) S 4200 4242 4200 34816 4242 4194304 93 0 0 0 7 3 0 0 20 0 1 0 51234 5881856 256 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0 0 0 0 0 0 0 0 0\n";

    #[test]
    fn parses_times_and_start() {
        let s = Stat::parse(SLEEP).unwrap();
        assert_eq!(s.comm, "sleep");
        assert_eq!(s.state, 'S');
        assert_eq!((s.utime_ticks, s.stime_ticks, s.start_ticks), (7, 3, 51234));
    }

    #[test]
    fn comm_with_parens_spaces_and_newline_ends_at_last_paren() {
        let text = SLEEP.replace("(sleep)", "(a) S 1 (b\nc)");
        let s = Stat::parse(&text).unwrap();
        assert_eq!(s.comm, "a) S 1 (b\nc");
        assert_eq!(s.start_ticks, 51234);
    }

    #[test]
    fn truncated_and_garbage_are_errors() {
        assert!(matches!(
            Stat::parse(&SLEEP[..60]),
            Err(ParseError::Missing(_))
        ));
        assert!(Stat::parse("").is_err());
        assert!(Stat::parse(")(").is_err());
        assert!(Stat::parse("1 (x) SS 1").is_err());
        assert!(Stat::parse(&SLEEP.replace(" 51234 ", " -1 ")).is_err());
    }
}
