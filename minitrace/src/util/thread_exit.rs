//! What a thread leaves behind when it exits. Its span stack and its end of
//! the collector's ring are thread-locals without destructors, so that the
//! hot path reaches them as plain thread-local accesses, with no check that
//! the thread is still alive. This one thread-local has the destructor for
//! both, and runs their closing in order: local spans still open are closed
//! and sent into the ring, so are those waiting for their root, then the
//! ring is closed.

use crate::collector::queue;
use crate::local::{parked, stack};

thread_local! {
    static AT_EXIT: AtExit = const { AtExit };
}

struct AtExit;

impl Drop for AtExit {
    fn drop(&mut self) {
        stack::close_all_lines();
        parked::send_waiting();
        queue::close_ring();
    }
}

/// Makes sure the thread's exit will close what it opened: the first call
/// on a thread registers that. `false` once the thread's exit has run it
/// (in a later thread-local destructor): what is opened then would never
/// be closed, so the caller must not open it.
#[inline]
pub(crate) fn armed() -> bool {
    AT_EXIT.try_with(|_| ()).is_ok()
}
