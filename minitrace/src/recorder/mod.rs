//! The flight recorder: an always-on, bounded record of recent requests,
//! kept on the traced threads whatever each trace's fate, so that the
//! whole population of requests can be seen, and what ran beside a slow
//! one.
//!
//! When a root ends on the thread that started it (a request under
//! [`Span::set_local_parent`](crate::Span::set_local_parent), or a future
//! whose spans stayed on its thread), the recorder keeps its trace id,
//! name, properties, start and length, and each local span recorded under
//! it on that thread (name, parent, start, length), in a ring of that
//! thread's, whose memory is bounded by the user; the oldest requests make
//! room. Spans ended on other threads and events are not kept.
//!
//! [`snapshot`] copies every thread's ring, at any time, from any thread;
//! with [`FlightRecorder::on_slow_trace`], every root slower than
//! [`Config::report_slow_traces_only`](crate::collector::Config::report_slow_traces_only)'s
//! threshold also hands the requests that overlapped it to a callback, on a
//! background thread. The `minitrace-flight` crate writes snapshots to
//! files, and `minitrace-view` draws them.
//!
//! ```
//! use minitrace::collector::{Config, ConsoleReporter};
//! use minitrace::prelude::*;
//! use minitrace::recorder::FlightRecorder;
//!
//! minitrace::set_reporter(ConsoleReporter, Config::default().report_slow_traces_only(std::time::Duration::from_secs(1)));
//! FlightRecorder::new().bytes_per_thread(1 << 20).enable();
//! {
//!     let root = Span::root("request", SpanContext::random());
//!     let _guard = root.set_local_parent();
//!     let _step = LocalSpan::enter_with_local_parent("step");
//! }
//! let snapshot = minitrace::recorder::snapshot();
//! assert_eq!(snapshot.requests.len(), 1);
//! assert_eq!(snapshot.requests[0].spans[0].name, "step");
//! # FlightRecorder::disable();
//! ```

mod ring;
mod slow;
mod snapshot;

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

pub use slow::SlowTraceWindow;
pub use snapshot::{snapshot, RecordedRequest, RecordedSpan, Snapshot};

pub(crate) use ring::{is_on, record};
pub(crate) use slow::slow_root;

/// The flight recorder's settings; [`enable`](FlightRecorder::enable)
/// switches it on.
pub struct FlightRecorder {
    bytes_per_thread: usize,
    on_slow_trace: Option<slow::Callback>,
    settle: Duration,
    min_interval: Duration,
}

impl fmt::Debug for FlightRecorder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FlightRecorder")
            .field("bytes_per_thread", &self.bytes_per_thread)
            .field("on_slow_trace", &self.on_slow_trace.as_ref().map(|_| ".."))
            .field("settle", &self.settle)
            .field("min_interval", &self.min_interval)
            .finish()
    }
}

impl Default for FlightRecorder {
    fn default() -> FlightRecorder {
        FlightRecorder::new()
    }
}

impl FlightRecorder {
    /// 8 MiB per thread, no automatic dumps.
    pub fn new() -> FlightRecorder {
        FlightRecorder {
            bytes_per_thread: 8 << 20,
            on_slow_trace: None,
            settle: Duration::from_millis(50),
            min_interval: Duration::from_secs(1),
        }
    }

    /// The memory each traced thread's ring may hold, counted in real
    /// bytes: each span's and request's entry (~56 and ~100 bytes), and the
    /// names, properties and keys they own.
    pub fn bytes_per_thread(mut self, bytes: usize) -> FlightRecorder {
        self.bytes_per_thread = bytes;
        self
    }

    /// Calls `callback` on a background thread with the requests that
    /// overlapped each slow root (one slower than `report_slow_traces_only`'s
    /// threshold, ended on its thread): e.g. to write them to a file. A
    /// panic in it is caught.
    pub fn on_slow_trace(
        mut self,
        callback: impl Fn(SlowTraceWindow) + Send + Sync + 'static,
    ) -> FlightRecorder {
        self.on_slow_trace = Some(Arc::new(callback));
        self
    }

    /// How long an automatic dump waits after the slow root's end, so that
    /// the requests still running beside it end and are recorded too
    /// (default 50 ms).
    pub fn settle_time(mut self, settle: Duration) -> FlightRecorder {
        self.settle = settle;
        self
    }

    /// At most one automatic dump per this interval; slow roots in between
    /// are counted in [`automatic_dumps`] as skipped (default 1 s).
    pub fn min_interval(mut self, interval: Duration) -> FlightRecorder {
        self.min_interval = interval;
        self
    }

    /// Starts recording every root that ends on its thread from now on.
    pub fn enable(self) {
        slow::configure(slow::Settings {
            callback: self.on_slow_trace,
            settle: self.settle,
            min_interval: self.min_interval,
        });
        ring::switch(true, self.bytes_per_thread);
    }

    /// Stops recording and forgets what was recorded.
    pub fn disable() {
        ring::switch(false, 0);
        ring::clear();
    }
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

/// What the recorder did with the requests it was given, since the
/// process started.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RecorderStats {
    /// Requests that made room for newer ones in their thread's memory, or
    /// were never kept, being larger than the whole bound.
    pub overwritten_requests: u64,
}

/// Reads the recorder's counters.
///
/// ```
/// let stats = minitrace::recorder::stats();
/// assert!(stats.overwritten_requests < u64::MAX);
/// ```
pub fn stats() -> RecorderStats {
    RecorderStats { overwritten_requests: ring::overwritten() }
}

/// How many automatic dumps were done and skipped.
pub fn automatic_dumps() -> AutomaticDumps {
    let (skipped, done) = slow::counts();
    AutomaticDumps { done, skipped }
}
