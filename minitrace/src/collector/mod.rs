//! The thread-safe path from finished spans to a [`Reporter`]: ids and
//! contexts, the per-thread queues, the collector thread that assembles
//! traces, and the reporters.
//!
//! A reporter and its [`Config`] are set once with
//! [`set_reporter`](crate::set_reporter); the collector thread then hands
//! it the [`SpanRecord`]s of finished traces, and [`stats`] tells what
//! became of every span.
//!
//! ```
//! use minitrace::collector::{Config, Reporter, SpanRecord};
//! use minitrace::prelude::*;
//!
//! /// Prints one line per span.
//! struct LinePrinter;
//!
//! impl Reporter for LinePrinter {
//!     fn report(&mut self, spans: &[SpanRecord]) {
//!         for span in spans {
//!             println!("{} {} {} ns", span.trace_id, span.name, span.duration_ns);
//!         }
//!     }
//! }
//!
//! minitrace::set_reporter(LinePrinter, Config::default());
//! drop(Span::root("request", SpanContext::random()));
//! minitrace::flush();
//! assert_eq!(minitrace::collector::stats().spans_reported, 1);
//! ```

pub(crate) mod assemble;
pub(crate) mod global;
mod reporter;
pub(crate) mod retrieve;

pub use crate::data::config::Config;
pub use crate::data::context::SpanContext;
pub use crate::data::id::{SpanId, TraceId};
pub use crate::data::otel::{
    is_reserved_key, SpanKind, SpanStatus, KIND_KEY, LINK_KEY, STATUS_CODE_KEY, STATUS_MESSAGE_KEY,
    TRACESTATE_KEY,
};
pub use crate::data::record::{EventRecord, Reporter, SpanRecord};
pub use crate::transport::stats::{count_dropped_by_reporter, stats, Stats};
pub use reporter::{ConsoleReporter, TestReporter};
