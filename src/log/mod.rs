//! The exporter's log: one line per event on stderr, in the Prometheus ecosystem's logfmt
//! (`ts=2026-11-23T03:04:05.678Z level=warn msg="..." key=value`) or, with
//! `--log.format=json`, one JSON object per line. Events carry their variables as fields,
//! not inside `msg`, so they can be filtered and counted.

pub mod rfc3339;

use std::fmt::Display;
use std::sync::atomic::{AtomicU8, Ordering};

/// How much the log says: each level includes the ones before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum LogLevel {
    Error,
    Warn,
    Info,
    Debug,
}

static LEVEL: AtomicU8 = AtomicU8::new(LogLevel::Info as u8);
static JSON: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

pub fn set_level(level: LogLevel) {
    LEVEL.store(level as u8, Ordering::Relaxed);
}

/// JSON lines instead of logfmt.
pub fn set_json(json: bool) {
    JSON.store(json, Ordering::Relaxed);
}

pub fn enabled(level: LogLevel) -> bool {
    level as u8 <= LEVEL.load(Ordering::Relaxed)
}

/// Now, as RFC 3339 UTC with milliseconds.
fn now() -> String {
    let d = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    rfc3339::format(d.as_secs() as i64, Some(d.subsec_millis()))
}

/// A logfmt value: bare when it is a plain token, else quoted with `"`, `\` and control
/// characters escaped.
fn logfmt_value(v: &str, out: &mut String) {
    let bare = !v.is_empty()
        && v.chars()
            .all(|c| c.is_ascii_graphic() && c != '"' && c != '=' && c != '\\');
    if bare {
        out.push_str(v);
        return;
    }
    out.push('"');
    for c in v.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() => out.push_str(&format!("\\u{{{:04x}}}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

/// Formats one event (without the newline).
pub fn line(level: LogLevel, msg: &str, fields: &[(&str, &dyn Display)], json: bool) -> String {
    let name = match level {
        LogLevel::Error => "error",
        LogLevel::Warn => "warn",
        LogLevel::Info => "info",
        LogLevel::Debug => "debug",
    };
    let ts = now();
    let pairs = [("ts", &ts as &dyn Display), ("level", &name), ("msg", &msg)];
    let all = pairs.iter().chain(fields.iter());
    if json {
        // ts, level and msg first, then the fields in their order.
        let mut out = String::from("{");
        for (i, (k, v)) in all.enumerate() {
            if i > 0 {
                out.push(',');
            }
            let quoted = |s: &str| serde_json::Value::from(s).to_string();
            out.push_str(&quoted(k));
            out.push(':');
            out.push_str(&quoted(&v.to_string()));
        }
        out.push('}');
        return out;
    }
    let mut out = String::with_capacity(128);
    for (i, (k, v)) in all.enumerate() {
        if i > 0 {
            out.push(' ');
        }
        out.push_str(k);
        out.push('=');
        logfmt_value(&v.to_string(), &mut out);
    }
    out
}

pub fn write(level: LogLevel, msg: &str, fields: &[(&str, &dyn Display)]) {
    if enabled(level) {
        eprintln!("{}", line(level, msg, fields, JSON.load(Ordering::Relaxed)));
    }
}

/// `log!(Warn, "collector failing", collector = name, reason = why)`: a message and
/// `key = value` fields (any `Display`).
#[macro_export]
macro_rules! log {
    ($level:ident, $msg:expr $(, $key:ident = $value:expr)* $(,)?) => {
        if $crate::log::enabled($crate::log::LogLevel::$level) {
            $crate::log::write(
                $crate::log::LogLevel::$level,
                &$msg,
                &[$((stringify!($key), &$value as &dyn ::std::fmt::Display)),*],
            )
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn logfmt_quotes_what_needs_it_and_json_escapes() {
        let path = "/a b/\"c\"";
        let n = 3;
        let l = line(
            LogLevel::Warn,
            "read failed",
            &[("path", &path), ("n", &n)],
            false,
        );
        let rest = l.split_once(' ').unwrap().1;
        assert_eq!(
            rest,
            r#"level=warn msg="read failed" path="/a b/\"c\"" n=3"#
        );
        assert!(l.starts_with("ts=20") && l.split(' ').next().unwrap().ends_with('Z'));
        let j = line(LogLevel::Info, "x\ny", &[("path", &path)], true);
        let v: serde_json::Value = serde_json::from_str(&j).unwrap();
        assert_eq!(v["msg"], "x\ny");
        assert_eq!(v["path"], path);
        assert_eq!(v["level"], "info");
    }
}
