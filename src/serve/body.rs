//! Response bodies: the published bytes handed out in slices, and a body that holds
//! something (an in-flight permit, a connection's request) until it is sent.

use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};

use axum::body::{Body, Bytes};
use hyper::body::{Frame, SizeHint};

/// Bytes of a response handed to the connection in slices of this size: the connection
/// asks for the next one only when it has written the last, so a scrape holds its
/// in-flight slot until its response is on the wire.
const CHUNK: usize = 64 * 1024;

/// A shared, already encoded body, served in [`CHUNK`]s without copying.
pub(super) fn chunked(bytes: Bytes) -> Body {
    Body::new(Chunks(bytes))
}

struct Chunks(Bytes);

impl hyper::body::Body for Chunks {
    type Data = Bytes;
    type Error = Infallible;

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

/// A response body that holds something (an in-flight permit, the end of a request)
/// until it is sent or dropped.
pub(super) struct Held<G> {
    pub(super) body: Body,
    pub(super) _until_sent: G,
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
