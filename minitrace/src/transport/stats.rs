//! Counters of what happened to finished spans, so that nothing is lost
//! without a trace: every span is either reported, deliberately not reported
//! (sampled out), or counted under the bound that dropped it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::util::lock;

static REPORTED: AtomicU64 = AtomicU64::new(0);
static SAMPLED_OUT: AtomicU64 = AtomicU64::new(0);
static NO_REPORTER: AtomicU64 = AtomicU64::new(0);
static QUEUE_FULL: AtomicU64 = AtomicU64::new(0);
static TRACE_TOO_LARGE: AtomicU64 = AtomicU64::new(0);
static REPORTER_FAILED: AtomicU64 = AtomicU64::new(0);
static WAITED_FOR_ROOM: AtomicU64 = AtomicU64::new(0);
static EVENTS_DROPPED: AtomicU64 = AtomicU64::new(0);
static RETRIEVED: AtomicU64 = AtomicU64::new(0);

/// A snapshot of the collector's counters, since the process started.
///
/// ```
/// let stats = minitrace::collector::stats();
/// println!("{} spans reported, {} dropped", stats.spans_reported, stats.dropped());
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Stats {
    /// Span records handed to a reporter (one span mounted under two parents
    /// counts twice, as it yields two records).
    pub spans_reported: u64,
    /// Spans of traces that the latency threshold
    /// ([`Config::report_slow_traces_only`](crate::collector::Config::report_slow_traces_only))
    /// or [`cancel`](crate::Span::cancel) chose not to report. Not a loss.
    /// Counted where the choice was made: on the traced thread for a root
    /// that ended there, else on the collector. Roots left out by head
    /// sampling or begun with recording switched off record nothing, so
    /// nothing of them is counted.
    pub spans_sampled_out: u64,
    /// Root spans started while no reporter was set (they and their children
    /// are never recorded).
    pub roots_without_reporter: u64,
    /// Spans dropped because a thread's queue to the collector was full: the
    /// collector or the reporter cannot keep up.
    pub dropped_queue_full: u64,
    /// Spans dropped by a span-count bound: `max_spans_per_trace`, or the
    /// per-thread limit on local spans under one parent.
    pub dropped_trace_too_large: u64,
    /// Spans a reporter failed to deliver (it panicked, or counted them with
    /// [`count_dropped_by_reporter`](crate::collector::count_dropped_by_reporter)).
    pub dropped_by_reporter: u64,
    /// Messages (a span, or a guard's batch) for which a traced thread
    /// waited for room in its full queue, under
    /// [`Config::wait_when_queue_full`](crate::collector::Config::wait_when_queue_full).
    /// Not a loss: what tracing cost the traced threads in waiting.
    pub waits_for_room: u64,
    /// Events lost with the spans they travelled with (any of the bounds
    /// above), or that found no span: added to a span through the local
    /// parent after the span was reported, or past the per-thread limit of
    /// entries under one parent. Not counted in [`dropped`](Stats::dropped),
    /// which counts spans.
    pub dropped_events: u64,
    /// Span records handed to the reporter by a retrieval after the fact
    /// (see [`recorder::retrieve`](crate::recorder::retrieve)): spans whose
    /// trace was thrown away when its root ended (counted then in
    /// [`spans_sampled_out`](Stats::spans_sampled_out)), delivered since.
    pub spans_retrieved: u64,
}

impl Stats {
    /// All spans lost to a bound or a failure (sampling excluded).
    ///
    /// ```
    /// assert_eq!(minitrace::collector::Stats::default().dropped(), 0);
    /// ```
    pub fn dropped(&self) -> u64 {
        self.dropped_queue_full + self.dropped_trace_too_large + self.dropped_by_reporter
    }
}

/// Reads the counters.
///
/// ```
/// let before = minitrace::collector::stats();
/// assert!(minitrace::collector::stats().spans_reported >= before.spans_reported);
/// ```
pub fn stats() -> Stats {
    let read = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
    let sampled_out = {
        // Under the lock a thread folds its own count in at exit: counted once.
        let threads = lock(&THREADS_HERE);
        read(&SAMPLED_OUT) + threads.iter().map(|here| read(&here.sampled_out)).sum::<u64>()
    };
    Stats {
        spans_reported: read(&REPORTED),
        spans_sampled_out: sampled_out,
        roots_without_reporter: read(&NO_REPORTER),
        dropped_queue_full: read(&QUEUE_FULL),
        dropped_trace_too_large: read(&TRACE_TOO_LARGE),
        dropped_by_reporter: read(&REPORTER_FAILED),
        waits_for_room: read(&WAITED_FOR_ROOM),
        dropped_events: read(&EVENTS_DROPPED),
        spans_retrieved: read(&RETRIEVED),
    }
}

/// For [`Reporter`](crate::collector::Reporter)s: counts spans that were handed
/// to the reporter but could not be delivered (a full socket buffer, an
/// unreachable agent, a span too large to send), so they show up in
/// [`stats`] as [`dropped_by_reporter`](Stats::dropped_by_reporter).
///
/// ```
/// minitrace::collector::count_dropped_by_reporter(3);
/// assert!(minitrace::collector::stats().dropped_by_reporter >= 3);
/// ```
pub fn count_dropped_by_reporter(spans: u64) {
    REPORTER_FAILED.fetch_add(spans, Ordering::Relaxed);
}

pub(crate) fn count_reported(spans: usize) {
    REPORTED.fetch_add(spans as u64, Ordering::Relaxed);
}

pub(crate) fn count_retrieved(spans: usize) {
    RETRIEVED.fetch_add(spans as u64, Ordering::Relaxed);
}

pub(crate) fn count_sampled_out(spans: usize) {
    SAMPLED_OUT.fetch_add(spans as u64, Ordering::Relaxed);
}

/// Spans of traces thrown away on the thread where they ended: counted in
/// a counter of that thread's, which only it writes (no read-modify-write,
/// no cache line another thread writes), summed by [`stats`].
#[inline]
pub(crate) fn count_sampled_out_here(spans: usize) {
    let _ = HERE.try_with(|here| add(&here.0.sampled_out, spans as u64));
}

/// Parts and spans of the flight recorder's histories made room for, on
/// this thread: counted as [`count_sampled_out_here`] counts.
pub(crate) fn count_overwritten_here(parts: u64, spans: u64) {
    let _ = HERE.try_with(|here| {
        add(&here.0.overwritten_parts, parts);
        add(&here.0.overwritten_spans, spans);
    });
}

/// Parts and spans made room for in the recorder's histories, every
/// thread's summed.
pub(crate) fn overwritten() -> (u64, u64) {
    let read = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
    let threads = lock(&THREADS_HERE);
    let parts = read(&EXITED.overwritten_parts)
        + threads.iter().map(|here| read(&here.overwritten_parts)).sum::<u64>();
    let spans = read(&EXITED.overwritten_spans)
        + threads.iter().map(|here| read(&here.overwritten_spans)).sum::<u64>();
    (parts, spans)
}

/// A plain add to a counter only this thread writes.
#[inline]
fn add(counter: &AtomicU64, amount: u64) {
    counter.store(counter.load(Ordering::Relaxed) + amount, Ordering::Relaxed);
}

/// The counters a thread keeps of its own.
#[derive(Default)]
struct Counts {
    sampled_out: AtomicU64,
    overwritten_parts: AtomicU64,
    overwritten_spans: AtomicU64,
}

/// Every live thread's own counters.
static THREADS_HERE: Mutex<Vec<Arc<Counts>>> = Mutex::new(Vec::new());
/// The counts of threads that exited (`sampled_out` is [`SAMPLED_OUT`]).
static EXITED: Counts = Counts {
    sampled_out: AtomicU64::new(0),
    overwritten_parts: AtomicU64::new(0),
    overwritten_spans: AtomicU64::new(0),
};

struct ThreadCounts(Arc<Counts>);

thread_local! {
    static HERE: ThreadCounts = {
        let counts = Arc::new(Counts::default());
        lock(&THREADS_HERE).push(counts.clone());
        ThreadCounts(counts)
    };
}

impl Drop for ThreadCounts {
    /// The thread exits: its counts move to the shared ones.
    fn drop(&mut self) {
        let mut threads = lock(&THREADS_HERE);
        let read = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        SAMPLED_OUT.fetch_add(read(&self.0.sampled_out), Ordering::Relaxed);
        EXITED.overwritten_parts.fetch_add(read(&self.0.overwritten_parts), Ordering::Relaxed);
        EXITED.overwritten_spans.fetch_add(read(&self.0.overwritten_spans), Ordering::Relaxed);
        threads.retain(|counts| !Arc::ptr_eq(counts, &self.0));
    }
}

pub(crate) fn count_root_without_reporter() {
    NO_REPORTER.fetch_add(1, Ordering::Relaxed);
}

pub(crate) fn count_queue_full(spans: usize) {
    QUEUE_FULL.fetch_add(spans as u64, Ordering::Relaxed);
}

pub(crate) fn count_dropped_events(events: usize) {
    if events > 0 {
        EVENTS_DROPPED.fetch_add(events as u64, Ordering::Relaxed);
    }
}

pub(crate) fn count_wait_for_room() {
    WAITED_FOR_ROOM.fetch_add(1, Ordering::Relaxed);
}

pub(crate) fn count_trace_too_large(spans: usize) {
    TRACE_TOO_LARGE.fetch_add(spans as u64, Ordering::Relaxed);
}
