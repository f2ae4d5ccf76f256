//! The primitives of the handover between traced threads and the
//! collector (`transport::handoff`, `util::barrier`): std's, or, built with
//! the `loom` feature, the model checker loom's, which explores every
//! interleaving of them (the tests in `transport::handoff`).

#[cfg(not(feature = "loom"))]
pub(crate) use std::sync::atomic;
#[cfg(not(feature = "loom"))]
pub(crate) use std::sync::Mutex;

#[cfg(feature = "loom")]
pub(crate) use loom::sync::atomic;
#[cfg(feature = "loom")]
pub(crate) use loom::sync::Mutex;

/// A cell whose access is coordinated by hand, with loom's interface:
/// the closure gets the raw pointer, so that loom can check that no two
/// accesses it did not order overlap.
#[cfg(not(feature = "loom"))]
#[derive(Debug, Default)]
pub(crate) struct UnsafeCell<T>(std::cell::UnsafeCell<T>);

#[cfg(not(feature = "loom"))]
impl<T> UnsafeCell<T> {
    pub(crate) const fn new(value: T) -> UnsafeCell<T> {
        UnsafeCell(std::cell::UnsafeCell::new(value))
    }

    #[inline(always)]
    pub(crate) fn with_mut<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
        f(self.0.get())
    }
}

#[cfg(feature = "loom")]
pub(crate) use loom::cell::UnsafeCell;

/// Waits a moment for another thread: a spin, or a yield to loom's scheduler.
#[inline]
pub(crate) fn pause(round: u32) {
    #[cfg(feature = "loom")]
    {
        let _ = round;
        loom::thread::yield_now();
    }
    #[cfg(not(feature = "loom"))]
    if round < 64 {
        std::hint::spin_loop();
    } else {
        std::thread::yield_now();
    }
}
