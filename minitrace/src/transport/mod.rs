//! The path from traced threads to the collector thread: the messages,
//! each thread's outbox and its exit, the recycled span buffers and property lists, the
//! switches the traced threads read (`gate`), the loss counters (`stats`),
//! and the doorbell that wakes the collector thread (`wake`). Above the
//! data, below the local spans, spans and the collector that use it.

pub(crate) mod exited;
pub(crate) mod gate;
pub(crate) mod handoff;
pub(crate) mod history;
pub(crate) mod line_spans;
pub(crate) mod message;
pub(crate) mod property_lists;
pub(crate) mod queue;
pub(crate) mod released;
pub(crate) mod span_buffers;
pub(crate) mod span_ring;
pub(crate) mod stats;
pub(crate) mod wake;
pub(crate) mod wanted;
