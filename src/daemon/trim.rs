//! `trim --pid PID`: the live command `explain` prints for glibc hoarding.

use crate::config::{self, Config};
use crate::source::Source;

/// `trim --pid PID`: `malloc_trim(0)` in the process, once this binary's mechanism held
/// on a throw-away child. The line to print, or why it was not done.
pub fn run_trim(cfg: &Config, t: config::TrimConfig) -> Result<String, String> {
    let not_done = |why: String| format!("trim --pid {}: not done: {why}", t.pid);
    let exe = std::env::current_exe()
        .map_err(|e| not_done(format!("this binary's path is unknown ({e})")))?;
    let live = crate::attach::canary::verdict(config::LiveTool::Exporter, &exe);
    if let Some(r) = live.refused {
        return Err(not_done(r.why));
    }
    let source = Source::new(&cfg.procfs, &cfg.sysfs);
    let done =
        crate::attach::trim(&source, t.pid, t.lock_wait).map_err(|e| not_done(e.to_string()))?;
    let mib = |b: Option<u64>| {
        b.map_or("?".to_string(), |b| {
            format!("{:.1} MiB", b as f64 / 1048576.0)
        })
    };
    Ok(format!(
        "malloc_trim(0) in process {} (thread {}) returned {}; RssAnon {} -> {}",
        t.pid,
        done.tid,
        done.returned,
        mib(done.rss_anon_before_bytes),
        mib(done.rss_anon_after_bytes)
    ))
}
