//! What became of the spans handed to the reporter: minitrace-delivery's
//! counters, read.

use std::sync::Arc;

use minitrace_delivery::Counters;

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
    /// message. It never holds a header's value.
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
        let counters = self.0.get();
        ReporterStats {
            spans_sent: counters.spans_sent,
            spans_rejected: counters.spans_rejected,
            spans_failed: counters.spans_failed,
            requests: counters.requests,
            retries: counters.retries,
            last_error: self.0.last_error(),
        }
    }

    /// Waits until every span the reporter was handed so far has been
    /// delivered or failed, and so counted, for at most `timeout`; says
    /// whether it has. Delivery runs on a sender thread of the reporter's
    /// own; `minitrace::flush()` waits for it too, this waits from any
    /// thread, e.g. to read final counts while spans keep coming.
    ///
    /// ```
    /// let reporter = minitrace_otlp::OtlpReporter::builder().build().unwrap();
    /// let stats = reporter.stats();
    /// minitrace::set_reporter(reporter, minitrace::collector::Config::default());
    /// minitrace::flush();
    /// assert!(stats.wait_for_delivery(std::time::Duration::from_secs(10)));
    /// ```
    pub fn wait_for_delivery(&self, timeout: std::time::Duration) -> bool {
        self.0.wait_settled(timeout)
    }
}
