use std::sync::Arc;

use crate::collector::target::Targets;
use crate::local::raw_span::RawSpan;

/// What a traced thread sends to the collector thread.
pub(crate) struct Message {
    pub(crate) batch: Batch,
    pub(crate) targets: Targets,
    pub(crate) role: Role,
    /// Spans in `batch` (events excluded), counted once here rather than at
    /// every step that needs the number.
    pub(crate) spans_per_target: usize,
}

pub(crate) enum Batch {
    /// A thread-safe span, with its events (out of line: most have none).
    #[allow(clippy::box_collection)]
    Span(RawSpan, Option<Box<Vec<RawSpan>>>),
    /// The local spans recorded under a local parent guard.
    Local(Vec<RawSpan>),
    /// A [`LocalSpans`](crate::local::LocalSpans) batch mounted under a span.
    /// The same batch can be mounted under several spans of one trace, so
    /// its span ids are re-derived per parent to keep them unique.
    Mounted(Arc<Vec<RawSpan>>),
    /// One of the above shared by several targets.
    Shared(Arc<Vec<RawSpan>>),
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
    pub(crate) fn span_count(&self) -> usize {
        let count_spans = |spans: &[RawSpan]| spans.iter().filter(|span| !span.is_event()).count();
        match self {
            Batch::Span(..) => 1,
            Batch::Local(spans) => count_spans(spans),
            Batch::Mounted(spans) | Batch::Shared(spans) => count_spans(spans),
        }
    }

    /// One batch per target, sharing the spans between them.
    pub(crate) fn share(self, copies: usize) -> Vec<Batch> {
        let (spans, mounted) = match self {
            Batch::Span(raw, events) => {
                let mut spans = events.map(|events| *events).unwrap_or_default();
                spans.insert(0, raw);
                (Arc::new(spans), false)
            }
            Batch::Local(spans) => (Arc::new(spans), false),
            Batch::Mounted(spans) => (spans, true),
            Batch::Shared(spans) => (spans, false),
        };
        let handle = |_| {
            if mounted {
                Batch::Mounted(spans.clone())
            } else {
                Batch::Shared(spans.clone())
            }
        };
        (0..copies).map(handle).collect()
    }
}

impl Message {
    pub(crate) fn new(batch: Batch, targets: Targets, role: Role) -> Message {
        let spans_per_target = batch.span_count();
        Message::with_count(batch, targets, role, spans_per_target)
    }

    /// For a batch whose spans (events excluded) were counted as recorded.
    pub(crate) fn with_count(batch: Batch, targets: Targets, role: Role, spans_per_target: usize) -> Message {
        Message { batch, targets, role, spans_per_target }
    }

    /// The records this message will yield: one per span and target.
    pub(crate) fn span_count(&self) -> usize {
        self.spans_per_target * self.targets.as_slice().len()
    }
}
