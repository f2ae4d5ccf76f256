//! The thread-local fast path: [`LocalSpan`]s recorded into the current
//! thread's span line, batches of them gathered by [`LocalCollector`], and
//! the [`LocalParentGuard`] that makes a [`Span`](crate::Span) the parent of
//! local spans.
//!
//! ```
//! use minitrace::local::{LocalCollector, LocalSpan};
//! use minitrace::prelude::*;
//!
//! // Under a span made the local parent...
//! let root = Span::root("request", SpanContext::random());
//! {
//!     let _guard = root.set_local_parent();
//!     let _step = LocalSpan::enter_with_local_parent("step");
//! } // the guard sends the batch of local spans on its way
//!
//! // ...or gathered without a parent, to be mounted later.
//! let collector = LocalCollector::start();
//! {
//!     let _step = LocalSpan::enter_with_local_parent("shared step");
//! }
//! let spans = collector.collect();
//! root.push_child_spans(spans);
//! ```

pub(crate) mod local_collector;
pub(crate) mod local_parent_guard;
pub(crate) mod local_span;
pub(crate) mod parked;
pub(crate) mod span_queue;
pub(crate) mod stack;

pub use local_collector::{LocalCollector, LocalSpans};
pub use local_parent_guard::LocalParentGuard;
pub use local_span::LocalSpan;
