//! The server's layer: a root span per request; see the crate's docs.

use std::borrow::Cow;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll};

use http::request::Parts;
use http::{Extensions, HeaderMap, Method, Request, Response, Uri};
use minitrace::collector::{SpanContext, SpanKind, SpanStatus};
use minitrace::future::run_in_span;
use minitrace::Span;
use minitrace_remote::breadcrumbs;
use tower_layer::Layer;
use tower_service::Service;

use crate::body::{record_head, Side, TracedBody};
use crate::carried::{self, Carried};
use crate::{grpc, keys, method_name, names};

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
        let (root, carried, grpc, request) = match self.name.as_deref() {
            None => {
                let (root, carried, grpc) = start_root(&Head::of(&request), None);
                (root, carried, grpc, request)
            }
            Some(name) => {
                let (parts, body) = request.into_parts();
                let head = Head {
                    method: &parts.method,
                    uri: &parts.uri,
                    headers: &parts.headers,
                    extensions: &parts.extensions,
                };
                let (root, carried, grpc) = start_root(&head, Some(&|| name(&parts)));
                (root, carried, grpc, Request::from_parts(parts, body))
            }
        };
        // Under the root already: a service may start its spans in `call`
        // (tower-http's `TraceLayer` does).
        let inner = &mut self.inner;
        let future = carried::scope(carried.as_ref(), || run_in_span(&root, || inner.call(request)));
        ServerFuture { inner: future, state: Some(State { root, carried, grpc }) }
    }
}

/// What the root is made of: the request's head, borrowed (the request
/// itself moves only into the service).
struct Head<'a> {
    method: &'a Method,
    uri: &'a Uri,
    headers: &'a HeaderMap,
    extensions: &'a Extensions,
}

impl<'a> Head<'a> {
    fn of<B>(request: &'a Request<B>) -> Head<'a> {
        Head {
            method: request.method(),
            uri: request.uri(),
            headers: request.headers(),
            extensions: request.extensions(),
        }
    }
}

/// The root of a request (a no-op for an unsampled caller), what its calls
/// pass on, and whether it is gRPC.
fn start_root(
    head: &Head<'_>,
    name: Option<&dyn Fn() -> Cow<'static, str>>,
) -> (Span, Option<Arc<Carried>>, bool) {
    let incoming = breadcrumbs::extract(head.headers);
    let grpc = grpc::is_grpc(head.headers);
    let tracestate = incoming.tracestate;
    let (root, unsampled) = match incoming.context {
        // The caller decided: nothing is recorded, and calls go on unsampled.
        Some(context) if !incoming.sampled => (Span::noop(), Some(context)),
        context => {
            let mut root = new_root(head, grpc, context.unwrap_or_else(SpanContext::random), name);
            if let Some(tracestate) = &tracestate {
                root = root.with_tracestate(tracestate.clone());
            }
            if let Some(from) = incoming.from {
                root.add_property(|| (breadcrumbs::FROM_KEY, from.to_string()));
            }
            (root, None)
        }
    };
    let carried =
        (tracestate.is_some() || unsampled.is_some()).then(|| Arc::new(Carried { tracestate, unsampled }));
    (root, carried, grpc)
}

/// A root named `GET /path` (`GET /route/{param}` with the `axum` feature,
/// inside a router), `pkg.Service/Method` for gRPC, or by `name`; with the
/// request's properties. A route's or a gRPC method's name and properties
/// are the program's own strings (see `names`): only the path is copied.
fn new_root(
    head: &Head<'_>,
    grpc: bool,
    parent: SpanContext,
    name: Option<&dyn Fn() -> Cow<'static, str>>,
) -> Span {
    let path = head.uri.path();
    let route = route(head.extensions);
    let named = match route {
        Some(route) if !grpc => names::route(head.method, route),
        // gRPC's names come from the path, its route (if any) aside.
        None if grpc => names::grpc(path),
        _ => None,
    };
    let name = match (name, named) {
        (Some(name), _) => name(),
        (None, Some(named)) => Cow::Borrowed(named.name),
        (None, None) => default_name(head.method, route.unwrap_or(path), grpc),
    };
    let mut root = Span::root(name, parent).with_kind(SpanKind::Server);
    root.add_properties(|| {
        let route = route.map(|route| match named {
            Some(named) if !grpc => Cow::Borrowed(named.route),
            _ => Cow::Owned(route.to_owned()),
        });
        let rpc = grpc.then(|| match named {
            Some(named) => {
                named.grpc.map(|(service, method)| (Cow::Borrowed(service), Cow::Borrowed(method)))
            }
            None => grpc::service_and_method(path)
                .map(|(service, method)| (Cow::Owned(service.to_owned()), Cow::Owned(method.to_owned()))),
        });
        let rpc = rpc.flatten();
        let (service, method) = match rpc {
            Some((service, method)) => (Some(service), Some(method)),
            None => (None, None),
        };
        [
            Some((keys::HTTP_REQUEST_METHOD, method_name(head.method))),
            Some((keys::URL_PATH, Cow::Owned(path.to_owned()))),
            route.map(|route| (keys::HTTP_ROUTE, route)),
            grpc.then_some((keys::RPC_SYSTEM, Cow::Borrowed("grpc"))),
            service.map(|service| (keys::RPC_SERVICE, service)),
            method.map(|method| (keys::RPC_METHOD, method)),
        ]
        .into_iter()
        .flatten()
    });
    root
}

/// `GET /path` (or `GET /route/{param}`), or `pkg.Service/Method` for
/// gRPC: made for this request.
fn default_name(method: &Method, path: &str, grpc: bool) -> Cow<'static, str> {
    if grpc {
        return grpc::span_name(path);
    }
    let method = method.as_str();
    let mut name = String::with_capacity(method.len() + 1 + path.len());
    name.push_str(method);
    name.push(' ');
    name.push_str(path);
    Cow::Owned(name)
}

/// The route axum matched, when the layer runs inside its router.
#[cfg(feature = "axum")]
fn route(extensions: &Extensions) -> Option<&str> {
    extensions.get::<axum::extract::MatchedPath>().map(axum::extract::MatchedPath::as_str)
}

#[cfg(not(feature = "axum"))]
fn route(_: &Extensions) -> Option<&str> {
    None
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
