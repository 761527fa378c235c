//! Accepting connections: a short grace for a new connection's head before it takes a
//! slot, the header-read timeout on each (which bounds the grace and the TLS handshake
//! too), HTTP/1.1 only, 16 KiB of request head, and the connection cap with its eviction
//! (`conns`).

use std::convert::Infallible;
use std::future::Future;
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpStream;
use tokio::time::Instant;

use axum::body::Body;
use axum::response::Response;
use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;
use tower::ServiceExt;

use crate::serve::auth::Web;
use crate::serve::body::Held;
use crate::serve::conns::{head_complete, Connections, Slot, HEAD_PEEK_BYTES};
use crate::serve::http::Limits;

/// How long a new connection may take to send its whole head before it takes a slot as
/// any waiting connection (at most half the header timeout): ample for a client that
/// sends its request with the connection, even one descheduled on a loaded node.
const GRACE: Duration = Duration::from_secs(1);

/// Accepts connections until `shutdown` resolves. A new connection waits its grace for a
/// whole head, holding no slot; at the connection cap a connection still waiting for its
/// request head is evicted to make room (`conns`). The header-read timeout counts from
/// the accept, and also bounds the TLS handshake.
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
                    crate::log!(Warn, "accept failed", err = e);
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let accepted = Instant::now();
        let arrival = open.arrive(peer.ip());
        let router = router.clone();
        let builder = builder.clone();
        let tls = web.active().tls.clone();
        let timeout = limits.read_header_timeout;
        tokio::spawn(async move {
            let grace = GRACE.min(timeout / 2);
            let ready = tokio::select! {
                ready = first_head(&stream, accepted + grace) => ready,
                _ = arrival.dropped() => return,
            };
            let Some(ready) = ready else { return };
            let Some(slot) = arrival.admit(Some(stream.as_raw_fd()), ready) else {
                return;
            };
            let slot = Arc::new(slot);
            let service = tracked(router, slot.clone());
            // What is left of the header timeout after the grace.
            let left = timeout.saturating_sub(accepted.elapsed());
            let mut builder = (*builder).clone();
            builder.header_read_timeout(left);
            let served = async {
                match tls {
                    None => connection(&builder, stream, service).await,
                    Some(acceptor) => {
                        let handshake = tokio::time::timeout(left, acceptor.accept(stream));
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

/// Waits until `deadline` for a whole request head (or TLS record) in the socket, without
/// reading it: `Some(true)` when it came, `Some(false)` when the deadline came first or
/// the head is larger than a peek holds, `None` when the client closed or failed. Part of
/// a head is looked at again after a pause that doubles (5 ms to 200 ms), not in a spin:
/// a peeked socket stays readable.
async fn first_head(stream: &TcpStream, deadline: Instant) -> Option<bool> {
    let mut buf = vec![0u8; HEAD_PEEK_BYTES];
    let mut pause = Duration::from_millis(5);
    loop {
        match tokio::time::timeout_at(deadline, stream.peek(&mut buf)).await {
            Err(_) => return Some(false),
            Ok(Err(_) | Ok(0)) => return None,
            Ok(Ok(n)) if head_complete(&buf[..n]) => return Some(true),
            Ok(Ok(n)) if n == buf.len() => return Some(false),
            Ok(Ok(_)) if Instant::now() >= deadline => return Some(false),
            Ok(Ok(_)) => {
                tokio::time::sleep_until((Instant::now() + pause).min(deadline)).await;
                pause = (pause * 2).min(Duration::from_millis(200));
            }
        }
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
