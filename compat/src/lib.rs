//! Compatibility tests: our minitrace 0.6.8, minitrace-jaeger 0.6.8 and minstant 0.1.8
//! used exactly as code written against the published minitrace 0.6.7, minitrace-macro
//! 0.6.7, minitrace-jaeger 0.6.7 and minstant 0.1.7 uses them.
//!
//! The checks are in `tests/`, one file per published crate (plus one binary that never
//! sets a reporter). Each spells out 0.6.7's argument and return types, builds the public
//! structs by literal, leans on every trait impl 0.6.7 has, and asserts 0.6.7's observable
//! behaviour, so that an incompatible change fails to compile or fails a test here.
//!
//! The expectations were checked against the published crates themselves: the same `src/`
//! and `tests/` in a scratch package that depends on `minitrace = "=0.6.7"` (with
//! `enable`), `minitrace-jaeger = "=0.6.7"`, `minstant = "=0.1.7"` (with `atomic`) and this
//! package's dev-dependencies pass every test.
//!
//! This library only holds the std-only helpers the test binaries share.

use std::future::Future;
use std::pin::{pin, Pin};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Wake, Waker};

/// Serialises the tests of one binary that install a reporter: there is a single global
/// reporter per process.
pub fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    // A failed test must not fail the others through a poisoned lock.
    LOCK.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Wakes nothing: [`block_on`] polls in a loop, so a wake-up carries no information.
struct NoopWake;

impl Wake for NoopWake {
    fn wake(self: Arc<Self>) {}
}

/// A waker that does nothing (`Waker::noop` is newer than our minimum Rust).
pub fn noop_waker() -> Waker {
    Waker::from(Arc::new(NoopWake))
}

/// Drives a future to completion on the current thread, counting its polls.
pub fn block_on_counting<F: Future>(future: F) -> (F::Output, usize) {
    let waker = noop_waker();
    let mut cx = Context::from_waker(&waker);
    let mut future = pin!(future);
    let mut polls = 0;
    loop {
        polls += 1;
        if let Poll::Ready(output) = future.as_mut().poll(&mut cx) {
            return (output, polls);
        }
    }
}

/// Drives a future to completion on the current thread.
pub fn block_on<F: Future>(future: F) -> F::Output {
    block_on_counting(future).0
}

/// A future that is pending on its first poll and ready on the second.
#[derive(Default)]
pub struct YieldOnce {
    yielded: bool,
}

impl Future for YieldOnce {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.yielded {
            Poll::Ready(())
        } else {
            self.yielded = true;
            cx.waker().wake_by_ref();
            Poll::Pending
        }
    }
}

/// Yields to the executor once, so the surrounding future is polled at least twice.
pub fn yield_once() -> YieldOnce {
    YieldOnce::default()
}
