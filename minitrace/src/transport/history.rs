//! What a thread keeps of its traces, whatever their fate, while the flight
//! recorder is on: the parts it recorded, as it recorded them (the same
//! messages it sends the collector), in memory bounded by the recorder's
//! bytes per thread. The oldest parts make room, counted. A thread keeps a
//! trace it threw away itself; the collector gives each thread back the
//! parts it received from it, once filed. Both write under the handover's
//! protocol (`transport::handoff`); the collector reads histories during a
//! harvest, to retrieve traces after the fact.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::data::batch::{Batch, Role};
use crate::data::raw_span::RawSpan;
use crate::data::span_state::Extra;
use crate::data::target::Targets;
use crate::transport::message::{EndedSpan, Message, Parts};
use crate::transport::{property_lists, span_buffers, stats};
use crate::util::prefetch;

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

/// One thread's kept parts, oldest first.
#[derive(Default)]
pub(crate) struct History {
    entries: VecDeque<Kept>,
    bytes: usize,
}

impl History {
    pub(crate) fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The bytes it holds.
    pub(crate) fn bytes(&self) -> usize {
        self.bytes
    }

    pub(crate) fn entries(&self) -> impl DoubleEndedIterator<Item = &Kept> {
        self.entries.iter()
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
            self.entries.push_back(entry);
        }
        let (mut parts, mut spans) = (0, 0);
        while self.bytes > limit {
            // A root kept right after its trace's local spans goes with
            // them: held alone, it would stand for a whole trace.
            let root_goes_too = match self.entries.front().map(|oldest| &oldest.message) {
                Some(Message::Parts(Parts { targets: Targets::One(target), .. })) => self
                    .entries
                    .get(1)
                    .and_then(Kept::root)
                    .is_some_and(|root| root.state.trace_id() == target.trace_id()),
                Some(_) => false,
                None => break,
            };
            // Popped straight into `release`, one at a time: not moved
            // through an iterator first.
            for _ in 0..1 + usize::from(root_goes_too) {
                let Some(gone) = self.entries.pop_front() else { break };
                self.bytes -= gone.bytes;
                parts += 1;
                spans += gone.message.span_count() as u64;
                released.release(gone);
            }
        }
        if parts > 0 {
            stats::count_overwritten_here(parts, spans);
            // The next to make room, written a whole history ago: its spans
            // are asked for now, so that recycling them next time (they are
            // read to give back what they own) does not wait on each miss.
            if let Some(Kept { message: Message::Parts(next), .. }) = self.entries.front() {
                if let Batch::Local { spans, .. } = &next.batch {
                    prefetch::items(spans, 16);
                }
            }
        }
    }

    /// Keeps what waited to join the history (written while a harvest ran).
    pub(crate) fn absorb(&mut self, waiting: &mut Vec<Kept>, limit: usize, released: &mut Released) {
        if !waiting.is_empty() {
            self.keep(waiting.drain(..), limit, released);
        }
    }

    /// Forgets everything (the recorder was switched off).
    pub(crate) fn clear(&mut self) -> Vec<Kept> {
        self.bytes = 0;
        self.entries.drain(..).collect()
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
        for spans in self.buffers.drain(..) {
            span_buffers::give_back_locally(spans);
        }
        for extra in self.extras.drain(..) {
            // The box goes to this thread's spares as it is emptied.
            if let (_, Some(list), _) = extra.into_parts() {
                property_lists::give_back_locally(list);
            }
        }
    }

    /// Recycles from the collector's thread: to the shared pools.
    pub(crate) fn recycle_anywhere(mut self) {
        span_buffers::recycle(&mut self.buffers);
        let mut lists: Vec<property_lists::Pooled> = self
            .extras
            .drain(..)
            .filter_map(|extra| extra.into_parts().1)
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

    use minstant::Instant;

    use super::*;
    use crate::data::batch::Role;
    use crate::data::id::{SpanId, TraceId};
    use crate::data::record::PropertyList;
    use crate::data::span_state::SpanState;
    use crate::data::target::{Target, Targets};
    use crate::transport::message::EndedSpan;

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
}
