//! What the flight recorder hands out: traces as a report delivers them
//! (the collector's own [`SpanRecord`]s: one data model from the recorder
//! to the dump file and the page), and how far back it remembers.

use crate::collector::retrieve::{Assembled, ThreadMemory};
use crate::data::id::TraceId;
use crate::data::record::SpanRecord;

/// One trace as the flight recorder holds it: every span it kept of it,
/// from every thread, as a report would have delivered them.
///
/// ```
/// use minitrace::collector::{SpanId, SpanRecord, TraceId};
/// use minitrace::recorder::RecordedTrace;
///
/// let root = SpanRecord { trace_id: TraceId(1), span_id: SpanId(7), name: "GET".into(), duration_ns: 90, ..Default::default() };
/// let trace = RecordedTrace { trace_id: TraceId(1), thread: 1, spans: vec![root], complete: true };
/// assert_eq!(trace.root().unwrap().name, "GET");
/// assert_eq!(trace.duration_ns(), 90);
/// ```
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RecordedTrace {
    /// The trace's id.
    pub trace_id: TraceId,
    /// The thread whose memory held the root (a small number per thread,
    /// in the order threads first recorded); 0 when the root was not held.
    pub thread: u32,
    /// Its spans, the root last when it was held.
    pub spans: Vec<SpanRecord>,
    /// Whether it is whole: the root was held, and every span's parent and
    /// every event's span are among `spans` (else some were made room for,
    /// or dropped, and their children were re-parented to the root).
    pub complete: bool,
}

impl RecordedTrace {
    /// The root span: the last one, unless the root was not held.
    pub fn root(&self) -> Option<&SpanRecord> {
        self.spans.last().filter(|_| self.thread != 0)
    }

    /// When the root began (the earliest span, without a root).
    pub fn begin_unix_ns(&self) -> u64 {
        match self.root() {
            Some(root) => root.begin_time_unix_ns,
            None => self.spans.iter().map(|span| span.begin_time_unix_ns).min().unwrap_or(0),
        }
    }

    /// How long the root lasted (the spans' extent, without a root).
    pub fn duration_ns(&self) -> u64 {
        match self.root() {
            Some(root) => root.duration_ns,
            None => {
                let end = self
                    .spans
                    .iter()
                    .map(|span| span.begin_time_unix_ns.saturating_add(span.duration_ns))
                    .max();
                end.unwrap_or(0).saturating_sub(self.begin_unix_ns())
            }
        }
    }

    /// When the root ended.
    pub fn end_unix_ns(&self) -> u64 {
        self.begin_unix_ns().saturating_add(self.duration_ns())
    }

    /// Whether the root ran at some moment of `begin..=end` (Unix ns).
    pub fn overlaps(&self, begin_unix_ns: u64, end_unix_ns: u64) -> bool {
        self.begin_unix_ns() <= end_unix_ns && self.end_unix_ns() >= begin_unix_ns
    }
}

impl From<Assembled> for RecordedTrace {
    fn from(assembled: Assembled) -> RecordedTrace {
        let thread = if assembled.rooted { assembled.thread.max(1) } else { 0 };
        RecordedTrace {
            trace_id: assembled.trace_id,
            thread,
            spans: assembled.spans,
            complete: assembled.complete,
        }
    }
}

/// Every trace the flight recorder held at one moment; see
/// [`snapshot`](crate::recorder::snapshot).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Snapshot {
    /// Oldest root first.
    pub traces: Vec<RecordedTrace>,
}

/// How far back the flight recorder's memory reaches now; see
/// [`retention`](crate::recorder::retention).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Retention {
    /// One entry per thread with a history.
    pub threads: Vec<ThreadRetention>,
}

/// What one thread's memory holds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ThreadRetention {
    /// The thread's number, as in [`RecordedTrace::thread`].
    pub thread: u32,
    /// The bytes it holds.
    pub bytes: usize,
    /// The roots it holds.
    pub roots: usize,
    /// When the oldest root it holds began (Unix ns).
    pub oldest_unix_ns: Option<u64>,
    /// The thread exited (its memory is kept a while).
    pub exited: bool,
}

impl Retention {
    pub(crate) fn from_threads(threads: Vec<ThreadMemory>) -> Retention {
        let threads = threads
            .into_iter()
            .map(|memory| ThreadRetention {
                thread: memory.thread,
                bytes: memory.bytes,
                roots: memory.roots,
                oldest_unix_ns: memory.oldest_unix_ns,
                exited: memory.exited,
            })
            .collect();
        Retention { threads }
    }

    /// The oldest root any live thread still holds: how far back the
    /// memory reaches for every thread at once is the newest of the
    /// threads' oldest.
    pub fn oldest_unix_ns(&self) -> Option<u64> {
        self.threads.iter().filter(|thread| !thread.exited).filter_map(|thread| thread.oldest_unix_ns).max()
    }

    /// The roots held in all.
    pub fn roots(&self) -> usize {
        self.threads.iter().map(|thread| thread.roots).sum()
    }
}
