//! Spans and events of crates instrumented with tokio
//! [`tracing`](https://docs.rs/tracing) (hyper, tonic, tower-http, sqlx,
//! reqwest, ...) in minitrace traces. [`MinitraceLayer`] is a
//! [`tracing_subscriber::Layer`]: each `tracing` span opened inside a
//! minitrace trace becomes a minitrace [`Span`] in that trace, and each
//! `tracing` event an [`Event`] of the current span.
//!
//! ```
//! use minitrace::collector::{Config, TestReporter};
//! use minitrace::prelude::*;
//! use minitrace_tracing::MinitraceLayer;
//! use tracing_subscriber::layer::SubscriberExt;
//!
//! // A library function, instrumented with `tracing`.
//! #[tracing::instrument]
//! fn lookup(user: &str) -> usize {
//!     tracing::info!(rows = 1, "cache hit");
//!     user.len()
//! }
//!
//! // Once, at start-up: the layer in tracing's subscriber, and minitrace's reporter.
//! let subscriber = tracing_subscriber::registry().with(MinitraceLayer::new());
//! tracing::subscriber::set_global_default(subscriber).unwrap();
//! let (reporter, records) = TestReporter::new();
//! minitrace::set_reporter(reporter, Config::default());
//!
//! {
//!     let root = Span::root("request", SpanContext::random());
//!     let _guard = root.set_local_parent();
//!     lookup("alice");
//! }
//! minitrace::flush();
//!
//! let records = records.lock();
//! let request = records.iter().find(|span| span.name == "request").unwrap();
//! let lookup = records.iter().find(|span| span.name == "lookup").unwrap();
//! assert_eq!(lookup.parent_id, request.span_id);
//! assert!(lookup.properties.contains(&("user".into(), "alice".into())));
//! assert_eq!(lookup.events[0].name, "cache hit");
//! assert!(lookup.events[0].properties.contains(&("rows".into(), "1".into())));
//! ```
//!
//! # Which spans are recorded
//!
//! The layer never starts a trace: a trace is a request, and its root is
//! the application's (a [`Span::root`] per request, e.g. in a server's
//! outermost middleware). A `tracing` span is recorded when it is created
//!
//! - with the current span as its parent (`tracing`'s default), while
//!   the thread has a minitrace local parent
//!   ([`SpanContext::current_local_parent`]): it becomes a child of that
//!   local parent, which is the innermost of the recorded `tracing` spans
//!   entered on the thread, `#[trace]` spans, local spans, and spans set
//!   with [`Span::set_local_parent`] or bound to the polled future with
//!   `in_span`;
//! - with an explicit parent (`parent: &span`): a child of that parent,
//!   or of its nearest recorded ancestor, if any is recorded.
//!
//! Anything else records nothing: a span created outside any trace costs
//! the layer a thread-local read, and an explicit root (`parent: None`)
//! is left out.
//!
//! A recorded span is one minitrace [`Span`], kept in the `tracing`
//! span's extensions: entered and exited any number of times, on any
//! threads (an `Instrument`ed future across its `.await`s), it is
//! reported once, from its creation until the `tracing` span closes.
//!
//! `#[tracing::instrument]` on an `async fn` opens its span at the first
//! poll. A future spawned bare (`tokio::spawn(fetch())`) is first polled
//! on a worker with no local parent, so it is not recorded, as an unbound
//! `#[trace]` future is not: bind it to the trace with a span made before
//! spawning, `fetch().instrument(info_span!("fetch"))` or
//! `fetch().in_span(Span::enter_with_local_parent("fetch"))`.
//!
//! # The local parent
//!
//! While a recorded span is entered on a thread, it is that thread's
//! minitrace local parent: `#[trace]` functions, local spans, events and
//! `tracing` spans called inside a `#[tracing::instrument]`ed function
//! nest under it. Exiting it gives the local parent back.
//!
//! # Names, properties and events
//!
//! - A span keeps its `tracing` name (`#[instrument]`: the function's).
//! - Its properties are `tracing.target` and `tracing.level`, then its
//!   fields, set at creation or later with `Span::record` (appended: a
//!   field recorded twice appears twice, the last value the latest). A
//!   value is formatted as a reader expects it: a string without quotes,
//!   numbers and bools as written, an error with `Display`, anything else
//!   with `Debug` (`?value`) or `Display` (`%value`) as the field says.
//! - An event's name is its message (`info!("cache hit")`), or its
//!   callsite's name (`event src/lib.rs:12`) when it has none; its
//!   properties are `tracing.target`, `tracing.level` and its other fields.
//!   It is added to the thread's local parent, or to its explicit parent
//!   if that is recorded. An event right inside a recorded span is kept
//!   by the span itself, so that it stays there even if the span ends
//!   after its root (tower-http's request span lives until the response
//!   body is sent).
//! - `follows_from` between two recorded spans becomes a link
//!   ([`Span::add_link`]).
//!
//! # Filtering and other layers
//!
//! The layer composes with any other layer (`fmt`, metrics, ...) and is
//! filtered with `tracing-subscriber`'s own filters, as a per-layer filter
//! or for the whole subscriber: `LevelFilter`, `Targets`, `EnvFilter`,
//! `filter_fn`. A span filtered out is not recorded, and what is created
//! inside it nests under the nearest recorded span.
//!
//! ```
//! use minitrace_tracing::MinitraceLayer;
//! use tracing_subscriber::filter::{LevelFilter, Targets};
//! use tracing_subscriber::layer::{Layer, SubscriberExt};
//!
//! // tower-http's request spans (DEBUG) and our own INFO spans; hyper's
//! // internals only in the other layers.
//! let filter = Targets::new()
//!     .with_target("tower_http", LevelFilter::DEBUG)
//!     .with_target("hyper", LevelFilter::OFF)
//!     .with_default(LevelFilter::INFO);
//! let subscriber = tracing_subscriber::registry().with(MinitraceLayer::new().with_filter(filter));
//! # drop(subscriber);
//! ```
//!
//! # Cost
//!
//! Outside a trace: a span's creation costs the layer a thread-local read
//! (an explicit parent: a look-up of that parent), an event a
//! thread-local read, an enter a look-up of the span's extensions and an
//! exit a thread-local read. Inside one, a recorded span costs a
//! thread-safe minitrace [`Span`] plus its properties, and each enter a
//! local parent guard; the `tracing` machinery itself (the `Registry`,
//! the callsite's `Interest`) costs what it always does.
//!
//! A span's properties are gathered in a list the thread reuses, and its
//! target and level are borrowed from the callsite, as are the values of
//! bools and of 64-bit integers from 0 to 999; any other value is formatted into a
//! string of its own, allocated on the traced thread and freed on the
//! collector's. `benches/bridge.rs` sets a span through the layer beside
//! one through the `Registry` with a recording layer, and beside the same
//! spans made with minitrace's own API (PERFORMANCE.md, "The `tracing`
//! bridge").
//!
//! For `log` records in the same traces, see the `minitrace-log` crate.

#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod entered;
mod fields;

use std::fmt;

use minitrace::collector::SpanContext;
use minitrace::{Event, Span};
use tracing_core::span::{Attributes, Id, Record};
use tracing_core::Subscriber;
use tracing_subscriber::layer::Context;
use tracing_subscriber::registry::{LookupSpan, SpanRef};
use tracing_subscriber::Layer;

/// The property key of a span's or an event's `tracing` target.
///
/// ```
/// assert_eq!(minitrace_tracing::TARGET_KEY, "tracing.target");
/// ```
pub const TARGET_KEY: &str = fields::TARGET_KEY;

/// The property key of a span's or an event's `tracing` level.
///
/// ```
/// assert_eq!(minitrace_tracing::LEVEL_KEY, "tracing.level");
/// ```
pub const LEVEL_KEY: &str = fields::LEVEL_KEY;

/// A [`Layer`] that records `tracing` spans and events in minitrace traces
/// (see the [crate documentation](crate) for what is recorded, and how).
///
/// ```
/// use minitrace_tracing::MinitraceLayer;
/// use tracing_subscriber::layer::SubscriberExt;
///
/// let subscriber = tracing_subscriber::registry().with(MinitraceLayer::new());
/// tracing::subscriber::with_default(subscriber, || {
///     tracing::info_span!("outside any trace: not recorded").in_scope(|| {});
/// });
/// ```
#[derive(Clone, Copy, Default)]
pub struct MinitraceLayer {
    _private: (),
}

impl MinitraceLayer {
    /// The layer.
    ///
    /// ```
    /// let layer = minitrace_tracing::MinitraceLayer::new();
    /// # drop(layer);
    /// ```
    pub fn new() -> MinitraceLayer {
        MinitraceLayer { _private: () }
    }
}

impl fmt::Debug for MinitraceLayer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("MinitraceLayer")
    }
}

/// The minitrace span of a recorded `tracing` span, in its extensions.
struct Recorded(Span);

/// Whether the layer records `span`.
fn is_recorded<S>(span: &SpanRef<'_, S>) -> bool
where
    S: Subscriber + for<'lookup> LookupSpan<'lookup>,
{
    span.extensions().get::<Recorded>().is_some()
}

impl<S> Layer<S> for MinitraceLayer
where
    S: Subscriber + for<'lookup> LookupSpan<'lookup>,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let metadata = attrs.metadata();
        // The new span's data, when it was looked up already.
        let (span, new) = if attrs.is_contextual() {
            // Outside a trace, this thread-local read is all the layer costs.
            (Span::enter_with_local_parent(metadata.name()), None)
        } else if attrs.is_root() {
            return;
        } else {
            // The registry gave the new span its explicit parent; `scope`
            // skips ancestors this layer's filter leaves out.
            let Some(new) = ctx.span(id) else { return };
            let Some(parent) = new.scope().skip(1).find(is_recorded) else { return };
            let extensions = parent.extensions();
            let span = match extensions.get::<Recorded>() {
                Some(Recorded(parent)) => Span::enter_with_parent(metadata.name(), parent),
                None => return,
            };
            (span, Some(new))
        };
        if SpanContext::from_span(&span).is_none() {
            return;
        }
        let span = fields::with_scratch(|properties| {
            fields::span_properties(properties, metadata, |visit| attrs.record(visit));
            span.with_properties(|| properties.drain(..))
        });
        if let Some(new) = new.or_else(|| ctx.span(id)) {
            new.extensions_mut().insert(Recorded(span));
        }
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(id) else { return };
        if !is_recorded(&span) {
            return;
        }
        // Read with no lock held: a field's `Debug` may itself emit events.
        let mut properties = Vec::new();
        values.record(&mut fields::Properties { properties: &mut properties, message: None });
        let mut extensions = span.extensions_mut();
        if let Some(Recorded(recorded)) = extensions.get_mut::<Recorded>() {
            recorded.add_properties(|| properties);
        }
    }

    fn on_follows_from(&self, id: &Id, follows: &Id, ctx: Context<'_, S>) {
        let cause = ctx.span(follows).and_then(|cause| {
            cause.extensions().get::<Recorded>().and_then(|recorded| SpanContext::from_span(&recorded.0))
        });
        let (Some(cause), Some(span)) = (cause, ctx.span(id)) else { return };
        let mut extensions = span.extensions_mut();
        if let Some(Recorded(recorded)) = extensions.get_mut::<Recorded>() {
            recorded.add_link(cause);
        }
    }

    fn on_event(&self, event: &tracing_core::Event<'_>, ctx: Context<'_, S>) {
        if event.is_contextual() {
            // The only cost outside a trace; the fields are read only inside one.
            let Some(current) = SpanContext::current_local_parent() else { return };
            let (name, properties) = fields::event(event);
            // Right inside a recorded span, the event goes with the span
            // itself: it stays there should the span outlive its root.
            let span = entered::innermost_if(current.span_id).and_then(|id| ctx.span(&id));
            let extensions = span.as_ref().map(|span| span.extensions());
            match extensions.as_ref().and_then(|extensions| extensions.get::<Recorded>()) {
                Some(Recorded(recorded)) => recorded.add_event(name, || properties),
                None => Event::add_to_local_parent(name, || properties),
            }
        } else if event.parent().is_some() {
            let Some(parent) = ctx.event_scope(event).and_then(|mut scope| scope.find(is_recorded)) else {
                return;
            };
            let (name, properties) = fields::event(event);
            let extensions = parent.extensions();
            if let Some(Recorded(recorded)) = extensions.get::<Recorded>() {
                recorded.add_event(name, || properties);
            }
        }
    }

    fn on_enter(&self, id: &Id, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(id) else { return };
        let extensions = span.extensions();
        if let Some(Recorded(recorded)) = extensions.get::<Recorded>() {
            if let Some(context) = SpanContext::from_span(recorded) {
                entered::push(id.clone(), context.span_id, recorded.set_local_parent());
            }
        }
    }

    fn on_exit(&self, id: &Id, _ctx: Context<'_, S>) {
        entered::pop(id);
    }

    fn on_close(&self, id: Id, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(&id) else { return };
        // Taken out first: the span ends with the extensions unlocked.
        let recorded = span.extensions_mut().remove::<Recorded>();
        drop(recorded);
    }
}
