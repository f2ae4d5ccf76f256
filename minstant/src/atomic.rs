use std::sync::atomic::{AtomicU64, Ordering};

use crate::Instant;

/// An [`Instant`] that threads can update in place, e.g. a "last seen" time
/// kept without a lock. The methods behave as their [`AtomicU64`] namesakes.
///
/// ```
/// use std::sync::atomic::Ordering;
/// use minstant::{Atomic, Instant};
///
/// let last_seen = Atomic::new(Instant::ZERO);
/// let now = Instant::now();
/// last_seen.fetch_max(now, Ordering::Relaxed);
/// assert_eq!(last_seen.load(Ordering::Relaxed), now);
/// ```
#[derive(Debug)]
#[repr(transparent)]
pub struct Atomic(AtomicU64);

impl Atomic {
    /// A new atomic holding `instant`.
    ///
    /// ```
    /// let atomic = minstant::Atomic::new(minstant::Instant::ZERO);
    /// # let _ = atomic;
    /// ```
    pub const fn new(instant: Instant) -> Atomic {
        Atomic(AtomicU64::new(instant.0))
    }

    /// Reads the value.
    ///
    /// ```
    /// use std::sync::atomic::Ordering;
    /// let atomic = minstant::Atomic::new(minstant::Instant::ZERO);
    /// assert_eq!(atomic.load(Ordering::Acquire), minstant::Instant::ZERO);
    /// ```
    pub fn load(&self, order: Ordering) -> Instant {
        Instant(self.0.load(order))
    }

    /// Writes the value.
    ///
    /// ```
    /// use std::sync::atomic::Ordering;
    /// let atomic = minstant::Atomic::new(minstant::Instant::ZERO);
    /// let now = minstant::Instant::now();
    /// atomic.store(now, Ordering::Release);
    /// assert_eq!(atomic.load(Ordering::Acquire), now);
    /// ```
    pub fn store(&self, instant: Instant, order: Ordering) {
        self.0.store(instant.0, order)
    }

    /// Writes the value and returns the previous one.
    ///
    /// ```
    /// use std::sync::atomic::Ordering;
    /// let atomic = minstant::Atomic::new(minstant::Instant::ZERO);
    /// let previous = atomic.swap(minstant::Instant::now(), Ordering::AcqRel);
    /// assert_eq!(previous, minstant::Instant::ZERO);
    /// ```
    pub fn swap(&self, instant: Instant, order: Ordering) -> Instant {
        Instant(self.0.swap(instant.0, order))
    }

    /// Keeps the later of the stored value and `instant`; returns the previous value.
    ///
    /// ```
    /// use std::sync::atomic::Ordering;
    /// let now = minstant::Instant::now();
    /// let atomic = minstant::Atomic::new(now);
    /// atomic.fetch_max(minstant::Instant::ZERO, Ordering::Relaxed);
    /// assert_eq!(atomic.load(Ordering::Relaxed), now);
    /// ```
    pub fn fetch_max(&self, instant: Instant, order: Ordering) -> Instant {
        Instant(self.0.fetch_max(instant.0, order))
    }

    /// Keeps the earlier of the stored value and `instant`; returns the previous value.
    ///
    /// ```
    /// use std::sync::atomic::Ordering;
    /// let atomic = minstant::Atomic::new(minstant::Instant::now());
    /// atomic.fetch_min(minstant::Instant::ZERO, Ordering::Relaxed);
    /// assert_eq!(atomic.load(Ordering::Relaxed), minstant::Instant::ZERO);
    /// ```
    pub fn fetch_min(&self, instant: Instant, order: Ordering) -> Instant {
        Instant(self.0.fetch_min(instant.0, order))
    }

    /// Consumes the atomic and returns its value.
    ///
    /// ```
    /// let atomic = minstant::Atomic::new(minstant::Instant::ZERO);
    /// assert_eq!(atomic.into_instant(), minstant::Instant::ZERO);
    /// ```
    pub fn into_instant(self) -> Instant {
        Instant(self.0.into_inner())
    }
}

impl From<Instant> for Atomic {
    fn from(instant: Instant) -> Atomic {
        Atomic::new(instant)
    }
}
