//! A timeline tracing library cheap enough to trace every request of a
//! service that answers in a microsecond, all the time, and to find the one
//! slow request in a million that averages hide.
//!
//! A **trace** is the timeline of one request: a tree of named, timed
//! **spans** (parse, query, encode, ...) with properties and events. Spans
//! are recorded on the traced threads at the cost of a few clock reads and
//! pushes; everything else (assembling traces, converting timestamps,
//! sending them to Jaeger or elsewhere) happens on a background thread.
//!
//! # Getting started
//!
//! An application enables the `enable` feature; libraries depend on
//! minitrace without it, so that their spans compile to nothing unless the
//! application that uses them turns tracing on:
//!
//! ```toml
//! [dependencies]
//! minitrace = { version = "0.6", features = ["enable"] }
//! ```
//!
//! Then: set a reporter once, start a root span for each request and make
//! it the thread's local parent, trace functions with
//! [`#[trace]`](macro@trace), and flush before exiting.
//!
//! ```
//! use minitrace::collector::{Config, ConsoleReporter};
//! use minitrace::prelude::*;
//!
//! // A span for every call, named after the function ("parse"), under
//! // whatever span the caller is in.
//! #[trace(short_name = true)]
//! fn parse(input: &str) -> Vec<u64> {
//!     input.split(',').filter_map(|number| number.trim().parse().ok()).collect()
//! }
//!
//! // Properties are formatted from the arguments, only when recorded.
//! #[trace(short_name = true, properties = { "numbers": "{numbers:?}" })]
//! fn sum(numbers: &[u64]) -> u64 {
//!     numbers.iter().sum()
//! }
//!
//! // Once, at start-up: where finished spans go (here printed to stderr).
//! minitrace::set_reporter(ConsoleReporter, Config::default());
//!
//! // For each request: a root span, the local parent of this thread's spans
//! // until the guard drops.
//! {
//!     let root = Span::root("request", SpanContext::random());
//!     let _guard = root.set_local_parent();
//!     assert_eq!(sum(&parse("1, 2, 3")), 6);
//! }
//!
//! // Before exiting: wait until everything finished has been reported.
//! minitrace::flush();
//! ```
//!
//! The repository's `examples/` show more, each runnable with
//! `cargo run --release --example NAME`: `get_started`, `synchronous`,
//! `asynchronous` (tokio), `tail_sampling`, `batch_write`, `log_events`,
//! `test_harness`, `jaeger`, and `trace` (all of these together).
//!
//! # Concepts
//!
//! ## Spans
//!
//! A **[`Span`]** is a named interval with properties and events. It is
//! thread-safe: it can be sent to another thread, held across `.await`s,
//! and have several parents ([`Span::enter_with_parents`]). [`Span::root`]
//! starts a trace; [`Span::enter_with_parent`] and
//! [`Span::enter_with_local_parent`] start children. A span ends when it is
//! dropped.
//!
//! A **[`LocalSpan`](local::LocalSpan)** stays on the thread that started
//! it and is several times cheaper: most spans of a trace should be local
//! ones, and `#[trace]` on a sync fn records one.
//!
//! ## The local parent
//!
//! Local spans do not name their parent: it is the thread's **local
//! parent**, the innermost open local span, or else the span made the local
//! parent with [`Span::set_local_parent`] for as long as its guard lives.
//! This is how spans nest without passing a span through every function:
//!
//! ```
//! use minitrace::collector::{Config, TestReporter};
//! use minitrace::prelude::*;
//!
//! let (reporter, records) = TestReporter::new();
//! minitrace::set_reporter(reporter, Config::default());
//! {
//!     let root = Span::root("request", SpanContext::random());
//!     let _guard = root.set_local_parent();
//!     let _query = LocalSpan::enter_with_local_parent("query"); // a child of "request"
//!     let _fetch = LocalSpan::enter_with_local_parent("fetch"); // a child of "query"
//! }
//! minitrace::flush();
//!
//! let records = records.lock();
//! let span = |name: &str| records.iter().find(|record| record.name == name).unwrap();
//! assert_eq!(span("query").parent_id, span("request").span_id);
//! assert_eq!(span("fetch").parent_id, span("query").span_id);
//! ```
//!
//! Without a local parent, a local span (and `#[trace]`) records nothing,
//! at the cost of a thread-local read: code can be traced everywhere and is
//! recorded only when called within a trace.
//!
//! Async code cannot keep a local parent across `.await`s, as the task may
//! resume on another thread. Instead, [`FutureExt::in_span`](future::FutureExt::in_span)
//! binds a span to a future and makes it the local parent whenever the
//! future is polled, and [`FutureExt::enter_on_poll`](future::FutureExt::enter_on_poll)
//! records a local span around each poll. `#[trace]` on an `async fn` uses
//! `in_span`.
//!
//! ## Local collectors: one batch, many parents
//!
//! A **[`LocalCollector`](local::LocalCollector)** records local spans that
//! have no parent yet. The batch it returns can then be mounted under any
//! number of spans with [`Span::push_child_spans`]: work done once for
//! several requests (a group commit, a shared cache fill) appears in each
//! request's trace without being recorded twice.
//!
//! ## Properties and events
//!
//! Properties are key-value strings on a span ([`Span::with_property`],
//! [`LocalSpan::with_property`](local::LocalSpan::with_property),
//! `#[trace(properties = { .. })]`). They are given as closures, run only
//! when the span is recorded. An **[`Event`]** marks a moment inside a
//! span, with properties of its own.
//!
//! ## The collector and the reporter
//!
//! Finished spans travel from each thread through its own lock-free queue
//! to the **collector**, a background thread started by [`set_reporter`].
//! The collector wakes every [`report_interval`](collector::Config::report_interval)
//! (or on [`flush`]), assembles each trace once its root has finished, and
//! hands the finished [`SpanRecord`](collector::SpanRecord)s, in batches,
//! to the **[`Reporter`](collector::Reporter)**: [`ConsoleReporter`](collector::ConsoleReporter),
//! [`TestReporter`](collector::TestReporter), the Jaeger reporter of the
//! `minitrace-jaeger` crate, or your own. The reporter runs on the
//! collector thread, so it may block on I/O without slowing the traced
//! threads. Until a reporter is set, root spans are no-ops.
//!
//! ## Sampling, and where each trace's fate is decided
//!
//! - **Tail sampling**: [`Config::report_slow_traces_only`](collector::Config::report_slow_traces_only)
//!   traces every request in full and reports a trace only if its root
//!   lasted at least a threshold. The decision is made when the root
//!   finishes, so the slow request is never missed.
//! - **Cancelling**: [`Span::cancel`] on a root discards its whole trace,
//!   e.g. a health check found out to be uninteresting.
//! - **Head sampling**: [`Config::head_sampling`](collector::Config::head_sampling)
//!   records only a share of new traces, chosen from the trace id as
//!   OpenTelemetry's SDKs choose, so services agree on which. A caller's
//!   `traceparent` header carries its own decision
//!   ([`SpanContext::decode_w3c_traceparent_with_sampled`](collector::SpanContext::decode_w3c_traceparent_with_sampled));
//!   an unsampled request runs under [`Span::noop`].
//! - **Switching off** at run time: [`set_enabled`]`(false)` makes new
//!   roots no-ops, from any thread, at any time; traces already begun
//!   finish whole.
//!
//! A root that ends on the thread that started it (a request under
//! [`Span::set_local_parent`], or an `in_span` future that stayed on its
//! thread) has its trace's fate decided there: a trace thrown away by the
//! threshold or by `cancel()` is reset in the thread's own buffers, with no
//! message to the collector; only kept traces travel. A trace with parts
//! elsewhere (a `Span` sent to another thread, a root ended on another
//! thread) follows its root's fate through the collector.
//!
//! ```
//! use std::time::Duration;
//! use minitrace::collector::{Config, ConsoleReporter};
//!
//! // Report only the requests that took at least 10 ms.
//! minitrace::set_reporter(ConsoleReporter, Config::default().report_slow_traces_only(Duration::from_millis(10)));
//! ```
//!
//! ## Counted loss
//!
//! Memory is bounded: a thread's queue to the collector, and optionally the
//! spans of one trace ([`Config::max_spans_per_trace`](collector::Config::max_spans_per_trace)).
//! A span dropped by a bound is never lost silently: [`collector::stats`]
//! counts every span as reported, sampled out, or dropped, and why. Where
//! no span may be lost, [`Config::wait_when_queue_full`](collector::Config::wait_when_queue_full)
//! makes a thread whose queue is full wait for room instead.
//!
//! # Cost model
//!
//! What the traced thread pays, per operation:
//!
//! | operation | cost on the traced thread |
//! |---|---|
//! | local span (`LocalSpan`, `#[trace]` on a sync fn) | two clock reads of the cheaper, unordered kind (`RDTSC` where the TSC is usable; see `minstant::Instant::now_unordered`) and a push into the thread's recycled span buffer; no lock, no atomic |
//! | local parent guard dropped | the batch of local spans waits on the thread for its root (a root's own guard), or one push of it into the thread's queue |
//! | root ending on its own thread, trace thrown away | its buffer back to the thread's pool and a count in a counter of the thread's own; no message, no read-modify-write |
//! | root ending on its own thread, trace kept | one push of the waiting batch and one of the root into the thread's queue |
//! | `Span` (`#[trace]` on an async fn, `in_span`) | a cheap clock read at the start and an ordered one (`RDTSCP`) at the end, which may be on another thread (a root ending on the thread that started it takes the cheap one again, ordered only with its thread's other cheap reads: a thread-safe child or an event that ended just before the root, on any thread, may appear to end up to a fraction of a microsecond after it), then one push into the ending thread's queue; no allocation |
//! | property | running the closure, and on a span's first property a small vector (a local span keeps it in a box too, to stay one cache line); `&'static str` keys and values are not copied |
//! | span without a local parent | a thread-local read; nothing is recorded |
//! | root not sampled, or recording switched off | a relaxed atomic load; nothing is recorded |
//! | root span before `set_reporter` | a relaxed atomic load and a counter increment; nothing is recorded |
//! | anything, without the `enable` feature | nothing: every call compiles to a no-op |
//!
//! Span buffers are recycled, and timestamps stay in clock ticks until the
//! collector converts them. Assembling traces, building the records and
//! running the reporter happen on the collector's thread: CPU time all the
//! same (the repository's benchmarks charge it to the library, beside its
//! peers), but never a pause on a traced thread.
//!
//! # The `enable` feature
//!
//! Without it, every call in this crate compiles to nothing: spans are
//! zero-sized, closures never run, and the optimiser removes the rest.
//! Libraries depend on minitrace without it; the application enables it.

#![deny(missing_docs)]

// The layers, from the bottom up: `util` (helpers that know nothing of
// tracing), `data` (ids, records, raw spans), `transport` (from traced
// threads to the collector thread), `local` and `span` (what the traced
// threads record), `collector` (the collector thread, assembly and
// reporters). Each imports only from the layers below it.
pub mod collector;
mod data;
mod event;
pub mod future;
pub mod local;
mod macros;
pub mod recorder;
mod span;
mod transport;
pub mod util;

#[doc(hidden)]
pub use macros::__private;

pub use crate::collector::global::{flush, set_reporter};
pub use crate::event::Event;
pub use crate::span::Span;
pub use crate::transport::gate::{is_enabled, set_enabled};
/// Traces a fn: a span for every call, named after the fn, under the
/// caller's local parent. See [`minitrace_macro::trace`] for the options.
pub use minitrace_macro::trace;
/// `#[trace]` for async fns, in the spelling of older minitrace releases
/// (`#[trace_async]`, `#[trace_async("name")]`). See
/// [`minitrace_macro::trace_async`].
pub use minitrace_macro::trace_async;

/// The common imports.
///
/// ```
/// use minitrace::prelude::*;
/// ```
pub mod prelude {
    pub use crate::collector::{SpanContext, SpanId, SpanRecord, TraceId};
    pub use crate::event::Event;
    pub use crate::future::FutureExt as _;
    pub use crate::local::LocalSpan;
    pub use crate::span::Span;
    pub use crate::{file_location, full_name, func_name};
    pub use crate::{trace, trace_async};
}
