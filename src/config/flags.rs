//! The flags, in node_exporter's style: the one place their names, help texts and
//! defaults are written.

use std::path::PathBuf;
use std::time::Duration;

use clap::{value_parser, Arg, ArgAction, Command};

use crate::family::Collector;

#[allow(
    clippy::too_many_lines,
    reason = "the flag table: one builder call per flag"
)]
pub(super) fn command() -> Command {
    let mut cmd = Command::new("membloat_exporter")
        .version(super::build::LONG_VERSION)
        .about("Prometheus exporter that finds memory bloat on Linux hosts and warns before the OOM killer strikes.")
        .arg(Arg::new("web.listen-address").long("web.listen-address").value_name("ADDRESS")
            // Outside the fully allocated 9100-9999 exporter range.
            .default_value(":10293")
            .help("Address to listen on: HOST:PORT, [IPV6]:PORT, or :PORT for every address"))
        .arg(Arg::new("web.telemetry-path").long("web.telemetry-path").value_name("PATH")
            .default_value("/metrics").help("Path under which to expose metrics"))
        .arg(Arg::new("web.max-requests").long("web.max-requests").value_name("N")
            .default_value("40").value_parser(value_parser!(u32).range(1..))
            .help("Maximum concurrent metrics requests; more get 503"))
        .arg(Arg::new("web.max-connections").long("web.max-connections").value_name("N")
            .default_value("256").value_parser(value_parser!(u32).range(1..))
            .help("Maximum HTTP connections holding a slot; a new one first has a second (at most half the header timeout) to send its request, and four times as many may be in that grace"))
        .arg(Arg::new("web.read-header-timeout").long("web.read-header-timeout").value_name("DURATION")
            .default_value("10s").value_parser(positive_duration)
            .help("Time a client has to send request headers"))
        .arg(Arg::new("web.config.file").long("web.config.file").value_name("FILE")
            .value_parser(value_parser!(PathBuf))
            .help("Web configuration (exporter-toolkit format) enabling TLS and basic auth; re-read on SIGHUP and when it or a TLS file it names changes"))
        .arg(Arg::new("path.procfs").long("path.procfs").value_name("PATH")
            .default_value("/proc").value_parser(value_parser!(PathBuf))
            .help("procfs mountpoint"))
        .arg(Arg::new("path.sysfs").long("path.sysfs").value_name("PATH")
            .default_value("/sys").value_parser(value_parser!(PathBuf))
            .help("sysfs mountpoint"))
        .arg(Arg::new("scan.interval").long("scan.interval").value_name("DURATION")
            .default_value("10s").value_parser(positive_duration)
            .help("Time between two scans of /proc; scrapes serve the latest scan"))
        .arg(Arg::new("collector.processes.top-k").long("collector.processes.top-k").value_name("K")
            .default_value("5").value_parser(value_parser!(usize))
            .help("Export per-process series (with pid) for the K largest processes by RSS, the K with the highest oom_score, and the K with the most hoarded and regrown bytes"))
        .arg(Arg::new("collector.processes.group-by").long("collector.processes.group-by").value_name("KIND")
            .default_value("comm").value_parser(["comm", "cgroup", "matcher"])
            .help("Group processes by name, by memory cgroup, or by --collector.processes.matcher-file"))
        .arg(Arg::new("collector.processes.max-groups").long("collector.processes.max-groups").value_name("N")
            .default_value("500").value_parser(value_parser!(u32).range(1..))
            .help("Export at most N groups, the largest by Pss (shared pages once); the rest are summed into group=\"other\" (a local user who starts processes of many names cannot grow the series count)"))
        .arg(Arg::new("collector.processes.matcher-file").long("collector.processes.matcher-file").value_name("FILE")
            .value_parser(value_parser!(PathBuf))
            .help("process-exporter-style YAML (process_names) naming the groups; implies --collector.processes.group-by=matcher"))
        .arg(Arg::new("collector.processes.deep-interval").long("collector.processes.deep-interval").value_name("DURATION")
            .default_value("60s").value_parser(parse_duration)
            .help("Minimum time between two full /proc/PID/smaps reads of one candidate process (heap, arenas, commit)"))
        .arg(Arg::new("collector.processes.deep-budget").long("collector.processes.deep-budget").value_name("DURATION")
            .default_value("200ms").value_parser(positive_duration)
            .help("CPU time the smaps reads may take per scan, and none starts once the deep reads have taken --collector.processes.read-timeout; the rest wait for the next scan"))
        .arg(Arg::new("collector.processes.deep-min-size").long("collector.processes.deep-min-size").value_name("SIZE")
            .default_value("64MiB").value_parser(parse_size)
            .help("Deep-read a process when its RssAnon reaches SIZE, or its unbacked address space (VmSize - VmRSS) 8 x SIZE"))
        .arg(Arg::new("collector.processes.heap-walk").long("collector.processes.heap-walk")
            .action(ArgAction::SetTrue).overrides_with("no-collector.processes.heap-walk")
            .help("Measure what glibc holds free in the heaps of deep-read processes by following its arenas and free lists in their memory (process_vm_readv, /proc/PID/mem) and page presence (/proc/PID/pagemap) (default: enabled)"))
        .arg(Arg::new("no-collector.processes.heap-walk").long("no-collector.processes.heap-walk")
            .action(ArgAction::SetTrue).overrides_with("collector.processes.heap-walk")
            .help("Do not read process memory: hoarding stays a suspicion from /proc/PID/smaps"))
        .arg(Arg::new("collector.processes.rollup-refresh").long("collector.processes.rollup-refresh").value_name("N")
            .default_value("60").value_parser(value_parser!(u64).range(1..))
            .help("Re-read stat, status, smaps_rollup and the oom files of a process whose statm did not move every N scans, staggered (CPU time, Pss as sharers come and go); 1 reads every file every scan"))
        .arg(Arg::new("collector.processes.kept-descriptors").long("collector.processes.kept-descriptors").value_name("N")
            .value_parser(value_parser!(u64))
            .help("Keep at most N processes' statm open between scans (default: 2048, within the open-files limit; 0: none). Each kept one saves about 6 us of CPU a scan and holds about 4 KiB of kernel memory, charged to the exporter's memory cgroup, until the process ends"))
        .arg(Arg::new("collector.processes.readers").long("collector.processes.readers").value_name("N")
            .default_value("1").value_parser(value_parser!(u64).range(1..=64))
            .help("Threads that read /proc/PID files; a thread stuck in one process's read is replaced (up to 4 more)"))
        .arg(Arg::new("collector.processes.read-timeout").long("collector.processes.read-timeout").value_name("DURATION")
            .default_value("5s").value_parser(positive_duration)
            .help("A scan stops waiting for a read of a system file or of a process that has taken this long, counts it (reason=\"timeout\") and does not start that read again until it returns"))
        .arg(Arg::new("log.level").long("log.level").value_name("LEVEL")
            .default_value("info").value_parser(["error", "warn", "info", "debug"])
            .help("Only log messages with the given severity or above"))
        .arg(Arg::new("log.format").long("log.format").value_name("FORMAT")
            .default_value("logfmt").value_parser(["logfmt", "json"])
            .help("Output format of log messages: logfmt or json"))
        .arg(Arg::new("explain.live-tool").long("explain.live-tool").value_name("TOOL")
            .default_value("exporter").value_parser(["exporter", "gdb", "none"])
            .help("What explain's live commands (malloc_trim(0) in a running process) attach with: this binary's trim subcommand, or gdb; each is first proven harmless on this host on a throw-away child blocked in system calls, and no command is printed where it is not. none prints no live command"))
        .arg(Arg::new("once").long("once").action(ArgAction::SetTrue)
            .help("Scan twice, --once.interval apart, print the text exposition to stdout and exit"))
        .arg(Arg::new("once.interval").long("once.interval").value_name("DURATION")
            .default_value("1s").value_parser(parse_duration)
            .help("Time between the two scans of --once"));
    let explain = Command::new("explain")
        .about("Scan the host twice and print what to act on: where memory went, how close the OOM killer is, and what to change. Exit 0: nothing found, 1: findings, 2: bad usage")
        .arg(Arg::new("explain.interval").long("explain.interval").value_name("DURATION")
            .default_value("2s").value_parser(parse_duration)
            .help("Time between the two scans (idleness and regrowth are judged over it)"))
        .arg(Arg::new("pid").long("pid").value_name("PID").action(ArgAction::Append)
            .value_parser(value_parser!(u32).range(1..))
            .help("Explain this process in depth, whatever its size (repeatable); only these processes' findings are shown"))
        .arg(Arg::new("format").long("format").value_name("FORMAT")
            .default_value("text").value_parser(["text", "json"])
            .help("text for a terminal, json for tickets and bots (schema membloat.explain/v1)"));
    let trim = Command::new("trim")
        .about("Call malloc_trim(0) in a running glibc process, so that glibc gives back the free pages it holds, and leave the process as it was: its thread's registers, whole extended state and interrupted system call. Proven first on a throw-away child on this host. Exit 0: trimmed, 1: not done (the reason in one line), 2: bad usage")
        .arg(Arg::new("trim.pid").long("pid").value_name("PID").required(true)
            .value_parser(value_parser!(u32).range(1..))
            .help("The process to trim"))
        .arg(Arg::new("trim.lock-wait").long("trim.lock-wait").value_name("DURATION")
            .default_value("5s").value_parser(positive_duration)
            .help("How long the call may wait for a heap's lock before it is abandoned, holding none, and the thread put back as it was"));
    for c in Collector::all() {
        let (name, what) = (c.as_str(), c.what());
        let on: &'static str = Box::leak(format!("collector.{name}").into_boxed_str());
        let off: &'static str = Box::leak(format!("no-collector.{name}").into_boxed_str());
        cmd = cmd
            .arg(
                Arg::new(on)
                    .long(on)
                    .action(ArgAction::SetTrue)
                    .overrides_with(off)
                    .help(format!(
                        "Enable the {name} collector: {what} (default: enabled)"
                    )),
            )
            .arg(
                Arg::new(off)
                    .long(off)
                    .action(ArgAction::SetTrue)
                    .overrides_with(on)
                    .help(format!("Disable the {name} collector")),
            );
    }
    // Every flag also works after `explain`.
    cmd.mut_args(|a| a.global(true))
        .subcommand(explain)
        .subcommand(trim)
}

/// Parses `"10s"`, `"250ms"`, `"1m"`, `"1h"` (Prometheus-style single-unit durations).
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (number, unit) = s.split_at(split);
    let n: u64 = number
        .parse()
        .map_err(|_| format!("{s:?} is not a duration like 10s, 500ms, 1m"))?;
    let ms = match unit {
        "ms" => Some(n),
        "s" => n.checked_mul(1000),
        "m" => n.checked_mul(60_000),
        "h" => n.checked_mul(3_600_000),
        _ => None,
    }
    .ok_or_else(|| format!("{s:?} is not a duration like 10s, 500ms, 1m"))?;
    Ok(Duration::from_millis(ms))
}

/// Parses `"64MiB"`, `"1GiB"`, `"512KiB"` or a plain number of bytes.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (number, unit) = s.split_at(split);
    let n: u64 = number
        .parse()
        .map_err(|_| format!("{s:?} is not a size like 64MiB"))?;
    let shift = match unit {
        "" | "B" => 0,
        "KiB" => 10,
        "MiB" => 20,
        "GiB" => 30,
        _ => {
            return Err(format!(
                "{s:?} is not a size like 64MiB (units B, KiB, MiB, GiB)"
            ))
        }
    };
    n.checked_mul(1 << shift)
        .ok_or_else(|| format!("{s:?} is too large"))
}

fn positive_duration(s: &str) -> Result<Duration, String> {
    match parse_duration(s)? {
        d if d.is_zero() => Err("must be more than 0".into()),
        d => Ok(d),
    }
}
