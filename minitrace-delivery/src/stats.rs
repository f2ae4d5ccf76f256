//! What became of the spans handed to one reporter.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// One reporter's counters, shared between the reporter (which moves to
/// minitrace's collector thread) and the handles its user keeps. Only a
/// [`Delivery`](crate::Delivery) changes them.
///
/// Every span handed to a `Delivery` ends in exactly one of `spans_sent`,
/// `spans_rejected` and `spans_failed` (a UDP datagram first counted sent
/// moves to failed when the agent is seen to have refused it).
///
/// ```
/// let delivery = minitrace_delivery::Delivery::new("my-reporter", "http://127.0.0.1:4318");
/// let counters = delivery.counters().clone();
/// assert_eq!(counters.get(), minitrace_delivery::DeliveryStats::default());
/// assert_eq!(counters.last_error(), None);
/// ```
#[derive(Debug, Default)]
pub struct Counters {
    spans_sent: AtomicU64,
    spans_rejected: AtomicU64,
    spans_failed: AtomicU64,
    requests: AtomicU64,
    retries: AtomicU64,
    messages_sent: AtomicU64,
    bytes_sent: AtomicU64,
    /// Spans handed to a [`Pipeline`](crate::Pipeline) and not yet counted
    /// in one of the three above.
    pending: AtomicU64,
    last_error: Mutex<Option<String>>,
}

/// A reading of [`Counters`].
///
/// ```
/// let stats = minitrace_delivery::DeliveryStats::default();
/// assert_eq!(stats.spans_sent + stats.spans_rejected + stats.spans_failed, 0);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct DeliveryStats {
    /// Spans the endpoint accepted (for UDP: handed to the operating system).
    pub spans_sent: u64,
    /// Spans the endpoint took but answered as rejected (an OTLP partial
    /// success).
    pub spans_rejected: u64,
    /// Spans never delivered: not sent, refused, unanswered, or answered
    /// with an error.
    pub spans_failed: u64,
    /// Requests (or datagrams) sent, retries included.
    pub requests: u64,
    /// Of those, the ones that repeated an earlier request.
    pub retries: u64,
    /// Requests the endpoint accepted (datagrams handed to the OS).
    pub messages_sent: u64,
    /// Bytes in those requests' bodies (those datagrams).
    pub bytes_sent: u64,
}

impl Counters {
    /// The counters now.
    ///
    /// ```
    /// let counters = minitrace_delivery::Counters::default();
    /// assert_eq!(counters.get().requests, 0);
    /// ```
    pub fn get(&self) -> DeliveryStats {
        let read = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        DeliveryStats {
            spans_sent: read(&self.spans_sent),
            spans_rejected: read(&self.spans_rejected),
            spans_failed: read(&self.spans_failed),
            requests: read(&self.requests),
            retries: read(&self.retries),
            messages_sent: read(&self.messages_sent),
            bytes_sent: read(&self.bytes_sent),
        }
    }

    /// The last error or warning, if any: why spans were not delivered, or
    /// a partial success's message. It holds no header value and no
    /// credentials.
    ///
    /// ```
    /// assert_eq!(minitrace_delivery::Counters::default().last_error(), None);
    /// ```
    pub fn last_error(&self) -> Option<String> {
        self.last_error.lock().unwrap_or_else(|poison| poison.into_inner()).clone()
    }

    /// Spans handed to a [`Pipeline`](crate::Pipeline) whose fate is not
    /// known yet: queued, on the wire, or waiting for a retry.
    ///
    /// ```
    /// assert_eq!(minitrace_delivery::Counters::default().pending(), 0);
    /// ```
    pub fn pending(&self) -> u64 {
        self.pending.load(Ordering::SeqCst)
    }

    /// Waits until no span is [`pending`](Counters::pending), for at most
    /// `timeout`; says whether none is.
    ///
    /// ```
    /// let counters = minitrace_delivery::Counters::default();
    /// assert!(counters.wait_settled(std::time::Duration::ZERO));
    /// ```
    pub fn wait_settled(&self, timeout: std::time::Duration) -> bool {
        let start = std::time::Instant::now();
        while self.pending() > 0 {
            if start.elapsed() >= timeout {
                return false;
            }
            std::thread::sleep(std::time::Duration::from_micros(200));
        }
        true
    }

    pub(crate) fn queued(&self, spans: u64) {
        self.pending.fetch_add(spans, Ordering::SeqCst);
    }

    pub(crate) fn settled(&self, spans: u64) {
        self.pending.fetch_sub(spans, Ordering::SeqCst);
    }

    pub(crate) fn set_last_error(&self, error: &str) {
        *self.last_error.lock().unwrap_or_else(|poison| poison.into_inner()) = Some(error.to_owned());
    }

    pub(crate) fn sent(&self, spans: u64, rejected: u64, bytes: u64) {
        add(&self.spans_sent, spans - rejected);
        add(&self.spans_rejected, rejected);
        add(&self.messages_sent, 1);
        add(&self.bytes_sent, bytes);
    }

    pub(crate) fn failed(&self, spans: u64) {
        add(&self.spans_failed, spans);
    }

    /// Moves `spans` counted sent to failed.
    pub(crate) fn unsent(&self, spans: u64) {
        let _ = self
            .spans_sent
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |sent| Some(sent.saturating_sub(spans)));
        add(&self.spans_failed, spans);
    }

    pub(crate) fn request(&self, retry: bool) {
        add(&self.requests, 1);
        if retry {
            add(&self.retries, 1);
        }
    }
}

fn add(counter: &AtomicU64, n: u64) {
    counter.fetch_add(n, Ordering::Relaxed);
}
