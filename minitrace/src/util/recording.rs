//! What a span holds when tracing is compiled out: nothing at all.
//!
//! Every recording object (a span's state, a guard's line) is stored as a
//! [`Recording<T>`](crate::Recording): an `Option<T>` with the `enable`
//! feature, and this zero-sized, always-empty stand-in without it. Spans are
//! then zero-sized and have no drop glue, so the optimiser removes every
//! trace of them, even when they are moved into futures or across calls.

use std::fmt;
use std::marker::PhantomData;

/// An always-empty `Option<T>` of size zero. `PhantomData<T>` keeps the
/// auto traits (`Send`, `Sync`) the same as with the feature on.
pub(crate) struct Nothing<T>(PhantomData<T>);

impl<T> Nothing<T> {
    #[inline(always)]
    pub(crate) fn take(&mut self) -> Option<T> {
        None
    }

    #[inline(always)]
    pub(crate) fn as_ref(&self) -> Option<&T> {
        None
    }

    #[inline(always)]
    pub(crate) fn as_mut(&mut self) -> Option<&mut T> {
        None
    }
}

impl<T> From<Option<T>> for Nothing<T> {
    #[inline(always)]
    fn from(_: Option<T>) -> Nothing<T> {
        Nothing(PhantomData)
    }
}

impl<T> Default for Nothing<T> {
    #[inline(always)]
    fn default() -> Nothing<T> {
        Nothing(PhantomData)
    }
}

impl<T> Clone for Nothing<T> {
    fn clone(&self) -> Nothing<T> {
        Nothing(PhantomData)
    }
}

impl<T> fmt::Debug for Nothing<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("None")
    }
}
