use std::sync::Arc;

use minstant::Instant;

use crate::collector::target::{Target, Targets};
use crate::collector::SpanId;
use crate::local::raw_span::RawSpan;
use crate::span::SpanState;

/// What a traced thread sends to the collector thread.
pub(crate) enum Message {
    /// A thread-safe span, as it was kept, and its end: moved whole into
    /// the queue, and read from there by the collector (measured: taken
    /// apart into a raw span on the ending thread, its pieces were copied
    /// on through the stack, and making and ending a span on one thread
    /// cost ~4 ns more).
    Ended(EndedSpan),
    Parts(Parts),
}

/// A thread-safe span, ended.
pub(crate) struct EndedSpan {
    pub(crate) state: SpanState,
    pub(crate) end: Instant,
}

// A ring slot: a span's 64-byte state and its end, or a batch with its
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

pub(crate) enum Batch {
    /// The local spans recorded under a local parent guard, and whether any
    /// entry is an event (most batches have none, and are converted without
    /// looking for them).
    Local { spans: Vec<RawSpan>, events: bool },
    /// Spans shared by several targets: a [`LocalSpans`](crate::local::LocalSpans)
    /// batch (mounted with [`IdMap::PerParent`]), a local batch sent to
    /// several parents, or a thread-safe span with several parents (the
    /// span, then its events).
    Shared { spans: Arc<Vec<RawSpan>>, ids: IdMap },
}

/// An empty batch: what is left of a batch taken out of its message.
impl Default for Batch {
    fn default() -> Batch {
        Batch::Local { spans: Vec::new(), events: false }
    }
}

/// How a shared batch's span ids are turned into record ids per target.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum IdMap {
    Keep,
    /// Ids mixed with the mounting parent's, so that one batch mounted twice
    /// in a trace yields distinct, consistently linked spans.
    PerParent,
}

impl IdMap {
    pub(crate) fn apply(self, id: SpanId, target: &Target) -> SpanId {
        match self {
            IdMap::Keep => id,
            IdMap::PerParent => {
                let mixed = id.0 ^ target.parent_id.0.wrapping_mul(0x9e37_79b9_7f4a_7c15).rotate_left(29);
                SpanId(mixed.max(1))
            }
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Role {
    Child,
    /// The root finished: its trace is complete.
    Root,
    /// The root was cancelled: discard its trace.
    CancelledRoot,
}

impl Batch {
    /// One batch per target, sharing the spans between them.
    pub(crate) fn share(self, copies: usize) -> Vec<Batch> {
        let (spans, ids) = match self {
            Batch::Local { spans, .. } => (Arc::new(spans), IdMap::Keep),
            Batch::Shared { spans, ids } => (spans, ids),
        };
        (0..copies).map(|_| Batch::Shared { spans: spans.clone(), ids }).collect()
    }
}

impl Message {
    /// `spans_per_target`: the spans in `batch`, events excluded, counted
    /// as they were recorded rather than by a pass over the batch.
    pub(crate) fn new(batch: Batch, targets: Targets, role: Role, spans_per_target: usize) -> Message {
        Message::Parts(Parts { batch, targets, role, spans_per_target })
    }

    /// The records this message will yield: one per span and target.
    pub(crate) fn span_count(&self) -> usize {
        match self {
            Message::Ended(EndedSpan { state, .. }) => state.target_count(),
            Message::Parts(parts) => parts.spans_per_target * parts.targets.as_slice().len(),
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
