//! The HTTP side: `/metrics`, `/`, `/healthz`. Handlers copy bytes that the scan loop
//! encoded; nothing here reads `/proc`.
//!
//! Served through hyper directly rather than `axum::serve`, which sets no header-read
//! timeout: here every connection has one (covering the TLS handshake too), HTTP/1.1
//! only, with a cap on open connections, 16 KiB of request head and no request bodies
//! beyond 4 KiB. `--web.config.file` adds TLS and bcrypt basic auth (`webconfig`).

use std::collections::HashSet;
use std::convert::Infallible;
use std::future::Future;
use std::hash::{BuildHasher, RandomState};
use std::os::fd::AsRawFd;
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
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_rustls::TlsAcceptor;

use tower::ServiceExt;

use crate::serve::conns::{Connections, Slot};
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
    users: Option<Arc<Users>>,
    headers: Arc<Vec<(HeaderName, HeaderValue)>>,
}

/// The longest a basic auth check waits for its turn before the request gets 503.
const AUTH_QUEUE_WAIT: Duration = Duration::from_secs(5);

/// Successful basic auth checks remembered, at most this many (then forgotten at once).
const REMEMBERED_MAX: usize = 1024;

/// The web configuration in force: read per request (authentication, headers) and per
/// connection (TLS), and swapped whole by a reload, so a rotated certificate or a changed
/// password takes effect without a restart and a bad file never replaces a good one.
pub struct Web {
    active: Latest<Active>,
    /// Basic auth checks that passed: a scrape pays bcrypt once, not every time.
    remembered: Remembered,
    /// One bcrypt check at a time, first come first served: failed checks can take one
    /// CPU at most, however many clients guess.
    checks: Arc<Semaphore>,
}

/// Successful checks, as the exporter toolkit keeps them, but only as a keyed 128-bit
/// digest of (user, password, hash), never the password. The hash is part of the key, so
/// a reload that changes a user's hash or removes the user checks afresh.
struct Remembered {
    keys: (RandomState, RandomState),
    seen: std::sync::Mutex<HashSet<u128>>,
}

impl Remembered {
    fn new() -> Self {
        Remembered {
            keys: (RandomState::new(), RandomState::new()),
            seen: std::sync::Mutex::new(HashSet::new()),
        }
    }

    fn key(&self, user: &str, password: &str, hash: &str) -> u128 {
        let half = |k: &RandomState| k.hash_one((user, password, hash)) as u128;
        (half(&self.keys.0) << 64) | half(&self.keys.1)
    }

    fn contains(&self, key: u128) -> bool {
        let seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        seen.contains(&key)
    }

    fn insert(&self, key: u128) {
        let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        if seen.len() >= REMEMBERED_MAX {
            seen.clear();
        }
        seen.insert(key);
    }
}

struct Active {
    guard: Guard,
    tls: Option<TlsAcceptor>,
}

impl Web {
    pub fn new(config: WebConfig) -> Arc<Web> {
        Arc::new(Web {
            active: Latest::new(Active::from(config)),
            remembered: Remembered::new(),
            checks: Arc::new(Semaphore::new(1)),
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
            users: users.map(Arc::new),
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

/// A response body that holds something (an in-flight permit, the end of a request)
/// until it is sent or dropped.
struct Held<G> {
    body: Body,
    _until_sent: G,
}

impl<G: Unpin> hyper::body::Body for Held<G> {
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

enum Auth {
    Passed,
    Denied,
    Busy,
}

/// Basic auth: a remembered success passes at once, without bcrypt and without waiting
/// behind anyone; anything else waits its turn for the one bcrypt check at a time.
async fn authorize(web: &Web, guard: &Guard, headers: &HeaderMap) -> Auth {
    let Some(users) = &guard.users else {
        return Auth::Passed;
    };
    let Some((user, password)) = basic_credentials(headers) else {
        return Auth::Denied;
    };
    let key = web.remembered.key(&user, &password, users.hash_of(&user));
    if web.remembered.contains(key) {
        return Auth::Passed;
    }
    let turn = tokio::time::timeout(AUTH_QUEUE_WAIT, web.checks.clone().acquire_owned());
    let Ok(Ok(turn)) = turn.await else {
        return Auth::Busy;
    };
    // The same credentials may have passed while this one waited.
    if web.remembered.contains(key) {
        return Auth::Passed;
    }
    let users = users.clone();
    // The turn is held by the check itself, so a client that hangs up does not free it
    // for another check while bcrypt still runs.
    let passed = tokio::task::spawn_blocking(move || {
        let _turn = turn;
        users.check(&user, &password)
    })
    .await
    .unwrap_or(false);
    if passed {
        web.remembered.insert(key);
        Auth::Passed
    } else {
        Auth::Denied
    }
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
    ([(header::CONTENT_TYPE, content_type)], chunked(body)).into_response()
}

/// Bytes of a response handed to the connection in slices of this size: the connection
/// asks for the next one only when it has written the last, so a scrape holds its
/// in-flight slot until its response is on the wire.
const CHUNK: usize = 64 * 1024;

/// A shared, already encoded body, served in [`CHUNK`]s without copying.
fn chunked(bytes: Bytes) -> Body {
    Body::new(Chunks(bytes))
}

struct Chunks(Bytes);

impl hyper::body::Body for Chunks {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        if self.0.is_empty() {
            return Poll::Ready(None);
        }
        let n = self.0.len().min(CHUNK);
        Poll::Ready(Some(Ok(Frame::data(self.0.split_to(n)))))
    }

    fn is_end_stream(&self) -> bool {
        self.0.is_empty()
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.0.len() as u64)
    }
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
    Html(format!(
        "<!DOCTYPE html>\n<html><head><title>membloat_exporter</title></head><body>\n\
         <h1>membloat_exporter {}</h1>\n<p>Finds memory bloat on Linux hosts and warns before the OOM killer strikes.</p>\n\
         <ul><li><a href=\"{path}\">{path}</a>: metrics</li><li><a href=\"/explain\">/explain</a>: what to act on, from the latest scan (JSON with Accept: application/json)</li><li><a href=\"/healthz\">/healthz</a>: 200 while scans complete</li></ul>\n\
         </body></html>\n",
        env!("CARGO_PKG_VERSION")
    ))
}

/// Accepts connections until `shutdown` resolves. At the connection cap a connection
/// still waiting for its request head is evicted to make room (`conns`); each connection
/// gets the header-read timeout, which also bounds the TLS handshake.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    limits: Limits,
    web: Arc<Web>,
    shutdown: impl Future<Output = ()>,
) {
    let open = Connections::new(limits.max_connections);
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.read_header_timeout)
        .max_buf_size(16 * 1024);
    let builder = Arc::new(builder);
    tokio::pin!(shutdown);
    loop {
        let (stream, peer) = tokio::select! {
            _ = &mut shutdown => return,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    // EMFILE and friends: back off instead of spinning.
                    crate::log!(Warn, "accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let Some(slot) = open.admit(peer.ip(), Some(stream.as_raw_fd())) else {
            drop(stream);
            continue;
        };
        let slot = Arc::new(slot);
        let service = tracked(router.clone(), slot.clone());
        let builder = builder.clone();
        let tls = web.active().tls.clone();
        let handshake_timeout = limits.read_header_timeout;
        tokio::spawn(async move {
            let served = async {
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
            };
            // Dropping the connection closes it.
            tokio::select! {
                _ = served => {}
                _ = slot.evicted() => {}
            }
        });
    }
}

/// The router, telling the connection's slot when each request starts and when its
/// response has been sent.
fn tracked(
    router: Router,
    slot: Arc<Slot>,
) -> impl hyper::service::Service<
    hyper::Request<hyper::body::Incoming>,
    Response = Response,
    Error = Infallible,
    Future = impl Future<Output = Result<Response, Infallible>> + Send,
> + Clone
       + Send
       + 'static {
    hyper::service::service_fn(move |request: hyper::Request<hyper::body::Incoming>| {
        slot.request_started();
        let ended = RequestEnded(slot.clone());
        let response = router.clone().oneshot(request.map(Body::new));
        async move {
            let response = response.await?;
            Ok(response.map(|body| {
                Body::new(Held {
                    body,
                    _until_sent: ended,
                })
            }))
        }
    })
}

/// Marks the end of a request when the response body is dropped (sent, or abandoned).
struct RequestEnded(Arc<Slot>);

impl Drop for RequestEnded {
    fn drop(&mut self) {
        self.0.request_ended();
    }
}

async fn connection<I, S>(builder: &hyper::server::conn::http1::Builder, io: I, service: S)
where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    S: hyper::service::HttpService<hyper::body::Incoming>,
    S::ResBody: 'static,
    <S::ResBody as hyper::body::Body>::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let _ = builder.serve_connection(TokioIo::new(io), service).await;
}
