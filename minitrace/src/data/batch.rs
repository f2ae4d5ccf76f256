//! Spans as they travel in a batch, and what a span or a batch means to its
//! trace.

use std::sync::Arc;

use crate::data::id::SpanId;
use crate::data::raw_span::RawSpan;
use crate::data::target::Target;

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
    /// Its spans and events.
    pub(crate) fn entries(&self) -> usize {
        match self {
            Batch::Local { spans, .. } => spans.len(),
            Batch::Shared { spans, .. } => spans.len(),
        }
    }

    /// The ids its spans' records will have under `target` (events aside).
    pub(crate) fn for_each_span_id(&self, target: &Target, mut each: impl FnMut(SpanId)) {
        let (spans, ids) = match self {
            Batch::Local { spans, .. } => (&spans[..], IdMap::Keep),
            Batch::Shared { spans, ids } => (&spans[..], *ids),
        };
        for raw in spans.iter().filter(|raw| !raw.is_event()) {
            each(ids.apply(raw.id, target));
        }
    }

    /// The batch as a shared one, without taking anything out of it.
    pub(crate) fn clone_shared(&self) -> Batch {
        match self {
            Batch::Local { spans, .. } => Batch::Shared { spans: Arc::new(spans.clone()), ids: IdMap::Keep },
            Batch::Shared { spans, ids } => Batch::Shared { spans: spans.clone(), ids: *ids },
        }
    }

    /// One batch per target, sharing the spans between them.
    pub(crate) fn share(self, copies: usize) -> Vec<Batch> {
        let (spans, ids) = match self {
            Batch::Local { spans, .. } => (Arc::new(spans), IdMap::Keep),
            Batch::Shared { spans, ids } => (spans, ids),
        };
        (0..copies).map(|_| Batch::Shared { spans: spans.clone(), ids }).collect()
    }
}
