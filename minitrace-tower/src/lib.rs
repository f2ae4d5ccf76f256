//! Tower middlewares for minitrace: a trace per request on servers, and a
//! span per call on clients, carried between services by W3C trace context
//! (`traceparent`, `tracestate`) and minitrace's breadcrumbs
//! ([`minitrace_remote::breadcrumbs`]).
//!
//! - [`ServerLayer`], for servers: axum (`Router::layer`), tonic
//!   (`Server::builder().layer(..)`) and hyper (through `hyper-util`'s
//!   `TowerToHyperService`), or any `Service<http::Request<_>>`.
//! - [`ClientLayer`], for clients that are tower services: a tonic
//!   `Channel`, a hyper client. [`ClientCall`] is the same behaviour for
//!   any other client (`minitrace-reqwest` is one).
//!
//! Like every library of minitrace, this one depends on minitrace without
//! its `enable` feature: the application's `enable` turns it on.
//!
//! # The server
//!
//! For each request, [`ServerLayer`]:
//!
//! 1. reads its `traceparent`, `tracestate` and breadcrumb with
//!    [`breadcrumbs::extract`]. A
//!    malformed `traceparent` or `tracestate` is ignored, never an error
//!    nor a panic: the request starts a trace of its own
//!    ([`SpanContext::random`](minitrace::collector::SpanContext::random)),
//!    or goes on without the `tracestate`;
//! 2. starts the request's **root**: a child of the caller's span, in the
//!    caller's trace, or a new trace. A caller that did not sample the
//!    trace (flags `00`) is honoured: the root is [`Span::noop`], nothing
//!    is recorded, and the calls the request makes pass the caller's
//!    decision on (see the client). The root is named `GET /path` (`GET
//!    /users/{id}` with the `axum` feature, see below; `pkg.Service/Method`
//!    for gRPC, told by its `content-type`) or as
//!    [`ServerLayer::with_name`] says, has kind
//!    [`SpanKind::Server`](minitrace::collector::SpanKind::Server), the
//!    properties of [`keys`], the caller's `tracestate`
//!    ([`Span::with_tracestate`]) and, from the breadcrumb, the caller's
//!    listener as [`FROM_KEY`](minitrace_remote::breadcrumbs::FROM_KEY);
//! 3. makes the root the **local parent** while the service's `call` runs
//!    and while its future is polled, wherever it is polled, so that
//!    `#[trace]` handlers and the spans of the layers inside nest under it.
//!    Each poll's local spans go on at once
//!    ([`run_in_span`](minitrace::future::run_in_span)), as an unfinished
//!    `in_span` future's do: the request may end on another thread;
//! 4. on the response, records its status code: a 5xx marks the root with
//!    an error status (a 4xx is the caller's error, not the server's). For
//!    gRPC, a non-OK `grpc-status` does, whether it comes in the headers
//!    (a trailers-only response, as tonic sends an error) or in the
//!    trailers at the end of the body. A service that fails (`Err`) marks
//!    it too. The response names this process's listener
//!    ([`breadcrumbs::mark_response`]);
//! 5. **keeps the root open until the response body has been sent**: the
//!    body is wrapped in a [`TracedBody`], which ends the root when its
//!    last frame has been polled, or when it is dropped (the connection
//!    closed early, or a body never polled, as a `HEAD`'s). A streamed
//!    body's work, polled with the root as local parent, nests under it.
//!
//! With the `axum` feature, a layer added inside a router
//! (`Router::layer`, which wraps each route) sees the route axum matched:
//! roots are named `GET /users/{id}` and carry it as `http.route`. Outside
//! a router (`ServiceBuilder` around it, or tonic), the path is all there
//! is.
//!
//! # The client
//!
//! For each call, [`ClientLayer`] (and [`ClientCall`]):
//!
//! 1. starts a span of kind [`SpanKind::Client`](minitrace::collector::SpanKind::Client)
//!    under the local parent where the call starts (no parent, no span),
//!    named `GET /path` (or `pkg.Service/Method`), with the peer's
//!    `server.address` and `server.port` from the URI;
//! 2. injects `traceparent` (the call's span) and `tracestate` with
//!    [`breadcrumbs::inject`]: this
//!    process's breadcrumb first, then the entries of the `tracestate` the
//!    request being served arrived with. Under an unsampled caller, the
//!    caller's `traceparent` goes on with flags `00`, so that the services
//!    called do not record either;
//! 3. records the response's status (a 4xx or 5xx is an error for a
//!    client; so is a non-OK `grpc-status`, in the headers or the
//!    trailers), the callee's listener from its answer
//!    ([`breadcrumbs::read_response`])
//!    as [`TO_KEY`](minitrace_remote::breadcrumbs::TO_KEY), or a failure
//!    (an `Err`: error status, `error.type` the error's type);
//! 4. keeps the span open until the response body has been read (a
//!    [`TracedBody`] again), so that a gRPC call's trailers are seen.
//!
//! The `tracestate` and the unsampled decision of the request being served
//! reach the clients through the thread that polls it: they are set for
//! each poll of the server's future and body, as the local parent is. A
//! call made from a task spawned apart gets neither, as it gets no local
//! parent, unless the task runs `in_span`.
//!
//! # Secrets
//!
//! Nothing from a header value, a query string or the URI's user info is
//! recorded, in properties, statuses or `Debug`; errors are named by type.
//!
//! # Example
//!
//! An axum service (with the `axum` feature) that calls a gRPC service
//! through a tonic `Channel`:
//!
//! ```ignore
//! let app = Router::new().route("/users/{id}", get(get_user)).layer(ServerLayer::new());
//! let channel = tower::ServiceBuilder::new().layer(ClientLayer::new()).service(channel);
//! let grpc = tonic::client::Grpc::new(channel);
//! // tonic: Server::builder().layer(ServerLayer::new()).add_service(..)
//! // hyper: TowerToHyperService::new(ServiceBuilder::new().layer(ServerLayer::new()).service(svc))
//! ```

#![deny(missing_docs)]

mod body;
mod carried;
mod client;
mod grpc;
pub mod keys;
mod names;
mod server;

use std::borrow::Cow;

use http::Method;

pub use body::TracedBody;
pub use client::{ClientCall, ClientFuture, ClientLayer, TraceClient};
pub use server::{ServerFuture, ServerLayer, TraceServer};

#[doc(no_inline)]
pub use minitrace::Span;
/// The breadcrumbs the layers carry, re-exported (from `minitrace-remote`).
#[doc(no_inline)]
pub use minitrace_remote::breadcrumbs;

/// A method's name, borrowed for the standard ones.
pub(crate) fn method_name(method: &Method) -> Cow<'static, str> {
    let name = match *method {
        Method::GET => "GET",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::DELETE => "DELETE",
        Method::HEAD => "HEAD",
        Method::OPTIONS => "OPTIONS",
        Method::CONNECT => "CONNECT",
        Method::PATCH => "PATCH",
        Method::TRACE => "TRACE",
        _ => return Cow::Owned(method.as_str().to_owned()),
    };
    Cow::Borrowed(name)
}
