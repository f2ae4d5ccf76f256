//! The `enable` switch, and what a span holds when tracing is compiled out:
//! nothing at all.
//!
//! Every recording object (a span's state, a guard's line) is stored as a
//! [`Recording<T>`](Recording): an `Option<T>` with the `enable`
//! feature, and this zero-sized, always-empty stand-in without it. Spans are
//! then zero-sized and have no drop glue, so the optimiser removes every
//! trace of them, even when they are moved into futures or across calls.

use std::fmt;
use std::marker::PhantomData;

/// Whether tracing is compiled in: the `enable` switch, decided here and
/// nowhere else. Every entry point checks this constant first, and every
/// recording object is stored as a [`Recording`], so without the feature
/// the optimiser removes the rest.
pub(crate) const ENABLED: bool = cfg!(feature = "enable");

/// A recording object's state: `Option<T>` with `enable`, a zero-sized,
/// always-empty stand-in without it (below).
#[cfg(feature = "enable")]
pub(crate) type Recording<T> = Option<T>;
#[cfg(not(feature = "enable"))]
pub(crate) type Recording<T> = Nothing<T>;

/// Stores `value` as a [`Recording`]: itself with `enable`, nothing without.
#[inline(always)]
#[allow(clippy::useless_conversion)] // a real conversion only without `enable`
pub(crate) fn recording<T>(value: Option<T>) -> Recording<T> {
    value.into()
}

/// An always-empty `Option<T>` of size zero. `PhantomData<T>` keeps the
/// auto traits (`Send`, `Sync`) the same as with the feature on.
pub(crate) struct Nothing<T>(PhantomData<T>);

impl<T> Nothing<T> {
    #[inline(always)]
    pub(crate) fn take(&mut self) -> Option<T> {
        None
    }

    #[inline(always)]
    pub(crate) fn is_some(&self) -> bool {
        false
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
