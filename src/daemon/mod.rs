//! The scan loop and the process's life: bind, scan on an interval, publish, serve, stop.

use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;

use crate::attach::Live;
use crate::collect::{own, Grouping, Scanner};
use crate::config::{self, Config};
use crate::explain;
use crate::model::derive::{derive, DeriveOptions, Snapshot};
use crate::model::state::State;
use crate::serve::auth::Web;
use crate::serve::shared::{encode, publish_all, Shared};
use crate::serve::webconfig::WebConfig;
use crate::serve::{http, listen};
use crate::source::{Reason, Source};
use reload::reload_web_config;

mod reload;
mod report;
mod trim;
pub use trim::run_trim;

/// Scanner plus what the model remembers: one `step` is scan -> derive.
pub struct Pipeline {
    scanner: Scanner,
    state: State,
    options: DeriveOptions,
    /// What the scans tell the log.
    reporter: report::Reporter,
    /// What explain's live commands attach with, and whether the canary held (proven at
    /// the first scan that needs it).
    live_tool: config::LiveTool,
    live: Option<Live>,
}

/// How old a heap reading may be and still be served. A process unchanged is read every
/// 10 deep intervals, one whose reads run out of budget every 16 at most, and candidates
/// deferred by the deep budget wait their turn scan after scan: older than 20 intervals
/// (deep or scan, the longer), and never less than ten minutes, a figure is stale.
fn heap_fresh_seconds(cfg: &Config) -> f64 {
    let interval = cfg.deep.interval.max(cfg.scan_interval).as_secs_f64();
    (interval * 20.0).max(600.0)
}

impl Pipeline {
    pub fn new(cfg: &Config) -> Result<Self, String> {
        let grouping = Grouping::from_config(&cfg.group_by)
            .map_err(|e| format!("--collector.processes.matcher-file: {e}"))?;
        Ok(Pipeline {
            scanner: Scanner::new(
                Source::new(&cfg.procfs, &cfg.sysfs),
                cfg.collectors,
                grouping,
                cfg.deep.clone(),
                cfg.reading,
            ),
            state: State::default(),
            options: DeriveOptions {
                top_k: cfg.top_k,
                max_groups: cfg.max_groups,
                heap_fresh_seconds: Some(heap_fresh_seconds(cfg)),
            },
            reporter: Default::default(),
            live_tool: cfg.live_tool,
            live: None,
        })
    }

    /// Whether explain's live commands are proven harmless on this host (the canary runs
    /// once, at the first call).
    pub fn live(&mut self) -> Live {
        let tool = self.live_tool;
        self.live
            .get_or_insert_with(|| match std::env::current_exe() {
                Ok(exe) => crate::attach::canary::verdict(tool, &exe),
                Err(e) => Live::refused(tool, &format!("this binary's path is unknown ({e})")),
            })
            .clone()
    }

    pub fn step(&mut self) -> Arc<Snapshot> {
        let sample = self.scanner.scan();
        self.reporter.scan(&sample);
        // derive consumes the state. Should it panic (a bug; scan_loop catches it), the
        // running totals stay here, kept aside (a few hundred bytes): only what is known of
        // each process is lost, and the next scans learn it again.
        let mut prev = std::mem::take(&mut self.state);
        let processes = std::mem::take(&mut prev.processes);
        self.state = prev.clone();
        prev.processes = processes;
        let (state, snapshot) = derive(prev, sample, self.options);
        self.state = state;
        Arc::new(snapshot)
    }
}

/// Fails early with a clear message when the roots cannot be read.
fn check_roots(cfg: &Config) -> Result<(), String> {
    Source::new(&cfg.procfs, &cfg.sysfs)
        .pids()
        .map(drop)
        .map_err(|e| {
            let why = match e.system_reason() {
                Reason::Unsupported => "no such directory",
                Reason::Denied => "permission denied",
                _ => "not readable",
            };
            format!("cannot read --path.procfs {}: {why}", cfg.procfs.display())
        })
}

/// `explain`: two scans `interval` apart over every process (the ones named with `--pid`
/// deep-read whatever their size, with no CPU budget: it runs once), then the diagnosis.
/// Returns what to print and the exit code (0 nothing found, 1 findings).
pub fn run_explain(cfg: &Config) -> Result<(String, i32), String> {
    let Some(ex) = &cfg.explain else {
        return Err("not an explain run".into());
    };
    check_roots(cfg)?;
    let mut cfg = cfg.clone();
    cfg.top_k = usize::MAX;
    cfg.deep.focus = ex.pids.clone();
    cfg.deep.budget = Duration::from_secs(3600);
    let mut pipeline = Pipeline::new(&cfg)?;
    // The kills still in the kernel's ring, the exporter running or not.
    pipeline.scanner.read_history();
    pipeline.step();
    std::thread::sleep(ex.interval);
    let snapshot = pipeline.step();
    // Every process the scan read is a report here (top_k unbounded).
    if let Some(gone) = ex
        .pids
        .iter()
        .find(|&&pid| !snapshot.top.iter().any(|p| p.sample.pid == pid))
    {
        return Err(format!(
            "--pid {gone}: no such process with memory (it exited, is a kernel thread, or is hidden from --path.procfs)"
        ));
    }
    let d = explain::diagnose(
        &snapshot,
        &explain::Options {
            pids: ex.pids.clone(),
            live: pipeline.live(),
        },
    );
    let out = if ex.json {
        explain::render::json(&d)
    } else {
        use std::io::IsTerminal;
        explain::render::text(&d, std::io::stdout().is_terminal())
    };
    Ok((out, d.exit_code()))
}

/// `--once`: two scans `--once.interval` apart, the text exposition of the second.
pub fn run_once(cfg: &Config) -> Result<String, String> {
    check_roots(cfg)?;
    let mut pipeline = Pipeline::new(cfg)?;
    pipeline.step();
    std::thread::sleep(cfg.once_interval);
    let (_, text) = encode(pipeline.step());
    Ok(String::from_utf8_lossy(&text).into_owned())
}

/// Connections the kernel completes and queues before the exporter accepts them. The
/// usual default, 128, overflows under a flood of a few hundred reconnecting clients, and
/// a scrape whose connection finds the queue full waits a second for its SYN to be sent
/// again; the kernel caps this at `net.core.somaxconn` (4096 by default), as Go's servers
/// (node_exporter's among them) ask for.
const LISTEN_BACKLOG: u32 = 4096;

async fn bind(address: &str) -> Result<TcpListener, String> {
    let addrs = config::socket_addrs(address)?;
    let mut last_err = None;
    for addr in addrs {
        let socket = if addr.is_ipv4() {
            tokio::net::TcpSocket::new_v4()
        } else {
            tokio::net::TcpSocket::new_v6()
        };
        let listening = socket.and_then(|s| {
            s.set_reuseaddr(true)?;
            s.bind(addr)?;
            s.listen(LISTEN_BACKLOG)
        });
        match listening {
            Ok(l) => return Ok(l),
            Err(e) => last_err = Some(e),
        }
    }
    Err(last_err.map_or_else(|| "no address".into(), |e| e.to_string()))
}

/// Runs the daemon; returns the process exit code.
pub fn run(cfg: Config) -> i32 {
    if let Err(e) = check_roots(&cfg) {
        crate::log!(Error, "cannot start", err = e);
        return 1;
    }
    let pipeline = match Pipeline::new(&cfg) {
        Ok(p) => p,
        Err(e) => {
            crate::log!(Error, "cannot start", err = e);
            return 1;
        }
    };
    let web = match &cfg.web_config_file {
        None => Ok(WebConfig::none()),
        Some(path) => WebConfig::load(path).map_err(|e| format!("--web.config.file {e}")),
    };
    let web = match web {
        Ok(w) => w,
        Err(e) => {
            crate::log!(Error, "cannot start", err = e);
            return 1;
        }
    };
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .max_blocking_threads(2)
        // The scan's thread outlives the time between scans: a new thread each scan would
        // take a pid, and a new pid makes the next scan list /proc again.
        .thread_keep_alive(
            cfg.scan_interval
                .saturating_mul(2)
                .max(Duration::from_secs(10)),
        )
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            crate::log!(Error, "cannot start the runtime", err = e);
            return 1;
        }
    };
    let watched = web.files.clone();
    let code = runtime.block_on(async move {
        let listener = match bind(&cfg.listen_address).await {
            Ok(l) => l,
            Err(e) => {
                crate::log!(
                    Error,
                    "cannot listen",
                    address = cfg.listen_address,
                    err = e
                );
                return 1;
            }
        };
        let local = listener
            .local_addr()
            .map(|a| a.to_string())
            .unwrap_or_default();
        crate::log!(
            Info,
            "listening",
            address = local,
            procfs = cfg.procfs.display(),
            interval = format!("{:?}", cfg.scan_interval),
            version = crate::config::build::VERSION,
            revision = crate::config::build::REVISION,
        );
        // Until the first scan completes: the exporter's own process, as every scan reads it.
        let first = Snapshot {
            own: Some(own::read(own::clk_tck(), own::boot_time())),
            ..Snapshot::default()
        };
        let shared = Arc::new(Shared::new(cfg.scan_interval, first));
        tokio::spawn(scan_loop(shared.clone(), pipeline, cfg.scan_interval));
        let limits = http::Limits {
            max_requests: cfg.max_requests,
            max_connections: cfg.max_connections,
            read_header_timeout: cfg.read_header_timeout,
        };
        let web = Web::new(web);
        tokio::spawn(reload_web_config(
            web.clone(),
            cfg.web_config_file.clone(),
            watched,
        ));
        let router = http::router(shared, &cfg.telemetry_path, &limits, web.clone());
        listen::serve(listener, router, limits, web, shutdown_signal()).await;
        crate::log!(Info, "shutting down");
        0
    });
    // A scan blocked in a slow /proc read must not hold the exit.
    runtime.shutdown_timeout(Duration::from_millis(200));
    code
}

async fn shutdown_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    match (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) {
        (Ok(mut term), Ok(mut int)) => {
            tokio::select! {
                _ = term.recv() => {}
                _ = int.recv() => {}
            }
        }
        _ => std::future::pending().await,
    }
}

async fn scan_loop(shared: Arc<Shared>, pipeline: Pipeline, interval: Duration) {
    let mut ticker = tokio::time::interval(interval);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut pipeline = Some(pipeline);
    loop {
        ticker.tick().await;
        let Some(mut p) = pipeline.take() else { return };
        let joined = tokio::task::spawn_blocking(move || {
            let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                let live = p.live();
                publish_all(p.step(), &live)
            }));
            (p, result)
        })
        .await;
        match joined {
            Ok((p, Ok(published))) => {
                pipeline = Some(p);
                shared.publish(published);
            }
            Ok((p, Err(_))) => {
                // A bug, never expected: keep serving the previous scan and try again.
                crate::log!(Error, "a scan panicked; serving the previous scan");
                pipeline = Some(p);
            }
            Err(e) => {
                crate::log!(Error, "scan task failed: scanning stopped", err = e);
                return;
            }
        }
    }
}
