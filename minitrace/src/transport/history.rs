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
use crate::data::record::PropertyList;
use crate::data::span_state::{Extra, SpanState};
use crate::data::target::{Target, Targets};
use crate::transport::line_spans::{self, LineSpans};
use crate::transport::message::{EndedSpan, Message, Parts};
use crate::transport::span_ring::{Ring, Stretch, STRETCH};
use crate::transport::{property_lists, span_buffers, stats};

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

/// A part of a trace kept in a history, and the bytes it holds.
pub(crate) struct Kept {
    pub(crate) message: Message,
    pub(crate) bytes: usize,
}

impl Kept {
    pub(crate) fn new(message: Message) -> Kept {
        let bytes = message_bytes(&message);
        Kept { message, bytes }
    }

    /// A root's span, if this part is one.
    pub(crate) fn root(&self) -> Option<&EndedSpan> {
        match &self.message {
            Message::Ended(ended) if ended.state.role() != Role::Child => Some(ended),
            _ => None,
        }
    }
}

/// One thread's kept parts, oldest first: parts as they travelled
/// ([`Kept`]), and the traces this thread threw away itself ([`Thrown`]),
/// whose local spans are moved into the history's ring of spans. The ring
/// is written in order and overwritten in place: the thread's span buffer
/// goes straight back to its next request, still in cache, and the ring's
/// memory is only ever written in sequence (PERFORMANCE.md, "The flight
/// recorder").
#[derive(Default)]
pub(crate) struct History {
    entries: VecDeque<Entry>,
    ring: Ring,
    bytes: usize,
    /// Of `bytes`, the [`Kept`] parts': they come in bursts (a harvest's
    /// worth at once), and do not size the ring.
    kept_bytes: usize,
}

enum Entry {
    Kept(Kept),
    Thrown(Thrown),
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
        self.entries.is_empty()
    }

    /// The bytes it holds.
    pub(crate) fn bytes(&self) -> usize {
        self.bytes
    }

    /// Every part, oldest first.
    pub(crate) fn parts(&self) -> impl Iterator<Item = Held<'_>> {
        self.entries.iter().map(|entry| match entry {
            Entry::Kept(kept) => Held::Kept(kept),
            Entry::Thrown(thrown) => Held::Thrown(thrown, self.ring.runs(thrown.first, thrown.entries)),
        })
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
            self.kept_bytes += entry.bytes;
            self.entries.push_back(Entry::Kept(entry));
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
        if limit > self.ring.limit() {
            self.ring_takes_limit(limit);
        }
        let entries = spans.len();
        let entry = std::mem::size_of::<Entry>();
        let lent_here = |slot: &mut Option<Stretch>| slot.as_ref().is_some_and(|it| self.ring.lent_here(it));
        let in_place = spans.is_lent() && line_spans::with_stretch(lent_here) == Some(true);
        if !in_place {
            if spans.is_lent() {
                // Lent by a ring since grown or let go: copied out, and that
                // stretch goes (after the copy: it keeps the memory).
                *spans = LineSpans::from(spans.take_vec());
                drop(line_spans::take_stretch());
            }
            let over =
                self.bytes - self.kept_bytes + entries * std::mem::size_of::<RawSpan>() + entry > limit;
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
        let thrown = Entry::Thrown(Thrown { root, end, first, entries, count, bytes, owning });
        let mut counted = Counted::default();
        // The oldest traces in the slots about to be overwritten go first
        // (those of a stretch went when it was lent).
        let reused_from = self.ring.reused_from(entries);
        while self.ring.oldest() < reused_from && self.let_oldest_go(released, &mut counted) {}
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
        let (Some(grown), Entry::Thrown(_)) = (grown, &thrown) else {
            if let Entry::Thrown(thrown) = thrown {
                self.keep_as_parts(spans.take_vec(), count, thrown.root, end, limit, released);
            }
            return counted.publish();
        };
        self.bytes += bytes + grown;
        self.entries.push_back(thrown);
        self.make_room(limit, released, &mut counted);
        if here && self.ring.lendable() && !line_spans::is_out() {
            // The traces in the next stretch go now, before its thread writes there.
            let reused_from = self.ring.reused_from(STRETCH);
            while self.ring.oldest() < reused_from && self.let_oldest_go(released, &mut counted) {}
            line_spans::aim_home(|slot| self.ring.lend(slot));
        }
        counted.publish();
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

    /// A ring not made yet, or a limit raised: the ring takes the slots the
    /// limit allows, its traces renumbered with their spans (see
    /// [`Ring::take_limit`]).
    #[cold]
    fn ring_takes_limit(&mut self, limit: usize) {
        let before = self.ring.bytes();
        let base = self.ring.take_limit(limit);
        self.bytes = self.bytes - before + self.ring.bytes();
        for entry in &mut self.entries {
            if let Entry::Thrown(thrown) = entry {
                thrown.first -= base;
            }
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
    /// lowered), the ring goes too.
    fn make_room(&mut self, limit: usize, released: &mut Released, counted: &mut Counted) {
        while self.bytes > limit {
            if !self.let_oldest_go(released, counted) {
                self.bytes -= std::mem::take(&mut self.ring).bytes();
                break;
            }
        }
    }

    /// Lets the oldest part go; `false` if there is none.
    fn let_oldest_go(&mut self, released: &mut Released, counted: &mut Counted) -> bool {
        // A root kept right after its trace's local spans goes with them:
        // held alone, it would stand for a whole trace.
        let root_goes_too = match self.entries.front() {
            Some(Entry::Kept(Kept {
                message: Message::Parts(Parts { targets: Targets::One(target), .. }),
                ..
            })) => match self.entries.get(1) {
                Some(Entry::Kept(next)) => {
                    next.root().is_some_and(|root| root.state.trace_id() == target.trace_id())
                }
                _ => false,
            },
            Some(_) => false,
            None => return false,
        };
        // Popped straight into `release`, one at a time: not moved through
        // an iterator first.
        for _ in 0..1 + usize::from(root_goes_too) {
            match self.entries.pop_front() {
                Some(Entry::Kept(gone)) => {
                    self.bytes -= gone.bytes;
                    self.kept_bytes -= gone.bytes;
                    counted.parts += 1;
                    counted.spans += gone.message.span_count() as u64;
                    released.release(gone);
                }
                Some(Entry::Thrown(mut gone)) => {
                    self.bytes -= gone.bytes;
                    counted.parts += 1 + u64::from(gone.entries > 0);
                    counted.spans += (gone.count + gone.root.target_count()) as u64;
                    released.extras.extend(gone.root.take_extra());
                    self.ring.let_go(gone.first + gone.entries as u64);
                    if gone.owning {
                        self.ring
                            .empty(gone.first, gone.entries, |span| released.lists.extend(span.properties));
                    }
                }
                None => break,
            }
        }
        true
    }
}

/// The histories of threads that exited, kept whole (ring and all: moved,
/// not converted) until they take more than their bound, oldest thread
/// first. Requests find their traces here as in a live thread's history.
#[derive(Default)]
pub(crate) struct Exited {
    histories: VecDeque<(u32, History)>,
    bytes: usize,
}

impl Exited {
    /// Each exited thread's number and history, oldest first.
    pub(crate) fn histories(&self) -> impl Iterator<Item = (u32, &History)> {
        self.histories.iter().map(|(thread, history)| (*thread, history))
    }

    /// Takes `history`, the memory of the thread numbered `thread`, which
    /// exited; left empty there.
    pub(crate) fn take(&mut self, thread: u32, history: &mut History) {
        if !history.is_empty() {
            self.bytes += history.bytes;
            self.histories.push_back((thread, std::mem::take(history)));
        }
    }

    /// Keeps parts filed from the thread numbered `thread` after it exited,
    /// with its history if that is still here.
    pub(crate) fn keep(&mut self, thread: u32, parts: Vec<Kept>, limit: usize, released: &mut Released) {
        let at = self.histories.iter().rposition(|(of, _)| *of == thread);
        let history = match at {
            Some(at) => &mut self.histories[at].1,
            None => {
                self.histories.push_back((thread, History::default()));
                &mut self.histories.back_mut().expect("just pushed").1
            }
        };
        self.bytes -= history.bytes;
        history.keep(parts, limit, released);
        self.bytes += history.bytes;
    }

    /// Lets the oldest threads' histories go until it holds at most
    /// `limit` bytes; each goes whole, counted as overwritten.
    pub(crate) fn make_room(&mut self, limit: usize, released: &mut Released) {
        while self.bytes > limit {
            let Some((_, mut gone)) = self.histories.pop_front() else { break };
            self.bytes -= gone.bytes;
            let mut counted = Counted::default();
            gone.make_room(0, released, &mut counted);
            counted.publish();
        }
    }

    /// Forgets every history (the recorder was switched off).
    pub(crate) fn forget(&mut self) {
        (self.histories, self.bytes) = (VecDeque::new(), 0);
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

/// What parts let go still hold that serves again: span buffers (their
/// spans' property lists in them), and roots' boxes of rare fields (their
/// lists in them). Moved here in a word a part, where a part is ~100 bytes;
/// taken apart and recycled outside the handover's write, which stays a
/// few moves long.
#[derive(Default)]
pub(crate) struct Released {
    buffers: Vec<Vec<RawSpan>>,
    // The boxes themselves are what is recycled: the allocations.
    #[allow(clippy::vec_box)]
    extras: Vec<Box<Extra>>,
    /// The property lists of spans let go from a ring.
    lists: Vec<PropertyList>,
}

impl Released {
    /// Lets a part go: what serves again is kept here, the rest dropped
    /// where it is.
    pub(crate) fn release(&mut self, kept: Kept) {
        match kept.message {
            Message::Parts(Parts { batch: Batch::Local { spans, .. }, .. }) => self.buffers.push(spans),
            Message::Ended(EndedSpan { mut state, .. }) => self.extras.extend(state.take_extra()),
            Message::Parts(_) => {}
        }
    }

    /// Lets go what waited to join a history (the recorder was switched
    /// off meanwhile).
    pub(crate) fn release_waiting(&mut self, waiting: Waiting) {
        match waiting {
            Waiting::Kept(kept) => self.release(kept),
            Waiting::Thrown { spans, mut root, .. } => {
                self.buffers.push(spans);
                self.extras.extend(root.take_extra());
            }
        }
    }

    /// Recycles on this thread: the buffers serve its next lines, the lists
    /// and boxes its next properties. Left empty, its capacity kept for
    /// next time. Inlined with its test for nothing to recycle (most
    /// calls).
    #[inline]
    pub(crate) fn recycle_here(&mut self) {
        if !(self.buffers.is_empty() && self.extras.is_empty() && self.lists.is_empty()) {
            self.recycle_all_here();
        }
    }

    /// [`Released::recycle_here`] once something is to be recycled.
    fn recycle_all_here(&mut self) {
        for spans in self.buffers.drain(..) {
            span_buffers::give_back_locally(spans);
        }
        for extra in self.extras.drain(..) {
            // The box goes to this thread's spares as it is emptied.
            if let (_, Some(list), _) = extra.into_parts() {
                property_lists::give_back_locally(list);
            }
        }
        for list in self.lists.drain(..) {
            property_lists::give_back_locally(list);
        }
    }

    /// Recycles from the collector's thread: to the shared pools.
    pub(crate) fn recycle_anywhere(mut self) {
        span_buffers::recycle(&mut self.buffers);
        let mut lists: Vec<property_lists::Pooled> = self
            .extras
            .drain(..)
            .filter_map(|extra| extra.into_parts().1)
            .chain(self.lists.drain(..))
            .map(property_lists::Pooled::new)
            .collect();
        property_lists::recycle(&mut lists);
    }
}

/// Every byte a message holds: itself, its spans, and what they own.
fn message_bytes(message: &Message) -> usize {
    let span = std::mem::size_of::<RawSpan>();
    std::mem::size_of::<Kept>()
        + match message {
            Message::Ended(EndedSpan { state, .. }) => state.heap_bytes(),
            Message::Parts(parts) => match &parts.batch {
                Batch::Local { spans, .. } => {
                    spans.capacity() * span + spans.iter().map(RawSpan::heap_bytes).sum::<usize>()
                }
                Batch::Shared { spans, .. } => {
                    spans.len() * span + spans.iter().map(RawSpan::heap_bytes).sum::<usize>()
                }
            },
        }
}

#[cfg(test)]
#[path = "history_tests.rs"]
mod tests;
