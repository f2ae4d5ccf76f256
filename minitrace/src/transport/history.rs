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
use crate::data::target::Targets;
use crate::transport::message::{EndedSpan, Message, Parts};
use crate::transport::{span_buffers, stats};
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

    /// Keeps `entries`; moves what made room for them (the oldest parts)
    /// into `evicted`, for the caller to recycle outside the handover's
    /// write. What made room is counted in the counters of the thread that
    /// runs this (no shared read-modify-write on a traced thread).
    pub(crate) fn keep(
        &mut self,
        entries: impl IntoIterator<Item = Kept>,
        limit: usize,
        evicted: &mut Vec<Kept>,
    ) {
        for entry in entries {
            self.bytes += entry.bytes;
            self.entries.push_back(entry);
        }
        let (mut parts, mut spans) = (0, 0);
        while self.bytes > limit {
            let Some(oldest) = self.entries.pop_front() else { break };
            // A root kept right after its trace's local spans goes with
            // them: held alone, it would stand for a whole trace.
            let root_goes_too = match &oldest.message {
                Message::Parts(Parts { targets: Targets::One(target), .. }) => self
                    .entries
                    .front()
                    .and_then(Kept::root)
                    .is_some_and(|root| root.state.trace_id() == target.trace_id()),
                _ => false,
            };
            for gone in
                std::iter::once(oldest).chain(root_goes_too.then(|| self.entries.pop_front()).flatten())
            {
                self.bytes -= gone.bytes;
                parts += 1;
                spans += gone.message.span_count() as u64;
                evicted.push(gone);
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
    pub(crate) fn absorb(&mut self, waiting: &mut Vec<Kept>, limit: usize, evicted: &mut Vec<Kept>) {
        if !waiting.is_empty() {
            self.keep(waiting.drain(..), limit, evicted);
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

/// Parts made room for on their own thread: their span buffers serve its
/// next lines. `evicted` is left empty, its capacity kept for next time.
pub(crate) fn recycle_here(evicted: &mut Vec<Kept>) {
    for kept in evicted.drain(..) {
        if let Message::Parts(parts) = kept.message {
            if let Batch::Local { spans, .. } = parts.batch {
                span_buffers::give_back_locally(spans);
            }
        }
    }
}

/// Parts made room for on the collector's thread: their span buffers go to
/// the shared pool.
pub(crate) fn recycle_anywhere(evicted: Vec<Kept>) {
    let mut buffers: Vec<Vec<RawSpan>> = evicted
        .into_iter()
        .filter_map(|kept| match kept.message {
            Message::Parts(parts) => match parts.batch {
                Batch::Local { spans, .. } => Some(spans),
                Batch::Shared { .. } => None,
            },
            Message::Ended(_) => None,
        })
        .collect();
    span_buffers::recycle(&mut buffers);
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
