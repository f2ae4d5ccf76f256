use std::borrow::Cow;

use crate::collector::{SpanId, TraceId};

/// A key-value pair attached to a span or an event.
pub(crate) type Property = (Cow<'static, str>, Cow<'static, str>);

/// A finished span, as the collector hands it to a [`Reporter`](crate::collector::Reporter).
///
/// ```
/// use minitrace::collector::{SpanId, SpanRecord, TraceId};
///
/// let record = SpanRecord {
///     trace_id: TraceId(1),
///     span_id: SpanId(2),
///     name: "query".into(),
///     ..Default::default()
/// };
/// assert_eq!(record.parent_id, SpanId(0)); // a root
/// ```
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SpanRecord {
    /// The trace this span belongs to.
    pub trace_id: TraceId,
    /// This span's id, unique within the trace.
    pub span_id: SpanId,
    /// The parent span's id, or `SpanId(0)` for a root without a remote parent.
    pub parent_id: SpanId,
    /// Start, in nanoseconds since the unix epoch.
    pub begin_time_unix_ns: u64,
    /// How long the span lasted, in nanoseconds.
    pub duration_ns: u64,
    /// The span's name.
    pub name: Cow<'static, str>,
    /// Key-value pairs, in the order they were added.
    pub properties: Vec<(Cow<'static, str>, Cow<'static, str>)>,
    /// Events that happened during the span, in the order they happened.
    pub events: Vec<EventRecord>,
}

/// Something that happened at one moment inside a span; see [`Event`](crate::Event).
///
/// ```
/// let event = minitrace::collector::EventRecord { name: "cache miss".into(), ..Default::default() };
/// assert!(event.properties.is_empty());
/// ```
#[derive(Clone, Debug, Default, PartialEq)]
pub struct EventRecord {
    /// The event's name.
    pub name: Cow<'static, str>,
    /// When it happened, in nanoseconds since the unix epoch.
    pub timestamp_unix_ns: u64,
    /// Key-value pairs.
    pub properties: Vec<(Cow<'static, str>, Cow<'static, str>)>,
}
