mod fate;
mod otel;

use std::borrow::Cow;
use std::marker::PhantomData;
use std::time::Duration;

use crate::data::batch::{Batch, IdMap, Role};
use crate::data::context::SpanContext;
use crate::data::raw_span::{Clock, RawSpan};
use crate::data::record::Property;
use crate::data::span_state::SpanState;
use crate::data::target::{Target, Targets};
use crate::data::{collect_id, escape};
use crate::local::local_collector::LocalSpans;
use crate::local::local_parent_guard::LocalParentGuard;
use crate::local::stack;
use crate::transport::message::{EndedSpan, Message};
use crate::transport::{gate, queue, stats};
use crate::util::recording::{recording, Recording, ENABLED};

/// A thread-safe span: it can be sent to other threads, held across
/// `.await`s, and have several parents. It ends when dropped.
///
/// A trace starts with [`Span::root`]; children are started with an
/// explicit parent ([`enter_with_parent`](Span::enter_with_parent)) or under
/// the thread's local parent ([`enter_with_local_parent`](Span::enter_with_local_parent)).
/// For spans that stay on one thread, [`LocalSpan`](crate::local::LocalSpan)
/// is several times cheaper.
///
/// ```
/// use minitrace::prelude::*;
///
/// let root = Span::root("request", SpanContext::random());
/// let worker = {
///     let child = Span::enter_with_parent("on another thread", &root);
///     std::thread::spawn(move || {
///         let _child = child;
///         // ... work ...
///     })
/// };
/// worker.join().unwrap();
/// ```
#[must_use]
#[derive(Default)]
pub struct Span {
    // Inline rather than boxed: no allocation per span, and no free on the
    // collector thread (the span's fields move into its message).
    inner: Recording<SpanState>,
}

// Sent to and shared with other threads, as documented: checked here, as
// `SpanState` vouches for its name pointer by hand.
const _: () = {
    const fn send_and_sync<T: Send + Sync>() {}
    send_and_sync::<Span>()
};

impl Span {
    /// A span that records nothing.
    ///
    /// ```
    /// let span = minitrace::Span::noop();
    /// assert!(span.elapsed().is_none());
    /// ```
    #[inline]
    pub fn noop() -> Span {
        Span { inner: Recording::default() }
    }

    /// Starts a trace. `parent` gives the trace id and, for a trace continued
    /// from another process, the remote parent's span id.
    ///
    /// A no-op when no reporter is set (see [`set_reporter`](crate::set_reporter)),
    /// when recording is [switched off](crate::set_enabled), and when head
    /// sampling leaves the trace out (see [`Config::head_sampling`](crate::collector::Config::head_sampling)).
    /// To honour a caller's decision not to sample, start [`Span::noop`]
    /// instead (see [`SpanContext::decode_w3c_traceparent_with_sampled`]).
    ///
    /// ```
    /// use minitrace::prelude::*;
    /// let root = Span::root("request", SpanContext::random());
    /// ```
    #[inline(always)]
    pub fn root(name: impl Into<Cow<'static, str>>, parent: SpanContext) -> Span {
        if !ENABLED {
            return Span::noop();
        }
        if !gate::admits(parent.trace_id) {
            if gate::refused_for_want_of_a_reporter() {
                stats::count_root_without_reporter();
            }
            return Span::noop();
        }
        let target = Target::new(parent.trace_id, parent.span_id, collect_id::next_collect_id());
        Span::start(name, Targets::One(target), Role::Root)
    }

    /// Starts a child of `parent` (a no-op if `parent` is one).
    ///
    /// ```
    /// use minitrace::prelude::*;
    /// let root = Span::root("request", SpanContext::random());
    /// let child = Span::enter_with_parent("step", &root);
    /// ```
    #[inline(always)]
    pub fn enter_with_parent(name: impl Into<Cow<'static, str>>, parent: &Span) -> Span {
        match parent.inner.as_ref() {
            Some(parent) if ENABLED => Span::start(name, parent.child_targets(), Role::Child),
            _ => Span::noop(),
        }
    }

    /// Starts a span that is a child of every span in `parents`: it is
    /// reported once under each (no-op parents are skipped).
    ///
    /// ```
    /// use minitrace::prelude::*;
    /// let a = Span::root("request a", SpanContext::random());
    /// let b = Span::root("request b", SpanContext::random());
    /// let shared = Span::enter_with_parents("batched write", [&a, &b]);
    /// ```
    pub fn enter_with_parents<'a>(
        name: impl Into<Cow<'static, str>>,
        parents: impl IntoIterator<Item = &'a Span>,
    ) -> Span {
        if !ENABLED {
            return Span::noop();
        }
        let mut targets = Vec::new();
        for parent in parents.into_iter().filter_map(|parent| parent.inner.as_ref()) {
            targets.extend_from_slice(parent.child_targets().as_slice());
        }
        match Targets::from_vec(targets) {
            Some(targets) => Span::start(name, targets, Role::Child),
            None => Span::noop(),
        }
    }

    /// Starts a child of the current thread's local parent (see
    /// [`set_local_parent`](Span::set_local_parent)); a no-op without one.
    ///
    /// ```
    /// use minitrace::prelude::*;
    /// let root = Span::root("request", SpanContext::random());
    /// let _guard = root.set_local_parent();
    /// let child = Span::enter_with_local_parent("step"); // a child of "request"
    /// ```
    #[inline]
    pub fn enter_with_local_parent(name: impl Into<Cow<'static, str>>) -> Span {
        if !ENABLED {
            return Span::noop();
        }
        match stack::current_targets() {
            Some(targets) => Span::start(name, targets, Role::Child),
            None => Span::noop(),
        }
    }

    /// Makes this span the current thread's local parent until the guard is
    /// dropped: [`LocalSpan`](crate::local::LocalSpan)s started meanwhile are
    /// its descendants. On drop, the guard sends them to the collector in one
    /// batch (spans still open are closed then). Spans still open when the
    /// thread exits are closed and sent by the thread's destructors; a guard
    /// made after that (in a later thread-local destructor) records nothing.
    ///
    /// ```
    /// use minitrace::prelude::*;
    /// let root = Span::root("request", SpanContext::random());
    /// let _guard = root.set_local_parent();
    /// let _step = LocalSpan::enter_with_local_parent("step");
    /// ```
    #[inline(always)]
    pub fn set_local_parent(&self) -> LocalParentGuard {
        // The no-op case inline; the line's opening is a call.
        let epoch = match self.inner.as_ref() {
            Some(inner) if ENABLED => Span::open_line_under(inner),
            _ => None,
        };
        LocalParentGuard { epoch: recording(epoch), _not_send: PhantomData }
    }

    #[inline]
    fn open_line_under(inner: &SpanState) -> Option<u64> {
        let targets = inner.child_targets();
        let root_of_this_thread = collect_id::is_from_this_thread(targets.first().collect_id);
        if !root_of_this_thread {
            // Its spans are sent from here, possibly after the root's end.
            escape::mark_targets(&targets);
        }
        // Only a root's own line on its thread waits for the root's end.
        stack::push_line(Some(targets), root_of_this_thread && inner.role() != Role::Child)
    }

    /// Adds a property (the closure runs only for a recording span).
    ///
    /// ```
    /// use minitrace::prelude::*;
    /// let root = Span::root("request", SpanContext::random()).with_property(|| ("user", "42"));
    /// ```
    pub fn with_property<K, V, F>(self, property: F) -> Span
    where
        K: Into<Cow<'static, str>>,
        V: Into<Cow<'static, str>>,
        F: FnOnce() -> (K, V),
    {
        self.with_properties(|| [property()])
    }

    /// Adds properties (the closure runs only for a recording span).
    ///
    /// ```
    /// use minitrace::prelude::*;
    /// let root = Span::root("request", SpanContext::random())
    ///     .with_properties(|| [("user", "42"), ("region", "eu")]);
    /// ```
    pub fn with_properties<K, V, I, F>(mut self, properties: F) -> Span
    where
        K: Into<Cow<'static, str>>,
        V: Into<Cow<'static, str>>,
        I: IntoIterator<Item = (K, V)>,
        F: FnOnce() -> I,
    {
        self.add_properties(properties);
        self
    }

    /// Adds a property to a span already started.
    ///
    /// ```
    /// use minitrace::prelude::*;
    /// let mut root = Span::root("request", SpanContext::random());
    /// root.add_property(|| ("status", "200"));
    /// ```
    pub fn add_property<K, V, F>(&mut self, property: F)
    where
        K: Into<Cow<'static, str>>,
        V: Into<Cow<'static, str>>,
        F: FnOnce() -> (K, V),
    {
        self.add_properties(|| [property()])
    }

    /// Adds properties to a span already started.
    ///
    /// ```
    /// use minitrace::prelude::*;
    /// let mut root = Span::root("request", SpanContext::random());
    /// root.add_properties(|| [("status", "200"), ("bytes", "512")]);
    /// ```
    pub fn add_properties<K, V, I, F>(&mut self, properties: F)
    where
        K: Into<Cow<'static, str>>,
        V: Into<Cow<'static, str>>,
        I: IntoIterator<Item = (K, V)>,
        F: FnOnce() -> I,
    {
        if let Some(inner) = self.inner.as_mut() {
            // Straight into the span's list: no list of their own first.
            inner.extend_properties(properties().into_iter().map(|(key, value)| (key.into(), value.into())));
        }
    }

    /// Mounts a batch of local spans (from a [`LocalCollector`](crate::local::LocalCollector))
    /// under this span. The same batch can be mounted under many spans.
    ///
    /// ```
    /// use minitrace::local::LocalCollector;
    /// use minitrace::prelude::*;
    /// let spans = LocalCollector::start().collect();
    /// let root = Span::root("request", SpanContext::random());
    /// root.push_child_spans(spans);
    /// ```
    #[inline]
    pub fn push_child_spans(&self, local_spans: LocalSpans) {
        let (Some(inner), Some((spans, count))) = (self.inner.as_ref(), { local_spans }.spans.take()) else {
            return;
        };
        if spans.is_empty() {
            return;
        }
        let targets = inner.child_targets();
        escape::mark_targets(&targets);
        queue::submit(Message::new(
            Batch::Shared { spans, ids: IdMap::PerParent },
            targets,
            Role::Child,
            count,
        ));
    }

    /// Time since the span started; `None` for a no-op span.
    ///
    /// ```
    /// use minitrace::prelude::*;
    /// let root = Span::root("request", SpanContext::random());
    /// if let Some(elapsed) = root.elapsed() {
    ///     println!("{elapsed:?} so far");
    /// }
    /// ```
    pub fn elapsed(&self) -> Option<Duration> {
        self.inner.as_ref().map(|inner| inner.begin().elapsed())
    }

    /// Drops the span without reporting it, counted in
    /// [`Stats::spans_sampled_out`](crate::collector::Stats::spans_sampled_out).
    /// Cancelling a root discards its whole trace; spans already recorded
    /// under a cancelled child are re-parented to the root.
    ///
    /// ```
    /// use minitrace::prelude::*;
    /// let mut root = Span::root("health check", SpanContext::random());
    /// root.cancel();
    /// ```
    pub fn cancel(&mut self) {
        if let Some(inner) = self.inner.as_mut() {
            if inner.role() == Role::Root {
                inner.set_role(Role::CancelledRoot);
            } else if let Some(inner) = self.inner.take() {
                // Counted, and its trace told, so that spans already sent
                // under it are re-parented to the root.
                let targets = inner.targets();
                stats::count_sampled_out(targets.as_slice().len());
                queue::note_dropped_child(&targets, inner.id());
            }
        }
    }

    pub(crate) fn is_recording(&self) -> bool {
        self.inner.as_ref().is_some()
    }

    pub(crate) fn context(&self) -> Option<SpanContext> {
        let inner = self.inner.as_ref()?;
        Some(SpanContext::new(inner.trace_id(), inner.id()))
    }

    pub(crate) fn add_event_record(&self, name: Cow<'static, str>, properties: Vec<Property>) {
        if let Some(inner) = self.inner.as_ref() {
            inner.add_event(RawSpan::event(inner.id(), name, properties));
        }
    }

    // Always inlined, as are its callers, so that no `Span` is copied out of
    // a callee's frame (PERFORMANCE.md, "Building values where they live").
    #[inline(always)]
    fn start(name: impl Into<Cow<'static, str>>, targets: Targets, role: Role) -> Span {
        // The parent comes from each target, so it is left to the collector.
        // The cheap read is enough for the start: read early, it only lengthens
        // the span. The end is an ordered read, unless it is a root's on its
        // own thread (see `SpanState::end_clock`).
        if role == Role::Child {
            // It may end anywhere: its root must tell the collector its fate.
            escape::mark_targets(&targets);
        }
        let state = SpanState::new(name.into(), targets, role, Clock::SameThread.now());
        Span { inner: recording(Some(state)) }
    }
}

// What only a live span or the thread's local parent can tell.
impl SpanContext {
    /// The context of `span`, or `None` for a no-op span. With several
    /// parents, the first one's trace is used.
    ///
    /// ```
    /// use minitrace::prelude::*;
    /// let span = Span::noop();
    /// assert_eq!(SpanContext::from_span(&span), None);
    /// ```
    pub fn from_span(span: &Span) -> Option<SpanContext> {
        span.context()
    }

    /// The context of the current thread's local parent (the span set with
    /// [`Span::set_local_parent`], or the innermost open local span under it).
    ///
    /// ```
    /// assert_eq!(minitrace::prelude::SpanContext::current_local_parent(), None);
    /// ```
    pub fn current_local_parent() -> Option<SpanContext> {
        if !ENABLED {
            return None;
        }
        stack::current_context()
    }
}

/// Shows the span's context, or that it is a no-op.
impl std::fmt::Debug for Span {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.context() {
            Some(context) => f
                .debug_struct("Span")
                .field("trace_id", &context.trace_id)
                .field("span_id", &context.span_id)
                .finish(),
            None => f.write_str("Span(noop)"),
        }
    }
}

impl Drop for Span {
    // Inlined: a no-op span's drop is one test in the caller.
    #[inline(always)]
    fn drop(&mut self) {
        if self.inner.is_some() {
            self.end_recording();
        }
    }
}

impl Span {
    // Out of line, so that the drop glue around it stays small enough to inline.
    #[inline(never)]
    fn end_recording(&mut self) {
        if let Some(inner) = self.inner.take() {
            if fate::ends_here(&inner) {
                return fate::end_root_here(inner);
            }
            if inner.role() != Role::Child {
                // A root ending away from the thread that started it: parts of
                // its trace may be on their way from there.
                escape::mark(inner.collect_id());
            }
            let (spans, end) = (inner.target_count(), inner.end_clock().now());
            queue::submit_with(spans, || Message::Ended(EndedSpan { state: inner, end }));
        }
    }
}
