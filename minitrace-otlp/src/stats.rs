//! What became of the spans handed to the reporter, and the rate-limited
//! error messages on standard error.

use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A snapshot of an [`OtlpReporter`](crate::OtlpReporter)'s counters, since
/// it was built.
///
/// Every span handed to the reporter ends up in exactly one of
/// `spans_sent`, `spans_rejected` and `spans_failed`; the last two are also
/// counted in minitrace's own loss counters
/// (`minitrace::collector::stats().dropped_by_reporter`).
///
/// ```
/// let stats = minitrace_otlp::ReporterStats::default();
/// assert_eq!(stats.spans_sent + stats.spans_rejected + stats.spans_failed, 0);
/// assert!(stats.last_error.is_none());
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ReporterStats {
    /// Spans the backend accepted.
    pub spans_sent: u64,
    /// Spans the backend answered as rejected in an OTLP partial success.
    pub spans_rejected: u64,
    /// Spans never delivered: the backend unreachable, too slow, or
    /// answering an error.
    pub spans_failed: u64,
    /// Export requests sent, retries included.
    pub requests: u64,
    /// Of those, the ones that repeated an earlier request after a
    /// retryable answer.
    pub retries: u64,
    /// The last error seen, if any: a failed request or a partial success's
    /// message.
    pub last_error: Option<String>,
}

/// A handle to an [`OtlpReporter`](crate::OtlpReporter)'s counters that
/// stays readable after the reporter moved to minitrace's collector thread.
///
/// ```
/// let reporter = minitrace_otlp::OtlpReporter::builder()
///     .endpoint("http://127.0.0.1:4318")
///     .build()
///     .unwrap();
/// let stats = reporter.stats();
/// minitrace::set_reporter(reporter, minitrace::collector::Config::default());
/// assert_eq!(stats.get().spans_sent, 0);
/// ```
#[derive(Clone, Debug)]
pub struct StatsHandle(pub(crate) Arc<Counters>);

impl StatsHandle {
    /// Reads the counters.
    ///
    /// ```
    /// let reporter = minitrace_otlp::OtlpReporter::builder().build().unwrap();
    /// assert_eq!(reporter.stats().get().requests, 0);
    /// ```
    pub fn get(&self) -> ReporterStats {
        let read = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        let counters = &self.0;
        ReporterStats {
            spans_sent: read(&counters.spans_sent),
            spans_rejected: read(&counters.spans_rejected),
            spans_failed: read(&counters.spans_failed),
            requests: read(&counters.requests),
            retries: read(&counters.retries),
            last_error: counters.last_error.lock().unwrap_or_else(|poison| poison.into_inner()).clone(),
        }
    }
}

#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub(crate) spans_sent: AtomicU64,
    pub(crate) spans_rejected: AtomicU64,
    pub(crate) spans_failed: AtomicU64,
    pub(crate) requests: AtomicU64,
    pub(crate) retries: AtomicU64,
    last_error: Mutex<Option<String>>,
}

impl Counters {
    pub(crate) fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }

    pub(crate) fn set_last_error(&self, error: &str) {
        *self.last_error.lock().unwrap_or_else(|poison| poison.into_inner()) = Some(error.to_owned());
    }
}

/// Prints errors to standard error at most once per interval, with the
/// count of those held back since, so a dead backend does not flood it.
#[derive(Debug)]
pub(crate) struct ErrorLog {
    interval: Duration,
    last_printed: Option<Instant>,
    held_back: u64,
}

impl ErrorLog {
    pub(crate) fn new(interval: Duration) -> ErrorLog {
        ErrorLog { interval, last_printed: None, held_back: 0 }
    }

    pub(crate) fn log(&mut self, error: &str) {
        let now = Instant::now();
        if self.last_printed.is_some_and(|at| now.duration_since(at) < self.interval) {
            self.held_back += 1;
            return;
        }
        let held_back = std::mem::take(&mut self.held_back);
        let more = if held_back > 0 {
            format!(" ({held_back} more errors since the last message)")
        } else {
            String::new()
        };
        // A closed stderr must not become a panic on the collector thread.
        let _ = writeln!(std::io::stderr(), "minitrace-otlp: {error}{more}");
        self.last_printed = Some(now);
    }
}
