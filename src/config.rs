//! Command-line flags, in node_exporter's style, validated once into a [`Config`].

use std::path::PathBuf;
use std::time::Duration;

use clap::ArgMatches;

use crate::family::Collector;
use crate::log::LogLevel;
use crate::units::Collectors;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GroupBy {
    /// The process name (`comm`).
    Comm,
    /// The memory cgroup path (a container, a systemd unit).
    Cgroup,
    /// A process-exporter-style matcher file.
    Matcher(PathBuf),
}

/// The deep tier: full `/proc/PID/smaps` of candidate processes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeepConfig {
    /// Minimum time between two deep reads of the same process.
    pub interval: Duration,
    /// CPU time the deep tier may spend per scan (one process is always read).
    pub budget: Duration,
    /// A process is a candidate when RssAnon >= this, or VmSize - VmRSS >= 8 x this.
    pub min_bytes: u64,
    /// Walk the glibc heaps of candidates through /proc/PID/mem and pagemap.
    pub heap_walk: bool,
    /// Deep-read these processes whatever their size (`explain --pid`).
    pub focus: Vec<u32>,
}

/// How the processes collector reads `/proc/PID`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadConfig {
    /// Re-read an unchanged process's smaps_rollup every this many scans (1: every scan).
    pub rollup_refresh: u64,
    /// Reader threads.
    pub readers: usize,
    /// A read of one process that takes longer is left behind for this scan.
    pub timeout: Duration,
    /// At most this many `statm` descriptors kept open between scans (`None`: 2,048,
    /// within the open-files limit).
    pub kept_descriptors: Option<u64>,
    /// `--scan.interval`: how many scans a quiet process may rest between two reads.
    pub scan_interval: Duration,
}

#[derive(Debug, Clone)]
pub struct Config {
    pub listen_address: String,
    pub telemetry_path: String,
    pub max_requests: usize,
    pub max_connections: usize,
    pub read_header_timeout: Duration,
    /// `--web.config.file`: TLS and basic auth (exporter-toolkit format).
    pub web_config_file: Option<PathBuf>,
    pub procfs: PathBuf,
    pub sysfs: PathBuf,
    pub scan_interval: Duration,
    pub collectors: Collectors,
    pub top_k: usize,
    /// Groups exported at most; the rest are folded into `other`.
    pub max_groups: usize,
    pub group_by: GroupBy,
    pub deep: DeepConfig,
    pub reading: ReadConfig,
    pub log_level: LogLevel,
    /// `--log.format=json`: one JSON object per line instead of logfmt.
    pub log_json: bool,
    /// The `explain` subcommand, when given.
    pub explain: Option<ExplainConfig>,
    /// What explain's live commands attach with.
    pub live_tool: LiveTool,
    /// The `trim` subcommand, when given.
    pub trim: Option<TrimConfig>,
    pub once: bool,
    pub once_interval: Duration,
}

/// What a live command (`malloc_trim(0)` in a running process) attaches with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LiveTool {
    /// This binary's `trim` subcommand: ptrace, with the thread's whole extended state
    /// saved and written back.
    Exporter,
    /// gdb's inferior call.
    Gdb,
    /// No live command is printed.
    None,
}

impl LiveTool {
    fn of(name: &str) -> LiveTool {
        match name {
            "gdb" => LiveTool::Gdb,
            "none" => LiveTool::None,
            _ => LiveTool::Exporter,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            LiveTool::Exporter => "exporter",
            LiveTool::Gdb => "gdb",
            LiveTool::None => "none",
        }
    }
}

/// `membloat_exporter trim --pid PID`: `malloc_trim(0)` called in a running process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TrimConfig {
    pub pid: u32,
    /// How long the call may wait for a heap's lock before it is abandoned.
    pub lock_wait: Duration,
}

impl TrimConfig {
    fn of(t: &ArgMatches) -> TrimConfig {
        TrimConfig {
            pid: t.get_one::<u32>("trim.pid").copied().unwrap_or_default(),
            lock_wait: t
                .get_one::<Duration>("trim.lock-wait")
                .copied()
                .unwrap_or_default(),
        }
    }
}

/// `membloat_exporter explain`: a diagnosis of the live host instead of a server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExplainConfig {
    /// Time between the two scans.
    pub interval: Duration,
    /// Explain these processes in depth (deep-read whatever their size); empty: all.
    pub pids: Vec<u32>,
    pub json: bool,
}

pub mod build;
mod flags;
use flags::command;
pub use flags::{parse_duration, parse_size};

/// A flag error: exit 2 with this one line.
#[derive(Debug)]
pub enum FlagsOutcome {
    /// `--help` or `--version`: print to stdout, exit 0.
    Print(String),
    /// A bad flag: print to stderr, exit 2.
    Bad(String),
}

impl Config {
    /// Parses the process arguments (including `argv[0]`).
    pub fn from_args<I, T>(args: I) -> Result<Config, FlagsOutcome>
    where
        I: IntoIterator<Item = T>,
        T: Into<std::ffi::OsString> + Clone,
    {
        let m = command().try_get_matches_from(args).map_err(|e| {
            use clap::error::ErrorKind::*;
            match e.kind() {
                DisplayHelp | DisplayVersion | DisplayHelpOnMissingArgumentOrSubcommand => {
                    FlagsOutcome::Print(e.render().to_string())
                }
                _ => FlagsOutcome::Bad(
                    e.render()
                        .to_string()
                        .lines()
                        .next()
                        .unwrap_or("error: bad flags")
                        .to_string(),
                ),
            }
        })?;
        Self::from_matches(&m).map_err(FlagsOutcome::Bad)
    }

    fn from_matches(m: &ArgMatches) -> Result<Config, String> {
        let text = |id: &str| m.get_one::<String>(id).cloned().unwrap_or_default();
        let path = |id: &str| m.get_one::<PathBuf>(id).cloned().unwrap_or_default();
        let duration = |id: &str| m.get_one::<Duration>(id).copied().unwrap_or_default();
        // Every flag has its default in command(), the one place defaults are written.
        let count = |id: &str| m.get_one::<u32>(id).copied().unwrap_or_default() as usize;
        let u64_of = |id: &str| m.get_one::<u64>(id).copied().unwrap_or_default();
        let enabled = |name: &str| !m.get_flag(&format!("no-collector.{name}"));

        let listen_address = text("web.listen-address");
        socket_addrs(&listen_address).map_err(|e| {
            format!("error: invalid value '{listen_address}' for '--web.listen-address': {e}")
        })?;
        let telemetry_path = text("web.telemetry-path");
        if !telemetry_path.starts_with('/') || telemetry_path == "/" || telemetry_path == "/healthz"
        {
            return Err(format!("error: invalid value '{telemetry_path}' for '--web.telemetry-path': must start with / and not be / or /healthz"));
        }
        let group_by = match (text("collector.processes.group-by").as_str(), m.get_one::<PathBuf>("collector.processes.matcher-file")) {
            (_, Some(file)) => GroupBy::Matcher(file.clone()),
            ("cgroup", None) => GroupBy::Cgroup,
            ("matcher", None) => return Err("error: '--collector.processes.group-by=matcher' needs '--collector.processes.matcher-file'".into()),
            _ => GroupBy::Comm,
        };
        let log_level = match text("log.level").as_str() {
            "error" => LogLevel::Error,
            "warn" => LogLevel::Warn,
            "debug" => LogLevel::Debug,
            // explain reports partial coverage in its output; its log keeps to errors
            // unless asked.
            _ if m.subcommand_matches("explain").is_some()
                && m.value_source("log.level") == Some(clap::parser::ValueSource::DefaultValue) =>
            {
                LogLevel::Error
            }
            _ => LogLevel::Info,
        };
        Ok(Config {
            listen_address,
            telemetry_path,
            max_requests: count("web.max-requests"),
            max_connections: count("web.max-connections"),
            read_header_timeout: duration("web.read-header-timeout"),
            web_config_file: m.get_one::<PathBuf>("web.config.file").cloned(),
            procfs: path("path.procfs"),
            sysfs: path("path.sysfs"),
            scan_interval: duration("scan.interval"),
            collectors: {
                let mut c = Collectors::none();
                for one in Collector::all() {
                    c.set(one, enabled(one.as_str()));
                }
                c
            },
            top_k: m
                .get_one::<usize>("collector.processes.top-k")
                .copied()
                .unwrap_or_default(),
            max_groups: m
                .get_one::<u32>("collector.processes.max-groups")
                .map_or(1, |&n| n as usize),
            group_by,
            deep: DeepConfig {
                interval: duration("collector.processes.deep-interval"),
                budget: duration("collector.processes.deep-budget"),
                min_bytes: u64_of("collector.processes.deep-min-size"),
                heap_walk: !m.get_flag("no-collector.processes.heap-walk"),
                focus: Vec::new(),
            },
            reading: ReadConfig {
                rollup_refresh: u64_of("collector.processes.rollup-refresh"),
                readers: u64_of("collector.processes.readers") as usize,
                timeout: duration("collector.processes.read-timeout"),
                kept_descriptors: m
                    .get_one::<u64>("collector.processes.kept-descriptors")
                    .copied(),
                scan_interval: duration("scan.interval"),
            },
            log_level,
            log_json: text("log.format") == "json",
            explain: m.subcommand_matches("explain").map(|e| ExplainConfig {
                interval: e
                    .get_one::<Duration>("explain.interval")
                    .copied()
                    .unwrap_or_default(),
                pids: e
                    .get_many::<u32>("pid")
                    .into_iter()
                    .flatten()
                    .copied()
                    .collect(),
                json: e.get_one::<String>("format").is_some_and(|f| f == "json"),
            }),
            live_tool: LiveTool::of(&text("explain.live-tool")),
            trim: m.subcommand_matches("trim").map(TrimConfig::of),
            once: m.get_flag("once"),
            once_interval: duration("once.interval"),
        })
    }
}

/// The addresses to bind for `--web.listen-address`: `:PORT` means every IPv6 and IPv4
/// address.
pub fn socket_addrs(address: &str) -> Result<Vec<std::net::SocketAddr>, String> {
    if let Some(port) = address.strip_prefix(':') {
        let port: u16 = port.parse().map_err(|_| "bad port".to_string())?;
        return Ok(vec![
            (std::net::Ipv6Addr::UNSPECIFIED, port).into(),
            (std::net::Ipv4Addr::UNSPECIFIED, port).into(),
        ]);
    }
    use std::net::ToSocketAddrs;
    let addrs: Vec<_> = address
        .to_socket_addrs()
        .map_err(|e| e.to_string())?
        .collect();
    if addrs.is_empty() {
        return Err("resolves to no address".into());
    }
    Ok(addrs)
}

#[cfg(test)]
mod tests;
