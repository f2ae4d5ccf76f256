//! What the request a server is handling carried that the calls it makes
//! pass on: its `tracestate`, and its caller's decision not to sample.
//! Set by the server for each poll of its service's future and response
//! body (as the local parent is), read by the clients where they start.

use std::cell::RefCell;
use std::sync::Arc;

use minitrace::collector::SpanContext;

/// Propagated from the request being handled to the calls it makes.
#[derive(Debug)]
pub(crate) struct Carried {
    /// The incoming `tracestate`, well-formed.
    pub(crate) tracestate: Option<String>,
    /// The caller's span, when it did not sample the trace: calls go on
    /// unsampled under it.
    pub(crate) unsampled: Option<SpanContext>,
}

thread_local! {
    static CURRENT: RefCell<Option<Arc<Carried>>> = const { RefCell::new(None) };
}

/// Runs `f` with `carried` current (nothing changes for `None`).
#[inline]
pub(crate) fn scope<R>(carried: Option<&Arc<Carried>>, f: impl FnOnce() -> R) -> R {
    let Some(carried) = carried else { return f() };
    struct Restore(Option<Arc<Carried>>);
    impl Drop for Restore {
        fn drop(&mut self) {
            let previous = self.0.take();
            let _ = CURRENT.try_with(|current| *current.borrow_mut() = previous);
        }
    }
    let previous = CURRENT.try_with(|current| current.replace(Some(carried.clone()))).ok().flatten();
    let _restore = Restore(previous);
    f()
}

/// What the request being handled on this thread carried, if anything.
#[inline]
pub(crate) fn current() -> Option<Arc<Carried>> {
    CURRENT.try_with(|current| current.borrow().clone()).ok().flatten()
}
