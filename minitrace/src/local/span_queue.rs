use std::borrow::Cow;

use crate::data::id::SpanId;
use crate::data::raw_span::{Clock, RawSpan, LINE_PARENT};
use crate::data::record::PropertyList;
use crate::transport::line_spans::LineSpans;
use crate::transport::{history, stats};

/// Local spans under one parent, most recent last. Opening a span is a
/// `Vec::push`; the innermost open span is the implicit parent of the next.
#[derive(Debug)]
pub(crate) struct SpanQueue {
    spans: LineSpans,
    /// Whether it may write into the stretch of the thread's ring lent for
    /// its next request (`transport::line_spans`): only the line of a root,
    /// whose spans wait for its end on this thread.
    lend: bool,
    /// Entries the queue takes before [`grow`](SpanQueue::grow) runs: the
    /// buffer's capacity, capped at [`MAX_SPANS_PER_QUEUE`], so that opening
    /// a span checks one bound, not two.
    room: usize,
    /// The innermost open span's id ([`LINE_PARENT`] when none is open):
    /// the next span's parent, kept as the id it is used as.
    current: SpanId,
    /// Span ids are `id_base + index`: unique within the queue, and a random
    /// base keeps them apart from other queues' without a generator call
    /// per span. Drawn with the first span (0 until then), below 2^63 so
    /// that no id wraps to 0 and a span's index is its id minus the base.
    id_base: u64,
    /// Events recorded: so that submitting a batch needs no pass over it to
    /// count its spans.
    events: usize,
}

/// More local spans than this under one parent are dropped and counted: a
/// runaway loop must not eat the memory of the process it observes.
/// Below 2^16, so that a span's index fits in a [`LocalSpan`](crate::local::LocalSpan)'s handle.
pub(crate) const MAX_SPANS_PER_QUEUE: usize = 50_000;

impl SpanQueue {
    /// An empty queue. It takes a (recycled) buffer and an id base only
    /// when something is recorded: a line that records nothing, such as most
    /// polls of a future in a span, costs neither.
    pub(crate) fn new(lend: bool) -> SpanQueue {
        SpanQueue { spans: LineSpans::default(), lend, room: 0, current: LINE_PARENT, id_base: 0, events: 0 }
    }

    /// Spare capacity for one more entry, or `None` at the limit.
    #[inline]
    fn make_room(&mut self) -> Option<()> {
        if self.spans.len() < self.room {
            return Some(());
        }
        self.grow()
    }

    /// The first entry takes the thread's stretch or a recycled buffer, and
    /// draws the id base; later ones, past its capacity, grow it, up to the
    /// limit.
    #[cold]
    fn grow(&mut self) -> Option<()> {
        if self.spans.len() >= MAX_SPANS_PER_QUEUE {
            return None;
        }
        if self.spans.capacity() == 0 {
            self.id_base = (SpanId::random().0 >> 1).max(1);
        }
        self.spans.make_room(self.lend, || history::limit() > 0);
        self.room = self.spans.capacity().min(MAX_SPANS_PER_QUEUE);
        Some(())
    }

    /// Opens a span under the innermost open one; returns its index.
    #[inline]
    pub(crate) fn start_span(&mut self, name: Cow<'static, str>) -> Option<usize> {
        if self.make_room().is_none() {
            stats::count_trace_too_large(1);
            return None;
        }
        let index = self.spans.len();
        let (id, parent_id) = (SpanId(self.id_base + index as u64), self.current);
        // Written in place, as `push` builds the span on the stack and copies
        // it (PERFORMANCE.md, "Building values where they live").
        let span = RawSpan::begin(id, parent_id, name, Clock::SameThread.now());
        // SAFETY: `make_room` left room for it (`room` is at most the
        // capacity).
        unsafe { self.spans.push_unchecked(span) };
        self.current = id;
        Some(index)
    }

    /// Closes the span; the next span's parent becomes this span's parent.
    /// Spans closed out of order are each still closed at their own drop; the
    /// implicit parent then follows the most recent close.
    #[inline]
    pub(crate) fn finish_span(&mut self, index: usize) {
        if let Some(span) = self.spans.get_mut(index) {
            span.end = Clock::SameThread.now();
            self.current = span.parent_id;
        }
    }

    #[inline]
    pub(crate) fn current_parent_id(&self) -> SpanId {
        self.current
    }

    /// Returns the list when it is left over (emptied, or not taken).
    pub(crate) fn add_properties(&mut self, slot: usize, list: PropertyList) -> Option<PropertyList> {
        match self.spans.get_mut(slot) {
            Some(span) => span.add_properties(list),
            None => Some(list),
        }
    }

    /// As [`add_properties`](Self::add_properties), to the innermost open span.
    pub(crate) fn add_properties_to_current(&mut self, list: PropertyList) -> Option<PropertyList> {
        match self.current {
            LINE_PARENT => Some(list),
            current => self.add_properties((current.0 - self.id_base) as usize, list),
        }
    }

    pub(crate) fn add_event(&mut self, name: Cow<'static, str>, properties: Option<PropertyList>) {
        if self.make_room().is_some() {
            // SAFETY: as in `start_span`.
            unsafe { self.spans.push_unchecked(RawSpan::event(self.current, name, properties)) };
            self.events += 1;
        } else {
            stats::count_dropped_events(1);
        }
    }

    /// Everything recorded, and how many of the entries are spans (not
    /// events); spans still open are closed now.
    pub(crate) fn take_all(&mut self) -> (LineSpans, usize) {
        // Found by one pass per batch, not counted at every open and close
        // (PERFORMANCE.md, "Local spans").
        let spans = self.spans.as_mut_slice();
        if let Some(first_open) = spans.iter().position(RawSpan::is_open) {
            let now = Clock::SameThread.now();
            for span in spans[first_open..].iter_mut().filter(|span| span.is_open()) {
                span.end = now;
            }
        }
        self.current = LINE_PARENT;
        self.room = 0;
        let spans = self.spans.len() - std::mem::take(&mut self.events);
        (std::mem::take(&mut self.spans), spans)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn taking_the_spans_closes_only_those_still_open() {
        let mut queue = SpanQueue::new(false);
        let closed = queue.start_span("closed".into()).unwrap();
        queue.finish_span(closed);
        let closed_end = queue.spans.as_slice()[closed].end;
        let _open = queue.start_span("open".into()).unwrap();
        queue.add_event("event".into(), None);
        let _open_inner = queue.start_span("open inner".into()).unwrap();
        let (spans, count) = queue.take_all();
        let spans = spans.into_vec();
        assert_eq!((spans.len(), count), (4, 3));
        assert_eq!(spans[closed].end, closed_end);
        assert!(spans.iter().all(|span| !span.is_open()));
        assert!(spans[2].is_event() && spans[2].end == spans[2].begin);
        assert!(spans[3].end >= spans[1].begin);
    }
}
