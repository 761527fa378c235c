//! What the scan loop publishes and the HTTP handlers serve: the latest scan, encoded once
//! per scan in both expositions, and its diagnosis. A scrape only copies these bytes.

use std::io::Write;
use std::sync::{Arc, OnceLock, RwLock};
use std::time::{Duration, Instant};

use axum::body::Bytes;

use crate::explain;
use crate::expose;
use crate::family::Collector;
use crate::model::derive::Snapshot;

/// The latest scan, encoded once in both formats, so a scrape only copies bytes; each
/// compressed once, by the first scrape that asks for it (a Prometheus asks for one
/// format, and scrapes less often than a short scan interval); and its diagnosis for
/// `/explain`, rendered once likewise.
pub struct Published {
    pub openmetrics: Bytes,
    pub text: Bytes,
    openmetrics_gzip: OnceLock<Bytes>,
    text_gzip: OnceLock<Bytes>,
    pub explain_text: Bytes,
    pub explain_json: Bytes,
    pub completed_at: Option<Instant>,
    /// Why `/healthz` fails although the scan completed.
    pub trouble: Option<String>,
}

impl Published {
    /// The OpenMetrics exposition gzipped, compressed at its first use.
    pub(crate) fn openmetrics_gzip(&self) -> &Bytes {
        self.openmetrics_gzip
            .get_or_init(|| gzip(&self.openmetrics))
    }

    /// The text exposition gzipped, compressed at its first use.
    pub(crate) fn text_gzip(&self) -> &Bytes {
        self.text_gzip.get_or_init(|| gzip(&self.text))
    }
}

/// The fastest level: a third of the default's CPU, and an exposition of repeated names
/// compresses nearly as well (59 KB to 11.6 KB on the test machine).
fn gzip(data: &[u8]) -> Bytes {
    let mut out = flate2::write::GzEncoder::new(
        Vec::with_capacity(data.len() / 4),
        flate2::Compression::fast(),
    );
    // Writing to a Vec cannot fail.
    let _ = out.write_all(data);
    Bytes::from(out.finish().unwrap_or_default())
}

/// A value read by many and replaced whole by one writer: readers take an `Arc` and never
/// wait on the writer's work; a panic elsewhere never makes it unreadable.
pub struct Latest<T>(RwLock<Arc<T>>);

impl<T> Latest<T> {
    pub fn new(value: T) -> Self {
        Latest(RwLock::new(Arc::new(value)))
    }

    pub fn get(&self) -> Arc<T> {
        match self.0.read() {
            Ok(v) => v.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    pub fn set(&self, value: T) {
        let value = Arc::new(value);
        match self.0.write() {
            Ok(mut slot) => *slot = value,
            Err(poisoned) => *poisoned.into_inner() = value,
        }
    }
}

/// What the scan loop and the HTTP handlers share.
pub struct Shared {
    published: Latest<Published>,
    scan_interval: Duration,
}

impl Shared {
    /// Serves `first` until the first scan completes: the exporter's own `process_*`
    /// metrics and its build info from the first response on.
    pub fn new(scan_interval: Duration, first: Snapshot) -> Self {
        let (openmetrics, text) = encode(Arc::new(first));
        Shared {
            published: Latest::new(Published {
                openmetrics_gzip: OnceLock::new(),
                text_gzip: OnceLock::new(),
                openmetrics,
                text,
                // /explain answers 503 until the first scan completes.
                explain_text: Bytes::new(),
                explain_json: Bytes::new(),
                completed_at: None,
                trouble: None,
            }),
            scan_interval,
        }
    }

    pub fn latest(&self) -> Arc<Published> {
        self.published.get()
    }

    pub(crate) fn publish(&self, p: Published) {
        self.published.set(p);
    }

    /// `/healthz` fails once no scan completed for three intervals (at least 30 s).
    pub(crate) fn stale_after(&self) -> Duration {
        (self.scan_interval * 3).max(Duration::from_secs(30))
    }
}

/// Both expositions of a snapshot.
pub fn encode(snapshot: Arc<Snapshot>) -> (Bytes, Bytes) {
    let om = expose::openmetrics(snapshot);
    let text = expose::text_from_openmetrics(&om);
    (Bytes::from(om), Bytes::from(text))
}

/// Everything a scan publishes: both expositions and the diagnosis in text and JSON.
pub fn publish_all(snapshot: Arc<Snapshot>, live: &crate::attach::Live) -> Published {
    let d = explain::diagnose(
        &snapshot,
        &explain::Options {
            live: live.clone(),
            ..explain::Options::default()
        },
    );
    let trouble = trouble(&snapshot);
    let (openmetrics, text) = encode(snapshot);
    Published {
        openmetrics_gzip: OnceLock::new(),
        text_gzip: OnceLock::new(),
        openmetrics,
        text,
        explain_text: Bytes::from(explain::render::text(&d, false)),
        explain_json: Bytes::from(explain::render::json(&d)),
        completed_at: Some(Instant::now()),
        trouble,
    }
}

/// A completed scan that is no use: the processes collector is on but read no process
/// (every reader stuck, `/proc` unreadable). The exporter's own process is always there
/// to read, so none at all is never a quiet host.
fn trouble(s: &Snapshot) -> Option<String> {
    let ran = s.collectors.iter().any(|c| c.name == Collector::Processes);
    match s.processes_scanned {
        _ if !ran => None,
        Some(n) if n > 0 => None,
        Some(_) => Some("the last scan read no process\n".into()),
        None => Some("the processes collector failed in the last scan\n".into()),
    }
}
