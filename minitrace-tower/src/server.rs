//! The server's layer: a root span per request; see the crate's docs.

use std::borrow::Cow;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll};

use http::request::Parts;
use http::{Request, Response};
use minitrace::collector::{SpanContext, SpanKind, SpanStatus};
use minitrace::future::run_in_span;
use minitrace::Span;
use minitrace_remote::breadcrumbs;
use tower_layer::Layer;
use tower_service::Service;

use crate::body::{record_head, Side, TracedBody};
use crate::carried::{self, Carried};
use crate::{grpc, keys, method_name};

type NameFn = dyn Fn(&Parts) -> Cow<'static, str> + Send + Sync;

/// A [`Layer`] that traces each request a server handles: see the crate's
/// docs for what it records.
///
/// ```
/// use minitrace_tower::ServerLayer;
///
/// // Roots named `GET /path` (or, with the `axum` feature inside a router,
/// // `GET /route/{param}`; `pkg.Service/Method` for gRPC).
/// let layer = ServerLayer::new();
/// // Or named as the service likes.
/// let layer = ServerLayer::new().with_name(|request| format!("{} {}", request.method, request.uri.path()).into());
/// ```
#[derive(Clone, Default)]
pub struct ServerLayer {
    name: Option<Arc<NameFn>>,
}

impl ServerLayer {
    /// A layer with the default names.
    pub fn new() -> ServerLayer {
        ServerLayer::default()
    }

    /// Names each root with `name`, from the request's head, instead of the
    /// default. It runs only for a request that may be recorded (not for
    /// an unsampled caller's).
    pub fn with_name(
        mut self,
        name: impl Fn(&Parts) -> Cow<'static, str> + Send + Sync + 'static,
    ) -> ServerLayer {
        self.name = Some(Arc::new(name));
        self
    }
}

impl fmt::Debug for ServerLayer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = if self.name.is_some() { "custom" } else { "default" };
        f.debug_struct("ServerLayer").field("name", &name).finish()
    }
}

impl<S> Layer<S> for ServerLayer {
    type Service = TraceServer<S>;

    fn layer(&self, inner: S) -> TraceServer<S> {
        TraceServer { inner, name: self.name.clone() }
    }
}

/// A service traced by [`ServerLayer`].
#[derive(Clone)]
pub struct TraceServer<S> {
    inner: S,
    name: Option<Arc<NameFn>>,
}

impl<S: fmt::Debug> fmt::Debug for TraceServer<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TraceServer").field("inner", &self.inner).finish_non_exhaustive()
    }
}

impl<S, B, ResBody> Service<Request<B>> for TraceServer<S>
where
    S: Service<Request<B>, Response = Response<ResBody>>,
{
    type Response = Response<TracedBody<ResBody>>;
    type Error = S::Error;
    type Future = ServerFuture<S::Future>;

    #[inline]
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<B>) -> ServerFuture<S::Future> {
        let (root, carried, grpc, request) = start_root(request, self.name.as_deref());
        // Under the root already: a service may start its spans in `call`
        // (tower-http's `TraceLayer` does).
        let inner = &mut self.inner;
        let future = carried::scope(carried.as_ref(), || run_in_span(&root, || inner.call(request)));
        ServerFuture { inner: future, state: Some(State { root, carried, grpc }) }
    }
}

/// The root of a request (a no-op for an unsampled caller), what its calls
/// pass on, and whether it is gRPC.
fn start_root<B>(
    request: Request<B>,
    name: Option<&NameFn>,
) -> (Span, Option<Arc<Carried>>, bool, Request<B>) {
    let incoming = breadcrumbs::extract(request.headers());
    let grpc = grpc::is_grpc(request.headers());
    let tracestate = incoming.tracestate;
    let (root, unsampled, request) = match incoming.context {
        // The caller decided: nothing is recorded, and calls go on unsampled.
        Some(context) if !incoming.sampled => (Span::noop(), Some(context), request),
        context => {
            let (name, request) = match name {
                Some(name) => {
                    let (parts, body) = request.into_parts();
                    (name(&parts), Request::from_parts(parts, body))
                }
                None => (default_name(&request, grpc), request),
            };
            let mut root =
                Span::root(name, context.unwrap_or_else(SpanContext::random)).with_kind(SpanKind::Server);
            root.add_properties(|| request_properties(&request, grpc));
            if let Some(tracestate) = &tracestate {
                root = root.with_tracestate(tracestate.clone());
            }
            if let Some(from) = incoming.from {
                root.add_property(|| (breadcrumbs::FROM_KEY, from.to_string()));
            }
            (root, None, request)
        }
    };
    let carried =
        (tracestate.is_some() || unsampled.is_some()).then(|| Arc::new(Carried { tracestate, unsampled }));
    (root, carried, grpc, request)
}

/// `GET /path` (`GET /route/{param}` with the `axum` feature, inside a
/// router), or `pkg.Service/Method` for gRPC.
fn default_name<B>(request: &Request<B>, grpc: bool) -> Cow<'static, str> {
    let path = route(request).unwrap_or_else(|| request.uri().path());
    if grpc {
        return grpc::span_name(path);
    }
    Cow::Owned(format!("{} {}", request.method(), path))
}

/// The route axum matched, when the layer runs inside its router.
#[cfg(feature = "axum")]
fn route<B>(request: &Request<B>) -> Option<&str> {
    request.extensions().get::<axum::extract::MatchedPath>().map(axum::extract::MatchedPath::as_str)
}

#[cfg(not(feature = "axum"))]
fn route<B>(_: &Request<B>) -> Option<&str> {
    None
}

fn request_properties<B>(request: &Request<B>, grpc: bool) -> Vec<(&'static str, Cow<'static, str>)> {
    let path = request.uri().path();
    let mut properties = vec![
        (keys::HTTP_REQUEST_METHOD, method_name(request.method())),
        (keys::URL_PATH, Cow::Owned(path.to_owned())),
    ];
    if let Some(route) = route(request) {
        properties.push((keys::HTTP_ROUTE, Cow::Owned(route.to_owned())));
    }
    if grpc {
        properties.push((keys::RPC_SYSTEM, Cow::Borrowed("grpc")));
        if let Some((service, method)) = grpc::service_and_method(path) {
            properties.push((keys::RPC_SERVICE, Cow::Owned(service.to_owned())));
            properties.push((keys::RPC_METHOD, Cow::Owned(method.to_owned())));
        }
    }
    properties
}

struct State {
    root: Span,
    carried: Option<Arc<Carried>>,
    grpc: bool,
}

pin_project_lite::pin_project! {
    /// The response future of a [`TraceServer`]: the service's, polled with
    /// the request's root as the local parent.
    pub struct ServerFuture<F> {
        #[pin]
        inner: F,
        state: Option<State>,
    }
}

impl<F> fmt::Debug for ServerFuture<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let root = self.state.as_ref().map(|state| &state.root);
        f.debug_struct("ServerFuture").field("root", &root).finish_non_exhaustive()
    }
}

impl<F, ResBody, E> Future for ServerFuture<F>
where
    F: Future<Output = Result<Response<ResBody>, E>>,
{
    type Output = Result<Response<TracedBody<ResBody>>, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let state = this.state.as_ref().expect("ServerFuture polled after it completed");
        let inner = this.inner;
        let result =
            ready!(carried::scope(state.carried.as_ref(), || run_in_span(&state.root, || inner.poll(cx))));
        let State { mut root, carried, grpc } =
            this.state.take().expect("ServerFuture polled after it completed");
        Poll::Ready(match result {
            Ok(mut response) => {
                let grpc = record_head(&mut root, Side::Server, response.status(), response.headers(), grpc);
                breadcrumbs::mark_response(response.headers_mut());
                // The root lives on in the body, until it is sent.
                Ok(response.map(|body| TracedBody::new(body, root, carried, grpc)))
            }
            Err(error) => {
                root.set_status(SpanStatus::error("the service failed"));
                root.add_property(|| (keys::ERROR_TYPE, std::any::type_name::<E>()));
                Err(error)
            }
        })
    }
}
