//! What a scan tells the log: one warning when a collector starts failing and one line
//! when it recovers; a warning once for each partial problem of a working collector (a
//! capability, a mount option, a kernel feature: none changes by itself); and at debug
//! level one line per scan. Never a line per scan at the default level.

use std::collections::BTreeSet;

use crate::collect::Sample;
use crate::family::Collector;
use crate::log::LogLevel;
use crate::source::{own, Reason};

#[derive(Default)]
pub(crate) struct Reporter {
    /// Collectors whose last scan failed.
    failing: BTreeSet<Collector>,
    /// (collector, reason) pairs already warned about.
    warned: BTreeSet<(Collector, Reason)>,
    warned_walk: bool,
    /// The exporter holds CAP_SYS_PTRACE (root does): denied reads are not its fault.
    ptrace: Option<bool>,
}

/// Why a collector failed this scan: the first failure reason it counted.
fn failure(sample: &Sample, c: Collector) -> Option<Reason> {
    [
        Reason::Timeout,
        Reason::Denied,
        Reason::Hidden,
        Reason::Malformed,
        Reason::Io,
    ]
    .into_iter()
    .find(|&r| sample.errors.get(&(c, r)).is_some_and(|&n| n > 0))
}

/// What to do about a reason, for the operator reading the warning.
fn fix(c: Collector, r: Reason, ptrace: bool) -> &'static str {
    // A unit says what to do about its own failures first.
    if let Collector::Unit(name) = c {
        let own = crate::units::named(name).and_then(|u| u.fixes.iter().find(|f| f.0 == r));
        if let Some(&(_, fix)) = own {
            return fix;
        }
    }
    match (c, r) {
        (Collector::Processes, Reason::Denied) if ptrace => "none needed: even with CAP_SYS_PTRACE the kernel refuses some processes (another user namespace, or a process that disabled ptrace); their Pss and AnonHugePages are left out",
        (Collector::Processes, Reason::Denied) => "grant CAP_SYS_PTRACE: reading other users' memory maps needs it; until then their Pss and AnonHugePages are left out",
        (_, Reason::Hidden) => "grant CAP_SYS_PTRACE or add the exporter to the proc mount's gid=: /proc is mounted with hidepid and other users' processes are not listed at all",
        (_, Reason::Denied) => "check --path.procfs, --path.sysfs and the container's mounts: the exporter may not read this source",
        (_, Reason::Unsupported) => "none needed: the kernel does not provide this source (an older kernel, or the feature is off); its metrics are absent",
        (_, Reason::Timeout) => "look for a process stuck in D state or a hung mount: a read did not return within --collector.processes.read-timeout",
        (_, Reason::Malformed) => "report the file's content: the kernel printed something the exporter does not understand",
        _ => "see membloat_scan_errors_total",
    }
}

impl Reporter {
    pub fn scan(&mut self, sample: &Sample) {
        let ptrace = *self.ptrace.get_or_insert_with(own::has_cap_sys_ptrace);
        for run in &sample.collectors {
            let c = run.name;
            if !run.success && self.failing.insert(c) {
                let reason = failure(sample, c);
                crate::log!(
                    Warn,
                    "collector failing",
                    collector = c.as_str(),
                    reason = reason.map_or("unknown", Reason::as_str),
                    fix = reason.map_or("see membloat_scan_errors_total", |r| fix(c, r, ptrace)),
                );
                if let Some(r) = reason {
                    self.warned.insert((c, r));
                }
            } else if run.success && self.failing.remove(&c) {
                crate::log!(Info, "collector recovered", collector = c.as_str());
            }
        }
        for (&(c, r), &n) in &sample.errors {
            let partial = matches!(r, Reason::Denied | Reason::Hidden | Reason::Unsupported);
            if n == 0 || !partial || !self.warned.insert((c, r)) {
                continue;
            }
            let msg = if r == Reason::Unsupported {
                "source not on this kernel"
            } else {
                "source partly unreadable"
            };
            // Denied reads while holding CAP_SYS_PTRACE need no action: a debug line.
            let level = if ptrace && (c, r) == (Collector::Processes, Reason::Denied) {
                LogLevel::Debug
            } else {
                LogLevel::Warn
            };
            if crate::log::enabled(level) {
                let (collector, reason, fix) = (c.as_str(), r.as_str(), fix(c, r, ptrace));
                crate::log::write(
                    level,
                    msg,
                    &[
                        ("collector", &collector),
                        ("reason", &reason),
                        ("count", &n),
                        ("fix", &fix),
                    ],
                );
            }
        }
        let unreadable = sample.deep.map_or(0, |d| d.reads.glibc.get("unreadable"));
        if unreadable > 0 && !self.warned_walk {
            self.warned_walk = true;
            crate::log!(
                Warn,
                "heap walk could not open process memory",
                processes = unreadable,
                fix = "grant CAP_SYS_PTRACE and CAP_DAC_READ_SEARCH to read other users' /proc/PID/mem and pagemap; until then their hoarding stays suspected (membloat_heap_walks_total{outcome=\"unreadable\"})",
            );
        }
        if crate::log::enabled(LogLevel::Debug) {
            let errors: u64 = sample.errors.values().sum();
            let failed: Vec<&str> = sample
                .collectors
                .iter()
                .filter(|r| !r.success)
                .map(|r| r.name.as_str())
                .collect();
            let deep = sample.deep.map_or(0, |d| d.covered);
            crate::log!(
                Debug,
                "scan",
                duration = format!("{:.4}s", sample.duration_seconds),
                processes = sample.processes.len(),
                deep = deep,
                errors = errors,
                failed = failed.join(","),
            );
        }
    }
}
