//! The bottom layer: plain data, and what turns it into records. Ids
//! (trace, span, collect), where a span goes (targets), spans as recorded
//! (raw spans, a thread-safe span's state, batches), the finished records
//! and the trait that receives them, the configuration and span contexts.
//! Nothing here knows of threads' queues, local parents or the collector.

pub(crate) mod batch;
pub(crate) mod collect_id;
pub(crate) mod config;
pub(crate) mod context;
pub(crate) mod convert;
pub(crate) mod escape;
pub(crate) mod id;
pub(crate) mod otel;
pub(crate) mod raw_span;
pub(crate) mod record;
pub(crate) mod span_state;
pub(crate) mod target;
pub(crate) mod timeline;
