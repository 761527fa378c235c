//! A minimal leveled logger to stderr in logfmt, node_exporter's format.

use std::sync::atomic::{AtomicU8, Ordering};

use crate::config::LogLevel;

static LEVEL: AtomicU8 = AtomicU8::new(LogLevel::Info as u8);

pub fn set_level(level: LogLevel) {
    LEVEL.store(level as u8, Ordering::Relaxed);
}

pub fn enabled(level: LogLevel) -> bool {
    level as u8 <= LEVEL.load(Ordering::Relaxed)
}

pub fn write(level: LogLevel, msg: std::fmt::Arguments) {
    if enabled(level) {
        let name = match level {
            LogLevel::Error => "error",
            LogLevel::Warn => "warn",
            LogLevel::Info => "info",
            LogLevel::Debug => "debug",
        };
        let ts = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs_f64())
            .unwrap_or(0.0);
        eprintln!("ts={ts:.3} level={name} msg={:?}", msg.to_string());
    }
}

#[macro_export]
macro_rules! log {
    ($level:ident, $($arg:tt)*) => {
        $crate::log::write($crate::config::LogLevel::$level, format_args!($($arg)*))
    };
}
