//! A population of requests in a few lines: latency percentiles and the
//! slowest requests, from the traces of a dump or of the recorder.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::fmt;

use minitrace_flight::{RecordedTrace, TraceId};

use crate::{request_extent, request_name};

/// How many slowest requests a summary keeps unless told otherwise.
const DEFAULT_SLOWEST: usize = 5;

/// One of the slowest requests of a [`Summary`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Slow {
    /// Its trace id.
    pub trace_id: TraceId,
    /// Its root span's name (`(no root)` for a trace whose root was not
    /// held).
    pub name: String,
    /// When it began, in nanoseconds since the Unix epoch.
    pub begin_unix_ns: u64,
    /// How long it took.
    pub duration_ns: u64,
}

/// The latency of a population of requests, one trace each: count,
/// percentiles (nearest rank) and the slowest requests, slowest first.
/// `Display` prints it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Summary {
    /// Requests (traces) counted.
    pub requests: u64,
    /// Their spans, roots included.
    pub spans: u64,
    /// Median request duration, in nanoseconds (0 when there are none).
    pub p50_ns: u64,
    /// 90th percentile.
    pub p90_ns: u64,
    /// 99th percentile.
    pub p99_ns: u64,
    /// 99.9th percentile.
    pub p999_ns: u64,
    /// The longest duration.
    pub max_ns: u64,
    /// The slowest requests, slowest first.
    pub slowest: Vec<Slow>,
}

/// Builds a [`Summary`] a trace at a time, for dumps read as a stream.
#[derive(Debug)]
pub struct SummaryBuilder {
    durations: Vec<u64>,
    spans: u64,
    keep: usize,
    // A min-heap on (duration, arrival): its top is the fastest of the kept.
    slowest: BinaryHeap<Reverse<(u64, u64, SlowKey)>>,
}

/// A kept request, ordered only for the heap's ties.
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
struct SlowKey(TraceId, u64, String);

impl Default for SummaryBuilder {
    fn default() -> Self {
        Self::new(DEFAULT_SLOWEST)
    }
}

impl SummaryBuilder {
    /// A builder that keeps the `slowest` slowest requests.
    pub fn new(slowest: usize) -> SummaryBuilder {
        SummaryBuilder { durations: Vec::new(), spans: 0, keep: slowest, slowest: BinaryHeap::new() }
    }

    /// Counts a request: its trace's root's duration (the spans' extent
    /// for a trace whose root was not held).
    pub fn add(&mut self, trace: &RecordedTrace) {
        let (begin_unix_ns, duration_ns) = request_extent(trace);
        let request = (trace.trace_id, begin_unix_ns, duration_ns);
        self.add_request(request, trace.spans.len() as u64, || request_name(trace).to_string());
    }

    /// Counts a request of `spans` spans given by (trace id, begin,
    /// duration); `name` is asked for only if it is kept among the slowest.
    pub(crate) fn add_request(
        &mut self,
        (trace_id, begin_unix_ns, duration_ns): (TraceId, u64, u64),
        spans: u64,
        name: impl FnOnce() -> String,
    ) {
        let arrival = self.durations.len() as u64;
        self.durations.push(duration_ns);
        self.spans += spans;
        if self.keep == 0 {
            return;
        }
        // Ties go to the earlier request: a later one must be strictly slower.
        let fastest_kept = self.slowest.peek().map(|Reverse((duration, _, _))| *duration);
        if self.slowest.len() < self.keep || fastest_kept.is_some_and(|fastest| duration_ns > fastest) {
            let key = SlowKey(trace_id, begin_unix_ns, name());
            self.slowest.push(Reverse((duration_ns, u64::MAX - arrival, key)));
            if self.slowest.len() > self.keep {
                self.slowest.pop();
            }
        }
    }

    /// The summary of every request added.
    pub fn finish(mut self) -> Summary {
        self.durations.sort_unstable();
        let rank = |quantile: f64| -> u64 {
            let count = self.durations.len();
            if count == 0 {
                return 0;
            }
            let rank = (quantile * count as f64).ceil() as usize;
            self.durations[rank.clamp(1, count) - 1]
        };
        let mut slowest: Vec<_> = self.slowest.into_iter().map(|Reverse(kept)| kept).collect();
        slowest.sort_by(|a, b| b.0.cmp(&a.0).then(b.1.cmp(&a.1)));
        Summary {
            requests: self.durations.len() as u64,
            spans: self.spans,
            p50_ns: rank(0.5),
            p90_ns: rank(0.9),
            p99_ns: rank(0.99),
            p999_ns: rank(0.999),
            max_ns: self.durations.last().copied().unwrap_or(0),
            slowest: slowest
                .into_iter()
                .map(|(duration_ns, _, SlowKey(trace_id, begin_unix_ns, name))| Slow {
                    trace_id,
                    name,
                    begin_unix_ns,
                    duration_ns,
                })
                .collect(),
        }
    }
}

/// Summarises a population of requests, one trace each (keeping the 5
/// slowest): what the flight recorder holds, or a dump read whole.
///
/// ```
/// use minitrace_flight::{RecordedTrace, SpanRecord, TraceId};
/// use minitrace_view::summary;
///
/// let traces: Vec<RecordedTrace> = (1..=100)
///     .map(|i| RecordedTrace {
///         trace_id: TraceId(i),
///         thread: 1,
///         spans: vec![SpanRecord { name: "GET".into(), duration_ns: i as u64 * 1_000, ..SpanRecord::default() }],
///         complete: true,
///     })
///     .collect();
/// let summary = summary(&traces);
/// assert_eq!((summary.requests, summary.p50_ns, summary.p99_ns, summary.max_ns), (100, 50_000, 99_000, 100_000));
/// assert_eq!((summary.slowest[0].trace_id, summary.slowest[0].name.as_str()), (TraceId(100), "GET"));
/// ```
pub fn summary<'a>(traces: impl IntoIterator<Item = &'a RecordedTrace>) -> Summary {
    let mut builder = SummaryBuilder::default();
    traces.into_iter().for_each(|trace| builder.add(trace));
    builder.finish()
}

/// Formats nanoseconds for people: `850ns`, `12.3µs`, `4.56ms`, `1.23s`.
pub fn format_duration(ns: u64) -> String {
    let ns_f = ns as f64;
    let (value, unit) = match ns {
        0..=999 => return format!("{ns}ns"),
        1_000..=999_999 => (ns_f / 1e3, "µs"),
        1_000_000..=999_999_999 => (ns_f / 1e6, "ms"),
        _ => (ns_f / 1e9, "s"),
    };
    let decimals = if value < 10.0 {
        2
    } else if value < 100.0 {
        1
    } else {
        0
    };
    format!("{value:.decimals$}{unit}")
}

/// A Unix time as `HH:MM:SS.ffffff` UTC.
fn format_clock(unix_ns: u64) -> String {
    let seconds = unix_ns / 1_000_000_000;
    let micros = unix_ns % 1_000_000_000 / 1_000;
    let day = seconds % 86_400;
    format!("{:02}:{:02}:{:02}.{micros:06}", day / 3600, day % 3600 / 60, day % 60)
}

impl fmt::Display for Summary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "{} requests, {} spans", self.requests, self.spans)?;
        if self.requests == 0 {
            return Ok(());
        }
        writeln!(
            f,
            "latency  p50 {}  p90 {}  p99 {}  p99.9 {}  max {}",
            format_duration(self.p50_ns),
            format_duration(self.p90_ns),
            format_duration(self.p99_ns),
            format_duration(self.p999_ns),
            format_duration(self.max_ns)
        )?;
        writeln!(f, "slowest:")?;
        for slow in &self.slowest {
            writeln!(
                f,
                "  {:>8}  {:<24} trace {}  at {} UTC",
                format_duration(slow.duration_ns),
                slow.name,
                slow.trace_id,
                format_clock(slow.begin_unix_ns)
            )?;
        }
        Ok(())
    }
}
