//! A [`reqwest_middleware::Middleware`] for minitrace: each request a
//! `reqwest` client sends through a [`ClientWithMiddleware`](reqwest_middleware::ClientWithMiddleware)
//! is a span of kind `Client` under the local parent where it is sent,
//! and carries its trace to the service it calls.
//!
//! It behaves as `minitrace-tower`'s client layer does (it is the same
//! [`ClientCall`]):
//!
//! - the span, named `GET /path` (or as [`TraceMiddleware::with_name`]
//!   says), records the method, the peer (`server.address`,
//!   `server.port` from the URL), the path (never the query, nor the URL's
//!   user info), the response's status code, and the callee's listener from
//!   its answer as [`TO_KEY`](minitrace_tower::breadcrumbs::TO_KEY);
//! - `traceparent` and `tracestate` are injected with
//!   [`breadcrumbs::inject`](minitrace_tower::breadcrumbs::inject): the
//!   span, this process's breadcrumb, and the `tracestate` of the request
//!   being served (when a `minitrace-tower` server is serving one on this
//!   thread). Under an unsampled caller, its `traceparent` goes on with
//!   flags `00`; outside a trace, nothing is added and nothing recorded;
//! - a 4xx or 5xx marks the span with an error status; so does a failure,
//!   with `error.type` its kind (`timeout`, `connect`, `request`, `body`,
//!   `decode`, `redirect`, `builder`, `middleware`): reqwest's messages hold
//!   the URL, which is never recorded.
//!
//! The span ends when the response's head has arrived: reqwest hands the
//! body to the caller as a `Response`, which this middleware does not
//! wrap (the tower layer, which can, keeps its span until the body is
//! read). Each request that reaches the middleware is one span: added
//! after a retrying middleware, each attempt is its own.
//!
//! ```
//! use minitrace_reqwest::TraceMiddleware;
//!
//! let client = reqwest_middleware::ClientBuilder::new(reqwest::Client::new())
//!     .with(TraceMiddleware::new())
//!     .build();
//! ```

#![deny(missing_docs)]

use std::borrow::Cow;
use std::fmt;
use std::future::poll_fn;
use std::sync::Arc;

use http::{Extensions, Method, Uri};
use minitrace::future::run_in_span;
use minitrace_tower::ClientCall;
use reqwest::{Request, Response};
use reqwest_middleware::{Middleware, Next, Result};

type NameFn = dyn Fn(&Method, &Uri) -> Cow<'static, str> + Send + Sync;

/// The middleware: see the crate's docs.
#[derive(Clone, Default)]
pub struct TraceMiddleware {
    name: Option<Arc<NameFn>>,
}

impl TraceMiddleware {
    /// A middleware with the default names (`GET /path`).
    pub fn new() -> TraceMiddleware {
        TraceMiddleware::default()
    }

    /// Names each request's span with `name`, from its method and URI (no
    /// query, no user info); it runs only for a request that is recorded.
    ///
    /// ```
    /// let middleware = minitrace_reqwest::TraceMiddleware::new()
    ///     .with_name(|method, uri| format!("{method} {}", uri.host().unwrap_or("?")).into());
    /// ```
    pub fn with_name(
        mut self,
        name: impl Fn(&Method, &Uri) -> Cow<'static, str> + Send + Sync + 'static,
    ) -> Self {
        self.name = Some(Arc::new(name));
        self
    }
}

impl fmt::Debug for TraceMiddleware {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = if self.name.is_some() { "custom" } else { "default" };
        f.debug_struct("TraceMiddleware").field("name", &name).finish()
    }
}

#[async_trait::async_trait]
impl Middleware for TraceMiddleware {
    async fn handle(
        &self,
        mut request: Request,
        extensions: &mut Extensions,
        next: Next<'_>,
    ) -> Result<Response> {
        let uri = uri_of(request.url());
        let mut call = match &self.name {
            Some(name) => ClientCall::start_named(request.method(), &uri, request.headers(), || {
                name(request.method(), &uri)
            }),
            None => ClientCall::start(request.method(), &uri, request.headers()),
        };
        call.inject(request.headers_mut());
        // A boxed future already: `Unpin`.
        let mut sending = next.run(request, extensions);
        // The call's span is the local parent while the request is sent.
        let result = poll_fn(|cx| run_in_span(call.span(), || sending.as_mut().poll(cx))).await;
        match &result {
            Ok(response) => call.record_response(response.status(), response.headers()),
            Err(error) => call.record_failure(error_kind(error)),
        }
        result
    }
}

/// The URL as a URI of its scheme, host, port and path: no user info, no
/// query, which may hold secrets.
fn uri_of(url: &reqwest::Url) -> Uri {
    let authority = match (url.host_str(), url.port()) {
        (Some(host), Some(port)) => format!("{host}:{port}"),
        (Some(host), None) => host.to_owned(),
        (None, _) => return Uri::from_static("/"),
    };
    Uri::builder()
        .scheme(url.scheme())
        .authority(authority)
        .path_and_query(url.path())
        .build()
        .unwrap_or_else(|_| Uri::from_static("/"))
}

/// What failed, as a word: reqwest's messages name the URL.
fn error_kind(error: &reqwest_middleware::Error) -> &'static str {
    let error = match error {
        reqwest_middleware::Error::Middleware(_) => return "middleware",
        reqwest_middleware::Error::Reqwest(error) => error,
    };
    if error.is_timeout() {
        "timeout"
    } else if error.is_connect() {
        "connect"
    } else if error.is_redirect() {
        "redirect"
    } else if error.is_builder() {
        "builder"
    } else if error.is_body() {
        "body"
    } else if error.is_decode() {
        "decode"
    } else if error.is_request() {
        "request"
    } else {
        "reqwest"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_uri_keeps_no_secret() {
        let url =
            reqwest::Url::parse("https://user:secret@example.invalid:8443/a/b?token=secret#frag").unwrap();
        assert_eq!(uri_of(&url).to_string(), "https://example.invalid:8443/a/b");
        let url = reqwest::Url::parse("http://[::1]/x").unwrap();
        assert_eq!(uri_of(&url).to_string(), "http://[::1]/x");
        let url = reqwest::Url::parse("data:text/plain,hello").unwrap();
        assert_eq!(uri_of(&url).to_string(), "/");
    }
}
