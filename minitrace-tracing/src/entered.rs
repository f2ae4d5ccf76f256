//! The recorded spans entered on this thread, each with the guard that
//! makes it the thread's local parent until it is exited.

use std::cell::RefCell;

use minitrace::collector::SpanId;
use minitrace::local::LocalParentGuard;
use tracing_core::span::Id;

/// A recorded span entered on this thread.
struct Entered {
    id: Id,
    span_id: SpanId,
    guard: LocalParentGuard,
}

thread_local! {
    /// Innermost last. A span entered twice (re-entrantly) is here twice.
    static ENTERED: RefCell<Vec<Entered>> = const { RefCell::new(Vec::new()) };
}

/// Keeps `guard`, which makes minitrace span `span_id` the local parent,
/// until `id` is exited on this thread.
pub(crate) fn push(id: Id, span_id: SpanId, guard: LocalParentGuard) {
    // After the thread's destructors ran, or (never from our code) while
    // borrowed, the guard is dropped at once: no panic on a traced thread.
    let _ = ENTERED.try_with(|entered| {
        if let Ok(mut entered) = entered.try_borrow_mut() {
            entered.push(Entered { id, span_id, guard });
        }
    });
}

/// The innermost entered span, if minitrace span `span_id` is its.
pub(crate) fn innermost_if(span_id: SpanId) -> Option<Id> {
    ENTERED
        .try_with(|entered| {
            let entered = entered.try_borrow().ok()?;
            entered.last().filter(|top| top.span_id == span_id).map(|top| top.id.clone())
        })
        .ok()
        .flatten()
}

/// Drops the guard of the innermost entry of `id`, if it has one.
pub(crate) fn pop(id: &Id) {
    let guard = ENTERED
        .try_with(|entered| {
            let mut entered = entered.try_borrow_mut().ok()?;
            // Exits come in the reverse order of enters, save for guards
            // the user dropped out of order: searched from the top.
            let position = entered.iter().rposition(|entered| entered.id == *id)?;
            Some(entered.remove(position).guard)
        })
        .ok()
        .flatten();
    // Dropped outside the borrow: closing a line is core work, kept apart.
    drop(guard);
}
