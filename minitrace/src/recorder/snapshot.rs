//! What the flight recorder hands out: every recorded request of every
//! thread, copied, with times in Unix nanoseconds.

use std::borrow::Cow;
use std::collections::HashMap;

use minstant::Instant;

use crate::data::id::{SpanId, TraceId};
use crate::data::timeline::Timeline;
use crate::recorder::ring::{self, RequestEntry, SpanEntry};
use crate::util::id_hasher::BuildIdHasher;

/// The flight recorder's content at one moment: the recent requests of
/// every thread, each with its spans. See [`snapshot`].
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Snapshot {
    /// Oldest first within each thread; threads one after another.
    pub requests: Vec<RecordedRequest>,
}

/// One request as the flight recorder kept it: its root span and the local
/// spans recorded under it on the root's thread.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RecordedRequest {
    /// The trace the request's root started.
    pub trace_id: TraceId,
    /// A small number per traced thread, in the order threads first recorded.
    pub thread: u32,
    /// The root's name.
    pub name: Cow<'static, str>,
    /// The root's properties.
    pub properties: Vec<(Cow<'static, str>, Cow<'static, str>)>,
    /// When the root started.
    pub begin_unix_ns: u64,
    /// How long the root lasted.
    pub duration_ns: u64,
    /// The local spans, in the order they started.
    pub spans: Vec<RecordedSpan>,
}

/// A span of a [`RecordedRequest`].
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RecordedSpan {
    /// The span's name.
    pub name: Cow<'static, str>,
    /// The parent's index in the request's `spans`; `None` for a child of
    /// the root (or of a span the recorder did not keep).
    pub parent: Option<u32>,
    /// When the span started.
    pub begin_unix_ns: u64,
    /// How long it lasted (0 for a span still open at the root's end).
    pub duration_ns: u64,
}

impl RecordedRequest {
    /// When the root ended.
    pub fn end_unix_ns(&self) -> u64 {
        self.begin_unix_ns.saturating_add(self.duration_ns)
    }

    /// Whether the request ran at some moment of `begin..=end` (Unix ns).
    pub fn overlaps(&self, begin_unix_ns: u64, end_unix_ns: u64) -> bool {
        self.begin_unix_ns <= end_unix_ns && self.end_unix_ns() >= begin_unix_ns
    }
}

/// Every request the flight recorder holds now, from every thread; empty
/// when it is off. Each thread's ring is locked only while it is copied,
/// and a traced thread never waits for that lock (see
/// [`FlightRecorder`](crate::recorder::FlightRecorder)).
///
/// ```
/// let snapshot = minitrace::recorder::snapshot();
/// assert!(snapshot.requests.iter().all(|request| request.duration_ns < u64::MAX));
/// ```
pub fn snapshot() -> Snapshot {
    snapshot_where(|_, _| true)
}

/// The requests that `keep` accepts by their root's start and end (Unix
/// ns), judged before anything of them is copied.
pub(crate) fn snapshot_where(mut keep: impl FnMut(u64, u64) -> bool) -> Snapshot {
    let timeline = Timeline::current();
    let mut requests = Vec::new();
    ring::read_rings(|thread, entry, spans| {
        let (begin, end) = unix_range(entry.begin, entry.end, &timeline);
        if keep(begin, end) {
            requests.push(request(entry, thread, (begin, end), spans, &timeline));
        }
    });
    Snapshot { requests }
}

fn request(
    entry: &RequestEntry,
    thread: u32,
    (begin, end): (u64, u64),
    spans: &mut dyn Iterator<Item = &SpanEntry>,
    timeline: &Timeline,
) -> RecordedRequest {
    let spans: Vec<&SpanEntry> = spans.collect();
    let index: HashMap<SpanId, u32, BuildIdHasher> =
        spans.iter().enumerate().map(|(i, span)| (span.id, i as u32)).collect();
    RecordedRequest {
        trace_id: entry.trace_id,
        thread,
        name: entry.name.clone(),
        properties: entry.properties.as_deref().cloned().unwrap_or_default(),
        begin_unix_ns: begin,
        duration_ns: end - begin,
        spans: spans
            .iter()
            .map(|span| {
                // A child of the root (or of a span not kept) has no index.
                let parent = index.get(&span.parent_id).copied();
                let (begin, end) = unix_range(span.begin, span.end, timeline);
                RecordedSpan {
                    name: span.name.clone(),
                    parent,
                    begin_unix_ns: begin,
                    duration_ns: end - begin,
                }
            })
            .collect(),
    }
}

/// Both ends in Unix ns; an open span (no end yet) lasts 0.
fn unix_range(begin: Instant, end: Instant, timeline: &Timeline) -> (u64, u64) {
    let begin_ns = timeline.unix_nanos(begin);
    let end_ns = if end == Instant::ZERO { begin_ns } else { timeline.unix_nanos(end) };
    (begin_ns, end_ns.max(begin_ns))
}
