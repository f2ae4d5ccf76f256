//! A timeline tracing library cheap enough to trace every request of a
//! service that answers in a microsecond, all the time, and to find the one
//! slow request in a million that averages hide.
//!
//! ```
//! use minitrace::collector::{Config, ConsoleReporter};
//! use minitrace::prelude::*;
//!
//! minitrace::set_reporter(ConsoleReporter, Config::default());
//! {
//!     let root = Span::root("request", SpanContext::random());
//!     let _guard = root.set_local_parent();
//!     let _span = LocalSpan::enter_with_local_parent("parse");
//! }
//! minitrace::flush();
//! ```
//!
//! # Concepts
//!
//! - A **[`Span`]** is a named interval with properties. [`Span::root`]
//!   starts a trace; thread-safe spans can cross threads and `.await`s and
//!   can have several parents.
//! - A **[`LocalSpan`](local::LocalSpan)** stays on its thread and costs a
//!   clock read and a `Vec::push`. Its parent is implicit: the innermost open
//!   local span, or the **local parent** set with [`Span::set_local_parent`].
//! - A **[`LocalCollector`](local::LocalCollector)** gathers local spans with
//!   no parent yet; the batch can be mounted under many spans.
//! - The **collector** thread receives finished spans through one lock-free
//!   queue per thread, assembles each trace when its root finishes, and hands
//!   batches to the **[`Reporter`](collector::Reporter)** set with
//!   [`set_reporter`], on its own thread.
//! - **Sampling**: [`Config::report_slow_traces_only`](collector::Config::report_slow_traces_only)
//!   traces every request but reports only those whose root was slow.
//! - **Counted loss**: every bound that drops spans counts them; see
//!   [`collector::stats`].
//!
//! # Cost model
//!
//! A local span is two clock reads (see `minstant`) and a push into a
//! recycled buffer; a batch of them costs one push to the thread's queue
//! when its local parent guard drops. A `Span` is two ordered clock reads
//! and one push to the queue when it ends, with no allocation. Assembling
//! traces and building [`SpanRecord`](collector::SpanRecord)s happen on the
//! collector thread. Without a reporter, roots are no-ops and so are their
//! descendants.
//!
//! # The `enable` feature
//!
//! Without it, every call in this crate compiles to nothing. Libraries
//! depend on minitrace without it; the application enables it.

#![deny(missing_docs)]

pub mod collector;
mod event;
pub mod future;
pub mod local;
mod macros;
mod span;
pub mod util;

#[doc(hidden)]
pub use macros::__private;

pub use crate::collector::global::{flush, set_reporter};
pub use crate::event::Event;
pub use crate::span::Span;
/// Traces a fn: a span for every call, named after the fn, under the
/// caller's local parent. See [`minitrace_macro::trace`] for the options.
pub use minitrace_macro::trace;

/// Whether tracing is compiled in: the `enable` switch, decided here and
/// nowhere else. Every entry point checks this constant first, and every
/// recording object is stored as a [`Recording`], so without the feature
/// the optimiser removes the rest.
pub(crate) const ENABLED: bool = cfg!(feature = "enable");

/// A recording object's state: `Option<T>` with `enable`, a zero-sized,
/// always-empty stand-in without it (see `util::recording`).
#[cfg(feature = "enable")]
pub(crate) type Recording<T> = Option<T>;
#[cfg(not(feature = "enable"))]
pub(crate) type Recording<T> = util::recording::Nothing<T>;

/// Stores `value` as a [`Recording`]: itself with `enable`, nothing without.
#[inline(always)]
#[allow(clippy::useless_conversion)] // a real conversion only without `enable`
pub(crate) fn recording<T>(value: Option<T>) -> Recording<T> {
    value.into()
}

/// The common imports.
///
/// ```
/// use minitrace::prelude::*;
/// ```
pub mod prelude {
    pub use crate::collector::{SpanContext, SpanId, SpanRecord, TraceId};
    pub use crate::event::Event;
    pub use crate::future::FutureExt as _;
    pub use crate::local::LocalSpan;
    pub use crate::span::Span;
    pub use crate::trace;
    pub use crate::{file_location, full_name, func_name};
}
