//! The HTTP side: `/metrics`, `/`, `/healthz`. Handlers copy bytes that the scan loop
//! encoded; nothing here reads `/proc`.
//!
//! Served by `listen` through hyper directly rather than `axum::serve`, which sets no
//! header-read timeout. Here: the cap on concurrent scrapes, no request bodies beyond
//! 4 KiB, and authentication (`auth`) before anything else.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::Request;
use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::middleware::Next;
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use tokio::sync::Semaphore;

use crate::serve::auth::{authorize, Auth, Web};
use crate::serve::body::{chunked, Held};
use crate::serve::negotiate;
use crate::serve::shared::Shared;

/// Largest request body accepted; scrapes have none.
const MAX_BODY_BYTES: u64 = 4096;

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
    telemetry_path: Arc<str>,
}

/// Scrapes in flight: from the end of authentication until the last slice of the
/// response is handed to the connection.
#[derive(Clone)]
struct InFlight {
    permits: Arc<Semaphore>,
    telemetry_path: Arc<str>,
}

pub(crate) fn router(
    shared: Arc<Shared>,
    telemetry_path: &str,
    limits: &Limits,
    web: Arc<Web>,
) -> Router {
    let state = AppState {
        shared,
        telemetry_path: telemetry_path.into(),
    };
    let in_flight = InFlight {
        permits: Arc::new(Semaphore::new(limits.max_requests)),
        telemetry_path: telemetry_path.into(),
    };
    // The later layer is the outer one: authentication comes first, so only requests
    // that passed it hold in-flight slots, and clients without the password cannot take
    // them from the scraper; they wait for bcrypt on a queue of their own.
    Router::new()
        .route("/", get(landing))
        .route(telemetry_path, get(metrics))
        .route("/healthz", get(healthz))
        .route("/explain", get(explain))
        .with_state(state)
        .layer(axum::middleware::from_fn_with_state(
            in_flight,
            limit_in_flight,
        ))
        .layer(axum::middleware::from_fn_with_state(web, check_request))
}

/// 503 at once beyond `--web.max-requests` concurrent scrapes of the telemetry path that
/// passed authentication.
async fn limit_in_flight(
    axum::extract::State(in_flight): axum::extract::State<InFlight>,
    request: Request,
    next: Next,
) -> Response {
    // /explain is served from the same published scan and shares the cap.
    let path = request.uri().path();
    if path != &*in_flight.telemetry_path && path != "/explain" {
        return next.run(request).await;
    }
    let Ok(permit) = in_flight.permits.clone().try_acquire_owned() else {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            "too many concurrent scrapes\n",
        )
            .into_response();
    };
    let (parts, body) = next.run(request).await.into_parts();
    Response::from_parts(
        parts,
        Body::new(Held {
            body,
            _until_sent: permit,
        }),
    )
}

/// Rejects oversized bodies (413), missing or wrong credentials (401) and checks that
/// could not get their turn (503), and adds the configured response headers.
async fn check_request(
    axum::extract::State(web): axum::extract::State<Arc<Web>>,
    request: Request,
    next: Next,
) -> Response {
    let guard = web.active().guard.clone();
    let mut response = if body_too_large(request.headers()) {
        (StatusCode::PAYLOAD_TOO_LARGE, "request body too large\n").into_response()
    } else {
        match authorize(&web, &guard, request.headers()).await {
            Auth::Passed => next.run(request).await,
            Auth::Denied => (
                StatusCode::UNAUTHORIZED,
                [(header::WWW_AUTHENTICATE, "Basic")],
                "Unauthorized\n",
            )
                .into_response(),
            Auth::Busy => (
                StatusCode::SERVICE_UNAVAILABLE,
                "too many authentication checks waiting\n",
            )
                .into_response(),
        }
    };
    for (name, value) in guard.headers.iter() {
        response.headers_mut().insert(name.clone(), value.clone());
    }
    response
}

fn body_too_large(headers: &HeaderMap) -> bool {
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .map(|v| v.to_str().ok().and_then(|s| s.parse::<u64>().ok()));
    match declared {
        Some(Some(n)) => n > MAX_BODY_BYTES,
        Some(None) => true,
        None => headers.contains_key(header::TRANSFER_ENCODING),
    }
}

async fn metrics(State(app): State<AppState>, headers: HeaderMap) -> Response {
    let latest = app.shared.latest();
    let accept = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let om = negotiate::wants_openmetrics(accept);
    let gzip = headers
        .get(header::ACCEPT_ENCODING)
        .and_then(|v| v.to_str().ok())
        .is_some_and(negotiate::accepts_gzip);
    let (content_type, body) = match (om, gzip) {
        (true, false) => (negotiate::OPENMETRICS_CONTENT_TYPE, &latest.openmetrics),
        (true, true) => (
            negotiate::OPENMETRICS_CONTENT_TYPE,
            latest.openmetrics_gzip(),
        ),
        (false, false) => (negotiate::TEXT_CONTENT_TYPE, &latest.text),
        (false, true) => (negotiate::TEXT_CONTENT_TYPE, latest.text_gzip()),
    };
    crate::log!(
        Debug,
        "scrape",
        format = if om { "openmetrics" } else { "text" },
        encoding = if gzip { "gzip" } else { "identity" },
        scan_age = format!(
            "{:.1}s",
            latest
                .completed_at
                .map_or(0.0, |t| t.elapsed().as_secs_f64())
        ),
    );
    let headers = [
        (header::CONTENT_TYPE, content_type),
        (header::VARY, "Accept, Accept-Encoding"),
    ];
    let mut response = (headers, chunked(body.clone())).into_response();
    if gzip {
        let gz = header::HeaderValue::from_static("gzip");
        response.headers_mut().insert(header::CONTENT_ENCODING, gz);
    }
    response
}

/// The latest scan's diagnosis: JSON when the client asks for it, else text.
async fn explain(State(app): State<AppState>, headers: HeaderMap) -> Response {
    let latest = app.shared.latest();
    if latest.completed_at.is_none() {
        return (StatusCode::SERVICE_UNAVAILABLE, "no scan completed yet\n").into_response();
    }
    let json = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|a| negotiate::accepts(a, "application/json"));
    if json {
        let body = chunked(latest.explain_json.clone());
        ([(header::CONTENT_TYPE, "application/json")], body).into_response()
    } else {
        let body = chunked(latest.explain_text.clone());
        ([(header::CONTENT_TYPE, "text/plain; charset=utf-8")], body).into_response()
    }
}

async fn healthz(State(app): State<AppState>) -> Response {
    let latest = app.shared.latest();
    match latest.completed_at.map(|t| t.elapsed()) {
        Some(age) if age <= app.shared.stale_after() => match &latest.trouble {
            None => (StatusCode::OK, "ok\n").into_response(),
            Some(why) => (StatusCode::SERVICE_UNAVAILABLE, why.clone()).into_response(),
        },
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
    let latest = app.shared.latest();
    // The scan's age and health, as /healthz judges them (its text is the exporter's own).
    let scan = match latest.completed_at.map(|t| t.elapsed()) {
        None => "no scan completed yet".to_string(),
        Some(age) => {
            let health = latest.trouble.as_deref().map_or("healthy".into(), |t| {
                let t = t.trim().replace('&', "&amp;").replace('<', "&lt;");
                format!("unhealthy: {t}")
            });
            format!(
                "latest scan completed {:.1} s ago; {health}",
                age.as_secs_f64()
            )
        }
    };
    Html(format!(
        "<!DOCTYPE html>\n<html><head><title>membloat_exporter</title></head><body>\n\
         <h1>membloat_exporter {}</h1>\n<p>Finds memory bloat on Linux hosts and warns before the OOM killer strikes.</p>\n\
         <p>{scan}.</p>\n\
         <ul><li><a href=\"{path}\">{path}</a>: metrics</li><li><a href=\"/explain\">/explain</a>: what to act on, from the latest scan (JSON with Accept: application/json)</li><li><a href=\"/healthz\">/healthz</a>: 200 while scans complete</li></ul>\n\
         </body></html>\n",
        env!("CARGO_PKG_VERSION")
    ))
}
