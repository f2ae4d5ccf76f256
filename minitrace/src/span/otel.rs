//! A `Span`'s OpenTelemetry fields: kind, status, links, tracestate and
//! events added through the span itself. Each is stored as properties (see
//! `data::otel`), so a span that sets none pays nothing.

use std::borrow::Cow;

use crate::data::context::SpanContext;
use crate::data::otel::{kind_property, link_property, SpanKind, SpanStatus, TRACESTATE_KEY};
use crate::span::Span;
use crate::util::recording::ENABLED;

impl Span {
    /// Sets the span's [`SpanKind`] (a no-op on a no-op span).
    ///
    /// ```
    /// use minitrace::collector::SpanKind;
    /// use minitrace::prelude::*;
    /// let root = Span::root("GET /users", SpanContext::random()).with_kind(SpanKind::Server);
    /// ```
    pub fn with_kind(mut self, kind: SpanKind) -> Span {
        self.add_properties(|| [kind_property(kind)]);
        self
    }

    /// Sets the span's [`SpanStatus`]; the last one set counts.
    ///
    /// ```
    /// use minitrace::collector::SpanStatus;
    /// use minitrace::prelude::*;
    /// let root = Span::root("request", SpanContext::random()).with_status(SpanStatus::Ok);
    /// ```
    pub fn with_status(mut self, status: SpanStatus) -> Span {
        self.set_status(status);
        self
    }

    /// Sets the span's [`SpanStatus`] while it runs, e.g. once an error
    /// is known; the last one set counts.
    ///
    /// ```
    /// use minitrace::collector::SpanStatus;
    /// use minitrace::prelude::*;
    /// let mut root = Span::root("request", SpanContext::random());
    /// root.set_status(SpanStatus::error("upstream timed out"));
    /// ```
    pub fn set_status(&mut self, status: SpanStatus) {
        if ENABLED && self.is_recording() {
            self.add_properties(|| status.into_properties());
        }
    }

    /// Links the span to `context`, a span of this trace or another one
    /// (e.g. each message of a batch it handles).
    ///
    /// ```
    /// use minitrace::prelude::*;
    /// let message = SpanContext::random();
    /// let root = Span::root("consume", SpanContext::random()).with_link(message);
    /// ```
    pub fn with_link(mut self, context: SpanContext) -> Span {
        self.add_link(context);
        self
    }

    /// Links the span to `context` while it runs.
    ///
    /// ```
    /// use minitrace::prelude::*;
    /// let mut root = Span::root("consume", SpanContext::random());
    /// root.add_link(SpanContext::random());
    /// ```
    pub fn add_link(&mut self, context: SpanContext) {
        self.add_properties(|| [link_property(context)]);
    }

    /// Carries the W3C `tracestate` header of the request this root
    /// continues, so that reporters that know it (OTLP) pass it on.
    ///
    /// ```
    /// use minitrace::prelude::*;
    /// let parent = SpanContext::decode_w3c_traceparent("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01").unwrap();
    /// let root = Span::root("request", parent).with_tracestate("vendor=opaque");
    /// ```
    pub fn with_tracestate(mut self, tracestate: impl Into<Cow<'static, str>>) -> Span {
        if ENABLED && self.is_recording() {
            let tracestate = tracestate.into();
            self.add_properties(|| [(TRACESTATE_KEY, tracestate)]);
        }
        self
    }

    /// Adds an event to this span, from any thread that holds it (the same
    /// as [`Event::add_to_parent`](crate::Event::add_to_parent)).
    ///
    /// ```
    /// use minitrace::prelude::*;
    /// let root = Span::root("request", SpanContext::random());
    /// root.add_event("cache miss", || [("key", "user:42")]);
    /// ```
    pub fn add_event<K, V, I, F>(&self, name: impl Into<Cow<'static, str>>, properties: F)
    where
        K: Into<Cow<'static, str>>,
        V: Into<Cow<'static, str>>,
        I: IntoIterator<Item = (K, V)>,
        F: FnOnce() -> I,
    {
        if ENABLED && self.is_recording() {
            self.add_event_record(name.into(), crate::transport::property_lists::collect(properties));
        }
    }
}
