//! Pure parsers: text of one `/proc` or `/sys` file in, typed values in base units out.
//!
//! Nothing here touches the filesystem, so every fixture test is one line on a string.
//! Parsers never panic on any input. A field that is present but unreadable or absurd
//! (`SwapFree: 18446744073708600176 kB` overflows when turned into bytes) is dropped and
//! counted in the struct's `rejected` field, so the caller can report it as malformed.

pub mod buddyinfo;
pub mod cgroup;
pub mod hsperfdata;
pub mod kmsg;
pub mod kubelet;
pub mod limits;
pub mod loadavg;
pub mod meminfo;
pub mod memory_stat;
pub mod mountinfo;
pub mod owners;
pub mod pressure;
pub mod smaps;
pub mod smaps_rollup;
pub mod sockstat;
pub mod stat;
pub mod statm;
pub mod status;
pub mod sysfs;
pub mod vmstat;
pub mod zoneinfo;

/// Whole-file parse failure: the file had none of the shape it must have. Every parser
/// here has one shape, `fn(&str) -> Result<T, ParseError>`, and what it rejected within a
/// file it could read is counted in `T` (`rejected`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    #[error("missing {0}")]
    Missing(&'static str),
    #[error("malformed {0}")]
    Malformed(&'static str),
    /// Nothing to parse: a file the kernel leaves empty on purpose (`smaps_rollup` of a
    /// process without memory). Not malformed.
    #[error("empty")]
    Empty,
    /// A file its writer has not finished (a JVM's perf data while it starts): tried
    /// again at a later read. Not malformed.
    #[error("not ready: {0}")]
    NotReady(&'static str),
}

/// Splits `Key:   value` lines; lines without a colon are skipped. ASCII trimming only:
/// these files are read for every process on every scan.
pub(crate) fn key_values(text: &str) -> impl Iterator<Item = (&str, &str)> {
    text.split('\n')
        .filter_map(|line| line.split_once(':'))
        .map(|(k, v)| (k.trim_ascii(), v.trim_ascii()))
}

/// `"1234 kB"` (or a bare number) in kibibytes -> bytes; `None` when unparseable or when
/// the byte count would not fit in a u64 (an absurd value).
pub(crate) fn kib_to_bytes(value: &str) -> Option<u64> {
    let number = value.strip_suffix("kB").unwrap_or(value).trim_ascii();
    number.parse::<u64>().ok()?.checked_mul(1024)
}

/// A single unsigned integer, as in `/proc/PID/oom_score` or a sysctl file.
pub(crate) fn parse_u64(text: &str) -> Result<u64, ParseError> {
    text.trim()
        .parse()
        .map_err(|_| ParseError::Malformed("integer"))
}

/// A single signed integer, as in `/proc/PID/oom_score_adj`.
pub(crate) fn parse_i64(text: &str) -> Result<i64, ParseError> {
    text.trim()
        .parse()
        .map_err(|_| ParseError::Malformed("integer"))
}

/// True when `name` is safe to splice into a metric name: `[a-z0-9_]`, not empty.
pub(crate) fn is_metric_name_part(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kib_to_bytes_converts_and_rejects_overflow() {
        assert_eq!(kib_to_bytes("4 kB"), Some(4096));
        assert_eq!(kib_to_bytes("0"), Some(0));
        assert_eq!(kib_to_bytes("18446744073708600176 kB"), None);
        assert_eq!(kib_to_bytes("-1 kB"), None);
        assert_eq!(kib_to_bytes("kB"), None);
    }

    #[test]
    fn single_integers() {
        assert_eq!(parse_u64("666\n"), Ok(666));
        assert_eq!(parse_i64("-1000\n"), Ok(-1000));
        assert!(parse_u64("").is_err());
        assert!(parse_u64("12x").is_err());
    }
}
