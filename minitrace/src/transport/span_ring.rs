//! The ring a thread's history keeps the local spans of the traces it
//! threw away in (`transport::history`). Spans are moved in from their
//! line's buffer, in order, and overwritten in place once the ring is
//! full, a trace's spans then copied in one or two blocks without reading
//! the slots they replace (which own nothing): the buffer goes straight
//! back to the thread's next line, still in cache, and the ring's memory
//! is only ever written in sequence (PERFORMANCE.md, "The flight
//! recorder"). The history numbers each
//! trace's spans; what the numbers of the spans still held are is the
//! history's to say, the ring only tells which the next spans will
//! overwrite.

use std::borrow::Cow;

use minstant::Instant;

use crate::data::id::SpanId;
use crate::data::raw_span::RawSpan;

/// The span numbered `n` (counted since the ring was made) is in slot
/// `n % slots`. A span overwritten owns nothing: the trace it belonged to
/// went first, and [`Ring::empty`] took what it owned.
#[derive(Default)]
pub(crate) struct Ring {
    spans: Vec<RawSpan>,
    /// The slots it may fill: as many as its limit holds until it first
    /// wraps, which fixes them (until a higher limit: [`Ring::take_limit`]).
    slots: usize,
    /// The limit its slots were set under (0: not made yet).
    limit: usize,
    /// The number the next span written gets.
    next: u64,
    /// Its slot, `next % slots`, kept as it moves: no division a trace.
    cursor: usize,
    /// The number of the oldest span still held (`next` if none is).
    oldest: u64,
}

const SLOT: usize = std::mem::size_of::<RawSpan>();

impl Ring {
    /// The bytes its slots take.
    pub(crate) fn bytes(&self) -> usize {
        self.spans.len() * SLOT
    }

    /// The slots it may fill.
    #[cfg(test)]
    pub(crate) fn slots(&self) -> usize {
        self.slots
    }

    /// Where its slots are.
    #[cfg(test)]
    pub(crate) fn at(&self) -> *const RawSpan {
        self.spans.as_ptr()
    }

    /// The limit its slots were set under (0: not made yet).
    pub(crate) fn limit(&self) -> usize {
        self.limit
    }

    /// Takes as many slots as `limit` holds: its first limit, or one higher
    /// than its own. Once it has wrapped, the spans still held move to the
    /// first slots, in order, renumbered from 0: returns by how much their
    /// numbers fell, for the history to renumber its traces. Before, they
    /// stay where they are.
    #[cold]
    pub(crate) fn take_limit(&mut self, limit: usize) -> u64 {
        let filled = self.spans.len();
        if self.next == filled as u64 {
            (self.slots, self.limit) = (self.slots.max(limit / SLOT), limit);
            // Fixed at `filled` (the cursor back at 0), it may grow again:
            // the next span goes after the last.
            if filled < self.slots {
                self.cursor = filled;
            }
            return 0;
        }
        let (base, held) = (self.oldest, (self.next - self.oldest) as usize);
        let mut spans = Vec::with_capacity(held);
        self.empty(base, held, |span| spans.push(span));
        *self = Ring { spans, slots: limit / SLOT, limit, next: held as u64, cursor: held, oldest: 0 };
        base
    }

    /// The number the next span written gets.
    pub(crate) fn next(&self) -> u64 {
        self.next
    }

    /// The number of the oldest span still held.
    pub(crate) fn oldest(&self) -> u64 {
        self.oldest
    }

    /// Whether `entries` more spans fit under its limit; `over`: growing it
    /// by them would take the history past the limit, so it wraps where it
    /// is, if it can hold them already. No span is numbered past its length
    /// yet then, so each stays where its number says.
    pub(crate) fn fit(&mut self, entries: usize, over: bool) -> bool {
        let filled = self.spans.len();
        if over && filled < self.slots && filled >= entries {
            // Not wrapped yet, so `next` is `filled`: the cursor wraps too.
            (self.slots, self.cursor) = (filled, 0);
        }
        entries <= self.slots
    }

    /// Spans numbered below this are overwritten by `entries` more.
    pub(crate) fn reused_from(&self, entries: usize) -> u64 {
        (self.next + entries as u64).saturating_sub(self.slots as u64)
    }

    /// Spans numbered below `oldest` are no longer held.
    pub(crate) fn let_go(&mut self, oldest: u64) {
        self.oldest = oldest;
    }

    /// Moves `spans` in (left empty, its capacity kept), numbered from
    /// [`Ring::next`]; returns the bytes the ring grew by.
    pub(crate) fn write(&mut self, spans: &mut Vec<RawSpan>) -> usize {
        let (first, filled, entries) = (self.next, self.spans.len(), spans.len());
        if entries == 0 {
            return 0;
        }
        // (More spans than slots never come: `fit` said no. If they did,
        // the loop keeps it memory-safe.)
        if filled < self.slots || entries > self.slots {
            return self.grow(spans);
        }
        let at = self.cursor;
        let head = entries.min(self.slots - at);
        debug_assert!(at as u64 == first % self.slots as u64);
        debug_assert!(self.spans[at..at + head]
            .iter()
            .chain(&self.spans[..entries - head])
            .all(|old| !old.owns_heap()));
        let (from, to) = (spans.as_ptr(), self.spans.as_mut_ptr());
        // SAFETY: all `slots` slots are filled, the cursor `at` is below
        // them (every method keeps it so) and `entries` is at most `slots`,
        // so `head` slots from `at` and `entries - head` from 0 are in the
        // ring; `spans` holds `entries` spans, in another allocation. Each
        // span is moved once: `spans` forgets them right after. The spans
        // overwritten own nothing (see `Ring`), so nothing leaks by not
        // dropping them.
        unsafe {
            std::ptr::copy_nonoverlapping(from, to.add(at), head);
            std::ptr::copy_nonoverlapping(from.add(head), to, entries - head);
            spans.set_len(0);
        }
        self.next = first + entries as u64;
        self.cursor = if head < entries { entries - head } else { at + entries };
        if self.cursor == self.slots {
            self.cursor = 0;
        }
        0
    }

    /// [`Ring::write`] while the ring is not full-sized yet: spans are
    /// pushed after the last, wrapping to the first slot once it is. Slots
    /// overwritten are read first, and dropped if they own anything.
    #[cold]
    fn grow(&mut self, spans: &mut Vec<RawSpan>) -> usize {
        let (first, filled, entries) = (self.next, self.spans.len(), spans.len());
        let mut at = self.cursor;
        for span in spans.drain(..) {
            match self.spans.get_mut(at) {
                Some(old) => {
                    let old = std::mem::replace(old, span);
                    if old.owns_heap() {
                        drop(old);
                    } else {
                        std::mem::forget(old);
                    }
                }
                None => self.spans.push(span),
            }
            at += 1;
            if at == self.slots {
                at = 0;
            }
        }
        self.next = first + entries as u64;
        self.cursor = at;
        (self.spans.len() - filled) * SLOT
    }

    /// The slots of `entries` spans from number `first`, as one or two
    /// runs (the ring wraps).
    pub(crate) fn runs(&self, first: u64, entries: usize) -> (&[RawSpan], &[RawSpan]) {
        if entries == 0 {
            return (&[], &[]);
        }
        let at = (first % self.slots as u64) as usize;
        let head = entries.min(self.slots - at);
        (&self.spans[at..at + head], &self.spans[..entries - head])
    }

    /// Takes the spans from number `first` out of their slots, to `each`,
    /// leaving nothing owned there.
    pub(crate) fn empty(&mut self, first: u64, entries: usize, mut each: impl FnMut(RawSpan)) {
        for n in first..first + entries as u64 {
            let slot = &mut self.spans[(n % self.slots as u64) as usize];
            each(std::mem::replace(
                slot,
                RawSpan::begin(SpanId(0), SpanId(0), Cow::Borrowed(""), Instant::ZERO),
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spans(ids: std::ops::Range<u64>) -> Vec<RawSpan> {
        ids.map(|id| RawSpan::begin(SpanId(id), SpanId(0), Cow::Borrowed("step"), Instant::ZERO)).collect()
    }

    fn ids(ring: &Ring, first: u64, entries: usize) -> Vec<u64> {
        let (head, tail) = ring.runs(first, entries);
        head.iter().chain(tail).map(|span| span.id.0).collect()
    }

    /// A ring fixed at its length by a trace with no spans (it has not
    /// wrapped yet), then given a higher limit, grows at its end.
    #[test]
    fn a_ring_fixed_before_it_wrapped_grows_after_its_last_span() {
        let mut ring = Ring::default();
        assert_eq!(ring.take_limit(10 * SLOT), 0);
        assert!(ring.fit(3, false));
        assert_eq!((ring.next(), ring.write(&mut spans(1..4))), (0, 3 * SLOT));
        assert!(ring.fit(0, true));
        assert_eq!(ring.slots(), 3, "fixed at its length");
        assert_eq!(ring.take_limit(20 * SLOT), 0, "nothing renumbered");
        assert!(ring.fit(2, false));
        assert_eq!((ring.next(), ring.write(&mut spans(4..6))), (3, 2 * SLOT));
        assert_eq!(ids(&ring, 0, 5), [1, 2, 3, 4, 5]);
    }
}
