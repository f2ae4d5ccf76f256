//! What the parts a history lets go (`transport::history`) still hold
//! that serves again, gathered during the handover's write and recycled
//! outside it.

use crate::data::batch::Batch;
use crate::data::raw_span::RawSpan;
use crate::data::record::PropertyList;
use crate::data::span_state::Extra;
use crate::transport::message::{EndedSpan, Message, Parts};
use crate::transport::{property_lists, span_buffers};

/// What parts let go still hold that serves again: span buffers (their
/// spans' property lists in them), and roots' boxes of rare fields (their
/// lists in them). Moved here in a word a part, where a part is ~100 bytes;
/// taken apart and recycled outside the handover's write, which stays a
/// few moves long.
#[derive(Default)]
pub(crate) struct Released {
    /// Span buffers, their spans' property lists in them.
    pub(crate) buffers: Vec<Vec<RawSpan>>,
    /// Roots' boxes of rare fields (the boxes themselves are what is
    /// recycled: the allocations).
    #[allow(clippy::vec_box)]
    pub(crate) extras: Vec<Box<Extra>>,
    /// The property lists of spans let go from a ring.
    pub(crate) lists: Vec<PropertyList>,
}

impl Released {
    /// Lets a part go: what serves again is kept here, the rest dropped
    /// where it is.
    pub(crate) fn release(&mut self, message: Message) {
        match message {
            Message::Parts(Parts { batch: Batch::Local { spans, .. }, .. }) => self.buffers.push(spans),
            Message::Ended(EndedSpan { mut state, .. }) => self.extras.extend(state.take_extra()),
            Message::Parts(_) => {}
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
