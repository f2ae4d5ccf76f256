//! The flight recorder: every span of every request kept on the threads
//! that recorded it, whatever its trace's fate, in bounded memory, and any
//! recent trace retrievable after the fact.
//!
//! Switched on, each traced thread keeps what it recorded (local spans,
//! `Span`s that ended on it, with their properties, events, links, kind and
//! status) in a *history* of its own, as it recorded them, up to
//! [`bytes_per_thread`](FlightRecorder::bytes_per_thread): the oldest parts
//! make room, counted in [`stats`]. A trace thrown away when its root ended
//! (faster than
//! [`report_slow_traces_only`](crate::collector::Config::report_slow_traces_only)'s
//! threshold, or cancelled) stays where its thread wrote it; a trace that
//! went to the collector comes back to the threads it came from once filed.
//! No second copy is made on a traced thread.
//!
//! Any recent trace can then be asked for, from any thread:
//!
//! - by id: [`trace`] returns it, [`retrieve`] reports it through the
//!   reporter, as it would have been reported when its root ended: the same
//!   records (times, events, properties), whole, the root last;
//! - by time: [`window`] returns every trace whose root overlapped a span of
//!   time, [`snapshot`] every trace held;
//! - by trigger: [`FlightRecorder::report_errors`] and
//!   [`FlightRecorder::report_if`] keep a trace the threshold would throw
//!   away, when its root ends, and [`FlightRecorder::on_slow_trace`] hands a
//!   callback the traces that ran beside each slow one.
//!
//! The collector answers on its own thread, in its next cycle, while it
//! holds the traced threads off their memory: a traced thread never waits
//! for a retrieval. [`retention`] tells how far back each thread's memory
//! reaches now. The `minitrace-flight` crate writes what the recorder holds
//! to files, and `minitrace-view` draws them.
//!
//! ```
//! use minitrace::collector::{Config, ConsoleReporter};
//! use minitrace::prelude::*;
//! use minitrace::recorder::FlightRecorder;
//!
//! minitrace::set_reporter(ConsoleReporter, Config::default().report_slow_traces_only(std::time::Duration::from_secs(1)));
//! FlightRecorder::new().bytes_per_thread(1 << 20).enable();
//! let context = SpanContext::random();
//! {
//!     let root = Span::root("request", context);
//!     let _guard = root.set_local_parent();
//!     let _step = LocalSpan::enter_with_local_parent("step");
//! } // fast: thrown away, but kept in this thread's memory
//! let trace = minitrace::recorder::trace(context.trace_id).unwrap();
//! assert_eq!(trace.spans.len(), 2);
//! assert_eq!(trace.root().unwrap().name, "request");
//! # FlightRecorder::disable();
//! ```

mod slow;
mod traces;

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

pub use crate::data::otel::RootInfo;
pub use slow::SlowTraceWindow;
pub use traces::{RecordedTrace, Retention, Snapshot, ThreadRetention};

use crate::collector::retrieve::{self, Answer, Ask};
use crate::data::id::TraceId;
use crate::transport::{gate, history};

/// The flight recorder's settings; [`enable`](FlightRecorder::enable)
/// switches it on.
pub struct FlightRecorder {
    bytes_per_thread: usize,
    on_slow_trace: Option<slow::Callback>,
    settle: Duration,
    min_interval: Duration,
    triggers: gate::Triggers,
}

impl fmt::Debug for FlightRecorder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FlightRecorder")
            .field("bytes_per_thread", &self.bytes_per_thread)
            .field("on_slow_trace", &self.on_slow_trace.as_ref().map(|_| ".."))
            .field("settle", &self.settle)
            .field("min_interval", &self.min_interval)
            .field("report_errors", &self.triggers.on_error)
            .field("report_if", &self.triggers.predicate.as_ref().map(|_| ".."))
            .finish()
    }
}

impl Default for FlightRecorder {
    fn default() -> FlightRecorder {
        FlightRecorder::new()
    }
}

impl FlightRecorder {
    /// 8 MiB per thread, no triggers, no automatic dumps.
    ///
    /// ```
    /// let recorder = minitrace::recorder::FlightRecorder::new();
    /// # drop(recorder);
    /// ```
    pub fn new() -> FlightRecorder {
        FlightRecorder {
            bytes_per_thread: 8 << 20,
            on_slow_trace: None,
            settle: Duration::from_millis(50),
            min_interval: Duration::from_secs(1),
            triggers: gate::Triggers::default(),
        }
    }

    /// The memory each traced thread's history may hold, counted in real
    /// bytes: each part's spans (64 bytes a span), and the names,
    /// properties and events they own.
    ///
    /// ```
    /// let recorder = minitrace::recorder::FlightRecorder::new().bytes_per_thread(1 << 20);
    /// # drop(recorder);
    /// ```
    pub fn bytes_per_thread(mut self, bytes: usize) -> FlightRecorder {
        self.bytes_per_thread = bytes;
        self
    }

    /// Reports a trace whose root ends with an error status (see
    /// [`SpanStatus`](crate::collector::SpanStatus)) whatever its length,
    /// where the latency threshold would throw it away.
    ///
    /// ```
    /// let recorder = minitrace::recorder::FlightRecorder::new().report_errors();
    /// # drop(recorder);
    /// ```
    pub fn report_errors(mut self) -> FlightRecorder {
        self.triggers.on_error = true;
        self
    }

    /// Reports a trace whose root satisfies `predicate` when it ends,
    /// whatever its length, where the latency threshold would throw it
    /// away. The predicate runs on the thread where the root ends, only for
    /// roots the threshold throws away: keep it cheap. A panic in it keeps
    /// nothing.
    ///
    /// ```
    /// let recorder = minitrace::recorder::FlightRecorder::new()
    ///     .report_if(|root| root.name.starts_with("KEYS"));
    /// # drop(recorder);
    /// ```
    pub fn report_if(
        mut self,
        predicate: impl Fn(&RootInfo<'_>) -> bool + Send + Sync + 'static,
    ) -> FlightRecorder {
        self.triggers.predicate = Some(Arc::new(predicate));
        self
    }

    /// Calls `callback` on a background thread with the traces that
    /// overlapped each slow root (one slower than
    /// `report_slow_traces_only`'s threshold): e.g. to write them to a
    /// file. A panic in it is caught.
    ///
    /// ```
    /// let recorder = minitrace::recorder::FlightRecorder::new()
    ///     .on_slow_trace(|window| println!("{} traces beside a slow one", window.traces.len()));
    /// # drop(recorder);
    /// ```
    pub fn on_slow_trace(
        mut self,
        callback: impl Fn(SlowTraceWindow) + Send + Sync + 'static,
    ) -> FlightRecorder {
        self.on_slow_trace = Some(Arc::new(callback));
        self
    }

    /// How long an automatic dump waits after the slow root's end, so that
    /// the traces still running beside it end and are recorded too
    /// (default 50 ms).
    ///
    /// ```
    /// let recorder = minitrace::recorder::FlightRecorder::new().settle_time(std::time::Duration::from_millis(10));
    /// # drop(recorder);
    /// ```
    pub fn settle_time(mut self, settle: Duration) -> FlightRecorder {
        self.settle = settle;
        self
    }

    /// At most one automatic dump per this interval; slow roots in between
    /// are counted in [`automatic_dumps`] as skipped (default 1 s).
    ///
    /// ```
    /// let recorder = minitrace::recorder::FlightRecorder::new().min_interval(std::time::Duration::ZERO);
    /// # drop(recorder);
    /// ```
    pub fn min_interval(mut self, interval: Duration) -> FlightRecorder {
        self.min_interval = interval;
        self
    }

    /// Starts keeping every trace from now on (replacing earlier settings).
    /// Enabled again while on with more bytes per thread, each thread's
    /// memory grows to them at its next trace and keeps what it holds;
    /// with fewer, the oldest traces go until it fits.
    ///
    /// ```
    /// minitrace::recorder::FlightRecorder::new().enable();
    /// # minitrace::recorder::FlightRecorder::disable();
    /// ```
    pub fn enable(self) {
        slow::configure(slow::Settings {
            callback: self.on_slow_trace,
            settle: self.settle,
            min_interval: self.min_interval,
        });
        gate::set_triggers(Some(self.triggers));
        history::set_limit(self.bytes_per_thread);
    }

    /// Stops keeping traces and forgets what was kept (at the collector's
    /// next cycle).
    ///
    /// ```
    /// minitrace::recorder::FlightRecorder::disable();
    /// ```
    pub fn disable() {
        history::set_limit(0);
        gate::set_triggers(None);
        slow::configure(slow::Settings::default());
        retrieve::ask_later(Ask::Clear);
    }
}

/// The trace `trace_id` as the recorder holds it (its spans from every
/// thread, assembled as a report would deliver them), or `None` when it
/// holds nothing of it. Waits for the collector's next cycle (at most
/// 10 s); returns `None` at once without a reporter, or when called from a
/// reporter (on the collector's thread). When a process holds two roots of
/// the trace (a request retried), this is the one whose root ended last.
///
/// ```
/// let trace_id = minitrace::collector::TraceId(42);
/// assert!(minitrace::recorder::trace(trace_id).is_none());
/// ```
pub fn trace(trace_id: TraceId) -> Option<RecordedTrace> {
    traces_of(retrieve::ask(Ask::Trace(trace_id))).pop()
}

/// Reports the trace `trace_id` through the reporter, as it would have been
/// reported when its root ended, if the recorder holds it and it was not
/// reported then. Returns at once; the collector does it in its next cycle.
/// Counted in [`stats`]: retrieved, partly overwritten (some spans were
/// made room for), awaited. A trace whose root has not ended here yet is
/// reported when it does (see [`report`]).
///
/// ```
/// minitrace::recorder::retrieve(minitrace::collector::TraceId(42));
/// ```
pub fn retrieve(trace_id: TraceId) {
    retrieve::ask_later(Ask::Report(trace_id));
}

/// Reports the trace `trace_id` as [`retrieve`] does, and returns it as
/// [`trace`] does, waiting for the collector's next cycle.
///
/// A trace whose root has not ended here yet (a request still served
/// while another process asks for its parts) is not reported in pieces:
/// `None` now, and its trace is kept when its root ends, within 10 s,
/// whatever its length, as a trigger keeps one (the [`on_kept`] hook hears
/// of it then). So is one whose root is no longer held, in vain.
///
/// ```
/// assert!(minitrace::recorder::report(minitrace::collector::TraceId(42)).is_none());
/// ```
pub fn report(trace_id: TraceId) -> Option<RecordedTrace> {
    traces_of(retrieve::ask(Ask::Report(trace_id))).pop()
}

/// A function the collector calls, on its thread, with the id of every
/// trace it keeps because its root was slow enough (or a trigger fired)
/// while a latency threshold is set: e.g. to fetch the trace's parts from
/// the other processes it touched (`minitrace-remote` registers one). Keep
/// it cheap: queue the work elsewhere. `None` removes it.
///
/// ```
/// minitrace::recorder::on_kept(Some(std::sync::Arc::new(|trace_id| println!("kept {trace_id}"))));
/// minitrace::recorder::on_kept(None);
/// ```
pub fn on_kept(hook: Option<KeptHook>) {
    slow::set_on_kept(hook);
}

/// See [`on_kept`].
pub type KeptHook = Arc<dyn Fn(TraceId) + Send + Sync>;

/// Every trace the recorder holds whose root ran at some moment of
/// `begin_unix_ns..=end_unix_ns`. Waits for the collector, as [`trace`].
///
/// ```
/// assert!(minitrace::recorder::window(0, u64::MAX).is_empty());
/// ```
pub fn window(begin_unix_ns: u64, end_unix_ns: u64) -> Vec<RecordedTrace> {
    traces_of(retrieve::ask(Ask::Window(begin_unix_ns, end_unix_ns)))
}

/// Every trace the recorder holds now, from every thread, oldest root
/// first. Waits for the collector, as [`trace`].
///
/// ```
/// let snapshot = minitrace::recorder::snapshot();
/// assert!(snapshot.traces.iter().all(|trace| !trace.spans.is_empty()));
/// ```
pub fn snapshot() -> Snapshot {
    Snapshot { traces: traces_of(retrieve::ask(Ask::All)) }
}

/// How far back each thread's memory reaches now. Waits for the
/// collector, as [`trace`].
///
/// ```
/// let retention = minitrace::recorder::retention();
/// println!("{:?}", retention.oldest_unix_ns());
/// ```
pub fn retention() -> Retention {
    match retrieve::ask(Ask::Retention) {
        Some(Answer::Retention(threads)) => Retention::from_threads(threads),
        _ => Retention::default(),
    }
}

fn traces_of(answer: Option<Answer>) -> Vec<RecordedTrace> {
    let mut traces: Vec<RecordedTrace> = match answer {
        Some(Answer::Traces(traces)) => traces.into_iter().map(RecordedTrace::from).collect(),
        _ => Vec::new(),
    };
    traces.sort_by_key(|trace| trace.begin_unix_ns());
    traces
}

/// What the recorder did, since the process started.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RecorderStats {
    /// Parts of traces (a thread's batch of local spans, or a span) that
    /// made room for newer ones in their thread's memory.
    pub overwritten_parts: u64,
    /// The spans in those parts.
    pub overwritten_spans: u64,
    /// Traces retrieved (by [`trace`] or [`retrieve`]) whole.
    pub retrieved: u64,
    /// Traces retrieved with spans missing (made room for, or dropped).
    pub partly_overwritten: u64,
    /// Traces asked for by id that the recorder did not hold.
    pub not_found: u64,
    /// Traces asked to be reported ([`retrieve`], [`report`]) before their
    /// root ended here, or after it was made room for: kept if their root
    /// ends within 10 s.
    pub awaited: u64,
}

/// Reads the recorder's counters.
///
/// ```
/// let stats = minitrace::recorder::stats();
/// assert!(stats.overwritten_spans >= stats.overwritten_parts || stats.overwritten_parts > 0);
/// ```
pub fn stats() -> RecorderStats {
    let (overwritten_parts, overwritten_spans) = history::overwritten();
    let (retrieved, partly_overwritten, not_found, awaited) = retrieve::counts();
    RecorderStats { overwritten_parts, overwritten_spans, retrieved, partly_overwritten, not_found, awaited }
}

/// What became of the automatic dumps so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AutomaticDumps {
    /// Handed to the callback.
    pub done: u64,
    /// Skipped: more slow roots at once than can wait, or within
    /// [`FlightRecorder::min_interval`] of the last dump.
    pub skipped: u64,
}

/// How many automatic dumps were done and skipped.
///
/// ```
/// let dumps = minitrace::recorder::automatic_dumps();
/// assert!(dumps.done + dumps.skipped < u64::MAX);
/// ```
pub fn automatic_dumps() -> AutomaticDumps {
    let (skipped, done) = slow::counts();
    AutomaticDumps { done, skipped }
}

pub(crate) use slow::{kept, slow_root};
