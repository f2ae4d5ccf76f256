//! What the reporter counts (its stats handle): the delivery layer's
//! counters, and what only a Jaeger reporter does (truncating and dropping
//! spans too large for one message).

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::model::ClientStats;

pub(crate) struct Counters {
    /// Sent, failed, requests and retries: counted by the delivery layer.
    pub(crate) delivery: Arc<minitrace_delivery::Counters>,
    /// minitrace's count of spans dropped at a full queue when this reporter
    /// was made: `ClientStats` counts from the reporter's start, and a
    /// replacement reporter (a new Jaeger client) must not report its
    /// predecessors' drops again.
    pub(crate) queue_drops_before: u64,
    pub(crate) spans_too_large: AtomicU64,
    pub(crate) spans_truncated: AtomicU64,
}

impl Counters {
    pub(crate) fn starting_now(delivery: Arc<minitrace_delivery::Counters>) -> Counters {
        Counters {
            delivery,
            queue_drops_before: minitrace::collector::stats().dropped_queue_full,
            spans_too_large: AtomicU64::new(0),
            spans_truncated: AtomicU64::new(0),
        }
    }

    pub(crate) fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }

    /// The counters sent in each `Batch`, all since this reporter was made:
    /// its own losses, and the spans that minitrace dropped at a full queue
    /// (minitrace has one collector, so they would have come here).
    pub(crate) fn client_stats(&self) -> ClientStats {
        let saturating = |count: u64| i64::try_from(count).unwrap_or(i64::MAX);
        let queue_drops = minitrace::collector::stats().dropped_queue_full - self.queue_drops_before;
        ClientStats {
            full_queue_dropped_spans: saturating(queue_drops),
            too_large_dropped_spans: saturating(self.spans_too_large.load(Ordering::Relaxed)),
            failed_to_emit_spans: saturating(self.delivery.get().spans_failed),
        }
    }
}

/// A handle on a [`JaegerReporter`](crate::JaegerReporter)'s counters; see [`JaegerReporter::stats`](crate::JaegerReporter::stats).
///
/// ```
/// let reporter = minitrace_jaeger::JaegerReporter::http("127.0.0.1:14268".parse().unwrap(), "svc");
/// let handle = reporter.stats();
/// assert_eq!(handle.get().spans_sent, 0);
/// ```
#[derive(Clone)]
pub struct StatsHandle(pub(crate) Arc<Counters>);

impl fmt::Debug for StatsHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("StatsHandle").field(&self.get()).finish()
    }
}

impl StatsHandle {
    /// The counters now.
    ///
    /// ```
    /// let reporter = minitrace_jaeger::JaegerReporter::http("127.0.0.1:14268".parse().unwrap(), "svc");
    /// let stats = reporter.stats().get();
    /// assert_eq!(stats.spans_failed + stats.spans_too_large, 0);
    /// ```
    pub fn get(&self) -> ReporterStats {
        let counters = &self.0;
        let delivery = counters.delivery.get();
        ReporterStats {
            spans_sent: delivery.spans_sent,
            messages_sent: delivery.messages_sent,
            bytes_sent: delivery.bytes_sent,
            spans_failed: delivery.spans_failed,
            spans_too_large: counters.spans_too_large.load(Ordering::Relaxed),
            spans_truncated: counters.spans_truncated.load(Ordering::Relaxed),
            requests: delivery.requests,
            retries: delivery.retries,
        }
    }

    /// The last error, if any: why spans were lost. It never holds a
    /// header's value.
    ///
    /// ```
    /// let reporter = minitrace_jaeger::JaegerReporter::http("127.0.0.1:14268".parse().unwrap(), "svc");
    /// assert_eq!(reporter.stats().last_error(), None);
    /// ```
    pub fn last_error(&self) -> Option<String> {
        self.0.delivery.last_error()
    }

    /// Waits until every span the reporter was handed so far has been
    /// delivered or failed, and so counted, for at most `timeout`; says
    /// whether it has. Over HTTP, batches are delivered by a sender thread
    /// of the reporter's own; `minitrace::flush()` waits for it too, this
    /// waits from any thread, e.g. to read final counts while spans keep
    /// coming.
    ///
    /// ```
    /// let reporter = minitrace_jaeger::JaegerReporter::http("127.0.0.1:14268".parse().unwrap(), "svc");
    /// let stats = reporter.stats();
    /// minitrace::set_reporter(reporter, minitrace::collector::Config::default());
    /// minitrace::flush();
    /// assert!(stats.wait_for_delivery(std::time::Duration::from_secs(10)));
    /// ```
    pub fn wait_for_delivery(&self, timeout: std::time::Duration) -> bool {
        self.0.delivery.wait_settled(timeout)
    }
}

/// What a [`JaegerReporter`](crate::JaegerReporter) did since it was made.
///
/// Every span handed to the reporter ends in exactly one of `spans_sent`,
/// `spans_failed` and `spans_too_large`; the last two are also counted in
/// minitrace's own loss counters
/// (`minitrace::collector::stats().dropped_by_reporter`).
///
/// ```
/// let stats = minitrace_jaeger::ReporterStats::default();
/// assert_eq!(stats.spans_sent, 0);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ReporterStats {
    /// Spans in messages handed to the operating system (UDP) or accepted by
    /// the collector (HTTP). UDP datagrams may still be lost after that.
    pub spans_sent: u64,
    /// Datagrams or HTTP requests sent and accepted.
    pub messages_sent: u64,
    /// Bytes in those messages.
    pub bytes_sent: u64,
    /// Spans lost to a failed send or request. A UDP agent's refusal is seen
    /// at the next send: the refused datagram's spans then move from
    /// `spans_sent` to here.
    pub spans_failed: u64,
    /// Spans dropped because even truncated they did not fit in one message.
    pub spans_too_large: u64,
    /// Spans sent truncated, with the tag `minitrace.truncated`.
    pub spans_truncated: u64,
    /// Datagrams or HTTP requests tried, retries included.
    pub requests: u64,
    /// Of those, the HTTP requests that repeated an earlier one after an
    /// answer the retry policy retries (429, 502, 503, 504, or a connection
    /// closed with no answer).
    pub retries: u64,
}
