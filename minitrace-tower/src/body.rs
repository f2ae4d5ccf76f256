//! The response body that keeps a span open until it has been sent (on a
//! server) or read (on a client), and reads gRPC's trailers on the way.

use std::borrow::Cow;
use std::fmt;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use http::{HeaderMap, StatusCode};
use http_body::{Body, Frame, SizeHint};
use minitrace::collector::SpanStatus;
use minitrace::future::run_in_span;
use minitrace::Span;

use crate::carried::{self, Carried};
use crate::grpc;
use crate::keys;

/// Which end of a call a span is: they judge HTTP statuses differently.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Side {
    /// A 5xx is the server's failure; a 4xx is the caller's.
    Server,
    /// Any 4xx or 5xx failed the call.
    Client,
}

/// Where a gRPC call's status is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Grpc {
    /// Not a gRPC call.
    No,
    /// In the trailers, still to come.
    InTrailers,
    /// Known (trailers-only, or trailers seen).
    Known,
}

/// Records a response's head on `span`: its status code and, for gRPC, a
/// `grpc-status` sent in the headers (trailers-only). Returns where the
/// gRPC status is now.
pub(crate) fn record_head(
    span: &mut Span,
    side: Side,
    status: StatusCode,
    headers: &HeaderMap,
    grpc: bool,
) -> Grpc {
    span.add_property(|| (keys::HTTP_RESPONSE_STATUS_CODE, status_code(status)));
    let failed = match side {
        Side::Server => status.is_server_error(),
        Side::Client => status.is_client_error() || status.is_server_error(),
    };
    // A gRPC call answers 200; anything else failed before gRPC did.
    if failed || (grpc && status != StatusCode::OK) {
        span.set_status(SpanStatus::error(format!("HTTP {status}")));
    }
    if !grpc {
        return Grpc::No;
    }
    if record_grpc_status(span, headers) {
        Grpc::Known
    } else {
        Grpc::InTrailers
    }
}

/// The digits of every status code `StatusCode` holds (100 to 999), each
/// code's three after the previous one's.
const CODE_DIGITS: [u8; 2700] = {
    let mut digits = [0; 2700];
    let mut code = 100;
    while code < 1000 {
        let at = (code - 100) * 3;
        digits[at] = b'0' + (code / 100) as u8;
        digits[at + 1] = b'0' + (code / 10 % 10) as u8;
        digits[at + 2] = b'0' + (code % 10) as u8;
        code += 1;
    }
    digits
};

const CODES: &str = match std::str::from_utf8(&CODE_DIGITS) {
    Ok(codes) => codes,
    Err(_) => panic!("digits are ASCII"),
};

/// A status code as its property's value, a string of the program's own:
/// nothing formatted per response.
fn status_code(status: StatusCode) -> Cow<'static, str> {
    let at = (usize::from(status.as_u16()) - 100) * 3;
    CODES.get(at..at + 3).map_or_else(|| Cow::Owned(status.as_u16().to_string()), Cow::Borrowed)
}

/// Records the `grpc-status` in `headers`, if any; whether there was one.
fn record_grpc_status(span: &mut Span, headers: &HeaderMap) -> bool {
    let Some(code) = grpc::status(headers) else { return false };
    span.add_property(|| (keys::RPC_GRPC_STATUS_CODE, code.to_string()));
    if code != 0 {
        span.set_status(SpanStatus::error(format!("gRPC {}", grpc::code_name(code))));
    }
    true
}

pin_project_lite::pin_project! {
    /// A response body that keeps its request's span open until it ends
    /// (its last frame was polled) or is dropped (sent whole, or given up
    /// on), with that span the local parent while it is polled. A gRPC
    /// response's `grpc-status` in its trailers is recorded on the span.
    ///
    /// The servers' and the clients' layers answer with it; a body that
    /// fails marks the span with an error.
    pub struct TracedBody<B> {
        #[pin]
        inner: B,
        span: Span,
        carried: Option<Arc<Carried>>,
        grpc: Grpc,
    }
}

impl<B> TracedBody<B> {
    pub(crate) fn new(inner: B, span: Span, carried: Option<Arc<Carried>>, grpc: Grpc) -> TracedBody<B> {
        TracedBody { inner, span, carried, grpc }
    }

    /// The body it wraps.
    pub fn get_ref(&self) -> &B {
        &self.inner
    }

    /// The body it wraps, ending the span now.
    pub fn into_inner(self) -> B {
        self.inner
    }
}

impl<B: fmt::Debug> fmt::Debug for TracedBody<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TracedBody")
            .field("inner", &self.inner)
            .field("span", &self.span)
            .finish_non_exhaustive()
    }
}

impl<B: Body> Body for TracedBody<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<B::Data>, B::Error>>> {
        let mut this = self.project();
        if this.inner.is_end_stream() {
            // Nothing left to send (an empty body, a `HEAD`'s): no work to
            // run under the span, which ends now.
            drop(std::mem::take(this.span));
            *this.carried = None;
            return this.inner.poll_frame(cx);
        }
        let span = &*this.span;
        let inner = this.inner.as_mut();
        let result = carried::scope(this.carried.as_ref(), || run_in_span(span, || inner.poll_frame(cx)));
        match &result {
            Poll::Ready(Some(Ok(frame))) => {
                if *this.grpc == Grpc::InTrailers {
                    if let Some(trailers) = frame.trailers_ref() {
                        if record_grpc_status(this.span, trailers) {
                            *this.grpc = Grpc::Known;
                        }
                    }
                }
                if this.inner.is_end_stream() && *this.grpc != Grpc::InTrailers {
                    // That was the last frame: the span ends now, rather
                    // than at a further poll that only learns as much.
                    drop(std::mem::take(this.span));
                    *this.carried = None;
                }
            }
            Poll::Ready(Some(Err(_))) => {
                let mut span = std::mem::take(this.span);
                span.set_status(SpanStatus::error("the body failed"));
                span.add_property(|| (keys::ERROR_TYPE, std::any::type_name::<B::Error>()));
                *this.carried = None;
            }
            Poll::Ready(None) => {
                // Sent (or read) whole: the span ends now.
                drop(std::mem::take(this.span));
                *this.carried = None;
            }
            Poll::Pending => {}
        }
        result
    }

    #[inline]
    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    #[inline]
    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
