//! Raw spans and thread-safe spans turned into records: on the collector
//! thread as the parts of traces are filed, and on the caller's thread for
//! [`LocalSpans::to_span_records`](crate::local::LocalSpans::to_span_records).

use std::borrow::Cow;
use std::collections::HashMap;
use std::time::Duration;

use minstant::Instant;

use crate::data::batch::{Batch, IdMap};
use crate::data::id::SpanId;
use crate::data::raw_span::{RawSpan, LINE_PARENT};
use crate::data::record::{unbox, EventRecord, Property, PropertyList, SpanRecord};
use crate::data::span_state::SpanState;
use crate::data::target::Target;
use crate::data::timeline::Timeline;
use crate::util::id_hasher::BuildIdHasher;

/// A part of a trace as it is filed: a batch lying in its message, or a
/// thread-safe span lying in its message as it was kept.
pub(crate) enum Part<'a> {
    Batch(&'a mut Batch),
    Ended(&'a mut SpanState, Instant),
    /// A batch converted without taking anything out of it: it is kept
    /// (in its thread's history, for the flight recorder).
    KeptBatch(&'a Batch),
    /// A thread-safe span converted without taking anything out of it.
    KeptEnded(&'a SpanState, Instant),
}

impl Part<'_> {
    /// As a batch of its own (for a span with several parents, shared
    /// between them).
    pub(crate) fn take_batch(self) -> Batch {
        match self {
            Part::Batch(batch) => std::mem::take(batch),
            Part::Ended(state, end) => state.take_batch(end),
            Part::KeptBatch(batch) => batch.clone_shared(),
            Part::KeptEnded(state, end) => state.cloned_batch(end),
        }
    }

    /// The ids its spans' records will have under `target` (events aside).
    pub(crate) fn for_each_span_id(&self, target: &Target, mut each: impl FnMut(SpanId)) {
        match self {
            Part::Batch(batch) => batch.for_each_span_id(target, each),
            Part::KeptBatch(batch) => batch.for_each_span_id(target, each),
            Part::Ended(state, _) => each(state.id()),
            Part::KeptEnded(state, _) => each(state.id()),
        }
    }

    /// The events it carries.
    pub(crate) fn event_count(&self) -> usize {
        let batch = match self {
            Part::Batch(batch) => &**batch,
            Part::KeptBatch(batch) => *batch,
            Part::Ended(state, _) => return state.event_count(),
            Part::KeptEnded(state, _) => return state.event_count(),
        };
        match batch {
            Batch::Local { events: false, .. } => 0,
            Batch::Local { spans, .. } => spans.iter().filter(|raw| raw.is_event()).count(),
            Batch::Shared { spans, .. } => spans.iter().filter(|raw| raw.is_event()).count(),
        }
    }

    /// Its name and properties, if it is one span (empty else).
    pub(crate) fn name_and_properties(&self) -> (&str, &[Property]) {
        match self {
            Part::Ended(state, _) => (state.static_name_or_owned(), state.properties()),
            Part::KeptEnded(state, _) => (state.static_name_or_owned(), state.properties()),
            Part::Batch(_) | Part::KeptBatch(_) => ("", &[]),
        }
    }

    /// How long it lasted, if it is one span.
    pub(crate) fn span_duration(&self) -> Option<Duration> {
        match self {
            Part::Batch(_) | Part::KeptBatch(_) => None,
            Part::Ended(state, end) => Some(end.duration_since(state.begin())),
            Part::KeptEnded(state, end) => Some(end.duration_since(state.begin())),
        }
    }
}

/// What converting leaves to recycle: local span buffers, and the lists
/// whose properties moved into records.
#[derive(Default)]
pub(crate) struct Emptied {
    pub(crate) buffers: Vec<Vec<RawSpan>>,
    pub(crate) lists: Vec<PropertyList>,
}

/// Appends `batch`'s records to `out` and its events to `events`, taking
/// what the batch owns out of it (it lies in a message's outbox slot, and is
/// dropped there). An emptied local buffer, and the lists whose properties
/// moved into records, go to `emptied`.
pub(crate) fn convert(
    part: Part<'_>,
    target: &Target,
    timeline: &Timeline,
    out: &mut Vec<SpanRecord>,
    events: &mut Vec<(SpanId, EventRecord)>,
    emptied: &mut Emptied,
) {
    // What a batch owns is taken out and converted by value, with no drop
    // call per span; the rest stays where it lies, in its outbox slot
    // (PERFORMANCE.md, "The collector: making records").
    match part {
        Part::Ended(state, end) => {
            convert_ended(state, end, target, timeline, out, events, &mut emptied.lists)
        }
        Part::Batch(Batch::Local { spans, events: has_events }) => {
            let mut spans = std::mem::take(spans);
            if *has_events {
                out.reserve(spans.len());
                for raw in spans.drain(..) {
                    push_raw(raw, target, IdMap::Keep, timeline, out, events, &mut emptied.lists);
                }
            } else {
                // The common case, spans only: `extend` over a drain builds
                // each record in place in `out`
                // (PERFORMANCE.md, "Building values where they live").
                let lists = &mut emptied.lists;
                out.extend(spans.drain(..).map(|raw| span_record(raw, target, IdMap::Keep, timeline, lists)));
            }
            emptied.buffers.push(spans);
        }
        Part::Batch(Batch::Shared { spans, ids }) => {
            for raw in spans.iter() {
                push_raw(raw.clone(), target, *ids, timeline, out, events, &mut emptied.lists);
            }
        }
        Part::KeptBatch(Batch::Shared { spans, ids }) => {
            for raw in spans.iter() {
                push_raw(raw.clone(), target, *ids, timeline, out, events, &mut emptied.lists);
            }
        }
        Part::KeptBatch(Batch::Local { spans, .. }) => {
            out.reserve(spans.len());
            for raw in spans.iter() {
                push_raw(raw.clone(), target, IdMap::Keep, timeline, out, events, &mut emptied.lists);
            }
        }
        Part::KeptEnded(state, end) => {
            let begin = timeline.unix_nanos(state.begin());
            let (name, properties, span_events) = state.cloned_extra();
            out.push(SpanRecord {
                trace_id: target.trace_id(),
                span_id: state.id(),
                parent_id: target.parent_id,
                begin_time_unix_ns: begin,
                duration_ns: timeline.unix_nanos(end).saturating_sub(begin),
                name: name.unwrap_or(Cow::Borrowed(state.static_name())),
                properties,
                events: Vec::new(),
            });
            let lists = &mut emptied.lists;
            events.extend(
                span_events.into_iter().map(|event| (state.id(), event_record(event, timeline, lists))),
            );
        }
    }
}

/// A thread-safe span's record, read from where the span lies.
#[inline(always)]
fn convert_ended(
    state: &mut SpanState,
    end: Instant,
    target: &Target,
    timeline: &Timeline,
    out: &mut Vec<SpanRecord>,
    events: &mut Vec<(SpanId, EventRecord)>,
    lists: &mut Vec<PropertyList>,
) {
    let begin = timeline.unix_nanos(state.begin());
    let duration_ns = timeline.unix_nanos(end).saturating_sub(begin);
    // Built in place in `out` by `extend`, in two arms of one expression
    // each, so that no record is built on the stack and copied
    // (PERFORMANCE.md, "Building values where they live").
    match state.take_extra() {
        None => out.extend(std::iter::once_with(|| SpanRecord {
            trace_id: target.trace_id(),
            span_id: state.id(),
            parent_id: target.parent_id,
            begin_time_unix_ns: begin,
            duration_ns,
            name: Cow::Borrowed(state.static_name()),
            properties: Vec::new(),
            events: Vec::new(),
        })),
        Some(extra) => {
            let (name, properties, span_events) = extra.into_parts();
            let properties = unbox(properties, lists);
            out.extend(std::iter::once_with(|| SpanRecord {
                trace_id: target.trace_id(),
                span_id: state.id(),
                parent_id: target.parent_id,
                begin_time_unix_ns: begin,
                duration_ns,
                name: name.unwrap_or(Cow::Borrowed(state.static_name())),
                properties,
                events: Vec::new(),
            }));
            events.extend(
                span_events.into_iter().map(|event| (state.id(), event_record(event, timeline, lists))),
            );
        }
    }
}

#[inline(always)]
fn push_raw(
    raw: RawSpan,
    target: &Target,
    ids: IdMap,
    timeline: &Timeline,
    out: &mut Vec<SpanRecord>,
    events: &mut Vec<(SpanId, EventRecord)>,
    lists: &mut Vec<PropertyList>,
) {
    if raw.is_event() {
        events.push((parent_id(&raw, target, ids), event_record(raw, timeline, lists)));
    } else {
        out.push(span_record(raw, target, ids, timeline, lists));
    }
}

/// The id of a raw span's (or event's) parent in the record.
#[inline(always)]
fn parent_id(raw: &RawSpan, target: &Target, ids: IdMap) -> SpanId {
    if raw.parent_id == LINE_PARENT {
        target.parent_id
    } else {
        ids.apply(raw.parent_id, target)
    }
}

#[inline(always)]
fn span_record(
    raw: RawSpan,
    target: &Target,
    ids: IdMap,
    timeline: &Timeline,
    lists: &mut Vec<PropertyList>,
) -> SpanRecord {
    let begin = timeline.unix_nanos(raw.begin);
    SpanRecord {
        trace_id: target.trace_id(),
        span_id: ids.apply(raw.id, target),
        parent_id: parent_id(&raw, target, ids),
        begin_time_unix_ns: begin,
        // Both ends through the anchor: a multiply each, where a `Duration`
        // would cost a division.
        duration_ns: timeline.unix_nanos(raw.end).saturating_sub(begin),
        properties: unbox(raw.properties, lists),
        name: raw.name,
        events: Vec::new(),
    }
}

fn event_record(raw: RawSpan, timeline: &Timeline, lists: &mut Vec<PropertyList>) -> EventRecord {
    EventRecord {
        timestamp_unix_ns: timeline.unix_nanos(raw.begin),
        properties: unbox(raw.properties, lists),
        name: raw.name,
    }
}

/// Attaches events to their spans among `records`, each span's in the
/// order they happened; the others go to the last record.
#[inline]
pub(crate) fn attach_events(records: &mut [SpanRecord], events: Vec<(SpanId, EventRecord)>) {
    if !events.is_empty() && !records.is_empty() {
        attach_events_slowly(records, events);
    }
}

#[cold]
fn attach_events_slowly(records: &mut [SpanRecord], events: Vec<(SpanId, EventRecord)>) {
    let index: HashMap<SpanId, usize, BuildIdHasher> =
        records.iter().enumerate().map(|(i, r)| (r.span_id, i)).collect();
    let last = records.len() - 1;
    let mut touched = Vec::new();
    for (parent, event) in events {
        let at = index.get(&parent).copied().unwrap_or(last);
        records[at].events.push(event);
        touched.push(at);
    }
    // In the order they happened, whatever order their parts arrived in.
    touched.sort_unstable();
    touched.dedup();
    for at in touched {
        records[at].events.sort_by_key(|event| event.timestamp_unix_ns);
    }
}
