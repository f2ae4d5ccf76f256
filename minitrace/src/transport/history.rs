//! What a thread keeps of its traces, whatever their fate, while the flight
//! recorder is on, in memory bounded by the recorder's bytes per thread.
//! A trace the thread threw away itself is one entry: its root, and its
//! local spans moved into the history's ring (`transport::span_ring`), their
//! buffer back to the thread's next line. The parts the collector received
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
use crate::transport::message::{EndedSpan, Message, Parts};
use crate::transport::span_ring::Ring;
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
    /// The thread that kept it, once it left that thread's history (the
    /// thread exited); 0 while there.
    pub(crate) thread: u32,
}

impl Kept {
    pub(crate) fn new(message: Message) -> Kept {
        let bytes = message_bytes(&message);
        Kept { message, bytes, thread: 0 }
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
            self.entries.push_back(Entry::Kept(entry));
        }
        let mut counted = Counted::default();
        self.make_room(limit, released, &mut counted);
        counted.publish();
    }

    /// Keeps a trace this thread threw away: `root`, ended at `end`, and
    /// the local spans that waited for it (`count` of them spans, the rest
    /// events), moved out of `spans` into the ring; the buffer, emptied,
    /// is the caller's again. The root given back, nothing taken, if the
    /// ring cannot hold that many spans: the caller keeps them as parts.
    pub(crate) fn keep_thrown(
        &mut self,
        spans: &mut Vec<RawSpan>,
        count: usize,
        root: SpanState,
        end: Instant,
        limit: usize,
        released: &mut Released,
    ) -> Result<(), SpanState> {
        let entries = spans.len();
        let entry = std::mem::size_of::<Entry>();
        let over = self.bytes + entries * std::mem::size_of::<RawSpan>() + entry > limit;
        if !self.ring.fit(entries, limit, over) {
            return Err(root);
        }
        let mut counted = Counted::default();
        // The oldest traces in the slots about to be overwritten go first.
        let reused_from = self.ring.reused_from(entries);
        while self.ring.oldest() < reused_from && self.let_oldest_go(released, &mut counted) {}
        // What the spans own is summed only if one owns anything (rarely).
        let owning = spans.iter().any(RawSpan::owns_heap);
        let span_bytes = match owning {
            true => spans.iter().map(RawSpan::heap_bytes).sum(),
            false => 0,
        };
        let (first, grown) = self.ring.write(spans);
        let bytes = entry + root.heap_bytes() + span_bytes;
        self.bytes += bytes + grown;
        self.entries.push_back(Entry::Thrown(Thrown { root, end, first, entries, count, bytes, owning }));
        self.make_room(limit, released, &mut counted);
        counted.publish();
        Ok(())
    }

    /// Keeps what waited to join the history (written while a harvest ran).
    pub(crate) fn absorb(&mut self, waiting: &mut Vec<Kept>, limit: usize, released: &mut Released) {
        if !waiting.is_empty() {
            self.keep(waiting.drain(..), limit, released);
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

    /// Forgets everything (the recorder was switched off, or the thread
    /// exited), as the parts it was recorded as.
    pub(crate) fn clear(&mut self) -> Vec<Kept> {
        self.bytes = 0;
        let mut ring = std::mem::take(&mut self.ring);
        let mut parts = Vec::with_capacity(self.entries.len());
        for entry in self.entries.drain(..) {
            match entry {
                Entry::Kept(kept) => parts.push(kept),
                Entry::Thrown(Thrown { root, end, first, entries, count, .. }) => {
                    if entries > 0 {
                        let mut spans = Vec::with_capacity(entries);
                        ring.empty(first, entries, |span| spans.push(span));
                        let target = Targets::One(root.line_target());
                        parts.push(Kept::new(Message::local_batch(spans, count, target)));
                    }
                    parts.push(Kept::new(Message::Ended(EndedSpan { state: root, end })));
                }
            }
        }
        parts
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

    /// Recycles on this thread: the buffers serve its next lines, the lists
    /// and boxes its next properties. Left empty, its capacity kept for
    /// next time.
    pub(crate) fn recycle_here(&mut self) {
        if self.buffers.is_empty() && self.extras.is_empty() && self.lists.is_empty() {
            return;
        }
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
mod tests {
    use std::borrow::Cow;

    use super::*;
    use crate::data::id::{SpanId, TraceId};
    use crate::data::raw_span::LINE_PARENT;

    fn list() -> PropertyList {
        Box::new(vec![("k".into(), "v".into())])
    }

    fn target() -> Targets {
        Targets::One(Target::new(TraceId(7), SpanId(1), 9))
    }

    #[test]
    fn parts_that_make_room_give_back_their_buffers_and_their_root_s_list() {
        let mut spans = Vec::with_capacity(4);
        for id in 2..4 {
            let mut span = RawSpan::begin(SpanId(id), SpanId(1), Cow::Borrowed("step"), Instant::ZERO);
            assert!(span.add_properties(list()).is_none());
            spans.push(span);
        }
        let buffer = spans.as_ptr();
        let mut root = SpanState::new("root".into(), target(), Role::Root, Instant::ZERO);
        let root_list = list();
        let root_list_at = &*root_list as *const Vec<_>;
        assert!(root.add_properties(root_list).is_none());
        let shared = Message::new(
            Batch::Shared { spans: std::sync::Arc::new(Vec::new()), ids: crate::data::batch::IdMap::Keep },
            target(),
            Role::Child,
            0,
        );
        let parts = [
            Kept::new(Message::local_batch(spans, 2, target())),
            Kept::new(Message::Ended(EndedSpan { state: root, end: Instant::ZERO })),
            Kept::new(shared),
        ];
        let mut history = History::default();
        let mut released = Released::default();
        history.keep(parts, usize::MAX, &mut released);
        assert!(released.buffers.is_empty() && released.extras.is_empty());
        // A limit of nothing: every part makes room.
        history.keep([], 0, &mut released);
        assert!(history.is_empty() && history.bytes() == 0);
        // The local batch's buffer, its spans' lists still in it (given back
        // with the buffer), and the root's box, its list in it; the shared
        // batch, nothing.
        assert_eq!(released.buffers.len(), 1);
        assert_eq!(released.buffers[0].as_ptr(), buffer);
        assert!(released.buffers[0].iter().all(|span| span.properties.is_some()));
        assert_eq!(released.extras.len(), 1);
        let (_, list, _) = released.extras.pop().unwrap().into_parts();
        assert_eq!(list.as_deref().map(|list| list as *const Vec<_>), Some(root_list_at));
        released.recycle_here();
        assert!(released.buffers.is_empty() && released.extras.is_empty());
    }

    /// A root of trace `trace` on this thread, and its local spans: `n`
    /// spans, the first with an owned name and properties if `owning`.
    fn thrown(trace: u128, n: u64, owning: bool) -> (SpanState, Vec<RawSpan>) {
        let root = SpanState::new(
            "root".into(),
            Targets::One(Target::new(TraceId(trace), SpanId(0), trace as u64)),
            Role::Root,
            Instant::ZERO,
        );
        let spans = (0..n)
            .map(|index| {
                let name = match owning && index == 0 {
                    true => Cow::Owned(format!("owned {trace}")),
                    false => Cow::Borrowed("step"),
                };
                let mut span =
                    RawSpan::begin(SpanId(trace as u64 * 100 + index + 1), LINE_PARENT, name, Instant::ZERO);
                if owning && index == 0 {
                    assert!(span.add_properties(list()).is_none());
                }
                span
            })
            .collect();
        (root, spans)
    }

    /// The traces a history holds, oldest first: each root's trace, and its
    /// spans' ids, in order, read back from the ring.
    fn held(history: &History) -> Vec<(u128, Vec<u64>)> {
        history
            .parts()
            .filter_map(|held| match held {
                Held::Thrown(thrown, (head, tail)) => {
                    Some((thrown.root.trace_id().0, head.iter().chain(tail).map(|span| span.id.0).collect()))
                }
                Held::Kept(_) => None,
            })
            .collect()
    }

    #[test]
    fn the_ring_keeps_the_newest_traces_whole_as_it_wraps_and_gives_back_what_they_owned() {
        let limit = 2048;
        let mut history = History::default();
        let mut released = Released::default();
        for trace in 1..=10u128 {
            let (root, mut spans) = thrown(trace, 3 + (trace % 2) as u64, trace % 3 == 0);
            let (buffer, count) = (spans.as_ptr(), spans.len());
            assert!(history
                .keep_thrown(&mut spans, count, root, Instant::ZERO, limit, &mut released)
                .is_ok());
            // The buffer is emptied, not taken: the caller's next line's.
            assert!(spans.is_empty() && spans.as_ptr() == buffer);
            assert!(history.bytes() <= limit);
        }
        assert!(history.ring.slots() < limit / std::mem::size_of::<RawSpan>(), "it wrapped");
        // The newest traces, whole and in order, whichever way they wrap.
        let kept = held(&history);
        assert!(kept.len() >= 3, "{kept:?}");
        let newest: Vec<u128> = kept.iter().map(|(trace, _)| *trace).collect();
        assert_eq!(newest, ((11 - kept.len() as u128)..=10).collect::<Vec<_>>());
        for (trace, ids) in &kept {
            let n = 3 + (trace % 2) as u64;
            assert_eq!(ids, &(0..n).map(|index| *trace as u64 * 100 + index + 1).collect::<Vec<_>>());
        }
        // The owning traces that went gave their span's list back.
        let gone_owning = [3, 6, 9].iter().filter(|trace| !newest.contains(trace)).count();
        assert_eq!(released.lists.len(), gone_owning);
        // Everything held goes back as the parts it was recorded as, owned
        // names and lists with them.
        let parts = history.clear();
        assert_eq!(history.bytes(), 0);
        assert_eq!(parts.len(), 2 * kept.len());
        for pair in parts.chunks(2) {
            let trace = pair[1].root().expect("the root comes second").state.trace_id().0;
            match &pair[0].message {
                Message::Parts(Parts { batch: Batch::Local { spans, .. }, targets, .. }) => {
                    assert_eq!(targets.as_slice()[0].trace_id().0, trace);
                    assert_eq!(spans[0].properties.is_some(), trace % 3 == 0);
                    if trace % 3 == 0 {
                        assert_eq!(spans[0].name, format!("owned {trace}"));
                    }
                }
                _ => panic!("the spans come first"),
            }
        }
    }

    #[test]
    fn a_trace_larger_than_the_ring_is_given_back_and_a_lower_limit_lets_the_ring_go() {
        let slot = std::mem::size_of::<RawSpan>();
        let limit = 20 * slot;
        let mut history = History::default();
        let mut released = Released::default();
        let (root, mut spans) = thrown(1, 21, false);
        let root =
            history.keep_thrown(&mut spans, 21, root, Instant::ZERO, limit, &mut released).unwrap_err();
        assert_eq!(spans.len(), 21, "nothing taken");
        assert_eq!(root.trace_id(), TraceId(1));
        let (root, mut spans) = thrown(2, 8, true);
        assert!(history.keep_thrown(&mut spans, 8, root, Instant::ZERO, limit, &mut released).is_ok());
        assert_eq!(held(&history).len(), 1);
        // A lower limit: the trace goes, its list given back, and the
        // ring's slots with it.
        history.keep([], slot, &mut released);
        assert!(history.is_empty() && history.bytes() == 0);
        assert_eq!(released.lists.len(), 1);
        assert_eq!(history.ring.bytes(), 0);
    }

    #[test]
    fn parts_kept_between_thrown_traces_go_oldest_first_with_them() {
        let limit = 2048;
        let mut history = History::default();
        let mut released = Released::default();
        let mut all = Vec::new();
        for trace in 1..=12u128 {
            let (root, mut spans) = thrown(trace, 4, false);
            assert!(history.keep_thrown(&mut spans, 4, root, Instant::ZERO, limit, &mut released).is_ok());
            // Parts kept while a harvest ran, between the traces.
            let (root, _) = thrown(100 + trace, 0, false);
            let ended = Kept::new(Message::Ended(EndedSpan { state: root, end: Instant::ZERO }));
            history.keep([ended], limit, &mut released);
            all.extend([trace, 100 + trace]);
            assert!(history.bytes() <= limit);
            // Oldest first: whatever is held is a suffix of what was kept.
            let roots: Vec<u128> =
                history.parts().filter_map(|held| held.root().map(|root| root.trace_id().0)).collect();
            assert!(roots.len() >= all.len().min(4), "{roots:?}");
            assert_eq!(roots, all[all.len() - roots.len()..]);
        }
    }
}
