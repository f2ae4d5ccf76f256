//! An open trace: the records of its parts received so far, waiting for
//! its root.

use std::time::Instant as StdInstant;

use crate::data::config::Config;
use crate::data::convert::{convert, Emptied, Part};
use crate::data::id::SpanId;
use crate::data::record::{EventRecord, SpanRecord};
use crate::data::target::Target;
use crate::data::timeline::Timeline;
use crate::transport::stats;
use crate::util::id_hasher::BuildIdHasher;

pub(super) struct OpenTrace {
    /// Records of the spans received so far.
    pub(super) records: Vec<SpanRecord>,
    /// Events received so far, attached to their spans when the trace ends.
    pub(super) events: Vec<(SpanId, EventRecord)>,
    /// Spans accepted, for `max_spans_per_trace`.
    pub(super) spans: usize,
    /// Spans of the trace that were dropped: their children are
    /// re-parented to the root when it is reported.
    pub(super) dropped: Dropped,
    /// It holds [`MAX_OPEN_TRACE_SPANS`](super::MAX_OPEN_TRACE_SPANS) spans and its fate is not known:
    /// later parts are dropped (see `Collector::outgrown`).
    pub(super) full: bool,
    pub(super) opened: StdInstant,
}

impl OpenTrace {
    /// Converts a part of `spans` spans into the trace: into `staged_at`,
    /// the outbox, when the trace is staged, else into its own records. A
    /// part that arrives once the trace holds `max_spans_per_trace` spans is
    /// counted as dropped instead, its spans noted as dropped.
    // The collector's state it reads, passed apart rather than as the
    // collector, which owns this trace.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn add(
        &mut self,
        part: Part<'_>,
        target: &Target,
        spans: usize,
        config: &Config,
        timeline: &Timeline,
        staged_at: Option<&mut Vec<SpanRecord>>,
        emptied: &mut Emptied,
    ) {
        // Judged as minitrace 0.6 judged it: a part is taken whole while the
        // trace holds fewer spans than the limit.
        if self.full || config.max_spans_per_trace.is_some_and(|max| self.spans >= max) {
            stats::count_trace_too_large(spans);
            stats::count_dropped_events(part.event_count());
            part.for_each_span_id(target, |id| {
                self.dropped.insert(id);
            });
            return;
        }
        self.spans += spans;
        let out = staged_at.unwrap_or(&mut self.records);
        convert(part, target, timeline, out, &mut self.events, emptied);
    }
}

/// The ids of a trace's dropped spans: single ones, and ranges (a local
/// batch's ids are consecutive).
#[derive(Default)]
pub(super) struct Dropped {
    ids: std::collections::HashSet<SpanId, BuildIdHasher>,
    ranges: Vec<(SpanId, SpanId)>,
}

impl Dropped {
    pub(super) fn is_empty(&self) -> bool {
        self.ids.is_empty() && self.ranges.is_empty()
    }

    pub(super) fn insert(&mut self, id: SpanId) {
        self.ids.insert(id);
    }

    /// `first..=last`: a range of ids, kept as one.
    pub(super) fn insert_range(&mut self, first: SpanId, last: SpanId) {
        match first == last {
            true => self.insert(first),
            false => self.ranges.push((first, last)),
        }
    }

    pub(super) fn contains(&self, id: &SpanId) -> bool {
        self.ids.contains(id) || self.ranges.iter().any(|&(first, last)| (first.0..=last.0).contains(&id.0))
    }
}
