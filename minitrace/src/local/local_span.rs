use std::borrow::Cow;
use std::marker::PhantomData;

use crate::data::context::SpanContext;
use crate::data::otel::{self, SpanKind, SpanStatus};
use crate::local::stack::{self, LocalSpanHandle};
use crate::transport::property_lists;
use crate::util::recording::{recording, Recording, ENABLED};

/// A span on the current thread's fast path: starting one is a clock read
/// and a `Vec::push` into the thread's current span line; its parent is the
/// innermost open local span, or the line's [`Span`](crate::Span).
///
/// Without a local parent (see [`Span::set_local_parent`](crate::Span::set_local_parent)
/// and [`LocalCollector`](crate::local::LocalCollector)) it is a no-op.
/// It cannot leave its thread; the span ends when it is dropped.
///
/// ```
/// use minitrace::prelude::*;
///
/// let root = Span::root("request", SpanContext::random());
/// let _guard = root.set_local_parent();
/// {
///     let _parse = LocalSpan::enter_with_local_parent("parse").with_property(|| ("bytes", "42"));
///     let _lex = LocalSpan::enter_with_local_parent("lex"); // a child of "parse"
/// }
/// ```
#[must_use]
#[derive(Default, Debug)]
pub struct LocalSpan {
    handle: Recording<LocalSpanHandle>,
    /// Local spans belong to their thread's span stack.
    _not_send: PhantomData<*const ()>,
}

// The handle travels in a register: see `LocalSpanHandle`.
const _: () = assert!(std::mem::size_of::<LocalSpan>() <= 8);

impl LocalSpan {
    /// Starts a span under the current local parent.
    ///
    /// ```
    /// let _span = minitrace::local::LocalSpan::enter_with_local_parent("work");
    /// ```
    #[inline]
    pub fn enter_with_local_parent(name: impl Into<Cow<'static, str>>) -> LocalSpan {
        if !ENABLED {
            return LocalSpan::default();
        }
        LocalSpan { handle: recording(stack::enter_span(name)), _not_send: PhantomData }
    }

    /// Adds a property to this span. The closure runs only when the span is
    /// recorded, so building the value costs nothing otherwise.
    ///
    /// ```
    /// let _span = minitrace::local::LocalSpan::enter_with_local_parent("get")
    ///     .with_property(|| ("key", "user:42"));
    /// ```
    pub fn with_property<K, V, F>(self, property: F) -> LocalSpan
    where
        K: Into<Cow<'static, str>>,
        V: Into<Cow<'static, str>>,
        F: FnOnce() -> (K, V),
    {
        self.with_properties(|| [property()])
    }

    /// Adds properties to this span (evaluated only when recorded).
    ///
    /// ```
    /// let _span = minitrace::local::LocalSpan::enter_with_local_parent("get")
    ///     .with_properties(|| [("key", "user:42"), ("cache", "hit")]);
    /// ```
    pub fn with_properties<K, V, I, F>(self, properties: F) -> LocalSpan
    where
        K: Into<Cow<'static, str>>,
        V: Into<Cow<'static, str>>,
        I: IntoIterator<Item = (K, V)>,
        F: FnOnce() -> I,
    {
        if let Some(&handle) = self.handle.as_ref() {
            if let Some(list) = property_lists::collect(properties) {
                stack::add_properties_to_span(handle, list);
            }
        }
        self
    }

    /// Sets the span's [`SpanKind`].
    ///
    /// ```
    /// use minitrace::collector::SpanKind;
    /// let _call = minitrace::local::LocalSpan::enter_with_local_parent("GET users").with_kind(SpanKind::Client);
    /// ```
    pub fn with_kind(self, kind: SpanKind) -> LocalSpan {
        self.with_properties(|| [otel::kind_property(kind)])
    }

    /// Sets the span's [`SpanStatus`]; the last one set counts.
    ///
    /// ```
    /// use minitrace::collector::SpanStatus;
    /// let _step = minitrace::local::LocalSpan::enter_with_local_parent("parse").with_status(SpanStatus::error("bad input"));
    /// ```
    pub fn with_status(self, status: SpanStatus) -> LocalSpan {
        self.with_properties(|| status.into_properties())
    }

    /// Links the span to `context`.
    ///
    /// ```
    /// use minitrace::prelude::*;
    /// let _step = LocalSpan::enter_with_local_parent("handle message").with_link(SpanContext::random());
    /// ```
    pub fn with_link(self, context: SpanContext) -> LocalSpan {
        self.with_properties(|| [otel::link_property(context)])
    }

    /// Adds a property to the current thread's innermost open local span;
    /// no effect when there is none.
    ///
    /// ```
    /// use minitrace::local::LocalSpan;
    /// let _span = LocalSpan::enter_with_local_parent("get");
    /// LocalSpan::add_property(|| ("rows", "3"));
    /// ```
    pub fn add_property<K, V, F>(property: F)
    where
        K: Into<Cow<'static, str>>,
        V: Into<Cow<'static, str>>,
        F: FnOnce() -> (K, V),
    {
        LocalSpan::add_properties(|| [property()])
    }

    /// Adds properties to the current thread's innermost open local span.
    ///
    /// ```
    /// use minitrace::local::LocalSpan;
    /// let _span = LocalSpan::enter_with_local_parent("get");
    /// LocalSpan::add_properties(|| [("rows", "3"), ("index", "primary")]);
    /// ```
    pub fn add_properties<K, V, I, F>(properties: F)
    where
        K: Into<Cow<'static, str>>,
        V: Into<Cow<'static, str>>,
        I: IntoIterator<Item = (K, V)>,
        F: FnOnce() -> I,
    {
        // Two looks at the thread's stack: the user's closure must run with
        // the stack released (it may start spans itself), and only if needed.
        if ENABLED && stack::has_open_local_span() {
            if let Some(list) = property_lists::collect(properties) {
                stack::add_properties_to_current(list);
            }
        }
    }
}

impl Drop for LocalSpan {
    // Inlined: a no-op span's drop is one test in the caller.
    #[inline(always)]
    fn drop(&mut self) {
        if let Some(handle) = self.handle.take() {
            stack::exit_span(handle);
        }
    }
}
