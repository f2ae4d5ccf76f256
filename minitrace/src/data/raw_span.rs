use std::borrow::Cow;

use minstant::Instant;

use crate::data::id::SpanId;
use crate::data::record::{owned_bytes, properties_bytes, Property, PropertyList};

/// A span as recorded on the hot path: ticks, not nanoseconds, and no
/// trace id (the batch it travels in knows its trace). Events are raw spans
/// of zero length with the id [`EVENT`], whose parent is the span they
/// belong to.
///
/// 64 bytes, a cache line's worth, as the collector reads every span a
/// traced thread wrote (PERFORMANCE.md, "One cache line per span").
#[derive(Debug, Clone)]
pub(crate) struct RawSpan {
    pub(crate) id: SpanId,
    /// [`LINE_PARENT`] for a span whose parent is whatever its batch is
    /// mounted under.
    pub(crate) parent_id: SpanId,
    pub(crate) begin: Instant,
    /// `Instant::ZERO` while the span is open.
    pub(crate) end: Instant,
    pub(crate) name: Cow<'static, str>,
    /// Boxed, as most spans have none: keeps the span in one cache line.
    pub(crate) properties: Option<PropertyList>,
}

const _: () = assert!(cfg!(not(target_pointer_width = "64")) || std::mem::size_of::<RawSpan>() == 64);

/// The id of every event: spans never get id 0.
pub(crate) const EVENT: SpanId = SpanId(0);

/// The parent id of the top-level spans of a batch: resolved to the
/// mounting span's id when the batch is collected.
pub(crate) const LINE_PARENT: SpanId = SpanId(0);

impl RawSpan {
    /// `begin` is read by the caller: see [`Clock`].
    #[inline]
    pub(crate) fn begin(id: SpanId, parent_id: SpanId, name: Cow<'static, str>, begin: Instant) -> RawSpan {
        RawSpan { id, parent_id, begin, end: Instant::ZERO, name, properties: None }
    }

    pub(crate) fn event(
        parent_id: SpanId,
        name: Cow<'static, str>,
        properties: Option<PropertyList>,
    ) -> RawSpan {
        let now = Instant::now();
        RawSpan { id: EVENT, parent_id, begin: now, end: now, name, properties }
    }

    pub(crate) fn is_event(&self) -> bool {
        self.id == EVENT
    }

    /// The first list moves in as it is; a later one's properties are
    /// appended, and that list, emptied, is handed back for reuse.
    pub(crate) fn add_properties(&mut self, mut list: PropertyList) -> Option<PropertyList> {
        match &mut self.properties {
            Some(existing) => {
                existing.append(&mut list);
                Some(list)
            }
            None if list.is_empty() => Some(list),
            None => {
                self.properties = Some(list);
                None
            }
        }
    }

    pub(crate) fn is_open(&self) -> bool {
        self.end == Instant::ZERO
    }

    /// Whether it owns heap memory: [`heap_bytes`](Self::heap_bytes) is
    /// not 0.
    #[inline]
    pub(crate) fn owns_heap(&self) -> bool {
        matches!(self.name, Cow::Owned(_)) || self.properties.is_some()
    }

    /// The heap bytes it owns: its name, if owned, and its properties.
    pub(crate) fn heap_bytes(&self) -> usize {
        owned_bytes(&self.name)
            + self
                .properties
                .as_deref()
                .map_or(0, |properties| std::mem::size_of::<Vec<Property>>() + properties_bytes(properties))
    }
}

/// Which clock reading a span's ends use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Clock {
    /// The cheaper reading, ordered only with the thread's other cheap
    /// readings: for both ends of a local span, for the start of any span
    /// (a start read early only lengthens the span), and for the end of a
    /// root on the thread that started it.
    SameThread,
    /// The ordered reading: for the end of a `Span` that may be on another
    /// thread than its start.
    AnyThread,
}

impl Clock {
    #[inline]
    pub(crate) fn now(self) -> Instant {
        match self {
            Clock::SameThread => Instant::now_unordered(),
            Clock::AnyThread => Instant::now(),
        }
    }
}
