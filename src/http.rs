//! The HTTP side: `/metrics`, `/`, `/healthz`. Handlers copy bytes that the scan loop
//! encoded; nothing here reads `/proc`.
//!
//! Served through hyper directly rather than `axum::serve`, which sets no header-read
//! timeout: here every connection has one, HTTP/1.1 only, with a cap on open connections.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

use crate::daemon::Shared;
use crate::expose;

/// Limits of the HTTP server.
#[derive(Debug, Clone)]
pub struct Limits {
    pub max_requests: usize,
    pub max_connections: usize,
    pub read_header_timeout: Duration,
}

#[derive(Clone)]
struct AppState {
    shared: Arc<Shared>,
    in_flight: Arc<Semaphore>,
    telemetry_path: Arc<str>,
}

pub fn router(shared: Arc<Shared>, telemetry_path: &str, limits: &Limits) -> Router {
    let state = AppState {
        shared,
        in_flight: Arc::new(Semaphore::new(limits.max_requests)),
        telemetry_path: telemetry_path.into(),
    };
    Router::new()
        .route("/", get(landing))
        .route(telemetry_path, get(metrics))
        .route("/healthz", get(healthz))
        .with_state(state)
}

async fn metrics(State(app): State<AppState>, headers: HeaderMap) -> Response {
    let Ok(_permit) = app.in_flight.try_acquire() else {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            "too many concurrent scrapes\n",
        )
            .into_response();
    };
    let latest = app.shared.latest();
    let accept = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let (content_type, body) = if expose::wants_openmetrics(accept) {
        (expose::OPENMETRICS_CONTENT_TYPE, latest.openmetrics.clone())
    } else {
        (expose::TEXT_CONTENT_TYPE, latest.text.clone())
    };
    ([(header::CONTENT_TYPE, content_type)], Body::from(body)).into_response()
}

async fn healthz(State(app): State<AppState>) -> Response {
    match app.shared.scan_age() {
        Some(age) if age <= app.shared.stale_after() => (StatusCode::OK, "ok\n").into_response(),
        Some(age) => (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("last scan completed {:.1}s ago\n", age.as_secs_f64()),
        )
            .into_response(),
        None => (StatusCode::SERVICE_UNAVAILABLE, "no scan completed yet\n").into_response(),
    }
}

async fn landing(State(app): State<AppState>) -> Html<String> {
    let path = &app.telemetry_path;
    Html(format!(
        "<!DOCTYPE html>\n<html><head><title>membloat_exporter</title></head><body>\n\
         <h1>membloat_exporter {}</h1>\n<p>Finds memory bloat on Linux hosts and warns before the OOM killer strikes.</p>\n\
         <ul><li><a href=\"{path}\">{path}</a>: metrics</li><li><a href=\"/healthz\">/healthz</a>: 200 while scans complete</li></ul>\n\
         </body></html>\n",
        env!("CARGO_PKG_VERSION")
    ))
}

/// Accepts connections until `shutdown` resolves. Connections past the cap are closed at
/// once; each connection gets the header-read timeout.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    limits: Limits,
    shutdown: impl Future<Output = ()>,
) {
    let open = Arc::new(Semaphore::new(limits.max_connections));
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.read_header_timeout)
        .max_buf_size(16 * 1024);
    let builder = Arc::new(builder);
    tokio::pin!(shutdown);
    loop {
        let stream = tokio::select! {
            _ = &mut shutdown => return,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(e) => {
                    // EMFILE and friends: back off instead of spinning.
                    crate::log!(Warn, "accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let Ok(permit) = open.clone().try_acquire_owned() else {
            drop(stream);
            continue;
        };
        let service = TowerToHyperService::new(router.clone());
        let builder = builder.clone();
        tokio::spawn(async move {
            let _ = builder
                .serve_connection(TokioIo::new(stream), service)
                .await;
            drop(permit);
        });
    }
}
