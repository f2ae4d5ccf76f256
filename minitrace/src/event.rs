use std::borrow::Cow;

use crate::local::stack;
use crate::span::Span;
use crate::util::recording::ENABLED;

/// Something that happened at one moment during a span: recorded with a
/// timestamp and properties, and reported in its span's
/// [`SpanRecord::events`](crate::collector::SpanRecord::events).
///
/// ```
/// use minitrace::prelude::*;
///
/// let root = Span::root("request", SpanContext::random());
/// Event::add_to_parent("cache miss", &root, || [("key".into(), "user:42".into())]);
/// ```
#[derive(Debug)]
pub struct Event;

impl Event {
    /// Adds an event to `parent`.
    ///
    /// The closure runs only when `parent` is recording.
    ///
    /// ```
    /// use minitrace::prelude::*;
    /// let span = Span::root("request", SpanContext::random());
    /// Event::add_to_parent("retry", &span, || []);
    /// ```
    pub fn add_to_parent<I, F>(name: impl Into<Cow<'static, str>>, parent: &Span, properties: F)
    where
        I: IntoIterator<Item = (Cow<'static, str>, Cow<'static, str>)>,
        F: FnOnce() -> I,
    {
        parent.add_event(name, properties);
    }

    /// Adds an event to the current thread's local parent: the innermost open
    /// local span, or the span set with [`Span::set_local_parent`].
    ///
    /// ```
    /// use minitrace::prelude::*;
    /// let root = Span::root("request", SpanContext::random());
    /// let _guard = root.set_local_parent();
    /// Event::add_to_local_parent("cache miss", || [("key".into(), "user:42".into())]);
    /// ```
    pub fn add_to_local_parent<I, F>(name: impl Into<Cow<'static, str>>, properties: F)
    where
        I: IntoIterator<Item = (Cow<'static, str>, Cow<'static, str>)>,
        F: FnOnce() -> I,
    {
        // As in `LocalSpan::add_properties`: the closure runs only when
        // recording, and never while the thread's stack is borrowed.
        if ENABLED && stack::has_line() {
            stack::add_event(name.into(), crate::transport::property_lists::collect(properties));
        }
    }
}
