use std::borrow::Cow;

use crate::data::id::{SpanId, TraceId};

/// A key-value pair attached to a span or an event.
pub(crate) type Property = (Cow<'static, str>, Cow<'static, str>);

#[allow(dead_code)] // the flight recorder's retention uses it next
/// The heap bytes a name, key or value owns: none when it is borrowed.
// A `Cow`, not a `&str`: whether the text is owned is the question.
#[allow(clippy::ptr_arg)]
pub(crate) fn owned_bytes(text: &Cow<'static, str>) -> usize {
    match text {
        Cow::Borrowed(_) => 0,
        Cow::Owned(text) => text.capacity(),
    }
}

#[allow(dead_code)] // the flight recorder's retention uses it next
/// The bytes properties hold: each pair, and what its key and value own.
pub(crate) fn properties_bytes(properties: &[Property]) -> usize {
    properties
        .iter()
        .map(|(key, value)| std::mem::size_of::<Property>() + owned_bytes(key) + owned_bytes(value))
        .sum()
}

/// A span's or an event's properties as it keeps them: one pointer, so
/// that a raw span stays in a cache line. Recycled (`transport::property_lists`).
#[allow(clippy::box_collection)]
pub(crate) type PropertyList = Box<Vec<Property>>;

/// A kept list's properties, moved out for a record; the emptied list goes
/// to `emptied`, to be filled again with a reported record's vector.
#[inline(always)]
pub(crate) fn unbox(list: Option<PropertyList>, emptied: &mut Vec<PropertyList>) -> Vec<Property> {
    match list {
        None => Vec::new(),
        Some(mut list) => {
            let properties = std::mem::take(&mut *list);
            emptied.push(list);
            properties
        }
    }
}

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

/// Receives finished spans from the collector thread, in batches.
///
/// `report` runs on the collector's own thread, never on a traced thread,
/// so it may do I/O. A reporter that panics loses that batch (counted in
/// [`Stats::dropped_by_reporter`](crate::collector::Stats::dropped_by_reporter))
/// and keeps receiving later batches.
///
/// ```
/// use minitrace::collector::{Reporter, SpanRecord};
///
/// struct CountingReporter(usize);
///
/// impl Reporter for CountingReporter {
///     fn report(&mut self, spans: &[SpanRecord]) {
///         self.0 += spans.len();
///     }
/// }
/// ```
pub trait Reporter: Send + 'static {
    /// Delivers one batch: every `report_interval` (or [`flush`](crate::flush)),
    /// the traces finished since, split into batches of about 4 096 spans
    /// at trace boundaries so that the records are still in the CPU's cache
    /// while they are reported. The spans of one trace may arrive over
    /// several batches only with `report_before_root_finish`, or when
    /// children finish after their root. A cycle with nothing to report
    /// still calls it once, with no spans, as minitrace 0.6 did, so that a
    /// reporter that batches on its own can flush then.
    ///
    /// ```
    /// use minitrace::collector::{Reporter, SpanRecord};
    ///
    /// struct Names(Vec<String>);
    ///
    /// impl Reporter for Names {
    ///     fn report(&mut self, spans: &[SpanRecord]) {
    ///         self.0.extend(spans.iter().map(|span| span.name.to_string()));
    ///     }
    /// }
    ///
    /// let mut reporter = Names(Vec::new());
    /// reporter.report(&[SpanRecord { name: "query".into(), ..Default::default() }]);
    /// assert_eq!(reporter.0, ["query"]);
    /// ```
    fn report(&mut self, spans: &[SpanRecord]);

    /// Waits until every span handed to [`report`](Reporter::report) so far
    /// is delivered, or given up on. The collector calls it after the
    /// reports of a cycle that [`flush`](crate::flush) asked for, so that
    /// `flush()` returning means delivered even for a reporter that sends
    /// on a thread of its own; never between the cycles of a steady
    /// stream. A reporter that delivers within `report` keeps the default,
    /// which returns at once.
    ///
    /// ```
    /// use minitrace::collector::{Reporter, SpanRecord};
    ///
    /// struct Queued(Vec<SpanRecord>, Vec<SpanRecord>);
    ///
    /// impl Reporter for Queued {
    ///     fn report(&mut self, spans: &[SpanRecord]) {
    ///         self.0.extend_from_slice(spans);
    ///     }
    ///     fn wait_for_delivery(&mut self) {
    ///         self.1.append(&mut self.0);
    ///     }
    /// }
    ///
    /// let mut reporter = Queued(Vec::new(), Vec::new());
    /// reporter.report(&[SpanRecord::default()]);
    /// reporter.wait_for_delivery();
    /// assert_eq!((reporter.0.len(), reporter.1.len()), (0, 1));
    /// ```
    fn wait_for_delivery(&mut self) {}
}
