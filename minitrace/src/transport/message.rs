//! What travels from a traced thread to the collector thread: a
//! thread-safe span as it was kept, or a batch of spans with its targets.

use minstant::Instant;

use crate::data::batch::{Batch, Role};
use crate::data::id::SpanId;
use crate::data::raw_span::RawSpan;
use crate::data::span_state::SpanState;
use crate::data::target::Target;
use crate::data::target::Targets;

/// What a traced thread sends to the collector thread.
pub(crate) enum Message {
    /// A thread-safe span, as it was kept, and its end: moved whole into
    /// the queue and read there by the collector, not taken apart on the
    /// ending thread (PERFORMANCE.md, "Thread-safe spans").
    Ended(EndedSpan),
    Parts(Parts),
}

/// A thread-safe span, ended.
pub(crate) struct EndedSpan {
    pub(crate) state: SpanState,
    pub(crate) end: Instant,
}

// An outbox slot: a span's 64-byte state and its end, or a batch with its
// targets, whichever is larger.
const _: () = assert!(cfg!(not(target_pointer_width = "64")) || std::mem::size_of::<Message>() == 88);

/// A message taken apart: spans, where they go, and what they mean to their trace.
pub(crate) struct Parts {
    pub(crate) batch: Batch,
    pub(crate) targets: Targets,
    pub(crate) role: Role,
    /// Spans in `batch` (events excluded), counted once here rather than at
    /// every step that needs the number.
    pub(crate) spans_per_target: usize,
}

impl Message {
    /// `spans_per_target`: the spans in `batch`, events excluded, counted
    /// as they were recorded rather than by a pass over the batch.
    pub(crate) fn new(batch: Batch, targets: Targets, role: Role, spans_per_target: usize) -> Message {
        Message::Parts(Parts { batch, targets, role, spans_per_target })
    }

    /// A line's local spans for `targets`, `count` of them spans (the rest
    /// events): what a local parent guard sends.
    pub(crate) fn local_batch(spans: Vec<RawSpan>, count: usize, targets: Targets) -> Message {
        let events = count < spans.len();
        Message::new(Batch::Local { spans, events }, targets, Role::Child, count)
    }

    /// The records this message will yield: one per span and target.
    pub(crate) fn span_count(&self) -> usize {
        match self {
            Message::Ended(EndedSpan { state, .. }) => state.target_count(),
            Message::Parts(parts) => parts.spans_per_target * parts.targets.as_slice().len(),
        }
    }

    /// The ids its spans' records will have under `target` (events aside).
    pub(crate) fn for_each_span_id(&self, target: &Target, each: impl FnMut(SpanId)) {
        match self {
            Message::Ended(EndedSpan { state, .. }) => {
                let mut each = each;
                each(state.id());
            }
            Message::Parts(parts) => parts.batch.for_each_span_id(target, each),
        }
    }

    /// Its spans' ids as one range, where they are consecutive and kept
    /// as they are (a local batch, or one span).
    pub(crate) fn span_id_range(&self) -> Option<(SpanId, SpanId)> {
        match self {
            Message::Ended(EndedSpan { state, .. }) => Some((state.id(), state.id())),
            Message::Parts(parts) => match &parts.batch {
                Batch::Local { spans, .. } => {
                    let mut ids = spans.iter().filter(|raw| !raw.is_event()).map(|raw| raw.id);
                    let first = ids.next()?;
                    Some((first, ids.next_back().unwrap_or(first)))
                }
                Batch::Shared { .. } => None,
            },
        }
    }

    /// The events it carries (for each target).
    pub(crate) fn event_count(&self) -> usize {
        match self {
            Message::Ended(EndedSpan { state, .. }) => state.event_count(),
            Message::Parts(parts) => parts.batch.entries().saturating_sub(parts.spans_per_target),
        }
    }

    pub(crate) fn role(&self) -> Role {
        match self {
            Message::Ended(EndedSpan { state, .. }) => state.role(),
            Message::Parts(parts) => parts.role,
        }
    }

    pub(crate) fn targets(&self) -> Targets {
        match self {
            Message::Ended(EndedSpan { state, .. }) => state.targets(),
            Message::Parts(parts) => parts.targets.clone(),
        }
    }
}
