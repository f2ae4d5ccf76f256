//! The recorded spans entered on this thread, each with the guard that
//! makes it the thread's local parent until it is exited.

use std::cell::RefCell;

use minitrace::local::LocalParentGuard;
use tracing_core::span::Id;

thread_local! {
    /// Innermost last. A span entered twice (re-entrantly) is here twice.
    static ENTERED: RefCell<Vec<(Id, LocalParentGuard)>> = const { RefCell::new(Vec::new()) };
}

/// Keeps `guard` until `id` is exited on this thread.
pub(crate) fn push(id: Id, guard: LocalParentGuard) {
    // After the thread's destructors ran, the guard is dropped at once:
    // there is no local parent to keep then.
    let _ = ENTERED.try_with(|entered| entered.borrow_mut().push((id, guard)));
}

/// Drops the guard of the innermost entry of `id`, if it has one.
pub(crate) fn pop(id: &Id) {
    let guard = ENTERED
        .try_with(|entered| {
            let mut entered = entered.borrow_mut();
            // Exits come in the reverse order of enters, save for guards
            // the user dropped out of order: searched from the top.
            let position = entered.iter().rposition(|(entered, _)| entered == id)?;
            Some(entered.remove(position).1)
        })
        .ok()
        .flatten();
    // Dropped outside the borrow: closing a line is core work, kept apart.
    drop(guard);
}
