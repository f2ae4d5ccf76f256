//! An open trace: the records of its parts received so far, waiting for
//! its root.

use std::time::Instant as StdInstant;

use crate::data::config::Config;
use crate::data::convert::{attach_events, convert, Part};
use crate::data::id::SpanId;
use crate::data::raw_span::RawSpan;
use crate::data::record::{EventRecord, SpanRecord};
use crate::data::target::Target;
use crate::data::timeline::Timeline;
use crate::transport::stats;

pub(super) struct OpenTrace {
    /// Records of the spans received so far.
    pub(super) records: Vec<SpanRecord>,
    /// Events received so far, attached to their spans when the trace ends.
    pub(super) events: Vec<(SpanId, EventRecord)>,
    /// Spans accepted, for `max_spans_per_trace`.
    pub(super) spans: usize,
    /// Some span of the trace was dropped: its children's parent may be
    /// missing, so they are re-parented to the root when it is reported.
    pub(super) lossy: bool,
    /// It holds [`MAX_OPEN_TRACE_SPANS`](super::MAX_OPEN_TRACE_SPANS) spans and its fate is not known:
    /// later parts are dropped (see `Collector::outgrown`).
    pub(super) full: bool,
    pub(super) opened: StdInstant,
}

impl OpenTrace {
    /// Converts a part of `spans` spans into the trace: into `staged_at`,
    /// the outbox, when the trace is staged, else into its own records. A
    /// part that arrives once the trace holds `max_spans_per_trace` spans is
    /// counted as dropped instead, and makes the trace lossy.
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
        emptied: &mut Vec<Vec<RawSpan>>,
    ) {
        // Judged as minitrace 0.6 judged it: a part is taken whole while the
        // trace holds fewer spans than the limit.
        if self.full || config.max_spans_per_trace.is_some_and(|max| self.spans >= max) {
            stats::count_trace_too_large(spans);
            self.lossy = true;
            return;
        }
        self.spans += spans;
        let out = staged_at.unwrap_or(&mut self.records);
        convert(part, target, timeline, out, &mut self.events, emptied);
    }

    /// Appends the records so far to `outbox`; events whose span is not
    /// among them go to the last record.
    pub(super) fn report_early(&mut self, outbox: &mut Vec<SpanRecord>) {
        let first = outbox.len();
        outbox.append(&mut self.records);
        attach_events(&mut outbox[first..], std::mem::take(&mut self.events));
    }
}
