//! What the reporter counts (its stats handle) and how it tells of errors:
//! a line on standard error at most once per interval.

use std::fmt;
use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use minitrace::collector::count_dropped_by_reporter;

use crate::model::ClientStats;

/// Writes errors to standard error, at most one line per interval.
pub(crate) struct ErrorLog {
    pub(crate) interval: Duration,
    pub(crate) last: Option<Instant>,
    /// Errors not written since the last line.
    pub(crate) suppressed: u64,
}

impl ErrorLog {
    pub(crate) fn log(&mut self, message: impl FnOnce() -> String) {
        let now = Instant::now();
        if self.last.is_some_and(|last| now.duration_since(last) < self.interval) {
            self.suppressed += 1;
            return;
        }
        let mut line = format!("minitrace-jaeger: {}", message());
        if self.suppressed > 0 {
            line.push_str(&format!(" (and {} more errors not shown)", self.suppressed));
        }
        // A failing stderr is no reason to panic: ignore it.
        let _ = writeln!(std::io::stderr(), "{line}");
        self.last = Some(now);
        self.suppressed = 0;
    }
}

#[derive(Default)]
pub(crate) struct Counters {
    /// minitrace's count of spans dropped at a full queue when this reporter
    /// was made: `ClientStats` counts from the reporter's start, and a
    /// replacement reporter (a new Jaeger client) must not report its
    /// predecessors' drops again.
    pub(crate) queue_drops_before: u64,
    pub(crate) spans_sent: AtomicU64,
    pub(crate) messages_sent: AtomicU64,
    pub(crate) bytes_sent: AtomicU64,
    pub(crate) spans_failed: AtomicU64,
    pub(crate) spans_too_large: AtomicU64,
    pub(crate) spans_truncated: AtomicU64,
}

impl Counters {
    pub(crate) fn starting_now() -> Counters {
        Counters {
            queue_drops_before: minitrace::collector::stats().dropped_queue_full,
            ..Counters::default()
        }
    }

    pub(crate) fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }

    /// Counts one message of `spans` spans and `bytes` bytes: sent, or lost
    /// with `failure` (the spans lost, and why), which is also logged.
    pub(crate) fn delivered(
        &self,
        errors: &mut ErrorLog,
        spans: usize,
        bytes: usize,
        failure: Option<(usize, String)>,
    ) {
        match failure {
            None => {
                Counters::add(&self.spans_sent, spans as u64);
                Counters::add(&self.messages_sent, 1);
                Counters::add(&self.bytes_sent, bytes as u64);
            }
            Some((lost, why)) => {
                Counters::add(&self.spans_failed, lost as u64);
                count_dropped_by_reporter(lost as u64);
                errors.log(|| format!("{lost} spans lost: {why}"));
            }
        }
    }

    /// The counters sent in each `Batch`, all since this reporter was made:
    /// its own losses, and the spans that minitrace dropped at a full queue
    /// (minitrace has one collector, so they would have come here).
    pub(crate) fn client_stats(&self) -> ClientStats {
        let saturating = |count: u64| i64::try_from(count).unwrap_or(i64::MAX);
        let read = |counter: &AtomicU64| saturating(counter.load(Ordering::Relaxed));
        let queue_drops = minitrace::collector::stats().dropped_queue_full - self.queue_drops_before;
        ClientStats {
            full_queue_dropped_spans: saturating(queue_drops),
            too_large_dropped_spans: read(&self.spans_too_large),
            failed_to_emit_spans: read(&self.spans_failed),
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
        let read = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        let counters = &self.0;
        ReporterStats {
            spans_sent: read(&counters.spans_sent),
            messages_sent: read(&counters.messages_sent),
            bytes_sent: read(&counters.bytes_sent),
            spans_failed: read(&counters.spans_failed),
            spans_too_large: read(&counters.spans_too_large),
            spans_truncated: read(&counters.spans_truncated),
        }
    }
}

/// What a [`JaegerReporter`](crate::JaegerReporter) did since it was made.
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
    /// Datagrams or HTTP requests sent.
    pub messages_sent: u64,
    /// Bytes in those messages.
    pub bytes_sent: u64,
    /// Spans lost to a failed send or request. A UDP agent's refusal is seen
    /// at the next send, so its datagram is counted here then (it may have
    /// been counted in `spans_sent` already).
    pub spans_failed: u64,
    /// Spans dropped because even truncated they did not fit in one message.
    pub spans_too_large: u64,
    /// Spans sent truncated, with the tag `minitrace.truncated`.
    pub spans_truncated: u64,
}
