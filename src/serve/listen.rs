//! Accepting connections: the header-read timeout on each (which bounds the TLS handshake
//! too), HTTP/1.1 only, 16 KiB of request head, and the connection cap with its eviction
//! (`conns`).

use std::convert::Infallible;
use std::future::Future;
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::response::Response;
use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;
use tower::ServiceExt;

use crate::serve::auth::Web;
use crate::serve::body::Held;
use crate::serve::conns::{Connections, Slot};
use crate::serve::http::Limits;

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
                    crate::log!(Warn, "accept failed", err = e);
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
