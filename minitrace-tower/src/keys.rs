//! The property keys the middlewares record, after OpenTelemetry's HTTP and
//! RPC semantic conventions (so backends that know them show them as
//! such). Values are never taken from header values, query strings or user
//! info: nothing secret reaches a span.
//!
//! | key | on | value |
//! |---|---|---|
//! | [`HTTP_REQUEST_METHOD`] | server root, client span | `GET`, `POST`, ... |
//! | [`URL_PATH`] | server root, client span | the request's path, without its query |
//! | [`HTTP_ROUTE`] | server root | the matched route (`/users/{id}`), with the `axum` feature |
//! | [`HTTP_RESPONSE_STATUS_CODE`] | both | `200`, `500`, ... |
//! | [`SERVER_ADDRESS`], [`SERVER_PORT`] | client span | the peer, from the URI (the port from its scheme if absent) |
//! | [`RPC_SYSTEM`], [`RPC_SERVICE`], [`RPC_METHOD`] | both, gRPC | `grpc`, `pkg.Service`, `Method` |
//! | [`RPC_GRPC_STATUS_CODE`] | both, gRPC | `grpc-status`, from the headers (trailers-only) or the trailers |
//! | [`ERROR_TYPE`] | both, on failure | the failing error's type name |
//! | [`FROM_KEY`](minitrace_remote::breadcrumbs::FROM_KEY) | server root | the caller's listener (breadcrumbs) |
//! | [`TO_KEY`](minitrace_remote::breadcrumbs::TO_KEY) | client span | the callee's listener (breadcrumbs) |
//!
//! Besides, the spans carry minitrace's own fields: kind (`Server`,
//! `Client`), status (an error, see the crate's docs) and, on a server
//! root, the caller's `tracestate`
//! ([`SpanRecord::tracestate`](minitrace::collector::SpanRecord::tracestate)).

/// The request's method.
pub const HTTP_REQUEST_METHOD: &str = "http.request.method";
/// The request's path (no query: queries carry secrets).
pub const URL_PATH: &str = "url.path";
/// The route the server matched.
pub const HTTP_ROUTE: &str = "http.route";
/// The response's status code.
pub const HTTP_RESPONSE_STATUS_CODE: &str = "http.response.status_code";
/// The peer's host, as the client's URI names it.
pub const SERVER_ADDRESS: &str = "server.address";
/// The peer's port.
pub const SERVER_PORT: &str = "server.port";
/// `grpc` on gRPC calls.
pub const RPC_SYSTEM: &str = "rpc.system";
/// The gRPC service (`package.Service`).
pub const RPC_SERVICE: &str = "rpc.service";
/// The gRPC method.
pub const RPC_METHOD: &str = "rpc.method";
/// The gRPC status code, as a number.
pub const RPC_GRPC_STATUS_CODE: &str = "rpc.grpc.status_code";
/// The type of the error a call or a body failed with.
pub const ERROR_TYPE: &str = "error.type";
