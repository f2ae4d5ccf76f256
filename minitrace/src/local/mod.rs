//! The thread-local fast path: [`LocalSpan`]s recorded into the current
//! thread's span line, batches of them gathered by [`LocalCollector`], and
//! the [`LocalParentGuard`] that makes a [`Span`](crate::Span) the parent of
//! local spans.

mod local_collector;
mod local_span;
pub(crate) mod raw_span;
pub(crate) mod span_queue;
pub(crate) mod stack;

pub use crate::span::LocalParentGuard;
pub use local_collector::{LocalCollector, LocalSpans};
pub use local_span::LocalSpan;
