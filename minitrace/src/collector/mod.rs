//! The thread-safe path from finished spans to a [`Reporter`]: ids and
//! contexts, the per-thread queues, the collector thread that assembles
//! traces, and the reporters.

pub(crate) mod assemble;
mod config;
mod context;
pub(crate) mod global;
mod id;
pub(crate) mod message;
pub(crate) mod queue;
pub(crate) mod record;
mod reporter;
pub(crate) mod stats;
pub(crate) mod target;

pub use config::Config;
pub use context::SpanContext;
pub use id::{SpanId, TraceId};
pub use record::{EventRecord, SpanRecord};
pub use reporter::{ConsoleReporter, Reporter, TestReporter};
pub use stats::{count_dropped_by_reporter, stats, Stats};
