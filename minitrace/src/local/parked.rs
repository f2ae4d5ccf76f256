//! Local spans waiting on their thread for their root's end. A local parent
//! guard of a root started on this thread leaves its batch here instead of
//! sending it: when the root then ends here, as a request's root usually
//! does right after its guard, the whole trace's fate is decided on this
//! thread (see `span::fate`), and a trace thrown away never leaves it.
//!
//! One trace waits at a time. Anything that would need a second slot sends
//! the waiting batch to the collector instead, marked as escaped, so its
//! root's end tells the collector its fate: parking is only ever a shortcut.
//! So does the thread's exit, [`flush`](crate::flush) on this thread, and a
//! batch grown past [`MAX_PARKED`] (a long-lived root whose local parent is
//! set once per item of a loop): what waits is bounded.
//!
//! Under `max_spans_per_trace`, the batches of successive guards are judged
//! one by one at the collector, as minitrace 0.6 judged them: the batch
//! remembers where each guard's spans start, and goes as one message per
//! guard.

use std::cell::RefCell;
use std::mem::ManuallyDrop;

use crate::data::escape;
use crate::data::target::{Target, Targets};
use crate::transport::line_spans::LineSpans;
use crate::transport::message::Message;
use crate::transport::{gate, queue, span_buffers};

/// Entries (spans and events) a waiting batch may hold: past this, it goes
/// to the collector (256 KiB of raw spans).
pub(crate) const MAX_PARKED: usize = 1 << 12;

/// A trace's local spans, under one target.
pub(crate) struct Parked {
    pub(crate) target: Target,
    pub(crate) spans: LineSpans,
    /// Entries that are spans (not events).
    pub(crate) count: usize,
    /// Under a span-count limit only: where each guard's batch after the
    /// first starts, as (entry index, spans before it).
    cuts: Vec<(usize, usize)>,
}

impl Parked {
    /// The batch as one message (for the flight recorder, which keeps it
    /// as it was recorded).
    pub(crate) fn into_message(self) -> Message {
        Message::local_batch(self.spans.into_vec(), self.count, Targets::One(self.target))
    }

    /// The batch as the messages its guards would have sent: one, unless a
    /// span-count limit is set and several guards added to it. In the order
    /// they were recorded, which is the order the limit judges them in.
    pub(crate) fn submit(mut self) {
        let target = Targets::One(self.target);
        let mut spans = self.spans.into_vec();
        let mut later = Vec::with_capacity(self.cuts.len());
        while let Some((at, spans_before)) = self.cuts.pop() {
            let mut tail = span_buffers::take();
            tail.extend(spans.drain(at..));
            later.push((tail, self.count - spans_before));
            self.count = spans_before;
        }
        queue::submit(Message::local_batch(spans, self.count, target.clone()));
        for (spans, count) in later.into_iter().rev() {
            queue::submit(Message::local_batch(spans, count, target.clone()));
        }
    }
}

thread_local! {
    // Not dropped with the thread-local: the thread's exit sends what waits
    // (see `local::stack`), and a destructor would make every access
    // check that the thread is alive.
    static PARKED: RefCell<ManuallyDrop<Option<Parked>>> = const { RefCell::new(ManuallyDrop::new(None)) };
}

/// Keeps a batch for its root's end on this thread. A batch of another
/// trace, or under another parent, already waiting is sent on first.
#[inline]
pub(crate) fn park(target: Target, spans: LineSpans, count: usize) {
    // What is left to send: the batch, if it could not wait, or the one it displaced.
    let mut unparked = Some(Parked { target, spans, count, cuts: Vec::new() });
    let _ = PARKED.try_with(|slot| {
        let Ok(mut slot) = slot.try_borrow_mut() else { return };
        // A batch larger than the bound alone goes on at once.
        let Some(batch) = unparked.take_if(|batch| batch.spans.len() <= MAX_PARKED) else { return };
        match slot.as_mut() {
            // Another poll of the same future, or another guard of the same
            // span, with room for it.
            Some(parked)
                if parked.target == batch.target && parked.spans.len() + batch.spans.len() <= MAX_PARKED =>
            {
                if gate::limits_trace_size() {
                    parked.cuts.push((parked.spans.len(), parked.count));
                }
                let mut spans = parked.spans.take_vec();
                spans.extend(batch.spans.into_vec());
                parked.spans = LineSpans::from(spans);
                parked.count += batch.count;
            }
            _ => unparked = slot.replace(batch),
        }
    });
    if let Some(unparked) = unparked {
        send(unparked);
    }
}

/// Takes what waits for `collect_id`'s root.
#[inline]
pub(crate) fn take(collect_id: u64) -> Option<Parked> {
    PARKED
        .try_with(|slot| {
            let mut slot = slot.try_borrow_mut().ok()?;
            match slot.as_ref() {
                Some(parked) if parked.target.collect_id == collect_id => slot.take(),
                _ => None,
            }
        })
        .ok()
        .flatten()
}

/// Sends what waits to the collector: the thread exits, or everything
/// finished so far is to be reported.
pub(crate) fn send_waiting() {
    if let Some(parked) = PARKED.try_with(|slot| slot.try_borrow_mut().ok()?.take()).ok().flatten() {
        send(parked);
    }
}

fn send(parked: Parked) {
    escape::mark(parked.target.collect_id);
    parked.submit();
}
