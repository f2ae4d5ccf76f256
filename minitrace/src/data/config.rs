use std::time::Duration;

/// How the collector batches and filters traces; passed to
/// [`set_reporter`](crate::set_reporter).
///
/// ```
/// use std::time::Duration;
/// use minitrace::collector::Config;
///
/// let config = Config::default()
///     .max_spans_per_trace(Some(10_000))
///     .report_interval(Duration::from_millis(50))
///     .report_slow_traces_only(Duration::from_millis(100));
/// # let _ = config;
/// ```
#[must_use]
#[derive(Debug, Copy, Clone, Eq, PartialEq)]
pub struct Config {
    pub(crate) max_spans_per_trace: Option<usize>,
    pub(crate) report_interval: Duration,
    pub(crate) report_before_root_finish: bool,
    pub(crate) slow_trace_threshold: Option<Duration>,
    /// The head-sampling bound (see `bound_of_ratio`).
    pub(crate) head_sampling: u64,
    pub(crate) wait_when_queue_full: bool,
}

impl Default for Config {
    /// No span limit, a report every 10 ms, traces reported whole after
    /// their root finishes, every trace recorded and reported.
    fn default() -> Config {
        Config {
            max_spans_per_trace: None,
            report_interval: Duration::from_millis(10),
            report_before_root_finish: false,
            slow_trace_threshold: None,
            head_sampling: ALL,
            wait_when_queue_full: false,
        }
    }
}

impl Config {
    /// Bounds the spans kept per trace besides the root, as minitrace 0.6
    /// does: a part of a trace (a local parent guard's batch of local spans,
    /// or one span) is kept whole while the trace holds fewer than this many
    /// spans, so a trace may pass the limit by one batch; later parts are
    /// dropped and counted in [`Stats::dropped_trace_too_large`](crate::collector::Stats::dropped_trace_too_large),
    /// and spans whose parent was dropped are re-parented to the root (with
    /// the property `minitrace.reparented`). Spans that finish after their
    /// root is reported are not limited.
    ///
    /// ```
    /// let config = minitrace::collector::Config::default().max_spans_per_trace(Some(100));
    /// # let _ = config;
    /// ```
    pub fn max_spans_per_trace(self, max_spans_per_trace: Option<usize>) -> Config {
        Config { max_spans_per_trace, ..self }
    }

    /// How often the collector thread wakes to gather finished spans and
    /// report them.
    ///
    /// ```
    /// let config = minitrace::collector::Config::default()
    ///     .report_interval(std::time::Duration::from_millis(100));
    /// # let _ = config;
    /// ```
    pub fn report_interval(self, report_interval: Duration) -> Config {
        Config { report_interval, ..self }
    }

    /// Report spans as they finish instead of waiting for their root: for
    /// long-lived roots (a connection, a stream). Has no effect on traces
    /// filtered by [`report_slow_traces_only`](Config::report_slow_traces_only),
    /// whose fate is only known when their root finishes.
    ///
    /// ```
    /// let config = minitrace::collector::Config::default().report_before_root_finish(true);
    /// # let _ = config;
    /// ```
    pub fn report_before_root_finish(self, report_before_root_finish: bool) -> Config {
        Config { report_before_root_finish, ..self }
    }

    /// Latency-based selective reporting: every request is traced in full,
    /// but a trace is reported only if its root span lasted at least
    /// `threshold`. Faster traces are discarded entirely, root included, and
    /// counted in [`Stats::spans_sampled_out`](crate::collector::Stats::spans_sampled_out),
    /// so the cost of reporting is paid only for the slow requests worth looking at.
    ///
    /// ```
    /// let config = minitrace::collector::Config::default()
    ///     .report_slow_traces_only(std::time::Duration::from_millis(5));
    /// # let _ = config;
    /// ```
    pub fn report_slow_traces_only(self, threshold: Duration) -> Config {
        Config { slow_trace_threshold: Some(threshold), ..self }
    }

    /// Head sampling: only this share of new traces is recorded, decided
    /// when the root starts, from its trace id, so that every service
    /// sampling at the same ratio keeps the same traces (the rule of
    /// OpenTelemetry's trace-id-ratio sampler: the id's low 64 bits, halved,
    /// below `ratio` × 2⁶³). A root not sampled costs what one started with
    /// recording [switched off](crate::set_enabled) costs, and so does
    /// everything under it. `ratio` is clamped to 0..=1; NaN samples
    /// nothing. To honour a caller's own decision, see
    /// [`SpanContext::decode_w3c_traceparent_with_sampled`](crate::collector::SpanContext::decode_w3c_traceparent_with_sampled).
    ///
    /// ```
    /// // Record one request in a hundred.
    /// let config = minitrace::collector::Config::default().head_sampling(0.01);
    /// # let _ = config;
    /// ```
    pub fn head_sampling(self, ratio: f64) -> Config {
        Config { head_sampling: bound_of_ratio(ratio), ..self }
    }

    /// What a traced thread does when its queue to the collector is full
    /// (the collector or the reporter cannot keep up). By default (`false`)
    /// the spans are dropped and counted in
    /// [`Stats::dropped_queue_full`](crate::collector::Stats::dropped_queue_full):
    /// the traced thread never waits. With `true`, nothing is dropped at
    /// the queue: the thread wakes the collector and waits until there is
    /// room, so tracing slows the traced threads down to what the collector
    /// and reporter sustain. A message waits at most a second (then it is
    /// dropped and counted, so that a stuck reporter cannot hang the
    /// process), and spans made on the collector's own thread (by a
    /// reporter) never wait.
    ///
    /// ```
    /// let config = minitrace::collector::Config::default().wait_when_queue_full(true);
    /// # let _ = config;
    /// ```
    pub fn wait_when_queue_full(self, wait: bool) -> Config {
        Config { wait_when_queue_full: wait, ..self }
    }

    /// Accepted for compatibility with earlier 0.6 releases; no effect.
    ///
    /// ```
    /// let config = minitrace::collector::Config::default()
    ///     .batch_report_interval(std::time::Duration::from_secs(1));
    /// # let _ = config;
    /// ```
    #[deprecated(note = "use `report_interval`")]
    pub fn batch_report_interval(self, _batch_report_interval: Duration) -> Config {
        self
    }

    /// Accepted for compatibility with earlier 0.6 releases; no effect.
    ///
    /// ```
    /// let config = minitrace::collector::Config::default().batch_report_max_spans(Some(10));
    /// # let _ = config;
    /// ```
    #[deprecated(note = "no longer used")]
    pub fn batch_report_max_spans(self, _batch_report_max_spans: Option<usize>) -> Config {
        self
    }
}

/// What a configuration decides about a trace's fate, in one place: read by
/// the traced thread that ends a root (through the copy `transport::gate`
/// keeps in atomics) and by the collector, so that the two never disagree.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct FatePolicy {
    /// Roots shorter than this are thrown away; `None` keeps every root.
    threshold: Option<Duration>,
    report_before_root_finish: bool,
}

impl FatePolicy {
    pub(crate) fn of(config: &Config) -> FatePolicy {
        FatePolicy::new(config.slow_trace_threshold, config.report_before_root_finish)
    }

    pub(crate) const fn new(threshold: Option<Duration>, report_before_root_finish: bool) -> FatePolicy {
        FatePolicy { threshold, report_before_root_finish }
    }

    /// The threshold of [`Config::report_slow_traces_only`], if any.
    pub(crate) fn threshold(&self) -> Option<Duration> {
        self.threshold
    }

    /// Whether a finished root of this length is reported with its trace:
    /// at least the threshold (a zero threshold keeps every root).
    #[inline]
    pub(crate) fn keeps(&self, root_length: Duration) -> bool {
        !matches!(self.threshold, Some(threshold) if root_length < threshold)
    }

    /// Whether a trace's spans are reported before its root ends:
    /// `report_before_root_finish`, which a threshold overrides (a trace's
    /// fate is known only at its root's end).
    pub(crate) fn reports_open_traces(&self) -> bool {
        self.report_before_root_finish && self.threshold.is_none()
    }

    /// Whether local spans may wait on their thread for their root's end:
    /// whenever open traces are not reported as they go.
    pub(crate) fn parks(&self) -> bool {
        !self.reports_open_traces()
    }
}

/// The bound of a ratio of 1: every key is below it.
pub(crate) const ALL: u64 = 1 << 63;

/// The bound that records `ratio` of the trace ids: clamped to 0..=1; NaN
/// records none.
pub(crate) fn bound_of_ratio(ratio: f64) -> u64 {
    if ratio.is_nan() || ratio <= 0.0 {
        0
    } else if ratio >= 1.0 {
        ALL
    } else {
        (ratio * ALL as f64) as u64
    }
}
