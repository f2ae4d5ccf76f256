//! What a thread keeps of its traces, whatever their fate, while the flight
//! recorder is on, in memory bounded by the recorder's bytes per thread.
//! A trace the thread threw away itself is one entry: its root, and its
//! local spans in the history's ring (`transport::span_ring`), taken where
//! the line wrote them in the stretch the ring lent, or moved in from their
//! buffer (back to the thread's next line). The parts the collector received
//! from the thread, once filed, come back to it as they travelled. The
//! oldest make room, counted. Both the thread and the collector write under
//! the handover's protocol (`transport::handoff`); the collector reads
//! histories during a harvest, to retrieve traces after the fact.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::data::batch::{Batch, Role};
use crate::data::raw_span::RawSpan;
use crate::data::span_state::SpanState;
use crate::data::target::{Target, Targets};
use crate::transport::line_spans::{self, LineSpans};
use crate::transport::message::{EndedSpan, Message, Parts};
pub(crate) use crate::transport::released::Released;
use crate::transport::span_ring::{Ring, Stretch, STRETCH};
use crate::transport::stats;

use minstant::Instant;

/// The bytes each thread's history may hold; 0: the recorder is off, and
/// nothing is kept.
static LIMIT: AtomicUsize = AtomicUsize::new(0);

/// The bytes each thread's history may hold (0: nothing is kept).
#[inline]
pub(crate) fn limit() -> usize {
    LIMIT.load(Ordering::Relaxed)
}

/// Sets [`limit`]: the flight recorder switched on or off.
pub(crate) fn set_limit(bytes: usize) {
    LIMIT.store(bytes, Ordering::Relaxed);
}

/// A part of a trace kept in a history, the bytes it holds, and when
/// the last of its spans ended.
pub(crate) struct Kept {
    pub(crate) message: Message,
    pub(crate) bytes: usize,
    end: Instant,
}

impl Kept {
    pub(crate) fn new(message: Message) -> Kept {
        let (bytes, end) = measure(&message);
        Kept { message, bytes, end }
    }

    /// A root's span, if this part is one.
    pub(crate) fn root(&self) -> Option<&EndedSpan> {
        match &self.message {
            Message::Ended(ended) if ended.state.role() != Role::Child => Some(ended),
            _ => None,
        }
    }
}

/// One thread's kept parts: parts as they travelled ([`Kept`]), and the
/// traces this thread threw away itself ([`Thrown`]), whose local spans
/// are moved into the history's ring of spans. Each kind is held in the
/// order it came, and the older of the two oldest goes first. The ring
/// is written in order and overwritten in place: the thread's span buffer
/// goes straight back to its next request, still in cache, and the ring's
/// memory is only ever written in sequence (PERFORMANCE.md, "The flight
/// recorder").
#[derive(Default)]
pub(crate) struct History {
    /// The parts filed back, about in the order they ended (a harvest's
    /// worth at a time).
    kept: VecDeque<Kept>,
    /// The traces thrown away here, in the order their roots ended, their
    /// spans in that order in `ring`.
    thrown: VecDeque<Thrown>,
    ring: Ring,
    bytes: usize,
}

/// A trace thrown away on the thread that started it: its root, ended,
/// and the local spans that waited for it, in the history's ring.
pub(crate) struct Thrown {
    pub(crate) root: SpanState,
    pub(crate) end: Instant,
    /// The number of its first span in the ring.
    first: u64,
    /// Its spans and events in the ring.
    entries: usize,
    /// Of them, spans (not events).
    pub(crate) count: usize,
    /// Every byte it holds beside its slots: the entry, and what its root
    /// and spans own.
    bytes: usize,
    /// Whether its spans own anything (dropped where they lie when it goes).
    owning: bool,
}

impl Thrown {
    /// The target its local spans were recorded under: the root's trace,
    /// the root as their parent.
    pub(crate) fn line_target(&self) -> Target {
        self.root.line_target()
    }
}

/// What waits to join a thread's history while a harvest holds it.
pub(crate) enum Waiting {
    Kept(Kept),
    /// A thrown-away trace (see [`History::keep_thrown`]).
    Thrown {
        spans: Vec<RawSpan>,
        count: usize,
        root: SpanState,
        end: Instant,
    },
}

impl Waiting {
    /// Lets it go into `released` (the recorder was switched off while it
    /// waited).
    pub(crate) fn release(self, released: &mut Released) {
        match self {
            Waiting::Kept(kept) => released.release(kept.message),
            Waiting::Thrown { spans, mut root, .. } => {
                released.buffers.push(spans);
                released.extras.extend(root.take_extra());
            }
        }
    }
}

/// A part a history holds, as its readers see it.
pub(crate) enum Held<'a> {
    Kept(&'a Kept),
    /// A thrown-away trace, and its spans (in one or two runs).
    Thrown(&'a Thrown, (&'a [RawSpan], &'a [RawSpan])),
}

impl Held<'_> {
    /// The root's span, if this part holds one.
    pub(crate) fn root(&self) -> Option<&SpanState> {
        match self {
            Held::Kept(kept) => kept.root().map(|ended| &ended.state),
            Held::Thrown(thrown, _) => Some(&thrown.root),
        }
    }
}

impl History {
    pub(crate) fn is_empty(&self) -> bool {
        self.kept.is_empty() && self.thrown.is_empty()
    }

    /// The bytes it holds.
    pub(crate) fn bytes(&self) -> usize {
        self.bytes
    }

    /// Every part: the parts filed back, then the thrown-away traces.
    pub(crate) fn parts(&self) -> impl Iterator<Item = Held<'_>> {
        let thrown = |thrown| Held::Thrown(thrown, self.ring.runs(thrown.first, thrown.entries));
        self.kept.iter().map(Held::Kept).chain(self.thrown.iter().map(thrown))
    }

    /// Keeps `entries`; what made room for them (the oldest parts) is let
    /// go into `released`, for the caller to recycle outside the handover's
    /// write. What made room is counted in the counters of the thread that
    /// runs this (no shared read-modify-write on a traced thread).
    pub(crate) fn keep(
        &mut self,
        entries: impl IntoIterator<Item = Kept>,
        limit: usize,
        released: &mut Released,
    ) {
        for entry in entries {
            self.bytes += entry.bytes;
            self.kept.push_back(entry);
        }
        let mut counted = Counted::default();
        self.make_room(limit, released, &mut counted);
        counted.publish();
    }

    /// Keeps a trace thrown away on this history's thread: `root`, ended at
    /// `end`, and its local spans (`count` of them spans, the rest events),
    /// taken where they lie if written in the stretch the ring lent, moved
    /// in otherwise (the buffer, emptied, the caller's again), or, if the
    /// ring cannot take them, kept as the parts they were recorded as.
    /// `here`: on the history's thread, which then lends its next stretch.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn keep_thrown(
        &mut self,
        spans: &mut LineSpans,
        count: usize,
        root: SpanState,
        end: Instant,
        limit: usize,
        released: &mut Released,
        here: bool,
    ) {
        // A ring fixed where it was, an eighth of the bound now free beside
        // it (the parts it shared the bound with went), fills again.
        if limit > self.ring.limit() || (self.bytes + limit / 8 < limit && self.ring.is_full()) {
            self.ring_takes_limit(limit);
        }
        let entries = spans.len();
        let entry = std::mem::size_of::<Thrown>();
        let lent_here = |slot: &mut Option<Stretch>| slot.as_ref().is_some_and(|it| self.ring.lent_here(it));
        let in_place = spans.is_lent() && line_spans::with_stretch(lent_here) == Some(true);
        if !in_place {
            if spans.is_lent() {
                // Lent by a ring since grown or let go: copied out, and that
                // stretch goes (after the copy: it keeps the memory).
                *spans = LineSpans::from(spans.take_vec());
                drop(line_spans::take_stretch());
            }
            let over = self.bytes + entries * std::mem::size_of::<RawSpan>() + entry > limit;
            // The ring's next slots, lent, are taken back from home; while
            // a line writes there, they are not written.
            let free = !self.ring.is_lent() || (here && self.take_back_home());
            if !free || !self.ring.fit(entries, over) {
                return self.keep_as_parts(spans.take_vec(), count, root, end, limit, released);
            }
        }
        // What the spans own is summed only if one owns anything (rarely).
        let owning = spans.as_slice().iter().any(RawSpan::owns_heap);
        let span_bytes = match owning {
            true => spans.as_slice().iter().map(RawSpan::heap_bytes).sum(),
            false => 0,
        };
        let bytes = entry + root.heap_bytes() + span_bytes;
        // Its entry is made first, its fields stored one by one, and moved
        // into the queue last, in wider pieces: by then the stores have
        // landed and the loads need not wait for them (PERFORMANCE.md,
        // "Building values where they live").
        let first = self.ring.next();
        let thrown = Thrown { root, end, first, entries, count, bytes, owning };
        let mut counted = Counted::default();
        // The oldest traces in the slots about to be overwritten go first
        // (those of a stretch went when it was lent).
        self.free_slots(entries, released, &mut counted);
        let grown = match in_place {
            true => {
                debug_assert!(
                    line_spans::with_stretch(|slot| slot.as_ref().map(Stretch::ptr))
                        == Some(Some(spans.as_ptr().cast_mut()))
                );
                spans.give_to_ring();
                self.ring.take_written(entries);
                line_spans::spent();
                Some(0)
            }
            false => {
                let mut buffer = spans.take_vec();
                let grown = self.ring.write(&mut buffer);
                *spans = LineSpans::from(buffer);
                grown
            }
        };
        // Never `None` (`fit` said they fit, and no stretch is lent); if it
        // were, no entry would be held for spans not written.
        let Some(grown) = grown else {
            self.keep_as_parts(spans.take_vec(), count, thrown.root, end, limit, released);
            return counted.publish();
        };
        self.bytes += bytes + grown;
        self.thrown.push_back(thrown);
        self.make_room(limit, released, &mut counted);
        if here && self.ring.lendable() && !line_spans::is_out() {
            // The traces in the next stretch go now, before its thread writes there.
            self.free_slots(STRETCH, released, &mut counted);
            line_spans::aim_home(|slot| self.ring.lend(slot));
        }
        counted.publish();
    }

    /// [`History::keep_thrown`] on the history's thread, then what waited
    /// ([`History::absorb`]). This trace first: its spans may lie in the
    /// stretch, which the traces that waited (copied in) cannot be written
    /// past while it is out; they would be kept as parts.
    #[inline]
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn keep_thrown_here(
        &mut self,
        waiting: &mut Vec<Waiting>,
        spans: &mut LineSpans,
        count: usize,
        root: SpanState,
        end: Instant,
        limit: usize,
        released: &mut Released,
    ) {
        self.keep_thrown(spans, count, root, end, limit, released, true);
        self.absorb(waiting, limit, released, true);
    }

    /// [`History::keep_thrown`] for a trace the ring cannot take: its
    /// spans and its root kept as the parts they travel as.
    #[cold]
    fn keep_as_parts(
        &mut self,
        spans: Vec<RawSpan>,
        count: usize,
        root: SpanState,
        end: Instant,
        limit: usize,
        released: &mut Released,
    ) {
        let mut parts = Vec::with_capacity(2);
        if !spans.is_empty() {
            let target = Targets::One(root.line_target());
            parts.push(Kept::new(Message::local_batch(spans, count, target)));
        } else {
            released.buffers.push(spans);
        }
        parts.push(Kept::new(Message::Ended(EndedSpan { state: root, end })));
        self.keep(parts, limit, released);
    }

    /// Takes back the stretch the ring lent if it is at home, unused;
    /// whether no stretch is lent now.
    fn take_back_home(&mut self) -> bool {
        if !line_spans::is_out() {
            if let Some(stretch) = line_spans::take_stretch() {
                if self.ring.lent_here(&stretch) {
                    self.ring.take_back(&stretch);
                }
            }
        }
        !self.ring.is_lent()
    }

    /// A ring not made yet, a limit raised, or a ring to fill again (its
    /// spare slots given back, or its history grown short of the limit):
    /// the ring takes the slots the limit allows, its traces renumbered
    /// with their spans (see [`Ring::take_limit`]). Its held spans fit:
    /// every caller holds less than `limit`, or raises it.
    #[cold]
    fn ring_takes_limit(&mut self, limit: usize) {
        let before = self.ring.bytes();
        let base = self.ring.take_limit(limit);
        self.bytes = self.bytes - before + self.ring.bytes();
        for thrown in &mut self.thrown {
            thrown.first -= base;
        }
    }

    /// Keeps what waited to join the history (written while a harvest
    /// ran); the buffers thrown-away traces leave are let go to `released`.
    /// Inlined with its test for nothing waiting, which is what every
    /// write but the first after a harvest finds.
    /// `here`: as for [`History::keep_thrown`].
    #[inline]
    pub(crate) fn absorb(
        &mut self,
        waiting: &mut Vec<Waiting>,
        limit: usize,
        released: &mut Released,
        here: bool,
    ) {
        if !waiting.is_empty() {
            self.absorb_waiting(waiting, limit, released, here);
        }
    }

    /// [`History::absorb`] once something waits.
    #[cold]
    fn absorb_waiting(
        &mut self,
        waiting: &mut Vec<Waiting>,
        limit: usize,
        released: &mut Released,
        here: bool,
    ) {
        for waiting in waiting.drain(..) {
            match waiting {
                Waiting::Kept(kept) => self.keep([kept], limit, released),
                Waiting::Thrown { spans, count, root, end } => {
                    let mut spans = LineSpans::from(spans);
                    self.keep_thrown(&mut spans, count, root, end, limit, released, here);
                    released.buffers.push(spans.take_vec());
                }
            }
        }
    }

    /// Lets the oldest parts go until it holds at most `limit` bytes; if
    /// only the ring's slots are left and still too many (the limit was
    /// lowered), the ring goes too. A ring whose spare slots (of traces
    /// that went before their turn: parts filed back took their room) pass
    /// an eighth of the limit gives them back.
    fn make_room(&mut self, limit: usize, released: &mut Released, counted: &mut Counted) {
        while self.bytes > limit {
            if limit > 0 && self.ring.spare_bytes() > limit / 8 {
                self.ring_gives_back(limit, released, counted);
            } else if !self.let_oldest_go(released, counted) {
                self.bytes -= std::mem::take(&mut self.ring).bytes();
                break;
            }
        }
    }

    /// The ring gives its spare slots back: the oldest parts go until what
    /// is left, the ring's held spans in memory of their size, fits an
    /// eighth under `limit` (room for the next parts filed back), and the
    /// ring moves there, to fill again from its newest spans. Each time
    /// costs a copy of the held spans, and comes after an eighth of the
    /// limit's worth of traces went early.
    #[cold]
    fn ring_gives_back(&mut self, limit: usize, released: &mut Released, counted: &mut Counted) {
        while self.bytes - self.ring.spare_bytes() > limit - limit / 8
            && self.let_oldest_go(released, counted)
        {}
        self.ring_takes_limit(limit);
    }

    /// Lets every part go, counted as overwritten (its thread's history
    /// made room for younger ones).
    pub(crate) fn let_all_go(&mut self, released: &mut Released) {
        let mut counted = Counted::default();
        self.make_room(0, released, &mut counted);
        counted.publish();
    }

    /// Lets the oldest part go, of the parts filed back and the traces
    /// thrown away (the one whose spans ended first); `false` if there is
    /// none.
    fn let_oldest_go(&mut self, released: &mut Released, counted: &mut Counted) -> bool {
        match self.kept_is_older() || self.thrown.is_empty() {
            true => self.let_kept_go(released, counted),
            false => self.let_thrown_go(released, counted),
        }
    }

    /// Lets go the traces in the ring's next `entries` slots, and before
    /// each any part filed back that ended earlier: oldest first, the ring
    /// then growing into their room (see `keep_thrown`). While spans are
    /// held there, a trace thrown away is held, so the oldest part to go is
    /// one of them or an older part filed back.
    fn free_slots(&mut self, entries: usize, released: &mut Released, counted: &mut Counted) {
        let reused_from = self.ring.reused_from(entries);
        while self.ring.oldest() < reused_from && self.let_oldest_go(released, counted) {}
    }

    /// Whether the oldest part filed back ended before the oldest trace
    /// thrown away.
    fn kept_is_older(&self) -> bool {
        match (self.kept.front(), self.thrown.front()) {
            (Some(kept), Some(thrown)) => kept.end < thrown.end,
            _ => false,
        }
    }

    /// Lets the oldest trace thrown away go; `false` if there is none.
    fn let_thrown_go(&mut self, released: &mut Released, counted: &mut Counted) -> bool {
        let Some(mut gone) = self.thrown.pop_front() else { return false };
        self.bytes -= gone.bytes;
        counted.parts += 1 + u64::from(gone.entries > 0);
        counted.spans += (gone.count + gone.root.target_count()) as u64;
        released.extras.extend(gone.root.take_extra());
        self.ring.let_go(gone.first + gone.entries as u64);
        if gone.owning {
            self.ring.empty(gone.first, gone.entries, |span| released.lists.extend(span.properties));
        }
        true
    }

    /// Lets the oldest part filed back go; `false` if there is none.
    fn let_kept_go(&mut self, released: &mut Released, counted: &mut Counted) -> bool {
        // A root kept right after its trace's local spans goes with them:
        // held alone, it would stand for a whole trace.
        let root_goes_too = match self.kept.front() {
            Some(Kept { message: Message::Parts(Parts { targets: Targets::One(target), .. }), .. }) => self
                .kept
                .get(1)
                .and_then(Kept::root)
                .is_some_and(|root| root.state.trace_id() == target.trace_id()),
            Some(_) => false,
            None => return false,
        };
        // Popped straight into `release`, one at a time: not moved through
        // an iterator first.
        for _ in 0..1 + usize::from(root_goes_too) {
            if let Some(gone) = self.kept.pop_front() {
                self.bytes -= gone.bytes;
                counted.parts += 1;
                counted.spans += gone.message.span_count() as u64;
                released.release(gone.message);
            }
        }
        true
    }
}

/// Parts and spans let go by one call, counted once at its end.
#[derive(Default)]
struct Counted {
    parts: u64,
    spans: u64,
}

impl Counted {
    fn publish(self) {
        if self.parts > 0 {
            stats::count_overwritten_here(self.parts, self.spans);
        }
    }
}

/// Parts and spans made room for since the process started.
pub(crate) fn overwritten() -> (u64, u64) {
    stats::overwritten()
}

/// Every byte a message holds (itself, its spans, and what they own),
/// and when the last of its spans ended.
fn measure(message: &Message) -> (usize, Instant) {
    let measure_spans = |spans: &[RawSpan], slots: usize| {
        let (owned, end) = spans.iter().fold((0, Instant::ZERO), |(owned, end), span| {
            (owned + span.heap_bytes(), end.max(span.begin).max(span.end))
        });
        (slots * std::mem::size_of::<RawSpan>() + owned, end)
    };
    let (bytes, end) = match message {
        Message::Ended(EndedSpan { state, end }) => (state.heap_bytes(), *end),
        Message::Parts(parts) => match &parts.batch {
            Batch::Local { spans, .. } => measure_spans(spans, spans.capacity()),
            Batch::Shared { spans, .. } => measure_spans(spans, spans.len()),
        },
    };
    (std::mem::size_of::<Kept>() + bytes, end)
}

#[cfg(test)]
#[path = "history_tests.rs"]
mod tests;
