use std::marker::PhantomData;

use crate::local::stack;
use crate::util::recording::Recording;

/// Makes a [`Span`](crate::Span) the thread's local parent while alive; see
/// [`Span::set_local_parent`](crate::Span::set_local_parent). Dropping it sends the local spans recorded
/// under it to the collector.
///
/// ```
/// use minitrace::prelude::*;
/// let root = Span::root("request", SpanContext::random());
/// let guard = root.set_local_parent();
/// drop(guard);
/// ```
#[must_use]
#[derive(Default, Debug)]
pub struct LocalParentGuard {
    pub(crate) epoch: Recording<u64>,
    pub(crate) _not_send: PhantomData<*const ()>,
}

impl LocalParentGuard {
    /// Drops the guard; the local spans it recorded go on now rather than
    /// wait on this thread for their root (see `InSpan`).
    pub(crate) fn drop_unparked(mut self) {
        if let Some(epoch) = self.epoch.take() {
            stack::close_line_unparked(epoch);
        }
    }
}

impl Drop for LocalParentGuard {
    // Inlined: a no-op guard's drop is one test in the caller.
    #[inline(always)]
    fn drop(&mut self) {
        if let Some(epoch) = self.epoch.take() {
            stack::close_line(epoch);
        }
    }
}
