//! The HTTP side: `/metrics`, `/`, `/healthz`. Handlers copy bytes that the scan loop
//! encoded; nothing here reads `/proc`.
//!
//! Served through hyper directly rather than `axum::serve`, which sets no header-read
//! timeout: here every connection has one (covering the TLS handshake too), HTTP/1.1
//! only, with a cap on open connections, 16 KiB of request head and no request bodies
//! beyond 4 KiB. `--web.config.file` adds TLS and bcrypt basic auth (`webconfig`).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::Request;
use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderName, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use base64::Engine;
use hyper::body::{Frame, SizeHint};
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;
use tokio::sync::{Mutex, OwnedSemaphorePermit, Semaphore};
use tokio_rustls::TlsAcceptor;

use crate::serve::negotiate;
use crate::serve::shared::{Latest, Shared};
use crate::serve::webconfig::{Users, WebConfig};

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

/// Scrapes in flight: from the request's arrival (before authentication) until its
/// response body is sent.
#[derive(Clone)]
struct InFlight {
    permits: Arc<Semaphore>,
    telemetry_path: Arc<str>,
}

/// What `--web.config.file` asks of every request.
#[derive(Clone, Default)]
pub struct Guard {
    /// Basic auth users; checks run one at a time so bcrypt cannot exhaust the CPU.
    users: Option<Arc<(Users, Mutex<()>)>>,
    headers: Arc<Vec<(HeaderName, HeaderValue)>>,
}

/// The web configuration in force: read per request (authentication, headers) and per
/// connection (TLS), and swapped whole by a reload, so a rotated certificate or a changed
/// password takes effect without a restart and a bad file never replaces a good one.
pub struct Web {
    active: Latest<Active>,
}

struct Active {
    guard: Guard,
    tls: Option<TlsAcceptor>,
}

impl Web {
    pub fn new(config: WebConfig) -> Arc<Web> {
        Arc::new(Web {
            active: Latest::new(Active::from(config)),
        })
    }

    /// Puts `config` in force for the next requests and connections.
    pub fn set(&self, config: WebConfig) {
        self.active.set(Active::from(config));
    }

    fn active(&self) -> Arc<Active> {
        self.active.get()
    }
}

impl From<WebConfig> for Active {
    fn from(c: WebConfig) -> Active {
        Active {
            guard: Guard::new(c.users, &c.headers),
            tls: c.tls.map(TlsAcceptor::from),
        }
    }
}

impl Guard {
    pub fn new(users: Option<Users>, headers: &[(String, String)]) -> Guard {
        let headers = headers
            .iter()
            .filter_map(|(k, v)| {
                Some((
                    HeaderName::try_from(k).ok()?,
                    HeaderValue::try_from(v).ok()?,
                ))
            })
            .collect();
        Guard {
            users: users.map(|u| Arc::new((u, Mutex::new(())))),
            headers: Arc::new(headers),
        }
    }
}

pub fn router(shared: Arc<Shared>, telemetry_path: &str, limits: &Limits, web: Arc<Web>) -> Router {
    let state = AppState {
        shared,
        telemetry_path: telemetry_path.into(),
    };
    let in_flight = InFlight {
        permits: Arc::new(Semaphore::new(limits.max_requests)),
        telemetry_path: telemetry_path.into(),
    };
    // The later layer is the outer one: the in-flight cap comes before authentication,
    // so a flood of scrapes is refused at once instead of queueing on bcrypt.
    Router::new()
        .route("/", get(landing))
        .route(telemetry_path, get(metrics))
        .route("/healthz", get(healthz))
        .route("/explain", get(explain))
        .with_state(state)
        .layer(axum::middleware::from_fn_with_state(web, check_request))
        .layer(axum::middleware::from_fn_with_state(
            in_flight,
            limit_in_flight,
        ))
}

/// 503 at once beyond `--web.max-requests` concurrent scrapes of the telemetry path.
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
            _permit: permit,
        }),
    )
}

/// A response body that holds an in-flight permit until it is sent or dropped.
struct Held {
    body: Body,
    _permit: OwnedSemaphorePermit,
}

impl hyper::body::Body for Held {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

/// Rejects oversized bodies (413) and missing or wrong credentials (401), and adds the
/// configured response headers.
async fn check_request(
    axum::extract::State(web): axum::extract::State<Arc<Web>>,
    request: Request,
    next: Next,
) -> Response {
    let guard = web.active().guard.clone();
    let mut response = if body_too_large(request.headers()) {
        (StatusCode::PAYLOAD_TOO_LARGE, "request body too large\n").into_response()
    } else if !authorized(&guard, request.headers()).await {
        (
            StatusCode::UNAUTHORIZED,
            [(header::WWW_AUTHENTICATE, "Basic")],
            "Unauthorized\n",
        )
            .into_response()
    } else {
        next.run(request).await
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

async fn authorized(guard: &Guard, headers: &HeaderMap) -> bool {
    let Some(users) = &guard.users else {
        return true;
    };
    let Some((user, password)) = basic_credentials(headers) else {
        return false;
    };
    let _one_at_a_time = users.1.lock().await;
    let users = users.clone();
    tokio::task::spawn_blocking(move || users.0.check(&user, &password))
        .await
        .unwrap_or(false)
}

/// `Authorization: Basic base64(user:password)`.
fn basic_credentials(headers: &HeaderMap) -> Option<(String, String)> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, encoded) = value.split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(encoded.trim())
        .ok()?;
    let (user, password) = std::str::from_utf8(&decoded).ok()?.split_once(':')?;
    Some((user.to_string(), password.to_string()))
}

async fn metrics(State(app): State<AppState>, headers: HeaderMap) -> Response {
    let latest = app.shared.latest();
    let accept = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let (content_type, body) = if negotiate::wants_openmetrics(accept) {
        (
            negotiate::OPENMETRICS_CONTENT_TYPE,
            latest.openmetrics.clone(),
        )
    } else {
        (negotiate::TEXT_CONTENT_TYPE, latest.text.clone())
    };
    ([(header::CONTENT_TYPE, content_type)], Body::from(body)).into_response()
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
        let body = Body::from(latest.explain_json.clone());
        ([(header::CONTENT_TYPE, "application/json")], body).into_response()
    } else {
        let body = Body::from(latest.explain_text.clone());
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
    Html(format!(
        "<!DOCTYPE html>\n<html><head><title>membloat_exporter</title></head><body>\n\
         <h1>membloat_exporter {}</h1>\n<p>Finds memory bloat on Linux hosts and warns before the OOM killer strikes.</p>\n\
         <ul><li><a href=\"{path}\">{path}</a>: metrics</li><li><a href=\"/explain\">/explain</a>: what to act on, from the latest scan (JSON with Accept: application/json)</li><li><a href=\"/healthz\">/healthz</a>: 200 while scans complete</li></ul>\n\
         </body></html>\n",
        env!("CARGO_PKG_VERSION")
    ))
}

/// Accepts connections until `shutdown` resolves. Connections past the cap are closed at
/// once; each connection gets the header-read timeout, which also bounds the TLS
/// handshake.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    limits: Limits,
    web: Arc<Web>,
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
        let tls = web.active().tls.clone();
        let handshake_timeout = limits.read_header_timeout;
        tokio::spawn(async move {
            match tls {
                None => connection(&builder, stream, service).await,
                Some(acceptor) => {
                    let handshake =
                        tokio::time::timeout(handshake_timeout, acceptor.accept(stream));
                    if let Ok(Ok(stream)) = handshake.await {
                        connection(&builder, stream, service).await;
                    }
                }
            }
            drop(permit);
        });
    }
}

async fn connection<I>(
    builder: &hyper::server::conn::http1::Builder,
    io: I,
    service: TowerToHyperService<Router>,
) where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let _ = builder.serve_connection(TokioIo::new(io), service).await;
}
