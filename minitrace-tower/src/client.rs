//! The clients' layer, and the call it traces for clients of other kinds.

use std::borrow::Cow;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll};

use http::header::{HeaderName, HeaderValue};
use http::{HeaderMap, Method, Request, Response, StatusCode, Uri};
use minitrace::collector::{SpanContext, SpanKind, SpanStatus};
use minitrace::future::run_in_span;
use minitrace::Span;
use minitrace_remote::breadcrumbs;
use tower_layer::Layer;
use tower_service::Service;

use crate::body::{record_head, Grpc, Side, TracedBody};
use crate::carried::{self, Carried};
use crate::{grpc, keys, method_name};

type NameFn = dyn Fn(&Method, &Uri) -> Cow<'static, str> + Send + Sync;

/// One traced call of a client: a span (kind `Client`) under the local
/// parent where it starts, the headers that carry it to the callee, and
/// what came back. [`ClientLayer`] makes one per request; a client that is
/// not a tower service (`minitrace-reqwest`, or one written by hand) uses
/// it directly:
///
/// ```
/// use http::{HeaderMap, Method, StatusCode, Uri};
/// use minitrace_tower::ClientCall;
///
/// let uri: Uri = "http://127.0.0.1:8080/users/7".parse().unwrap();
/// let mut headers = HeaderMap::new();
/// let mut call = ClientCall::start(&Method::GET, &uri, &headers);
/// call.inject(&mut headers); // `traceparent`, `tracestate`
/// // ... send the request, receive the answer ...
/// call.record_response(StatusCode::OK, &HeaderMap::new());
/// drop(call); // the span ends
/// ```
pub struct ClientCall {
    span: Span,
    grpc: bool,
    carried: Option<Arc<Carried>>,
}

impl ClientCall {
    /// Starts a call of `method` on `uri`, named `GET /path` (or
    /// `pkg.Service/Method` for gRPC, told by the request's `headers`).
    pub fn start(method: &Method, uri: &Uri, headers: &HeaderMap) -> ClientCall {
        ClientCall::start_named(method, uri, headers, || default_name(method, uri, grpc::is_grpc(headers)))
    }

    /// Starts a call named by `name`, which runs only when the span is
    /// recorded (there is a local parent).
    pub fn start_named(
        method: &Method,
        uri: &Uri,
        headers: &HeaderMap,
        name: impl FnOnce() -> Cow<'static, str>,
    ) -> ClientCall {
        let grpc = grpc::is_grpc(headers);
        let carried = carried::current();
        let span = match SpanContext::current_local_parent() {
            Some(_) => {
                let mut span = Span::enter_with_local_parent(name()).with_kind(SpanKind::Client);
                span.add_properties(|| call_properties(method, uri, grpc));
                span
            }
            None => Span::noop(),
        };
        ClientCall { span, grpc, carried }
    }

    /// The call's span (a no-op outside a trace).
    pub fn span(&self) -> &Span {
        &self.span
    }

    /// Adds `traceparent` and `tracestate` to the request's headers: the
    /// call's span, with the breadcrumb and the `tracestate` of the request
    /// being handled (see [`breadcrumbs::inject`]). Under an unsampled
    /// caller, its `traceparent`, unsampled, goes on instead; outside a
    /// trace, nothing is added.
    pub fn inject(&self, headers: &mut HeaderMap) {
        let tracestate = self.carried.as_ref().and_then(|carried| carried.tracestate.as_deref());
        if let Some(context) = SpanContext::from_span(&self.span) {
            breadcrumbs::inject(headers, context, tracestate);
            return;
        }
        let Some(caller) = self.carried.as_ref().and_then(|carried| carried.unsampled) else { return };
        headers.insert(HeaderName::from_static("traceparent"), breadcrumbs::traceparent(caller, false));
        if let Some(value) = tracestate.and_then(|state| HeaderValue::from_str(state).ok()) {
            headers.insert(HeaderName::from_static("tracestate"), value);
        }
    }

    /// Records the response's head: its status (a 4xx or 5xx marks the
    /// span with an error), the callee's listener (breadcrumbs) and, for
    /// gRPC, a `grpc-status` in the headers (trailers-only; a non-OK one
    /// is an error).
    pub fn record_response(&mut self, status: StatusCode, headers: &HeaderMap) {
        self.record_head(status, headers);
    }

    fn record_head(&mut self, status: StatusCode, headers: &HeaderMap) -> Grpc {
        if let Some(to) = breadcrumbs::read_response(headers) {
            self.span.add_property(|| (breadcrumbs::TO_KEY, to.to_string()));
        }
        record_head(&mut self.span, Side::Client, status, headers, self.grpc)
    }

    /// Marks the call failed, with no response: `error_type` names what
    /// failed (a type, or a kind such as `timeout`; never a message that
    /// may hold a URL or a header).
    pub fn record_failure(&mut self, error_type: impl Into<Cow<'static, str>>) {
        let error_type = error_type.into();
        self.span.set_status(SpanStatus::error("the request failed"));
        self.span.add_property(|| (keys::ERROR_TYPE, error_type));
    }
}

impl fmt::Debug for ClientCall {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientCall")
            .field("span", &self.span)
            .field("grpc", &self.grpc)
            .finish_non_exhaustive()
    }
}

/// `GET /path`, or `pkg.Service/Method` for gRPC.
fn default_name(method: &Method, uri: &Uri, grpc: bool) -> Cow<'static, str> {
    if grpc {
        return grpc::span_name(uri.path());
    }
    let (method, path) = (method.as_str(), uri.path());
    let mut name = String::with_capacity(method.len() + 1 + path.len());
    name.push_str(method);
    name.push(' ');
    name.push_str(path);
    Cow::Owned(name)
}

fn call_properties(
    method: &Method,
    uri: &Uri,
    grpc: bool,
) -> impl Iterator<Item = (&'static str, Cow<'static, str>)> {
    let port = match (uri.port_u16(), uri.scheme_str()) {
        (Some(port), _) => Some(Cow::Owned(port.to_string())),
        // The scheme's port: the program's own string.
        (None, Some("https")) => Some(Cow::Borrowed("443")),
        (None, Some("http")) => Some(Cow::Borrowed("80")),
        (None, _) => None,
    };
    let path = uri.path();
    let rpc = grpc.then(|| grpc::service_and_method(path)).flatten();
    [
        Some((keys::HTTP_REQUEST_METHOD, method_name(method))),
        uri.host().map(|host| (keys::SERVER_ADDRESS, Cow::Owned(host.to_owned()))),
        port.map(|port| (keys::SERVER_PORT, port)),
        Some((keys::URL_PATH, Cow::Owned(path.to_owned()))),
        grpc.then_some((keys::RPC_SYSTEM, Cow::Borrowed("grpc"))),
        rpc.map(|(service, _)| (keys::RPC_SERVICE, Cow::Owned(service.to_owned()))),
        rpc.map(|(_, method)| (keys::RPC_METHOD, Cow::Owned(method.to_owned()))),
    ]
    .into_iter()
    .flatten()
}

/// A [`Layer`] that traces each call of a client service (a tonic
/// `Channel`, a hyper client, any `Service<http::Request<_>>`): see the
/// crate's docs. Put it outermost, where the calls start: under the
/// caller's local parent.
///
/// ```
/// use minitrace_tower::ClientLayer;
///
/// let layer = ClientLayer::new();
/// let layer = ClientLayer::new().with_name(|method, uri| format!("{method} {}", uri.host().unwrap_or("?")).into());
/// ```
#[derive(Clone, Default)]
pub struct ClientLayer {
    name: Option<Arc<NameFn>>,
}

impl ClientLayer {
    /// A layer with the default names.
    pub fn new() -> ClientLayer {
        ClientLayer::default()
    }

    /// Names each call's span with `name` instead of the default; it runs
    /// only for a call that is recorded.
    pub fn with_name(
        mut self,
        name: impl Fn(&Method, &Uri) -> Cow<'static, str> + Send + Sync + 'static,
    ) -> ClientLayer {
        self.name = Some(Arc::new(name));
        self
    }
}

impl fmt::Debug for ClientLayer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = if self.name.is_some() { "custom" } else { "default" };
        f.debug_struct("ClientLayer").field("name", &name).finish()
    }
}

impl<S> Layer<S> for ClientLayer {
    type Service = TraceClient<S>;

    fn layer(&self, inner: S) -> TraceClient<S> {
        TraceClient { inner, name: self.name.clone() }
    }
}

/// A client service traced by [`ClientLayer`].
#[derive(Clone)]
pub struct TraceClient<S> {
    inner: S,
    name: Option<Arc<NameFn>>,
}

impl<S: fmt::Debug> fmt::Debug for TraceClient<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TraceClient").field("inner", &self.inner).finish_non_exhaustive()
    }
}

impl<S, B, ResBody> Service<Request<B>> for TraceClient<S>
where
    S: Service<Request<B>, Response = Response<ResBody>>,
{
    type Response = Response<TracedBody<ResBody>>;
    type Error = S::Error;
    type Future = ClientFuture<S::Future>;

    #[inline]
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: Request<B>) -> ClientFuture<S::Future> {
        let call = match &self.name {
            Some(name) => ClientCall::start_named(request.method(), request.uri(), request.headers(), || {
                name(request.method(), request.uri())
            }),
            None => ClientCall::start(request.method(), request.uri(), request.headers()),
        };
        call.inject(request.headers_mut());
        let inner = &mut self.inner;
        let future = run_in_span(&call.span, || inner.call(request));
        ClientFuture { inner: future, call: Some(call) }
    }
}

pin_project_lite::pin_project! {
    /// The response future of a [`TraceClient`]: the call's span is the
    /// local parent while it is polled, and lives on in the response's
    /// body until it has been read.
    pub struct ClientFuture<F> {
        #[pin]
        inner: F,
        call: Option<ClientCall>,
    }
}

impl<F> fmt::Debug for ClientFuture<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientFuture").field("call", &self.call).finish_non_exhaustive()
    }
}

impl<F, ResBody, E> Future for ClientFuture<F>
where
    F: Future<Output = Result<Response<ResBody>, E>>,
{
    type Output = Result<Response<TracedBody<ResBody>>, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let call = this.call.as_ref().expect("ClientFuture polled after it completed");
        let inner = this.inner;
        let result = ready!(run_in_span(&call.span, || inner.poll(cx)));
        let mut call = this.call.take().expect("ClientFuture polled after it completed");
        Poll::Ready(match result {
            Ok(response) => {
                let grpc = call.record_head(response.status(), response.headers());
                Ok(response.map(|body| TracedBody::new(body, call.span, None, grpc)))
            }
            Err(error) => {
                call.record_failure(std::any::type_name::<E>());
                Err(error)
            }
        })
    }
}
