use std::borrow::Cow;

use minstant::Instant;

use crate::collector::record::Property;
use crate::collector::{stats, SpanId};
use crate::local::raw_span::{RawSpan, LINE_PARENT};

/// Local spans under one parent, most recent last. Opening a span is a
/// `Vec::push`; the innermost open span is the implicit parent of the next.
#[derive(Debug, Default)]
pub(crate) struct SpanQueue {
    spans: Vec<RawSpan>,
    /// Index of the innermost open span: the next span's parent.
    current: Option<usize>,
}

/// More local spans than this under one parent are dropped and counted: a
/// runaway loop must not eat the memory of the process it observes.
pub(crate) const MAX_SPANS_PER_QUEUE: usize = 50_000;

/// What a [`LocalSpan`](crate::local::LocalSpan) needs to close its span.
#[derive(Debug, Clone, Copy)]
pub(crate) struct QueueSlot {
    pub(crate) index: usize,
    pub(crate) parent: Option<usize>,
}

impl SpanQueue {
    #[inline]
    pub(crate) fn start_span(&mut self, name: Cow<'static, str>) -> Option<QueueSlot> {
        if self.spans.len() >= MAX_SPANS_PER_QUEUE {
            stats::count_trace_too_large(1);
            return None;
        }
        let parent = self.current;
        let index = self.spans.len();
        self.spans
            .push(RawSpan::begin(SpanId::random(), self.current_parent_id(), name));
        self.current = Some(index);
        Some(QueueSlot { index, parent })
    }

    /// Closes the span; the next span's parent becomes this span's parent.
    /// Spans closed out of order are each still closed at their own drop; the
    /// implicit parent then follows the most recent close.
    #[inline]
    pub(crate) fn finish_span(&mut self, slot: QueueSlot) {
        if let Some(span) = self.spans.get_mut(slot.index) {
            span.end = Instant::now();
        }
        self.current = slot.parent;
    }

    pub(crate) fn current_parent_id(&self) -> SpanId {
        self.current.map_or(LINE_PARENT, |index| self.spans[index].id)
    }

    pub(crate) fn add_properties(&mut self, slot: usize, properties: impl IntoIterator<Item = Property>) {
        if let Some(span) = self.spans.get_mut(slot) {
            span.properties.extend(properties);
        }
    }

    pub(crate) fn add_properties_to_current(&mut self, properties: impl IntoIterator<Item = Property>) {
        if let Some(index) = self.current {
            self.add_properties(index, properties);
        }
    }

    pub(crate) fn add_event(&mut self, name: Cow<'static, str>, properties: Vec<Property>) {
        if self.spans.len() >= MAX_SPANS_PER_QUEUE {
            return;
        }
        self.spans
            .push(RawSpan::event(self.current_parent_id(), name, properties));
    }

    /// Everything recorded; spans still open are closed now.
    pub(crate) fn take_all(&mut self) -> Vec<RawSpan> {
        let now = Instant::now();
        for span in self.spans.iter_mut().filter(|span| span.is_open()) {
            span.end = now;
        }
        self.current = None;
        std::mem::take(&mut self.spans)
    }
}
