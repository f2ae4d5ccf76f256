//! Local spans waiting on their thread for their root's end. A local parent
//! guard of a root started on this thread leaves its batch here instead of
//! sending it: when the root then ends here, as a request's root usually
//! does right after its guard, the whole trace's fate is decided on this
//! thread (see `span::fate`), and a trace thrown away never leaves it.
//!
//! One trace waits at a time. Anything that would need a second slot sends
//! the waiting batch to the collector instead, marked as escaped, so its
//! root's end tells the collector its fate: parking is only ever a shortcut.
//! So does the thread's exit, and [`flush`](crate::flush) on this thread.

use std::cell::RefCell;
use std::mem::ManuallyDrop;

use crate::data::escape;
use crate::data::raw_span::RawSpan;
use crate::data::target::{Target, Targets};
use crate::transport::message::Message;
use crate::transport::queue;

/// A trace's local spans, under one target.
pub(crate) struct Parked {
    pub(crate) target: Target,
    pub(crate) spans: Vec<RawSpan>,
    /// Entries that are spans (not events).
    pub(crate) count: usize,
}

impl Parked {
    /// The batch as the message a guard would have sent.
    pub(crate) fn into_message(self) -> Message {
        Message::local_batch(self.spans, self.count, Targets::One(self.target))
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
pub(crate) fn park(target: Target, spans: Vec<RawSpan>, count: usize) {
    // What is left to send: the batch, if it could not wait, or the one it displaced.
    let mut unparked = Some(Parked { target, spans, count });
    let _ = PARKED.try_with(|slot| {
        let Ok(mut slot) = slot.try_borrow_mut() else { return };
        let Some(batch) = unparked.take() else { return };
        match slot.as_mut() {
            // Another poll of the same future, or another guard of the same span.
            Some(parked) if parked.target == batch.target => {
                parked.spans.extend(batch.spans);
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
    queue::submit(parked.into_message());
}
